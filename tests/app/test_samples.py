"""Counters sampled where they live: the dispatcher and each scheduler sample
their own, at the default interval (>= 50 samples over the run), and the
report draws what they sampled."""

from __future__ import annotations

import pytest

from smp.app.report import _queue_plot
from smp.app.scenario import load_scenario
from smp.app.series import (
    MIN_SAMPLES,
    default_interval,
    held,
    missing_intervals,
    paused_intervals,
)
from smp.app.workloads import execute

SECONDS = 1.2


@pytest.fixture(scope="module")
def runs():
    out = {}
    for mode in ("smp", "nonsmp"):
        sc = load_scenario("stress")
        sc["duration"] = {"seconds": SECONDS, "operations": None}
        sc["faults"] = []
        out[mode] = execute(sc, mode=mode).summary
    return out


def _series(summary):
    ts = summary["timeseries"]
    yield ts["source"], ts["t_s"], ts["interval_s"], held(ts)
    for s in ts["schedulers"]:
        yield f"scheduler {s['scheduler']}", s["t_s"], s["interval_s"], held(s)


@pytest.mark.parametrize("mode", ["smp", "nonsmp"])
def test_every_interval_of_every_process_has_a_sample(runs, mode):
    """A sample in every interval, but where the process's own garbage
    collection or the operating system held every thread of it (a stall:
    the sampler was late and the process hardly used a CPU meanwhile; on a
    loaded 2-core host four processes take turns)."""
    s = runs[mode]
    assert s["timeseries"]["interval_s"] == pytest.approx(default_interval(SECONDS))
    n = 0
    for who, t, iv, pauses in _series(s):
        # an interval the process spent held (a collection, a stall) has no sample
        paused = paused_intervals(t, iv, pauses)
        # (what the series spans against what the run lasted, should it fall short)
        span = (who, len(t), len(paused), t[:1], t[-1:], iv, s["elapsed_s"], s["setup_s"])
        assert len(t) + len(paused) >= MIN_SAMPLES, span
        assert missing_intervals(t, iv, pauses) == [], (who, t)
        n += 1
    assert n == (3 if mode == "smp" else 2)


def test_the_check_says_no_to_a_series_with_a_hole():
    t = [0.0, 0.01, 0.021, 0.05, 0.06]
    assert missing_intervals(t, 0.01) == [3, 4]
    # a late sample counts in the interval it was taken in
    assert missing_intervals([0.0, 0.019, 0.02], 0.01) == []
    # a garbage collection of the process itself explains a hole, nothing else does
    assert missing_intervals(t, 0.01, [[0.032, 0.045]]) == []


def test_queue_chart_maximum_is_the_runs_peak(runs):
    s = runs["smp"]
    ts = s["timeseries"]
    assert ts["queue_peak"] > 0
    assert max(ts["queued_max"]) == ts["queue_peak"]
    assert ts["queue_peak"] >= max(ts["queued"])
    svg = _queue_plot({"smp": s})
    assert "series-smp-queued" in svg


def test_activity_is_measured_by_each_scheduler_in_both_modes(runs):
    non = runs["nonsmp"]["timeseries"]["schedulers"]
    smp = runs["smp"]["timeseries"]["schedulers"]
    assert len(non) == 1 and len(smp) == 2
    assert non[0]["active_pct"] > 50
    # the stress workload keeps every scheduler running processes for much of
    # the run; two smp schedulers split the workload, each also spends time
    # sending batches and taking signals, so it is their sum that passes half
    assert all(r["active_pct"] > 0 for r in smp)
    assert sum(r["active_pct"] for r in smp) > 50
    for r in non + smp:
        acts = [a for a in r["activity"] if a is not None]
        assert acts and all(0.0 <= a <= 1.0 for a in acts)


def test_the_report_gives_each_interval_without_a_sample_the_cause_recorded_there():
    from smp.app.report import _sampling_note

    # samples every 10 ms, two holes: one over a stall the process recorded,
    # one with nothing recorded
    ts = {"interval_s": 0.01, "t_s": [0.0, 0.01, 0.05, 0.06, 0.1], "stalls": [[0.012, 0.048]]}
    note = _sampling_note([(None, "smp", ts)])
    assert "2 interval(s) without a sample (the longest 40 ms" in note
    assert "1 over a garbage collection of the process or a time the system did not run it" in note
    assert "1 with neither recorded: the process's own work kept its sampler waiting" in note
    # with the stall gone, neither hole is put on the system
    note = _sampling_note([(None, "smp", {**ts, "stalls": []})])
    assert "did not run it" not in note and "2 with neither recorded" in note
