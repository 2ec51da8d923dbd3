"""``smp-emu explore`` on run/stress scenarios: the simulator behind the
command line (bounded exhaustive search, replay of a schedule, random and
PCT runs with their seed, the work shared among processes, the explored
tree as DOT, and what it refuses)."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys

import psutil
import pytest
from click.testing import CliRunner

from smp.app.cli import cli
from smp.app.exitcodes import EXIT_FAILED, EXIT_USAGE
from smp.app.explore.simulate import SimOptions, is_run_scenario, simulate
from smp.app.explore.workload import Bounds
from smp.app.scenario import example_path
from smp.sim.catalogue import by_name
from smp.sim.explorer import explore_split
from smp.sim.report import race_lines

KEEP = [  # every option a replay of the same workload needs
    "--operations",
    "1",
    "--no-nonsmp",
]


def _explore(*args, ok=(0,)) -> dict:
    r = CliRunner().invoke(cli, ["explore", *args, "--json"])
    assert r.exit_code in ok, r.output
    return json.loads(r.stdout)


def _report_page(tmp_path, name: str, result: str) -> str:
    """The page ``smp-emu report`` draws from a result's JSON text."""
    (tmp_path / f"{name}.json").write_text(result)
    out = tmp_path / f"{name}.html"
    r = CliRunner().invoke(cli, ["report", str(tmp_path / f"{name}.json"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out.read_text()


def _fates(outcome: dict) -> list:
    return outcome["fates"]


@pytest.fixture(scope="module")
def churn():
    return _explore("churn", "--max-executions", "12", "--jobs", "1", *KEEP)


def test_a_run_example_is_explored_under_the_bound_with_race_pairs(churn):
    assert churn["kind"] == "explore-sim" and churn["scenario"] == "churn"
    r = churn["result"]
    assert r["method"] == "dpor" and r["executions"] == 12
    assert not r["exhausted"] and r["cut_by"] == ["executions"]
    assert r["estimate"] > 12  # the total, estimated
    assert len(r["outcomes"]) >= 2
    assert any(o["races"] for o in r["outcomes"])  # a race made the explorer try it
    assert sum(o["count"] for o in r["outcomes"]) == 12
    # processes by the scenario's roles and pid; the bounds that cut the scenario
    events = "\n".join(e for o in r["outcomes"] for e in o["events"])
    assert "pp[0].ping<0." in events and "churn[0].churner<0." in events
    assert "duration.operations 40 -> 1" in churn["notes"]
    assert "groups pp: count 3 -> 1" in churn["notes"]
    for o in r["outcomes"]:
        assert o["replay"] == (
            "smp-emu explore churn --operations 1 --schedule '" + o["schedule"] + "'"
        )


def test_the_text_says_the_bound_cut_the_search_and_how_to_replay():
    r = CliRunner().invoke(
        cli, ["explore", "churn", "--max-executions", "3", "--jobs", "1", "--operations", "1"]
    )
    assert r.exit_code == 0, r.output
    assert "The search was cut by executions; about" in r.output
    assert "Replay: smp-emu explore churn --operations 1 --schedule '" in r.output
    assert "nonsmp: " in r.output and "nonsmp (one order" in r.output


def test_a_schedule_replays_with_the_same_fates(churn):
    for o in churn["result"]["outcomes"][:3]:
        again = _explore("churn", "--schedule", o["schedule"], *KEEP)["replay"]
        assert again["schedule"] == o["schedule"]
        assert _fates(again["outcome"]) == _fates(o["outcome"])
        assert again["outcome"]["received"] == o["outcome"]["received"]


def test_a_replay_gives_each_race_reason_in_full_once(churn):
    o = max(churn["result"]["outcomes"], key=lambda o: len(o["schedule"]))
    r = CliRunner().invoke(cli, ["explore", "churn", "--schedule", o["schedule"], *KEEP])
    assert r.exit_code == 0, r.output
    text = r.output.split("Race pairs in this execution")[1].split("  Schedule: ")[0]
    reasons = [x.strip() for x in text.splitlines() if x.startswith("      ")]
    full = [x for x in reasons if not x.endswith("(as above)")]
    assert reasons and len(full) == len(set(full))  # none given in full twice
    short = [x for x in reasons if x.endswith("(as above)")]
    assert short  # this schedule orders several pairs by one rule
    assert all(any(f.startswith(x[: -len(" (as above)")] + ": ") for f in full) for x in short)


def test_a_time_budget_alone_is_the_only_bound():
    """--time-budget without --max-executions lifts the default execution
    bound (a budget of a minute stopped at 500 executions, and the tip said
    to raise the time budget); the tip names the bound that cut."""
    d = _explore("churn", "--time-budget", "0.3", "--jobs", "1", *KEEP)
    assert d["limits"] == {"max_executions": None, "time_budget": 0.3}
    assert d["result"]["cut_by"] in (["time"], [])
    d = _explore("churn", "--max-executions", "2", "--jobs", "1", *KEEP)
    assert d["limits"] == {"max_executions": 2, "time_budget": None}
    # (no bound given: the default)
    assert _explore("churn", "--jobs", "1", "--operations", "1")["limits"]["max_executions"] == 500
    r = CliRunner().invoke(cli, ["explore", "churn", "--max-executions", "2", "--jobs", "1", *KEEP])
    assert "Tip: raise the execution bound (--max-executions, 0 for none; " in r.output
    assert "or use fewer processes or schedulers." in r.output
    # a race of the catalogue is a fixed workload: no fewer processes to use
    race = ["explore", "tracer_replaced_on_down", "--max-executions", "2", "--no-events"]
    r = CliRunner().invoke(cli, race)
    assert "max_executions=None)." in r.output and "fewer processes" not in r.output


def test_no_events_leaves_the_events_out_of_a_replay():
    args = ["explore", "churn", "--schedule", "S1", *KEEP]
    assert "  Events:" in CliRunner().invoke(cli, args).output
    assert "  Events:" not in CliRunner().invoke(cli, [*args, "--no-events"]).output


@pytest.mark.parametrize(
    "schedule, says",
    [
        ("D", "step 1: 'D' cannot step now"),
        ("S1 S7", "step 2: 'S7' names scheduler 7, of 2"),  # (it said "cannot step now")
        ("S1 A1>3", "step 2: 'A1>3' names scheduler 3, of 2"),
        ("S0", "step 1: 'S0' names scheduler 0, of 2"),
        ("S" + "9" * 5000, "names scheduler 99999999999999999999..., of 2"),  # (no int)
        ("S1 X", "step 2: 'X' is not a thread"),
    ],
)
def test_a_schedule_that_cannot_run_is_a_usage_error(schedule, says):
    r = CliRunner().invoke(cli, ["explore", "churn", "--schedule", schedule, *KEEP])
    assert r.exit_code == EXIT_USAGE
    assert says in r.output, r.output


def test_a_search_option_given_to_an_explore_scenario_names_what_takes_it():
    """A search option is for run scenarios and the catalogue's races (it
    named run scenarios alone); a workload bound for run scenarios only."""
    r = CliRunner().invoke(cli, ["explore", "seq", "--max-executions", "2"])
    assert r.exit_code == EXIT_USAGE
    assert "--max-executions is for run scenarios ([[groups]]) and races of the catalogue" in (
        r.output
    )
    r = CliRunner().invoke(cli, ["explore", "seq", "--operations", "2"])
    assert "--operations is for run scenarios ([[groups]]), not for" in r.output
    # (a race proves, shrinks and lists events as a run scenario does)
    for opt in (["--prove"], ["--shrink", "1"], ["--no-events"]):
        r = CliRunner().invoke(cli, ["explore", "seq", *opt])
        assert r.exit_code == EXIT_USAGE
        assert "is for run scenarios ([[groups]]) and races of the catalogue" in r.output, opt


def test_a_sample_does_not_say_its_race_pairs_made_the_explorer_try_it():
    d = CliRunner().invoke(cli, ["explore", "churn", "--random", "3", "--seed", "1", *KEEP])
    assert "Race pairs in it (the orders this sample fixed):" in d.output
    assert "made the explorer try it" not in d.output


@pytest.mark.parametrize("method", ["--random", "--pct"])
def test_random_and_pct_runs_are_reproducible_from_their_seed(method):
    args = ["churn", method, "6", "--seed", "11", *KEEP]
    a, b = _explore(*args), _explore(*args)
    ra, rb = a["result"], b["result"]
    assert ra["seed"] == 11 and ra["executions"] == 6
    assert ra["method"] == method[2:]
    key = [(o["schedule"], o["count"]) for o in ra["outcomes"]]
    assert key == [(o["schedule"], o["count"]) for o in rb["outcomes"]]
    other = _explore("churn", method, "6", "--seed", "12", *KEEP)["result"]
    assert [o["schedule"] for o in other["outcomes"]] != [o["schedule"] for o in ra["outcomes"]]
    if method == "--pct":
        assert "probability at least 1/(n·k^2)" in ra["notes"][0]
        assert "seed 11" in ra["notes"][0]


def test_an_unseeded_run_prints_its_seed():
    r = CliRunner().invoke(cli, ["explore", "churn", "--random", "2", *KEEP])
    assert r.exit_code == 0, r.output
    assert "2 random schedule(s), seed " in r.output


def test_two_jobs_give_what_one_gives(monkeypatch):
    """Optimal DPOR with workers explores the one tree's executions, in its
    order: the same counts, outcomes, first executions and schedules, and
    none sleep-set blocked."""
    from smp.sim import share

    args = ("churn", "--operations", "1", "--max-executions", "200", "--no-nonsmp")
    cli1 = _explore(*args, "--jobs", "1")["result"]
    cli2 = _explore(*args, "--jobs", "2")["result"]
    assert not psutil.Process().children(recursive=True)  # its workers are gone
    assert cli1["executions"] == cli2["executions"] == 200 and cli2["tasks"] > 1
    assert cli1["blocked"] == cli2["blocked"] == 0
    assert cli1["outcomes"] == cli2["outcomes"]
    # (the estimate of the whole too: a task's branch is estimated as one
    # tree estimates it, not by its leaves alone)
    assert cli1["estimate"] == cli2["estimate"]
    # on a catalogue workload, exhaustively, branches handed out at once
    race = by_name("profiler_active_count")
    monkeypatch.setattr(share, "MIN_TASK", 1)  # (a small search: tasks all the same)
    one = explore_split(race.setup, race.schedulers, nonsmp=False)
    with pytest.importorskip("multiprocess").Pool(2) as pool:
        two = explore_split(
            race.setup,
            race.schedulers,
            nonsmp=False,
            submit=lambda f, a: pool.apply_async(f, (a,)),
            probe=0,
        )
    assert two.tasks > 1 and one.exhausted and two.exhausted
    assert one.executions == two.executions == race.executions and two.blocked == 0
    assert [(g.count, g.first.index, g.first.schedule, g.outcome) for g in one.outcomes] == [
        (g.count, g.first.index, g.first.schedule, g.outcome) for g in two.outcomes
    ]


@pytest.mark.parametrize("method", ["--random", "--pct"])
def test_two_jobs_run_the_chunks_of_a_sample_with_one_jobs_result(method):
    """Random and PCT runs past one chunk, shared among two workers: the
    result of one job (its counts, outcomes, first executions and notes),
    and no worker left behind."""
    args = ("churn", method, "230", "--seed", "4", *KEEP)
    one = _explore(*args, "--jobs", "1")["result"]
    two = _explore(*args, "--jobs", "2")["result"]
    assert not psutil.Process().children(recursive=True)
    for r in (one, two):
        del r["elapsed"]
    assert one["executions"] == 230 and len(one["outcomes"]) > 1
    assert one == two


def test_a_sample_is_reported_as_a_sample(tmp_path):
    """A random sample's JSON gives its runs as its limit (not the search's
    500 executions) and its page says it is a sample of so many runs, not
    a search a bound cut with an estimate of 0; a race of the catalogue has
    no workload bounds to print."""
    d = _explore("churn", "--random", "7", "--seed", "2", *KEEP)
    assert d["limits"] == {"runs": 7, "time_budget": None}
    page = _report_page(tmp_path, "sample", json.dumps(d))
    assert "a sample of 7 runs: it does not say how many orders there are" in page
    assert "estimated total" not in page and "cut by" not in page
    race = _explore("tracer_killed_before_a_burst", "--random", "5", "--seed", "1", ok=(0, 1))
    assert race["bounds"] == {} and race["limits"] == {"runs": 5, "time_budget": None}
    assert "Bounds: none." in _report_page(tmp_path, "race", json.dumps(race))
    assert _explore("churn", "--max-executions", "3", *KEEP)["limits"]["max_executions"] == 3


def test_a_small_search_runs_as_one_tree():
    """The probe of a split (Source-DPOR) search: a search one tree finishes
    soon (or estimates small) is not split; split at once, the same search
    finds the same classes."""
    from smp.app.explore.workload import Bounds, ScenarioWorkload
    from smp.app.scenario import load_scenario

    wl = ScenarioWorkload(load_scenario("default"), Bounds(), None)
    probed = explore_split(wl.setup, wl.schedulers, nonsmp=False, dpor="source")
    at_once = explore_split(wl.setup, wl.schedulers, nonsmp=False, probe=0, dpor="source")
    assert probed.exhausted and at_once.exhausted
    assert probed.tasks == 1 and at_once.tasks > 1
    assert probed.executions == at_once.executions
    assert {g.outcome for g in probed.outcomes} == {g.outcome for g in at_once.outcomes}
    # a race of the catalogue estimated at a few thousand goes on as one tree
    race = by_name("tracer_replaced_on_down")
    r = explore_split(race.setup, race.schedulers, nonsmp=False, dpor="source")
    assert r.tasks == 1 and r.executions == race.executions


def test_a_search_the_probe_estimated_too_small_is_split_after_all(monkeypatch):
    """The one tree goes on to ``ONE_TREE`` executions at most: a search
    whose estimate was far too small (12 after 4 executions, for 785) is
    then split, and gives what a search split at once gives."""
    from smp.sim import explorer

    race = by_name("tracer_replaced_on_down")
    monkeypatch.setattr(explorer, "ONE_TREE", 100)
    late = explore_split(race.setup, race.schedulers, nonsmp=False, probe=4, dpor="source")
    at_once = explore_split(race.setup, race.schedulers, nonsmp=False, probe=0, dpor="source")
    assert late.exhausted and late.tasks > 1
    assert (late.executions, late.blocked) == (at_once.executions, at_once.blocked)
    assert late.executions == race.executions


@pytest.mark.parametrize("scenario, operations", [("seqtrace", 1), ("churn", 2)])
def test_a_subtree_given_more_executions_goes_on_as_if_run_again(scenario, operations):
    """A bounded split search hands what finished subtrees left to the cut
    ones; one explored in the same process goes on where it stopped, and
    the result is the one a search run again from each subtree's start
    gives (the same executions, outcomes, counts and first schedules)."""
    from smp.app.explore.workload import Bounds, ScenarioWorkload
    from smp.app.scenario import load_scenario
    from smp.sim import explorer

    wl = ScenarioWorkload(load_scenario(scenario), Bounds(operations=operations), None)
    resumed: list = []
    cut: set = set()

    def again(f, args):  # each subtree from its start: nothing kept between rounds
        for a in args:
            resumed.append(a[6] in cut)  # it would have gone on
            r = f(a)
            if a[6] in explorer._CUT:
                cut.add(a[6])
            explorer._CUT.clear()
            yield r

    def key(r):
        groups = [(g.count, g.first.index, g.first.schedule) for g in r.outcomes]
        return r.executions, r.blocked, r.exhausted, r.cut_by, groups

    # (split at once: a search one tree would end is not split)
    kept = explore_split(
        wl.setup, wl.schedulers, max_executions=300, nonsmp=False, probe=0, dpor="source"
    )
    fresh = explore_split(
        wl.setup,
        wl.schedulers,
        max_executions=300,
        nonsmp=False,
        mapper=again,
        probe=0,
        dpor="source",
    )
    assert any(resumed)  # subtrees ran more than once: the check means something
    assert key(kept) == key(fresh) and kept.executions == 300
    assert not explorer._CUT  # nothing kept past the search


def test_the_explored_tree_is_written_as_dot(tmp_path):
    path = tmp_path / "tree.dot"
    r = CliRunner().invoke(
        cli, ["explore", "churn", "--max-executions", "4", "--jobs", "1", "--graph", str(path)]
    )
    assert r.exit_code == 0, r.output
    dot = path.read_text()
    assert dot.startswith('digraph "explore churn" {') and dot.rstrip().endswith("}")
    assert dot.count('label="outcome ') == 4  # a leaf per complete execution
    assert '[label="S1", tooltip="scheduler 1 runs ' in dot
    # how the search ended is in the file, and its page says it (a cut
    # search's page read as a whole one); a file without it says it cannot tell
    assert '  comment="cut by executions, about ' in dot
    out = tmp_path / "tree.html"
    r = CliRunner().invoke(cli, ["report", str(path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert "The search: cut by executions, about " in page
    old = tmp_path / "old.dot"
    old.write_text("\n".join(x for x in dot.splitlines() if "comment=" not in x) + "\n")
    r = CliRunner().invoke(cli, ["report", str(old), "-o", str(out)])
    assert r.exit_code == 0 and "does not say whether the search was complete" in out.read_text()
    late = tmp_path / "late.dot"
    lines = dot.splitlines()
    late.write_text("\n".join([lines[0], *lines[2:-1], lines[1], lines[-1]]) + "\n")
    r = CliRunner().invoke(cli, ["report", str(late), "-o", str(out)])
    assert r.exit_code == 2 and "a second comment, or one after the tree's edges" in r.output
    whole = tmp_path / "whole.dot"
    r = CliRunner().invoke(cli, ["explore", "seq_tracer_replaced", "--graph", str(whole)])
    assert r.exit_code == 0, r.output
    assert '  comment="complete: every equivalence class was explored";' in whole.read_text()


def test_a_port_tracer_is_a_sink_the_dispatcher_writes_to(tmp_path):
    """A file tracer is explored as a sink of what the dispatcher writes to
    it (no file is written), named by the scenario, the same in nonsmp, and
    the same on real processes (a memory port there, read back)."""
    sc = tmp_path / "ports.toml"
    sc.write_text(
        '[[tracers]]\nname = "f"\nkind = "file"\npath = "x.trace"\n'
        '[[groups]]\nname = "pp"\nworkload = "ping_pong"\ntrace = ["send"]\ntracer = "f"\n'
    )
    assert is_run_scenario(str(sc))
    r = CliRunner().invoke(cli, ["explore", str(sc), "--jobs", "1", "--prove"])
    assert r.exit_code == 0, r.output
    assert "  f received: {trace,pp[0].ping,send,{ping,pp[0].ping,0,[]},pp[0].pong}" in r.output
    assert ": delivered f" in r.output and "nonsmp: the same" in r.output
    assert "1 tracer port(s) alike" in r.output
    assert not (tmp_path / "x.trace").exists()


@pytest.mark.parametrize("name", ["everything", "profile"])
def test_the_examples_with_tracer_ports_are_explored_and_proved(name):
    """everything (a file and a memory port) and profile (a memory port as
    profiler, replaced by another on a fault) were refused."""
    r = CliRunner().invoke(
        cli, ["explore", name, "--jobs", "1", "--max-executions", "3", "--no-events", "--prove"]
    )
    assert r.exit_code == 0, r.output
    assert "tracer port(s) alike" in r.output and "differ" not in r.output


def test_explore_scenarios_still_run_on_the_emulator_and_options_stay_apart():
    assert not is_run_scenario("seq") and is_run_scenario("churn")
    r = CliRunner().invoke(cli, ["explore", "seq", "--pct", "3"])
    assert r.exit_code == EXIT_USAGE and "--pct is for run scenarios" in r.output
    r = CliRunner().invoke(cli, ["explore", "churn", "--max-changes", "3"])
    assert r.exit_code == EXIT_USAGE and "--max-changes is for explore scenarios" in r.output


def test_faults_are_steps_of_the_controller_process():
    text, data = simulate(
        "churn",
        SimOptions(bounds=Bounds(operations=1), max_executions=2, nonsmp=False, jobs=1),
    )
    events = "\n".join(e for o in data["result"]["outcomes"] for e in o["events"])
    assert "controller<0." in events  # the fault controller runs as a process
    received = dict(data["result"]["outcomes"][0]["outcome"]["received"])
    assert received["fault log"][0].startswith("{'$smp_fault',0,0,0,")


def test_the_report_of_a_simulated_explore_shows_each_outcome(tmp_path):
    """``smp-emu report`` of ``explore RUN-SCENARIO --json``: every outcome
    with its fates, race pairs, nonsmp verdict and the command that replays it."""
    r = CliRunner().invoke(cli, ["explore", "churn", "--max-executions", "12", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["kind"] == "explore-sim"
    page = _report_page(tmp_path, "sim", r.output)
    out = tmp_path / "sim.html"
    outcomes = data["result"]["outcomes"]
    assert page.count("<h3 id='outcome-") == len(outcomes) > 1
    for n, o in enumerate(outcomes, 1):  # numbered as the text report numbers them
        assert f"Outcome #{n}: {o['count']} execution(s), the first execution {o['index']}" in page
        assert html.escape(o["replay"]) in page
        for _msg, fate in o["outcome"]["fates"]:
            assert html.escape(fate) in page
    races = [x for o in outcomes for x in o["races"]]
    # each pair's head and every reason (one given in full above by its rule)
    assert races and all(html.escape(x.split("\n")[0]) in page for x in races)
    for o in outcomes:
        assert html.escape("\n".join(x[4:] for x in race_lines(o["races"]))) in page
    assert "cut by executions" in page
    assert "<p>optimal DPOR, 2 schedulers" in page  # the reduction the search used
    # the executions as the terminal counts them: blocked ones are apart
    assert "2 schedulers: 12 executions, " in page
    data["result"]["blocked"] = 4
    (tmp_path / "blocked.json").write_text(json.dumps(data))
    r = CliRunner().invoke(cli, ["report", str(tmp_path / "blocked.json"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "12 executions (besides 4 sleep-set blocked, not counted), " in out.read_text()
    assert not any(o["outcome"]["violations"] for o in outcomes)
    assert "Expect clauses" not in page and "Broken invariants:" not in page


def test_the_report_says_which_outcomes_break_an_expect_clause(tmp_path):
    """The same report for a scenario whose expect clause breaks (tracer t,
    killed, cannot receive every send of pp): the clause, the outcomes that
    break it and nonsmp's verdict, and each outcome's broken invariant;
    the churn report above, with no clause, shows none of this."""
    with open(example_path("churn"), encoding="utf-8") as f:
        text = f.read()
    scenario = tmp_path / "c.toml"
    scenario.write_text(
        text + '\n[[expect]]\nkind = "receives_every"\ntracer = "t"\ngroup = "pp"\n'
    )
    r = CliRunner().invoke(cli, ["explore", str(scenario), "--max-executions", "12", "--json"])
    assert r.exit_code == EXIT_FAILED, r.output  # (a broken clause: exit 1, the result printed)
    data = json.loads(r.stdout)
    page = _report_page(tmp_path, "c", r.output)
    (clause,) = data["expect"]
    broken = [o for o in data["result"]["outcomes"] if o["outcome"]["violations"]]
    outcomes = data["result"]["outcomes"]
    assert broken and [outcomes.index(o) + 1 for o in broken] == clause["broken_in"]
    listed = ", ".join(f"#{n}" for n in clause["broken_in"])
    assert f"broken in outcome(s) {listed} of {clause['outcomes']}" in page
    assert "Expect clauses" in page and html.escape(clause["clause"]) in page
    assert f"of {clause['outcomes']}" in page and "nonsmp breaks it" in page
    assert page.count("Broken invariants:") == len(broken)
    for o in broken:
        assert all(html.escape(v) in page for v in o["outcome"]["violations"])


def test_a_short_schedule_is_completed_and_says_so_and_a_bad_step_is_named():
    r = CliRunner().invoke(cli, ["explore", "seq_tracer_replaced", "--schedule", "S1", "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)["replay"]
    assert rep["given_steps"] == 1 and rep["completed_steps"] == len(rep["schedule"].split()) - 1
    text = CliRunner().invoke(cli, ["explore", "seq_tracer_replaced", "--schedule", "S1"]).output
    assert f"the first enabled thread took each of the {rep['completed_steps']} after" in text
    whole = CliRunner().invoke(
        cli, ["explore", "seq_tracer_replaced", "--schedule", rep["schedule"]]
    )
    assert "the first enabled thread" not in whole.output
    bad = CliRunner().invoke(cli, ["explore", "seq_tracer_replaced", "--schedule", "S1 x!"])
    assert bad.exit_code == EXIT_USAGE
    assert "schedule step 2: 'x!' is not a thread (enabled: " in bad.output
    wrong = CliRunner().invoke(cli, ["explore", "seq", "--random", "3"])
    assert wrong.exit_code == EXIT_USAGE and "--random is for run scenarios" in wrong.output


def test_explore_exits_1_when_an_outcome_breaks_an_invariant_and_0_when_none_does():
    """As every command: a race whose outcomes break its check exits 1, the
    report printed; one whose outcomes keep every invariant exits 0; a
    replayed schedule whose outcome breaks one exits 1 too."""
    bad = CliRunner().invoke(cli, ["explore", "tracer_killed_before_a_burst", "--json"])
    assert bad.exit_code == EXIT_FAILED, bad.output
    outcomes = json.loads(bad.output)["result"]["outcomes"]
    broken = [o for o in outcomes if o["outcome"]["violations"]]
    assert broken and len(broken) < len(outcomes)
    good = CliRunner().invoke(cli, ["explore", "seq_tracer_replaced"])
    assert good.exit_code == 0, good.output
    one = CliRunner().invoke(
        cli, ["explore", "tracer_killed_before_a_burst", "--schedule", broken[0]["schedule"]]
    )
    assert one.exit_code == EXIT_FAILED, one.output
    kept = [o for o in outcomes if not o["outcome"]["violations"]][0]
    ok = CliRunner().invoke(
        cli, ["explore", "tracer_killed_before_a_burst", "--schedule", kept["schedule"]]
    )
    assert ok.exit_code == 0, ok.output


def test_a_preemption_bound_is_an_option_and_the_output_says_it_cut():
    r = CliRunner().invoke(
        cli,
        ["explore", "churn", "--operations", "1", "--preemptions", "0", "--json", "--jobs", "1"],
    )
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)["result"]
    assert "preemptions" in res["cut_by"]
    # the probe's one tree stopped by its 32 executions, branches cut by the
    # bound beside: not the search's end, which runs its 100
    r = CliRunner().invoke(
        cli,
        ["explore", "churn", "--preemptions", "1", "--max-executions", "100", "--json"]
        + ["--jobs", "1", "--no-nonsmp"],
    )
    bounded = json.loads(r.stdout)["result"]
    assert bounded["executions"] == 100 and bounded["cut_by"] == ["executions", "preemptions"]
    r = CliRunner().invoke(cli, ["explore", "seq", "--preemptions", "1"])
    assert r.exit_code == EXIT_USAGE and "--preemptions is for run scenarios" in r.output
    r = CliRunner().invoke(cli, ["explore", "churn", "--preemptions", "1", "--random", "3"])
    assert r.exit_code == EXIT_USAGE and "not --random or --pct" in r.output
    assert res["dpor"] == "source"  # a bounded search is source DPOR's


def test_the_reduction_is_chosen_and_refused_with_what_it_cannot_take():
    r = CliRunner().invoke(cli, ["explore", "seq_tracer_replaced", "--json", "--jobs", "1"])
    assert r.exit_code == 0, r.output
    opt = json.loads(r.stdout)["result"]  # (the default)
    r = CliRunner().invoke(
        cli, ["explore", "seq_tracer_replaced", "--json", "--jobs", "1", "--dpor", "source"]
    )
    src = json.loads(r.stdout)["result"]
    assert (opt["dpor"], src["dpor"]) == ("optimal", "source")
    assert opt["executions"] == src["executions"] and opt["exhausted"] and src["exhausted"]
    for extra, says in (
        (["--preemptions", "1"], "--preemptions bounds source DPOR only"),
        (["--random", "3"], "--dpor chooses the exhaustive search"),
    ):
        r = CliRunner().invoke(cli, ["explore", "churn", "--dpor", "optimal", *extra])
        assert r.exit_code == EXIT_USAGE and says in r.output
        assert len(r.output.strip().splitlines()) == 1
    r = CliRunner().invoke(cli, ["explore", "seq", "--dpor", "source"])
    assert r.exit_code == EXIT_USAGE and "--dpor is for run scenarios" in r.output


def test_a_race_of_the_catalogue_runs_by_name_and_replays():
    """``smp-emu explore RACE``: the paragraph, the exhaustive counts the
    catalogue states, and each outcome's replay command runs that outcome."""
    from smp.sim.catalogue import by_name

    race = by_name("seq_tracer_replaced")
    r = CliRunner().invoke(cli, ["explore", race.name, "--json", "--jobs", "1"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    res = data["result"]
    assert data["source"] == "catalogue" and res["exhausted"]
    assert res["executions"] == race.executions and len(res["outcomes"]) == race.outcomes
    o = res["outcomes"][-1]
    assert o["replay"].startswith(f"smp-emu explore {race.name} --schedule ")
    schedule = o["replay"].split("--schedule ", 1)[1].strip("'")
    again = CliRunner().invoke(cli, ["explore", race.name, "--schedule", schedule, "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["replay"]["outcome"] == o["outcome"]
    text = CliRunner().invoke(cli, ["explore", race.name, "--jobs", "1"]).output
    assert text.startswith(f"Race {race.name} (smp.sim.catalogue) in the simulator")
    r = CliRunner().invoke(cli, ["explore", race.name, "--operations", "3"])
    assert r.exit_code == EXIT_USAGE and "fixed workload" in r.output
    r = CliRunner().invoke(cli, ["explore", race.name, "--schedulers", "3"])
    assert r.exit_code == EXIT_USAGE and "written for 2 schedulers" in r.output
    r = CliRunner().invoke(cli, ["explore", "no-such"])
    assert r.exit_code == EXIT_USAGE and "a race: " in r.output and race.name in r.output


def test_a_race_is_explored_in_full_by_default_a_run_scenario_is_bounded():
    """No ``--max-executions``: a catalogue race larger than the run
    scenarios' default bound still runs to its end (its stated counts); a
    run scenario stops at the bound and says so."""
    from smp.app.explore.simulate import DEFAULT_MAX_EXECUTIONS
    from smp.sim.catalogue import by_name

    race = by_name("tracer_replaced_on_down")
    assert race.executions > DEFAULT_MAX_EXECUTIONS
    r = CliRunner().invoke(cli, ["explore", race.name, "--json", "--jobs", "1"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)["result"]
    assert res["exhausted"] and res["cut_by"] == []
    assert res["executions"] == race.executions and len(res["outcomes"]) == race.outcomes
    r = CliRunner().invoke(cli, ["explore", "churn", "--json", "--jobs", "1", "--no-events"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)["result"]
    assert res["executions"] == DEFAULT_MAX_EXECUTIONS and res["cut_by"] == ["executions"]


def _recorder():
    told: list = []
    return told, lambda *a: told.append(a)


def test_a_search_tells_its_progress_as_it_goes(monkeypatch):
    """``progress(executions, blocked, estimate)``: every execution of one
    tree when the interval is 0; split, as the subtrees run and end; shared,
    as each task is taken; the counts never go back and end at the
    result's."""
    from later import Later

    from smp.app.explore.workload import Bounds, ScenarioWorkload
    from smp.app.scenario import load_scenario
    from smp.sim import explorer, share

    monkeypatch.setattr(explorer, "PROGRESS_EVERY", 0.0)
    monkeypatch.setattr(share, "MIN_TASK", 1)  # (a small search: tasks all the same)
    wl = ScenarioWorkload(load_scenario("default"), Bounds(), None)
    ways = [("one tree", {}), ("split", {"dpor": "source"}), ("shared", {"submit": Later})]
    for way, kw in ways:
        told, tell = _recorder()
        r = explore_split(wl.setup, wl.schedulers, nonsmp=False, probe=0, progress=tell, **kw)
        ns = [n for n, _b, _e in told]
        assert ns == sorted(ns) and ns[-1] == r.executions, (way, ns)
        assert all(e >= n for n, _b, e in told)
        assert told[-1][1] == r.blocked
        if way == "one tree":  # each execution told once
            assert ns == list(range(1, r.executions + 1))
        else:  # (subtrees, or branches taken from tasks)
            assert r.tasks > 1


def test_the_progress_line_is_on_a_terminal_only_and_cleared(tmp_path):
    """On a terminal ``explore`` keeps one line on stderr up to date (the
    executions run and the estimate) and clears it before the report; not
    on a pipe."""
    import os
    import pty
    import select
    import subprocess
    import sys

    args = [sys.executable, "-c", "from smp.app.cli import main; main()"]
    args += ["explore", "default", "--jobs", "1", "--no-nonsmp"]
    m, s = pty.openpty()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=s, close_fds=True)
    os.close(s)
    seen = b""
    try:
        while select.select([m], [], [], 60)[0]:
            try:
                chunk = os.read(m, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(m)
        assert p.wait(timeout=60) == 0
    text = seen.decode()
    assert "\r\x1b[K1 execution(s), about " in text and text.endswith("\r\x1b[K"), text[-300:]
    piped = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0 and "in all" not in piped.stderr


def test_a_cut_search_does_not_depend_on_the_string_hashing_of_its_process(readme_swap):
    """The README's swap explored under the same bound by two processes
    whose string hashing differs: the same executions, events and outcomes
    (a footprint is a set, in the order of that hashing; the plan is made in
    thread order).  With the order of the set, 11,745 events against 11,753
    and outcomes of 10/60/100 executions against 24/57/89."""
    got = []
    for seed in ("0", "3"):
        r = subprocess.run(
            [sys.executable, "-c", "from smp.app.cli import cli; cli()", "explore"]
            + [str(readme_swap), "--max-executions", "200", "--jobs", "1", "--json"]
            + ["--no-events", "--no-nonsmp"],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == EXIT_FAILED, r.stderr  # (the swap breaks its expect)
        d = json.loads(r.stdout)["result"]
        got.append(
            (d["executions"], d["events"], d["blocked"])
            + tuple((o["count"], o["schedule"]) for o in d["outcomes"])
        )
    assert got[0] == got[1]


def test_the_report_of_one_schedule_shows_its_execution(tmp_path):
    """``explore ... --schedule '...' --json`` has no search result, only the
    replay: report draws that execution (it said the file was no result)."""
    race = by_name("tracer_killed_before_a_burst")
    schedule = "S1 S1 S1 I1 I1 D D D"
    r = CliRunner().invoke(cli, ["explore", race.name, "--schedule", schedule, "--json"])
    assert r.exit_code == EXIT_FAILED  # (this schedule breaks the race's check)
    data = json.loads(r.stdout)
    page = _report_page(tmp_path, "one", r.stdout)
    x = data["replay"]
    assert html.escape(x["schedule"]) in page and "Broken invariants" in page
    for _msg, fate in x["outcome"]["fates"]:
        assert html.escape(fate) in page
    assert all(html.escape(e) in page for e in x["events"])


@pytest.mark.parametrize("jobs", ["1", "2", "random"])
def test_ctrl_c_stops_the_search_and_prints_what_it_found(jobs):
    """Ctrl-C during a search (its progress line on a terminal shows it under
    way) ends it at the next execution, in every worker: the outcomes found
    so far are printed, marked interrupted, and the command exits 130 with no
    process left.  It printed nothing and lost thousands of executions.
    ``random``: random runs, their chunks in two workers."""
    import pty
    import select
    import signal

    from helpers import own_group, until

    master, slave = pty.openpty()
    cmd = [sys.executable, "-c", "from smp.app.entry import main; main()", "explore", "churn"]
    if jobs == "random":
        cmd += ["--random", "1000000", "--no-events", "--jobs", "2", "--json"]
    else:
        cmd += ["--max-executions", "0", "--no-events", "--jobs", jobs, "--json"]
    seen = [""]

    def progress_shown() -> bool:  # the progress line: the search began
        if select.select([master], [], [], 0)[0]:
            seen[0] += os.read(master, 4096).decode(errors="replace")
        return "execution(s)" in seen[0]

    kids: list = []

    def run_a_while() -> bool:  # in this process (one job) or in its workers
        me = psutil.Process(p.pid)
        kids[:] = me.children(recursive=True)  # (workers start with the split)
        procs = kids if jobs != "1" else [me]
        return sum(x.cpu_times().user for x in procs if x.is_running()) >= 2.0

    try:
        with own_group(cmd, stdout=subprocess.PIPE, stderr=slave, text=True) as p:
            os.close(slave)
            until(progress_shown, p, 100)
            until(run_a_while, p, 100)
            os.killpg(p.pid, signal.SIGINT)
            out, _ = p.communicate(timeout=60)
    finally:
        os.close(master)
    assert p.returncode == 130, out[-2000:]
    d = json.loads(out)
    assert d["interrupted"] and "interrupted" in d["result"]["cut_by"]
    assert d["result"]["executions"] > 0 and d["result"]["outcomes"]
    assert not d["result"]["exhausted"]
    if jobs != "1":  # (workers ran: run_a_while counted their time)
        assert kids
    gone = psutil.wait_procs(kids, timeout=10)[1]
    assert gone == [], gone


@pytest.mark.parametrize("dpor", ["optimal", "source", "random"])
def test_a_worker_killed_under_way_leaves_its_branch_to_the_search(dpor):
    """A worker killed from outside while it explores a branch (optimal
    DPOR's shared search), a subtree (Source-DPOR's split) or a chunk of
    random runs: its pool starts another and the task never ends.  The
    search gives it up, explores that part itself, says so, and ends with
    what one job finds; it waited for ever."""
    import signal

    from helpers import own_group, until

    if dpor == "random":
        args = ["churn", "--operations", "1", "--random", "1500", "--seed", "5", "--no-nonsmp"]
    else:
        args = ["churn", "--operations", "2", "--max-executions", "3000", "--no-nonsmp"]
        args += ["--dpor", dpor]
    cmd = [sys.executable, "-c", "from smp.app.entry import main; main()", "explore", *args]
    cmd += ["--no-events", "--jobs", "2", "--json"]
    with own_group(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as p:
        me = psutil.Process(p.pid)
        seen: dict = {}

        def a_worker_busy() -> bool:  # its CPU time grew over the last three looks
            for w in me.children():
                try:
                    t = w.cpu_times().user
                except psutil.NoSuchProcess:
                    continue
                ts = seen.setdefault(w.pid, [])
                ts.append(t)
                if len(ts) >= 4 and ts[-4] < ts[-3] < ts[-2] < ts[-1] and t > 0.3:
                    os.kill(w.pid, signal.SIGKILL)
                    return True
            return False

        until(a_worker_busy, p, 100)
        out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out[-2000:]
    r = json.loads(out)["result"]
    assert any(n.startswith("A worker died under way") for n in r["notes"]), r["notes"]
    one = _explore(*args, "--no-events", "--jobs", "1")["result"]
    assert r["executions"] == one["executions"] == (1500 if dpor == "random" else 3000)
    assert r["outcomes"] == one["outcomes"]


def _task(arg: tuple) -> int:
    """A task that kills its worker when told to (and not in the process
    that runs it again)."""
    import signal

    import multiprocess

    n, kill = arg
    if kill and multiprocess.current_process().name != "MainProcess":
        os.kill(os.getpid(), signal.SIGKILL)
    return n * n


@pytest.mark.parametrize("pinned", [True, False])
def test_a_split_whose_worker_dies_runs_that_subtree_here(pinned):
    """Source-DPOR's split hands its subtrees to workers (each to worker
    ``i % n`` under a bound, else to whichever is free): a task whose
    worker dies is run in this process, the results still in order, where
    the pool's ``imap`` waited for ever."""
    from smp.app.explore.simulate import _Workers

    workers = _Workers(2, pinned=pinned)
    try:
        args = [(n, n == 3) for n in range(8)]
        assert list(workers(_task, args)) == [n * n for n in range(8)]
        assert workers.lost >= 1
        lost = workers.lost
        again = list(workers(_task, [(n, False) for n in range(4)]))  # (its pool replaced)
        assert again == [0, 1, 4, 9]
        assert workers.lost == lost  # (no worker died: none counted, no note said)
    finally:
        workers.close()


def test_a_pool_whose_idle_worker_was_killed_is_closed_in_bounded_time():
    """A worker waiting for its next task holds its pool's task queue; killed
    then, the pool's ``terminate`` waits for that queue for ever (a search
    whose worker was killed as its task ended hung at the end).  ``_stop``
    returns within ``STOP_S`` and leaves no worker behind."""
    import signal
    import time

    import multiprocess

    from smp.app.explore import simulate

    pool = multiprocess.Pool(1)
    pool.apply(os.getpid)  # (its worker up; then it waits for the next task)
    worker = pool._pool[0]
    lock = pool._inqueue._rlock
    deadline = time.monotonic() + 30
    while lock.acquire(False):  # (until the worker holds it, waiting)
        lock.release()
        assert time.monotonic() < deadline
        worker.join(0.01)
    os.kill(worker.pid, signal.SIGKILL)
    worker.join(10)
    assert worker.exitcode == -signal.SIGKILL
    assert not lock.acquire(False)  # (held by the dead worker: terminate would wait)
    t0 = time.monotonic()
    simulate._stop(pool)
    assert time.monotonic() - t0 < simulate.STOP_S + 1
    assert all(w.exitcode is not None for w in pool._pool)


def test_the_time_said_includes_the_workers_and_no_more_start_than_there_are_subtrees():
    """``--jobs 256 --max-executions 100`` said 0.80 s where it took 9.5 s:
    the workers' start was not counted, and 256 of them started for 9
    subtrees.  They start when the subtrees are handed out, no more than
    there are, and the time said is the whole search's."""
    import time

    o = SimOptions(bounds=Bounds(operations=2), max_executions=100, jobs=64, nonsmp=False)
    t0 = time.monotonic()
    _text, data = simulate("churn", o)
    wall = time.monotonic() - t0
    r = data["result"]
    assert r["executions"] == 100 and 0 < r["tasks"] < 64
    assert r["elapsed"] >= 0.8 * wall, (r["elapsed"], wall)
    # (no worker died: the note of one that did is not said)
    assert not any(n.startswith("A worker died") for n in r["notes"]), r["notes"]


_PORTS_GROUP = """\
[[tracers]]
name = "t"
[duration]
operations = 2
[[groups]]
name = "p"
workload = "ports"
trace = ["running", "receive"]
tracer = "t"
[groups.params]
driver = "{driver}"
"""


def test_the_ports_workload_is_explored_and_proved_on_real_processes(tmp_path):
    """A process's own port (open, commands from its scheduler, close) is
    simulated: the ports workload with the echo driver is explored, and its
    outcome is the same on real processes."""
    sc = tmp_path / "ports.toml"
    sc.write_text(_PORTS_GROUP.format(driver="echo"))
    r = CliRunner().invoke(cli, ["explore", str(sc), "--jobs", "1", "--prove"])
    assert r.exit_code == 0, r.output
    assert "The search is complete" in r.output
    assert "outcome 1: the same on real processes" in r.output
    # the echo, traced; the port named by its opener, as in nonsmp (whose
    # port numbers differ): the outcome is nonsmp's
    assert "{trace,p[0].user,'receive',{#Port<p[0].user:1>,{data," in r.output
    assert "nonsmp: the same" in r.output


@pytest.mark.parametrize("driver", ["busy", "dist"])
def test_a_port_driver_with_busy_spells_is_explored_and_proved(tmp_path, driver):
    """A busy spell ends on a timer the explorer fires; the command that
    finds the port busy fires busy_port (busy_dist_port) for its caller,
    and each outcome is the same on real processes, whose timers fire
    where the schedule says."""
    what = "busy_port" if driver == "busy" else "busy_dist_port"
    sc = tmp_path / "ports.toml"
    sc.write_text(
        _PORTS_GROUP.format(driver=driver)
        + f'busy_ms = 5\n[system_monitor]\nmonitor = "t"\n{what} = true\n'
    )
    r = CliRunner().invoke(cli, ["explore", str(sc), "--jobs", "1", "--prove"])
    assert r.exit_code == 0, r.output
    assert "The search is complete" in r.output
    assert f"{{monitor,p[0].user,{what},#Port<p[0].user:1>}}" in r.output
    assert "the busy spell of #Port<" in r.output and "ends (5 ms)" in r.output
    assert "outcome 1: the same on real processes" in r.output
    # no timer fires: the caller the busy port suspended waits forever
    r = CliRunner().invoke(cli, ["explore", str(sc), "--jobs", "1", "--after-timeout", "0"])
    assert r.exit_code == EXIT_FAILED, r.output
    assert "p[0].user (<" in r.output and "blocked forever (suspended)" in r.output
    assert "--after-timeout 0 --schedule" in r.output  # the replay command keeps it


@pytest.mark.parametrize(
    "args, says",
    [
        (["--after-timeout", "-1"], "--after-timeout"),
        (["--after-timeout", "x"], "--after-timeout"),
        (["--after-timeout", "86400001"], "--after-timeout"),
    ],
)
def test_a_bad_after_timeout_is_one_line_and_exit_2(tmp_path, args, says):
    sc = tmp_path / "ports.toml"
    sc.write_text(_PORTS_GROUP.format(driver="echo"))
    r = CliRunner().invoke(cli, ["explore", str(sc), *args])
    assert r.exit_code == EXIT_USAGE, r.output
    assert says in r.output


def test_after_timeout_is_refused_for_an_explore_scenario():
    r = CliRunner().invoke(cli, ["explore", "commute", "--after-timeout", "10"])
    assert r.exit_code == EXIT_USAGE, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "--after-timeout is for run scenarios" in lines[0], r.output
