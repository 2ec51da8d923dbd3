"""Erlang term text (atoms, numbers, strings, tuples, lists), as users write
match specs and scenario values: ``parse_term("[{'_',[],[{return_trace}]}]")``."""

from __future__ import annotations

import re

from smp.core.terms import Atom, ImproperList

__all__ = ["parse_term"]

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


def parse_term(text: str):
    """Parse Erlang term text (atoms, numbers, strings, tuples, lists) into terms.

    ``'$1'`` and ``'_'`` stay atoms, as match specs need them.  Raises
    ``ValueError`` naming the offset of the first thing it cannot read.
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
        toks.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    i = 0

    def take():
        nonlocal i
        if i >= len(toks):
            raise ValueError("term ends too early")
        i += 1
        return toks[i - 1]

    def term():
        kind, tok, at = take()
        if kind == "num":
            return float(tok) if "." in tok else int(tok)
        if kind == "atom":
            return Atom(tok)
        if kind == "qatom":
            return Atom(tok[1:-1].encode().decode("unicode_escape"))
        if kind == "var":
            if tok == "_":
                return Atom("_")
            raise ValueError(f"variables are written '$1' in match specs, not {tok} (offset {at})")
        if kind == "str":
            return [ord(c) for c in tok[1:-1].encode().decode("unicode_escape")]
        if tok == "{":
            items = seq("}")
            return tuple(items)
        if tok == "[":
            items, tail = seq("]", allow_tail=True)
            return items if tail is None else ImproperList(items, tail)
        raise ValueError(f"unexpected {tok!r} at offset {at}")

    def seq(close, allow_tail=False):
        nonlocal i
        items: list = []
        tail = None
        if i < len(toks) and toks[i][1] == close:
            i += 1
            return (items, None) if allow_tail else items
        while True:
            items.append(term())
            kind, tok, at = take()
            if tok == ",":
                continue
            if tok == "|" and allow_tail:
                tail = term()
                kind, tok, at = take()
            if tok != close:
                raise ValueError(f"expected {close!r} at offset {at}, found {tok!r}")
            return (items, tail) if allow_tail else items

    t = term()
    if i != len(toks):
        raise ValueError(f"unexpected {toks[i][1]!r} after the term (offset {toks[i][2]})")
    return t
