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
  the queue listing, trace ports.  The command table and its policy are
  ``dispatcher.commands.DispatcherCommands``, which has no socket: this
  thread hands it each request and sends back what it returns.

Every state change is published (PUB) as a versioned snapshot to the
schedulers' replicas.

The queue's policy (timestamps, the active count, table events, parking,
push-back, step mode, the deliver/drop decisions and the counts) is
``dispatcher.queue.SysMsgQueue``, which has no socket: these threads hand
it what they receive and send what it decides.

A fourth thread, with no socket, is the orphan watchdog
(``smp.wire.rundir.watch_parent``): it ends the dispatcher if the controller
dies and the control loop does not begin to stop.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from collections import Counter, deque

import zmq
from zmq.utils.monitor import recv_monitor_message

from dispatcher.journal import Journal
from smp.core.clock import Clock
from smp.core.dispatch import resolve
from smp.core.errors import BadArg, ProtocolError
from smp.core.state import TracerState
from smp.ports.traceport import close_at_exit
from smp.wire import codec, rundir
from smp.wire.curve import Authenticator, curve_client, curve_server, describe_peer, recv_from
from smp.wire.frames import (
    BATCH,
    DATA_PREFIX,
    Batch,
    encode_deliveries,
)
from smp.wire.protocol import (
    Dead,
    Fin,
    FinAck,
    PubHeartbeat,
    PubHello,
    Publication,
    Registry,
    Reply,
    Request,
    Snap,
    TracerPorts,
    Tracers,
)
from smp.wire.runtime import tune_gc

from .commands import DispatcherCommands
from .queue import MAX_QUEUE as MAX_QUEUE
from .queue import DispatchPlan, PortWrite, Published, SysMsgQueue
from .table import PidTable

__all__ = ["dispatcher_main", "Dispatcher"]

HWM = 1000


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
        self.terminated = False  # SIGTERM: stop as on the stop command
        self.stop = threading.Event()
        self.bad_frames = 0
        self.handshake_failed = 0
        self.last_bad_frame = ""
        self.journal = None
        if journal:
            self.journal = Journal(journal, nsched)
        # the queue, its counts and its policy: sys_message_queue and smq_mtx
        self.q = SysMsgQueue(
            nsched, self.state, self.table, self.journal, clock=self.clock, stopped=self.stop.is_set
        )
        # the controller's commands and their policy (no socket)
        self.cmds = DispatcherCommands(self, nsched, self.q, self.state, self.table, self.journal)
        self._tls = threading.local()
        # while the controller steps the ingest (``step_begin``): each
        # scheduler's batches wait here until it has one taken (``step_ingest``)
        self.stepped: dict | None = None
        self._step_cv = threading.Condition()
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
    def pub(self, body) -> None:
        """Publish ``body`` (a ``protocol.STATE_BODIES`` record) on this
        thread's PUB socket.  Each socket numbers what it sends, so a
        scheduler can tell it has seen everything up to a point."""
        name = getattr(self._tls, "name", "control")
        i = ("ingest", "dispatch", "control").index(name)
        self.pub_seq[i] += 1
        self.pubs[name].send(Publication(i, self.pub_seq[i], body).encode())

    def _on_state_change(self, snap) -> None:
        self.clock.cpu = snap.default_cpu_timestamp
        if self.journal is not None:
            self.journal.record("s", snap)
        self.pub(Snap(snap))

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
            self.cmds.sample_due()
            events = dict(poller.poll(100 if self.stepped is None else 1))
            if monitor is not None and monitor in events:
                recv_monitor_message(monitor)
                self.handshake_failed += 1
            if self.q.parked:  # a scheduler lost meanwhile is not waited for
                self.q.drain_parked(self._publish)
            if self.stepped is not None:
                self._step_take()
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
        if parts[0][:1] == DATA_PREFIX:  # a fin: batches alone are bare term pickles
            Fin.decode(codec.loads_frame(parts[0]), k)
            s = inboxes.get(k)
            if s is None:
                s = inboxes[k] = self._inbox_socket(k, thread=1)
            s.send(FinAck().encode())
            return
        obj = codec.loads_terms(parts[0])
        if type(obj) is not tuple or not obj:
            raise ProtocolError("frame is not a tuple")
        kind = obj[0]
        if kind == BATCH:
            try:
                batch = Batch.decode(obj, k, self.nsched)
            except ProtocolError:
                self.q.take_batch_in_order(k, None, self._publish)  # refused: it had its number
                raise
            with self._step_cv:
                st = self.stepped
                if st is not None:
                    st["frames"][k].append(batch)
            if st is not None:
                self._step_take()
                return
            self.q.take_batch_in_order(k, batch, self._publish)
        else:
            raise ProtocolError(f"unknown frame kind {kind!r}")

    # ------------------------------------------------------------- stepped
    def step_begin(self) -> None:
        """The controller steps the ingest from now on: each batch waits until
        ``step_ingest`` has it taken (runs in the control thread)."""
        with self._step_cv:
            n = self.nsched + 1
            self.stepped = {
                "frames": [deque() for _ in range(n)],
                "permits": [0] * n,
                "done": [0] * n,
                "result": [None] * n,
            }

    def step_ingest(self, k: int, timeout: float):
        """Have the ingest thread take scheduler ``k``'s next batch (waiting
        for it to arrive); returns ``(batches queued, items queued)``.  Runs
        in the control thread."""
        st = self.stepped
        if st is None:
            raise BadArg("the dispatcher's ingest is not being stepped")
        if type(k) is not int or not 1 <= k <= self.nsched:
            raise BadArg(f"step_ingest: no scheduler {k!r}")
        with self._step_cv:
            target = st["done"][k] + 1
            st["permits"][k] += 1
            if not self._step_cv.wait_for(lambda: st["done"][k] >= target, timeout):
                st["permits"][k] -= 1
                raise TimeoutError(f"no batch of scheduler {k} came to the dispatcher")
            return st["result"][k]

    def step_end(self, timeout: float) -> bool:
        """Stepping ends: every batch waiting is taken, in order, and the
        ingest takes what comes as it comes (the control thread).  False
        when the ingest thread has not taken them within ``timeout``: it
        still takes them all before it stops stepping (nothing is dropped)."""
        with self._step_cv:
            st = self.stepped
            if st is None:
                return True
            st["permits"] = [1 << 30] * (self.nsched + 1)
            st["ending"] = True
            return self._step_cv.wait_for(lambda: self.stepped is None, timeout)

    def _step_take(self) -> None:
        """Take the batches the controller has let through (the ingest thread)."""
        st = self.stepped
        if st is None:
            return
        while True:
            with self._step_cv:
                k = next(
                    (i for i in range(1, self.nsched + 1) if st["permits"][i] and st["frames"][i]),
                    None,
                )
                if k is None:
                    if st.get("ending"):  # every batch taken: stepping is over
                        self.stepped = None
                        self._step_cv.notify_all()
                    return
                st["permits"][k] -= 1
                batch = st["frames"][k].popleft()
            items = self.q.ingested_items[k]
            queued = self.q.take_batch_in_order(k, batch, self._publish)
            with self._step_cv:
                st["done"][k] += 1
                st["result"][k] = (queued, self.q.ingested_items[k] - items)
                self._step_cv.notify_all()

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

    def _publish(self, p: Published) -> None:
        """Tell the schedulers' replicas what a queued batch changed.  Runs in
        the ingest thread, right after the batch is queued."""
        if p.dead:
            self.pub(Dead(p.dead))
        if p.tracer:
            self.pub(Tracers(p.tracer))
        if p.registry is not None:
            self.pub(Registry(p.registry))
        if p.ports is not None:
            self.pub(TracerPorts(p.ports))

    # ------------------------------------------------------------- dispatch
    def dispatch_loop(self) -> None:
        """``sys_msg_dispatcher_func``'s thread: take what the queue gives
        (the whole queue, or a step while held), dispatch it, repeat."""
        self._tls.name = "dispatch"
        inboxes: dict[int, zmq.Socket] = {}
        while not self.stop.is_set():
            self.cmds.sample_due()
            taken = self.q.next_for_dispatch()
            if taken is None:
                break
            local, stepping = taken
            if not stepping:
                self._dispatch(local, inboxes)
                continue
            record: list = []
            for item in local:
                self._dispatch_recorded(item, inboxes, record)
            self.q.step_finished(record)
        for s in inboxes.values():
            s.close()

    def _dispatch_recorded(self, item, inboxes, record: list) -> None:
        """Step mode: dispatch one item of the queue as ``_dispatch`` does
        and append ``(From, Receiver, Msg, Outcome)`` for each of its
        messages, the outcome read from the counts it changed."""
        if item.n == 0:  # a QueueEvent
            self._dispatch((item,), inboxes)
            return
        type_, q = item.type, self.q
        receiver = resolve(type_, item.from_, item.to, self.state, self.table).receiver
        with q.smq:
            delivered0, dropped0 = q.delivered[type_], Counter(q.dropped)
        self._dispatch((item,), inboxes)
        with q.smq:
            outcomes = ["delivered"] * (q.delivered[type_] - delivered0)
            for (_t, reason), k in (q.dropped - dropped0).items():
                outcomes += [reason] * k
        for i, term in enumerate(item.terms()):
            record.append(
                (item.from_, receiver, term, outcomes[i] if i < len(outcomes) else "unknown")
            )

    def _dispatch(self, local, inboxes) -> None:
        """Carry out what the queue decides for the swapped-out ``local``
        (``SysMsgQueue.decide``): write each run for a trace port as it comes,
        and at each event and at the end count and send what was decided, so
        a port holds exactly what was counted as delivered to it when it
        closes.  Runs in the dispatch thread."""
        q = self.q
        local = local if type(local) is deque else deque(local)
        plan = q.decide(local)
        while True:
            then = plan.then
            if type(then) is PortWrite:
                written, error = self.table.ports[then.port].write_many(then.frames)
                q.port_written(plan, then, written, error)
                if error is not None:  # the driver failed: its port closes
                    self.cmds.events.close_ports([then.port])
                plan = q.decide(local, plan)
                continue
            self._settle(plan, inboxes)
            self.cmds.sample_due()
            if then is None:
                return
            if then.kind == "marker":  # trace_delivered
                self.cmds.events.marker_reached(then.payload)
            else:  # "close": port ids or None for all
                self.cmds.events.close_ports(then.payload)
                then.done.set()
            plan = q.decide(local)

    def _settle(self, plan: DispatchPlan, inboxes) -> None:
        """Count what was decided, then send the pid deliveries to their
        schedulers.  A full inbox pushes back on the dispatch thread; the
        deliveries for a scheduler that is lost meanwhile (dead, or a remote
        one whose link is down) are counted again as dropped
        (``scheduler_lost``): they never reach it.  When the dispatcher
        stops, what cannot be sent is dropped as ``emulator_closed``.  Runs
        in the dispatcher process, dispatch thread."""
        q = self.q
        q.settle(plan)
        for owner, deliveries in plan.out.items():
            frame = encode_deliveries(deliveries)
            sock = inboxes.get(owner)
            if sock is None:
                sock = inboxes[owner] = self._inbox_socket(owner, sndtimeo=100)
            while True:  # a full inbox pushes back on the dispatch thread
                if owner in q.lost:
                    q.undelivered(owner, deliveries, plan.kinds[owner], "scheduler_lost")
                    break
                try:
                    sock.send(frame)
                    break
                except zmq.Again:
                    if self.stop.is_set() or q.drain_by is not None:
                        # stopping, and the scheduler does not take them
                        q.undelivered(owner, deliveries, plan.kinds[owner], "emulator_closed")
                        break

    # ------------------------------------------------------------- control
    def control_loop(self) -> None:
        self._tls.name = "control"
        sock = self.ctl_sock
        parent = os.getppid()
        last_hb = time.monotonic()
        while not self.stop.is_set():
            if self.terminated:  # SIGTERM: stop as on the stop command
                self.cmds.events.stop_dispatching()
                self.stop.set()
                break
            if not sock.poll(100):
                if os.getppid() != parent:  # the controller is gone: never linger
                    self.cmds.events.stop_dispatching()
                    self.stop.set()
                now = time.monotonic()
                if now - last_hb >= 1.0:  # heartbeat for schedulers on other hosts
                    last_hb = now
                    self.pub(PubHeartbeat())
                continue
            ident, parts, user = recv_from(sock, self.security is not None)
            try:
                req_id, cmd, args = self._control_frame(ident, parts, user)
            except Exception as e:  # counted, logged with the sender, ignored
                self._bad("control", describe_peer(ident, user), sum(len(p) for p in parts), e)
                continue
            try:
                value, ok = self.cmds.command(cmd, args), True
            except Exception as e:
                value, ok = e, False
            sock.send_multipart([ident, Reply(req_id, ok, value).encode()])
            if cmd == "stop":
                self.stop.set()

    def _control_frame(self, ident: bytes, parts: list, user) -> Request:
        """A request ``(id, command, args)``, accepted from the controller
        alone: its routing id (and, with CURVE, the controller's key)."""
        if ident != self.controller_id:
            raise ProtocolError("not from the controller")
        if self.security is not None and (user is None or user.encode() != self.security["public"]):
            raise ProtocolError("the controller's routing id with another key")
        if len(parts) != 1:
            raise ProtocolError(f"a message of {len(parts)} parts, not 1")
        return Request.decode(codec.loads_frame(parts[0]), need_id=True)

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

    def hello(self) -> list:
        """Publish on every socket (from its own thread's point of view the
        socket is only used under the GIL here: the other threads are idle
        at start-up), so schedulers can prove their SUB is connected."""
        for name in ("ingest", "dispatch", "control"):
            self._tls.name = name
            self.pub(PubHello())
        self._tls.name = "control"
        return self.pub_seqs()

    def pub_seqs(self) -> list:
        """How many records each PUB socket has sent."""
        return list(self.pub_seq)

    def refusals(self) -> dict:
        """The sockets' refusals: bad frames (in all, the last, by socket),
        CURVE keys the authenticator denied, failed handshakes."""
        return {
            "bad_frames": self.bad_frames,
            "last_bad_frame": self.last_bad_frame,
            "bad_frames_at": dict(self.bad_at),
            "auth_denied": self.auth.denied if self.auth else 0,
            "handshake_failed": self.handshake_failed,
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
            with self.q.smq:
                self.q.smq.notify_all()
            for t in threads:
                t.join(5)
            for tp in self.table.ports.values():  # whatever ended the loop
                if not tp.closed:
                    close_at_exit(tp)
            for s in [self.ingest_sock, self.ctl_sock] + list(self.pubs.values()):
                s.close(linger=0 if self.terminated else 1000)
            if self.journal is not None:
                self.journal.close(made=self.q.made_total())
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
            noticed=lambda: d.stop.is_set() or d.terminated or d.q.drain_by is not None,
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
