"""Strictly increasing ``{MegaSecs, Secs, MicroSecs}`` timestamps (``GET_NOW``).

The seed takes every timestamp under ``smq_mtx``; whoever owns the queue owns
one ``Clock``: the scheduler in nonsmp mode, the dispatcher in smp mode.  With
``cpu_timestamp`` the source is the owning process's CPU time, still made
strictly increasing as ``erts_get_now_cpu`` values are.
"""

from __future__ import annotations

import time

__all__ = ["Clock", "ts_to_us", "us_to_ts"]


class Clock:
    __slots__ = ("last", "cpu")

    def __init__(self) -> None:
        self.last = 0
        self.cpu = False

    def now_us(self) -> int:
        us = (time.process_time_ns() if self.cpu else time.time_ns()) // 1000
        if us <= self.last:
            us = self.last + 1
        self.last = us
        return us

    def now(self) -> tuple[int, int, int]:
        return us_to_ts(self.now_us())

    def reserve_us(self, n: int) -> int:
        """Take ``n`` consecutive timestamps at once; returns the first (in us)."""
        first = self.now_us()
        self.last = first + n - 1
        return first


def us_to_ts(us: int) -> tuple[int, int, int]:
    s, micro = divmod(us, 1_000_000)
    mega, secs = divmod(s, 1_000_000)
    return (mega, secs, micro)


def ts_to_us(ts: tuple[int, int, int]) -> int:
    return (ts[0] * 1_000_000 + ts[1]) * 1_000_000 + ts[2]
