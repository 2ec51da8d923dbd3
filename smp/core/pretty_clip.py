"""``clip_term``: a term cut short where it would print in more than about
``n`` characters, as Erlang's ``~P`` cuts a term at its depth, and the two
cut-short terms it makes besides :data:`smp.core.pretty_atomic.ELIDED`
(``...``): :class:`ClippedBinary` and :class:`ClippedMap`, which
:mod:`smp.core.pretty` prints (their ``repr`` is its one-line ``~p``).
"""

from __future__ import annotations

from typing import Any, Optional

from smp.core.pretty_atomic import ELIDED, _printable_latin1
from smp.core.quoting import _string_char
from smp.core.terms import (
    Atom,
    BitString,
    ImproperList,
    Map,
    Pid,
    Port,
    Ref,
    Term,
)


class ClippedBinary:
    """The first bytes of a binary :func:`clip_term` cut short; it prints as
    ``~P`` prints a binary its depth cut: ``<<1,2,...>>``, ``<<"ab"...>>``."""

    __slots__ = ("data", "size")

    data: bytes
    size: int

    def __init__(self, data: bytes, size: int) -> None:
        self.data = data  # the bytes kept
        self.size = size  # the size of the whole binary, in bytes

    # __repr__: ~p on one line, installed by smp.core.pretty (which needs
    # this module's types, so this module cannot import it)


class ClippedMap:
    """A map :func:`clip_term` cut short: the pairs kept (in the map's order),
    printed as ``#{K => V,...}``."""

    __slots__ = ("pairs",)
    pairs: list[tuple[Term, Term]]

    def __init__(self, pairs: list[tuple[Term, Term]]) -> None:
        self.pairs = pairs

    # __repr__: ~p on one line, installed by smp.core.pretty (which needs
    # this module's types, so this module cannot import it)


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


_WHOLE = (Atom, Pid, Port, Ref)


def clip_message(term: Term, max_chars: int) -> Term:
    """A trace message (``{trace, Pid, What, ...}``, ``{seq_trace, ...}``,
    ...) with each of its terms after the tag cut short as
    :func:`clip_term` cuts one, the tuple itself kept whole: a formatter
    that knows the message by its shape still does (cut as one term, a
    message lost its tail and printed as nothing); a pid, port, reference
    or atom in it stays whole.  Any other term is cut as one."""
    if type(term) is not tuple or not term or type(term[0]) is not Atom:
        return clip_term(term, max_chars)
    parts = [term[0]]
    # (a pid, port, reference or atom is short: the envelope keeps it whole)
    parts.extend(e if type(e) in _WHOLE else clip_term(e, max_chars) for e in term[1:])
    return term if all(a is b for a, b in zip(parts, term, strict=True)) else tuple(parts)


def _partial(x: Term, left: int) -> tuple[Term, int]:
    """What of a binary or a string fits in ``left`` characters, and the
    characters it prints in: ``x`` itself when it all fits (``_cost`` is
    high: four characters a byte), else its first bytes or codes, counted
    as they print (a printable binary's one or two a character, another's
    digits and commas; the whole scanned is at most ``left`` long);
    ``(None, 0)`` for a term of another type."""
    tp = type(x)
    left = max(left, 0)
    if tp is bytes or tp is bytearray or tp is memoryview:
        data = bytes(x[:left])  # (every byte prints in a character or more)
        size = len(x)
        if data and _printable_latin1(data):
            widths = [len(_string_char(c, 34)) for c in data]
            whole, over = 6, 9  # <<"ab">>, <<"ab"...>>
        else:
            widths = [_DIGITS[c] + 1 for c in data]
            whole, over = 3, 7  # <<1,2>> (a comma fewer), <<1,2,...>>
        if len(data) == size and sum(widths) + whole <= left:
            return x, sum(widths) + whole
        keep, used = _fit(widths, left - over)
        return ClippedBinary(data[:keep], size), used + over
    if tp is list and x and _printable_latin1(x):
        text = [len(_string_char(c, 34)) for c in x[:left]]
        if len(text) == len(x) and sum(text) + 2 <= left:
            return x, sum(text) + 2  # "ab"
        # cut, it prints as its codes: [104,105|...]
        keep, used = _fit([_DIGITS[c] + 1 for c in x[:left]], left - 5)
        return (ImproperList(x[:keep], ELIDED) if keep else [ELIDED]), used + 5
    return None, 0


#: the digits of each byte's value (how ``<<1,2>>`` prints it)
_DIGITS = [len(str(i)) for i in range(256)]


def _fit(widths: list[int], room: int) -> tuple[int, int]:
    """How many of ``widths`` fit in ``room``, and the room they take."""
    used = 0
    for k, w in enumerate(widths):
        if used + w > room:
            return k, used
        used += w
    return len(widths), used


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
        return (_partial(term, max_chars)[0] or ELIDED) if left < 0 else term
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
        part, used = _partial(e, left)
        if part is e:  # (it fits, counted as it prints)
            parts.append(e)
            left -= used
            continue
        if part is not None:
            parts.append(part)
        else:
            fr[5] = True
        left = 0
