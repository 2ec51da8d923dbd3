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
"""

from __future__ import annotations

import os
import re
import selectors
import socket
import struct
import threading
from collections import deque
from typing import Optional

from smp.core.errors import TracePortError
from smp.wire.etf import decode

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

OP_DATA = 0
OP_DROP = 1

#: trace_file_drv's ``BUFFER_SIZE`` is ``BUFSIZ*8``; glibc's BUFSIZ is 8192.
FILE_BUFFER_SIZE = 8192 * 8
#: dbg's defaults for ``{Name, wrap, Suffix}`` and ``{Name, wrap, Suffix, Size}``.
DEFAULT_WRAP_SIZE = 128 * 1024
DEFAULT_WRAP_COUNT = 8
#: dbg's default queue size for ``trace_port(ip, PortNo)`` (OTP 25).
DEFAULT_QUEUE_SIZE = 200

TRACER_PORT_KINDS = ("file", "ip", "null", "memory")
#: When the emulator stops, an ip port with a client connected gets this many
#: seconds to send what it has queued before it closes.
IP_EXIT_WAIT = 2.0

_HDR = struct.Struct(">BI")
_pack_hdr = _HDR.pack


def wrap_file_name(path: str, suffix: str, counter: int) -> str:
    """The name trace_file_drv gives wrap file ``counter``: Name ++ Counter ++ Suffix."""
    return f"{path}{counter}{suffix}"


def wrap_files(path: str, suffix: str) -> list[tuple[int, str]]:
    """Existing files of a wrap log, as dbg's ``wrap_presort`` finds them.

    Returns ``[(counter, filename)]`` sorted by counter: files in the directory
    of ``path`` whose name is basename(path) ++ Digits ++ suffix.
    """
    path = os.fspath(path)
    dirname = os.path.dirname(path) or "."
    base = os.path.basename(path)
    try:
        names = os.listdir(dirname)
    except OSError:
        return []
    found = []
    for name in names:
        if not name.startswith(base):
            continue
        rest = name[len(base) :]
        if not rest.endswith(suffix):
            continue
        digits = rest[: len(rest) - len(suffix)] if suffix else rest
        if digits and re.fullmatch(r"[0-9]+", digits):
            found.append((int(digits), os.path.join(os.path.dirname(path), name)))
    found.sort()
    return found


class _BasePort:
    kind = "base"

    def write_many(self, payloads) -> tuple[int, TracePortError | None]:
        """``write`` each payload in order (a run of messages to this port);
        returns how many were written and the error that stopped the rest,
        or None when all were."""
        written = 0
        try:
            for payload in payloads:
                self.write(payload)
                written += 1
        except TracePortError as e:
            return written, e
        return written, None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


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


class FileTracePort(_BasePort):
    """``trace_file_drv``: buffered frames to a file or a size-wrapped file set.

    ``wrap`` is ``None`` or ``(suffix, size_bytes, count)`` as in
    ``dbg:trace_port(file, {Filename, wrap, Suffix, WrapSize, WrapCnt})``:
    files are named ``path ++ N ++ suffix`` with N = 0, 1, ... WrapCnt, 0, ...
    (the driver's counter runs over WrapCnt+1 values and at most WrapCnt files
    exist at once, the oldest being deleted).  A file is closed after the
    message that makes it reach ``size_bytes`` (so every file holds at least
    one message).  As dbg does, files of a previous wrap log with the same
    name pattern are deleted on open.

    The driver buffers ``buffer_size`` bytes (``BUFSIZ*8``); ``write`` returns
    True when the write was "heavy" as the driver flags it: the buffer went to
    the OS, or the file wrapped.

    ``write``, ``flush`` and ``close`` hold one lock, so a flush or close from
    another thread (the dispatcher's control thread while its dispatch thread
    writes) falls between two frames: the file only ever holds whole frames.
    """

    kind = "file"

    def __init__(self, path, *, wrap=None, buffer_size: int = FILE_BUFFER_SIZE):
        try:
            path = os.fspath(path)
        except TypeError:
            raise TracePortError(f"trace file name must be a path, not {path!r}") from None
        if not isinstance(path, str) or not path:
            raise TracePortError(f"bad trace file name {path!r}")
        if type(buffer_size) is not int or buffer_size < 1:
            raise TracePortError(f"buffer_size must be a positive int, not {buffer_size!r}")
        self.path = os.path.abspath(path)  # dbg passes filename:absname/1
        self.buffer_size = buffer_size
        self._buf = bytearray()
        self._fd = -1
        self._closed = False
        self._lock = threading.Lock()
        self.messages = 0
        self.bytes = 0
        self.wraps = 0
        self.os_writes = 0
        self.wrap = None
        if wrap is not None:
            if not (isinstance(wrap, tuple) and len(wrap) == 3):
                raise TracePortError(
                    f"wrap must be None or (suffix, size_bytes, count), not {wrap!r}"
                )
            suffix, size, count = wrap
            if not isinstance(suffix, str):
                raise TracePortError(f"wrap suffix must be a str, not {suffix!r}")
            if type(size) is not int or not 0 <= size < 1 << 32:
                raise TracePortError(f"wrap size must be an int in 0..2**32-1, not {size!r}")
            if type(count) is not int or not 1 <= count < 1 << 32:
                raise TracePortError(f"wrap count must be an int in 1..2**32-1, not {count!r}")
            self.wrap = (suffix, size, count)
            self._suffix = suffix
            self._wrap_size = size
            self._wrap_n = count
            self._countdown = count  # driver's wrap->cnt
            self._cur = 0  # driver's cur.cnt after next_name from ""
            self._del = 0
            self._len = 0
            # dbg:trace_port1 deletes all files from any previous wrap log.
            for _, name in wrap_files(self.path, suffix):
                try:
                    os.unlink(name)
                except OSError:
                    pass
            self._fd = self._open(wrap_file_name(self.path, suffix, 0))
        else:
            self._fd = self._open(self.path)

    @property
    def current_file(self) -> str:
        if self.wrap is None:
            return self.path
        return wrap_file_name(self.path, self._suffix, self._cur)

    @staticmethod
    def _open(name: str) -> int:
        try:
            return os.open(name, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o777)
        except OSError as e:
            raise TracePortError(f"cannot open trace file {name!r}: {e.strerror}") from e

    def _os_write(self, data) -> None:
        view = memoryview(data)
        while view:
            try:
                w = os.write(self._fd, view)
            except InterruptedError:
                continue
            except OSError as e:
                raise TracePortError(
                    f"write to trace file {self.current_file!r} failed: {e.strerror}"
                ) from e
            if w == 0:
                raise TracePortError(f"write to trace file {self.current_file!r} failed: no space")
            view = view[w:]
        self.os_writes += 1

    def _my_write(self, data) -> bool:
        """trace_file_drv's my_write(): buffer ``data`` if it fits; else fill
        the buffer, write it, then write the rest directly when it is at
        least a buffer's worth, or buffer it.  True when the disk was written."""
        buf = self._buf
        room = self.buffer_size - len(buf)
        if len(data) <= room:
            buf += data
            return False
        buf += data[:room]
        self._os_write(buf)
        rest = memoryview(data)[room:]
        if len(rest) >= self.buffer_size:
            self._os_write(rest)
            self._buf = bytearray()
        else:
            self._buf = bytearray(rest)
        return True

    def write(self, payload: bytes) -> bool:
        """Append one frame (op 0, size, payload); return True if heavy.

        As trace_file_output: the 5-byte header and the payload are two
        my_write() calls, and a wrap-around is heavy too."""
        with self._lock:
            return self._write(payload)

    def write_many(self, payloads) -> tuple[int, TracePortError | None]:
        """``write`` for each payload, under one lock.  A frame that fits in
        the buffer with its header, in a file that does not wrap, is appended
        here: what write()'s two my_write() calls do when both fit.  Any
        other frame takes write()'s own path, so the file, its OS writes and
        the counters are the same as for one write() a frame."""
        written = fast = fast_bytes = 0
        size = self.buffer_size
        inline = self.wrap is None
        with self._lock:
            try:
                if self._closed:
                    raise TracePortError("trace port is closed")
                for payload in payloads:
                    n = len(payload)
                    buf = self._buf
                    if inline and len(buf) + 5 + n <= size:
                        buf += _pack_hdr(OP_DATA, n)
                        buf += payload
                        fast += 1
                        fast_bytes += 5 + n
                    else:
                        self._write(payload)  # counts its frame itself
                    written += 1
            except TracePortError as e:
                return written, e
            finally:
                self.messages += fast
                self.bytes += fast_bytes
        return written, None

    def _write(self, payload: bytes) -> bool:
        """write() with the lock held."""
        if self._closed:
            raise TracePortError("trace port is closed")
        n = len(payload)
        heavy = self._my_write(_pack_hdr(OP_DATA, n))
        heavy = self._my_write(payload) or heavy
        self.messages += 1
        self.bytes += 5 + n
        if self.wrap is not None:
            self._len += 5 + n
            if self._len >= self._wrap_size:
                self._wrap_file()
                heavy = True
        return heavy

    def _next(self, cnt: int) -> int:
        return 0 if cnt >= self._wrap_n else cnt + 1

    def _wrap_file(self) -> None:
        self._flush()
        os.close(self._fd)
        self._fd = -1
        self._len = 0
        if self._countdown > 0:
            self._countdown -= 1
        if self._countdown == 0:
            try:
                os.unlink(wrap_file_name(self.path, self._suffix, self._del))
            except OSError:
                pass
            self._del = self._next(self._del)
        self._cur = self._next(self._cur)
        self.wraps += 1
        self._fd = self._open(wrap_file_name(self.path, self._suffix, self._cur))

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Write the buffer to the OS (the driver's port_control 'f')."""
        with self._lock:
            self._flush()
        return True

    def _flush(self) -> None:
        if self._fd >= 0 and self._buf:
            self._os_write(self._buf)
            self._buf = bytearray()

    def close(self) -> None:
        """Flush and close, as trace_file_drv does when its port closes; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._flush()
            finally:
                if self._fd >= 0:
                    os.close(self._fd)
                    self._fd = -1

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def stats(self) -> dict:
        return {
            "messages": self.messages,
            "bytes": self.bytes,
            "wraps": self.wraps,
            "os_writes": self.os_writes,
            "buffered": len(self._buf),
        }


class IpTracePort(_BasePort):
    """``trace_ip_drv`` as dbg opens it: listen on TCP, one client at a time.

    * ``port`` 0 picks a free port (see ``.port``); binds ``host`` (loopback by
      default; the driver binds INADDR_ANY).
    * A client connecting while one is served is accepted and closed at once.
    * Messages queue even when no client is connected (dbg's flag 2); the
      queue keeps ``queue_size`` messages, then one drop frame whose count
      grows with every further message that finds the queue full, exactly as
      the driver's ``enque_message`` counts.  A message being sent still
      occupies its queue slot until fully written, as in the driver.
    * ``write`` never blocks on the network: a background thread accepts and
      sends.  It returns False (the ip driver never flags heavy).
    * When a client disconnects the queue is kept for the next client; a
      message that was partly sent is resent whole (the driver would send the
      next client the rest of it, corrupting that client's stream).
    """

    kind = "ip"

    def __init__(
        self, port: int = 0, *, host: str = "127.0.0.1", queue_size: int = DEFAULT_QUEUE_SIZE
    ):
        if type(port) is not int or not 0 <= port <= 65535:
            raise TracePortError(f"ip trace port number must be an int in 0..65535, not {port!r}")
        if type(queue_size) is not int or queue_size < 1:
            raise TracePortError(f"queue_size must be an int >= 1, not {queue_size!r}")
        self.queue_size = queue_size
        self.host = host
        try:
            ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        except OSError as e:
            raise TracePortError(f"cannot create socket: {e}") from e
        try:
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind((host, port))
            ls.listen(1)
            ls.setblocking(False)
        except (OSError, OverflowError) as e:
            ls.close()
            raise TracePortError(f"cannot listen on {host}:{port}: {e}") from e
        self._listen = ls
        self.port = ls.getsockname()[1]
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        # Queue entries: [op, frame_bytes_or_drop_count, written]
        self._q: deque = deque()
        self._client: Optional[socket.socket] = None
        self._closed = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._wake_pending = False
        self.sent = 0  # data frames fully sent
        self.dropped = 0  # messages counted in drop frames
        self.drop_frames_sent = 0
        self.clients = 0  # clients served
        self.rejected = 0  # clients accepted and closed (one was connected)
        self.messages = 0  # write() calls
        self._thread = threading.Thread(
            target=self._run, name=f"IpTracePort:{self.port}", daemon=True
        )
        self._thread.start()

    # -- caller side -------------------------------------------------------
    def write(self, payload: bytes) -> bool:
        q = self._q
        with self._lock:
            if self._closed:
                raise TracePortError("trace port is closed")
            self.messages += 1
            n = len(q)
            qs = self.queue_size
            if n > qs and q[-1][0] == OP_DROP:  # full: data slots + a drop frame
                q[-1][1] += 1
                self.dropped += 1
            elif n >= qs:  # last slot: becomes a drop frame
                q.append([OP_DROP, 1, 0])
                self.dropped += 1
            else:
                q.append([OP_DATA, _pack_hdr(OP_DATA, len(payload)) + payload, 0])
            if n == 0 and self._client is not None and not self._wake_pending:
                self._wake_pending = True
                wake = True
            else:
                wake = False
        if wake:
            try:
                os.write(self._wake_w, b"w")
            except (BlockingIOError, OSError):
                pass
        return False

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait until a connected client has been sent the whole queue.

        Returns True if the queue drained, False on timeout.
        """
        with self._drained:
            self._drained.wait_for(lambda: self._closed or not self._q, timeout)
            return not self._q

    def wait_connected(self, connected: bool = True, timeout: Optional[float] = None) -> bool:
        """Wait until a client is (``connected=True``) or is not connected."""
        with self._drained:
            return (
                self._drained.wait_for(
                    lambda: self._closed or (self._client is not None) == connected, timeout
                )
                and (self._client is not None) == connected
            )

    def close(self) -> None:
        """Close the client and the listen socket, stop the thread; idempotent.

        Queued messages are discarded, as the driver does; call ``flush``
        first to deliver them.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._drained.notify_all()
        try:
            os.write(self._wake_w, b"c")
        except OSError:
            pass
        if threading.current_thread() is not self._thread:
            self._thread.join(10)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def connected(self) -> bool:
        return self._client is not None

    @property
    def queued(self) -> int:
        return len(self._q)

    @property
    def stats(self) -> dict:
        with self._lock:
            return {
                "messages": self.messages,
                "sent": self.sent,
                "dropped": self.dropped,
                "drop_frames_sent": self.drop_frames_sent,
                "queued": len(self._q),
                "clients": self.clients,
                "rejected": self.rejected,
            }

    # -- background thread -------------------------------------------------
    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._listen, selectors.EVENT_READ, "listen")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        client = None
        want_write = False
        try:
            while True:
                with self._lock:
                    if self._closed:
                        break
                    have_data = bool(self._q)
                if client is not None and have_data != want_write:
                    want_write = have_data
                    sel.modify(
                        client,
                        selectors.EVENT_READ | (selectors.EVENT_WRITE if want_write else 0),
                        "client",
                    )
                for key, events in sel.select():
                    what = key.data
                    if what == "wake":
                        try:
                            while os.read(self._wake_r, 4096):
                                pass
                        except BlockingIOError:
                            pass
                        with self._lock:
                            self._wake_pending = False
                    elif what == "listen":
                        try:
                            c, _ = self._listen.accept()
                        except (BlockingIOError, InterruptedError):
                            continue
                        except OSError:
                            continue
                        if client is not None:
                            # Someone tries to connect to a connected port.  Count
                            # it before the close a client can see.
                            with self._lock:
                                self.rejected += 1
                            c.close()
                            continue
                        c.setblocking(False)
                        client = c
                        want_write = False
                        sel.register(client, selectors.EVENT_READ, "client")
                        with self._lock:
                            self._client = c
                            self.clients += 1
                            self._drained.notify_all()
                            for e in self._q:
                                e[2] = 0
                    elif what == "client":
                        if events & selectors.EVENT_READ:
                            try:
                                data = client.recv(128)
                            except (BlockingIOError, InterruptedError):
                                data = None
                            except OSError:
                                data = b""
                            if data == b"":
                                client = self._drop_client(sel, client)
                                want_write = False
                                continue
                        if events & selectors.EVENT_WRITE and client is not None:
                            if not self._send_some(client):
                                client = self._drop_client(sel, client)
                                want_write = False
        finally:
            with self._lock:
                self._q.clear()
                self._client = None
                self._drained.notify_all()
            if client is not None:
                try:
                    sel.unregister(client)
                except (KeyError, ValueError):
                    pass
                client.close()
            sel.close()
            self._listen.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _drop_client(self, sel, client):
        try:
            sel.unregister(client)
        except (KeyError, ValueError):
            pass
        client.close()
        with self._lock:
            self._client = None
            for e in self._q:  # resend partly written frames whole
                e[2] = 0
            self._drained.notify_all()
        return None

    def _send_some(self, client) -> bool:
        """Send from the head of the queue; False if the client went away."""
        parts = []
        with self._lock:
            q = self._q
            full = len(q) > self.queue_size
            last = len(q) - 1
            total = 0
            for i, e in enumerate(q):
                if e[0] == OP_DROP:
                    if full and i == last:
                        break  # its count may still grow
                    if type(e[1]) is int:
                        e[1] = _pack_hdr(OP_DROP, e[1])  # freeze the count
                        e[0] = -OP_DROP  # frozen drop marker
                frame = e[1]
                parts.append(memoryview(frame)[e[2] :] if e[2] else frame)
                total += len(frame) - e[2]
                if total >= 262144:
                    break
        if not parts:
            return True
        try:
            sent = client.send(b"".join(parts) if len(parts) > 1 else parts[0])
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        with self._lock:
            q = self._q
            while sent and q:
                e = q[0]
                left = len(e[1]) - e[2]
                if sent >= left:
                    sent -= left
                    q.popleft()
                    if e[0] == OP_DATA:
                        self.sent += 1
                    else:
                        self.drop_frames_sent += 1
                else:
                    e[2] += sent
                    sent = 0
            if not q:
                self._drained.notify_all()
        return True


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
    cls = classes.get(kind)
    if cls is None:
        raise TracePortError(
            f"unknown trace port kind {kind!r} (kinds: {', '.join(TRACER_PORT_KINDS)})"
        )
    try:
        return cls(*args, **kw)
    except TypeError as e:
        raise TracePortError(f"bad arguments for a {kind} trace port: {e}") from None


#: What the controller may ask of a trace port (``Emulator.trace_port_*``).
PORT_CALLS = ("terms", "info", "flush", "close")


def port_call(tp, method: str, args: tuple, close) -> object:
    """Serve a controller's call on trace port ``tp`` in the process that owns
    it (the nonsmp scheduler or the smp dispatcher): ``terms`` (a memory
    port's written terms from ``start``), ``info``, ``flush(timeout)``, and
    ``close``, which the owner does its way (``close()``: at once in nonsmp,
    at the close's place in the queue in smp)."""
    if method not in PORT_CALLS or type(args) is not tuple:
        raise TracePortError(f"no trace port call {method!r} (calls: {', '.join(PORT_CALLS)})")
    if method == "terms":
        return tp.terms(*args) if isinstance(tp, MemoryTracePort) else None
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
