"""Faults are carried out as an Erlang program would and each reports whether
it took: a replaced tracer's tracees move once it is dead, and a fault that
did not take is an invariant failure unless the scenario says ``may_fail``."""

from __future__ import annotations

import pytest

from smp.app.compare import check_invariants
from smp.app.scenario import ScenarioError, parse_scenario
from smp.app.workloads import execute, fault_notes, lost_in_gap
from smp.core.terms import Atom, Pid

pytestmark = pytest.mark.timeout(120)

BASE = """
name = "faults"
schedulers = 2
seed = 5
[duration]
seconds = {seconds}
[[tracers]]
name = "t"
[[groups]]
name = "pp"
workload = "ping_pong"
count = 2
trace = ["send", "receive", "timestamp"]
tracer = "t"
"""


def _scenario(faults: str, seconds: float = 1.0) -> dict:
    return parse_scenario(BASE.format(seconds=seconds) + faults, "faults.toml")


@pytest.mark.parametrize("mode", ["nonsmp", "smp"])
def test_kill_tracer_with_replace_moves_every_tracee(mode):
    sc = _scenario('[[faults]]\naction = "kill_tracer"\ntarget = "t"\nat = 0.1\n')
    out = execute(sc, mode=mode)
    (f,) = out.summary["faults"]
    assert (f["action"], f["target"], f["replacement"]) == ("kill_tracer", "t", "t~1")
    assert f["result"] == "ok" and f["took"] is True, f
    eff = f["effect"]
    # the two ping/pong pairs: four tracees, all moved, after the tracer's death
    assert eff["tracees_held"] == 4 and eff["tracees_moved"] == 4 and eff["tracees_gone"] == 0
    assert f["planned_at"] == 0.1 and f["started_at"] >= 0.1
    assert eff["death_at"] <= eff["retraced_at"] <= f["done_at"]
    got = out.messages["t~1"]
    assert eff["replacement_received"] == len(got) > 0
    # every moved tracee is heard from, each with messages made after the move
    assert len({m[1] for m in got}) == 4
    assert isinstance(eff["lost_before_retrace"], int) and eff["lost_before_retrace"] >= 0
    assert check_invariants(out) == []
    (line,) = fault_notes(out.summary)
    assert "kill_tracer t at 0.1 s" in line and "4 of 4 tracees" in line and ": ok;" in line


TWICE = """
[[faults]]
action = "kill_tracer"
target = "t"
replace = false
at = 0.05
every = 0.05
times = 2
"""


def test_a_fault_that_does_not_take_fails_the_invariants():
    """The second kill finds the tracer dead already (it was not replaced)."""
    out = execute(_scenario(TWICE, seconds=0.4), mode="nonsmp")
    first, second = out.summary["faults"]
    assert first["took"] is True and first["result"] == "ok"
    # without replace its four tracees are left with a dead tracer
    assert first["effect"]["tracees_held"] == 4 and "tracees_moved" not in first["effect"]
    assert second["took"] is False and "noproc" in second["result"]
    v = check_invariants(out)
    assert len(v) == 1 and v[0].startswith("fault: ") and "did not take" in v[0], v
    assert "kill_tracer t at 0.1 s" in v[0]
    notes = fault_notes(out.summary)
    assert len(notes) == 2 and "DID NOT TAKE" in notes[1] and "DID NOT TAKE" not in notes[0]


def test_may_fail_lists_the_fault_but_is_no_invariant_failure():
    out = execute(_scenario(TWICE + "may_fail = true\n", seconds=0.4), mode="nonsmp")
    second = out.summary["faults"][1]
    assert second["took"] is False and second["may_fail"] is True
    assert check_invariants(out) == []
    assert "(may_fail)" in fault_notes(out.summary)[1]


def test_may_fail_is_a_boolean_defaulting_to_false():
    sc = _scenario('[[faults]]\naction = "kill_tracer"\ntarget = "t"\nat = 0.1\n')
    assert sc["faults"][0]["may_fail"] is False
    with pytest.raises(ScenarioError, match="may_fail"):
        _scenario('[[faults]]\naction = "kill_tracer"\ntarget = "t"\nmay_fail = 1\n')


def test_lost_in_gap_counts_the_numbers_between_the_two_tracers():
    p, q = Pid(81), Pid(82)
    ping = Atom("ping")

    def send(i):
        return (Atom("trace"), p, Atom("send"), (ping, p, i), q)

    def recv(i):
        return (Atom("trace"), q, Atom("receive"), (ping, p, i))

    victim = [send(0), recv(0), send(1), recv(1)]
    repl = [send(5), recv(4), send(6)]
    # p's sends 2, 3, 4 and q's receives 2, 3 went to nobody
    assert lost_in_gap(victim, repl) == 5
    assert lost_in_gap(victim, [send(2)]) == 0
    assert lost_in_gap(victim, []) is None


def test_a_lost_count_that_misses_a_stream_is_said_to_be_a_lower_bound():
    """The victim never saw q's sends, which reach the replacement from
    number 1: number 0 went to nobody, and the line said "lost ... 0"."""
    from smp.app.fault_report import _fault_line, _streams, _unseen

    def streams_not_counted(victim, repl):
        return _unseen(_streams(victim, True), _streams(repl, False))

    p, q = Pid(81), Pid(82)
    ping, pong = Atom("ping"), Atom("pong")

    def send(who, tag, i, to):
        return (Atom("trace"), who, Atom("send"), (tag, who, i), to)

    victim = [send(p, ping, 0, q)]
    repl = [send(p, ping, 1, q), send(q, pong, 1, p)]
    assert lost_in_gap(victim, repl) == 0
    assert streams_not_counted(victim, repl) == 1
    assert streams_not_counted(victim, [send(p, ping, 1, q), send(q, pong, 0, p)]) == 0
    f = {
        "action": "kill_tracer", "target": "t", "victim": "t", "planned_at": 0.0,
        "done_at": 0.0, "took": True, "result": "ok", "late": False,
        "effect": {
            "tracees_held": 2, "tracees_moved": 2, "replacement_received": 2,
            "lost_before_retrace": 0, "lost_streams_uncounted": 1,
        },
        "replacement": "t~1",
    }  # fmt: skip
    line = _fault_line(f)
    assert "lost before the retrace: at least 0 (1 stream(s) only t~1 received" in line, line
    f["effect"]["lost_streams_uncounted"] = 0
    assert _fault_line(f).endswith("lost before the retrace: 0"), _fault_line(f)


def test_a_replaced_profiler_is_a_port_so_a_run_profiling_schedulers_ends():
    """A profiler process would wake its scheduler with every message it got
    (scheduler profiling would never settle): the replacement is a memory port."""
    text = BASE.format(seconds=0.4) + (
        '[[tracers]]\nname = "prof"\nkind = "memory"\n'
        '[system_profile]\nprofiler = "prof"\nscheduler = true\n'
        '[[faults]]\naction = "replace_profiler"\nat = 0.1\n'
    )
    sc = parse_scenario(text, "profile.toml")
    sc["timeout"] = 30.0
    out = execute(sc, mode="nonsmp")
    assert out.summary["completed"] and out.summary["error"] is None
    (f,) = out.summary["faults"]
    assert f["took"] is True and f["effect"]["previous"] == "prof"
    assert out.summary["tracers"]["profiler~1"]["port"]["kind"] == "memory"


HELD = """
[[groups]]
name = "ring"
workload = "ring"
# exit(Pid, normal) leaves a process that does not trap exits alive: the
# kill waits for its 'EXIT' until the pair ends with the workload
[[faults]]
action = "kill_processes"
target = "pp"
reason = "normal"
at = 0.1
[[faults]]
action = "set_sensitive"
target = "ring"
at = 0.2
[[faults]]
action = "replace_seq_tracer"
at = 0.3
[seq_trace]
tracer = "t"
"""


@pytest.mark.parametrize("mode", ["nonsmp", "smp"])
def test_a_fault_that_waits_holds_only_the_faults_of_its_own_group_or_tracer(mode):
    """The kill waits until the workload is over; the faults on the ring
    and on the seq tracer come at their time (one controller carried them
    all out one after the other: they came after the kill, 0.8 s late)."""
    out = execute(_scenario(HELD), mode=mode)
    kill, sensitive, seq = out.summary["faults"]
    assert kill["effect"]["survived"] == 0 and kill["done_at"] >= 0.9, kill
    for f in (sensitive, seq):
        assert f["took"] is True, f
        assert f["planned_at"] <= f["started_at"] < f["done_at"] < kill["done_at"], f
    assert sensitive["effect"]["marked"] == 1


def test_lanes_follow_a_tracer_line_or_a_group():
    from smp.app.fault_plan import _lanes

    sc = {"seq_trace": {"tracer": "t"}, "system_monitor": {"monitor": "m"}, "system_profile": None}
    faults = [
        {"action": "kill_tracer", "target": "t"},
        {"action": "replace_monitor", "target": None},
        {"action": "replace_seq_tracer", "target": None},  # t's line: the role t holds
        {"action": "kill_processes", "target": "pp"},
        {"action": "kill_tracer", "target": "m"},
        {"action": "set_sensitive", "target": "pp"},
    ]
    events = [(0.1 * i, f, 0, None) for i, f in enumerate(faults)]
    plan = [(at, i, f["action"], ()) for i, (at, f, _k, _r) in enumerate(events)]
    lanes = _lanes(plan, events, sc)
    assert [[e[1] for e in lane] for lane in lanes] == [[0, 2], [1, 4], [3, 5]]


def test_a_fault_that_found_fewer_processes_than_its_count_says_so():
    """``count = 5`` on a group of two said "2 killed", as if five were asked
    and two were all it took."""
    from smp.app.fault_report import _fault_line

    f = {
        "action": "kill_processes", "target": "pp", "count": 5, "planned_at": 0.2,
        "done_at": 0.207, "took": True, "result": "ok", "late": False,
        "effect": {"killed": 2, "gone": 0, "survived": 0},
    }  # fmt: skip
    assert _fault_line(f).endswith("ok; 2 killed of the 5 asked: no other process of pp was alive")
    f["count"] = 2
    assert _fault_line(f).endswith("ok; 2 killed")
    f.update(action="set_sensitive", count=3, effect={"marked": 1})
    assert _fault_line(f).endswith("1 marked of the 3 asked: no other process of pp was alive")
