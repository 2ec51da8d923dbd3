"""Every message ``erl_trace.c`` builds, as pure functions named after the seed.

Each builder returns the term *without* its timestamp: in the seed the
timestamp (and, for ``profile_scheduler``, the active-scheduler count) is
taken under ``smq_mtx``, i.e. in queue order.  A ``SysMsg`` therefore carries
a ``ts_kind`` saying how ``complete`` finishes the term once the queue has
given it a timestamp: ``TS_PATCH`` is the seed's ``patch_ts`` (``trace``
becomes ``trace_ts`` and the timestamp is appended), ``TS_APPEND`` appends it
(``seq_trace`` and ``profile`` messages), ``TS_SCHED`` appends the active
count and then the timestamp (``profile_scheduler``).
"""

from __future__ import annotations

from typing import NamedTuple

from smp.core.pretty import format_term
from smp.core.terms import Atom, Pid, Port, Term

__all__ = [
    "SYS_MSG_TYPE_UNDEFINED",
    "SYS_MSG_TYPE_TRACE",
    "SYS_MSG_TYPE_SEQTRACE",
    "SYS_MSG_TYPE_SYSMON",
    "SYS_MSG_TYPE_ERRLGR",
    "SYS_MSG_TYPE_PROC_MSG",
    "SYS_MSG_TYPE_SYSPROF",
    "TYPE_NAMES",
    "TS_NONE",
    "TS_PATCH",
    "TS_APPEND",
    "TS_SCHED",
    "SysMsg",
    "complete",
    "patch_ts",
    "trace_sched",
    "trace_send",
    "trace_receive",
    "erts_call_trace",
    "erts_trace_return",
    "erts_trace_exception",
    "erts_trace_return_to",
    "trace_proc",
    "trace_proc_spawn",
    "trace_gc",
    "trace_port_open",
    "trace_port",
    "trace_sched_ports_where",
    "seq_trace_output_generic",
    "monitor_long_gc",
    "monitor_large_heap",
    "monitor_long_schedule_proc",
    "monitor_long_schedule_port",
    "monitor_generic",
    "profile_scheduler",
    "profile_scheduler_q",
    "profile_runnable_proc",
    "profile_runnable_port",
    "error_logger_report",
    "error_logger_str",
    "do_send_schedfix",
    "GC_TAGS",
    "SEQ_TRACE_SEND",
    "SEQ_TRACE_RECEIVE",
    "SEQ_TRACE_PRINT",
    "SEQ_TRACE_TIMESTAMP",
    "DECIDED_BY_RECEIVER",
]

SYS_MSG_TYPE_UNDEFINED = 0
SYS_MSG_TYPE_TRACE = 1
SYS_MSG_TYPE_SEQTRACE = 2
SYS_MSG_TYPE_SYSMON = 3
SYS_MSG_TYPE_ERRLGR = 4
SYS_MSG_TYPE_PROC_MSG = 5
SYS_MSG_TYPE_SYSPROF = 6

#: the types sys_msg_dispatcher_func decides by receiver alone (it reads no
#: ``smqp->from`` for them): a scheduler sends consecutive ones to one
#: receiver as one run under the first one's sender
DECIDED_BY_RECEIVER = frozenset((SYS_MSG_TYPE_TRACE, SYS_MSG_TYPE_PROC_MSG))
TYPE_NAMES = {
    0: "UNDEFINED",
    1: "TRACE",
    2: "SEQTRACE",
    3: "SYSMON",
    4: "ERRLGR",
    5: "PROC_MSG",
    6: "SYSPROF",
}

TS_NONE, TS_PATCH, TS_APPEND, TS_SCHED = 0, 1, 2, 3

#: A trace message: a tuple of terms (``{trace, Pid, What, ...}``)
_Msg = tuple[Term, ...]
#: An ``{MegaSecs, Secs, MicroSecs}`` timestamp (:mod:`smp.core.clock`)
_Ts = tuple[int, int, int]

SEQ_TRACE_SEND = 1
SEQ_TRACE_RECEIVE = 2
SEQ_TRACE_PRINT = 4
SEQ_TRACE_TIMESTAMP = 8

_a = Atom
am_trace, am_trace_ts, am_seq_trace, am_monitor, am_profile = (
    _a("trace"),
    _a("trace_ts"),
    _a("seq_trace"),
    _a("monitor"),
    _a("profile"),
)
am_send, am_receive, am_print, am_call = _a("send"), _a("receive"), _a("print"), _a("call")
am_EXIT, am_scheduler, am_spawn, am_open = _a("EXIT"), _a("scheduler"), _a("spawn"), _a("open")
am_return_from, am_exception_from, am_return_to = (
    _a("return_from"),
    _a("exception_from"),
    _a("return_to"),
)
am_timeout, am_in, am_out, am_port_op = _a("timeout"), _a("in"), _a("out"), _a("port_op")
am_long_gc, am_large_heap, am_long_schedule = _a("long_gc"), _a("large_heap"), _a("long_schedule")
am_notify, am_error = _a("notify"), _a("error")


class SysMsg(NamedTuple):
    """One entry of the seed's ``sys_message_queue`` (``ErtsSysMsgQ``)."""

    type: int
    from_: object
    to: object
    msg: _Msg
    ts_kind: int = TS_NONE


def patch_ts(msg: _Msg, ts: _Ts) -> _Msg:
    """``patch_ts``: ``{trace, ...}`` becomes ``{trace_ts, ..., Ts}``."""
    return (am_trace_ts,) + msg[1:] + (ts,)


def complete(msg: _Msg, ts_kind: int, ts: _Ts | None, active: int = 0) -> _Msg:
    """Finish a message with what the queue gave it (timestamp, active count)."""
    if ts_kind == TS_NONE:
        return msg
    if ts_kind == TS_PATCH:
        return (am_trace_ts,) + msg[1:] + (ts,)
    if ts_kind == TS_APPEND:
        return msg + (ts,)
    return msg + (active, ts)


# -- TRACE ---------------------------------------------------------------------
def trace_sched(pid: Pid, what: Atom, mfa: Term, sched_id: int | None = None) -> _Msg:
    """``trace_sched_aux``: ``{trace, Pid, in|out|..., [SchedId,] MFA|0}``."""
    if sched_id is None:
        return (am_trace, pid, what, mfa)
    return (am_trace, pid, what, sched_id, mfa)


def trace_send(pid: Pid, operation: Atom, msg: Term, to: Term) -> _Msg:
    return (am_trace, pid, operation, msg, to)


def trace_receive(pid: Pid, msg: Term) -> _Msg:
    return (am_trace, pid, am_receive, msg)


def erts_call_trace(
    pid: Pid, mod: Atom, func: Atom, args_or_arity: Term, pam_result: object = True
) -> _Msg:
    """``{trace, Pid, call, {M,F,Args|Arity}[, PamResult]}``; ``pam_result`` is
    ``True`` (Python) when the match spec gave ``true`` (no extra element)."""
    m = (am_trace, pid, am_call, (mod, func, args_or_arity))
    if pam_result is True:
        return m
    return m + (pam_result,)


def erts_trace_return(pid: Pid, mfa: _Msg, value: Term) -> _Msg:
    return (am_trace, pid, am_return_from, mfa, value)


def erts_trace_exception(pid: Pid, mfa: _Msg, cls: Atom, value: Term) -> _Msg:
    return (am_trace, pid, am_exception_from, mfa, (cls, value))


def erts_trace_return_to(pid: Pid, mfa: Term) -> _Msg:
    return (am_trace, pid, am_return_to, mfa)


def trace_proc(pid: Pid, what: Atom, data: Term) -> _Msg:
    return (am_trace, pid, what, data)


def trace_proc_spawn(parent: Pid, child: Pid, mod: Atom, func: Atom, args: list[Term]) -> _Msg:
    return (am_trace, parent, am_spawn, child, (mod, func, args))


GC_TAGS = tuple(
    _a(n)
    for n in (
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
    )
)


def trace_gc(pid: Pid, what: Atom, values: tuple[int, ...]) -> _Msg:
    """``trace_gc``: the 11 ``{Tag, Value}`` items in the seed's order."""
    return (am_trace, pid, what, [(t, v) for t, v in zip(GC_TAGS, values, strict=False)])


def trace_port_open(calling_pid: Pid, port: Port, drv_name: Atom) -> _Msg:
    return (am_trace, calling_pid, am_open, port, drv_name)


def trace_port(port: Port, what: Atom, data: Term) -> _Msg:
    return (am_trace, port, what, data)


def trace_sched_ports_where(
    port: Port, what: Atom, where: Term, sched_id: int | None = None
) -> _Msg:
    if sched_id is None:
        return (am_trace, port, what, where)
    return (am_trace, port, what, sched_id, where)


def do_send_schedfix(pid: Pid, ts_out: _Ts, ts_in: _Ts) -> tuple[_Msg, _Msg]:
    """``do_send_schedfix_to_port``: the fake ``out``/``in`` pair."""
    return ((am_trace_ts, pid, am_out, 0, ts_out), (am_trace_ts, pid, am_in, 0, ts_in))


# -- SEQTRACE ------------------------------------------------------------------
_SEQ_TYPE = {SEQ_TRACE_SEND: am_send, SEQ_TRACE_RECEIVE: am_receive, SEQ_TRACE_PRINT: am_print}


def seq_trace_output_generic(
    label: Term,
    seq_type: int,
    lastcnt: int,
    serial: int,
    sender: Term,
    receiver: Term,
    msg: Term,
    exitfrom: Term = None,
) -> _Msg:
    """``{seq_trace, Label, {Type, {Lastcnt, Serial}, From, To, Msg}}``;
    with ``exitfrom`` the message is wrapped as ``{'EXIT', From, Msg}``."""
    if exitfrom is not None:
        msg = (am_EXIT, exitfrom, msg)
    return (am_seq_trace, label, (_SEQ_TYPE[seq_type], (lastcnt, serial), sender, receiver, msg))


# -- SYSMON --------------------------------------------------------------------
def monitor_long_gc(pid: Pid, time: int, sizes: tuple[int, ...]) -> _Msg:
    """``sizes`` = (old_heap_block_size, heap_block_size, mbuf_size, stack_size,
    old_heap_size, heap_size)."""
    tags = (
        "timeout",
        "old_heap_block_size",
        "heap_block_size",
        "mbuf_size",
        "stack_size",
        "old_heap_size",
        "heap_size",
    )
    return (
        am_monitor,
        pid,
        am_long_gc,
        [(_a(t), v) for t, v in zip(tags, (time,) + sizes, strict=False)],
    )


def monitor_large_heap(pid: Pid, sizes: tuple[int, ...]) -> _Msg:
    tags = (
        "old_heap_block_size",
        "heap_block_size",
        "mbuf_size",
        "stack_size",
        "old_heap_size",
        "heap_size",
    )
    return (am_monitor, pid, am_large_heap, [(_a(t), v) for t, v in zip(tags, sizes, strict=False)])


def monitor_long_schedule_proc(pid: Pid, in_mfa: Term, out_mfa: Term, time: int) -> _Msg:
    undefined = _a("undefined")
    return (
        am_monitor,
        pid,
        am_long_schedule,
        [
            (am_timeout, time),
            (am_in, in_mfa if in_mfa is not None else undefined),
            (am_out, out_mfa if out_mfa is not None else undefined),
        ],
    )


def monitor_long_schedule_port(port: Port, op: Atom, time: int) -> _Msg:
    return (am_monitor, port, am_long_schedule, [(am_timeout, time), (am_port_op, op)])


def monitor_generic(pid: Pid, what: Atom, spec: Term) -> _Msg:
    return (am_monitor, pid, what, spec)


# -- SYSPROF -------------------------------------------------------------------
def profile_scheduler(scheduler_id: int, state: Atom) -> _Msg:
    """Completed with ``TS_SCHED``: the count and timestamp come from the queue."""
    return (am_profile, am_scheduler, scheduler_id, state)


def profile_scheduler_q(scheduler_id: int, state: Atom, no_schedulers: int, ts: _Ts) -> _Msg:
    return (am_profile, am_scheduler, scheduler_id, state, no_schedulers, ts)


def profile_runnable_proc(pid: Pid, status: Atom, where: Term) -> _Msg:
    return (am_profile, pid, status, where)


def profile_runnable_port(port: Port, status: Atom) -> _Msg:
    return (am_profile, port, status, 0)


# -- ERRLGR --------------------------------------------------------------------
_S_N = [ord(c) for c in "~s~n"]
am_emulator, am_noproc = Atom("emulator"), Atom("noproc")


def error_logger_str(text: str, group_leader: Term = None) -> _Msg:
    """``erts_send_error_to_logger_str`` (utils.c ``do_send_to_logger``):
    ``{notify, {error, GL, {emulator, "~s~n", [Text]}}}``, ``GL`` the
    caller's group leader (``noproc`` when there is none)."""
    gl = am_noproc if group_leader is None else group_leader
    return (am_notify, (am_error, gl, (am_emulator, _S_N, [[ord(c) for c in text]])))


def error_logger_report(pid: Pid, reason: Term, group_leader: Term) -> _Msg:
    """The crash report of a process that ended with an uncaught error or
    throw, as 17.x beam_emu.c ``terminate_proc`` makes it: the text
    ``Error in process <Pid> with exit value: <Reason>`` (``%T``, the
    reason as ``~w`` prints it) through ``erts_send_error_to_logger``."""
    text = f"Error in process {format_term(pid)} with exit value: {format_term(reason)}\n"
    return error_logger_str(text, group_leader)
