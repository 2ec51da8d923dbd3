"""Where every system message is made: the TRACE builders (``trace_sched``,
``trace_send``, ...), ``erts_check_my_tracer_proc``, the SYSMON and SYSPROF
builders with ``profile_send``, the error logger and
``erts_send_sys_msg_proc``.  Each hands its message on per mode, most through
``schedulers.delivery`` (``send_to_tracer`` / ``send_to_port`` with the
nonsmp fake schedule pair).  In smp mode each goes to the dispatcher's queue
(``enqueue_sys_msg``); in nonsmp mode the receiver is looked up now
(``ERTS_GET_TRACER_REF`` and the monitor, profiler and error-logger
lookups), decided by the same ``smp.core.dispatch.resolve`` the smp
dispatcher uses: the modes differ only in what a drop does, as the seed's
``#ifdef ERTS_SMP`` branches do."""

from __future__ import annotations

from smp.core.dispatch import DELIVER_PID, DROP, disp_failure

from .common import (
    EXITED,
    EXITING,
    F_TIMESTAMP,
    F_TRACE_SCHED_NO,
    F_TRACE_SEND,
    NIL,
    TRACEE_FLAGS,
    M,
    Pid,
    Proc,
    am_active,
    am_error_logger,
    am_exit,
    am_out,
    am_out_exited,
    am_out_exiting,
    am_send,
    am_send_to_non_existing,
    are_trace_flags_on,
)
from .delivery import SysMsgDelivery

__all__ = ["TracePoints"]


class TracePoints(SysMsgDelivery):
    """Mixed into ``schedulers.engine.Node``; runs in the scheduler process.
    Each builder hands its message on through ``SysMsgDelivery``."""

    # ================================================================ tracer check
    def erts_check_my_tracer_proc(self, p: Proc) -> None:
        """smp: a tracee whose tracer is gone loses its flags when scheduled in."""
        if type(p.tracer) is Pid and not self.is_tracer(p.tracer):
            p.flags &= ~TRACEE_FLAGS
            p.tracer = NIL
            self.stats.tracer_checks_reset += 1

    # ================================================================ TRACE builders
    def trace_sched(self, p: Proc, what, never_fake=False) -> None:
        """``trace_sched_aux``."""
        if p.tracer is NIL:
            return
        no_fake = never_fake or what in (am_out, am_out_exiting, am_out_exited)
        sched_no = are_trace_flags_on(p.flags, F_TRACE_SCHED_NO)
        mfa = 0 if p.status == EXITING or p.current is None else p.current
        msg = M.trace_sched(
            p.pid, what, mfa, (self.sched_id if self.smp else 1) if sched_no else None
        )
        self._send_to_tracer(p, p.pid, msg, bool(p.flags & F_TIMESTAMP), None if no_fake else p)

    def trace_virtual_sched(self, p: Proc, what) -> None:
        self.trace_sched(p, what, never_fake=True)

    def trace_send(self, p: Proc, to, msg, local: Proc | None = None) -> None:
        """``local``: ``to``'s process when the caller found it on this scheduler."""
        if not are_trace_flags_on(p.flags, F_TRACE_SEND):
            return
        op = am_send
        if local is not None:
            if local.status == EXITED:
                op = am_send_to_non_existing
        elif type(to) is Pid and not self.is_alive(to):
            op = am_send_to_non_existing
        self._send_to_tracer(
            p, p.pid, M.trace_send(p.pid, op, msg, to), bool(p.flags & F_TIMESTAMP), p
        )

    def trace_receive(self, rp: Proc, msg) -> None:
        self._send_to_tracer(
            rp, rp.pid, M.trace_receive(rp.pid, msg), bool(rp.flags & F_TIMESTAMP), rp
        )

    def trace_proc(self, c_p: Proc | None, t_p, what, data) -> None:
        # nonsmp: no fake schedule out and in again after an exit
        fake = None if (not self.smp and what is am_exit) else c_p
        self._send_to_tracer(
            t_p, t_p.pid, M.trace_proc(t_p.pid, what, data), bool(t_p.flags & F_TIMESTAMP), fake
        )

    def trace_proc_spawn(self, p: Proc, child, mod, func, args) -> None:
        self._send_to_tracer(
            p,
            p.pid,
            M.trace_proc_spawn(p.pid, child, mod, func, args),
            bool(p.flags & F_TIMESTAMP),
            p,
        )

    def trace_gc(self, p: Proc, what) -> None:
        self._send_to_tracer(
            p, p.pid, M.trace_gc(p.pid, what, p.heap.gc_values()), bool(p.flags & F_TIMESTAMP), p
        )

    def trace_port_open(self, port, calling_pid, drv_name) -> None:
        self._send_to_tracer(
            port,
            port.id,
            M.trace_port_open(calling_pid, port.id, drv_name),
            bool(port.flags & F_TIMESTAMP),
            None,
        )

    def trace_port(self, port, what, data) -> None:
        self._send_to_tracer(
            port, port.id, M.trace_port(port.id, what, data), bool(port.flags & F_TIMESTAMP), None
        )

    def trace_sched_ports_where(self, port, what, where) -> None:
        sched = (
            (self.sched_id if self.smp else 1)
            if are_trace_flags_on(port.flags, F_TRACE_SCHED_NO)
            else None
        )
        self._send_to_tracer(
            port,
            port.id,
            M.trace_sched_ports_where(port.id, what, where, sched),
            bool(port.flags & F_TIMESTAMP),
            None,
        )

    # ================================================================ SYSMON
    def _monitor_send(self, from_, msg) -> None:
        if self.smp:
            self._enqueue(M.SYS_MSG_TYPE_SYSMON, from_, NIL, msg, M.TS_NONE)
            return
        d = self._decide_now(M.SYS_MSG_TYPE_SYSMON, from_, NIL)
        if d.action != DELIVER_PID:  # a monitor is a process (erlang:system_monitor/2)
            self.stats.suppressed(M.SYS_MSG_TYPE_SYSMON, d.reason or "no_receiver")
            if self.fates is not None:
                self._fate(
                    M.SYS_MSG_TYPE_SYSMON,
                    d.receiver,
                    msg,
                    "suppressed " + (d.reason or "no_receiver"),
                )
            return
        self._deliver_now(self.procs[d.receiver], M.SYS_MSG_TYPE_SYSMON, msg)

    def monitor_long_gc(self, p: Proc, time_ms: int) -> None:
        self._monitor_send(p.pid, M.monitor_long_gc(p.pid, time_ms, p.heap.monitor_sizes()))

    def monitor_large_heap(self, p: Proc) -> None:
        self._monitor_send(p.pid, M.monitor_large_heap(p.pid, p.heap.monitor_sizes()))

    def monitor_long_schedule_proc(self, p: Proc, in_mfa, out_mfa, time_ms) -> None:
        self._monitor_send(p.pid, M.monitor_long_schedule_proc(p.pid, in_mfa, out_mfa, time_ms))

    def monitor_long_schedule_port(self, port, op, time_ms) -> None:
        self._monitor_send(port.id, M.monitor_long_schedule_port(port.id, op, time_ms))

    def monitor_generic(self, pid, what, spec) -> None:
        """``monitor_generic``: ``{monitor, Pid, busy_port|busy_dist_port, Port}``."""
        self._monitor_send(pid, M.monitor_generic(pid, what, spec))

    # ================================================================ SYSPROF
    def profile_send(self, from_, msg) -> None:
        """nonsmp ``profile_send``: to the profiler now; never about itself
        ("do not profile profiler pid", NIL == NIL too)."""
        d = self._decide_now(M.SYS_MSG_TYPE_SYSPROF, from_, NIL)
        if d.action == DROP:
            self.stats.suppressed(M.SYS_MSG_TYPE_SYSPROF, d.reason)
            if self.fates is not None:
                self._fate(M.SYS_MSG_TYPE_SYSPROF, d.receiver, msg, "suppressed " + d.reason)
        elif d.action == DELIVER_PID:
            self._deliver_now(self.procs[d.receiver], M.SYS_MSG_TYPE_SYSPROF, msg)
        else:
            self._write_port(self.tracer_port(d.receiver), msg, M.SYS_MSG_TYPE_SYSPROF)

    def _profile(self, from_, msg, ts_kind: int) -> None:
        if self.smp:
            # TS_SCHED: the queue needs the state to count active schedulers
            # without opening the body, so it travels in the unused 'to' field.
            to = msg[3] if ts_kind == M.TS_SCHED else NIL
            self._enqueue(M.SYS_MSG_TYPE_SYSPROF, from_, to, msg, ts_kind)
        else:
            self.profile_send(
                from_, M.complete(msg, ts_kind, self.clock.now(), self.state.active_sched)
            )

    def profile_scheduler(self, state_atom) -> None:
        if not self.smp:
            self.state.active_sched += 1 if state_atom is am_active else -1
        self._profile(NIL, M.profile_scheduler(self.sched_id, state_atom), M.TS_SCHED)

    def profile_scheduler_q(self, state_atom, no_schedulers: int, ts) -> None:
        msg = M.profile_scheduler_q(self.sched_id, state_atom, no_schedulers, ts)
        if self.smp:
            self._enqueue(M.SYS_MSG_TYPE_SYSPROF, NIL, NIL, msg, M.TS_NONE)
        else:
            self.profile_send(NIL, msg)

    def profile_runnable_proc(self, p: Proc, status) -> None:
        where = p.current if p.current is not None else 0
        self._profile(p.pid, M.profile_runnable_proc(p.pid, status, where), M.TS_APPEND)

    def profile_runnable_port(self, port, status) -> None:
        self._profile(port.id, M.profile_runnable_port(port.id, status), M.TS_APPEND)

    # ================================================================ ERRLGR / PROC_MSG
    def erts_queue_error_logger_message(self, from_, msg) -> None:
        if self.smp:
            self._enqueue(M.SYS_MSG_TYPE_ERRLGR, from_, am_error_logger, msg, M.TS_NONE)
            return
        self.stats.made(M.SYS_MSG_TYPE_ERRLGR)
        d = self._decide_now(M.SYS_MSG_TYPE_ERRLGR, from_, am_error_logger)
        if d.action == DROP:
            if d.failure:
                m = M.SysMsg(M.SYS_MSG_TYPE_ERRLGR, from_, am_error_logger, msg, M.TS_NONE)
                disp_failure(m, d.receiver, self.state, self.stderr.write)
                self.stderr.flush()
            self.stats.dropped(M.SYS_MSG_TYPE_ERRLGR, d.reason)
            return
        self.stats.delivered(M.SYS_MSG_TYPE_ERRLGR)
        self._queue_message(self.procs[d.receiver], msg, None)

    def erts_send_sys_msg_proc(self, from_, to, msg) -> None:
        if self.smp:
            self._enqueue(M.SYS_MSG_TYPE_PROC_MSG, from_, to, msg, M.TS_NONE)
            return
        d = self._decide_now(M.SYS_MSG_TYPE_PROC_MSG, from_, to)
        if d.action == DROP:
            self.stats.made(M.SYS_MSG_TYPE_PROC_MSG)
            self.stats.dropped(M.SYS_MSG_TYPE_PROC_MSG, d.reason)
            return
        t = self.procs[to]
        self._deliver_now(t, M.SYS_MSG_TYPE_PROC_MSG, msg)
