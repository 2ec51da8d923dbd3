"""A fault carried out long after its time, or not by the end of the
workload, did not come while the run did: its entry says ``late``, its line says
``LATE`` and the run's invariants fail, whatever ``may_fail`` says, so that
``stress`` does not say all is well (it said "all invariants hold", exit 0,
with 14 of its 20 faults carried out after its 3 s workload)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers import PING_PONG_T

from smp.app.cli import cli
from smp.app.fault_report import FAULT_LATE_S, fault_failures, fault_notes, fault_report
from smp.app.fault_steps import FAULT_REC
from smp.core.terms import Atom as A

pytestmark = pytest.mark.timeout(120)


def _rec(planned_at: float, target: str, may_fail: bool = False) -> dict:
    return {
        "where": None,
        "action": "set_sensitive",
        "target": target,
        "victim": None,
        "replacement": None,
        "planned_at": planned_at,
        "may_fail": may_fail,
    }


def _done(idx: int, began: float, done: float) -> tuple:
    return (FAULT_REC, idx, int(began * 1e6), int(done * 1e6), A("ok"), [(A("marked"), 1)])


def test_a_fault_done_past_the_tolerance_or_not_by_the_end_of_the_workload_is_late():
    records = [
        _rec(0.1, "on_time"),
        _rec(0.2, "held", may_fail=True),  # may_fail excuses not taking, not lateness
        _rec(0.3, "never_done"),
        _rec(0.9, "cut_short"),  # the workload was over 0.3 s after its time only
    ]
    log = [
        _done(0, 0.1, 0.1 + FAULT_LATE_S - 0.01),
        _done(1, 0.25, 0.2 + FAULT_LATE_S + 0.01),
    ]
    faults = fault_report(records, log, {}, not_fired_after=1.2)
    assert [f["late"] for f in faults] == [False, True, True, False]
    assert [f["late_s"] for f in faults] == [round(FAULT_LATE_S - 0.01, 3), 0.51, None, None]
    assert faults[1]["took"] is True and faults[2]["took"] is None
    assert "after its time, over the 0.5 s tolerance" in faults[1]["late_why"]
    assert "not carried out by 1.200 s" in faults[2]["late_why"]
    summary = {"faults": faults}
    # no invariant failure: how late a fault comes depends on the machine
    assert fault_failures(summary) == []
    # the lines of --json (only what went wrong): the two late ones, each saying so
    short = fault_notes(summary, every=False)
    assert len(short) == 2 and all("LATE: " in line for line in short), short
    assert "fault set_sensitive held at 0.2 s (done at 0.710 s, LATE: done 0.510 s" in short[0]
    assert "LATE" not in fault_notes(summary)[0]


LATE = (
    """
name = "late"
mode = "nonsmp"
seed = 3
[duration]
seconds = 1.0
"""
    + PING_PONG_T
    + """
# exit(Pid, normal) leaves a process that does not trap exits alive: the
# controller waits for its 'EXIT' until the pair ends with the workload
[[faults]]
action = "kill_processes"
target = "pp"
reason = "normal"
at = 0.1
"""
)


def test_stress_says_when_its_faults_do_not_come_while_the_workload_runs(tmp_path):
    """It said all invariants hold, and nothing else, of a run whose faults
    came after its workload.  A late fault is said beside the invariants,
    not as one of them: how late it comes depends on the machine."""
    sc = tmp_path / "late.toml"
    sc.write_text(LATE)
    r = CliRunner().invoke(cli, ["stress", str(sc), "--faults", "0", "--duration", "1"])
    assert r.exit_code == 0, r.output
    assert "1 of 1 fault events were late" in r.stdout and "all invariants hold" in r.stdout
    assert "kill_processes pp at 0.1 s" in r.stderr and "LATE: " in r.stderr
    r = CliRunner().invoke(cli, ["stress", str(sc), "--faults", "0", "--duration", "1", "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    (f,) = s["faults"]
    assert f["late"] is True and s["invariants"]["ok"]


def test_the_report_page_says_a_fault_was_late():
    from smp.app.report import _fault_result, _stress_section

    late = {"at": 0.2, "action": "set_sensitive", "target": "pp", "took": True}
    late.update(result="ok", late=True, late_why="done 0.9 s after its time")
    assert _fault_result(late) == "ok (LATE: done 0.9 s after its time)"
    page = _stress_section({"faults": [late, dict(late, late=False, late_why=None)]})
    assert "2 of 2 took; 1 were carried out late" in page
