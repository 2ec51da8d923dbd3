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

The work is split by job: ``smp.app.compare_why`` (why a row differs),
``smp.app.compare_causes`` (every differing message in a class by its
cause, from both runs' records: what ``smp-emu compare`` prints),
``smp.app.compare_messages`` (without those records: the messages only one
mode made, with a reason guessed from each message's kind) and
``smp.app.expect`` (a scenario's ``[[expect]]`` clauses); their public names
are importable from here.
"""

from __future__ import annotations

import copy

from smp.app.compare_messages import (
    _PROFILE,
    _SEQ,
    _TRACE_TS,
    journal_events,
    journal_messages,
    message_differences,
    normalise,
)
from smp.app.compare_why import ORDER_NOTE, _rest, explain_row, why
from smp.app.expect import ExpectCheck, check_expect, expect_broken, expect_checks, expect_text
from smp.app.fault_report import fault_failures
from smp.core.pretty import format_term
from smp.core.terms import Atom
from smp.ports.order import OrderChecker

__all__ = [
    "check_invariants",
    "compare_runs",
    "compare_measured",
    "normalise",
    "OrderChecker",
    "why",
    "explain_row",
    "message_differences",
    "journal_messages",
    "journal_events",
    "check_expect",
    "expect_broken",
    "expect_checks",
    "expect_text",
    "ExpectCheck",
]


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
    unless the scenario marked it ``may_fail`` (a fault carried out late is
    said apart: ``smp.app.fault_report.fault_failures``)."""
    out: list[str] = fault_failures(outcome.summary)
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


def compare_runs(
    a,
    b,
    first: int = 20,
    *,
    scenario: dict | None = None,
    smp_made: list | None = None,
    causes: dict | None = None,
) -> dict:
    """Side by side of two runs (``a`` nonsmp, ``b`` smp, say); JSON-able.
    ``first``: how many messages only one mode made to list per tracer;
    ``causes``: ``smp.app.compare_causes.message_causes`` of the two runs,
    which the rows' "why" then points to instead of guessing a cause."""
    sa, sb = a.summary, b.summary
    rows = []
    a_mode, b_mode = sa["mode"], sb["mode"]
    if a_mode == b_mode:
        a_mode, b_mode = a_mode + "(a)", b_mode + "(b)"
    ta, tb = sa["stats"], sb["stats"]
    rest = (
        _rest(scenario, sa, sb)
        if causes is None
        else "every differing message is in a class below, from both runs' records"
    )

    def row(what, x, y):
        rows.append(
            {
                "what": what,
                a_mode: x,
                b_mode: y,
                "differs": x != y,
                "why": explain_row(
                    what,
                    ta,
                    tb,
                    a_mode,
                    b_mode,
                    rest,
                    (sa["schedulers"], sb["schedulers"]),
                    made_only=None if causes is None else causes.get("made_only"),
                )
                if x != y
                else None,
            }
        )

    ca, cb = _counters(sa), _counters(sb)
    for what in _row_order([ta, tb]):
        row(what, ca.get(what, 0), cb.get(what, 0))
    order = {a_mode: check_invariants(a), b_mode: check_invariants(b)}
    msgs = message_differences(
        a, b, smp_made=smp_made, scenario=scenario, limit=first, causes=causes is not None
    )
    return {
        "kind": "compare",
        "modes": [a_mode, b_mode],
        "rows": rows,
        "invariants": order,
        "messages": msgs,
        "runs": {a_mode: sa, b_mode: sb},
        "order_note": ORDER_NOTE,
        "causes": causes,
    }


_COUNTER_KEYS = (
    "made",
    "delivered",
    "dropped",
    "queued",
    "suppressed",
    "fake_schedule_pairs",
    "tracer_checks_reset",
    "messages_sent",
)
_BY_REASON = ("dropped_by_reason", "suppressed_by_reason")
_MEASURES = ("throughput made/s", "elapsed s", "latency p50 ns", "latency p99 ns")


def _row_order(stats: list[dict]) -> list[str]:
    """The rows of a compare of runs with these ``stats``, in order: the
    counters, made and delivered per type, dropped and suppressed per reason
    and type, then throughput, time and latency."""
    out = list(_COUNTER_KEYS)
    for t in sorted({t for st in stats for t in st["made_by_type"]}):
        out += [f"made {t}", f"delivered {t}"]
    for kind in _BY_REASON:
        for r in sorted({r for st in stats for r in st.get(kind, {})}):
            for t in sorted({t for st in stats for t in st.get(kind, {}).get(r, {})}):
                out.append(f"{kind.split('_')[0]} {r} {t}")
    return out + list(_MEASURES)


def _counters(s: dict) -> dict:
    """A run's value of each row a compare can have (a row it lacks: 0)."""
    st = s["stats"]
    out = {k: st.get(k, 0) for k in _COUNTER_KEYS}
    for what in ("made", "delivered"):
        for t, n in st[f"{what}_by_type"].items():
            out[f"{what} {t}"] = n
    for kind in _BY_REASON:
        for r, by_type in st.get(kind, {}).items():
            for t, n in by_type.items():
                out[f"{kind.split('_')[0]} {r} {t}"] = n
    measures = (
        s["throughput"]["made_per_s"],
        s["elapsed_s"],
        s["latency_ns"]["p50"],
        s["latency_ns"]["p99"],
    )
    out.update(zip(_MEASURES, measures, strict=True))
    return out


def compare_measured(a, b, b_mode: str) -> dict:
    """The side by side of an interrupted compare, JSON-able: the rows of
    ``compare_runs`` with what each run measured until it stopped (``b``
    None: the second run, ``b_mode``, was never started; its column is
    null and its run absent), each run's invariants, and no "why" nor
    messages lined up: a run cut short differs from a whole one by where it
    was stopped, not by its build."""
    sa = a.summary
    sb = None if b is None else b.summary
    a_mode = sa["mode"]
    ca = _counters(sa)
    cb = None if sb is None else _counters(sb)
    rows = []
    for what in _row_order([sa["stats"]] + ([] if sb is None else [sb["stats"]])):
        x, y = ca.get(what, 0), None if cb is None else cb.get(what, 0)
        rows.append(
            {"what": what, a_mode: x, b_mode: y, "differs": cb is not None and x != y, "why": None}
        )
    runs = {a_mode: sa} if sb is None else {a_mode: sa, b_mode: sb}
    return {
        "kind": "compare",
        "interrupted": True,
        "modes": [a_mode, b_mode],
        "rows": rows,
        "invariants": {
            m: check_invariants(o) for m, o in ((a_mode, a), (b_mode, b)) if o is not None
        },
        "messages": None,
        "runs": runs,
        "order_note": None,
        "causes": None,
    }


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
