"""Invariant checks on one run, and the side-by-side of an smp and a nonsmp run.

Runs in the user's process, on ``smp.app.workloads.RunOutcome`` values.  The
checks are the promises of ``erl_trace.c`` that hold in both builds:

* counts add up: made == delivered + dropped + queued, in all and per type;
* per-tracee order: a tracee's ``send`` messages (and its ``'receive'``
  messages per sender) carry workload sequence numbers that only increase
  (workload messages are ``(Tag, Sender, Seq, ...)``);
* timestamps strictly increase per tracer (the seed takes them under ``smq_mtx``).

Across tracees only per-sender order is promised, so ``compare_runs`` lines
the two runs up per (tracer, tracee), with pids replaced by stable labels,
and lists every message only one mode made (in smp mode with the drops the
dispatcher's journal recorded), each with the seed's reason.  Every "why" of
a differing row is put together from the counters that differ: a cause whose
counter is zero is not named.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections import Counter, deque

from smp.app.replay import _terms, read_records
from smp.app.scenario import EXPECT_KEYS
from smp.app.workloads import WORKLOADS
from smp.core import messages as M
from smp.core.dispatch import DROP
from smp.core.pretty import format_term
from smp.core.terms import Atom, Pid, Port
from smp.ports.dbgfmt import format_dbg
from smp.ports.order import OrderChecker

__all__ = [
    "check_invariants",
    "compare_runs",
    "normalise",
    "OrderChecker",
    "why",
    "explain_row",
    "message_differences",
    "journal_messages",
    "check_expect",
    "expect_broken",
    "expect_checks",
    "expect_text",
    "ExpectCheck",
]

_TRACE, _TRACE_TS, _SEQ, _PROFILE = (
    Atom("trace"),
    Atom("trace_ts"),
    Atom("seq_trace"),
    Atom("profile"),
)
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


def _fake_out(term) -> bool:
    """nonsmp's fake ``out`` after a heavy port write: do_send_schedfix_to_port
    gives it the timestamp of the message just written."""
    return (
        type(term) is tuple
        and len(term) == 5
        and term[0] is _TRACE_TS
        and term[2] is Atom("out")
        and term[3] == 0
    )


def check_invariants(outcome, limit: int = 20) -> list[str]:
    """Every violated invariant of one run, each naming the messages involved,
    and every fault that fired and did not take (``summary["faults"]``)
    unless the scenario marked it ``may_fail``."""
    out: list[str] = []
    for f in outcome.summary.get("faults") or []:
        if f.get("took") is False and not f.get("may_fail"):
            where = f"{f['where']}: " if f.get("where") else ""
            what = f["action"] + (f" {f['target']}" if f.get("target") else "")
            out.append(f"fault: {where}{what} at {f['planned_at']:g} s did not take: {f['result']}")
    st = outcome.summary["stats"]
    queued = st.get("queued", 0)
    dropped_total = st["dropped"]
    if st["made"] != st["delivered"] + dropped_total + queued:
        out.append(
            f"counts: made {st['made']} != delivered {st['delivered']} + dropped "
            f"{dropped_total} + queued {queued}"
        )
    if queued == 0:
        dropped_by_type: dict = {}
        for by_type in st["dropped_by_reason"].values():
            for t, n in by_type.items():
                dropped_by_type[t] = dropped_by_type.get(t, 0) + n
        for t, made in st["made_by_type"].items():
            got = st["delivered_by_type"].get(t, 0) + dropped_by_type.get(t, 0)
            if made != got:
                out.append(
                    f"counts: {t} made {made} != delivered "
                    f"{st['delivered_by_type'].get(t, 0)} + dropped {dropped_by_type.get(t, 0)}"
                )
    order = OrderChecker()
    for name, terms in outcome.messages.items():
        last_ts = None
        last_i = None
        for i, term in enumerate(terms):
            ts = _ts(term)
            if ts is not None and _valid_ts(ts):
                if last_ts is not None and (ts < last_ts or ts == last_ts and not _fake_out(term)):
                    out.append(
                        f"tracer {name}: message {i + 1} {format_term(term)} has timestamp "
                        f"{format_term(ts)}, not after message {last_i + 1} "
                        f"{format_term(terms[last_i])}"
                    )
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
        return (
            Atom(f"<{labels[t]}>") if t in labels else Atom("<pid>" if type(t) is Pid else "<port>")
        )
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
    (
        "suppressed receiver_dead",
        "nonsmp looks the tracer up when a message is made "
        "(ERTS_GET_TRACER_REF): a dead tracer resets the tracee and nothing is made",
    ),
    (
        "suppressed not_tracer",
        "nonsmp: a tracer without the tracer mark resets the tracee "
        "when a message is made (ERTS_GET_TRACER_REF)",
    ),
    (
        "suppressed port_closed",
        "nonsmp: send_to_port finds the trace port closed, resets the tracee and makes nothing",
    ),
    (
        "suppressed sender_is_receiver",
        "nonsmp: monitor_*/profile_send never make a message about the monitor or profiler itself",
    ),
    (
        "dropped receiver_dead",
        "smp makes the message without looking at the tracer; the "
        "dispatcher finds the receiver dead (sys_msg_dispatcher_func) and the tracee keeps its "
        "flags until it is next scheduled in (erts_check_my_tracer_proc)",
    ),
    (
        "dropped not_tracer",
        "smp: the dispatcher drops a TRACE message whose receiver lost the tracer mark",
    ),
    ("dropped port_closed", "smp: the dispatcher finds the port receiver closed"),
    (
        "dropped sender_is_receiver",
        "smp: the dispatcher drops SYSMON/SYSPROF messages from "
        "the monitor or profiler itself (from == receiver)",
    ),
    (
        "dropped nil_sender_nil_receiver",
        "smp: exiting_reset sets the profiler to NIL and "
        "profile_scheduler messages (from NIL) then meet from == receiver: dropped quietly",
    ),
    (
        "dropped no_receiver",
        "smp resolves the seq tracer, monitor and profiler at dispatch "
        "time; when it is gone, sys_msg_disp_failure resets it (nonsmp resets at make time)",
    ),
    ("dropped scheduler_lost", "smp: the receiver lived on a scheduler that died"),
    (
        "tracer_checks_reset",
        "erts_check_my_tracer_proc exists only in smp: a tracee whose "
        "tracer died is reset at its next schedule-in",
    ),
    (
        "fake_schedule_pairs",
        "do_send_schedfix_to_port exists only #ifndef ERTS_SMP: a heavy "
        "port write gives a fake out/in pair; smp never fakes schedules",
    ),
    (
        "dropped no_error_logger",
        "no process is registered as error_logger: the error report "
        "is printed on stderr and dropped (sys_msg_disp_failure)",
    ),
    (
        "latency",
        "only smp has a queue between making and delivering (make-to-dispatch "
        "latency); nonsmp delivers at once",
    ),
    (
        "throughput",
        "the builds deliver differently: synchronously in one process (nonsmp) or "
        "through the dispatcher process (smp)",
    ),
    (
        "elapsed",
        "the builds deliver differently: synchronously in one process (nonsmp) or "
        "through the dispatcher process (smp)",
    ),
]
ORDER_NOTE = (
    "per-tracee order holds at every tracer in both builds; the global order differs "
    "in smp, where the dispatcher interleaves the schedulers' batches, and timestamps "
    "are taken when the dispatcher queues a message (under smq_mtx), not when it is made"
)


def why(what: str) -> str | None:
    """Why the seed makes row ``what`` differ between nonsmp and smp."""
    for prefix, text in WHY:
        if what.startswith(prefix):
            return text
    return None


# ---------------------------------------------------------------- why, from the counters
def _drops(t: dict, kind: str, typ: str | None) -> dict:
    """``{reason: n}`` of ``dropped_by_reason``/``suppressed_by_reason``, for one type or all."""
    out = {}
    for r, by_type in (t.get(kind) or {}).items():
        n = sum(by_type.values()) if typ is None else by_type.get(typ, 0)
        if n:
            out[r] = n
    return out


def _count(t: dict, key: str, typ: str | None) -> int:
    if typ is None:
        return t.get(key, 0)
    return (t.get(f"{key}_by_type") or {}).get(typ, 0)


def _seed(row: str) -> str:
    text = why(row) or ""
    return f" ({text})" if text else ""


def _fake_part(ta, tb, ma, mb, typ) -> tuple[int, str | None]:
    """How much of a made/delivered difference nonsmp's fake schedule pairs make."""
    if typ not in (None, "TRACE"):
        return 0, None
    fa, fb = ta.get("fake_schedule_pairs", 0), tb.get("fake_schedule_pairs", 0)
    if fa == fb:
        return 0, None
    n = 2 * (fa - fb)
    who = ma if n > 0 else mb
    return n, (
        f"{abs(n):,} are the fake out/in pairs {who} sent after heavy port writes "
        f"(fake_schedule_pairs {fa:,} vs {fb:,}){_seed('fake_schedule_pairs')}"
    )


def _sysprof_part(ta, tb, ma, mb, typ, schedulers) -> tuple[int, str | None]:
    """How much of a delivered difference is profile messages of a different
    number of schedulers."""
    if typ not in (None, "SYSPROF") or not schedulers or schedulers[0] == schedulers[1]:
        return 0, None
    n = _count(ta, "delivered", "SYSPROF") - _count(tb, "delivered", "SYSPROF")
    if not n:
        return 0, None
    return n, (
        f"{abs(n):,} {'more' if n > 0 else 'fewer'} SYSPROF messages delivered by {ma}: "
        f"profile_scheduler sends one whenever a scheduler goes active or inactive, and "
        f"{ma} has {schedulers[0]} scheduler(s), {mb} {schedulers[1]}"
    )


def explain_row(
    what: str, ta: dict, tb: dict, ma: str, mb: str, rest: str, schedulers: tuple | None = None
) -> str | None:
    """Why row ``what`` differs, from the counters of run a (``ta``) and b
    (``tb``); ``rest`` says what explains a difference no counter does;
    ``schedulers`` the two runs' scheduler counts."""
    words = what.split()
    head = words[0]
    if head in ("made", "delivered") and len(words) <= 2:
        typ = words[1] if len(words) == 2 else None
        xa, xb = _count(ta, head, typ), _count(tb, head, typ)
        more = ma if xa > xb else mb
        parts = []
        fake, fake_text = _fake_part(ta, tb, ma, mb, typ)
        if head == "made":
            da, db = _drops(ta, "dropped_by_reason", typ), _drops(tb, "dropped_by_reason", typ)
            for r in sorted(set(da) | set(db)):
                if da.get(r, 0) != db.get(r, 0):
                    parts.append(
                        f"dropped {r}: {ma} {da.get(r, 0):,}, {mb} {db.get(r, 0):,}"
                        f"{_seed('dropped ' + r)}"
                    )
            sa, sb = (
                _drops(ta, "suppressed_by_reason", typ),
                _drops(tb, "suppressed_by_reason", typ),
            )
            for r in sorted(set(sa) | set(sb)):
                parts.append(
                    f"suppressed {r} (never made): {ma} {sa.get(r, 0):,}, "
                    f"{mb} {sb.get(r, 0):,}{_seed('suppressed ' + r)}"
                )
            qa, qb = _count(ta, "queued", None), _count(tb, "queued", None)
            if typ is None and qa != qb:
                parts.append(f"still queued at the end: {ma} {qa:,}, {mb} {qb:,}")
            dd = _count(ta, "delivered", typ) - _count(tb, "delivered", typ)
        else:
            dd = xa - xb
        if fake_text:
            parts.append(fake_text)
        prof, prof_text = _sysprof_part(ta, tb, ma, mb, typ, schedulers)
        if prof_text:
            parts.append(prof_text)
        left = dd - fake - prof
        if left:
            parts.append(
                f"{abs(left):,} {'more' if left > 0 else 'fewer'} delivered by {ma} "
                f"than {mb} without a counter that explains them: {rest}"
            )
        return f"{more} {head} {abs(xa - xb):,} more" + (": " + "; ".join(parts) if parts else "")
    if what in ("dropped", "suppressed"):
        kind = f"{what}_by_reason"
        da, db = _drops(ta, kind, None), _drops(tb, kind, None)
        parts = [
            f"{r}: {ma} {da.get(r, 0):,}, {mb} {db.get(r, 0):,}{_seed(what + ' ' + r)}"
            for r in sorted(set(da) | set(db))
            if da.get(r, 0) != db.get(r, 0)
        ]
        return "; ".join(parts) or None
    if what == "queued":
        return (
            "messages still in the dispatcher's queue when the run ended (interrupted or timed out)"
        )
    if what == "messages_sent":
        return f"the processes sent a different number of messages: {rest}"
    return why(what)


def _rest(scenario: dict | None, sa: dict, sb: dict) -> str:
    """What explains the differences no counter does, for this scenario."""
    faults = (scenario or {}).get("faults") or []
    if faults:
        times = ", ".join(f"{f['action']} at {f['at']:g} s" for f in faults[:3])
        return (
            f"the scenario's faults fire at wall-clock times ({times}"
            + (", ..." if len(faults) > 3 else "")
            + f") and the runs took "
            f"{sa['elapsed_s']:.2f} s ({sa['mode']}) and {sb['elapsed_s']:.2f} s "
            f"({sb['mode']}), so they hit different points of the work"
        )
    d = (scenario or {}).get("duration") or {}
    if d.get("seconds"):
        return (
            f"the workload is time-bounded ({d['seconds']:g} s): each mode did as much work "
            f"as it managed in that time"
        )
    return (
        "the schedulers' interleaving differs between the modes (see the messages only one "
        "mode made)"
    )


# ---------------------------------------------------------------- per message
_TYPES_COMPARED = ("TRACE", "SEQTRACE", "SYSMON", "SYSPROF")
_OUT, _IN = Atom("out"), Atom("in")
_MONITOR = Atom("monitor")


def journal_messages(path: str) -> list[tuple]:
    """``(type, receiver, term, fate)`` of every message an smp run's
    dispatcher queued, in queue order, from its journal: ``receiver`` is
    where it went (or, when dropped, the tracer it was made for), ``fate``
    ``delivered`` or ``dropped REASON``."""

    _, records, _ = read_records(path)
    pending: deque = deque()
    out = []
    for rec in records:
        if rec[1] == "q" and len(rec) == 10:
            pending.append(rec)
        elif rec[1] == "d" and len(rec) == 7:
            _, _, d_type, d_n, action, receiver, reason = rec
            if not pending or (pending[0][2], pending[0][7]) != (d_type, d_n):
                continue  # a trace_delivered reply: queued with no 'q' record
            q = pending.popleft()
            tname = M.TYPE_NAMES.get(q[2], str(q[2]))
            if tname not in _TYPES_COMPARED:
                continue
            dropped = action == DROP
            who = (q[4] if tname == "TRACE" else receiver) if dropped else receiver
            fate = f"dropped {reason}" if dropped else "delivered"
            for term in _terms(q):
                if type(term) is not str:
                    out.append((tname, who, term, fate))
    return out


def _kind(term) -> str:
    if type(term) is tuple and term and type(term[0]) is Atom:
        return term[0].name
    return ""


def _classify(item: dict, ctx: dict) -> str:
    """The seed's reason why only ``item["mode"]`` made this message."""
    term, mode, fate = item["term"], item["mode"], item["fate"]
    k = _kind(term)
    nonsmp, smp = ctx["nonsmp"], ctx["smp"]
    if (
        mode == nonsmp
        and k in ("trace", "trace_ts")
        and len(term) >= 5
        and term[2] in (_OUT, _IN)
        and term[3] == 0
        and ctx["fake"]
    ):
        return (
            "do_send_schedfix_to_port (nonsmp only): a heavy write to a trace port sends "
            "the running process a fake out/in pair; smp never fakes schedules"
        )
    if mode == smp and fate in (
        "dropped receiver_dead",
        "dropped not_tracer",
        "dropped port_closed",
    ):
        return (
            "erts_check_my_tracer_proc: smp makes the message without looking at the "
            "tracer and the dispatcher drops it (" + fate[8:] + "); the tracee keeps its "
            "flags until it is next scheduled in, while nonsmp looks the tracer up when "
            "making a message (ERTS_GET_TRACER_REF), resets the tracee and makes nothing"
        )
    if item.get("moved_to") or (mode == smp and fate == "dropped no_receiver"):
        where = f" (the other mode's went to {item['moved_to']})" if item.get("moved_to") else ""
        return (
            "queue-time receiver resolution: smp's dispatcher looks up the seq tracer, "
            "monitor or profiler when it takes the message off the queue "
            "(sys_msg_dispatcher_func), nonsmp when the message is made; a change in "
            "between sends it elsewhere" + where
        )
    if (
        k in ("trace", "trace_ts")
        and len(term) >= 4
        and term[2] in (_OUT, _IN, Atom("out_exiting"), Atom("out_exited"), Atom("in_exiting"))
    ):
        return (
            "scheduling (trace_sched): whether a process is scheduled out while it waits "
            "depends on when its message arrives, and that differs between one scheduler "
            "(nonsmp) and several that run at once (smp)"
        )
    if k == "profile" and len(term) >= 3 and term[1] == Atom("scheduler"):
        return (
            "profile_scheduler: each of smp's schedulers reports its own active/inactive "
            "changes with the count of active schedulers; nonsmp has one scheduler"
        )
    if not ctx["deterministic"]:
        return f"timing, not the seed: {ctx['rest']}"
    return (
        "no difference between the builds explains it: the modes' processes did not make "
        "the same messages"
    )


def _sequences(items, labels) -> dict:
    """tracer -> tracee -> [(normalised text, item)] in order."""
    out: dict = {}
    for tracer, term, fate in items:
        n = normalise(term, labels)
        who = n[1] if type(n) is tuple and len(n) > 1 and n[0] is _TRACE else Atom("*")
        out.setdefault(tracer, {}).setdefault(format_term(who).strip("'"), []).append(
            (format_term(n), {"term": term, "fate": fate})
        )
    return out


def _only(xa: list, xb: list) -> tuple[list, list]:
    """Indexes only in a and only in b, aligned on the normalised texts."""
    ta, tb = [x[0] for x in xa], [x[0] for x in xb]
    lo = 0
    while lo < len(ta) and lo < len(tb) and ta[lo] == tb[lo]:
        lo += 1
    hi_a, hi_b = len(ta), len(tb)
    while hi_a > lo and hi_b > lo and ta[hi_a - 1] == tb[hi_b - 1]:
        hi_a, hi_b = hi_a - 1, hi_b - 1
    ma, mb = ta[lo:hi_a], tb[lo:hi_b]
    if len(ma) * len(mb) > 4_000_000:  # too long to align: compare as multisets
        ca, cb = Counter(ma), Counter(mb)
        ra, rb = ca - cb, cb - ca
        oa, ob = [], []
        for i, t in enumerate(ma):
            if ra[t] > 0:
                ra[t] -= 1
                oa.append(lo + i)
        for i, t in enumerate(mb):
            if rb[t] > 0:
                rb[t] -= 1
                ob.append(lo + i)
        return oa, ob
    oa, ob = [], []
    sm = difflib.SequenceMatcher(None, ma, mb, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag in ("delete", "replace"):
            oa += range(lo + i1, lo + i2)
        if tag in ("insert", "replace"):
            ob += range(lo + j1, lo + j2)
    return oa, ob


def message_differences(
    a, b, *, smp_made: list | None = None, scenario: dict | None = None, limit: int = 20
) -> dict:
    """Every message only one of the runs made, per tracer and tracee, with
    the seed's reason.  ``a``'s messages are what its tracers got (nonsmp
    delivers as it makes); ``smp_made`` (``journal_messages``), when given,
    is everything ``b``'s dispatcher queued, drops included."""
    sa, sb = a.summary, b.summary
    ma, mb = sa["mode"], sb["mode"]
    if ma == mb:
        ma, mb = ma + "(a)", mb + "(b)"

    def delivered(o):
        return [(name, t, "delivered") for name, terms in o.messages.items() for t in terms]

    items_a = delivered(a)
    skipped = 0
    if smp_made is not None:

        def name(r):
            return b.labels.get(
                r, "(no receiver)" if r is None or type(r) is Atom else format_term(r)
            )

        known = set(a.messages) | set(b.messages)
        items_b, skipped = [], 0
        for _, r, t, fate in smp_made:
            n = name(r)
            if n in known:
                items_b.append((n, t, fate))
            else:
                skipped += 1
        source = "the smp dispatcher's journal (drops included)"
    else:
        items_b = delivered(b)
        source = "what the tracers got"
    ga, gb = _sequences(items_a, a.labels), _sequences(items_b, b.labels)
    faults = (scenario or {}).get("faults") or []
    ctx = {
        "nonsmp": ma if sa["mode"] == "nonsmp" else None,
        "smp": mb if sb["mode"] == "smp" else None,
        "fake": sa["stats"].get("fake_schedule_pairs", 0)
        + sb["stats"].get("fake_schedule_pairs", 0),
        "deterministic": not faults,
        "rest": _rest(scenario, sa, sb),
    }
    only: list[dict] = []
    made = {}
    for tracer in sorted(set(ga) | set(gb)):
        made[tracer] = {
            ma: sum(len(v) for v in ga.get(tracer, {}).values()),
            mb: sum(len(v) for v in gb.get(tracer, {}).values()),
        }
        for who in sorted(set(ga.get(tracer, {})) | set(gb.get(tracer, {}))):
            xa, xb = ga.get(tracer, {}).get(who, []), gb.get(tracer, {}).get(who, [])
            oa, ob = _only(xa, xb)
            for mode, xs, idx in ((ma, xa, oa), (mb, xb, ob)):
                for i in idx:
                    text, it = xs[i]
                    only.append(
                        {
                            "tracer": tracer,
                            "tracee": who,
                            "mode": mode,
                            "index": i + 1,
                            "norm": text,
                            **it,
                        }
                    )
    # a message one mode sent to one tracer and the other to another moved
    by_norm: dict = {}
    for d in only:
        by_norm.setdefault((d["mode"], d["norm"]), []).append(d)
    for d in only:
        other = mb if d["mode"] == ma else ma
        for e in by_norm.get((other, d["norm"]), []):
            if e["tracer"] != d["tracer"]:
                d["moved_to"] = e["tracer"]
                break
    tracers = []
    for tracer in sorted(made):
        mine = [d for d in only if d["tracer"] == tracer]
        counts = Counter(d["mode"] for d in mine)
        listed = []
        for d in mine[:limit]:
            listed.append(
                {
                    "tracee": d["tracee"],
                    "mode": d["mode"],
                    "index": d["index"],
                    "message": _show(d["term"]),
                    "fate": d["fate"],
                    "why": _classify(d, ctx),
                }
            )
        tracers.append(
            {
                "tracer": tracer,
                ma: made[tracer][ma],
                mb: made[tracer][mb],
                "only_count": {ma: counts.get(ma, 0), mb: counts.get(mb, 0)},
                "only": listed,
            }
        )
    note = (
        f"{ma}: what its tracers got (nonsmp delivers a message as it makes it); {mb}: "
        f"{source}. Timestamps are left out and pids named by their role before the "
        f"messages are lined up per tracer and tracee."
    )
    if skipped:
        note += (
            f" {skipped:,} messages {mb} made for tracers the scenario does not name (such "
            f"as the churn workload's own short-lived tracers) are not compared: {ma}'s "
            f"are not kept."
        )
    other_drops = sum(
        n
        for r, bt in sa["stats"].get("dropped_by_reason", {}).items()
        for t, n in bt.items()
        if t in _TYPES_COMPARED
    )
    if other_drops:
        note += (
            f" {ma} also dropped {other_drops:,} trace messages it made; they are not "
            f"listed (only smp's dispatcher keeps a journal)."
        )
    if not ctx["deterministic"]:
        note += f" This scenario has faults, so some differences are timing: {ctx['rest']}."
    return {
        "deterministic": ctx["deterministic"],
        "source": {ma: "delivered", mb: source},
        "note": note,
        "tracers": tracers,
    }


def compare_runs(
    a, b, first: int = 20, *, scenario: dict | None = None, smp_made: list | None = None
) -> dict:
    """Side by side of two runs (``a`` nonsmp, ``b`` smp, say); JSON-able.
    ``first``: how many messages only one mode made to list per tracer."""
    sa, sb = a.summary, b.summary
    rows = []
    a_mode, b_mode = sa["mode"], sb["mode"]
    if a_mode == b_mode:
        a_mode, b_mode = a_mode + "(a)", b_mode + "(b)"
    ta, tb = sa["stats"], sb["stats"]
    rest = _rest(scenario, sa, sb)

    def row(what, x, y):
        rows.append(
            {
                "what": what,
                a_mode: x,
                b_mode: y,
                "differs": x != y,
                "why": explain_row(
                    what, ta, tb, a_mode, b_mode, rest, (sa["schedulers"], sb["schedulers"])
                )
                if x != y
                else None,
            }
        )

    for key in (
        "made",
        "delivered",
        "dropped",
        "queued",
        "suppressed",
        "fake_schedule_pairs",
        "tracer_checks_reset",
        "messages_sent",
    ):
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
                row(
                    f"{kind.split('_')[0]} {r} {t}",
                    ta.get(kind, {}).get(r, {}).get(t, 0),
                    tb.get(kind, {}).get(r, {}).get(t, 0),
                )
    row("throughput made/s", sa["throughput"]["made_per_s"], sb["throughput"]["made_per_s"])
    row("elapsed s", sa["elapsed_s"], sb["elapsed_s"])
    row("latency p50 ns", sa["latency_ns"]["p50"], sb["latency_ns"]["p50"])
    row("latency p99 ns", sa["latency_ns"]["p99"], sb["latency_ns"]["p99"])
    order = {a_mode: check_invariants(a), b_mode: check_invariants(b)}
    msgs = message_differences(a, b, smp_made=smp_made, scenario=scenario, limit=first)
    return {
        "kind": "compare",
        "modes": [a_mode, b_mode],
        "rows": rows,
        "invariants": order,
        "messages": msgs,
        "runs": {a_mode: sa, b_mode: sb},
        "order_note": ORDER_NOTE,
    }


def _show(term) -> str:
    text = format_dbg(term).rstrip("\n") or format_term(term)
    return text.replace("'<", "<").replace(">'", ">")


DEFAULT_COMPARE_OPERATIONS = 100


def same_work(sc: dict, operations: int | None = None) -> tuple[dict, dict]:
    """The scenario ``compare`` runs in both modes: count-bounded, so both do
    the same work.  A time-bounded scenario is converted (each workload
    process does ``operations`` iterations, ``DEFAULT_COMPARE_OPERATIONS``
    unless given); returns the scenario and what was done, with a note."""

    d = sc["duration"]
    out = copy.deepcopy(sc)
    if d["seconds"] is None and operations is None:
        return out, {
            "bounded_by": "operations",
            "operations": d["operations"],
            "converted_from_seconds": None,
            "note": f"both modes run the same work: {d['operations']:,} operations per "
            f"workload process (duration.operations)",
        }
    ops = operations or DEFAULT_COMPARE_OPERATIONS
    out["duration"] = {"seconds": None, "operations": ops}
    if d["seconds"] is None:
        return out, {
            "bounded_by": "operations",
            "operations": ops,
            "converted_from_seconds": None,
            "note": f"both modes run the same work: {ops:,} operations per workload "
            f"process (--operations; the scenario says {d['operations']:,})",
        }
    src = sc.get("source") or sc["name"]
    return out, {
        "bounded_by": "operations",
        "operations": ops,
        "converted_from_seconds": d["seconds"],
        "note": f"{src} is time-bounded (duration.seconds = {d['seconds']:g}): in a "
        f"time-bounded run each mode does as much work as it manages, so "
        f"compare converted it: both modes run {ops:,} operations per workload "
        f"process instead" + ("" if operations else " (--operations N to choose)"),
    }


# ---------------------------------------------------------------- expect clauses
# A scenario's ``[[expect]]`` clauses, checked against what a run recorded
# (``check_expect``) or against a simulated outcome (``expect_checks``).  Both
# are first put in one shape, ``_View``: per tracer what it received and its
# numbered workload messages, the drop counts, and the groups' processes.

#: a trace message about a numbered workload message, as an explored outcome
#: writes it (pids as roles): tracee, event, the message's tag, sender and number
_NUMBERED_TEXT = re.compile(
    r"\{trace(?:_ts)?,([^,{}]+),(send|'receive'),"
    r"\{(?:[a-z][A-Za-z0-9_@]*|'(?:[^'\\]|\\.)*'),([^,{}]+),(-?\d+)[,}]"
)
_LABEL = re.compile(r"^(?P<group>.*)\[(?P<i>\d+)\]\.(?P<role>\w+)$")


def _last_seq(workload: str, role: str, params: dict, ops: int) -> int | None:
    """The number of the last (Tag, Sender, Seq) message a ``role`` process of
    ``workload`` sends in a run of ``ops`` operations, numbered from 0 (the
    bodies in ``smp.app.workloads``), or None when it sends none."""
    if workload == "ping_pong":
        return {"ping": ops, "pong": ops - 1}.get(role)  # the pings and a stop; a pong each
    if workload in ("ring", "seq_chain") and (role == "head" or role.startswith("member")):
        return ops  # each token passed on, and the stop
    if workload == "fan_in" and role.startswith("sender"):
        return ops  # the casts and a done
    if workload == "churn" and role == "churner":
        return ops * params["burst"]  # burst requests an operation, and a stop
    return None


class _RoleEnv:
    """A workload's set-up environment that spawns nothing: ``_roles`` reads
    the roles the set-up would give its processes."""

    ops = secs = 0
    vm = rng = deadline = None

    def __init__(self):
        self._n = 0

    def spawn(self, *args, **kw):
        self._n += 1
        return self._n

    def counter(self) -> int:
        return self.spawn()

    def place(self, g):
        return None

    def define_calls(self):
        pass


def _roles(g: dict) -> list[str]:
    """The labels (``pp[0].ping``) of group ``g``'s processes, as execute gives them."""
    w = WORKLOADS[g["workload"]]
    env = _RoleEnv()
    return [
        f"{g['name']}[{i}].{role}"
        for i in range(g["count"])
        for role, _ in w.setup(env, g, g["params"])
    ]


class _View:
    """What the clauses are checked against.  ``received``: tracer -> the
    number of messages it got; ``numbered``: tracer -> ``(tracee, event,
    sender, seq)`` of each message about a numbered workload message
    (processes as keys: pids of a run, roles of an explored outcome);
    ``seen``: key -> the highest number the key's process is seen to have
    sent anywhere; ``procs``: group -> ``[(key, role)]``; ``drops``: reason ->
    count; ``stopped``: groups whose processes may have stopped early;
    ``ops``: each workload process's operations, when the run counted them."""

    def __init__(self, sc, received, numbered, seen, procs, drops, drops_from, stopped, show):
        self.sc = sc
        self.received, self.numbered, self.seen = received, numbered, seen
        self.procs, self.drops, self.drops_from = procs, drops, drops_from
        self.stopped, self.show = stopped, show
        self.ops = sc["duration"]["operations"] if sc["duration"]["seconds"] is None else None


def _see(seen: dict, sender, seq: int) -> None:
    if seq > seen.get(sender, -1):
        seen[sender] = seq


def _run_view(outcome, sc: dict) -> _View:
    """A run's ``_View``: its tracers' messages, its statistics, its labels."""
    labels = outcome.labels
    numbered: dict = {}
    seen: dict = {}
    for name, terms in outcome.messages.items():
        items = numbered[name] = []
        for term in terms:
            if not (
                type(term) is tuple
                and len(term) >= 4
                and term[0] in (_TRACE, _TRACE_TS)
                and term[2] in (_SEND, _RECEIVE)
            ):
                continue
            msg = term[3]
            if not (
                type(msg) is tuple
                and len(msg) >= 3
                and type(msg[0]) is Atom
                and type(msg[1]) is Pid
                and type(msg[2]) is int
            ):
                continue
            if term[2] is _SEND and (len(term) < 5 or msg[1] != term[1]):
                continue
            items.append((term[1], term[2].name, msg[1], msg[2]))
            _see(seen, msg[1], msg[2])
    groups = {g["name"] for g in sc["groups"]}
    procs: dict = {g: [] for g in groups}
    for ref, label in labels.items():
        m = _LABEL.match(label) if isinstance(label, str) else None
        if m and m["group"] in groups and type(ref) is Pid:
            procs[m["group"]].append((ref, m["role"]))
    st = outcome.summary["stats"]
    drops = {r: sum(by_type.values()) for r, by_type in st["dropped_by_reason"].items()}
    drops["any"] = st["dropped"]
    s = outcome.summary
    stopped = set(groups) if s.get("interrupted") or s.get("error") else set()
    for f in s.get("faults") or []:
        if f["action"] == "kill_processes" and not str(f.get("result", "")).startswith("not"):
            stopped.add(f.get("target"))
    return _View(
        sc,
        {name: len(terms) for name, terms in outcome.messages.items()},
        numbered,
        seen,
        procs,
        drops,
        "the run's statistics (dropped_by_reason)",
        stopped,
        lambda ref: labels.get(ref, format_term(ref)),
    )


def _sim_view(oc, sc: dict) -> _View:
    """An explored outcome's ``_View`` (``smp.sim.outcome.Outcome``: text,
    pids as roles); ``sc`` is the scenario as the simulator bounded it."""
    numbered: dict = {}
    seen: dict = {}
    received = {}
    for name, texts in oc.received:
        received[name] = len(texts)
        items = numbered[name] = []
        for text in texts:
            m = _NUMBERED_TEXT.match(text)
            if m is None:
                continue
            tracee, event, sender, seq = m[1], m[2].strip("'"), m[3], int(m[4])
            if event == "send" and sender != tracee:
                continue
            items.append((tracee, event, sender, seq))
            _see(seen, sender, seq)
    drops: dict = {"any": 0}
    for label, fate in oc.fates:
        m = _NUMBERED_TEXT.search(label)
        if m is not None:
            _see(seen, m[3], int(m[4]))
        if fate.startswith("dropped "):
            reason = fate.split()[1]
            drops[reason] = drops.get(reason, 0) + 1
            drops["any"] += 1
    procs = {
        g["name"]: [(label, label.rsplit(".", 1)[1]) for label in _roles(g)] for g in sc["groups"]
    }
    stopped = {f["target"] for f in sc["faults"] if f["action"] == "kill_processes"}
    return _View(sc, received, numbered, seen, procs, drops, "the outcome's drops", stopped, str)


def _missing(got: Counter, last: int, mult: int) -> tuple[int, list[tuple[int, int]]]:
    """How many messages ``mult`` processes numbering 0..``last`` sent that
    ``got`` (number -> how many times seen) lacks, and the numbers missing as
    ``(first, last)`` ranges; linear in the numbers seen, not in ``last``."""
    n, ranges = 0, []

    def gap(a: int, b: int) -> None:
        if ranges and ranges[-1][1] == a - 1:
            ranges[-1] = (ranges[-1][0], b)
        else:
            ranges.append((a, b))

    nxt = 0
    for seq in sorted(x for x in got if 0 <= x <= last):
        if seq > nxt:
            n += mult * (seq - nxt)
            gap(nxt, seq - 1)
        if got[seq] < mult:
            n += mult - got[seq]
            gap(seq, seq)
        nxt = seq + 1
    if nxt <= last:
        n += mult * (last + 1 - nxt)
        gap(nxt, last)
    return n, ranges


def _expect_no_drop(e: dict, v: _View) -> dict:
    r = e["reason"]
    n = v.drops.get(r, 0)
    what = ("trace message" if n == 1 else "trace messages") + " dropped"
    what += "" if r == "any" else f" as {r}"
    return {
        "held": n == 0,
        "count": n,
        "from": v.drops_from,
        "evidence": f"{n:,} {what}, from {v.drops_from}",
    }


def _expect_count(e: dict, v: _View) -> dict:
    n = v.received.get(e["tracer"], 0)
    lo, hi = e["min"], e["max"]
    want = f"{lo:,}..{hi:,}" if hi is not None else f">= {lo:,}"
    return {
        "held": lo <= n and (hi is None or n <= hi),
        "count": n,
        "from": f"the messages tracer {e['tracer']} received",
        "evidence": f"tracer {e['tracer']} received {n:,} trace messages (wanted {want})",
    }


def _expect_order(e: dict, v: _View) -> dict:
    t = e["tracer"]
    items = v.numbered.get(t, [])
    last: dict = {}
    broken = []
    for i, (tracee, event, sender, seq) in enumerate(items):
        k = (tracee, event, sender)
        prev = last.get(k)
        if prev is not None and seq <= prev:
            broken.append(
                f"{v.show(tracee)} {event} of {v.show(sender)}'s {seq} after its {prev} "
                f"(numbered message {i + 1})"
            )
        last[k] = seq
    return {
        "held": not broken,
        "count": len(broken),
        "from": f"the {len(items):,} numbered workload messages tracer {t} received",
        "evidence": f"{len(broken):,} out of order among the {len(items):,} send and receive "
        f"messages about numbered workload messages tracer {t} received"
        + (f": {'; '.join(broken[:3])}" + (", ..." if len(broken) > 3 else "") if broken else ""),
    }


def _expect_receives_every(e: dict, v: _View) -> dict:
    t, gname = e["tracer"], e["group"]
    g = next(x for x in v.sc["groups"] if x["name"] == gname)
    ops = None if gname in v.stopped else v.ops
    procs = v.procs.get(gname, [])
    mult = Counter(key for key, _ in procs)  # an explored outcome names two pairs' pings alike
    lasts: dict = {}
    for key, role in procs:
        last = None if ops is None else _last_seq(g["workload"], role, g["params"], ops)
        seen = v.seen.get(key)
        if last is None or (seen is not None and seen > last):
            last = seen
        if last is not None:
            lasts[key] = max(last, lasts.get(key, -1))
    got: dict = {key: Counter() for key in lasts}
    for _tracee, event, sender, seq in v.numbered.get(t, []):
        if event == e["event"] and sender in got:
            got[sender][seq] += 1
    n_exp = n_missing = 0
    parts = []
    for key, last in lasts.items():
        n_exp += mult[key] * (last + 1)
        n, ranges = _missing(got[key], last, mult[key])
        if n:
            n_missing += n
            shown = ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in ranges[:4])
            parts.append(f"{v.show(key)} {shown}" + (", ..." if len(ranges) > 4 else ""))
    n_got = n_exp - n_missing
    if ops is not None:
        source = f"duration.operations = {ops:,}: each process's messages numbered 0 to its last"
    else:
        source = "the highest number each process is seen to send in the run" + (
            " (its processes may have stopped early)" if gname in v.stopped else ""
        )
    text = (
        f"tracer {t} received {n_got:,} of the {n_exp:,} {e['event']} messages of group "
        f"{gname}'s {len(procs)} process(es) (expected from {source})"
    )
    if n_missing:
        parts.sort()
        text += f"; missing {n_missing:,}: " + "; ".join(parts[:4])
        text += ", ..." if len(parts) > 4 else ""
    return {
        "held": not n_missing and n_exp > 0,
        "count": n_got,
        "of": n_exp,
        "from": f"the messages tracer {t} received, against {source}",
        "evidence": text + ("" if n_exp else "; no numbered message of the group was seen"),
    }


_EXPECT_CHECKS = {
    "receives_every": _expect_receives_every,
    "no_drop": _expect_no_drop,
    "order": _expect_order,
    "count": _expect_count,
}


def expect_text(e: dict) -> str:
    """A clause in one line: ``receives_every tracer=t group=pp event=send``."""
    keys = [k for k in EXPECT_KEYS[e["kind"]] if e.get(k) is not None]
    return " ".join([e["kind"]] + [f"{k}={e[k]}" for k in keys])


def _result(i: int, e: dict, v: _View) -> dict:
    return {
        "expect": i,
        "where": e.get("where") or f"expect[{i}]",
        "clause": expect_text(e),
        **_EXPECT_CHECKS[e["kind"]](e, v),
    }


def check_expect(outcome, sc: dict) -> list[dict]:
    """Each of ``sc``'s ``[[expect]]`` clauses checked against a run's
    ``outcome``: ``{"expect": index, "where", "clause", "held", "count",
    "from", "evidence"}`` (``receives_every`` adds ``"of"``, the count
    expected).  ``evidence`` says the count and what it came from."""
    clauses = sc.get("expect") or []
    if not clauses:
        return []
    v = _run_view(outcome, sc)
    return [_result(i, e, v) for i, e in enumerate(clauses)]


def expect_broken(results: list[dict]) -> list[str]:
    """One line per broken clause: ``where: clause: evidence``."""
    return [f"{r['where']}: {r['clause']}: {r['evidence']}" for r in results if not r["held"]]


class ExpectCheck:
    """Clause ``index`` of scenario ``sc`` (as the simulator bounded it) as a
    user predicate of ``smp.sim``: called with an explored outcome, it
    returns True when the clause holds, else its evidence.  Picklable, for
    ``--jobs`` workers."""

    def __init__(self, sc: dict, index: int):
        self.sc, self.index = sc, index
        self.__name__ = f"expect[{index}] {expect_text(sc['expect'][index])}"

    def __call__(self, oc) -> bool | str:
        r = _EXPECT_CHECKS[self.sc["expect"][self.index]["kind"]](
            self.sc["expect"][self.index], _sim_view(oc, self.sc)
        )
        return True if r["held"] else r["evidence"]


def expect_checks(sc: dict) -> list[ExpectCheck]:
    """The user predicates of ``sc``'s ``[[expect]]`` clauses, for ``smp.sim``."""
    return [ExpectCheck(sc, i) for i in range(len(sc.get("expect") or []))]
