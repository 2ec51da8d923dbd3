"""The global tracer state behind its readers-writer lock, on the pure core:
``exiting_reset`` per mode, ``erts_set_system_seq_tracer`` refusing an
invalid tracer, and no reader ever seeing half an update under contention."""

from __future__ import annotations

import threading

import pytest

from smp.core.errors import BadArg
from smp.core.rwlock import RWLock
from smp.core.state import FALSE, NIL, STATE_OPS, STATE_READS, TracerState, apply_state_op
from smp.core.terms import Pid, Port

P1, P2 = Pid(81), Pid(82)


class Live:
    def __init__(self, alive=(), ports=()):
        self.alive, self.ports = set(alive), set(ports)

    def is_alive(self, pid):
        return pid in self.alive

    def is_valid_tracer_port(self, port):
        return port in self.ports


def test_set_system_seq_tracer_refuses_an_invalid_tracer():
    st = TracerState(liveness=Live(alive=[P1], ports=[Port(3)]))
    assert st.set_system_seq_tracer(P2) is None
    assert st.set_system_seq_tracer(P1) is FALSE
    assert st.set_system_seq_tracer(Port(3)) == P1
    assert st.set_system_seq_tracer(Port(6)) is None
    assert st.get_system_seq_tracer() == Port(3)


def test_exiting_reset_smp_leaves_the_options_to_the_dispatcher():
    st = TracerState(liveness=Live())
    st.set_system_monitor(P1, 5, 0, 0, True, False)
    st.set_system_profile(P1, True, False, False, False, 0)
    assert st.trace_check_exiting(P1, smp=True)
    assert (st.system_monitor, st.long_gc, st.busy_port) == (NIL, 5, True)
    assert (st.system_profile, st.profile_scheduler) == (NIL, True)


def test_exiting_reset_nonsmp_clears_everything():
    st = TracerState(liveness=Live())
    st.set_system_monitor(P1, 5, 0, 0, True, False)
    st.set_system_profile(P1, True, False, False, False, 0)
    st.change_default_tracing(True, 1, P1, None)
    assert st.trace_check_exiting(P1, smp=False)
    assert (st.system_monitor, st.long_gc, st.busy_port) == (NIL, 0, False)
    assert (st.system_profile, st.profile_scheduler) == (NIL, False)
    assert st.default_tracer is NIL
    assert not st.trace_check_exiting(P2, smp=False)


def test_rwlock_is_writer_preferring():
    lock = RWLock()
    lock.acquire_read()
    got = []
    w = threading.Thread(
        target=lambda: (lock.acquire_write(), got.append("w"), lock.release_write())
    )
    w.start()
    # a writer waits: a new reader queues behind it
    while not lock.writers_waiting:
        threading.Event().wait(0.001)
    r = threading.Thread(target=lambda: (lock.acquire_read(), got.append("r"), lock.release_read()))
    r.start()
    lock.release_read()
    w.join(5)
    r.join(5)
    assert got == ["w", "r"]


def test_no_reader_sees_half_an_update():
    """Writers set the monitor and its options together; readers, under the
    read lock, must always see a consistent pair."""
    st = TracerState(liveness=Live())
    stop = threading.Event()
    bad = []

    def writer(pid, n):
        while not stop.is_set():
            st.set_system_monitor(pid, n, n, 0, False, False)

    def reader():
        for _ in range(20000):
            s = st.snapshot()
            pair = (s.system_monitor, s.long_gc, s.long_schedule)
            if pair not in ((NIL, 0, 0), (P1, 1, 1), (P2, 2, 2)):
                bad.append(pair)

    ws = [threading.Thread(target=writer, args=a) for a in ((P1, 1), (P2, 2))]
    rs = [threading.Thread(target=reader) for _ in range(2)]
    for t in ws + rs:
        t.start()
    for t in rs:
        t.join(60)
    stop.set()
    for t in ws:
        t.join(10)
    assert bad == []
    assert st.version > 0


def test_a_frame_may_name_only_the_listed_state_operations():
    class Live:
        def is_alive(self, pid):
            return True

        def is_valid_tracer_port(self, port):
            return True

    st = TracerState(liveness=Live())
    assert STATE_READS <= set(STATE_OPS)
    assert apply_state_op(st, "system_monitor_get", ()) == st.system_monitor_get()
    for op in ("snapshot", "_clear_profile_locked", "__init__", "seq_tracer_failed", 3):
        with pytest.raises(BadArg, match="bad state operation"):
            apply_state_op(st, op, ())
    with pytest.raises(BadArg, match="system_monitor_clear"):
        apply_state_op(st, "system_monitor_clear", (1, 2))
