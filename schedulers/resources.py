"""The heap and the ports of processes: garbage collection (``trace_gc``,
``monitor_long_gc``, ``monitor_large_heap``) and port commands
(``trace_port_open``, ``trace_port``, ``trace_sched_ports_where``,
``trace_virtual_sched``, ``busy_port``, ``monitor_long_schedule_port``,
``profile_runnable_port``)."""

from __future__ import annotations

from collections import deque

from smp.wire.etf import encode

from .common import (
    EXITED,
    F_TRACE_GC,
    F_TRACE_PORTS,
    F_TRACE_SCHED,
    F_TRACE_SCHED_PORTS,
    NIL,
    PORT_REMOTE,
    SUSPENDED,
    TRACEE_FLAGS,
    Error,
    Pid,
    Port,
    Proc,
    _a,
    am_active,
    am_badarg,
    am_busy_dist_port,
    am_busy_port,
    am_closed,
    am_command,
    am_gc_end,
    am_gc_start,
    am_in,
    am_inactive,
    am_kill,
    am_killed,
    am_noproc,
    am_normal,
    am_out,
    am_start,
    am_undefined,
    am_unregister,
    are_trace_flags_on,
    make_driver,
    pid_owner,
    port_owner,
)

__all__ = ["ResourceOps"]


class ResourceOps:
    """Mixed into ``schedulers.engine.Node``; runs in the scheduler process."""

    # ================================================================ gc
    def op_allocate(self, p: Proc, words: int, keep: bool, binary: int) -> None:
        if type(words) is not int or words < 0:
            raise Error(am_badarg)
        if p.heap.allocate(words, keep, binary):
            self.op_gc(p)

    def op_gc(self, p: Proc) -> None:
        traced = p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_GC)
        if traced:
            self.trace_gc(p, am_gc_start)
        cost = p.heap.collect()
        p.busy_ms += cost
        if traced and p.tracer is not NIL:
            self.trace_gc(p, am_gc_end)
        st = self.state
        if st.system_monitor is not NIL:
            # erl_gc.c: only a collection that took longer than the limit
            if st.long_gc and cost > st.long_gc:
                self.monitor_long_gc(p, cost)
            if st.large_heap and p.heap.total_block_size() >= st.large_heap:
                self.monitor_large_heap(p)

    # ================================================================ ports
    def op_open_port(self, p: Proc, driver: str, options: dict) -> Port:
        port_id = self.new_port_id()
        port = make_driver(driver, port_id, p.pid, options)
        dflags, dtracer = self._default_tracing()
        if dtracer is not NIL and dflags & TRACEE_FLAGS:
            port.flags, port.tracer = dflags & TRACEE_FLAGS, dtracer
        self.ports[port_id] = port
        p.port_add(port_id)
        p.link_add(port_id)
        port.links.add(p.pid)
        if self.smp and not port.dist:
            # the dispatcher learns the ports it may write traces to
            self.transport.table_event(("port_open", port_id))
        if port.tracer is not NIL and are_trace_flags_on(port.flags, F_TRACE_PORTS):
            self.trace_port_open(port, p.pid, _a(driver))
        # erts_open_driver: the driver's start callback runs as the port
        # scheduled in and out again ('start')
        if port.tracer is not NIL and are_trace_flags_on(port.flags, F_TRACE_SCHED_PORTS):
            self.trace_sched_ports_where(port, am_in, am_start)
            self.trace_sched_ports_where(port, am_out, am_start)
        return port_id

    def op_port_command(self, p: Proc, port_id, data, reply: bool = True):
        """Returns False when the port is busy: the caller is suspended.

        Any process may command any port of the node.  In smp a port on
        another scheduler gets the command there (``port_cmd``): the result
        is ``PORT_REMOTE`` and the caller waits for the port's scheduler to
        answer (done, busy: try again once it is not, or ``badarg``)."""
        port = self.ports.get(port_id)
        if port is None:
            owner = self.remote_port_scheduler(port_id)
            if owner is not None:
                self.transport.peer(owner, ("port_cmd", port_id, p.pid, data, reply))
                return PORT_REMOTE
        if port is None or port.closed:
            raise Error(am_badarg)
        st = self.state
        if port.busy:
            self._busy_port(port, p.pid)
            return False
        sync = port.cost_ms > 0
        if sync and p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_SCHED):
            self.trace_virtual_sched(p, am_out)
        if st.profile_exclusive and st.profile_runnable_procs:
            self.profile_runnable_proc(p, am_inactive)
        self._run_port_command(port, data)
        if st.profile_exclusive and st.profile_runnable_procs:
            self.profile_runnable_proc(p, am_active)
        if sync:
            p.busy_ms += port.cost_ms
            if (
                st.long_schedule
                and st.system_monitor is not NIL
                and port.cost_ms > st.long_schedule
            ):
                self.monitor_long_schedule_port(port, _a("proc_sig"), port.cost_ms)
            if p.tracer is not NIL and are_trace_flags_on(p.flags, F_TRACE_SCHED):
                self.trace_virtual_sched(p, am_in)
        return True

    def _busy_port(self, port, caller: Pid) -> None:
        """A command to a busy port: ``busy_port`` (``busy_dist_port``) for the caller."""
        st = self.state
        enabled = st.busy_dist_port if port.dist else st.busy_port
        if enabled and st.system_monitor is not NIL:
            what = am_busy_dist_port if port.dist else am_busy_port
            self.monitor_generic(caller, what, port.id)

    def _run_port_command(self, port, data) -> None:
        """The port's side of a command, on the port's scheduler: runnable
        profile, ``in``/``out`` ``command``, the driver's output to the owner,
        and the timer that ends a busy spell."""
        st = self.state
        if st.profile_runnable_ports:
            self.profile_runnable_port(port, am_active)
        if port.tracer is not NIL and are_trace_flags_on(port.flags, F_TRACE_SCHED_PORTS):
            self.trace_sched_ports_where(port, am_in, am_command)
        for out in port.command(data):
            self._port_output(port, out)
        if port.tracer is not NIL and are_trace_flags_on(port.flags, F_TRACE_SCHED_PORTS):
            self.trace_sched_ports_where(port, am_out, am_command)
        if st.profile_runnable_ports:
            self.profile_runnable_port(port, am_inactive)
        if port.busy and port.busy_ms:
            self.arm_timer(self.monotonic() + port.busy_ms / 1000, port, -1)

    def remote_port_command(self, port_id, caller: Pid, data, reply: bool) -> None:
        """smp: ``port_command`` from a process on another scheduler, run on
        the port's.  A busy port fires ``busy_port`` for the caller, who waits
        until the port is free again (told ``False``: try again).  ``reply``
        is False for ``Port ! {Pid, {command, Data}}``, which does not wait."""
        port = self.ports.get(port_id)
        if port is None or port.closed:
            if reply:
                self._port_reply(caller, am_badarg)
            return
        if port.busy:
            self._busy_port(port, caller)
            if reply:
                self.remote_waiting.setdefault(port_id, []).append(caller)
            return
        self._run_port_command(port, data)
        if reply:
            self._port_reply(caller, True)

    def _port_reply(self, caller: Pid, value) -> None:
        self.transport.peer(pid_owner(caller, self.nsched), ("port_reply", caller, value))

    def port_reply_arrived(self, pid: Pid, value) -> None:
        """The answer to a ``port_cmd``: ``True`` done, ``False`` try again,
        ``badarg``; to a link to a port (``port_link_arrived``): ``True``
        linked, ``noproc``."""
        p = self.procs.get(pid)
        if p is not None and p.status == SUSPENDED and p.pending_exit is None:
            p.resume = Error(am_badarg) if value is am_badarg else value
            self._make_runnable(p)

    def write_driver_port(self, port_id, msg) -> bool:
        """smp: a system message the dispatcher delivered to a port a process
        of this scheduler opened (``write_sys_msg_to_port``); False when the
        port is no longer a valid tracer (closed or busy meanwhile)."""
        pt = self.ports.get(port_id)
        if pt is None or not pt.valid_tracer:
            self.stats.sys_arrived_dead += 1
            return False

        for out in pt.command(encode(msg)):
            self._port_output(pt, out)
        return True

    def _port_output(self, port, data) -> None:
        owner = self.procs.get(port.owner)
        if owner is not None and owner.status != EXITED:
            # drivers queue with the seq_trace token 'undefined' (io.c)
            self._queue_message(owner, (port.id, (_a("data"), data)), am_undefined, trace_recv=True)

    def port_unbusy(self, port) -> None:
        port.busy = False
        waiting = self.suspended_on_port.pop(port.id, deque())
        for p in waiting:
            if p.status == SUSPENDED:
                self._make_runnable(p)
        for caller in self.remote_waiting.pop(port.id, ()):
            self._port_reply(caller, False)

    def remote_port_scheduler(self, port_id) -> int | None:
        """smp: the scheduler of a port a process of another scheduler opened
        (``port_id`` is not one of this scheduler's ports), where a command,
        a link, an unlink or an exit signal for it goes; None for a port of
        this one, of the controller (a tracer port) or in nonsmp."""
        if not self.smp or type(port_id) is not Port:
            return None
        owner = port_owner(port_id, self.nsched)
        return None if owner in (0, self.sched_id) else owner

    def port_link_arrived(self, port_id, from_: Pid) -> None:
        """bif.c ``link_1`` on a port of this scheduler, for a process of
        another (``ProcessOps.op_link``): an open port takes its side of the
        link (``erts_add_link(&ERTS_P_LINKS(prt), ...)``) and the caller is
        told ``True``; a port gone or closing (``ERTS_PORT_SFLGS_INVALID_LOOKUP``)
        answers ``noproc``.  The two sides are made in one BIF in 17.x; here
        the caller waits, suspended, for the answer, and any signal the port
        sends it later (its close's exit) comes after it on the same channel."""
        port = self.ports.get(port_id)
        if port is None or port.closed:
            self._port_reply(from_, am_noproc)
            return
        port.links.add(from_)
        self._port_reply(from_, True)

    def port_unlink_arrived(self, port_id, from_: Pid) -> None:
        """bif.c ``unlink_1`` on a port of this scheduler, for a process of
        another: the port's side of the link goes."""
        port = self.ports.get(port_id)
        if port is not None:
            port.links.discard(from_)

    def port_exit_arrived(self, port_id, from_: Pid, reason, link: bool) -> None:
        """An exit signal from a process of another scheduler to a port of
        this one: through a link (the process's exit sweep, ``doit_exit_link``),
        the port task ``schedule_port_exit`` queues, run as it arrives, when
        this scheduler is between two slices; from ``exit(Port, Reason)``,
        the port closes unless the reason is ``normal``, as on the port's
        own scheduler (``ProcessOps._send_exit_signal``)."""
        if link:
            self.schedule_port_exit(port_id, from_, reason)
            self.run_port_tasks()
        elif port_id in self.ports and reason != am_normal:
            self._close_port(port_id, reason)

    def op_port_close(self, p: Proc, port_id) -> None:
        port = self.ports.get(port_id)
        if port is None or port.closed or port.owner != p.pid:
            raise Error(am_badarg)
        # (no unlink: the close's link sweep signals the owner too, as a
        # process linked to the port, with reason normal)
        self._close_port(port_id, am_normal)

    def schedule_port_exit(self, port_id, from_, reason) -> None:
        """``erts_port_exit`` from a dying process's link sweep
        (``doit_exit_link``, with ``ERTS_PORT_SIG_FLG_FORCE_SCHED |
        ERTS_PORT_SIG_FLG_BROKEN_LINK``): never run in the sweep, but as a
        task of the port, which ``schedule()`` runs after the process is
        scheduled out and before it picks the next one (``run_port_tasks``).
        A port of another scheduler gets the exit signal there
        (``port_exit_arrived``)."""
        if port_id in self.ports:
            self.port_tasks.append((port_id, from_, reason))
            return
        owner = self.remote_port_scheduler(port_id)
        if owner is not None:
            self.transport.peer(owner, ("exit", port_id, from_, reason, True, None))

    def run_port_tasks(self) -> None:
        """``erts_port_task_execute`` on the exit tasks ``schedule_port_exit``
        queued, in their order (``port_sig_exit``): the port closes with the
        process's reason when that process was its connected one or the
        reason is not ``normal`` (a ``normal`` exit of another linked process
        is dropped)."""
        tasks = self.port_tasks
        while tasks:
            port_id, from_, reason = tasks.popleft()
            port = self.ports.get(port_id)
            # call_deliver_port_exit: a broken link's exit is dropped when the
            # port's side of the link is gone already
            if port is None or from_ not in port.links:
                continue
            port.links.discard(from_)
            if port.owner == from_ or reason != am_normal:
                self._close_port(port_id, reason)

    def _close_port(self, port_id, reason) -> None:
        port = self.ports.pop(port_id, None)
        if port is None:
            return
        port.closed = True
        owner = self.procs.get(port.owner)
        if owner is not None:
            owner.port_discard(port_id)  # (its link goes in the sweep below)
        if port.tracer is not NIL and are_trace_flags_on(port.flags, F_TRACE_PORTS):
            self.trace_port(port, am_closed, reason)
        name = port.reg_name
        if name is not None:
            # io.c erts_do_exit_port: right after 'closed' is traced, a
            # registered port loses its name (erts_unregister_name, which
            # traces 'unregister' on a port with the ports flag); in smp the
            # dispatcher drops the name on the port_close event below
            port.reg_name = None
            if self.registry.get(name) == port_id:
                del self.registry[name]
            if port.tracer is not NIL and are_trace_flags_on(port.flags, F_TRACE_PORTS):
                self.trace_port(port, am_unregister, name)
        # then its links, in the post-order of its link tree (sweep_one_link):
        # each linked process loses its link and gets the exit signal ('kill'
        # arrives as 'killed'); one the signal does not end is traced
        # getting_unlinked (exit_signal_arrived)
        signal = am_killed if reason is am_kill else reason
        for pid in port.links.sweep():
            if not self.is_local_pid(pid):
                # a process of another scheduler linked to it (port_link_arrived):
                # the signal goes there (port_link_exit_arrived)
                owner = pid_owner(pid, self.nsched)
                self.transport.peer(owner, ("exit", pid, port_id, signal, True, None))
                continue
            t = self.procs.get(pid)
            if t is not None and t.status != EXITED and port_id in t.links:
                self.exit_signal_arrived(t, port_id, signal, link=True)
        for p in self.suspended_on_port.pop(port_id, deque()):
            if p.status == SUSPENDED:
                self._make_runnable(p)
        for caller in self.remote_waiting.pop(port_id, ()):
            self._port_reply(caller, False)  # tries again and finds it closed
        if self.smp and not port.dist:
            self.transport.table_event(("port_close", port_id))
        if not self.smp:
            self.state.trace_check_exiting(port_id, smp=False)
