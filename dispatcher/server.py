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
from smp.core import messages as M
from smp.core.clock import Clock
from smp.core.dispatch import resolve
from smp.core.errors import BadArg, ProtocolError
from smp.core.sampler import Sampler
from smp.core.state import TracerState, apply_state_op
from smp.core.terms import Atom, Port
from smp.ports.traceport import close_at_exit, open_trace_port, port_call
from smp.wire import codec, rundir
from smp.wire.curve import Authenticator, curve_client, curve_server, describe_peer, recv_from
from smp.wire.frames import (
    BATCH,
    DATA_PREFIX,
    Batch,
    QueueEvent,
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

from .queue import MAX_QUEUE as MAX_QUEUE
from .queue import DispatchPlan, PortWrite, Published, SysMsgQueue
from .table import PidTable

__all__ = ["dispatcher_main", "Dispatcher"]

am_error_logger = Atom("error_logger")
HWM = 1000
STOP_DRAIN_S = 2.0  # on stop, dispatch what is queued this long, then drop it
CLOSE_WAIT_S = 20.0  # a port close waits this long for its turn in the queue


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
        self._tls = threading.local()
        self.sampler: Sampler | None = None
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
    def _pub(self, body) -> None:
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
        self._pub(Snap(snap))

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
            self._sample_due()
            events = dict(poller.poll(100))
            if monitor is not None and monitor in events:
                recv_monitor_message(monitor)
                self.handshake_failed += 1
            if self.q.parked:  # a scheduler lost meanwhile is not waited for
                self.q.drain_parked(self._publish)
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
            self.q.take_batch_in_order(k, batch, self._publish)
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

    def _publish(self, p: Published) -> None:
        """Tell the schedulers' replicas what a queued batch changed.  Runs in
        the ingest thread, right after the batch is queued."""
        if p.dead:
            self._pub(Dead(p.dead))
        if p.tracer:
            self._pub(Tracers(p.tracer))
        if p.registry is not None:
            self._pub(Registry(p.registry))
        if p.ports is not None:
            self._pub(TracerPorts(p.ports))

    # ------------------------------------------------------------- dispatch
    def dispatch_loop(self) -> None:
        """``sys_msg_dispatcher_func``'s thread: take what the queue gives
        (the whole queue, or a step while held), dispatch it, repeat."""
        self._tls.name = "dispatch"
        inboxes: dict[int, zmq.Socket] = {}
        while not self.stop.is_set():
            self._sample_due()
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

    def step(self, n, unit: str) -> list:
        """Step mode (``SysMsgQueue.step``).  Runs in the control thread."""
        return self.q.step(n, unit, CLOSE_WAIT_S)

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
                    self._close_ports([then.port])
                plan = q.decide(local, plan)
                continue
            self._settle(plan, inboxes)
            self._sample_due()
            if then is None:
                return
            if then.kind == "marker":  # trace_delivered
                self._markers[then.payload].set()
            else:  # "close": port ids or None for all
                self._close_ports(then.payload)
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
            self._pub(TracerPorts(self.table.open_tracer_ports()))
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
        if self.q.enqueue_event(QueueEvent("close", port_ids, done)):
            return False  # held
        return done.wait(wait)

    def _stop_dispatching(self, drain: float = STOP_DRAIN_S) -> None:
        """The emulator stops: dispatch what is queued for at most ``drain``
        seconds more (``STOP_DRAIN_S``; the controller gives less when its
        close() has less time left), then drop the rest as
        ``emulator_closed``, and close every port after it, so each file ends
        with whole frames and holds what was counted as delivered to it.  A
        held queue stays queued.  Runs in the control thread."""
        with self.q.smq:
            held = self.q.held
        if held:  # the dispatch thread is parked: no write is under way
            self._close_ports(None)
            return
        if type(drain) not in (int, float) or not 0 <= drain <= STOP_DRAIN_S:
            drain = STOP_DRAIN_S
        self.q.drain_by = time.monotonic() + drain
        if not self._close_in_order(None, drain + 0.5):
            self._close_ports(None)  # stuck or gone: close anyway (frames stay whole)

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
                    self._pub(PubHeartbeat())
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
            self._pub(PubHello())
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
            self._pub(Registry(dict(self.table.registry)))
        return ok

    def _cmd_unregister(self, name):
        ok = self.table.unregister(name)
        if ok and self.journal is not None:
            self.journal.record("e", "unregister", name, None)
        self._pub(Registry(dict(self.table.registry)))
        return ok

    def _cmd_whereis(self, name):
        return self.table.whereis(name)

    def _cmd_hold(self):
        self.q.hold()
        return True

    def _cmd_step(self, *args):
        return self.step(*args)

    def _cmd_release(self):
        self.q.release()
        return True

    def _cmd_wait_ingested(self, *args):
        return self.q.wait_ingested(*args)

    def _cmd_scheduler_lost(self, k):
        pids = self.q.scheduler_lost(k)
        self._pub(Dead(pids))
        self._pub(Registry(dict(self.table.registry)))
        return pids

    def _cmd_status(self):
        q = self.q
        with q.smq:
            return {
                "settled": sum(q.delivered.values()) + sum(q.dropped.values()),
                "ingested": list(q.ingested),
                "ingested_items": list(q.ingested_items),
                "delivered_to": list(q.delivered_to),
                "queued": len(q.queue),
                "held": q.held,
                "dispatching": q.dispatching,
                "bad_frames": self.bad_frames,
                "parked": len(q.parked),
                "auth_denied": self.auth.denied if self.auth else 0,
            }

    def _cmd_stats(self):
        return self.statistics()

    def _cmd_sample(self, interval, t0=None):
        """Sample the queue's counts every ``interval`` s from ``t0`` (the
        controller's monotonic clock: the dispatcher runs on its host), in a
        thread of its own, so a control request that waits (for the
        schedulers' batches, a port) holds no sample back."""
        if self.sampler is not None:
            self.sampler.stop()
        self.q.reset_level_peak()
        self.sampler = Sampler(
            self.q.sample_counters, interval, t0, ("queued_max", "queue_peak_run")
        ).start()
        return True

    def _sample_due(self) -> None:
        """A sample due now is taken by whichever busy thread gets here
        first, the sampler thread being kept waiting (never under ``smq``)."""
        s = self.sampler
        if s is not None:
            s.poll()

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

    def _cmd_queue_list(self):
        return self.q.foreach_sys_msg_in_q()

    def _cmd_open_trace_port(self, kind, a, kw):
        self._port_counter += 1
        port_id = Port((self.nsched + 1) * self._port_counter)
        self.table.ports[port_id] = open_trace_port(kind, *a, **kw)
        if self.journal is not None:
            self.journal.record("e", "port_open", port_id)
        self._pub(TracerPorts(self.table.open_tracer_ports()))
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
        return list(self.q.latencies)

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
        "sample": _cmd_sample,
        "series": _cmd_series,
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
        self.q.enqueue_sys_msg(M.SYS_MSG_TYPE_ERRLGR, from_, am_error_logger, msg)
        return True

    def wait_ingested(self, want, limit: float | None = None) -> bool:
        """``SysMsgQueue.wait_ingested``.  Runs in the control thread."""
        return self.q.wait_ingested(want, limit)

    def trace_delivered(self, caller, what, ref):
        """Queue ``{trace_delivered, What, Ref}`` behind everything queued now."""
        msg = (Atom("trace_delivered"), what, ref)
        if caller is not None:
            self.q.enqueue_sys_msg(M.SYS_MSG_TYPE_PROC_MSG, caller, caller, msg)
            return ref
        ev = threading.Event()
        self._markers[ref] = ev
        self.q.enqueue_event(QueueEvent("marker", ref))
        if not ev.wait(30):
            raise TimeoutError("trace_delivered: dispatcher is held or stuck")
        del self._markers[ref]
        return msg

    def foreach_sys_msg_in_q(self) -> list:
        """``erts_foreach_sys_msg_in_q`` (``SysMsgQueue``)."""
        return self.q.foreach_sys_msg_in_q()

    def statistics(self) -> dict:
        """The queue's counts (``SysMsgQueue.statistics``; ``queue_peak``
        starts a new interval with each call) and the sockets' refusals."""
        st = self.q.statistics()
        lines = st.pop("stderr_lines")
        return {
            **st,
            "bad_frames": self.bad_frames,
            "last_bad_frame": self.last_bad_frame,
            "bad_frames_at": dict(self.bad_at),
            "auth_denied": self.auth.denied if self.auth else 0,
            "handshake_failed": self.handshake_failed,
            "stderr_lines": lines,
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
