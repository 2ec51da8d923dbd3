"""Process exits, exit signals, links, the registry, message passing and
process flags: the operations that reach ``trace_proc``, ``trace_send``,
``trace_receive``, ``seq_trace`` token passing and the error logger."""
from __future__ import annotations

from .common import *  # noqa: F401,F403
from .common import _a, _Meta  # noqa: F401

__all__ = ["ProcessOps"]


class ProcessOps:
    """Mixed into ``schedulers.engine.Node``; runs in the scheduler process."""

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
        inherit = inherited_tracing(p, F_TRACE_SOL, F_TRACE_SOL1)
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
