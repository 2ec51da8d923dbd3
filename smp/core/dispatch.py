"""Deliver or drop: the rules of ``sys_msg_dispatcher_func`` and
``sys_msg_disp_failure`` as pure code.

The dispatcher process calls ``resolve`` for each message in queue order and
acts on the answer; the failure side effects go through ``disp_failure``.  No
sockets here: the process table and the tracer state are passed in, so the
same rules are unit-tested directly and serve every transport.
"""

from __future__ import annotations

import sys
from collections.abc import Collection
from typing import Callable, NamedTuple, Protocol

from smp.core.messages import (
    SYS_MSG_TYPE_ERRLGR,
    SYS_MSG_TYPE_PROC_MSG,
    SYS_MSG_TYPE_SEQTRACE,
    SYS_MSG_TYPE_SYSMON,
    SYS_MSG_TYPE_SYSPROF,
    SYS_MSG_TYPE_TRACE,
    SysMsg,
)
from smp.core.placement import pid_owner
from smp.core.pretty import format_term
from smp.core.state import NIL, TracerState
from smp.core.terms import Atom, Pid, Port, Term

__all__ = [
    "ProcTable",
    "Decision",
    "resolve",
    "disp_failure",
    "DELIVER_PID",
    "DELIVER_PORT",
    "DROP",
    "DROP_REASONS",
    "format_error_logger_failure",
]

DELIVER_PID, DELIVER_PORT, DROP = 0, 1, 2
am_error_logger = Atom("error_logger")

#: Every reason a message can be dropped for, named for statistics().
DROP_REASONS = (
    "sender_is_receiver",  # SYSMON/SYSPROF from the monitor/profiler itself
    "nil_sender_nil_receiver",  # from NIL and receiver reset to NIL: the seed's
    # from == receiver test drops it without failure
    "error_logger_self",  # ERRLGR sent by the error logger itself
    "no_receiver",  # seq tracer false, no monitor/profiler, bad receiver
    "receiver_dead",  # pid receiver not alive
    "not_tracer",  # TRACE receiver alive but without the tracer mark
    "no_error_logger",  # nothing registered as error_logger
    "port_closed",  # port receiver not a valid tracer port
    "scheduler_lost",  # receiver lived on a scheduler that died
    "emulator_closed",  # still queued when the stopping dispatcher ran out of time
    "not_a_term",  # a port receiver, and a body the port cannot encode
)


class ProcTable(Protocol):
    def is_alive(self, pid: Pid) -> bool: ...
    def is_tracer(self, pid: Pid) -> bool: ...
    def whereis(self, name: Atom) -> object: ...
    def is_valid_tracer_port(self, port: Port) -> bool: ...


class Decision(NamedTuple):
    action: int
    receiver: object
    reason: str | None = None
    failure: bool = False  # sys_msg_disp_failure must run (vs plain drop)


#: Decision(DELIVER_PID, receiver) for receivers seen lately (immutable, so shared).
_DELIVER_PID: dict[Pid, Decision] = {}


def resolve(
    type_: int,
    from_: object,
    to: object,
    state: TracerState,
    table: ProcTable,
    lost: Collection[int] = (),
    nsched: int = 1,
) -> Decision:
    """Pick the receiver and decide, as ``sys_msg_dispatcher_func`` does.

    The one copy of the rule, for every mode: the smp dispatcher decides each
    queued run with it, the journal replay decides them again with it, and a
    nonsmp scheduler asks it at make time (``ERTS_GET_TRACER_REF`` and the
    monitor/profiler/error-logger lookups apply the same tests; the modes
    differ only in what they do with a drop, as the seed's ``#ifdef``s do).

    ``lost`` (smp only) holds the schedulers that died: a message for a pid
    that lived on one is dropped as ``scheduler_lost`` where it would have
    been delivered or found its receiver dead (``nsched`` places the pid).
    TRACE to a pid, the bulk of all messages, is decided first."""
    t = type_
    if t == SYS_MSG_TYPE_TRACE or t == SYS_MSG_TYPE_PROC_MSG:
        receiver = to
    elif t == SYS_MSG_TYPE_SEQTRACE:
        receiver = state.get_system_seq_tracer()
    elif t == SYS_MSG_TYPE_SYSMON or t == SYS_MSG_TYPE_SYSPROF:
        receiver = (
            state.get_system_monitor() if t == SYS_MSG_TYPE_SYSMON else state.get_system_profile()
        )
        # the seed's "from == receiver" test: never about the monitor/profiler itself
        if from_ == receiver:
            return Decision(
                DROP,
                receiver,
                "sender_is_receiver" if receiver is not NIL else "nil_sender_nil_receiver",
            )
    elif t == SYS_MSG_TYPE_ERRLGR:
        proc = table.whereis(am_error_logger)
        if type(proc) is not Pid:  # erts_whereis_process: processes only
            return Decision(DROP, am_error_logger, "no_error_logger", True)
        if from_ == proc:
            return Decision(DROP, proc, "error_logger_self")
        receiver = proc
    else:
        receiver = NIL

    # type(receiver) twice, not kept in a local: mypy narrows receiver by
    # the test on its own type only
    if type(receiver) is Pid:
        alive = table.is_alive(receiver)
        if alive and t == SYS_MSG_TYPE_TRACE and not table.is_tracer(receiver):
            return Decision(DROP, receiver, "not_tracer", True)
        if lost and pid_owner(receiver, nsched) in lost:
            return Decision(DROP, receiver, "scheduler_lost", True)
        if not alive:
            return Decision(DROP, receiver, "receiver_dead", True)
        d = _DELIVER_PID.get(receiver)  # the common verdict, made once per receiver
        if d is None:
            if len(_DELIVER_PID) >= 4096:
                _DELIVER_PID.clear()
            d = _DELIVER_PID[receiver] = Decision(DELIVER_PID, receiver)
        return d
    if type(receiver) is Port:
        if not table.is_valid_tracer_port(receiver):
            return Decision(DROP, receiver, "port_closed", True)
        return Decision(DELIVER_PORT, receiver)
    return Decision(DROP, receiver, "no_receiver", True)


def format_error_logger_failure(msg: Term) -> str:
    """The stderr line ``sys_msg_disp_failure`` prints for an undeliverable
    error-logger message.  The seed falls through to a tuple access after
    printing "unexpected" for a non-tuple; here it prints once and stops."""
    no_elgger = "(no error logger present)"
    try:
        if type(msg) is tuple and len(msg) == 2 and type(msg[1]) is tuple and len(msg[1]) == 3:
            tag, inner = msg[1][0], msg[1][2]
            if type(inner) is tuple and len(inner) == 3 and type(inner[2]) is list and inner[2]:
                return f"{no_elgger} {format_term(tag)}: {format_term(inner[2][0])}\n"
        return f"{no_elgger} unexpected error logger message: {format_term(msg)}\n"
    except TypeError:
        return f"{no_elgger} unexpected error logger message: {msg!r}\n"


def disp_failure(
    m: SysMsg, receiver: object, state: TracerState, write: Callable[[str], object] | None = None
) -> None:
    """``sys_msg_disp_failure``: the side effects of a failed delivery."""
    t = m.type
    if t == SYS_MSG_TYPE_SEQTRACE:
        state.seq_tracer_failed(receiver)
    elif t == SYS_MSG_TYPE_SYSMON:
        state.monitor_failed(receiver)
    elif t == SYS_MSG_TYPE_SYSPROF:
        state.profile_failed(receiver)
    elif t == SYS_MSG_TYPE_ERRLGR:
        (write or sys.stderr.write)(format_error_logger_failure(m.msg))
    # TRACE: invalid tracers are removed when tracees are scheduled in.
    # PROC_MSG: nothing.
