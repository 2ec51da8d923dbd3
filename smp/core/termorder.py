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

    scalars = (int, Atom, bytes, Pid)

    def _ekey(t: Any) -> object:
        """A hashable key that is equal for two terms exactly when Erlang's ``=:=``
        (OTP 25) says they are equal: ``1`` and ``1.0`` differ, lists are keys.

        A compound term's key is one flat tuple of tokens (a marker and the
        arity, then each part's tokens), built without recursion, so hashing
        and comparing the keys of a term nested as deep as the decoder allows
        never recurses either."""
        tp = type(t)
        if tp in scalars:
            return t
        if tp is bytearray or tp is memoryview:
            return bytes(t)
        out: list[object] = []
        put = out.append
        stack = [t]
        pop, push = stack.pop, stack.append
        while stack:
            t = pop()
            tp = type(t)
            if tp is int or tp is Atom or tp is bytes or tp is Pid:
                put(t)
            elif tp is float:
                put("\0f")
                put(t)
            elif tp is tuple or tp is list:
                put("\0t" if tp is tuple else "\0l")
                put(len(t))
                stack.extend(reversed(t))
            elif tp is ImproperList:
                put("\0i")
                put(len(t.elements))
                push(t.tail)
                stack.extend(reversed(t.elements))
            elif tp is Map:
                put("\0m")
                put(len(t._items))
                for k, v in reversed(t._items):
                    push(v)
                    push(k)
            elif tp is Fun:
                put("\0F")
                out.extend((t.module, t.arity, t.uniq, t.index, t.old_index, t.old_uniq))
                put(len(t.free))
                stack.extend(reversed(t.free))
                push(t.pid)
            elif tp is bytearray or tp is memoryview:
                put(bytes(t))
            elif tp in (Port, Ref, BitString, ExportFun):
                put(t)
            else:
                raise TypeError(f"not an Erlang term: {t!r}")
        return ("\0k", *out)

    # the markers _order_key puts on its stack between the terms
    end_of_list, cons_cell = object(), object()

    def _order_key(term: Any, exact: bool = False) -> tuple[object, ...]:
        """A key that sorts as Erlang's term order; ``exact`` gives the order of
        map keys (``=:=``: all integers before all floats).

        One flat tuple of tokens: each term's type rank and fixed fields, a
        compound's size before its parts (a tuple's, a map's keys then its
        values), a list as one ``9, 1`` token pair per element and ``8`` at
        its end (or its improper tail's tokens).  No term's tokens are a
        prefix of another's, so comparing two keys token by token is
        comparing the terms; built and compared without recursion."""
        t = type(term)  # the usual map key, an atom or an integer: its tokens at once
        if t is Atom:
            return (1, term.name)
        if t is int:
            return (0, 0, term) if exact else (0, term)
        out: list[object] = []
        put, more = out.append, out.extend
        stack: list[Any] = [(term, exact)]
        pop, push = stack.pop, stack.append
        while stack:
            item = pop()
            if item is end_of_list:
                put(8)
                continue
            term, ex = item
            t = type(term)
            if t is int:
                more((0, 0, term) if ex else (0, term))
            elif t is float:
                more((0, 1, term) if ex else (0, term))
            elif t is Atom:
                more((1, term.name))
            elif t is Ref:
                more((2, term.node.name, term.creation, len(term.ids), tuple(reversed(term.ids))))
            elif t is Fun:
                more((3, 0, term.module.name, term.old_index, term.old_uniq, term.index, term.uniq))
            elif t is ExportFun:
                more((3, 1, term.module.name, term.function.name, term.arity))
            elif t is Port:
                more((4, term.node.name, term.creation, term.number))
            elif t is Pid:
                # the VM compares serial and number before the node
                more((5, term.serial, term.number, term.node.name, term.creation))
            elif t is tuple:
                more((6, len(term)))
                stack.extend((e, ex) for e in reversed(term))
            elif t is Map:
                more((7, len(term)))
                items = term._items
                stack.extend((v, ex) for _, v in reversed(items))
                stack.extend((k, True) for k, _ in reversed(items))
            elif t is list:
                if not term:
                    put(8)
                else:
                    put(9)
                    push(end_of_list)
                    for e in reversed(term):
                        push((e, ex))
                        push((cons_cell, ex))  # the cons cell before it
            elif t is ImproperList:
                put(9)
                push((term.tail, ex))
                for e in reversed(term.elements):
                    push((e, ex))
                    push((cons_cell, ex))
            elif term is cons_cell:
                more((9, 1))
            elif t is bytes or t is bytearray:
                more((10, _bits(term, 8 * len(term))))
            elif t is BitString:
                more((10, _bits(term.data, term.size)))
            else:
                raise TypeError(f"not an Erlang term: {term!r}")
        return tuple(out)

    return _order_key, _ekey
