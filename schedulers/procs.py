"""Process exits, exit signals, links, the registry, message passing and
process flags: the operations that reach ``trace_proc``, ``trace_send``,
``trace_receive``, ``seq_trace`` token passing and the error logger; and the
node's process limit (``ProcessLimit``)."""

from __future__ import annotations

from collections import deque

from .common import (
    EXITED,
    EXITING,
    F_SENSITIVE,
    F_TRACE_PORTS,
    F_TRACE_PROCS,
    F_TRACE_RECEIVE,
    F_TRACE_SCHED_EXIT,
    F_TRACE_SOL,
    F_TRACE_SOL1,
    F_TRACER,
    GROUP_LEADER,
    NIL,
    PORT_REMOTE,
    SUSPENDED,
    WAITING,
    Atom,
    Error,
    Exit,
    M,
    Pid,
    Port,
    Proc,
    am_badarg,
    am_EXIT,
    am_exit,
    am_false,
    am_getting_linked,
    am_getting_unlinked,
    am_inactive,
    am_kill,
    am_killed,
    am_link,
    am_noproc,
    am_normal,
    am_out_exited,
    am_receive,
    am_register,
    am_send,
    am_timeout,
    am_true,
    am_undefined,
    am_unlink,
    am_unregister,
    are_trace_flags_on,
    inherit_tracing,
    inherited_tracing,
    pid_owner,
)
from .process import NOTHING, Tokened

__all__ = ["ProcessOps", "ProcessLimit", "DEFAULT_MAX_PROCESSES", "MAX_MAX_PROCESSES"]

#: 17.x's default ``+P``: at most 262144 processes exist at once.
DEFAULT_MAX_PROCESSES = 1 << 18
#: 17.x's largest ``+P`` (erl_process.c ``ERTS_MAX_PROCESSES``: 2**27 - 1).
MAX_MAX_PROCESSES = (1 << 27) - 1

am_system_limit = Atom("system_limit")


class ProcessLimit:
    """The node's process table size (``+P``): how many processes may exist
    at once, counted over every scheduler of the node.

    17.x's process table is one table of the node: ``erl_create_process``
    finds no free slot (``alloc_process`` fails), sends "Too many
    processes" to the error logger and ``spawn`` raises ``system_limit``.
    Here the schedulers of a node are OS processes, so the count is a
    counting semaphore they share (``multiprocess.Semaphore(limit)``, made by
    the controller before it forks them): a spawn takes a place, whichever
    scheduler the new process goes to, at the spawn, as 17.x does; the
    process's exit gives it back, on the scheduler it ran on.  Taking and
    giving are non-blocking semaphore calls (``sem_trywait``, ``sem_post``):
    no message, no wait.

    Without a shared semaphore (``slots=None``: a Node made alone, as unit
    tests make one) the count is this scheduler's own.  The controller gives
    no limit to schedulers when some run on other hosts (a semaphore does not
    cross hosts): there the process limit is not enforced.  A scheduler that
    dies (SIGKILL) takes its processes' places with it: they stay taken.

    17.x rounds ``+P`` up to a power of two and accepts 1024..2**27-1; the
    emulator takes any count in 1..2**27-1 exactly as given."""

    __slots__ = ("limit", "_acquire", "_release", "_live")

    def __init__(self, limit: int, slots=None):
        self.limit = limit
        self._live = 0
        if slots is None:
            self._acquire = self._release = None
        else:
            self._acquire, self._release = slots.acquire, slots.release

    def take(self) -> bool:
        """Take a place for a new process; False when the table is full."""
        if self._acquire is not None:
            return self._acquire(False)
        if self._live >= self.limit:
            return False
        self._live += 1
        return True

    def give(self) -> None:
        """A process that held a place is gone."""
        if self._release is not None:
            self._release()
        elif self._live > 0:
            self._live -= 1


class ProcessOps:
    """Mixed into ``schedulers.engine.Node``; runs in the scheduler process."""

    #: the node's process limit (None: none; ``set_process_limit`` sets it)
    process_limit: ProcessLimit | None = None

    # ---------------------------------------------------------------- limit
    def set_process_limit(self, limit: int, slots=None) -> None:
        """Count this scheduler's spawns against ``limit`` processes, in the
        shared semaphore ``slots`` when the node has one (``ProcessLimit``)."""
        self.process_limit = ProcessLimit(limit, slots)

    def claim_process(self, parent: Proc | None = None) -> None:
        """A place in the process table for a process about to be spawned, or
        ``error:system_limit`` (17.x ``erl_create_process``: "Too many
        processes" to the error logger, from ``parent``, then the error).
        ``parent`` None: a spawn the emulator's API asked for."""
        limit = self.process_limit
        if limit is None or limit.take():
            return
        if parent is not None:
            self.erts_queue_error_logger_message(
                parent.pid, M.error_logger_str("Too many processes\n", parent.group_leader)
            )
        raise Error(am_system_limit)

    def unclaim_process(self) -> None:
        """Give back the place of a spawn that failed after ``claim_process``."""
        if self.process_limit is not None:
            self.process_limit.give()

    # ---------------------------------------------------------------- exits
    def _terminate(self, p: Proc, reason, scheduled=False, crash_class=None):
        """``erts_do_exit_process`` + ``erts_continue_exit_process`` (17.x
        erl_process.c), in their order: the crash report (``terminate_proc``
        logs before it exits), ``exit``, the registered name last of the
        "erlang resources" (``erts_unregister_name`` traces ``unregister``),
        then its links in the order ``erts_sweep_links`` visits its link
        tree (``doit_exit_link``): a linked port (the ports it opened among
        them) gets an exit task, which closes it once this process is
        scheduled out, after ``out_exited``; a port it owns but unlinked
        from stays open.

        The scheduling events follow ``schedule()``: a process scheduled out
        in state FREE gives ``out_exited``; ``out_exiting`` only when it is
        scheduled out while still EXITING, which happens when
        ``erts_continue_exit_process`` yields half way.  This emulator's exit
        never yields (links and names are done in one step), so a
        process that ends on its own gives ``out_exited`` alone, and one
        killed while scheduled out gives ``in_exiting`` (``schedule()`` picks
        it up EXITING, see ``Node._run_slice``) then ``out_exited``."""
        if p.status == EXITED:
            return
        p.status = EXITING
        p.exit_reason = reason
        if crash_class in ("error", "throw"):
            self.erts_queue_error_logger_message(
                p.pid, M.error_logger_report(p.pid, reason, p.group_leader)
            )
        if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_PROCS):
            self.trace_proc(p, p, am_exit, reason)
        if p.reg_name is not None:
            name = p.reg_name
            p.reg_name = None
            if self.registry.get(name) == p.pid:
                del self.registry[name]
                if self.smp:
                    self.transport.table_event(("unregister", name, p.pid))
            if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_PROCS):
                self.trace_proc(p, p, am_unregister, name)
        # erts_sweep_links: the linked pids and ports in the post-order of
        # the process's link tree (smp.core.linktree); a linked process gets
        # the exit signal, a linked port a task (doit_exit_link:
        # erts_port_exit with ERTS_PORT_SIG_FLG_FORCE_SCHED), run once the
        # process is scheduled out (Resources.run_port_tasks); a port it
        # owns but unlinked from stays open, connected to the dead pid
        for other in p.links.sweep() if p.links else ():
            if type(other) is Port:
                self.schedule_port_exit(other, p.pid, reason)
            else:
                self._send_exit_signal(p, other, reason, link=True)
        p.links = NOTHING
        if scheduled:
            if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_SCHED_EXIT):
                self.trace_sched(p, am_out_exited)
            self._check_long_schedule(p)
            if self.state.profile_runnable_procs:
                self.profile_runnable_proc(p, am_inactive)
        p.status = EXITED
        if self.fates is not None and p.flags & F_TRACER:
            self.keep_fate(("x", p.pid))
        p.timer_gen += 1
        if p.coro is not None:
            try:
                p.coro.close()
            except BaseException:
                pass
        self.stats.processes_exited += 1
        if self.process_limit is not None:
            self.process_limit.give()
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
            else:
                owner = self.remote_port_scheduler(to)
                if owner is not None:
                    self.transport.peer(owner, ("exit", to, p.pid, reason, link, None))
            return
        if self.is_local_pid(to):
            t = self.procs.get(to)
            if t is not None and t.status != EXITED:
                self.exit_signal_arrived(t, p.pid, reason, link, token, c_p=p)
        else:
            self.transport.peer(
                pid_owner(to, self.nsched), ("exit", to, p.pid, reason, link, token)
            )

    def exit_signal_arrived(self, t: Proc, from_, reason, link: bool, token=None, c_p=None) -> None:
        """``erts_send_exit_signal`` on ``t``; for a link (a process's
        ``doit_exit_link``, a port's ``sweep_one_link``) the link is removed
        first and, once the signal is sent, a receiver it does not end is
        traced ``getting_unlinked``, whether or not it traps exits (both
        trace only when ``send_exit_signal`` returned >= 0; -1 is "receiver
        will exit")."""
        if t.status in (EXITED, EXITING) or t.pending_exit is not None:
            # erts_pid2proc without ERTS_P2P_FLG_ALLOW_OTHER_X finds no
            # exiting process (exit_2, doit_exit_link): no signal, no trace
            return
        had_link = link and from_ in t.links
        if link:
            t.link_discard(from_)
        ends = False
        if reason is am_kill and not link:
            self._kill(t, am_killed)
            ends = True
        elif t.trap_exit:
            self._queue_message(t, (am_EXIT, from_, reason), token, trace_recv=True)
        elif reason is not am_normal:
            # send_exit_signal: rsn = reason == am_kill ? am_killed : reason (a
            # link's kill ends a process that does not trap exits as killed)
            self._kill(t, am_killed if reason is am_kill else reason)
            ends = True
        if (
            had_link
            and not ends
            and t.tracer is not NIL
            and are_trace_flags_on(t.flags, F_TRACE_PROCS)
        ):
            self.trace_proc(c_p, t, am_getting_unlinked, from_)

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
            # exit_2 to itself: ERTS_XSIG_FLG_NO_IGN_NORMAL, so a caller that
            # does not trap exits ends, even with reason normal
            if reason is am_kill:
                raise Exit(am_killed)
            if not p.trap_exit:
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
    def op_link(self, p: Proc, to) -> str | None:
        """bif.c ``link_1``: the call is traced ``link`` first, whatever its
        argument (a dead pid, a closed port, ``self()``, a process already
        linked, an atom: each is traced, then fails or does nothing).

        A port of another scheduler (smp) is asked there (``link``, to
        ``ResourceOps.port_link_arrived``): the caller has its side of the
        link at once, so that an exit signal it sends or gets meanwhile finds
        it, and waits for the answer (``PORT_REMOTE``; ``port_link_refused``
        takes the link back when it is ``noproc``)."""
        if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_PROCS):
            self.trace_proc(p, p, am_link, to)
        if type(to) is Port:
            port = self.ports.get(to)
            if port is None:
                owner = self.remote_port_scheduler(to)
                if owner is not None:
                    p.link_add(to)
                    self.transport.peer(owner, ("link", to, p.pid, None))
                    return PORT_REMOTE
                self._link_noproc(p, to)
                return None
            p.link_add(to)
            port.links.add(p.pid)
            return None
        if type(to) is not Pid:
            raise Error(am_badarg)
        if to == p.pid:
            # insert_internal_link with rp == p: no link, and rp (p itself)
            # is traced getting_linked when it is traced for procs
            if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_PROCS):
                self.trace_proc(p, p, am_getting_linked, p.pid)
            return
        if not self.is_alive(to):
            self._link_noproc(p, to)
            return None
        # (a process linked already is linked again: erts_add_link changes
        # nothing, but insert_internal_link passes set_on_link on and traces
        # getting_linked again)
        p.link_add(to)
        inherit = inherited_tracing(p, F_TRACE_SOL, F_TRACE_SOL1)
        if self.is_local_pid(to):
            self.link_arrived(self.procs[to], p.pid, inherit, c_p=p)
        else:
            self.transport.peer(pid_owner(to, self.nsched), ("link", to, p.pid, inherit))
        return None

    def port_link_refused(self, p: Proc, port) -> None:
        """A port of another scheduler answered a link with ``noproc`` (it
        was gone or closing): the caller's side of the link goes, and the
        call ends as ``link_1``'s ``res_no_proc``."""
        p.link_discard(port)
        self._link_noproc(p, port)

    def _link_noproc(self, p: Proc, to) -> None:
        """link_1's ``res_no_proc``: a trapping caller gets ``{'EXIT', To,
        noproc}`` and ``link`` returns true; another fails with
        ``error:noproc`` (``EXC_NOPROC``)."""
        if p.trap_exit:
            self._queue_message(p, (am_EXIT, to, am_noproc), None, trace_recv=True)
            return
        raise Error(am_noproc)

    def link_arrived(self, t: Proc, from_, inherit=None, c_p=None) -> None:
        """``insert_internal_link`` on ``t``: it looks ``t`` up with
        ``ERTS_P2P_FLG_ALLOW_OTHER_X``, so a process that was sent kill and
        has not exited yet is linked (and traced ``getting_linked``) like any
        other, and its exit then signals ``from_``; a process gone answers
        ``noproc``."""
        if t.status == EXITED:
            self._send_exit_signal(t, from_, am_noproc, link=True)
            return
        t.link_add(from_)
        inherit_tracing(t, inherit)
        if t.tracer is not NIL and are_trace_flags_on(t.flags, F_TRACE_PROCS):
            self.trace_proc(c_p, t, am_getting_linked, from_)

    def op_unlink(self, p: Proc, to) -> None:
        """bif.c ``unlink_1``: the call is traced ``unlink`` first, whatever
        its argument (a process not linked, a closed port, an atom); the
        other side is traced getting_unlinked only when it had the link."""
        if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_PROCS):
            self.trace_proc(p, p, am_unlink, to)
        if type(to) not in (Pid, Port):
            raise Error(am_badarg)
        had = to in p.links
        p.link_discard(to)
        if type(to) is Port:
            port = self.ports.get(to)
            if port is not None:
                port.links.discard(p.pid)
            else:
                owner = self.remote_port_scheduler(to)
                if owner is not None:
                    self.transport.peer(owner, ("unlink", to, p.pid))
        if type(to) is Pid and had:
            if self.is_local_pid(to):
                t = self.procs.get(to)
                if t is not None:
                    self.unlink_arrived(t, p.pid, c_p=p)
            else:
                self.transport.peer(pid_owner(to, self.nsched), ("unlink", to, p.pid))

    def unlink_arrived(self, t: Proc, from_, c_p=None) -> None:
        if from_ in t.links:
            t.link_discard(from_)
            if t.tracer is not NIL and are_trace_flags_on(t.flags, F_TRACE_PROCS):
                self.trace_proc(c_p, t, am_getting_unlinked, from_)

    # ---------------------------------------------------------------- registry
    async def op_register(self, p: Proc, name, pid) -> None:
        if type(name) is not Atom or name is am_undefined:
            raise Error(am_badarg)
        if self.smp:
            # the dispatcher holds the registry; the registered process's own
            # scheduler takes the name and traces it (``set_reg``)
            ok = await self.transport.rpc(p, "register", name, pid)
            if ok is not True:
                raise Error(am_badarg)
            self.registry[name] = pid
        else:
            self.register(name, pid, c_p=p)

    def exiting(self, pid) -> bool:
        """A process of this scheduler that ``erts_pid2proc`` without
        ``ERTS_P2P_FLG_ALLOW_OTHER_X`` does not find although it is still
        there: exiting, or sent an exit signal that will end it (a kill) it
        has not acted on yet.  ``register/2`` of another process refuses it
        (smp: the controller asks its scheduler, ``Emulator._serve_one``)."""
        t = self.procs.get(pid) if type(pid) is Pid else None
        return t is not None and (t.status == EXITING or t.pending_exit is not None)

    def register(self, name: Atom, pid, c_p: Proc | None = None) -> None:
        """``erts_register_name`` (register.c): the checks (nonsmp authority;
        smp applies them after the dispatcher agreed), then the name."""
        if type(name) is not Atom or name is am_undefined:
            raise Error(am_badarg)
        if self.whereis(name) is not None:
            raise Error(am_badarg)
        t = self.procs.get(pid) if type(pid) is Pid else None
        if type(pid) is Pid and (t is None or t.status == EXITED):
            raise Error(am_badarg)
        if t is not None and t is not c_p and self.exiting(pid):
            # another process is looked up with erts_pid2proc, which finds no
            # exiting one (a process sent kill): badarg, and nothing traced
            raise Error(am_badarg)
        if t is not None and t.reg_name is not None:
            raise Error(am_badarg)
        if type(pid) is Port:
            port = self.ports.get(pid)
            if port is None or port.closed or port.reg_name is not None:
                raise Error(am_badarg)
        elif type(pid) is not Pid:
            raise Error(am_badarg)
        self.set_reg(name, pid, c_p)

    def set_reg(self, name: Atom, pid, c_p: Proc | None = None) -> None:
        """The name is taken: ``register`` is traced on the registered process
        (or port) whoever called ``register/2`` (register.c:
        ``trace_proc(c_p, proc, am_register, name)``), once."""
        self.registry[name] = pid
        t = self.procs.get(pid) if type(pid) is Pid else None
        if t is not None and t.status != EXITED and t.reg_name is None:
            t.reg_name = name
            if t.tracer is not NIL and are_trace_flags_on(t.flags, F_TRACE_PROCS):
                self.trace_proc(c_p, t, am_register, name)
        port = self.ports.get(pid) if type(pid) is Port else None
        if port is not None and port.reg_name is None:
            port.reg_name = name
            if port.tracer is not NIL and are_trace_flags_on(port.flags, F_TRACE_PORTS):
                self.trace_port(port, am_register, name)

    async def op_unregister(self, p: Proc, name) -> None:
        owner = self.whereis(name)
        if owner is None:
            raise Error(am_badarg)
        if self.smp:
            # the controller tells every scheduler (``unset_reg``); the
            # owner's traces it
            await self.transport.rpc(p, "unregister", name, owner)
        else:
            self.unset_reg(name, owner, c_p=p)

    def unset_reg(self, name: Atom, owner, c_p: Proc | None = None) -> None:
        """``erts_unregister_name``: ``unregister`` is traced on the process
        (or port) that held the name."""
        if self.registry.get(name) == owner:
            del self.registry[name]
        t = self.procs.get(owner) if type(owner) is Pid else None
        if t is not None and t.reg_name == name:
            t.reg_name = None
            if t.tracer is not NIL and are_trace_flags_on(t.flags, F_TRACE_PROCS):
                self.trace_proc(c_p, t, am_unregister, name)
        port = self.ports.get(owner) if type(owner) is Port else None
        if port is not None and port.reg_name == name:
            port.reg_name = None
            if port.tracer is not NIL and are_trace_flags_on(port.flags, F_TRACE_PORTS):
                self.trace_port(port, am_unregister, name)

    # ---------------------------------------------------------------- messages
    def op_send(self, p: Proc, to, msg) -> None:
        """``do_send`` (17.x bif.c).  The send is traced with the destination
        *as written* (``trace_send(p, to, msg)``): a name, ``{Name, Node}`` or
        a pid.  A pid is traced before it is looked up (a dead one gives
        ``send_to_non_existing_process``); a name only once it resolves to a
        process, or just before the ``badarg`` when it does not; ``{Name,
        Node}`` on this node is traced first and sends nothing, silently, when
        the name is free.  The seq_trace token moves only on the path that
        queues the message (``erts_send_message``)."""
        tt = type(to)
        if tt is Pid:
            # one lookup serves the trace (alive?) and the send (a process of
            # this scheduler); procs holds only this scheduler's processes
            t = self.procs.get(to)
            if p.tracer is not NIL:
                self.trace_send(p, to, msg, t)
            self.save_calls(p, am_send)
            self._send_message(p, to, msg, t)
            return
        if tt is Atom:
            dest = self.whereis(to)
            if type(dest) is Port:
                self._send_to_port(p, dest, msg)
                return
            if p.tracer is not NIL:
                self.trace_send(p, to, msg)
            self.save_calls(p, am_send)
            if dest is None:
                raise Error(am_badarg)
            self._send_message(p, dest, msg)
            return
        if tt is tuple and len(to) == 2 and type(to[0]) is Atom and type(to[1]) is Atom:
            if p.tracer is not NIL:
                self.trace_send(p, to, msg)
            self.save_calls(p, am_send)
            dest = self.whereis(to[0])
            if type(dest) is Port:
                self._send_to_port(p, dest, msg)
            elif dest is not None:
                self._send_message(p, dest, msg)
            return
        if tt is Port:
            self._send_to_port(p, to, msg)
            return
        raise Error(am_badarg)

    def _send_to_port(self, p: Proc, port, msg) -> None:
        """``do_send``'s ``port_common``: ``{Pid, {command, Data}}`` to a port,
        traced with the port id (once)."""
        if type(msg) is tuple and len(msg) == 2 and type(msg[1]) is tuple and len(msg[1]) == 2:
            if p.tracer is not NIL:
                self.trace_send(p, port, msg)
            self.op_port_command(p, port, msg[1][1], reply=False)
            return
        raise Error(am_badarg)

    def _send_message(self, p: Proc, dest: Pid, msg, t: Proc | None = None) -> None:
        """``erts_send_message``: only a live receiver gets the message, and
        only then does a seq_trace token advance and make its ``send`` event.
        ``t``: ``dest``'s process when the caller looked it up already."""
        self.stats.messages_sent += 1
        if t is not None or self.is_local_pid(dest):
            if t is None:
                t = self.procs.get(dest)
                if t is None:
                    return
            if t.status == EXITED:
                return
            token = self._seq_send(p, dest, msg) if p.token is not None else None
            self._queue_message(t, msg, token, trace_recv=True)
            return
        if not self.is_alive(dest):
            return
        token = self._seq_send(p, dest, msg) if p.token is not None else None
        self.transport.peer(pid_owner(dest, self.nsched), ("msg", dest, msg, token))

    def _queue_message(self, t: Proc, msg, token, trace_recv=False) -> None:
        """``erts_queue_message`` (+ ``trace_receive`` on a send)."""
        t.deliver(msg, token)
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

    def deliver_sys_run(self, to, bodies: list) -> None:
        """A run of system messages the dispatcher delivered to one receiver:
        into the mailbox in one step (system messages are not traced as
        received and carry no seq_trace token)."""
        if type(to) is Port:
            for body in bodies:
                self.write_driver_port(to, body)
            return
        t = self.procs.get(to)
        if t is None or t.status == EXITED:
            self.stats.sys_arrived_dead += len(bodies)
            return
        t.deliver_many(bodies)
        if t.kept is not None:
            t.kept.extend(bodies)
        if t.status == WAITING:
            self._make_runnable(t)

    def on_message_removed(self, p: Proc, entry) -> None:
        """A receive took ``entry`` out of the queue: seq_trace token handling."""
        # beam_emu remove_message: saved whether or not there is a token
        self.save_calls(p, am_receive)
        if type(entry) is not Tokened:
            p.token = None
            return
        token = entry.token
        if token is am_undefined:
            # a port's message (erts_queue_message(..., am_undefined)):
            # beam_emu's remove_message leaves the token as it is
            return
        p.token = list(token)
        serial = token[2]
        p.seq_lastcnt = serial
        if p.seq_clock < serial:
            p.seq_clock = serial
        self.seq_trace_output(p.token, entry.msg, M.SEQ_TRACE_RECEIVE, p.pid, p)

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
