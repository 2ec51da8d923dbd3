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
from typing import Protocol

from smp.wire import codec

from .calls import CallTracing
from .common import (
    EXITED,
    EXITING,
    F_TRACE_PROCS,
    F_TRACE_SCHED,
    F_TRACE_SCHED_EXIT,
    F_TRACE_SCHED_PROCS,
    F_TRACE_SOL,
    F_TRACE_SOL1,
    F_TRACE_SOS,
    F_TRACE_SOS1,
    F_TRACER,
    GROUP_LEADER,
    NIL,
    PID_BASE,
    REDS,
    RPC,
    RUNNABLE,
    SUSPEND,
    SUSPENDED,
    TRACEE_FLAGS,
    WAIT,
    WAITING,
    Atom,
    BadArg,
    Clock,
    ErlangException,
    Exit,
    Pid,
    Port,
    Proc,
    Ref,
    Stats,
    Throw,
    TracerState,
    _a,
    am_active,
    am_in,
    am_in_exiting,
    am_inactive,
    am_link,
    am_nocatch,
    am_normal,
    am_out,
    are_trace_flags_on,
    inherit_tracing,
    inherited_tracing,
    pid_index,
    pid_owner,
    port_of,
    port_owner,
)
from .localbifs import LocalBifs
from .process import Tokened
from .procs import ProcessOps
from .resources import ResourceOps
from .seqtrace import SeqTrace
from .tracepoints import TracePoints

__all__ = [
    "Node",
    "Transport",
    "pid_owner",
    "port_owner",
    "pid_index",
    "PID_BASE",
    "are_trace_flags_on",
]


#: spawns a scheduler remembers the parent of (``Node.lineage``)
LINEAGE_MAX = 1_000_000


class Transport(Protocol):
    """What leaves an smp scheduler, as its ``Node`` hands it on
    (``schedulers.worker.SmpTransport``).  The transport only collects: the
    scheduler's loop sends what it holds, so nothing here calls back into
    the loop.  A nonsmp ``Node`` has none."""

    sys_made: int  # system messages made (enqueue_sys_msg), for the controller's checks
    sys_items: int  # runs' messages and table events, in the order the dispatcher takes them

    def sys(self, type_: int, from_, to, msg, ts_kind: int) -> None:
        """``enqueue_sys_msg``: one message (the fields of a ``SysMsg``) for
        the dispatcher's queue; the transport counts it in the node's
        ``Stats`` as made."""

    def table_event(self, ev: tuple) -> None:
        """A process-table change, in order with the messages
        (``smp.wire.frames.EVENT_ARITY``)."""

    def peer(self, owner: int, signal_) -> None:
        """A signal (message, link, exit, ...) for a process of scheduler ``owner``."""

    async def rpc(self, p, *request):
        """A BIF that process ``p`` asks of the controller; its answer."""


def _travels(fun, args) -> bool:
    """Can a spawn of ``fun(*args)`` be sent to another scheduler as data?"""
    try:
        codec.dumps((fun, args))
    except codec.Unencodable:
        return False
    return codec.fun_ref(fun) is not None


def timer_target(entry: tuple):
    """The pid or port of a timer of ``Node.timers``."""
    return entry[2].pid if entry[3] != -1 else entry[2].id


def timer_kind(entry: tuple) -> str:
    """``receive`` (a process's timeout) or ``busy`` (a port's busy spell)."""
    return "receive" if entry[3] != -1 else "busy"


def _timer_live(entry: tuple) -> bool:
    """Whether a timer of ``Node.timers`` would still do something: a
    process's ``receive`` timeout while it waits with the ``timer_gen`` it
    armed it with, or the busy spell of a port not closed since."""
    _, _, target, gen = entry
    if gen == -1:
        return not target.closed
    return target.status == WAITING and target.timer_gen == gen


class _DriverPort:
    """A port opened by a process, used as a tracer: ``erts_raw_port_command``
    hands the bytes to its driver (the echo driver sends them back to the
    port's owner as ``{Port, {data, Bin}}``)."""

    __slots__ = ("node", "port")

    def __init__(self, node, port):
        self.node, self.port = node, port

    @property
    def closed(self) -> bool:
        pt = self.port
        return not pt.valid_tracer

    def write(self, data: bytes) -> bool:
        for out in self.port.command(data):
            self.node._port_output(self.port, out)
        return False  # a driver port never asks for the fake schedule pair


class Node(ProcessOps, CallTracing, ResourceOps, SeqTrace, TracePoints, LocalBifs):
    """One scheduler.  Runs in its scheduler OS process (or, for unit tests,
    in the caller's process)."""

    def __init__(
        self,
        sched_id: int = 1,
        nsched: int = 1,
        smp: bool = False,
        reductions: int = 200,
        placement: str = "round_robin",
        transport: Transport | None = None,
        stderr=None,
        stats: Stats | None = None,
    ):
        self.sched_id = sched_id
        self.nsched = nsched
        self.smp = smp
        self.reds_budget = reductions
        self.placement = placement
        self.transport = transport
        self.stderr = stderr or sys.stderr
        self.procs: dict[Pid, Proc] = {}
        self.ports: dict[Port, object] = {}
        self.trace_ports: dict[Port, object] = {}  # nonsmp only: tracer ports
        self.registry: dict[Atom, object] = {}
        self.state = self._new_state()
        self.dead_remote: set[Pid] = set()  # smp replica
        self.remote_tracers: set[Pid] = set()  # smp replica
        self.remote_tracer_ports: set[Port] = set()  # smp replica
        self.functions: dict[tuple, object] = {}
        self.patterns: dict[tuple, dict] = {}
        self.runq: deque[Proc] = deque()
        #: collectors nobody watches receive (the simulator's, and a stepped
        #: emulator's replaying it): a message only joins the kept list and
        #: they never enter the run queue (``_make_runnable``)
        self.passive: set[Pid] = set()
        #: (deadline, arming number, process or port, the process's timer_gen
        #: or -1 for a port's busy spell), a heap
        self.timers: list = []
        #: the clock of ``receive`` timeouts and busy spells: one that stands
        #: still in the simulator and in a stepped scheduler, whose timers
        #: fire when the controller says (``fire_timer``)
        self.monotonic = time.monotonic
        self.clock = Clock()
        self.stats = stats if stats is not None else Stats()  # smp: shared with the transport
        self.active = False
        self._pid_counter = 0
        self._port_counter = 0
        self._ref_counter = 0
        self._rr = sched_id - 1
        self._timer_seq = 0
        self.suspended_on_port: dict[Port, deque] = {}
        # the exit signals a dying process's link sweep scheduled to ports
        # (Resources.schedule_port_exit), run once its slice is over
        self.port_tasks: deque = deque()
        self.remote_waiting: dict[Port, list] = {}  # smp: callers on other schedulers
        #: (parent, child) of every spawn made here, in order (at most
        #: ``LINEAGE_MAX``): how ``compare`` names processes nobody named
        self.lineage: list[tuple[Pid, Pid]] = []
        #: nonsmp, when the controller asks (``record_fates``): every message
        #: made or not made, ``("m", type, to, term, fate)``, and every tracer's
        #: death, ``("x", pid)``, in order (``compare``'s journal of nonsmp)
        self.fates: list | None = None
        self.fates_cut = 0  # entries past ``FATES_MAX`` not kept

    def _new_state(self) -> TracerState:
        """The replica of the tracer state (``smp.sim.nodes.SimNode``'s takes
        no lock: a simulated world runs in one thread)."""
        return TracerState(liveness=self)

    # ---------------------------------------------------------------- ids
    def new_pid(self, owner: int | None = None) -> Pid:
        owner = self.sched_id if owner is None else owner
        n = self.nsched
        index = PID_BASE + (self._pid_counter * n + (self.sched_id - 1)) * n + (owner - 1)
        self._pid_counter += 1
        return Pid(index & 0x7FFF, index >> 15)

    def new_port_id(self) -> Port:
        self._port_counter += 1
        return port_of(self.sched_id, self._port_counter, self.nsched)

    def add_trace_port(self, tp) -> Port:
        """nonsmp: a tracer port of this scheduler, numbered as the
        dispatcher's are, with owner 0, and kept in ``trace_ports``."""
        self._port_counter += 1  # (one count with the ports processes open)
        port_id = port_of(0, self._port_counter, self.nsched)
        self.trace_ports[port_id] = tp
        return port_id

    def make_ref(self) -> Ref:
        self._ref_counter += 1
        return Ref((self._ref_counter, self.sched_id, 0))

    def is_local_pid(self, pid: Pid) -> bool:
        return self.nsched == 1 or pid_owner(pid, self.nsched) == self.sched_id

    # ---------------------------------------------------------------- liveness (ProcTable)
    def is_alive(self, pid) -> bool:
        if type(pid) is not Pid:
            return False
        if self.nsched == 1 or pid_owner(pid, self.nsched) == self.sched_id:
            p = self.procs.get(pid)
            return p is not None and p.status != EXITED
        return pid not in self.dead_remote

    def is_tracer(self, pid: Pid) -> bool:
        if self.nsched == 1 or pid_owner(pid, self.nsched) == self.sched_id:
            p = self.procs.get(pid)
            return p is not None and p.status != EXITED and bool(p.flags & F_TRACER)
        return pid in self.remote_tracers and pid not in self.dead_remote

    def takes_delivery(self, to) -> bool:
        """Whether a message the dispatcher delivered reaches a live receiver
        here: a process that has not exited, or a port a process opened that
        is still a valid tracer (``write_driver_port`` writes it)."""
        if type(to) is Port:
            pt = self.ports.get(to)
            return pt is not None and pt.valid_tracer
        p = self.procs.get(to)
        return p is not None and p.status != EXITED

    def is_valid_tracer_port(self, port) -> bool:
        """``erts_is_valid_tracer_port`` (io.c): a live port that is neither
        busy nor a distribution port (``ERTS_PORT_SFLGS_INVALID_TRACER_LOOKUP``)."""
        if not self.smp:
            return self.tracer_port(port) is not None
        if type(port) is Port and port_owner(port, self.nsched) == self.sched_id:
            pt = self.ports.get(port)
            return pt is not None and pt.valid_tracer
        return port in self.remote_tracer_ports

    def tracer_port(self, port):
        """nonsmp: the port ``write_sys_msg_to_port`` writes to, or None when
        it is not a valid tracer port: a trace port, or a port a process
        opened, whose driver then gets the external-format bytes."""
        tp = self.trace_ports.get(port)
        if tp is not None:
            return None if tp.closed else tp
        pt = self.ports.get(port)
        if pt is None or not pt.valid_tracer:
            return None
        return _DriverPort(self, pt)

    def whereis(self, name: Atom):
        r = self.registry.get(name)
        if r is not None and type(r) is Pid and not self.is_alive(r):
            return None
        return r

    # ---------------------------------------------------------------- spawning
    def spawn_local(
        self,
        pid: Pid,
        fun,
        args,
        parent: Proc | None = None,
        link_to=None,
        inherit=None,
        kept=False,
    ) -> Proc:
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
        # ... added to by set_on_spawn (and, spawned linked, set_on_link) from
        # the parent, in erl_create_process's order
        for one in inherit or ():
            inherit_tracing(p, one)
        self.procs[pid] = p
        if link_to is not None:
            p.link_add(link_to)
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
        if owner != self.sched_id and not _travels(fun, args):
            # a closure (or an argument that is not data) cannot reach another
            # scheduler: it runs here unless a scheduler was named
            if scheduler is not None:
                raise BadArg(
                    f"cannot spawn {fun!r} on scheduler {owner}: only a module-level "
                    "async def function with data arguments travels between schedulers"
                )
            owner = self.sched_id
        pid = self.new_pid(owner)
        if len(self.lineage) < LINEAGE_MAX:
            self.lineage.append((parent.pid, pid))
        # (set_on_spawn, then for spawn_link set_on_link: erl_create_process)
        inherit = tuple(
            x
            for x in (
                inherited_tracing(parent, F_TRACE_SOS, F_TRACE_SOS1),
                inherited_tracing(parent, F_TRACE_SOL, F_TRACE_SOL1) if link else None,
            )
            if x is not None
        )
        if owner == self.sched_id:
            self.spawn_local(pid, fun, args, parent, parent.pid if link else None, inherit)
        else:
            self.transport.peer(
                owner, ("spawn", pid, fun, args, parent.pid if link else None, inherit)
            )
        if link:
            parent.link_add(pid)
        if parent.tracer is not NIL and are_trace_flags_on(parent.flags, F_TRACE_PROCS):
            mod, fname, _ = (
                _a(getattr(fun, "__module__", "erlang") or "erlang"),
                _a(getattr(fun, "__name__", "fun")),
                0,
            )
            self.trace_proc_spawn(parent, pid, mod, fname, list(args))
            if link:
                self.trace_proc(parent, parent, am_link, pid)
        return pid

    # ---------------------------------------------------------------- run queue
    def _make_runnable(self, p: Proc) -> None:
        if self.passive and p.pid in self.passive and self._stays_passive(p):
            p.mailbox.clear()
            return
        was_waiting = p.status in (WAITING, SUSPENDED) or not p.in_runq
        if p.status in (WAITING, SUSPENDED):
            p.status = RUNNABLE
            p.timer_gen += 1
        if not p.in_runq and p.status != EXITED:
            p.in_runq = True
            self.runq.append(p)
            if was_waiting and self.state.profile_runnable_procs:
                self.profile_runnable_proc(p, am_active)

    def _stays_passive(self, p: Proc) -> bool:
        """A passive collector waiting in its receive, which no tracer, no
        profiler and no seq-trace token would see run."""
        return (
            p.status == WAITING
            and p.tracer is NIL
            and p.pending_exit is None
            and not self.state.profile_runnable_procs
            and not any(type(e) is Tokened for e in p.mailbox)
        )

    def start_passive(self, pid) -> bool:
        """Run a passive collector's first slice now, to its receive (the end
        of a simulated setup: a slice nothing can see, so it takes no turn of
        its own); False when a tracer, the profiler or its place says it is
        not passive."""
        p = self.procs.get(pid)
        if (
            p is None
            or p.tracer is not NIL
            or not p.in_runq
            or self.state.profile_scheduler
            or self.state.profile_runnable_procs
        ):
            return False
        self.runq.remove(p)
        p.in_runq = False
        self._run_slice(p)
        self.run_port_tasks()
        return True

    def next_deadline(self) -> float | None:
        while self.timers:
            if _timer_live(self.timers[0]):
                return self.timers[0][0]
            heapq.heappop(self.timers)
        return None

    def arm_timer(self, deadline: float, target, gen: int) -> None:
        """A timer: ``target`` a process waiting in a ``receive`` with a
        timeout (``gen``: its ``timer_gen``) or a port in a busy spell (-1)."""
        self._timer_seq += 1
        heapq.heappush(self.timers, (deadline, self._timer_seq, target, gen))

    def fire_timers(self) -> None:
        now = time.monotonic()
        while self.timers and self.timers[0][0] <= now:
            self._fire(heapq.heappop(self.timers))

    def _fire(self, entry: tuple) -> None:
        if not _timer_live(entry):
            return
        target = entry[2]
        if entry[3] == -1:
            self.port_unbusy(target)
        else:
            target.timed_out = True
            self._make_runnable(target)

    def armed_timers(self) -> list:
        """The timers that would still do something, by deadline: a waiting
        process's ``receive`` timeout (its ``timer_gen`` unchanged since it
        waited) and the busy spell of a port still open (closing it woke
        whoever waited for the spell).  Stale entries are dropped."""
        live = [e for e in self.timers if _timer_live(e)]
        if len(live) != len(self.timers):
            heapq.heapify(live)
            self.timers[:] = live
        return sorted(live)

    def fire_timer(self, entry: tuple) -> None:
        """Fire ``entry`` (one of ``armed_timers()``) now, whatever the clock
        says (the simulator's ``T`` thread, a stepped scheduler's ``timer``
        step): the process's ``receive`` times out when it next runs, or
        the port's busy spell ends."""
        self.timers.remove(entry)
        heapq.heapify(self.timers)
        self._fire(entry)

    def set_active(self, active: bool) -> None:
        """Track this scheduler's activity for ``profile_scheduler``."""
        if active == self.active:
            return
        self.active = active
        if self.state.profile_scheduler:
            self.profile_scheduler(am_active if active else am_inactive)

    def run_some(self, max_procs: int = 64, until_ns: int | None = None, waiting=None) -> int:
        """Run up to ``max_procs`` time slices, none begun after ``until_ns``
        (``time.monotonic_ns``) nor once ``waiting()`` says something waits
        for the loop (a controller's command); after each, the port tasks
        it scheduled (``run_port_tasks``), as ``schedule()`` runs a port
        before it picks the next process.  Returns how many slices ran."""
        self.fire_timers()
        n = 0
        while self.runq and n < max_procs:
            if n and (
                (until_ns is not None and time.monotonic_ns() > until_ns)
                or (waiting is not None and waiting())
            ):
                break
            if not self.active:
                self.set_active(True)
            p = self.runq.popleft()
            p.in_runq = False
            if p.status == EXITED:
                continue
            self._run_slice(p)
            self.run_port_tasks()
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
            elif are_trace_flags_on(p.flags, F_TRACE_SCHED) or are_trace_flags_on(
                p.flags, F_TRACE_SCHED_PROCS
            ):
                self.trace_sched(p, am_in)
        p.slice_start = time.monotonic()
        p.busy_ms = 0
        p.in_mfa = p.current

    def _schedule_out(self, p: Proc, what=am_out) -> None:
        if p.tracer is not NIL:
            if what is am_out:
                if are_trace_flags_on(p.flags, F_TRACE_SCHED) or are_trace_flags_on(
                    p.flags, F_TRACE_SCHED_PROCS
                ):
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
            # set_proc_exiting made it EXITING before schedule() picks it up:
            # in_exiting, with 0 for the function (ERTS_PROC_IS_EXITING)
            p.status = EXITING
            self._schedule_in(p, exiting=True)
            self._terminate(p, p.pending_exit, scheduled=True)
            return
        self._schedule_in(p)
        value, p.resume = p.resume, None
        coro = p.coro
        # the process counts its reductions itself (Proc._reduction) and
        # yields a REDS op only when the slice is used up, an exit signal is
        # pending, or it yields on purpose (a huge count)
        p.reds_left = self.reds_budget
        while True:
            try:
                op = coro.send(value)
            except StopIteration:
                self._terminate(p, am_normal, scheduled=True)
                return
            except ErlangException as e:
                self._terminate(
                    p, self._exit_reason(p, e), scheduled=True, crash_class=e.erlang_class
                )
                return
            except Exception as e:  # a bug in the workload: class error, as badarg would be
                reason = (_a("python_exception"), _a(type(e).__name__), str(e).encode())
                self._terminate(
                    p, (reason, self._stacktrace(p)), scheduled=True, crash_class="error"
                )
                return
            value = None
            kind = op.kind
            if kind == REDS:
                p.reds_left -= op.arg - 1  # _reduction counted one already (yield_'s count is huge)
                if p.reds_left <= 0 or p.pending_exit is not None:
                    self._schedule_out(p)
                    self._make_runnable(p)
                    return
            elif kind == WAIT:
                p.status = WAITING
                if op.arg is not None:
                    self.arm_timer(op.arg, p, p.timer_gen)
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
