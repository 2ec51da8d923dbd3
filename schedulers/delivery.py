"""The delivery core of the system messages a scheduler makes: how a made
message is handed on, per mode.  In smp mode it goes to the dispatcher's
queue (``enqueue_sys_msg``); in nonsmp mode the receiver is decided at make
time by the same ``smp.core.dispatch.resolve`` the smp dispatcher uses
(``ERTS_GET_TRACER_REF`` for a tracer), and the message is queued into the
receiving process at once (``erts_queue_message``) or written to a tracer
port (``write_sys_msg_to_port``, with ``send_to_port``'s fake schedule pair
after a heavy write).  ``send_to_tracer`` is the TRACE messages' way through
it.  ``SysMsgDelivery`` is the base of ``schedulers.tracepoints.TracePoints``;
the call-trace and seq_trace builders (``schedulers.calls``,
``schedulers.seqtrace``) use it too."""

from __future__ import annotations

from smp.core.dispatch import DELIVER_PID, DROP, Decision, resolve
from smp.wire.etf import encode

from .common import (
    F_TIMESTAMP,
    F_TRACE_SCHED,
    NIL,
    TRACEE_FLAGS,
    M,
    Proc,
    am_in,
    are_trace_flags_on,
)

__all__ = ["SysMsgDelivery", "FATES_MAX"]

#: messages a nonsmp scheduler keeps the fate of (``Node.fates``)
FATES_MAX = 1_000_000


class SysMsgDelivery:
    """Mixed into ``schedulers.engine.Node`` (as ``TracePoints``' base); runs
    in the scheduler process."""

    def _enqueue(self, type_: int, from_, to, msg, ts_kind: int) -> None:
        """smp: ``enqueue_sys_msg`` - hand the message to the dispatcher's
        queue (the transport counts it as made)."""
        self.transport.sys(type_, from_, to, msg, ts_kind)  # no SysMsg: 0.25 us a message

    def _decide_now(self, type_: int, from_, to) -> Decision:
        """nonsmp: the receiver and the verdict at make time, by the one rule."""
        return resolve(type_, from_, to, self.state, self)

    def _fate(self, type_: int, to, msg, fate: str) -> None:
        """nonsmp with ``fates`` on: what became of a message, made or not."""
        self.keep_fate(("m", type_, to, msg, fate))

    def keep_fate(self, entry: tuple) -> None:
        """An entry of the fate log, or one more not kept past ``FATES_MAX``."""
        if len(self.fates) < FATES_MAX:
            self.fates.append(entry)
        else:
            self.fates_cut += 1

    def _deliver_now(self, t: Proc, type_: int, msg) -> None:
        """nonsmp: ``erts_queue_message`` into the receiver at once."""
        self.stats.made(type_)
        self.stats.delivered(type_)
        if self.fates is not None:
            self._fate(type_, t.pid, msg, "delivered")
        self._queue_message(t, msg, None)

    def _port_id(self, tp):
        return next((k for k, v in self.trace_ports.items() if v is tp), None)

    def _write_port(self, tp, msg, type_: int) -> bool:
        """``write_sys_msg_to_port``: external term format into the port."""

        self.stats.made(type_)
        try:
            data = encode(msg)
        except (TypeError, ValueError):
            # not a term, or nested past the encoder's depth limit: never
            # written, counted as the dispatcher counts it
            self.stats.dropped(type_, "not_a_term")
            if self.fates is not None:
                self._fate(type_, self._port_id(tp), msg, "dropped not_a_term")
            return False
        heavy = tp.write(data)
        self.stats.delivered(type_)
        if self.fates is not None:
            self._fate(type_, self._port_id(tp), msg, "delivered")
        return heavy

    def _port_write_with_fix(self, tp, msg, type_: int, c_p: Proc | None, ts) -> None:
        """``send_to_port`` / ``seq_trace_send_to_port`` in nonsmp: write, and
        when the driver reports a heavy write while ``c_p`` is traced with
        ``running`` and ``timestamp``, send the fake ``out``/``in`` pair."""
        if c_p is None or not are_trace_flags_on(c_p.flags, F_TRACE_SCHED | F_TIMESTAMP):
            self._write_port(tp, msg, type_)
            return
        if ts is None:
            ts = self.clock.now()
        if self._write_port(tp, msg, type_):
            out_msg, _ = M.do_send_schedfix(c_p.pid, ts, ts)
            self._write_port(tp, out_msg, M.SYS_MSG_TYPE_TRACE)
            in_msg = (out_msg[0], c_p.pid, am_in, 0, self.clock.now())
            self._write_port(tp, in_msg, M.SYS_MSG_TYPE_TRACE)
            self.stats.fake_schedule_pairs += 1

    def _send_to_tracer(self, holder, from_, msg, ts_on: bool, c_p: Proc | None) -> None:
        """``send_to_tracer`` / ``send_to_port`` for TRACE messages.

        ``holder`` carries ``tracer`` and ``flags`` (a process, a port, or a
        meta-trace breakpoint); ``c_p`` is the running process that may get a
        fake schedule pair (None for "no fake schedule")."""
        tracer = holder.tracer
        if self.smp:
            self._enqueue(
                M.SYS_MSG_TYPE_TRACE, from_, tracer, msg, M.TS_PATCH if ts_on else M.TS_NONE
            )
            return
        d = self._decide_now(M.SYS_MSG_TYPE_TRACE, from_, tracer)
        if d.action == DROP:
            # ERTS_GET_TRACER_REF: reset the tracee, make nothing
            holder.tracer = NIL
            holder.flags &= ~TRACEE_FLAGS
            self.stats.suppressed(M.SYS_MSG_TYPE_TRACE, d.reason)
            if self.fates is not None:
                self._fate(M.SYS_MSG_TYPE_TRACE, tracer, msg, "suppressed " + d.reason)
            return
        if d.action == DELIVER_PID:
            if ts_on:
                msg = M.patch_ts(msg, self.clock.now())
            self._deliver_now(self.procs[tracer], M.SYS_MSG_TYPE_TRACE, msg)
            return
        tp = self.tracer_port(tracer)
        ts = None
        if ts_on:
            ts = self.clock.now()
            msg = M.patch_ts(msg, ts)
        self._port_write_with_fix(tp, msg, M.SYS_MSG_TYPE_TRACE, c_p, ts)
