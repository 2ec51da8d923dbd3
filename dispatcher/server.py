"""The dispatcher process: the seed's ``sys_message_queue`` and
``sys_msg_dispatcher_func``, with the tracer state behind a real rwlock.

Three threads, each with its own ZeroMQ sockets:

* ingest (the ``smq_mtx`` side): takes batches off the ROUTER socket in
  arrival order, which *is* the queue order, from the schedulers alone (each
  known by the routing id, and with CURVE the key, it was given).  A batch
  is checked whole, the bodies of its runs included, before any of it
  counts; a bad one is refused, counted and logged.  It applies
  process-table events at once, and for each message takes the timestamp
  and, for ``profile_scheduler``, the active-scheduler count, then appends
  it to the queue.  Message bodies travel inside the batch as each run's
  bytes, forwarded as they came (decoded again only to write them to a
  port).
* dispatch (reader of the state): swaps the whole queue out, as the seed
  does, and decides each message with ``smp.core.dispatch.resolve``, sending pid
  deliveries in batches to the owning scheduler's inbox and writing port
  deliveries in the external term format.
* control (writer of the state): serves the controller's requests (from
  the controller's routing id alone): BIFs on the state, register,
  hold/release and step (the next n messages while held), statistics,
  the queue listing, trace ports.

Every state change is published (PUB) as a versioned snapshot to the
schedulers' replicas.

A fourth thread, with no socket, is the orphan watchdog
(``smp.wire.rundir.watch_parent``): it ends the dispatcher if the controller
dies and the control loop does not begin to stop.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
import traceback
from collections import Counter, deque

import zmq
from zmq.utils.monitor import recv_monitor_message

from dispatcher.journal import Journal
from smp.core import messages as M
from smp.core.clock import Clock
from smp.core.dispatch import DELIVER_PID, DELIVER_PORT, DROP, disp_failure, resolve
from smp.core.errors import BadArg, ProtocolError
from smp.core.placement import pid_owner, port_owner
from smp.core.state import NIL, TracerState, apply_state_op
from smp.core.stats import totals
from smp.core.terms import Atom, Port
from smp.ports.traceport import close_at_exit, open_trace_port, port_call
from smp.wire import codec, rundir
from smp.wire.curve import Authenticator, curve_client, curve_server, describe_peer, recv_from
from smp.wire.etf import encode
from smp.wire.frames import (
    BATCH,
    FIN,
    FIN_ACK,
    Batch,
    Delivery,
    QueueEntry,
    QueueEvent,
    Run,
    encode_deliveries,
)
from smp.wire.runtime import tune_gc

from .table import PidTable

__all__ = ["dispatcher_main", "Dispatcher"]

_PICKLE = pickle.HIGHEST_PROTOCOL
am_active, am_inactive = Atom("active"), Atom("inactive")
am_error_logger = Atom("error_logger")
LATENCY_SAMPLES = 200_000
MAX_QUEUE = 200_000  # queued messages before ingest stops taking (push-back)
HWM = 1000
STOP_DRAIN_S = 2.0  # on stop, dispatch what is queued this long, then drop it
CLOSE_WAIT_S = 20.0  # a port close waits this long for its turn in the queue
INGEST_STALL_S = 10.0  # waiting for batches: this long without any is an error
INGEST_WAIT_S = 25.0  # ... and this long in all (the controller waits 30 s)


#: The longest a batch waits for the batches of other schedulers it follows.
ORDER_WAIT_S = 2.0


class Dispatcher:
    def __init__(
        self,
        nsched: int,
        endpoints: dict,
        journal: str | None = None,
        security: dict | None = None,
        controller_id: bytes | None = None,
    ):
        self.nsched = nsched
        self.ep = endpoints
        self.security = security
        self.inbox_map: dict[int, tuple] = {}
        # who may send what: the controller's routing id on the control
        # socket, each scheduler's on the ingest socket, and (CURVE) their keys
        self.controller_id = controller_id
        self.ingest_ids: dict[bytes, int] = {}
        self.out_ids: dict[int, tuple] = {}  # to inbox k: (dispatch thread, ingest thread)
        self.keys: dict[int, str | None] = {}
        self.bad_at: Counter = Counter()  # bad frames by socket
        self.ctx = zmq.Context()
        self.auth = None
        if security:
            self.auth = Authenticator(self.ctx, security["allowed"])
        self.table = PidTable()
        self.state = TracerState(liveness=self.table, on_change=self._on_state_change)
        self.clock = Clock()
        self.smq = threading.Condition(threading.Lock())  # smq_mtx + smq_cnd
        self.queue: deque = deque()
        self.queue_msgs = 0  # messages in the queue (runs hold several)
        self.queue_peak = 0  # the most queued since the last statistics()
        self.held = False
        self.dispatching = False
        self.step_req: tuple | None = None  # held: (n, unit) to dispatch now (step mode)
        self.step_done: list | None = None  # what the last step decided
        self.in_dispatch = 0  # messages swapped out of the queue, not yet counted
        self.drain_by: float | None = None  # stopping: after this, drop what is left
        self.terminated = False  # SIGTERM: stop as on the stop command
        self.stop = threading.Event()
        self.made: Counter = Counter()
        self.delivered: Counter = Counter()
        self.dropped: Counter = Counter()
        self.ingested = [0] * (nsched + 1)
        self.ingested_items = [0] * (nsched + 1)
        self.parked: list = []  # batches waiting for a peer's
        self.order_waits_expired = 0
        self.batches_taken = [0] * (nsched + 1)  # per scheduler, in its numbering
        self.delivered_to = [0] * (nsched + 1)
        self.bad_frames = 0
        self.handshake_failed = 0
        self.last_bad_frame = ""
        self.lost: set[int] = set()
        self.sched_active = [False] * (nsched + 1)
        self.journal = None
        if journal:
            self.journal = Journal(journal, nsched)
        self.latencies: deque = deque(maxlen=LATENCY_SAMPLES)
        self.stderr_lines: list[str] = []
        self._tls = threading.local()
        self._port_counter = 0
        self._markers: dict = {}
        self.ingest_sock = self.ctx.socket(zmq.ROUTER)
        self.ingest_sock.setsockopt(zmq.RCVHWM, HWM)
        self.ingest_sock.setsockopt(zmq.MAXMSGSIZE, codec.MAX_FRAME)  # a bigger one: disconnected
        curve_server(self.ingest_sock, self.security)
        self.ingest_sock.bind(endpoints["ingest"])
        self.ctl_sock = self.ctx.socket(zmq.ROUTER)
        self.ctl_sock.setsockopt(zmq.MAXMSGSIZE, codec.MAX_FRAME)
        curve_server(self.ctl_sock, self.security)
        self.ctl_sock.bind(endpoints["disp_ctl"])
        self.pubs = {}
        self.pub_seq = [0, 0, 0]
        for i, name in enumerate(("ingest", "dispatch", "control")):
            s = self.ctx.socket(zmq.PUB)
            s.setsockopt(zmq.LINGER, 1000)
            curve_server(s, self.security)
            s.bind(endpoints["pub"][i])
            self.pubs[name] = s

    def _inbox_socket(self, k: int, sndtimeo: int | None = None, thread: int = 0):
        """A DEALER socket to scheduler ``k``'s inbox (its address and key, and
        the routing id it knows this thread by, came in ``set_inboxes``)."""
        endpoint, key = self.inbox_map[k]
        s = self.ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.ROUTING_ID, self.out_ids[k][thread])
        s.setsockopt(zmq.LINGER, 2000)
        s.setsockopt(zmq.SNDHWM, HWM)
        if sndtimeo is not None:
            s.setsockopt(zmq.SNDTIMEO, sndtimeo)
        curve_client(s, self.security, key)
        s.connect(endpoint)
        return s

    # ------------------------------------------------------------- publishing
    def _pub(self, obj) -> None:
        """Publish on this thread's PUB socket.  Each socket numbers what it
        sends, so a scheduler can tell it has seen everything up to a point."""
        name = getattr(self._tls, "name", "control")
        i = ("ingest", "dispatch", "control").index(name)
        self.pub_seq[i] += 1
        self.pubs[name].send(pickle.dumps((i, self.pub_seq[i], obj), _PICKLE))

    def _on_state_change(self, snap) -> None:
        self.clock.cpu = snap.default_cpu_timestamp
        if self.journal is not None:
            self.journal.record("s", snap)
        self._pub(("snap", snap))

    # ------------------------------------------------------------- ingest
    def ingest_loop(self) -> None:
        self._tls.name = "ingest"
        sock = self.ingest_sock
        inboxes: dict[int, zmq.Socket] = {}
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        monitor = None
        if self.security:
            # peers that fail the CURVE handshake (no CURVE at all, or a bad
            # one) never reach the ZAP handler: count them from the socket's events
            monitor = sock.get_monitor_socket(
                zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
            )
            poller.register(monitor, zmq.POLLIN)
        while not self.stop.is_set():
            events = dict(poller.poll(100))
            if monitor is not None and monitor in events:
                recv_monitor_message(monitor)
                self.handshake_failed += 1
            if self.parked:
                self._drain_parked()  # a scheduler lost meanwhile is not waited for
            if sock not in events:
                continue
            rid, parts, user = recv_from(sock, self.security is not None)
            try:
                self._ingest_frame(rid, parts, user, inboxes)
            except Exception as e:  # a malformed frame is counted, never fatal
                k = self.ingest_ids.get(rid)
                self._bad(
                    "ingest",
                    f"scheduler {k}" if k else describe_peer(rid, user),
                    sum(len(p) for p in parts),
                    e,
                )
        for s in inboxes.values():
            s.close()
        if monitor is not None:
            sock.disable_monitor()
            monitor.close(linger=0)

    def _take_batch_in_order(self, k: int, batch: Batch | None) -> None:
        """Queue scheduler ``k``'s next batch once every batch it depends on
        is queued (``after``: per scheduler, how many of its batches had been
        sent before a signal from it reached ``k``), so that what one process
        made before it sent is queued before what its receiver made after
        receiving, as the seed's enqueue at make time orders them.  Batches
        wait in arrival order; one from a lost scheduler is not waited for.
        Runs in the ingest thread."""
        self.parked.append((k, batch, time.monotonic()))
        self._drain_parked()

    def _drain_parked(self) -> None:
        progress = True
        while progress and self.parked:
            progress = False
            blocked: set = set()
            now = time.monotonic()
            for i, (k, batch, since) in enumerate(self.parked):
                if k in blocked:
                    continue
                after = batch.after if batch is not None else None
                if after is not None and any(
                    n > self.batches_taken[j] and j not in self.lost
                    for j, n in enumerate(after)
                    if j
                ):
                    if now - since < ORDER_WAIT_S:
                        blocked.add(k)  # its later batches wait behind it
                        continue
                    # what it waits for was refused on the way: take it anyway
                    self.order_waits_expired += 1
                del self.parked[i]
                if batch is not None:
                    self._ingest_batch(k, batch.items)
                self.batches_taken[k] += 1
                progress = True
                break

    def _ingest_frame(self, rid: bytes, parts: list, user, inboxes: dict) -> None:
        """One message from the ingest socket, accepted only from the
        scheduler whose routing id (and, with CURVE, key) it comes with."""
        k = self.ingest_ids.get(rid)
        if k is None:
            raise ProtocolError("not from a scheduler of this emulator")
        if self.security is not None and user != self.keys.get(k):
            raise ProtocolError(f"scheduler {k}'s routing id with another key")
        if len(parts) != 1:
            raise ProtocolError(f"a message of {len(parts)} parts, not 1")
        obj = codec.loads_terms(parts[0])
        if type(obj) is not tuple or not obj:
            raise ProtocolError("frame is not a tuple")
        kind = obj[0]
        if kind == BATCH:
            try:
                batch = Batch.decode(obj, k, self.nsched)
            except ProtocolError:
                self._take_batch_in_order(k, None)  # refused, but it had its number
                raise
            self._take_batch_in_order(k, batch)
        elif kind == FIN:
            if len(obj) != 3 or obj[1] != k or type(obj[1]) is not int or type(obj[2]) is not int:
                raise ProtocolError(f"fin frame is not ('fin', {k}, batches)")
            s = inboxes.get(k)
            if s is None:
                s = inboxes[k] = self._inbox_socket(k, thread=1)
            s.send(b"P" + pickle.dumps((FIN_ACK,), _PICKLE))
        else:
            raise ProtocolError(f"unknown frame kind {kind!r}")

    def _bad(self, where: str, sender: str, size: int, e: BaseException) -> None:
        """Count and log a refused frame (the log is bounded under a flood)."""
        self.bad_at[where] += 1
        self.bad_frames = sum(self.bad_at.values())
        self.last_bad_frame = (
            f"rejected {where} frame of {size} bytes from {sender}: {type(e).__name__}: {e}"
        )
        n = self.bad_at[where]
        if n <= 100 or n % 1000 == 0:
            os.write(2, f"dispatcher: {self.last_bad_frame}\n".encode())

    def _ingest_batch(self, sched: int, items) -> None:
        # push-back: while the queue is full (and not held on purpose) stop
        # taking frames; ZeroMQ's buffers fill and the schedulers wait
        with self.smq:
            while self.queue_msgs >= MAX_QUEUE and not self.held and not self.stop.is_set():
                self.smq.wait(0.05)
        events_dead: list = []
        events_tracer: list = []
        reg_changed = ports_changed = False
        with self.smq:
            clock, queue, made = self.clock, self.queue, self.made
            for item in items:
                if type(item) is Run:
                    type_, from_, to, ts_kind, n, blob, made_ns = item
                    # the run's n timestamps, consecutive and strictly increasing
                    base = clock.reserve_us(n) if ts_kind else 0
                    active = 0
                    if ts_kind == M.TS_SCHED:
                        self.state.active_sched += 1 if to is am_active else -1
                        active = self.state.active_sched
                        self.sched_active[sched] = to is am_active
                        to = NIL
                    entry = QueueEntry(type_, from_, to, ts_kind, blob, n, base, active, made_ns)
                    queue.append(entry)
                    self.queue_msgs += n
                    if self.queue_msgs > self.queue_peak:
                        self.queue_peak = self.queue_msgs
                    made[type_] += n
                    self.ingested[sched] += n
                    self.ingested_items[sched] += n
                    if self.journal is not None:
                        self.journal.record("q", *entry.journal())
                    continue
                self.ingested_items[sched] += 1
                if self.journal is not None:
                    self.journal.record("e", item.kind, *item.args)
                ev, subject = item.kind, item.subject
                if ev == "spawn":
                    self.table.spawned(subject)
                elif ev == "exit":
                    names = self.table.exited(subject)
                    reg_changed |= bool(names)
                    events_dead.append(subject)
                    self.state.trace_check_exiting(subject, smp=True)
                elif ev == "tracer":
                    self.table.mark_tracer(subject)
                    events_tracer.append(subject)
                elif ev == "unregister":
                    self.table.unregister(item.args[0])
                    reg_changed = True
                elif ev == "port_open":
                    self.table.proc_ports.add(subject)
                    ports_changed = True
                elif ev == "port_close":
                    reg_changed |= bool(self.table.port_closed(subject))
                    self.state.trace_check_exiting(subject, smp=True)
                    ports_changed = True
            self.smq.notify()
        if events_dead:
            self._pub(("dead", events_dead))
        if events_tracer:
            self._pub(("tracer", events_tracer))
        if reg_changed:
            self._pub(("reg", dict(self.table.registry)))
        if ports_changed:
            self._pub(("ports", self.table.open_tracer_ports()))

    # ------------------------------------------------------------- dispatch
    def dispatch_loop(self) -> None:
        self._tls.name = "dispatch"
        inboxes: dict[int, zmq.Socket] = {}
        while not self.stop.is_set():
            with self.smq:
                while (
                    not self.queue or (self.held and self.step_req is None)
                ) and not self.stop.is_set():
                    self.dispatching = False
                    self.smq.notify_all()
                    self.smq.wait(0.1)
                if self.stop.is_set():
                    break
                record = None
                if self.held:  # step mode: the next n messages or runs only
                    local = self._take_step(*self.step_req)
                    record = []
                else:
                    local = self.queue
                    self.queue = deque()
                    self.queue_msgs = 0
                # counted as queued until decided, so statistics() always adds up
                self.in_dispatch = sum(item.n for item in local)
                self.smq.notify_all()  # ingest may be waiting for room
                self.dispatching = True
            if record is None:
                self._dispatch(local, inboxes)
            else:
                for item in local:
                    self._dispatch_recorded(item, inboxes, record)
                with self.smq:
                    self.step_done, self.step_req = record, None
                    self.smq.notify_all()
        for s in inboxes.values():
            s.close()

    def _take_step(self, n: int, unit: str) -> deque:
        """Step mode (held): take the next ``n`` messages (``unit`` "message";
        a run longer than what is left is split, its bodies and timestamps
        kept in order) or the next ``n`` runs off the queue, with the events
        (port closes, markers) before them.  Under ``smq``."""
        local: deque = deque()
        queue = self.queue
        while queue and n > 0:
            item = queue[0]
            k = item.n
            if k == 0:  # a QueueEvent
                local.append(queue.popleft())
                continue
            if unit == "message" and k > n:
                head, queue[0] = item.split(n)
                local.append(head)
                self.queue_msgs -= n
                break
            local.append(queue.popleft())
            self.queue_msgs -= k
            n -= k if unit == "message" else 1
        return local

    def step(self, n, unit: str) -> list:
        """Step mode: while held, dispatch exactly the next ``n`` messages
        (``unit="message"``, the seed's granularity: a run is split) or runs
        (``unit="run"``), then stay held.  Returns ``(From, Receiver, Msg,
        Outcome)`` for each message dispatched, Outcome ``delivered`` or the
        reason it was dropped.  Runs in the control thread."""
        if type(n) is not int or n < 1 or unit not in ("message", "run"):
            raise BadArg(
                f"step: n must be an integer >= 1 and unit 'message' or 'run', not {n!r}, {unit!r}"
            )
        with self.smq:
            if not self.held:
                raise BadArg("step needs a held dispatcher (hold_dispatcher() first)")
            if not self.queue:
                return []
            self.step_done, self.step_req = None, (n, unit)
            self.smq.notify_all()
            deadline = time.monotonic() + CLOSE_WAIT_S
            while self.step_req is not None or self.dispatching:
                if self.stop.is_set() or time.monotonic() > deadline:
                    self.step_req = None
                    raise TimeoutError("step: the dispatch thread did not take the step")
                self.smq.wait(0.05)
            done, self.step_done = self.step_done, None
        return done

    def _dispatch_recorded(self, item, inboxes, record: list) -> None:
        """Step mode: dispatch one item of the queue as ``_dispatch`` does
        and append ``(From, Receiver, Msg, Outcome)`` for each of its
        messages, the outcome read from the counts it changed."""
        if item.n == 0:  # a QueueEvent
            self._dispatch((item,), inboxes)
            return
        type_ = item.type
        receiver = resolve(type_, item.from_, item.to, self.state, self.table).receiver
        with self.smq:
            delivered0, dropped0 = self.delivered[type_], Counter(self.dropped)
        self._dispatch((item,), inboxes)
        with self.smq:
            outcomes = ["delivered"] * (self.delivered[type_] - delivered0)
            for (_t, reason), k in (self.dropped - dropped0).items():
                outcomes += [reason] * k
        for i, term in enumerate(item.terms()):
            record.append(
                (item.from_, receiver, term, outcomes[i] if i < len(outcomes) else "unknown")
            )

    def _dispatch(self, local, inboxes) -> None:
        """Decide each run of the swapped-out queue, in order.

        A run is consecutive messages of one kind to one receiver; it is
        decided once (a concurrent state change lands between runs, one of
        the interleavings the seed's rwlock allows too) and its bytes are
        forwarded unopened (a ``Delivery``).

        Events travel in the queue too (``QueueEvent``): a ``trace_delivered``
        marker, and a port close, before which everything decided so far is
        counted and sent, so the port holds exactly what was counted as
        delivered to it.  While the dispatcher stops (``drain_by`` passed),
        what is left is dropped as ``emulator_closed``."""
        out: dict[int, list] = {}
        kinds: dict[int, Counter] = {}  # what goes to each scheduler, by type
        state, table = self.state, self.table
        nsched = self.nsched
        lost = self.lost
        journal = self.journal
        delivered = Counter()
        dropped = Counter()
        lat = self.latencies
        now_ns = time.monotonic_ns()
        ERRLGR = M.SYS_MSG_TYPE_ERRLGR
        for item in local:
            if item.n == 0:  # a QueueEvent, in queue order
                self._settle(out, delivered, dropped, inboxes, kinds)
                out, delivered, dropped, kinds = {}, Counter(), Counter(), {}
                if item.kind == "marker":  # trace_delivered
                    self._markers[item.payload].set()
                else:  # "close": port ids or None for all
                    self._close_ports(item.payload)
                    item.done.set()
                continue
            type_, from_, to, ts_kind, blob, n, base, active, made_ns = item
            if self.drain_by is not None and time.monotonic() > self.drain_by:
                dropped[(type_, "emulator_closed")] += n
                if journal is not None:
                    journal.record("d", type_, n, DROP, to, "emulator_closed")
                continue
            lat.append(now_ns - made_ns)
            d = resolve(type_, from_, to, state, table, lost, nsched)
            if journal is not None:
                journal.record("d", type_, n, d.action, d.receiver, d.reason)
            if d.action == DELIVER_PID:
                owner = pid_owner(d.receiver, nsched)
                dl = out.get(owner)
                if dl is None:
                    dl = out[owner] = []
                    kinds[owner] = Counter()
                dl.append(Delivery.of(item, d.receiver))
                delivered[type_] += n
                kinds[owner][type_] += n
            elif d.action == DELIVER_PORT and d.receiver in table.proc_ports:
                # a port a process opened: its scheduler writes the bytes to
                # the driver (erts_raw_port_command)
                owner = port_owner(d.receiver, nsched)
                if owner not in out:
                    out[owner], kinds[owner] = [], Counter()
                out[owner].append(Delivery.of(item, d.receiver))
                delivered[type_] += n
                kinds[owner][type_] += n
            elif d.action == DELIVER_PORT:
                port = table.ports[d.receiver]
                try:
                    frames = [encode(term) for term in item.terms()]
                except (TypeError, ValueError) as e:  # data, not a term: never written
                    os.write(
                        2,
                        f"dispatcher: a run for trace port {d.receiver!r} holds "
                        f"what is not a term ({e})\n".encode(),
                    )
                    dropped[(type_, "not_a_term")] += n
                    continue
                written, error = port.write_many(frames)
                if error is not None:  # the driver failed: its port closes
                    os.write(2, f"dispatcher: trace port {d.receiver!r}: {error}\n".encode())
                    dropped[(type_, "port_closed")] += n - written
                    self._close_ports([d.receiver])
                delivered[type_] += written
            else:
                if d.failure:
                    m = M.SysMsg(type_, from_, to, None, ts_kind)
                    if type_ == ERRLGR:
                        for body in codec.loads_terms(blob):
                            disp_failure(m._replace(msg=body), d.receiver, state, self._stderr)
                    else:
                        for _ in range(n):
                            disp_failure(m, d.receiver, state, self._stderr)
                dropped[(type_, d.reason)] += n
        self._settle(out, delivered, dropped, inboxes, kinds)

    def _settle(self, out, delivered, dropped, inboxes, kinds) -> None:
        """Count what was decided, then send the pid deliveries to their
        schedulers.  A full inbox pushes back on the dispatch thread; the
        deliveries for a scheduler that is lost meanwhile (dead, or a remote
        one whose link is down) are counted again as dropped
        (``scheduler_lost``): they never reach it.  When the dispatcher
        stops, what cannot be sent is dropped as ``emulator_closed``.  Runs
        in the dispatcher process, dispatch thread."""
        with self.smq:
            self.delivered.update(delivered)
            self.dropped.update(dropped)
            self.in_dispatch -= sum(delivered.values()) + sum(dropped.values())
            for owner, dl in out.items():
                self.delivered_to[owner] += sum(x.n for x in dl)
        for owner, deliveries in out.items():
            frame = encode_deliveries(deliveries)
            sock = inboxes.get(owner)
            if sock is None:
                sock = inboxes[owner] = self._inbox_socket(owner, sndtimeo=100)
            while True:  # a full inbox pushes back on the dispatch thread
                if owner in self.lost:
                    self._undelivered(owner, deliveries, kinds[owner], "scheduler_lost")
                    break
                try:
                    sock.send(frame)
                    break
                except zmq.Again:
                    if self.stop.is_set() or self.drain_by is not None:
                        # stopping, and the scheduler does not take them
                        self._undelivered(owner, deliveries, kinds[owner], "emulator_closed")
                        break

    def _undelivered(self, owner: int, deliveries: list, by_type: Counter, reason: str) -> None:
        """Deliveries counted for scheduler ``owner`` that will not reach it:
        dropped for ``reason`` instead; ``by_type`` counts them by type."""
        n_all = sum(x.n for x in deliveries)
        with self.smq:
            for t, n in by_type.items():
                if n:
                    self.delivered[t] -= n
                    self.dropped[(t, reason)] += n
            self.delivered_to[owner] -= n_all

    def _close_ports(self, port_ids) -> None:
        """Close tracer ports (``None``: every open one, as the emulator stops)
        and tell the schedulers' replicas, the journal and the tracer state,
        which resets whatever had the port as its tracer.  Runs in the
        dispatch thread at the close's place in the queue; in the control
        thread only while the dispatch thread is held or gone."""
        ports = self.table.ports
        closed = []
        for port_id in list(ports) if port_ids is None else port_ids:
            tp = ports.get(port_id)
            if tp is None or tp.closed:
                continue
            if port_ids is None:
                err = close_at_exit(tp)
            else:
                try:
                    tp.close()
                    err = None
                except Exception as e:
                    err = f"{type(e).__name__}: {e}"
            if err is not None:
                os.write(2, f"dispatcher: closing trace port {port_id!r}: {err}\n".encode())
            closed.append(port_id)
            if self.journal is not None:
                self.journal.record("e", "port_close", port_id)
        if closed:
            self._pub(("ports", self.table.open_tracer_ports()))
            for port_id in closed:
                self.state.trace_check_exiting(port_id, smp=True)

    def _close_in_order(self, port_ids, wait: float) -> bool:
        """Queue the close of ``port_ids`` (``None``: every port) behind every
        message queued now and wait, at most ``wait`` s, for the dispatch
        thread to reach it: what was queued before is written first, what
        comes after finds the port closed (``port_closed``).  While the
        dispatcher is held the close waits in the queue for the release.
        True when the ports are closed.  Runs in the control thread."""
        done = threading.Event()
        with self.smq:
            self.queue.append(QueueEvent("close", port_ids, done))
            self.smq.notify_all()
            if self.held:
                return False
        return done.wait(wait)

    def _stop_dispatching(self, drain: float = STOP_DRAIN_S) -> None:
        """The emulator stops: dispatch what is queued for at most ``drain``
        seconds more (``STOP_DRAIN_S``; the controller gives less when its
        close() has less time left), then drop the rest as
        ``emulator_closed``, and close every port after it, so each file ends
        with whole frames and holds what was counted as delivered to it.  A
        held queue stays queued.  Runs in the control thread."""
        with self.smq:
            held = self.held
        if held:  # the dispatch thread is parked: no write is under way
            self._close_ports(None)
            return
        if type(drain) not in (int, float) or not 0 <= drain <= STOP_DRAIN_S:
            drain = STOP_DRAIN_S
        self.drain_by = time.monotonic() + drain
        if not self._close_in_order(None, drain + 0.5):
            self._close_ports(None)  # stuck or gone: close anyway (frames stay whole)

    def _stderr(self, line: str) -> None:
        self.stderr_lines.append(line)
        os.write(2, line.encode())

    # ------------------------------------------------------------- control
    def control_loop(self) -> None:
        self._tls.name = "control"
        sock = self.ctl_sock
        parent = os.getppid()
        last_hb = time.monotonic()
        while not self.stop.is_set():
            if self.terminated:  # SIGTERM: stop as on the stop command
                self._stop_dispatching()
                self.stop.set()
                break
            if not sock.poll(100):
                if os.getppid() != parent:  # the controller is gone: never linger
                    self._stop_dispatching()
                    self.stop.set()
                now = time.monotonic()
                if now - last_hb >= 1.0:  # heartbeat for schedulers on other hosts
                    last_hb = now
                    self._pub(("hb",))
                continue
            ident, parts, user = recv_from(sock, self.security is not None)
            try:
                req_id, cmd, args = self._control_frame(ident, parts, user)
            except Exception as e:  # counted, logged with the sender, ignored
                self._bad("control", describe_peer(ident, user), sum(len(p) for p in parts), e)
                continue
            try:
                value, ok = self.command(cmd, args), True
            except Exception as e:
                value, ok = e, False
            try:
                reply = codec.dumps_frame(("r", req_id, ok, value))
            except codec.Unencodable as e:
                reply = codec.dumps_frame(("r", req_id, False, e))
            sock.send_multipart([ident, reply])
            if cmd == "stop":
                self.stop.set()

    def _control_frame(self, ident: bytes, parts: list, user) -> tuple:
        """A request ``(id, command, args)``, accepted from the controller
        alone: its routing id (and, with CURVE, the controller's key)."""
        if ident != self.controller_id:
            raise ProtocolError("not from the controller")
        if self.security is not None and (user is None or user.encode() != self.security["public"]):
            raise ProtocolError("the controller's routing id with another key")
        if len(parts) != 1:
            raise ProtocolError(f"a message of {len(parts)} parts, not 1")
        obj = codec.loads_frame(parts[0])
        if (
            type(obj) is not tuple
            or len(obj) != 3
            or type(obj[0]) is not int
            or type(obj[1]) is not str
            or type(obj[2]) is not tuple
        ):
            raise ProtocolError("request is not (id, command, args)")
        return obj

    def set_inboxes(self, inbox_map: dict, ids: dict) -> None:
        """Where each scheduler's inbox is, and who is who: the routing id
        (and CURVE key) each scheduler sends its batches with, and the ones
        this dispatcher's threads send to each inbox with."""
        ks = set(range(1, self.nsched + 1))
        if (
            type(inbox_map) is not dict
            or set(inbox_map) != ks
            or type(ids) is not dict
            or set(ids.get("ingest", {}).values()) != ks
            or set(ids.get("out", {})) != ks
        ):
            raise BadArg("set_inboxes: not an inbox, routing ids and keys for every scheduler")
        self.inbox_map = dict(inbox_map)
        self.ingest_ids = dict(ids["ingest"])
        self.out_ids = dict(ids["out"])
        self.keys = {
            k: (key.decode() if type(key) is bytes else key)
            for k, key in ids.get("keys", {}).items()
        }

    def command(self, cmd: str, args):
        """Run a command from the controller (the control thread)."""
        handler = self.COMMANDS.get(cmd) if type(cmd) is str else None
        if handler is None or type(args) is not tuple:
            raise BadArg(f"unknown dispatcher command {cmd!r}")
        return handler(self, *args)

    def _cmd_state(self, op, a):
        st = self.state
        return apply_state_op(st, op, a)

    def _cmd_set_inboxes(self, *args):
        self.set_inboxes(*args)
        return True

    def _cmd_hello(self):
        # publish on every socket (from its own thread's point of view the
        # socket is only used under the GIL here: the other threads are idle
        # at start-up), so schedulers can prove their SUB is connected
        for name in ("ingest", "dispatch", "control"):
            self._tls.name = name
            self._pub(("hello",))
        self._tls.name = "control"
        return list(self.pub_seq)

    def _cmd_pub_seq(self):
        return list(self.pub_seq)

    def _cmd_is_alive(self, pid):
        return self.table.is_alive(pid)

    def _cmd_valid_port(self, port):
        return self.table.is_valid_tracer_port(port)

    def _cmd_register(self, name, pid):
        ok = self.table.register(name, pid)
        if ok:
            if self.journal is not None:
                self.journal.record("e", "register", name, pid)
            self._pub(("reg", dict(self.table.registry)))
        return ok

    def _cmd_unregister(self, name):
        ok = self.table.unregister(name)
        if ok and self.journal is not None:
            self.journal.record("e", "unregister", name, None)
        self._pub(("reg", dict(self.table.registry)))
        return ok

    def _cmd_whereis(self, name):
        return self.table.whereis(name)

    def _cmd_hold(self):
        with self.smq:
            self.held = True
            while self.dispatching:
                self.smq.wait(0.1)
        return True

    def _cmd_step(self, *args):
        return self.step(*args)

    def _cmd_release(self):
        with self.smq:
            self.held = False
            self.smq.notify_all()
        return True

    def _cmd_wait_ingested(self, *args):
        return self.wait_ingested(*args)

    def _cmd_scheduler_lost(self, k):
        with self.smq:
            self.lost.add(k)
            pids = [p for p in list(self.table.alive) if pid_owner(p, self.nsched) == k]
            if self.journal is not None:
                self.journal.record("lost", k, pids)
            for pid in pids:
                self.table.exited(pid)
                self.state.trace_check_exiting(pid, smp=True)
            if self.sched_active[k] and self.state.profile_scheduler:
                # the dead scheduler is inactive from now on: profile_scheduler_q
                # with the time the loss was noticed and the count after it
                self.sched_active[k] = False
                self.state.active_sched -= 1
                msg = M.profile_scheduler_q(
                    k, Atom("inactive"), self.state.active_sched, self.clock.now()
                )
                self._queue_one(M.SYS_MSG_TYPE_SYSPROF, NIL, NIL, msg)
        self._pub(("dead", pids))
        self._pub(("reg", dict(self.table.registry)))
        return pids

    def _cmd_status(self):
        with self.smq:
            return {
                "settled": sum(self.delivered.values()) + sum(self.dropped.values()),
                "ingested": list(self.ingested),
                "ingested_items": list(self.ingested_items),
                "delivered_to": list(self.delivered_to),
                "queued": len(self.queue),
                "held": self.held,
                "dispatching": self.dispatching,
                "bad_frames": self.bad_frames,
                "parked": len(self.parked),
                "auth_denied": self.auth.denied if self.auth else 0,
            }

    def _cmd_stats(self):
        return self.statistics()

    def _cmd_queue_list(self):
        return self.foreach_sys_msg_in_q()

    def _cmd_open_trace_port(self, kind, a, kw):
        self._port_counter += 1
        port_id = Port((self.nsched + 1) * self._port_counter)
        self.table.ports[port_id] = open_trace_port(kind, *a, **kw)
        if self.journal is not None:
            self.journal.record("e", "port_open", port_id)
        self._pub(("ports", self.table.open_tracer_ports()))
        return port_id

    def _cmd_trace_port_call(self, port_id, method, a):
        tp = self.table.ports.get(port_id)
        if tp is None:
            raise BadArg(f"no trace port {port_id!r}")
        # a close is an event in queue order
        return port_call(tp, method, a, lambda: self._close_in_order([port_id], CLOSE_WAIT_S))

    def _cmd_trace_delivered(self, *args):
        return self.trace_delivered(*args)

    def _cmd_error_logger(self, *args):
        return self.queue_error_logger(*args)

    def _cmd_latencies(self):
        return list(self.latencies)

    def _cmd_stop(self, *args):
        self._stop_dispatching(*args[:1])
        return self.statistics()

    #: The dispatcher commands: each name and its handler (``_cmd_<name>``).
    COMMANDS = {
        "state": _cmd_state,
        "set_inboxes": _cmd_set_inboxes,
        "hello": _cmd_hello,
        "pub_seq": _cmd_pub_seq,
        "is_alive": _cmd_is_alive,
        "valid_port": _cmd_valid_port,
        "register": _cmd_register,
        "unregister": _cmd_unregister,
        "whereis": _cmd_whereis,
        "hold": _cmd_hold,
        "step": _cmd_step,
        "release": _cmd_release,
        "wait_ingested": _cmd_wait_ingested,
        "scheduler_lost": _cmd_scheduler_lost,
        "status": _cmd_status,
        "stats": _cmd_stats,
        "queue_list": _cmd_queue_list,
        "open_trace_port": _cmd_open_trace_port,
        "trace_port_call": _cmd_trace_port_call,
        "trace_delivered": _cmd_trace_delivered,
        "error_logger": _cmd_error_logger,
        "latencies": _cmd_latencies,
        "stop": _cmd_stop,
    }

    def queue_error_logger(self, from_, msg) -> bool:
        """``erts_queue_error_logger_message`` for a BIF the controller ran
        (trace/3's ``** can only have one tracer per process``)."""
        with self.smq:
            self._queue_one(M.SYS_MSG_TYPE_ERRLGR, from_, am_error_logger, msg)
        return True

    def _queue_one(self, type_: int, from_, to, msg) -> None:
        """Queue one message the dispatcher makes itself (no timestamp), and
        journal it as every queued run is.  Under ``smq``."""
        entry = QueueEntry(
            type_, from_, to, M.TS_NONE, pickle.dumps([msg], _PICKLE), 1, 0, 0, time.monotonic_ns()
        )
        self.queue.append(entry)
        self.queue_msgs += 1
        if self.journal is not None:
            self.journal.record("q", *entry.journal())
        self.made[type_] += 1
        self.smq.notify()

    def wait_ingested(self, want, limit: float | None = None) -> bool:
        """Wait until the ingest thread has taken ``want[k]`` items from each
        scheduler ``k``.  Under push-back (a slow port) that takes as long as
        the queue needs to make room, so only ``INGEST_STALL_S`` without any
        batch taken is an error; with ``limit``, give up after that many
        seconds and return False.  Runs in the control thread."""
        start = last_change = time.monotonic()
        with self.smq:
            last = sum(self.ingested_items)
            while any(self.ingested_items[k] < n for k, n in enumerate(want)):
                now = time.monotonic()
                if limit is not None and now - start >= limit:
                    return False
                taken = sum(self.ingested_items)
                if taken != last:
                    last, last_change = taken, now
                elif now - last_change > INGEST_STALL_S:
                    raise TimeoutError(
                        f"dispatcher took no scheduler batch for {INGEST_STALL_S:g} s"
                    )
                if now - start > INGEST_WAIT_S:
                    raise TimeoutError(
                        f"dispatcher still behind the schedulers after {INGEST_WAIT_S:g} s"
                    )
                self.smq.wait(0.01)
        return True

    def trace_delivered(self, caller, what, ref):
        """Queue ``{trace_delivered, What, Ref}`` behind everything queued now."""
        msg = (Atom("trace_delivered"), what, ref)
        if caller is not None:
            with self.smq:
                self._queue_one(M.SYS_MSG_TYPE_PROC_MSG, caller, caller, msg)
            return ref
        ev = threading.Event()
        self._markers[ref] = ev
        with self.smq:
            self.queue.append(QueueEvent("marker", ref))
            self.smq.notify()
        if not ev.wait(30):
            raise TimeoutError("trace_delivered: dispatcher is held or stuck")
        del self._markers[ref]
        return msg

    def foreach_sys_msg_in_q(self) -> list:
        """``erts_foreach_sys_msg_in_q``: (from, to, msg) of each queued message."""
        out = []
        with self.smq:
            items = list(self.queue)
        st = self.state
        for item in items:
            if item.n == 0:  # a QueueEvent
                continue
            type_, to = item.type, item.to
            if type_ == M.SYS_MSG_TYPE_SEQTRACE:
                to = st.get_system_seq_tracer()
            elif type_ == M.SYS_MSG_TYPE_SYSMON:
                to = st.get_system_monitor()
            elif type_ == M.SYS_MSG_TYPE_SYSPROF:
                to = st.get_system_profile()
            elif type_ == M.SYS_MSG_TYPE_ERRLGR:
                to = am_error_logger
            out += [(item.from_, to, term) for term in item.terms()]
        return out

    def statistics(self) -> dict:
        """The counts; ``queue_peak`` is the deepest the queue was since the
        previous call (each call starts a new interval)."""
        with self.smq:
            peak, self.queue_peak = self.queue_peak, self.queue_msgs
            queued = sum(item.n for item in self.queue) + self.in_dispatch
            made = Counter(self.made)
            delivered = Counter(self.delivered)
            dropped = Counter(self.dropped)
            ingested = list(self.ingested)
        return {
            **totals(made, delivered, dropped, queued),
            "ingested": ingested,
            "queue_peak": peak,
            "bad_frames": self.bad_frames,
            "last_bad_frame": self.last_bad_frame,
            "bad_frames_at": dict(self.bad_at),
            "auth_denied": self.auth.denied if self.auth else 0,
            "handshake_failed": self.handshake_failed,
            "stderr_lines": list(self.stderr_lines),
        }

    # ------------------------------------------------------------- main
    def _guarded(self, name: str, loop):
        """A thread's loop; if it ever dies the dispatcher stops and exits
        with an error, so the controller reports it (``DispatcherLost``)
        instead of waiting for a thread that is gone."""

        def run():
            try:
                loop()
            except BaseException:
                os.write(
                    2, f"dispatcher: the {name} thread died:\n{traceback.format_exc()}".encode()
                )
                self.thread_died = name
                self.stop.set()

        return run

    thread_died: str | None = None

    def serve(self) -> None:
        threads = [
            threading.Thread(target=self._guarded(n, f), name=n, daemon=True)
            for n, f in (("ingest", self.ingest_loop), ("dispatch", self.dispatch_loop))
        ]
        for t in threads:
            t.start()
        try:
            self.control_loop()
        finally:
            self.stop.set()
            with self.smq:
                self.smq.notify_all()
            for t in threads:
                t.join(5)
            for tp in self.table.ports.values():  # whatever ended the loop
                if not tp.closed:
                    close_at_exit(tp)
            for s in [self.ingest_sock, self.ctl_sock] + list(self.pubs.values()):
                s.close(linger=0 if self.terminated else 1000)
            if self.journal is not None:
                self.journal.close()
            if self.auth is not None:
                self.auth.stop()
            self.ctx.term()
        if self.thread_died:
            raise SystemExit(70)


def dispatcher_main(
    nsched: int,
    endpoints: dict,
    ready,
    journal: str | None = None,
    security: dict | None = None,
    controller_id: bytes | None = None,
) -> None:
    """Entry point of the dispatcher OS process."""
    tune_gc()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    hold = rundir.hold(endpoints.get("dir"))
    try:
        try:
            d = Dispatcher(nsched, endpoints, journal, security, controller_id)
        except Exception:
            traceback.print_exc()
            raise SystemExit(3) from None

        # the controller gone and the control loop not stopping (a thread stuck
        # on a port): the watchdog ends the dispatcher (rundir.watch_parent)
        rundir.watch_parent(
            endpoints.get("dir"),
            hold,
            noticed=lambda: d.stop.is_set() or d.terminated or d.drain_by is not None,
        )

        # SIGTERM (close() giving up on a stop, or the owner's exit): close the
        # ports in order, then exit; SIGALRM's default action ends a process
        # that cannot (blocked writing to a port nobody reads)
        def on_sigterm(*_):
            d.terminated = True
            signal.alarm(5)

        signal.signal(signal.SIGTERM, on_sigterm)
        ready.set()
        d.serve()
    finally:
        rundir.release(endpoints.get("dir"), hold)
