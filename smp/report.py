"""A self-contained HTML report of a saved run or compare result.

Runs in the user's process.  ``render_report(data)`` takes the JSON that
``smp-emu run --json`` or ``smp-emu compare --json`` printed and returns one
HTML page: inline CSS and inline SVG (``smp.plots``), no scripts, no external
assets, so the file can be mailed or archived as it is.  The page shows the
run over time (throughput, dispatcher queue depth, drops by reason, from the
``timeseries`` samples ``execute`` took between ``run_for`` slices), the
make-to-dispatch latency histogram and the per-scheduler active/inactive
timeline from ``{profile, scheduler, ...}`` messages; a compare draws both
modes on the same axes, then the tables.
"""
from __future__ import annotations

from html import escape

from .plots import DASHES, PALETTE, Bars, Line, Row, line_chart, log_histogram, timeline

__all__ = ["render_report", "PLOT_TITLES"]

PLOT_TITLES = {
    "plot-throughput": "throughput over time",
    "plot-queue": "dispatcher queue depth over time",
    "plot-drops": "dropped trace messages by reason over time",
    "plot-latency": "make-to-dispatch latency",
    "plot-schedulers": "scheduler activity",
}
_MODE_COLOURS = {"nonsmp": PALETTE[0], "smp": PALETTE[1]}
_HOW_TO_PROFILE = (
    'scheduler profiling is off. To see this timeline, give the scenario a port '
    'profiler with the <code>scheduler</code> option: <code>[[tracers]] name = "prof", '
    'kind = "memory"</code> and <code>[system_profile] profiler = "prof", scheduler = true'
    '</code> (see the <code>profile</code> example). A profiler <em>process</em> would be '
    'woken by every message it got and keep its scheduler active.')

_COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1"]
_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:60em}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:2px 8px}
td.n{text-align:right}tr.d td{background:#fff3cd}h2{margin-top:2em}
figure.plot{margin:1.5em 0}figure.plot figcaption{font-weight:bold;margin-bottom:.3em}
p.note{color:#555;font-size:90%;margin:.2em 0 0 0;max-width:52em}
svg text{font-size:11px;font-family:system-ui,sans-serif}svg text.axis{fill:#555}"""


def _bars(title: str, labels: list[str], series: dict[str, list[float]], unit: str = "") -> str:
    """A grouped horizontal bar chart as inline SVG."""
    names = list(series)
    n = max(1, len(labels))
    bar_h, gap = 14, 10
    group_h = bar_h * len(names) + gap
    left, width = 220, 420
    height = 30 + n * group_h + 20 * len(names)
    vmax = max([v for vs in series.values() for v in vs if v is not None] + [1])
    out = [f'<svg width="{left + width + 120}" '
           f'height="{height}" role="img"><title>{escape(title)}</title>'
           f'<text x="0" y="14" font-weight="bold">{escape(title)}</text>']
    y = 24
    for i, label in enumerate(labels):
        out.append(f'<text x="{left - 6}" y="{y + group_h / 2}" text-anchor="end">'
                   f'{escape(str(label))}</text>')
        for j, name in enumerate(names):
            v = series[name][i] or 0
            w = width * v / vmax
            out.append(f'<rect x="{left}" y="{y + j * bar_h}" width="{w:.1f}" height="{bar_h - 2}" '
                       f'fill="{_COLOURS[j % len(_COLOURS)]}"/>'
                       f'<text x="{left + w + 4:.1f}" y="{y + j * bar_h + bar_h - 4}">'
                       f'{escape(_num(series[name][i]))}{unit}</text>')
        y += group_h
    for j, name in enumerate(names):
        out.append(f'<rect x="{left}" y="{y + 6 + 18 * j}" width="12" height="12" '
                   f'fill="{_COLOURS[j % len(_COLOURS)]}"/><text x="{left + 18}" '
                   f'y="{y + 16 + 18 * j}">{escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if v < 1000 else f"{v:.0f}"
    return str(v)


def _type_series(runs: dict) -> tuple[list[str], dict]:
    types = sorted({t for s in runs.values() for t in s["stats"]["made_by_type"]})
    labels, series = [], {}
    for t in types:
        for what in ("made", "delivered"):
            labels.append(f"{what} {t}")
    reasons = sorted({(r, t) for s in runs.values()
                      for r, bt in s["stats"]["dropped_by_reason"].items() for t in bt})
    labels += [f"dropped {r} {t}" for r, t in reasons]
    for mode, s in runs.items():
        st = s["stats"]
        vals = []
        for t in types:
            vals += [st["made_by_type"].get(t, 0), st["delivered_by_type"].get(t, 0)]
        vals += [st["dropped_by_reason"].get(r, {}).get(t, 0) for r, t in reasons]
        series[mode] = vals
    return labels, series


def _run_section(name: str, s: dict) -> str:
    st = s["stats"]
    rows = "".join(f"<tr><td>{escape(k)}</td><td class=n>{escape(_num(v))}</td></tr>"
                   for k, v in [("mode", s["mode"]), ("schedulers", s["schedulers"]),
                                ("elapsed s", s["elapsed_s"]), ("made", st["made"]),
                                ("delivered", st["delivered"]), ("dropped", st["dropped"]),
                                ("queued", st.get("queued", 0)), ("suppressed", st.get("suppressed", 0)),
                                ("fake schedule pairs", st.get("fake_schedule_pairs", 0)),
                                ("made/s", s["throughput"]["made_per_s"]),
                                ("interrupted", s["interrupted"])])
    lat = s["latency_ns"]
    parts = [f"<h2>{escape(name)}</h2><table>{rows}</table>"]
    if lat["count"]:
        parts.append(_bars("make-to-dispatch latency (us)", ["p50", "p90", "p99", "max"],
                           {name: [lat[k] / 1000 for k in ("p50", "p90", "p99", "max")]}))
    ps = s.get("per_scheduler") or []
    if ps:
        parts.append(_bars("per scheduler", [f"scheduler {r['scheduler']}" for r in ps],
                           {"made": [r["made"] for r in ps],
                            "messages sent": [r["messages_sent"] for r in ps]}))
    inv = s.get("invariants")
    if inv:
        parts.append("<p>invariants: " + ("all hold" if inv["ok"] else
                                          "<b>violated</b><ul>" + "".join(
                                              f"<li>{escape(v)}</li>" for v in inv["violations"])
                                          + "</ul>") + "</p>")
    return "".join(parts)


# ---------------------------------------------------------------- over time
def _colour(mode: str, i: int) -> str:
    return _MODE_COLOURS.get(mode, PALETTE[i % len(PALETTE)])


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
    return "".join(f" {escape(m)}: no time series in this result (it was saved by an older "
                   f"smp-emu)." for m in missing)


def _rates(ts: dict, key: str) -> list[float]:
    """Per-second rate over each sampling interval, at the interval's end (0 at the start)."""
    t, v = ts["t_s"], ts[key]
    out = [0.0]
    for k in range(1, len(t)):
        dt = t[k] - t[k - 1]
        out.append((v[k] - v[k - 1]) / dt if dt > 0 else 0.0)
    return out


def _throughput_plot(runs: dict) -> str:
    have, missing = _series_of(runs)
    lines = []
    for i, mode, ts in have:
        c = _colour(mode, i)
        lines.append(Line(f"{mode}: made/s", ts["t_s"], _rates(ts, "made"), c, "", mode, "made"))
        lines.append(Line(f"{mode}: delivered/s", ts["t_s"], _rates(ts, "delivered"), c,
                          DASHES[1], mode, "delivered"))
    counts = ", ".join(f"{escape(m)} {len(ts['t_s'])}" for _, m, ts in have)
    note = (f"Trace messages made and delivered per second over each interval between samples "
            f"(samples are taken between <code>run_for</code> slices: {counts}); a point is the "
            f"rate of the interval that ends there." + _missing_note(missing))
    return line_chart("plot-throughput", PLOT_TITLES["plot-throughput"], lines,
                      "seconds since the run started", "messages/s", note=note)


def _queue_plot(runs: dict) -> str:
    have, missing = _series_of(runs)
    lines = [Line(f"{mode}: queued", ts["t_s"], ts.get("queued_max", ts["queued"]),
                  _colour(mode, i), DASHES[0] if k == 0 else DASHES[1], mode, "queued")
             for k, (i, mode, ts) in enumerate(have)]
    note = ("The deepest the dispatcher's queue was (messages made but not yet delivered or "
            "dropped) in the interval that ends at each sample: the dispatcher keeps the peak "
            "between two statistics() calls, and merged samples keep the highest. Queueing "
            "delay shows in the latency histogram below.")
    if any(runs[m].get("mode") == "nonsmp" for _, m, _ in have):
        note += (" nonsmp has no dispatcher: a message is delivered or dropped as it is made, "
                 "so its queue stays at 0.")
    return line_chart("plot-queue", PLOT_TITLES["plot-queue"], lines,
                      "seconds since the run started", "messages queued",
                      note=note + _missing_note(missing), counts=True)


def _drops_plot(runs: dict) -> str:
    have, missing = _series_of(runs)
    reasons = sorted({r for _, _, ts in have for r in ts.get("dropped_by_reason", {})})
    lines = []
    for k, (i, mode, ts) in enumerate(have):
        dash = DASHES[k % len(DASHES)]
        by = ts.get("dropped_by_reason", {})
        if not reasons:
            lines.append(Line(f"{mode}: dropped", ts["t_s"], ts["dropped"], _colour(mode, i),
                              dash, mode, "dropped"))
        for j, r in enumerate(reasons):
            lines.append(Line(f"{mode}: {r}", ts["t_s"], by.get(r, [0] * len(ts["t_s"])),
                              PALETTE[(2 + j) % len(PALETTE)], dash, mode, r))
    note = ("Cumulative trace messages dropped, one line per reason"
            + (" (line style by mode)." if len(have) > 1 else ".")
            + ("" if reasons else " No trace message was dropped.") + _missing_note(missing))
    return line_chart("plot-drops", PLOT_TITLES["plot-drops"], lines,
                      "seconds since the run started", "messages dropped", note=note,
                      counts=True)


def _latency_plot(runs: dict) -> str:
    bars, notes, per_decade = [], [], 4
    for i, (mode, s) in enumerate(runs.items()):
        h = s.get("latency_histogram")
        lat = s.get("latency_ns") or {}
        if h and h.get("counts"):
            per_decade = h["per_decade"]
            bars.append(Bars(f"{mode} ({h['count']} messages)",
                             {h["first"] + k: c for k, c in enumerate(h["counts"]) if c},
                             _colour(mode, i), mode,
                             ((lat.get("p50"), f"{mode} p50"), (lat.get("p99"), f"{mode} p99"))))
        elif s.get("mode") == "nonsmp":
            notes.append(f"{escape(mode)}: no latencies: nonsmp has no dispatcher queue, a trace "
                         f"message is delivered by the scheduler that makes it, as it is made.")
        elif h is None:
            notes.append(f"{escape(mode)}: no latency histogram in this result (it was saved by "
                         f"an older smp-emu).")
        else:
            notes.append(f"{escape(mode)}: no trace message was dispatched.")
    note = ("Time from a trace message being made in a scheduler to the dispatcher handing it "
            "on, in log-scale buckets; the dispatcher keeps the latencies of its most recent "
            "messages. " + " ".join(notes))
    return log_histogram("plot-latency", PLOT_TITLES["plot-latency"], bars, per_decade,
                         "make-to-dispatch latency (log scale)", note=note)


def _scheduler_plot(runs: dict) -> str:
    rows, notes, span = [], [], 0.0
    for i, (mode, s) in enumerate(runs.items()):
        tl = s.get("scheduler_timeline")
        if not tl or not tl.get("profiled"):
            notes.append(f"{escape(mode)}: {_HOW_TO_PROFILE}" if tl else
                         f"{escape(mode)}: no scheduler timeline in this result (it was saved "
                         f"by an older smp-emu).")
            continue
        if not tl.get("schedulers"):
            notes.append(f"{escape(mode)}: the profiler got no profile scheduler messages.")
            continue
        span = max(span, tl["span_s"])
        prefix = f"{mode} " if len(runs) > 1 else ""
        for r in tl["schedulers"]:
            pct = 100 * r["active_s"] / tl["span_s"] if tl["span_s"] else 0.0
            rows.append(Row(f"{prefix}scheduler {r['scheduler']}",
                            f"{pct:.1f}% active, {r['transitions']} changes"
                            + (" (merged)" if r.get("merged") else ""),
                            r["intervals"], _colour(mode, i), mode, r["scheduler"]))
    title = PLOT_TITLES["plot-schedulers"]
    if not rows:
        return (f'<figure class="plot" id="plot-schedulers"><figcaption>{escape(title)}'
                f'</figcaption><p class="note">{" ".join(notes)}</p></figure>')
    note = ("Active spells (coloured) per scheduler from the <code>{profile, scheduler, Id, "
            "active | inactive, NActive, Ts}</code> messages, in seconds since each run's first "
            "one. Their timestamps are taken in queue order (under <code>smq_mtx</code>): in smp "
            "mode when the dispatcher takes the scheduler's batch, so a spell shorter than a "
            "batch shows as a sliver. " + " ".join(notes))
    return timeline("plot-schedulers", title, rows, span,
                    "seconds since the first profile scheduler message", note=note)


def _over_time(runs: dict) -> str:
    return ("<h2>over time</h2>" + _throughput_plot(runs) + _queue_plot(runs) + _drops_plot(runs)
            + _latency_plot(runs) + _scheduler_plot(runs))


def render_report(data: dict) -> str:
    """The HTML page for a run summary or a compare result."""
    if data.get("kind") == "compare" or "runs" in data:
        runs = data["runs"]
        title = f"smp-emu compare: {next(iter(runs.values()))['scenario']}"
        ma, mb = data["modes"]
        table = ["<table><tr><th></th>" + "".join(f"<th>{escape(m)}</th>" for m in (ma, mb))
                 + "</tr>"]
        for r in data["rows"]:
            table.append(f"<tr class={'d' if r['differs'] else 's'}><td>{escape(r['what'])}</td>"
                         f"<td class=n>{escape(_num(r[ma]))}</td>"
                         f"<td class=n>{escape(_num(r[mb]))}</td></tr>")
        table.append("</table>")
        diffs = []
        for t in data.get("tracers", []):
            items = "".join(f"<li>{escape(d['tracee'])} #{d['index']}: {escape(ma)} "
                            f"<code>{escape(str(d[ma]))}</code> / {escape(mb)} "
                            f"<code>{escape(str(d[mb]))}</code></li>"
                            for d in t["first_differences"])
            diffs.append(f"<h3>tracer {escape(t['tracer'])}: {t[ma]} / {t[mb]} messages</h3>"
                         f"<ul>{items}</ul>")
        labels, series = _type_series(runs)
        body = ("".join(table) + _over_time(runs) + "<h2>totals</h2>"
                + _bars("messages by type and fate", labels, series)
                + "".join(_run_section(m, s) for m, s in runs.items()) + "<h2>first differences</h2>"
                + "".join(diffs))
    else:
        title = f"smp-emu run: {data['scenario']} ({data['mode']})"
        labels, series = _type_series({data["mode"]: data})
        body = (_over_time({data["mode"]: data}) + "<h2>totals</h2>"
                + _bars("messages by type and fate", labels, series)
                + _run_section(data["mode"], data))
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>\n")
