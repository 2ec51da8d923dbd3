"""``[[expect]]`` clauses: validated like every key, checked after run and
stress (a broken one exits 1) and on every outcome explore finds."""

from __future__ import annotations

import copy
import json
import os
import shutil

import pytest
from click.testing import CliRunner

from smp.app.cli import cli
from smp.app.compare import ExpectCheck, check_expect, expect_checks
from smp.app.explore.simulate import SimOptions, simulate
from smp.app.explore.workload import Bounds, bound_scenario
from smp.app.scenario import EXPECT_KINDS, parse_scenario
from smp.app.workloads import RunOutcome, execute
from smp.core.errors import ScenarioError
from smp.core.terms import Atom
from smp.sim.outcome import Outcome

_BASE = """\
name = "expect"
[duration]
operations = OPS
[[tracers]]
name = "t"
[[groups]]
name = "pp"
workload = "ping_pong"
trace = ["send", "receive"]
tracer = "t"
[[groups]]
name = "c"
workload = "calls"
"""

_CLAUSES = """\
[[expect]]
kind = "receives_every"
tracer = "t"
group = "pp"
[[expect]]
kind = "no_drop"
reason = "receiver_dead"
[[expect]]
kind = "order"
tracer = "t"
[[expect]]
kind = "count"
tracer = "t"
min = 82
max = 82
"""

# the tracer dies as the run starts: the sends after it are never traced
_KILL = """\
[[faults]]
action = "kill_tracer"
target = "t"
replace = false
"""


def _scenario(extra: str = _CLAUSES, ops: int = 20, source: str = "x.toml") -> dict:
    return parse_scenario(_BASE.replace("OPS", str(ops)) + extra, source)


def _error(extra: str) -> str:
    with pytest.raises(ScenarioError) as e:
        _scenario(extra)
    return str(e.value)


# ------------------------------------------------------------ validation
def test_clauses_are_filled_in_and_located():
    sc = _scenario()
    assert [e["kind"] for e in sc["expect"]] == list(EXPECT_KINDS)
    assert sc["expect"][0]["event"] == "send"
    assert sc["expect"][1]["where"] == "x.toml:18: expect[1]"
    assert sc["expect"][3]["min"] == sc["expect"][3]["max"] == 82


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            '[[expect]]\nkind = "all_good"\n',
            "x.toml:15: expect[0].kind: must be one of receives_every, no_drop, order, "
            "count, not 'all_good'",
        ),
        (
            '[[expect]]\nkind = "no_drop"\nreason = "tired"\n',
            "x.toml:16: expect[0].reason: must be one of any, sender_is_receiver,",
        ),
        (
            '[[expect]]\nkind = "no_drop"\ntracer = "t"\n',
            "x.toml:16: expect[0].tracer: 'tracer' is no key of a no_drop clause "
            "(its keys: kind, reason)",
        ),
        ('[[expect]]\nkind = "order"\n', "x.toml:14: expect[0]: an order clause needs 'tracer'"),
        (
            '[[expect]]\nkind = "order"\ntracer = "u"\n',
            "x.toml:16: expect[0].tracer: unknown tracer 'u' (tracers: t)",
        ),
        (
            '[[tracers]]\nname = "quiet"\nkind = "null"\n'
            '[[expect]]\nkind = "count"\ntracer = "quiet"\nmax = 1\n',
            "expect[0].tracer: tracer 'quiet' is a null port: the run keeps nothing",
        ),
        (
            '[[expect]]\nkind = "receives_every"\ntracer = "t"\ngroup = "c"\n',
            "expect[0].group: group 'c' runs the calls workload, which sends no numbered",
        ),
        (
            '[[expect]]\nkind = "receives_every"\ntracer = "t"\ngroup = "pp"\nevent = "exit"\n',
            "expect[0].event: must be one of send, not 'exit'",
        ),
        (
            '[[expect]]\nkind = "count"\ntracer = "t"\n',
            "x.toml:14: expect[0]: a count clause needs 'min', 'max' or both",
        ),
        (
            '[[expect]]\nkind = "count"\ntracer = "t"\nmin = -1\n',
            "x.toml:17: expect[0].min: must be an integer >= 0, not -1",
        ),
        (
            '[[expect]]\nkind = "count"\ntracer = "t"\nmin = 5\nmax = 4\n',
            "x.toml:18: expect[0].max: must be >= min (5), not 4",
        ),
    ],
)
def test_bad_clauses_are_refused_in_one_line(extra, message):
    err = _error(extra)
    assert message in err and "\n" not in err


# ------------------------------------------------------------ run
@pytest.fixture(scope="module")
def held() -> dict:
    """A short run per mode whose four clauses hold."""
    sc = _scenario()
    return {m: (sc, execute(sc, mode=m, check_expect=check_expect)) for m in ("smp", "nonsmp")}


@pytest.mark.parametrize("mode", ["smp", "nonsmp"])
def test_clauses_hold_on_a_clean_run(held, mode):
    _sc, outcome = held[mode]
    results = outcome.summary["expect"]
    assert [r["held"] for r in results] == [True] * 4, results
    every, no_drop, order, count = results
    # 20 pings and a stop from the ping, 20 pongs from the pong
    assert (every["count"], every["of"]) == (41, 41)
    assert "duration.operations = 20" in every["evidence"]
    assert no_drop["count"] == 0 and "dropped_by_reason" in no_drop["from"]
    assert order["count"] == 0 and "82 send and receive" in order["evidence"]
    assert count["count"] == 82


@pytest.mark.parametrize("mode", ["smp", "nonsmp"])
def test_a_killed_tracer_breaks_receives_every(mode):
    sc = _scenario(_KILL + _CLAUSES.split('[[expect]]\nkind = "no_drop"')[0], ops=200)
    r = execute(sc, mode=mode, check_expect=check_expect).summary["expect"][0]
    assert not r["held"]
    assert r["of"] == 401 and r["count"] < r["of"]
    assert f"missing {r['of'] - r['count']}: pp[0].ping" in r["evidence"]


def test_run_exits_1_naming_the_broken_clause(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text(
        _BASE.replace("OPS", "20") + _CLAUSES.replace("min = 82\nmax = 82", "min = 0\nmax = 81")
    )
    r = CliRunner().invoke(cli, ["run", str(path), "--mode", "nonsmp", "--json"])
    assert r.exit_code == 1, r.output
    lines = [x for x in r.stderr.splitlines() if "expect" in x]
    assert lines == [
        f"smp-emu: expect broken: {path}:24: expect[3]: count tracer=t min=0 max=81: "
        "tracer t received 82 trace messages (wanted 0..81)"
    ]
    s = json.loads(r.stdout)
    assert [e["held"] for e in s["expect"]] == [True, True, True, False]


def test_run_exits_0_when_every_clause_holds(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text(_BASE.replace("OPS", "20") + _CLAUSES)
    r = CliRunner().invoke(cli, ["run", str(path), "--mode", "nonsmp"])
    assert r.exit_code == 0, r.output
    assert "smp-emu: expect: all 4 clause(s) held" in r.stderr


def test_stress_checks_the_clauses_too(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text(
        _BASE.replace("OPS", "20") + '[[expect]]\nkind = "count"\ntracer = "t"\nmax = 0\n'
    )
    args = ["stress", str(path), "--mode", "nonsmp", "--duration", "0.2", "--faults", "0"]
    r = CliRunner().invoke(cli, args + ["--json"])
    assert r.exit_code == 1, r.output
    s = json.loads(r.stdout)
    assert s["invariants"]["ok"] and not s["expect"][0]["held"]
    assert s["expect"][0]["count"] > 0
    assert f"smp-emu: expect broken: {path}:14: expect[0]: count tracer=t min=0 max=0: " in r.stderr
    # the text says it beside the invariants, and keeps the journal of the
    # failed run (smp: it said "all invariants hold" alone, and deleted it)
    r = CliRunner().invoke(cli, [*args[:3], "smp", *args[4:]])
    assert r.exit_code == 1, r.output
    assert "all invariants hold\nEXPECT BROKEN: " in r.stdout, r.stdout
    kept = [x for x in r.stderr.splitlines() if x.startswith("smp-emu: journal kept: ")]
    assert kept, r.stderr
    path = kept[0].split(": ", 2)[2].split(" (")[0]
    assert os.path.getsize(path) > 0
    shutil.rmtree(os.path.dirname(path))


# ------------------------------------------------------------ each check can say no
def _mutated(outcome: RunOutcome, sc: dict, mutate) -> list[dict]:
    o = copy.deepcopy(outcome)
    mutate(o)
    return check_expect(o, sc)


def _sends(o: RunOutcome) -> list[int]:
    return [
        i
        for i, t in enumerate(o.messages["t"])
        if t[2] is Atom("send") and type(t[3]) is tuple and t[3][1] == t[1]
    ]


def test_a_lost_send_breaks_receives_every(held):
    sc, outcome = held["nonsmp"]

    def lose(o):
        del o.messages["t"][_sends(o)[5]]

    r = _mutated(outcome, sc, lose)[0]
    assert not r["held"] and (r["count"], r["of"]) == (40, 41)
    assert "missing 1: pp[0]." in r["evidence"]


def test_two_swapped_sends_break_order(held):
    sc, outcome = held["smp"]

    def swap(o):
        ms = o.messages["t"]
        ping = ms[_sends(o)[0]][1]
        i, j = [k for k in _sends(o) if ms[k][1] == ping][:2]  # its numbers 0 and 1
        ms[i], ms[j] = ms[j], ms[i]

    r = _mutated(outcome, sc, swap)[2]
    assert not r["held"] and r["count"] >= 1
    assert "out of order" in r["evidence"] and "pp[0]." in r["evidence"]


def test_a_drop_breaks_no_drop(held):
    sc, outcome = held["smp"]

    def drop(o):
        o.summary["stats"]["dropped_by_reason"]["receiver_dead"] = {"TRACE": 3}
        o.summary["stats"]["dropped"] += 3

    r = _mutated(outcome, sc, drop)[1]
    assert not r["held"] and r["count"] == 3
    assert r["evidence"].startswith("3 trace messages dropped as receiver_dead")
    # another reason is not this clause's
    any_sc = dict(sc, expect=[dict(sc["expect"][1], reason="not_tracer")])
    assert _mutated(outcome, any_sc, drop)[0]["held"]


def test_one_message_more_or_less_breaks_count(held):
    sc, outcome = held["nonsmp"]
    more = _mutated(outcome, sc, lambda o: o.messages["t"].append(o.messages["t"][0]))[3]
    less = _mutated(outcome, sc, lambda o: o.messages["t"].pop())[3]
    assert (more["held"], more["count"], less["held"], less["count"]) == (False, 83, False, 81)


# ------------------------------------------------------------ explore
def test_explore_finds_an_outcome_that_drops_where_nonsmp_never_does(tmp_path):
    path = tmp_path / "kill.toml"
    path.write_text(
        _BASE.replace("OPS", "1")
        + _KILL
        + '[[expect]]\nkind = "no_drop"\nreason = "receiver_dead"\n'
        + '[[expect]]\nkind = "count"\ntracer = "t"\nmax = 1000\n'
    )
    o = SimOptions(bounds=Bounds(operations=1), max_executions=60, jobs=1, events=False)
    text, data = simulate(str(path), o)
    no_drop, count = data["expect"]
    assert no_drop["broken_in"] and no_drop["nonsmp_broken"] is False
    assert not count["broken_in"] and count["nonsmp_broken"] is False
    first = data["result"]["outcomes"][no_drop["broken_in"][0] - 1]["outcome"]
    assert any(
        v.startswith("check expect[0] no_drop reason=receiver_dead failed: ")
        and "dropped as receiver_dead" in v
        for v in first["violations"]
    )
    assert f"Expect {path}:" in text and "BROKEN in" in text and "nonsmp keeps it" in text


def _explore_check(sc_text: str, index: int) -> ExpectCheck:
    sc, _notes = bound_scenario(parse_scenario(sc_text, "x.toml"), Bounds(operations=1))
    checks = expect_checks(sc)
    return checks[index]


_PING = "{trace,pp[0].ping,send,{ping,pp[0].ping,N,[]},pp[0].pong}"
_PONG = "{trace,pp[0].pong,send,{pong,pp[0].pong,N,0},pp[0].ping}"


def _oc(received: list, fates=()) -> Outcome:
    return Outcome(tuple(fates), (("t", tuple(received)),), ())


def test_each_explore_check_can_say_no():
    text = _BASE.replace("OPS", "1") + _CLAUSES.replace("min = 82\nmax = 82", "max = 3")
    every, no_drop, order, count = (_explore_check(text, i) for i in range(4))
    full = [_PING.replace("N", "0"), _PONG.replace("N", "0"), _PING.replace("N", "1")]
    assert every(_oc(full)) is True and order(_oc(full)) is True and count(_oc(full)) is True
    lost = every(_oc(full[:2]))
    assert isinstance(lost, str) and "received 2 of the 3" in lost and "pp[0].ping 1" in lost
    swapped = order(_oc([full[2], full[1], full[0]]))
    assert isinstance(swapped, str) and "1 out of order" in swapped
    assert "4 trace messages (wanted 0..3)" in count(_oc(full + full[:1])).replace(",", "")
    dropped = [(f"TRACE pp[0].ping -> t {full[0]}", "dropped receiver_dead (t)")]
    assert no_drop(_oc(full)) is True
    assert no_drop(_oc(full, dropped)).startswith("1 trace message")
    # a message delivered to a tracer already dead is no drop, but is said
    dead = [(f"TRACE pp[0].ping -> t {full[1]}", "arrived_dead t")]
    said = no_drop(_oc(full, dropped + dead))
    assert said.startswith("1 trace message dropped")
    assert "besides, 1 delivered to a receiver already dead" in said
    assert "already dead" not in no_drop(_oc(full, dropped))


def test_no_drop_on_a_run_names_the_messages_that_reached_a_dead_tracer(held):
    sc, outcome = held["smp"]

    def dead(o):
        o.summary["per_scheduler"][0]["sys_arrived_dead"] = 2

    r = _mutated(outcome, sc, dead)[1]
    assert r["held"] and "besides, 2 delivered to a receiver already dead" in r["evidence"]


def test_missing_numbers_are_counted_without_walking_each_one():
    from collections import Counter

    from smp.app.expect import _missing

    # two processes numbering 0..10**9: 0 seen twice, 1 once, 5 twice
    n, ranges = _missing(Counter({0: 2, 1: 1, 5: 2}), 10**9, 2)
    assert n == 2 * (10**9 + 1) - 5
    assert ranges == [(1, 4), (6, 10**9)]
    assert _missing(Counter({0: 1, 1: 1}), 1, 1) == (0, [])


def test_no_drop_of_any_reason_counts_what_a_trace_port_dropped(held):
    """An ip port whose client was slow drops what the dispatcher delivered
    to it (trace_ip_drv's queue): lost, yet the clause held and the summary
    line said nothing of it."""
    from smp.app.cli_output import _summary_line

    sc, outcome = held["nonsmp"]
    any_sc = copy.deepcopy(sc)
    any_sc["expect"] = [{"kind": "no_drop", "reason": "any", "where": "x.toml:1"}]

    def ip_dropped(o):
        o.summary["tracers"]["t"]["port"] = {"kind": "ip", "dropped": 788}

    r = _mutated(outcome, any_sc, ip_dropped)[0]
    assert not r["held"] and r["count"] == 788 and "ip port t's queue (788 dropped" in r["from"]
    assert _mutated(outcome, any_sc, lambda o: None)[0]["held"]
    o = copy.deepcopy(outcome)
    ip_dropped(o)
    line = _summary_line(o.summary, "run")
    assert line.endswith("; trace port t dropped 788 of those delivered to it (its queue)")
    assert "dropped" not in _summary_line(outcome.summary, "run").split("trace messages")[1]
