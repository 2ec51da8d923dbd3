"""What a run's faults did: one report entry per fault event, and its line.

Runs in the user's process, after the run.  ``fault_report`` joins the
plan's records with the controller's ``FAULT_REC`` records in the fault log
and the effect seen in the trace (``lost_in_gap``: the events no tracer
received while a killed tracer was being replaced); ``fault_notes`` writes
them one line each, naming the scenario file and line.
"""

from __future__ import annotations

from smp.app.fault_steps import FAULT_REC
from smp.core.pretty import format_term
from smp.core.terms import Atom, Pid, Port

A = Atom

#: A fault carried out (its last BIF answered) more than this many seconds
#: after its planned time is late, as is one not carried out yet when the
#: workload was over that long after its time: it did not come while the
#: run did.  Reported so in its entry (``late``), its line (``LATE``) and as
#: an invariant failure (``fault_failures``, in
#: ``smp.app.compare.check_invariants``), whatever ``may_fail`` says.  The
#: controller's own BIFs are served a few milliseconds each (tens on a
#: loaded machine: a kill_tracer retraces each tracee with one), and
#: execute pauses the processes about every ``CHECK_S`` (0.1 s) to look at
#: the run.
FAULT_LATE_S = 0.5


def fault_report(
    records: list,
    log: list,
    messages: dict,
    *,
    not_fired_after=None,
    ended_early: bool = False,
    labels=None,
) -> list[dict]:
    """One entry per fault event: what was planned (``records``, from
    ``_resolve_plan``), what the controller did (its records in the fault
    log) and the effect seen in the run's trace.

    Each entry has ``action``, ``target``, ``victim`` (the tracer killed or
    replaced), ``replacement``, ``at`` and ``planned_at`` (seconds on the
    plan's clock, which starts with the controller), ``started_at`` and
    ``done_at``, ``result`` (``ok``, ``not fired``, or why the fault did not
    take), ``took`` (None when it did not fire or the run was interrupted
    or failed before the controller reported it; False when the controller
    did not report it from a run that ended normally), ``may_fail``,
    ``late_s`` (``done_at`` less ``planned_at``; None when not done),
    ``late`` (``FAULT_LATE_S``: done more than that after its time, or not
    carried out yet when the workload was over more than that after its
    time; None when that cannot be said) and ``late_why``, and ``effect``: for kill_tracer ``tracees_held`` (the victim's tracees among
    the groups' processes, as the set-up traced them), ``tracees_moved``,
    ``tracees_gone`` (died before they could be moved), ``roles_moved``,
    ``death_at`` and ``retraced_at`` (when the ``'EXIT'`` came and when the
    last tracee and role had moved), ``gap_ms`` between the two,
    ``replacement_received`` (messages the replacement got by the end of the
    run), ``lost_before_retrace`` (see ``lost_in_gap``) and
    ``lost_streams_uncounted`` (the streams only the replacement received,
    whose events before it are not counted: ``lost_before_retrace`` is then
    a lower bound, and said so); for
    replace_seq_tracer, replace_monitor and replace_profiler the
    ``replacement_received``; for kill_processes ``killed``, ``gone`` and
    ``survived``; for set_sensitive ``marked``."""
    labels = labels or {}
    done = {}
    for term in log:
        if type(term) is tuple and len(term) == 6 and term[0] is FAULT_REC:
            done[term[1]] = term
    out = []
    for idx, rec in enumerate(records):
        e = dict(rec, at=rec["planned_at"], started_at=None, done_at=None, effect={})
        e["late_s"] = e["late"] = e["late_why"] = None
        got = done.get(idx)
        if got is None:
            e["took"] = None
            if not_fired_after is not None and rec["planned_at"] > not_fired_after:
                e["result"] = NOT_FIRED + ": the workload was over"
            elif not_fired_after is not None:
                e["result"] = "cut short: the workload was over while it was carried out"
                e["late"] = not_fired_after - rec["planned_at"] > FAULT_LATE_S
                if e["late"]:
                    e["late_why"] = (
                        f"not carried out by {not_fired_after:.3f} s, when the workload was over"
                    )
            elif ended_early:
                e["result"] = "no record: the run was interrupted or failed first"
            else:
                e["took"] = False
                e["result"] = "no record: the controller did not carry it out"
            out.append(e)
            continue
        _tag, _i, began, finished, result, effect = got
        e["started_at"], e["done_at"] = began / 1e6, finished / 1e6
        _lateness(e)
        e["took"] = result is A("ok")
        e["result"] = (
            "ok"
            if e["took"]
            else result.decode("utf-8", "replace")
            if type(result) is bytes
            else format_term(result)
        )
        eff = {k.name: v for k, v in effect}
        out_eff: dict = {}
        if rec["action"] == "kill_tracer":
            death = eff.get("death_us")
            out_eff["tracees_held"] = eff.get("held", 0)
            out_eff["death_at"] = death / 1e6 if type(death) is int else None
            if rec["replacement"]:
                out_eff["tracees_moved"] = eff.get("moved", 0)
                out_eff["tracees_gone"] = eff.get("tracees_gone", 0)
                out_eff["roles_moved"] = [r.name for r in eff.get("roles", [])]
                out_eff["retraced_at"] = eff["retraced_us"] / 1e6 if "retraced_us" in eff else None
                out_eff["gap_ms"] = (
                    round((eff["retraced_us"] - death) / 1000, 3)
                    if type(death) is int and "retraced_us" in eff
                    else None
                )
                before = _streams(messages.get(rec["victim"], []), True)
                after = _streams(messages.get(rec["replacement"], []), False)
                out_eff["lost_before_retrace"] = _lost(before, after)
                out_eff["lost_streams_uncounted"] = _unseen(before, after)
        elif rec["action"].startswith("replace_"):
            prev = eff.get("previous")
            if type(prev) is tuple and prev:  # {Tracer, Options}
                prev = prev[0]
            out_eff["previous"] = (
                labels.get(prev, format_term(prev))
                if type(prev) in (Pid, Port)
                else format_term(prev)
            )
        else:
            out_eff.update(eff)
        if rec["replacement"]:
            out_eff["replacement_received"] = len(messages.get(rec["replacement"], []))
        e["effect"] = out_eff
        out.append(e)
    return out


def _lateness(e: dict) -> None:
    """``late_s``, ``late`` and ``late_why`` of a fault the controller carried out."""
    e["late_s"] = round(e["done_at"] - e["planned_at"], 3)
    e["late"] = e["late_s"] > FAULT_LATE_S
    e["late_why"] = (
        f"done {e['late_s']:.3f} s after its time, over the {FAULT_LATE_S:g} s tolerance"
        if e["late"]
        else None
    )


_TRACE_TAGS = (A("trace"), A("trace_ts"))
_SEND_RECV = (A("send"), A("receive"))


def _streams(terms: list, last: bool) -> dict:
    """``{(tracee, event, sender): seq}``: the last (or first) sequence number
    of each stream of workload messages in ``terms``."""
    out: dict = {}
    for t in terms:
        if not (type(t) is tuple and len(t) >= 4 and t[0] in _TRACE_TAGS and t[2] in _SEND_RECV):
            continue
        m = t[3]
        if not (type(m) is tuple and len(m) >= 3 and type(m[2]) is int):
            continue
        key = (t[1], t[2], m[1])
        if last or key not in out:
            out[key] = m[2]
    return out


def lost_in_gap(victim_terms: list, replacement_terms: list) -> int | None:
    """How many trace events of the victim's tracees no tracer received
    between the victim's last message and the replacement's first: the race
    of a tracer replaced after its death.

    Derived from the workload's own numbering, not counted by the VM: every
    workload message carries its sender's sequence number, one more for each
    message the sender sends, so for each stream (a tracee's ``send`` events,
    or its ``'receive'`` events of one sender's messages) that both tracers
    received, the numbers between the victim's last and the replacement's
    first are events that went to nobody.  In smp they were made and dropped
    (the tracer was dead, ``receiver_dead``) or were queued for the victim
    when it died; in nonsmp the first was suppressed and the rest were never
    made, the tracee having lost its flags.  Only ``send``/``'receive'``
    events of sequence-numbered workload messages count (call, gc, procs,
    seq_trace and port events are not numbered), and a stream only one of the
    two received is not counted, so this is a lower bound; an event the
    tracee did not trace meanwhile (a process made sensitive) would count.
    None when no stream is in both."""
    return _lost(_streams(victim_terms, True), _streams(replacement_terms, False))


def _lost(before: dict, after: dict) -> int | None:
    both = before.keys() & after.keys()
    if not both:
        return None
    return sum(max(0, after[k] - before[k] - 1) for k in both)


def _unseen(before: dict, after: dict) -> int:
    """The streams (``_streams``) the replacement received and the victim
    did not: ``lost_in_gap`` cannot tell how many of their events went to
    nobody (their numbers before the replacement's first may have been made
    before the tracee was traced, or sent to an earlier tracer)."""
    return sum(1 for k, first in after.items() if k not in before and first > 0)


def fault_failures(summary: dict) -> list[str]:
    """One line per fault event that fired and did not take, unless the
    scenario marked it ``may_fail``: the invariant failures of a run's
    faults.  A fault carried out late (``FAULT_LATE_S``) is said apart
    (``LATE`` in its line, the stress report's count), not as a failure:
    how late a fault comes depends on how busy the machine is, and the
    invariants hold or not whenever it came."""
    out = []
    for f in summary.get("faults") or []:
        where = f"{f['where']}: " if f.get("where") else ""
        what = f"{where}{f['action']}" + (f" {f['target']}" if f.get("target") else "")
        if f.get("took") is False and not f.get("may_fail"):
            out.append(f"fault: {what} at {f['planned_at']:g} s did not take: {f['result']}")
    return out


#: the result of a fault event the workload ended before
NOT_FIRED = "not fired"


def not_fired(f: dict) -> bool:
    """Whether a fault event never came: the workload was over before it."""
    return f.get("took") is None and str(f.get("result", "")).startswith(NOT_FIRED)


def fault_notes(summary: dict, every: bool = True) -> list[str]:
    """One line per fault event with its result and effect (the faults that
    did not fire as one line per fault), naming the file and line; with
    ``every`` false only the events that did not take (and may not fail),
    those carried out late and the faults that did not fire."""
    out = []
    for f in summary.get("faults") or []:
        if not_fired(f):
            continue  # listed below, once per fault
        if every or (f["took"] is False and not f.get("may_fail")) or f.get("late"):
            out.append(_fault_line(f))
    for f in summary.get("faults_not_fired") or []:
        where = f"{f['where']}: " if f.get("where") else ""
        out.append(
            f"{where}{f['action']} at {f['first_missed_s']:g} s did not fire"
            + (f" ({f['missed']} times)" if f["missed"] > 1 else "")
            + f": {f['why']}"
        )
    return out


def _fault_line(f: dict) -> str:
    where = f"{f['where']}: " if f.get("where") else ""
    what = f["action"] + (f" {f['target']}" if f.get("target") else "")
    if f["action"] == "kill_tracer" and f.get("victim") not in (None, f.get("target")):
        what += f" (now {f['victim']})"
    head = f"{where}fault {what} at {f['planned_at']:g} s"
    late = f"LATE: {f['late_why']}" if f.get("late") else ""
    if f["done_at"] is not None:
        head += f" (done at {f['done_at']:.3f} s" + (f", {late})" if late else ")")
    elif late:
        head += f" ({late})"
    if f["took"] is None:
        return f"{head}: {f['result']}"
    res = "ok" if f["took"] else "DID NOT TAKE: " + f["result"]
    if not f["took"] and f.get("may_fail"):
        res += " (may_fail)"
    eff = f["effect"]
    parts = []
    repl = f.get("replacement")
    if f["action"] == "kill_tracer":
        if repl and not eff["tracees_held"] and not eff.get("roles_moved"):
            parts.append(
                f"it held no tracee of the groups and no role: nothing moved to {repl}, "
                f"which received {eff['replacement_received']:,} messages"
            )
        elif repl:
            gone = f" ({eff['tracees_gone']} had exited)" if eff.get("tracees_gone") else ""
            roles = f" and {', '.join(eff['roles_moved'])}" if eff.get("roles_moved") else ""
            gap = f" {eff['gap_ms']:g} ms after its death" if eff.get("gap_ms") is not None else ""
            lost = eff.get("lost_before_retrace")
            parts.append(
                f"{eff.get('tracees_moved', 0)} of {eff['tracees_held']} tracees{roles} "
                f"moved to {repl}{gap}{gone}"
            )
            parts.append(f"{repl} received {eff['replacement_received']:,} messages")
            unseen = eff.get("lost_streams_uncounted") or 0
            parts.append(
                "send/receive events lost before the retrace: "
                + (
                    "- (no stream seen by both)"
                    if lost is None
                    else f"at least {lost:,} ({unseen} stream(s) only {repl} received, "
                    "their events before it not counted)"
                    if unseen
                    else f"{lost:,}"
                )
            )
        else:
            parts.append(f"{eff['tracees_held']} tracees left without a tracer")
    elif f["action"].startswith("replace_"):
        parts.append(
            f"{eff.get('previous') or f.get('victim')} replaced by {repl}, which received "
            f"{eff.get('replacement_received', 0):,} messages"
        )
    elif f["action"] in ("kill_processes", "set_sensitive"):
        key = "killed" if f["action"] == "kill_processes" else "marked"
        n, asked = eff.get(key, 0), f.get("count")
        short = (
            f" of the {asked} asked: no other process of {f.get('target')} was alive"
            if asked is not None and 0 < n < asked
            else ""
        )
        parts.append(f"{n} {key}{short}")
    return f"{head}: {res}" + ("; " + "; ".join(parts) if parts else "")
