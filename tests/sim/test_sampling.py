"""Random and PCT runs (``smp.sim.sampling``) cut into chunks: each chunk
from its own random stream of the seed, so worker processes can run them
side by side with the result one process gets, a stop at the first broken
invariant included."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from smp.app.explore.simulate import _Workers
from smp.sim.catalogue import by_name
from smp.sim.sampling import CHUNK, run_chunk, sample
from smp.sim.world import SimError


def _key(r):
    groups = [(g.count, g.first.index, g.first.schedule, g.outcome) for g in r.outcomes]
    return r.executions, r.cut_events, r.cut_by, r.first_violation, r.notes, r.events, groups


def _chunk_schedules(race, method: str, c: int, runs: int = 20) -> list[str]:
    opts = dict(
        schedulers=race.schedulers, reductions=200, after_timeout=1000, max_events=3000,
        checks=(), blocked_ok=False, graph=False,
    )  # fmt: skip
    got = run_chunk((race.setup, opts, method, 2, 5, c, runs, None, False))
    assert got is not None
    r, n, k, at = got
    assert r.executions == runs and at is None
    if method == "pct":
        assert n > 1 and k > 1
    return sorted(g.first.schedule for g in r.outcomes)


@pytest.mark.parametrize("method", ["random", "pct"])
def test_each_chunk_has_its_own_stream_of_the_seed(method):
    """Chunk 1 of a seed is not chunk 0 again, and a chunk is the same each
    time it runs (what lets another process run it)."""
    race = by_name("tracer_replaced_on_down")
    first = _chunk_schedules(race, method, 0)
    assert first == _chunk_schedules(race, method, 0)
    assert first != _chunk_schedules(race, method, 1)


@pytest.mark.parametrize("method", ["random", "pct"])
def test_a_sample_shared_among_workers_is_the_one_process_sample(method):
    """Three chunks run by two worker processes, counted in order: the same
    executions, outcomes, counts, first executions and notes as in this
    process; and (random runs, which meet it later) a stop at the first
    broken invariant stops at the same execution, past the first chunk,
    the later chunks, run ahead or not, left out."""
    race = by_name("tracer_killed_before_a_burst")
    kw = dict(depth=2, schedulers=race.schedulers, nonsmp=False, checks=race.checks)
    runs = 2 * CHUNK + 17
    alone = sample(race.setup, runs, method, seed=3, **kw)
    stop = dict(kw, stop_at_violation=True)
    if method == "random":
        # (a seed whose first violation is past the first chunk)
        seed = next(
            s
            for s in range(40)
            if (sample(race.setup, runs, seed=s, **stop).first_violation or 0) > CHUNK
        )
        one = sample(race.setup, runs, seed=seed, **stop)
    workers = _Workers(2, pinned=False)
    try:
        shared = sample(race.setup, runs, method, seed=3, mapper=workers, **kw)
        assert len(workers.pools) == 2 and workers.lost == 0
        if method == "random":
            two = sample(race.setup, runs, seed=seed, mapper=workers, **stop)
    finally:
        workers.close()
    assert alone.executions == runs and alone.violations
    assert _key(shared) == _key(alone)
    if method == "random":
        assert one.cut_by == ["violation"]
        assert CHUNK < one.first_violation == one.executions < runs
        assert _key(two) == _key(one)
        assert two.first_violation_s is not None and two.first_violation_s <= two.elapsed


def test_smp_explore_takes_random_pct_and_jobs_as_the_command_does():
    """From Python, ``random=``/``pct=`` (with ``seed=``, ``depth=``) sample
    a race or a run scenario, and ``jobs=`` shares the runs or the search,
    each with the one process's result; the options the command refuses
    together are refused in one line."""
    import smp
    from smp.app.explore.workload import Bounds

    race = by_name("tracer_killed_before_a_burst")
    r = smp.explore(race.name, pct=230, seed=2, depth=2, nonsmp=False)
    alone = sample(race.setup, 230, "pct", seed=2, depth=2, schedulers=race.schedulers,
                   checks=race.checks, nonsmp=False)  # fmt: skip
    assert r.method == "pct" and _key(r) == _key(alone) and r.violations
    assert _key(smp.explore(race.name, pct=230, seed=2, depth=2, nonsmp=False, jobs=2)) == _key(r)
    # a run scenario: no default execution bound beside the runs
    wl = dict(bounds=Bounds(operations=1), nonsmp=False)
    one = smp.explore("churn", random=150, seed=4, **wl)
    assert one.method == "random" and one.executions == 150 and one.seed == 4
    searched = smp.explore("churn", max_executions=120, **wl)
    shared = smp.explore("churn", max_executions=120, jobs=2, **wl)
    assert searched.method == "dpor" and _key(shared) == _key(searched)
    # (Source-DPOR with jobs= is split as the command splits it, for any jobs)
    src = dict(max_executions=300, dpor="source", **wl)
    split_one = smp.explore("churn", jobs=1, **src)
    assert _key(smp.explore("churn", jobs=2, **src)) == _key(split_one)
    for kw, words in (
        (dict(random=3, pct=3), "explore: give random= or pct=, not both"),
        (dict(random=3, max_executions=3), "max_executions is for the exhaustive search"),
        (dict(random=3, depth=2), "explore: depth= is the depth of pct= runs"),
        (dict(depth=2), "explore: depth= is the depth of pct= runs"),
        (dict(seed=1), "explore: seed= seeds random= and pct= runs"),
        (dict(jobs=0), "jobs must be an int >= 1, not 0"),
        (dict(random=0), "runs must be an int >= 1, not 0"),
    ):
        with pytest.raises((TypeError, smp.sim.SimError), match=words):
            smp.explore(race.name, **kw)


def test_a_huge_sample_under_a_time_budget_ends_in_its_time():
    """A billion runs asked for under a budget of one second: the chunks
    are made as they are handed out (all of them were made first, and the
    budget was spent on that, or the memory ran out), in this process and
    in two workers."""
    race = by_name("tracer_replaced_on_down")
    kw = dict(seed=1, schedulers=race.schedulers, nonsmp=False, time_budget=1.0)
    workers = _Workers(2, pinned=False)
    try:
        for mapper in (map, workers):
            t0 = time.monotonic()
            r = sample(race.setup, 10**12, "random", mapper=mapper, **kw)
            assert time.monotonic() - t0 < 2.5
            # (the workers start within the budget: on a loaded machine they
            # may take all of it, and run nothing)
            assert r.cut_by == ["time"] and (r.executions > 0 or mapper is workers)
    finally:
        workers.close()


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(time_budget=-1), "time_budget must be a number of seconds > 0 or None, not -1"),
        (dict(depth=2.5), "depth must be an int >= 1, not 2.5"),
        (dict(seed="x"), "seed must be an int or None (a fresh one), not 'x'"),
        (dict(max_events=0), "max_events must be an int >= 1, not 0"),
        (dict(method="dfs"), "method must be random or pct, not 'dfs'"),
    ],
)
def test_a_bad_argument_of_sample_is_refused_in_one_line(kw, words):
    race = by_name("tracer_replaced_on_down")
    with pytest.raises(SimError, match=re.escape(words)):
        sample(race.setup, 10, **{"method": "pct", **kw})


def test_a_negative_seed_is_a_stream_of_its_own():
    """``random.Random`` takes an int's absolute value: seeds -1 and 1 gave
    the same first chunk."""
    race = by_name("tracer_replaced_on_down")
    kw = dict(schedulers=race.schedulers, nonsmp=False)
    one = sample(race.setup, 30, "random", seed=1, **kw)
    minus = sample(race.setup, 30, "random", seed=-1, **kw)
    assert [g.first.schedule for g in one.outcomes] != [g.first.schedule for g in minus.outcomes]


def test_pct_says_when_its_depth_leaves_every_step_a_change_point():
    """A depth past a run's steps makes every step a change point and the
    runs nearly one order: the notes say so; the chance over the runs is
    never printed as 0 or 1 when it is neither."""
    race = by_name("tracer_killed_before_a_burst")
    kw = dict(seed=9, schedulers=race.schedulers, nonsmp=False)
    deep = sample(race.setup, 50, "pct", depth=20, **kw)
    assert any("each of a run's" in n and "change points" in n for n in deep.notes), deep.notes
    chance = re.search(r"per run, (\S+(?: - \S+)?) over 50 run\(s\)", deep.notes[0])
    assert chance and chance.group(1) not in ("0", "1"), deep.notes[0]
    assert 0 < float(chance.group(1)) < 1e-10
    shallow = sample(race.setup, 150, "pct", depth=1, **kw)
    assert "over 150 run(s)" in shallow.notes[0] and len(shallow.notes) == 1
    assert re.search(r"per run, (1 - \S+|0\.9\d*) over", shallow.notes[0]), shallow.notes[0]


def test_smp_sim_is_reached_from_import_smp():
    """The docs name ``smp.sim.sample``, ``smp.sim.SimError`` and
    ``smp.sim.shrink_failures``: ``import smp`` reaches them."""
    code = (
        "import smp; print(smp.sim.sample.__name__, smp.sim.SimError.__name__, "
        "smp.sim.shrink_failures.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == [
        "sample",
        "SimError",
        "shrink_failures",
    ], out.stderr
