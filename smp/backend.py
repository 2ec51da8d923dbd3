"""The trace BIFs' backend in smp mode, run by the controller.

``smp.core.bifs`` decides what a trace BIF does and asks a backend for
everything that lives in the running system (``smp.core.bifs.Backend``).
In nonsmp mode the scheduler is that backend (``schedulers.backend``); in
smp mode the controller is: ``SmpBackend`` asks the dispatcher and the
schedulers over the controller's RPC, and waits, as the seed's BIFs block
every thread, until every scheduler's replica of the tracer state and the
process table has taken in a change before the BIF returns.

Uses of the controller (``smp.emulator.Emulator``): ``_sched_call``,
``_disp_call``, ``_all_scheds`` (the supervisor's calls, ``smp.supervision``),
``_owner``, ``_sync_dispatcher``, ``_publish_wait``, ``lost_schedulers``,
``smp``, ``_running``, ``_bounds.serving`` (the BIF being served,
``smp.link.TimeBounds``), ``_reply_after_resume`` (a BIF whose state
change outlives run()'s time answers after the next resume) and
``_stepper`` (a ``smp.stepper.Stepper`` stepping the paused emulator: a
scheduler's stream is then taken batch by batch, as the simulator takes
it).

A BIF an emulated process calls during a run (``begin_process_bif``, from
the controller's ``_serve_rpcs``) blocks only what 17.x blocks for it.
``trace(Pid | Port, ...)``, ``seq_trace:set_system_tracer``,
``system_monitor`` and ``system_profile`` take the tracee's locks or the
tracer state's write lock (``sys_trace_rwmtx``) and never stop the other
threads (erl_bif_trace.c blocks thread progress only for
``trace(all | existing, ...)`` and ``trace_pattern``).  So here they change
the tracee at its scheduler or the state at the dispatcher and return: the
other schedulers' replicas take the change as a publication when they come
to it (a scheduler may still make a message under the old state, the
seed's SMP window), and only the caller's own scheduler is brought up to
date before it answers, as the caller itself sees its own change.  What the
emulator keeps elsewhere than the seed (the process table of the
dispatcher, fed by the schedulers' batches) is never allowed to answer
differently from the shared table the seed reads:

* a tracer, monitor or profiler is checked alive at its own scheduler (as
  the BIF does already), and the dispatcher is made to know it (its spawn
  and its tracer mark taken from its scheduler's stream, that stream alone)
  before anything can be dispatched to it;
* an old value the state still names although its process is dead (its
  exit not yet taken by the dispatcher) is answered as the seed's
  ``erts_trace_check_exiting`` would have left it (``false`` /
  ``undefined``);
* a tracee that looks held by a tracer that is dead at its own scheduler
  is asked again once the tracee's scheduler has taken that death.

``trace_info(Pid, Item)`` reads the tracee under its locks alone
(``trace_info_pid``): its scheduler answers, the tracer it names looked up
at the tracer's own scheduler, and nothing else is waited for.

Every other BIF, and every BIF from the Python API (which promises that
the change is seen by every scheduler before any process runs), waits for
the dispatcher and every replica as before.
"""

from __future__ import annotations

import itertools
import time

from smp.core import messages as M
from smp.core.bifs import ALREADY_TRACED, LOCK_ONLY_BIFS
from smp.core.errors import BadArg, EmulatorTimeout
from smp.core.state import NIL, STATE_OPS, STATE_READS, TRACER_ARG, as_seed_sees
from smp.core.terms import Atom, Pid, Port, Ref

__all__ = ["SmpBackend", "OutOfTime", "LOCK_ONLY_BIFS"]

#: The state operations those BIFs make: all but the default tracing's
#: (``TRACER_ARG``: those naming a tracer).
_LOCK_ONLY_OPS = frozenset(STATE_OPS) - {"change_default_tracing", "get_default_tracing"}
#: Tracers the dispatcher has taken the mark of, remembered at most this many.
_MARKED_MAX = 65536


class OutOfTime(EmulatorTimeout):
    """A call cut short because run()'s time is up (run() raises
    ``EmulatorTimeout`` saying which process did not answer)."""


class SmpBackend:
    """``smp.core.bifs.Backend`` for smp mode.  Runs in the user's process."""

    def __init__(self, emu):
        self.emu = emu
        self._refs = itertools.count(1)
        #: the scheduler of the process whose lock-only BIF is being served
        #: (``begin_process_bif``), else None
        self._caller_sched: int | None = None
        #: the scheduler of the process whose BIF (any) is being served, else None
        self._bif_sched: int | None = None
        #: live tracers whose mark the dispatcher has taken (pids are never
        #: reused; a dead one is refused by the liveness check first)
        self._marked: set[Pid] = set()

    # -- a process's BIF during a run ----------------------------------------
    def begin_process_bif(self, k: int, name: str) -> None:
        """The controller serves BIF ``name`` that a process on scheduler
        ``k`` called; ``end_process_bif`` when it is answered."""
        self._bif_sched = k
        if self.emu.smp and name in LOCK_ONLY_BIFS:
            self._caller_sched = k

    def end_process_bif(self) -> None:
        self._caller_sched = self._bif_sched = None

    def _lock_only(self) -> bool:
        return self._caller_sched is not None

    def _bound(self) -> float | None:
        """Seconds left in run()'s time (None: no bound)."""
        end = self.emu._bounds.run
        return None if end is None else max(0.0, end - time.monotonic() - 0.05)

    def _ingested_from(self, k: int) -> None:
        """The dispatcher has taken everything scheduler ``k`` sent so far
        (that stream alone: the others' floods are not waited for)."""
        emu = self.emu
        if k == 0 or k in emu.lost_schedulers:
            return
        items = [0] * (emu.nsched + 1)
        if emu._stepper is not None:  # stepped: as the simulator takes them
            emu._stepper.take_stream(k)
            return
        items[k] = emu._sched_call(k, "status")["sys_items"]
        limit = self._bound()
        if not emu._disp_call("wait_ingested", items, limit) and limit is not None:
            raise OutOfTime(
                f"the dispatcher had not taken every batch scheduler {k} sent "
                "(push-back from a receiver that does not keep up)"
            )

    def _caller_current(self) -> None:
        """The caller's own scheduler has taken every publication made so far."""
        if self._caller_sched is not None:
            self._replica_current_at(self._caller_sched)

    def _replica_current_at(self, k: int) -> None:
        """Scheduler ``k``'s replica has taken every publication made so far."""
        emu = self.emu
        if k == 0 or k in emu.lost_schedulers:
            return
        seqs = emu._disp_call("pub_seq")
        limit = self._bound()
        try:
            emu._sched_call(k, "wait_published", seqs, 10.0 if limit is None else limit)
        except TimeoutError as e:
            if limit is None or isinstance(e, EmulatorTimeout):
                raise
            raise OutOfTime(str(e)) from None

    def _known_to_dispatcher(self, tracer) -> None:
        """A tracer the BIF found alive (or open) at its own scheduler is
        known so to the dispatcher before the state names it."""
        if type(tracer) is Pid:
            if not self.emu._disp_call("is_alive", tracer):
                self._ingested_from(self.emu._owner(tracer))
        elif type(tracer) is Port:
            owner = self.emu._owner(tracer)
            if owner != 0 and not self.emu._disp_call("valid_port", tracer):
                self._ingested_from(owner)

    def _dead_at_owner(self, x) -> bool:
        """An old value of the state: a process spawned long before, asked of
        its own scheduler alone."""
        if type(x) is not Pid:
            return False
        owner = self.emu._owner(x)
        return owner in self.emu.lost_schedulers or not self.emu._sched_call(owner, "alive", x)

    def _state_lock_only(self, op: str, args: tuple):
        """A state operation of a lock-only BIF: the dispatcher's write lock,
        then the caller's replica; the others take the publication when they
        come to it."""
        emu = self.emu
        at = TRACER_ARG.get(op)
        if at is not None:
            tracer = args[at]
            # erts_set_system_seq_tracer checks the port itself (a pid: the BIF did)
            if op == "set_system_seq_tracer" and type(tracer) is Port:
                if not self.bk_valid_tracer_port(tracer):
                    return None
            self._known_to_dispatcher(tracer)
        result = emu._disp_call("state", op, args)
        if op in STATE_READS or op == "set_system_seq_tracer":
            result = as_seed_sees(op, result, self._dead_at_owner)
        if op not in STATE_READS:
            try:
                self._caller_current()
            except OutOfTime:
                if emu._bounds.serving is None:
                    raise
                emu._reply_after_resume = True  # the resume brings every replica up
        return result

    def _alive_at_owner(self, pid) -> bool:
        """Whether ``pid``'s own scheduler has it alive (the seed's
        ``erts_proc_lookup`` in the one process table)."""
        emu = self.emu
        owner = emu._owner(pid)
        return owner not in emu.lost_schedulers and bool(emu._sched_call(owner, "alive", pid))

    def bk_is_alive(self, pid) -> bool:
        emu = self.emu
        if type(pid) is not Pid:
            return False
        owner = emu._owner(pid)
        if owner in emu.lost_schedulers:
            return False
        if self._alive_at_owner(pid):
            return True
        # 17.x creates a process before spawn returns; here a spawn on another
        # scheduler is a signal that may still be on its way when the parent's
        # next BIF names the new process: take the caller's scheduler's
        # signals to that scheduler first, then ask again
        if not self._callers_signals_taken(owner):
            return False
        return bool(emu._sched_call(owner, "alive", pid))

    def _callers_signals_taken(self, owner: int) -> bool:
        """Scheduler ``owner`` has taken every signal the BIF's caller's
        scheduler sent it (False: there is no other such scheduler, or they
        did not arrive in time)."""
        emu = self.emu
        k = self._bif_sched
        if k is None or k == owner or k in emu.lost_schedulers:
            return False
        sent = emu._sched_call(k, "flush_peer", owner)
        limit = self._bound()
        return bool(emu._sched_call(owner, "wait_peer", k, sent, 10.0 if limit is None else limit))

    def bk_exiting(self, pid) -> bool:
        # 17.x's exit/2 marks its target before it returns; here an exit
        # signal to another scheduler may still be on its way when the
        # caller's next BIF (register/2) names the target: it is taken first
        emu = self.emu
        owner = emu._owner(pid)
        if owner in emu.lost_schedulers:
            return False
        self._callers_signals_taken(owner)
        return bool(emu._sched_call(owner, "exiting", pid))

    def bk_valid_tracer_port(self, port) -> bool:
        """A trace port (the dispatcher's) or a port a process opened, asked
        of its own scheduler: open, not busy, not a distribution port."""
        if not self.emu.smp or type(port) is not Port:
            return False
        owner = self.emu._owner(port)
        if owner == 0:
            return bool(self.emu._disp_call("valid_port", port))
        if owner in self.emu.lost_schedulers:
            return False
        return bool(self.emu._sched_call(owner, "valid_port", port))

    def _replicas_current(self) -> None:
        """Every scheduler has taken in every state publication made so far
        (dead pids, tracer marks): a tracer that just died is seen as dead."""
        self.emu._sync_dispatcher()
        self.emu._publish_wait()

    def bk_trace_apply(self, spec, how, bits, tracer) -> int:
        if self._lock_only() and type(spec) in (Pid, Port):
            return self._trace_apply_lock_only(spec, how, bits, tracer)
        if self.emu.smp:
            self._replicas_current()
        if type(spec) is Pid:
            return self.emu._sched_call(
                self.emu._owner(spec), "trace_apply", spec, how, bits, tracer
            )
        if type(spec) is Port:
            owner = self.emu._owner(spec)
            if owner == 0:
                raise BadArg(f"{spec!r} is a trace port and cannot be traced")
            return self.emu._sched_call(owner, "trace_apply", spec, how, bits, tracer)
        self._signals_taken()
        return sum(self.emu._all_scheds("trace_apply", spec, how, bits, tracer).values())

    def _signals_taken(self) -> None:
        """Every signal a scheduler has sent another is applied there (17.x
        blocks thread progress for ``trace(all | existing, ...)``: a spawn on
        another scheduler is done, its process in the table, or not begun)."""
        emu = self.emu
        live = [k for k in range(1, emu.nsched + 1) if k not in emu.lost_schedulers]
        if len(live) < 2:
            return
        sent = {(j, k): emu._sched_call(j, "flush_peer", k) for j in live for k in live if j != k}
        limit = self._bound()
        for (j, k), need in sent.items():
            emu._sched_call(k, "wait_peer", j, need, 10.0 if limit is None else limit)

    def _trace_apply_lock_only(self, spec, how, bits, tracer) -> int:
        """``trace(Pid | Port, ...)`` from a process: the tracee's locks alone
        (its scheduler sets the flags at once)."""
        emu = self.emu
        owner = emu._owner(spec)
        if owner == 0:
            raise BadArg(f"{spec!r} is a trace port and cannot be traced")
        n = emu._sched_call(owner, "trace_apply", spec, how, bits, tracer)
        if n != ALREADY_TRACED:
            return n
        # held by a tracer that may be dead at its own scheduler, the tracee's
        # replica not yet told: ask again once that replica has the death
        info = emu._sched_call(owner, "trace_info", spec, "tracer")
        old = info[1] if type(info) is tuple and len(info) == 2 else None
        if type(old) is Pid:
            # looked up as already_traced does (erts_proc_lookup): at its own
            # scheduler, with no signal of the caller's taken first (that is
            # for a pid the caller may just have spawned, not for its tracer)
            if self._alive_at_owner(old):
                return n
            # dead at its own scheduler: the tracee's replica is told so (the
            # seed's already_traced looks the tracer up in the one table)
            emu._sched_call(owner, "know_dead", old)
        else:
            emu._sync_dispatcher()
            self._replica_current_at(owner)
        return emu._sched_call(owner, "trace_apply", spec, how, bits, tracer)

    def bk_mark_tracer(self, tracer) -> None:
        emu = self.emu
        if self._lock_only() and tracer in self._marked:
            # marked before, and the BIF found it alive: a mark is never taken
            # off a live process, so there is nothing to do at its scheduler
            return
        owner = emu._owner(tracer)
        emu._sched_call(owner, "mark_tracer", tracer)
        if not self._lock_only():
            emu._sync_dispatcher()
        elif tracer not in self._marked:
            # the seed sets F_TRACER on the tracer itself; here the mark reaches
            # the dispatcher's table in its scheduler's stream: wait for that
            # stream (once per tracer), not for the whole queue
            self._ingested_from(owner)
        else:
            return
        if len(self._marked) >= _MARKED_MAX:
            self._marked.clear()
        self._marked.add(tracer)

    def bk_state(self, op: str, *args):
        if self._lock_only() and op in _LOCK_ONLY_OPS:
            return self._state_lock_only(op, args)
        self.emu._sync_dispatcher()
        result = self.emu._disp_call("state", op, args)
        if op not in STATE_READS:
            # as the seed blocks every thread while it changes these, every
            # scheduler sees the change before the BIF returns; when run()'s
            # time is up first, the BIF's caller gets its answer in the next
            # run(), whose resume brings every replica up to date first
            try:
                self.emu._publish_wait()
            except OutOfTime:
                if self.emu._bounds.serving is None:
                    raise
                self.emu._reply_after_resume = True
        return result

    def bk_trace_info(self, what, item):
        emu = self.emu
        owner = emu._owner(what)
        if owner == 0 or owner in emu.lost_schedulers:
            return Atom("undefined")
        if emu.smp:
            if self._bif_sched is not None and type(what) is Pid:
                return self._trace_info_lock_only(owner, what, item)
            self._replicas_current()  # a tracer port closed just now is seen closed
        return emu._sched_call(owner, "trace_info", what, item)

    def _trace_info_lock_only(self, owner: int, pid: Pid, item):
        """``trace_info(Pid, Item)`` from a process: the tracee's locks alone
        (erl_bif_trace.c ``trace_info_pid`` looks its tracer up in the one
        process table and waits for nothing).  The tracee's scheduler
        answers; a process tracer on another scheduler that is dead there,
        the tracee's replica not yet told, is told so and the tracee asked
        again (looked up as ``_trace_apply_lock_only`` looks up an old
        tracer: at its own scheduler, no signal of the caller's taken
        first).  A port tracer is asked as before, every replica current
        (a tracer port closed just now is seen closed)."""
        emu = self.emu
        info = emu._sched_call(owner, "trace_info", pid, "tracer")
        if type(info) is not tuple:  # undefined: not alive
            return info
        tracer = info[1]
        if type(tracer) is Port:
            self._replicas_current()
        elif type(tracer) is Pid and emu._owner(tracer) != owner:
            if not self._alive_at_owner(tracer):
                emu._sched_call(owner, "know_dead", tracer)
            elif item == "tracer":
                return info
        elif item == "tracer":
            return info
        return emu._sched_call(owner, "trace_info", pid, item)

    def bk_trace_info_func(self, mfa, key):
        # every scheduler holds the same function table and patterns
        return self.emu._sched_call(1, "trace_info", mfa, key)

    def bk_pattern(self, mfa, ms, kind, meta_tracer, enable) -> int:
        # the match spec travels as its term; each scheduler compiles it again
        source = None if ms is None else ms.source
        return next(
            iter(self.emu._all_scheds("pattern", mfa, source, kind, meta_tracer, enable).values())
        )

    def bk_active_schedulers(self) -> int:
        """``erts_active_schedulers``: the schedulers active as their own
        profile_scheduler messages last said (the count the dispatcher keeps
        from those messages follows the same flags); 0 between runs."""
        if not self.emu._running:
            return 0
        return sum(1 for s in self.emu._all_scheds("status").values() if s["active"])

    def bk_make_ref(self):
        return Ref((next(self._refs), 0, 0))

    def bk_error_logger(self, caller, text: str) -> None:
        """``erts_send_error_to_logger_str``: queued for the dispatcher as
        every ERRLGR message is; every process's group leader is <0.0.0>."""
        gl = None if caller is None else Pid(0)
        self.emu._disp_call(
            "error_logger", NIL if caller is None else caller, M.error_logger_str(text, gl)
        )

    def bk_trace_delivered(self, caller, what, ref):
        """From a process: made at its own scheduler, queued behind every
        batch each other scheduler has made (``trace_delivered`` there); from
        the API: a marker the dispatcher reaches once it has dispatched
        everything queued."""
        emu = self.emu
        if caller is None:
            emu._sync_dispatcher()
            return emu._disp_call("trace_delivered", caller, what, ref)
        k = emu._owner(caller)
        after = [0] * (emu.nsched + 1)
        for i in range(1, emu.nsched + 1):
            if i != k and i not in emu.lost_schedulers:
                after[i] = emu._sched_call(i, "batches_made")
        return emu._sched_call(k, "trace_delivered", caller, what, ref, after)
