"""Request/reply links from the controller to its peers, with deadlines.

Runs in the user's process: the controller (``smp.Emulator``, through
``smp.supervision``) and ``tools/bench.py``'s dispatcher rig.

A link sends a named request frame (``smp.wire.protocol.Request``) and waits
for its ``Reply`` until a deadline.  It does not know what a lost peer
means: when the peer's process is gone it raises ``PeerGone``, when the
deadline passes ``Unanswered``, and supervision, which owns the processes,
decides what follows (``SchedulerLost``, ``DispatcherLost``, run()'s
``EmulatorTimeout``).  That keeps the calls free of call-backs into the
supervisor, which itself makes calls when it bookkeeps a loss.

* ``SchedulerLinks``: the controller's one ROUTER socket, a link to each
  scheduler: replies, the BIF requests processes make, goodbyes and a
  remote scheduler's heartbeats all arrive there and are checked field by
  field (``pump``).
* ``DispatcherLink``: a DEALER to the dispatcher's control socket.
* ``TimeBounds``: run()'s time bound, which caps every wait, and the BIF
  being served, which gets more time once it has changed something.
* ``FrameLog``: frames refused on the controller's sockets, counted.
"""

from __future__ import annotations

import itertools
import sys
import time
from typing import Any, Callable, NamedTuple

import zmq

from smp.core.errors import PeerGone, ProtocolError, Unanswered
from smp.core.placement import owner
from smp.core.state import STATE_READS
from smp.wire.codec import MAX_FRAME, loads_frame
from smp.wire.curve import curve_client, curve_server, describe_peer, recv_from
from smp.wire.protocol import Bye, Heartbeat, Reply, Request, Rpc, frame_kind

__all__ = [
    "CHANGES",
    "Deadline",
    "DispatcherLink",
    "FrameLog",
    "SchedulerLinks",
    "TimeBounds",
    "startup_frame",
]

#: Commands that change something: once a BIF has sent one, it is finished
#: (with run()'s BIF grace) rather than put back to be served again in the next run().
CHANGES = frozenset(
    {
        "trace_apply",
        "pattern",
        "set_reg",
        "unset_reg",
        "register",
        "unregister",
        "error_logger",
        "trace_delivered",
        "exit",
        "spawn",
        "spawn_many",
        "define",
        "open_trace_port",
        "trace_port_call",
    }
)

#: How long the controller still reads its socket for goodbyes once the
#: schedulers' processes are gone (frames a process sent as it exited).
LAST_LOOK_S = 0.25

_STATUS = {
    "idle": bool,
    "active": bool,
    "timer": bool,
    "backlog": int,
    "runq": int,
    "sys_made": int,
    "sys_items": int,
    "deliveries": int,
    "busy": list,
    "peer_sent": list,
    "peer_recv": list,
}


def _reply_ok(cmd: str, value, nsched: int) -> bool:
    """The replies the controller's loops read field by field have the shape
    they read (a scheduler's status)."""
    if cmd != "status":
        return True
    return (
        type(value) is dict
        and all(type(value.get(f)) is t for f, t in _STATUS.items())
        and type(value.get("timer_in")) in (int, float, type(None))
        and all(
            len(value[f]) == nsched + 1 and all(type(x) is int for x in value[f])
            for f in ("peer_sent", "peer_recv")
        )
    )


def startup_frame(parts: list, frame):
    """A checked ``frame`` (``Hello`` or ``Ready``) from a one-part message."""
    if len(parts) != 1:
        raise ProtocolError(f"a message of {len(parts)} parts, not 1")
    return frame.decode(loads_frame(parts[0]))


class Deadline(NamedTuple):
    """When a wait gives up; ``capped`` when run()'s bound came first."""

    at: float
    capped: bool
    timeout: float

    def left(self) -> float:
        return self.at - time.monotonic()


class TimeBounds:
    """run()'s time bounds, shared by the links and the controller: every
    wait ends by ``run`` (None: no bound); a BIF being served (``serving``)
    that has sent a command that changes something (``changed``) may finish
    until ``bif``."""

    __slots__ = ("run", "bif", "serving", "changed")

    def __init__(self) -> None:
        self.run: float | None = None
        self.bif: float | None = None
        self.serving = None  # the BIF request being served
        self.changed = False  # ... has sent a command that changes something

    def until(self, timeout: float) -> Deadline:
        """When a call that may wait ``timeout`` s must give up: run()'s time
        bound comes first (then ``capped``: giving up raises ``OutOfTime``)."""
        end = time.monotonic() + timeout
        if self.run is not None and self.run < end:
            return Deadline(self.run, True, timeout)
        return Deadline(end, False, timeout)

    def note_change(self) -> None:
        """A command that changes something is on its way: the BIF being
        served is finished (until ``bif``) rather than put back to be served
        again."""
        if self.serving is not None and not self.changed:
            self.changed = True
            if self.run is not None and self.bif is not None:
                self.run = max(self.run, self.bif)


class FrameLog:
    """Frames refused on the controller's sockets: counted, logged (bounded
    under a flood), ignored."""

    __slots__ = ("count", "last")

    def __init__(self) -> None:
        self.count = 0
        self.last = ""

    def refuse(self, sender: str, parts: list, e: BaseException, where: str = "controller") -> None:
        self.count += 1
        self.last = (
            f"rejected {where} frame of {sum(len(p) for p in parts)} bytes "
            f"from {sender}: {type(e).__name__}: {e}"
        )
        if self.count <= 100 or self.count % 1000 == 0:
            sys.stderr.write(f"smp: {self.last}\n")


class SchedulerLinks:
    """The controller's ROUTER socket: a request/reply link to each scheduler.

    Routing ids and keys are learnt in the start-up handshake
    (``smp.supervision``); until then only hellos and readies come here."""

    def __init__(
        self,
        ctx,
        security: dict | None,
        nsched: int,
        ids: itertools.count,
        bounds: TimeBounds,
        log: FrameLog,
        code_ok: bool,
    ):
        self.sock = ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 1000)
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.sock.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME)
        if security:
            curve_server(self.sock, security)
        self.secure = security is not None
        self.nsched = nsched
        self.ids, self.bounds, self.log = ids, bounds, log
        # closures travel (dill) only on a channel that authenticates the
        # controller to the scheduler: ipc in the owner-only directory, or CURVE
        self.code_ok = code_ok
        self.ident: dict[int, bytes] = {}
        self.by_ident: dict[bytes, int] = {}
        self.keys: dict[int, str | None] = {}
        self.remote: set[int] = set()  # schedulers on other hosts
        self.remote_ids: set[bytes] = set()
        self.heard: dict[int, float] = {}  # remote scheduler -> when a frame last came from it
        self.hb_ids: dict[bytes, int] = {}  # routing ids of their heartbeats
        self.pending: dict[int, tuple[int, str]] = {}  # request id -> (scheduler, command)
        self.abandoned: set[int] = set()  # requests given up on: their late replies are dropped
        self.replies: dict[int, tuple] = {}
        self.rpcs: list = []  # (scheduler, pid, request): BIFs processes called
        self.byes: dict[int, dict] = {}  # each scheduler's last statistics
        self.last_status: dict[int, dict] = {}  # each scheduler's latest status

    def key_ok(self, k, user) -> bool:
        """With CURVE, a frame of scheduler ``k`` comes with its key."""
        return not self.secure or (user is not None and user == self.keys.get(k))

    def send(self, k: int, req_id, cmd: str, args) -> bool:
        """False when scheduler ``k`` is no longer connected (it exited)."""
        frame = Request(req_id, cmd, args).encode(code_ok=self.code_ok)
        try:
            self.sock.send_multipart([self.ident.get(k, f"s{k}".encode()), frame])
            if req_id is not None:
                self.pending[req_id] = (k, cmd)
            if cmd in CHANGES:
                self.bounds.note_change()
            return True
        except zmq.error.ZMQError as e:
            if e.errno != zmq.EHOSTUNREACH:
                raise
            return False

    def request(self, k: int, cmd: str, args) -> int | None:
        """Send a request; its id, or None when ``k`` is no longer connected."""
        req = next(self.ids)
        return req if self.send(k, req, cmd, args) else None

    def wait(
        self,
        req: int,
        k: int,
        cmd: str,
        deadline: Deadline,
        alive: Callable[[], bool],
        *,
        step: float = 0.5,
        alive_first: bool = False,
    ) -> tuple[bool, Any]:
        """``(ok, value)`` of request ``req`` to scheduler ``k``, taking what
        else arrives meanwhile.  Raises ``PeerGone`` when ``alive()`` says
        no while the reply is missing (asked before each wait of at most
        ``step`` s with ``alive_first``, after it otherwise), ``Unanswered``
        at the deadline; either way a late reply is dropped."""
        while req not in self.replies:
            if alive_first and not alive():
                self.abandoned.add(req)
                raise PeerGone(f"scheduler {k}")
            left = deadline.left()
            if left <= 0:
                if req in self.pending:
                    self.abandoned.add(req)
                raise Unanswered(f"scheduler {k}", cmd, deadline.timeout, deadline.capped)
            self.pump(min(step, left))
            if not alive_first and req not in self.replies and not alive():
                self.abandoned.add(req)
                raise PeerGone(f"scheduler {k}")
        return self.replies.pop(req)

    def forget(self, reqs) -> None:
        """The answers still to come to ``reqs`` are not wanted."""
        for r in reqs:
            if r not in self.replies and r in self.pending:
                self.abandoned.add(r)
            self.replies.pop(r, None)

    def await_byes(self, ks, until: float, alive: Callable[[], bool]) -> None:
        """Take what arrives until each scheduler of ``ks`` has said goodbye,
        or ``until``.  A scheduler sends its goodbye just before it exits, and
        the frame may still be on its way when the process is gone: once
        ``alive()`` says no, the socket is read for ``LAST_LOOK_S`` more."""
        last = None
        while any(k not in self.byes for k in ks):
            now = time.monotonic()
            if last is None and not alive():
                last = now + LAST_LOOK_S
            left = (until if last is None else min(until, last)) - now
            if left <= 0:
                return
            self.pump(min(0.05, left))

    def pump(self, timeout: float) -> None:
        """Take whatever the schedulers sent: replies, process BIF requests, goodbyes."""
        if not self.sock.poll(int(timeout * 1000)):
            return
        while self.sock.poll(0):
            ident, parts, user = recv_from(self.sock, self.secure)
            k = self.by_ident.get(ident)
            try:
                if k is None and ident in self.hb_ids:
                    k = self.hb_ids[ident]
                    self.take_heartbeat(k, parts, user)
                    continue
                self._take(k, parts, user)
                if k in self.remote:
                    self.heard[k] = time.monotonic()
            except ProtocolError as e:  # counted, logged with the sender, ignored
                self.log.refuse(
                    f"scheduler {k}" if k is not None else describe_peer(ident, user), parts, e
                )

    def _take(self, k, parts: list, user) -> None:
        """One message on the controller's socket, checked field by field: it
        comes from a scheduler of this emulator (routing id, and with CURVE
        its key), a reply answers a request sent to that scheduler, a BIF
        request is made by one of its processes."""
        if k is None:
            raise ProtocolError("not from a scheduler of this emulator")
        if not self.key_ok(k, user):
            raise ProtocolError(f"scheduler {k}'s routing id with another key")
        if len(parts) != 1:
            raise ProtocolError(f"a message of {len(parts)} parts, not 1")
        msg = loads_frame(parts[0])
        kind = frame_kind(msg)
        if kind == Reply.KIND:
            rid, ok, value = Reply.decode(msg)
            if self.pending.get(rid, (None,))[0] != k:
                raise ProtocolError(f"a reply to {rid!r}, no request to scheduler {k}")
            if ok and not _reply_ok(self.pending[rid][1], value, self.nsched):
                raise ProtocolError(f"a malformed reply to {self.pending[rid][1]!r}")
            cmd = self.pending.pop(rid)[1]
            if ok and cmd == "status":
                self.last_status[k] = value
            if rid in self.abandoned:  # its caller gave up waiting (run()'s time was up)
                self.abandoned.discard(rid)
            else:
                self.replies[rid] = (ok, value)
        elif kind == Rpc.KIND:
            pid, request = Rpc.decode(msg)
            if owner(pid, self.nsched) != k:  # decode checked that it is a pid
                raise ProtocolError(f"a BIF request of {pid!r}, not a process of scheduler {k}")
            self.rpcs.append((k, pid, request))
        elif kind == Bye.KIND:
            self.byes[k] = Bye.decode(msg, k).stats
        else:
            raise ProtocolError(f"a {kind!r} frame, which scheduler {k} does not send now")

    def take_heartbeat(self, k: int, parts: list, user) -> None:
        """A remote scheduler's heartbeat, on the routing id (and, with CURVE,
        from the key) its welcome gave it: it is there."""
        if not self.key_ok(k, user):
            raise ProtocolError(f"scheduler {k}'s heartbeat routing id with another key")
        if len(parts) != 1:
            raise ProtocolError(f"a message of {len(parts)} parts, not 1")
        Heartbeat.decode(loads_frame(parts[0]), k)
        self.heard[k] = time.monotonic()


class DispatcherLink:
    """A DEALER to the dispatcher's control socket, under the routing id the
    dispatcher was started with (it answers that id alone)."""

    def __init__(
        self,
        ctx,
        endpoint: str,
        routing_id: bytes,
        security: dict | None,
        ids: itertools.count,
        bounds: TimeBounds,
        log: FrameLog,
        alive: Callable[[], bool],
    ):
        self.sock = ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.ROUTING_ID, routing_id)
        self.sock.setsockopt(zmq.LINGER, 1000)
        curve_client(self.sock, security)
        self.sock.connect(endpoint)
        self.ids, self.bounds, self.log = ids, bounds, log
        #: Asked when the dispatcher is silent: False makes a call raise PeerGone.
        self.alive = alive

    def call(self, cmd: str, args: tuple, timeout: float = 30.0) -> tuple[bool, Any]:
        """``(ok, value)`` of one request.  Raises ``PeerGone`` when the
        dispatcher is silent and ``alive()`` says no, ``Unanswered`` at the
        deadline (a late reply is dropped: it has another request's id)."""
        req = next(self.ids)
        self.sock.send(Request(req, cmd, args).encode())
        if cmd in CHANGES or (cmd == "state" and args[0] not in STATE_READS):
            self.bounds.note_change()
        deadline = self.bounds.until(timeout)
        while True:
            left = deadline.left()
            if left <= 0 or not self.sock.poll(min(200, int(left * 1000) + 1)):
                if not self.alive():
                    raise PeerGone("the dispatcher")
                if left <= 0:
                    raise Unanswered("the dispatcher", cmd, timeout, deadline.capped)
                continue
            raw = self.sock.recv_multipart()
            try:
                if len(raw) != 1:
                    raise ProtocolError(f"a message of {len(raw)} parts, not 1")
                rid, ok, value = Reply.decode(loads_frame(raw[0], state=True))
            except ProtocolError as e:
                self.log.refuse("the dispatcher", raw, e, "dispatcher reply")
                continue
            if rid == req:
                return ok, value
