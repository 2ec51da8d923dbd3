"""Ports that can be tracers, as the emulator opens them.

``open_tracer_port(kind, ...)`` makes one of:

* ``file`` / ``ip`` / ``null``: OTP's trace file and ip drivers (``smp.traceport``);
* ``memory``: keeps every payload so tests and the API can read back the terms
  written to it, and reports a heavy write every ``heavy_every`` writes
  (0 = never): the driver that makes nonsmp fake scheduling observable.

Runs in the process that owns tracer ports: the nonsmp scheduler, or the smp
dispatcher (which writes to them from its dispatch thread, as the seed's
dispatcher thread does).
"""

from __future__ import annotations

from .errors import TracePortError
from .traceport import open_trace_port

__all__ = [
    "MemoryTracePort",
    "open_tracer_port",
    "close_at_exit",
    "TRACER_PORT_KINDS",
    "IP_EXIT_WAIT",
]

TRACER_PORT_KINDS = ("file", "ip", "null", "memory")
#: When the emulator stops, an ip port with a client connected gets this many
#: seconds to send what it has queued before it closes.
IP_EXIT_WAIT = 2.0


class MemoryTracePort:
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
        from .etf import decode

        return [decode(p) for p in self.payloads[start:]]

    @property
    def stats(self) -> dict:
        return {"messages": len(self.payloads)}


def close_at_exit(tp) -> str | None:
    """Close a tracer port because the emulator stops (every exit path: close(),
    an error, Ctrl-C, a crash, the controller gone).  A file port writes its
    last buffer, as ``trace_file_drv`` does when its port closes; an ip port
    with a client first gets ``IP_EXIT_WAIT`` s to send its queue.  Returns
    None, or what went wrong (the port is closed either way)."""
    err = None
    if tp.kind == "ip" and getattr(tp, "connected", False):
        try:
            tp.flush(IP_EXIT_WAIT)
        except Exception as e:
            err = f"{type(e).__name__}: {e}"
    try:
        tp.close()
    except Exception as e:
        err = err or f"{type(e).__name__}: {e}"
    return err


def open_tracer_port(kind: str, *args, **kw):
    if kind == "memory":
        try:
            return MemoryTracePort(*args, **kw)
        except TypeError as e:
            raise TracePortError(f"bad arguments for a memory trace port: {e}") from None
    if kind not in TRACER_PORT_KINDS:
        raise TracePortError(
            f"unknown trace port kind {kind!r} (kinds: {', '.join(TRACER_PORT_KINDS)})"
        )
    return open_trace_port(kind, *args, **kw)
