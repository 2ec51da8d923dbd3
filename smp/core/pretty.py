"""Erlang's ``~p``, as OTP 25 prints terms (``io_lib_pretty``, ``io_lib``,
``io_lib_format`` of stdlib 4.2, and the VM's own printing of pids, ports,
refs and funs).

``pformat(term, column=1, line_length=80)`` is ``io_lib_pretty:print/2`` with
the options ``~p`` gives it: no depth or character limit, strings detected,
latin-1 rules (``~p``, not ``~tp``): lists and binaries of printable latin-1
characters print as strings, atoms with characters above 255 print them as
``\\x{...}``.  The result is a ``str`` of characters 0..255, which a latin-1
device writes byte for byte.

``fmt(format, args)`` is ``io_lib:format/2`` for the controls dbg uses (``~p``,
``~s``, ``~w``, ``~n``, ``~~``): each ``~p`` starts at the column the text
before it leaves, as ``io_lib_format`` computes it, and breaks lines there.

Every printer here prints a term of any depth (an explicit stack takes over
from recursion 100 levels down, and io_lib_pretty's layout functions run as
generators off Python's stack) and integers of any size (``int_text``, not
``str``, which refuses more than 4300 digits).  ``clip_term(term, n)`` cuts a
term that would print in more than about ``n`` characters, marking what it
left out with ``...`` as ``~P`` does; ``smp-emu read`` prints every term
through it (``--max-print``).

Pids, ports and refs of other nodes print with the number the *reading* node
has for that node (``<N.X.Y>``): a real node prints the index of the node
name's atom in its atom table, which only that node knows.  ``NodeNumbers``
keeps that mapping: numbers given to it (``NodeNumbers({Atom('a@h'): 8616})``)
are used as given, and nodes it was not told about are numbered 1, 2, ... in
the order they are first printed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Callable, Optional

from smp.core.pretty_atomic import (
    ELIDED,
    NodeNamer,
    NodeNumbers,
    _int_text,
    _node_name,
    _printable_latin1,
    _write_atomic,
    _write_string,
    erl_float,
    erts_atom,
    int_text,
)
from smp.core.pretty_clip import ClippedBinary, ClippedMap, clip_message, clip_term
from smp.core.pretty_format import (
    _BINARIES,
    _BYTE_TEXT,
    _SHALLOW,
    _bin_tokens,
    _binary_if,
    _plen,
    _write,
)
from smp.core.pretty_layout import _cind, _IoList, _NoGood, _pp, _run
from smp.core.quoting import quote_atom
from smp.core.terms import (
    Atom,
    BitString,
    ExportFun,
    Fun,
    ImproperList,
    Map,
    Pid,
    Term,
)

__all__ = [
    "format_term",
    "pformat",
    "fmt",
    "write_one_line",
    "erl_float",
    "NodeNumbers",
    "erts_atom",
    "int_text",
    "clip_message",
    "clip_term",
    "ELIDED",
    "ClippedBinary",
    "ClippedMap",
]


_COMPOUND = (tuple, list, ImproperList, Map, ClippedMap) + _BINARIES


def pformat(
    term: Term, column: int = 1, line_length: int = 80, nodes: Optional[NodeNamer] = None
) -> str:
    """``io_lib_pretty:print(Term, [{column, Column}, {line_length, LineLength}])``
    with ``~p``'s options (latin-1, strings, no limits).  ``nodes`` gives the
    number printed for another node's ids (a :class:`NodeNumbers`); by default
    the node's name is printed in its place.  A term of any depth prints (no
    Python recursion); a term :func:`clip_term` cut short shows ``...``."""
    nn = nodes or _node_name
    if column <= 0:
        column = 1
    if type(term) is Atom:
        return quote_atom(term.name)
    if type(term) not in _COMPOUND:
        return _write_atomic(term, nn)
    text = _w1(term, nn)  # the one-line text: its length is print_length's
    if line_length == 0 or len(text) < line_length - column:
        return text
    If = _plen(term, nn)
    m = If[1]
    tind = 1
    for i in (-1, 4):
        try:
            tind = _run(_cind(If, column, line_length, m, i, 0, 0))
            break
        except _NoGood:
            continue
    return _flatten(_run(_pp(If, column, line_length, m, tind, " " * (column - 1), 0, 0)))


def _flatten(iolist: _IoList) -> str:
    """The text of nested lists of strings (the layout functions build their
    text as lists, as io_lib_pretty builds iolists: no piece is copied until
    this joins them all, once)."""
    if type(iolist) is str:
        return iolist
    out: list[str] = []
    todo = [iolist]
    while todo:
        x = todo.pop()
        if type(x) is str:
            out.append(x)
        else:
            todo.extend(reversed(x))
    return "".join(out)


_atom_text: dict[Atom, str] = {}


def _w1(t: Term, nn: NodeNamer, d: int = 0) -> str:
    """The one-line text of ``t`` (what ``_write(_plen(t))`` gives, faster)."""
    tp = type(t)
    if tp is Atom:
        s = _atom_text.get(t)
        if s is None:
            s = _atom_text[t] = quote_atom(t.name)
        return s
    if tp is tuple:
        if d > _SHALLOW:
            return _line_deep(t, nn, True)
        return "{" + ",".join([_w1(e, nn, d + 1) for e in t]) + "}"
    if tp is int:
        return _int_text(t)
    if tp is list:
        if not t:
            return "[]"
        if _printable_latin1(t):
            return _write_string(t)
        if d > _SHALLOW:
            return _line_deep(t, nn, True)
        return "[" + ",".join([_w1(e, nn, d + 1) for e in t]) + "]"
    if tp is Pid:
        return f"<{nn(t.node, t.creation)}.{t.number}.{t.serial}>"
    if tp is ImproperList:
        if d > _SHALLOW:
            return _line_deep(t, nn, True)
        return (
            "["
            + ",".join([_w1(e, nn, d + 1) for e in t.elements])
            + "|"
            + _w1(t.tail, nn, d + 1)
            + "]"
        )
    if tp is Map or tp is ClippedMap:
        if d > _SHALLOW:
            return _line_deep(t, nn, True)
        items = t._items if tp is Map else t.pairs
        more = ",..." if tp is ClippedMap else ""
        if not items:
            return "#{...}" if more else "#{}"
        return (
            "#{"
            + ",".join([_w1(k, nn, d + 1) + " => " + _w1(v, nn, d + 1) for k, v in items])
            + more
            + "}"
        )
    if tp in _BINARIES:
        return _write(_binary_if(t))
    return _write_atomic(t, nn)


def _line_deep(t: Term, nn: NodeNamer, strings: bool) -> str:
    """The one-line text of ``t`` with an explicit stack: ``~p``'s
    (``strings``: printable lists as strings) or ``~w``'s.  Each entry is a
    ``(True, text)`` to write or a ``(False, term)`` to write out."""
    leaf: Callable[[Term], str] = (lambda x: _w1(x, nn)) if strings else (lambda x: _write_w(x, nn))
    out: list[str] = []
    todo: list[tuple[bool, Term]] = [(False, t)]

    def parts(elements: list[Term] | tuple[Term, ...], sep: str) -> None:
        # the elements in order, sep between them
        for i in range(len(elements) - 1, -1, -1):
            todo.append((False, elements[i]))
            if i:
                todo.append((True, sep))

    while todo:
        lit, x = todo.pop()
        if lit:
            out.append(x)
            continue
        tp = type(x)
        if tp is tuple and x:
            out.append("{")
            todo.append((True, "}"))
            parts(x, ",")
        elif tp is list and x and not (strings and _printable_latin1(x)):
            out.append("[")
            todo.append((True, "]"))
            parts(x, ",")
        elif tp is ImproperList:
            out.append("[")
            todo += [(True, "]"), (False, x.tail), (True, "|")]
            parts(x.elements, ",")
        elif (tp is Map and x) or tp is ClippedMap:
            out.append("#{")
            items = x._items if tp is Map else x.pairs
            todo.append((True, ",...}" if tp is ClippedMap and items else "}"))
            if tp is ClippedMap and not items:
                todo.append((True, "..."))
            for i in range(len(items) - 1, -1, -1):
                todo += [(False, items[i][1]), (True, " => "), (False, items[i][0])]
                if i:
                    todo.append((True, ","))
        else:
            out.append(leaf(x))  # nothing in it to recurse into
    return "".join(out)


def write_one_line(term: Term, nodes: Optional[NodeNamer] = None) -> str:
    """``~p`` on one line (``io_lib_pretty`` with line length 0)."""
    return _w1(term, nodes or _node_name)


def format_term(term: Term) -> str:
    """Return ``term`` in Erlang syntax, on one line, as ``~p`` prints it
    (OTP 25, latin-1 rules).  Other nodes' pids, ports and refs show the node
    name where a node would show its number for that node (``<a@b.5.0>``)."""
    return _w1(term, _node_name)


# The composite term types (and clip_term's ClippedBinary and ClippedMap)
# print themselves in Erlang syntax.  smp.core.terms and smp.core.pretty_clip
# cannot import this module (this module needs their types), so the reprs
# are installed here; smp/core/__init__.py imports this module, so they are
# in place whenever anything of the core is.
def _term_repr(self: Term) -> str:
    return _w1(self, _node_name)


for _cls in (BitString, Fun, ExportFun, Map, ImproperList, ClippedBinary, ClippedMap):
    # a method put on the class after it is made (the comment above says
    # why), which mypy does not allow on a class it knows
    _cls.__repr__ = _term_repr  # type: ignore[method-assign]


# ------------------------------------------------------------------ io_lib:format


def _indentation(s: str, i: int) -> int:
    for c in s:
        if c == "\n":
            i = 0
        elif c == "\t":
            i = ((i + 8) // 8) * 8
        else:
            i += 1
    return i


def fmt(format: str, args: Iterable[Term], nodes: Optional[NodeNamer] = None) -> str:
    """``io_lib:format(Format, Args)`` for the controls ``~p``, ``~w``, ``~s``
    (a ``str`` argument), ``~n`` and ``~~``."""
    out: list[str] = []
    col = 0
    it = iter(args)
    i = 0
    n = len(format)
    while i < n:
        c = format[i]
        if c == "~" and i + 1 < n:
            ctl = format[i + 1]
            i += 2
            if ctl == "p":
                s = pformat(next(it), col + 1, 80, nodes)
            elif ctl == "w":
                s = _write_w(next(it), nodes)
            elif ctl == "s":
                s = next(it)
                if type(s) is not str:
                    raise TypeError(f"~s takes a str here, not {s!r}")
            elif ctl == "n":
                s = "\n"
            elif ctl == "~":
                s = "~"
            else:
                raise ValueError(f"unsupported control ~{ctl}")
            out.append(s)
            col = _indentation(s, col)
            continue
        out.append(c)
        col = 0 if c == "\n" else ((col + 8) // 8) * 8 if c == "\t" else col + 1
        i += 1
    return "".join(out)


def _write_w(term: Term, nodes: Optional[NodeNamer], d: int = 0) -> str:
    """``~w``: ``io_lib:write/1`` (no string detection)."""
    nn = nodes or _node_name
    tp = type(term)
    if d > _SHALLOW and tp in (tuple, list, ImproperList, Map, ClippedMap):
        return _line_deep(term, nn, False)
    d += 1
    if tp is tuple:
        return "{" + ",".join([_write_w(e, nn, d) for e in term]) + "}"
    if tp is list:
        return "[" + ",".join([_write_w(e, nn, d) for e in term]) + "]"
    if tp is ImproperList:
        return (
            "["
            + ",".join([_write_w(e, nn, d) for e in term.elements])
            + "|"
            + _write_w(term.tail, nn, d)
            + "]"
        )
    if tp is Map or tp is ClippedMap:
        items = term._items if tp is Map else term.pairs
        more = ",..." if tp is ClippedMap else ""
        if not items:
            return "#{...}" if more else "#{}"
        return (
            "#{"
            + ",".join([_write_w(k, nn, d) + " => " + _write_w(v, nn, d) for k, v in items])
            + more
            + "}"
        )
    if tp is bytes or tp is bytearray or tp is memoryview:
        return "<<" + ",".join([_BYTE_TEXT[b] for b in bytes(term)]) + ">>"
    if tp is ClippedBinary:
        return "<<" + "".join(_bin_tokens(term.data, None, True)) + ">>"
    if tp is BitString:
        return "<<" + "".join(_bin_tokens(term.data, term.size)) + ">>"
    return _write_atomic(term, nn)
