"""io_lib_pretty's layout of a term over lines (``pp`` and ``cind``, with
their helpers, of stdlib 4.2), from the intermediate format of
:mod:`smp.core.pretty_format`: each layout function is a generator run by
:func:`_run`, one frame each on a list, so laying out a term of any depth
needs no Python recursion.  :func:`smp.core.pretty.pformat` is its entry.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Optional, TypeVar

from smp.core.pretty_format import _Format, _write

#: Text as nested lists of strings (an iolist): what _pp and its helpers
#: return
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
