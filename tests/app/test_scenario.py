"""Scenario files: schema errors name the bad key and its line; defaults fill in."""

from __future__ import annotations

import re

import pytest

from smp.app.scenario import (
    example_names,
    load_scenario,
    match_spec_from,
    parse_scenario,
    parse_term,
)
from smp.core.errors import ScenarioError
from smp.core.terms import Atom

GOOD = """\
name = "t"
mode = "nonsmp"
seed = 3

[duration]
operations = 5

[[tracers]]
name = "t1"

[[groups]]
name = "pp"
workload = "ping_pong"
trace = ["send"]
tracer = "t1"

[[groups]]
name = "ring"
workload = "ring"
[groups.params]
size = 3
"""


def test_good_scenario_fills_defaults():
    sc = parse_scenario(GOOD, "good.toml")
    assert sc["mode"] == "nonsmp"
    assert sc["groups"][0]["count"] == 1
    assert sc["groups"][0]["params"] == {"pairs": 1, "payload": 0, "same_scheduler": False}
    assert sc["groups"][1]["params"]["size"] == 3
    assert sc["duration"] == {"seconds": None, "operations": 5}
    assert sc["faults"] == []


@pytest.mark.parametrize(
    "old,new,line,key",
    [
        ("size = 3", "size = 0", 21, "groups[1].params.size"),
        ("size = 3", "sizes = 3", 21, "groups[1].params.sizes"),
        ("operations = 5", 'operations = "x"', 6, "duration.operations"),
        ('tracer = "t1"', 'tracer = "nope"', 15, "groups[0].tracer"),
        ('workload = "ring"', 'workload = "rings"', 19, "groups[1].workload"),
        ('trace = ["send"]', 'trace = ["sned"]', 14, "groups[0].trace"),
        ("seed = 3", 'seed = 3\ncolour = "red"', 4, "colour"),
        ('name = "pp"', 'name = " "', 12, "groups[0].name"),  # (roles read "[0].ping")
    ],
)
def test_errors_name_key_and_line(old, new, line, key):
    text = GOOD.replace(old, new)
    with pytest.raises(ScenarioError) as ei:
        parse_scenario(text, "bad.toml")
    msg = str(ei.value)
    assert msg.startswith(f"bad.toml:{line}: {key}:"), msg


def test_toml_syntax_error_has_line():
    with pytest.raises(ScenarioError, match=r"^x.toml:2: not valid TOML"):
        parse_scenario('name = "a"\nmode = \n', "x.toml")


def test_missing_groups():
    with pytest.raises(ScenarioError, match="missing required key 'groups'"):
        parse_scenario('name = "a"\n', "x.toml")


def test_nonsmp_with_schedulers_is_a_note_with_the_rule():
    from smp.app.scenario import NONSMP_RULE

    sc = parse_scenario(GOOD.replace("seed = 3", "schedulers = 2"), "x.toml")
    assert sc["notes"] == [f"x.toml:3: schedulers: {NONSMP_RULE}"]


def test_fault_every_needs_times_with_operations():
    text = GOOD + '\n[[faults]]\naction = "kill_tracer"\ntarget = "t1"\nevery = 0.1\n'
    with pytest.raises(ScenarioError, match=r"faults\[0\]: 'every' needs 'times'"):
        parse_scenario(text, "x.toml")


def test_kill_tracer_target_must_be_collector():
    text = GOOD.replace(
        '[[tracers]]\nname = "t1"',
        '[[tracers]]\nname = "t1"\n[[tracers]]\nname = "n"\nkind = "null"',
    )
    text += '\n[[faults]]\naction = "kill_tracer"\ntarget = "n"\n'
    with pytest.raises(ScenarioError, match="must be a collector process"):
        parse_scenario(text, "x.toml")


def test_match_specs():
    assert match_spec_from(True) is True
    assert match_spec_from("exception_trace") == [(Atom("_"), [], [(Atom("exception_trace"),)])]
    ms = match_spec_from("[{['$1'], [{'<', '$1', 2}], [{return_trace}]}]")
    assert ms == [([Atom("$1")], [(Atom("<"), Atom("$1"), 2)], [(Atom("return_trace"),)])]
    assert parse_term('{a, "hi", [1 | x], 2.5}') == (
        Atom("a"),
        [104, 105],
        parse_term("[1|x]"),
        2.5,
    )
    with pytest.raises(ValueError):
        parse_term("{a,")


def test_bad_match_spec_names_key():
    text = GOOD + '\n[[patterns]]\nmfa = ["wl_calls", "_", "_"]\nmatch_spec = "[{x}]"\n'
    with pytest.raises(ScenarioError, match=r"x.toml:25: patterns\[0\].match_spec: bad match spec"):
        parse_scenario(text, "x.toml")


def test_examples_and_default_load():
    names = example_names()
    assert {"default", "everything", "churn", "long", "stress"} <= set(names)
    for n in names:
        assert load_scenario(n)["name"] == n
    assert load_scenario(None)["name"] == "default"


def test_the_everything_example_runs_with_no_process_crashing(tmp_path, monkeypatch):
    """Its ``[[trace]] pids = "new"`` gave churn's children its tracer, and
    the churner's trace of them with its own crashed it on every run
    ("can only have one tracer per process")."""
    from smp.app.workloads import execute

    monkeypatch.chdir(tmp_path)  # (its file tracer writes everything.trace here)
    sc = load_scenario("everything")
    sc["duration"]["seconds"] = 0.3
    sc["faults"] = []
    out = execute(sc, mode="smp")
    assert out.summary["stats"]["stderr_lines"] == []
    assert out.summary["stats"]["made"] > 0


def test_unreadable_file(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read scenario"):
        load_scenario(tmp_path / "missing.toml")


def test_lines_are_found_through_quoted_dotted_and_commented_headers():
    """The line finder reads headers and key lines by hand: quoted and dotted
    keys, comments after a header and CRLF line ends keep their lines."""
    text = (
        GOOD.replace('[[groups]]\nname = "ring"', '[[ "groups" ]]  # the ring\nname = "ring"')
        .replace("[groups.params]", "[ groups . 'params' ]")
        .replace("\n", "\r\n")
    )
    with pytest.raises(ScenarioError) as ei:
        parse_scenario(text.replace("size = 3", "size = 0"), "q.toml")
    assert str(ei.value).startswith("q.toml:21: groups[1].params.size: must be an integer >= 1")
    # a line inside a multi-line array that looks like a header is not one
    text = GOOD.replace("seed = 3", "seed = 3\nrate = [\n[1]]")
    with pytest.raises(ScenarioError) as ei:
        parse_scenario(text.replace('tracer = "t1"', 'tracer = "no"'), "q.toml")
    assert str(ei.value).startswith("q.toml:17: groups[0].tracer:"), str(ei.value)


@pytest.mark.parametrize(
    "old,new,why",
    [
        ("seed = 3", "seed = 3\ntimeout = nan", "timeout: must be a finite number, not nan"),
        ("operations = 5", "seconds = inf", "duration.seconds: must be a finite number"),
        ("size = 3", "size = 100001", "groups[1].params.size: must be an integer <= 100000"),
        ("seed = 3", "seed = 3\nschedulers = 65", "schedulers: must be an integer <= 64"),
    ],
)
def test_numbers_are_finite_and_bounded(old, new, why):
    with pytest.raises(ScenarioError, match=re.escape(why)):
        parse_scenario(GOOD.replace(old, new), "b.toml")


def test_bad_bytes_and_deep_nesting_name_the_line(tmp_path):
    p = tmp_path / "bytes.toml"
    p.write_bytes(GOOD.encode().replace(b"seed = 3", b"seed = 3 # \xff"))
    with pytest.raises(
        ScenarioError, match=r"bytes.toml:3: not UTF-8 text: byte 0xff at column 12"
    ):
        load_scenario(p)
    with pytest.raises(ScenarioError, match=r"d.toml:5: arrays or inline tables nested deeper"):
        parse_scenario(GOOD.replace("[duration]", "x = " + "[" * 1000 + "\n[duration]"), "d.toml")


def test_match_spec_that_is_not_text():
    with pytest.raises(ValueError, match="must be true, false"):
        match_spec_from([1, 2])


@pytest.mark.parametrize("pids", ["new", "all", "existing"])
def test_a_group_tracer_other_than_the_trace_sections_is_refused_with_its_line(pids):
    """A process has one tracer: [[trace]] traces the groups' processes too,
    so a group naming another tracer is refused where it is written (it
    failed at set-up before, naming a pid)."""
    text = GOOD + (
        f'[[tracers]]\nname = "other"\n[[trace]]\npids = "{pids}"\nflags = ["procs"]\n'
        'tracer = "other"\n'
    )
    with pytest.raises(ScenarioError) as ei:
        parse_scenario(text, "bad.toml")
    msg = str(ei.value)
    assert msg.startswith("bad.toml:15: groups[0].tracer: 't1', but trace[0] "), msg
    assert f"(pids {pids}) traces the group's processes to 'other'" in msg
