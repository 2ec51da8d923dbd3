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
``smp.link.TimeBounds``) and ``_reply_after_resume`` (a BIF whose state
change outlives run()'s time answers after the next resume).
"""

from __future__ import annotations

import itertools

from smp.core import messages as M
from smp.core.errors import BadArg, EmulatorTimeout
from smp.core.state import NIL, STATE_READS
from smp.core.terms import Atom, Pid, Port, Ref

__all__ = ["SmpBackend", "OutOfTime"]


class OutOfTime(EmulatorTimeout):
    """A call cut short because run()'s time is up (run() raises
    ``EmulatorTimeout`` saying which process did not answer)."""


class SmpBackend:
    """``smp.core.bifs.Backend`` for smp mode.  Runs in the user's process."""

    def __init__(self, emu):
        self.emu = emu
        self._refs = itertools.count(1)

    def bk_is_alive(self, pid) -> bool:
        if type(pid) is not Pid or self.emu._owner(pid) in self.emu.lost_schedulers:
            return False
        return bool(self.emu._sched_call(self.emu._owner(pid), "alive", pid))

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
        return sum(self.emu._all_scheds("trace_apply", spec, how, bits, tracer).values())

    def bk_mark_tracer(self, tracer) -> None:
        self.emu._sched_call(self.emu._owner(tracer), "mark_tracer", tracer)
        self.emu._sync_dispatcher()

    def bk_state(self, op: str, *args):
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
        owner = self.emu._owner(what)
        if owner == 0 or owner in self.emu.lost_schedulers:
            return Atom("undefined")
        if self.emu.smp:
            self._replicas_current()  # a tracer port closed just now is seen closed
        return self.emu._sched_call(owner, "trace_info", what, item)

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
        if not self.emu._running:
            return 0
        return sum(1 for s in self.emu._all_scheds("status").values() if not s["idle"])

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
        self.emu._sync_dispatcher()
        return self.emu._disp_call("trace_delivered", caller, what, ref)
