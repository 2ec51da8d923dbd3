"""``smp-emu report``: the HTML page a user gets from a saved run or compare,
read back the way a reader would (html.parser), plus the pure parts behind it
(``smp.series``: the time series, the latency buckets, the scheduler timeline)."""
from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from smp.cli import cli
from smp.clock import us_to_ts
from smp.series import MAX_POINTS, Series, latency_histogram, scheduler_timeline
from smp.terms import Atom

A = Atom

# Two schedulers, a memory port profiler with the scheduler option (a profiler
# process would keep its scheduler awake), long enough for several samples.
SCENARIO = """\
name = "reported"
mode = "smp"
schedulers = 2
seed = 3
[duration]
seconds = 0.4
[[tracers]]
name = "t"
[[tracers]]
name = "prof"
kind = "memory"
[[groups]]
name = "pp"
workload = "ping_pong"
trace = ["send", "receive", "timestamp"]
tracer = "t"
[[groups]]
name = "ring"
workload = "ring"
trace = ["send"]
tracer = "t"
[groups.params]
size = 3
[system_profile]
profiler = "prof"
scheduler = true
"""

TITLES = {
    "plot-throughput": "throughput over time",
    "plot-queue": "dispatcher queue depth over time",
    "plot-drops": "dropped trace messages by reason over time",
    "plot-latency": "make-to-dispatch latency",
    "plot-schedulers": "scheduler activity",
}


class _Page(HTMLParser):
    """The figures of a report: caption, polylines, histogram bars, timeline rows."""

    def __init__(self):
        super().__init__()
        self.figures: dict[str, dict] = {}
        self.tags: list[tuple[str, dict]] = []
        self._fig = None
        self._in_caption = False
        self._row = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "figure" and "plot" in (a.get("class") or ""):
            self._fig = {"caption": "", "polylines": [], "buckets": [], "rows": []}
            self.figures[a["id"]] = self._fig
        elif self._fig is None:
            return
        elif tag == "figcaption":
            self._in_caption = True
        elif tag == "polyline":
            self._fig["polylines"].append(a)
        elif tag == "rect" and a.get("class") == "bucket":
            self._fig["buckets"].append(a)
        elif tag == "g" and a.get("class") == "sched-row":
            self._row = {"mode": a["data-mode"], "scheduler": int(a["data-scheduler"]),
                         "active": 0}
            self._fig["rows"].append(self._row)
        elif tag == "rect" and a.get("class") == "active" and self._row is not None:
            self._row["active"] += 1

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        if tag == "figcaption":
            self._in_caption = False
        elif tag == "g":
            self._row = None
        elif tag == "figure":
            self._fig = None

    def handle_data(self, data):
        if self._in_caption and self._fig is not None:
            self._fig["caption"] += data


def _parse(html: str) -> _Page:
    p = _Page()
    p.feed(html)
    return p


def _points(polyline: dict) -> list[tuple[float, float]]:
    return [tuple(map(float, xy.split(","))) for xy in polyline["points"].split()]


def _lines(fig: dict, mode: str, series: str) -> list[dict]:
    return [p for p in fig["polylines"] if p["data-mode"] == mode and p["data-series"] == series]


def _cli(args):
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A run and a compare of SCENARIO through the CLI, and their reports."""
    d = tmp_path_factory.mktemp("report")
    sc = d / "reported.toml"
    sc.write_text(SCENARIO)
    out = {}
    for kind, args in (("run", ["run", str(sc), "--json"]), ("compare", ["compare", str(sc), "--json"])):
        text = _cli(args)
        data = json.loads(text[text.index("{"):])
        (d / f"{kind}.json").write_text(json.dumps(data))
        _cli(["report", str(d / f"{kind}.json"), "-o", str(d / f"{kind}.html")])
        out[kind] = (data, (d / f"{kind}.html").read_text(encoding="utf-8"))
    return out


# ---------------------------------------------------------------- the run report
def test_run_report_is_self_contained(saved):
    _, html = saved["run"]
    assert "<script" not in html.lower()
    assert not re.search(r"\b(src|href)\s*=", html, re.I)
    assert not re.search(r"https?://|url\(|@import", html, re.I)
    assert html.count("<svg") >= 5


def test_run_report_has_the_five_plots_with_their_titles(saved):
    page = _parse(saved["run"][1])
    for fid, title in TITLES.items():
        assert fid in page.figures, f"no {fid}"
        assert page.figures[fid]["caption"] == title


def test_throughput_polyline_has_one_vertex_per_sample(saved):
    data, html = saved["run"]
    n = len(data["timeseries"]["t_s"])
    assert n >= 3            # start, at least one slice, end
    fig = _parse(html).figures["plot-throughput"]
    for series in ("made", "delivered"):
        (line,) = _lines(fig, "smp", series)
        assert len(_points(line)) == n
    for fid, series in (("plot-queue", "queued"),):
        (line,) = _lines(_parse(html).figures[fid], "smp", series)
        assert len(_points(line)) == n


def test_time_series_adds_up_to_the_run_totals(saved):
    data, _ = saved["run"]
    ts, st = data["timeseries"], data["stats"]
    n = len(ts["t_s"])
    assert n <= MAX_POINTS
    assert all(len(ts[k]) == n for k in ("made", "delivered", "dropped", "queued", "queued_max"))
    assert ts["t_s"] == sorted(ts["t_s"]) and ts["t_s"][0] == 0.0
    assert ts["t_s"][-1] == pytest.approx(data["elapsed_s"], abs=1e-5)
    assert ts["made"] == sorted(ts["made"])
    assert (ts["made"][-1], ts["delivered"][-1], ts["dropped"][-1]) == (
        st["made"], st["delivered"], st["dropped"])
    assert ts["made"][-1] > ts["made"][0]


def test_latency_histogram_counts_every_sample(saved):
    data, html = saved["run"]
    h = data["latency_histogram"]
    assert h["count"] == data["latency_ns"]["count"] > 0
    assert sum(h["counts"]) == h["count"]
    assert len(h["edges_ns"]) == len(h["counts"]) + 1
    assert h["edges_ns"][0] <= data["latency_ns"]["p50"] <= h["edges_ns"][-1]
    fig = _parse(html).figures["plot-latency"]
    assert len(fig["buckets"]) == sum(1 for c in h["counts"] if c)
    assert re.search(r"smp p50 [\d.]+ (ns|µs|ms|s)<", html)
    assert re.search(r"smp p99 [\d.]+ (ns|µs|ms|s)<", html)


def test_timeline_shows_every_scheduler(saved):
    data, html = saved["run"]
    tl = data["scheduler_timeline"]
    assert tl["profiled"] and tl["messages"] > 0
    assert [r["scheduler"] for r in tl["schedulers"]] == list(range(1, data["schedulers"] + 1))
    rows = _parse(html).figures["plot-schedulers"]["rows"]
    assert sorted(r["scheduler"] for r in rows) == list(range(1, data["schedulers"] + 1))
    assert all(r["active"] >= 1 for r in rows)


def test_report_says_how_to_turn_scheduler_profiling_on(saved):
    data = copy.deepcopy(saved["run"][0])
    data["scheduler_timeline"] = {"profiled": False}
    from smp.report import render_report
    page = _parse(html := render_report(data))
    fig = page.figures["plot-schedulers"]
    assert fig["rows"] == []
    assert "scheduler profiling is off" in html and "[system_profile]" in html


# ---------------------------------------------------------------- the compare report
def test_compare_report_draws_both_modes_on_each_chart(saved):
    data, html = saved["compare"]
    assert data["modes"] == ["nonsmp", "smp"]
    page = _parse(html)
    assert set(page.figures) == set(TITLES)
    for fid in ("plot-throughput", "plot-queue", "plot-drops"):
        modes = {p["data-mode"] for p in page.figures[fid]["polylines"]}
        assert modes == {"nonsmp", "smp"}, fid
    for mode in ("nonsmp", "smp"):
        n = len(data["runs"][mode]["timeseries"]["t_s"])
        (line,) = _lines(page.figures["plot-throughput"], mode, "made")
        assert len(_points(line)) == n
    # latencies exist in smp only; the page says why nonsmp has none
    assert {b["data-mode"] for b in page.figures["plot-latency"]["buckets"]} == {"smp"}
    assert "nonsmp: no latencies" in html
    rows = page.figures["plot-schedulers"]["rows"]
    assert sorted((r["mode"], r["scheduler"]) for r in rows) == [
        ("nonsmp", 1), ("smp", 1), ("smp", 2)]
    # the tables are still there
    assert "<th>nonsmp</th><th>smp</th>" in html and "first differences" in html
    assert "<script" not in html.lower() and not re.search(r"\b(src|href)\s*=", html, re.I)


def test_compare_lines_share_one_time_axis(saved):
    data, html = saved["compare"]
    fig = _parse(html).figures["plot-throughput"]
    ends = {}
    for mode in ("nonsmp", "smp"):
        (line,) = _lines(fig, mode, "made")
        ends[mode] = _points(line)[-1][0]
    longer = max(data["modes"], key=lambda m: data["runs"][m]["timeseries"]["t_s"][-1])
    shorter = min(data["modes"], key=lambda m: data["runs"][m]["timeseries"]["t_s"][-1])
    ta = data["runs"][shorter]["timeseries"]["t_s"][-1]
    tb = data["runs"][longer]["timeseries"]["t_s"][-1]
    # x is proportional to time on one scale that starts at the same origin
    origin = _points(_lines(fig, longer, "made")[0])[0][0]
    assert (ends[shorter] - origin) / (ends[longer] - origin) == pytest.approx(ta / tb, rel=0.02)


# ---------------------------------------------------------------- smp.series
def _stats(made, delivered, queued=0, drops=None):
    drops = drops or {}
    return {"made": made, "delivered": delivered, "queued": queued,
            "dropped": sum(sum(bt.values()) for bt in drops.values()),
            "dropped_by_reason": drops}


def test_series_stays_bounded_and_keeps_counts_and_queue_peaks():
    s = Series(max_points=20)
    for i in range(1000):
        s.add(i * 0.01, _stats(i * 10, i * 10 - (i % 7), queued=500 if i == 333 else i % 7,
                               drops={"receiver_dead": {"TRACE": i // 100}}))
    j = s.to_json()
    assert 3 <= len(j["t_s"]) <= 20 and j["merges"] > 0
    assert j["t_s"][0] == 0.0 and j["t_s"][-1] == pytest.approx(9.99)
    assert j["made"][-1] == 9990 and j["dropped_by_reason"]["receiver_dead"][-1] == 9
    assert max(j["queued_max"]) == 500        # a merged-away peak is not lost


def test_series_folds_a_sample_right_after_the_last():
    s = Series()
    s.add(0.0, _stats(0, 0))
    s.add(0.5, _stats(10, 10))
    s.add(0.501, _stats(11, 11))
    assert s.to_json()["t_s"] == [0.0, 0.501] and s.to_json()["made"] == [0, 11]


def test_latency_histogram_buckets_line_up_by_exponent():
    h = latency_histogram([1000, 1500, 9999, 10_000, 10_001, 1_000_000])
    assert h["first"] == 12 and h["count"] == 6          # 10**(12/4) = 1000 ns
    assert sum(h["counts"]) == 6
    assert h["counts"][0] == 2                           # 1000 and 1500 < 1778
    assert h["counts"][4] == 2                           # 10_000 and 10_001
    assert latency_histogram([])["counts"] == []


def _prof(k, state, us):
    return (A("profile"), A("scheduler"), k, A(state), 1, us_to_ts(us))


def test_scheduler_timeline_intervals():
    t0 = 1_700_000_000_000_000
    msgs = {"prof": [_prof(2, "inactive", t0 + 100),         # active since profiling began
                     _prof(1, "active", t0 + 200),
                     _prof(1, "inactive", t0 + 700),
                     _prof(1, "active", t0 + 900),
                     _prof(2, "active", t0 + 1000)],          # still active at the end
            "other": [(A("trace"), 1, A("send"), 2, 3), _prof(2, "inactive", t0)]}
    tl = scheduler_timeline(msgs, run_start_us=t0 - 1000)
    assert tl["messages"] == 6 and tl["span_s"] == pytest.approx(0.001)
    assert tl["offset_s"] == pytest.approx(0.001)
    by = {r["scheduler"]: r for r in tl["schedulers"]}
    assert by[1]["intervals"] == [[0.0002, 0.0007], [0.0009, 0.001]] and by[1]["open"]
    assert by[2]["intervals"] == [[0.0, 0.0], [0.001, 0.001]]
    assert by[1]["transitions"] == 3 and by[1]["active_s"] == pytest.approx(0.0006)


def test_scheduler_timeline_merges_when_too_many():
    t0 = 1_700_000_000_000_000
    msgs = {"p": [m for i in range(5000) for m in (_prof(1, "active", t0 + 10 * i),
                                                   _prof(1, "inactive", t0 + 10 * i + 4))]}
    tl = scheduler_timeline(msgs, max_intervals=100)
    row = tl["schedulers"][0]
    assert row["merged"] and 1 <= len(row["intervals"]) <= 100
    assert row["transitions"] == 10000 and row["active_s"] == pytest.approx(0.02)
    assert row["intervals"][0][0] == 0.0 and row["intervals"][-1][1] == pytest.approx(tl["span_s"])
