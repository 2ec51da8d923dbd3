"""Scenario files: schema errors name the bad key and its line; defaults fill in."""

from __future__ import annotations

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


def test_unreadable_file(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read scenario"):
        load_scenario(tmp_path / "missing.toml")
