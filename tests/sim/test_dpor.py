"""Source-DPOR and optimal DPOR explore one execution per Mazurkiewicz trace.

For small generated workloads (seeded random), every interleaving of the
simulated SMP build is enumerated by brute force and canonicalised by its
happens-before relation under ``smp.sim.deps``; the number of distinct
classes must equal the number of complete executions the explorer runs,
with none sleep-set blocked beyond what it reports (none at all for
optimal DPOR), and the outcomes found both ways must agree.  On larger
generated workloads, too many interleavings for the brute force, the two
reductions must find the same classes, optimal DPOR with none blocked,
and a split search the same classes once each.
"""

from __future__ import annotations

import random

import pytest
from classes import classes

from smp.core.terms import Atom
from smp.sim import Explorer, brute_force, replay
from smp.sim.catalogue import CATALOGUE, by_name
from smp.sim.dpor import all_executions, mazurkiewicz_key
from smp.sim.explorer import world_factory
from smp.sim.outcome import outcome_of

LIMIT = 350  # interleavings a generated workload may have (brute force cost)


async def worker(proc, plan, to):
    for step in plan:
        if step == "send":
            await proc.send(to, Atom("hello"))
        elif step == "seqsend":
            await proc.seq_trace("label", 7)
            await proc.seq_trace("send", True)
            await proc.send(to, Atom("hi"))
        elif step == "kill":
            await proc.exit(to, Atom("kill"))
        elif step == "seq":
            await proc.bif("set_system_seq_tracer", to)


def _program(rng: random.Random):
    nsched = rng.choice([1, 2])
    flags = rng.choice([["send"], ["procs"], ["send", "timestamp"], ["running"]])
    steps = ["send", "kill", "seq", "seqsend"]
    plan = [rng.choice(steps) for _ in range(rng.randint(1, 3 - nsched))]
    places = [rng.randint(1, nsched) for _ in range(3)]
    other = rng.choice([None, "kill", "seq"]) if nsched == 1 else None
    seq_tracer = rng.random() < 0.5

    def setup(vm):
        t = vm.spawn_collector(scheduler=places[0], name="T")
        p = vm.spawn(worker, plan, t, scheduler=places[1], name="P")
        if other:
            vm.spawn(worker, [other], t, scheduler=places[2], name="K")
        vm.trace(p, True, flags, tracer=t)
        if seq_tracer:
            vm.set_system_seq_tracer(t)

    return setup, nsched, f"n={nsched} {flags} {plan} at {places} other={other} seq={seq_tracer}"


def _programs(count: int, seed: int = 24):
    rng = random.Random(seed)
    out = []
    tries = 0
    while len(out) < count and tries < 400:
        tries += 1
        setup, nsched, desc = _program(rng)
        bf = brute_force(setup, nsched, limit=LIMIT)
        if bf["interleavings"] >= LIMIT:
            continue
        out.append((setup, nsched, desc, bf))
    return out


PROGRAMS = _programs(22)


def test_the_generator_gives_enough_programs_with_races():
    assert len(PROGRAMS) >= 20
    assert sum(1 for *_, bf in PROGRAMS if bf["traces"] > 1) >= 10
    assert sum(1 for *_, bf in PROGRAMS if bf["outcomes"] > 1) >= 3


@pytest.mark.parametrize("dpor", ["optimal", "source"])
@pytest.mark.parametrize("i", range(len(PROGRAMS)))
def test_explored_executions_equal_mazurkiewicz_traces(i, dpor):
    setup, nsched, desc, bf = PROGRAMS[i]
    r = Explorer(setup, schedulers=nsched, nonsmp=False, blocked_ok=True, dpor=dpor).run()
    assert r.exhausted and r.dpor == dpor, desc
    assert r.executions == bf["traces"], (desc, r.executions, r.blocked, bf)
    assert len(r.outcomes) == bf["outcomes"], desc
    if dpor == "optimal":
        assert r.blocked == 0, desc


def _medium(rng: random.Random):
    """Two schedulers, a tracee and another process of up to three and two
    steps: hundreds of classes, too many interleavings to enumerate."""
    flags = rng.choice([["send"], ["procs"], ["send", "timestamp"], ["running"], ["send", "procs"]])
    steps = ["send", "kill", "seq", "seqsend"]
    plan = [rng.choice(steps) for _ in range(rng.randint(1, 3))]
    other = [rng.choice(steps) for _ in range(rng.randint(0, 2))]
    places = [rng.randint(1, 2) for _ in range(3)]
    seq_tracer = rng.random() < 0.5

    def setup(vm):
        t = vm.spawn_collector(scheduler=places[0], name="T")
        p = vm.spawn(worker, plan, t, scheduler=places[1], name="P")
        if other:
            vm.spawn(worker, other, t, scheduler=places[2], name="K")
        vm.trace(p, True, flags, tracer=t)
        if seq_tracer:
            vm.set_system_seq_tracer(t)

    return setup, f"{flags} {plan} other={other} at {places} seq={seq_tracer}"


def _medium_programs(count: int, seed: int = 1, most: int = 400):
    """Generated programs with more than one class and at most ``most``,
    sized by an optimal search stopped past the bound."""
    from smp.sim.dpor import Tree

    rng = random.Random(seed)
    out = []
    while len(out) < count:
        setup, desc = _medium(rng)
        t = Tree(world_factory(setup, 2, 200))
        n = 0
        while not t.finished and n <= most:
            w, _how = t.execute()
            t.add_races()
            w.dispose()
            n += 1
            if not t.advance():
                break
        t.close()  # (cut at ``most``: its spare worlds)
        if 1 < n <= most:
            out.append((setup, desc))
    return out


MEDIUM = _medium_programs(12)


@pytest.mark.parametrize("i", range(len(MEDIUM)))
def test_optimal_and_source_dpor_find_the_same_classes_and_optimal_blocks_none(i, monkeypatch):
    """Optimal DPOR finds Source-DPOR's classes, each once, and blocks no
    execution, where a process is killed too (Source-DPOR blocks 69 of 241
    and 4 of 26 on two of them); shared by tasks it is the one tree's
    search; split, Source-DPOR finds each class once."""
    from later import Later

    from smp.sim import share
    from smp.sim.dpor import split
    from smp.sim.explorer import explore_split

    setup, desc = MEDIUM[i]
    nw = world_factory(setup, 2, 200)
    opt, opt_blocked, misses = classes(nw, True)
    src, src_blocked, _ = classes(nw, False)
    assert len(set(opt)) == len(opt), desc  # no class twice
    assert set(opt) == set(src), desc
    assert misses == 0 and opt_blocked == 0, (desc, opt_blocked, src_blocked)
    # shared by tasks (what --jobs does, every branch with siblings a task):
    # the one tree's search, execution for execution
    monkeypatch.setattr(share, "MIN_TASK", 1)
    one = Explorer(setup, schedulers=2, nonsmp=False).run()
    shared = explore_split(setup, 2, nonsmp=False, submit=Later, probe=0)
    assert shared.tasks > 0, desc
    assert [(g.count, g.first.schedule, g.outcome) for g in shared.outcomes] == [
        (g.count, g.first.schedule, g.outcome) for g in one.outcomes
    ], desc
    assert (shared.executions, shared.blocked) == (one.executions, 0), desc
    # a split search (Source-DPOR's): every class once, over the subtrees
    parts: list = []
    for prefix in split(nw, 8):
        parts += classes(nw, False, prefix)[0]
    assert len(parts) == len(set(parts)) and set(parts) == set(src), desc


def test_a_split_leaves_out_the_prefixes_where_every_thread_is_asleep():
    """A subtree whose first state has every enabled thread asleep holds no
    class (each is explored under a sibling): split makes no task of it."""
    from smp.sim.dpor import Tree, split

    race = by_name("tracer_killed_with_messages_queued")
    nw = world_factory(race.setup, race.schedulers, 200)
    prefixes = split(nw, 8)
    assert prefixes
    for prefix in prefixes:
        w, how = Tree(nw, prefix=prefix, optimal=False).execute()
        # blocked only below the prefix, never at its end
        assert how != "blocked" or len(w.trace) > len(prefix), prefix
        w.dispose()


def test_the_medium_programs_have_races_sleep_sets_alone_do_not_settle():
    """Source DPOR runs sleep-set blocked executions on some of them: the
    programs exercise what wakeup trees are for."""
    blocked = [classes(world_factory(s, 2, 200), False)[1] for s, _d in MEDIUM]
    assert sum(1 for b in blocked if b) >= 3


def test_every_explored_schedule_replays_to_its_outcome():
    setup, nsched, desc, _ = max(PROGRAMS, key=lambda x: x[3]["outcomes"])
    r = Explorer(setup, schedulers=nsched, nonsmp=False, blocked_ok=True).run()
    assert len(r.outcomes) > 1
    for g in r.outcomes:
        again = replay(setup, g.first.schedule, schedulers=nsched, blocked_ok=True)
        assert again.outcome == g.outcome, desc
        assert again.schedule == g.first.schedule


@pytest.mark.parametrize("name", [r.name for r in CATALOGUE])
def test_an_outcomes_events_made_after_the_search_are_those_its_replay_shows(name):
    """A search keeps the events of each outcome's first execution and puts
    them in words when they are read, its worlds long gone: the words are
    those its schedule's replay gives on a live world, and a result sent to
    another process carries them."""
    import pickle

    race = by_name(name)
    r = Explorer(race.setup, schedulers=race.schedulers, nonsmp=False).run()
    sent = pickle.loads(pickle.dumps(r))
    for g, h in zip(r.outcomes, sent.outcomes, strict=True):
        again = replay(race.setup, g.first.schedule, schedulers=race.schedulers)
        assert g.first.events == again.events and len(again.events) > 1
        assert h.first.events == again.events


def test_equivalent_interleavings_have_one_key_and_one_outcome():
    setup, nsched, desc, bf = max(PROGRAMS, key=lambda x: x[3]["interleavings"])
    by_key: dict = {}
    for _s, w in all_executions(world_factory(setup, nsched, 200), LIMIT):
        by_key.setdefault(mazurkiewicz_key(w.trace), set()).add(outcome_of(w, (), True))
        w.dispose()
    assert len(by_key) == bf["traces"]
    assert all(len(outcomes) == 1 for outcomes in by_key.values()), desc


def _bounded_runs(race, bound):
    """Every execution of a bounded search: its preemptions and its outcome."""
    from smp.sim.dpor import Tree
    from smp.sim.explorer import world_factory

    t = Tree(world_factory(race.setup, race.schedulers, 200), preemptions=bound)
    runs = []
    while not t.finished:
        w, _how = t.execute()
        t.add_races()
        runs.append(t.stack[-1].pre)
        w.dispose()
        if not t.advance():
            break
    return runs, t.bound_cut


@pytest.mark.parametrize("name", ["seq_tracer_replaced", "running_pairs_at_one_tracer"])
def test_a_preemption_bound_cuts_the_search_and_says_so(name):
    """No execution of a search bounded to P preemptions has more; the
    outcomes grow with P up to the unbounded search's, and a bound that cut
    something is named in ``cut_by``."""
    from smp.sim.explorer import Explorer

    race = by_name(name)
    full = {g.outcome for g in Explorer(race.setup, race.schedulers, nonsmp=False).run().outcomes}
    seen = []
    for bound in (0, 1, 2, 50):
        runs, cut = _bounded_runs(race, bound)
        assert max(runs) <= bound
        r = Explorer(race.setup, race.schedulers, nonsmp=False, preemptions=bound).run()
        got = {g.outcome for g in r.outcomes}
        assert got <= full and r.exhausted
        assert ("preemptions" in r.cut_by) == (cut > 0)
        seen.append(got)
    assert seen[0] < full and seen[0] <= seen[1] <= seen[2] and seen[-1] == full


def test_the_relation_kept_across_executions_is_the_one_built_afresh():
    """``HappensBefore`` cut back to a prefix and extended with other events
    (as the explorer keeps it from one execution to the next) equals the
    relation built from nothing on the same list, frontier included; one
    that went through pickle goes back as well."""
    import pickle

    from smp.sim.dpor import HappensBefore

    race = by_name("tracer_replaced_on_down")
    nw = world_factory(race.setup, race.schedulers, 200)
    rng = random.Random(11)

    def run() -> list:
        w = nw()
        while en := w.enabled():
            w.step(rng.choice(en))
        events = list(w.trace)
        w.dispose()
        return events

    def state(h):
        return (h.hb, h.preds, h.cands, h._last_w, h._reads, h._producer, h._last_of)

    kept = HappensBefore(run())
    for n in range(30):
        events = run()
        cut = rng.randrange(min(len(kept.events), len(events)) + 1)
        if n % 3 == 0:
            kept = pickle.loads(pickle.dumps(kept))
        kept.truncate(cut)
        assert state(kept) == state(HappensBefore(kept.events))
        for e in events[cut:]:
            kept.push(e)
        assert state(kept) == state(HappensBefore(kept.events[:cut] + events[cut:]))


async def _waits(proc):
    await proc.receive()


async def _answers(proc):
    m = await proc.receive()
    await proc.send(m[1], Atom("port"))


async def _sends(proc, to, msg):
    await proc.send(to, msg)


async def _kills(proc, victim):
    await proc.exit(victim, Atom("kill"))


def test_optimal_dpor_finds_every_class_where_a_kill_meets_a_message_on_its_way():
    """C waits on scheduler 1; O on scheduler 2 answers the pid K sends it;
    K2 kills C on C's scheduler.  When a weak initial also asked whether the
    race's execution ran the step later, a sleeping arrival of O's answer
    covered a sequence that a branch beside it was taken to cover too, and
    optimal DPOR explored 40 of the 52 classes Source-DPOR finds."""

    nw = world_factory(_kill_meets_message, 2, 200)
    opt, blocked, misses = classes(nw, True)
    src, _, _ = classes(nw, False)
    assert misses == 0 and blocked == 0 and len(set(opt)) == len(opt)
    assert set(opt) == set(src) and len(src) == 52


def _leaf_paths(node) -> list[list]:
    """The sequences of events from a wakeup-tree node to each of its leaves."""
    if not node[2]:
        return [[node[1]]]
    return [[node[1], *rest] for child in node[2] for rest in _leaf_paths(child)]


def _later_siblings_not_covered(tree) -> int:
    """Checks the wakeup trees' invariant (the paper's Definition 6.1) at
    every branch of the path: no thread of a sibling before (the branch
    being explored included) is a weak initial of a sequence planned after
    it, which would already stand for that sequence.  The sequences
    checked (a weak initial as the paper defines it, from ``deps.dependent``)."""
    from smp.sim.deps import dependent

    def weak_initial(e, v) -> bool:
        for x in v:
            if x.thread == e.thread:
                return True
            if dependent(e, x):
                return False
        return True

    checked = 0
    for b in tree.stack:
        siblings = [b.event] + [n[1] for n in b.wut]
        for k, node in enumerate(b.wut):
            for path in _leaf_paths(node):
                for before in siblings[: k + 1]:
                    assert not weak_initial(before, path), (
                        before.thread,
                        [e.thread for e in path],
                    )
                    checked += 1
    return checked


def _kill_meets_message(vm):
    c = vm.spawn(_waits, scheduler=1, name="C")
    o = vm.spawn(_answers, scheduler=2, name="O")
    vm.spawn(_sends, o, (Atom("who"), c), scheduler=1, name="K")
    vm.spawn(_kills, c, scheduler=1, name="K2")


@pytest.mark.parametrize("i", range(len(MEDIUM) + 1))
def test_a_sequence_is_never_planned_beside_a_branch_that_stands_for_it(i):
    """After every execution, no wakeup tree plans a sequence beside an
    earlier branch whose thread is a weak initial of it.  When a weak
    initial also asked whether the race's execution ran a step that a BIF
    can take later, such a sequence was planned beside the branch of an
    arrival independent of it, and that arrival, asleep below the
    sequence, was then taken to cover the reversal the sequence needed
    (classes lost, or blocked executions)."""
    from smp.sim.dpor import Tree

    setup = MEDIUM[i][0] if i < len(MEDIUM) else _kill_meets_message
    tree = Tree(world_factory(setup, 2, 200), optimal=True)
    checked = 0
    while not tree.finished:
        w, _how = tree.execute()
        tree.add_races()
        checked += _later_siblings_not_covered(tree)
        w.dispose()
        if not tree.advance():
            break
    if setup is _kill_meets_message:
        assert checked  # (it plans sequences beside branches: the check ran)


def _search(nw, check=None) -> tuple[list, int]:
    """An optimal search's executions (schedule, how it ended, outcome), and
    how many started from a spare world; ``check(w, tree)`` after each."""
    from smp.sim.dpor import Tree

    tree, runs = Tree(nw, optimal=True), []
    while not tree.finished:
        w, how = tree.execute()
        tree.add_races()
        runs.append((tree.schedule(), how, outcome_of(w) if how != "blocked" else None))
        if check is not None:
            check(w, tree)
        w.dispose()
        if not tree.advance():
            break
    tree.close()
    return runs, tree.spared


def _spare_workloads() -> list:
    return [(r.name, r.setup, r.schedulers) for r in CATALOGUE] + [
        (f"medium-{i}", setup, 2) for i, (setup, _desc) in enumerate(MEDIUM)
    ]


_SPARE_WORKLOADS = _spare_workloads()


@pytest.mark.parametrize(
    "name, setup, schedulers", _SPARE_WORKLOADS, ids=[w[0] for w in _SPARE_WORKLOADS]
)
def test_an_execution_started_from_a_spare_world_is_the_one_a_new_world_runs(
    name, setup, schedulers, monkeypatch
):
    """A world run to plan a race's reversal is kept and the next execution
    whose path starts with its steps goes on from it (``Tree._spare_for``).
    Each execution's events (footprints and words) and outcome are those of
    its path run step by step on a new world, and the search is the one
    run with no spare kept: the same executions in the same order."""
    from smp.sim import dpor

    nw = world_factory(setup, schedulers, 200)

    def same_as_a_new_world(w, tree) -> None:
        fresh = nw()
        try:
            for b in tree.stack:
                fresh.step(b.chosen)
            assert [(*e._fields(), e.label) for e in w.trace] == [
                (*e._fields(), e.label) for e in fresh.trace
            ], tree.schedule()
            if not fresh.enabled():
                assert outcome_of(w) == outcome_of(fresh), tree.schedule()
        finally:
            fresh.dispose()

    kept, spared = _search(nw, same_as_a_new_world)
    monkeypatch.setattr(dpor, "SPARES", 0)
    alone, none = _search(nw)
    assert none == 0 and kept == alone, name


def test_spare_worlds_are_used():
    """The test above checks something: on the catalogue the searches
    start executions from spare worlds (over a third of them on
    ``tracer_replaced_on_down``)."""
    race = by_name("tracer_replaced_on_down")
    runs, spared = _search(world_factory(race.setup, race.schedulers, 200))
    assert len(runs) == race.executions and spared > len(runs) // 4


def test_the_spare_worlds_hold_no_more_steps_than_their_bound(monkeypatch):
    """However long the paths, the spare worlds hold ``SPARE_STEPS`` steps
    at most (the memory they keep), and a bound that keeps fewer leaves the
    search as it was."""
    from smp.sim import dpor

    race = by_name("tracer_replaced_on_down")
    nw = world_factory(race.setup, race.schedulers, 200)
    unbounded, _ = _search(nw)
    monkeypatch.setattr(dpor, "SPARE_STEPS", 70)
    held: list = []

    def count(_w, tree) -> None:
        steps = sum(len(s[0]) for s in tree._spares)
        assert steps == tree._spare_steps <= 70
        held.append(len(tree._spares))

    bounded, spared = _search(nw, count)
    assert bounded == unbounded
    # (held to the steps, fewer than the count allows)
    assert spared > 0 and 1 < max(held) < dpor.SPARES
