"""seq_trace: the token BIFs, ``seq_trace_update_send`` and
``seq_trace_output_generic`` (to a process or a port seq tracer)."""

from __future__ import annotations

from smp.core.bifs import is_small
from smp.core.dispatch import DELIVER_PORT, DROP, disp_failure

from .common import (
    F_SENSITIVE,
    FALSE,
    NIL,
    Atom,
    BadArg,
    Error,
    M,
    Port,
    Proc,
    am_badarg,
    am_false,
    am_true,
)

__all__ = ["SeqTrace"]


class SeqTrace:
    """Mixed into ``schedulers.engine.Node``; runs in the scheduler process."""

    # ================================================================ seq_trace
    def op_seq_trace(self, p: Proc, flag, value):
        name = flag.name if type(flag) is Atom else flag
        bits = {
            "send": M.SEQ_TRACE_SEND,
            "receive": M.SEQ_TRACE_RECEIVE,
            "print": M.SEQ_TRACE_PRINT,
            "timestamp": M.SEQ_TRACE_TIMESTAMP,
        }
        if name == "token":
            return self.op_set_token(p, value)
        if name in bits:
            if value not in (True, False, am_true, am_false):
                raise Error(am_badarg)
            on = value in (True, am_true)
            self.new_seq_trace_token(p)
            old = am_true if p.token[0] & bits[name] else am_false
            if on:
                p.token[0] |= bits[name]
            else:
                p.token[0] &= ~bits[name]
            return old
        if name == "label":
            if type(value) is not int:
                raise Error(am_badarg)
            self.new_seq_trace_token(p)
            old = p.token[1]
            p.token[1] = value
            return old
        if name == "serial":
            if (
                type(value) is not tuple
                or len(value) != 2
                or not all(type(v) is int and v >= 0 for v in value)
            ):
                raise Error(am_badarg)
            self.new_seq_trace_token(p)
            old = (p.token[4], p.token[2])
            p.token[4], p.token[2] = value
            p.seq_lastcnt, p.seq_clock = value
            return old
        raise Error(am_badarg)

    @staticmethod
    def new_seq_trace_token(p: Proc) -> None:
        """erl_bif_trace.c ``new_seq_trace_token``: ``{0, 0, 0, Self,
        LastCnt}`` when there is none, the last count being the process's
        ``seq_trace_lastcnt`` (kept across ``set_token([])``); ``seq_trace/2``
        reads the old value after it."""
        if p.token is None:
            p.token = [0, 0, 0, p.pid, p.seq_lastcnt]

    def op_set_token(self, p: Proc, token):
        old = [] if p.token is None else tuple(p.token)
        if token == []:
            p.token = None
        elif type(token) is tuple and len(token) == 5:
            p.token = list(token)
        else:
            raise Error(am_badarg)
        return old

    def op_seq_trace_print(self, p: Proc, *args):
        if len(args) == 1:
            label, msg = None, args[0]
        elif len(args) == 2:
            label, msg = args
            # seq_trace_print_2: if (!(is_atom(BIF_ARG_1) || is_small(BIF_ARG_1)))
            # BIF_ERROR(BIF_P, BADARG), before the token is looked at
            if type(label) is not Atom and not is_small(label):
                raise Error(am_badarg)
        else:
            raise BadArg("seq_trace_print takes (msg) or (label, msg)")
        if p.token is None or (label is not None and p.token[1] != label):
            return am_false
        self.seq_trace_update_send(p)
        self.seq_trace_output(p.token, msg, M.SEQ_TRACE_PRINT, [], p)
        return am_true

    def seq_trace_update_send(self, p: Proc) -> bool:
        """``seq_trace_update_send``: advance serial and lastcnt on a send."""
        seq_tracer = self.state.system_seq_tracer
        if p.pid == seq_tracer or p.token is None:
            return False
        tok = p.token
        tok[3] = p.pid
        p.seq_clock += 1
        tok[2] = p.seq_clock
        tok[4] = p.seq_lastcnt
        return True

    def _seq_send(self, p: Proc, to, msg, exitfrom=None) -> tuple:
        self.seq_trace_update_send(p)
        self.seq_trace_output(p.token, msg, M.SEQ_TRACE_SEND, to, p, exitfrom)
        return tuple(p.token)

    def seq_trace_output(
        self, token, msg, seq_type, receiver, process: Proc | None, exitfrom=None
    ) -> None:
        """``seq_trace_output_generic``."""
        seq_tracer = self.state.system_seq_tracer
        if (
            token is None
            or token[3] == seq_tracer
            or (process is not None and process.flags & F_SENSITIVE)
        ):
            return
        if not (token[0] & seq_type):
            return
        if seq_tracer is FALSE or seq_tracer is NIL:
            return
        ts_on = bool(token[0] & M.SEQ_TRACE_TIMESTAMP)
        ts_kind = M.TS_APPEND if ts_on else M.TS_NONE
        mess = M.seq_trace_output_generic(
            token[1], seq_type, token[4], token[2], token[3], receiver, msg, exitfrom
        )
        if self.smp:
            if type(seq_tracer) is Port:
                from_ = process.pid if process is not None else NIL
                self._enqueue(M.SYS_MSG_TYPE_SEQTRACE, from_, seq_tracer, mess, ts_kind)
                return
        else:
            # nonsmp: the seq tracer looked up now, by the one rule; a failed
            # lookup has sys_msg_disp_failure's effect (the seq tracer is reset)
            d = self._decide_now(M.SYS_MSG_TYPE_SEQTRACE, NIL, NIL)
            if d.action == DROP:
                if d.failure:
                    disp_failure(
                        M.SysMsg(M.SYS_MSG_TYPE_SEQTRACE, NIL, NIL, mess, ts_kind),
                        d.receiver,
                        self.state,
                    )
                self.stats.suppressed(M.SYS_MSG_TYPE_SEQTRACE, d.reason)
                if self.fates is not None:
                    self._fate(M.SYS_MSG_TYPE_SEQTRACE, d.receiver, mess, "suppressed " + d.reason)
                return
            if d.action == DELIVER_PORT:
                tp = self.tracer_port(seq_tracer)
                c_p = process if ts_on else None
                ts = self.clock.now() if ts_on else None
                mess = M.complete(mess, ts_kind, ts)
                self._port_write_with_fix(tp, mess, M.SYS_MSG_TYPE_SEQTRACE, c_p, ts)
                return
            tracer = self.procs[seq_tracer]
        if receiver == seq_tracer:
            return
        if self.smp:
            self._enqueue(M.SYS_MSG_TYPE_SEQTRACE, NIL, NIL, mess, ts_kind)
        else:
            self._deliver_now(
                tracer,
                M.SYS_MSG_TYPE_SEQTRACE,
                M.complete(mess, ts_kind, self.clock.now() if ts_on else None),
            )
