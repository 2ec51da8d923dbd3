"""How ``~p`` quotes an atom and the characters of a quoted atom or string
(OTP 25's ``io_lib:write_atom_as_latin1/1`` and io_lib's ``string_char``,
latin-1 rules): :func:`quote_atom` is an atom's ``repr``
(:class:`smp.core.terms.Atom`) and every printer's of :mod:`smp.core.pretty`.
"""

from __future__ import annotations

# erl_scan:reserved_word/1 of OTP 25 ('maybe' and 'else' only with the
# maybe_expr feature, which is off by default there)
_RESERVED = frozenset(
    "after and andalso band begin bnot bor bsl bsr bxor case catch cond div end fun "
    "if let not of or orelse receive rem try when xor".split()
)


def _name_char(c: int) -> bool:
    # io_lib:name_char/1 (latin-1 letters included)
    return (
        97 <= c <= 122
        or 223 <= c <= 255
        and c != 247
        or 65 <= c <= 90
        or 192 <= c <= 222
        and c != 215
        or 48 <= c <= 57
        or c == 95
        or c == 64
    )


def quote_atom(name: str) -> str:
    """Print an atom name as ``io_lib:write_atom_as_latin1/1`` (OTP 25) does,
    i.e. as ``~p`` prints an atom: quoted where Erlang needs quotes (reserved
    words, a first character that is not a lower-case letter, any character
    that is not a latin-1 letter, digit, ``_`` or ``@``), control characters
    escaped, characters above 255 written ``\\x{...}``."""
    if name and name not in _RESERVED:
        c = ord(name[0])
        if (97 <= c <= 122 or 223 <= c <= 255 and c != 247) and all(
            _name_char(ord(ch)) for ch in name[1:]
        ):
            return name
    return "'" + "".join(_string_char(ord(ch), 39) for ch in name) + "'"


_CTRL_ESC = {10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v", 8: "\\b", 12: "\\f", 27: "\\e", 127: "\\d"}


def _string_char(c: int, q: int) -> str:
    """io_lib's string_char(unicode_as_latin1, C, Q): one character of a quoted
    string or atom as ``~p`` writes it."""
    if c == q:
        return "\\" + chr(q)
    if c == 92:
        return "\\\\"
    if 32 <= c <= 126 or 160 <= c <= 255:
        return chr(c)
    if c > 255:
        return "\\x{%X}" % c
    e = _CTRL_ESC.get(c)
    if e is not None:
        return e
    return "\\%03o" % c
