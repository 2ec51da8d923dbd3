"""``smp-emu report``: the HTML page a user gets from a saved run or compare,
read back the way a reader would (html.parser), plus the pure parts behind it
(``smp.app.series``: the time series, the latency buckets, the scheduler timeline)."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner
from helpers import PING_PONG_T

from smp.app.cli import cli
from smp.app.series import (
    MAX_POINTS,
    default_interval,
    held,
    latency_histogram,
    missing_intervals,
    scheduler_timeline,
)
from smp.core.clock import us_to_ts
from smp.core.sampler import Sampler
from smp.core.terms import Atom

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
_PY_REPR = re.compile(r"\b(None|True|False)\b|\[\]|\w\(\w+=")


class _Page(HTMLParser):
    """The figures of a report: caption, svg group ids, and the visible text."""

    def __init__(self):
        super().__init__()
        self.figures: dict[str, dict] = {}
        self.text: list[str] = []
        self._fig = None
        self._in_caption = False
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("style", "title"):
            self._skip += 1
        if tag == "figure" and "plot" in (a.get("class") or ""):
            self._fig = {
                "caption": "",
                "ids": [],
                "paths": {},
                "svg": 0,
                "empty": "empty" in a["class"],
                "text": "",
            }
            self.figures[a["id"]] = self._fig
        elif self._fig is None:
            return
        elif tag == "figcaption":
            self._in_caption = True
        elif tag == "svg":
            self._fig["svg"] += 1
        elif tag == "g" and a.get("id"):
            self._fig["ids"].append(a["id"])
            self._group = a["id"]
        elif tag == "path" and a.get("d") and getattr(self, "_group", None):
            self._fig["paths"].setdefault(self._group, []).append(a["d"])

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag in ("style", "title"):
            self._skip -= 1

    def handle_endtag(self, tag):
        if tag in ("style", "title"):
            self._skip -= 1
        if tag == "figcaption":
            self._in_caption = False
        elif tag == "g":
            self._group = None
        elif tag == "figure":
            self._fig = None

    def handle_data(self, data):
        if self._skip:
            return
        self.text.append(data)
        if self._fig is not None:
            self._fig["text"] += data
            if self._in_caption:
                self._fig["caption"] += data


def _parse(html: str) -> _Page:
    p = _Page()
    p.feed(html)
    return p


def _has(fig: dict, gid: str) -> bool:
    return any(i.endswith("-" + gid) for i in fig["ids"])


def _cli(args):
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A run and a compare of SCENARIO through the CLI, and their reports."""
    d = tmp_path_factory.mktemp("report")
    sc = d / "reported.toml"
    sc.write_text(SCENARIO)
    out = {}
    for kind, args in (
        ("run", ["run", str(sc), "--json"]),
        ("compare", ["compare", str(sc), "--json", "--operations", "20"]),
    ):
        text = _cli(args)
        data = json.loads(text[text.index("{") :])
        (d / f"{kind}.json").write_text(json.dumps(data))
        _cli(["report", str(d / f"{kind}.json"), "-o", str(d / f"{kind}.html")])
        out[kind] = (data, (d / f"{kind}.html").read_text(encoding="utf-8"))
    return out


# ---------------------------------------------------------------- the run report
def test_run_report_is_self_contained(saved):
    for kind in ("run", "compare"):
        html = saved[kind][1]
        assert "<script" not in html.lower()
        # the only references are to fragments of the same page (matplotlib's markers)
        assert not re.search(r"\b(src|href)\s*=\s*\"(?!#)", html, re.I)
        assert not re.search(r"https?://|url\((?!#)|@import", html, re.I)
        assert html.count("<svg") >= 4


def test_run_report_has_the_plots_with_their_titles(saved):
    page = _parse(saved["run"][1])
    for fid, title in TITLES.items():
        assert fid in page.figures, f"no {fid}"
        assert page.figures[fid]["caption"] == title
    for fid in ("plot-throughput", "plot-queue", "plot-latency", "plot-schedulers"):
        fig = page.figures[fid]
        assert fig["svg"] == 1 and _has(fig, "xlabel") and _has(fig, "ylabel"), fid


def test_no_python_repr_on_the_page(saved):
    for kind in ("run", "compare"):
        text = " ".join(_parse(saved[kind][1]).text)
        assert not _PY_REPR.search(text), _PY_REPR.search(text).group(0)


def test_made_and_delivered_have_their_own_colour_marker_and_legend(saved):
    from smp.app.plots import STYLES

    styles = [STYLES[(m, w)] for m in ("nonsmp", "smp") for w in ("made", "delivered")]
    assert len({s[0] for s in styles}) == 4 and len({s[1] for s in styles}) == 4
    fig = _parse(saved["compare"][1]).figures["plot-throughput"]
    for mode in ("nonsmp", "smp"):
        for what in ("made", "delivered"):
            assert _has(fig, f"series-{mode}-{what}"), (mode, what)
            assert f"{mode}: {what}/s" in fig["text"]  # the legend


def test_nothing_dropped_is_said_not_drawn(saved):
    data, html = saved["run"]
    assert data["stats"]["dropped"] == 0
    fig = _parse(html).figures["plot-drops"]
    assert fig["empty"] and fig["svg"] == 0
    assert "Nothing dropped" in fig["text"]


def test_drops_are_drawn_as_steps_when_something_dropped(saved):
    from smp.app.report import render_report

    data = copy.deepcopy(saved["run"][0])
    ts = data["timeseries"]
    n = len(ts["t_s"])
    ts["dropped_by_reason"] = {"receiver_dead": [min(k, 3) for k in range(n)]}
    ts["dropped"] = list(ts["dropped_by_reason"]["receiver_dead"])
    data["stats"]["dropped"] = ts["dropped"][-1]
    fig = _parse(render_report(data)).figures["plot-drops"]
    assert not fig["empty"] and _has(fig, "series-smp-receiver_dead")


def _ts(t, made):
    return {
        "interval_s": 0.1,
        "t_s": t,
        "made": made,
        "delivered": made,
        "dropped": [0] * len(t),
        "queued": [0] * len(t),
        "queued_max": [0] * len(t),
        "dropped_by_reason": {},
        "merges": 0,
        "partial_last": True,
        "gaps": [],
    }


def test_a_missing_sample_leaves_a_gap_and_the_last_interval_is_marked(saved):
    from smp.app.report import render_report

    data = copy.deepcopy(saved["run"][0])
    # samples at 0.1 s, none between 0.3 and 0.9 s, the run ends at 1.04 s
    t = [0.0, 0.1, 0.2, 0.3, 0.9, 1.0, 1.04]
    data["timeseries"] = _ts(t, [0, 10, 20, 30, 90, 100, 104])
    page = _parse(render_report(data))
    fig = page.figures["plot-throughput"]
    (path,) = next(v for k, v in fig["paths"].items() if k.endswith("series-smp-made"))
    # steps: the path starts over (a new M) after the gap instead of crossing it
    assert path.count("M") == 2
    assert "no sample in this interval" in fig["text"]
    assert "last interval, partial (0.040 s)" in fig["text"]


def test_steps_cover_each_interval_and_break_at_gaps():
    from smp.app.plots import Line, _steps

    ln = Line("x", [0.0, 0.1, 0.2, 0.5, 0.6], [None, 5, 7, 9, 11], "#000", gaps=(3,))
    xs, ys = _steps(ln)
    assert xs[:4] == [0.0, 0.1, 0.1, 0.2] and ys[:4] == [5, 5, 7, 7]
    assert xs[4] != xs[4] and ys[4] != ys[4]  # NaN: the gap 0.2..0.5
    assert xs[5:] == [0.5, 0.6] and ys[5:] == [11, 11]


def test_time_series_is_sampled_at_a_steady_interval(saved):
    data, _ = saved["run"]
    ts = data["timeseries"]
    # no --sample-interval: the run picks one cutting it into at least 50 intervals
    interval = ts["interval_s"]
    assert interval == pytest.approx(default_interval(0.4)) and 0.4 / interval >= 50
    t = ts["t_s"]
    # the first sample is in the first interval unless the dispatcher was not run
    # in it (a loaded 2-core machine): then that interval is a gap like any other,
    # which the report must show (below)
    assert len(t) >= 3 and t[0] >= 0.0
    # the samples are taken by the dispatcher itself: a gap only where it could not run
    assert (ts["gaps"] == []) == (missing_intervals(t, interval, held(ts)) == [])
    # every inner sample is at (or, when the process was not run, after) its slot
    assert all(x >= interval * k - 1e-6 for k, x in enumerate(t[:-1]))
    last = t[-1] - t[-2]
    assert ts["partial_last"] == (last < 0.9 * interval)


def test_sample_interval_is_configurable(tmp_path):
    sc = tmp_path / "s.toml"
    sc.write_text(
        SCENARIO.replace("seconds = 0.4", "seconds = 0.3").replace(
            'mode = "smp"', 'mode = "nonsmp"'
        )
    )
    data = json.loads(_cli(["run", str(sc), "--json", "--sample-interval", "0.05"]))
    ts = data["timeseries"]
    assert ts["interval_s"] == pytest.approx(0.05)
    t = ts["t_s"]
    # a sample every 0.05 s, taken by the scheduler itself, whatever the controller does
    assert len(t) >= 0.3 / 0.05
    assert (ts["gaps"] == []) == (missing_intervals(t, 0.05, held(ts)) == [])


def test_time_series_adds_up_to_the_run_totals(saved):
    data, _ = saved["run"]
    ts, st = data["timeseries"], data["stats"]
    n = len(ts["t_s"])
    assert n <= MAX_POINTS
    assert all(len(ts[k]) == n for k in ("made", "delivered", "dropped", "queued", "queued_max"))
    assert ts["t_s"] == sorted(ts["t_s"]) and ts["t_s"][0] >= 0.0
    # the last sample is taken when the run is over, just after the controller saw it end
    assert data["elapsed_s"] - 0.05 <= ts["t_s"][-1] <= data["elapsed_s"] + 1.0
    assert ts["made"] == sorted(ts["made"])
    assert (ts["made"][-1], ts["delivered"][-1], ts["dropped"][-1]) == (
        st["made"],
        st["delivered"],
        st["dropped"],
    )
    assert ts["made"][-1] > ts["made"][0]


def test_latency_histogram_counts_every_sample(saved):
    data, html = saved["run"]
    h = data["latency_histogram"]
    assert h["count"] == data["latency_ns"]["count"] > 0
    assert sum(h["counts"]) == h["count"]
    assert len(h["edges_ns"]) == len(h["counts"]) + 1
    assert h["edges_ns"][0] <= data["latency_ns"]["p50"] <= h["edges_ns"][-1]
    fig = _parse(html).figures["plot-latency"]
    assert sum(1 for i in fig["ids"] if "-bars-smp-" in i) == sum(1 for c in h["counts"] if c)
    assert re.search(r"smp p50 [\d.]+ (ns|µs|ms|s)", fig["text"])
    assert re.search(r"smp p99 [\d.]+ (ns|µs|ms|s)", fig["text"])
    # one sample per run of messages (a run holds one message or more)
    assert f"smp ({h['count']:,} runs)" in fig["text"]
    assert h["count"] <= data["stats"]["delivered"] + data["stats"]["dropped"]


def test_timeline_shows_every_scheduler(saved):
    data, html = saved["run"]
    tl = data["scheduler_timeline"]
    assert tl["profiled"] and tl["messages"] > 0
    assert [r["scheduler"] for r in tl["schedulers"]] == list(range(1, data["schedulers"] + 1))
    fig = _parse(html).figures["plot-schedulers"]
    for k in range(1, data["schedulers"] + 1):
        assert _has(fig, f"sched-smp-{k}")
    from smp.app.report import ACTIVE_DEFINITION

    assert "the same for every mode" in fig["text"] and "Active" in ACTIVE_DEFINITION


def _widths(paths: list[str]) -> float:
    """Total width of the rectangles ``M x0 y0 L x1 y1 ...`` in ``paths``."""
    total = 0.0
    for d in paths:
        for rect in d.split("z"):
            xs = [float(v) for v in re.findall(r"[ML]\s*(-?[\d.]+)", rect)]
            if xs:
                total += max(xs) - min(xs)
    return total


def test_activity_bars_are_to_scale_with_one_definition(saved):
    from smp.app.report import render_report

    data = copy.deepcopy(saved["compare"][0])
    for mode, share in (("nonsmp", 0.5), ("smp", 0.004)):
        run = data["runs"][mode]
        run["elapsed_s"] = 1.0
        # a hundred spells adding up to ``share`` of the run
        w = share / 100
        run["scheduler_timeline"] = {
            "profiled": True,
            "messages": 200,
            "span_s": 1.0,
            "offset_s": 0.0,
            "schedulers": [
                {
                    "scheduler": 1,
                    "intervals": [[k / 100, k / 100 + w] for k in range(100)],
                    "transitions": 200,
                    "active_s": share,
                    "open": False,
                    "merged": False,
                }
            ],
        }
    fig = _parse(render_report(data)).figures["plot-schedulers"]
    for mode, share, text in (("nonsmp", 0.5, "50.0 % active"), ("smp", 0.004, "0.4 % active")):
        bar = next(v for k, v in fig["paths"].items() if k.endswith(f"-sched-{mode}-1"))
        bg = next(v for k, v in fig["paths"].items() if k.endswith(f"-schedbg-{mode}-1"))
        assert _widths(bar) / _widths(bg) == pytest.approx(share, rel=0.05, abs=1e-3)
        assert text in fig["text"]
    assert fig["text"].count("the same for every mode") == 1


def test_report_says_how_to_turn_scheduler_profiling_on(saved):
    data = copy.deepcopy(saved["run"][0])
    data["scheduler_timeline"] = {"profiled": False}
    from smp.app.report import render_report

    html = render_report(data)
    fig = _parse(html).figures["plot-schedulers"]
    assert fig["svg"] == 0
    assert "scheduler profiling is off" in html and "[system_profile]" in html


# ---------------------------------------------------------------- the compare report
def test_compare_report_draws_both_modes_on_each_chart(saved):
    data, html = saved["compare"]
    assert data["modes"] == ["nonsmp", "smp"]
    page = _parse(html)
    assert set(TITLES) <= set(page.figures)
    for fid, what in (("plot-throughput", "made"), ("plot-queue", "queued")):
        for mode in ("nonsmp", "smp"):
            assert _has(page.figures[fid], f"series-{mode}-{what}"), (fid, mode)
    # latencies exist in smp only; the page says why nonsmp has none
    ids = page.figures["plot-latency"]["ids"]
    assert any("-bars-smp-" in i for i in ids) and not any("-bars-nonsmp-" in i for i in ids)
    assert "nonsmp: no latencies" in html
    fig = page.figures["plot-schedulers"]
    for mode, k in (("nonsmp", 1), ("smp", 1), ("smp", 2)):
        assert _has(fig, f"sched-{mode}-{k}")
    # the tables are still there, and the messages only one mode made
    assert "<th>nonsmp</th><th>smp</th>" in html and "why the messages differ" in html
    assert "compare converted it" in html  # time-bounded: the page says what ran


def test_messages_section_never_prints_a_python_none(saved):
    from smp.app.report import render_report

    data = copy.deepcopy(saved["compare"][0])
    text = " ".join(_parse(render_report(data)).text)
    assert data["causes"]["classes"] and "None" not in text  # the messages by cause
    data["causes"] = None  # compare_runs from Python: the messages only one mode made
    data["messages"]["tracers"].append(
        {
            "tracer": "x",
            "nonsmp": 0,
            "smp": 1,
            "only_count": {"nonsmp": 0, "smp": 1},
            "only": [
                {
                    "tracee": "*",
                    "mode": "smp",
                    "index": 1,
                    "message": None,
                    "fate": "delivered",
                    "why": "w",
                }
            ],
        }
    )
    text = " ".join(_parse(render_report(data)).text)
    assert "None" not in text and "(none)" in text


# ---------------------------------------------------------------- smp.app.series
def test_sampler_stays_bounded_and_keeps_counts_and_queue_peaks():
    i = 0

    def read():
        return {"made": i * 10, "queued_max": 500 if i == 333 else i % 7}

    s = Sampler(read, 0.01, t0=0.0, fold_max=("queued_max",), max_points=20)
    for i in range(1000):  # noqa: B007 - read() sees it
        s._take(i * 0.01)
    j = s.to_json()
    assert 3 <= len(j["t_s"]) <= 20 and j["merges"] > 0
    assert j["interval_s"] == pytest.approx(0.01 * 2 ** j["merges"])
    assert j["t_s"][0] == 0.0 and j["t_s"][-1] == pytest.approx(9.99)
    assert j["columns"]["made"][-1] == 9990
    assert max(j["columns"]["queued_max"]) == 500  # a merged-away peak is not lost
    # halving keeps one sample in every interval of the new length
    assert missing_intervals(j["t_s"], j["interval_s"]) == []


def test_latency_histogram_buckets_line_up_by_exponent():
    h = latency_histogram([1000, 1500, 9999, 10_000, 10_001, 1_000_000])
    assert h["first"] == 12 and h["count"] == 6  # 10**(12/4) = 1000 ns
    assert sum(h["counts"]) == 6
    assert h["counts"][0] == 2  # 1000 and 1500 < 1778
    assert h["counts"][4] == 2  # 10_000 and 10_001
    assert latency_histogram([])["counts"] == []


def _prof(k, state, us):
    return (A("profile"), A("scheduler"), k, A(state), 1, us_to_ts(us))


def test_scheduler_timeline_intervals():
    t0 = 1_700_000_000_000_000
    msgs = {
        "prof": [
            _prof(2, "inactive", t0 + 100),  # active since profiling began
            _prof(1, "active", t0 + 200),
            _prof(1, "inactive", t0 + 700),
            _prof(1, "active", t0 + 900),
            _prof(2, "active", t0 + 1000),
        ],  # still active at the end
        "other": [(A("trace"), 1, A("send"), 2, 3), _prof(2, "inactive", t0)],
    }
    tl = scheduler_timeline(msgs, run_start_us=t0 - 1000)
    assert tl["messages"] == 6 and tl["span_s"] == pytest.approx(0.001)
    assert tl["offset_s"] == pytest.approx(0.001)
    by = {r["scheduler"]: r for r in tl["schedulers"]}
    assert by[1]["intervals"] == [[0.0002, 0.0007], [0.0009, 0.001]] and by[1]["open"]
    assert by[2]["intervals"] == [[0.0, 0.0], [0.001, 0.001]]
    assert by[1]["transitions"] == 3 and by[1]["active_s"] == pytest.approx(0.0006)


def test_scheduler_timeline_merges_when_too_many():
    t0 = 1_700_000_000_000_000
    msgs = {
        "p": [
            m
            for i in range(5000)
            for m in (_prof(1, "active", t0 + 10 * i), _prof(1, "inactive", t0 + 10 * i + 4))
        ]
    }
    tl = scheduler_timeline(msgs, max_intervals=100)
    row = tl["schedulers"][0]
    assert row["merged"] and 1 <= len(row["intervals"]) <= 100
    assert row["transitions"] == 10000 and row["active_s"] == pytest.approx(0.02)
    assert row["intervals"][0][0] == 0.0 and row["intervals"][-1][1] == pytest.approx(tl["span_s"])


def test_the_stress_report_says_which_faults_did_not_take():
    from smp.app.report import _stress_section

    faults = [
        {"at": 0.14, "action": "replace_seq_tracer", "target": None, "took": True, "result": "ok"},
        {
            "at": 2.937,
            "action": "kill_processes",
            "target": "ring",
            "took": False,
            "may_fail": True,
            "result": "no process of the group was alive",
        },
    ]
    text = " ".join(_parse(_stress_section({"faults": faults})).text)
    assert "1 of 2 took; 1 did not" in text
    assert "did not take: no process of the group was alive (allowed: may_fail)" in text
    every = " ".join(_parse(_stress_section({"faults": faults[:1]})).text)
    assert "1 of 1 took" in every and "did not" not in every


def test_each_report_names_the_seed_to_run_it_again(saved):
    """The terminal says the seed (``--seed``); so do the run's and the
    compare's pages, each run's table, as does a stress page with the
    seed of its random faults."""
    from smp.app.report import _run_section

    for kind in ("run", "compare"):
        data, page = saved[kind]
        runs = data["runs"].values() if kind == "compare" else [data]
        for s in runs:
            assert s["seed"] is not None
            assert f"<td>seed</td><td>{s['seed']}</td>" in page.replace(" class=n", "")
    data = saved["run"][0]
    text = " ".join(_parse(_run_section("smp", {**data, "fault_seed": 11})).text)
    assert "random faults' seed 11" in text


SMP_EMU = [sys.executable, "-c", "from smp.app.cli import main; main()"]


@pytest.mark.parametrize("source", ["-", "/dev/stdin"])
def test_a_result_piped_in_is_read_once_and_drawn(tmp_path, source):
    """``explore --json | report -`` (or /dev/stdin): the pipe is read once,
    as a file is (it was read twice, and the second read found it empty)."""
    made = subprocess.run(
        [*SMP_EMU, "explore", "seq", "--json"],
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout
    page = tmp_path / "piped.html"
    r = subprocess.run(
        [*SMP_EMU, "report", source, "-o", str(page)],
        input=made,
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "seq" in page.read_text()


def _page_of(tmp_path, result: bytes) -> str:
    """The report page of a result's JSON (bytes as a command printed them)."""
    (tmp_path / "result.json").write_bytes(result)
    page = tmp_path / "result.html"
    r = CliRunner().invoke(cli, ["report", str(tmp_path / "result.json"), "-o", str(page)])
    assert r.exit_code == 0, r.output
    return page.read_text()


UNFINISHED = (
    """\
name = "unfinished"
timeout = 1
[duration]
operations = 1000000
"""
    + PING_PONG_T
)


def test_runs_that_did_not_finish_are_said_first_everywhere(tmp_path):
    """compare of two runs stopped by their timeout: exit 1, each mode's
    failure on stderr (in --json too), first in the text and the JSON, and
    at the top of the report (it showed a whole comparison, "all hold")."""
    sc = tmp_path / "unfinished.toml"
    sc.write_text(UNFINISHED)
    r = subprocess.run([*SMP_EMU, "compare", str(sc), "--json"], capture_output=True, timeout=120)
    assert r.returncode == 1
    c = json.loads(r.stdout)
    assert set(c["unfinished"]) == {"smp", "nonsmp"}
    for mode in ("smp", "nonsmp"):
        assert f"smp-emu: {mode}: run not finished within 1 s" in r.stderr.decode()
    html = _page_of(tmp_path, r.stdout)
    assert html.count("run did not finish:</b> run not finished within 1 s") == 2
    assert html.index("did not finish") < html.index("<table")
    text = subprocess.run([*SMP_EMU, "compare", str(sc)], capture_output=True, timeout=120)
    assert text.returncode == 1
    assert text.stdout.decode().startswith("UNFINISHED: the ")


FULL_DISK = """\
mode = "{mode}"
[duration]
operations = 20
[[tracers]]
name = "f"
kind = "file"
path = "/dev/full"
[[groups]]
name = "g"
workload = "ping_pong"
trace = ["send"]
tracer = "f"
"""


@pytest.mark.parametrize("mode", ["smp", "nonsmp"])
def test_a_trace_port_that_failed_fails_the_run_and_says_so(tmp_path, mode):
    """A file tracer on a full disk: the messages were delivered to its port
    but not written. The run exits 1 and names the tracer, and the report
    says so first (it said "nothing dropped", "all hold", and exited 0)."""
    if not os.path.exists("/dev/full"):
        pytest.fail("/dev/full is missing: the test needs a Linux /dev")
    sc = tmp_path / "full.toml"
    sc.write_text(FULL_DISK.format(mode=mode))
    r = subprocess.run([*SMP_EMU, "run", str(sc), "--json"], capture_output=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "smp-emu: tracer f: its trace port failed: " in r.stderr.decode()
    assert "No space left on device" in json.loads(r.stdout)["tracers"]["f"]["port"]["error"]
    html = _page_of(tmp_path, r.stdout)
    assert html.index("tracer f: its trace port failed") < html.index("<table")


def test_the_charts_say_what_smp_counts_as_made_and_queued(saved):
    """Under load an smp run's made line rose in bursts of 50,000 where the
    schedulers made 200,000 a second, under a caption that said messages
    made: smp counts one made as the dispatcher queues it."""
    run, compare = (" ".join(_parse(saved[k][1]).text) for k in ("run", "compare"))
    said = "smp counts a message made when the dispatcher queues it"
    modes = {saved["run"][0]["mode"]}
    assert (said in run) == ("smp" in modes)
    assert said in compare  # (smp beside nonsmp)
    assert "not those a scheduler made and has not sent yet" in run


def test_an_explore_page_counts_in_words_that_agree_with_the_count():
    """The seq page said "1 changes"."""
    from smp.app.explore.html import explore_html

    _title, body = explore_html(json.loads(_cli(["explore", "seq", "--json"])))
    assert "3 queued messages, 1 change: 4 schedules possible, 4 classes" in body, body[:300]


def test_smp_s_made_is_also_drawn_as_the_schedulers_made_it(saved):
    """Beside the made line the dispatcher counts (in bursts, as batches
    arrive), smp's chart draws the schedulers' own counts summed: each
    scheduler's read off its samples at the run's sample times."""
    from smp.app.report import _made_at_schedulers

    data, html = saved["run"]
    ts = data["timeseries"]
    at = _made_at_schedulers(ts)
    assert at is not None and len(at) == len(ts["t_s"])
    assert all(a <= b for a, b in zip(at, at[1:], strict=False))  # (counts: never down)
    last = ts["t_s"][-1]
    low = high = 0
    for s in ts["schedulers"]:
        taken = [v for t, v in zip(s["t_s"], s["made"], strict=True) if t <= last]
        after = [v for t, v in zip(s["t_s"], s["made"], strict=True) if t > last]
        low += taken[-1] if taken else 0
        high += after[0] if after else (taken[-1] if taken else 0)
    assert low <= at[-1] <= high
    assert 0 < at[-1] <= data["stats"]["made"] + data["stats"].get("in_transit", 0)
    fig = _parse(html).figures["plot-throughput"]
    assert _has(fig, "series-smp-sched-made") and "smp: made at the schedulers/s" in fig["text"]
    compare = _parse(saved["compare"][1]).figures["plot-throughput"]
    assert _has(compare, "series-smp-sched-made") and not _has(compare, "series-nonsmp-sched-made")


def test_the_schedulers_made_line_has_no_hole_where_their_samples_fall_beside_the_grid():
    """Two schedulers making 1,000 messages a second each, sampled every 60
    ms at other instants than the run's 50 ms grid: read as the last sample
    before each grid time, some intervals got no new sample and the line
    dropped to 0 while both were busy; read between samples, every interval
    shows about 2,000 a second."""
    from smp.app.report import _made_at_schedulers

    grid = [round(0.05 * k, 3) for k in range(1, 40)]
    scheds = [
        {"t_s": [round(off + 0.06 * k, 3) for k in range(35)],
         "made": [round(1000 * (off + 0.06 * k)) for k in range(35)]}
        for off in (0.013, 0.041)
    ]  # fmt: skip
    at = _made_at_schedulers({"t_s": grid, "schedulers": scheds})
    rates = [(b - a) / 0.05 for a, b in zip(at, at[1:], strict=False)]
    assert all(1900 < r < 2100 for r in rates), rates


def test_the_latency_histogram_counts_runs_in_one_unit_with_its_marks_in_sight(saved):
    """The histogram counts runs of messages (its legend said runs, its axis
    messages); every tick is in ns/µs/ms (the minor ones read 3×10⁵ beside
    "1 ms"); the p50 and p99 lines are dark over the bars (in the bars'
    colour the p50 hid inside them)."""
    import re

    _, html = saved["run"]
    i = html.rfind("<figure", 0, html.find('id="plot-latency"') + 1)
    fig = html[i : html.find("</figure>", i)]
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", fig)
    assert "runs of messages" in texts and "messages" not in texts, texts
    ticks = [t for t in texts if re.fullmatch(r"[\d.]+( ns| µs| ms| s)?", t) and " " in t]
    assert ticks and not any("×" in t or "10^" in t for t in texts), texts
    assert fig.count("#222222") >= 2  # (a p50 and a p99 line, or their legend keys)


def test_a_run_or_compare_page_shows_its_faults_and_those_that_did_not_fire(saved):
    """A compare whose nonsmp run ended before two of its three tracer kills
    said only "both modes run the same work"; a run's page showed no fault
    at all.  Each now lists its faults, and a compare says near its top when
    the modes did not meet the same faults."""
    import copy

    from smp.app.report import render_report

    took = {"action": "kill_tracer", "target": "t", "at": 0.05, "took": True, "result": "ok"}
    unfired = {
        "action": "kill_tracer", "target": "t", "at": 0.15, "took": None,
        "result": "not fired: the workload was over",
    }  # fmt: skip
    data = copy.deepcopy(saved["compare"][0])
    data["runs"]["nonsmp"]["faults"] = [took, unfired]
    data["runs"]["smp"]["faults"] = [took, dict(took, at=0.15)]
    page = render_report(data)
    assert "in nonsmp 1 of 2 did not take or fire" in page
    assert "1 of 2 took; 1 did not fire (the result says why)" in page and "2 of 2 took" in page
    assert "not fired: the workload was over" in page and page.count("<h3>") >= 2
    even = copy.deepcopy(saved["compare"][0])
    even["runs"]["nonsmp"]["faults"] = even["runs"]["smp"]["faults"] = [took]
    assert "did not take or fire" not in render_report(even)
    run = copy.deepcopy(saved["run"][0])
    run["faults"] = [took, dict(took, late=True, late_why="done 0.7 s after its time")]
    page = render_report(run)
    assert "<h2 id=faults>faults</h2>" in page and "2 of 2 took; 1 were carried out late" in page
    assert "LATE: done 0.7 s after its time" in page


def test_an_interval_without_a_sample_is_one_of_the_grid_as_the_series_say():
    """The page counted two samples more than 1.5 intervals apart as an
    interval without a sample, so a sample 0.6 ms late on a 1 ms grid was
    one, where the series' own gaps (``series.missing_intervals``) are the
    intervals of the grid that hold no sample, the first one's included."""
    from smp.app.report import _gap_indexes, _sampling_note
    from smp.app.series import missing_intervals

    late = {"t_s": [0.0004, 0.0014, 0.00295, 0.0036, 0.0045], "interval_s": 0.001}
    assert missing_intervals(late["t_s"], 0.001) == [] and _gap_indexes(late) == ()
    holed = {"t_s": [0.0024, 0.0034, 0.0065, 0.0075], "interval_s": 0.001}
    assert missing_intervals(holed["t_s"], 0.001) == [0, 1, 4, 5]
    assert _gap_indexes(holed) == (0, 2)  # (before the first sample, and 3.4-6.5 ms)
    note = _sampling_note([(None, "smp", holed)])
    assert "2 interval(s) without a sample (the longest 3 ms;" in note, note


def test_a_compare_page_says_how_to_profile_once_and_how_to_keep_the_journal(saved):
    """The paragraph on turning scheduler profiling on was printed once per
    mode, word for word; a cause's replay hint named a FILE no run wrote."""
    import copy

    from smp.app.report import render_report

    data = copy.deepcopy(saved["compare"][0])
    for r in data["runs"].values():
        r["scheduler_timeline"] = {"profiled": False}
    html = render_report(data)
    assert html.count("scheduler profiling is off") == 1
    assert f"{' and '.join(data['runs'])}: scheduler profiling is off" in html
    # (a cause with a queued example, and no journal kept: the hint says how)
    assert any(k["example"].get("queue_seq") is not None for k in data["causes"]["classes"])
    assert not data["causes"].get("journal") and "--around" in html
    assert "compare with <code>--journal FILE</code> keeps smp's journal" in html


def test_a_run_page_gives_each_tracer_what_it_got(saved):
    """Each tracer's received count (and a port's messages written) is on
    the page: a replacement a fault made that received nothing showed
    nowhere."""
    import copy

    from smp.app.report import render_report

    data = copy.deepcopy(saved["run"][0])
    data["tracers"] = {
        "t": {"received": 443},
        "t~1": {"received": 0},
        "f": {"received": 3, "port": {"kind": "file", "messages": 9}},
    }
    page = render_report(data)
    assert "<th>tracer</th><th>kind</th><th>received</th><th>written (a port)</th>" in page
    for row in (
        "<td>t</td><td>collector</td><td class=n>443</td><td class=n>-</td>",
        "<td>t~1</td><td>collector</td><td class=n>0</td><td class=n>-</td>",
        "<td>f</td><td>file</td><td class=n>3</td><td class=n>9</td>",
    ):
        assert row in page, row
