"""Counters sampled where they live: the dispatcher and each scheduler sample
their own, at the default interval (the run cut into >= 50 intervals), and
the report draws what they sampled."""

from __future__ import annotations

import math

import pytest

from smp.app.report import _queue_plot
from smp.app.scenario import load_scenario
from smp.app.series import (
    MIN_INTERVALS,
    SAMPLE_INTERVAL_S,
    default_interval,
    held,
    missing_intervals,
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
    yield ts["source"], ts
    for s in ts["schedulers"]:
        yield f"scheduler {s['scheduler']}", s


@pytest.mark.parametrize("mode", ["smp", "nonsmp"])
def test_every_interval_of_every_process_has_a_sample_or_its_tick_taken_late(runs, mode):
    """Each process's series spans the run, up to the sample ``series()``
    takes at its end, over at least ``MIN_INTERVALS`` intervals.  An interval
    without a sample is one the process was held in (its own garbage
    collection, or a stall: the operating system did not run it) or one its
    own work kept the sampler from (a thread of it holding the interpreter:
    a frame of deliveries is unpickled in one C call that can outlast an
    interval): that tick is never dropped but sampled late, so each run of
    such intervals ends in a sample counted late, and is a gap of the
    summary, which the report shades."""
    s = runs[mode]
    assert s["timeseries"]["interval_s"] == pytest.approx(default_interval(SECONDS))
    n = 0
    for who, ts in _series(s):
        t, iv = ts["t_s"], ts["interval_s"]
        holes = missing_intervals(t, iv, held(ts))
        # the sample after each stretch of them (the first at or after its end)
        ends = {min(k for k, x in enumerate(t) if x + 1e-6 >= (j + 1) * iv) for j in holes}
        # (what the series spans against what the run lasted, should it fall short)
        span = (who, len(t), t[:1], t[-1:], iv, s["elapsed_s"], s["setup_s"], holes, ts["late"])
        assert t[-1] >= s["elapsed_s"], span
        assert math.floor(t[-1] / iv + 1e-9) + 1 >= MIN_INTERVALS, span
        assert len(ends) <= ts["late"], span
        assert len(ts["gaps"]) == len(ends), span
        n += 1
    assert n == (3 if mode == "smp" else 2)


@pytest.mark.parametrize("mode", ["smp", "nonsmp"])
def test_a_run_bounded_by_time_is_sampled_over_at_least_MIN_INTERVALS_intervals(runs, mode):
    """What the default ``--sample-interval`` promises: the interval is the
    run's seconds over ``MIN_INTERVALS`` (here under ``SAMPLE_INTERVAL_S``),
    and each process's series spans at least ``MIN_INTERVALS`` whole
    intervals of the grid.  Not as many samples: a sample begins each
    interval (the first at the run's start) and one more ends the run, but
    a tick a process was held across is skipped, not made up."""
    s = runs[mode]
    assert SECONDS / MIN_INTERVALS < SAMPLE_INTERVAL_S
    for who, ts in _series(s):
        t, iv = ts["t_s"], ts["interval_s"]
        assert iv == pytest.approx(SECONDS / MIN_INTERVALS), who
        assert t[-1] >= MIN_INTERVALS * iv - 1e-6, (who, t[-1], iv)


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
