"""What the scheduler's modules share: atoms, the names they take from the
core (re-exported here so each module imports what it uses from one place),
and ``ARE_TRACE_FLAGS_ON``.
"""

# ruff: noqa: F401
from __future__ import annotations

import heapq
import sys
import time
from collections import deque

from smp.core import messages as M
from smp.core.clock import Clock
from smp.core.dispatch import format_error_logger_failure
from smp.core.errors import BadArg, ErlangException, Error, Exit, Throw
from smp.core.flags import (
    F_SENSITIVE,
    F_TIMESTAMP,
    F_TRACE_ARITY_ONLY,
    F_TRACE_CALLS,
    F_TRACE_GC,
    F_TRACE_PORTS,
    F_TRACE_PROCS,
    F_TRACE_RECEIVE,
    F_TRACE_RETURN_TO,
    F_TRACE_SCHED,
    F_TRACE_SCHED_EXIT,
    F_TRACE_SCHED_NO,
    F_TRACE_SCHED_PORTS,
    F_TRACE_SCHED_PROCS,
    F_TRACE_SEND,
    F_TRACE_SILENT,
    F_TRACE_SOL,
    F_TRACE_SOL1,
    F_TRACE_SOS,
    F_TRACE_SOS1,
    F_TRACER,
    TRACEE_FLAGS,
    flag_bit,
)
from smp.core.matchspec import (
    MATCH_SET_EXCEPTION_TRACE,
    MATCH_SET_RETURN_TO_TRACE,
    MATCH_SET_RETURN_TRACE,
)
from smp.core.placement import PID_BASE, pid_index, pid_owner, port_of, port_owner
from smp.core.pretty import format_term
from smp.core.state import FALSE, NIL, TracerState
from smp.core.stats import Stats
from smp.core.terms import Atom, Pid, Port, Ref

from .drivers import make_driver
from .process import EXITED, EXITING, REDS, RPC, RUNNABLE, SUSPEND, SUSPENDED, WAIT, WAITING, Proc

_a = Atom
am_in, am_out, am_in_exiting, am_out_exiting, am_out_exited = (
    _a("in"),
    _a("out"),
    _a("in_exiting"),
    _a("out_exiting"),
    _a("out_exited"),
)
am_send, am_send_to_non_existing = _a("send"), _a("send_to_non_existing_process")
am_timeout, am_normal, am_kill, am_killed, am_noproc = (
    _a("timeout"),
    _a("normal"),
    _a("kill"),
    _a("killed"),
    _a("noproc"),
)
am_EXIT, am_true, am_false, am_undefined = _a("EXIT"), _a("true"), _a("false"), _a("undefined")
am_exit, am_link, am_unlink, am_getting_linked, am_getting_unlinked = (
    _a("exit"),
    _a("link"),
    _a("unlink"),
    _a("getting_linked"),
    _a("getting_unlinked"),
)
am_register, am_unregister, am_gc_start, am_gc_end = (
    _a("register"),
    _a("unregister"),
    _a("gc_start"),
    _a("gc_end"),
)
am_active, am_inactive, am_closed, am_command = (
    _a("active"),
    _a("inactive"),
    _a("closed"),
    _a("command"),
)
am_busy_port, am_busy_dist_port, am_error_logger = (
    _a("busy_port"),
    _a("busy_dist_port"),
    _a("error_logger"),
)
am_badarg, am_nocatch, am_error, am_throw = _a("badarg"), _a("nocatch"), _a("error"), _a("throw")
am_undef, am_trace_delivered = _a("undef"), _a("trace_delivered")
am_receive, am_start = _a("receive"), _a("start")

GROUP_LEADER = Pid(0)
#: op_port_command's answer when the port lives on another scheduler.
PORT_REMOTE = "remote"


def inherited_tracing(p, always: int, once: int):
    """What a spawned or linked process takes from ``p`` under
    ``set_on_spawn``/``set_on_link`` (``always``) or
    ``set_on_first_spawn``/``set_on_first_link`` (``once``), as 17.x
    ``erl_create_process`` and ``insert_internal_link`` give it:
    ``(flags, tracer, clear)``, the child's flags becoming
    ``(its flags | flags) & ~clear`` (``inherit_tracing``).  Under ``once``
    both flags leave ``p`` and the child (``clear``); ``always`` alone stays
    with both.  None when ``p`` is not traced or has neither flag."""
    if p.tracer is NIL or not p.flags & (always | once):
        return None
    clear = (always | once) if p.flags & once else 0
    inherit = (p.flags & TRACEE_FLAGS, p.tracer, clear)
    p.flags &= ~clear
    return inherit


def inherit_tracing(p, inherit) -> None:
    """Give ``p`` what ``inherited_tracing`` found: its flags are added to
    the ones ``p`` has (those of the default tracing, say), not put in their
    place, and the tracer is the parent's."""
    if inherit is not None:
        flags, tracer, clear = inherit
        p.flags = (p.flags | flags) & ~clear
        p.tracer = tracer


def are_trace_flags_on(flags: int, tf: int) -> bool:
    """``ARE_TRACE_FLAGS_ON``: all of ``tf`` and not sensitive."""
    return (flags & (tf | F_SENSITIVE)) == tf


class _Meta:
    """A meta tracer's fixed flag set (``meta_flags = F_TRACE_CALLS | F_TIMESTAMP``)."""

    __slots__ = ("tracer", "flags")

    def __init__(self, tracer):
        self.tracer = tracer
        self.flags = F_TRACE_CALLS | F_TIMESTAMP
