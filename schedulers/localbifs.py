"""The parts of the trace BIFs a scheduler does on its own processes and
ports (``trace/3`` on them, ``trace_info``, ``trace_pattern`` on its function
table, the state replica), and BIFs called by its processes."""

from __future__ import annotations

from schedulers.backend import LocalBackend
from smp.core.bifs import ALREADY_TRACED, call_bif
from smp.core.flags import PORT_ONLY_FLAGS, PROC_ONLY_FLAGS, TRACEE_MODIFIER_FLAGS, flags_to_list
from smp.core.matchspec import MatchSpec, compile_match_spec

from .common import (
    EXITED,
    F_TRACER,
    NIL,
    TRACEE_FLAGS,
    BadArg,
    Error,
    Pid,
    Port,
    Proc,
    _a,
    _Meta,
    am_badarg,
    am_false,
    am_undefined,
)

__all__ = ["LocalBifs"]


class LocalBifs:
    """Mixed into ``schedulers.engine.Node``; runs in the scheduler process."""

    # ================================================================ local BIF parts
    def set_trace_local(self, spec, how: bool, bits: int, tracer, caller=None) -> int:
        """``trace_3``'s part on this node's processes and ports.

        ``spec`` is a pid, a port, ``all`` or ``existing``; ``tracer`` is None
        for ``false`` without ``{tracer, T}``.  Returns the match count as
        erl_bif_trace.c counts it, or ``ALREADY_TRACED`` when the pid or port
        asked for is held by another live tracer.  For ``all``/``existing``
        the tracer itself and tracees of another live tracer are skipped, and
        the loops follow the mask: processes for process flags, ports for
        port flags, both for the modifiers; "matches are not counted for
        ports"."""
        self._know_tracer(tracer)
        if type(spec) is Pid:
            t = self.procs.get(spec)
            if t is None or t.status == EXITED:
                raise BadArg(f"no such process {spec!r}")
            if tracer is not None and self._already_traced(t, tracer):
                return ALREADY_TRACED
            self._set_tracee_flags(t, how, bits, tracer)
            return 1
        if type(spec) is Port:
            port = self.ports.get(spec)
            if port is None or port.closed:
                raise BadArg(f"no such port {spec!r}")
            if tracer is not None and self._already_traced(port, tracer):
                return ALREADY_TRACED
            self._set_tracee_flags(port, how, bits, tracer)
            return 1
        mods = bits & TRACEE_MODIFIER_FLAGS
        count = 0
        if bits & PROC_ONLY_FLAGS or mods:
            for t in list(self.procs.values()):
                if t.status == EXITED:
                    continue
                if tracer is not None and (t.pid == tracer or self._already_traced(t, tracer)):
                    continue
                self._set_tracee_flags(t, how, bits, tracer)
                count += 1
        if bits & PORT_ONLY_FLAGS or mods:
            for port in list(self.ports.values()):
                if port.closed:
                    continue
                if tracer is not None and (port.id == tracer or self._already_traced(port, tracer)):
                    continue
                self._set_tracee_flags(port, how, bits, tracer)
        return count

    def _know_tracer(self, tracer) -> None:
        """trace_3 sets F_TRACER on the tracer itself, which every scheduler
        sees at once: a tracer on another scheduler is one in this replica
        before the BIF returns, so erts_check_my_tracer_proc at a tracee's
        next schedule-in does not take it for a dead one."""
        if type(tracer) is Pid and not self.is_local_pid(tracer):
            self.remote_tracers.add(tracer)

    def _already_traced(self, t, tracer) -> bool:
        """``already_traced`` / ``port_already_traced``: traced by another
        tracer that still exists; a gone one is discarded (flags and tracer
        reset) and the new one approved."""
        if not (t.flags & TRACEE_FLAGS) or t.tracer == tracer or t.tracer is NIL:
            return False
        if self._tracer_gone(t.tracer):
            t.flags &= ~TRACEE_FLAGS
            t.tracer = NIL
            return False
        return True

    @staticmethod
    def _set_tracee_flags(t, how: bool, bits: int, tracer) -> None:
        if how:
            t.flags |= bits
        else:
            t.flags &= ~bits
        if not (t.flags & TRACEE_FLAGS):
            t.tracer = NIL
        elif tracer is not None:
            t.tracer = tracer

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
        """``trace_info_pid`` on this node's process (17.x ``trace_info_2``
        takes no port), or ``trace_info_func`` for an ``{M, F, A}``."""
        if type(pid) is tuple:
            return self.trace_info_func_local(pid, item)
        t = self.procs.get(pid) if type(pid) is Pid else self.ports.get(pid)
        if t is None or getattr(t, "status", None) == EXITED or getattr(t, "closed", False):
            return am_undefined
        if t.tracer is not NIL and self._tracer_gone(t.tracer):
            t.flags &= ~TRACEE_FLAGS
            t.tracer = NIL
        if item == "flags":
            return (_a("flags"), flags_to_list(t.flags & TRACEE_FLAGS))
        return (_a("tracer"), [] if t.tracer is NIL else t.tracer)

    def trace_info_func_local(self, mfa: tuple, key):
        """``trace_info_func`` (erl_bif_trace.c): ``{Key, Value}`` for a
        function of this node's table.

        ``function_is_traced`` decides first: a function the node does not
        have answers ``{Key, undefined}`` and an untraced one ``{Key, false}``,
        whatever the key; otherwise ``traced`` is ``global`` or ``local``
        (``false`` with a meta pattern alone), ``match_spec`` the pattern's
        source (``[]`` for ``true``), ``meta`` the meta tracer, and
        ``call_count`` and ``call_time`` ``false`` (this emulator sets
        neither kind of breakpoint); ``all`` lists the six in the seed's
        order; any other key is badarg."""
        pat = self.patterns.get(mfa)
        if mfa not in self.functions:
            return (key, am_undefined)
        meta = None if pat is None else pat.get("meta")
        if pat is None or not (pat["global"] or pat["local"] or meta is not None):
            return (key, am_false)
        traced = _a("global") if pat["global"] else _a("local") if pat["local"] else am_false
        ms = am_false
        if pat["global"] or pat["local"]:
            ms = [] if pat["ms"] is None else pat["ms"].source
        meta_tracer, meta_ms = am_false, am_false
        if meta is not None:
            meta_tracer = [] if meta.tracer is NIL else meta.tracer
            meta_ms = [] if pat["meta_ms"] is None else pat["meta_ms"].source
        items = (
            (_a("traced"), traced),
            (_a("match_spec"), ms),
            (_a("meta"), meta_tracer),
            (_a("meta_match_spec"), meta_ms),
            (_a("call_time"), am_false),
            (_a("call_count"), am_false),
        )
        if key == _a("all"):
            return (key, [*items])
        for k, v in items:
            if key == k:
                return (key, v)
        raise BadArg(
            "trace_info item for a function must be traced, match_spec, meta, "
            f"meta_match_spec, call_count, call_time or all, not {key!r}"
        )

    def set_pattern_local(self, mfa_spec, ms, kind: str, meta_tracer=None, enable=True) -> int:
        """``trace_pattern`` on this node's function table; returns matches."""
        m, f, a = mfa_spec
        if ms is not None and not isinstance(ms, MatchSpec):
            ms = compile_match_spec(ms)  # smp: the term, compiled here
        count = 0
        for key in self.functions:
            if (
                (m is _a("_") or key[0] == m)
                and (f is _a("_") or key[1] == f)
                and (a is _a("_") or key[2] == a)
            ):
                pat = self.patterns.setdefault(
                    key,
                    {"global": False, "local": False, "ms": None, "meta": None, "meta_ms": None},
                )
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
        st.load(snap)
        self.clock.cpu = snap.default_cpu_timestamp

    # ================================================================ BIFs from processes
    async def op_bif(self, p: Proc, name: str, args):
        """A trace BIF called by process ``p`` (the caller is its default tracer)."""

        try:
            if self.smp:
                return await self.transport.rpc(p, "bif", name, args)

            return call_bif(LocalBackend(self), p.pid, name, args)
        except BadArg as e:
            raise Error(am_badarg) from e
