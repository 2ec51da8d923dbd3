"""The catalogue of SMP trace races, explored exhaustively: the counts each
entry states, no invariant broken, and the smp/nonsmp difference each
paragraph describes."""

from __future__ import annotations

import pytest

from smp.sim import explore, replay
from smp.sim.catalogue import CATALOGUE, by_name


@pytest.fixture(scope="module")
def results():
    return {race.name: explore(race.setup, schedulers=race.schedulers) for race in CATALOGUE}


@pytest.mark.parametrize("race", CATALOGUE, ids=lambda r: r.name)
def test_the_stated_counts_hold_exhaustively(results, race):
    r = results[race.name]
    assert r.exhausted and r.cut_by == []
    assert r.dpor == "optimal" and r.blocked == 0 and r.misses == 0
    assert r.executions == race.executions
    assert len(r.outcomes) == race.outcomes
    assert r.estimate == race.executions
    assert [g.outcome.violations for g in r.violations] == []
    assert sum(g.count for g in r.outcomes) == r.executions


@pytest.mark.parametrize("race", CATALOGUE, ids=lambda r: r.name)
def test_source_dpor_finds_the_same_classes(results, race):
    """Source-DPOR (``--dpor source``, and the reduction under a preemption
    bound) explores the same classes, a few of them sleep-set blocked."""
    r = explore(race.setup, schedulers=race.schedulers, dpor="source", nonsmp=False)
    assert r.exhausted and r.dpor == "source" and r.misses == 0
    assert r.executions == race.executions
    assert {g.outcome for g in r.outcomes} == {g.outcome for g in results[race.name].outcomes}


@pytest.mark.parametrize("race", CATALOGUE, ids=lambda r: r.name)
def test_nonsmp_gives_what_the_paragraph_says(results, race):
    nonsmp = dict(results[race.name].nonsmp.received)
    assert nonsmp[race.tracer] == race.nonsmp_received
    assert results[race.name].nonsmp.violations == ()


@pytest.mark.parametrize("race", CATALOGUE, ids=lambda r: r.name)
def test_each_outcome_replays_from_its_schedule(results, race):
    for g in results[race.name].outcomes:
        again = replay(race.setup, g.first.schedule, schedulers=race.schedulers)
        assert again.outcome == g.outcome


def _fates(group) -> set:
    return {fate.split(" (")[0] for _msg, fate in group.outcome.fates}


def test_a_killed_tracer_gets_some_messages_and_the_rest_are_dropped(results):
    r = results["tracer_killed_with_messages_queued"]
    fates = [_fates(g) for g in r.outcomes]
    # delivered before its exit is queued, dropped by the dispatcher, or never made
    assert {"delivered T", "dropped receiver_dead"} in fates
    assert {"delivered T"} in fates
    assert {"dropped receiver_dead"} in fates
    assert set() in fates  # P saw T dead at schedule-in: nothing made
    assert any("arrived_dead T" in f for f in fates)
    # nonsmp: T is gone before P runs, and nothing is made
    assert dict(r.nonsmp.received)["T"] == ()
    assert ("made", "0") in r.nonsmp.fates


def test_a_replaced_seq_tracer_splits_the_messages_every_way_the_queue_allows(results):
    r = results["seq_tracer_replaced"]
    splits = sorted(
        tuple(len(ms) for role, ms in g.outcome.received if role in ("T1", "T2"))
        for g in r.outcomes
    )
    assert splits == [(0, 2), (1, 1), (2, 0)]
    # the later message never reaches the old tracer after the earlier reached the new one
    assert (1, 1) in splits and by_name("seq_tracer_replaced").tracer == "T1"


def test_the_running_streams_interleave_but_keep_per_tracee_order(results):
    r = results["running_pairs_at_one_tracer"]
    orders = {dict(g.outcome.received)["T"] for g in r.outcomes}
    assert len(orders) == 7
    for order in orders:
        for who in ("A", "B"):
            mine = [m for m in order if m.startswith("{trace," + who + ",")]
            # the go may be there before the first slice: one slice, no out
            assert [m.split(",")[2] for m in mine] in (
                ["in", "out", "in", "out_exited"],
                ["in", "out_exited"],
            )


def test_a_report_names_roles_races_and_a_schedule(results):
    r = results["tracer_killed_with_messages_queued"]
    raced = [g for g in r.outcomes if g.first.races]
    assert raced, "every outcome but the first was tried because of a race"
    text = raced[0].first.races[0]
    assert "races with" in text and "T" in text
    for g in r.outcomes:
        assert all(t[0] in "SAIDPR" for t in g.first.schedule.split())


def test_a_replacement_on_another_scheduler_gets_every_send_after_the_retrace(results):
    """trace_3 marks the new tracer itself: the tracee, on another scheduler,
    never takes it for a dead one at schedule-in, in any order."""
    r = results["tracer_replaced_on_down"]
    for g in r.outcomes:
        assert "{trace,P,send,{ping,2},sink}" in dict(g.outcome.received)["T2"], g.first.schedule


def test_a_clear_of_all_never_misses_a_spawn_on_its_way():
    """P's slice sends the spawn to scheduler 2, K asks for trace(all, false)
    and is served before the spawn arrives: the clear takes the spawn first
    (the seed blocks thread progress), so the child is made and cleared and
    T gets P's spawn and exit only, never the child's send."""
    from smp.sim.explorer import world_factory

    race = by_name("trace_all_false_racing_spawn")
    w = world_factory(race.setup, race.schedulers, 200)()
    w.step("S1")
    w.step("S2")
    serve = [t for t in w.enabled() if t.startswith("R")]
    assert "A1>2" in w.enabled() and len(serve) == 1  # the spawn is on its way
    w.dispose()
    got = replay(race.setup, "S1 S2 " + serve[0], schedulers=race.schedulers)
    spawn = "{trace,P,spawn,P.1,{'smp.sim.catalogue','_ping',[sink]}}"
    assert dict(got.outcome.received)["T"] == (spawn, "{trace,P,exit,normal}")


def test_the_active_count_moves_by_one_in_queue_order_within_0_to_2(results):
    """Each profile_scheduler message's count is the one before it plus or
    minus one in the order the profiler receives them (the queue's), from
    the setup's 0 to 0 at the end; each scheduler goes active once or twice
    (one of them twice); 2 only with B's first period inside scheduler 1's."""
    r = results["profiler_active_count"]
    twos = 0
    for g in r.outcomes:
        got = [m[1:-1].split(",") for m in dict(g.outcome.received)["Prof"]]
        count, states = 0, {"1": [], "2": []}
        for tag, what, sched, state, n, _ts in got:
            assert (tag, what) == ("profile", "scheduler")
            count += 1 if state == "active" else -1
            assert int(n) == count and 0 <= count <= 2, g.first.schedule
            states[sched].append(state)
            if count == 2:
                twos += 1
                assert sched == "2" and states["1"] == ["active"], g.first.schedule
        assert count == 0
        periods = sorted(len(s) // 2 for s in states.values())
        assert periods in ([1, 2], [2, 2])
        for s in states.values():
            assert s == ["active", "inactive"] * (len(s) // 2)
    assert twos  # the periods do overlap in the queue


def test_the_readme_states_each_race_with_its_counts():
    from pathlib import Path

    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    for race in CATALOGUE:
        assert f"`{race.name}` {race.executions}/{race.outcomes}" in readme, race.name
