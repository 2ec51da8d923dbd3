"""Proof on real processes: every outcome the simulator finds for a workload
runs again on a fresh smp emulator (real scheduler and dispatcher processes,
their ZeroMQ sockets), stepped event by event, with the same fates
(``smp.app.explore.proof``).

Each catalogue race is explored exhaustively and every distinct outcome's
schedule is proved; the outcomes the real processes produce are then
counted apart, from what they did, and must number what the catalogue
says.  The shipped run examples the simulator runs (``churn``, whose fault
process kills and replaces tracers through BIFs, ``default``, ``stress``,
``seqtrace``, ``long``) are proved the same way, up to 10 executions each.  Two
workloads whose processes behave differently in a scheduler process than
in the simulator show that a proof can fail, at the step or at the end.
"""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from helpers import FUZZ_HEAD

import smp
from smp.app.cli import cli
from smp.app.explore.proof import prove
from smp.app.explore.simulate import SimOptions, simulate
from smp.app.explore.workload import Bounds
from smp.core.terms import Atom
from smp.sim import catalogue, explore
from smp.sim.nodes import collector


def _real_outcome(p) -> tuple:
    """An outcome as the real processes made it: each message's fate and
    what each collector received."""
    return (
        tuple(sorted((m, real) for m, (_sim, real) in p.fates.items())),
        tuple(sorted((who, repr(real)) for who, (_sim, real) in p.received.items())),
    )


@pytest.mark.parametrize("race", catalogue.CATALOGUE, ids=lambda r: r.name)
def test_every_outcome_of_a_catalogue_race_is_the_same_on_real_processes(race):
    r = explore(race.setup, schedulers=race.schedulers, checks=race.checks)
    assert r.exhausted and r.cut_by == [] and len(r.outcomes) == race.outcomes
    real = set()
    for g in r.outcomes:
        p = prove(race.setup, g.first.schedule, schedulers=race.schedulers)
        assert p.same, p.mismatches
        assert p.schedule.startswith(g.first.schedule) and p.steps >= len(g.first.schedule.split())
        real.add(_real_outcome(p))
    assert len(real) == race.outcomes


#: the shipped run examples (``profile`` and ``everything`` trace to ports)
SIMULATED_EXAMPLES = ["churn", "default", "stress", "seqtrace", "long", "profile", "everything"]


# (ids not "stress": that keyword marks the opt-in stress tests)
@pytest.mark.parametrize("example", SIMULATED_EXAMPLES, ids=lambda e: f"example_{e}")
def test_a_run_example_s_outcomes_are_the_same_on_real_processes(example):
    text, data = simulate(
        example, SimOptions(Bounds(), max_executions=10, nonsmp=False, prove=True, events=False)
    )
    proofs = [od["proof"] for od in data["result"]["outcomes"]]
    assert proofs and all(p["same"] for p in proofs), [p["mismatches"] for p in proofs]
    assert text.count("the same on real processes") == len(proofs)
    if example == "churn":
        # the schedules serve BIFs (the fault's kill and retrace) and spawn tracers
        assert all(" R<" in p["schedule"] for p in proofs)


am_ping = Atom("ping")


async def _say_where(proc, to, home):
    # here in the simulator (this process), away in a scheduler process
    await proc.send(to, (am_ping, Atom("here" if os.getpid() == home else "away")))


async def _send_more_away(proc, to, home):
    await proc.send(to, am_ping)
    if os.getpid() != home:
        await proc.send(to, am_ping)


def _where_setup(vm):
    t = vm.spawn_collector(scheduler=2, name="T")
    sink = vm.spawn_collector(scheduler=2, name="sink")
    p = vm.spawn(_say_where, sink, os.getpid(), scheduler=1, name="P")
    vm.trace(p, True, ["send"], tracer=t)


def _more_setup(vm):
    t = vm.spawn_collector(scheduler=2, name="T")
    sink = vm.spawn_collector(scheduler=1, name="sink")
    p = vm.spawn(_send_more_away, sink, os.getpid(), scheduler=1, name="P")
    vm.trace(p, True, ["send"], tracer=t)


def test_a_proof_says_no_when_a_collector_receives_otherwise():
    p = prove(_where_setup, "", schedulers=2)
    assert not p.same
    assert any("sink received" in m for m in p.mismatches), p.mismatches
    sim, real = p.received["sink"]
    assert sim != real


def test_a_proof_says_no_when_a_tracer_port_is_written_otherwise():
    def setup(vm):
        f = vm.open_trace_port("file", "x.trace", name="F")
        sink = vm.spawn_collector(scheduler=2, name="sink")
        p = vm.spawn(_say_where, sink, os.getpid(), scheduler=1, name="P")
        vm.trace(p, True, ["send"], tracer=f)

    p = prove(setup, "", schedulers=2)
    assert not p.same and p.ports == 1
    assert any(m.startswith("F was written 1 message(s)") for m in p.mismatches), p.mismatches
    sim, real = p.received["F"]
    assert len(sim) == len(real) == 1 and sim != real


def test_a_proof_says_no_when_the_dispatcher_prints_otherwise():
    from smp.app.explore.proof import Proof, _compare_stderr
    from smp.sim.outcome import Namer

    line = "(no error logger present) error: oops\n"
    p = Proof("", 0)
    _compare_stderr(p, [line], [line], Namer({}))
    assert p.same
    _compare_stderr(p, [line], [], Namer({}))
    assert not p.same and "the dispatcher printed" in p.mismatches[0]


def test_a_proof_says_no_at_the_first_step_that_differs():
    p = prove(_more_setup, "", schedulers=2)
    assert not p.same
    first = p.mismatches[0]
    # the extra send: one more TRACE message made, one more signal, in P's slice
    assert first.startswith("step ") and "(S1)" in first, first
    assert "1 message(s) made" in first and "2 message(s) made" in first, first


def test_a_schedule_the_simulator_cannot_take_is_refused():
    race = catalogue.by_name("tracer_killed_with_messages_queued")
    with pytest.raises(Exception, match="cannot step now"):
        prove(race.setup, "D", schedulers=race.schedulers)


def test_a_schedule_that_is_no_string_or_names_a_missing_scheduler_is_refused_in_words():
    """``prove(setup, 5)`` raised an AttributeError from ``str.split``; a
    thread of a scheduler the workload does not have was "cannot step now"
    where ``explore`` names the scheduler."""
    race = catalogue.by_name("tracer_killed_with_messages_queued")
    with pytest.raises(smp.BadArg, match=r"schedule must be a string of thread names .* not int"):
        prove(race.setup, 5, schedulers=race.schedulers)
    with pytest.raises(smp.SmpError, match=r"'S9' names scheduler 9, of 2"):
        prove(race.setup, "S9", schedulers=race.schedulers)
    with pytest.raises(smp.sim.SimError, match=r"schedule must be a string of thread names"):
        smp.sim.replay(race.setup, ["S1"], schedulers=race.schedulers)


def test_explore_prove_on_the_command_line(tmp_path):
    r = CliRunner().invoke(cli, ["explore", "seq_tracer_replaced", "--prove", "--json"])
    assert r.exit_code == 0, r.output
    outcomes = json.loads(r.stdout)["result"]["outcomes"]
    assert len(outcomes) == 3 and all(od["proof"]["same"] for od in outcomes)
    (tmp_path / "r.json").write_text(r.output)
    r2 = CliRunner().invoke(
        cli, ["report", str(tmp_path / "r.json"), "-o", str(tmp_path / "r.html")]
    )
    assert r2.exit_code == 0, r2.output
    page = (tmp_path / "r.html").read_text()
    assert page.count("Proof on real processes: the same") == 3
    race = "tracer_killed_with_messages_queued"
    r = CliRunner().invoke(cli, ["explore", race, "--schedule", "S1 S1 S1 A1>2 S2", "--prove"])
    assert r.exit_code == 0, r.output
    assert "the execution: the same on real processes" in r.output


def test_explore_prove_exits_1_when_a_proof_fails(tmp_path, monkeypatch):
    # a race whose body behaves otherwise on real processes, by its name
    race = catalogue.Race("where", _where_setup, 2, "", 1, 1, "T", ())
    monkeypatch.setattr(catalogue, "CATALOGUE", (*catalogue.CATALOGUE, race))
    monkeypatch.setattr("smp.app.explore.simulate.CATALOGUE", catalogue.CATALOGUE)
    r = CliRunner().invoke(cli, ["explore", "where", "--prove", "--no-events"])
    assert r.exit_code == 1, r.output
    assert "DIFFERS on real processes" in r.output
    r = CliRunner().invoke(cli, ["explore", "where", "--prove", "--json"])
    assert r.exit_code == 1
    (tmp_path / "r.json").write_text(r.output)
    r2 = CliRunner().invoke(
        cli, ["report", str(tmp_path / "r.json"), "-o", str(tmp_path / "r.html")]
    )
    assert r2.exit_code == 0, r2.output
    assert "Proof on real processes: DIFFERS" in (tmp_path / "r.html").read_text()


def test_trace_all_takes_a_spawn_in_flight_on_real_processes():
    """P's spawn on scheduler 2 is still on its way when K's trace(all,
    false, ...) is served: 17.x blocks thread progress, so the child exists
    (and loses its inherited flags) before the clear; on real processes the
    BIF takes the signals first (``SmpBackend._signals_taken``), and the
    child runs untraced exactly as in the simulator."""
    race = catalogue.by_name("trace_all_false_racing_spawn")
    p = prove(race.setup, "S1 S2 R<0.87.0>", schedulers=race.schedulers)
    assert p.same, p.mismatches
    # the child ran on scheduler 2 right after the BIF, with no trace message
    assert p.schedule.startswith("S1 S2 R<0.87.0> S2")
    sim, real = p.received["T"]
    assert sim == real and len(real) == 2  # P's spawn and exit only


async def _spawn_and_set_seq_tracer(proc, report):
    child = await proc.spawn(collector, scheduler=2)
    try:
        old = await proc.set_system_seq_tracer(child)
        await proc.send(report, (Atom("ok"), old))
    except smp.Error as e:
        await proc.send(report, (Atom("error"), e.reason))


def _seq_tracer_just_spawned(vm):
    report = vm.spawn_collector(scheduler=1, name="report")
    vm.spawn(_spawn_and_set_seq_tracer, report, scheduler=1, name="S")


def _reports_everywhere(setup, report: str) -> None:
    """Every outcome of ``setup`` explored on 2 schedulers has its collector
    ``report`` receive ``report`` alone, and each is the same on real
    processes."""
    r = explore(setup, schedulers=2)
    assert r.exhausted
    got = {dict(g.outcome.received)["report"] for g in r.outcomes}
    assert got == {(report,)}, got
    for g in r.outcomes:
        p = prove(setup, g.first.schedule, schedulers=2)
        assert p.same, p.mismatches


def test_a_tracer_just_spawned_elsewhere_is_a_valid_seq_tracer_in_every_order():
    """17.x creates a process before spawn returns, so a seq tracer the caller
    just spawned on another scheduler is always valid.  The simulator, like
    the emulator's BIF, takes the spawn's signal and the new scheduler's
    stream first; no order answers badarg, on real processes either."""
    _reports_everywhere(_seq_tracer_just_spawned, "{ok,false}")
    with smp.Emulator("smp", schedulers=2) as vm:
        report = vm.spawn_collector(scheduler=1)
        vm.spawn(_spawn_and_set_seq_tracer, report, scheduler=1)
        vm.run(timeout=20)
        assert vm.messages(report) == [(Atom("ok"), Atom("false"))]


async def _kill_and_replace_seq_tracer(proc, old, new, report):
    await proc.exit(old, Atom("kill"))
    await proc.send(report, await proc.set_system_seq_tracer(new))


def _seq_tracer_killed_then_replaced(vm):
    t1 = vm.spawn_collector(scheduler=1, name="T1")
    t2 = vm.spawn_collector(scheduler=2, name="T2")
    report = vm.spawn_collector(scheduler=2, name="report")
    vm.set_system_seq_tracer(t1)
    vm.spawn(_kill_and_replace_seq_tracer, t1, t2, report, scheduler=2, name="K")


def test_an_old_seq_tracer_dead_at_its_scheduler_is_answered_as_the_seed_does():
    """K kills the seq tracer T1 and sets T2: served before the kill reaches
    T1 the call returns T1; after T1 died at its own scheduler, its exit not
    yet taken by the dispatcher, the seed's erts_trace_check_exiting has
    already cleared it and the call returns false.  The simulator answers as
    the emulator does (``smp.core.state.as_seed_sees``, one rule), and the
    real processes agree on both outcomes."""
    r = explore(_seq_tracer_killed_then_replaced, schedulers=2)
    got = sorted(dict(g.outcome.received)["report"] for g in r.outcomes)
    assert got == [("T1",), ("false",)], got
    for g in r.outcomes:
        p = prove(_seq_tracer_killed_then_replaced, g.first.schedule, schedulers=2)
        assert p.same, p.mismatches


am_EXIT = Atom("EXIT")


async def _kill_wait_and_ask(proc, old, tracee, report):
    await proc.process_flag("trap_exit", True)
    await proc.link(old)
    await proc.exit(old, Atom("kill"))
    await proc.receive(match=lambda m: type(m) is tuple and len(m) == 3 and m[0] is am_EXIT)
    await proc.send(report, await proc.trace_info(tracee, "tracer"))


def _tracer_killed_then_asked(vm):
    t1 = vm.spawn_collector(scheduler=1, name="T1")
    p = vm.spawn_collector(scheduler=2, name="P")
    vm.trace(p, True, ["receive"], tracer=t1)
    report = vm.spawn_collector(scheduler=2, name="report")
    vm.spawn(_kill_wait_and_ask, t1, p, report, scheduler=2, name="K")


def test_trace_info_of_a_tracee_whose_tracer_died_elsewhere_is_answered_as_the_seed_does():
    """K kills P's tracer T1 (on the other scheduler), waits for its
    'EXIT' and asks trace_info(P, tracer): the seed's trace_info_pid looks
    T1 up in the one process table and finds it gone, so the answer is
    ``[]`` in every order, also while P's scheduler has not yet taken the
    publication of T1's death (both answered T1 then).  The real processes
    agree."""
    _reports_everywhere(_tracer_killed_then_asked, "{tracer,[]}")


def test_prove_is_public():
    assert smp.prove is prove and "prove" in smp.__all__


def test_a_proof_cut_by_its_step_bound_is_not_the_same():
    race = catalogue.by_name("tracer_killed_with_messages_queued")
    p = prove(race.setup, "", schedulers=race.schedulers, max_steps=3)
    assert not p.same and p.steps == 3
    assert p.mismatches == ["not finished within 3 steps"]


def _reads_a_process(vm):
    t = vm.spawn_collector(scheduler=1, name="T")
    vm.is_alive(t)


def test_a_setup_that_reads_a_process_is_refused_in_one_line():
    with pytest.raises(smp.SmpError, match="cannot read a process's state"):
        prove(_reads_a_process, "", schedulers=2)


def test_a_stepped_emulator_refuses_what_it_cannot_do_and_still_closes():
    """A step with nothing behind it and a second stepping are refused with
    what was wrong; a running scheduler is never stepped; the emulator
    closes cleanly after."""
    from smp import Emulator
    from smp.core.errors import SmpError
    from smp.stepper import Stepper

    emu = Emulator("smp", schedulers=2)
    try:
        emu._all_scheds("resume")
        with pytest.raises((SmpError, smp.BadArg), match="paused smp scheduler"):
            emu._sched_call(1, "step", "begin", [])
        emu._all_scheds("pause")
        stepper = Stepper(emu)
        try:
            with pytest.raises((SmpError, smp.BadArg), match="holds no batch"):
                stepper.ingest(1)
            with pytest.raises((SmpError, smp.BadArg), match="holds no signal for scheduler 2"):
                stepper.arrive(1, 2)
            with pytest.raises((SmpError, smp.BadArg), match="not stepped yet"):
                emu._sched_call(2, "step", "begin", [])
        finally:
            stepper.close()
        emu.spawn(collector, scheduler=1)  # the emulator still works
    finally:
        emu.close()


async def _cast_to(proc, to):
    await proc.send(to, Atom("hi"))


def _two_tracees_one_run(vm):
    """P sends to Q on the same scheduler, both traced to T: P's send and
    Q's receive are made one after the other, to one tracer (one run)."""
    t = vm.spawn_collector(scheduler=2, name="T")
    q = vm.spawn_collector(scheduler=1, name="Q")
    p = vm.spawn(_cast_to, q, scheduler=1, name="P")
    vm.trace(q, True, ["receive"], tracer=t)
    vm.trace(p, True, ["send"], tracer=t)


def test_messages_of_two_tracees_in_one_run_prove_by_their_bodies():
    """The dispatcher gets a scheduler's consecutive TRACE messages to one
    tracer as one run under its first sender (it decides them by receiver
    alone, as sys_msg_dispatcher_func does); the proof tells each message
    by its body, so Q's receive is not taken for a message of P's."""
    r = explore(_two_tracees_one_run, schedulers=2)
    assert r.outcomes
    for g in r.outcomes:
        p = prove(_two_tracees_one_run, g.first.schedule, schedulers=2)
        assert p.same, p.mismatches
        assert len(p.fates) == 2


def _prove_scenario(text: str, schedule: str):
    """``prove`` of ``schedule`` on a run scenario's text, cut to one
    operation, instance and firing and a size of two."""
    from smp.app.explore.workload import Bounds, ScenarioWorkload
    from smp.app.scenario import parse_scenario

    wl = ScenarioWorkload(parse_scenario(text), Bounds(1, 1, 2, 1))
    return prove(wl.setup, schedule, schedulers=wl.schedulers)


#: a ring traced to t2 and a ping-pong pair, t2 killed and replaced: the
#: controller retraces the ring to the replacement while a ring member's
#: signal to the other scheduler is still held
_RETRACED_RING = (
    FUZZ_HEAD
    + """\
[[groups]]
name = "g0"
workload = "ping_pong"
trace = ["receive", "timestamp"]
tracer = "t1"
[[groups]]
name = "g1"
workload = "ring"
trace = ["send", "receive", "procs"]
tracer = "t2"
[seq_trace]
tracer = "sq"
[[faults]]
action = "kill_tracer"
target = "t2"
at = 0.2
replace = true
"""
)
_RETRACED_RING_SCHEDULE = (
    "S2 S1 A1>2 S2 A1>2 I2 S1 S1 S2 R<0.96.0> S1 I1 A2>1 I1 A1>2 I1 S1 D I1 A1>2 P2 D A0>1 A1"
    ">2 D S2 I2 I2 A1>2 I2 P2 A2>1 S2 D A1>2 A0>2 A2>1 I1 A0>2 P1 A1>2 S1 S1 I2 R<0.100.0> P2"
    " D A0>1 A1>2 S1 S2 I2 D P2 P1 D S2 P1 R<0.100.0> A2>1 P1 A2>1 D D A0>1 D I2 S1 S1 P1 R<0"
    ".100.0> P2 S1 I1 D A0>1 I1 I1 D D I1 D P1 P1 A1>2 P2 P2 P2 P1 A0>1 A0>1 A0>1"
)


def test_a_retrace_looks_the_old_tracer_up_at_its_own_scheduler_only():
    """A retrace finding its tracee held by the killed tracer asks whether
    that tracer is alive at its own scheduler (already_traced's
    erts_proc_lookup), taking none of the caller's signals first, in the
    simulator and on real processes alike (the real one took them, and the
    proof found the signal gone)."""
    p = _prove_scenario(_RETRACED_RING, _RETRACED_RING_SCHEDULE)
    assert p.same, p.mismatches


#: fan_in traced to t2 and a ping-pong pair to t1, t2 killed: the retrace
#: BIF takes a ping-pong signal pair on its way to pong's scheduler
_TAKEN_PAIR = (
    FUZZ_HEAD
    + """\
[[groups]]
name = "g0"
workload = "fan_in"
trace = ["receive"]
tracer = "t2"
[[groups]]
name = "g1"
workload = "ping_pong"
trace = ["send", "receive", "procs"]
tracer = "t1"
[system_monitor]
monitor = "mon"
long_gc = 1
[[faults]]
action = "kill_tracer"
target = "t2"
at = 0.05
"""
)
_TAKEN_PAIR_SCHEDULE = (
    "S2 S1 S1 I1 P2 P1 S2 S2 S2 S2 I2 A2>1 P1 P2 S2 S2 A1>2 D A1>2 S2 A2>1 S1 D I2 I1 A0>2 R<"
    "0.103.0> A1>2 A1>2 P2 I2 I2 D P1 I2 P2 D D P1 A0>1 A0>1 D A1>2 A0>1 A0>1 S2 I2 S2 S2 R<0"
    ".103.0> S1 I2 P2 D D P1 D S2 R<0.103.0> I2 D A0>1 S2 I1 A0>2 A0>1 A0>1 R<0.103.0> D D P2"
    " A0>1 D S2 A0>1 P1 I1 D"
)


def test_signals_a_bif_takes_make_one_batch_at_the_end_of_its_step():
    """A BIF that takes the signals on their way to a scheduler applies them
    in its step, and the scheduler's batch is cut once, at the step's end,
    as a stepped scheduler cuts it (the simulator cut one per signal, and
    the proof found one batch where it had two)."""
    p = _prove_scenario(_TAKEN_PAIR, _TAKEN_PAIR_SCHEDULE)
    assert p.same, p.mismatches


async def _crashes(proc):
    raise smp.Error(Atom("badarg"))


def test_what_the_dispatcher_prints_is_held_against_the_simulator_not_written(capfd):
    """A process that crashes makes an error-logger message no error_logger
    takes: sys_msg_disp_failure prints it.  A stepped dispatcher keeps the
    line rather than writing it, and the proof compares it with the
    simulator's."""
    from smp.sim.explorer import world_factory

    def setup(vm):
        vm.spawn(_crashes, scheduler=1, name="C")

    w = world_factory(setup, 2, 200)()
    while en := w.enabled():
        w.step(en[0])
    assert any("(no error logger present) error" in line for line in w.stderr), w.stderr
    w.dispose()
    p = prove(setup, "", schedulers=2)
    assert p.same, p.mismatches
    assert "no error logger present" not in capfd.readouterr().err
