"""A run's results: ``RunOutcome`` and the summary ``execute`` writes.

Runs in the user's process, after the run.  ``_summary`` puts the
statistics, the latencies and the tracers' counts into the JSON-able
summary; ``_duration_report`` sets what was asked (``seconds`` or
``operations``) against how long the run took, and ``duration_note`` says it
in one line when a time-bounded run took more than 10 % longer.
"""

from __future__ import annotations

from dataclasses import dataclass

from smp.app.run_setup import CHECK_S


@dataclass
class RunOutcome:
    """What one run produced: the summary (JSON-able) and every trace term per tracer."""

    summary: dict
    messages: dict  # tracer name -> [term, ...] in arrival order
    labels: dict  # pid/port -> stable label ("pp[0].ping")
    #: nonsmp with ``record_fates``: ``Emulator.fates()`` (entries, not kept)
    fates: tuple | None = None
    #: with ``record_fates``: ``Emulator.spawn_lineage()``
    lineage: list | None = None


def _duration_report(sc: dict, summary: dict, held: dict) -> dict:
    """What was asked (``seconds`` or ``operations``) against how long the run
    took; when a time-bounded run took more than 10 % longer, ``why`` says
    what the samples show it was doing after its time was up."""
    d = sc["duration"]
    secs, elapsed = d["seconds"], summary["elapsed_s"]
    out = {
        "seconds": secs,
        "operations": d["operations"],
        "elapsed_s": elapsed,
        "within_10pct": None,
        "over_pct": None,
        "why": [],
    }
    if not secs or summary["interrupted"]:
        return out  # (an interrupted run was not to last its time: no verdict on it)
    over = (elapsed - secs) / secs * 100
    out.update(within_10pct=elapsed <= secs * 1.1, over_pct=round(over, 1))
    if out["within_10pct"]:
        return out
    ts = summary["timeseries"]
    t = ts.get("t_s") or []
    made, qmax = ts.get("made") or [0], ts.get("queued_max") or [0]
    why = []
    at = next((i for i, x in enumerate(t) if x >= secs), None)
    if at is not None and made[-1] > made[at]:
        done = next(x for x, m in zip(t, made, strict=False) if m == made[-1])
        why.append(
            f"the workload processes stop at the end of the iteration they are in "
            f"at {secs:g} s; {made[-1] - made[at]:,} trace messages were made after "
            f"{t[at]:.2f} s, the last of them by {done:.2f} s"
        )
    peak = max(qmax[at:], default=0) if at is not None else 0
    if peak:
        why.append(
            f"the dispatcher still had up to {peak:,} messages queued after "
            f"{secs:g} s and delivered them before the end"
        )
    if held["s"] > max(0.1 * secs, 2 * CHECK_S):
        why.append(
            f"the controller was held {held['s']:.2f} s past a check of the run "
            f"(at {held['at']:.2f} s) serving the BIFs processes called or waiting "
            f"for a busy scheduler, so it noticed late that the run was over"
        )
    if not why:
        why.append(
            "the run became quiet (every process idle, every message delivered) "
            f"only at {elapsed:.2f} s"
        )
    out["why"] = why
    return out


def port_drops(summary: dict) -> dict:
    """``{tracer: n}`` of each trace port whose own queue dropped messages the
    dispatcher had delivered to it (``trace_ip_drv``, a client too slow):
    lost after their delivery, beside the dispatcher's drops."""
    out = {}
    for name, t in (summary.get("tracers") or {}).items():
        n = (t.get("port") or {}).get("dropped", 0)
        if n:
            out[name] = n
    return out


def duration_note(summary: dict) -> str | None:
    """One line on stderr when a time-bounded run took more than 10 % longer."""
    d = summary.get("duration") or {}
    if not d.get("seconds") or d.get("within_10pct") is not False:
        return None
    return (
        f"ran {d['elapsed_s']:.2f} s for seconds = {d['seconds']:g} "
        f"(+{d['over_pct']:.0f} %): " + "; ".join(d["why"])
    )


def _pct(sorted_values: list, q: float):
    if not sorted_values:
        return None
    k = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[k]


def _summary(
    sc, mode, n, stats, lat, elapsed, setup_s, messages, port_info, *, completed, interrupted, error
) -> dict:
    per_sched = []
    for k, s in enumerate(stats.get("schedulers", []), 1):
        per_sched.append(
            {
                "scheduler": k,
                "made": s.get("made", 0),
                "messages_sent": s.get("messages_sent", 0),
                "processes_exited": s.get("processes_exited", 0),
                "processes": s.get("processes", 0),
                "suppressed": s.get("suppressed", 0),
                "fake_schedule_pairs": s.get("fake_schedule_pairs", 0),
                "sys_arrived_dead": s.get("sys_arrived_dead", 0),
            }
        )
    st = {k: v for k, v in stats.items() if k != "schedulers"}
    el = max(elapsed, 1e-9)
    return {
        "scenario": sc["name"],
        "source": sc.get("source"),
        "mode": mode,
        "schedulers": n,
        "seed": sc["seed"],
        "completed": completed,
        "interrupted": interrupted,
        "error": error,
        "elapsed_s": round(elapsed, 6),
        "setup_s": round(setup_s, 6),
        "stats": st,
        "throughput": {
            "made_per_s": round(st["made"] / el, 1),
            "delivered_per_s": round(st["delivered"] / el, 1),
            "messages_sent_per_s": round(st.get("messages_sent", 0) / el, 1),
        },
        "latency_ns": {
            "count": len(lat),
            "p50": _pct(lat, 0.5),
            "p90": _pct(lat, 0.9),
            "p99": _pct(lat, 0.99),
            "max": lat[-1] if lat else None,
        },
        "per_scheduler": per_sched,
        "tracers": {
            name: {"received": len(ms), **({"port": port_info[name]} if name in port_info else {})}
            for name, ms in messages.items()
        },
    }


def port_failures(s: dict) -> list[str]:
    """The tracers whose trace port failed (a write error: a full disk), in
    words: what was delivered to them is not all where they write it."""
    return [
        f"tracer {name}: its trace port failed: {tr['port']['error']}; the messages "
        "delivered to it are not all written"
        for name, tr in (s.get("tracers") or {}).items()
        if isinstance(tr, dict) and isinstance(tr.get("port"), dict) and tr["port"].get("error")
    ]
