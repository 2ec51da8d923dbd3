"""The dispatcher process: the seed's ``sys_message_queue`` and
``sys_msg_dispatcher_func``, with the tracer state behind a real rwlock.

Three threads, each with its own ZeroMQ sockets:

* ingest (the ``smq_mtx`` side): takes batches off the PULL socket in arrival
  order, which *is* the queue order.  It applies process-table events at
  once, and for each message takes the timestamp and, for
  ``profile_scheduler``, the active-scheduler count, then appends it to the
  queue.  Message bodies travel inside the batch (one pickle per batch, so
  repeated atoms and pids are stored once) and are never looked at, except
  to write them to a port.
* dispatch (reader of the state): swaps the whole queue out, as the seed
  does, and decides each message with ``smp.dispatch.resolve``, sending pid
  deliveries in batches to the owning scheduler's inbox and writing port
  deliveries in the external term format.
* control (writer of the state): serves the controller's requests: BIFs on
  the state, register, hold/release, statistics, the queue listing, trace
  ports.

Every state change is published (PUB) as a versioned snapshot to the
schedulers' replicas.
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

from smp import messages as M
from smp import wire
from smp.clock import Clock, us_to_ts
from smp.dispatch import DELIVER_PID, DELIVER_PORT, disp_failure, resolve
from smp.errors import BadArg
from smp.state import NIL, TracerState
from smp.stats import totals
from smp.terms import Atom, Pid, Port

from .table import PidTable

__all__ = ["dispatcher_main", "Dispatcher"]

_PICKLE = pickle.HIGHEST_PROTOCOL
am_active, am_error_logger = Atom("active"), Atom("error_logger")
LATENCY_SAMPLES = 200_000
MAX_QUEUE = 200_000      # queued messages before ingest stops taking (push-back)
HWM = 1000


_EVENTS = {"spawn": 3, "exit": 3, "tracer": 3, "unregister": 4}


def _check_batch(obj, nsched: int) -> None:
    """Validate a whole batch before accepting any of it (all or nothing)."""
    if type(obj) is not tuple or len(obj) != 4:
        raise ValueError("batch frame is not ('b', version, scheduler, items)")
    if obj[1] != wire.WIRE_VERSION:
        raise ValueError(f"wire version {obj[1]!r}, expected {wire.WIRE_VERSION}")
    sched, items = obj[2], obj[3]
    if type(sched) is not int or not 1 <= sched <= nsched:
        raise ValueError(f"bad scheduler id {sched!r}")
    if type(items) is not list:
        raise ValueError("batch items are not a list")
    for i, it in enumerate(items):
        if type(it) is not tuple or not it:
            raise ValueError(f"item {i} is not a tuple")
        if it[0] == "r":
            if (len(it) != 8 or type(it[1]) is not int or not 1 <= it[1] <= 6
                    or type(it[4]) is not int or not 0 <= it[4] <= 3
                    or type(it[5]) is not int or not 1 <= it[5] <= 1_000_000
                    or type(it[6]) is not bytes or type(it[7]) is not int):
                raise ValueError(f"item {i} is not a well-formed run of system messages")
        elif it[0] == "e":
            if len(it) < 2 or _EVENTS.get(it[1]) != len(it):
                raise ValueError(f"item {i} is not a well-formed table event")
        else:
            raise ValueError(f"item {i} has unknown kind {it[0]!r}")


def _sender_of(raw: bytes) -> str:
    """Name the sender of a rejected frame as well as the frame allows."""
    try:
        obj = wire.loads(raw)
        if type(obj) is tuple and len(obj) == 4 and type(obj[2]) is int:
            return f"scheduler {obj[2]}"
        if type(obj) is tuple and len(obj) >= 2 and type(obj[1]) is int:
            return f"scheduler {obj[1]}"
    except Exception:
        pass
    return "an unknown sender"


def _owner(pid: Pid, nsched: int) -> int:
    return (pid.number + (pid.serial << 15) - 80) % nsched + 1


class Dispatcher:
    def __init__(self, nsched: int, endpoints: dict, journal: str | None = None,
                 security: dict | None = None):
        self.nsched = nsched
        self.ep = endpoints
        self.security = security
        self.inbox_map: dict[int, tuple] = {}
        self.ctx = zmq.Context()
        self.auth = None
        if security:
            from smp.security import Authenticator
            self.auth = Authenticator(self.ctx, security["allowed"])
        self.table = PidTable()
        self.state = TracerState(liveness=self.table, on_change=self._on_state_change)
        self.clock = Clock()
        self.smq = threading.Condition(threading.Lock())   # smq_mtx + smq_cnd
        self.queue: deque = deque()
        self.queue_msgs = 0              # messages in the queue (runs hold several)
        self.queue_peak = 0              # the most queued since the last statistics()
        self.held = False
        self.dispatching = False
        self.stop = threading.Event()
        self.made: Counter = Counter()
        self.delivered: Counter = Counter()
        self.dropped: Counter = Counter()
        self.ingested = [0] * (nsched + 1)
        self.ingested_items = [0] * (nsched + 1)
        self.delivered_to = [0] * (nsched + 1)
        self.bad_frames = 0
        self.handshake_failed = 0
        self.last_bad_frame = ""
        self.lost: set[int] = set()
        self.sched_active = [False] * (nsched + 1)
        self.journal = None
        if journal:
            from .journal import Journal
            self.journal = Journal(journal, nsched)
        self.latencies: deque = deque(maxlen=LATENCY_SAMPLES)
        self.stderr_lines: list[str] = []
        self._tls = threading.local()
        self._port_counter = 0
        self._markers: dict = {}
        self.ingest_sock = self.ctx.socket(zmq.PULL)
        self.ingest_sock.setsockopt(zmq.RCVHWM, HWM)
        self._curve_server(self.ingest_sock)
        self.ingest_sock.bind(endpoints["ingest"])
        self.ctl_sock = self.ctx.socket(zmq.ROUTER)
        self._curve_server(self.ctl_sock)
        self.ctl_sock.bind(endpoints["disp_ctl"])
        self.pubs = {}
        self.pub_seq = [0, 0, 0]
        for i, name in enumerate(("ingest", "dispatch", "control")):
            s = self.ctx.socket(zmq.PUB)
            s.setsockopt(zmq.LINGER, 1000)
            self._curve_server(s)
            s.bind(endpoints["pub"][i])
            self.pubs[name] = s

    def _curve_server(self, sock) -> None:
        if self.security:
            sock.curve_secretkey = self.security["secret"]
            sock.curve_publickey = self.security["public"]
            sock.curve_server = True

    def _inbox_socket(self, k: int, sndtimeo: int | None = None):
        """A PUSH socket to scheduler ``k``'s inbox (its address and key came
        in the controller's ``set_inboxes``)."""
        endpoint, key = self.inbox_map[k]
        s = self.ctx.socket(zmq.PUSH)
        s.setsockopt(zmq.LINGER, 2000)
        s.setsockopt(zmq.SNDHWM, HWM)
        if sndtimeo is not None:
            s.setsockopt(zmq.SNDTIMEO, sndtimeo)
        if self.security:
            s.curve_secretkey = self.security["secret"]
            s.curve_publickey = self.security["public"]
            s.curve_serverkey = key or self.security["server_public"]
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
            monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                                              | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
            poller.register(monitor, zmq.POLLIN)
        while not self.stop.is_set():
            events = dict(poller.poll(100))
            if monitor is not None and monitor in events:
                from zmq.utils.monitor import recv_monitor_message
                recv_monitor_message(monitor)
                self.handshake_failed += 1
            if sock not in events:
                continue
            raw = sock.recv()
            try:
                obj = wire.loads(raw)
                if type(obj) is not tuple or not obj:
                    raise ValueError("frame is not a tuple")
                kind = obj[0]
                if kind == "b":
                    _check_batch(obj, self.nsched)
                    self._ingest_batch(obj[2], obj[3])
                elif kind == "fin":
                    k = obj[1]
                    if type(k) is not int or not 1 <= k <= self.nsched:
                        raise ValueError(f"fin from unknown scheduler {k!r}")
                    s = inboxes.get(k)
                    if s is None:
                        s = inboxes[k] = self._inbox_socket(k)
                    s.send(b"P" + pickle.dumps(("fin-ack",), _PICKLE))
                else:
                    raise ValueError(f"unknown frame kind {kind!r}")
            except Exception as e:  # a malformed frame is counted, never fatal
                self.bad_frames += 1
                sender = _sender_of(raw)
                self.last_bad_frame = (f"rejected ingest frame of {len(raw)} bytes from {sender}: "
                                       f"{type(e).__name__}: {e}")
                os.write(2, f"dispatcher: {self.last_bad_frame}\n".encode())
        for s in inboxes.values():
            s.close()
        if monitor is not None:
            sock.disable_monitor()
            monitor.close(linger=0)

    def _ingest_batch(self, sched: int, items) -> None:
        # push-back: while the queue is full (and not held on purpose) stop
        # taking frames; ZeroMQ's buffers fill and the schedulers wait
        with self.smq:
            while self.queue_msgs >= MAX_QUEUE and not self.held and not self.stop.is_set():
                self.smq.wait(0.05)
        events_dead: list = []
        events_tracer: list = []
        reg_changed = False
        with self.smq:
            clock, queue, made = self.clock, self.queue, self.made
            for item in items:
                if item[0] == "r":
                    _, type_, from_, to, ts_kind, n, blob, made_ns = item
                    # the run's n timestamps, consecutive and strictly increasing
                    base = clock.reserve_us(n) if ts_kind else 0
                    active = 0
                    if ts_kind == M.TS_SCHED:
                        self.state.active_sched += 1 if to is am_active else -1
                        active = self.state.active_sched
                        self.sched_active[sched] = to is am_active
                        to = NIL
                    queue.append((type_, from_, to, ts_kind, blob, n, base, active, made_ns))
                    self.queue_msgs += n
                    if self.queue_msgs > self.queue_peak:
                        self.queue_peak = self.queue_msgs
                    made[type_] += n
                    self.ingested[sched] += n
                    self.ingested_items[sched] += n
                    if self.journal is not None:
                        self.journal.record("q", type_, from_, to, ts_kind, blob, n, base, active)
                else:
                    self.ingested_items[sched] += 1
                    if self.journal is not None:
                        self.journal.record("e", *item[1:])
                    ev = item[1]
                    if ev == "spawn":
                        self.table.spawned(item[2])
                    elif ev == "exit":
                        names = self.table.exited(item[2])
                        reg_changed |= bool(names)
                        events_dead.append(item[2])
                        self.state.trace_check_exiting(item[2], smp=True)
                    elif ev == "tracer":
                        self.table.mark_tracer(item[2])
                        events_tracer.append(item[2])
                    elif ev == "unregister":
                        self.table.unregister(item[2])
                        reg_changed = True
            self.smq.notify()
        if events_dead:
            self._pub(("dead", events_dead))
        if events_tracer:
            self._pub(("tracer", events_tracer))
        if reg_changed:
            self._pub(("reg", dict(self.table.registry)))

    # ------------------------------------------------------------- dispatch
    def dispatch_loop(self) -> None:
        self._tls.name = "dispatch"
        inboxes: dict[int, zmq.Socket] = {}
        while not self.stop.is_set():
            with self.smq:
                while (not self.queue or self.held) and not self.stop.is_set():
                    self.dispatching = False
                    self.smq.notify_all()
                    self.smq.wait(0.1)
                if self.stop.is_set():
                    break
                local = self.queue
                self.queue = deque()
                self.queue_msgs = 0
                self.smq.notify_all()      # ingest may be waiting for room
                self.dispatching = True
            self._dispatch(local, inboxes)
        for s in inboxes.values():
            s.close()

    def _dispatch(self, local, inboxes) -> None:
        """Decide each run of the swapped-out queue, in order.

        A run is consecutive messages of one kind to one receiver; it is
        decided once (a concurrent state change lands between runs, one of
        the interleavings the seed's rwlock allows too) and its bytes are
        forwarded unopened.  TRACE runs to a pid (the bulk) take a fast path
        with ``resolve``'s outcome: delivered to a live, marked tracer, else
        dropped (a TRACE failure has no side effect)."""
        out: dict[int, list] = {}
        state, table = self.state, self.table
        nsched = self.nsched
        tracers, alive = table.tracers, table.alive
        lost = self.lost
        journal = self.journal
        delivered = Counter()
        dropped = Counter()
        lat = self.latencies
        now_ns = time.monotonic_ns()
        TRACE, ERRLGR = M.SYS_MSG_TYPE_TRACE, M.SYS_MSG_TYPE_ERRLGR
        for item in local:
            type_, from_, to, ts_kind, blob, n, base, active, made_ns = item
            if n == 0:                       # trace_delivered marker
                self._markers[blob[1]].set()
                continue
            lat.append(now_ns - made_ns)
            if type_ == TRACE and type(to) is Pid and not lost and journal is None:
                if to in tracers:
                    owner = (to.number + (to.serial << 15) - 80) % nsched + 1
                    dl = out.get(owner)
                    if dl is None:
                        dl = out[owner] = []
                    dl.append((to, blob, n, ts_kind, base, active))
                    delivered[TRACE] += n
                else:
                    dropped[(TRACE, "not_tracer" if to in alive else "receiver_dead")] += n
                continue
            m = M.SysMsg(type_, from_, to, None, ts_kind)
            d = resolve(m, state, table)
            if lost and type(d.receiver) is Pid and _owner(d.receiver, nsched) in lost:
                if d.action == DELIVER_PID or d.reason == "receiver_dead":
                    d = d._replace(action=2, reason="scheduler_lost", failure=True)
            if journal is not None:
                journal.record("d", type_, n, d.action, d.receiver, d.reason)
            if d.action == DELIVER_PID:
                owner = _owner(d.receiver, nsched)
                out.setdefault(owner, []).append((d.receiver, blob, n, ts_kind, base, active))
                delivered[type_] += n
            elif d.action == DELIVER_PORT:
                from smp.etf import encode
                port = table.ports[d.receiver]
                for i, body in enumerate(wire.loads(blob)):
                    ts = us_to_ts(base + i) if ts_kind else None
                    port.write(encode(M.complete(body, ts_kind, ts, active)))
                delivered[type_] += n
            else:
                if d.failure:
                    if type_ == ERRLGR:
                        for body in wire.loads(blob):
                            disp_failure(m._replace(msg=body), d.receiver, state, self._stderr)
                    else:
                        for _ in range(n):
                            disp_failure(m, d.receiver, state, self._stderr)
                dropped[(type_, d.reason)] += n
        with self.smq:
            self.delivered.update(delivered)
            self.dropped.update(dropped)
            for owner, dl in out.items():
                self.delivered_to[owner] += sum(x[2] for x in dl)
        for owner, deliveries in out.items():
            frame = b"P" + pickle.dumps(("d", deliveries), _PICKLE)
            sock = inboxes.get(owner)
            if sock is None:
                sock = inboxes[owner] = self._inbox_socket(owner, sndtimeo=100)
            while True:   # a full inbox pushes back on the dispatch thread
                try:
                    sock.send(frame)
                    break
                except zmq.Again:
                    if self.stop.is_set():
                        return

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
            if not sock.poll(100):
                if os.getppid() != parent:    # the controller is gone: never linger
                    self.stop.set()
                now = time.monotonic()
                if now - last_hb >= 1.0:      # heartbeat for schedulers on other hosts
                    last_hb = now
                    self._pub(("hb",))
                continue
            ident, raw = sock.recv_multipart()
            try:
                req_id, cmd, args = wire.loads_any(raw)
            except Exception as e:
                self.bad_frames += 1
                self.last_bad_frame = f"control: {type(e).__name__}: {e}"
                continue
            try:
                value, ok = self.command(cmd, args), True
            except BaseException as e:
                value, ok = e, False
            sock.send_multipart([ident, wire.dumps_any(("r", req_id, ok, value))])
            if cmd == "stop":
                self.stop.set()

    def command(self, cmd: str, args):
        st = self.state
        if cmd == "state":
            op, a = args
            if op == "change_default_tracing":
                on, bits, tracer, cpu = a
                return st.change_default_tracing(on, bits, tracer, cpu)
            return getattr(st, op)(*a)
        if cmd == "set_inboxes":
            self.inbox_map = dict(args[0])
            return True
        if cmd == "hello":
            # publish on every socket (from its own thread's point of view the
            # socket is only used under the GIL here: the other threads are idle
            # at start-up), so schedulers can prove their SUB is connected
            for name in ("ingest", "dispatch", "control"):
                self._tls.name = name
                self._pub(("hello",))
            self._tls.name = "control"
            return list(self.pub_seq)
        if cmd == "pub_seq":
            return list(self.pub_seq)
        if cmd == "is_alive":
            return self.table.is_alive(args[0])
        if cmd == "valid_port":
            return self.table.is_valid_tracer_port(args[0])
        if cmd == "register":
            ok = self.table.register(*args)
            if ok:
                if self.journal is not None:
                    self.journal.record("e", "register", args[0], args[1])
                self._pub(("reg", dict(self.table.registry)))
            return ok
        if cmd == "unregister":
            ok = self.table.unregister(args[0])
            if ok and self.journal is not None:
                self.journal.record("e", "unregister", args[0], None)
            self._pub(("reg", dict(self.table.registry)))
            return ok
        if cmd == "whereis":
            return self.table.whereis(args[0])
        if cmd == "hold":
            with self.smq:
                self.held = True
                while self.dispatching:
                    self.smq.wait(0.1)
            return True
        if cmd == "release":
            with self.smq:
                self.held = False
                self.smq.notify_all()
            return True
        if cmd == "wait_ingested":
            deadline = time.monotonic() + 10
            with self.smq:
                while any(self.ingested_items[k] < n for k, n in enumerate(args[0])):
                    if time.monotonic() > deadline:
                        raise TimeoutError("dispatcher did not receive every scheduler batch")
                    self.smq.wait(0.01)
            return True
        if cmd == "scheduler_lost":
            k = args[0]
            with self.smq:
                self.lost.add(k)
                pids = [p for p in list(self.table.alive) if _owner(p, self.nsched) == k]
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
                    msg = M.profile_scheduler_q(k, Atom("inactive"), self.state.active_sched,
                                                self.clock.now())
                    self.queue.append((M.SYS_MSG_TYPE_SYSPROF, NIL, NIL, M.TS_NONE,
                                       pickle.dumps([msg], _PICKLE), 1, 0, 0, time.monotonic_ns()))
                    self.made[M.SYS_MSG_TYPE_SYSPROF] += 1
                    self.smq.notify()
            self._pub(("dead", pids))
            self._pub(("reg", dict(self.table.registry)))
            return pids
        if cmd == "status":
            with self.smq:
                return {"settled": sum(self.delivered.values()) + sum(self.dropped.values()),"ingested": list(self.ingested), "delivered_to": list(self.delivered_to),
                        "queued": len(self.queue), "held": self.held,
                        "dispatching": self.dispatching, "bad_frames": self.bad_frames,
                        "auth_denied": self.auth.denied if self.auth else 0}
        if cmd == "stats":
            return self.statistics()
        if cmd == "queue_list":
            return self.foreach_sys_msg_in_q()
        if cmd == "open_trace_port":
            from smp.tracerports import open_tracer_port
            kind, a, kw = args
            self._port_counter += 1
            port_id = Port((self.nsched + 1) * self._port_counter)
            self.table.ports[port_id] = open_tracer_port(kind, *a, **kw)
            if self.journal is not None:
                self.journal.record("e", "port_open", port_id)
            self._pub(("ports", [p for p, tp in self.table.ports.items() if not tp.closed]))
            return port_id
        if cmd == "trace_port_call":
            port_id, method, a = args
            tp = self.table.ports.get(port_id)
            if tp is None:
                raise BadArg(f"no trace port {port_id!r}")
            if method == "terms":
                return tp.terms(*a) if hasattr(tp, "terms") else None
            if method == "close":
                with self.smq:   # not in the middle of a write
                    tp.close()
                    if self.journal is not None:
                        self.journal.record("e", "port_close", port_id)
                self._pub(("ports", [p for p, t in self.table.ports.items() if not t.closed]))
                st.trace_check_exiting(port_id, smp=True)
                return True
            if method == "info":
                return {"kind": tp.kind, "closed": tp.closed, **tp.stats,
                        **({"port": tp.port} if hasattr(tp, "port") else {})}
            return getattr(tp, method)(*a)
        if cmd == "trace_delivered":
            return self.trace_delivered(*args)
        if cmd == "latencies":
            return list(self.latencies)
        if cmd == "stop":
            for tp in self.table.ports.values():
                try:
                    tp.flush(2)
                    tp.close()
                except Exception:
                    pass
            return self.statistics()
        raise BadArg(f"unknown dispatcher command {cmd!r}")

    def trace_delivered(self, caller, what, ref):
        """Queue ``{trace_delivered, What, Ref}`` behind everything queued now."""
        msg = (Atom("trace_delivered"), what, ref)
        if caller is not None:
            with self.smq:
                blob = pickle.dumps([msg], _PICKLE)
                self.queue.append((M.SYS_MSG_TYPE_PROC_MSG, caller, caller, M.TS_NONE,
                                   blob, 1, 0, 0, time.monotonic_ns()))
                if self.journal is not None:
                    self.journal.record("q", M.SYS_MSG_TYPE_PROC_MSG, caller, caller, M.TS_NONE,
                                        blob, 1, 0, 0)
                self.made[M.SYS_MSG_TYPE_PROC_MSG] += 1
                self.smq.notify()
            return ref
        ev = threading.Event()
        self._markers[ref] = ev
        with self.smq:
            self.queue.append((M.SYS_MSG_TYPE_PROC_MSG, NIL, NIL, M.TS_NONE, ("marker", ref),
                               0, 0, 0, 0))
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
        for type_, from_, to, ts_kind, blob, n, base, active, _ in items:
            if n == 0:
                continue
            if type_ == M.SYS_MSG_TYPE_SEQTRACE:
                to = st.get_system_seq_tracer()
            elif type_ == M.SYS_MSG_TYPE_SYSMON:
                to = st.get_system_monitor()
            elif type_ == M.SYS_MSG_TYPE_SYSPROF:
                to = st.get_system_profile()
            elif type_ == M.SYS_MSG_TYPE_ERRLGR:
                to = am_error_logger
            for i, body in enumerate(wire.loads(blob)):
                ts = us_to_ts(base + i) if ts_kind else None
                out.append((from_, to, M.complete(body, ts_kind, ts, active)))
        return out

    def statistics(self) -> dict:
        """The counts; ``queue_peak`` is the deepest the queue was since the
        previous call (each call starts a new interval)."""
        with self.smq:
            peak, self.queue_peak = self.queue_peak, self.queue_msgs
            queued = Counter()
            for item in self.queue:
                queued[item[0]] += item[5]
            made = Counter(self.made)
            delivered = Counter(self.delivered)
            dropped = Counter(self.dropped)
        return {
            **totals(made, delivered, dropped, sum(queued.values())),
            "queue_peak": peak,
            "bad_frames": self.bad_frames, "last_bad_frame": self.last_bad_frame,
            "auth_denied": self.auth.denied if self.auth else 0,
            "handshake_failed": self.handshake_failed,
            "stderr_lines": list(self.stderr_lines),
        }

    # ------------------------------------------------------------- main
    def serve(self) -> None:
        threads = [threading.Thread(target=f, name=n, daemon=True) for n, f in (
            ("ingest", self.ingest_loop), ("dispatch", self.dispatch_loop))]
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
            for s in [self.ingest_sock, self.ctl_sock] + list(self.pubs.values()):
                s.close(linger=1000)
            if self.journal is not None:
                self.journal.close()
            if self.auth is not None:
                self.auth.stop()
            self.ctx.term()


def dispatcher_main(nsched: int, endpoints: dict, ready, journal: str | None = None,
                    security: dict | None = None) -> None:
    """Entry point of the dispatcher OS process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        d = Dispatcher(nsched, endpoints, journal, security)
    except Exception:
        traceback.print_exc()
        raise SystemExit(3)
    ready.set()
    d.serve()
