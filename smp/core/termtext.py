"""Erlang term text (atoms, numbers, strings, tuples, lists), as users write
match specs and scenario values: ``parse_term("[{'_',[],[{return_trace}]}]")``.

The reader is bounded: tuples and lists nest at most ``MAX_DEPTH`` deep (a
deeper match spec could not be compiled anyway, ``smp.core.matchspec``
refuses the same), an atom has at most ``MAX_ATOM`` characters (Erlang's
limit), and a float must be finite; each is a ``ValueError`` naming the
offset, never a ``RecursionError``.
"""

from __future__ import annotations

import math
import re

from smp.core.terms import Atom, ImproperList, Term

__all__ = ["parse_term", "MAX_DEPTH", "MAX_ATOM"]

#: tuples and lists nested deeper than this are refused
MAX_DEPTH = 200
#: an Erlang atom has at most 255 characters (longer is a system_limit)
MAX_ATOM = 255

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<num>-?\d+(?:\.\d+(?:[eE][-+]?\d+)?)?) |
    (?P<qatom>'(?:[^'\\]|\\.)*') |
    (?P<str>"(?:[^"\\]|\\.)*") |
    (?P<atom>[a-z][A-Za-z0-9_@]*) |
    (?P<var>[A-Z_][A-Za-z0-9_]*) |
    (?P<punct>[{}\[\],|])
)""",
    re.X,
)


def parse_term(text: str) -> Term:
    """Parse Erlang term text (atoms, numbers, strings, tuples, lists) into terms.

    ``'$1'`` and ``'_'`` stay atoms, as match specs need them.  Raises
    ``ValueError`` naming the offset of the first thing it cannot read, of
    a tuple or list nested deeper than ``MAX_DEPTH``, of an atom longer than
    ``MAX_ATOM`` characters or of a float out of range.
    """
    toks: list[tuple[str, str, int]] = []
    pos = 0
    text = text.strip()
    if text.endswith("."):
        text = text[:-1]
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ValueError(f"cannot read term at offset {pos}: {text[pos : pos + 10]!r}")
        kind = m.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group
        toks.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    i = 0

    def take() -> tuple[str, str, int]:
        nonlocal i
        if i >= len(toks):
            raise ValueError("term ends too early")
        i += 1
        return toks[i - 1]

    def term(depth: int) -> Term:
        kind, tok, at = take()
        if kind == "num":
            return _number(tok, at)
        if kind == "atom":
            return _atom(tok, at)
        if kind == "qatom":
            return _atom(_unescape(tok[1:-1], at), at)
        if kind == "var":
            if tok == "_":
                return Atom("_")
            raise ValueError(f"variables are written '$1' in match specs, not {tok} (offset {at})")
        if kind == "str":
            return [ord(c) for c in _unescape(tok[1:-1], at)]
        if tok in "{[" and depth >= MAX_DEPTH:
            raise ValueError(f"tuples and lists nested deeper than {MAX_DEPTH} (offset {at})")
        if tok == "{":
            items, _ = seq("}", depth + 1)
            return tuple(items)
        if tok == "[":
            items, tail = seq("]", depth + 1, allow_tail=True)
            return items if tail is None else ImproperList(items, tail)
        raise ValueError(f"unexpected {tok!r} at offset {at}")

    def seq(close: str, depth: int, allow_tail: bool = False) -> tuple[list[Term], Term]:
        # the items and the tail (None: a proper list, or a tuple)
        nonlocal i
        items: list[Term] = []
        tail: Term = None
        if i < len(toks) and toks[i][1] == close:
            i += 1
            return items, None
        while True:
            items.append(term(depth))
            kind, tok, at = take()
            if tok == ",":
                continue
            if tok == "|" and allow_tail:
                tail = term(depth)
                kind, tok, at = take()
            if tok != close:
                raise ValueError(f"expected {close!r} at offset {at}, found {tok!r}")
            return items, tail

    t = term(0)
    if i != len(toks):
        raise ValueError(f"unexpected {toks[i][1]!r} after the term (offset {toks[i][2]})")
    return t


def _number(tok: str, at: int) -> int | float:
    try:
        v = float(tok) if "." in tok else int(tok)
    except ValueError:  # more digits than int() reads
        raise ValueError(f"a number of {len(tok):,} digits at offset {at}: too long") from None
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"float out of range at offset {at}: {tok[:20]}")
    return v


def _atom(name: str, at: int) -> Atom:
    if len(name) > MAX_ATOM:
        raise ValueError(
            f"an atom of {len(name):,} characters at offset {at}: "
            f"at most {MAX_ATOM} (Erlang's system_limit)"
        )
    return Atom(name)


def _unescape(body: str, at: int) -> str:
    """The text of a quoted atom or string with its backslash escapes read."""
    if "\\" not in body:
        return body
    try:
        return body.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError as e:
        raise ValueError(f"bad escape in quoted text at offset {at}: {e.reason}") from None
