"""Inline SVG charts for the HTML report: lines over time, a log-scale
histogram and an activity timeline.

Pure functions from numbers to markup; runs in the user's process.  No
scripts and no external assets: every chart is one ``<figure class="plot">``
holding a ``<figcaption>`` (its title) and an ``<svg>``.  Each drawn series
carries ``data-mode`` / ``data-series`` attributes so a reader (or a test)
can tell the lines apart without knowing the colours.
"""
from __future__ import annotations

import math
from html import escape
from typing import Callable, NamedTuple

__all__ = ["Line", "Bars", "Row", "line_chart", "log_histogram", "timeline", "nice_ticks",
           "si", "fmt_ns", "PALETTE", "DASHES"]

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#76b7b2", "#edc948",
           "#9c755f", "#ff9da7", "#bab0ac"]
DASHES = ["", "7 4", "2 3", "10 3 2 3"]

_W, _H = 760, 270                       # the plot area's outer size
_L, _R, _T, _B = 72, 16, 12, 42         # margins: axis labels left, x labels below


class Line(NamedTuple):
    name: str                   # legend text
    xs: list
    ys: list
    colour: str
    dash: str = ""
    mode: str = ""
    series: str = ""            # what it measures, for data-series


class Bars(NamedTuple):
    name: str
    counts: dict                # bucket exponent -> count
    colour: str
    mode: str = ""
    marks: tuple = ()           # ((value_ns, label), ...) drawn as vertical lines


class Row(NamedTuple):
    label: str
    detail: str
    intervals: list             # [[start_s, end_s], ...]
    colour: str
    mode: str = ""
    scheduler: int = 0


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values (1, 2, 5 times a power of ten) from ``lo`` up to the
    first one at or above ``hi``, so the axis ends on a labelled tick."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks, k = [], 0
    while True:
        v = first + k * step
        if v >= lo - step * 1e-9:
            ticks.append(round(v, 12))
        if v >= hi - step * 1e-9:
            return ticks
        k += 1


def si(v: float) -> str:
    """A short number: 1500 -> 1.5k, 2000000 -> 2M, 0.25 -> 0.25."""
    a = abs(v)
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.3g}{suf}"
    return f"{v:.3g}"


def fmt_ns(ns: float) -> str:
    for div, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if ns >= div:
            return f"{ns / div:.3g} {unit}"
    return f"{ns:.3g} ns"


def _figure(chart_id: str, title: str, svg: str, note: str = "") -> str:
    n = f'<p class="note">{note}</p>' if note else ""
    return (f'<figure class="plot" id="{escape(chart_id)}"><figcaption>{escape(title)}'
            f'</figcaption>{svg}{n}</figure>')


def _svg_open(w: int, h: int, title: str) -> str:
    return (f'<svg width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" role="img"><title>{escape(title)}</title>')


def _legend(items: list[tuple[str, str, str]], x: float, y: float) -> tuple[str, float]:
    """Legend entries (name, colour, dash) in rows below the plot; returns markup and height."""
    out, cx, cy = [], x, y
    for name, colour, dash in items:
        w = 34 + 6.5 * len(name)
        if cx + w > _W and cx > x:
            cx, cy = x, cy + 18
        d = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<line x1="{cx:.1f}" y1="{cy:.1f}" x2="{cx + 24:.1f}" y2="{cy:.1f}" '
                   f'stroke="{colour}" stroke-width="2.5"{d}/>'
                   f'<text x="{cx + 29:.1f}" y="{cy + 4:.1f}">{escape(name)}</text>')
        cx += w + 12
    return "".join(out), cy - y + 18


def _axes(x0, x1, y0, y1, xt, yt, xmap, ymap, xfmt, yfmt, x_label, y_label) -> str:
    out = []
    for v in yt:
        y = ymap(v)
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#e6e6e6"/>'
                   f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(yfmt(v))}</text>')
    for v in xt:
        x = xmap(v)
        out.append(f'<line x1="{x:.1f}" y1="{y1}" x2="{x:.1f}" y2="{y1 + 5}" stroke="#444"/>'
                   f'<text x="{x:.1f}" y="{y1 + 18}" text-anchor="middle">{escape(xfmt(v))}</text>')
    out.append(f'<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" stroke="#444"/>'
               f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#444"/>'
               f'<text x="{(x0 + x1) / 2:.1f}" y="{y1 + 34}" text-anchor="middle" '
               f'class="axis">{escape(x_label)}</text>'
               f'<text x="14" y="{(y0 + y1) / 2:.1f}" text-anchor="middle" class="axis" '
               f'transform="rotate(-90 14 {(y0 + y1) / 2:.1f})">{escape(y_label)}</text>')
    return "".join(out)


def line_chart(chart_id: str, title: str, lines: list[Line], x_label: str, y_label: str,
               yfmt: Callable[[float], str] = si, note: str = "", counts: bool = False) -> str:
    """Lines on shared axes from 0; one ``<polyline>`` per line, one vertex per value.
    ``counts``: y is a whole number of messages, so no ticks between integers."""
    xs = [x for ln in lines for x in ln.xs]
    ys = [y for ln in lines for y in ln.ys]
    xmax = max(xs + [0]) or 1.0
    ymax = max(ys + [0]) or 1.0
    if counts:
        ymax = max(ymax, 5)
    xt, yt = nice_ticks(0, xmax), nice_ticks(0, ymax)
    xmax, ymax = max(xmax, xt[-1]), max(ymax, yt[-1])
    x0, x1, y0, y1 = _L, _W - _R, _T, _H - _B

    def xmap(v):
        return x0 + (x1 - x0) * v / xmax

    def ymap(v):
        return y1 - (y1 - y0) * v / ymax

    body = [_axes(x0, x1, y0, y1, xt, yt, xmap, ymap, lambda v: f"{v:g}", yfmt, x_label, y_label)]
    for ln in lines:
        pts = " ".join(f"{xmap(x):.1f},{ymap(y):.1f}" for x, y in zip(ln.xs, ln.ys))
        d = f' stroke-dasharray="{ln.dash}"' if ln.dash else ""
        body.append(f'<polyline class="series" data-mode="{escape(ln.mode)}" '
                    f'data-series="{escape(ln.series or ln.name)}" fill="none" '
                    f'stroke="{ln.colour}" stroke-width="1.8"{d} points="{pts}"/>')
        if len(ln.xs) == 1:
            body.append(f'<circle cx="{xmap(ln.xs[0]):.1f}" cy="{ymap(ln.ys[0]):.1f}" r="2.5" '
                        f'fill="{ln.colour}"/>')
    legend, lh = _legend([(ln.name, ln.colour, ln.dash) for ln in lines], x0, _H + 4)
    svg = _svg_open(_W, int(_H + lh + 6), title) + "".join(body) + legend + "</svg>"
    return _figure(chart_id, title, svg, note)


def log_histogram(chart_id: str, title: str, bars: list[Bars], per_decade: int,
                  x_label: str, note: str = "") -> str:
    """Bucket counts on a log x axis (bucket ``e`` spans ``10**(e/per_decade)``
    up to the next), runs side by side in each bucket, marks as dashed lines."""
    exps = sorted({e for b in bars for e in b.counts})
    lo, hi = (exps[0], exps[-1] + 1) if exps else (0, per_decade)
    ymax = max([c for b in bars for c in b.counts.values()] + [1])
    yt = nice_ticks(0, ymax)
    ymax = max(ymax, yt[-1])
    x0, x1, y0, y1 = _L, _W - _R, _T + 14, _H - _B

    def xmap(e):
        return x0 + (x1 - x0) * (e - lo) / (hi - lo)

    def ymap(v):
        return y1 - (y1 - y0) * v / ymax

    decades = [e for e in range(lo, hi + 1) if e % per_decade == 0] or [lo, hi]
    body = [_axes(x0, x1, y0, y1, decades, yt, xmap, ymap,
                  lambda e: fmt_ns(10 ** (e / per_decade)), si, x_label, "messages")]
    slot = (x1 - x0) / (hi - lo)
    bw = max(1.0, (slot - 2) / max(1, len(bars)))
    for j, b in enumerate(bars):
        for e, c in sorted(b.counts.items()):
            x = xmap(e) + 1 + j * bw
            body.append(f'<rect class="bucket" data-mode="{escape(b.mode)}" x="{x:.1f}" '
                        f'y="{ymap(c):.1f}" width="{bw:.1f}" height="{y1 - ymap(c):.1f}" '
                        f'fill="{b.colour}"><title>{escape(b.name)}: {c} in '
                        f'{escape(fmt_ns(10 ** (e / per_decade)))}..'
                        f'{escape(fmt_ns(10 ** ((e + 1) / per_decade)))}</title></rect>')
    k = 0
    for b in bars:
        for v, label in b.marks:
            if not v:
                continue
            x = min(max(xmap(math.log10(max(v, 1)) * per_decade), x0), x1)
            body.append(f'<line class="mark" data-mode="{escape(b.mode)}" x1="{x:.1f}" '
                        f'y1="{y0 - 4}" x2="{x:.1f}" y2="{y1}" stroke="{b.colour}" '
                        f'stroke-width="1.5" stroke-dasharray="4 3"/>'
                        + (f'<text x="{x - 3:.1f}" text-anchor="end"' if x > x1 - 110 else
                           f'<text x="{x + 3:.1f}"')
                        + f' y="{y0 - 6 + 11 * (k % 2)}" fill="{b.colour}">'
                        f'{escape(label)} {escape(fmt_ns(v))}</text>')
            k += 1
    legend, lh = _legend([(b.name, b.colour, "") for b in bars], x0, _H + 4)
    svg = _svg_open(_W, int(_H + lh + 6), title) + "".join(body) + legend + "</svg>"
    return _figure(chart_id, title, svg, note)


def timeline(chart_id: str, title: str, rows: list[Row], span: float, x_label: str,
             note: str = "") -> str:
    """One row per scheduler, its active intervals as bars (at least half a
    pixel wide, so a burst shorter than a pixel still shows)."""
    label_w, detail_w, row_h = 150, 240, 20
    x0, x1 = label_w, _W + 150 - detail_w
    span = span or 1.0
    xt = nice_ticks(0, span)
    span = max(span, xt[-1])
    y1 = _T + row_h * len(rows) + 4

    def xmap(v):
        return x0 + (x1 - x0) * v / span

    body = []
    for i, r in enumerate(rows):
        y = _T + i * row_h
        body.append(f'<g class="sched-row" data-mode="{escape(r.mode)}" '
                    f'data-scheduler="{r.scheduler}">'
                    f'<rect x="{x0}" y="{y + 2}" width="{x1 - x0}" height="{row_h - 4}" '
                    f'fill="#f3f3f3"/>'
                    f'<text x="{x0 - 6}" y="{y + row_h / 2 + 4}" text-anchor="end">'
                    f'{escape(r.label)}</text>')
        for s, e in r.intervals:
            w = max(0.5, xmap(e) - xmap(s))
            body.append(f'<rect class="active" x="{xmap(s):.2f}" y="{y + 2}" width="{w:.2f}" '
                        f'height="{row_h - 4}" fill="{r.colour}"/>')
        body.append(f'<text x="{x1 + 8}" y="{y + row_h / 2 + 4}">{escape(r.detail)}</text></g>')
    for v in xt:
        x = xmap(v)
        body.append(f'<line x1="{x:.1f}" y1="{y1}" x2="{x:.1f}" y2="{y1 + 5}" stroke="#444"/>'
                    f'<text x="{x:.1f}" y="{y1 + 18}" text-anchor="middle">{v:g}</text>')
    body.append(f'<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" stroke="#444"/>'
                f'<text x="{(x0 + x1) / 2:.1f}" y="{y1 + 34}" text-anchor="middle" '
                f'class="axis">{escape(x_label)}</text>')
    svg = _svg_open(_W + 150, y1 + 42, title) + "".join(body) + "</svg>"
    return _figure(chart_id, title, svg, note)
