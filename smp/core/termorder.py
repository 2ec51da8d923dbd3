"""Erlang's standard order of terms (number < atom < reference < fun <
port < pid < tuple < map < [] < list < bit string, OTP 25) and the key of
exact equality (``=:=``), as the functions :func:`term_keys` makes over
the term types of :mod:`smp.core.terms`: those types need both (``<``, a
map's key order and lookups), so this module cannot import them, and
``smp.core.terms`` passes them in and holds what it gets as ``_order_key``
and ``_ekey``.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

# A term is ``Any`` here (smp.core.terms.Term says why; this module cannot
# import that name, as above).


class OrderKey(Protocol):
    """``_order_key(term, exact=False)``: a key that sorts as Erlang's term order."""

    def __call__(self, term: Any, exact: bool = False) -> tuple[object, ...]: ...


def _bits(data: bytes, size: int) -> str:
    return "".join([format(b, "08b") for b in data])[:size]


def term_keys(
    Atom: type,
    Pid: type,
    Port: type,
    Ref: type,
    BitString: type,
    Fun: type,
    ExportFun: type,
    Map: type,
    ImproperList: type,
) -> tuple[OrderKey, Callable[[Any], object]]:
    """``(_order_key, _ekey)`` over the term types given (those of
    :mod:`smp.core.terms`, by their names there)."""

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

    def _order_key(term: Any, exact: bool = False) -> tuple[object, ...]:
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
