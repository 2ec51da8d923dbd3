"""The deliver/drop rules of ``sys_msg_dispatcher_func`` and the side effects
of ``sys_msg_disp_failure``, on the pure core (no process, no socket)."""

from __future__ import annotations

import pytest

from smp.core import messages as M
from smp.core.dispatch import (
    DELIVER_PID,
    DELIVER_PORT,
    DROP,
    DROP_REASONS,
    disp_failure,
    format_error_logger_failure,
    resolve,
)
from smp.core.placement import pid_owner
from smp.core.state import FALSE, NIL, TracerState
from smp.core.terms import A, Pid, Port

P1, P2, P3 = Pid(81), Pid(82), Pid(83)
PORT, DEAD_PORT = Port(3), Port(6)


class Table:
    """A process table for the rules: who is alive, who carries the tracer mark."""

    def __init__(self, alive=(), tracers=(), ports=(), registry=None):
        self.alive, self.tracers, self.ports = set(alive), set(tracers), set(ports)
        self.registry = dict(registry or {})

    def is_alive(self, pid):
        return pid in self.alive

    def is_tracer(self, pid):
        return pid in self.tracers and pid in self.alive

    def whereis(self, name):
        pid = self.registry.get(name)
        return pid if pid in self.alive else None

    def is_valid_tracer_port(self, port):
        return port in self.ports


def state(table, **kw) -> TracerState:
    st = TracerState(liveness=table)
    for k, v in kw.items():
        setattr(st, k, v)
    return st


def msg(type_, from_=NIL, to=NIL):
    return M.SysMsg(type_, from_, to, (A.x,))


def decide(m, st, table, **kw):
    return resolve(m.type, m.from_, m.to, st, table, **kw)


# ---------------------------------------------------------------- every drop reason
def test_trace_to_live_tracer_is_delivered():
    t = Table(alive=[P1], tracers=[P1])
    assert decide(msg(M.SYS_MSG_TYPE_TRACE, P2, P1), state(t), t) == (DELIVER_PID, P1, None, False)


def test_trace_to_a_pid_without_the_tracer_mark():
    t = Table(alive=[P1])
    d = decide(msg(M.SYS_MSG_TYPE_TRACE, P2, P1), state(t), t)
    assert (d.action, d.reason, d.failure) == (DROP, "not_tracer", True)


def test_trace_to_a_dead_pid():
    t = Table()
    d = decide(msg(M.SYS_MSG_TYPE_TRACE, P2, P1), state(t), t)
    assert (d.action, d.reason) == (DROP, "receiver_dead")


def test_proc_msg_needs_no_tracer_mark():
    t = Table(alive=[P1])
    assert decide(msg(M.SYS_MSG_TYPE_PROC_MSG, P1, P1), state(t), t).action == DELIVER_PID


def test_port_receiver():
    t = Table(ports=[PORT])
    assert decide(msg(M.SYS_MSG_TYPE_TRACE, P1, PORT), state(t), t).action == DELIVER_PORT
    d = decide(msg(M.SYS_MSG_TYPE_TRACE, P1, DEAD_PORT), state(t), t)
    assert (d.action, d.reason, d.failure) == (DROP, "port_closed", True)


def test_seq_trace_reads_the_seq_tracer_now():
    t = Table(alive=[P1, P2])
    st = state(t, system_seq_tracer=P1)
    assert decide(msg(M.SYS_MSG_TYPE_SEQTRACE), st, t).receiver == P1
    st.system_seq_tracer = P2
    assert decide(msg(M.SYS_MSG_TYPE_SEQTRACE), st, t).receiver == P2
    st.system_seq_tracer = FALSE
    d = decide(msg(M.SYS_MSG_TYPE_SEQTRACE), st, t)
    assert (d.action, d.reason) == (DROP, "no_receiver")


@pytest.mark.parametrize(
    "type_,field",
    [(M.SYS_MSG_TYPE_SYSMON, "system_monitor"), (M.SYS_MSG_TYPE_SYSPROF, "system_profile")],
)
def test_monitor_and_profiler_never_get_their_own_events(type_, field):
    t = Table(alive=[P1])
    st = state(t, **{field: P1})
    d = decide(msg(type_, P1), st, t)
    assert (d.action, d.reason, d.failure) == (DROP, "sender_is_receiver", False)
    assert decide(msg(type_, P2), st, t).action == DELIVER_PID
    # from NIL to a receiver reset to NIL: the seed's from == receiver test
    d = decide(msg(type_, NIL), state(t), t)
    assert (d.action, d.reason, d.failure) == (DROP, "nil_sender_nil_receiver", False)


def test_error_logger_by_registered_name():
    t = Table(alive=[P1], registry={A.error_logger: P1})
    assert decide(msg(M.SYS_MSG_TYPE_ERRLGR, P2), state(t), t) == (DELIVER_PID, P1, None, False)
    d = decide(msg(M.SYS_MSG_TYPE_ERRLGR, P1), state(t), t)
    assert (d.action, d.reason) == (DROP, "error_logger_self")
    d = decide(msg(M.SYS_MSG_TYPE_ERRLGR, P2), state(Table()), Table())
    assert (d.action, d.reason, d.failure) == (DROP, "no_error_logger", True)


def test_error_logger_is_a_process_never_a_registered_port():
    # erts_whereis_process: a port registered as error_logger is no logger
    t = Table(ports=[PORT], registry={A.error_logger: PORT})
    t.whereis = t.registry.get
    d = decide(msg(M.SYS_MSG_TYPE_ERRLGR, P2), state(t), t)
    assert (d.action, d.reason, d.failure) == (DROP, "no_error_logger", True)


# the smp schedulers are numbered from 1; with 2 of them P81 lives on 2, P82 on 1
@pytest.mark.parametrize("type_", [M.SYS_MSG_TYPE_TRACE, M.SYS_MSG_TYPE_PROC_MSG])
def test_a_lost_scheduler_loses_what_would_be_delivered_and_what_finds_its_pid_dead(type_):
    home = pid_owner(P1, 2)
    t = Table(alive=[P1], tracers=[P1])
    d = decide(msg(type_, P2, P1), state(t), t, lost={home}, nsched=2)
    assert (d.action, d.reason, d.failure) == (DROP, "scheduler_lost", True)
    dead = Table()
    d = decide(msg(type_, P2, P1), state(dead), dead, lost={home}, nsched=2)
    assert (d.action, d.reason) == (DROP, "scheduler_lost")
    # another scheduler's loss changes nothing
    d = decide(msg(type_, P2, P1), state(t), t, lost={3 - home}, nsched=2)
    assert d.action == DELIVER_PID


def test_a_lost_scheduler_leaves_not_tracer_and_ports_alone():
    t = Table(alive=[P1], ports=[PORT])
    lost = {pid_owner(P1, 2)}
    d = decide(msg(M.SYS_MSG_TYPE_TRACE, P2, P1), state(t), t, lost=lost, nsched=2)
    assert d.reason == "not_tracer"
    d = decide(msg(M.SYS_MSG_TYPE_TRACE, P2, PORT), state(t), t, lost=lost, nsched=2)
    assert d.action == DELIVER_PORT


def test_every_reason_resolve_gives_is_named():
    reasons = {
        "not_tracer",
        "receiver_dead",
        "port_closed",
        "no_receiver",
        "sender_is_receiver",
        "nil_sender_nil_receiver",
        "error_logger_self",
        "no_error_logger",
        "scheduler_lost",
    }
    assert reasons <= set(DROP_REASONS)


# ---------------------------------------------------------------- failure side effects
def test_seq_trace_failure_resets_only_the_same_tracer():
    t = Table()
    st = state(t, system_seq_tracer=P1)
    disp_failure(msg(M.SYS_MSG_TYPE_SEQTRACE), P2, st)
    assert st.system_seq_tracer == P1
    disp_failure(msg(M.SYS_MSG_TYPE_SEQTRACE), P1, st)
    assert st.system_seq_tracer is FALSE


def test_monitor_failure_clears_every_option():
    t = Table()
    st = state(t, system_monitor=P1, long_gc=5, busy_port=True)
    disp_failure(msg(M.SYS_MSG_TYPE_SYSMON, P2), P2, st)  # another monitor now
    assert (st.system_monitor, st.long_gc) == (P1, 5)
    disp_failure(msg(M.SYS_MSG_TYPE_SYSMON, P2), P1, st)
    assert (st.system_monitor, st.long_gc, st.busy_port) == (NIL, 0, False)


def test_monitor_failure_with_nil_receiver_and_options_left():
    t = Table()
    st = state(t, system_monitor=NIL, long_schedule=7)
    v = st.version
    disp_failure(msg(M.SYS_MSG_TYPE_SYSMON, P2), NIL, st)
    assert st.long_schedule == 0 and st.version == v + 1
    v = st.version
    disp_failure(msg(M.SYS_MSG_TYPE_SYSMON, P2), NIL, st)  # nothing left: no change
    assert st.version == v


def test_profile_failure_clears_every_option():
    t = Table()
    st = state(t, system_profile=P1, profile_scheduler=True, profile_runnable_procs=True)
    disp_failure(msg(M.SYS_MSG_TYPE_SYSPROF, P2), P1, st)
    assert (st.system_profile, st.profile_scheduler, st.profile_runnable_procs) == (
        NIL,
        False,
        False,
    )


def test_error_logger_failure_prints_the_text():
    out = []
    report = M.error_logger_report(P1, A.badarg, Pid(0))
    disp_failure(
        M.SysMsg(M.SYS_MSG_TYPE_ERRLGR, P1, A.error_logger, report),
        A.error_logger,
        state(Table()),
        out.append,
    )
    assert out == [
        '(no error logger present) error: "Error in process <0.81.0> with exit value: badarg\\n"\n'
    ]
    assert format_error_logger_failure(42) == (
        "(no error logger present) unexpected error logger message: 42\n"
    )


def test_trace_and_proc_msg_failures_have_no_side_effect():
    t = Table()
    st = state(t, system_seq_tracer=P1, system_monitor=P1, system_profile=P1)
    v = st.version
    disp_failure(msg(M.SYS_MSG_TYPE_TRACE, P2, P1), P1, st)
    disp_failure(msg(M.SYS_MSG_TYPE_PROC_MSG, P2, P1), P1, st)
    assert st.version == v
