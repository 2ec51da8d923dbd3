"""Random and PCT runs (``smp.sim.sampling``) cut into chunks: each chunk
from its own random stream of the seed, so worker processes can run them
side by side with the result one process gets, a stop at the first broken
invariant included."""

from __future__ import annotations

import pytest

from smp.app.explore.simulate import _Workers
from smp.sim.catalogue import by_name
from smp.sim.sampling import CHUNK, run_chunk, sample


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
