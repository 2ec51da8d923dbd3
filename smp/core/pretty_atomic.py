"""How OTP 25 prints the terms that hold no other term, the pieces every
printer of :mod:`smp.core.pretty` writes them with: a float as
``float_to_list(F, [short])`` (:func:`erl_float`), an integer of any size
(:func:`int_text`), an atom as the VM prints it in a fun
(:func:`erts_atom`, ``erl_printf_term.c``), another node's ids with the
reading node's numbers (:class:`NodeNumbers`), strings of printable
latin-1 characters, and io_lib's ``write`` of an atomic term
(``_write_atomic``), the clip mark :data:`ELIDED` (``...``) included.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Callable, Optional

from smp.core.quoting import _string_char, quote_atom
from smp.core.terms import (
    LOCAL_NODE,
    Atom,
    ExportFun,
    Fun,
    Pid,
    Port,
    Ref,
    Term,
)

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


# ------------------------------------------------------------------ cut-short terms' mark


class _Elided:
    """``...``: where :func:`clip_term` cut a term short (``~P``'s mark)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "..."


#: the mark of what :func:`clip_term` left out; it prints as ``...``
ELIDED = _Elided()


#: Prints the node part of another node's pid, port or ref
#: (:class:`NodeNumbers`, or the node's name)
NodeNamer = Callable[[Atom, int], str]


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
