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

The rest has no socket and lives beside this module: the start-up
handshake and the heartbeat thread (``schedulers.membership``), what the
``Node`` hands on, collected for the loop to send (``schedulers.transport``),
what a peer's signal or a publication does to the ``Node``
(``schedulers.inbound``), and the controller's commands
(``schedulers.commands``, which ask the loop for what needs a socket).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import traceback
from collections import deque

import psutil
import zmq

from smp.core.errors import BadArg, ProtocolError
from smp.core.stats import Stats
from smp.core.terms import Pid, Port
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
from smp.wire.frames import DELIVERIES, Batch, decode_deliveries
from smp.wire.protocol import (
    Bye,
    Fin,
    FinAck,
    Hello,
    Peer,
    Publication,
    Ready,
    Reply,
    Request,
    describe_signal,
    frame_kind,
)
from smp.wire.runtime import tune_gc

from .commands import SchedulerCommands
from .engine import Node, pid_owner, port_owner
from .inbound import apply_publication, apply_signal
from .lockstep import Held
from .membership import CONNECT_EVENTS, HANDSHAKE_EVENTS, HeartbeatThread, wait_welcome
from .transport import SmpTransport

__all__ = ["scheduler_main", "SmpTransport"]

HWM = 1000  # frames (batches) a socket buffers before push-back
FLUSH_AFTER_NS = 1_000_000  # a batch waits at most ~1 ms while processes run
HEARTBEAT_TIMEOUT = 5.0  # s without a word from a remote dispatcher: it is gone


#: how long the loop runs processes before it looks at its sockets again
#: (a controller's request, a peer's signal): at most 32 slices, and none
#: begun after this many ns
SLICES_NS = 3_000_000


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
        # this scheduler with a message instead of a silent wait; over tcp,
        # watch the connection too: nothing listening ends it in seconds
        tcp = endpoints["ctl"].startswith("tcp://")
        monitor = (
            self.ctl.get_monitor_socket(HANDSHAKE_EVENTS | (CONNECT_EVENTS if tcp else 0))
            if security or tcp
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
        hello = Hello(
            sched_id,
            self.inbox_ep,
            os.getpid(),
            socket_host(),
            security.get("public") if security else None,
        ).encode()
        welcome = wait_welcome(
            self.ctl,
            monitor,
            hello,
            endpoints["ctl"],
            security,
            endpoints.get("start_timeout", 30),
            self._bad,
        )
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
        # the controller's commands: the policy, on the node (the sockets stay here)
        self.cmds = SchedulerCommands(self.node, self, self.local)
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
        #: while the controller steps this scheduler: what it holds (``schedulers.lockstep``)
        self.held: Held | None = None
        self.last_pub = time.monotonic()
        self.parent_pid = os.getppid()
        self.dispatcher_pid = dispatcher_pid
        self._next_watch = 0.0
        # a scheduler on another host says it is there (a local one: the OS does)
        self.heartbeat = (
            None
            if self.local or ids.get("hb") is None
            else HeartbeatThread(self.ctx, ids["hb"], sched_id, endpoints["ctl"], security).start()
        )
        self.pending: dict = {}
        self.unsendable = 0
        self.backpressure_waits = 0
        self.deliveries = 0
        # time spent running processes (and, nonsmp, their trace ports): the
        # total in ns and, while a run of slices is under way, when it began;
        # one attribute, so the sampler thread reads both at once
        self.busy: tuple[int, int] = (0, 0)
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
            if self.held is not None:
                self.held.buffer_signals(sender, peer.signals, peer.batches)
                return
            self._apply_peer(sender, peer.signals, peer.batches)
        elif kind == DELIVERIES and not sender:  # from the dispatcher: whole runs
            runs = decode_deliveries(obj, self._mine)
            if self.held is not None:
                self.held.buffer_deliveries(runs)
                return
            self.deliveries += sum(len(terms) for _to, terms in runs)
            deliver = self.node.deliver_sys_run
            for to, terms in runs:
                deliver(to, terms)
        elif kind == FinAck.KIND and not sender:
            FinAck.decode(obj)
            self.fin_acked = True
        else:
            raise ProtocolError(f"a {kind!r} frame, which {_name(sender)} does not send")

    def _apply_peer(self, sender: int, signals, batches) -> None:
        self.peer_recv[sender] += len(signals)
        if batches is not None and batches > self.after[sender]:
            self.after[sender] = batches
        for sig in signals:
            try:
                apply_signal(self.node, sig)
            except Exception as e:  # e.g. a spawn whose arguments do not fit the body
                os.write(
                    2,
                    f"scheduler {self.sched_id}: {describe_signal(sig)} "
                    f"from scheduler {sender} failed: {type(e).__name__}: {e}\n".encode(),
                )

    def _mine(self, pid) -> bool:
        if type(pid) is Port:  # a port a process of this scheduler opened
            return port_owner(pid, self.nsched) == self.sched_id
        return type(pid) is Pid and pid_owner(pid, self.nsched) == self.sched_id

    def handle_state(self, raw: bytes) -> None:
        """A publication of the dispatcher (``protocol.Publication``)."""
        pub = Publication.loads(raw)
        self.pub_seen[pub.socket] = pub.seq
        self.last_pub = time.monotonic()
        if self.held is not None and pub.socket == 0:  # the ingest thread's: when stepped
            self.held.in_pubs.append(pub.body)
            return
        apply_publication(self.node, pub.body)

    # ------------------------------------------------------------------ for the commands
    def peer_lost(self, k: int) -> None:
        """Scheduler ``k`` died: its socket is closed, what waits for it dropped,
        and nothing more is sent to it (``SchedulerCommands.scheduler_lost``)."""
        self.lost.add(k)
        sock = self.peers.pop(k, None)
        if sock is not None:
            self.pending.pop(sock, None)
            sock.close(linger=0)

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

    def wait_peer(self, sender: int, n: int, timeout: float = 10.0) -> bool:
        """Take inbox frames until ``n`` signals from scheduler ``sender``
        have been applied (a spawn it sent before a BIF that names the new
        process, say); False when ``sender`` was lost or ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        while self.peer_recv[sender] < n and sender not in self.lost:
            if self.held is not None and self.held.waiting_from(sender):
                self._step_arrive(sender)  # stepped: the signals held here first
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self.inbox.poll(int(left * 1000) + 1):
                self.take_inbox(zmq.NOBLOCK)
        return self.peer_recv[sender] >= n

    def wait_deliveries(self, n: int, timeout: float = 10.0) -> bool:
        """Paused: take inbox frames until ``n`` messages from the dispatcher
        are in their mailboxes (what a run cut short had delivered); a peer's
        signals met on the way are applied as they come.  False when
        ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while self.deliveries < n:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self.inbox.poll(int(left * 1000) + 1):
                self.take_inbox(zmq.NOBLOCK)
        return True

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
            value = self.cmds.command(cmd, args)
            ok = True
        except BaseException as e:  # sent back to the caller, never kills the scheduler
            value, ok = e, False
        if req_id is not None:
            if self.held is None:  # stepped: nothing leaves unless released
                self.flush()
            self.ctl.send(Reply(req_id, ok, value).encode())

    # ------------------------------------------------------------------ stepped
    def step(self, what: str, args: tuple):
        """One step of the controller stepping this scheduler through a
        schedule (``schedulers.lockstep``): ``begin`` (with the pids of its
        passive collectors), ``start`` (their first slices), ``slice``,
        ``cut``, ``batch``, ``signal`` (to a peer), ``rpc`` (of a pid),
        ``arrive`` (from a peer, 0: the dispatcher), ``publish`` and
        ``timer`` (of a pid or a port)."""
        if what == "begin":
            if not self.smp or self.running or self.held is not None:
                raise BadArg("only a paused smp scheduler not stepped yet begins stepping")
            (passive,) = args
            self.flush()  # what the setup made leaves first
            self.held = Held()
            self.held.base_items = self.transport.sys_items
            self.held.cut = self.sys_batches  # batches count on from those sent
            self.node.passive = set(passive)
            self.node.fire_timers = _no_timers  # a stepped scheduler's time never comes
            self.node.monotonic = _stopped_clock(time.monotonic())
            return True
        h, node = self.held, self.node
        if h is None:
            raise BadArg("this scheduler is not being stepped")
        if what == "start":
            return h.start(node, self.transport, self.after, args[0])
        if what == "slice":
            return h.slice(node, self.transport, self.after)
        if what == "cut":
            self._step_cut()
            return True
        if what == "timer":
            result = h.fire_timer(node, args[0])
            self._step_cut()
            return result
        if what == "next_after":  # what the next held batch waits for at the dispatcher
            return h.batches[0][2] if h.batches else None
        if what == "batch":
            if not h.batches:
                raise BadArg(f"scheduler {self.sched_id} holds no batch")
            frame, items, _after = h.batches.popleft()
            self.sys_sock.send(frame)
            self.sys_batches += 1
            h.released_items += items
            return items
        if what == "signal":
            (owner,) = args
            if not h.sigs.get(owner):
                raise BadArg(f"scheduler {self.sched_id} holds no signal for scheduler {owner}")
            sig, nb = h.sigs[owner].popleft()
            self.peer_socket(owner).send(Peer(self.sched_id, [sig], nb).encode())
            self.peer_sent[owner] += 1
            return True
        if what == "rpc":
            self.send_ctl(h.take_rpc(args[0]))
            return True
        if what == "arrive":
            sender, timeout = args
            deadline = time.monotonic() + timeout
            while not h.waiting_from(sender):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"scheduler {self.sched_id}: nothing from {_name(sender)}")
                if self.inbox.poll(int(left * 1000) + 1):
                    self.take_inbox(zmq.NOBLOCK)
            result = self._step_arrive(sender)
            self._step_cut()
            return result
        if what == "publish":
            (timeout,) = args
            deadline = time.monotonic() + timeout
            while not h.in_pubs:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"scheduler {self.sched_id}: no publication came")
                if self.sub.poll(int(left * 1000) + 1):
                    self.handle_state(self.sub.recv())
            body = h.in_pubs.popleft()
            apply_publication(node, body)
            return type(body).__name__
        raise BadArg(f"unknown step {what!r}")

    def flush_peer(self, owner: int) -> int:
        """Everything for peer ``owner`` is sent (stepped: every signal held for
        it is released); how many signals it has been sent in all."""
        h = self.held
        if h is None:
            self.flush()
        else:
            q = h.sigs.get(owner)
            while q:
                self.step("signal", (owner,))
        return self.peer_sent[owner]

    def batches_made(self) -> int:
        """Everything made is sent (stepped: counted as cut, the steps cut
        it); how many batches that makes."""
        if self.held is None:
            self.flush()
            return self.sys_batches
        return self.held.cut

    def order_after(self, after) -> None:
        """The next batch waits at the dispatcher for ``after[i]`` batches of
        each scheduler ``i`` (raised, never lowered)."""
        if self.held is None:
            self.flush_sys()  # what was made before the call is not held back
        for i, n in enumerate(after):
            if i and i != self.sched_id and n > self.after[i]:
                self.after[i] = n

    def _step_cut(self) -> None:
        self.held.cut_from(self.transport, self.after)

    def _step_arrive(self, sender: int):
        """Take one signal (or delivery) buffered from ``sender``."""
        h = self.held
        if sender == 0:
            self.deliveries += 1
            return h.deliver_one(self.node)
        sig, batches = h.in_sigs[sender].popleft()
        self._apply_peer(sender, [sig], batches)
        return describe_signal(sig)

    def _release_held(self) -> None:
        """Stepping ends (the emulator closes): everything held is sent."""
        h = self.held
        self._step_cut()
        while h.batches:
            self.step("batch", ())
        for owner in list(h.sigs):
            self.flush_peer(owner)
        for r in h.rpcs:
            self.send_ctl(r)
        h.rpcs.clear()
        for sender in list(h.in_sigs):
            while h.in_sigs[sender]:
                self._step_arrive(sender)
        while h.in_deliv:
            self._step_arrive(0)
        while h.in_pubs:
            apply_publication(self.node, h.in_pubs.popleft())
        self.held = None

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
                ran = node.run_some(32, began + SLICES_NS, self._ctl_waiting)
                self.busy = (self.busy[0] + (time.monotonic_ns() - began if ran else 0), 0)
            self.cmds.sample_due()
            busy = self.running and clear and node.runq
            t = self.transport
            if self.held is not None:
                t = None  # stepped: what was made waits to be released
            if t is not None and t.ctl_out:
                # the signals a process sent before its BIF call leave first
                # (the BIF may name a process spawned on another scheduler)
                self.flush()
                for request in t.ctl_out:
                    self.send_ctl(request)
                t.ctl_out = []
            if not busy:
                if self.held is None:
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
                        # (a frame of deliveries can take tens of milliseconds)
                        self.cmds.sample_due()
        self.shutdown()

    def _ctl_waiting(self) -> bool:
        """A process's BIF request is ready to go, or a controller's command
        waits (neither is kept waiting for the rest of the slices); the
        socket's own flag, no poll."""
        t = self.transport
        return bool((t is not None and t.ctl_out) or self.ctl.getsockopt(zmq.EVENTS) & zmq.POLLIN)

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

    def shutdown(self) -> None:
        """Hand over explicitly: the last batch is acknowledged before exit."""
        self.cmds.close_trace_ports()
        if self.terminated:
            return
        if self.held is not None:
            self._release_held()
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
        if self.heartbeat is not None:
            self.heartbeat.stop()
        for s in (
            [self.ctl]
            + list(self.peers.values())
            + ([self.sys_sock, self.inbox, self.sub] if self.smp else [])
        ):
            s.close(linger=2000)
        self.ctx.term()


def _no_timers() -> None:
    pass


def _stopped_clock(t: float):
    """A clock that stays at ``t`` (a stepped scheduler's: its timers fire
    when the controller says, never by the time)."""

    def now() -> float:
        return t

    return now


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
        except (
            PermissionError,
            TimeoutError,
            ConnectionRefusedError,
        ) as e:  # refused, or no controller: say so
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
            flush=w.cmds.close_trace_ports,
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
            w.cmds.close_trace_ports()  # also when the loop dies of an exception
    finally:
        rundir.release(endpoints.get("dir"), hold)
