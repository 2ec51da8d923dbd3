"""A self-contained HTML report of a saved run, stress or compare result.

Runs in the user's process.  ``render_report(data)`` takes the JSON that
``smp-emu run --json``, ``smp-emu stress --json`` or ``smp-emu compare
--json`` printed and returns one HTML page: inline CSS and inline SVG charts
drawn by matplotlib (``smp.app.plots``), no scripts, no external assets, so the
file can be mailed or archived as it is.  The page shows the run over time
(throughput, dispatcher queue depth, drops by reason, from the
``timeseries`` samples ``execute`` took at a steady interval), the
make-to-dispatch latency histogram and the per-scheduler active/inactive
timeline from ``{profile, scheduler, ...}`` messages; a compare draws both
modes on the same axes and lists the messages only one mode made; a stress
result adds its faults and the journal replay.  Every value on the page is
written for a reader: no Python ``None``/``True``/``False`` or reprs.
``load_result(path)`` reads such a file: anything that is not one (not
UTF-8, not JSON, nested deeper than any result, a count in it that is not
an integer of 0 or more) is one ``ResultFileError``.
"""

from __future__ import annotations

import bisect
from html import escape

from smp.app.compare_causes import death_text
from smp.app.explore import explore_html, explore_replay_html, explore_sim_html
from smp.app.explore.tree_page import ExploredTree, tree_page
from smp.app.fault_report import not_fired
from smp.app.plots import (
    Bars,
    Line,
    Row,
    bar_chart,
    figure_html,
    line_chart,
    log_histogram,
    style,
    timeline,
)
from smp.app.result_file import MAX_RESULT_DEPTH, ResultFileError, load_result
from smp.app.result_file import result_kind as report_kind
from smp.app.run_summary import port_failures
from smp.app.series import held, missing_intervals

__all__ = [
    "render_report",
    "render_tree",
    "load_result",
    "ResultFileError",
    "MAX_RESULT_DEPTH",
    "PLOT_TITLES",
    "ACTIVE_DEFINITION",
    "report_kind",
]

PLOT_TITLES = {
    "plot-throughput": "throughput over time",
    "plot-queue": "dispatcher queue depth over time",
    "plot-drops": "dropped trace messages by reason over time",
    "plot-latency": "make-to-dispatch latency",
    "plot-schedulers": "scheduler activity",
}
ACTIVE_DEFINITION = (
    "<b>Active</b>, the same for every mode: the time from a scheduler's <code>{profile, "
    "scheduler, Id, active, NActive, Ts}</code> message to its next <code>inactive</code> one "
    "(or to the end of the run), by the messages' timestamps, as a share of the run's time from "
    "its start to its end. Bars are drawn to scale."
)
_ACTIVE_CAVEATS = {
    "nonsmp": (
        "nonsmp: its one scheduler goes inactive only when no process is runnable, so a "
        "workload that always has a runnable process keeps it active the whole run."
    ),
    "smp": (
        "smp: the timestamps are taken when the dispatcher queues the messages (under "
        "<code>smq_mtx</code>), and a scheduler's <code>active</code> and "
        "<code>inactive</code> messages often reach it in one batch, microseconds apart: "
        "read smp's share as a lower bound of the time its schedulers ran processes."
    ),
}
_HOW_TO_PROFILE = (
    "scheduler profiling is off. To see this timeline, give the scenario a port "
    'profiler with the <code>scheduler</code> option: <code>[[tracers]] name = "prof", '
    'kind = "memory"</code> and <code>[system_profile] profiler = "prof", scheduler = true'
    "</code> (see the <code>profile</code> example). A profiler <em>process</em> would be "
    "woken by every message it got and keep its scheduler active."
)
_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:64em}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:2px 8px;
vertical-align:top}td.n{text-align:right}tr.d td{background:#fff3cd}h2{margin-top:2em}
figure.plot{margin:1.5em 0}figure.plot figcaption{font-weight:bold;margin-bottom:.3em}
figure.plot svg.chart{max-width:100%;height:auto}
p.note{color:#555;font-size:90%;margin:.2em 0 0 0;max-width:56em}
p.empty{font-size:110%;margin:.5em 0}td.why{font-size:90%;color:#444;max-width:34em}
ul.only li{margin:.2em 0}code{font-size:90%}
p.bad{background:#f8d7da;padding:.5em;border:1px solid #f5c2c7}
pre{white-space:pre-wrap;overflow-wrap:anywhere}"""


def _num(v) -> str:
    """A value as a reader writes it."""
    if v is None:
        return "-"
    if v is True:
        return "yes"
    if v is False:
        return "no"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_num(x) for x in v) or "(none)"
    if isinstance(v, dict):
        return ", ".join(f"{k} {_num(x)}" for k, x in v.items()) or "(none)"
    return str(v)


def _text(v) -> str:
    """Message text for the page: ``(none)`` where there is none."""
    return "(none)" if v is None or v == "" else str(v)


def _type_series(runs: dict) -> tuple[list[str], dict]:
    types = sorted({t for s in runs.values() for t in s["stats"]["made_by_type"]})
    labels = [f"{what} {t}" for t in types for what in ("made", "delivered")]
    reasons = sorted(
        {
            (r, t)
            for s in runs.values()
            for r, bt in s["stats"]["dropped_by_reason"].items()
            for t in bt
        }
    )
    labels += [f"dropped {r} {t}" for r, t in reasons]
    series = {}
    for mode, s in runs.items():
        st = s["stats"]
        vals = []
        for t in types:
            vals += [st["made_by_type"].get(t, 0), st["delivered_by_type"].get(t, 0)]
        vals += [st["dropped_by_reason"].get(r, {}).get(t, 0) for r, t in reasons]
        series[mode] = vals
    return labels, series


def _table(rows: list[tuple[str, object]]) -> str:
    return (
        "<table>"
        + "".join(
            f"<tr><td>{escape(k)}</td><td class=n>{escape(_num(v))}</td></tr>" for k, v in rows
        )
        + "</table>"
    )


def _duration_text(s: dict) -> str:
    d = s.get("duration") or {}
    if d.get("seconds") and s.get("interrupted"):
        # (a run cut short has no verdict on its time: over_pct is null)
        return (
            f"asked for {_num(d['seconds'])} s of workload, interrupted after "
            f"{s['elapsed_s']:.2f} s"
        )
    if d.get("seconds"):
        over = d.get("over_pct") or 0
        text = f"asked for {_num(d['seconds'])} s of workload, ran {s['elapsed_s']:.2f} s" + (
            f" (+{over:.0f} %)" if over > 0 else ""
        )
        if d.get("why"):
            text += ": " + "; ".join(d["why"])
        return text
    if d.get("operations"):
        return (
            f"{_num(d['operations'])} operations per workload process, ran {s['elapsed_s']:.2f} s"
        )
    return f"ran {s['elapsed_s']:.2f} s"


def _run_section(name: str, s: dict) -> str:
    st = s["stats"]
    rows = [
        ("mode", s["mode"]),
        ("schedulers", s["schedulers"]),
        ("elapsed s", s["elapsed_s"]),
        ("made", st["made"]),
        ("delivered", st["delivered"]),
        ("dropped", st["dropped"]),
        ("queued", st.get("queued", 0)),
        ("suppressed", st.get("suppressed", 0)),
        ("fake schedule pairs", st.get("fake_schedule_pairs", 0)),
        ("made/s", s["throughput"]["made_per_s"]),
        ("interrupted", s["interrupted"]),
    ]
    # the random seeds, to run it again (``--seed``)
    if s.get("seed") is not None:
        rows.insert(2, ("seed", s["seed"]))
    if s.get("fault_seed") is not None:
        rows.insert(3, ("random faults' seed", s["fault_seed"]))
    lat = s["latency_ns"]
    if lat["count"]:
        rows += [(f"latency {k}", f"{lat[k] / 1000:.0f} µs") for k in ("p50", "p90", "p99", "max")]
    parts = [f"<h2>{escape(name)}</h2><p>{escape(_duration_text(s))}</p>{_table(rows)}"]
    ps = s.get("per_scheduler") or []
    if ps:
        parts.append(
            "<table><tr><th>scheduler</th><th>made</th><th>messages sent</th>"
            "<th>processes exited</th></tr>"
            + "".join(
                f"<tr><td class=n>{r['scheduler']}</td><td class=n>{_num(r['made'])}</td>"
                f"<td class=n>{_num(r['messages_sent'])}</td>"
                f"<td class=n>{_num(r['processes_exited'])}</td></tr>"
                for r in ps
            )
            + "</table>"
        )
    parts.append(_tracers_table(s.get("tracers") or {}))
    inv = s.get("invariants")
    if inv:
        parts.append(
            "<p>invariants: "
            + (
                "all hold"
                if inv["ok"]
                else "<b>violated</b><ul>"
                + "".join(f"<li>{escape(v)}</li>" for v in inv["violations"])
                + "</ul>"
            )
            + "</p>"
        )
    return "".join(parts)


def _tracers_table(tracers: dict) -> str:
    """What each tracer got: a collector's messages received, a port's
    messages written (a file tracer's received: what its files hold after
    the run, a wrap log's last files only).  A replacement a fault made
    (``t~1``) that received nothing shows as 0: the page said nothing of
    its tracers."""
    if not tracers:
        return ""
    rows = []
    for name, t in tracers.items():
        port = t.get("port") or {}
        kind = port.get("kind", "collector")
        written = _num(port["messages"]) if "messages" in port else "-"
        rows.append(
            f"<tr><td>{escape(str(name))}</td><td>{escape(str(kind))}</td>"
            f"<td class=n>{_num(t.get('received'))}</td><td class=n>{written}</td></tr>"
        )
    return (
        "<table><tr><th>tracer</th><th>kind</th><th>received</th><th>written (a port)</th></tr>"
        + "".join(rows)
        + "</table>"
    )


# ---------------------------------------------------------------- over time
def _series_of(runs: dict) -> tuple[list, list[str]]:
    """``(i, mode, timeseries)`` of the runs that have samples; the modes that have none."""
    have, missing = [], []
    for i, (mode, s) in enumerate(runs.items()):
        ts = s.get("timeseries")
        if ts and ts.get("t_s"):
            have.append((i, mode, ts))
        else:
            missing.append(mode)
    return have, missing


def _missing_note(missing: list[str]) -> str:
    return "".join(
        f" {escape(m)}: no time series in this result (it was saved by an older smp-emu)."
        for m in missing
    )


def _interval(ts: dict) -> float:
    if ts.get("interval_s"):
        return ts["interval_s"]
    t = ts["t_s"]
    diffs = sorted(b - a for a, b in zip(t, t[1:], strict=False))
    return diffs[len(diffs) // 2] if diffs else 0.1


def _gap_indexes(ts: dict) -> tuple:
    """k whose interval (t[k-1], t[k]] (before the first sample: from 0)
    holds an interval of the sampling grid with no sample in it: the rule
    of the series' own ``gaps`` (``series.missing_intervals``).  Two samples
    more than 1.5 intervals apart were called a gap before, and a sample
    0.6 ms late on a 1 ms grid was "an interval without a sample"."""
    t, iv = ts["t_s"], _interval(ts)
    ks: list[int] = []
    for j in missing_intervals(t, iv):
        k = bisect.bisect_left(t, (j + 1) * iv - 1e-6)
        if k < len(t) and (not ks or ks[-1] != k):
            ks.append(k)
    return tuple(ks)


def _span(t: list, k: int) -> tuple[float, float]:
    """The interval a gap index ``k`` stands for (the first: from 0)."""
    return (t[k - 1] if k else 0.0), t[k]


def _rates(ts: dict, key: str) -> list:
    """Per-second rate over each sampling interval, at the interval's end."""
    t, v = ts["t_s"], ts[key]
    out: list = [None]
    for k in range(1, len(t)):
        dt = t[k] - t[k - 1]
        out.append((v[k] - v[k - 1]) / dt if dt > 0 else None)
    return out


def _time_extras(have, multi: bool) -> tuple[list, list]:
    """Shaded gaps and hatched last intervals of every run."""
    gaps, partial = [], []
    for _, mode, ts in have:
        t = ts["t_s"]
        gaps += [list(_span(t, k)) for k in _gap_indexes(ts)]
        if ts.get("partial_last") and len(t) > 1:
            partial.append((t[-2], t[-1], f"{mode}: " if multi else ""))
    return gaps, partial


def _sampling_note(have) -> str:
    """Per run: how many samples, and each interval without one with the
    cause the process recorded there (its own garbage collection, or a stall:
    the system did not run it) or, where it recorded none, the process's own
    work (a thread of it kept the sampler waiting)."""
    parts = []
    for _, mode, ts in have:
        g = _gap_indexes(ts)
        text = f"{escape(mode)}: {len(ts['t_s'])} samples every {_interval(ts) * 1000:.0f} ms"
        if g:
            t, pauses = ts["t_s"], held(ts)
            spans = [_span(t, k) for k in g]
            longest = max(b - a for a, b in spans)
            explained = sum(1 for a0, b0 in spans if any(a < b0 and b > a0 for a, b in pauses))
            causes = []
            if explained:
                causes.append(
                    f"{explained} over a garbage collection of the process or a time the "
                    f"system did not run it"
                )
            if len(g) - explained:
                causes.append(
                    f"{len(g) - explained} with neither recorded: the process's own work kept "
                    f"its sampler waiting"
                )
            span = f"{longest * 1000:.0f} ms" if longest < 1 else f"{longest:.2f} s"
            text += (
                f", {len(g)} interval(s) without a sample (the longest {span}; "
                f"{'; '.join(causes)}), left empty and shaded"
            )
        parts.append(text)
    return "; ".join(parts)


def _made_at_schedulers(ts: dict) -> list | None:
    """The schedulers' own counts of messages made, summed at the run's
    sample times: each scheduler's count at a sample time read off its own
    samples, linearly between the two around it (from 0 at the run's start;
    held after its last).  Taken as the last sample before each time, a
    scheduler sampled on a grid beside the run's counted nothing in the
    intervals its samples fell outside, and the line dropped to 0 while the
    schedulers were busy.  None without per-scheduler series."""
    scheds = [s for s in ts.get("schedulers") or [] if s.get("t_s") and s.get("made")]
    if not scheds:
        return None
    grid = ts["t_s"]
    total = [0.0] * len(grid)
    for s in scheds:
        t, v, j = s["t_s"], s["made"], -1
        for k, g in enumerate(grid):
            while j + 1 < len(t) and t[j + 1] <= g:
                j += 1
            if j + 1 == len(t):  # (past its last sample)
                total[k] += v[j]
                continue
            t0, v0 = (0.0, 0) if j < 0 else (t[j], v[j])
            t1, v1 = t[j + 1], v[j + 1]
            total[k] += v0 + (v1 - v0) * (g - t0) / (t1 - t0) if t1 > t0 else v0
    return total


def _throughput_plot(runs: dict) -> str:
    have, missing = _series_of(runs)
    lines = []
    for _, mode, ts in have:
        gaps = _gap_indexes(ts)
        for what in ("made", "delivered"):
            c, m, ls = style(mode, what, len(lines))
            lines.append(
                Line(f"{mode}: {what}/s", ts["t_s"], _rates(ts, what), c, m, ls, mode, what, gaps)
            )
        at = _made_at_schedulers(ts) if runs[mode].get("mode") == "smp" else None
        if at is not None:
            c, m, ls = style(mode, "sched-made", len(lines))
            rates = _rates({"t_s": ts["t_s"], "v": at}, "v")
            name = f"{mode}: made at the schedulers/s"
            lines.append(Line(name, ts["t_s"], rates, c, m, ls, mode, "sched-made", gaps))
    gap_spans, partial = _time_extras(have, len(have) > 1)
    note = (
        "Trace messages made and delivered per second, each drawn as a step across the "
        "sampling interval it was measured over ("
        + _sampling_note(have)
        + ")."
        + (
            " smp counts a message made when the dispatcher queues it: a scheduler sends "
            "what it made in batches, so under load the made line rises in bursts as "
            "batches arrive; the made at the schedulers line sums each scheduler's own "
            "count, read off its samples (between two, in proportion), which is when the "
            "processes made them."
            if any(runs[m].get("mode") == "smp" for _, m, _ in have)
            else ""
        )
        + _missing_note(missing)
    )
    return line_chart(
        "plot-throughput",
        PLOT_TITLES["plot-throughput"],
        lines,
        "seconds since the run started",
        "messages/s",
        note=note,
        partial=partial,
        gap_spans=gap_spans,
    )


def _queue_plot(runs: dict) -> str:
    have, missing = _series_of(runs)
    lines = []
    for _, mode, ts in have:
        c, m, ls = style(mode, "", len(lines))
        q = list(ts.get("queued_max", ts["queued"]))
        lines.append(
            Line(
                f"{mode}: deepest queue",
                ts["t_s"],
                [None] + q[1:],
                c,
                m,
                ls,
                mode,
                "queued",
                _gap_indexes(ts),
            )
        )
    gap_spans, partial = _time_extras(have, len(have) > 1)
    note = (
        "The deepest the dispatcher's queue was (messages queued and not yet delivered or "
        "dropped; not those a scheduler made and has not sent yet) in each sampling "
        "interval, as the dispatcher sampled it: the chart's highest point is the run's "
        "peak. Queueing delay, the wait on a scheduler included, shows in the latency "
        "histogram below."
    )
    if any(runs[m].get("mode") == "nonsmp" for _, m, _ in have):
        note += (
            " nonsmp has no dispatcher: a message is delivered or dropped as it is made, "
            "so its queue stays at 0."
        )
    return line_chart(
        "plot-queue",
        PLOT_TITLES["plot-queue"],
        lines,
        "seconds since the run started",
        "messages queued",
        note=note + _missing_note(missing),
        counts=True,
        partial=partial,
        gap_spans=gap_spans,
    )


def _drops_plot(runs: dict) -> str:
    have, missing = _series_of(runs)
    title = PLOT_TITLES["plot-drops"]
    total = {mode: s["stats"]["dropped"] for mode, s in runs.items()}
    if not any(total.values()):
        made = ", ".join(f"{escape(m)} {_num(s['stats']['made'])}" for m, s in runs.items())
        return figure_html(
            "plot-drops",
            title,
            f'<p class="empty"><b>Nothing dropped</b>: every trace message made '
            f"was delivered ({made} made).</p>",
            _missing_note(missing).strip(),
            "empty",
        )
    reasons = sorted({r for _, _, ts in have for r in ts.get("dropped_by_reason", {})})
    lines = []
    for _, mode, ts in have:
        by = ts.get("dropped_by_reason", {})
        for r in reasons:
            vals = by.get(r)
            if not vals or not any(vals):
                continue
            c, m, _ = style("", r, len(lines))
            lines.append(
                Line(
                    f"{mode}: {r}",
                    ts["t_s"],
                    [None] + list(vals[1:]),
                    c,
                    m,
                    "-" if mode == "smp" else "--",
                    mode,
                    r,
                    _gap_indexes(ts),
                )
            )
    gap_spans, partial = _time_extras(have, len(have) > 1)
    note = (
        "Cumulative trace messages dropped, one line per mode and reason (totals: "
        + ", ".join(f"{escape(m)} {_num(n)}" for m, n in total.items())
        + ")."
        + _missing_note(missing)
    )
    return line_chart(
        "plot-drops",
        title,
        lines,
        "seconds since the run started",
        "messages dropped",
        note=note,
        counts=True,
        partial=partial,
        gap_spans=gap_spans,
    )


def _latency_plot(runs: dict) -> str:
    bars, notes, per_decade = [], [], 4
    for mode, s in runs.items():
        h = s.get("latency_histogram")
        lat = s.get("latency_ns") or {}
        if h and h.get("counts"):
            per_decade = h["per_decade"]
            bars.append(
                Bars(
                    f"{mode} ({_num(h['count'])} runs)",
                    {h["first"] + k: c for k, c in enumerate(h["counts"]) if c},
                    style(mode, "")[0],
                    mode,
                    ((lat.get("p50"), f"{mode} p50"), (lat.get("p99"), f"{mode} p99")),
                )
            )
        elif s.get("mode") == "nonsmp":
            notes.append(
                f"{escape(mode)}: no latencies: nonsmp has no dispatcher queue, a trace "
                f"message is delivered by the scheduler that makes it, as it is made."
            )
        elif h is None:
            notes.append(
                f"{escape(mode)}: no latency histogram in this result (it was saved by "
                f"an older smp-emu)."
            )
        else:
            notes.append(f"{escape(mode)}: no trace message was dispatched.")
    title = PLOT_TITLES["plot-latency"]
    if not bars:
        return figure_html(
            "plot-latency", title, f'<p class="empty">{" ".join(notes)}</p>', "", "empty"
        )
    note = (
        "Time from a run of trace messages (those a scheduler made in a row for one "
        "receiver, sent together) being made to the dispatcher handing it on, one sample "
        "per run, in log-scale buckets; the dispatcher keeps the latencies of its most "
        "recent runs. " + " ".join(notes)
    )
    return log_histogram(
        "plot-latency", title, bars, per_decade, "make-to-dispatch latency (log scale)",
        note=note, y_label="runs of messages",
    )  # fmt: skip


def _pct(p: float) -> str:
    if p == 0:
        return "0 %"
    if p < 0.1:
        return "< 0.1 %"
    return f"{p:.1f} %"


def _scheduler_plot(runs: dict) -> str:
    rows, notes, span, modes = [], [], 0.0, []
    unprofiled: list = []
    for mode, s in runs.items():
        tl = s.get("scheduler_timeline")
        if not tl or not tl.get("profiled"):
            if tl:
                unprofiled.append(mode)  # (said once for them all: it is long)
            else:
                notes.append(
                    f"{escape(mode)}: no scheduler timeline in this result (it was saved "
                    f"by an older smp-emu)."
                )
            continue
        if not tl.get("schedulers"):
            notes.append(f"{escape(mode)}: the profiler got no profile scheduler messages.")
            continue
        run_s = max(s["elapsed_s"], tl["span_s"] + (tl.get("offset_s") or 0))
        span = max(span, run_s)
        off = max(0.0, tl.get("offset_s") or 0.0)
        prefix = f"{mode} " if len(runs) > 1 else ""
        modes.append(s.get("mode", mode))
        for r in tl["schedulers"]:
            pct = 100 * r["active_s"] / run_s if run_s else 0.0
            rows.append(
                Row(
                    f"{prefix}scheduler {r['scheduler']}",
                    f"{_pct(pct)} active, {_num(r['transitions'])} changes"
                    + (" (merged)" if r.get("merged") else ""),
                    [[a + off, b + off] for a, b in r["intervals"]],
                    style(mode, "")[0],
                    mode,
                    r["scheduler"],
                )
            )
    if unprofiled:
        notes.append(f"{escape(' and '.join(unprofiled))}: {_HOW_TO_PROFILE}")
    title = PLOT_TITLES["plot-schedulers"]
    if not rows:
        return figure_html(
            "plot-schedulers", title, f'<p class="empty">{" ".join(notes)}</p>', "", "empty"
        )
    note = " ".join(
        [ACTIVE_DEFINITION]
        + [_ACTIVE_CAVEATS[m] for m in dict.fromkeys(modes) if m in _ACTIVE_CAVEATS]
        + notes
    )
    return timeline(
        "plot-schedulers", title, rows, span, "seconds since the run started", note=note
    )


def _over_time(runs: dict) -> str:
    return (
        "<h2>over time</h2>"
        + _throughput_plot(runs)
        + _queue_plot(runs)
        + _drops_plot(runs)
        + _latency_plot(runs)
        + _scheduler_plot(runs)
    )


def _totals(runs: dict) -> str:
    labels, series = _type_series(runs)
    return "<h2>totals</h2>" + bar_chart(
        "plot-totals", "messages by type and fate", labels, series, "messages", "type and fate"
    )


# ---------------------------------------------------------------- compare
def _compare_body(data: dict) -> str:
    runs = data["runs"]
    ma, mb = data["modes"]
    parts = []
    wl = data.get("workload")
    if wl and wl.get("note"):
        parts.append(f"<p><b>work</b>: {escape(wl['note'])}</p>")
    # (the same work, but not the same faults when some did not fire or
    # take in one mode: said beside the work, the table is below)
    uneven = []
    for m, r in runs.items():
        faults = r.get("faults") or []
        off = [f for f in faults if not f.get("took")]
        if off:
            uneven.append(f"in {m} {len(off)} of {len(faults)} did not take or fire")
    if uneven:
        parts.append(
            "<p class=bad><b>faults</b>: "
            + escape("; ".join(uneven))
            + " (see <a href='#faults'>faults</a>): the modes did not meet the same faults.</p>"
        )
    table = [
        "<table><tr><th></th>"
        + "".join(f"<th>{escape(m)}</th>" for m in (ma, mb))
        + "<th>why they differ</th></tr>"
    ]
    for r in data["rows"]:
        table.append(
            f"<tr class={'d' if r['differs'] else 's'}><td>{escape(r['what'])}</td>"
            f"<td class=n>{escape(_num(r[ma]))}</td>"
            f"<td class=n>{escape(_num(r[mb]))}</td>"
            f"<td class=why>{escape(r.get('why') or '')}</td></tr>"
        )
    table.append("</table>")
    parts.append("".join(table))
    if data.get("order_note"):
        parts.append(f"<p>ordering: {escape(data['order_note'])}</p>")
    parts.append(_over_time(runs))
    parts.append(_totals(runs))
    parts += [_run_section(m, s) for m, s in runs.items()]
    parts.append(_messages_section(data))
    return "".join(parts)


def _causes_section(causes: dict) -> str:
    """The differing messages by class, as ``smp-emu compare`` prints them."""
    out = [
        "<h2>why the messages differ</h2>",
        f"<p class=note>From both runs' records (nonsmp's fate log, smp's journal), lined "
        f"up per tracer and tracee: {_num(causes['total'])} messages differ"
        + (
            f"; {_num(causes['reordered'])} more were made and met the same fate in both, "
            "in another order among other senders' messages"
            if causes.get("reordered")
            else ""
        )
        + ".</p>",
        "<table class=causes><tr><th>class</th><th>messages</th><th>seed</th><th>example</th></tr>",
    ]
    for k in causes["classes"]:
        ex = k["example"]
        extra = ""
        if k["class"] == "timing":
            extra = "".join(
                f"<br><small>{escape(death_text(d))}</small>"
                for d in causes.get("timing_deaths", [])
            )
        see = ""
        if ex.get("queue_seq") is not None:
            j = causes.get("journal")
            see = (
                f"<br><code>smp-emu replay {escape(j)} --around {ex['queue_seq']}</code>"
                if j
                else "<br>compare with <code>--journal FILE</code> keeps smp's journal; then "
                f"<code>smp-emu replay FILE --around {ex['queue_seq']}</code>"
            )
        out.append(
            f"<tr><td>{escape(k['class'])}<br><small>{escape(k['title'])}</small></td>"
            f"<td class=n>{_num(k['count'])}</td><td class=why>{escape(k['seed'])}</td>"
            f"<td>at {escape(ex['tracer'])} from {escape(ex['tracee'])}: "
            f"<code>{escape(_text(ex['message']))}</code> ({escape(ex['fates'])}){see}{extra}"
            f"</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def _messages_section(data: dict) -> str:
    ma, mb = data["modes"]
    if data.get("interrupted"):
        return (
            "<h2>messages</h2><p>Not lined up: the compare was interrupted, and a run cut "
            "short differs from a whole one by where it stopped.</p>"
        )
    if data.get("causes"):
        return _causes_section(data["causes"])
    msgs = data.get("messages") or {}
    out = ["<h2>messages only one mode made</h2>"]
    if msgs.get("note"):
        out.append(f"<p class=note>{escape(msgs['note'])}</p>")
    for t in msgs.get("tracers", []):
        only = t.get("only", [])
        counts = t.get("only_count", {})
        out.append(
            f"<h3>tracer {escape(t['tracer'])}: {escape(ma)} made {_num(t[ma])}, "
            f"{escape(mb)} made {_num(t[mb])}; only in {escape(ma)} "
            f"{_num(counts.get(ma, 0))}, only in {escape(mb)} "
            f"{_num(counts.get(mb, 0))}</h3>"
        )
        if not only:
            out.append("<p>(none)</p>")
            continue
        out.append(
            "<ul class=only>"
            + "".join(
                f"<li>only {escape(d['mode'])} ({escape(d['fate'])}), {escape(d['tracee'])} "
                f"#{d['index']}: <code>{escape(_text(d['message']))}</code><br>"
                f"<small>{escape(d['why'])}</small></li>"
                for d in only
            )
            + "</ul>"
        )
        more = sum(counts.values()) - len(only)
        if more > 0:
            out.append(f"<p>({_num(more)} more not listed)</p>")
    return "".join(out)


# ---------------------------------------------------------------- stress
def _faults_table(faults: list) -> str:
    """A run's fault events: how many took, did not, did not fire or came
    late, then one row each (its time, what it did, and its result)."""
    took = sum(1 for f in faults if f.get("took"))
    missed = sum(1 for f in faults if f.get("took") is False)
    unfired = sum(1 for f in faults if not_fired(f))
    late = sum(1 for f in faults if f.get("late"))
    return (
        f"<p>{_num(took)} of {_num(len(faults))} took"
        + (f"; {_num(missed)} did not (the result says why)" if missed else "")
        + (f"; {_num(unfired)} did not fire (the result says why)" if unfired else "")
        + (f"; {_num(late)} were carried out late" if late else "")
        + "</p>"
        + "<table><tr><th>at s</th><th>action</th><th>target</th><th>result</th></tr>"
        + "".join(
            f"<tr><td class=n>{_num(f.get('at'))}</td><td>{escape(str(f.get('action')))}</td>"
            f"<td>{escape(_text(f.get('target')))}</td><td>{escape(_fault_result(f))}</td></tr>"
            for f in sorted(faults, key=lambda f: f.get("at") or 0)
        )
        + "</table>"
    )


def _faults_of_runs(runs: dict) -> str:
    """A run's or a compare's faults (each mode's), when it had any: a
    fault that did not fire or came late changes what the figures are of
    (they were on stderr only, and the page read as if all had)."""
    with_faults = {m: r["faults"] for m, r in runs.items() if r.get("faults")}
    if not with_faults:
        return ""
    if len(runs) == 1:
        return "<h2 id=faults>faults</h2>" + _faults_table(next(iter(with_faults.values())))
    return "<h2 id=faults>faults</h2>" + "".join(
        f"<h3>{escape(str(m))}</h3>" + _faults_table(f) for m, f in with_faults.items()
    )


def _stress_section(data: dict) -> str:
    parts = ["<h2>faults</h2>"]
    faults = data.get("faults") or []
    parts.append(_faults_table(faults) if faults else "<p>(none)</p>")
    rep = data.get("replay")
    if rep:
        parts.append(
            f"<p>journal replay: {_num(rep['runs'])} runs replayed, "
            f"{_num(rep['divergence_count'])} divergences, "
            f"{_num(rep['race_window'])} decided before a concurrent change.</p>"
        )
    return "".join(parts)


def _fault_result(f: dict) -> str:
    """What a fault event came to, as the run recorded it."""
    result = str(f.get("result", ""))
    late = f" (LATE: {f['late_why']})" if f.get("late") else ""
    if f.get("took"):
        return "ok" + late
    if f.get("took") is False:
        return (
            "did not take: " + result + (" (allowed: may_fail)" if f.get("may_fail") else "") + late
        )
    return (result or "(not recorded)") + late


def _unfinished(runs: dict, not_run: tuple = ()) -> str:
    """A run that did not finish (its ``error``: a timeout, a lost
    scheduler; or interrupted), said first: the figures below are of what it
    made; a mode of a compare interrupted before its run started
    (``not_run``); and a trace port that failed, whose messages are not all
    written."""
    return (
        "".join(
            f"<p class=bad><b>The {escape(str(m))} run did not finish:</b> "
            f"{escape(_stopped(r))}. The figures below are of what it made until then.</p>"
            for m, r in runs.items()
            if r.get("error") or r.get("interrupted")
        )
        + "".join(
            f"<p class=bad><b>The {escape(str(m))} run did not run:</b> the compare was "
            f"interrupted before it started. Its column is empty.</p>"
            for m in not_run
        )
        + _port_failed(runs)
    )


def _stopped(r: dict) -> str:
    """Why a run did not finish: its error, or the interrupt."""
    if r.get("error"):
        return str(r["error"])
    secs = r.get("elapsed_s")
    return "interrupted" + (f" after {secs:.2f} s" if isinstance(secs, (int, float)) else "")


def _port_failed(runs: dict) -> str:
    return "".join(
        f"<p class=bad><b>{escape(str(m))}:</b> {escape(line)}.</p>"
        for m, r in runs.items()
        for line in port_failures(r)
    )


def render_report(data: dict) -> str:
    """The HTML page for a run, stress or compare result."""
    kind = report_kind(data)
    if kind == "explore":  # smp-emu explore --json: the outcomes as a tree
        title, body = explore_html(data)
    elif kind == "explore-sim" and "result" not in data and "replay" in data:
        title, body = explore_replay_html(data)  # one schedule (--schedule)
    elif kind == "explore-sim":  # a run scenario explored in the simulator
        title, body = explore_sim_html(data)
    elif kind == "compare":
        runs = data["runs"]
        title = f"smp-emu compare: {next(iter(runs.values()))['scenario']}"
        not_run = tuple(m for m in data["modes"] if m not in runs)
        body = _unfinished(runs, not_run) + _compare_body(data) + _faults_of_runs(runs)
    else:
        runs = {data["mode"]: data}
        title = f"smp-emu {kind}: {data['scenario']} ({data['mode']})"
        body = (
            _unfinished(runs)
            + f"<p>{escape(_duration_text(data))}</p>"
            + _over_time(runs)
            + _totals(runs)
            + (_stress_section(data) if kind == "stress" else _faults_of_runs(runs))
            + _run_section(data["mode"], data)
        )
    return _page(title, body)


def render_tree(tree: ExploredTree) -> str:
    """The HTML page for an explored tree (``smp-emu explore --graph``)."""
    return _page(*tree_page(tree))


def _page(title: str, body: str) -> str:
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>\n"
    )
