"""The tracer ports that keep or count what is written to them in memory
(:class:`NullTracePort`, :class:`MemoryTracePort`), and the kinds of tracer
port there are.  Imports no socket: the simulator (``smp.sim``) keeps what
its dispatcher writes to a tracer port in a ``MemoryTracePort``.
"""

from __future__ import annotations

from typing import Optional

from smp.core.errors import TracePortError
from smp.ports.traceport_file import _BasePort
from smp.wire.etf import decode

__all__ = ["NullTracePort", "MemoryTracePort", "TRACER_PORT_KINDS", "check_kind"]

TRACER_PORT_KINDS = ("file", "ip", "null", "memory")


def check_kind(kind) -> None:
    """A tracer port's kind, refused in one line unless it is one of
    ``TRACER_PORT_KINDS`` (the emulator's and the simulator's alike)."""
    if kind not in TRACER_PORT_KINDS:
        raise TracePortError(
            f"unknown trace port kind {kind!r} (kinds: {', '.join(TRACER_PORT_KINDS)})"
        )


class NullTracePort(_BasePort):
    """A trace port that discards everything and only counts."""

    kind = "null"

    def __init__(self):
        self.messages = 0
        self.bytes = 0
        self.closed = False

    def write(self, payload: bytes) -> bool:
        self.messages += 1
        self.bytes += len(payload) + 5
        return False

    def flush(self, timeout: Optional[float] = None) -> bool:
        return True

    def close(self) -> None:
        self.closed = True

    @property
    def stats(self) -> dict:
        return {"messages": self.messages, "bytes": self.bytes}


class MemoryTracePort(_BasePort):
    kind = "memory"

    def __init__(self, heavy_every: int = 0):
        if type(heavy_every) is not int or heavy_every < 0:
            raise TracePortError(f"heavy_every must be an integer >= 0, not {heavy_every!r}")
        self.heavy_every = heavy_every
        self.payloads: list[bytes] = []
        self.closed = False

    def write(self, payload: bytes) -> bool:
        self.payloads.append(payload)
        return bool(self.heavy_every) and len(self.payloads) % self.heavy_every == 0

    def flush(self, timeout=None) -> bool:
        return True

    def close(self) -> None:
        self.closed = True

    def terms(self, start: int = 0) -> list:
        return [decode(p) for p in self.payloads[start:]]

    @property
    def stats(self) -> dict:
        return {"messages": len(self.payloads)}
