"""The report's charts, drawn with matplotlib's SVG backend and embedded
inline: lines over time drawn as steps, a log-scale histogram and an
activity timeline.

Runs in the user's process.  Every chart is one ``<figure class="plot">``
holding a ``<figcaption>`` (its title), one inline ``<svg>`` and a note: no
scripts and no external assets, so the page stays one self-contained file.
Each drawn series is a group whose ``id`` names it (``series-MODE-WHAT``,
``bars-MODE-K``, ``sched-MODE-N``), and the axis labels are ``xlabel`` and
``ylabel``, so a reader (or a test) can find them without knowing the
colours.  Every id in a chart is prefixed with the chart's id, so several
charts can share a page.

Values over time are steps: the value of the interval that ends at a
sample is drawn across that interval, an interval with a missing sample (a
gap) is left empty and shaded, and the last interval, which ends with the
run and is usually shorter, is hatched.
"""

from __future__ import annotations

import io
import re
from html import escape
from types import SimpleNamespace
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "Line",
    "Bars",
    "Row",
    "line_chart",
    "log_histogram",
    "timeline",
    "si",
    "fmt_ns",
    "STYLES",
    "figure_html",
    "bar_chart",
    "style",
]

_MPL: SimpleNamespace | None = None


def _mpl() -> SimpleNamespace:
    """matplotlib, loaded on the first chart: it takes about a second to
    import, which no command but ``report`` should pay."""
    global _MPL
    if _MPL is None:
        import matplotlib
        import matplotlib.ticker
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        matplotlib.rcParams.update(
            {
                "svg.fonttype": "none",  # text stays text: searchable, selectable
                "svg.hashsalt": "smp-emu",  # the same page for the same data
                "font.size": 9,
                "font.family": "sans-serif",
                "axes.spines.top": False,
                "axes.spines.right": False,
            }
        )
        _MPL = SimpleNamespace(Figure=Figure, Line2D=Line2D, Patch=Patch, ticker=matplotlib.ticker)
    return _MPL


# (colour, marker, linestyle) per (mode, what): no two series of a chart share one
STYLES = {
    ("nonsmp", "made"): ("#1f77b4", "o", "-"),
    ("nonsmp", "delivered"): ("#17becf", "s", "--"),
    ("smp", "made"): ("#d62728", "^", "-"),
    ("smp", "delivered"): ("#ff7f0e", "v", "--"),
    ("nonsmp", ""): ("#1f77b4", "o", "-"),
    ("smp", ""): ("#d62728", "^", "-"),
}
_MORE = [
    ("#2ca02c", "D", "-"),
    ("#9467bd", "P", "--"),
    ("#8c564b", "X", ":"),
    ("#e377c2", "*", "-."),
    ("#7f7f7f", "h", "-"),
    ("#bcbd22", "p", "--"),
]


def style(mode: str, what: str, i: int = 0) -> tuple[str, str, str]:
    """The colour, marker and line style of series ``what`` of ``mode``."""
    return STYLES.get((mode, what)) or _MORE[i % len(_MORE)]


class Line(NamedTuple):
    name: str  # legend text
    ts: list  # sample times, seconds since the run started
    values: list  # the value of the interval ending at each sample (None: unknown)
    colour: str
    marker: str = "o"
    linestyle: str = "-"
    mode: str = ""
    series: str = ""  # what it measures, for the id
    gaps: tuple = ()  # indexes k whose interval (ts[k-1], ts[k]] has no sample in it


class Bars(NamedTuple):
    name: str
    counts: dict  # bucket exponent -> count
    colour: str
    mode: str = ""
    marks: tuple = ()  # ((value_ns, label), ...) drawn as vertical lines


class Row(NamedTuple):
    label: str
    detail: str
    intervals: list  # [[start_s, end_s], ...] in seconds since the run started
    colour: str
    mode: str = ""
    scheduler: int = 0


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


# ---------------------------------------------------------------- svg out
_ID = re.compile(r'\bid="([^"]+)"')


def _svg(fig: Figure, chart_id: str) -> str:
    """The figure as inline SVG markup, every id prefixed with ``chart_id``."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    # inline in HTML: no namespace declarations (the HTML parser knows svg and
    # xlink) and no RDF metadata, so the page names no other document
    text = re.sub(r"<metadata>.*?</metadata>", "", text, count=1, flags=re.S)
    text = (
        re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text[: text.index(">") + 1])
        + text[text.index(">") + 1 :]
    )
    ids = set(_ID.findall(text))
    if ids:
        pat = re.compile(
            r'(\bid="|url\(#|xlink:href="#|href="#)('
            + "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
            + r')(?=["\)])'
        )
        text = pat.sub(lambda m: f"{m.group(1)}{chart_id}-{m.group(2)}", text)
    return text.replace("<svg ", '<svg class="chart" role="img" ', 1)


def figure_html(chart_id: str, title: str, svg: str, note: str = "", extra_class: str = "") -> str:
    n = f'<p class="note">{note}</p>' if note else ""
    cls = "plot" + (f" {extra_class}" if extra_class else "")
    return (
        f'<figure class="{cls}" id="{escape(chart_id)}"><figcaption>{escape(title)}'
        f"</figcaption>{svg}{n}</figure>"
    )


def _new(height: float = 3.0) -> tuple[Figure, object]:
    fig = _mpl().Figure(figsize=(8.4, height), layout="constrained")
    return fig, fig.add_subplot()


def _labels(ax, x_label: str, y_label: str) -> None:
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.xaxis.label.set_gid("xlabel")
    ax.yaxis.label.set_gid("ylabel")
    ax.grid(True, color="#e6e6e6", linewidth=0.8)
    ax.set_axisbelow(True)


# ---------------------------------------------------------------- lines over time
def _steps(ln: Line) -> tuple[list, list]:
    """The step path of a line: each interval's value across the interval, a
    break (NaN) for an interval that is a gap or whose value is unknown."""
    xs, ys = [], []
    gaps = set(ln.gaps)
    for k in range(1, len(ln.ts)):
        v = ln.values[k]
        if k in gaps or v is None:
            xs.append(float("nan"))
            ys.append(float("nan"))
            continue
        xs += [ln.ts[k - 1], ln.ts[k]]
        ys += [v, v]
    return xs, ys


def line_chart(
    chart_id: str,
    title: str,
    lines: list[Line],
    x_label: str,
    y_label: str,
    note: str = "",
    counts: bool = False,
    partial: list | None = None,
    gap_spans: list | None = None,
) -> str:
    """Lines on shared axes from 0, as steps with a marker at each sample.
    ``partial`` = ``[(start, end, label), ...]`` hatches each last, partial interval;
    ``gap_spans`` are shaded as intervals with no sample.  ``counts``: y is
    a whole number of messages."""
    fig, ax = _new()
    handles = []
    for ln in lines:
        xs, ys = _steps(ln)
        gid = f"series-{ln.mode}-{ln.series or ln.name}".replace(" ", "_")
        (path,) = ax.plot(
            xs, ys, color=ln.colour, linestyle=ln.linestyle, linewidth=1.6, label=ln.name
        )
        path.set_gid(gid)
        pts = [
            (t, v)
            for k, (t, v) in enumerate(zip(ln.ts, ln.values, strict=False))
            if k and v is not None and k not in set(ln.gaps)
        ]
        if pts:
            (dots,) = ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                linestyle="none",
                marker=ln.marker,
                markersize=4,
                color=ln.colour,
            )
            dots.set_gid(gid + "-samples")
        handles.append(
            _mpl().Line2D(
                [],
                [],
                color=ln.colour,
                linestyle=ln.linestyle,
                marker=ln.marker,
                markersize=5,
                label=ln.name,
            )
        )
    shaded = False
    for a, b in gap_spans or []:
        ax.axvspan(a, b, color="#bbbbbb", alpha=0.25, linewidth=0)
        shaded = True
    if shaded:
        handles.append(
            _mpl().Patch(facecolor="#bbbbbb", alpha=0.4, label="no sample in this interval")
        )
    for a, b, label in partial or []:
        ax.axvspan(a, b, facecolor="none", edgecolor="#888888", hatch="///", linewidth=0)
        handles.append(
            _mpl().Patch(
                facecolor="none",
                edgecolor="#888888",
                hatch="///",
                label=f"{label}last interval, partial ({b - a:.3f} s)",
            )
        )
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    if counts:
        ax.yaxis.get_major_locator().set_params(integer=True)
    ax.yaxis.set_major_formatter(_mpl().ticker.FuncFormatter(lambda v, _: si(v)))
    _labels(ax, x_label, y_label)
    if handles:
        ax.legend(
            handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False
        )
    return figure_html(chart_id, title, _svg(fig, chart_id), note)


# ---------------------------------------------------------------- latency histogram
#: the colour of a histogram's marks (p50, p99): dark over any bar
_MARK = "#222222"


def _ns_minor_formatter():
    """A log axis's minor-tick labels as matplotlib picks them (on a narrow
    range, a few between the decades), written in ns/µs/ms as the major
    ones are."""
    ticker = _mpl().ticker

    class _NsMinor(ticker.LogFormatterSciNotation):
        def __call__(self, x, pos=None):
            return fmt_ns(x * 1.0) if super().__call__(x, pos) else ""

    return _NsMinor(labelOnlyBase=False, minor_thresholds=(2, 0.4))


def log_histogram(
    chart_id: str,
    title: str,
    bars: list[Bars],
    per_decade: int,
    x_label: str,
    note: str = "",
    y_label: str = "messages",
) -> str:
    """Bucket counts on a log x axis (bucket ``e`` spans ``10**(e/per_decade)``
    up to the next), runs side by side in each bucket, marks as dashed lines
    (dark, over the bars: in the bars' colour they were hidden inside them);
    ``y_label`` says what a bar counts."""
    fig, ax = _new()
    n = max(1, len(bars))
    handles = []
    for j, b in enumerate(bars):
        if not b.counts:
            continue
        lefts, widths, heights = [], [], []
        for e, c in sorted(b.counts.items()):
            lo, hi = 10 ** (e / per_decade), 10 ** ((e + 1) / per_decade)
            # runs side by side inside the bucket, evenly on the log scale
            a = lo * (hi / lo) ** (j / n)
            z = lo * (hi / lo) ** ((j + 1) / n)
            lefts.append(a)
            widths.append(z - a)
            heights.append(c)
        cont = ax.bar(
            lefts,
            heights,
            width=widths,
            align="edge",
            color=b.colour,
            edgecolor="white",
            linewidth=0.4,
            label=b.name,
        )
        for k, patch in enumerate(cont.patches):
            patch.set_gid(f"bars-{b.mode}-{k}")
        handles.append(_mpl().Patch(color=b.colour, label=b.name))
        for k, (v, label) in enumerate(b.marks):
            if not v:
                continue
            ls = "--" if k == 0 else ":"
            # (dark over a white rim: in the bars' colour it hid inside them)
            ax.axvline(v, color="white", linewidth=3.2, zorder=3)
            ax.axvline(v, color=_MARK, linestyle=ls, linewidth=1.6, zorder=4)
            handles.append(
                _mpl().Line2D(
                    [], [], color=_MARK, linestyle=ls,
                    label=f"{label} {fmt_ns(v)}",
                )
            )  # fmt: skip
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(_mpl().ticker.FuncFormatter(lambda v, _: fmt_ns(v * 1.0)))
    # (the minor ticks matplotlib labels, in the same units: they read
    # 3×10⁵ beside "1 ms")
    ax.xaxis.set_minor_formatter(_ns_minor_formatter())
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(_mpl().ticker.FuncFormatter(lambda v, _: si(v)))
    _labels(ax, x_label, y_label)
    if handles:
        ax.legend(
            handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False
        )
    return figure_html(chart_id, title, _svg(fig, chart_id), note)


# ---------------------------------------------------------------- scheduler timeline
def timeline(
    chart_id: str, title: str, rows: list[Row], span: float, x_label: str, note: str = ""
) -> str:
    """One row per scheduler, its active intervals drawn to scale (a spell
    shorter than a pixel is not widened: the share beside the row is what
    the bar shows)."""
    fig, ax = _new(height=max(1.6, 0.45 * len(rows) + 1.1))
    for i, r in enumerate(rows):
        y = len(rows) - 1 - i
        bg = ax.broken_barh([(0, span)], (y - 0.35, 0.7), facecolors="#f0f0f0", linewidth=0)
        bg.set_gid(f"schedbg-{r.mode}-{r.scheduler}")
        spans = [(s, e - s) for s, e in r.intervals if e > s]
        coll = ax.broken_barh(spans, (y - 0.35, 0.7), facecolors=r.colour, linewidth=0)
        coll.set_gid(f"sched-{r.mode}-{r.scheduler}")
        ax.text(1.01, y, r.detail, transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [r.label for r in reversed(rows)])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlim(0, span or 1.0)
    ax.grid(True, axis="x", color="#e6e6e6", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.set_xlabel(x_label)
    ax.set_ylabel("scheduler")
    ax.xaxis.label.set_gid("xlabel")
    ax.yaxis.label.set_gid("ylabel")
    ax.spines["left"].set_visible(False)
    ax.tick_params(axis="y", length=0)
    return figure_html(chart_id, title, _svg(fig, chart_id), note)


def bar_chart(
    chart_id: str,
    title: str,
    labels: list[str],
    series: dict[str, list],
    x_label: str,
    y_label: str,
    note: str = "",
    fmt=None,
) -> str:
    """Grouped horizontal bars: one group per label, one bar per series."""
    names = list(series)
    n = max(1, len(names))
    fig, ax = _new(height=max(1.8, 0.22 * len(labels) * n + 1.0))
    h = 0.8 / n
    for j, name in enumerate(names):
        colour, _, _ = style(name, "", j)
        ys = [len(labels) - 1 - i + 0.4 - (j + 0.5) * h for i in range(len(labels))]
        vals = [v or 0 for v in series[name]]
        cont = ax.barh(ys, vals, height=h * 0.9, color=colour, label=name)
        for k, patch in enumerate(cont.patches):
            patch.set_gid(f"bars-{name}-{k}")
        for y, v in zip(ys, series[name], strict=False):
            ax.text(
                v or 0,
                y,
                " " + (fmt(v) if fmt else (si(v) if v is not None else "-")),
                va="center",
                fontsize=7,
            )
    ax.set_yticks(range(len(labels)), list(reversed(labels)))
    ax.xaxis.set_major_formatter(_mpl().ticker.FuncFormatter(lambda v, _: si(v)))
    ax.set_xlim(left=0)
    _labels(ax, x_label, y_label)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return figure_html(chart_id, title, _svg(fig, chart_id), note)
