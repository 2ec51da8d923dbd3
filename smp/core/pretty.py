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

from collections.abc import Generator, Iterable, Mapping
from typing import Any, Callable, Optional, TypeVar

from smp.core.terms import (
    LOCAL_NODE,
    Atom,
    BitString,
    ExportFun,
    Fun,
    ImproperList,
    Map,
    Pid,
    Port,
    Ref,
    Term,
    _string_char,
    quote_atom,
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
    "clip_term",
    "ELIDED",
    "ClippedBinary",
    "ClippedMap",
]


# ------------------------------------------------------------------ numbers


def erl_float(f: float) -> str:
    """``float_to_list(F, [short])`` of OTP 25 (what ``~p``/``~w`` print):
    the shortest digits that read back as ``f`` (Ryu), in the fixed or the
    scientific form as ``erts/emulator/ryu/to_chars.h`` chooses."""
    if f != f or f in (float("inf"), float("-inf")):
        raise ValueError(f"{f!r} is not an Erlang float")
    r = repr(f)
    sign = ""
    if r[0] == "-":
        sign, r = "-", r[1:]
    if f == 0.0:
        return sign + "0.0"
    if "e" in r:
        mant, e = r.split("e")
        exp = int(e)
    else:
        mant, exp = r, 0
    if "." in mant:
        whole, frac = mant.split(".")
        digits = whole + frac
        exp -= len(frac)
    else:
        digits = mant
    digits = digits.lstrip("0")
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    digits = stripped
    n = len(digits)
    sci_exp = exp + n - 1
    if n == 1:
        lower, upper = -4, 2
    elif sci_exp >= 10:
        lower, upper = -(n + 2), 2
    else:
        lower, upper = -(n + 2), 1
    fixed = lower <= exp <= upper
    if fixed:
        out = int(digits)
        if (
            (out >= (1 << 53) and exp == 0)
            or (out > (1 << 52) // 5 and exp == 1)
            or (out > (1 << 51) // 25 and exp == 2)
        ):
            fixed = False
    if fixed:
        if exp >= 0:
            return f"{sign}{digits}{'0' * exp}.0"
        whole_digits = n + exp
        if whole_digits > 0:
            return f"{sign}{digits[:whole_digits]}.{digits[whole_digits:]}"
        return f"{sign}0.{'0' * -whole_digits}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}e{sci_exp}"


# ------------------------------------------------------------------ the VM's own printing


def _is_lower(c: int) -> bool:
    return 97 <= c <= 122 or (223 <= c <= 255 and c != 247)


def _is_alnum(c: int) -> bool:
    return 48 <= c <= 57 or _is_lower(c) or 65 <= c <= 90 or (192 <= c <= 222 and c != 215)


def _latin1_char(c1: int, c2: int) -> int:
    if c1 & 0x80 == 0:
        return c1
    if c1 & 0xE0 == 0xC0:
        return (c1 & 0x1F) << 6 | (c2 & 0x3F)
    if c1 & 0xC0 == 0x80:
        return 97
    return 0


_ERTS_ESC = {39: "\\'", 92: "\\\\", 10: "\\n", 12: "\\f", 9: "\\t", 13: "\\r", 8: "\\b", 11: "\\v"}


def erts_atom(atom: Atom) -> str:
    """An atom as the VM prints it (``erl_printf_term.c``, in ``fun M:F/A``):
    its own quoting rules, and the UTF-8 bytes of the name as characters."""
    raw = atom.name.encode("utf-8")
    if not raw:
        return "''"
    n = len(raw)
    at: Callable[[int], int] = lambda i: raw[i] if i < n else 0  # noqa: E731
    quote = not _is_lower(_latin1_char(raw[0], at(1)))
    if not quote:
        for i in range(1, n):
            lc = _latin1_char(raw[i], at(i + 1))
            if not _is_alnum(lc) and lc != 95:
                quote = True
                break
    out: list[str] = []
    i = 0
    while i < n:
        c = raw[i]
        i += 1
        e = _ERTS_ESC.get(c)
        if e is not None:
            out.append(e)
        elif c < 32:
            out.append("\\%03o" % c)
        elif c >= 0x80:
            if c == 0xC2 and i < n and raw[i] < 0xA0:
                out.append("\\%03o" % raw[i])
                i += 1
            else:
                k = 2 if c & 0xE0 == 0xC0 else 3 if c & 0xF0 == 0xE0 else 4
                out.append(raw[i - 1 : i - 1 + k].decode("latin-1"))
                i += k - 1
        else:
            out.append(chr(c))
    s = "".join(out)
    return f"'{s}'" if quote else s


class NodeNumbers:
    """The number a reading node prints for each other node (``<N.X.Y>``).

    Ids of ``nonode@nohost`` with creation 0 are the reading node's own and
    print 0.  ``known`` maps node atoms to the numbers to print; any other node
    gets the next free number from 1 on, the first time it is printed.
    """

    def __init__(self, known: Optional[Mapping[Atom, int] | Mapping[str, int]] = None) -> None:
        self.numbers: dict[Atom, int] = {}
        for k, v in (known or {}).items():
            self.numbers[k if isinstance(k, Atom) else Atom(k)] = int(v)
        self._next = 1

    def __call__(self, node: Atom, creation: int) -> str:
        if node is LOCAL_NODE and creation == 0:
            return "0"
        n = self.numbers.get(node)
        if n is None:
            used = set(self.numbers.values())
            while self._next in used:
                self._next += 1
            n = self.numbers[node] = self._next
            self._next += 1
        return str(n)


def _node_name(node: Atom, creation: int) -> str:
    return "0" if node is LOCAL_NODE else node.name


def _write_fun(t: Fun | ExportFun) -> str:
    if isinstance(t, Fun):
        return f"#Fun<{t.module.name.encode('utf-8').decode('latin-1')}.{t.old_index}.{t.old_uniq}>"
    return f"fun {erts_atom(t.module)}:{erts_atom(t.function)}/{t.arity}"


# ------------------------------------------------------------------ integers

#: below this many bits ``str`` converts (Python refuses ints of over 4300
#: digits, about 14,280 bits, by default)
_STR_BITS = 12_000


def int_text(i: int) -> str:
    """``integer_to_list(I)``: every digit of an integer of any size, as OTP
    prints it, without changing Python's global int-to-str digit limit
    (``str`` refuses ints of over 4300 digits)."""
    return _int_text(i)


def _int_text(i: int) -> str:
    if i.bit_length() < _STR_BITS:
        return str(i)
    if i < 0:
        return "-" + _int_text(-i)
    # split at 10**k, k about half the digits: each half is converted alone
    k = (i.bit_length() * 30103 // 100000) // 2
    hi, lo = divmod(i, 10**k)
    return _int_text(hi) + _int_text(lo).rjust(k, "0")


# ------------------------------------------------------------------ cut-short terms


class _Elided:
    """``...``: where :func:`clip_term` cut a term short (``~P``'s mark)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "..."


#: the mark of what :func:`clip_term` left out; it prints as ``...``
ELIDED = _Elided()


class ClippedBinary:
    """The first bytes of a binary :func:`clip_term` cut short; it prints as
    ``~P`` prints a binary its depth cut: ``<<1,2,...>>``, ``<<"ab"...>>``."""

    __slots__ = ("data", "size")

    data: bytes
    size: int

    def __init__(self, data: bytes, size: int) -> None:
        self.data = data  # the bytes kept
        self.size = size  # the size of the whole binary, in bytes

    def __repr__(self) -> str:
        return _w1(self, _node_name)


class ClippedMap:
    """A map :func:`clip_term` cut short: the pairs kept (in the map's order),
    printed as ``#{K => V,...}``."""

    __slots__ = ("pairs",)
    pairs: list[tuple[Term, Term]]

    def __init__(self, pairs: list[tuple[Term, Term]]) -> None:
        self.pairs = pairs

    def __repr__(self) -> str:
        return _w1(self, _node_name)


# ------------------------------------------------------------------ io_lib:write (atomic terms)


def _printable_latin1(codes: Iterable[Term]) -> bool:
    for c in codes:
        if type(c) is not int or not (32 <= c <= 126 or 160 <= c <= 255 or 8 <= c <= 13 or c == 27):
            return False
    return True


def _write_string(codes: Iterable[int]) -> str:
    return '"' + "".join([_string_char(c, 34) for c in codes]) + '"'


def _write_atomic(t: Term, nn: NodeNamer) -> str:
    tp = type(t)
    if tp is int:
        return _int_text(t)
    if tp is float:
        return erl_float(t)
    if tp is Atom:
        return quote_atom(t.name)
    if tp is _Elided:
        return "..."
    if tp is Pid:
        return f"<{nn(t.node, t.creation)}.{t.number}.{t.serial}>"
    if tp is Port:
        return f"#Port<{nn(t.node, t.creation)}.{t.number}>"
    if tp is Ref:
        return (
            "#Ref<"
            + nn(t.node, t.creation)
            + "".join(["." + str(i) for i in reversed(t.ids)])
            + ">"
        )
    if tp is Fun or tp is ExportFun:
        return _write_fun(t)
    if tp is str:
        raise TypeError(f"a Python str is not an Erlang term: {t!r} (use Atom, charlist or bytes)")
    if tp is bool:
        raise TypeError(f"a Python bool is not an Erlang term: {t!r}")
    raise TypeError(f"not an Erlang term: {t!r}")


# ------------------------------------------------------------------ io_lib_pretty
# _pp and its helpers return their text as nested lists of strings (iolists).
# The intermediate format: tuples (kind, length, ...):
#   ("a", len, text)                 anything written as one string
#   ("l", len, [elements], tail)     a list (tail is None or the improper tail)
#   ("t", len, [elements], tagged)   a tuple
#   ("m", len, [pairs])              a map; pairs are ("p", len, key, value)
#                                    (and ("a", 3, "...") last in a cut map)
#   ("b", len, [tokens])             a binary that is not a string: "1", ",", "2", ...


#
# Every walk over a term or over this format recurses while it is less than
# _SHALLOW levels deep (every real trace message) and goes on with an
# explicit stack below that, and io_lib_pretty's layout functions (_pp, _cind
# and theirs) are generators run by _run, one frame each on a list: printing
# a term as deep as the decoder's max_depth needs no Python recursion.

_SHALLOW = 100

#: A term's intermediate format (above): a kind, a length, then items whose
#: types depend on the kind (a text, formats, tokens, a flag); mypy cannot
#: narrow a tuple's items by its first one, so they are ``Any``.
_Format = tuple[str, int, *tuple[Any, ...]]

#: Text as nested lists of strings (an iolist)
_IoList = str | list["_IoList"]

_S = TypeVar("_S")
_R = TypeVar("_R")

#: A layout function's frame, run by :func:`_run`: it yields the frames it
#: calls (``_Frame``s, ``Any`` here: a type alias cannot refer to itself
#: through a ``Generator``'s type arguments) and is sent back each one's
#: value, ``_S``, returning ``_R``.  A frame that calls frames returning
#: values of different types (an iolist, or an iolist and its width) is sent
#: ``Any``: a ``Generator`` type cannot tie the value sent to what was yielded.
_Frame = Generator[Any, _S, _R]

#: Prints the node part of another node's pid, port or ref
#: (:class:`NodeNumbers`, or the node's name)
NodeNamer = Callable[[Atom, int], str]

_BYTE_TEXT = [str(i) for i in range(256)]


def _bin_tokens(data: bytes, size: Optional[int] = None, more: bool = False) -> list[str]:
    full = len(data) if size is None else size // 8
    toks: list[str] = [","] * (2 * full - 1) if full else []
    toks[0::2] = [_BYTE_TEXT[b] for b in data[:full]]
    if size is not None and size % 8:
        bits = size % 8
        if toks:
            toks.append(",")
        toks += [str(data[-1] >> (8 - bits)), ":", str(bits)]
    if more:  # ~P's cut binary: <<1,2,...>>
        toks += [",", "..."] if toks else ["..."]
    return toks


def _binary_if(t: Term) -> _Format:
    if type(t) is BitString:
        toks = _bin_tokens(t.data, t.size)
        return ("b", 4 + sum(map(len, toks)), toks)
    more = type(t) is ClippedBinary
    if more:
        t = t.data
    else:
        t = bytes(t)
    if not t and not more:
        return ("a", 4, "<<>>")
    if t and _printable_latin1(t):
        s = "<<" + _write_string(t) + ("...>>" if more else ">>")
        return ("a", len(s), s)
    toks = _bin_tokens(t, None, more)
    return ("b", 4 + sum(map(len, toks)), toks)


def _tuple_if(t: tuple[Term, ...], elems: list[_Format]) -> _Format:
    return (
        "t",
        1 + len(elems) + sum([e[1] for e in elems]),
        elems,
        type(t[0]) is Atom and len(t) > 1,
    )


def _list_if(elems: list[_Format], tail: _Format | None) -> _Format:
    if tail is None:
        return ("l", 1 + len(elems) + sum([e[1] for e in elems]), elems, None)
    return ("l", 2 + len(elems) + sum([e[1] for e in elems]) + tail[1], elems, tail)


def _map_if(kvs: list[_Format], more: bool) -> _Format:
    """A map's format from its keys' and values' formats, k0, v0, k1, ..."""
    pairs: list[_Format] = [
        ("p", kp[1] + 4 + vp[1], kp, vp) for kp, vp in zip(kvs[0::2], kvs[1::2], strict=True)
    ]
    if more:
        pairs.append(("a", 3, "..."))
    return ("m", 2 + len(pairs) + sum([p[1] for p in pairs]), pairs)


_BINARIES = (bytes, bytearray, memoryview, BitString, ClippedBinary)


def _plen(t: Term, nn: NodeNamer, d: int = 0) -> _Format:
    tp = type(t)
    if tp is Atom:
        s = quote_atom(t.name)
        return ("a", len(s), s)
    if tp is tuple:
        if not t:
            return ("a", 2, "{}")
        if d > _SHALLOW:
            return _plen_deep(t, nn)
        return _tuple_if(t, [_plen(e, nn, d + 1) for e in t])
    if tp is list:
        if not t:
            return ("a", 2, "[]")
        if _printable_latin1(t):
            s = _write_string(t)
            return ("a", len(s), s)
        if d > _SHALLOW:
            return _plen_deep(t, nn)
        return _list_if([_plen(e, nn, d + 1) for e in t], None)
    if tp is ImproperList:
        if d > _SHALLOW:
            return _plen_deep(t, nn)
        return _list_if([_plen(e, nn, d + 1) for e in t.elements], _plen(t.tail, nn, d + 1))
    if tp is Map or tp is ClippedMap:
        if not t and tp is Map:
            return ("a", 3, "#{}")
        if d > _SHALLOW:
            return _plen_deep(t, nn)
        items = t._items if tp is Map else t.pairs
        kvs = [_plen(x, nn, d + 1) for kv in items for x in kv]
        return _map_if(kvs, tp is ClippedMap)
    if tp in _BINARIES:
        return _binary_if(t)
    s = _write_atomic(t, nn)
    return ("a", len(s), s)


class _Build:
    """On _plen_deep's stack: build a compound term's format from the formats
    of its ``n`` parts, the last ``n`` results."""

    __slots__ = ("term", "n")

    def __init__(self, term: Term, n: int) -> None:
        self.term, self.n = term, n


def _plen_deep(t: Term, nn: NodeNamer) -> _Format:
    """``_plen`` with an explicit stack."""
    res: list[_Format] = []
    todo: list[Term] = [t]
    while todo:
        x = todo.pop()
        tp = type(x)
        if tp is _Build:
            parts = res[len(res) - x.n :]
            del res[len(res) - x.n :]
            term = x.term
            ttp = type(term)
            if ttp is tuple:
                res.append(_tuple_if(term, parts))
            elif ttp is list:
                res.append(_list_if(parts, None))
            elif ttp is ImproperList:
                res.append(_list_if(parts[:-1], parts[-1]))
            else:
                res.append(_map_if(parts, ttp is ClippedMap))
            continue
        if tp is tuple and x:
            todo.append(_Build(x, len(x)))
            todo.extend(reversed(x))
        elif tp is list and x and not _printable_latin1(x):
            todo.append(_Build(x, len(x)))
            todo.extend(reversed(x))
        elif tp is ImproperList:
            todo.append(_Build(x, len(x.elements) + 1))
            todo.append(x.tail)
            todo.extend(reversed(x.elements))
        elif (tp is Map and x) or tp is ClippedMap:
            items = x._items if tp is Map else x.pairs
            todo.append(_Build(x, 2 * len(items)))
            for k, v in reversed(items):
                todo.append(v)
                todo.append(k)
        else:
            res.append(_plen(x, nn))  # nothing in it to recurse into
    return res[0]


def _write(If: _Format, d: int = 0) -> str:
    k = If[0]
    if k == "a":
        text: str = If[2]
        return text
    if d > _SHALLOW:
        return _write_deep(If)
    d += 1
    if k == "t":
        return "{" + ",".join([_write(e, d) for e in If[2]]) + "}"
    if k == "l":
        s = "[" + ",".join([_write(e, d) for e in If[2]])
        if If[3] is not None:
            s += "|" + _write(If[3], d)
        return s + "]"
    if k == "m":
        return "#{" + ",".join([_write(p, d) for p in If[2]]) + "}"
    if k == "p":
        return _write(If[2], d) + " => " + _write(If[3], d)
    return "<<" + "".join(If[2]) + ">>"


def _write_deep(If: _Format) -> str:
    """``_write`` with an explicit stack: each entry is a format or a ``str``
    to write as it is."""
    out: list[str] = []
    todo: list[_Format | str] = [If]
    while todo:
        x = todo.pop()
        if type(x) is str:
            out.append(x)
            continue
        k = x[0]
        if k == "a":
            out.append(x[2])
        elif k == "b":
            out.append("<<" + "".join(x[2]) + ">>")
        elif k == "p":
            todo += [x[3], " => ", x[2]]
        else:
            if k == "t":
                out.append("{")
                todo.append("}")
            elif k == "m":
                out.append("#{")
                todo.append("}")
            else:
                out.append("[")
                todo.append("]")
                if x[3] is not None:
                    todo += [x[3], "|"]
            elems = x[2]
            for i in range(len(elems) - 1, -1, -1):
                todo.append(elems[i])
                if i:
                    todo.append(",")
    return "".join(out)


class _NoGood(Exception):
    pass


def _run(gen: _Frame[Any, _R]) -> _R:
    """Run a generator of the layout functions to its value: each ``yield g``
    is a call of the generator ``g``, whose value (or exception) goes back
    into the one that yielded it.  The calls are frames on a list, not on
    Python's stack."""
    stack: list[_Frame[Any, Any]] = [gen]
    value = None
    exc: Optional[BaseException] = None
    while True:
        g = stack[-1]
        try:
            if exc is None:
                sub = g.send(value)
            else:
                e, exc = exc, None
                sub = g.throw(e)
        except StopIteration as stop:
            stack.pop()
            if not stack:
                result: _R = stop.value
                return result
            value = stop.value
            continue
        except _NoGood as e:
            stack.pop()
            if not stack:
                raise
            exc = e
            continue
        stack.append(sub)
        value = None


def _pp(
    If: _Format, col: int, ll: int, m: int, tind: int, ind: str, ld: int, w: int
) -> _Frame[_IoList, _IoList]:
    n = If[1]
    if n < ll - col - ld and n + w + ld <= m:
        return _write(If)
    k = If[0]
    if k == "l":
        return [
            "[",
            (yield _pp_list(If[2], If[3], col + 1, ll, m, tind, " " + ind, ld, "|", w + 1)),
            "]",
        ]
    if k == "t":
        if If[3]:
            return ["{", (yield _pp_tag_tuple(If[2], col, ll, m, tind, ind, ld, w + 1)), "}"]
        return [
            "{",
            (yield _pp_list(If[2], None, col + 1, ll, m, tind, " " + ind, ld, ",", w + 1)),
            "}",
        ]
    if k == "m":
        return ["#{", (yield _pp_map(If[2], col + 2, ll, m, tind, "  " + ind, ld, w + 1)), "}"]
    if k == "b":
        return _pp_binary(If[2], col + 2, ll, m, "  " + ind, ld, w)
    text: str = If[2]
    return text


def _pp_tag_tuple(
    elems: list[_Format], col: int, ll: int, m: int, tind: int, ind: str, ld: int, w: int
) -> _Frame[_IoList, _IoList]:
    tag = elems[0]
    tlen = tag[1]
    tag_ind = tlen + 2
    tcol = col + tag_ind
    if tind > 0 and tag_ind > tind:
        col1 = col + tind
        indent = " " * tind + ind
        return [
            tag[2],
            (yield _pp_tail(elems, 1, None, col1, tcol, ll, m, tind, indent, ld, ",", w + tlen)),
        ]
    indent = " " * tag_ind + ind
    return [
        tag[2],
        ",",
        (yield _pp_list(elems[1:], None, tcol, ll, m, tind, indent, ld, ",", w + tlen + 1)),
    ]


def _last_depth(more: bool, ld: int) -> int:
    return 0 if more else ld + 1


def _pp_map(
    pairs: list[_Format], col: int, ll: int, m: int, tind: int, ind: str, ld: int, w: int
) -> _Frame[Any, _IoList]:
    ps, pw = yield _pp_pair(pairs[0], col, ll, m, tind, ind, _last_depth(len(pairs) > 1, ld), w)
    return [ps, (yield _pp_pairs_tail(pairs, 1, col, col + pw, ll, m, tind, ind, ld, pw))]


def _atm_pair(p: _Format) -> bool:
    return p[0] == "p" and p[2][0] == "a" and p[3][0] == "a"


def _pp_pairs_tail(
    pairs: list[_Format],
    i: int,
    col0: int,
    col: int,
    ll: int,
    m: int,
    tind: int,
    ind: str,
    ld: int,
    w: int,
) -> _Frame[tuple[_IoList, int], _IoList]:
    out: list[_IoList] = []
    n = len(pairs)
    while i < n:
        p = pairs[i]
        ld1 = _last_depth(i + 1 < n, ld)
        elen = 1 + p[1]
        if (ld1 == 0 and elen + 1 < ll - col and w + elen + 1 <= m and _atm_pair(p)) or (
            ld1 > 0 and elen < ll - col - ld1 and w + elen + ld1 <= m and _atm_pair(p)
        ):
            out.append("," + _write(p))
            col += elen
            w += elen
        else:
            ps, pw = yield _pp_pair(p, col0, ll, m, tind, ind, ld1, 0)
            out += (",\n", ind, ps)
            col = col0 + pw
            w = pw
        i += 1
    return out


def _pp_pair(
    p: _Format, col: int, ll: int, m: int, tind: int, ind0: str, ld: int, w: int
) -> _Frame[_IoList, tuple[_IoList, int]]:
    n = p[1]
    if p[0] == "a":  # the "..." of a cut map
        return p[2], n
    if n < ll - col - ld and n + w + ld <= m:
        return _write(p), (n if _atm_pair(p) else ll)
    i = tind if tind > 0 else 4
    ind = " " * i + ind0
    return [
        (yield _pp(p[2], col, ll, m, tind, ind0, ld, w)),
        " =>\n",
        ind,
        (yield _pp(p[3], col + i, ll, m, tind, ind, ld, 0)),
    ], ll


def _pp_list(
    elems: list[_Format],
    tail: _Format | None,
    col0: int,
    ll: int,
    m: int,
    tind: int,
    ind: str,
    ld: int,
    sep: str,
    w: int,
) -> _Frame[Any, _IoList]:
    es, we = yield _pp_element(elems[0], col0, ll, m, tind, ind, _last_depth(len(elems) > 1, ld), w)
    return [
        es,
        (yield _pp_tail(elems, 1, tail, col0, col0 + we, ll, m, tind, ind, ld, sep, w + we)),
    ]


def _pp_tail(
    elems: list[_Format],
    i: int,
    tail: _Format | None,
    col0: int,
    col: int,
    ll: int,
    m: int,
    tind: int,
    ind: str,
    ld: int,
    sep: str,
    w: int,
) -> _Frame[Any, _IoList]:
    out: list[_IoList] = []
    n = len(elems)
    while i < n:
        e = elems[i]
        ld1 = _last_depth(i + 1 < n, ld)
        elen = 1 + e[1]
        atm = e[0] == "a"
        if (ld1 == 0 and elen + 1 < ll - col and w + elen + 1 <= m and atm) or (
            ld1 > 0 and elen < ll - col - ld1 and w + elen + ld1 <= m and atm
        ):
            out.append("," + _write(e))
            col += elen
            w += elen
        else:
            es, we = yield _pp_element(e, col0, ll, m, tind, ind, ld1, 0)
            out += (",\n", ind, es)
            col = col0 + we
            w = we
        i += 1
    if tail is not None:
        n = tail[1]
        if n + 1 < ll - col - (ld + 1) and n + 1 + w + (ld + 1) <= m and tail[0] == "a":
            out.append(sep + _write(tail))
        else:
            out += (sep, "\n", ind, (yield _pp(tail, col0, ll, m, tind, ind, ld + 1, 0)))
    return out


def _pp_element(
    e: _Format, col: int, ll: int, m: int, tind: int, ind: str, ld: int, w: int
) -> _Frame[_IoList, tuple[_IoList, int]]:
    n = e[1]
    if n < ll - col - ld and n + w + ld <= m and e[0] == "a":
        return _write(e), n
    return (yield _pp(e, col, ll, m, tind, ind, ld, w)), ll


def _pp_binary(toks: list[str], col: int, ll: int, m: int, ind: str, ld: int, w: int) -> str:
    n0 = max(8, min(ll - col, m - 4 - w) - ld)
    n = n0
    out = ["<<"]
    i = 0
    k = len(toks)
    while True:
        rest = k - i
        if rest >= 2 and toks[i + 1] == ",":
            bs = toks[i]
            blen = len(bs) + 1
            if n - blen < 0:
                out.append("\n" + ind + bs + ",")
                n = n0 - blen
            else:
                out.append(bs + ",")
                n -= blen
            i += 2
            continue
        s = "".join(toks[i:])
        if rest == 3 and toks[i + 1] == ":":
            if len(toks[i]) + len(toks[i + 2]) + 1 > n:
                out.append("\n" + ind + s)
            else:
                out.append(s)
        elif len(s) > n:
            out.append("\n" + ind + s)
        else:
            out.append(s)
        break
    out.append(">>")
    return "".join(out)


def _cind(If: _Format, col: int, ll: int, m: int, ind: int, ld: int, w: int) -> _Frame[int, int]:
    n = If[1]
    if n < ll - col - ld and n + w + ld <= m:
        return ind
    k = If[0]
    if k == "l":
        return (yield _cind_list(If[2], If[3], col + 1, ll, m, ind, ld, w + 1))
    if k == "t":
        if If[3]:
            return (yield _cind_tag_tuple(If[2], col, ll, m, ind, ld, w + 1))
        return (yield _cind_list(If[2], None, col + 1, ll, m, ind, ld, w + 1))
    if k == "m":
        return (yield _cind_map(If[2], col + 2, ll, m, ind, ld, w + 2))
    return ind


def _cind_tag_tuple(
    elems: list[_Format], col: int, ll: int, m: int, ind: int, ld: int, w: int
) -> _Frame[int, int]:
    tlen = elems[0][1]
    tag_ind = tlen + 2
    tcol = col + tag_ind
    if ind > 0 and tag_ind > ind:
        col1 = col + ind
        if m + col1 <= ll or col1 <= ll // 2:
            return (yield _cind_tail(elems, 1, None, col1, tcol, ll, m, ind, ld, w + tlen))
        raise _NoGood
    if m + tcol < ll or tcol < ll // 2:
        return (yield _cind_list(elems[1:], None, tcol, ll, m, ind, ld, w + tlen + 1))
    raise _NoGood


def _cind_map(
    pairs: list[_Format], col: int, ll: int, m: int, ind: int, ld: int, w: int
) -> _Frame[int, int]:
    pw = yield _cind_pair(pairs[0], col, ll, m, ind, _last_depth(len(pairs) > 1, ld), w)
    return (yield _cind_pairs_tail(pairs, 1, col, col + pw, ll, m, ind, ld, w + pw))


def _cind_pairs_tail(
    pairs: list[_Format],
    i: int,
    col0: int,
    col: int,
    ll: int,
    m: int,
    ind: int,
    ld: int,
    w: int,
) -> _Frame[int, int]:
    n = len(pairs)
    while i < n:
        p = pairs[i]
        ld1 = _last_depth(i + 1 < n, ld)
        elen = 1 + p[1]
        if (ld1 == 0 and elen + 1 < ll - col and w + elen + 1 <= m and _atm_pair(p)) or (
            ld1 > 0 and elen < ll - col - ld1 and w + elen + ld1 <= m and _atm_pair(p)
        ):
            col += elen
            w += elen
        else:
            pw = yield _cind_pair(p, col0, ll, m, ind, ld1, 0)
            col = col0 + pw
            w = pw
        i += 1
    return ind


def _cind_pair(
    p: _Format, col: int, ll: int, m: int, ind: int, ld: int, w: int
) -> _Frame[int, int]:
    n = p[1]
    if p[0] == "a":  # the "..." of a cut map
        return n
    if n < ll - col - ld and n + w + ld <= m:
        return n if _atm_pair(p) else ll
    yield _cind(p[2], col, ll, m, ind, ld, w)
    i = ind if ind > 0 else 4
    yield _cind(p[3], col + i, ll, m, ind, ld, 0)
    return ll


def _cind_list(
    elems: list[_Format],
    tail: _Format | None,
    col0: int,
    ll: int,
    m: int,
    ind: int,
    ld: int,
    w: int,
) -> _Frame[int, int]:
    we = yield _cind_element(elems[0], col0, ll, m, ind, _last_depth(len(elems) > 1, ld), w)
    return (yield _cind_tail(elems, 1, tail, col0, col0 + we, ll, m, ind, ld, w + we))


def _cind_tail(
    elems: list[_Format],
    i: int,
    tail: _Format | None,
    col0: int,
    col: int,
    ll: int,
    m: int,
    ind: int,
    ld: int,
    w: int,
) -> _Frame[int, int]:
    n = len(elems)
    while i < n:
        e = elems[i]
        ld1 = _last_depth(i + 1 < n, ld)
        elen = 1 + e[1]
        atm = e[0] == "a"
        if (ld1 == 0 and elen + 1 < ll - col and w + elen + 1 <= m and atm) or (
            ld1 > 0 and elen < ll - col - ld1 and w + elen + ld1 <= m and atm
        ):
            col += elen
            w += elen
        else:
            we = yield _cind_element(e, col0, ll, m, ind, ld1, 0)
            col = col0 + we
            w = we
        i += 1
    if tail is not None:
        n = tail[1]
        if n + 1 < ll - col - (ld + 1) and n + 1 + w + (ld + 1) <= m and tail[0] == "a":
            return ind
        return (yield _cind(tail, col, ll, m, ind, ld + 1, 0))
    return ind


def _cind_element(
    e: _Format, col: int, ll: int, m: int, ind: int, ld: int, w: int
) -> _Frame[int, int]:
    n = e[1]
    if n < ll - col - ld and n + w + ld <= m and e[0] == "a":
        return n
    yield _cind(e, col, ll, m, ind, ld, w)
    return ll


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


# The composite term types print themselves in Erlang syntax.  smp.core.terms
# cannot import this module (this module needs its types), so the reprs are
# installed here; smp/core/__init__.py imports this module, so they are in
# place whenever anything of the core is.
def _term_repr(self: Term) -> str:
    return _w1(self, _node_name)


for _cls in (BitString, Fun, ExportFun, Map, ImproperList):
    # a method put on the class after it is made (the comment above says
    # why), which mypy does not allow on a class it knows
    _cls.__repr__ = _term_repr  # type: ignore[method-assign]


# ------------------------------------------------------------------ clip_term


def _digits(i: int) -> int:
    """At least the number of characters ``i`` prints as (a sign and digits)."""
    return i.bit_length() * 30103 // 100000 + 2


def _cost(x: Term, depth: int) -> int:
    """About how many characters ``x`` adds to a printed term, its elements
    not counted, the comma before it counted; a compound term counts its
    depth, the indentation ``~p`` may put before each of its lines."""
    tp = type(x)
    if tp is tuple or tp is list or tp is ImproperList or tp is Map:
        if tp is list and x and _printable_latin1(x):
            return 4 * len(x) + 3
        return 4 + depth
    if tp is Atom:
        return 3 * len(x.name) + 3  # the longest escapes of a quoted atom
    if tp is int:
        return _digits(x) + 1
    if tp is bytes or tp is bytearray or tp is memoryview:
        return 4 * len(x) + 5
    if tp is BitString:
        return 4 * len(x.data) + 9
    if tp is Ref:
        return 17 + 11 * len(x.ids)
    return 41  # a float, pid, port or fun


def _elements(x: Term) -> Optional[list[Term]]:
    """The terms ``x`` holds in print order (a map's keys and values
    alternate, an improper list's tail is last), or None if it holds none
    that clip_term looks into."""
    tp = type(x)
    if tp is tuple:
        return list(x)
    if tp is list:
        return None if _printable_latin1(x) else x
    if tp is ImproperList:
        return [*x.elements, x.tail]
    if tp is Map:
        return [e for kv in x._items for e in kv]
    return None


def clip_term(term: Term, max_chars: int) -> Term:
    """``term`` itself when it prints in about ``max_chars`` characters or
    fewer (``~p`` with its indentation; an estimate, on the high side), else
    a copy cut short where that budget runs out, as Erlang's ``~P`` cuts a
    term at its depth: the rest of a tuple or a list is ``...``
    (``{a,b,...}``, ``[1,2|...]``), the rest of a binary or a string too
    (``<<1,2,...>>``, ``<<"ab"...>>``, a :class:`ClippedBinary`;
    ``[104,105|...]``), a map keeps its first pairs (a :class:`ClippedMap`,
    ``#{a => 1,...}``), and a term that does not fit at all, such as an integer
    of more digits than the budget left, is ``...`` as a whole.  The cost is
    linear in ``max_chars``, whatever the size of ``term``."""
    # pass 1: is the whole term within the budget?  (stops once it is not)
    left = max_chars
    todo: list[tuple[Term, int]] = [(term, 0)]
    while todo:
        x, depth = todo.pop()
        left -= _cost(x, depth)
        if left < 0:
            return _clip(term, max_chars)
        elements = _elements(x)
        if elements:
            todo.extend([(e, depth + 1) for e in elements])
    return term


def _partial(x: Term, left: int) -> Term:
    """What of a binary or a string fits in ``left`` characters (None: not
    one)."""
    tp = type(x)
    keep = max((left - 5) // 4, 0)
    if tp is bytes or tp is bytearray or tp is memoryview:
        return ClippedBinary(bytes(x[:keep]), len(x))
    if tp is list and x and _printable_latin1(x):
        return ImproperList(x[:keep], ELIDED) if keep else [ELIDED]
    return None


def _cut(x: Term, parts: list[Term], more: bool) -> Term:
    """The copy of compound ``x`` from its kept ``parts``; ``more``: the
    rest of it was left out."""
    tp = type(x)
    if tp is tuple:
        return tuple(parts) + ((ELIDED,) if more else ())
    if tp is Map:
        if len(parts) % 2:
            parts.pop()  # a key without its value
        pairs = list(zip(parts[0::2], parts[1::2], strict=True))
        return ClippedMap(pairs) if more else Map(pairs)
    if not more:
        return parts if tp is list else ImproperList(parts[:-1], parts[-1])
    if tp is ImproperList and len(parts) > len(x.elements):
        parts.pop()  # the tail, cut itself: [a,b|...]
    return ImproperList(parts, ELIDED) if parts else [ELIDED]


def _clip(term: Term, max_chars: int) -> Term:
    """clip_term's copy: the terms in print order while the budget lasts.
    Each open compound term is a frame ``[term, elements, next, parts,
    depth, more]`` on a list."""
    left = max_chars - _cost(term, 0)
    elements = _elements(term)
    if left < 0 or not elements:
        return (_partial(term, max_chars) or ELIDED) if left < 0 else term
    # a frame's items are of several types (mypy cannot type a list's items
    # by position): each frame is a list[Any]
    stack: list[list[Any]] = [[term, elements, 0, [], 0, False]]
    while True:
        fr = stack[-1]
        x, elements, i, parts, depth, _ = fr
        if i < len(elements) and left <= 0:
            fr[5] = True  # the budget ran out: the rest is "..."
            i = fr[2] = len(elements)
        if i == len(elements):
            value = _cut(x, parts, fr[5])
            stack.pop()
            if not stack:
                return value
            stack[-1][3].append(value)
            continue
        e = elements[i]
        fr[2] = i + 1
        cost = _cost(e, depth + 1)
        if cost <= left:
            left -= cost
            sub = _elements(e)
            if sub:
                stack.append([e, sub, 0, [], depth + 1, False])
            else:
                parts.append(e)
            continue
        part = _partial(e, left)
        if part is not None:
            parts.append(part)
        else:
            fr[5] = True
        left = 0


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
