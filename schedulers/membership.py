"""How a scheduler process joins the controller's emulator and, from
another host, stays in it; no loop of its own.  ``wait_welcome`` is the
start-up handshake on the ``ctl`` socket: the hello (sent once the
connection is up), with CURVE the handshake's events (a key the controller
refuses ends the scheduler with a message instead of a silent wait), then
the welcome, or the refusal.  ``HeartbeatThread`` is the thread by which a
scheduler on another host tells the controller every second that it is
there.  The scheduler's loop (``schedulers.worker``) makes the ``ctl``
socket, and runs both."""

from __future__ import annotations

import os
import threading
import time

import zmq
from zmq.utils.monitor import recv_monitor_message

from smp.core.errors import ProtocolError
from smp.wire import codec
from smp.wire.curve import curve_client
from smp.wire.protocol import Heartbeat, Refused, Welcome, frame_kind

__all__ = [
    "CONNECT_EVENTS",
    "HANDSHAKE_EVENTS",
    "HEARTBEAT_EVERY",
    "HeartbeatThread",
    "wait_welcome",
]

HEARTBEAT_EVERY = 1.0  # s between a remote scheduler's heartbeats to the controller

#: The events of the CURVE handshake with the controller that ``wait_welcome`` watches.
HANDSHAKE_EVENTS = (
    zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_SUCCEEDED
)

#: The events of the tcp connection to the controller that ``wait_welcome``
#: watches: refused connects with none made for ``REFUSED_FOR`` s mean
#: nothing listens at the address.
CONNECT_EVENTS = zmq.EVENT_CONNECT_RETRIED | zmq.EVENT_CONNECTED
REFUSED_FOR = 5.0


def wait_welcome(ctl, monitor, hello: bytes, ep: str, security, timeout: float, bad) -> Welcome:
    """Say ``hello`` on ``ctl`` (connected to the controller at ``ep``) and
    wait for the welcome.  ``monitor``: the ``ctl`` socket's monitor of
    ``HANDSHAKE_EVENTS`` with CURVE (``security``), else None; it is closed on
    return.  ``bad(where, sender, e)`` counts and logs a frame that is not a
    welcome.  A refusal, a refused key or a failing CURVE handshake raises
    ``PermissionError``; over tcp, every connect refused for ``REFUSED_FOR``
    s ``ConnectionRefusedError``; no welcome within ``timeout`` s ``TimeoutError``;
    the controller gone ``SystemExit``."""
    deadline = time.monotonic() + timeout
    parent = os.getppid()
    poller = zmq.Poller()
    poller.register(ctl, zmq.POLLIN)
    if monitor is not None:
        poller.register(monitor, zmq.POLLIN)
    failed = 0
    refused_since: float | None = None  # the first refused connect since the last made
    try:
        while True:
            if hello is not None:
                try:
                    ctl.send(hello, zmq.NOBLOCK)
                    hello = None
                except zmq.Again:
                    pass  # no connection yet: the handshake's events come first
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no welcome from the controller at {ep} within {timeout:g} s")
            wait_ms = 2 if hello is not None else 100  # hello still to send
            events = dict(poller.poll(min(wait_ms, int(left * 1000) + 1)))
            if monitor is not None and monitor in events:
                ev = recv_monitor_message(monitor)
                if ev["event"] == zmq.EVENT_CONNECT_RETRIED:
                    refused_since = refused_since or time.monotonic()
                elif ev["event"] == zmq.EVENT_CONNECTED:
                    refused_since = None
                else:
                    failed += _handshake_event(ev, failed, ep, security)
            if refused_since is not None and time.monotonic() - refused_since >= REFUSED_FOR:
                raise ConnectionRefusedError(
                    f"nothing listens at {ep}: every connect refused for {REFUSED_FOR:g} s "
                    "(is smp-emu dispatcher --bind running there?)"
                )
            if ctl not in events:
                if os.getppid() != parent:
                    raise SystemExit(0)  # the controller went away: never linger
                continue
            msg = _welcome_frame(ctl, bad)
            if msg is not None:
                return msg
    finally:
        if monitor is not None:
            ctl.disable_monitor()
            monitor.close(linger=0)


def _handshake_event(ev: dict, failed: int, ep: str, security) -> int:
    """One event of the CURVE handshake with the controller: a refused
    key ends this scheduler at once; a handshake that fails three times
    (a server key that is not the controller's, or a controller without
    CURVE) too.  Returns 1 for a failure to count."""
    if ev["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
        key = security["public"]
        key = key.decode() if type(key) is bytes else key
        raise PermissionError(
            f"the controller at {ep} refused this scheduler's key {key} (CURVE status "
            f"{ev['value']}): its NAME.key must be in the controller's keys/authorized/ "
            "when the controller starts"
        )
    if ev["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
        return 0
    if failed >= 2:
        raise PermissionError(
            f"the CURVE handshake with the controller at {ep} failed 3 times: the "
            "server.key given is not the controller's, or the controller runs without "
            "CURVE (--insecure)"
        )
    return 1


def _welcome_frame(ctl, bad) -> Welcome | None:
    """The welcome (or None for anything else, a bad frame counted)."""
    try:
        msg = codec.loads_frame(ctl.recv())
        kind = frame_kind(msg)
        if kind == Welcome.KIND:
            return Welcome.decode(msg)
        if kind == Refused.KIND:
            reason = Refused.decode(msg).reason
            raise PermissionError(f"controller refused this scheduler: {reason}")
    except ProtocolError as e:
        bad("control", "the controller", e)
    return None


class HeartbeatThread:
    """A scheduler on another host tells the controller every second that
    it is there (the controller takes one silent for 5 s as lost; a local
    one is watched by the OS).  A thread of its own, on a socket of its
    own (``ident``, the routing id the welcome gave it), so a process that
    holds the scheduler for long does not silence it: only a link that is
    down or a stopped process does.  Never blocks: a link that is down keeps
    at most a few of them."""

    def __init__(self, ctx: zmq.Context, ident: bytes, sched_id: int, ep: str, security):
        self._stop = threading.Event()
        self._args = (ctx, ident, sched_id, ep, security)
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    def start(self) -> HeartbeatThread:
        self._thread.start()
        return self

    def _beat(self) -> None:
        ctx, ident, sched_id, ep, security = self._args
        sock = ctx.socket(zmq.DEALER)
        try:
            sock.setsockopt(zmq.ROUTING_ID, ident)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SNDHWM, 4)
            curve_client(sock, security)
            sock.connect(ep)
            frame = Heartbeat(sched_id).encode()
            while not self._stop.is_set():
                try:
                    sock.send(frame, zmq.NOBLOCK)
                except zmq.Again:
                    pass
                self._stop.wait(HEARTBEAT_EVERY)
        finally:
            sock.close(linger=0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)
