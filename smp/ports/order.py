"""Per-tracee order of a stream of trace messages.

The workloads send ``(Tag, Sender, Seq, ...)`` messages with sequence numbers
that only increase per sender, so a tracee's ``send`` messages (and its
``'receive'`` messages per sender) must carry increasing numbers in every
tracer's stream: the order ``erl_trace.c`` promises per tracee.  Used by the
run checks (``smp.app.compare``) and the journal replay
(``smp.app.replay``).
"""

from __future__ import annotations

from smp.core.pretty import format_term
from smp.core.terms import Atom, Pid

__all__ = ["OrderChecker"]

_TRACE, _TRACE_TS = Atom("trace"), Atom("trace_ts")
_SEND, _RECEIVE = Atom("send"), Atom("receive")


def _seq_of(msg, sender):
    if (
        type(msg) is tuple
        and len(msg) >= 3
        and type(msg[0]) is Atom
        and type(msg[1]) is Pid
        and type(msg[2]) is int
    ):
        if sender is None or msg[1] == sender:
            return msg[1], msg[2]
    return None


class OrderChecker:
    """Per-tracee order, fed one message at a time, per tracer.

    A tracee's ``send`` messages (and its ``'receive'`` messages per sender)
    carry workload sequence numbers that only increase.  ``feed`` returns the
    violation text for a message that breaks the order, else None."""

    def __init__(self) -> None:
        self._count: dict = {}
        self._last: dict = {}

    def feed(self, tracer: str, term) -> str | None:
        i = self._count.get(tracer, 0)
        self._count[tracer] = i + 1
        if not (type(term) is tuple and term and term[0] in (_TRACE, _TRACE_TS) and len(term) >= 4):
            return None
        tracee, what = term[1], term[2]
        key = None
        if what is _SEND and len(term) >= 5:
            s = _seq_of(term[3], tracee)
            if s:
                key = (tracer, tracee, "send", s[0]), s[1]
        elif what is _RECEIVE:
            s = _seq_of(term[3], None)
            if s:
                key = (tracer, tracee, "receive", s[0]), s[1]
        if not key:
            return None
        k, seq = key
        prev = self._last.get(k)
        self._last[k] = (seq, i, term)
        if prev is not None and seq <= prev[0]:
            return (
                f"tracer {tracer}: tracee {tracee!r} order broken: message "
                f"{i + 1} {format_term(term)} after message {prev[1] + 1} "
                f"{format_term(prev[2])}"
            )
        return None
