"""The scheduler: a run queue of emulated processes and the trace points of
``erl_trace.c`` that fire while they run.

One ``Node`` runs in each scheduler OS process.  It owns its processes and
ports, drives their coroutines, and builds every trace, seq_trace,
system_monitor and system_profile message at the point the VM builds it.
Where the seed's ``#ifdef ERTS_SMP`` branches differ, ``self.smp`` decides:

* nonsmp (``#ifndef ERTS_SMP``): the tracer is looked up when the message is
  made (``ERTS_GET_TRACER_REF``); a dead tracer resets the tracee and nothing
  is made; delivery is synchronous; port tracers may cause fake schedule pairs;
  profile messages go through ``profile_send``; timestamps come from this
  node's clock.
* smp: messages are made without looking at the tracer and queued for the
  dispatcher (``enqueue_sys_msg``) with the timestamp left for the queue to
  fill; a tracee checks its tracer when scheduled in
  (``erts_check_my_tracer_proc``); call tracing checks at once.
"""
from __future__ import annotations

import heapq
import sys
import time
from collections import deque

from smp import messages as M
from smp.clock import Clock
from smp.dispatch import format_error_logger_failure
from smp.errors import BadArg, Error, ErlangException, Exit, Throw
from smp.flags import (F_SENSITIVE, F_TIMESTAMP, F_TRACE_ARITY_ONLY, F_TRACE_CALLS,
                       F_TRACE_GC, F_TRACE_PORTS, F_TRACE_PROCS, F_TRACE_RECEIVE,
                       F_TRACE_RETURN_TO, F_TRACE_SCHED, F_TRACE_SCHED_EXIT,
                       F_TRACE_SCHED_NO, F_TRACE_SCHED_PORTS, F_TRACE_SCHED_PROCS,
                       F_TRACE_SEND, F_TRACE_SILENT, F_TRACE_SOL, F_TRACE_SOL1, F_TRACE_SOS,
                       F_TRACE_SOS1, F_TRACER, TRACEE_FLAGS)
from smp.matchspec import (MATCH_SET_EXCEPTION_TRACE, MATCH_SET_RETURN_TO_TRACE,
                           MATCH_SET_RETURN_TRACE)
from smp.state import FALSE, NIL, TracerState
from smp.stats import Stats
from smp.terms import Atom, Pid, Port, Ref

from .drivers import make_driver
from .process import EXITED, EXITING, REDS, RPC, RUNNABLE, SUSPEND, SUSPENDED, WAIT, WAITING, Proc

__all__ = ["Node", "pid_owner", "port_owner", "PID_BASE"]

PID_BASE = 80
_a = Atom
am_in, am_out, am_in_exiting, am_out_exiting, am_out_exited = (
    _a("in"), _a("out"), _a("in_exiting"), _a("out_exiting"), _a("out_exited"))
am_send, am_send_to_non_existing = _a("send"), _a("send_to_non_existing_process")
am_timeout, am_normal, am_kill, am_killed, am_noproc = (
    _a("timeout"), _a("normal"), _a("kill"), _a("killed"), _a("noproc"))
am_EXIT, am_true, am_false, am_undefined = _a("EXIT"), _a("true"), _a("false"), _a("undefined")
am_exit, am_link, am_unlink, am_getting_linked, am_getting_unlinked = (
    _a("exit"), _a("link"), _a("unlink"), _a("getting_linked"), _a("getting_unlinked"))
am_register, am_unregister, am_gc_start, am_gc_end = (
    _a("register"), _a("unregister"), _a("gc_start"), _a("gc_end"))
am_active, am_inactive, am_closed, am_command = (
    _a("active"), _a("inactive"), _a("closed"), _a("command"))
am_busy_port, am_busy_dist_port, am_error_logger = (
    _a("busy_port"), _a("busy_dist_port"), _a("error_logger"))
am_badarg, am_nocatch, am_error, am_throw = _a("badarg"), _a("nocatch"), _a("error"), _a("throw")
am_undef, am_trace_delivered = _a("undef"), _a("trace_delivered")
am_receive = _a("receive")

GROUP_LEADER = Pid(0)


def pid_index(pid: Pid) -> int:
    """The full index: pids past 2**15 carry the high bits in the serial, as
    the VM's do, so that a real node can read every pid we write."""
    return pid.number + (pid.serial << 15)


def pid_owner(pid: Pid, nsched: int) -> int:
    return (pid_index(pid) - PID_BASE) % nsched + 1


def port_owner(port: Port, nsched: int) -> int:
    """0 is the owner of trace ports (the dispatcher, or the nonsmp node)."""
    return port.number % (nsched + 1)


def are_trace_flags_on(flags: int, tf: int) -> bool:
    """``ARE_TRACE_FLAGS_ON``: all of ``tf`` and not sensitive."""
    return (flags & (tf | F_SENSITIVE)) == tf


class _Meta:
    """A meta tracer's fixed flag set (``meta_flags = F_TRACE_CALLS | F_TIMESTAMP``)."""

    __slots__ = ("tracer", "flags")

    def __init__(self, tracer):
        self.tracer = tracer
        self.flags = F_TRACE_CALLS | F_TIMESTAMP


class Node:
    """One scheduler.  Runs in its scheduler OS process (or, for unit tests,
    in the caller's process)."""

    def __init__(self, sched_id: int = 1, nsched: int = 1, smp: bool = False,
                 reductions: int = 200, placement: str = "round_robin", transport=None,
                 stderr=None):
        self.sched_id = sched_id
        self.nsched = nsched
        self.smp = smp
        self.reds_budget = reductions
        self.placement = placement
        self.transport = transport
        self.stderr = stderr or sys.stderr
        self.procs: dict[Pid, Proc] = {}
        self.ports: dict[Port, object] = {}
        self.trace_ports: dict[Port, object] = {}     # nonsmp only: tracer ports
        self.registry: dict[Atom, object] = {}
        self.state = TracerState(liveness=self)
        self.dead_remote: set[Pid] = set()             # smp replica
        self.remote_tracers: set[Pid] = set()          # smp replica
        self.remote_tracer_ports: set[Port] = set()    # smp replica
        self.functions: dict[tuple, object] = {}
        self.patterns: dict[tuple, dict] = {}
        self.runq: deque[Proc] = deque()
        self.timers: list = []
        self.clock = Clock()
        self.stats = Stats()
        self.active = False
        self._pid_counter = 0
        self._port_counter = 0
        self._ref_counter = 0
        self._rr = sched_id - 1
        self._timer_seq = 0
        self.suspended_on_port: dict[Port, deque] = {}

    # ---------------------------------------------------------------- ids
    def new_pid(self, owner: int | None = None) -> Pid:
        owner = self.sched_id if owner is None else owner
        n = self.nsched
        index = PID_BASE + (self._pid_counter * n + (self.sched_id - 1)) * n + (owner - 1)
        self._pid_counter += 1
        return Pid(index & 0x7FFF, index >> 15)

    def new_port_id(self) -> Port:
        self._port_counter += 1
        return Port(self.sched_id + (self.nsched + 1) * self._port_counter)

    def make_ref(self) -> Ref:
        self._ref_counter += 1
        return Ref((self._ref_counter, self.sched_id, 0))

    def is_local_pid(self, pid: Pid) -> bool:
        return pid_owner(pid, self.nsched) == self.sched_id

    # ---------------------------------------------------------------- liveness (ProcTable)
    def is_alive(self, pid) -> bool:
        if type(pid) is not Pid:
            return False
        if self.is_local_pid(pid):
            p = self.procs.get(pid)
            return p is not None and p.status != EXITED
        return pid not in self.dead_remote

    def is_tracer(self, pid: Pid) -> bool:
        if self.is_local_pid(pid):
            p = self.procs.get(pid)
            return p is not None and p.status != EXITED and bool(p.flags & F_TRACER)
        return pid in self.remote_tracers and pid not in self.dead_remote

    def is_valid_tracer_port(self, port) -> bool:
        if not self.smp:
            tp = self.trace_ports.get(port)
            return tp is not None and not tp.closed
        return port in self.remote_tracer_ports

    def whereis(self, name: Atom):
        r = self.registry.get(name)
        if r is not None and type(r) is Pid and not self.is_alive(r):
            return None
        return r

    # ---------------------------------------------------------------- spawning
    def spawn_local(self, pid: Pid, fun, args, parent: Proc | None = None, link_to=None,
                    inherit=None, kept=False) -> Proc:
        """Create a process on this scheduler with a given pid."""
        mod = _a(getattr(fun, "__module__", "erlang") or "erlang")
        fname = _a(getattr(fun, "__name__", "fun"))
        initial = (mod, fname, len(args))
        p = Proc(self, pid, initial)
        p.group_leader = GROUP_LEADER
        if kept:
            p.kept = []
        p.coro = fun(p, *args)
        if not hasattr(p.coro, "send"):
            raise BadArg(f"process body {fname.name} must be an async def function")
        # erts_get_default_tracing for every new process ...
        dflags, dtracer = self._default_tracing()
        if dtracer is not NIL and dflags & TRACEE_FLAGS:
            p.flags |= dflags & TRACEE_FLAGS
            p.tracer = dtracer
        # ... overridden by set_on_spawn from the parent
        if inherit is not None:
            iflags, itracer = inherit
            p.flags = (p.flags & ~TRACEE_FLAGS) | iflags
            p.tracer = itracer
        self.procs[pid] = p
        if link_to is not None:
            p.links.add(link_to)
        if self.smp and self.transport is not None:
            self.transport.table_event(("spawn", pid))
        self._make_runnable(p)
        return p

    def _default_tracing(self):
        if self.smp:
            st = self.state
            return st.default_trace_flags, st.default_tracer
        return self.state.get_default_tracing()

    def _place(self, scheduler) -> int:
        if scheduler is not None:
            if not (1 <= scheduler <= self.nsched):
                raise BadArg(f"scheduler must be in 1..{self.nsched}, not {scheduler}")
            return scheduler
        if self.placement == "local" or self.nsched == 1:
            return self.sched_id
        self._rr = self._rr % self.nsched + 1
        return self._rr

    def op_spawn(self, parent: Proc, fun, args, link=False, scheduler=None) -> Pid:
        owner = self._place(scheduler)
        pid = self.new_pid(owner)
        inherit = None
        if parent.tracer is not NIL:
            if parent.flags & F_TRACE_SOS:
                inherit = (parent.flags & TRACEE_FLAGS, parent.tracer)
            elif parent.flags & F_TRACE_SOS1:
                inherit = (parent.flags & TRACEE_FLAGS & ~F_TRACE_SOS1, parent.tracer)
                parent.flags &= ~F_TRACE_SOS1
        if owner == self.sched_id:
            self.spawn_local(pid, fun, args, parent, parent.pid if link else None, inherit)
        else:
            self.transport.peer(owner, ("spawn", pid, fun, args, parent.pid if link else None,
                                        inherit))
        if link:
            parent.links.add(pid)
        if parent.tracer is not NIL and are_trace_flags_on(parent.flags, F_TRACE_PROCS):
            mod, fname, _ = (_a(getattr(fun, "__module__", "erlang") or "erlang"),
                             _a(getattr(fun, "__name__", "fun")), 0)
            self.trace_proc_spawn(parent, pid, mod, fname, list(args))
            if link:
                self.trace_proc(parent, parent, am_link, pid)
        return pid

    # ---------------------------------------------------------------- run queue
    def _make_runnable(self, p: Proc) -> None:
        was_waiting = p.status in (WAITING, SUSPENDED) or not p.in_runq
        if p.status in (WAITING, SUSPENDED):
            p.status = RUNNABLE
            p.timer_gen += 1
        if not p.in_runq and p.status != EXITED:
            p.in_runq = True
            self.runq.append(p)
            if was_waiting and self.state.profile_runnable_procs:
                self.profile_runnable_proc(p, am_active)

    def has_work(self) -> bool:
        return bool(self.runq)

    def next_deadline(self) -> float | None:
        while self.timers:
            deadline, _, p, gen = self.timers[0]
            if gen == -1 or (p.status == WAITING and p.timer_gen == gen):
                return deadline
            heapq.heappop(self.timers)
        return None

    def fire_timers(self) -> None:
        now = time.monotonic()
        while self.timers and self.timers[0][0] <= now:
            _, _, p, gen = heapq.heappop(self.timers)
            if gen == -1:
                self.port_unbusy(p)
            elif p.status == WAITING and p.timer_gen == gen:
                self._make_runnable(p)

    def set_active(self, active: bool) -> None:
        """Track this scheduler's activity for ``profile_scheduler``."""
        if active == self.active:
            return
        self.active = active
        if self.state.profile_scheduler:
            self.profile_scheduler(am_active if active else am_inactive)

    def run_some(self, max_procs: int = 64) -> int:
        """Run up to ``max_procs`` time slices; returns how many ran."""
        self.fire_timers()
        n = 0
        while self.runq and n < max_procs:
            if not self.active:
                self.set_active(True)
            p = self.runq.popleft()
            p.in_runq = False
            if p.status == EXITED:
                continue
            self._run_slice(p)
            n += 1
        if not self.runq and self.active:
            self.set_active(False)
        return n

    # ---------------------------------------------------------------- one slice
    def _schedule_in(self, p: Proc, exiting=False) -> None:
        if self.smp and type(p.tracer) is Pid:
            self.erts_check_my_tracer_proc(p)
        if p.tracer is not NIL:
            # an exiting process is reported with 'exiting' only (in_exiting);
            # a running one with 'running' / 'running_procs' (in)
            if exiting:
                if are_trace_flags_on(p.flags, F_TRACE_SCHED_EXIT):
                    self.trace_sched(p, am_in_exiting)
            elif (are_trace_flags_on(p.flags, F_TRACE_SCHED)
                  or are_trace_flags_on(p.flags, F_TRACE_SCHED_PROCS)):
                self.trace_sched(p, am_in)
        p.slice_start = time.monotonic()
        p.busy_ms = 0
        p.in_mfa = p.current

    def _schedule_out(self, p: Proc, what=am_out) -> None:
        if p.tracer is not NIL:
            if what is am_out:
                if (are_trace_flags_on(p.flags, F_TRACE_SCHED)
                        or are_trace_flags_on(p.flags, F_TRACE_SCHED_PROCS)):
                    self.trace_sched(p, am_out)
            elif are_trace_flags_on(p.flags, F_TRACE_SCHED_EXIT):
                self.trace_sched(p, what)
        self._check_long_schedule(p)

    def _check_long_schedule(self, p: Proc) -> None:
        st = self.state
        if st.long_schedule and st.system_monitor is not NIL:
            elapsed = int((time.monotonic() - p.slice_start) * 1000) + p.busy_ms
            if elapsed > st.long_schedule:
                self.monitor_long_schedule_proc(p, p.in_mfa, p.current, elapsed)

    def _run_slice(self, p: Proc) -> None:
        if p.pending_exit is not None:
            self._schedule_in(p, exiting=True)
            self._terminate(p, p.pending_exit, scheduled=True)
            return
        self._schedule_in(p)
        reds = 0
        value, p.resume = p.resume, None
        coro = p.coro
        budget = self.reds_budget
        while True:
            try:
                op = coro.send(value)
            except StopIteration:
                self._terminate(p, am_normal, scheduled=True, self_exit=True)
                return
            except ErlangException as e:
                self._terminate(p, self._exit_reason(p, e), scheduled=True, self_exit=True,
                                crash_class=e.erlang_class)
                return
            except Exception as e:  # a bug in the workload: class error, as badarg would be
                reason = (_a("python_exception"), _a(type(e).__name__), str(e).encode())
                self._terminate(p, (reason, self._stacktrace(p)), scheduled=True,
                                self_exit=True, crash_class="error")
                return
            value = None
            kind = op.kind
            if kind == REDS:
                reds += op.arg
                if reds >= budget or p.pending_exit is not None:
                    self._schedule_out(p)
                    self._make_runnable(p)
                    return
            elif kind == WAIT:
                p.status = WAITING
                if op.arg is not None:
                    self._timer_seq += 1
                    heapq.heappush(self.timers, (op.arg, self._timer_seq, p, p.timer_gen))
                self._schedule_out(p)
                if self.state.profile_runnable_procs:
                    self.profile_runnable_proc(p, am_inactive)
                return
            elif kind == SUSPEND:
                p.status = SUSPENDED
                self.suspended_on_port.setdefault(op.arg, deque()).append(p)
                self._schedule_out(p)
                if self.state.profile_runnable_procs:
                    self.profile_runnable_proc(p, am_inactive)
                return
            elif kind == RPC:
                # waiting for the controller's answer to a BIF: a message
                # arriving meanwhile must not wake it (only the answer or a kill)
                p.status = SUSPENDED
                p.timer_gen += 1
                self._schedule_out(p)
                return

    def _exit_reason(self, p: Proc, e: ErlangException):
        if isinstance(e, Exit):
            return e.reason
        if isinstance(e, Throw):
            return ((am_nocatch, e.reason), self._stacktrace(p))
        return (e.reason, self._stacktrace(p))

    @staticmethod
    def _stacktrace(p: Proc) -> list:
        frames = [(m, f, a, []) for (m, f, a) in reversed(p.stack)]
        m, f, a = p.initial
        return frames + [(m, f, a, [])]

    # ---------------------------------------------------------------- exits
    def _terminate(self, p: Proc, reason, scheduled=False, self_exit=False, crash_class=None):
        if p.status == EXITED:
            return
        p.status = EXITING
        p.exit_reason = reason
        if scheduled and p.tracer is not NIL and self_exit:
            if (are_trace_flags_on(p.flags, F_TRACE_SCHED_EXIT)):
                self.trace_sched(p, am_out_exiting)
                self.trace_sched(p, am_in_exiting)
        if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_PROCS):
            self.trace_proc(p, p, am_exit, reason)
        if crash_class in ("error", "throw"):
            self.erts_queue_error_logger_message(
                p.pid, M.error_logger_report(p.pid, reason, p.group_leader))
        if p.reg_name is not None:
            name = p.reg_name
            p.reg_name = None
            if self.registry.get(name) == p.pid:
                del self.registry[name]
                if self.smp:
                    self.transport.table_event(("unregister", name, p.pid))
        for port in list(p.ports):
            self._close_port(port, reason)
        for other in list(p.links):
            self._send_exit_signal(p, other, reason, link=True)
        p.links.clear()
        if scheduled:
            if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_SCHED_EXIT):
                self.trace_sched(p, am_out_exited)
            self._check_long_schedule(p)
            if self.state.profile_runnable_procs:
                self.profile_runnable_proc(p, am_inactive)
        p.status = EXITED
        p.timer_gen += 1
        if p.coro is not None:
            try:
                p.coro.close()
            except BaseException:
                pass
        self.stats.processes_exited += 1
        if p.kept is None:
            del self.procs[p.pid]
        if self.smp:
            self.transport.table_event(("exit", p.pid))
        else:
            self.state.trace_check_exiting(p.pid, smp=False)

    def _send_exit_signal(self, p: Proc, to, reason, link: bool) -> None:
        """Exit signal from ``p`` (dying, or calling exit/2) to ``to``."""
        token = None
        if p.token is not None and type(to) is Pid:
            token = self._seq_send(p, to, reason, exitfrom=p.pid)
        if type(to) is Port:
            if to in self.ports and reason != am_normal:
                self._close_port(to, reason)
            return
        if self.is_local_pid(to):
            t = self.procs.get(to)
            if t is not None and t.status != EXITED:
                self.exit_signal_arrived(t, p.pid, reason, link, token)
        else:
            self.transport.peer(pid_owner(to, self.nsched),
                                ("exit", to, p.pid, reason, link, token))

    def exit_signal_arrived(self, t: Proc, from_, reason, link: bool, token=None) -> None:
        if link:
            t.links.discard(from_)
        if reason is am_kill and not link:
            self._kill(t, am_killed)
        elif t.trap_exit:
            self._queue_message(t, (am_EXIT, from_, reason), token, trace_recv=True)
        elif reason is am_normal:
            return
        else:
            self._kill(t, reason)

    def _kill(self, t: Proc, reason) -> None:
        if t.status in (EXITED, EXITING) or t.pending_exit is not None:
            return
        t.pending_exit = reason
        if t.status in (WAITING, SUSPENDED):
            self._make_runnable(t)

    def op_exit_signal(self, p: Proc, to, reason) -> None:
        if type(to) not in (Pid, Port):
            raise Error(am_badarg)
        if to == p.pid:
            if reason is am_kill:
                raise Exit(am_killed)
            if not p.trap_exit and reason is not am_normal:
                raise Exit(reason)
        self._send_exit_signal(p, to, reason, link=False)

    def kill_from_outside(self, pid: Pid, reason) -> bool:
        """``exit(Pid, Reason)`` called from the emulator API (no caller)."""
        t = self.procs.get(pid)
        if t is None or t.status == EXITED:
            return False
        if reason is am_kill:
            self._kill(t, am_killed)
        elif t.trap_exit:
            self._queue_message(t, (am_EXIT, GROUP_LEADER, reason), None, trace_recv=True)
        elif reason is not am_normal:
            self._kill(t, reason)
        return True

    # ---------------------------------------------------------------- links
    def op_link(self, p: Proc, to) -> None:
        if type(to) is Port:
            if to not in self.ports:
                raise Error(am_noproc)
            p.links.add(to)
            if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_PROCS):
                self.trace_proc(p, p, am_link, to)
            return
        if type(to) is not Pid:
            raise Error(am_badarg)
        if to == p.pid or to in p.links:
            return
        if not self.is_alive(to):
            if p.trap_exit:
                self._queue_message(p, (am_EXIT, to, am_noproc), None, trace_recv=True)
                return
            raise Exit(am_noproc)
        p.links.add(to)
        if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_PROCS):
            self.trace_proc(p, p, am_link, to)
        inherit = None
        if p.tracer is not NIL:
            if p.flags & F_TRACE_SOL:
                inherit = (p.flags & TRACEE_FLAGS, p.tracer)
            elif p.flags & F_TRACE_SOL1:
                inherit = (p.flags & TRACEE_FLAGS & ~F_TRACE_SOL1, p.tracer)
                p.flags &= ~F_TRACE_SOL1
        if self.is_local_pid(to):
            self.link_arrived(self.procs[to], p.pid, inherit, c_p=p)
        else:
            self.transport.peer(pid_owner(to, self.nsched), ("link", to, p.pid, inherit))

    def link_arrived(self, t: Proc, from_, inherit=None, c_p=None) -> None:
        if t.status == EXITED or t.pending_exit is not None:
            self._send_exit_signal(t, from_, am_noproc, link=True)
            return
        t.links.add(from_)
        if inherit is not None:
            t.flags = (t.flags & ~TRACEE_FLAGS) | inherit[0]
            t.tracer = inherit[1]
        if t.tracer is not NIL and are_trace_flags_on(t.flags, F_TRACE_PROCS):
            self.trace_proc(c_p, t, am_getting_linked, from_)

    def op_unlink(self, p: Proc, to) -> None:
        if type(to) not in (Pid, Port):
            raise Error(am_badarg)
        had = to in p.links
        p.links.discard(to)
        if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_PROCS) and had:
            self.trace_proc(p, p, am_unlink, to)
        if type(to) is Pid and had:
            if self.is_local_pid(to):
                t = self.procs.get(to)
                if t is not None:
                    self.unlink_arrived(t, p.pid, c_p=p)
            else:
                self.transport.peer(pid_owner(to, self.nsched), ("unlink", to, p.pid))

    def unlink_arrived(self, t: Proc, from_, c_p=None) -> None:
        if from_ in t.links:
            t.links.discard(from_)
            if t.tracer is not NIL and are_trace_flags_on(t.flags, F_TRACE_PROCS):
                self.trace_proc(c_p, t, am_getting_unlinked, from_)

    # ---------------------------------------------------------------- registry
    async def op_register(self, p: Proc, name, pid) -> None:
        if type(name) is not Atom or name is am_undefined:
            raise Error(am_badarg)
        if self.smp:
            ok = await self.transport.rpc(p, "register", name, pid)
            if ok is not True:
                raise Error(am_badarg)
            self.registry[name] = pid
        else:
            self.register(name, pid)
        t = self.procs.get(pid) if type(pid) is Pid else None
        if t is not None and t.tracer is not NIL and are_trace_flags_on(t.flags, F_TRACE_PROCS):
            self.trace_proc(p, t, am_register, name)

    def register(self, name: Atom, pid) -> None:
        """``register/2`` checks (nonsmp authority; smp applies after the dispatcher agreed)."""
        if type(name) is not Atom or name is am_undefined:
            raise Error(am_badarg)
        if self.whereis(name) is not None:
            raise Error(am_badarg)
        t = self.procs.get(pid) if type(pid) is Pid else None
        if type(pid) is Pid and (t is None or t.status == EXITED):
            raise Error(am_badarg)
        if t is not None and t.reg_name is not None:
            raise Error(am_badarg)
        self.registry[name] = pid
        if t is not None:
            t.reg_name = name

    async def op_unregister(self, p: Proc, name) -> None:
        owner = self.whereis(name)
        if owner is None:
            raise Error(am_badarg)
        if self.smp:
            await self.transport.rpc(p, "unregister", name, owner)
        self.registry.pop(name, None)
        t = self.procs.get(owner) if type(owner) is Pid else None
        if t is not None:
            t.reg_name = None
            if t.tracer is not NIL and are_trace_flags_on(t.flags, F_TRACE_PROCS):
                self.trace_proc(p, t, am_unregister, name)

    # ---------------------------------------------------------------- messages
    def op_send(self, p: Proc, to, msg) -> None:
        if type(to) is Atom:
            dest = self.whereis(to)
            if dest is None:
                raise Error(am_badarg)
        elif type(to) is tuple and len(to) == 2 and type(to[0]) is Atom:
            dest = self.whereis(to[0])
            if dest is None:
                return
        elif type(to) is Pid:
            dest = to
        elif type(to) is Port:
            dest = to
        else:
            raise Error(am_badarg)
        if type(dest) is Port:
            if type(msg) is tuple and len(msg) == 2 and type(msg[1]) is tuple and len(msg[1]) == 2:
                self.op_port_command(p, dest, msg[1][1])
                return
            raise Error(am_badarg)
        if p.tracer is not NIL:
            self.trace_send(p, dest, msg)
        self.save_calls(p, am_send)
        token = None
        if p.token is not None:
            token = self._seq_send(p, dest, msg)
        self.stats.messages_sent += 1
        if self.is_local_pid(dest):
            t = self.procs.get(dest)
            if t is not None and t.status != EXITED:
                self._queue_message(t, msg, token, trace_recv=True)
        else:
            self.transport.peer(pid_owner(dest, self.nsched), ("msg", dest, msg, token))

    def _queue_message(self, t: Proc, msg, token, trace_recv=False) -> None:
        """``erts_queue_message`` (+ ``trace_receive`` on a send)."""
        t.mailbox.append((msg, token))
        if trace_recv and t.tracer is not NIL and are_trace_flags_on(t.flags, F_TRACE_RECEIVE):
            self.trace_receive(t, msg)
        if t.status == WAITING:
            self._make_runnable(t)
        if t.kept is not None:
            t.kept.append(msg)

    def deliver_remote(self, to: Pid, msg, token) -> bool:
        t = self.procs.get(to)
        if t is None or t.status == EXITED:
            self.stats.messages_to_dead += 1
            return False
        self._queue_message(t, msg, token, trace_recv=True)
        return True

    def deliver_sys(self, to: Pid, msg) -> bool:
        """A system message the dispatcher delivered (already complete)."""
        t = self.procs.get(to)
        if t is None or t.status == EXITED:
            self.stats.sys_arrived_dead += 1
            return False
        self._queue_message(t, msg, None)
        return True

    def on_message_removed(self, p: Proc, entry) -> None:
        """A receive took ``entry`` out of the queue: seq_trace token handling."""
        token = entry[1]
        # beam_emu remove_message: saved whether or not there is a token
        self.save_calls(p, am_receive)
        if token is None:
            p.token = None
            return
        p.token = list(token)
        serial = token[2]
        p.seq_lastcnt = serial
        if p.seq_clock < serial:
            p.seq_clock = serial
        self.seq_trace_output(p.token, entry[0], M.SEQ_TRACE_RECEIVE, p.pid, p)

    def on_receive_timeout(self, p: Proc) -> None:
        if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_RECEIVE):
            self.trace_receive(p, am_timeout)
        self.save_calls(p, am_timeout)

    # ---------------------------------------------------------------- process_flag
    def op_process_flag(self, p: Proc, flag, value):
        name = flag.name if type(flag) is Atom else flag
        if name == "trap_exit":
            if value not in (True, False, am_true, am_false):
                raise Error(am_badarg)
            old = am_true if p.trap_exit else am_false
            p.trap_exit = value in (True, am_true)
            return old
        if name == "sensitive":
            if value not in (True, False, am_true, am_false):
                raise Error(am_badarg)
            old = am_true if p.flags & F_SENSITIVE else am_false
            if value in (True, am_true):
                p.flags |= F_SENSITIVE
            else:
                p.flags &= ~F_SENSITIVE
            return old
        if name == "save_calls":
            if type(value) is not int or not 0 <= value <= 10000:
                raise Error(am_badarg)
            old = p.saved_calls_n
            p.saved_calls_n = value
            p.saved_calls = deque(maxlen=value) if value else None
            return old
        raise Error(am_badarg)

    def save_calls(self, p: Proc, entry) -> None:
        """``save_calls``: the ring of the most recent calls (``process_info(P, last_calls)``):
        ``{M,F,A}`` for a call, the atoms ``send``, ``'receive'``, ``timeout``."""
        if p.saved_calls is not None:
            p.saved_calls.append(entry)

    # ================================================================ calls
    async def op_call(self, p: Proc, module, function, args: list, local: bool):
        module = _a(module) if isinstance(module, str) else module
        function = _a(function) if isinstance(function, str) else function
        mfa = (module, function, len(args))
        fn = self.functions.get(mfa)
        if fn is None:
            raise Error(am_undef)
        if not local:
            # the VM saves export calls only (process_flag(save_calls) docs)
            self.save_calls(p, mfa)
        pat = self.patterns.get(mfa)
        rf = mrf = 0
        if pat is not None:
            # erts_call_trace's 'local' is the breakpoint's kind (beam_bp.c:
            # ERTS_BPF_LOCAL_TRACE), not the call site's: a local pattern
            # traces remote calls too and gives return_to for them.
            if (pat["local"] or (pat["global"] and not local)) and p.tracer is not NIL:
                rf = self.erts_call_trace(p, mfa, pat["ms"], args, pat["local"], p)
            meta = pat.get("meta")
            if meta is not None and meta.tracer is not NIL:
                mrf = self.erts_call_trace(p, mfa, pat["meta_ms"], args, False, meta)
        caller = p.current
        p.stack.append(mfa)
        p.current = mfa
        try:
            result = await fn(p, *args)
        except ErlangException as e:
            p.stack.pop()
            p.current = caller
            cls = _a(e.erlang_class)
            if rf & MATCH_SET_EXCEPTION_TRACE:
                self.erts_trace_exception(p, mfa, cls, e.reason, p)
            if mrf & MATCH_SET_EXCEPTION_TRACE:
                self.erts_trace_exception(p, mfa, cls, e.reason, pat["meta"])
            raise
        p.stack.pop()
        p.current = caller
        if rf & MATCH_SET_RETURN_TRACE:
            self.erts_trace_return(p, mfa, result, p)
        if mrf & MATCH_SET_RETURN_TRACE:
            self.erts_trace_return(p, mfa, result, pat["meta"])
        if rf & MATCH_SET_RETURN_TO_TRACE:
            self.erts_trace_return_to(p, caller)
        from .process import _ONE_RED
        await _ONE_RED
        return result

    def _tracer_gone(self, tracer) -> bool:
        """For the BIFs (trace/3, trace_info/2): is this tracer known to be gone?

        Asks liveness, not the tracer mark: in smp the mark of a tracer on
        another scheduler reaches this replica asynchronously, and a BIF
        served between runs must not take a just-installed tracer for a dead
        one.  A port tracer is the dispatcher's; in smp a closed one is found
        by the dispatcher (port_closed) and by the tracee when scheduled in."""
        if type(tracer) is Pid:
            return not self.is_alive(tracer)
        if self.smp:
            return False
        return not self.is_valid_tracer_port(tracer)

    def _tracer_valid_now(self, tracer) -> bool:
        if type(tracer) is Pid:
            return self.is_tracer(tracer)
        return self.is_valid_tracer_port(tracer)

    def erts_call_trace(self, p: Proc, mfa, ms, args, local, holder) -> int:
        """``erts_call_trace``; returns the match-set return flags."""
        tracer = holder.tracer
        if tracer is NIL or tracer == p.pid:
            return 0
        meta = holder is not p
        if meta:
            if p.flags & F_SENSITIVE:
                return 0
        flags = holder.flags
        if not self._tracer_valid_now(tracer):
            # checked at once in both builds (erts_pid2proc on the tracer)
            holder.flags &= ~TRACEE_FLAGS
            holder.tracer = NIL
            self.stats.suppressed(M.SYS_MSG_TYPE_TRACE, "receiver_dead")
            return 0
        pam = True
        rf = 0
        if ms is not None:
            res = ms.run(args)
            if res is None:
                return 0
            pam, rf = res.pam_result, res.return_flags
            if res.silent is not None:
                if res.silent:
                    p.flags |= F_TRACE_SILENT
                else:
                    p.flags &= ~F_TRACE_SILENT
                if not meta:
                    flags = holder.flags
        if meta:
            if pam is False:
                return rf
        else:
            if not (flags & F_TRACE_CALLS):
                return 0
            if flags & F_TRACE_SILENT:
                return 0
            if pam is False:
                return rf
            if local and flags & F_TRACE_RETURN_TO:
                rf |= MATCH_SET_RETURN_TO_TRACE
        a = mfa[2] if flags & F_TRACE_ARITY_ONLY else list(args)
        msg = M.erts_call_trace(p.pid, mfa[0], mfa[1], a, pam)
        self._send_to_tracer(holder, NIL if meta else p.pid, msg, bool(flags & F_TIMESTAMP), p,
                             checked=True)
        return 0 if holder.tracer is NIL else rf

    def erts_trace_return(self, p: Proc, mfa, value, holder) -> None:
        tracer = holder.tracer
        if tracer is NIL or tracer == p.pid or not (holder.flags & F_TRACE_CALLS):
            return
        msg = M.erts_trace_return(p.pid, mfa, value)
        self._send_to_tracer(holder, p.pid if holder is p else NIL, msg,
                             bool(holder.flags & F_TIMESTAMP), p)

    def erts_trace_exception(self, p: Proc, mfa, cls, value, holder) -> None:
        tracer = holder.tracer
        if tracer is NIL or tracer == p.pid:
            return
        if holder is p and not (holder.flags & F_TRACE_CALLS):
            return
        msg = M.erts_trace_exception(p.pid, mfa, cls, value)
        self._send_to_tracer(holder, p.pid if holder is p else NIL, msg,
                             bool(holder.flags & F_TIMESTAMP), p)

    def erts_trace_return_to(self, p: Proc, mfa) -> None:
        if p.tracer is NIL:
            return
        msg = M.erts_trace_return_to(p.pid, mfa if mfa is not None else am_undefined)
        self._send_to_tracer(p, p.pid, msg, bool(p.flags & F_TIMESTAMP), p)

    # ================================================================ gc
    def op_allocate(self, p: Proc, words: int, keep: bool, binary: int) -> None:
        if type(words) is not int or words < 0:
            raise Error(am_badarg)
        if p.heap.allocate(words, keep, binary):
            self.op_gc(p)

    def op_gc(self, p: Proc) -> None:
        traced = p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_GC)
        if traced:
            self.trace_gc(p, am_gc_start)
        cost = p.heap.collect()
        p.busy_ms += cost
        if traced and p.tracer is not NIL:
            self.trace_gc(p, am_gc_end)
        st = self.state
        if st.system_monitor is not NIL:
            if st.long_gc and cost >= st.long_gc:
                self.monitor_long_gc(p, cost)
            if st.large_heap and p.heap.total_block_size() >= st.large_heap:
                self.monitor_large_heap(p)

    # ================================================================ ports
    def op_open_port(self, p: Proc, driver: str, options: dict) -> Port:
        port_id = self.new_port_id()
        port = make_driver(driver, port_id, p.pid, options)
        dflags, dtracer = self._default_tracing()
        if dtracer is not NIL and dflags & TRACEE_FLAGS:
            port.flags, port.tracer = dflags & TRACEE_FLAGS, dtracer
        self.ports[port_id] = port
        p.ports.add(port_id)
        p.links.add(port_id)
        if port.tracer is not NIL and are_trace_flags_on(port.flags, F_TRACE_PORTS):
            self.trace_port_open(port, p.pid, _a(driver))
        return port_id

    def op_port_command(self, p: Proc, port_id, data) -> bool:
        """Returns False when the port is busy: the caller is suspended."""
        port = self.ports.get(port_id)
        if port is None or port.closed:
            raise Error(am_badarg)
        st = self.state
        if port.busy:
            what = am_busy_dist_port if port.dist else am_busy_port
            enabled = st.busy_dist_port if port.dist else st.busy_port
            if enabled and st.system_monitor is not NIL:
                self.monitor_generic(p, what, port_id)
            return False
        sync = port.cost_ms > 0
        if sync and p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_SCHED):
            self.trace_virtual_sched(p, am_out)
        if st.profile_exclusive and st.profile_runnable_procs:
            self.profile_runnable_proc(p, am_inactive)
        if st.profile_runnable_ports:
            self.profile_runnable_port(port, am_active)
        if port.tracer is not NIL and are_trace_flags_on(port.flags, F_TRACE_SCHED_PORTS):
            self.trace_sched_ports_where(port, am_in, am_command)
        for out in port.command(data):
            self._port_output(port, out)
        if port.tracer is not NIL and are_trace_flags_on(port.flags, F_TRACE_SCHED_PORTS):
            self.trace_sched_ports_where(port, am_out, am_command)
        if st.profile_runnable_ports:
            self.profile_runnable_port(port, am_inactive)
        if st.profile_exclusive and st.profile_runnable_procs:
            self.profile_runnable_proc(p, am_active)
        if sync:
            p.busy_ms += port.cost_ms
            if st.long_schedule and st.system_monitor is not NIL and port.cost_ms > st.long_schedule:
                self.monitor_long_schedule_port(port, _a("proc_sig"), port.cost_ms)
            if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_SCHED):
                self.trace_virtual_sched(p, am_in)
        if port.busy and port.busy_ms:
            self._timer_seq += 1
            heapq.heappush(self.timers, (time.monotonic() + port.busy_ms / 1000,
                                         self._timer_seq, port, -1))
        return True

    def _port_output(self, port, data) -> None:
        owner = self.procs.get(port.owner)
        if owner is not None and owner.status != EXITED:
            self._queue_message(owner, (port.id, (_a("data"), data)), None, trace_recv=True)

    def port_unbusy(self, port) -> None:
        port.busy = False
        waiting = self.suspended_on_port.pop(port.id, deque())
        for p in waiting:
            if p.status == SUSPENDED:
                self._make_runnable(p)

    def op_port_close(self, p: Proc, port_id) -> None:
        port = self.ports.get(port_id)
        if port is None or port.closed or port.owner != p.pid:
            raise Error(am_badarg)
        p.links.discard(port_id)
        self._close_port(port_id, am_normal)

    def _close_port(self, port_id, reason) -> None:
        port = self.ports.pop(port_id, None)
        if port is None:
            return
        port.closed = True
        owner = self.procs.get(port.owner)
        if owner is not None:
            owner.ports.discard(port_id)
            owner.links.discard(port_id)
        if port.tracer is not NIL and are_trace_flags_on(port.flags, F_TRACE_PORTS):
            self.trace_port(port, am_closed, reason)
        for p in self.suspended_on_port.pop(port_id, deque()):
            if p.status == SUSPENDED:
                self._make_runnable(p)
        if not self.smp:
            self.state.trace_check_exiting(port_id, smp=False)

    # ================================================================ seq_trace
    def op_seq_trace(self, p: Proc, flag, value):
        name = flag.name if type(flag) is Atom else flag
        bits = {"send": M.SEQ_TRACE_SEND, "receive": M.SEQ_TRACE_RECEIVE,
                "print": M.SEQ_TRACE_PRINT, "timestamp": M.SEQ_TRACE_TIMESTAMP}
        if name == "token":
            return self.op_set_token(p, value)
        if name in bits:
            if value not in (True, False, am_true, am_false):
                raise Error(am_badarg)
            on = value in (True, am_true)
            self.new_seq_trace_token(p)
            old = am_true if p.token[0] & bits[name] else am_false
            if on:
                p.token[0] |= bits[name]
            else:
                p.token[0] &= ~bits[name]
            return old
        if name == "label":
            if type(value) is not int:
                raise Error(am_badarg)
            self.new_seq_trace_token(p)
            old = p.token[1]
            p.token[1] = value
            return old
        if name == "serial":
            if (type(value) is not tuple or len(value) != 2
                    or not all(type(v) is int and v >= 0 for v in value)):
                raise Error(am_badarg)
            self.new_seq_trace_token(p)
            old = (p.token[4], p.token[2])
            p.token[4], p.token[2] = value
            p.seq_lastcnt, p.seq_clock = value
            return old
        raise Error(am_badarg)

    @staticmethod
    def new_seq_trace_token(p: Proc) -> None:
        """erl_bif_trace.c ``new_seq_trace_token``: ``{0, 0, 0, Self, 0}`` when
        there is none; ``seq_trace/2`` reads the old value after it."""
        if p.token is None:
            p.token = [0, 0, 0, p.pid, 0]

    def op_set_token(self, p: Proc, token):
        old = [] if p.token is None else tuple(p.token)
        if token == []:
            p.token = None
        elif type(token) is tuple and len(token) == 5:
            p.token = list(token)
        else:
            raise Error(am_badarg)
        return old

    def op_seq_trace_print(self, p: Proc, *args):
        if len(args) == 1:
            label, msg = None, args[0]
        elif len(args) == 2:
            label, msg = args
        else:
            raise BadArg("seq_trace_print takes (msg) or (label, msg)")
        if p.token is None or (label is not None and p.token[1] != label):
            return am_false
        self.seq_trace_update_send(p)
        self.seq_trace_output(p.token, msg, M.SEQ_TRACE_PRINT, [], p)
        return am_true

    def seq_trace_update_send(self, p: Proc) -> bool:
        """``seq_trace_update_send``: advance serial and lastcnt on a send."""
        seq_tracer = self.state.system_seq_tracer
        if p.pid == seq_tracer or p.token is None:
            return False
        tok = p.token
        tok[3] = p.pid
        p.seq_clock += 1
        tok[2] = p.seq_clock
        tok[4] = p.seq_lastcnt
        return True

    def _seq_send(self, p: Proc, to, msg, exitfrom=None) -> tuple:
        self.seq_trace_update_send(p)
        self.seq_trace_output(p.token, msg, M.SEQ_TRACE_SEND, to, p, exitfrom)
        return tuple(p.token)

    def seq_trace_output(self, token, msg, seq_type, receiver, process: Proc | None,
                         exitfrom=None) -> None:
        """``seq_trace_output_generic``."""
        seq_tracer = self.state.system_seq_tracer
        if token is None or token[3] == seq_tracer or (
                process is not None and process.flags & F_SENSITIVE):
            return
        if not (token[0] & seq_type):
            return
        if seq_tracer is FALSE or seq_tracer is NIL:
            return
        ts_on = bool(token[0] & M.SEQ_TRACE_TIMESTAMP)
        ts_kind = M.TS_APPEND if ts_on else M.TS_NONE
        mess = M.seq_trace_output_generic(token[1], seq_type, token[4], token[2], token[3],
                                          receiver, msg, exitfrom)
        if type(seq_tracer) is Port:
            from_ = process.pid if process is not None else NIL
            if self.smp:
                self._enqueue(M.SYS_MSG_TYPE_SEQTRACE, from_, seq_tracer, mess, ts_kind)
                return
            tp = self.trace_ports.get(seq_tracer)
            if tp is None or tp.closed:
                self.state.seq_tracer_failed(seq_tracer)
                self.stats.suppressed(M.SYS_MSG_TYPE_SEQTRACE, "port_closed")
                return
            c_p = process if ts_on else None
            ts = self.clock.now() if ts_on else None
            mess = M.complete(mess, ts_kind, ts)
            self._port_write_with_fix(tp, mess, M.SYS_MSG_TYPE_SEQTRACE, c_p, ts)
            return
        if not self.smp:
            tracer = self.procs.get(seq_tracer)
            if tracer is None or tracer.status == EXITED:
                self.state.seq_tracer_failed(seq_tracer)
                self.stats.suppressed(M.SYS_MSG_TYPE_SEQTRACE, "receiver_dead")
                return
        if receiver == seq_tracer:
            return
        if self.smp:
            self._enqueue(M.SYS_MSG_TYPE_SEQTRACE, NIL, NIL, mess, ts_kind)
        else:
            self._deliver_now(tracer, M.SYS_MSG_TYPE_SEQTRACE,
                              M.complete(mess, ts_kind, self.clock.now() if ts_on else None))

    # ================================================================ delivery core
    def _enqueue(self, type_: int, from_, to, msg, ts_kind: int) -> None:
        """smp: ``enqueue_sys_msg`` - hand the message to the dispatcher's queue."""
        self.stats.made(type_)
        self.transport.sys(M.SysMsg(type_, from_, to, msg, ts_kind))

    def _deliver_now(self, t: Proc, type_: int, msg) -> None:
        """nonsmp: ``erts_queue_message`` into the receiver at once."""
        self.stats.made(type_)
        self.stats.delivered(type_)
        self._queue_message(t, msg, None)

    def _write_port(self, tp, msg, type_: int) -> bool:
        """``write_sys_msg_to_port``: external term format into the port."""
        from smp.etf import encode
        self.stats.made(type_)
        heavy = tp.write(encode(msg))
        self.stats.delivered(type_)
        return heavy

    def _port_write_with_fix(self, tp, msg, type_: int, c_p: Proc | None, ts) -> None:
        """``send_to_port`` / ``seq_trace_send_to_port`` in nonsmp: write, and
        when the driver reports a heavy write while ``c_p`` is traced with
        ``running`` and ``timestamp``, send the fake ``out``/``in`` pair."""
        if c_p is None or not are_trace_flags_on(c_p.flags, F_TRACE_SCHED | F_TIMESTAMP):
            self._write_port(tp, msg, type_)
            return
        if ts is None:
            ts = self.clock.now()
        if self._write_port(tp, msg, type_):
            out_msg, _ = M.do_send_schedfix(c_p.pid, ts, ts)
            self._write_port(tp, out_msg, M.SYS_MSG_TYPE_TRACE)
            in_msg = (out_msg[0], c_p.pid, am_in, 0, self.clock.now())
            self._write_port(tp, in_msg, M.SYS_MSG_TYPE_TRACE)
            self.stats.fake_schedule_pairs += 1

    def _send_to_tracer(self, holder, from_, msg, ts_on: bool, c_p: Proc | None,
                        checked: bool = False) -> None:
        """``send_to_tracer`` / ``send_to_port`` for TRACE messages.

        ``holder`` carries ``tracer`` and ``flags`` (a process, a port, or a
        meta-trace breakpoint); ``c_p`` is the running process that may get a
        fake schedule pair (None for "no fake schedule")."""
        tracer = holder.tracer
        if self.smp:
            self._enqueue(M.SYS_MSG_TYPE_TRACE, from_, tracer, msg,
                          M.TS_PATCH if ts_on else M.TS_NONE)
            return
        if type(tracer) is Pid:
            t = self.procs.get(tracer)
            if t is None or t.status == EXITED or not (t.flags & F_TRACER):
                # ERTS_GET_TRACER_REF: reset the tracee, make nothing
                holder.tracer = NIL
                holder.flags &= ~TRACEE_FLAGS
                self.stats.suppressed(M.SYS_MSG_TYPE_TRACE,
                                      "receiver_dead" if t is None or t.status == EXITED
                                      else "not_tracer")
                return
            if ts_on:
                msg = M.patch_ts(msg, self.clock.now())
            self._deliver_now(t, M.SYS_MSG_TYPE_TRACE, msg)
            return
        tp = self.trace_ports.get(tracer)
        if tp is None or tp.closed:
            holder.tracer = NIL
            holder.flags &= ~TRACEE_FLAGS
            self.stats.suppressed(M.SYS_MSG_TYPE_TRACE, "port_closed")
            return
        ts = None
        if ts_on:
            ts = self.clock.now()
            msg = M.patch_ts(msg, ts)
        self._port_write_with_fix(tp, msg, M.SYS_MSG_TYPE_TRACE, c_p, ts)

    def erts_check_my_tracer_proc(self, p: Proc) -> None:
        """smp: a tracee whose tracer is gone loses its flags when scheduled in."""
        if type(p.tracer) is Pid and not self.is_tracer(p.tracer):
            p.flags &= ~TRACEE_FLAGS
            p.tracer = NIL
            self.stats.tracer_checks_reset += 1

    # ================================================================ TRACE builders
    def trace_sched(self, p: Proc, what, never_fake=False) -> None:
        """``trace_sched_aux``."""
        if p.tracer is NIL:
            return
        no_fake = never_fake or what in (am_out, am_out_exiting, am_out_exited)
        sched_no = are_trace_flags_on(p.flags, F_TRACE_SCHED_NO)
        mfa = 0 if p.status == EXITING or p.current is None else p.current
        msg = M.trace_sched(p.pid, what, mfa, (self.sched_id if self.smp else 1) if sched_no else None)
        self._send_to_tracer(p, p.pid, msg, bool(p.flags & F_TIMESTAMP), None if no_fake else p)

    def trace_virtual_sched(self, p: Proc, what) -> None:
        self.trace_sched(p, what, never_fake=True)

    def trace_send(self, p: Proc, to, msg) -> None:
        if not are_trace_flags_on(p.flags, F_TRACE_SEND):
            return
        op = am_send
        if type(to) is Pid and not self.is_alive(to):
            op = am_send_to_non_existing
        self._send_to_tracer(p, p.pid, M.trace_send(p.pid, op, msg, to),
                             bool(p.flags & F_TIMESTAMP), p)

    def trace_receive(self, rp: Proc, msg) -> None:
        self._send_to_tracer(rp, rp.pid, M.trace_receive(rp.pid, msg),
                             bool(rp.flags & F_TIMESTAMP), rp)

    def trace_proc(self, c_p: Proc | None, t_p, what, data) -> None:
        # nonsmp: no fake schedule out and in again after an exit
        fake = None if (not self.smp and what is am_exit) else c_p
        self._send_to_tracer(t_p, t_p.pid, M.trace_proc(t_p.pid, what, data),
                             bool(t_p.flags & F_TIMESTAMP), fake)

    def trace_proc_spawn(self, p: Proc, child, mod, func, args) -> None:
        self._send_to_tracer(p, p.pid, M.trace_proc_spawn(p.pid, child, mod, func, args),
                             bool(p.flags & F_TIMESTAMP), p)

    def trace_gc(self, p: Proc, what) -> None:
        self._send_to_tracer(p, p.pid, M.trace_gc(p.pid, what, p.heap.gc_values()),
                             bool(p.flags & F_TIMESTAMP), p)

    def trace_port_open(self, port, calling_pid, drv_name) -> None:
        self._send_to_tracer(port, port.id, M.trace_port_open(calling_pid, port.id, drv_name),
                             bool(port.flags & F_TIMESTAMP), None)

    def trace_port(self, port, what, data) -> None:
        self._send_to_tracer(port, port.id, M.trace_port(port.id, what, data),
                             bool(port.flags & F_TIMESTAMP), None)

    def trace_sched_ports_where(self, port, what, where) -> None:
        sched = (self.sched_id if self.smp else 1) if are_trace_flags_on(
            port.flags, F_TRACE_SCHED_NO) else None
        self._send_to_tracer(port, port.id, M.trace_sched_ports_where(port.id, what, where, sched),
                             bool(port.flags & F_TIMESTAMP), None)

    # ================================================================ SYSMON
    def _monitor_send(self, from_, msg, self_check: bool = True) -> None:
        if self.smp:
            self._enqueue(M.SYS_MSG_TYPE_SYSMON, from_, NIL, msg, M.TS_NONE)
            return
        monitor = self.state.system_monitor
        monitor_p = self.procs.get(monitor) if type(monitor) is Pid else None
        if monitor_p is None or monitor_p.status == EXITED:
            self.stats.suppressed(M.SYS_MSG_TYPE_SYSMON, "receiver_dead")
            return
        if self_check and monitor_p.pid == from_:
            self.stats.suppressed(M.SYS_MSG_TYPE_SYSMON, "sender_is_receiver")
            return
        self._deliver_now(monitor_p, M.SYS_MSG_TYPE_SYSMON, msg)

    def monitor_long_gc(self, p: Proc, time_ms: int) -> None:
        self._monitor_send(p.pid, M.monitor_long_gc(p.pid, time_ms, p.heap.monitor_sizes()))

    def monitor_large_heap(self, p: Proc) -> None:
        self._monitor_send(p.pid, M.monitor_large_heap(p.pid, p.heap.monitor_sizes()))

    def monitor_long_schedule_proc(self, p: Proc, in_mfa, out_mfa, time_ms) -> None:
        self._monitor_send(p.pid, M.monitor_long_schedule_proc(p.pid, in_mfa, out_mfa, time_ms))

    def monitor_long_schedule_port(self, port, op, time_ms) -> None:
        self._monitor_send(port.id, M.monitor_long_schedule_port(port.id, op, time_ms),
                           self_check=False)

    def monitor_generic(self, p: Proc, what, spec) -> None:
        self._monitor_send(p.pid, M.monitor_generic(p.pid, what, spec))

    # ================================================================ SYSPROF
    def profile_send(self, from_, msg) -> None:
        """nonsmp ``profile_send``: to the profiler now; never about itself."""
        profiler = self.state.system_profile
        if from_ == profiler and from_ is not NIL:
            self.stats.suppressed(M.SYS_MSG_TYPE_SYSPROF, "sender_is_receiver")
            return
        if type(profiler) is Port:
            tp = self.trace_ports.get(profiler)
            if tp is None or tp.closed:
                self.stats.suppressed(M.SYS_MSG_TYPE_SYSPROF, "port_closed")
                return
            self._write_port(tp, msg, M.SYS_MSG_TYPE_SYSPROF)
            return
        profile_p = self.procs.get(profiler) if type(profiler) is Pid else None
        if profile_p is None or profile_p.status == EXITED:
            self.stats.suppressed(M.SYS_MSG_TYPE_SYSPROF, "receiver_dead")
            return
        self._deliver_now(profile_p, M.SYS_MSG_TYPE_SYSPROF, msg)

    def _profile(self, from_, msg, ts_kind: int) -> None:
        if self.smp:
            # TS_SCHED: the queue needs the state to count active schedulers
            # without opening the body, so it travels in the unused 'to' field.
            to = msg[3] if ts_kind == M.TS_SCHED else NIL
            self._enqueue(M.SYS_MSG_TYPE_SYSPROF, from_, to, msg, ts_kind)
        else:
            self.profile_send(from_, M.complete(msg, ts_kind, self.clock.now(),
                                                self.state.active_sched))

    def profile_scheduler(self, state_atom) -> None:
        if not self.smp:
            self.state.active_sched += 1 if state_atom is am_active else -1
        self._profile(NIL, M.profile_scheduler(self.sched_id, state_atom), M.TS_SCHED)

    def profile_scheduler_q(self, state_atom, no_schedulers: int, ts) -> None:
        msg = M.profile_scheduler_q(self.sched_id, state_atom, no_schedulers, ts)
        if self.smp:
            self._enqueue(M.SYS_MSG_TYPE_SYSPROF, NIL, NIL, msg, M.TS_NONE)
        else:
            self.profile_send(NIL, msg)

    def profile_runnable_proc(self, p: Proc, status) -> None:
        where = p.current if p.current is not None else 0
        self._profile(p.pid, M.profile_runnable_proc(p.pid, status, where), M.TS_APPEND)

    def profile_runnable_port(self, port, status) -> None:
        self._profile(port.id, M.profile_runnable_port(port.id, status), M.TS_APPEND)

    # ================================================================ ERRLGR / PROC_MSG
    def erts_queue_error_logger_message(self, from_, msg) -> None:
        if self.smp:
            self._enqueue(M.SYS_MSG_TYPE_ERRLGR, from_, am_error_logger, msg, M.TS_NONE)
            return
        self.stats.made(M.SYS_MSG_TYPE_ERRLGR)
        logger = self.whereis(am_error_logger)
        t = self.procs.get(logger) if type(logger) is Pid else None
        if t is None or t.status == EXITED:
            self.stderr.write(format_error_logger_failure(msg))
            self.stderr.flush()
            self.stats.dropped(M.SYS_MSG_TYPE_ERRLGR, "no_error_logger")
            return
        if t.pid == from_:
            self.stats.dropped(M.SYS_MSG_TYPE_ERRLGR, "error_logger_self")
            return
        self.stats.delivered(M.SYS_MSG_TYPE_ERRLGR)
        self._queue_message(t, msg, None)

    def erts_send_sys_msg_proc(self, from_, to, msg) -> None:
        if self.smp:
            self._enqueue(M.SYS_MSG_TYPE_PROC_MSG, from_, to, msg, M.TS_NONE)
            return
        t = self.procs.get(to)
        if t is None or t.status == EXITED:
            self.stats.made(M.SYS_MSG_TYPE_PROC_MSG)
            self.stats.dropped(M.SYS_MSG_TYPE_PROC_MSG, "receiver_dead")
            return
        self._deliver_now(t, M.SYS_MSG_TYPE_PROC_MSG, msg)

    # ================================================================ local BIF parts
    def set_trace_local(self, spec, how: bool, bits: int, tracer, caller=None) -> int:
        """Apply ``erlang:trace/3`` to this node's processes and ports.

        ``spec`` is a pid, a port, ``all`` or ``existing``.  Returns the match
        count as erl_bif_trace.c counts it (the tracer itself is skipped)."""
        targets: list = []
        if type(spec) is Pid:
            t = self.procs.get(spec)
            if t is None or t.status == EXITED:
                raise BadArg(f"no such process {spec!r}")
            targets = [t]
        elif type(spec) is Port:
            port = self.ports.get(spec)
            if port is None or port.closed:
                raise BadArg(f"no such port {spec!r}")
            targets = [port]
        else:
            targets = [t for t in self.procs.values() if t.status != EXITED]
            targets += [pt for pt in self.ports.values() if not pt.closed]
        count = 0
        for t in targets:
            tid = t.pid if isinstance(t, Proc) else t.id
            if type(spec) is not Pid and type(spec) is not Port:
                if how and tid == tracer:
                    continue
                if how and t.tracer is not NIL and t.tracer != tracer and not self._tracer_gone(t.tracer):
                    continue
            elif how and t.tracer is not NIL and t.tracer != tracer and not self._tracer_gone(t.tracer):
                raise BadArg(f"{tid!r} already has another tracer")
            if how:
                t.flags |= bits
                t.tracer = tracer
            else:
                t.flags &= ~bits
                if not (t.flags & TRACEE_FLAGS):
                    t.tracer = NIL
            count += 1
        return count

    def mark_tracer(self, pid: Pid) -> bool:
        t = self.procs.get(pid)
        if t is None or t.status == EXITED:
            return False
        if not t.flags & F_TRACER:
            t.flags |= F_TRACER
            if self.smp:
                self.transport.table_event(("tracer", pid))
        return True

    def trace_info_local(self, pid, item: str):
        from smp.flags import flags_to_list
        t = self.procs.get(pid) if type(pid) is Pid else self.ports.get(pid)
        if t is None or getattr(t, "status", None) == EXITED or getattr(t, "closed", False):
            return am_undefined
        if t.tracer is not NIL and self._tracer_gone(t.tracer):
            t.flags &= ~TRACEE_FLAGS
            t.tracer = NIL
        if item == "flags":
            return (_a("flags"), flags_to_list(t.flags & TRACEE_FLAGS))
        return (_a("tracer"), [] if t.tracer is NIL else t.tracer)

    def set_pattern_local(self, mfa_spec, ms, kind: str, meta_tracer=None, enable=True) -> int:
        """``trace_pattern`` on this node's function table; returns matches."""
        m, f, a = mfa_spec
        count = 0
        for key in self.functions:
            if ((m is _a("_") or key[0] == m) and (f is _a("_") or key[1] == f)
                    and (a is _a("_") or key[2] == a)):
                pat = self.patterns.setdefault(key, {"global": False, "local": False,
                                                     "ms": None, "meta": None, "meta_ms": None})
                if kind == "meta":
                    pat["meta"] = _Meta(meta_tracer) if enable else None
                    pat["meta_ms"] = ms if enable else None
                elif enable:
                    pat["global"] = kind == "global"
                    pat["local"] = kind == "local"
                    pat["ms"] = ms
                else:
                    pat["global"] = pat["local"] = False
                    pat["ms"] = None
                count += 1
        return count

    def apply_snapshot(self, snap) -> None:
        """smp: take a new version of the dispatcher's state into the replica."""
        st = self.state
        if snap.version <= st.version:
            return
        for f in snap.__slots__:
            setattr(st, f, getattr(snap, f))
        self.clock.cpu = snap.default_cpu_timestamp

    # ================================================================ BIFs from processes
    async def op_bif(self, p: Proc, name: str, args):
        """A trace BIF called by process ``p`` (the caller is its default tracer)."""
        from smp.bifs import call_bif
        try:
            if self.smp:
                return await self.transport.rpc(p, "bif", name, args)
            from .backend import LocalBackend
            return call_bif(LocalBackend(self), p.pid, name, args)
        except BadArg as e:
            raise Error(am_badarg) from e
