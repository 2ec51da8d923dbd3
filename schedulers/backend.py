"""The BIF backend of a nonsmp scheduler: everything is local and synchronous."""

from __future__ import annotations

from smp.core import messages as M
from smp.core.state import NIL, apply_state_op
from smp.core.terms import Atom

__all__ = ["LocalBackend"]

am_trace_delivered = Atom("trace_delivered")


class LocalBackend:
    """Runs in the nonsmp scheduler process."""

    def __init__(self, node):
        self.node = node

    def bk_is_alive(self, pid) -> bool:
        return self.node.is_alive(pid)

    def bk_exiting(self, pid) -> bool:
        return self.node.exiting(pid)

    def bk_valid_tracer_port(self, port) -> bool:
        return self.node.is_valid_tracer_port(port)

    def bk_trace_apply(self, spec, how, bits, tracer) -> int:
        return self.node.set_trace_local(spec, how, bits, tracer)

    def bk_mark_tracer(self, tracer) -> None:
        self.node.mark_tracer(tracer)

    def bk_state(self, op: str, *args):
        st = self.node.state
        if op == "set_system_profile" and args[1] and args[-1] is not None:
            # the scheduler's own activity counts as active only while it runs
            args = args[:-1] + (1 if self.node.active else 0,)
        r = apply_state_op(st, op, args)
        if op == "change_default_tracing":
            self.node.clock.cpu = st.default_cpu_timestamp
        return r

    def bk_trace_info(self, what, item):
        return self.node.trace_info_local(what, item)

    def bk_trace_info_func(self, mfa, key):
        return self.node.trace_info_func_local(mfa, key)

    def bk_pattern(self, mfa, ms, kind, meta_tracer, enable) -> int:
        return self.node.set_pattern_local(mfa, ms, kind, meta_tracer, enable)

    def bk_active_schedulers(self) -> int:
        return 1 if self.node.active else 0

    def bk_make_ref(self):
        return self.node.make_ref()

    def bk_error_logger(self, caller, text: str) -> None:
        """``erts_send_error_to_logger_str(c_p->group_leader, text)``."""
        node = self.node
        p = node.procs.get(caller) if caller is not None else None
        gl = p.group_leader if p is not None else None
        node.erts_queue_error_logger_message(
            caller if caller is not None else NIL, M.error_logger_str(text, gl)
        )

    def bk_trace_delivered(self, caller, what, ref):
        msg = (am_trace_delivered, what, ref)
        if caller is None:
            # nonsmp delivers synchronously: everything is delivered already
            return msg
        self.node.erts_send_sys_msg_proc(caller, caller, msg)
        return ref
