"""The dispatcher's queue policy, driven directly: no process, no socket,
no thread (``dispatcher.queue.SysMsgQueue``).

Each test plays the part of the server's threads by calling what they call:
``take_batch_in_order`` (ingest), ``take``/``take_step``, ``decide``,
``port_written`` and ``settle`` (dispatch).  Time is a counter the test
moves, so parking is tested without sleeping.
"""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

from dispatcher.journal import Journal
from dispatcher.queue import ORDER_WAIT_S, PortWrite, SysMsgQueue
from dispatcher.table import PidTable
from smp.app.replay import read_records
from smp.core import messages as M
from smp.core.clock import Clock, ts_to_us
from smp.core.errors import BadArg
from smp.core.placement import PID_BASE, pid_owner
from smp.core.state import NIL, TracerState
from smp.core.terms import Atom, Pid, Port
from smp.ports.traceport import MemoryTracePort
from smp.wire.frames import Batch, QueueEvent, Run, TableEvent

A = Atom
NSCHED = 2
TRACE, PROC_MSG, SYSPROF = M.SYS_MSG_TYPE_TRACE, M.SYS_MSG_TYPE_PROC_MSG, M.SYS_MSG_TYPE_SYSPROF


class FakeTime:
    """``time.monotonic`` that moves only when the test says so."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class FrozenClock(Clock):
    """A wall clock that never moves: every timestamp comes from the queue's
    strictly-increasing rule, so the expected values are exact."""

    __slots__ = ()
    START = 1_700_000_000_000_000

    def now_us(self) -> int:
        us = max(self.START, self.last + 1)
        self.last = us
        return us


def pid(k: int, i: int = 0) -> Pid:
    """The ``i``-th pid of scheduler ``k``."""
    p = Pid(PID_BASE + (k - 1) + NSCHED * i)
    assert pid_owner(p, NSCHED) == k
    return p


def run(type_, from_, to, bodies, ts_kind=M.TS_NONE) -> Run:
    return Run(type_, from_, to, ts_kind, len(bodies), pickle.dumps(bodies, 5), 0)


def ev(kind: str, *args) -> TableEvent:
    return TableEvent(kind, args)


@pytest.fixture
def now():
    return FakeTime()


@pytest.fixture
def q(now):
    table = PidTable()
    lines: list = []
    queue = SysMsgQueue(
        NSCHED,
        TracerState(liveness=table),
        table,
        clock=FrozenClock(),
        monotonic=now,
        monotonic_ns=lambda: int(now() * 1e9),
        log=lines.append,
    )
    queue.logged = lines
    return queue


def adds_up(q: SysMsgQueue) -> dict:
    st = q.statistics()
    assert st["made"] == st["delivered"] + st["dropped"] + st["queued"], st
    return st


def ingest(q: SysMsgQueue, k: int, items, after=None) -> list:
    published: list = []
    q.take_batch_in_order(k, Batch(k, list(items), after), published.append)
    return published


def timestamps(entries) -> list[int]:
    return [ts_to_us(term[-1]) for e in entries if e.ts_kind for term in e.terms()]


def test_timestamps_strictly_increase_in_queue_order(q):
    a, b = pid(1), pid(2)
    body = (A("trace"), a, A("send"), A("hi"), b)
    ingest(q, 1, [run(TRACE, a, b, [body] * 3, M.TS_APPEND)])
    ingest(q, 2, [run(TRACE, b, a, [body], M.TS_APPEND), run(PROC_MSG, b, a, [A("x")])])
    ingest(q, 1, [run(TRACE, a, b, [body] * 2, M.TS_PATCH)])
    entries = list(q.take())
    assert [e.n for e in entries] == [3, 1, 1, 2]
    assert entries[2].base == 0  # no timestamp: none is taken
    # one run after another, each message the next microsecond
    start = FrozenClock.START
    assert timestamps(entries) == list(range(start, start + 6))
    assert entries[3].terms()[0][0] == A("trace_ts")
    assert q.ingested == [0, 5, 2] and q.ingested_items == [0, 5, 2]
    adds_up(q)


def test_active_sched_is_counted_in_queue_order(q):
    def sched(k, what):
        return run(SYSPROF, NIL, what, [M.profile_scheduler(k, what)], M.TS_SCHED)

    active, inactive = A("active"), A("inactive")
    ingest(q, 1, [sched(1, active)])
    ingest(q, 2, [sched(2, active)])
    ingest(q, 1, [sched(1, inactive)])
    ingest(q, 1, [sched(1, active)])
    assert [e.active for e in q.queue] == [1, 2, 1, 2]
    assert all(e.to is NIL for e in q.queue)  # the receiver is the profiler, at dispatch
    assert q.sched_active == [False, True, True]
    # a lost scheduler that was active turns inactive, behind what is queued
    q.state.set_system_profile(pid(1, 5), scheduler=True)
    q.table.spawned(pid(2, 3))
    assert q.scheduler_lost(2) == [pid(2, 3)]
    last = q.queue[-1]
    assert last.type == SYSPROF and last.ts_kind == M.TS_NONE
    (body,) = last.terms()
    assert body[:5] == (A("profile"), A("scheduler"), 2, inactive, 1)
    terms = [t for e in q.queue for t in e.terms()]
    assert [t[4] for t in terms] == [1, 2, 1, 2, 1]
    assert [ts_to_us(t[5]) for t in terms] == sorted({ts_to_us(t[5]) for t in terms})
    listing = q.foreach_sys_msg_in_q()
    assert [to for _f, to, _m in listing] == [pid(1, 5)] * 5
    adds_up(q)


def test_a_run_split_by_take_step_keeps_order_and_timestamps(q):
    a = pid(1)
    q.table.spawned(a)
    bodies = [(A("trace"), a, A("send"), i, a) for i in range(5)]
    ingest(q, 1, [run(PROC_MSG, a, a, bodies, M.TS_APPEND), run(PROC_MSG, a, a, [A("z")])])
    whole = [t for e in q.queue for t in e.terms()]
    q.enqueue_event(QueueEvent("marker", "ref"))
    q.hold()
    got, sizes = [], []
    for n, unit in ((2, "message"), (2, "message"), (2, "message"), (1, "run")):
        local = q.take_step(n, unit)
        assert adds_up(q)["queued"] == 6 - len(got)  # taken, not yet decided
        sizes.append([e.n for e in local])
        got += [t for e in local if e.n for t in e.terms()]
        plan = q.decide(local)
        q.settle(plan)
        st = adds_up(q)
        assert st["delivered"] == len(got)
    assert sizes == [[2], [2], [1, 1], [0]]  # the last: only the marker was left
    assert got == whole
    assert not q.queue and adds_up(q)["queued"] == 0


def test_step_needs_a_held_queue_and_a_count(q):
    with pytest.raises(BadArg, match="n must be an integer >= 1"):
        q.step(0, "message", 1.0)
    with pytest.raises(BadArg, match="needs a held dispatcher"):
        q.step(1, "message", 1.0)
    q.hold()
    assert q.step(1, "run", 1.0) == []  # nothing queued: nothing to wait for


def test_a_batch_is_parked_until_the_batches_it_follows_are_queued(q):
    a, b = pid(1), pid(2)
    # scheduler 2 heard from scheduler 1 after 1's first batch: it follows it
    assert ingest(q, 2, [ev("spawn", b), run(PROC_MSG, b, a, [A("second")])], [0, 1, 0]) == []
    ingest(q, 2, [run(PROC_MSG, b, a, [A("third")])])  # waits behind its sibling
    assert not q.queue and len(q.parked) == 2 and q.ingested_items == [0, 0, 0]
    assert adds_up(q)["made"] == 0
    published = ingest(q, 1, [run(PROC_MSG, a, b, [A("first")]), ev("exit", a)])
    assert [list(e.terms()) for e in q.queue] == [[A("first")], [A("second")], [A("third")]]
    assert [p.dead for p in published] == [[a], [], []]  # each batch as it is queued
    assert q.parked == [] and q.batches_taken == [0, 1, 2] and q.order_waits_expired == 0
    assert q.table.is_alive(b) and not q.table.is_alive(a)


def test_a_parked_batch_is_taken_after_order_wait(q, now):
    b = pid(2)
    ingest(q, 2, [run(PROC_MSG, b, b, [A("late")])], [0, 1, 0])
    now.t += ORDER_WAIT_S - 0.01
    assert q.drain_parked(lambda p: None) == 0 and len(q.parked) == 1
    now.t += 0.02
    assert q.drain_parked(lambda p: None) == 1
    assert q.order_waits_expired == 1 and len(q.queue) == 1 and q.parked == []


def test_a_batch_refused_on_the_way_takes_its_number(q):
    b = pid(2)
    ingest(q, 2, [run(PROC_MSG, b, b, [A("after")])], [0, 1, 0])
    assert not q.queue
    # refused: it queues nothing, but what followed it is queued now
    assert q.take_batch_in_order(1, None, lambda p: None) == 1
    assert q.batches_taken == [0, 1, 1] and len(q.queue) == 1


def test_a_lost_scheduler_s_processes_exit_in_pid_order(q):
    """Not in the order of their addresses (a set of interned pids iterates
    so, differently from one run to the next): made from the highest number
    down, 40 pids exit from the lowest up."""
    made = [pid(2, i) for i in range(40, 0, -1)]
    for p in made:
        q.table.spawned(p)
    assert q.scheduler_lost(2) == sorted(made)


def test_a_lost_scheduler_is_not_waited_for(q):
    b = pid(2)
    ingest(q, 2, [run(PROC_MSG, b, b, [A("x")])], [0, 3, 0])
    q.scheduler_lost(1)
    assert q.drain_parked(lambda p: None) == 1 and q.order_waits_expired == 0


def test_decide_drops_for_a_dead_receiver_after_a_close_settles(q):
    a, b = pid(1), pid(2)
    port = Port(3)  # a trace port (scheduler 0: the dispatcher's)
    tp = MemoryTracePort()
    q.table.ports[port] = tp
    ingest(q, 1, [ev("spawn", a), run(PROC_MSG, a, a, [A("one")])])
    ingest(q, 2, [ev("spawn", b), run(PROC_MSG, b, port, [A("p1"), A("p2")])])
    q.enqueue_event(QueueEvent("close", [port]))
    pub = ingest(q, 2, [run(PROC_MSG, b, b, [A("gone")]), ev("exit", b)])
    assert pub[0].dead == [b]
    ingest(q, 2, [run(PROC_MSG, b, port, [A("p3")])])
    local = q.take()
    assert adds_up(q)["queued"] == 5

    plan = q.decide(local)  # stops at the port write
    assert type(plan.then) is PortWrite and plan.then.port == port and plan.then.n == 2
    assert plan.delivered[PROC_MSG] == 1 and list(plan.out) == [1]
    (delivery,) = plan.out[1]
    assert delivery.receiver == a and delivery.n == 1
    written, error = tp.write_many(plan.then.frames)
    q.port_written(plan, plan.then, written, error)
    plan = q.decide(local, plan)  # goes on: the close
    assert type(plan.then) is QueueEvent and plan.then.kind == "close"
    assert plan.decided == 3 and len(local) == 2
    q.settle(plan)  # everything before the close is counted before it closes
    st = adds_up(q)
    assert st["delivered"] == 3 and st["queued"] == 2
    assert tp.terms() == [A("p1"), A("p2")]
    tp.close()

    plan = q.decide(local)
    assert plan.then is None and plan.out == {}
    assert dict(plan.dropped) == {(PROC_MSG, "receiver_dead"): 1, (PROC_MSG, "port_closed"): 1}
    q.settle(plan)
    st = adds_up(q)
    assert st["queued"] == 0 and st["dropped_by_reason"] == {
        "receiver_dead": {"PROC_MSG": 1},
        "port_closed": {"PROC_MSG": 1},
    }
    assert q.delivered_to == [0, 1, 0]
    assert len(q.latencies) == 4  # one sample a run


def test_undelivered_moves_counts_from_delivered_to_dropped(q):
    a = pid(1)
    q.table.spawned(a)
    ingest(q, 1, [run(PROC_MSG, a, a, [1, 2, 3])])
    plan = q.decide(q.take())
    q.settle(plan)
    q.undelivered(1, plan.out[1], plan.kinds[1], "scheduler_lost")
    st = adds_up(q)
    assert st["delivered"] == 0 and st["dropped_by_reason"] == {"scheduler_lost": {"PROC_MSG": 3}}
    assert q.delivered_to == [0, 0, 0]


def test_a_failed_port_write_drops_the_rest(q):
    a = pid(1)
    port = Port(3)
    q.table.ports[port] = MemoryTracePort()
    ingest(q, 1, [run(PROC_MSG, a, port, [1, 2, 3])])
    plan = q.decide(q.take())
    q.port_written(plan, plan.then, 1, "broken pipe")
    q.settle(plan)
    st = adds_up(q)
    assert st["delivered"] == 1 and st["dropped_by_reason"] == {"port_closed": {"PROC_MSG": 2}}
    assert q.logged == ["dispatcher: trace port #Port<0.3>: broken pipe\n"]


def test_draining_drops_what_is_left(q, now):
    a = pid(1)
    q.table.spawned(a)
    ingest(q, 1, [run(PROC_MSG, a, a, [1, 2])])
    q.drain_by = now.t - 1
    plan = q.decide(q.take())
    assert dict(plan.dropped) == {(PROC_MSG, "emulator_closed"): 2}


def test_a_held_queue_takes_batches_past_its_bound(now):
    table = PidTable()
    q = SysMsgQueue(NSCHED, TracerState(liveness=table), table, max_queue=1, monotonic=now)
    q.hold()  # push-back waits only for a dispatcher that is behind
    a = pid(1)
    for _ in range(3):
        ingest(q, 1, [run(PROC_MSG, a, a, [A("x")])])
    assert q.queue_msgs == 3 and q.statistics()["queue_peak"] == 3


def test_everything_queued_is_journalled_in_queue_order(q, tmp_path):
    q.journal = Journal(str(tmp_path / "j"), NSCHED)
    a = pid(1)
    ingest(q, 1, [ev("spawn", a), run(PROC_MSG, a, a, [A("x")])])
    q.enqueue_sys_msg(M.SYS_MSG_TYPE_ERRLGR, a, A("error_logger"), (A("oops"),))
    q.settle(q.decide(q.take()))
    q.journal.close(made=q.made_total())
    _header, records, _ = read_records(str(tmp_path / "j"))
    assert [r[1] for r in records] == ["e", "q", "q", "d", "d", "end"]
    assert records[-1][2] == 2  # (the two messages queued)
    assert [r[-1] for r in records[3:5]] == [None, "no_error_logger"]
    assert q.stderr_lines  # no error logger: the failure is written out
    adds_up(q)


def test_wait_ingested_returns_at_once_when_taken(q):
    a = pid(1)
    ingest(q, 1, [ev("spawn", a), run(PROC_MSG, a, a, [1])])
    assert q.wait_ingested([0, 2, 0]) is True
    assert q.wait_ingested([0, 3, 0], limit=0) is False


def test_the_queue_module_imports_no_socket_process_or_thread_library():
    path = Path(__file__).resolve().parents[2] / "dispatcher" / "queue.py"
    tree = ast.parse(path.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not names & {"zmq", "multiprocessing", "multiprocess", "psutil", "socket"}
    used = {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and getattr(n.value, "id", None) == "threading"
    }
    assert used == {"Condition", "Lock"}


def test_the_count_for_the_journals_end_does_not_wait_for_a_lock_held_at_the_close(q):
    """A thread that still holds the queue's lock when the dispatcher
    closes its journal: no count (the journal is left as one cut short),
    not a close that waits for ever."""
    import threading
    import time

    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with q.smq:
            held.set()
            release.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    assert held.wait(5)
    t0 = time.monotonic()
    assert q.made_total(wait=0.2) is None
    assert time.monotonic() - t0 < 1.0
    release.set()
    t.join(5)
    assert q.made_total() == 0
