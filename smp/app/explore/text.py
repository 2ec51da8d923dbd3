"""The terminal report of an explore result.

``format_text`` renders the result's JSON (``ExploreResult.to_json``) as
the text ``smp-emu explore`` prints: the queue, the changes and what each
commutes with, the schedule counts, the outcome table (one column per
queued message: who got it, or why it was dropped), and for the smp
outcomes nonsmp cannot produce, the change that made the difference and the
``#ifdef ERTS_SMP`` of the seed behind it (``WHY``).
"""

from __future__ import annotations

import json

__all__ = ["WHY", "format_text"]

WHY = {
    "SEQTRACE": (
        "seq_trace_output_generic: nonsmp looks the seq tracer up and sends to it when "
        "the message is made (erl_trace.c:1168-1174, #ifndef ERTS_SMP); smp queues the "
        "message (erl_trace.c:1241-1242, #ifdef ERTS_SMP: enqueue_sys_msg_unlocked("
        "SYS_MSG_TYPE_SEQTRACE, ...)) and sys_msg_dispatcher_func reads the seq tracer "
        "when it dispatches (erl_trace.c:3344)"
    ),
    "SYSMON": (
        "monitor_long_gc and the other monitor_* functions: nonsmp looks the monitor up "
        "when the event happens and skips the monitor's own event (erl_trace.c:2452-2456, "
        "#ifndef ERTS_SMP: if (!monitor_p || p == monitor_p) return); smp queues the event "
        "(erl_trace.c:2485-2486, #ifdef ERTS_SMP: enqueue_sys_msg(SYS_MSG_TYPE_SYSMON, "
        "...)) and the dispatcher reads the monitor, and drops an event from it, when it "
        "dispatches (erl_trace.c:3347-3353)"
    ),
    "SYSPROF": (
        "profile_runnable_proc and the other profile_* functions: nonsmp sends through "
        "profile_send to the profiler of the moment (erl_trace.c:3005-3006, #ifndef "
        "ERTS_SMP; erl_trace.c:598-640); smp queues the message (erl_trace.c:3009-3010: "
        "enqueue_sys_msg_unlocked(SYS_MSG_TYPE_SYSPROF, ...)) and the dispatcher reads the "
        "profiler when it dispatches (erl_trace.c:3357-3363)"
    ),
    "TRACE": (
        "send_to_tracer: nonsmp checks the tracer when the message is made and resets the "
        "tracee instead of sending to a dead one (erl_trace.c:161-172, the #else of "
        "ERTS_SMP: ERTS_GET_TRACER_REF); smp never finds the tracer invalid there "
        "(erl_trace.c:149-156) and the dispatcher checks it when it dispatches "
        "(erl_trace.c:3378-3382)"
    ),
    "ERRLGR": (
        "erts_queue_error_logger_message exists in smp only (erl_trace.c:3102-3105); "
        "nonsmp delivers the report to error_logger at once"
    ),
    "PROC_MSG": "erts_send_sys_msg_proc queues in smp only (erl_trace.c:3108-3112)",
}


def _state_text(state: dict, keys) -> str:
    parts = []
    for k in keys:
        v = state[k]
        if k == "dead":
            parts.append("dead: " + (", ".join(v) if v else "none"))
        else:
            parts.append(f"{k} {v}")
    return "; ".join(parts)


def format_text(d: dict) -> str:
    """The terminal report of an explore result (its JSON)."""
    s = d["schedules"]
    lines = [
        f"explore {d['scenario']}: {len(d['queue'])} queued message(s), "
        f"{len(d['changes'])} change(s), smp with {d['schedulers']} scheduler(s) per schedule"
    ]
    if d.get("description"):
        lines.append(f"  {d['description']}")
    lines.append("queue (as the dispatcher holds it):")
    for q in d["queue"]:
        lines.append(f"  m{q['index']:<3} {q['type']:<8} from {q['from']:<8} {q['msg']}")
    lines.append("changes, in this order:")
    for c in d["changes"]:
        dep = (
            "does not commute with " + ", ".join(c["depends_on"])
            if c["depends_on"]
            else "commutes with every message"
        )
        lines.append(f"  {c['name']:<10} {c['call']}; {dep}")
    if s["single"]:
        lines.append(f"schedule {d['outcomes'][0]['schedule']}: run 1, {s['elapsed_s']:.1f} s")
    else:
        if s["exhaustive"]:
            how = "exhaustive"
        elif s["interrupted"] and s["seed"] is None:
            # (an exhaustive run stopped: no sample, no seed)
            how = f"interrupted, coverage {100 * s['coverage']:.1f} % of the classes"
        elif s["coverage"] >= 1.0 and not s["interrupted"]:
            # Beyond the exhaustive bound, but the sample met every class.
            how = f"every class, met by a random sample, seed {s['seed']}"
        else:
            how = (
                f"a random sample, seed {s['seed']}, coverage {100 * s['coverage']:.1f} % "
                f"of the classes" + (", interrupted" if s["interrupted"] else "")
            )
        if not s["pruned"]:
            how = "every schedule, no pruning"
        lines.append(
            f"schedules: {s['possible']} possible, {s['classes']} classes, "
            f"{s['run']} run ({how}); {s['outcomes']} outcome(s); "
            f"{s['elapsed_s']:.1f} s"
        )
    outs = d["outcomes"]
    varying = [
        k
        for k in ("seq_tracer", "system_monitor", "system_profile", "dead")
        if len({json.dumps(o["state"][k]) for o in outs}) > 1
    ]
    res_vary = len({json.dumps(o["results"]) for o in outs}) > 1
    common = [
        k for k in ("seq_tracer", "system_monitor", "system_profile", "dead") if k not in varying
    ]
    every = ", in every outcome" if len(outs) > 1 else ""
    if outs and common:
        lines.append(f"state after the queue{every}: " + _state_text(outs[0]["state"], common))
    if outs and not res_vary:
        lines.append(
            f"the changes returned{every}: "
            + ", ".join(
                f"{c['name']} {r}" for c, r in zip(d["changes"], outs[0]["results"], strict=False)
            )
        )
    nq = len(d["queue"])
    head = ["#", "schedule" if s["single"] else "shortest schedule"] + [
        f"m{i + 1}" for i in range(nq)
    ]
    head += ["state after"] if varying else []
    head += ["changes returned"] if res_vary else []
    head += ["runs"] + (["nonsmp"] if d.get("nonsmp") else [])
    rows = []
    for o in outs:
        row = [str(o["index"]), o["schedule"]] + list(o["fates"])
        if varying:
            row.append(_state_text(o["state"], varying))
        if res_vary:
            row.append(", ".join(o["results"]))
        row.append(str(len(o["schedules"])))
        if d.get("nonsmp"):
            row.append("same" if o["nonsmp"] else "cannot")
        rows.append(row)
    lines.append("outcomes (mN: who got queued message N, or why it was dropped):")
    lines += _table(head, rows)
    ns = d.get("nonsmp")
    if ns:
        same = ns["same_as"]
        lines.append(
            "nonsmp: 1 outcome (no dispatcher: every message is delivered when it is "
            "made, before any change), "
            + (
                f"the same as #{same}"
                if same
                else "none of the smp outcomes: "
                + _state_text(
                    ns["state"], ("seq_tracer", "system_monitor", "system_profile", "dead")
                )
                + "; received "
                + json.dumps(ns["received"])
            )
        )
        cannot = [o for o in outs if o["nonsmp"] is False]
        if cannot:
            lines.append(
                "smp outcomes nonsmp cannot produce (nonsmp delivers every message when "
                "it is made):"
            )
            for o in cannot:
                lines.append(
                    f"  #{o['index']} ({o['schedule']}): "
                    + "; ".join(w["text"] for w in o["why_not_nonsmp"])
                )
            lines.append("  why, in the seed:")
            for t in sorted({t for o in cannot for w in o["why_not_nonsmp"] for t in w["types"]}):
                lines.append(f"    {t}: {WHY.get(t, WHY['PROC_MSG'])}")
    lines.append("replay an outcome:")
    for o in outs:
        lines.append(f"  #{o['index']}  {o['replay']}")
    for note in d.get("notes", []):
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"


def _table(head: list, rows: list) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=False)]
    out = ["  " + "  ".join(str(h).ljust(w) for h, w in zip(head, widths, strict=False)).rstrip()]
    for r in rows:
        out.append(
            "  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=False)).rstrip()
        )
    return out
