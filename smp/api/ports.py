"""The tracer ports, opened and read from outside the emulated processes.

A port lives at the dispatcher in smp mode (it is the receiver the
dispatcher delivers to) and at the one scheduler in nonsmp
(``smp.ports``).
"""

from __future__ import annotations

from smp.core.terms import Port

__all__ = ["TracePorts"]


class TracePorts:
    """The tracer-port calls of ``smp.Emulator``."""

    def open_trace_port(self, kind: str, *args, **kw) -> Port:
        """A tracer port: ``file`` (path, wrap=...), ``ip`` (port, queue_size=...),
        ``memory`` (heavy_every=N) or ``null``."""
        if self.smp:
            return self._disp_call("open_trace_port", kind, args, kw)
        return self._sched_call(1, "open_trace_port", kind, args, kw)

    def _port_call(self, port: Port, method: str, *args):
        if self.smp:
            return self._disp_call("trace_port_call", port, method, args)
        return self._sched_call(1, "trace_port_call", port, method, args)

    def trace_port_terms(self, port: Port, start: int = 0) -> list:
        """The terms written so far to a ``memory`` trace port (from ``start`` on)."""
        return self._port_call(port, "terms", start)

    def trace_port_info(self, port: Port) -> dict:
        return self._port_call(port, "info")

    def flush_trace_port(self, port: Port, timeout: float = 5.0):
        return self._port_call(port, "flush", timeout)

    def close_trace_port(self, port: Port) -> None:
        """Close a tracer port; a file port writes its last buffer.  smp: the
        close is an event in queue order: every message made before the call
        is written first, later ones are dropped as ``port_closed``."""
        self._sync_dispatcher()
        self._port_call(port, "close")
