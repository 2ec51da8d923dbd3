"""smp-emu explore: every interleaving of the dispatcher's queue with the
state changes, each schedule run on a real smp emulator stepped message by
message, and the step mode itself."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from click.testing import CliRunner
from helpers import check_counts

import smp
from smp import Atom as A
from smp.app.cli import cli
from smp.app.explore import (
    canonical_classes,
    canonicalize,
    change_footprint,
    count_classes,
    dependent,
    explore_example_names,
    load_explore_scenario,
    message_footprint,
    parse_schedule,
)

pytestmark = pytest.mark.timeout(120)

SEQ_MSGS = [f"{{seq_trace,7,{{send,{{0,{i + 1}}},chain,sink,{{explore,{i}}}}}}}" for i in range(3)]


@pytest.fixture(scope="module")
def seq():
    return smp.explore("seq")


@pytest.fixture(scope="module")
def monitor():
    return smp.explore("monitor")


# ---------------------------------------------------------------- step mode
async def chain_sender(proc, to, n):
    await proc.seq_trace("label", 7)
    await proc.seq_trace("send", True)
    for i in range(n):
        await proc.send(to, (A("hop"), i))


def test_step_dispatcher_message_by_message_then_by_run():
    with smp.Emulator(mode="smp", schedulers=1) as vm:
        old, new, sink = vm.spawn_collector(), vm.spawn_collector(), vm.spawn_collector()
        vm.set_system_seq_tracer(old)
        with pytest.raises(smp.SmpError, match="held dispatcher"):
            vm.step_dispatcher()
        vm.hold_dispatcher()
        p = vm.spawn(chain_sender, sink, 4)
        vm.run()
        assert len(vm.queued_messages()) == 4  # one run of 4 in the queue
        got = vm.step_dispatcher()  # the run is split
        assert [(f, to, o) for f, to, _m, o in got] == [(None, old, "delivered")]
        assert got[0][2] == (A("seq_trace"), 7, (A("send"), (0, 1), p, sink, (A("hop"), 0)))
        assert vm.messages(old) == [got[0][2]]  # delivered before it returns
        vm.set_system_seq_tracer(new)
        assert [to for _f, to, _m in vm.queued_messages()] == [new, new, new]
        assert len(vm.step_dispatcher(1, unit="run")) == 3  # the rest of the run at once
        assert vm.step_dispatcher(5) == []  # nothing left: still held
        assert check_counts(vm).queued == 0
        vm.release_dispatcher()
        vm.run()
        assert [m[2][1] for m in vm.messages(new)] == [(0, 2), (0, 3), (0, 4)]
        with pytest.raises(smp.BadArg):
            vm.step_dispatcher(0)


def test_stepped_run_replays_from_its_journal(tmp_path):
    from smp.app.replay import replay

    path = str(tmp_path / "step.journal")
    with smp.Emulator(mode="smp", schedulers=2, journal=path) as vm:
        old, new, sink = vm.spawn_collector(), vm.spawn_collector(), vm.spawn_collector()
        vm.set_system_seq_tracer(old)
        vm.hold_dispatcher()
        vm.spawn(chain_sender, sink, 4)
        vm.run()
        assert [o for *_x, o in vm.step_dispatcher()] == ["delivered"]
        vm.set_system_seq_tracer(new)
        assert [o for *_x, o in vm.step_dispatcher(2)] == ["delivered"] * 2
        vm.exit(new, A("kill"))
        vm.run()
        assert [o for *_x, o in vm.step_dispatcher()] == ["no_receiver"]  # reset on exit
        vm.release_dispatcher()
        vm.run()
        stats = check_counts(vm)
    r = replay(path)  # one run of 4, decided as 1 + 2 + 1
    assert r.ok, (r.divergences, r.violations)
    assert r.runs == 3
    assert r.totals["delivered_by_type"] == stats.delivered_by_type == {"SEQTRACE": 3}


def test_step_dispatcher_needs_smp():
    with smp.Emulator(mode="nonsmp") as vm:
        with pytest.raises(smp.SmpError, match="needs smp mode"):
            vm.step_dispatcher()


# ---------------------------------------------------------------- the examples
def test_seq_tracer_replaced_with_three_queued_gives_four_outcomes(seq):
    assert (seq.possible, seq.classes, seq.run, len(seq.outcomes)) == (4, 4, 4, 4)
    assert seq.exhaustive
    by_k = {o["positions"][0]: o for o in seq.outcomes}
    assert sorted(by_k) == [0, 1, 2, 3]
    for k, o in by_k.items():
        assert o["schedule"] == f"replace@{k}"
        assert o["fates"] == ["old"] * k + ["new"] * (3 - k)
        assert o["received"].get("old", []) == SEQ_MSGS[:k]
        assert o["received"].get("new", []) == SEQ_MSGS[k:]
        assert o["state"]["seq_tracer"] == "new"
        assert o["results"] == ["old"]  # set_system_seq_tracer returned old
    # nonsmp: one outcome, every message at the old tracer
    assert seq.nonsmp["same_as"] == by_k[3]["index"]
    assert seq.nonsmp["received"] == {"old": SEQ_MSGS}
    for k in (0, 1, 2):
        why = by_k[k]["why_not_nonsmp"]
        assert why[0]["types"] == ["SEQTRACE"]
        assert why[0]["messages"] == [f"m{i}" for i in range(k + 1, 4)]
    text = seq.text()
    assert "4 possible, 4 classes, 4 run (exhaustive); 4 outcome(s)" in text
    assert "#ifndef ERTS_SMP" in text and "erl_trace.c:1241-1242" in text


def test_monitor_replaced_with_its_own_event_queued(monitor):
    fates = {tuple(o["fates"]) for o in monitor.outcomes}
    # replaced first: the new monitor's own event is dropped (from == receiver)
    assert ("drop:sender_is_receiver", "m2") in fates
    # replaced after it: the old monitor receives it
    assert ("m1", "m2") in fates and ("m1", "m1") in fates
    assert len(monitor.outcomes) == 3 == monitor.run
    dropped = next(o for o in monitor.outcomes if o["fates"][0] == "drop:sender_is_receiver")
    assert dropped["schedule"] == "replace@0"
    assert [m.split(",")[1] for m in dropped["received"]["m2"]] == ["other"]
    assert "m1" not in dropped["received"]
    same = [o for o in monitor.outcomes if o["nonsmp"]]
    assert [o["fates"] for o in same] == [["m1", "m1"]]
    assert dropped["why_not_nonsmp"][0]["types"] == ["SYSMON"]


def test_every_outcome_replays_to_the_same_result(seq, monitor):
    for res, name in ((seq, "seq"), (monitor, "monitor")):
        for o in res.outcomes:
            again = smp.explore(name, schedule=o["schedule"], nonsmp=False)
            assert again.run == 1 and again.single
            assert again.outcomes[0]["key"] == o["key"], o["schedule"]


def test_pruning_runs_one_schedule_per_class():
    r = smp.explore("commute")
    assert (r.possible, r.classes, r.run, len(r.outcomes)) == (4, 1, 1, 1)
    assert r.deps == [set()]
    assert r.outcomes[0]["fates"] == ["t", "t", "t"] and r.outcomes[0]["nonsmp"]
    # without pruning every schedule runs, and they all end alike
    full = smp.explore("commute", prune=False, nonsmp=False)
    assert (full.run, len(full.outcomes)) == (4, 1)
    assert full.outcomes[0]["key"] == r.outcomes[0]["key"]
    assert sorted(full.outcomes[0]["schedules"]) == [f"replace@{k}" for k in range(4)]


def test_races_example_kill_seq_and_monitor():
    r = smp.explore("races")
    assert (r.possible, r.classes, r.run, len(r.outcomes)) == (56, 10, 10, 10)
    assert [sorted(d) for d in r.deps] == [[3, 4], [1, 2], [5]]
    first, last = r.outcomes[0], r.outcomes[-1]
    assert first["schedule"] == "kill@0 seq@0 mon@0"
    assert first["fates"] == [
        "new",
        "new",
        "drop:receiver_dead",
        "drop:receiver_dead",
        "drop:sender_is_receiver",
    ]
    assert last["schedule"] == "kill@4 seq@4 mon@5" and last["nonsmp"]
    assert last["fates"] == ["old", "old", "t", "t", "m1"]
    assert sum(1 for o in r.outcomes if o["nonsmp"]) == 1
    assert {t for o in r.outcomes for w in o["why_not_nonsmp"] for t in w["types"]} == {
        "TRACE",
        "SEQTRACE",
        "SYSMON",
    }


def test_beyond_the_bound_a_seeded_sample():
    r = smp.explore("seq", max_messages=2, samples=2, seed=11, nonsmp=False)
    assert not r.exhaustive and r.seed == 11
    assert r.classes == 4 and r.run == 2 and r.coverage == 0.5
    assert [o["schedule"] for o in r.outcomes] == ["replace@0", "replace@3"]
    text = r.text()
    assert "a random sample, seed 11, coverage 50.0 %" in text
    assert "which met all" not in text


def test_a_sample_that_meets_every_class_says_so():
    r = smp.explore("seq", max_messages=2, samples=40, seed=11, nonsmp=False)
    assert not r.exhaustive and r.classes == 4 and r.run == 4 and r.coverage == 1.0
    text = r.text()
    assert "4 run (every class, met by a random sample, seed 11)" in text
    assert "a random sample of classes, seed 11, which met all 4 classes" in text
    assert "coverage" not in text


# ---------------------------------------------------------------- command line
def test_cli_explore_table_json_and_report(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["explore", "commute"])
    assert res.exit_code == 0, res.output
    assert "schedules: 4 possible, 1 classes, 1 run (exhaustive); 1 outcome(s)" in res.output
    assert "smp-emu explore commute --schedule 'replace@0'" in res.output
    res = runner.invoke(cli, ["explore", "monitor", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["kind"] == "explore" and d["schedules"]["run"] == 3
    assert d["nonsmp"]["same_as"] == 3
    path = tmp_path / "explore.json"
    path.write_text(res.output)
    out = tmp_path / "explore.html"
    res = runner.invoke(cli, ["report", str(path), "-o", str(out)])
    assert res.exit_code == 0, res.output
    html = out.read_text()
    assert "id='explore-tree'" in html and "drop:sender_is_receiver" in html
    assert "#1 replace@0" in html and "<script" not in html
    res = runner.invoke(cli, ["explore", "monitor", "--schedule", "replace@1"])
    assert res.exit_code == 0, res.output
    assert "schedule replace@1: run 1" in res.output


def test_cli_explore_refuses_bad_input(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["explore", "no-such"])
    assert res.exit_code == 2 and "no such explore scenario" in res.output
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[[processes]]\nname = "a"\n[[queue]]\nname = "q"\ndo = "dance"\n'
        '[[changes]]\naction = "kill"\ntarget = "a"\n'
    )
    res = runner.invoke(cli, ["explore", str(bad)])
    assert res.exit_code == 2 and f"{bad}:5: queue[0].do: must be one of" in res.output
    bad.write_text(
        '[[processes]]\nname = "a"\n[[queue]]\nname = "q"\ndo = "send"\nto = "a"\n'
        "count = 1\ncolour = 2\n"
    )
    res = runner.invoke(cli, ["explore", str(bad)])
    assert res.exit_code == 2 and f"{bad}:8: queue[0].colour: unknown key" in res.output
    res = runner.invoke(cli, ["explore", "seq", "--schedule", "replace@9"])
    assert res.exit_code == 2 and "only 3 messages are queued" in res.output
    # a queue process is spawned after the names it refers to: it sent to
    # no one (badarg in its body, exit 0) and traced itself (a bare pid)
    head = '[[processes]]\nname = "t"\n[[queue]]\nname = "p"\ndo = "send"\ncount = 2\n'
    bad.write_text(head + 'to = "p"\ntrace = ["send"]\ntracer = "t"\n')
    res = runner.invoke(cli, ["explore", str(bad)])
    assert res.exit_code == 2 and f"{bad}:7: queue[0].to: must name another" in res.output
    bad.write_text(head + 'to = "t"\ntrace = ["send"]\ntracer = "p"\n')
    res = runner.invoke(cli, ["explore", str(bad)])
    assert res.exit_code == 2 and "queue[0].tracer: 'p' cannot be its own tracer" in res.output


# ---------------------------------------------------------------- the pure parts
def test_examples_load():
    assert {"seq", "monitor", "commute", "races"} <= set(explore_example_names())
    for name in explore_example_names():
        sc = load_explore_scenario(name)
        assert sc["queue"] and sc["changes"]


def test_schedule_text():
    changes = [{"name": "kill"}, {"name": "seq"}]
    assert parse_schedule("kill@1 seq@3", changes) == (1, 3)
    assert parse_schedule("seq@3,kill@0", changes) == (0, 3)
    for bad, msg in (
        ("kill@1", "every change once"),
        ("kill@3 seq@1", "cannot decrease"),
        ("kill@x seq@1", "is not change@k"),
        ("kill@1 kill@2", "twice"),
    ):
        with pytest.raises(smp.BadArg, match=msg):
            parse_schedule(bad, changes)


def test_commutation():
    roles = {
        "seq": {"old", "new"},
        "mon": {"m1", "m2"},
        "prof": {"p"},
        "reg": set(),
        "tracers": {"t"},
    }
    seq_change = change_footprint({"action": "seq_tracer", "tracer": "new"}, roles)
    clear_prof = change_footprint({"action": "system_profile", "profiler": "undefined"}, roles)
    kill_t = change_footprint({"action": "kill", "target": "t"}, roles)
    kill_old = change_footprint({"action": "kill", "target": "old"}, roles)
    trace = message_footprint("TRACE", "t", roles)
    seqm = message_footprint("SEQTRACE", None, roles)
    sysmon = message_footprint("SYSMON", None, roles)
    assert not dependent(seq_change, trace)  # a TRACE message does not read the seq tracer
    assert not dependent(clear_prof, sysmon)  # a SYSMON message does not read the profiler
    assert dependent(seq_change, seqm) and dependent(
        clear_prof, message_footprint("SYSPROF", None, roles)
    )
    assert dependent(kill_t, trace) and not dependent(kill_t, seqm)
    assert dependent(kill_old, seqm)  # the seq tracer's death resets it


def test_classes_match_brute_force():
    rng = random.Random(3)
    for _ in range(60):
        n, k = rng.randint(0, 6), rng.randint(1, 3)
        deps = [{i for i in range(1, n + 1) if rng.random() < 0.4} for _ in range(k)]
        # two schedules are equivalent when every change has the same
        # dependent messages before it
        sig = {}
        for p in itertools.combinations_with_replacement(range(n + 1), k):
            s = tuple(sum(1 for i in d if i <= x) for d, x in zip(deps, p, strict=False))
            sig.setdefault(s, []).append(p)
        classes = list(canonical_classes(deps))
        assert len(classes) == len(set(classes)) == len(sig) == count_classes(deps)
        for members in sig.values():
            reps = {canonicalize(p, deps) for p in members}
            assert len(reps) == 1 and reps.pop() == min(members, key=lambda p: (sum(p), p))
            assert canonicalize(members[0], deps) in classes


def test_smp_explore_takes_a_run_scenario_as_the_command_does():
    """A run example by name is cut to the command's bounds and explored in
    the simulator (it said "no such explore scenario"); the same outcomes
    as ``smp-emu explore churn`` with the same bound."""
    r = smp.explore("churn", max_executions=6, nonsmp=False)
    assert r.executions == 6 and r.cut_by == ["executions"]
    res = CliRunner().invoke(
        cli, ["explore", "churn", "--max-executions", "6", "--jobs", "1", "--no-nonsmp", "--json"]
    )
    d = json.loads(res.stdout)["result"]
    assert [o["schedule"] for o in d["outcomes"]] == [g.first.schedule for g in r.outcomes]
    one = smp.explore("churn", schedule=r.outcomes[0].first.schedule)
    assert one.outcome == r.outcomes[0].outcome  # (an Execution: one schedule)


@pytest.mark.parametrize(
    "bad, error",
    [
        ({"max_executions": -1}, "max_executions must be an int >= 1"),
        # (the command line's --max-executions 0 is no bound; from Python, None)
        ({"max_executions": 0}, r"max_executions must be an int >= 1 or None \(no bound\)"),
        ({"time_budget": -1}, "time_budget must be a number of seconds > 0"),
        ({"time_budget": 0}, "time_budget must be a number of seconds > 0"),
        ({"time_budget": float("nan")}, "time_budget must be a number of seconds > 0"),
        ({"schedulers": 0}, "schedulers must be an int >= 1"),
    ],
)
def test_smp_explore_refuses_bad_bounds(bad, error):
    with pytest.raises(smp.SmpError, match=error):
        smp.explore(lambda vm: None, **bad)


@pytest.mark.parametrize(
    "bad", [{"operations": -1}, {"count": 0}, {"size": True}, {"firings": 1001}, {"size": 2.0}]
)
def test_workload_bounds_are_refused_from_python_as_the_command_refuses_them(bad):
    """``Bounds(operations=-1)`` explored a workload of no iteration (2 fates
    where there are 8); the command line takes 1 to 1000 of each."""
    from smp.app.explore.workload import Bounds

    name = next(iter(bad))
    with pytest.raises(smp.sim.SimError, match=f"Bounds: {name} must be an int from 1 to 1000"):
        smp.explore("churn", bounds=Bounds(**bad), max_executions=1)


def test_an_unknown_name_is_refused_with_every_kind_of_name_explore_takes():
    """It listed the explore examples alone, where ``smp.explore`` also takes
    run examples and races."""
    with pytest.raises(smp.ScenarioError) as e:
        smp.explore("chrun")
    text = str(e.value)
    assert text.startswith("chrun: no such explore scenario, run scenario or race")
    assert "a run example: churn" in text and "tracer_replaced_on_down" in text
    r = CliRunner().invoke(cli, ["explore", "chrun"])
    assert r.exit_code == 2 and r.output.strip() == f"smp-emu: {text}"


@pytest.mark.parametrize("name", ["chrun", "/nonexistent/dir/nope.toml"])
def test_an_unknown_name_with_an_option_is_refused_as_unknown(name):
    """With ``max_executions=`` beside it, a name nothing has was refused as
    an explore scenario given an option it does not take."""
    with pytest.raises(smp.ScenarioError, match="no such explore scenario, run scenario or race"):
        smp.explore(name, max_executions=5)
    with pytest.raises(TypeError, match="race of the catalogue or a run scenario, not an explore"):
        smp.explore("seq", max_executions=5)  # (an explore scenario: the option is not its)


@pytest.mark.parametrize(
    "checks, error",
    [
        ("abc", "checks must be a list of functions of an outcome, not 'abc'"),
        (None, "checks must be a list of functions of an outcome, not None"),
        (5, "checks must be a list of functions of an outcome, not int"),
        (len, r"not one function \(give \[len\]\)"),
        ([1], r"checks\[0\] must be a function of an outcome, not 1"),
    ],
)
def test_checks_that_are_not_a_list_of_functions_are_refused(checks, error):
    """A string was taken letter by letter and a number kept, each check
    then "failing" in every outcome; a bare function or None gave a Python
    unpacking error that did not say ``checks``."""
    race = "tracer_killed_with_messages_queued"
    with pytest.raises(smp.sim.SimError, match=error):
        smp.explore(race, checks=checks, max_executions=1)
    with pytest.raises(smp.sim.SimError, match=error):
        smp.explore(lambda vm: None, checks=checks)
    with pytest.raises(smp.sim.SimError, match=error):
        smp.sim.replay(lambda vm: None, "", checks=checks)
    assert smp.explore(race, checks=(lambda _oc: True,), nonsmp=False).outcomes


def test_smp_explore_refuses_what_is_no_scenario():
    with pytest.raises(TypeError, match="give a setup function, .* not int"):
        smp.explore(42)


def test_an_interrupted_exhaustive_run_is_not_said_to_be_exhaustive():
    """Ctrl-C after two schedules of an exhaustive run: the result says it
    was interrupted, with its coverage, not "exhaustive" (it said both)."""
    from smp.app.explore.text import format_text

    def stop_at_the_third(i, _total, _schedule):
        if i == 3:
            raise KeyboardInterrupt

    r = smp.explore("races", nonsmp=False, progress=stop_at_the_third)
    d = r.to_json()
    s = d["schedules"]
    assert s["interrupted"] and not s["exhaustive"] and s["seed"] is None
    assert s["run"] == 3 and 0 < s["coverage"] < 1  # (the first and two more)
    line = next(ln for ln in format_text(d).splitlines() if ln.startswith("schedules:"))
    assert "(interrupted, coverage" in line and "exhaustive" not in line


def test_a_seed_an_exhaustive_explore_scenario_does_not_use_is_said():
    """``explore seq --seed 4``: every class is run, so nothing is drawn with
    the seed; it was taken silently, now a note says so (and a sample that
    draws with it says nothing of the kind)."""
    r = CliRunner().invoke(cli, ["explore", "seq", "--seed", "4", "--json"])
    assert r.exit_code == 0, r.output
    assert any(n.startswith("seed 4 not used") for n in json.loads(r.stdout)["notes"])
    r = CliRunner().invoke(
        cli, ["explore", "races", "--seed", "4", "--max-messages", "1", "--json"]
    )
    assert r.exit_code in (0, 1), r.output
    drawn = json.loads(r.stdout)
    assert drawn["schedules"]["exhaustive"] is False and drawn["schedules"]["seed"] == 4
    assert not any("not used" in n for n in drawn["notes"])
