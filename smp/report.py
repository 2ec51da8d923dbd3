"""A self-contained HTML report of a saved run or compare result.

Runs in the user's process.  ``render_report(data)`` takes the JSON that
``smp-emu run --json`` or ``smp-emu compare --json`` printed and returns one
HTML page: inline CSS and inline SVG bar charts, no scripts, no external
assets, so the file can be mailed or archived as it is.
"""
from __future__ import annotations

from html import escape

__all__ = ["render_report"]

_COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1"]
_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:2px 8px}
td.n{text-align:right}tr.d td{background:#fff3cd}h2{margin-top:2em}
svg text{font-size:11px;font-family:system-ui,sans-serif}"""


def _bars(title: str, labels: list[str], series: dict[str, list[float]], unit: str = "") -> str:
    """A grouped horizontal bar chart as inline SVG."""
    names = list(series)
    n = max(1, len(labels))
    bar_h, gap = 14, 10
    group_h = bar_h * len(names) + gap
    left, width = 220, 420
    height = 30 + n * group_h + 20 * len(names)
    vmax = max([v for vs in series.values() for v in vs if v is not None] + [1])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 120}" '
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
        body = ("".join(table) + _bars("messages by type and fate", labels, series)
                + "".join(_run_section(m, s) for m, s in runs.items()) + "<h2>first differences</h2>"
                + "".join(diffs))
    else:
        title = f"smp-emu run: {data['scenario']} ({data['mode']})"
        labels, series = _type_series({data["mode"]: data})
        body = _bars("messages by type and fate", labels, series) + _run_section(data["mode"], data)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>\n")
