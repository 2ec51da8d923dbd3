"""Invariant checks on one run, and the side-by-side of an smp and a nonsmp run.

Runs in the user's process, on ``smp.workloads.RunOutcome`` values.  The
checks are the promises of ``erl_trace.c`` that hold in both builds:

* counts add up: made == delivered + dropped + queued, in all and per type;
* per-tracee order: a tracee's ``send`` messages (and its ``'receive'``
  messages per sender) carry workload sequence numbers that only increase
  (workload messages are ``(Tag, Sender, Seq, ...)``);
* timestamps strictly increase per tracer (the seed takes them under ``smq_mtx``).

Across tracees only per-sender order is promised, so ``compare_runs`` lines
the two runs up per (tracer, tracee), with pids replaced by stable labels.
"""
from __future__ import annotations

from .dbgfmt import format_dbg
from .terms import Atom, Pid, Port, format_term

__all__ = ["check_invariants", "compare_runs", "normalise", "OrderChecker"]

_TRACE, _TRACE_TS, _SEQ, _PROFILE = Atom("trace"), Atom("trace_ts"), Atom("seq_trace"), Atom("profile")
_SEND, _RECEIVE = Atom("send"), Atom("receive")


def _ts(term):
    if type(term) is not tuple or not term:
        return None
    if term[0] is _TRACE_TS and len(term) >= 4:
        return term[-1]
    if term[0] is _SEQ and len(term) == 4:
        return term[3]
    if term[0] is _PROFILE and len(term) >= 5:
        return term[-1]
    return None


def _valid_ts(ts) -> bool:
    return type(ts) is tuple and len(ts) == 3 and all(type(x) is int for x in ts)


def _seq_of(msg, sender):
    if (type(msg) is tuple and len(msg) >= 3 and type(msg[0]) is Atom
            and type(msg[1]) is Pid and type(msg[2]) is int):
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
            return (f"tracer {tracer}: tracee {tracee!r} order broken: message "
                    f"{i + 1} {format_term(term)} after message {prev[1] + 1} "
                    f"{format_term(prev[2])}")
        return None


def check_invariants(outcome, limit: int = 20) -> list[str]:
    """Every violated invariant of one run, each naming the messages involved."""
    out: list[str] = []
    st = outcome.summary["stats"]
    queued = st.get("queued", 0)
    dropped_total = st["dropped"]
    if st["made"] != st["delivered"] + dropped_total + queued:
        out.append(f"counts: made {st['made']} != delivered {st['delivered']} + dropped "
                   f"{dropped_total} + queued {queued}")
    if queued == 0:
        dropped_by_type: dict = {}
        for reason, by_type in st["dropped_by_reason"].items():
            for t, n in by_type.items():
                dropped_by_type[t] = dropped_by_type.get(t, 0) + n
        for t, made in st["made_by_type"].items():
            got = st["delivered_by_type"].get(t, 0) + dropped_by_type.get(t, 0)
            if made != got:
                out.append(f"counts: {t} made {made} != delivered "
                           f"{st['delivered_by_type'].get(t, 0)} + dropped {dropped_by_type.get(t, 0)}")
    order = OrderChecker()
    for name, terms in outcome.messages.items():
        last_ts = None
        last_i = None
        for i, term in enumerate(terms):
            ts = _ts(term)
            if ts is not None and _valid_ts(ts):
                if last_ts is not None and ts <= last_ts:
                    out.append(f"tracer {name}: message {i + 1} {format_term(term)} has timestamp "
                               f"{format_term(ts)}, not after message {last_i + 1} "
                               f"{format_term(terms[last_i])}")
                last_ts, last_i = ts, i
            v = order.feed(name, term)
            if v:
                out.append(v)
            if len(out) >= limit:
                out.append("(more violations not listed)")
                return out
    return out


# ---------------------------------------------------------------- compare
def normalise(term, labels: dict):
    """A term with timestamps dropped and pids/ports replaced by their labels."""
    if type(term) is tuple and term:
        if term[0] is _TRACE_TS and len(term) >= 4:
            term = (_TRACE,) + term[1:-1]
        elif term[0] is _SEQ and len(term) == 4:
            term = term[:3]
        elif term[0] is _PROFILE and len(term) >= 5:
            term = term[:-1]
    return _relabel(term, labels)


def _relabel(t, labels):
    if type(t) in (Pid, Port):
        return Atom(f"<{labels[t]}>") if t in labels else Atom("<pid>" if type(t) is Pid else "<port>")
    if type(t) is tuple:
        return tuple(_relabel(x, labels) for x in t)
    if type(t) is list:
        return [_relabel(x, labels) for x in t]
    return t


def _by_tracee(terms, labels) -> dict:
    out: dict = {}
    for t in terms:
        n = normalise(t, labels)
        who = n[1] if type(n) is tuple and len(n) > 1 and n[0] is _TRACE else Atom("*")
        out.setdefault(format_term(who).strip("'"), []).append(n)
    return out


# Why the two builds differ, per row of the comparison (matched by prefix,
# most specific first), from the seed's #ifdef ERTS_SMP branches.
WHY = [
    ("suppressed receiver_dead", "nonsmp looks the tracer up when a message is made "
     "(ERTS_GET_TRACER_REF): a dead tracer resets the tracee and nothing is made"),
    ("suppressed not_tracer", "nonsmp: a tracer without the tracer mark resets the tracee "
     "when a message is made (ERTS_GET_TRACER_REF)"),
    ("suppressed port_closed", "nonsmp: send_to_port finds the trace port closed, resets the "
     "tracee and makes nothing"),
    ("suppressed sender_is_receiver", "nonsmp: monitor_*/profile_send never make a message "
     "about the monitor or profiler itself"),
    ("dropped receiver_dead", "smp makes the message without looking at the tracer; the "
     "dispatcher finds the receiver dead (sys_msg_dispatcher_func) and the tracee keeps its "
     "flags until it is next scheduled in (erts_check_my_tracer_proc)"),
    ("dropped not_tracer", "smp: the dispatcher drops a TRACE message whose receiver lost "
     "the tracer mark"),
    ("dropped port_closed", "smp: the dispatcher finds the port receiver closed"),
    ("dropped sender_is_receiver", "smp: the dispatcher drops SYSMON/SYSPROF messages from "
     "the monitor or profiler itself (from == receiver)"),
    ("dropped nil_sender_nil_receiver", "smp: exiting_reset sets the profiler to NIL and "
     "profile_scheduler messages (from NIL) then meet from == receiver: dropped quietly"),
    ("dropped no_receiver", "smp resolves the seq tracer, monitor and profiler at dispatch "
     "time; when it is gone, sys_msg_disp_failure resets it (nonsmp resets at make time)"),
    ("dropped scheduler_lost", "smp: the receiver lived on a scheduler that died"),
    ("tracer_checks_reset", "erts_check_my_tracer_proc exists only in smp: a tracee whose "
     "tracer died is reset at its next schedule-in"),
    ("fake_schedule_pairs", "do_send_schedfix_to_port exists only #ifndef ERTS_SMP: a heavy "
     "port write gives a fake out/in pair; smp never fakes schedules"),
    ("made ", "made differs where nonsmp suppresses what smp makes and then drops"),
    ("made", "made differs where nonsmp suppresses what smp makes and then drops"),
    ("delivered", "delivered differs by what one build drops or never makes"),
    ("dropped", "only smp has a dispatcher that drops: nonsmp suppresses at make time instead"),
    ("suppressed", "only nonsmp checks the receiver when a message is made"),
    ("latency", "only smp has a queue between making and delivering (make-to-dispatch "
     "latency); nonsmp delivers at once"),
    ("throughput", "the builds deliver differently: synchronously in one process (nonsmp) or "
     "through the dispatcher process (smp)"),
    ("elapsed", "the builds deliver differently: synchronously in one process (nonsmp) or "
     "through the dispatcher process (smp)"),
]
ORDER_NOTE = ("per-tracee order holds at every tracer in both builds; the global order differs "
              "in smp, where the dispatcher interleaves the schedulers' batches, and timestamps "
              "are taken when the dispatcher queues a message (under smq_mtx), not when it is made")


def why(what: str) -> str | None:
    """Why the seed makes row ``what`` differ between nonsmp and smp."""
    for prefix, text in WHY:
        if what.startswith(prefix):
            return text
    return None


def compare_runs(a, b, first: int = 3) -> dict:
    """Side by side of two runs (``a`` nonsmp, ``b`` smp, say); JSON-able."""
    sa, sb = a.summary, b.summary
    rows = []

    def row(what, x, y):
        rows.append({"what": what, a_mode: x, b_mode: y, "differs": x != y,
                     "why": why(what) if x != y else None})

    a_mode, b_mode = sa["mode"], sb["mode"]
    if a_mode == b_mode:
        a_mode, b_mode = a_mode + "(a)", b_mode + "(b)"
    ta, tb = sa["stats"], sb["stats"]
    for key in ("made", "delivered", "dropped", "queued", "suppressed", "fake_schedule_pairs",
                "tracer_checks_reset", "messages_sent"):
        row(key, ta.get(key, 0), tb.get(key, 0))
    types = sorted(set(ta["made_by_type"]) | set(tb["made_by_type"]))
    for t in types:
        row(f"made {t}", ta["made_by_type"].get(t, 0), tb["made_by_type"].get(t, 0))
        row(f"delivered {t}", ta["delivered_by_type"].get(t, 0), tb["delivered_by_type"].get(t, 0))
    for kind in ("dropped_by_reason", "suppressed_by_reason"):
        reasons = sorted(set(ta.get(kind, {})) | set(tb.get(kind, {})))
        for r in reasons:
            ts = sorted(set(ta.get(kind, {}).get(r, {})) | set(tb.get(kind, {}).get(r, {})))
            for t in ts:
                row(f"{kind.split('_')[0]} {r} {t}", ta.get(kind, {}).get(r, {}).get(t, 0),
                    tb.get(kind, {}).get(r, {}).get(t, 0))
    row("throughput made/s", sa["throughput"]["made_per_s"], sb["throughput"]["made_per_s"])
    row("elapsed s", sa["elapsed_s"], sb["elapsed_s"])
    row("latency p50 ns", sa["latency_ns"]["p50"], sb["latency_ns"]["p50"])
    row("latency p99 ns", sa["latency_ns"]["p99"], sb["latency_ns"]["p99"])
    order = {a_mode: check_invariants(a), b_mode: check_invariants(b)}
    tracers = []
    for name in sorted(set(a.messages) | set(b.messages)):
        ga = _by_tracee(a.messages.get(name, []), a.labels)
        gb = _by_tracee(b.messages.get(name, []), b.labels)
        diffs = []
        for who in sorted(set(ga) | set(gb)):
            xa, xb = ga.get(who, []), gb.get(who, [])
            for i in range(max(len(xa), len(xb))):
                ma = xa[i] if i < len(xa) else None
                mb = xb[i] if i < len(xb) else None
                if ma != mb:
                    diffs.append({"tracee": who, "index": i + 1,
                                  a_mode: _show(ma), b_mode: _show(mb)})
                    break
            if len(diffs) >= first:
                break
        tracers.append({"tracer": name, a_mode: len(a.messages.get(name, [])),
                        b_mode: len(b.messages.get(name, [])), "first_differences": diffs})
    return {"modes": [a_mode, b_mode], "rows": rows, "invariants": order,
            "tracers": tracers, "runs": {a_mode: sa, b_mode: sb}, "order_note": ORDER_NOTE}


def _show(term) -> str | None:
    if term is None:
        return None
    text = format_dbg(term).rstrip("\n") or format_term(term)
    return text.replace("'<", "<").replace(">'", ">")
