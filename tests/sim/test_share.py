"""One optimal-DPOR search shared among processes (``smp.sim.share``): its
branches explored as tasks ahead of their turn give the one tree's search,
execution for execution, and a task whose start changed is not taken."""

from __future__ import annotations

import pytest
from later import Later

from smp.app.explore.workload import Bounds, ScenarioWorkload
from smp.app.scenario import load_scenario
from smp.sim.catalogue import CATALOGUE
from smp.sim.explorer import explore_split, run_branch
from smp.sim.share import Share


def _key(r):
    groups = [(g.count, g.first.index, g.first.schedule, g.outcome) for g in r.outcomes]
    # (the estimate too: a cut search's is the one tree's after the same execution)
    return r.executions, r.blocked, r.cut_events, r.exhausted, r.cut_by, r.estimate, groups


@pytest.fixture
def shares(monkeypatch):
    """Every ``Share`` a search makes; every branch with siblings explored
    is large enough for a task (the catalogue's searches are small)."""
    from smp.sim import explorer, share

    monkeypatch.setattr(share, "MIN_TASK", 1)

    made: list = []

    class Kept(Share):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

    monkeypatch.setattr(explorer, "Share", Kept)
    return made


@pytest.mark.parametrize("race", CATALOGUE, ids=lambda r: r.name)
def test_the_catalogue_shared_is_the_one_tree(race, shares):
    one = explore_split(race.setup, race.schedulers, nonsmp=False)
    shared = explore_split(race.setup, race.schedulers, nonsmp=False, submit=Later, probe=0)
    assert _key(shared) == _key(one)
    assert one.executions == race.executions and shared.blocked == 0
    if race.executions > 1:
        assert shares[0].tasks > 0  # (branches were taken from tasks)


@pytest.mark.parametrize("window", [2, 8])
def test_a_task_whose_start_changed_is_explored_again(window, shares):
    """On ``churn`` an earlier branch's race plans more below a branch
    handed out before: that task is not taken (``again``), and the search
    is still the one tree's, to the bound."""
    wl = ScenarioWorkload(load_scenario("churn"), Bounds(operations=1), None)
    one = explore_split(wl.setup, wl.schedulers, nonsmp=False, max_executions=400)
    shared = explore_split(
        wl.setup,
        wl.schedulers,
        nonsmp=False,
        max_executions=400,
        submit=Later,
        probe=0,
        window=window,
    )
    assert shares[0].again > 0 and shares[0].tasks > 0
    assert _key(shared) == _key(one) and one.executions == 400


def test_a_task_cut_to_fewer_executions_is_that_task_run_with_fewer(shares):
    """A task handed out with more executions left than there are at its
    turn is cut (``TaskResult.upto``): what it gives is what the task run
    with that bound gives."""
    wl = ScenarioWorkload(load_scenario("churn"), Bounds(operations=2), None)
    handed: list = []

    def keep(f, args):
        handed.append(args)
        return Later(f, args)

    explore_split(wl.setup, wl.schedulers, nonsmp=False, max_executions=200, submit=keep, probe=0)
    big = max(handed, key=lambda a: a[4] or 0)
    full = run_branch(big)
    n = full.result.executions // 2
    assert n > 1
    cut = full.upto(n)
    alone = run_branch((*big[:4], n, None))
    assert _key(cut.result) == _key(alone.result)
    assert (cut.leaves, cut.event, len(cut.above)) == (alone.leaves, alone.event, len(alone.above))
    assert cut.above == alone.above and cut.size == alone.size


def test_a_shared_search_stops_at_the_first_violation_as_the_one_tree_does(shares):
    """Asked to stop at the first broken invariant, a shared search stops at
    the one tree's execution, also when the violation is a task's last
    execution (the task ends exhausted, and the search must still stop)."""
    from smp.sim.catalogue import by_name

    race = by_name("tracer_killed_before_a_burst")
    kw = dict(checks=race.checks, nonsmp=False, stop_at_violation=True)
    one = explore_split(race.setup, race.schedulers, **kw)
    shared = explore_split(race.setup, race.schedulers, **kw, submit=Later, probe=0)
    assert one.cut_by == ["violation"] and one.executions < race.executions
    assert shared.tasks > 0
    assert _key(shared) == _key(one)
