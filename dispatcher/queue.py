"""The smp build's system-message queue: the seed's ``sys_message_queue``
under ``smq_mtx``/``smq_cnd``, ``enqueue_sys_msg_unlocked`` and the
decisions of ``sys_msg_dispatcher_func``, with no socket and no thread.

Why a class of its own: the queue's policy is what ``erl_trace.c`` says
(each message gets its timestamp and, for ``profile_scheduler``, the
active-scheduler count as it enters the queue; process-table events apply
in queue order; the dispatcher swaps the whole queue out and decides it in
order), and the emulator adds push-back, causal parking of batches and step
mode.  Kept apart from the ZeroMQ loops of ``dispatcher.server``, which only
move bytes into it and send what ``decide`` returns, the policy is
unit-tested directly (``tests/dispatcher_queue``), as pyzmq keeps its
authenticator's decisions apart from the thread that feeds it.

Threads (in the dispatcher process): the ingest thread calls
``take_batch_in_order`` and ``drain_parked`` (and through them
``enqueue_batch``); the dispatch thread ``next_for_dispatch``, ``decide``,
``port_written``, ``settle``, ``undelivered`` and ``step_finished``; the
control thread the rest.  Every counter and the queue itself are read and
written under ``smq`` (``smq_mtx`` and ``smq_cnd`` in one Condition); the
tracer state and the table are read by the dispatch thread as the seed's
dispatcher reads them under the tracer rwlock.  ``parked`` belongs to the
ingest thread alone.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from smp.core import messages as M
from smp.core.clock import Clock
from smp.core.dispatch import DELIVER_PID, DELIVER_PORT, DROP, disp_failure, resolve
from smp.core.errors import BadArg
from smp.core.placement import pid_owner, port_owner
from smp.core.state import NIL, TracerState
from smp.core.stats import totals
from smp.core.terms import Atom
from smp.wire import codec
from smp.wire.etf import encode
from smp.wire.frames import Batch, Delivery, QueueEntry, QueueEvent, Run

from .table import PidTable, take_table_event

__all__ = [
    "SysMsgQueue",
    "DispatchPlan",
    "PortWrite",
    "Published",
    "MAX_QUEUE",
    "ORDER_WAIT_S",
    "LATENCY_SAMPLES",
    "INGEST_STALL_S",
    "INGEST_WAIT_S",
]

_PICKLE = pickle.HIGHEST_PROTOCOL
am_active = Atom("active")
am_error_logger = Atom("error_logger")
LATENCY_SAMPLES = 200_000
MAX_QUEUE = 200_000  # queued messages before ingest stops taking (push-back)
#: The longest a batch waits for the batches of other schedulers it follows.
ORDER_WAIT_S = 2.0
INGEST_STALL_S = 10.0  # waiting for batches: this long without any is an error
INGEST_WAIT_S = 25.0  # ... and this long in all (the controller waits 30 s)


class Published(NamedTuple):
    """What one enqueued batch changed that the schedulers' replicas must
    hear: pids that exited, new tracer marks, and the registry and the open
    tracer ports when they changed (None when not)."""

    dead: list
    tracer: list
    registry: dict | None
    ports: list | None


class PortWrite(NamedTuple):
    """A run for a trace port the dispatcher owns: its messages in the
    external term format, to be written before anything after it is decided
    (a failed write closes the port for what follows)."""

    port: object
    type: int
    n: int
    frames: list


@dataclass(slots=True)
class DispatchPlan:
    """What ``decide`` decided and the server must carry out: the deliveries
    for each scheduler (``out``, by owner; ``kinds`` counts them by type),
    the counts, and ``then``: what stopped the decisions, a ``QueueEvent``
    (settle ``out`` first, then handle it) or a ``PortWrite`` (write it, give
    the result to ``port_written``, then ``decide`` on), or None when the
    swapped-out queue is all decided."""

    out: dict = field(default_factory=dict)
    kinds: dict = field(default_factory=dict)
    delivered: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)
    then: object = None
    now_ns: int = 0

    @property
    def decided(self) -> int:
        return sum(self.delivered.values()) + sum(self.dropped.values())


def _log_stderr(line: str) -> None:
    os.write(2, line.encode())


class SysMsgQueue:
    def __init__(
        self,
        nsched: int,
        state: TracerState,
        table: PidTable,
        journal=None,
        *,
        clock: Clock | None = None,
        stopped: Callable[[], bool] = lambda: False,
        monotonic: Callable[[], float] = time.monotonic,
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
        log: Callable[[str], None] = _log_stderr,
        max_queue: int = MAX_QUEUE,
    ):
        self.nsched = nsched
        self.state = state
        self.table = table
        self.journal = journal
        self.clock = Clock() if clock is None else clock
        self.stopped = stopped
        self.monotonic = monotonic
        self.monotonic_ns = monotonic_ns
        self.log = log
        self.max_queue = max_queue
        self.smq = threading.Condition(threading.Lock())  # smq_mtx + smq_cnd
        # sys_message_queue .. sys_message_queue_end: one deque holds both ends
        self.queue: deque = deque()
        self.queue_msgs = 0  # messages in the queue (runs hold several)
        self.queue_peak = 0  # the most queued since the last statistics()
        # made and not yet decided (queued or being dispatched): the deepest
        # since the last sample (``sample_counters``), and since sampling began
        self.level_peak = 0
        self.level_peak_run = 0
        self.held = False
        self.dispatching = False
        self.step_req: tuple | None = None  # held: (n, unit) to dispatch now (step mode)
        self.step_done: list | None = None  # what the last step decided
        self.in_dispatch = 0  # messages swapped out of the queue, not yet counted
        self.drain_by: float | None = None  # stopping: after this, drop what is left
        self.made: Counter = Counter()
        self.delivered: Counter = Counter()
        self.dropped: Counter = Counter()
        self.ingested = [0] * (nsched + 1)
        self.ingested_items = [0] * (nsched + 1)
        self.parked: list = []  # batches waiting for a peer's (ingest thread)
        self.order_waits_expired = 0
        self.batches_taken = [0] * (nsched + 1)  # per scheduler, in its numbering
        self.delivered_to = [0] * (nsched + 1)
        self.lost: set[int] = set()
        self.sched_active = [False] * (nsched + 1)
        self.latencies: deque = deque(maxlen=LATENCY_SAMPLES)
        self.stderr_lines: list[str] = []

    # ------------------------------------------------------------- enqueue
    def take_batch_in_order(self, k: int, batch: Batch | None, publish) -> int:
        """Queue scheduler ``k``'s next batch once every batch it depends on
        is queued (``after``: per scheduler, how many of its batches had been
        sent before a signal from it reached ``k``), so that what one process
        made before it sent is queued before what its receiver made after
        receiving, as the seed's enqueue at make time orders them.  Batches
        wait in arrival order; one from a lost scheduler is not waited for.
        ``batch`` None is one that was refused: it only takes its number.
        ``publish`` gets each queued batch's ``Published``.  Returns how many
        batches were queued.  Runs in the ingest thread."""
        self.parked.append((k, batch, self.monotonic()))
        return self.drain_parked(publish)

    def drain_parked(self, publish) -> int:
        """Queue every parked batch whose dependencies are queued, or that
        waited ``ORDER_WAIT_S`` (what it waits for was refused on the way:
        counted in ``order_waits_expired``).  Runs in the ingest thread."""
        taken = 0
        progress = True
        while progress and self.parked:
            progress = False
            blocked: set = set()
            now = self.monotonic()
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
                    publish(self.enqueue_batch(k, batch.items))
                    taken += 1
                self.batches_taken[k] += 1
                progress = True
                break
        return taken

    def enqueue_batch(self, sched: int, items) -> Published:
        """Queue one batch of scheduler ``sched`` (runs and process-table
        events, in the order it made them), as ``enqueue_sys_msg_unlocked``
        queues each message under ``smq_mtx``: every run gets its consecutive
        timestamps from the clock and, for ``profile_scheduler``, the
        active-scheduler count, in queue order; each event is applied to the
        table (and the tracer state) at once.  While the queue is full (and
        not held on purpose) wait first: push-back.  Runs in the ingest
        thread."""
        dead: list = []
        tracer: list = []
        reg_changed = ports_changed = False
        with self.smq:
            # push-back: while the queue is full (and not held on purpose)
            # stop taking frames; ZeroMQ's buffers fill and the schedulers wait
            while self.queue_msgs >= self.max_queue and not self.held and not self.stopped():
                self.smq.wait(0.05)
            clock, state, table = self.clock, self.state, self.table
            for item in items:
                if type(item) is Run:
                    type_, from_, to, ts_kind, n, blob, made_ns = item
                    # the run's n timestamps, consecutive and strictly increasing
                    base = clock.reserve_us(n) if ts_kind else 0
                    active = 0
                    if ts_kind == M.TS_SCHED:
                        state.active_sched += 1 if to is am_active else -1
                        active = state.active_sched
                        self.sched_active[sched] = to is am_active
                        to = NIL
                    entry = QueueEntry(type_, from_, to, ts_kind, blob, n, base, active, made_ns)
                    self.enqueue_sys_msg_unlocked(entry)
                    if self.queue_msgs > self.queue_peak:
                        self.queue_peak = self.queue_msgs
                    self.ingested[sched] += n
                    self.ingested_items[sched] += n
                    continue
                self.ingested_items[sched] += 1
                if self.journal is not None:
                    self.journal.record("e", item.kind, *item.args)
                reg, ports = take_table_event(table, state, item.kind, item.args, dead, tracer)
                reg_changed |= reg
                ports_changed |= ports
            self.smq.notify()
        return Published(
            dead,
            tracer,
            dict(table.registry) if reg_changed else None,
            table.open_tracer_ports() if ports_changed else None,
        )

    def enqueue_sys_msg_unlocked(self, entry: QueueEntry) -> None:
        """``enqueue_sys_msg_unlocked``: append a run to the queue, count it
        as made and journal it.  Under ``smq``."""
        self.queue.append(entry)
        self.queue_msgs += entry.n
        self.made[entry.type] += entry.n
        level = self.queue_msgs + self.in_dispatch
        if level > self.level_peak:
            self.level_peak = level
            if level > self.level_peak_run:
                self.level_peak_run = level
        if self.journal is not None:
            self.journal.record("q", *entry.journal())

    def _enqueue_one(self, type_: int, from_, to, msg) -> None:
        entry = QueueEntry(
            type_, from_, to, M.TS_NONE, pickle.dumps([msg], _PICKLE), 1, 0, 0, self.monotonic_ns()
        )
        self.enqueue_sys_msg_unlocked(entry)
        self.smq.notify()

    def enqueue_sys_msg(self, type_: int, from_, to, msg) -> None:
        """``enqueue_sys_msg``: queue one message the dispatcher makes itself
        (no timestamp).  Runs in the control thread."""
        with self.smq:
            self._enqueue_one(type_, from_, to, msg)

    def enqueue_event(self, event: QueueEvent) -> bool:
        """Queue a port close or a ``trace_delivered`` marker behind every
        message queued now.  Returns whether the queue is held (the event
        then waits for the release).  Runs in the control thread."""
        with self.smq:
            self.queue.append(event)
            self.smq.notify_all()
            return self.held

    def scheduler_lost(self, k: int) -> list:
        """Scheduler ``k`` died: its processes exit now, in pid order, and
        if it was active under ``profile_scheduler`` it turns inactive, with
        a ``profile`` message at the time the loss was noticed.  Returns the
        pids that exited.  Runs in the control thread."""
        with self.smq:
            self.lost.add(k)
            # (sorted: a set of pids iterates in the order of their addresses)
            pids = sorted(p for p in list(self.table.alive) if pid_owner(p, self.nsched) == k)
            if self.journal is not None:
                self.journal.record("lost", k, pids)
            for pid in pids:
                self.table.exited(pid)
                self.state.trace_check_exiting(pid, smp=True)
            if self.sched_active[k] and self.state.profile_scheduler:
                self.sched_active[k] = False
                self.state.active_sched -= 1
                msg = M.profile_scheduler_q(
                    k, Atom("inactive"), self.state.active_sched, self.clock.now()
                )
                self._enqueue_one(M.SYS_MSG_TYPE_SYSPROF, NIL, NIL, msg)
        return pids

    def wait_ingested(self, want, limit: float | None = None) -> bool:
        """Wait until ``want[k]`` items of each scheduler ``k`` are queued.
        Under push-back (a slow port) that takes as long as the queue needs
        to make room, so only ``INGEST_STALL_S`` without any batch taken is
        an error; with ``limit``, give up after that many seconds and return
        False.  Runs in the control thread."""
        start = last_change = self.monotonic()
        with self.smq:
            last = sum(self.ingested_items)
            while any(self.ingested_items[k] < n for k, n in enumerate(want)):
                now = self.monotonic()
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

    # ------------------------------------------------------------- take
    def take(self) -> deque:
        """Swap the whole queue out, as ``sys_msg_dispatcher_func`` does
        (``local_sys_message_queue = sys_message_queue``); its messages count
        as queued until ``settle`` counts them."""
        with self.smq:
            return self._swap_out()

    def _swap_out(self) -> deque:
        local, self.queue, self.queue_msgs = self.queue, deque(), 0
        # counted as queued until decided, so statistics() always adds up
        self.in_dispatch = sum(item.n for item in local)
        self.smq.notify_all()  # ingest may be waiting for room
        return local

    def take_step(self, n: int, unit: str) -> deque:
        """Take the next ``n`` messages (``unit`` "message"; a run longer than
        what is left is split, its bodies and timestamps kept in order) or
        the next ``n`` runs off the queue, with the events (port closes,
        markers) before them."""
        with self.smq:
            return self._take_step(n, unit)

    def _take_step(self, n: int, unit: str) -> deque:
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
        self.in_dispatch = sum(item.n for item in local)
        self.smq.notify_all()
        return local

    def next_for_dispatch(self) -> tuple[deque, bool] | None:
        """The top of ``sys_msg_dispatcher_func``'s loop: wait on ``smq_cnd``
        until there is something to dispatch (while held: a step request),
        then take it.  Returns ``(local, stepping)``, or None when stopping.
        Runs in the dispatch thread."""
        with self.smq:
            while (not self.queue or (self.held and self.step_req is None)) and not self.stopped():
                self.dispatching = False
                self.smq.notify_all()
                self.smq.wait(0.1)
            if self.stopped():
                return None
            stepping = self.held
            local = self._take_step(*self.step_req) if stepping else self._swap_out()
            self.dispatching = True
        return local, stepping

    def step_finished(self, record: list) -> None:
        """The step is dispatched; ``record`` is what it decided.  Runs in the
        dispatch thread."""
        with self.smq:
            self.step_done, self.step_req = record, None
            self.smq.notify_all()

    def hold(self) -> None:
        """Hold the dispatcher: nothing more is taken off the queue, and the
        dispatch under way finishes first.  Runs in the control thread."""
        with self.smq:
            self.held = True
            while self.dispatching:
                self.smq.wait(0.1)

    def release(self) -> None:
        with self.smq:
            self.held = False
            self.smq.notify_all()

    def step(self, n, unit: str, wait: float) -> list:
        """Step mode: while held, have the dispatch thread dispatch exactly
        the next ``n`` messages (``unit="message"``, the seed's granularity:
        a run is split) or runs (``unit="run"``), then stay held.  Returns
        ``(From, Receiver, Msg, Outcome)`` for each message dispatched,
        Outcome ``delivered`` or the reason it was dropped.  Runs in the
        control thread."""
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
            deadline = self.monotonic() + wait
            while self.step_req is not None or self.dispatching:
                if self.stopped() or self.monotonic() > deadline:
                    self.step_req = None
                    raise TimeoutError("step: the dispatch thread did not take the step")
                self.smq.wait(0.05)
            done, self.step_done = self.step_done, None
        return done

    # ------------------------------------------------------------- decide
    def decide(self, local: deque, plan: DispatchPlan | None = None) -> DispatchPlan:
        """Decide the runs of the swapped-out queue ``local`` in order, taking
        them off its front, as the loop of ``sys_msg_dispatcher_func`` does,
        and return what to do instead of doing it (``DispatchPlan``).

        A run is consecutive messages of one kind to one receiver; it is
        decided once with ``smp.core.dispatch.resolve`` (a concurrent state
        change lands between runs, one of the interleavings the seed's rwlock
        allows too) and its bytes are forwarded unopened (a ``Delivery``).
        Decisions stop at an event (``QueueEvent``: a ``trace_delivered``
        marker, a port close), before which everything decided so far is
        settled, and at a run for a trace port the dispatcher owns
        (``PortWrite``).  While stopping (``drain_by`` passed) what is left
        is dropped as ``emulator_closed``.  Pass the returned plan back to go
        on after a port write.  Runs in the dispatch thread."""
        if plan is None:
            plan = DispatchPlan(now_ns=self.monotonic_ns())
        plan.then = None
        out, kinds, delivered, dropped = plan.out, plan.kinds, plan.delivered, plan.dropped
        state, table, nsched, lost = self.state, self.table, self.nsched, self.lost
        journal, lat, now_ns = self.journal, self.latencies, plan.now_ns
        while local:
            item = local.popleft()
            if item.n == 0:  # a QueueEvent, in queue order
                plan.then = item
                return plan
            type_, from_, to, ts_kind, blob, n, base, active, made_ns = item
            if self.drain_by is not None and self.monotonic() > self.drain_by:
                dropped[(type_, "emulator_closed")] += n
                if journal is not None:
                    journal.record("d", type_, n, DROP, to, "emulator_closed")
                continue
            lat.append(now_ns - made_ns)
            d = resolve(type_, from_, to, state, table, lost, nsched)
            if journal is not None:
                journal.record("d", type_, n, d.action, d.receiver, d.reason)
            if d.action == DELIVER_PID or (
                d.action == DELIVER_PORT and d.receiver in table.proc_ports
            ):
                # a port a process opened: its scheduler writes the bytes to
                # the driver (erts_raw_port_command)
                if d.action == DELIVER_PID:
                    owner = pid_owner(d.receiver, nsched)
                else:
                    owner = port_owner(d.receiver, nsched)
                if owner not in out:
                    out[owner], kinds[owner] = [], Counter()
                out[owner].append(Delivery.of(item, d.receiver))
                delivered[type_] += n
                kinds[owner][type_] += n
            elif d.action == DELIVER_PORT:
                try:
                    frames = [encode(term) for term in item.terms()]
                except (TypeError, ValueError) as e:  # data, not a term: never written
                    self.log(
                        f"dispatcher: a run for trace port {d.receiver!r} holds "
                        f"what is not a term ({e})\n"
                    )
                    dropped[(type_, "not_a_term")] += n
                    continue
                plan.then = PortWrite(d.receiver, type_, n, frames)
                return plan
            else:
                if d.failure:
                    m = M.SysMsg(type_, from_, to, None, ts_kind)
                    if type_ == M.SYS_MSG_TYPE_ERRLGR:
                        for body in codec.loads_terms(blob):
                            disp_failure(m._replace(msg=body), d.receiver, state, self._stderr)
                    else:
                        for _ in range(n):
                            disp_failure(m, d.receiver, state, self._stderr)
                dropped[(type_, d.reason)] += n
        return plan

    def port_written(self, plan: DispatchPlan, write: PortWrite, written: int, error) -> None:
        """Count a port write: ``written`` messages delivered; on ``error``
        (the driver failed, and the server closes the port) the rest dropped
        as ``port_closed``.  Runs in the dispatch thread."""
        if error is not None:
            self.log(f"dispatcher: trace port {write.port!r}: {error}\n")
            plan.dropped[(write.type, "port_closed")] += write.n - written
        plan.delivered[write.type] += written
        plan.then = None

    def settle(self, plan: DispatchPlan) -> None:
        """Count what ``plan`` decided (the server sends its deliveries next).
        Runs in the dispatch thread."""
        with self.smq:
            self.delivered.update(plan.delivered)
            self.dropped.update(plan.dropped)
            self.in_dispatch -= plan.decided
            for owner, dl in plan.out.items():
                self.delivered_to[owner] += sum(x.n for x in dl)

    def undelivered(self, owner: int, deliveries: list, by_type: Counter, reason: str) -> None:
        """Deliveries counted for scheduler ``owner`` that will not reach it:
        dropped for ``reason`` instead; ``by_type`` counts them by type.  Runs
        in the dispatch thread."""
        n_all = sum(x.n for x in deliveries)
        with self.smq:
            for t, n in by_type.items():
                if n:
                    self.delivered[t] -= n
                    self.dropped[(t, reason)] += n
            self.delivered_to[owner] -= n_all

    def _stderr(self, line: str) -> None:
        self.stderr_lines.append(line)
        self.log(line)

    # ------------------------------------------------------------- read
    def foreach_sys_msg_in_q(self) -> list:
        """``erts_foreach_sys_msg_in_q``: (from, to, msg) of each queued
        message, the receiver of the system-wide kinds as they are now."""
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

    def reset_level_peak(self) -> None:
        """Sampling begins: the peaks count from the queue's level now."""
        with self.smq:
            self.level_peak = self.level_peak_run = self.queue_msgs + self.in_dispatch

    def sample_counters(self) -> dict:
        """The counts for a sample (the dispatcher's sampler thread): made,
        delivered, dropped (and by reason, as ``dropped_by_reason.REASON``),
        ``queued`` (made and not yet decided) now and ``queued_max``, the
        most it was since the previous sample (each call starts a new
        interval), and ``queue_peak_run``, the most since sampling began."""
        with self.smq:
            level = self.queue_msgs + self.in_dispatch
            peak, self.level_peak = max(self.level_peak, level), level
            self.level_peak_run = max(self.level_peak_run, peak)
            d = {
                "made": sum(self.made.values()),
                "delivered": sum(self.delivered.values()),
                "queued": level,
                "queued_max": peak,
                "queue_peak_run": self.level_peak_run,
            }
            dropped = list(self.dropped.items())
        d["dropped"] = sum(n for _, n in dropped)
        for (_, reason), n in dropped:
            key = "dropped_by_reason." + reason
            d[key] = d.get(key, 0) + n
        return d

    def made_total(self, wait: float = 1.0) -> int | None:
        """The messages queued in all (the journal's ``end`` record); None
        when the queue's lock is not free within ``wait`` seconds (a thread
        still holds it at the close: the journal is then left without its
        end, as one cut short)."""
        if not self.smq.acquire(timeout=wait):
            return None
        try:
            return sum(self.made.values())
        finally:
            self.smq.release()

    def statistics(self) -> dict:
        """The counts (``smp.core.stats.totals``: made = delivered + dropped +
        queued), ``ingested`` by scheduler, and ``queue_peak``: the deepest
        the queue was since the previous call (each call starts a new
        interval)."""
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
            "stderr_lines": list(self.stderr_lines),
        }
