"""Emulated function calls and call tracing: ``erts_call_trace`` (meta trace,
``silent``, ``arity``, ``return_to``), ``erts_trace_return``,
``erts_trace_exception`` and ``erts_trace_return_to``, and ``save_calls``."""

from __future__ import annotations

import sys

from smp.core.terms import atom_of

from .common import (
    EXITED,
    F_SENSITIVE,
    F_TIMESTAMP,
    F_TRACE_ARITY_ONLY,
    F_TRACE_CALLS,
    F_TRACE_RETURN_TO,
    F_TRACE_SILENT,
    MATCH_SET_EXCEPTION_TRACE,
    MATCH_SET_RETURN_TO_TRACE,
    MATCH_SET_RETURN_TRACE,
    NIL,
    TRACEE_FLAGS,
    ErlangException,
    Error,
    M,
    Pid,
    Proc,
    _a,
    am_undef,
    am_undefined,
    are_trace_flags_on,
    flag_bit,
    format_term,
    pid_owner,
)

__all__ = ["CallTracing"]


class _MatchCtx:
    """What a match spec's process functions read and change (``{caller}``,
    ``{self}``, ``{display, X}``, ``{process_dump}``, ``{get_seq_token}``,
    ``{enable_trace, ...}``): the calling process on its scheduler."""

    __slots__ = ("node", "p", "pid")

    def __init__(self, node, p: Proc):
        self.node, self.p, self.pid = node, p, p.pid

    def ms_caller(self):
        # the function that made the call (find_function_from_pc(c_p->cp))
        return self.p.current if self.p.current is not None else am_undefined

    def ms_display(self, term) -> None:
        # erts_printf("%T\n", ...) on the emulator's standard output
        sys.stdout.write(format_term(term) + "\n")
        sys.stdout.flush()

    def ms_process_dump(self) -> bytes:
        """``print_process_info``'s text for the process, as a binary."""
        p = self.p

        def mfa(x):
            return "undefined" if x is None else f"{format_term(x[0])}:{format_term(x[1])}/{x[2]}"

        lines = [f"=proc:{format_term(p.pid)}", f"State: {p.status.capitalize()}"]
        if p.reg_name is not None:
            lines.append(f"Name: {format_term(p.reg_name)}")
        lines += [
            f"Spawned as: {mfa(p.initial)}",
            f"Current call: {mfa(p.current)}",
            f"Message queue length: {len(p.mailbox)}",
            "Link list: [" + ", ".join(format_term(x) for x in sorted(p.links, key=repr)) + "]",
            f"Stack+heap: {p.heap.heap_block}",
            f"OldHeap: {p.heap.old_block}",
            f"Heap unused: {p.heap.heap_block - p.heap.heap_used}",
            f"OldHeap unused: {p.heap.old_block - p.heap.old_used}",
        ]
        return ("\n".join(lines) + "\n").encode()

    def ms_seq_token(self):
        return [] if self.p.token is None else tuple(self.p.token)

    def ms_set_trace_flag(self, pid, flag, on: bool) -> bool:
        """``{enable_trace, [Pid,] Flag}`` / ``{disable_trace, ...}``: the flag
        on the process, its tracer kept (``set_tracee_flags``).  In smp a
        process on another scheduler gets it as a signal, as it would get an
        exit signal; a pid known to be dead fails the body."""
        bit = flag_bit(flag)
        node = self.node
        if bit is None or not node.is_alive(pid):
            return False
        if node.is_local_pid(pid):
            node.set_trace_flag(pid, bit, on)
        else:
            node.transport.peer(pid_owner(pid, node.nsched), ("trace_flag", pid, bit, on))
        return True


class CallTracing:
    """Mixed into ``schedulers.engine.Node``; runs in the scheduler process."""

    # ================================================================ calls
    async def op_call(self, p: Proc, module, function, args: list, local: bool):
        module, function = atom_of(module), atom_of(function)
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
            # beam_bp.c fires a global or local breakpoint only when
            # IS_TRACED_FL(c_p, F_TRACE_CALLS), false for a sensitive process
            if (
                (pat["local"] or (pat["global"] and not local))
                and p.tracer is not NIL
                and are_trace_flags_on(p.flags, F_TRACE_CALLS)
            ):
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

        await p._reduction()
        return result

    def set_trace_flag(self, pid, bit: int, on: bool) -> None:
        t = self.procs.get(pid)
        if t is None or t.status == EXITED:
            return
        if on:
            t.flags |= bit
        else:
            t.flags &= ~bit
            if not (t.flags & TRACEE_FLAGS):
                t.tracer = NIL

    def _tracer_gone(self, tracer) -> bool:
        """For the BIFs (trace/3, trace_info/2): is this tracer known to be gone?

        Asks liveness, not the tracer mark (``already_traced`` looks the
        process up): in smp the mark of a tracer on another scheduler reaches
        this replica asynchronously, and a BIF served between runs must not
        take a just-installed tracer for a dead one.  A port tracer is gone
        once it is not a valid tracer port (``erts_is_valid_tracer_port``); in
        smp the controller brings the replica's set of open trace ports up to
        date before it asks."""
        if type(tracer) is Pid:
            return not self.is_alive(tracer)
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
            res = ms.run(args, _MatchCtx(self, p))
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
        self._send_to_tracer(holder, NIL if meta else p.pid, msg, bool(flags & F_TIMESTAMP), p)
        return 0 if holder.tracer is NIL else rf

    def erts_trace_return(self, p: Proc, mfa, value, holder) -> None:
        tracer = holder.tracer
        if tracer is NIL or tracer == p.pid or not (holder.flags & F_TRACE_CALLS):
            return
        msg = M.erts_trace_return(p.pid, mfa, value)
        self._send_to_tracer(
            holder, p.pid if holder is p else NIL, msg, bool(holder.flags & F_TIMESTAMP), p
        )

    def erts_trace_exception(self, p: Proc, mfa, cls, value, holder) -> None:
        tracer = holder.tracer
        if tracer is NIL or tracer == p.pid:
            return
        if holder is p and not (holder.flags & F_TRACE_CALLS):
            return
        msg = M.erts_trace_exception(p.pid, mfa, cls, value)
        self._send_to_tracer(
            holder, p.pid if holder is p else NIL, msg, bool(holder.flags & F_TIMESTAMP), p
        )

    def erts_trace_return_to(self, p: Proc, mfa) -> None:
        if p.tracer is NIL:
            return
        msg = M.erts_trace_return_to(p.pid, mfa if mfa is not None else am_undefined)
        self._send_to_tracer(p, p.pid, msg, bool(p.flags & F_TIMESTAMP), p)
