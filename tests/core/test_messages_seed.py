"""Every message builder of ``smp.core.messages`` against the term the seed
builds (its ``TUPLEn`` and ``CONS`` lines), element by element."""

from __future__ import annotations

import pytest

from smp.core import messages as M
from smp.core.pretty import format_term
from smp.core.terms import A, Atom, Pid, Port, charlist

P1, P2 = Pid(61), Pid(62)
PORT = Port(33)
TS = (1, 2, 3)
MFA = (A.m, A.f, 2)


# ---------------------------------------------------------------- the queue's types and kinds
def test_sys_msg_types_are_the_seed_enum():
    """seed 71-79: ``enum ErtsSysMsgType``, numbered from 0."""
    assert (
        M.SYS_MSG_TYPE_UNDEFINED,
        M.SYS_MSG_TYPE_TRACE,
        M.SYS_MSG_TYPE_SEQTRACE,
        M.SYS_MSG_TYPE_SYSMON,
        M.SYS_MSG_TYPE_ERRLGR,
        M.SYS_MSG_TYPE_PROC_MSG,
        M.SYS_MSG_TYPE_SYSPROF,
    ) == (0, 1, 2, 3, 4, 5, 6)
    assert M.TYPE_NAMES == {
        0: "UNDEFINED",
        1: "TRACE",
        2: "SEQTRACE",
        3: "SYSMON",
        4: "ERRLGR",
        5: "PROC_MSG",
        6: "SYSPROF",
    }


def test_ts_kinds_are_ordered_for_the_frame_check():
    """``smp.wire.frames`` accepts a kind in ``TS_NONE..TS_SCHED``."""
    assert (M.TS_NONE, M.TS_PATCH, M.TS_APPEND, M.TS_SCHED) == (0, 1, 2, 3)


def test_seq_trace_flag_bits():
    """The token's flag word (OTP's ``SEQ_TRACE_*`` bits, as
    ``seq_trace:get_token/0`` shows them); seed 1112-1115 tests ``type`` against it."""
    assert (M.SEQ_TRACE_SEND, M.SEQ_TRACE_RECEIVE, M.SEQ_TRACE_PRINT) == (1, 2, 4)
    assert M.SEQ_TRACE_TIMESTAMP == 8


def test_a_sys_msg_has_no_ts_kind_by_default():
    m = M.SysMsg(M.SYS_MSG_TYPE_TRACE, P1, P2, (A.x,))
    assert (m.type, m.from_, m.to, m.msg, m.ts_kind) == (1, P1, P2, (A.x,), M.TS_NONE)


# ---------------------------------------------------------------- timestamps (763-775)
def test_patch_ts_turns_trace_into_trace_ts_with_the_stamp_last():
    """seed 763-775: arity + 1, element 1 ``trace_ts``, the stamp appended."""
    msg = (A.trace, P1, A.send, A.hi, P2)
    assert M.patch_ts(msg, TS) == (A.trace_ts, P1, A.send, A.hi, P2, TS)


@pytest.mark.parametrize(
    "kind,expected",
    [
        (M.TS_NONE, (A.trace, P1, A.x)),
        (M.TS_PATCH, (A.trace_ts, P1, A.x, TS)),
        (M.TS_APPEND, (A.trace, P1, A.x, TS)),
        (M.TS_SCHED, (A.trace, P1, A.x, 5, TS)),
    ],
)
def test_complete_finishes_each_kind(kind, expected):
    """patch_ts (seed 763-775); seq_trace's and profile's stamp appended
    (seed 1150, 3004); profile_scheduler's count then stamp (seed 2644-2645)."""
    assert M.complete((A.trace, P1, A.x), kind, TS, 5) == expected


def test_complete_sched_defaults_to_no_active_scheduler():
    assert M.complete((A.profile,), M.TS_SCHED, TS) == (A.profile, 0, TS)


# ---------------------------------------------------------------- TRACE
def test_trace_sched():
    """seed 877 and 886: ``{trace, Pid, What, MFA|0}`` and
    ``{trace, Pid, What, SchedId, MFA|0}``."""
    assert M.trace_sched(P1, A["in"], MFA) == (A.trace, P1, A["in"], MFA)
    assert M.trace_sched(P1, A.out, 0, 3) == (A.trace, P1, A.out, 3, 0)
    assert M.trace_sched(P1, A.out, 0, 0) == (A.trace, P1, A.out, 0, 0)


def test_trace_send_and_receive():
    """seed 944/980: ``{trace, Pid, Op, Msg, To}``; seed 1010/1039:
    ``{trace, Pid, receive, Msg}``."""
    op = A.send_to_non_existing_process
    assert M.trace_send(P1, op, A.hi, P2) == (A.trace, P1, op, A.hi, P2)
    assert M.trace_receive(P1, A.hi) == (A.trace, P1, A.receive, A.hi)


def test_erts_call_trace():
    """seed 1798-1810 / 1961-1982: ``{trace, Pid, call, {M, F, Args}}``, arity
    5 with the match-spec result when it is not ``true``."""
    assert M.erts_call_trace(P1, A.m, A.f, [1, 2]) == (A.trace, P1, A.call, (A.m, A.f, [1, 2]))
    assert M.erts_call_trace(P1, A.m, A.f, 2, A.hello) == (
        A.trace,
        P1,
        A.call,
        (A.m, A.f, 2),
        A.hello,
    )
    # only Python's True means "no extra element": the atom false is a result
    assert M.erts_call_trace(P1, A.m, A.f, 0, A.false)[-1] is A.false
    assert len(M.erts_call_trace(P1, A.m, A.f, 0, 1)) == 5


def test_return_exception_and_return_to():
    """seed 1390/1432: ``{trace, Pid, return_from, MFA, Value}``; seed 1517-1519:
    ``{trace, Pid, exception_from, MFA, {Class, Value}}``; seed 1280:
    ``{trace, Pid, return_to, MFA}``."""
    assert M.erts_trace_return(P1, MFA, 7) == (A.trace, P1, A.return_from, MFA, 7)
    assert M.erts_trace_exception(P1, MFA, A.error, A.badarg) == (
        A.trace,
        P1,
        A.exception_from,
        MFA,
        (A.error, A.badarg),
    )
    assert M.erts_trace_return_to(P1, MFA) == (A.trace, P1, A.return_to, MFA)


def test_trace_proc_and_spawn():
    """seed 2023: ``{trace, Pid, What, Data}``; seed 2099-2101:
    ``{trace, Parent, spawn, Child, {M, F, Args}}``."""
    assert M.trace_proc(P1, A.exit, A.normal) == (A.trace, P1, A.exit, A.normal)
    assert M.trace_proc_spawn(P1, P2, A.m, A.f, [1]) == (
        A.trace,
        P1,
        A.spawn,
        P2,
        (A.m, A.f, [1]),
    )


def test_trace_gc_tags_in_the_seed_order():
    """seed 2194-2206 (tags), 2268-2274: ``{trace, Pid, What, [{Tag, Value}]}``."""
    tags = [
        "old_heap_block_size",
        "heap_block_size",
        "mbuf_size",
        "recent_size",
        "stack_size",
        "old_heap_size",
        "heap_size",
        "bin_vheap_size",
        "bin_vheap_block_size",
        "bin_old_vheap_size",
        "bin_old_vheap_block_size",
    ]
    assert [t.name for t in M.GC_TAGS] == tags
    values = tuple(range(10, 21))
    assert M.trace_gc(P1, A.gc_start, values) == (
        A.trace,
        P1,
        A.gc_start,
        [(Atom(t), v) for t, v in zip(tags, values, strict=True)],
    )


def test_trace_port_messages():
    """seed 2722/2749: ``{trace, Pid, open, Port, Driver}``; seed 2785:
    ``{trace, Port, What, Data}``; seed 2861-2864: with and without the
    scheduler number."""
    assert M.trace_port_open(P1, PORT, A.echo) == (A.trace, P1, A.open, PORT, A.echo)
    assert M.trace_port(PORT, A.closed, A.normal) == (A.trace, PORT, A.closed, A.normal)
    assert M.trace_sched_ports_where(PORT, A["in"], A.command) == (
        A.trace,
        PORT,
        A["in"],
        A.command,
    )
    assert M.trace_sched_ports_where(PORT, A.out, A.command, 2) == (
        A.trace,
        PORT,
        A.out,
        2,
        A.command,
    )
    assert M.trace_sched_ports_where(PORT, A.out, A.command, 0)[3] == 0


def test_do_send_schedfix():
    """seed 459-478: ``{trace_ts, Pid, out, 0, Ts}`` then ``{trace_ts, Pid,
    in, 0}`` patched with a new stamp."""
    assert M.do_send_schedfix(P1, TS, (4, 5, 6)) == (
        (A.trace_ts, P1, A.out, 0, TS),
        (A.trace_ts, P1, A["in"], 0, (4, 5, 6)),
    )


# ---------------------------------------------------------------- SEQTRACE (1086-1240)
@pytest.mark.parametrize(
    "seq_type,atom",
    [(M.SEQ_TRACE_SEND, A.send), (M.SEQ_TRACE_RECEIVE, A.receive), (M.SEQ_TRACE_PRINT, A.print)],
)
def test_seq_trace_output_generic(seq_type, atom):
    """seed 1107-1111 (type atom), 1131-1143: ``{seq_trace, Label, {Type,
    {Lastcnt, Serial}, From, To, Msg}}``; the timestamp is appended later
    (seed 1150)."""
    assert M.seq_trace_output_generic(A.lbl, seq_type, 3, 4, P1, P2, A.hi) == (
        A.seq_trace,
        A.lbl,
        (atom, (3, 4), P1, P2, A.hi),
    )


def test_seq_trace_exit_is_wrapped():
    """seed 1134-1136: ``{'EXIT', ExitFrom, Msg}``."""
    assert M.seq_trace_output_generic(0, M.SEQ_TRACE_SEND, 1, 2, P1, P2, A.why, exitfrom=P2) == (
        A.seq_trace,
        0,
        (A.send, (1, 2), P1, P2, (A.EXIT, P2, A.why)),
    )


# ---------------------------------------------------------------- SYSMON
def test_monitor_long_gc():
    """seed 2429-2437 (tags), 2478: ``{monitor, Pid, long_gc, [{Tag, Value}]}``."""
    sizes = (11, 12, 13, 14, 15, 16)
    assert M.monitor_long_gc(P1, 99, sizes) == (
        A.monitor,
        P1,
        A.long_gc,
        [
            (A.timeout, 99),
            (A.old_heap_block_size, 11),
            (A.heap_block_size, 12),
            (A.mbuf_size, 13),
            (A.stack_size, 14),
            (A.old_heap_size, 15),
            (A.heap_size, 16),
        ],
    )


def test_monitor_large_heap():
    """seed 2505-2512 (tags), 2553."""
    assert M.monitor_large_heap(P1, (11, 12, 13, 14, 15, 16)) == (
        A.monitor,
        P1,
        A.large_heap,
        [
            (A.old_heap_block_size, 11),
            (A.heap_block_size, 12),
            (A.mbuf_size, 13),
            (A.stack_size, 14),
            (A.old_heap_size, 15),
            (A.heap_size, 16),
        ],
    )


def test_monitor_long_schedule_proc():
    """seed 2320-2343: ``[{timeout, T}, {in, MFA}, {out, MFA}]``, ``undefined``
    for a missing function."""
    out_mfa = (A.m, A.g, 0)
    assert M.monitor_long_schedule_proc(P1, MFA, out_mfa, 150) == (
        A.monitor,
        P1,
        A.long_schedule,
        [(A.timeout, 150), (A["in"], MFA), (A.out, out_mfa)],
    )
    assert M.monitor_long_schedule_proc(P1, None, None, 150)[3] == [
        (A.timeout, 150),
        (A["in"], A.undefined),
        (A.out, A.undefined),
    ]
    assert M.monitor_long_schedule_proc(P1, None, out_mfa, 1)[3][1:] == [
        (A["in"], A.undefined),
        (A.out, out_mfa),
    ]
    assert M.monitor_long_schedule_proc(P1, MFA, None, 1)[3][1:] == [
        (A["in"], MFA),
        (A.out, A.undefined),
    ]


def test_monitor_long_schedule_port_and_generic():
    """seed 2398-2408: ``[{timeout, T}, {port_op, Op}]``; seed 2589:
    ``{monitor, Pid, Type, Spec}``."""
    assert M.monitor_long_schedule_port(PORT, A.input, 120) == (
        A.monitor,
        PORT,
        A.long_schedule,
        [(A.timeout, 120), (A.port_op, A.input)],
    )
    assert M.monitor_generic(P1, A.busy_port, PORT) == (A.monitor, P1, A.busy_port, PORT)


# ---------------------------------------------------------------- SYSPROF
def test_profile_scheduler_messages():
    """seed 2644-2645 and 2681: ``{profile, scheduler, Id, State, NoSchedulers,
    Ts}`` (the count and stamp come from the queue for the first)."""
    assert M.profile_scheduler(2, A.active) == (A.profile, A.scheduler, 2, A.active)
    assert M.profile_scheduler_q(2, A.inactive, 3, TS) == (
        A.profile,
        A.scheduler,
        2,
        A.inactive,
        3,
        TS,
    )


def test_profile_runnable_messages():
    """seed 3004: ``{profile, Pid, Status, Where, Ts}``; seed 2950:
    ``{profile, Port, Status, 0, Ts}`` (``count`` is always 0)."""
    assert M.profile_runnable_proc(P1, A.active, MFA) == (A.profile, P1, A.active, MFA)
    assert M.profile_runnable_port(PORT, A.inactive) == (A.profile, PORT, A.inactive, 0)


# ---------------------------------------------------------------- ERRLGR
def test_error_logger_str():
    """utils.c ``do_send_to_logger``: ``{notify, {error, GL, {emulator,
    "~s~n", [Text]}}}``, ``noproc`` without a group leader; its shape is the
    one ``sys_msg_disp_failure`` prints as ``Tag: FirstArg`` (seed 3206-3212)."""
    gl = Pid(0)
    assert M.error_logger_str("hi", gl) == (
        A.notify,
        (A.error, gl, (A.emulator, charlist("~s~n"), [charlist("hi")])),
    )
    assert M.error_logger_str("hi")[1][1] is A.noproc


def test_error_logger_report():
    """17.x beam_emu.c ``terminate_proc``: the text of an uncaught error."""
    msg = M.error_logger_report(P1, (A.badarg, [A.x]), Pid(0))
    text = "Error in process <0.61.0> with exit value: {badarg,[x]}\n"
    assert msg == M.error_logger_str(text, Pid(0))
    assert format_term(msg[1][2][2][0]) == format_term(charlist(text))
