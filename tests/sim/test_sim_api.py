"""The explorer's API: bounds that cut the search and say so, user
predicates, the built-in invariants, replay, the report, and the
dependency relation itself (independent events commute; every conflict has
the seed's reason)."""

from __future__ import annotations

import ast
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from helpers import FUZZ_HEAD

import smp
from smp.core.terms import Atom
from smp.sim import Explorer, SimError, dpor, explore, replay
from smp.sim.catalogue import CATALOGUE, by_name
from smp.sim.deps import RULES, conflicting, dependent, explain
from smp.sim.dpor import Tree, all_executions, mazurkiewicz_key
from smp.sim.explorer import world_factory
from smp.sim.outcome import outcome_of
from smp.sim.report import format_report, two_digits

ROOT = Path(__file__).resolve().parents[2]
SEQ = by_name("seq_tracer_replaced")
KILLED = by_name("tracer_killed_with_messages_queued")


def test_an_execution_bound_cuts_the_search_and_says_so():
    r = Explorer(SEQ.setup, schedulers=2, max_executions=2).run()
    assert r.executions == 2 and not r.exhausted
    assert r.cut_by == ["executions"]
    assert r.estimate >= 2
    assert "cut by executions" in format_report(r)


@pytest.mark.parametrize("race", ["tracer_replaced_on_down", "profiler_active_count"])
def test_the_estimate_of_a_cut_search_nears_the_whole_as_it_goes(race):
    """Built from the tree explored so far, the estimate is of the right
    size late in a search and exact at its end.  The product of the
    branches along each path, averaged, said 6,800 after 784 executions of
    a search of 785, and 8,100 after 600."""
    whole = Explorer(by_name(race).setup, schedulers=2, nonsmp=False).run()
    assert whole.exhausted and whole.estimate == whole.executions
    for share in (0.5, 0.9, 0.99):
        n = max(1, int(whole.executions * share))
        r = Explorer(by_name(race).setup, schedulers=2, nonsmp=False, max_executions=n).run()
        assert r.executions == n and not r.exhausted
        assert whole.executions / 2 <= r.estimate <= whole.executions * 2, (n, r.estimate)


def test_a_plan_the_search_could_not_follow_is_said_with_the_way_round_it():
    import dataclasses

    r = Explorer(SEQ.setup, schedulers=2, dpor="optimal").run()
    assert r.misses == 0 and "Warning" not in format_report(r)
    text = format_report(dataclasses.replace(r, misses=2))
    assert "Warning: 2 step(s) the wakeup trees planned could not be taken" in text
    assert "--dpor source" in text
    assert dataclasses.replace(r, misses=2).as_dict()["misses"] == 2


def test_blocked_executions_are_put_down_to_a_split_only_when_there_was_one():
    import dataclasses

    r = Explorer(SEQ.setup, schedulers=2, dpor="optimal").run()
    assert r.blocked == 0 and "blocked" not in format_report(r)
    split = format_report(dataclasses.replace(r, blocked=3, tasks=4))
    assert "3 execution(s) were sleep-set blocked" in split and "split search" in split
    one = format_report(dataclasses.replace(r, blocked=3, tasks=1))
    assert "3 execution(s) were sleep-set blocked" in one and "split" not in one
    source = format_report(dataclasses.replace(r, blocked=3, tasks=4, dpor="source"))
    assert "Source-DPOR plans only a race's first step" in source and "split" not in source


def test_a_time_budget_cuts_the_search_and_says_so():
    r = Explorer(SEQ.setup, schedulers=2, time_budget=1e-9).run()
    assert r.executions == 1 and r.cut_by == ["time"]


def test_user_predicates_are_checked_on_every_outcome():
    def t1_gets_everything(outcome):
        got = dict(outcome.received)["T1"]
        return len(got) == 2 or f"T1 got {len(got)}"

    r = explore(SEQ.setup, schedulers=2, checks=[t1_gets_everything])
    bad = [v for g in r.violations for v in g.outcome.violations]
    assert len(r.violations) == 2  # T1 got one, or none
    assert "check t1_gets_everything failed: T1 got 0" in bad
    assert r.nonsmp.violations == ()


async def _waits_forever(proc):
    await proc.receive()


def test_a_process_blocked_forever_is_a_violation():
    def setup(vm):
        vm.spawn(_waits_forever, scheduler=2, name="W")

    r = explore(setup, schedulers=2)
    assert [g.outcome.violations for g in r.outcomes] == [(r.outcomes[0].outcome.violations[0],)]
    assert "W (<" in r.outcomes[0].outcome.violations[0]
    assert "blocked forever" in r.outcomes[0].outcome.violations[0]
    assert explore(setup, schedulers=2, blocked_ok=True).violations == []


def test_a_schedule_that_cannot_run_is_refused_with_the_step():
    with pytest.raises(SimError, match=r"step 1: 'D' cannot step now"):
        replay(SEQ.setup, "D", schedulers=2)


def test_a_short_schedule_is_completed_in_the_default_order():
    full = replay(SEQ.setup, "", schedulers=2)
    again = replay(SEQ.setup, " ".join(full.schedule.split()[:3]), schedulers=2)
    assert again.schedule == full.schedule and again.outcome == full.outcome


def test_the_report_names_roles_pids_races_and_schedules():
    r = explore(KILLED.setup, schedulers=2)
    text = format_report(r)
    assert text.count("Schedule: ") == len(r.outcomes)
    # (their step numbers: those of the execution the race was found in)
    assert "Race pairs that made the explorer try it (steps of the execution each" in text
    assert "T<0." in text and "dropped receiver_dead" in text
    # a seq_trace message names no sender: its dispatch says none (not None)
    seq = format_report(explore(SEQ.setup, schedulers=2))
    assert "SEQTRACE -> T" in seq and "None" not in seq
    assert "nonsmp (one order" in text
    assert (
        two_digits(1234.5) == "1,200"
        and two_digits(1.48e10) == "15,000,000,000"
        and two_digits(3.14159) == "3.1"
    )


def _executions(race, limit=300):
    for sched, w in all_executions(world_factory(race.setup, race.schedulers, 200), limit):
        yield sched, w
        w.dispose()


def _conflict_kinds(traces) -> set:
    """The pairs of event kinds that conflict in ``traces``, each conflict
    checked to have a rule with the seed's reason (the race pairs a report
    prints say "no rule" otherwise)."""
    seen = set()
    for ev in traces:
        for j, b in enumerate(ev):
            for a in ev[:j]:
                if a.thread != b.thread and conflicting(a, b):
                    for reason in explain(a, b):
                        assert "no rule" not in reason, (reason, a, b)
                    seen.add(frozenset((a.kind, b.kind)))
    kinds = {r.kinds for r in RULES}
    assert seen <= kinds | {frozenset((k,)) for k in ("slice", "ingest", "dispatch")}
    return seen


def _random_traces(nw, runs: int, seed: int = 3):
    rng = random.Random(seed)
    for _ in range(runs):
        w = nw()
        while en := w.enabled():
            w.step(rng.choice(en))
        yield w.trace
        w.dispose()


@pytest.mark.parametrize("race", CATALOGUE, ids=lambda r: r.name)
def test_every_conflict_met_has_a_rule_with_the_seeds_reason(race):
    traces = [w.trace for _s, w in _executions(race, 100)]
    nw = world_factory(race.setup, race.schedulers, 200)
    seen = _conflict_kinds(traces + list(_random_traces(nw, 30)))
    assert seen or race.executions == 1  # the workloads do race


@pytest.mark.parametrize(
    "name", ["churn", "stress", "default", "seqtrace", "long"], ids=lambda n: f"example_{n}"
)
def test_every_conflict_met_has_a_rule_in_a_run_scenario(name):
    """The same over random schedules of the shipped run scenarios (what
    ``smp-emu explore churn`` prints race pairs from)."""
    from smp.app.explore.workload import Bounds, ScenarioWorkload
    from smp.app.scenario import load_scenario

    wl = ScenarioWorkload(load_scenario(name), Bounds())
    nw = world_factory(wl.setup, wl.schedulers, 200)
    assert _conflict_kinds(_random_traces(nw, 15))


def _swaps_commute(nw, schedule: list[str]) -> int:
    """Swap each adjacent pair of independent events of ``schedule`` and
    replay: the same events (footprints included) and the same outcome.
    The number of swaps."""
    w0 = nw()
    for t in schedule:
        w0.step(t)
    base = Counter(w0.trace)  # (a multiset: events hold sets, which sort partially)
    swapped = 0
    for i in range(len(schedule) - 1):
        a, b = w0.trace[i], w0.trace[i + 1]
        if dependent(a, b):
            continue
        steps = list(schedule)
        steps[i], steps[i + 1] = steps[i + 1], steps[i]
        w = nw()
        for t in steps:
            w.step(t)
        assert Counter(w.trace) == base, (a.label, b.label)
        assert outcome_of(w) == outcome_of(w0), (a.label, b.label)
        w.dispose()
        swapped += 1
    w0.dispose()
    return swapped


@pytest.mark.parametrize("race", CATALOGUE, ids=lambda r: r.name)
def test_adjacent_independent_events_commute(race):
    """Swap every adjacent pair of independent events of each of the first
    executions of the search (a blocked one run to its end) and replay: the same events (footprints
    included) and the same outcome.  What the reductions rest on: a
    footprint that depends on which of two events came first (a message
    reaching a collector that a signal kills) fails here."""
    nw = world_factory(race.setup, race.schedulers, 200)
    tree = Tree(nw)
    swapped = n = 0
    while not tree.finished and n < 12:
        w0, _how = tree.execute()
        tree.add_races()
        while w0.enabled():  # a blocked execution, run to its end
            w0.step(min(w0.enabled()))
        swapped += _swaps_commute(nw, [e.thread for e in w0.trace])
        w0.dispose()
        n += 1
        if not tree.advance():
            break
    tree.close()  # (cut at 12: its spare worlds)
    assert swapped > 0


def _explored_classes(nw, optimal: bool = False, counts: dict | None = None) -> set:
    """The classes an exhaustive search explores; it plans no step that is
    not there when its turn comes.  ``counts`` gets its executions, how
    many were sleep-set blocked and how many races' last events
    were run again where their race's reversal puts them and differed."""
    tree, explored = Tree(nw, optimal=optimal), set()
    n = blocked = 0
    while not tree.finished:
        w, how = tree.execute()
        tree.add_races()
        n += 1
        if how == "complete":
            explored.add(mazurkiewicz_key(w.trace))
        else:
            blocked += 1
        w.dispose()
        if not tree.advance():
            break
    assert tree.finished and tree.misses == 0
    if counts is not None:
        counts.update(
            executions=n,
            blocked=blocked,
            replanned=tree.replanned,
            replanned_other=tree.replanned_other,
        )
    return explored


def _met_classes(nw, runs: int) -> set:
    rng, met = random.Random(7), set()
    for _ in range(runs):
        w = nw()
        while en := w.enabled():
            w.step(rng.choice(en))
        met.add(mazurkiewicz_key(w.trace))
        w.dispose()
    return met


@pytest.mark.parametrize("race", CATALOGUE, ids=lambda r: r.name)
def test_every_class_random_schedules_meet_is_explored(race):
    """Every Mazurkiewicz trace 1,000 random schedules run into is one the
    exhaustive search explored (on programs too large for brute force).  A
    BIF that reads whether another scheduler's batches are in without
    saying so, or takes the work of a thread it disables without that
    thread being tried first, fails here."""
    nw = world_factory(race.setup, race.schedulers, 200)
    explored = _explored_classes(nw)
    assert len(explored) == race.executions
    met = _met_classes(nw, 1000)
    assert met <= explored, len(met - explored)


def test_a_step_a_bif_took_is_tried_first_and_said_so():
    """On ``trace_all_false_racing_spawn`` the BIF takes an ingest's batch
    or an arrival's signal in some execution; the branch that tries that
    thread first says why, as a step that took another's work."""
    from smp.sim.explorer import _describe_races
    from smp.sim.outcome import Namer

    race = by_name("trace_all_false_racing_spawn")
    tree = Tree(world_factory(race.setup, race.schedulers, 200))
    said = []
    while not tree.finished:
        w, _how = tree.execute()
        tree.add_races()
        took = [x for x in tree.why() if x[0] == x[1]]
        said += _describe_races(took, Namer(w.names))
        w.dispose()
        if not tree.advance():
            break
    assert said and all("never stepped" in x for x in said)
    # the thread taken from: an ingest (I<k>) or an arrival (A<i>><k>)
    assert all(x.split("took the work of ")[1][0] in "IA" for x in said)


@pytest.mark.parametrize("name", ["default", "seqtrace", "long"])
def test_every_class_random_schedules_meet_is_explored_in_a_run_scenario(name):
    """The same on the shipped run scenarios the search can finish, cut to
    one operation, instance, size and firing (``churn`` and ``stress`` do
    not end in 20,000 executions even so)."""
    from smp.app.explore.workload import Bounds, ScenarioWorkload
    from smp.app.scenario import load_scenario

    wl = ScenarioWorkload(load_scenario(name), Bounds(operations=1, count=1, size=1, firings=1))
    nw = world_factory(wl.setup, wl.schedulers, 200)
    explored = _explored_classes(nw)
    met = _met_classes(nw, 500)
    assert len(met) > 1 and met <= explored, len(met - explored)


#: the parts of ``churn`` and ``stress`` (workloads and faults), each alone
#: and small enough for the search to end: (what is left, explored classes)
_PARTS = {
    "churn_workload": ("", "churn", '[groups.params]\nburst = 1\nflags = ["send"]'),
    "kill_tracer_under_ring": (
        '[[faults]]\naction = "kill_tracer"\ntarget = "t"\nat = 0.05',
        "ring",
        'trace = ["send"]\ntracer = "t"',
    ),
    "kill_tracer_under_gc": (
        '[[faults]]\naction = "kill_tracer"\ntarget = "t"\nat = 0.05',
        "gc",
        'trace = ["garbage_collection"]\ntracer = "t"',
    ),
    "register_beside_exits": ("", "ring", '[[groups]]\nname = "s"\nworkload = "seq_chain"'),
    "replace_seq_tracer": (
        '[seq_trace]\ntracer = "t"\n[[faults]]\naction = "replace_seq_tracer"\nat = 0.05',
        "seq_chain",
        "",
    ),
    "replace_monitor": (
        '[[groups]]\nname = "s"\nworkload = "seq_chain"\n[system_monitor]\nmonitor = "t"\n'
        'long_gc = 1\n[[faults]]\naction = "replace_monitor"\nat = 0.05',
        "gc",
        "",
    ),
}


def _scenario_world(text: str):
    """A world factory for a run scenario's text, cut to one operation,
    instance, size and firing."""
    from smp.app.explore.workload import Bounds, ScenarioWorkload
    from smp.app.scenario import parse_scenario

    wl = ScenarioWorkload(parse_scenario(text), Bounds(operations=1, count=1, size=1, firings=1))
    return world_factory(wl.setup, wl.schedulers, 200)


def _part_world(part: str):
    tail, workload, group = _PARTS[part]
    return _scenario_world(
        f'name = "{part}"\nschedulers = 2\n[duration]\noperations = 1\n'
        f'[[tracers]]\nname = "t"\n[[groups]]\nname = "g"\nworkload = "{workload}"\n'
        f"{group}\n{tail}\n"
    )


@pytest.mark.parametrize("part", sorted(_PARTS))
def test_every_class_random_schedules_meet_is_explored_in_the_parts_of_churn_and_stress(part):
    """``churn`` and ``stress`` whole do not end, but their parts do: each
    workload and fault of theirs alone, at one operation (the churn
    workload; a tracer killed under a ring and under collections; the seq
    tracer and the monitor replaced, the latter beside a seq_trace chain; a
    ring registering its name while a chain's processes exit)."""
    nw = _part_world(part)
    explored = _explored_classes(nw)
    met = _met_classes(nw, 500)
    assert len(met) > 1 and met <= explored, len(met - explored)


@pytest.mark.parametrize("part", sorted(_PARTS))
def test_adjacent_independent_events_commute_in_the_parts_of_churn_and_stress(part):
    """The same swaps on 100 random schedules of each part: a quiet arrival
    that changes what its scheduler's next batch waits for, without saying
    so, fails here."""
    nw = _part_world(part)
    rng, swapped = random.Random(11), 0
    for _ in range(100):
        w = nw()
        while en := w.enabled():
            w.step(rng.choice(en))
        schedule = [e.thread for e in w.trace]
        w.dispose()
        swapped += _swaps_commute(nw, schedule)
    assert swapped > 0


def _project_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.add(node.module or "")
        elif isinstance(node, ast.ImportFrom):
            out.add("." * node.level + (node.module or ""))
    return out


@pytest.mark.parametrize("race", CATALOGUE, ids=lambda r: r.name)
def test_a_remembered_outcome_is_the_one_built_afresh(race):
    """``outcome_of``'s memo returns, for every execution, the outcome the
    world gives when it is built again from nothing."""
    memo: dict = {}
    n = 0
    for _s, w in all_executions(world_factory(race.setup, race.schedulers, 200), limit=150):
        assert outcome_of(w, (), True, memo) == outcome_of(w, (), True)
        n += 1
        w.dispose()
    assert n > len(memo) >= 1  # (some executions found theirs in it)


def _finished(race):
    w = world_factory(race.setup, race.schedulers, 200)()
    while en := w.enabled():
        w.step(en[0])
    return w


def _fate(w):
    mid = sorted(w.fates)[0]
    old = w.fates[mid]
    w.fates[mid] = ("delivered", old[-1]) if old[0] == "dropped" else ("dropped", "flags", old[-1])


def _name(w):
    pid = next(iter(w.names))
    w.names[pid] = "Renamed"


def _server(w):
    pid = next(p.pid for p in w.all_procs() if p.pid in w.servers)
    w.servers = set(w.servers) - {pid}  # (a process left waiting is blocked)


def _arrivals(w):
    mids = next(m for m in w.arrivals.values() if len(m) > 1)
    mids.reverse()


def _kept(w):
    next(p for p in w.all_procs() if p.kept is not None).kept.append([Atom("extra")])


def _body(w):
    mid = sorted(w.msgs)[0]
    info = w.msgs[mid]
    w.msgs[mid] = info[:3] + ([Atom("other")],) + info[4:]


def _queue(w):
    w.queue.append(None)


@pytest.mark.parametrize("change", [_fate, _name, _server, _arrivals, _kept, _body, _queue])
def test_the_memo_sees_every_part_of_a_world_an_outcome_is_built_from(change):
    """A world changed in one respect after an outcome was remembered for
    it gets the outcome it has now, not the remembered one."""
    w = _finished(by_name("running_pairs_at_one_tracer"))
    memo: dict = {}
    before = outcome_of(w, (), False, memo)
    change(w)
    after = outcome_of(w, (), False)
    assert after != before
    assert outcome_of(w, (), False, memo) == after
    w.dispose()


def test_the_memo_tells_a_list_from_a_tuple_and_an_improper_list_and_1_from_1_0():
    from smp.core.terms import ImproperList
    from smp.sim.outcome import _frozen

    a = Atom("a")
    forms = [[a, a], (a, a), ImproperList([a], a), [(a, a)], [[a], a], ([a], a), (a, 1), (a, 1.0)]
    forms += [(a, True), [1], [1.0]]
    assert len({_frozen(t) for t in forms}) == len(forms)
    assert _frozen([a, (a, [a])]) == _frozen([a, (a, [a])])


def test_the_simulator_pulls_in_no_socket_or_process_library():
    """Every module smp.sim reaches (smp.sim, then the project modules it
    imports, transitively) imports neither zmq nor multiprocess nor psutil."""
    forbidden = {"zmq", "multiprocess", "multiprocessing", "psutil", "socket", "subprocess"}
    todo = [ROOT / "smp" / "sim" / p.name for p in sorted((ROOT / "smp" / "sim").glob("*.py"))]
    seen: set[Path] = set()
    bad = []
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for mod in _project_imports(path):
            if mod.startswith("."):
                base = path.parent
                for _ in range(len(mod) - len(mod.lstrip(".")) - 1):
                    base = base.parent
                rest = mod.lstrip(".")
                target = base.joinpath(*rest.split(".")) if rest else base / "__init__"
            elif mod.split(".")[0] in ("smp", "schedulers", "dispatcher"):
                target = ROOT.joinpath(*mod.split("."))
            else:
                if mod.split(".")[0] in forbidden:
                    bad.append(f"{path.relative_to(ROOT)} imports {mod}")
                continue
            for cand in (target.with_suffix(".py"), target / "__init__.py"):
                if (
                    cand.exists()
                    and cand.name != "__init__.py"
                    or (cand.name == "__init__.py" and cand.exists() and cand.parent.name != "smp")
                ):
                    todo.append(cand)
    assert any(p.name == "engine.py" for p in seen) and any(p.name == "table.py" for p in seen)
    assert bad == []


async def _sender(proc, to):
    await proc.send(to, Atom("x"))


def test_the_setup_facade_refuses_what_the_emulator_refuses():
    def bad_place(vm):
        vm.spawn(_sender, None, scheduler=3)

    with pytest.raises(Exception, match=r"scheduler must be in 1\.\.2, not 3"):
        explore(bad_place, schedulers=2)

    def not_async(vm):
        vm.spawn(print)

    with pytest.raises(Exception, match="must be an async def function"):
        explore(not_async, schedulers=2)


def test_smp_explore_takes_a_setup_function_and_a_race_of_the_catalogue():
    """``smp.explore(setup, schedulers=N)``, as the docs show it: the
    simulator explores the function's workload; a race's name explores that
    race; a schedule replays one execution; options of the simulator given
    with an explore scenario are refused by name."""
    import smp

    r = smp.explore(KILLED.setup, schedulers=KILLED.schedulers)
    assert (r.executions, len(r.outcomes)) == (KILLED.executions, KILLED.outcomes)
    assert smp.sim.format_report(r).startswith(f"Explored {KILLED.executions} execution(s)")
    assert json.loads(json.dumps(r.as_dict()))["executions"] == KILLED.executions
    by_name = smp.explore(KILLED.name)
    assert by_name.executions == KILLED.executions
    burst = smp.explore("tracer_killed_before_a_burst")  # (its own check runs)
    assert burst.violations and len(burst.violations) < len(burst.outcomes)
    first = r.outcomes[0].first
    again = smp.explore(KILLED.setup, schedule=first.schedule)
    assert again.schedule == first.schedule and again.outcome == first.outcome
    with pytest.raises(TypeError, match="max_executions is for a setup function"):
        smp.explore("seq", max_executions=3)


def _killed_in(name: str, group: str) -> str:
    """A run scenario of one group ``g0`` (its kind and keys: ``group``)
    traced to ``t``, one of whose processes a fault kills."""
    return f"""\
name = "{name}"
schedulers = 2
[duration]
operations = 1
[[tracers]]
name = "t"
[[groups]]
name = "g0"
{group}
[[faults]]
action = "kill_processes"
target = "g0"
count = 1
at = 0.05
reason = "kill"
may_fail = true
"""


#: a ping-pong pair traced for procs, one of its processes killed by a fault
_KILLED_PAIR = _killed_in(
    "killed_pair", 'workload = "ping_pong"\ntrace = ["procs", "timestamp"]\ntracer = "t"'
)


def test_both_reductions_meet_every_class_where_a_process_is_killed():
    """A slice of ping run before the kill's exit signal arrives reads the
    replica of pong's liveness; the slice run after it does not (ping
    exits).  The exiting slice stands for the one the signal cut short
    (``World._cut_short``), so both reductions explore every class random
    schedules meet, the same classes.  Before it did, optimal DPOR missed
    classes here.

    Optimal DPOR runs one execution per class, none blocked.  It planned
    pong's slice as it ran after the exit signal (exiting, with the larger
    footprint) where the race's reversal runs it before (not exiting); the
    sequence went in beside pong's explored branch rather than below it,
    and following it blocked 9 of 342 executions, until the race's last
    event was run again where the reversal puts it (``dpor._Replanned``)."""
    nw = _scenario_world(_KILLED_PAIR)
    met = _met_classes(nw, 300)
    source = _explored_classes(nw)
    assert met <= source
    counts: dict = {}
    assert _explored_classes(nw, optimal=True, counts=counts) == source
    assert counts["executions"] == len(source) and counts["blocked"] == 0
    assert counts["replanned_other"] > 0


def test_a_replanned_event_is_run_once_per_path(monkeypatch):
    """The replanned events are kept by their path's threads: the search
    is the same without the memo, with fewer events run again."""
    nw = _scenario_world(_KILLED_PAIR)
    kept: dict = {}
    explored = _explored_classes(nw, optimal=True, counts=kept)
    monkeypatch.setattr(dpor, "REPLAN_MEMO", 1)  # (keeps only the last one)
    each: dict = {}
    assert _explored_classes(nw, optimal=True, counts=each) == explored
    assert (kept["executions"], kept["blocked"]) == (each["executions"], each["blocked"])
    assert kept["replanned"] < each["replanned"], (kept, each)


#: the churn workload (a tracer replaced after each burst of one) beside a
#: fault that kills one of its processes
_CHURN_KILLED = _killed_in(
    "churn_killed", 'workload = "churn"\n[groups.params]\nburst = 1\nflags = []'
)


def test_optimal_dpor_meets_every_class_on_churn_beside_a_kill():
    """Churn's BIFs take the signals and batches there when they run, and
    its ingests number their publications after the one before: a race's
    last event does another thing when the reversal runs it first.  Planned
    as it ran, the wakeup trees lost classes here: random schedules met 9
    (of 470) the 14,765 executions of optimal DPOR never did, where
    Source-DPOR met them all.  Planned as it runs there (``_Replanned``),
    optimal DPOR meets every one."""
    nw = _scenario_world(_CHURN_KILLED)
    counts: dict = {}
    explored = _explored_classes(nw, optimal=True, counts=counts)
    met = _met_classes(nw, 400)
    assert len(met) > 100 and met <= explored, len(met - explored)
    assert counts["replanned_other"] > 0


#: a ping-pong pair traced for sends and procs beside collections, one of
#: the pair killed (a fault that replaced the seq tracer too, in a lane of
#: its own, made the search last over a quarter of an hour)
_KILLED_PAIR_BESIDE_GC = (
    FUZZ_HEAD
    + """\
[[groups]]
name = "g0"
workload = "ping_pong"
trace = ["send", "procs", "timestamp"]
tracer = "t2"
[[groups]]
name = "g1"
workload = "gc"
trace = ["garbage_collection"]
tracer = "t1"
[seq_trace]
tracer = "sq"
[[faults]]
action = "kill_processes"
target = "g0"
count = 1
at = 0.05
reason = "kill"
may_fail = true
"""
)


def test_a_slice_that_ends_a_killed_process_stands_for_the_slice_it_cut_short():
    """Where a process is killed, Source-DPOR explores every class random
    schedules meet.  Here it missed 5 of them while the exiting slice had
    its own footprint alone: the kill's race with the slice was reversed
    into a slice that reads pong's replica entry, whose order against the
    publication of pong's death no explored execution had."""
    nw = _scenario_world(_KILLED_PAIR_BESIDE_GC)
    assert _met_classes(nw, 300) <= _explored_classes(nw)


async def _holds(proc, c, _options):
    kept = (Atom("result"), [c])
    await proc.receive()
    await proc.send(kept[1][0], Atom("done"))


async def _kills(proc, victim):
    await proc.exit(victim, Atom("kill"))


def test_the_exiting_slice_touches_the_collectors_its_process_could_send_to():
    """The slice a kill cut short could have sent to a collector the process
    holds a pid of (in its arguments or variables) or that is registered,
    never to one it cannot name; it reads the whole replica of its
    scheduler.  A collector reached that way commutes with the exiting
    slice no more than with the slice it stands for."""

    def setup(vm):
        held = vm.spawn_collector(scheduler=1, name="held")
        vm.spawn_collector(scheduler=1, name="unknown")
        named = vm.spawn_collector(scheduler=1, name="named")
        vm.register("named", named)
        v = vm.spawn(_holds, held, {"k": 1}, scheduler=1, name="V")
        vm.spawn(_kills, v, scheduler=2, name="K")

    w = world_factory(setup, 2, 200)()
    names = {name: pid for pid, name in w.names.items()}
    exiting = None
    while en := w.enabled():
        e = w.step(en[0])
        if e.thread == "S1" and e.label.endswith("(exited)"):
            exiting = e
    w.dispose()
    assert exiting is not None
    touched = {o[1] for o in exiting.writes if o[0] == "proc"}
    assert touched == {names["held"], names["named"], names["V"]}
    assert ("replica", 1) in exiting.reads and ("tail", 1, 2) in exiting.writes


async def _sink(proc):
    while True:
        await proc.receive()


async def _register_killed(proc, victim):
    await proc.exit(victim, Atom("kill"))
    try:
        got = await proc.register(Atom("nm"), victim)
    except smp.Error:
        got = Atom("badarg")
    await proc.send(proc.pid, got)


def test_register_of_a_process_sent_kill_is_badarg_in_every_order():
    """17.x's exit/2 marks its target before it returns, and register/2 of
    another process finds no exiting one (erts_pid2proc): badarg, nothing
    traced.  The simulator registered the victim when the controller served
    register/2 before the victim's exiting slice, or before the exit signal
    reached the victim's scheduler (4 of 5 outcomes)."""

    def setup(vm):
        t = vm.spawn_collector(name="t")
        v = vm.spawn(_sink, name="v", scheduler=2)
        k = vm.spawn(_register_killed, v, name="k", scheduler=1)
        vm.trace(v, True, ["procs"], tracer=t)
        vm.trace(k, True, ["send"], tracer=t)

    r = explore(setup, schedulers=2)
    got = {m for o in r.outcomes for _t, ms in o.outcome.received for m in ms}
    assert r.executions > 1 and not any("register" in m for m in got), got
    assert "{trace,k,send,badarg,k}" in got and "{trace,v,exit,killed}" in got


async def _pinger(proc, to):
    await proc.send(to, Atom("ping"))


def test_a_setup_that_does_not_do_the_same_on_every_run_is_refused():
    """Every execution runs the setup again: one that spawned a random number
    of senders explored other workloads as one, silently (1 or 3
    executions, where 3 senders have 9)."""
    runs = []

    def setup(vm):
        runs.append(1)
        sink = vm.spawn_collector(name="sink")
        for _ in range(2 if len(runs) == 1 else 1):
            vm.spawn(_pinger, sink)

    with pytest.raises(
        SimError, match=r"did not do the same as on its first run \(other processes\)"
    ):
        explore(setup, schedulers=2)


def test_a_setup_that_raises_passes_its_error_on_and_leaves_no_body_behind():
    import gc
    import warnings

    def setup(vm):
        vm.spawn_collector(name="t")
        vm.spawn(_pinger, Atom("nobody"))
        raise ValueError("the user's own")

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="the user's own"):
            explore(setup, schedulers=2)
        gc.collect()
    assert not [w for w in got if "never awaited" in str(w.message)], got


async def _port_closer(proc, linker):
    port = await proc.open_port("echo")
    await proc.send(linker, port)
    await proc.receive()
    await proc.port_close(port)


async def _port_linker(proc, sink):
    await proc.process_flag(Atom("trap_exit"), True)
    port = await proc.receive()
    await proc.link(port)
    await proc.send(sink, await proc.receive())


def _port_link_setup(vm):
    sink = vm.spawn_collector(scheduler=2, name="C")
    linker = vm.spawn(_port_linker, sink, scheduler=2, name="L")
    closer = vm.spawn(_port_closer, linker, scheduler=1, name="O")
    vm.spawn(_sender, closer, scheduler=2, name="K")  # (O closes the port then)


def test_a_link_to_a_port_of_another_scheduler_races_with_its_close():
    """The link travels to the port's scheduler and the caller waits: the
    port is open when it arrives (linked, then the close's exit signal
    comes back: {'EXIT', Port, normal}) or closed already (noproc).  The
    search meets both, every class random schedules meet, and each
    outcome's schedule does the same on real processes."""
    from smp.app.explore.proof import prove

    r = explore(_port_link_setup, schedulers=2)
    assert not r.violations and r.nonsmp.violations == ()
    got = {dict(g.first.outcome.received)["C"] for g in r.outcomes}
    reasons = {text.rsplit(",", 1)[1].rstrip("}") for (text,) in got}
    assert reasons == {"normal", "noproc"}, got
    nw = world_factory(_port_link_setup, 2, 200)
    assert _met_classes(nw, 200) <= _explored_classes(nw, optimal=True)
    for g in r.outcomes:
        p = prove(_port_link_setup, g.first.schedule, schedulers=2)
        assert p.same, p.mismatches


#: two tracers, each killed by a fault: two lanes of the plan (beside a
#: workload nobody traces, to keep the search small)
_TWO_LANES = """\
name = "two_lanes"
schedulers = 2
[duration]
operations = 1
[[tracers]]
name = "t1"
[[tracers]]
name = "t2"
[[groups]]
name = "a"
workload = "gc"
[[faults]]
action = "kill_tracer"
target = "t1"
at = 0.01
[[faults]]
action = "kill_tracer"
target = "t2"
at = 0.02
"""


def test_the_faults_of_two_lanes_are_explored_in_both_orders():
    """``run`` and ``stress`` carry out the faults of each tracer or group in
    a controller of its own (a lane); the simulator does too, so the search
    meets the second fault done before the first as well as after it (one
    controller did them in the plan's order only)."""
    from smp.app.explore.workload import Bounds, ScenarioWorkload
    from smp.app.scenario import parse_scenario

    wl = ScenarioWorkload(parse_scenario(_TWO_LANES), Bounds(operations=1, count=1, size=1))
    r = explore(wl.setup, schedulers=wl.schedulers)
    assert r.exhausted and not r.violations
    orders = set()
    for g in r.outcomes:
        log = dict(g.first.outcome.received)["fault log"]
        orders.add(tuple(int(text.split(",")[1]) for text in log))
    assert orders == {(0, 1), (1, 0)}, orders
