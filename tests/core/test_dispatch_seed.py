"""Every rule of ``smp.core.dispatch`` against the seed, one test per rule.

``resolve`` is the receiver selection and the deliver/drop/failure choice of
``sys_msg_dispatcher_func`` (seed 3338-3440); ``disp_failure`` and
``format_error_logger_failure`` are ``sys_msg_disp_failure`` (seed 3152-3218).
``dispatch`` below runs the two as the dispatcher's loop does: a failed
delivery goes through ``sys_msg_disp_failure`` before the message is dropped
(the ``failure:`` label falls through to ``drop_sys_msg:``, seed 3432-3436).
"""

from __future__ import annotations

import pytest

from smp.core import dispatch as D
from smp.core import messages as M
from smp.core.dispatch import (
    DELIVER_PID,
    DELIVER_PORT,
    DROP,
    DROP_REASONS,
    Decision,
    disp_failure,
    format_error_logger_failure,
    resolve,
)
from smp.core.placement import pid_owner
from smp.core.state import FALSE, NIL, TracerState
from smp.core.terms import A, Pid, Port, charlist

P1, P2, P3 = Pid(91), Pid(92), Pid(93)
FMT = charlist("~s~n")
PORT, DEAD_PORT = Port(13), Port(16)
ALL_TYPES = (
    M.SYS_MSG_TYPE_TRACE,
    M.SYS_MSG_TYPE_SEQTRACE,
    M.SYS_MSG_TYPE_SYSMON,
    M.SYS_MSG_TYPE_ERRLGR,
    M.SYS_MSG_TYPE_PROC_MSG,
    M.SYS_MSG_TYPE_SYSPROF,
)


class Table:
    """The process table the rules ask: alive pids, tracer marks, ports, names."""

    def __init__(self, alive=(), tracers=(), ports=(), registry=None):
        self.alive, self.tracers, self.ports = set(alive), set(tracers), set(ports)
        self.registry = dict(registry or {})

    def is_alive(self, pid):
        return pid in self.alive

    def is_tracer(self, pid):
        return pid in self.tracers

    def whereis(self, name):
        return self.registry.get(name)

    def is_valid_tracer_port(self, port):
        return port in self.ports


def new_state(table, **fields) -> TracerState:
    st = TracerState(liveness=table)
    for k, v in fields.items():
        setattr(st, k, v)
    return st


def dispatch(type_, from_, to, st, table, body=(A.x,), **kw):
    """One turn of the dispatcher's loop: decide, and on a failure run
    ``sys_msg_disp_failure``.  Returns the decision and the stderr lines."""
    out: list[str] = []
    d = resolve(type_, from_, to, st, table, **kw)
    if d.action == DROP and d.failure:
        disp_failure(M.SysMsg(type_, from_, to, body), d.receiver, st, out.append)
    return d, out


# ---------------------------------------------------------------- the receiver (3338-3370)
@pytest.mark.parametrize("type_", [M.SYS_MSG_TYPE_TRACE, M.SYS_MSG_TYPE_PROC_MSG])
def test_trace_and_proc_msg_go_to_the_message_s_to(type_):
    """seed 3339-3342: ``receiver = smqp->to`` for TRACE and PROC_MSG, whatever
    the tracer state holds."""
    t = Table(alive=[P1, P2], tracers=[P1, P2])
    st = new_state(t, system_seq_tracer=P2, system_monitor=P2, system_profile=P2)
    assert resolve(type_, P3, P1, st, t) == (DELIVER_PID, P1, None, False)


def test_seq_trace_goes_to_the_seq_tracer_not_to_to():
    """seed 3343-3345: ``receiver = erts_get_system_seq_tracer()``."""
    t = Table(alive=[P1, P2], ports=[PORT])
    st = new_state(t, system_seq_tracer=P1)
    assert resolve(M.SYS_MSG_TYPE_SEQTRACE, P3, P2, st, t) == (DELIVER_PID, P1, None, False)
    st.system_seq_tracer = PORT
    assert resolve(M.SYS_MSG_TYPE_SEQTRACE, P3, P2, st, t) == (DELIVER_PORT, PORT, None, False)


@pytest.mark.parametrize(
    "type_,field,other",
    [
        (M.SYS_MSG_TYPE_SYSMON, "system_monitor", "system_profile"),
        (M.SYS_MSG_TYPE_SYSPROF, "system_profile", "system_monitor"),
    ],
)
def test_monitor_and_profiler_each_read_their_own_receiver(type_, field, other):
    """seed 3346-3364: SYSMON reads ``system_monitor``, SYSPROF
    ``system_profile``; never the other one, never ``to``."""
    t = Table(alive=[P1, P2, P3], ports=[PORT])
    st = new_state(t, **{field: P1, other: P2})
    assert resolve(type_, P3, P2, st, t) == (DELIVER_PID, P1, None, False)
    setattr(st, field, PORT)
    assert resolve(type_, P3, P2, st, t) == (DELIVER_PORT, PORT, None, False)


@pytest.mark.parametrize("type_", [M.SYS_MSG_TYPE_SYSMON, M.SYS_MSG_TYPE_SYSPROF])
def test_a_monitor_or_profiler_event_about_itself_is_dropped_without_failure(type_):
    """seed 3348-3354, 3357-3363: ``from == receiver`` goes to
    ``drop_sys_msg`` (no ``sys_msg_disp_failure``), for a pid and for a port
    receiver alike; NIL from with a NIL receiver is the same test."""
    field = "system_monitor" if type_ == M.SYS_MSG_TYPE_SYSMON else "system_profile"
    t = Table(alive=[P1], ports=[PORT])
    st = new_state(t, **{field: P1})
    assert resolve(type_, P1, NIL, st, t) == (DROP, P1, "sender_is_receiver", False)
    setattr(st, field, PORT)
    assert resolve(type_, PORT, NIL, st, t) == (DROP, PORT, "sender_is_receiver", False)
    setattr(st, field, NIL)
    st.long_gc = 5
    st.profile_scheduler = True
    d, out = dispatch(type_, NIL, NIL, st, t)
    assert d == (DROP, NIL, "nil_sender_nil_receiver", False)
    assert (st.long_gc, st.profile_scheduler) == (5, True)  # nothing cleared
    assert out == []


def test_error_logger_is_looked_up_by_name_and_gets_the_message():
    """seed 3365-3367, 3412-3420: ``receiver = am_error_logger``, then
    ``erts_whereis_process``; found and not the sender: ``queue_proc_msg``."""
    t = Table(alive=[P1], registry={A.error_logger: P1})
    assert resolve(M.SYS_MSG_TYPE_ERRLGR, P2, A.error_logger, new_state(t), t) == (
        DELIVER_PID,
        P1,
        None,
        False,
    )


def test_error_logger_own_message_is_dropped_without_failure():
    """seed 3416-3417: ``smqp->from == proc->common.id`` goes to
    ``drop_sys_msg``: no "(no error logger present)" line."""
    t = Table(alive=[P1], registry={A.error_logger: P1})
    d, out = dispatch(M.SYS_MSG_TYPE_ERRLGR, P1, A.error_logger, new_state(t), t)
    assert d == (DROP, P1, "error_logger_self", False)
    assert out == []


def test_no_error_logger_is_a_failure_that_prints():
    """seed 3414-3415: no process registered: ``goto failure``; the failure
    prints the message (seed 3188-3215)."""
    t = Table()
    report = (A.notify, (A.error, Pid(0), (A.emulator, FMT, [[104, 105]])))
    d, out = dispatch(M.SYS_MSG_TYPE_ERRLGR, P2, A.error_logger, new_state(t), t, body=report)
    assert d == (DROP, A.error_logger, "no_error_logger", True)
    assert out == ['(no error logger present) error: "hi"\n']


def test_a_port_registered_as_error_logger_is_no_error_logger():
    """seed 3413: ``erts_whereis_process`` finds processes only."""
    t = Table(ports=[PORT], registry={A.error_logger: PORT})
    d = resolve(M.SYS_MSG_TYPE_ERRLGR, P2, A.error_logger, new_state(t), t)
    assert d == (DROP, A.error_logger, "no_error_logger", True)


@pytest.mark.parametrize("type_", [M.SYS_MSG_TYPE_UNDEFINED, 7, 99])
def test_a_message_of_no_known_type_has_no_receiver(type_):
    """seed 3368-3370: ``default: receiver = NIL``, which is neither pid,
    error logger nor port: a failure (seed 3432-3433) with no side effect
    (seed 3216-3217, ``default: ASSERT(0)``), even with ``to`` a live tracer."""
    t = Table(alive=[P1], tracers=[P1], ports=[PORT])
    st = new_state(t, system_seq_tracer=P1, system_monitor=P1, system_profile=P1)
    v = st.version
    d, out = dispatch(type_, P2, P1, st, t)
    assert d == (DROP, NIL, "no_receiver", True)
    assert (st.version, out) == (v, [])


# ---------------------------------------------------------------- pid receivers (3376-3411)
def test_a_live_tracer_pid_gets_the_trace_message():
    """seed 3376-3378, 3392-3403: a live pid with ``F_TRACER``: queued."""
    t = Table(alive=[P1], tracers=[P1])
    assert resolve(M.SYS_MSG_TYPE_TRACE, P2, P1, new_state(t), t) == (DELIVER_PID, P1, None, False)


def test_trace_to_a_live_pid_without_the_tracer_mark_is_a_failure():
    """seed 3379-3380, 3389: TRACE only: alive but no ``F_TRACER``."""
    t = Table(alive=[P1])
    d = resolve(M.SYS_MSG_TYPE_TRACE, P2, P1, new_state(t), t)
    assert d == (DROP, P1, "not_tracer", True)


@pytest.mark.parametrize(
    "type_,field",
    [
        (M.SYS_MSG_TYPE_SEQTRACE, "system_seq_tracer"),
        (M.SYS_MSG_TYPE_SYSMON, "system_monitor"),
        (M.SYS_MSG_TYPE_SYSPROF, "system_profile"),
        (M.SYS_MSG_TYPE_PROC_MSG, None),
    ],
)
def test_other_types_need_no_tracer_mark(type_, field):
    """seed 3379-3380: the ``F_TRACER`` test is for ``SYS_MSG_TYPE_TRACE`` only."""
    t = Table(alive=[P1])
    st = new_state(t, **({field: P1} if field else {}))
    assert resolve(type_, P2, P1, st, t) == (DELIVER_PID, P1, None, False)


@pytest.mark.parametrize("type_", [M.SYS_MSG_TYPE_TRACE, M.SYS_MSG_TYPE_PROC_MSG])
def test_a_pid_receiver_that_is_not_alive_is_a_failure(type_):
    """seed 3377-3389: ``!proc`` (the tracer mark does not matter) is
    ``goto failure``: ``sys_msg_disp_failure`` runs; for TRACE and PROC_MSG it
    does nothing (seed 3156-3159, 3215-3216)."""
    t = Table(tracers=[P1])
    st = new_state(t, system_seq_tracer=P1, system_monitor=P1, long_gc=3)
    v = st.version
    d, out = dispatch(type_, P2, P1, st, t)
    assert d == (DROP, P1, "receiver_dead", True)
    assert (st.version, st.system_seq_tracer, st.long_gc, out) == (v, P1, 3, [])


def test_a_dead_seq_tracer_is_a_failure_that_resets_it():
    """seed 3377-3389 then 3160-3165: the seq tracer is reset to ``false``."""
    t = Table()
    st = new_state(t, system_seq_tracer=P1)
    d, _ = dispatch(M.SYS_MSG_TYPE_SEQTRACE, P2, NIL, st, t)
    assert d == (DROP, P1, "receiver_dead", True)
    assert st.system_seq_tracer is FALSE


@pytest.mark.parametrize("type_", [M.SYS_MSG_TYPE_SYSMON, M.SYS_MSG_TYPE_SYSPROF])
def test_a_dead_monitor_or_profiler_is_a_failure_that_clears_it(type_):
    """seed 3377-3389 then 3166-3187: the receiver is still the monitor
    (profiler): it is cleared with all its options."""
    t = Table()
    st = new_state(
        t, system_monitor=P1, long_schedule=9, system_profile=P1, profile_runnable_ports=True
    )
    d, _ = dispatch(type_, P2, NIL, st, t)
    assert d == (DROP, P1, "receiver_dead", True)
    if type_ == M.SYS_MSG_TYPE_SYSMON:
        assert (st.system_monitor, st.long_schedule) == (NIL, 0)
        assert (st.system_profile, st.profile_runnable_ports) == (P1, True)
    else:
        assert (st.system_profile, st.profile_runnable_ports) == (NIL, False)
        assert (st.system_monitor, st.long_schedule) == (P1, 9)


# ---------------------------------------------------------------- no receiver (3432-3436)
def test_a_false_seq_tracer_is_a_failure():
    """seed 3343-3345, 3432-3433: ``false`` is neither pid, error logger nor
    port; the failure resets the seq tracer "if it hasn't changed", which
    leaves ``false`` (seed 3160-3165)."""
    t = Table(alive=[P1])
    st = new_state(t)
    d, out = dispatch(M.SYS_MSG_TYPE_SEQTRACE, P2, P1, st, t)
    assert d == (DROP, FALSE, "no_receiver", True)
    assert (st.system_seq_tracer, out) == (FALSE, [])


@pytest.mark.parametrize(
    "type_,options,cleared",
    [
        (M.SYS_MSG_TYPE_SYSMON, {"long_gc": 4, "busy_dist_port": True}, ("long_gc", 0)),
        (M.SYS_MSG_TYPE_SYSPROF, {"profile_exclusive": True}, ("profile_exclusive", False)),
    ],
)
def test_a_nil_monitor_or_profiler_with_options_left_is_a_failure_that_clears_them(
    type_, options, cleared
):
    """seed 3432-3433 then 3167-3174 / 3179-3187: the receiver NIL (the
    monitor exited in smp, ``exiting_reset`` left the options to the
    dispatcher): the options are cleared."""
    t = Table()
    st = new_state(t, **options)
    d, _ = dispatch(type_, P2, NIL, st, t)
    assert d == (DROP, NIL, "no_receiver", True)
    field, value = cleared
    assert getattr(st, field) == value
    assert (st.busy_dist_port, st.profile_exclusive) == (False, False)


def test_a_receiver_of_another_kind_is_a_failure():
    """seed 3432: a receiver that is neither a pid, the error logger nor a
    port (here an atom seq tracer) is a failure."""
    t = Table(alive=[P1])
    st = new_state(t, system_seq_tracer=A.somebody)
    d, _ = dispatch(M.SYS_MSG_TYPE_SEQTRACE, P2, P1, st, t)
    assert d == (DROP, A.somebody, "no_receiver", True)
    assert st.system_seq_tracer is FALSE


# ---------------------------------------------------------------- port receivers (3421-3431)
def test_a_valid_tracer_port_gets_the_message():
    """seed 3421-3431: ``erts_thr_id2port_sflgs`` finds it: written."""
    t = Table(ports=[PORT])
    d = resolve(M.SYS_MSG_TYPE_TRACE, P1, PORT, new_state(t), t)
    assert d == (DELIVER_PORT, PORT, None, False)


def test_a_closed_tracer_port_is_a_failure():
    """seed 3423-3424: no valid port: ``goto failure``; for SEQTRACE the
    failure resets the seq tracer (seed 3160-3165)."""
    t = Table()
    st = new_state(t, system_seq_tracer=DEAD_PORT)
    assert resolve(M.SYS_MSG_TYPE_TRACE, P1, DEAD_PORT, st, t) == (
        DROP,
        DEAD_PORT,
        "port_closed",
        True,
    )
    d, _ = dispatch(M.SYS_MSG_TYPE_SEQTRACE, P1, NIL, st, t)
    assert d == (DROP, DEAD_PORT, "port_closed", True)
    assert st.system_seq_tracer is FALSE


# ---------------------------------------------------------------- lost schedulers (smp only)
def test_a_lost_scheduler_drops_a_message_for_its_pid_as_a_failure():
    """Not in the seed (a scheduler there cannot die): a pid that lived on a
    lost scheduler is treated as a dead receiver, a failure."""
    home = pid_owner(P1, 2)
    t = Table(alive=[P1], tracers=[P1])
    d = resolve(M.SYS_MSG_TYPE_TRACE, P2, P1, new_state(t), t, lost={home}, nsched=2)
    assert d == (DROP, P1, "scheduler_lost", True)
    d = resolve(M.SYS_MSG_TYPE_TRACE, P2, P1, new_state(t), t, lost={3 - home}, nsched=2)
    assert d == (DELIVER_PID, P1, None, False)
    # placement counts with nsched: the same pid on 3 schedulers lives elsewhere
    other = pid_owner(P1, 3)
    d = resolve(M.SYS_MSG_TYPE_TRACE, P2, P1, new_state(t), t, lost={other}, nsched=3)
    assert d.reason == "scheduler_lost"
    assert other != home or pid_owner(P1, 1) == 1


# ---------------------------------------------------------------- the verdict cache
def test_the_deliver_verdict_is_shared_and_its_cache_stays_bounded():
    """The common verdict is made once per receiver (``Decision`` is
    immutable); the cache of them is emptied when it holds 4096."""
    pids = [Pid(20000 + i) for i in range(4097)]
    t = Table(alive=pids, tracers=pids)
    st = new_state(t)
    D._DELIVER_PID.clear()
    first = resolve(M.SYS_MSG_TYPE_TRACE, P1, pids[0], st, t)
    for p in pids[1:4096]:
        assert resolve(M.SYS_MSG_TYPE_TRACE, P1, p, st, t) == Decision(DELIVER_PID, p)
    assert resolve(M.SYS_MSG_TYPE_TRACE, P2, pids[0], st, t) is first
    assert len(D._DELIVER_PID) == 4096
    assert resolve(M.SYS_MSG_TYPE_TRACE, P1, pids[4096], st, t) == Decision(DELIVER_PID, pids[4096])
    assert list(D._DELIVER_PID) == [pids[4096]]


def test_one_scheduler_by_default_for_the_lost_check():
    """``nsched`` defaults to 1: every pid lives on scheduler 1."""
    pid = next(Pid(n) for n in range(100, 200) if pid_owner(Pid(n), 2) == 2)
    t = Table(alive=[pid], tracers=[pid])
    d = resolve(M.SYS_MSG_TYPE_TRACE, P2, pid, new_state(t), t, lost={1})
    assert d == (DROP, pid, "scheduler_lost", True)
    d = resolve(M.SYS_MSG_TYPE_TRACE, P2, pid, new_state(t), t, lost={1}, nsched=2)
    assert d == (DELIVER_PID, pid, None, False)


# ---------------------------------------------------------------- sys_msg_disp_failure (3152-3218)
def test_failure_of_a_trace_or_proc_msg_touches_nothing():
    """seed 3156-3159, 3215-3216: TRACE (tracees are reset when scheduled
    in) and PROC_MSG: no side effect, nothing printed."""
    t = Table()
    st = new_state(t, system_seq_tracer=P1, system_monitor=P1, system_profile=P1, long_gc=1)
    for type_ in (M.SYS_MSG_TYPE_TRACE, M.SYS_MSG_TYPE_PROC_MSG):
        out: list[str] = []
        disp_failure(M.SysMsg(type_, P2, P1, (A.x,)), P1, st, out.append)
        assert out == []
    assert (st.version, st.system_seq_tracer, st.system_monitor, st.system_profile) == (
        0,
        P1,
        P1,
        P1,
    )


def test_seq_trace_failure_resets_only_if_unchanged():
    """seed 3160-3165: ``if (system_seq_tracer == receiver)``."""
    st = new_state(Table(), system_seq_tracer=P1)
    disp_failure(M.SysMsg(M.SYS_MSG_TYPE_SEQTRACE, P2, NIL, (A.x,)), P2, st)
    assert st.system_seq_tracer == P1
    disp_failure(M.SysMsg(M.SYS_MSG_TYPE_SEQTRACE, P2, NIL, (A.x,)), P1, st)
    assert st.system_seq_tracer is FALSE


@pytest.mark.parametrize("type_", [M.SYS_MSG_TYPE_SYSMON, M.SYS_MSG_TYPE_SYSPROF])
def test_monitor_and_profile_failures_each_clear_their_own(type_):
    """seed 3166-3187: SYSMON clears the monitor, SYSPROF the profiler."""
    st = new_state(Table(), system_monitor=P1, long_gc=2, system_profile=P1, profile_scheduler=True)
    disp_failure(M.SysMsg(type_, P2, NIL, (A.x,)), P1, st)
    mon = (st.system_monitor, st.long_gc)
    prof = (st.system_profile, st.profile_scheduler)
    if type_ == M.SYS_MSG_TYPE_SYSMON:
        assert (mon, prof) == ((NIL, 0), (P1, True))
    else:
        assert (mon, prof) == ((P1, 2), (NIL, False))


def test_error_logger_failure_writes_one_line_to_the_given_writer():
    """seed 3188-3215: the line goes to stderr (here the given writer), and
    to ``sys.stderr`` when none is given."""
    out: list[str] = []
    m = M.SysMsg(M.SYS_MSG_TYPE_ERRLGR, P1, A.error_logger, 7)
    disp_failure(m, A.error_logger, new_state(Table()), out.append)
    assert out == ["(no error logger present) unexpected error logger message: 7\n"]


def test_error_logger_failure_defaults_to_stderr(capsys):
    m = M.SysMsg(M.SYS_MSG_TYPE_ERRLGR, P1, A.error_logger, A.oops)
    disp_failure(m, A.error_logger, new_state(Table()))
    assert capsys.readouterr().err == (
        "(no error logger present) unexpected error logger message: oops\n"
    )


# ---------------------------------------------------------------- the error-logger line
GOOD = (A.notify, (A.error, Pid(0), (A.emulator, FMT, [[104, 105], A.rest])))


def test_a_well_formed_report_prints_tag_and_first_argument():
    """seed 3206-3212: ``{_, {Tag, _, {_, _, [First | _]}}}`` prints
    ``Tag: First`` (``%T``)."""
    assert format_error_logger_failure(GOOD) == '(no error logger present) error: "hi"\n'
    warn = (A.notify, (A.warning_msg, P1, (A.x, A.y, [A.first])))
    assert format_error_logger_failure(warn) == "(no error logger present) warning_msg: first\n"


@pytest.mark.parametrize(
    "msg",
    [
        A.notify,  # not a tuple (seed 3193)
        (A.notify,),  # arity != 2 (seed 3201)
        (A.notify, GOOD[1], A.extra),  # arity 3
        (A.notify, [A.error]),  # element 2 not a tuple (seed 3203)
        (A.notify, (A.error, Pid(0))),  # inner arity != 3 (seed 3206)
        (A.notify, (A.error, Pid(0), (A.emulator, FMT), A.x)),  # inner arity 4
        (A.notify, (A.error, Pid(0), [A.emulator])),  # third not a tuple (seed 3209)
        (A.notify, (A.error, Pid(0), (A.emulator, [1]))),  # its arity != 3 (seed 3212)
        (A.notify, (A.error, Pid(0), (A.emulator, FMT, [1], A.x))),  # arity 4
        (A.notify, (A.error, Pid(0), (A.emulator, FMT, A.args))),  # not a list (3214)
        (A.notify, (A.error, Pid(0), (A.emulator, FMT, []))),  # [] has no CAR
    ],
)
def test_anything_else_prints_unexpected(msg):
    """seed 3193-3214: every other shape prints ``unexpected error logger
    message: Msg`` (once: the seed would read on past a non-tuple)."""
    from smp.core.pretty import format_term

    assert format_error_logger_failure(msg) == (
        f"(no error logger present) unexpected error logger message: {format_term(msg)}\n"
    )


def test_an_unprintable_message_still_prints_a_line():
    """A body ``%T`` cannot print (not a term) still gives the line."""

    class Odd:
        def __repr__(self):
            return "odd"

    assert format_error_logger_failure(Odd()) == (
        "(no error logger present) unexpected error logger message: odd\n"
    )


# ---------------------------------------------------------------- names
def test_drop_reasons_name_every_verdict_and_the_actions_are_numbered():
    """The journal records the action by number (``dispatcher.server``)."""
    assert (DELIVER_PID, DELIVER_PORT, DROP) == (0, 1, 2)
    assert set(DROP_REASONS) == {
        "sender_is_receiver",
        "nil_sender_nil_receiver",
        "error_logger_self",
        "no_receiver",
        "receiver_dead",
        "not_tracer",
        "no_error_logger",
        "port_closed",
        "scheduler_lost",
        "emulator_closed",
        "not_a_term",
    }
    assert len(set(DROP_REASONS)) == len(DROP_REASONS)
    t = Table(alive=[P1], tracers=[P1], registry={A.error_logger: P1})
    seen = set()
    for type_ in ALL_TYPES + (0,):
        for from_ in (P1, P2, NIL):
            for to in (P1, P2, PORT, NIL):
                d = resolve(type_, from_, to, new_state(t, system_monitor=P1), t)
                if d.action == DROP:
                    seen.add(d.reason)
    assert seen <= set(DROP_REASONS)
    assert {"receiver_dead", "no_receiver", "sender_is_receiver", "port_closed"} <= seen
