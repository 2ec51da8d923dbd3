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

Pids, ports and refs of other nodes print with the number the *reading* node
has for that node (``<N.X.Y>``): a real node prints the index of the node
name's atom in its atom table, which only that node knows.  ``NodeNumbers``
keeps that mapping: numbers given to it (``NodeNumbers({Atom('a@h'): 8616})``)
are used as given, and nodes it was not told about are numbered 1, 2, ... in
the order they are first printed.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

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
    at = lambda i: raw[i] if i < n else 0  # noqa: E731
    quote = not _is_lower(_latin1_char(raw[0], at(1)))
    if not quote:
        for i in range(1, n):
            lc = _latin1_char(raw[i], at(i + 1))
            if not _is_alnum(lc) and lc != 95:
                quote = True
                break
    out = []
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

    def __init__(self, known: Optional[dict] = None):
        self.numbers: dict = {}
        for k, v in (known or {}).items():
            self.numbers[k if type(k) is Atom else Atom(k)] = int(v)
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


def _write_fun(t) -> str:
    if type(t) is Fun:
        return f"#Fun<{t.module.name.encode('utf-8').decode('latin-1')}.{t.old_index}.{t.old_uniq}>"
    return f"fun {erts_atom(t.module)}:{erts_atom(t.function)}/{t.arity}"


# ------------------------------------------------------------------ io_lib:write (atomic terms)


def _printable_latin1(codes) -> bool:
    for c in codes:
        if type(c) is not int or not (32 <= c <= 126 or 160 <= c <= 255 or 8 <= c <= 13 or c == 27):
            return False
    return True


def _write_string(codes) -> str:
    return '"' + "".join([_string_char(c, 34) for c in codes]) + '"'


def _write_atomic(t, nn: Callable) -> str:
    tp = type(t)
    if tp is int:
        return str(t)
    if tp is float:
        return erl_float(t)
    if tp is Atom:
        return quote_atom(t.name)
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
# The intermediate format: tuples (kind, length, ...):
#   ("a", len, text)                 anything written as one string
#   ("l", len, [elements], tail)     a list (tail is None or the improper tail)
#   ("t", len, [elements], tagged)   a tuple
#   ("m", len, [pairs])              a map; pairs are ("p", len, key, value)
#   ("b", len, [tokens])             a binary that is not a string: "1", ",", "2", ...


def _bin_tokens(data: bytes, size: Optional[int] = None) -> list:
    toks: list = []
    full = len(data) if size is None else size // 8
    for i in range(full):
        if toks:
            toks.append(",")
        toks.append(str(data[i]))
    if size is not None and size % 8:
        bits = size % 8
        if toks:
            toks.append(",")
        toks += [str(data[-1] >> (8 - bits)), ":", str(bits)]
    return toks


def _plen(t, nn: Callable):
    tp = type(t)
    if tp is Atom:
        s = quote_atom(t.name)
        return ("a", len(s), s)
    if tp is tuple:
        if not t:
            return ("a", 2, "{}")
        elems = [_plen(e, nn) for e in t]
        return (
            "t",
            1 + len(elems) + sum([e[1] for e in elems]),
            elems,
            type(t[0]) is Atom and len(t) > 1,
        )
    if tp is list:
        if not t:
            return ("a", 2, "[]")
        if _printable_latin1(t):
            s = _write_string(t)
            return ("a", len(s), s)
        elems = [_plen(e, nn) for e in t]
        return ("l", 1 + len(elems) + sum([e[1] for e in elems]), elems, None)
    if tp is ImproperList:
        elems = [_plen(e, nn) for e in t.elements]
        tail = _plen(t.tail, nn)
        return ("l", 2 + len(elems) + sum([e[1] for e in elems]) + tail[1], elems, tail)
    if tp is Map:
        if not t:
            return ("a", 3, "#{}")
        pairs = []
        for k, v in t.items():
            kp, vp = _plen(k, nn), _plen(v, nn)
            pairs.append(("p", kp[1] + 4 + vp[1], kp, vp))
        return ("m", 2 + len(pairs) + sum([p[1] for p in pairs]), pairs)
    if tp is bytes or tp is bytearray or tp is memoryview:
        t = bytes(t)
        if not t:
            return ("a", 4, "<<>>")
        if _printable_latin1(t):
            s = "<<" + _write_string(t) + ">>"
            return ("a", len(s), s)
        toks = _bin_tokens(t)
        return ("b", 4 + sum(map(len, toks)), toks)
    if tp is BitString:
        toks = _bin_tokens(t.data, t.size)
        return ("b", 4 + sum(map(len, toks)), toks)
    s = _write_atomic(t, nn)
    return ("a", len(s), s)


def _write(If) -> str:
    k = If[0]
    if k == "a":
        return If[2]
    if k == "t":
        return "{" + ",".join([_write(e) for e in If[2]]) + "}"
    if k == "l":
        s = "[" + ",".join([_write(e) for e in If[2]])
        if If[3] is not None:
            s += "|" + _write(If[3])
        return s + "]"
    if k == "m":
        return "#{" + ",".join([_write(p) for p in If[2]]) + "}"
    if k == "p":
        return _write(If[2]) + " => " + _write(If[3])
    return "<<" + "".join(If[2]) + ">>"


class _NoGood(Exception):
    pass


def _pp(If, col, ll, m, tind, ind, ld, w) -> str:
    n = If[1]
    if n < ll - col - ld and n + w + ld <= m:
        return _write(If)
    k = If[0]
    if k == "l":
        return "[" + _pp_list(If[2], If[3], col + 1, ll, m, tind, " " + ind, ld, "|", w + 1) + "]"
    if k == "t":
        if If[3]:
            return "{" + _pp_tag_tuple(If[2], col, ll, m, tind, ind, ld, w + 1) + "}"
        return "{" + _pp_list(If[2], None, col + 1, ll, m, tind, " " + ind, ld, ",", w + 1) + "}"
    if k == "m":
        return "#{" + _pp_map(If[2], col + 2, ll, m, tind, "  " + ind, ld, w + 1) + "}"
    if k == "b":
        return _pp_binary(If[2], col + 2, ll, m, "  " + ind, ld, w)
    return If[2]


def _pp_tag_tuple(elems, col, ll, m, tind, ind, ld, w) -> str:
    tag = elems[0]
    tlen = tag[1]
    tag_ind = tlen + 2
    tcol = col + tag_ind
    if tind > 0 and tag_ind > tind:
        col1 = col + tind
        indent = " " * tind + ind
        return tag[2] + _pp_tail(elems, 1, None, col1, tcol, ll, m, tind, indent, ld, ",", w + tlen)
    indent = " " * tag_ind + ind
    return (
        tag[2] + "," + _pp_list(elems[1:], None, tcol, ll, m, tind, indent, ld, ",", w + tlen + 1)
    )


def _last_depth(more: bool, ld: int) -> int:
    return 0 if more else ld + 1


def _pp_map(pairs, col, ll, m, tind, ind, ld, w) -> str:
    ps, pw = _pp_pair(pairs[0], col, ll, m, tind, ind, _last_depth(len(pairs) > 1, ld), w)
    return ps + _pp_pairs_tail(pairs, 1, col, col + pw, ll, m, tind, ind, ld, pw)


def _atm_pair(p) -> bool:
    return p[2][0] == "a" and p[3][0] == "a"


def _pp_pairs_tail(pairs, i, col0, col, ll, m, tind, ind, ld, w) -> str:
    out = []
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
            ps, pw = _pp_pair(p, col0, ll, m, tind, ind, ld1, 0)
            out.append(",\n" + ind + ps)
            col = col0 + pw
            w = pw
        i += 1
    return "".join(out)


def _pp_pair(p, col, ll, m, tind, ind0, ld, w):
    n = p[1]
    if n < ll - col - ld and n + w + ld <= m:
        return _write(p), (n if _atm_pair(p) else ll)
    i = tind if tind > 0 else 4
    ind = " " * i + ind0
    return (
        _pp(p[2], col, ll, m, tind, ind0, ld, w)
        + " =>\n"
        + ind
        + _pp(p[3], col + i, ll, m, tind, ind, ld, 0)
    ), ll


def _pp_list(elems, tail, col0, ll, m, tind, ind, ld, sep, w) -> str:
    es, we = _pp_element(elems[0], col0, ll, m, tind, ind, _last_depth(len(elems) > 1, ld), w)
    return es + _pp_tail(elems, 1, tail, col0, col0 + we, ll, m, tind, ind, ld, sep, w + we)


def _pp_tail(elems, i, tail, col0, col, ll, m, tind, ind, ld, sep, w) -> str:
    out = []
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
            es, we = _pp_element(e, col0, ll, m, tind, ind, ld1, 0)
            out.append(",\n" + ind + es)
            col = col0 + we
            w = we
        i += 1
    if tail is not None:
        n = tail[1]
        if n + 1 < ll - col - (ld + 1) and n + 1 + w + (ld + 1) <= m and tail[0] == "a":
            out.append(sep + _write(tail))
        else:
            out.append(sep + "\n" + ind + _pp(tail, col0, ll, m, tind, ind, ld + 1, 0))
    return "".join(out)


def _pp_element(e, col, ll, m, tind, ind, ld, w):
    n = e[1]
    if n < ll - col - ld and n + w + ld <= m and e[0] == "a":
        return _write(e), n
    return _pp(e, col, ll, m, tind, ind, ld, w), ll


def _pp_binary(toks, col, ll, m, ind, ld, w) -> str:
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


def _cind(If, col, ll, m, ind, ld, w) -> int:
    n = If[1]
    if n < ll - col - ld and n + w + ld <= m:
        return ind
    k = If[0]
    if k == "l":
        return _cind_list(If[2], If[3], col + 1, ll, m, ind, ld, w + 1)
    if k == "t":
        if If[3]:
            return _cind_tag_tuple(If[2], col, ll, m, ind, ld, w + 1)
        return _cind_list(If[2], None, col + 1, ll, m, ind, ld, w + 1)
    if k == "m":
        return _cind_map(If[2], col + 2, ll, m, ind, ld, w + 2)
    return ind


def _cind_tag_tuple(elems, col, ll, m, ind, ld, w) -> int:
    tlen = elems[0][1]
    tag_ind = tlen + 2
    tcol = col + tag_ind
    if ind > 0 and tag_ind > ind:
        col1 = col + ind
        if m + col1 <= ll or col1 <= ll // 2:
            return _cind_tail(elems, 1, None, col1, tcol, ll, m, ind, ld, w + tlen)
        raise _NoGood
    if m + tcol < ll or tcol < ll // 2:
        return _cind_list(elems[1:], None, tcol, ll, m, ind, ld, w + tlen + 1)
    raise _NoGood


def _cind_map(pairs, col, ll, m, ind, ld, w) -> int:
    pw = _cind_pair(pairs[0], col, ll, m, ind, _last_depth(len(pairs) > 1, ld), w)
    return _cind_pairs_tail(pairs, 1, col, col + pw, ll, m, ind, ld, w + pw)


def _cind_pairs_tail(pairs, i, col0, col, ll, m, ind, ld, w) -> int:
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
            pw = _cind_pair(p, col0, ll, m, ind, ld1, 0)
            col = col0 + pw
            w = pw
        i += 1
    return ind


def _cind_pair(p, col, ll, m, ind, ld, w) -> int:
    n = p[1]
    if n < ll - col - ld and n + w + ld <= m:
        return n if _atm_pair(p) else ll
    _cind(p[2], col, ll, m, ind, ld, w)
    i = ind if ind > 0 else 4
    _cind(p[3], col + i, ll, m, ind, ld, 0)
    return ll


def _cind_list(elems, tail, col0, ll, m, ind, ld, w) -> int:
    we = _cind_element(elems[0], col0, ll, m, ind, _last_depth(len(elems) > 1, ld), w)
    return _cind_tail(elems, 1, tail, col0, col0 + we, ll, m, ind, ld, w + we)


def _cind_tail(elems, i, tail, col0, col, ll, m, ind, ld, w) -> int:
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
            we = _cind_element(e, col0, ll, m, ind, ld1, 0)
            col = col0 + we
            w = we
        i += 1
    if tail is not None:
        n = tail[1]
        if n + 1 < ll - col - (ld + 1) and n + 1 + w + (ld + 1) <= m and tail[0] == "a":
            return ind
        return _cind(tail, col, ll, m, ind, ld + 1, 0)
    return ind


def _cind_element(e, col, ll, m, ind, ld, w) -> int:
    n = e[1]
    if n < ll - col - ld and n + w + ld <= m and e[0] == "a":
        return n
    _cind(e, col, ll, m, ind, ld, w)
    return ll


_COMPOUND = (tuple, list, ImproperList, Map, bytes, bytearray, memoryview, BitString)


def pformat(
    term: Any, column: int = 1, line_length: int = 80, nodes: Optional[Callable] = None
) -> str:
    """``io_lib_pretty:print(Term, [{column, Column}, {line_length, LineLength}])``
    with ``~p``'s options (latin-1, strings, no limits).  ``nodes`` gives the
    number printed for another node's ids (a :class:`NodeNumbers`); by default
    the node's name is printed in its place."""
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
            tind = _cind(If, column, line_length, m, i, 0, 0)
            break
        except _NoGood:
            continue
    return _pp(If, column, line_length, m, tind, " " * (column - 1), 0, 0)


_atom_text: dict = {}


def _w1(t, nn) -> str:
    """The one-line text of ``t`` (what ``_write(_plen(t))`` gives, faster)."""
    tp = type(t)
    if tp is Atom:
        s = _atom_text.get(t)
        if s is None:
            s = _atom_text[t] = quote_atom(t.name)
        return s
    if tp is tuple:
        return "{" + ",".join([_w1(e, nn) for e in t]) + "}"
    if tp is int:
        return str(t)
    if tp is list:
        if not t:
            return "[]"
        if _printable_latin1(t):
            return _write_string(t)
        return "[" + ",".join([_w1(e, nn) for e in t]) + "]"
    if tp is Pid:
        return f"<{nn(t.node, t.creation)}.{t.number}.{t.serial}>"
    if tp is ImproperList:
        return "[" + ",".join([_w1(e, nn) for e in t.elements]) + "|" + _w1(t.tail, nn) + "]"
    if tp is Map:
        if not t:
            return "#{}"
        return "#{" + ",".join([_w1(k, nn) + " => " + _w1(v, nn) for k, v in t.items()]) + "}"
    if tp is bytes or tp is bytearray or tp is memoryview or tp is BitString:
        return _write(_plen(t, nn))
    return _write_atomic(t, nn)


def write_one_line(term: Any, nodes: Optional[Callable] = None) -> str:
    """``~p`` on one line (``io_lib_pretty`` with line length 0)."""
    return _w1(term, nodes or _node_name)


def format_term(term: Any) -> str:
    """Return ``term`` in Erlang syntax, on one line, as ``~p`` prints it
    (OTP 25, latin-1 rules).  Other nodes' pids, ports and refs show the node
    name where a node would show its number for that node (``<a@b.5.0>``)."""
    return _w1(term, _node_name)


# The composite term types print themselves in Erlang syntax.  smp.core.terms
# cannot import this module (this module needs its types), so the reprs are
# installed here; smp/core/__init__.py imports this module, so they are in
# place whenever anything of the core is.
def _term_repr(self) -> str:
    return _w1(self, _node_name)


for _cls in (BitString, Fun, ExportFun, Map, ImproperList):
    _cls.__repr__ = _term_repr


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


def fmt(format: str, args, nodes: Optional[Callable] = None) -> str:
    """``io_lib:format(Format, Args)`` for the controls ``~p``, ``~w``, ``~s``
    (a ``str`` argument), ``~n`` and ``~~``."""
    out = []
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


def _write_w(term, nodes) -> str:
    """``~w``: ``io_lib:write/1`` (no string detection)."""
    nn = nodes or _node_name
    tp = type(term)
    if tp is tuple:
        return "{" + ",".join([_write_w(e, nn) for e in term]) + "}"
    if tp is list:
        return "[" + ",".join([_write_w(e, nn) for e in term]) + "]"
    if tp is ImproperList:
        return (
            "["
            + ",".join([_write_w(e, nn) for e in term.elements])
            + "|"
            + _write_w(term.tail, nn)
            + "]"
        )
    if tp is Map:
        return (
            "#{"
            + ",".join([_write_w(k, nn) + " => " + _write_w(v, nn) for k, v in term.items()])
            + "}"
        )
    if tp is bytes or tp is bytearray or tp is memoryview:
        return "<<" + ",".join(map(str, bytes(term))) + ">>"
    if tp is BitString:
        return "<<" + "".join(_bin_tokens(term.data, term.size)) + ">>"
    return _write_atomic(term, nn)
