"""Erlang's term order and exact equality (``smp.core.termorder``): the
flat keys agree with the plain recursive definition on every term, and a
term nested as deep as the decoder allows is ordered, compared, hashed and
used as a map key without recursion."""

from __future__ import annotations

import struct
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from wire.test_etf import terms

from smp.core.termorder import _bits
from smp.core.terms import (
    Atom,
    BitString,
    ExportFun,
    Fun,
    ImproperList,
    Map,
    Pid,
    Port,
    Ref,
    _ekey,
    _order_key,
)
from smp.wire.etf import decode, encode
from smp.wire.limits import MAX_DEPTH


def _reference_keys():  # noqa: C901 - one branch per term type, as the definition
    """The definition, recursive as written in words: a nested key per term
    (fine for the shallow terms hypothesis makes)."""

    def _ekey(t: Any) -> object:
        """A hashable key that is equal for two terms exactly when Erlang's ``=:=``
        (OTP 25) says they are equal: ``1`` and ``1.0`` differ, lists are keys."""
        tp = type(t)
        if tp is int or tp is Atom or tp is bytes or tp is Pid:
            return t
        if tp is float:
            return ("\0f", t)
        if tp is tuple:
            return ("\0t",) + tuple(map(_ekey, t))
        if tp is list:
            return ("\0l",) + tuple(map(_ekey, t))
        if tp is ImproperList:
            return ("\0i", tuple(map(_ekey, t.elements)), _ekey(t.tail))
        if tp is Map:
            return ("\0m",) + tuple((_ekey(k), _ekey(v)) for k, v in t._items)
        if tp is Fun:
            return (
                "\0F",
                t.module,
                t.arity,
                t.uniq,
                t.index,
                t.old_index,
                t.old_uniq,
                _ekey(t.pid),
                tuple(map(_ekey, t.free)),
            )
        if tp is bytearray or tp is memoryview:
            return bytes(t)
        if tp in (Port, Ref, BitString, ExportFun):
            return t
        raise TypeError(f"not an Erlang term: {t!r}")

    def _order_key(term: Any, exact: bool = False) -> tuple[object, ...]:  # noqa: C901
        """A key that sorts as Erlang's term order; ``exact`` gives the order of
        map keys (``=:=``: all integers before all floats)."""
        t = type(term)
        if t is int:
            return (0, 0, term) if exact else (0, term)
        if t is float:
            return (0, 1, term) if exact else (0, term)
        if t is Atom:
            return (1, term.name)
        if t is Ref:
            return (2, term.node.name, term.creation, len(term.ids), tuple(reversed(term.ids)))
        if t is Fun:
            return (3, 0, term.module.name, term.old_index, term.old_uniq, term.index, term.uniq)
        if t is ExportFun:
            return (3, 1, term.module.name, term.function.name, term.arity)
        if t is Port:
            return (4, term.node.name, term.creation, term.number)
        if t is Pid:
            # the VM compares serial and number before the node
            return (5, term.serial, term.number, term.node.name, term.creation)
        if t is tuple:
            return (6, len(term), tuple(_order_key(e, exact) for e in term))
        if t is Map:
            return (
                7,
                len(term),
                tuple(_order_key(k, True) for k, _ in term._items),
                tuple(_order_key(v, exact) for _, v in term._items),
            )
        if t is list:
            if not term:
                return (8,)
            return (9, tuple((9, 1, _order_key(e, exact)) for e in term) + ((8,),))
        if t is ImproperList:
            return (
                9,
                tuple((9, 1, _order_key(e, exact)) for e in term.elements)
                + (_order_key(term.tail, exact),),
            )
        if t is bytes or t is bytearray:
            return (10, _bits(term, 8 * len(term)))
        if t is BitString:
            return (10, _bits(term.data, term.size))
        raise TypeError(f"not an Erlang term: {term!r}")

    return _order_key, _ekey


REF_ORDER, REF_EKEY = _reference_keys()


def _sign(a, b) -> int:
    return (a > b) - (a < b)


@settings(max_examples=400, deadline=None)
@given(a=terms, b=terms, exact=st.booleans())
def test_the_flat_order_key_orders_as_the_definition(a, b, exact):
    assert _sign(_order_key(a, exact), _order_key(b, exact)) == _sign(
        REF_ORDER(a, exact), REF_ORDER(b, exact)
    )


@settings(max_examples=400, deadline=None)
@given(a=terms, b=terms)
def test_the_flat_exact_key_is_equal_when_the_definition_is(a, b):
    assert (_ekey(a) == _ekey(b)) == (REF_EKEY(a) == REF_EKEY(b))
    assert _ekey(a) == _ekey(a) and hash(_ekey(a)) == hash(_ekey(a))


def test_a_few_orders_the_flat_keys_must_keep():
    """Erlang: number < atom < ... < tuple < map < [] < list < bit string;
    a list is smaller than its extensions; [1|a] < [1] (atom < [])."""
    xs = [1, Atom("a"), (1,), Map({1: 2}), [], [1], [1, 2], b"a"]
    assert sorted(reversed(xs), key=_order_key) == xs
    assert _order_key(ImproperList([1], Atom("a"))) < _order_key([1])
    assert _order_key(1) == _order_key(1.0) and _order_key(1, True) < _order_key(1.0, True)
    assert _ekey(1) != _ekey(1.0) and _ekey(bytearray(b"ab")) == _ekey(b"ab")
    assert Map({(1,): 1}) != Map({(1.0,): 1})  # keys exactly (=:=)


def _deep(n: int, wrap) -> object:
    t: object = Atom("x")
    for _ in range(n):
        t = wrap(t)
    return t


def test_terms_as_deep_as_the_decoder_allows_never_recurse():
    n = MAX_DEPTH - 2
    assert n > sys.getrecursionlimit()
    for wrap in (lambda t: (t,), lambda t: [t], lambda t: Map({1: t})):
        a, b = _deep(n, wrap), _deep(n, wrap)
        assert _order_key(a) == _order_key(b) and _ekey(a) == _ekey(b)
        assert hash(_ekey(a)) == hash(_ekey(b))
        m = Map([(a, 1), (Atom("k"), 2)])
        assert m[b] == 1 and b in m
    c, d = _deep(n, lambda t: Map({1: t})), _deep(n, lambda t: Map({1: t}))
    assert hash(c) == hash(d)


def test_a_map_key_holding_maps_is_bounded_in_the_decoder():
    """A key holding a map whose key holds a map ...: 32 such maps decode; past
    them the decoder refuses the term at once instead of spending time in
    the square of its size."""
    from smp.core.errors import DecodeError
    from smp.wire.etf_decoder import MAX_KEY_NESTING

    def chain(n: int) -> bytes:
        b = bytes([100]) + struct.pack(">H", 1) + b"x"
        for _ in range(n):
            b = bytes([116]) + struct.pack(">I", 1) + b + bytes([97, 1])
        return b"\x83" + b

    ok = decode(chain(MAX_KEY_NESTING + 1))
    assert decode(encode(ok)) == ok
    for n in (MAX_KEY_NESTING + 2, MAX_DEPTH - 1):
        try:
            decode(chain(n))
        except DecodeError as e:
            assert "inside the keys of more than" in str(e)
        else:
            raise AssertionError(f"a key chain of {n} maps decoded")
