"""Trace ports that write what OTP's ``trace_file_drv`` and ``trace_ip_drv`` write.

Both drivers (lib/runtime_tools/c_src in OTP) frame every trace message as::

    +----+-------------------+------------------------------------+
    | Op | Size (4 bytes BE) | payload (term_to_binary) if Op = 0 |
    +----+-------------------+------------------------------------+

``Op`` 0 carries a term of ``Size`` bytes; ``Op`` 1 ("drop", only written by
the ip driver) carries no payload and ``Size`` is the number of messages that
were dropped in its place.  ``write(payload)`` takes the ``term_to_binary``
bytes (``smp.wire.etf.encode``) of one trace message.

* :class:`FileTracePort` is ``dbg:trace_port(file, Name)`` and
  ``dbg:trace_port(file, {Name, wrap, Suffix, WrapSize, WrapCnt})``.
* :class:`IpTracePort` is ``dbg:trace_port(ip, {PortNo, QueSize})`` (dbg opens
  the driver with flag 2, "fill the queue even if no one is listening").
* :class:`NullTracePort` only counts (benchmarks).
* :class:`MemoryTracePort` keeps every payload so tests and the API can read
  back the terms written to it, and reports a heavy write every
  ``heavy_every`` writes (0 = never): the driver that makes nonsmp fake
  scheduling observable.

Runs in the process that owns tracer ports: the nonsmp scheduler, or the smp
dispatcher (which writes to them from its dispatch thread, as the seed's
dispatcher thread does).  ``close_at_exit`` is how every exit path closes one.

The file port and the frame format live in :mod:`smp.ports.traceport_file`,
the ip port in :mod:`smp.ports.traceport_ip`, the null and memory ports in
:mod:`smp.ports.traceport_mem` (which the simulator uses: no socket); this
module re-exports them and holds what the port's owner calls
(``open_trace_port``, ``port_call``, ``close_at_exit``).
"""

from __future__ import annotations

from smp.core.errors import TracePortError
from smp.ports.traceport_file import (
    DEFAULT_WRAP_COUNT,
    DEFAULT_WRAP_SIZE,
    FILE_BUFFER_SIZE,
    OP_DATA,
    OP_DROP,
    FileTracePort,
    wrap_file_name,
    wrap_files,
)
from smp.ports.traceport_ip import DEFAULT_QUEUE_SIZE, IpTracePort
from smp.ports.traceport_mem import (
    TRACER_PORT_KINDS,
    MemoryTracePort,
    NullTracePort,
    check_kind,
)

__all__ = [
    "FileTracePort",
    "IpTracePort",
    "NullTracePort",
    "MemoryTracePort",
    "open_trace_port",
    "close_at_exit",
    "port_call",
    "PORT_CALLS",
    "TRACER_PORT_KINDS",
    "IP_EXIT_WAIT",
    "OP_DATA",
    "OP_DROP",
    "FILE_BUFFER_SIZE",
    "DEFAULT_WRAP_SIZE",
    "DEFAULT_WRAP_COUNT",
    "DEFAULT_QUEUE_SIZE",
    "wrap_file_name",
    "wrap_files",
]

#: When the emulator stops, an ip port with a client connected gets this many
#: seconds to send what it has queued before it closes.
IP_EXIT_WAIT = 2.0


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


def open_trace_port(kind: str, *args, **kw):
    """Open a trace port: ``open_trace_port("file", path, wrap=..., buffer_size=...)``,
    ``open_trace_port("ip", port, host=..., queue_size=...)``,
    ``open_trace_port("null")`` or ``open_trace_port("memory", heavy_every=0)``.
    Raises :class:`TracePortError` on bad arguments.
    """
    classes = {
        "file": FileTracePort,
        "ip": IpTracePort,
        "null": NullTracePort,
        "memory": MemoryTracePort,
    }
    check_kind(kind)
    cls = classes[kind]
    try:
        return cls(*args, **kw)
    except TypeError as e:
        raise TracePortError(f"bad arguments for a {kind} trace port: {e}") from None


#: What the controller may ask of a trace port (``Emulator.trace_port_*``).
PORT_CALLS = ("terms", "info", "flush", "close")


def port_call(tp, method: str, args: tuple, close) -> object:
    """Serve a controller's call on trace port ``tp`` in the process that owns
    it (the nonsmp scheduler or the smp dispatcher): ``terms`` (a memory
    port's written terms from ``start``, or an ip port's opened with ``keep``), ``info``, ``flush(timeout)``, and
    ``close``, which the owner does its way (``close()``: at once in nonsmp,
    at the close's place in the queue in smp)."""
    if method not in PORT_CALLS or type(args) is not tuple:
        raise TracePortError(f"no trace port call {method!r} (calls: {', '.join(PORT_CALLS)})")
    if method == "terms":
        if isinstance(tp, MemoryTracePort) or (isinstance(tp, IpTracePort) and tp.kept is not None):
            return tp.terms(*args)
        return None
    if method == "close":
        close()
        return True
    if method == "info":
        return {
            "kind": tp.kind,
            "closed": tp.closed,
            **tp.stats,
            **({"port": tp.port} if isinstance(tp, IpTracePort) else {}),
        }
    return tp.flush(*args)
