"""The controller's side of the simulated build: ``SimBackend`` answers the
BIFs (``smp.core.bifs.Backend``) from the world's nodes, dispatcher state
and table, and records what each call touches for the event that serves it
(``smp.sim.deps``)."""

from __future__ import annotations

from schedulers.backend import LocalBackend
from smp.core import messages as M
from smp.core.bifs import ALREADY_TRACED, LOCK_ONLY_BIFS
from smp.core.errors import BadArg
from smp.core.placement import owner, port_owner
from smp.core.state import NIL, STATE_READS, TRACER_ARG, apply_state_op, as_seed_sees
from smp.core.terms import Atom, Pid, Port, Ref

from .deps import QUEUE, group_of_state_op

__all__ = ["SimBackend"]


class SimBackend:
    """``smp.core.bifs.Backend`` for the simulated controller, as
    ``smp.backend.SmpBackend`` asks the schedulers and the dispatcher; each
    call records what it touches for the event that serves the BIF."""

    def __init__(self, world):  # an smp.sim.world.World (which imports this module)
        self.w = world

    def _node(self, k: int, write: bool = True):
        self.w.fp_w.add(("node", k))
        return self.w.nodes[k]

    def bk_is_alive(self, pid) -> bool:
        """As ``SmpBackend.bk_is_alive``: a pid not alive at its owner is asked
        again once the owner took the signals the BIF's caller's scheduler
        sent it (a spawn on its way: 17.x creates a process before spawn
        returns)."""
        if type(pid) is not Pid:
            return False
        w = self.w
        owner = w.owner(pid)
        if self._node(owner).is_alive(pid):
            return True
        k = w.bif_sched
        if k is None or k == owner:
            return False
        w.take_signals([(k, owner)])  # (reads the channel: empty or not)
        return self._node(owner).is_alive(pid)

    def bk_exiting(self, pid) -> bool:
        """As ``SmpBackend.bk_exiting``: its own scheduler says, once it took
        the signals the BIF's caller's scheduler sent it (an exit signal on
        its way: 17.x's exit/2 marks its target before it returns)."""
        w = self.w
        owner = w.owner(pid)
        k = w.bif_sched
        if k is not None and k != owner:
            w.take_signals([(k, owner)])
        return self._node(owner).exiting(pid)

    def bk_valid_tracer_port(self, port) -> bool:
        """As ``SmpBackend.bk_valid_tracer_port``: a trace port asked of the
        dispatcher, a port a process opened of its own scheduler (open, not
        busy, not a distribution port)."""
        if type(port) is not Port:
            return False
        k = port_owner(port, self.w.nsched)
        if k == 0:
            return self.w.table.is_valid_tracer_port(port)
        return self._node(k).is_valid_tracer_port(port)

    def bk_trace_apply(self, spec, how, bits, tracer) -> int:
        w = self.w
        if type(spec) in (Pid, Port):
            return self._trace_one(spec, how, bits, tracer)
        # all/existing: every signal between schedulers taken first, as
        # SmpBackend.bk_trace_apply does (17.x blocks thread progress: a
        # spawn is done or not begun)
        w.take_signals(
            [(i, k) for i in range(1, w.nsched + 1) for k in range(1, w.nsched + 1) if i != k]
        )
        return sum(
            self._node(k).set_trace_local(spec, how, bits, tracer) for k in range(1, w.nsched + 1)
        )

    def _trace_one(self, spec, how, bits, tracer) -> int:
        """As ``SmpBackend._trace_apply_lock_only``, for a pid or a port: a
        tracee held by a tracer its replica still thinks alive is asked
        again once the replica knows the tracer dead at its own scheduler
        (17.x ``already_traced`` looks the tracer up in the one process
        table).  A trace port (the dispatcher's) cannot be traced."""
        w = self.w
        k = owner(spec, w.nsched)
        if k == 0:
            raise BadArg(f"{spec!r} is a trace port and cannot be traced")
        node = self._node(k)
        n = node.set_trace_local(spec, how, bits, tracer)
        if n != ALREADY_TRACED:
            return n
        t = node.procs.get(spec) if type(spec) is Pid else node.ports.get(spec)
        old = t.tracer if t is not None else None
        if type(old) is not Pid or self._node(w.owner(old)).is_alive(old):
            return n
        w.fp_w.add(("replica", k, old))
        w.fp_w.add(("replica", k))  # (the whole: World._cut_short)
        node.dead_remote.add(old)
        return node.set_trace_local(spec, how, bits, tracer)

    def bk_mark_tracer(self, tracer) -> None:
        """As ``SmpBackend.bk_mark_tracer``: from a process, a tracer marked
        before (and found alive) is left as it is; the first time, the mark
        goes into its scheduler's stream and the BIF waits until the
        dispatcher has taken that stream (``World.take_batches``)."""
        w = self.w
        owner = w.owner(tracer)
        if w.bif_sched is None:  # the setup: every batch is taken at its settle()
            self._node(owner).mark_tracer(tracer)
            return
        if tracer in w.marked:
            return
        self._node(owner).mark_tracer(tracer)
        w.take_batches(owner)
        w.marked.add(tracer)

    def _known_to_dispatcher(self, tracer) -> None:
        """As ``SmpBackend._known_to_dispatcher``: a tracer the BIF found alive
        at its own scheduler is known so to the dispatcher (its scheduler's
        stream taken) before the state names it."""
        w = self.w
        if type(tracer) is Pid and not w.table.is_alive(tracer):
            w.take_batches(w.owner(tracer))

    def bk_state(self, op: str, *args):
        at = TRACER_ARG.get(op)
        if at is not None and len(args) > at:
            self._known_to_dispatcher(args[at])
        g = group_of_state_op(op)
        self.w.fp_r.add(("state", g))
        if op == "set_system_profile":
            self.w.fp_w.add(("state", "active"))
        result = apply_state_op(self.w.state, op, args)
        if self.w.bif_name in LOCK_ONLY_BIFS and (
            op in STATE_READS or op == "set_system_seq_tracer"
        ):
            # as SmpBackend._state_lock_only: an old value dead at its own scheduler
            result = as_seed_sees(op, result, self._dead_at_owner)
        return result

    def _dead_at_owner(self, x) -> bool:
        return type(x) is Pid and not self._node(self.w.owner(x)).is_alive(x)

    def bk_trace_info(self, what, item):
        """As ``SmpBackend.bk_trace_info``: the tracee's own scheduler
        answers; from a process (``SmpBackend._trace_info_lock_only``), a
        process tracer on another scheduler that is dead there, the
        tracee's replica not yet told, is told so first (17.x
        ``trace_info_pid`` looks the tracer up in the one process table)."""
        if type(what) is not Pid:
            return Atom("undefined")
        w = self.w
        k = w.owner(what)
        node = self._node(k)
        if w.bif_sched is not None:
            info = node.trace_info_local(what, "tracer")
            old = info[1] if type(info) is tuple else None
            if (
                type(old) is Pid
                and w.owner(old) != k
                and not self._node(w.owner(old)).is_alive(old)
            ):
                w.fp_w.add(("replica", k, old))
                w.fp_w.add(("replica", k))  # (the whole: World._cut_short)
                node.dead_remote.add(old)
        return node.trace_info_local(what, item)

    def bk_trace_info_func(self, mfa, key):
        return self._node(1).trace_info_func_local(mfa, key)

    def bk_pattern(self, mfa, ms, kind, meta_tracer, enable) -> int:
        source = None if ms is None else ms.source
        counts = [
            self._node(k).set_pattern_local(mfa, source, kind, meta_tracer, enable)
            for k in range(1, self.w.nsched + 1)
        ]
        return counts[0]

    def bk_active_schedulers(self) -> int:
        """``erts_active_schedulers`` for ``erts_system_profile_setup_active_schedulers``:
        the schedulers marked active (``Node.active``, which ``Node.set_active``
        sets and clears as it makes each ``profile_scheduler`` message), the
        marks the dispatcher's count (``active_sched``, ``sched_active`` in
        ``dispatcher.queue``) moves with from then on: from a setup the count
        stays in 0..N.  A run queue filled in the setup is no active
        scheduler: none has run yet (``SmpBackend`` answers 0 between runs)."""
        w = self.w
        return sum(1 for k in range(1, w.nsched + 1) if self._node(k).active)

    def bk_make_ref(self):
        self.w.refs += 1
        return Ref((self.w.refs, 0, 0))

    def bk_error_logger(self, caller, text: str) -> None:
        w = self.w
        msg = M.error_logger_str(text, None if caller is None else Pid(0))
        from_ = NIL if caller is None else caller
        mid = w.new_message(M.SYS_MSG_TYPE_ERRLGR, from_, NIL, msg, 0)
        w.queue.append((mid, M.SYS_MSG_TYPE_ERRLGR, from_, NIL, msg, M.TS_NONE, 0, 0))
        w.fp_w.add(QUEUE)
        w.fp_p.add(("msg", mid))

    def bk_trace_delivered(self, caller, what, ref):
        """``SmpBackend.bk_trace_delivered``: the dispatcher takes every batch
        the schedulers have sent (``Emulator._sync_dispatcher``), then queues
        ``{trace_delivered, What, Ref}`` to the caller (17.x
        ``trace_delivered_1``: ``erts_send_sys_msg_proc``, a PROC_MSG behind
        every message made before, as the seed's are in ``sys_message_queue``
        from the moment they are made).  Here the caller's scheduler makes it,
        as ``LocalBackend`` does, in a batch whose ingest waits for every
        batch each other scheduler has sent so far (``World._after_ok``),
        which depends on their last events: the BIF reads every scheduler.
        From the setup (no caller) the emulator waits for the dispatcher to
        reach a marker, and the setup runs no dispatcher."""
        if caller is None:
            raise BadArg("trace_delivered from the setup is not simulated (call it from a process)")
        w = self.w
        k = w.owner(caller)
        after = w.after[k]
        for i in range(1, w.nsched + 1):
            if i != k:
                w.fp_r.add(("node", i))
                after[i] = max(after[i], w.ing_sent[i])
        return LocalBackend(self._node(k)).bk_trace_delivered(caller, what, ref)
