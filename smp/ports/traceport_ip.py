"""``trace_ip_drv`` (OTP 17.x, lib/runtime_tools/c_src/trace_ip_drv.c):
:class:`IpTracePort`, ``dbg:trace_port(ip, {PortNo, QueSize})``.

The caller's side (``write``, ``flush``, ``close``) queues frames under a
lock; a background thread accepts one client at a time and sends it the
queue, as the driver's ``enque_message`` and its send loop do.  The frame
header and ``_BasePort`` are :mod:`smp.ports.traceport_file`'s;
:mod:`smp.ports.traceport` re-exports :class:`IpTracePort` and
``DEFAULT_QUEUE_SIZE``.
"""

from __future__ import annotations

import os
import selectors
import socket
import threading
from collections import deque
from typing import Optional

from smp.core.errors import TracePortError
from smp.ports.traceport_file import OP_DATA, OP_DROP, _BasePort, _pack_hdr
from smp.wire.etf import decode

#: dbg's default queue size for ``trace_port(ip, PortNo)`` (OTP 25).
DEFAULT_QUEUE_SIZE = 200


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
    * ``keep=True``: every message written is also kept, so the run that
      opened the port can print what was dispatched to it (``terms``)
      without taking the port's one client slot from a user's
      ``dbg:trace_client(ip, ...)``.
    """

    kind = "ip"

    def __init__(
        self,
        port: int = 0,
        *,
        host: str = "127.0.0.1",
        queue_size: int = DEFAULT_QUEUE_SIZE,
        keep: bool = False,
    ):
        if type(port) is not int or not 0 <= port <= 65535:
            raise TracePortError(f"ip trace port number must be an int in 0..65535, not {port!r}")
        if type(queue_size) is not int or queue_size < 1:
            raise TracePortError(f"queue_size must be an int >= 1, not {queue_size!r}")
        if type(keep) is not bool:
            raise TracePortError(f"keep must be true or false, not {keep!r}")
        self.queue_size = queue_size
        self.host = host
        self.kept: list[bytes] | None = [] if keep else None
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
            if self.kept is not None:
                self.kept.append(payload)
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

    def terms(self, start: int = 0) -> list:
        """The terms written from ``start`` on, for a port opened with
        ``keep=True`` (whatever a client received or the queue dropped)."""
        if self.kept is None:
            raise TracePortError("this ip trace port keeps no copy (open it with keep=True)")
        with self._lock:
            payloads = self.kept[start:]
        return [decode(p) for p in payloads]

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
                "connected": self._client is not None,
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
