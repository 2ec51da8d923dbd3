"""io_lib_pretty's intermediate format of a term (``print_length`` and
its helpers: each part's kind and printed length) and its one-line text
(``write``), the half of ``~p`` that :mod:`smp.core.pretty_layout` lays
out over lines.
"""

from __future__ import annotations

from typing import Any, Optional

from smp.core.pretty_atomic import (
    NodeNamer,
    _printable_latin1,
    _write_atomic,
    _write_string,
)
from smp.core.pretty_clip import ClippedBinary, ClippedMap
from smp.core.quoting import quote_atom
from smp.core.terms import (
    Atom,
    BitString,
    ImproperList,
    Map,
    Term,
)

# ------------------------------------------------------------------ io_lib_pretty
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
# and theirs, smp.core.pretty_layout) are generators run by _run, one frame
# each on a list: printing a term as deep as the decoder's max_depth needs no
# Python recursion.

_SHALLOW = 100

#: A term's intermediate format (above): a kind, a length, then items whose
#: types depend on the kind (a text, formats, tokens, a flag); mypy cannot
#: narrow a tuple's items by its first one, so they are ``Any``.
_Format = tuple[str, int, *tuple[Any, ...]]

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
