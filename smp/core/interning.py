"""The interning of atoms and pids (:class:`smp.core.terms.Atom`,
:class:`smp.core.terms.Pid`): the sweep that drops the table entries
nothing else refers to, when a table has doubled since its last sweep, and
the lock every insert and sweep holds.  The tables themselves are the
types' (``Atom._table``, ``Pid._cache``).
"""

from __future__ import annotations

import sys
import threading
from itertools import compress, repeat
from operator import eq
from typing import TypeVar

_K = TypeVar("_K")
_V = TypeVar("_V")


# ---------------------------------------------------------------- interning
#
# Atoms and pids are interned: while an atom or a pid is alive, every equal
# one is the same object (so ``is``, ``==`` and the identity hash agree).
# The tables are plain dicts, so a decoder finds an interned atom or pid
# with one ``dict.get`` and no call; but a plain dict alone would keep every
# atom and pid ever made, and a reader of a long trace (``read --follow``)
# meets ever new pids.  So a table entry that nothing but the table refers
# to is dropped: when a table has grown to twice its size after the last
# sweep (and at least ``_SWEEP_MIN`` entries), the entries whose reference
# count says the table alone holds them are removed.  An atom or pid that
# anything still refers to (a process table, a module's ``am_ok``, a term
# being read) stays, so uniqueness among live objects holds; one that is
# dropped and made again later is a new object, which nothing can tell.
#
# Thread safety: lookups take no lock (``dict.get`` is atomic); every insert
# and every sweep holds ``_intern_lock``.  A sweep pops a candidate and looks
# at its count again: a thread that took the object from the table in
# between holds a reference, and the entry is put back; a thread that looks
# in the meantime misses, and its insert waits for the lock, then finds it.
# This relies on CPython's reference counts (``sys.getrefcount``).

_SWEEP_MIN = 1 << 16
# reentrant: freeing an object in a sweep may run code (a weakref callback,
# the cyclic collector) that makes an atom
_intern_lock = threading.RLock()


def _counts(table: dict[_K, _V]) -> list[int]:
    """The reference count of each value of ``table`` (C calls only)."""
    return list(map(sys.getrefcount, table.values()))


def _calibrate() -> tuple[int, int]:
    """The counts of a value the table alone refers to: seen by ``_counts``,
    and once popped into a local variable (as ``_sweep`` sees it)."""
    table = {0: object()}
    in_table = _counts(table)[0]
    popped = table.pop(0)
    return in_table, sys.getrefcount(popped)


_ONLY_TABLE, _ONLY_POPPED = _calibrate()


def _sweep(table: dict[_K, _V]) -> int:
    """Drop the entries of ``table`` nothing else refers to (hold
    ``_intern_lock``); returns how many were dropped."""
    unused = list(compress(table.keys(), map(eq, _counts(table), repeat(_ONLY_TABLE))))
    dropped = 0
    for key in unused:
        value = table.pop(key, None)
        if value is None:
            continue
        if sys.getrefcount(value) > _ONLY_POPPED:
            table[key] = value  # taken from the table meanwhile: still in use
        else:
            dropped += 1
        del value
    return dropped


#: When each table is swept next (its size after the last sweep, doubled):
#: ``[atoms, pids]``.
_next_sweep = [_SWEEP_MIN, _SWEEP_MIN]
_ATOMS, _PIDS = 0, 1


def _sweep_grown(table: dict[_K, _V], which: int) -> None:
    """``table`` reached its next sweep (hold ``_intern_lock``)."""
    _sweep(table)
    _next_sweep[which] = max(_SWEEP_MIN, 2 * len(table))
