"""The scheduler OS process: a ``Node`` and the ZeroMQ loop that feeds it.

Runs in each scheduler process (started with ``multiprocess``).  Sockets,
each created here after the fork:

* ``ctl``   DEALER to the controller's ROUTER: commands and replies;
* smp only: ``sys`` DEALER to the dispatcher's ingest ROUTER (batched system
  messages and process-table events, in the order they were made);
  ``inbox`` ROUTER: messages and signals from other schedulers, and the
  system messages the dispatcher delivers; ``state`` SUB: the tracer-state
  replica and the dead/tracer notices; one DEALER per peer scheduler, made
  on first use.  Each DEALER has the routing id the welcome gave it for that
  receiver; the inbox takes frames from the ids it was given alone.

Every frame that arrives is decoded as data (``smp.wire.codec``) and checked
by its record (``smp.wire.frames``, ``smp.wire.protocol``) before any of it
counts; a bad one is counted and logged.  Code (a closure
to spawn) is taken from the controller alone, and only when the ``ctl``
channel is authenticated (ipc in the owner-only directory, or CURVE).

Outside ``run()`` the controller has paused the scheduler: it serves commands
but runs no process.  Batches are flushed before the loop blocks, so nothing
waits in a buffer while the scheduler sleeps.

The loop notices a controller that is gone; when an emulated process never
gives the loop back, the orphan watchdog thread (``smp.wire.rundir.watch_parent``)
ends the scheduler instead.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections import deque

import psutil
import zmq
from zmq.utils.monitor import recv_monitor_message

from schedulers.backend import LocalBackend
from smp.core import messages as M
from smp.core.bifs import call_bif
from smp.core.errors import BadArg, ProtocolError
from smp.core.sampler import Sampler
from smp.core.stats import Stats
from smp.core.terms import Atom, Pid, Port
from smp.ports.traceport import close_at_exit, open_trace_port, port_call
from smp.wire import codec, rundir
from smp.wire.curve import (
    Authenticator,
    curve_client,
    curve_server,
    describe_peer,
    new_routing_id,
    owner_only_dir,
    recv_from,
)
from smp.wire.frames import DELIVERIES, Batch, Run, TableEvent, decode_deliveries
from smp.wire.protocol import (
    Bye,
    Dead,
    Exit,
    Fin,
    FinAck,
    Heartbeat,
    Hello,
    Link,
    Msg,
    Peer,
    PortCmd,
    PortReply,
    Publication,
    Ready,
    Refused,
    Registry,
    Reply,
    Request,
    Rpc,
    Snap,
    Spawn,
    TraceFlag,
    TracerPorts,
    Tracers,
    Unlink,
    Welcome,
    describe_signal,
    frame_kind,
)
from smp.wire.runtime import tune_gc

from .engine import Node, pid_owner, port_owner
from .process import RPC, Op

__all__ = ["scheduler_main", "SmpTransport"]

BATCH = 256
HWM = 1000  # frames (batches) a socket buffers before push-back
FLUSH_AFTER_NS = 1_000_000  # a batch waits at most ~1 ms while processes run
HEARTBEAT_TIMEOUT = 5.0  # s without a word from a remote dispatcher: it is gone
HEARTBEAT_EVERY = 1.0  # s between a remote scheduler's heartbeats to the controller


_BY_RECEIVER = frozenset((M.SYS_MSG_TYPE_TRACE, M.SYS_MSG_TYPE_PROC_MSG))


class SmpTransport:
    """The scheduler side of the smp wiring.  Runs in the scheduler process.

    System messages go to the dispatcher in batches.  Consecutive messages of
    the same kind to the same receiver form a *run* whose bodies are pickled
    together once; the dispatcher decides a run at once and forwards its
    bytes to the receiver's scheduler without opening them.  A run never
    crosses a process-table event, so the queue order is kept exactly.

    It only collects (``schedulers.engine.Transport``): the scheduler's loop
    sends the batch, the peer frames and the controller requests it holds."""

    def __init__(self, sched_id: int, stats: Stats):
        self.sched_id = sched_id
        # the node's statistics: messages made are counted here a run at a
        # time (a call per message cost more than the rest of sys())
        self.stats = stats
        self.run_counted = 0  # bodies of the open run already counted as made
        self.sys_out: list = []  # closed runs and events, in order
        self.run_key = None
        self.run_bodies: list = []
        self.run_made_ns = 0
        self.peer_out: dict[int, list] = {}
        self.ctl_out: list = []  # requests for the controller (a process's BIF call)
        self.unsendable = 0  # bodies that are not terms, never queued
        self.sys_made = 0
        self.sys_items = 0
        self.pending_msgs = 0
        self.first_ns = 0

    def sys(self, type_: int, from_, to, msg, ts_kind: int) -> None:
        t = type_
        # the dispatcher decides TRACE and PROC_MSG by receiver alone, so a
        # run of them may hold several senders; the others need the sender
        key = (t, to, ts_kind) if t in _BY_RECEIVER else (t, from_, to, ts_kind)
        if key != self.run_key or ts_kind == M.TS_SCHED:  # one active count each
            self._close_run()
            self.run_key = key
            self.run_hdr = (t, from_, to, ts_kind)
            self.run_made_ns = time.monotonic_ns()
            if not self.pending_msgs and not self.sys_out:
                self.first_ns = self.run_made_ns
        self.run_bodies.append(msg)
        self.sys_made += 1
        self.sys_items += 1
        self.pending_msgs += 1

    def count_made(self) -> None:
        """Count the open run's messages as made (before the statistics are read)."""
        if self.run_bodies:
            self.stats.made(self.run_hdr[0], len(self.run_bodies) - self.run_counted)
            self.run_counted = len(self.run_bodies)

    def _close_run(self) -> None:
        if self.run_bodies:
            self.count_made()
            self.run_counted = 0
            t, from_, to, ts_kind = self.run_hdr
            try:
                # the encoder refuses what no decoder would build, so a body
                # that is not a term never makes the dispatcher refuse a batch
                blob = codec.dumps(self.run_bodies)
            except codec.Unencodable:
                blob = self._drop_unencodable()
            if blob is not None:
                self.sys_out.append(
                    Run(t, from_, to, ts_kind, len(self.run_bodies), blob, self.run_made_ns)
                )
            self.run_bodies = []
        self.run_key = None

    def _drop_unencodable(self) -> bytes | None:
        """Keep the bodies that are terms; the others never enter the queue
        (counted as ``unsendable``, logged once per run)."""
        keep = []
        why = None
        for body in self.run_bodies:
            try:
                codec.dumps(body)
                keep.append(body)
            except codec.Unencodable as e:
                why = e
        n = len(self.run_bodies) - len(keep)
        self.sys_made -= n
        self.sys_items -= n
        self.unsendable += n
        os.write(2, f"scheduler {self.sched_id}: {n} trace message(s) dropped: {why}\n".encode())
        self.run_bodies = keep
        return codec.dumps(keep) if keep else None

    def take_batch(self) -> list:
        self._close_run()
        out, self.sys_out = self.sys_out, []
        self.pending_msgs = 0
        return out

    def has_output(self) -> bool:
        return bool(self.sys_out or self.run_bodies)

    def batch_full(self) -> bool:
        """Enough messages for a batch: the scheduler sends it now."""
        return self.pending_msgs >= BATCH

    def table_event(self, ev: tuple) -> None:
        """``ev``: the event's kind and its arguments (``frames.EVENT_ARITY``)."""
        self._close_run()
        if not self.pending_msgs and not self.sys_out:
            self.first_ns = time.monotonic_ns()
        self.sys_out.append(TableEvent(ev[0], ev[1:]))
        self.sys_items += 1

    def peer(self, owner: int, signal_) -> None:
        self.peer_out.setdefault(owner, []).append(signal_)

    async def rpc(self, p, *request):
        """A BIF process ``p`` asks of the controller: the request waits in
        ``ctl_out`` for the scheduler's loop, and ``p`` until the reply."""
        self.ctl_out.append(Rpc(p.pid, request))
        result = await Op(RPC)
        if isinstance(result, BaseException):
            raise result
        return result


class Worker:
    """Start-up is a handshake: the scheduler binds its inbox, says hello to
    the controller (with the inbox's address, so schedulers may live on other
    hosts), and gets its scheduler id, the scheduler count and every peer's
    inbox address back in the welcome."""

    def __init__(self, sched_id, smp, endpoints, options, security=None, ctl_ident=None):
        self.sched_id = sched_id  # None until the controller gives a joining one its id
        self.dispatcher_gone = False  # a remote dispatcher stopped answering
        self.smp = smp
        self.ep = endpoints
        self.options = options
        self.security = security
        self.bad_frames = 0  # frames refused on any socket
        # closures (dill) are taken only from a controller this channel
        # authenticates: an ipc endpoint in a directory only this user may
        # open, or CURVE with the controller's server key
        ctl_ep = endpoints["ctl"]
        self.ctl_trusted = bool(security) or (
            ctl_ep.startswith("ipc://") and owner_only_dir(os.path.dirname(ctl_ep[6:]))
        )
        self.ctx = zmq.Context()
        self.ctl = self.ctx.socket(zmq.DEALER)
        self.ctl.setsockopt(zmq.ROUTING_ID, ctl_ident or new_routing_id())
        self.ctl.setsockopt(zmq.LINGER, 2000)
        curve_client(self.ctl, security)
        # with CURVE, watch the handshake: a key the controller refuses ends
        # this scheduler with a message instead of a silent wait
        self.ctl_monitor = (
            self.ctl.get_monitor_socket(
                zmq.EVENT_HANDSHAKE_FAILED_AUTH
                | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                | zmq.EVENT_HANDSHAKE_SUCCEEDED
            )
            if security
            else None
        )
        self.ctl.connect(endpoints["ctl"])
        self.poller = zmq.Poller()
        self.poller.register(self.ctl, zmq.POLLIN)
        self.inbox_ep = None
        self.auth = None
        if smp:
            self.inbox = self.ctx.socket(zmq.ROUTER)
            self.inbox.setsockopt(zmq.RCVHWM, HWM)
            self.inbox.setsockopt(zmq.MAXMSGSIZE, codec.MAX_FRAME)
            self.auth = Authenticator(self.ctx) if security else None
            curve_server(self.inbox, security)
            bind = endpoints["inbox"]
            self.inbox.bind(bind.format(sched_id) if "{}" in bind else bind)
            self.inbox_ep = self.inbox.getsockopt(zmq.LAST_ENDPOINT).decode()
            if self.inbox_ep.startswith("tcp://0.0.0.0:"):
                host = endpoints.get("advertise_host") or "127.0.0.1"
                self.inbox_ep = f"tcp://{host}:{self.inbox_ep.rsplit(':', 1)[1]}"
        # sent once the connection is up: a DEALER with no peer (a CURVE
        # handshake the controller refused) would block a plain send for ever
        self._hello = Hello(
            sched_id,
            self.inbox_ep,
            os.getpid(),
            socket_host(),
            security.get("public") if security else None,
        ).encode()
        welcome = self._wait_welcome(endpoints.get("start_timeout", 30))
        sched_id, nsched, inbox_map, allowed, dispatcher_pid, self.local, ids = welcome
        # who may send to this inbox (routing id -> sender, 0 the dispatcher),
        # with what key, and the routing ids this scheduler sends with
        self.in_ids: dict[bytes, int] = ids.get("in", {})
        self.out_ids: dict[int, bytes] = ids.get("out", {})
        self.keys = {
            j: (key.decode() if type(key) is bytes else key)
            for j, key in ids.get("keys", {}).items()
        }
        self.sched_id = sched_id
        self.nsched = nsched
        self.inbox_map = inbox_map
        if self.auth is not None:
            self.auth.allow(allowed)
        stats = Stats()
        self.transport = SmpTransport(sched_id, stats) if smp else None
        node_options = {k: v for k, v in options.items() if k != "max_processes"}
        self.node = Node(
            sched_id, nsched, smp=smp, transport=self.transport, stats=stats, **node_options
        )
        if options.get("max_processes") is not None:  # (limit, the node's shared semaphore)
            self.node.set_process_limit(*options["max_processes"])
        self.running = False
        self.stopping = False
        self.terminated = False  # SIGTERM: stop at once, handing nothing over
        self.peers: dict[int, zmq.Socket] = {}
        self.peer_sent = [0] * (nsched + 1)
        self.peer_recv = [0] * (nsched + 1)
        self.lost: set[int] = set()
        self.sys_batches = 0
        # causal order across schedulers: the most batches of each peer that
        # had been sent before a signal from that peer arrived here; each
        # batch carries it, and the dispatcher queues a batch only after
        # those (a send is queued before the receive it causes, as the seed's
        # enqueue at make time gives)
        self.after: list[int] = [0] * (self.nsched + 1)
        self.pub_seen = [0, 0, 0]
        self.last_pub = time.monotonic()
        self.parent_pid = os.getppid()
        self.dispatcher_pid = dispatcher_pid
        self._next_watch = 0.0
        self._start_heartbeat(ids.get("hb"))
        self.pending: dict = {}
        self.unsendable = 0
        self.backpressure_waits = 0
        self.deliveries = 0
        # time spent running processes (and, nonsmp, their trace ports): the
        # total in ns and, while a run of slices is under way, when it began;
        # one attribute, so the sampler thread reads both at once
        self.busy: tuple[int, int] = (0, 0)
        self.sampler: Sampler | None = None
        if smp:
            self.sys_sock = self.ctx.socket(zmq.DEALER)
            self.sys_sock.setsockopt(zmq.ROUTING_ID, ids["ingest"])
            self.sys_sock.setsockopt(zmq.LINGER, 5000)
            self.sys_sock.setsockopt(zmq.SNDHWM, HWM)
            curve_client(self.sys_sock, security)
            self.sys_sock.connect(endpoints["ingest"])
            self.sub = self.ctx.socket(zmq.SUB)
            self.sub.setsockopt(zmq.SUBSCRIBE, b"")
            curve_client(self.sub, security)
            for ep in endpoints["pub"]:
                self.sub.connect(ep)
            self.poller.register(self.inbox, zmq.POLLIN)
            self.poller.register(self.sub, zmq.POLLIN)

    def _wait_welcome(self, timeout: float):
        deadline = time.monotonic() + timeout
        parent = os.getppid()
        poller = zmq.Poller()
        poller.register(self.ctl, zmq.POLLIN)
        if self.ctl_monitor is not None:
            poller.register(self.ctl_monitor, zmq.POLLIN)
        failed = 0
        try:
            while True:
                if self._hello is not None:
                    try:
                        self.ctl.send(self._hello, zmq.NOBLOCK)
                        self._hello = None
                    except zmq.Again:
                        pass  # no connection yet: the handshake's events come first
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"no welcome from the controller at {self.ep['ctl']} within {timeout:g} s"
                    )
                wait_ms = 2 if self._hello is not None else 100  # hello still to send
                events = dict(poller.poll(min(wait_ms, int(left * 1000) + 1)))
                if self.ctl_monitor is not None and self.ctl_monitor in events:
                    failed += self._handshake_event(failed)
                if self.ctl not in events:
                    if os.getppid() != parent:
                        raise SystemExit(0)  # the controller went away: never linger
                    continue
                msg = self._welcome_frame()
                if msg is not None:
                    return msg
        finally:
            if self.ctl_monitor is not None:
                self.ctl.disable_monitor()
                self.ctl_monitor.close(linger=0)
                self.ctl_monitor = None

    def _handshake_event(self, failed: int) -> int:
        """One event of the CURVE handshake with the controller: a refused
        key ends this scheduler at once; a handshake that fails three times
        (a server key that is not the controller's, or a controller without
        CURVE) too.  Returns 1 for a failure to count."""

        ev = recv_monitor_message(self.ctl_monitor)
        ep = self.ep["ctl"]
        if ev["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            key = self.security["public"]
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

    def _welcome_frame(self) -> Welcome | None:
        """The welcome (or None for anything else, a bad frame counted)."""
        try:
            msg = codec.loads_frame(self.ctl.recv())
            kind = frame_kind(msg)
            if kind == Welcome.KIND:
                return Welcome.decode(msg)
            if kind == Refused.KIND:
                reason = Refused.decode(msg).reason
                raise PermissionError(f"controller refused this scheduler: {reason}")
        except ProtocolError as e:
            self._bad("control", "the controller", e)
        return None

    # ------------------------------------------------------------------ io
    def send_ctl(self, frame) -> None:
        """Send a frame record (``Ready``, ``Rpc``, ``Bye``) to the controller."""
        self.ctl.send(frame.encode())

    def _bad(self, where: str, sender: str, e: BaseException, size: int = 0) -> None:
        """Count and log a refused frame (the log is bounded under a flood)."""
        self.bad_frames += 1
        if self.bad_frames <= 100 or self.bad_frames % 1000 == 0:
            os.write(
                2,
                f"scheduler {self.sched_id or '?'}: rejected {where} frame "
                f"of {size} bytes from {sender}: {type(e).__name__}: {e}\n".encode(),
            )

    def _queue_frame(self, sock, frame: bytes) -> None:
        """Send without blocking; what the socket will not take now waits here,
        in order, and the scheduler stops running processes until it is gone
        (lossless push-back when the dispatcher or a peer cannot keep up)."""
        q = self.pending.get(sock)
        if q is None:
            q = self.pending[sock] = deque()
        q.append(frame)
        self._drain(sock, q)

    def _drain(self, sock, q) -> None:
        while q:
            try:
                sock.send(q[0], zmq.NOBLOCK)
            except zmq.Again:
                self.backpressure_waits += 1
                return
            q.popleft()

    def drain_all(self) -> bool:
        """Try every backlog; True when nothing is left waiting."""
        for sock, q in self.pending.items():
            if q:
                self._drain(sock, q)
        return not any(self.pending.values())

    def flush_sys(self) -> None:
        t = self.transport
        if t is not None and t.has_output():
            self._queue_frame(
                self.sys_sock, Batch(self.sched_id, t.take_batch(), list(self.after)).encode()
            )
            self.sys_batches += 1

    def flush(self) -> None:
        t = self.transport
        if t is None:
            return
        self.flush_sys()
        for owner, sigs in t.peer_out.items():
            if not sigs:
                continue
            if owner in self.lost:
                self.node.stats.messages_to_dead += len(sigs)
                continue
            try:
                frame = Peer(self.sched_id, sigs, self.sys_batches).encode()
            except codec.Unencodable:
                sigs, frame = self._sendable(owner, sigs)
                if not sigs:
                    continue
            self._queue_frame(self.peer_socket(owner), frame)
            self.peer_sent[owner] += len(sigs)
        t.peer_out = {}

    def peer_socket(self, owner: int):
        """The DEALER to scheduler ``owner``'s inbox, with the routing id it
        knows this scheduler by (made on first use)."""
        sock = self.peers.get(owner)
        if sock is None:
            sock = self.ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.ROUTING_ID, self.out_ids[owner])
            sock.setsockopt(zmq.LINGER, 5000)
            sock.setsockopt(zmq.SNDHWM, HWM)
            curve_client(sock, self.security, self.inbox_map[owner][1])
            sock.connect(self.inbox_map[owner][0])
            self.peers[owner] = sock
        return sock

    def _sendable(self, owner: int, sigs: list) -> tuple[list, bytes | None]:
        """The signals of a frame that can travel as data; the others (a
        message holding a closure, say) are dropped, counted and logged."""
        keep = []
        for sig in sigs:
            try:
                codec.dumps(sig)
                keep.append(sig)
            except codec.Unencodable as e:
                self.unsendable += 1
                os.write(
                    2,
                    f"scheduler {self.sched_id}: {describe_signal(sig)} "
                    f"cannot travel to scheduler {owner}: {e}\n".encode(),
                )
        return keep, (Peer(self.sched_id, keep, self.sys_batches).encode() if keep else None)

    # ------------------------------------------------------------------ inbound
    def handle_inbox(self, rid: bytes, parts: list, user=None) -> None:
        """A message on the inbox: a frame from a peer scheduler or the
        dispatcher, accepted only from the routing id (and, with CURVE, the
        key) that sender was given.  The whole frame is checked before any of
        it counts, so a malformed one changes nothing."""
        sender = self.in_ids.get(rid)
        if sender is None:
            raise ProtocolError("not from the dispatcher or a scheduler of this emulator")
        if self.security is not None and user != self.keys.get(sender):
            raise ProtocolError(f"{_name(sender)}'s routing id with another key")
        if len(parts) != 1:
            raise ProtocolError(f"a message of {len(parts)} parts, not 1")
        obj = codec.loads_frame(parts[0], funs="loaded")
        kind = frame_kind(obj)
        if kind == Peer.KIND and sender:
            peer = Peer.decode(obj, sender, self.sched_id, self.nsched)
            self.peer_recv[sender] += len(peer.signals)
            if peer.batches is not None and peer.batches > self.after[sender]:
                self.after[sender] = peer.batches
            for sig in peer.signals:
                try:
                    self.handle_signal(sig)
                except Exception as e:  # e.g. a spawn whose arguments do not fit the body
                    os.write(
                        2,
                        f"scheduler {self.sched_id}: {describe_signal(sig)} "
                        f"from scheduler {sender} failed: {type(e).__name__}: {e}\n".encode(),
                    )
        elif kind == DELIVERIES and not sender:  # from the dispatcher: whole runs
            runs = decode_deliveries(obj, self._mine)
            self.deliveries += sum(len(terms) for _to, terms in runs)
            deliver = self.node.deliver_sys_run
            for to, terms in runs:
                deliver(to, terms)
        elif kind == FinAck.KIND and not sender:
            FinAck.decode(obj)
            self.fin_acked = True
        else:
            raise ProtocolError(f"a {kind!r} frame, which {_name(sender)} does not send")

    def _mine(self, pid) -> bool:
        if type(pid) is Port:  # a port a process of this scheduler opened
            return port_owner(pid, self.nsched) == self.sched_id
        return type(pid) is Pid and pid_owner(pid, self.nsched) == self.sched_id

    def handle_signal(self, sig) -> None:
        """One checked signal record from a peer (``smp.wire.protocol``)."""
        node = self.node
        t = type(sig)
        if t is Msg:
            node.deliver_remote(sig.to, sig.msg, sig.token)
        elif t is Spawn:
            try:
                node.spawn_local(sig.pid, sig.fun, sig.args, None, sig.link_to, sig.inherit)
            except BaseException:
                node.unclaim_process()  # the spawning scheduler took its place
                raise
        elif t is Link:
            p = node.procs.get(sig.to)
            if p is None:
                node.transport.peer(
                    pid_owner(sig.from_, self.nsched),
                    Exit(sig.from_, sig.to, Atom("noproc"), True, None).encode(),
                )
            else:
                node.link_arrived(p, sig.from_, sig.inherit)
        elif t is Unlink:
            p = node.procs.get(sig.to)
            if p is not None:
                node.unlink_arrived(p, sig.from_)
        elif t is PortCmd:
            node.remote_port_command(sig.port, sig.caller, sig.data, sig.reply)
        elif t is PortReply:
            node.port_reply_arrived(sig.caller, sig.value)
        elif t is TraceFlag:
            node.set_trace_flag(sig.pid, sig.flags, sig.on)
        elif t is Exit:
            p = node.procs.get(sig.to)
            if p is not None:
                node.exit_signal_arrived(p, sig.from_, sig.reason, sig.link, sig.token)

    def handle_state(self, raw: bytes) -> None:
        """A publication of the dispatcher (``protocol.Publication``)."""
        pub = Publication.loads(raw)
        self.pub_seen[pub.socket] = pub.seq
        self.last_pub = time.monotonic()
        node, body = self.node, pub.body
        t = type(body)
        if t is Snap:
            node.apply_snapshot(body.snapshot)
        elif t is Dead:
            node.dead_remote.update(body.pids)
        elif t is Tracers:
            node.remote_tracers.update(body.pids)
        elif t is TracerPorts:
            node.remote_tracer_ports = set(body.ports)
        elif t is Registry:
            node.registry = dict(body.names)

    # ------------------------------------------------------------------ commands
    def command(self, cmd: str, args):
        """Run a command from the controller (the scheduler's loop)."""
        handler = self.COMMANDS.get(cmd) if type(cmd) is str else None
        if handler is None or type(args) is not tuple:
            raise BadArg(f"unknown scheduler command {cmd!r}")
        return handler(self, *args)

    def _cmd_spawn(self, fun, fargs, kept):
        """Past the process limit: ``Error(system_limit)`` to the caller."""
        node = self.node
        node.claim_process()
        try:
            pid = node.new_pid()
            node.spawn_local(pid, fun, fargs, kept=kept)
        except BaseException:
            node.unclaim_process()
            raise
        return pid

    def _cmd_spawn_many(self, fun, arglist):
        """All of them or, past the process limit, none (``Error(system_limit)``)."""
        node = self.node
        claimed = 0
        try:
            for _ in arglist:
                node.claim_process()
                claimed += 1
            out = []
            for fargs in arglist:
                pid = node.new_pid()
                node.spawn_local(pid, fun, fargs)
                out.append(pid)
                claimed -= 1
        finally:
            for _ in range(claimed):  # the places of what was not spawned
                node.unclaim_process()
        return out

    def _cmd_define(self, m, f, arity, fn):
        node = self.node
        node.functions[(m, f, arity)] = fn
        return True

    def _cmd_resume(self, *args):
        if self.smp and args:
            self.wait_published(*args[:2])
        self.running = True
        return True

    def _cmd_wait_published(self, *args):
        return self.wait_published(*args)

    def _cmd_pause(self):
        self.running = False
        self.flush()
        return True

    def _cmd_status(self):
        return self.status()

    def _cmd_sample(self, interval, t0=None):
        """Sample this scheduler's counters every ``interval`` s from ``t0``
        (the controller's monotonic clock, the same on its host; a scheduler
        on another host counts from now), in a thread of its own."""
        if self.sampler is not None:
            self.sampler.stop()
        if not self.local or t0 is None:
            t0 = time.monotonic()
        self.sampler = Sampler(self.read_counters, interval, t0, ("queued_max",)).start()
        return True

    def _cmd_series(self, final=True):
        """The samples taken (``final``: a last one now, and sampling stops);
        not final: only the latest sample, ``(t_s, counters)``."""
        s = self.sampler
        if s is None:
            return None
        if not final:
            return s.latest()
        s.stop()
        return s.to_json()

    def read_counters(self) -> dict:
        """This scheduler's counters now (the sampler thread): made, messages
        sent, and the seconds spent running processes; nonsmp, where the
        scheduler delivers what it makes, delivered and dropped (by reason)
        too.  Each read is of one int or one C-level pass over a Counter, so
        the running loop never leaves it half-updated."""
        st = self.node.stats
        busy, since = self.busy
        if since:
            busy += time.monotonic_ns() - since
        t = self.transport
        d = {
            "made": t.sys_made if t is not None else sum(st._made.values()),
            "messages": st.messages_sent,
            "busy_s": busy / 1e9,
        }
        if t is None:
            d["delivered"] = sum(st._delivered.values())
            dropped = list(st._dropped.items())
            d["dropped"] = sum(n for _, n in dropped)
            for (_, reason), n in dropped:
                key = "dropped_by_reason." + reason
                d[key] = d.get(key, 0) + n
            d["queued"] = d["queued_max"] = 0
        return d

    def _cmd_stats(self):
        node = self.node
        if self.transport is not None:
            self.transport.count_made()
        d = node.stats.as_dict()
        d["processes"] = sum(1 for p in node.procs.values() if p.status != "exited")
        d["bad_frames"] = self.bad_frames
        d["unsendable"] = self.unsendable + (self.transport.unsendable if self.transport else 0)
        return d

    def _cmd_messages(self, pid, start=0):
        node = self.node
        p = node.procs.get(pid)
        if p is None or p.kept is None:
            raise BadArg(f"{pid!r} is not a collector")
        return p.kept[start:]

    def _cmd_process_info(self, pid):
        node = self.node
        p = node.procs.get(pid)
        if p is None or p.status == "exited":
            return None
        return {
            "status": p.status,
            "links": sorted(p.links, key=repr),
            "trap_exit": p.trap_exit,
            "registered_name": p.reg_name,
            "message_queue_len": len(p.mailbox),
            "current_function": p.current,
            "last_calls": (list(p.saved_calls) if p.saved_calls is not None else Atom("false")),
            "exit_reason": p.exit_reason,
            "heap": p.heap.gc_values(),
            "token": tuple(p.token) if p.token else [],
        }

    def _cmd_alive(self, pid):
        node = self.node
        return node.is_alive(pid)

    def _cmd_valid_port(self, port):
        node = self.node
        return node.is_valid_tracer_port(port)

    def _cmd_exit(self, *args):
        node = self.node
        return node.kill_from_outside(*args)

    def _cmd_register(self, *args):
        node = self.node
        node.register(*args)
        return True

    def _cmd_set_reg(self, name, pid):
        node = self.node
        node.set_reg(name, pid)
        return True

    def _cmd_unset_reg(self, name, owner):
        node = self.node
        node.unset_reg(name, owner)
        return True

    def _cmd_whereis(self, name):
        node = self.node
        return node.whereis(name)

    def _cmd_bif(self, *args):
        node = self.node
        return call_bif(LocalBackend(node), None, *args)

    def _cmd_trace_apply(self, *args):
        node = self.node
        return node.set_trace_local(*args)

    def _cmd_mark_tracer(self, pid):
        node = self.node
        return node.mark_tracer(pid)

    def _cmd_trace_info(self, *args):
        node = self.node
        return node.trace_info_local(*args)

    def _cmd_pattern(self, *args):
        node = self.node
        return node.set_pattern_local(*args)

    def _cmd_open_trace_port(self, kind, a, kw):
        node = self.node
        port_id = node.new_port_id()
        port_id = type(port_id)(port_id.number - self.sched_id)  # owner 0: trace ports
        node.trace_ports[port_id] = open_trace_port(kind, *a, **kw)
        return port_id

    def _cmd_trace_port_call(self, port_id, method, a):
        node = self.node
        tp = node.trace_ports.get(port_id)
        if tp is None:
            raise BadArg(f"no trace port {port_id!r}")

        def close():
            tp.close()
            node.state.trace_check_exiting(port_id, smp=False)

        return port_call(tp, method, a, close)

    def _cmd_reply(self, pid, value):
        node = self.node
        p = node.procs.get(pid)
        if p is not None and p.status == "suspended" and p.pending_exit is None:
            p.resume = value
            node._make_runnable(p)
        return None

    def _cmd_stop(self):
        self.stopping = True
        return True

    def _cmd_scheduler_lost(self, k, pids):
        self.scheduler_lost(k, pids)
        return True

    #: The scheduler commands: each name and its handler (``_cmd_<name>``).
    COMMANDS = {
        "spawn": _cmd_spawn,
        "spawn_many": _cmd_spawn_many,
        "define": _cmd_define,
        "resume": _cmd_resume,
        "wait_published": _cmd_wait_published,
        "pause": _cmd_pause,
        "status": _cmd_status,
        "sample": _cmd_sample,
        "series": _cmd_series,
        "stats": _cmd_stats,
        "messages": _cmd_messages,
        "process_info": _cmd_process_info,
        "alive": _cmd_alive,
        "valid_port": _cmd_valid_port,
        "exit": _cmd_exit,
        "register": _cmd_register,
        "set_reg": _cmd_set_reg,
        "unset_reg": _cmd_unset_reg,
        "whereis": _cmd_whereis,
        "bif": _cmd_bif,
        "trace_apply": _cmd_trace_apply,
        "mark_tracer": _cmd_mark_tracer,
        "trace_info": _cmd_trace_info,
        "pattern": _cmd_pattern,
        "open_trace_port": _cmd_open_trace_port,
        "trace_port_call": _cmd_trace_port_call,
        "reply": _cmd_reply,
        "stop": _cmd_stop,
        "scheduler_lost": _cmd_scheduler_lost,
    }

    def scheduler_lost(self, k: int, pids) -> None:
        """Scheduler ``k`` died: its processes are gone; links to them fire."""
        self.lost.add(k)
        sock = self.peers.pop(k, None)
        if sock is not None:
            self.pending.pop(sock, None)
            sock.close(linger=0)
        node = self.node
        gone = set(pids)
        node.dead_remote.update(gone)
        node.remote_tracers.difference_update(gone)
        for p in list(node.procs.values()):
            for pid in p.links & gone:
                node.exit_signal_arrived(p, pid, Atom("killed"), True)

    def wait_published(self, seqs, timeout: float = 10.0) -> bool:
        """Take state publications until each PUB socket's ``seqs`` is seen,
        so the replica is current before any process runs."""
        deadline = time.monotonic() + timeout
        while any(self.pub_seen[i] < n for i, n in enumerate(seqs)):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"scheduler {self.sched_id}: state replica behind "
                    f"({self.pub_seen} < {list(seqs)})"
                )
            if self.sub.poll(int(left * 1000) + 1):
                self.handle_state(self.sub.recv())
        return True

    def status(self) -> dict:
        node = self.node
        nd = node.next_deadline()
        return {
            "idle": not node.runq,
            "timer": nd is not None,
            "timer_in": None if nd is None else max(0.0, nd - time.monotonic()),
            "peer_sent": list(self.peer_sent),
            "peer_recv": self.peer_recv,
            "sys_made": self.transport.sys_made if self.transport else 0,
            "sys_items": self.transport.sys_items if self.transport else 0,
            "deliveries": self.deliveries,
            "procs": len(node.procs),
            "runq": len(node.runq),
            "busy": [repr(p.pid) for p in list(node.runq)[:5]],
            "backlog": sum(len(q) for q in self.pending.values()),
            "backpressure_waits": self.backpressure_waits,
            "bad_frames": self.bad_frames,
        }

    def handle_ctl(self, raw: bytes) -> None:
        """A command from the controller: ``(id or None, command, args)``.
        Function references may be imported; a frame with code (a closure)
        is taken only when this channel is authenticated as the controller."""
        try:
            req_id, cmd, args = Request.decode(
                codec.loads_frame(raw, code_ok=self.ctl_trusted, funs="import")
            )
        except ProtocolError as e:  # counted, logged, ignored
            self._bad("control", "the controller", e, len(raw))
            return
        try:
            value = self.command(cmd, args)
            ok = True
        except BaseException as e:  # sent back to the caller, never kills the scheduler
            value, ok = e, False
        if req_id is not None:
            self.flush()
            self.ctl.send(Reply(req_id, ok, value).encode())

    # ------------------------------------------------------------------ loop
    def peers_alive(self) -> bool:
        """Heartbeat check: stop when the controller or the dispatcher is gone,
        so a run never leaves a scheduler behind.  On the controller's host the
        OS says so; from another host, the dispatcher's heartbeats stop."""
        if self.local:
            if os.getppid() != self.parent_pid:
                return False
            return self.dispatcher_pid is None or _pid_alive(self.dispatcher_pid)
        if self.smp and time.monotonic() - self.last_pub > HEARTBEAT_TIMEOUT:
            return False
        return True

    def _start_heartbeat(self, ident: bytes | None) -> None:
        """A scheduler on another host tells the controller every second that
        it is there (the controller takes one silent for 5 s as lost; a local
        one is watched by the OS).  A thread of its own, on a socket of its
        own (the routing id the welcome gave it), so a process that holds
        the scheduler for long does not silence it: only a link that is down
        or a stopped process does.  Never blocks: a link that is down keeps
        at most a few of them."""
        self._hb_stop = threading.Event()
        self._hb_thread = None
        if self.local or ident is None:
            return

        def beat():
            sock = self.ctx.socket(zmq.DEALER)
            try:
                sock.setsockopt(zmq.ROUTING_ID, ident)
                sock.setsockopt(zmq.LINGER, 0)
                sock.setsockopt(zmq.SNDHWM, 4)
                curve_client(sock, self.security)
                sock.connect(self.ep["ctl"])
                frame = Heartbeat(self.sched_id).encode()
                while not self._hb_stop.is_set():
                    try:
                        sock.send(frame, zmq.NOBLOCK)
                    except zmq.Again:
                        pass
                    self._hb_stop.wait(HEARTBEAT_EVERY)
            finally:
                sock.close(linger=0)

        self._hb_thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
        self._hb_thread.start()

    def _stop_heartbeat(self) -> None:
        if self._hb_thread is not None:
            self._hb_stop.set()
            self._hb_thread.join(2)

    def loop(self) -> None:
        node = self.node
        self.send_ctl(Ready(self.sched_id, os.getpid()))
        while not self.stopping:
            now = time.monotonic()
            if now >= self._next_watch:
                self._next_watch = now + 0.25
                if not self.peers_alive():
                    self.dispatcher_gone = True
                    break
            clear = self.drain_all() if self.pending else True
            if self.running and clear:
                began = time.monotonic_ns()
                self.busy = (self.busy[0], began)
                ran = node.run_some(32)
                self.busy = (self.busy[0] + (time.monotonic_ns() - began if ran else 0), 0)
            if self.sampler is not None:
                self.sampler.poll()  # due while the loop kept the sampler thread waiting
            busy = self.running and clear and node.runq
            t = self.transport
            if t is not None and t.ctl_out:
                for request in t.ctl_out:
                    self.send_ctl(request)
                t.ctl_out = []
            if not busy:
                self.flush()
            elif (
                t is not None
                and (t.has_output() or t.peer_out)
                and (
                    t.peer_out
                    or t.batch_full()
                    or time.monotonic_ns() - t.first_ns > FLUSH_AFTER_NS
                )
            ):
                self.flush()  # bound the size and latency of a batch while processes run
            timeout = 0
            if not busy:
                timeout = 100 if clear else 5
                if self.running:
                    nd = node.next_deadline()
                    if nd is not None:
                        timeout = max(0, min(timeout, int((nd - time.monotonic()) * 1000) + 1))
            events = dict(self.poller.poll(timeout))
            if self.ctl in events:
                for _ in range(64):
                    try:
                        raw = self.ctl.recv(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    self.handle_ctl(raw)
            if self.smp:
                if self.sub in events:
                    for _ in range(256):
                        try:
                            raw = self.sub.recv(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        try:
                            self.handle_state(raw)
                        except Exception as e:
                            self._bad("state", "the dispatcher", e, len(raw))
                if self.inbox in events and self.running:
                    for _ in range(64):
                        if not self.take_inbox(zmq.NOBLOCK):
                            break
        self.shutdown()

    def take_inbox(self, flags: int = 0) -> bool:
        """Take one message off the inbox (False: none waiting); a malformed
        one is counted and logged with its sender, never fatal."""
        try:
            rid, parts, user = recv_from(self.inbox, self.security is not None, flags)
        except zmq.Again:
            return False
        try:
            self.handle_inbox(rid, parts, user)
        except Exception as e:
            sender = self.in_ids.get(rid)
            self._bad(
                "inbox",
                describe_peer(rid, user) if sender is None else _name(sender),
                e,
                sum(len(p) for p in parts),
            )
        return True

    def close_trace_ports(self) -> None:
        """nonsmp: close this scheduler's tracer ports, so a file port writes its
        last buffer (as ``trace_file_drv`` does on close) whatever ends the
        scheduler: a stop, the controller gone, SIGTERM or a crash."""

        for port_id, tp in self.node.trace_ports.items():
            if not tp.closed:
                err = close_at_exit(tp)
                if err is not None:
                    os.write(
                        2,
                        f"scheduler {self.sched_id}: closing trace port {port_id!r}: "
                        f"{err}\n".encode(),
                    )

    def shutdown(self) -> None:
        """Hand over explicitly: the last batch is acknowledged before exit."""
        self.close_trace_ports()
        if self.terminated:
            return
        self.flush()
        deadline = time.monotonic() + 10
        while not self.drain_all() and time.monotonic() < deadline and not self.dispatcher_gone:
            if self.smp and self.inbox.poll(5):
                self.take_inbox()
        if self.smp and not self.dispatcher_gone:
            self.fin_acked = False
            self.sys_sock.send(Fin(self.sched_id, self.sys_batches).encode())
            deadline = time.monotonic() + 5
            while (
                not self.fin_acked
                and time.monotonic() < deadline
                and _pid_alive(self.dispatcher_pid)
            ):
                if self.inbox.poll(100):
                    self.take_inbox()
        # the counts, and what this scheduler made and took from the dispatcher
        # (what the controller says was delivered if the dispatcher is lost)
        self.send_ctl(
            Bye(
                self.sched_id,
                {
                    **self.node.stats.as_dict(),
                    "deliveries": self.deliveries,
                    "sys_made": self.transport.sys_made if self.transport else 0,
                },
            )
        )
        if self.auth is not None:
            self.auth.stop()
        self._stop_heartbeat()
        for s in (
            [self.ctl]
            + list(self.peers.values())
            + ([self.sys_sock, self.inbox, self.sub] if self.smp else [])
        ):
            s.close(linger=2000)
        self.ctx.term()


def _name(sender: int) -> str:
    return f"scheduler {sender}" if sender else "the dispatcher"


def _pid_alive(pid) -> bool:
    if pid is None:
        return True
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def socket_host() -> str:

    return socket.gethostname()


def scheduler_main(sched_id, smp, endpoints, options, security=None, ctl_ident=None) -> None:
    """Entry point of a scheduler OS process (``sched_id`` None: a scheduler
    that joins from outside and is given its id by the controller)."""
    tune_gc()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the controller decides when we stop
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    hold = rundir.hold(endpoints.get("dir"))
    try:
        try:
            w = Worker(sched_id, smp, endpoints, options, security, ctl_ident)
        except (PermissionError, TimeoutError) as e:  # refused, or no controller: say so
            os.write(2, f"scheduler: {e}\n".encode())
            sys.exit(3)
        except Exception:
            traceback.print_exc()
            sys.exit(3)

        # the controller gone while an emulated process never gives the loop
        # back: the watchdog ends this scheduler (rundir.watch_parent)
        rundir.watch_parent(
            endpoints.get("dir"),
            hold,
            noticed=lambda: w.stopping or w.dispatcher_gone,
            flush=w.close_trace_ports,
        )

        # SIGTERM (close() giving up on a stop, or the owner's exit): leave the
        # loop, close the ports, exit; SIGALRM's default action ends a process
        # that cannot (blocked writing to a port nobody reads)
        def on_sigterm(*_):
            w.stopping = w.terminated = True
            signal.alarm(5)

        signal.signal(signal.SIGTERM, on_sigterm)
        try:
            w.loop()
        finally:
            w.close_trace_ports()  # also when the loop dies of an exception
    finally:
        rundir.release(endpoints.get("dir"), hold)
