"""A readers-writer lock (the seed's ``sys_trace_rwmtx``).

Writer-preferring: once a writer waits, new readers wait behind it, so a BIF
changing the tracer state is not starved by the dispatch thread, which reads
the state for every message.
"""

from __future__ import annotations

import threading
from typing import Callable

__all__ = ["RWLock"]


class RWLock:
    """Many readers or one writer."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0
        self._read = _Held(self.acquire_read, self.release_read)
        self._write = _Held(self.acquire_write, self.release_write)

    def acquire_read(self) -> None:
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1

    def release_read(self) -> None:
        with self._cond:
            self._readers -= 1
            if self._readers == 0:
                self._cond.notify_all()

    def acquire_write(self) -> None:
        with self._cond:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = True

    def release_write(self) -> None:
        with self._cond:
            self._writer = False
            self._cond.notify_all()

    def read(self) -> "_Held":
        """``with lock.read():`` holds it for reading."""
        return self._read

    def write(self) -> "_Held":
        """``with lock.write():`` holds it for writing."""
        return self._write


class _Held:
    """A context manager that takes and gives back one side of the lock (a
    plain object rather than a generator: the dispatcher enters one for
    every message)."""

    __slots__ = ("_enter", "_exit")

    def __init__(self, acquire: Callable[[], None], release: Callable[[], None]) -> None:
        self._enter = acquire
        self._exit = release

    def __enter__(self) -> None:
        self._enter()

    def __exit__(self, *exc: object) -> None:
        self._exit()
