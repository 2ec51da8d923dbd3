"""The controller's side of the simulated build: ``SimBackend`` answers the
BIFs (``smp.core.bifs.Backend``) from the world's nodes, dispatcher state
and table, and records what each call touches for the event that serves it
(``smp.sim.deps``)."""

from __future__ import annotations

from smp.core import messages as M
from smp.core.errors import BadArg
from smp.core.state import NIL, apply_state_op
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
        if type(pid) is not Pid:
            return False
        return self._node(self.w.owner(pid)).is_alive(pid)

    def bk_valid_tracer_port(self, port) -> bool:
        return False

    def bk_trace_apply(self, spec, how, bits, tracer) -> int:
        w = self.w
        if type(spec) is Pid:
            return self._node(w.owner(spec)).set_trace_local(spec, how, bits, tracer)
        if type(spec) is Port:
            raise BadArg("ports are not simulated")
        return sum(
            self._node(k).set_trace_local(spec, how, bits, tracer) for k in range(1, w.nsched + 1)
        )

    def bk_mark_tracer(self, tracer) -> None:
        self._node(self.w.owner(tracer)).mark_tracer(tracer)

    def bk_state(self, op: str, *args):
        g = group_of_state_op(op)
        self.w.fp_r.add(("state", g))
        if op == "set_system_profile":
            self.w.fp_w.add(("state", "active"))
        return apply_state_op(self.w.state, op, args)

    def bk_trace_info(self, what, item):
        if type(what) is not Pid:
            return Atom("undefined")
        return self._node(self.w.owner(what)).trace_info_local(what, item)

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
        w = self.w
        return sum(1 for k in range(1, w.nsched + 1) if self._node(k).runq)

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
        raise BadArg("trace_delivered is not simulated")
