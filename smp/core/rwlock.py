"""A readers-writer lock (the seed's ``sys_trace_rwmtx``).

Writer-preferring: once a writer waits, new readers wait behind it, so a BIF
changing the tracer state is not starved by the dispatch thread, which reads
the state for every message.
"""

from __future__ import annotations

import threading

__all__ = ["RWLock", "OneThread"]


class RWLock:
    """Many readers or one writer.  ``with lock.read():`` and ``with
    lock.write():`` enter a holder object made once (no generator each time:
    the dispatcher reads the state for every message); the holders share
    the lock's counters and refer to nothing that refers back to them, so a
    lock is freed as soon as it is dropped."""

    __slots__ = ("_core", "_read", "_write")

    def __init__(self) -> None:
        self._core = core = _Core()
        self._read = _Read(core)
        self._write = _Write(core)

    def acquire_read(self) -> None:
        self._read.__enter__()

    def release_read(self) -> None:
        self._read.__exit__()

    def acquire_write(self) -> None:
        self._write.__enter__()

    def release_write(self) -> None:
        self._write.__exit__()

    def read(self) -> _Read:
        """``with lock.read():`` holds it for reading."""
        return self._read

    def write(self) -> _Write:
        """``with lock.write():`` holds it for writing."""
        return self._write

    @property
    def writers_waiting(self) -> int:
        """How many writers wait for the lock (the readers behind them wait too)."""
        return self._core.writers_waiting


class _Core:
    __slots__ = ("cond", "readers", "writer", "writers_waiting")

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.readers = 0
        self.writer = False
        self.writers_waiting = 0


class _Holder:
    __slots__ = ("_c",)

    def __init__(self, core: _Core) -> None:
        self._c = core


class _Read(_Holder):
    __slots__ = ()

    def __enter__(self) -> None:
        c = self._c
        with c.cond:
            while c.writer or c.writers_waiting:
                c.cond.wait()
            c.readers += 1

    def __exit__(self, *exc: object) -> None:
        c = self._c
        with c.cond:
            c.readers -= 1
            if c.readers == 0:
                c.cond.notify_all()


class _Write(_Holder):
    __slots__ = ()

    def __enter__(self) -> None:
        c = self._c
        with c.cond:
            c.writers_waiting += 1
            while c.writer or c.readers:
                c.cond.wait()
            c.writers_waiting -= 1
            c.writer = True

    def __exit__(self, *exc: object) -> None:
        c = self._c
        with c.cond:
            c.writer = False
            c.cond.notify_all()


class OneThread:
    """``RWLock``'s ``read`` and ``write`` for a state only one thread ever
    uses (the simulator's worlds, ``smp.sim.world``): nothing to wait for,
    so nothing is taken (an ``RWLock``'s condition, taken on every read and
    change of the state, was 3 % of an exploration's instructions)."""

    __slots__ = ()

    def read(self) -> OneThread:
        return self

    def write(self) -> OneThread:
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


#: the one ``OneThread`` (it holds nothing)
ONE_THREAD = OneThread()
