"""A failing schedule shrunk before it is printed (``smp.sim.shrink``): no
more choices off the default order, the same check broken, and the shrunk
schedule replays to it, from Python and from the command line."""

from __future__ import annotations

import json

from click.testing import CliRunner

from smp.app.cli import cli
from smp.app.exitcodes import EXIT_FAILED
from smp.sim import Explorer
from smp.sim.catalogue import by_name
from smp.sim.explorer import replay, world_factory
from smp.sim.shrink import MAX_SHRINK_RUNS, shrink, violation_kind

RACE = by_name("tracer_killed_before_a_burst")  # a predicate that fails on one outcome


def _failing():
    r = Explorer(RACE.setup, RACE.schedulers, checks=RACE.checks, nonsmp=False).run()
    bad = [g for g in r.outcomes if g.outcome.violations]
    assert len(bad) == 1
    return r, bad[0]


def test_the_failing_schedule_shrinks_and_still_breaks_the_same_check():
    _r, g = _failing()
    nw = world_factory(RACE.setup, RACE.schedulers, 200)
    sh = shrink(nw, g.first.schedule, RACE.checks)
    assert sh is not None and sh.runs <= MAX_SHRINK_RUNS
    assert sh.choices < sh.original  # 5 of 12 on this race
    assert len(sh.schedule.split()) < len(g.first.schedule.split())
    again = replay(RACE.setup, sh.schedule, RACE.schedulers, checks=RACE.checks)
    assert {violation_kind(v) for v in again.outcome.violations} == {
        violation_kind(v) for v in g.outcome.violations
    }
    assert sh.violations == again.outcome.violations


def test_a_schedule_that_breaks_nothing_is_not_shrunk():
    r, _g = _failing()
    good = next(g for g in r.outcomes if not g.outcome.violations)
    nw = world_factory(RACE.setup, RACE.schedulers, 200)
    assert shrink(nw, good.first.schedule, RACE.checks) is None


def test_a_violation_is_of_one_kind_with_its_particulars_set_aside():
    assert violation_kind("check no_loss failed: m1.3 lost") == "check no_loss"
    assert violation_kind("m1.3 TRACE <0.80.0> -> t has no fate") == violation_kind(
        "m2.7 TRACE <0.91.0> -> t has no fate"
    )
    assert violation_kind("2 message(s) still queued") != violation_kind("m1.2 has no fate")


def test_the_command_prints_the_shrunk_schedule_and_it_replays_to_the_failure():
    r = CliRunner().invoke(cli, ["explore", RACE.name, "--no-events", "--jobs", "1"])
    assert r.exit_code == EXIT_FAILED, r.output  # the outcome that breaks the check
    lines = [ln for ln in r.output.splitlines() if ln.startswith("  Shrunk to ")]
    assert len(lines) == 1, r.output[-2000:]
    schedule = lines[0].split("--schedule ", 1)[1].strip("'")
    again = CliRunner().invoke(cli, ["explore", RACE.name, "--schedule", schedule, "--no-events"])
    assert again.exit_code == EXIT_FAILED
    assert "! check killed_tracer_misses_something failed" in again.output
    data = json.loads(
        CliRunner().invoke(cli, ["explore", RACE.name, "--json", "--jobs", "1"]).stdout
    )
    shrunk = [o["shrunk"] for o in data["result"]["outcomes"] if "shrunk" in o]
    assert len(shrunk) == 1 and shrunk[0]["schedule"] == schedule
    assert shrunk[0]["choices"] < shrunk[0]["from_choices"]
    assert shrunk[0]["replay"].endswith(f"--schedule '{schedule}'")


def test_the_report_shows_the_shrunk_schedule(tmp_path):
    data = CliRunner().invoke(cli, ["explore", RACE.name, "--json", "--jobs", "1"]).stdout
    (tmp_path / "r.json").write_text(data)
    page = tmp_path / "r.html"
    r = CliRunner().invoke(cli, ["report", str(tmp_path / "r.json"), "-o", str(page)])
    assert r.exit_code == 0, r.output
    (sh,) = [o["shrunk"] for o in json.loads(data)["result"]["outcomes"] if "shrunk" in o]
    html = page.read_text()
    assert f"Shrunk to {sh['choices']} choice(s) off the default order" in html
    assert html.count("Shrunk") == 1 and sh["schedule"] in html


def test_outcomes_the_default_order_already_breaks_say_so_once(readme_swap):
    """The README's swap: the default order itself drops messages, so each
    failing outcome shrinks to no choice at all; printed once, then named."""
    args = ["explore", str(readme_swap), "--max-executions", "60", "--no-events", "--jobs", "1"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == EXIT_FAILED
    lines = [ln for ln in r.output.splitlines() if ln.startswith("  Shrunk")]
    assert len(lines) >= 2, r.output[-2000:]
    assert lines[0].endswith("--schedule ''") and "default order" in lines[0]
    assert all(ln == "  Shrunk: to outcome 1's shrunk schedule." for ln in lines[1:])


def test_a_shrink_past_its_deadline_keeps_what_it_has():
    """``--time-budget`` covers the shrinking: past its deadline no cut is
    tried, and the schedule it has (here the original) still breaks."""
    import time

    _r, g = _failing()
    nw = world_factory(RACE.setup, RACE.schedulers, 200)
    sh = shrink(nw, g.first.schedule, RACE.checks, deadline=time.monotonic() - 1)
    assert sh is not None and sh.runs == 0 and sh.choices == sh.original
    again = replay(RACE.setup, sh.schedule, RACE.schedulers, checks=RACE.checks)
    assert again.outcome.violations
    full = shrink(nw, g.first.schedule, RACE.checks)
    assert full.runs > 0 and full.choices < sh.choices


def test_failing_outcomes_past_the_shrink_limit_say_they_were_not_shrunk(readme_swap):
    """``--shrink N``: the first N failing outcomes are shrunk, each later one
    says why it was not (text and JSON); ``--shrink 0`` shrinks none."""
    args = ["explore", str(readme_swap), "--max-executions", "60", "--no-events", "--jobs", "1"]
    r = CliRunner().invoke(cli, [*args, "--shrink", "1"])
    assert r.exit_code == EXIT_FAILED
    failing = r.output.count("  ! ")
    shrunk = [ln for ln in r.output.splitlines() if ln.startswith("  Shrunk")]
    skipped = [ln for ln in r.output.splitlines() if ln.startswith("  Not shrunk: ")]
    assert len(shrunk) == 1 and len(skipped) >= 1, r.output[-2000:]
    assert set(skipped) == {"  Not shrunk: only the first 1 failing outcome(s) are shrunk."}
    assert failing >= 1 + len(skipped)
    d = json.loads(CliRunner().invoke(cli, [*args, "--shrink", "0", "--json"]).stdout)
    bad = [o for o in d["result"]["outcomes"] if o["outcome"]["violations"]]
    assert len(bad) >= 2 and not any("shrunk" in o for o in bad)
    assert {o["not_shrunk"] for o in bad} == {"no shrinking was asked for"}
