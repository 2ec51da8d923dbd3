"""The parts of the trace BIFs a scheduler does on its own processes and
ports (``trace/3`` on them, ``trace_info``, ``trace_pattern`` on its function
table, the state replica), and BIFs called by its processes."""
from __future__ import annotations

from .common import *  # noqa: F401,F403
from .common import _a, _Meta  # noqa: F401

__all__ = ["LocalBifs"]


class LocalBifs:
    """Mixed into ``schedulers.engine.Node``; runs in the scheduler process."""

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
