"""Timers in the simulator: a ``receive`` timeout and a port's busy spell.

The simulator has no clock: a timer shorter than ``after_timeout`` ms may
fire at any point while it is armed (the thread ``T<pid>`` or ``T#Port<n.n>``),
a longer one never.  A message that wakes the process first cancels the
timeout, so the explorer plans the order where the timer fires first (the
race is never seen as two executed events).  Each test checks what an
exploration found against brute force or against the real processes.
"""

from __future__ import annotations

import random
import re

import pytest
from test_sim_api import _conflict_kinds, _random_traces

from smp.app.explore.proof import prove
from smp.core.terms import Atom
from smp.sim import Explorer, brute_force, explore, replay
from smp.sim.deps import RULES, conflicting, explain
from smp.sim.dpor import all_executions
from smp.sim.explorer import world_factory
from smp.sim.world import NonsmpWorld, SimError

A = Atom


async def waiter(proc, t, ms):
    m = await proc.receive(timeout=ms)
    await proc.send(t, (A("got"), A("timeout") if m is None else m))


async def poker(proc, w, how):
    if how == "send":
        await proc.send(w, A("hello"))
    elif how == "kill":
        await proc.exit(w, A("kill"))


def _waiting(ms=10, how="send", places=(1, 1, 2)):
    def setup(vm):
        t = vm.spawn_collector(scheduler=places[0], name="T")
        w = vm.spawn(waiter, t, ms, scheduler=places[1], name="W")
        vm.spawn(poker, w, how, scheduler=places[2], name="K")

    return setup


def _got(r) -> set:
    return {dict(g.outcome.received)["T"] for g in r.outcomes}


@pytest.mark.parametrize("dpor", ["optimal", "source"])
def test_a_timeout_races_with_the_message_that_would_end_it(dpor):
    r = Explorer(_waiting(), schedulers=2, nonsmp=True, dpor=dpor).run()
    assert r.exhausted
    assert _got(r) == {("{got,hello}",), ("{got,timeout}",)}
    assert r.executions == brute_force(_waiting(), 2)["traces"]
    # nonsmp's one order fires a timer only when nothing else can run
    assert r.nonsmp.received == (("T", ("{got,hello}",)),)


def test_a_timeout_at_or_over_the_limit_never_fires():
    r = explore(_waiting(ms=10), schedulers=2, after_timeout=10)
    assert _got(r) == {("{got,hello}",)}
    r = explore(_waiting(ms=10), schedulers=2, after_timeout=11)
    assert ("{got,timeout}",) in _got(r)


def test_a_timeout_alone_fires_once_nothing_else_can_run():
    """A process whose receive has a timeout under the limit is not left
    waiting: its timer is a thread that steps (in nonsmp too)."""
    r = explore(_waiting(how="none"), schedulers=2)
    assert _got(r) == {("{got,timeout}",)}
    assert not any(g.outcome.violations for g in r.outcomes)
    assert r.nonsmp.received == (("T", ("{got,timeout}",)),)


def test_a_kill_that_cancels_the_timer_is_raced_with_it():
    r = explore(_waiting(how="kill"), schedulers=2, nonsmp=False)
    assert _got(r) == {(), ("{got,timeout}",)}
    assert r.executions == brute_force(_waiting(how="kill"), 2)["traces"]


def test_the_timer_thread_replays_and_a_wrong_one_is_refused():
    r = explore(_waiting(), schedulers=2, nonsmp=False)
    for g in r.outcomes:
        ex = replay(_waiting(), g.first.schedule, schedulers=2)
        assert ex.outcome == g.outcome
        assert ex.schedule == g.first.schedule
    fired = next(g for g in r.outcomes if "T<" in g.first.schedule)
    t = next(s for s in fired.first.schedule.split() if s.startswith("T<"))
    with pytest.raises(SimError, match="cannot step now"):
        replay(_waiting(), t, schedulers=2)  # before the process waited: no timer armed


def test_after_timeout_is_checked():
    for bad in (-1, 1.5, "10", 10**9):
        with pytest.raises(SimError, match="after_timeout"):
            Explorer(_waiting(), after_timeout=bad)


async def busy_user(proc, t, gap):
    port = await proc.open_port("busy", busy_ms=5)
    await proc.port_command(port, A("a"))
    if gap:
        await proc.yield_()  # the slice ends: the busy spell may end here
    await proc.port_command(port, A("b"))
    await proc.send(t, A("done"))


def _busy(gap: bool, where: int = 2, traced: bool = True):
    def setup(vm):
        t = vm.spawn_collector(scheduler=1, name="T")
        u = vm.spawn(busy_user, t, gap, scheduler=where, name="U")
        vm.system_monitor(t, [A("busy_port")])
        if traced:
            vm.trace(u, True, ["send"], tracer=t)

    return setup


def _busy_ports(r) -> set:
    return {sum("busy_port" in m for m in dict(g.outcome.received)["T"]) for g in r.outcomes}


def test_a_busy_spell_ends_before_or_after_the_next_command():
    """The second command finds the port busy (busy_port, the caller
    suspended until the spell ends) or free: both when a slice ends between
    the two commands, only busy when they run in one slice."""
    r = explore(_busy(True), schedulers=2)
    assert r.exhausted and _busy_ports(r) == {0, 1}
    r = explore(_busy(False), schedulers=2)
    assert _busy_ports(r) == {1}
    # (one scheduler, untraced: few enough interleavings for the brute force)
    small = _busy(True, where=1, traced=False)
    r = explore(small, schedulers=1)
    assert _busy_ports(r) == {0, 1}
    assert r.executions == brute_force(small, 1)["traces"]


def test_nonsmp_ends_a_busy_spell_only_when_nothing_else_can_run():
    w = NonsmpWorld()
    from smp.sim.vm import SimVM

    _busy(True)(SimVM(w))
    w.run()
    got = w.proc(next(p for p, n in w.names.items() if n == "T")).kept
    assert sum(type(m) is tuple and m[2] == A("busy_port") for m in got) == 1
    w.dispose()


@pytest.mark.parametrize(
    "setup", [_waiting(), _waiting(how="kill"), _busy(True)], ids=["send", "kill", "busy"]
)
def test_every_conflict_of_a_timer_has_a_rule(setup):
    traces = []
    for _s, w in all_executions(world_factory(setup, 2, 200), 2000):
        traces.append(list(w.trace))
        w.dispose()
    seen = _conflict_kinds(traces)
    assert any("timer" in k for k in seen)
    assert {r.kinds for r in RULES if "timer" in r.kinds} >= {k for k in seen if "timer" in k}
    # and a timer's event and an unrelated scheduler's are independent
    for ev in traces:
        for a in ev:
            for b in ev:
                if a.kind == "timer" and b.kind == "dispatch":
                    assert not conflicting(a, b), explain(a, b)


def _generated(rng: random.Random):
    places = [rng.randint(1, 2) for _ in range(3)]
    how = rng.choice(["send", "kill", "none"])
    ms = rng.choice([0, 10, 2000])
    return _waiting(ms, how, places), f"{how} ms={ms} at {places}"


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("dpor", ["optimal", "source"])
def test_generated_timer_programs_explore_one_execution_per_trace(seed, dpor):
    setup, desc = _generated(random.Random(seed))
    bf = brute_force(setup, 2, limit=20_000)
    assert bf["interleavings"] < 20_000, desc
    r = Explorer(setup, schedulers=2, nonsmp=False, blocked_ok=True, dpor=dpor).run()
    assert r.executions == bf["traces"], (desc, r.executions, r.blocked, bf)
    assert len(r.outcomes) == bf["outcomes"], desc
    if dpor == "optimal":
        assert r.blocked == 0, desc


@pytest.mark.parametrize("setup", [_waiting(), _busy(True)], ids=["receive", "busy"])
def test_every_timer_outcome_is_the_same_on_real_processes(setup):
    r = explore(setup, schedulers=2, nonsmp=False)
    assert any(" T" in " " + g.first.schedule for g in r.outcomes)
    for g in r.outcomes:
        proof = prove(setup, g.first.schedule, schedulers=2)
        assert proof.same, (g.first.schedule, proof.mismatches)


async def commander(proc, t):
    port = await proc.receive()
    for i in range(2):
        await proc.port_command(port, (A("cmd"), i))
    await proc.send(t, A("done"))


async def opener(proc, t, driver):
    port = await proc.open_port(driver, **({"busy_ms": 5} if driver == "busy" else {}))
    await proc.send((await proc.receive())[1], port)
    while True:
        await proc.send(t, await proc.receive())


def _remote(driver: str):
    """A port opened on scheduler 2, commanded from scheduler 1."""

    def setup(vm):
        t = vm.spawn_collector(scheduler=1, name="T")
        c = vm.spawn(commander, t, scheduler=1, name="C")
        o = vm.spawn(opener, t, driver, scheduler=2, name="O", keep=True)
        vm.spawn(poker_with, o, (A("who"), c), scheduler=2, name="K")
        vm.system_monitor(t, [A("busy_port")])

    return setup


async def poker_with(proc, to, msg):
    await proc.send(to, msg)


def test_a_command_to_a_port_of_another_scheduler_is_explored_and_proved():
    """The command travels to the port's scheduler and its caller waits for
    the answer; a busy port answers "try again" when its spell ends, and
    the caller is told busy_port.  The echo reaches the owner before or
    after the caller's next message, and every outcome is the same on real
    processes."""
    r = explore(_remote("echo"), schedulers=2)
    assert r.exhausted and not any(g.outcome.violations for g in r.outcomes)
    orders = {dict(g.outcome.received)["T"] for g in r.outcomes}
    assert ("done", "{#Port<O:1>,{data,{cmd,0}}}", "{#Port<O:1>,{data,{cmd,1}}}") in orders
    assert ("{#Port<O:1>,{data,{cmd,0}}}", "{#Port<O:1>,{data,{cmd,1}}}", "done") in orders
    for g in r.outcomes:
        proof = prove(_remote("echo"), g.first.schedule, schedulers=2)
        assert proof.same, (g.first.schedule, proof.mismatches)
    r = explore(_remote("busy"), schedulers=2)
    assert r.exhausted and not any(g.outcome.violations for g in r.outcomes)
    busy = [g for g in r.outcomes if any("busy_port" in m for m in dict(g.outcome.received)["T"])]
    free = [g for g in r.outcomes if g not in busy]
    assert busy and free
    for g in (busy[0], free[0]):
        proof = prove(_remote("busy"), g.first.schedule, schedulers=2)
        assert proof.same, (g.first.schedule, proof.mismatches)
    _conflict_kinds(_random_traces(world_factory(_remote("busy"), 2, 200), 200))


def test_trace_delivered_with_a_timeout_gives_up_only_in_smp():
    """The catalogue's race: the answer waits in the dispatcher's queue
    behind the tracee's messages, so the caller's 100 ms timeout may fire
    first, and the tracer hears timeout before, between or after them; done
    comes after both; nonsmp answers at once."""
    from smp.sim.catalogue import by_name

    race = by_name("trace_delivered_with_a_timeout")
    r = explore(race.setup, schedulers=race.schedulers)
    got = [dict(g.outcome.received)["T"] for g in r.outcomes]
    assert {t.index("timeout") for t in got if "timeout" in t} == {0, 1, 2}
    assert all(t.index("done") == 2 for t in got if "done" in t)
    assert dict(r.nonsmp.received)["T"][-1] == "done"
    # the answer a caller gave up on is dropped or reaches it dead
    fates = {f for g in r.outcomes for _m, f in g.outcome.fates if "C" in f}
    assert fates == {"delivered C", "arrived_dead C", "dropped receiver_dead (C)"}, fates
    r = explore(race.setup, schedulers=race.schedulers, after_timeout=100)
    assert {dict(g.outcome.received)["T"][-1] for g in r.outcomes} == {"done"}


def test_the_report_names_the_timer_a_message_cancelled():
    from smp.sim import format_report

    text = format_report(explore(_waiting(), schedulers=2))
    assert "took the work of T<" in text and "(W's timer), which never stepped" in text
    assert "TW<" not in text and "RW<" not in text  # a thread's name keeps its spelling
    assert "the receive timeout of W<" in text and "fires (after 10 ms)" in text


async def closer(proc, t):
    port = await proc.open_port("busy", busy_ms=5)
    await proc.port_command(port, A("a"))
    await proc.port_close(port)
    await proc.yield_()
    await proc.send(t, A("x"))


def test_a_closed_port_has_no_busy_spell_to_end():
    """Closing a busy port disarms its timer (the close wakes whoever waited
    for the spell): no T thread is left to step, in either build."""

    def setup(vm):
        t = vm.spawn_collector(scheduler=1, name="T")
        vm.spawn(closer, t, scheduler=1, name="U")

    r = explore(setup, schedulers=1)
    assert r.executions == 1 == len(r.outcomes)
    assert "T#Port" not in r.outcomes[0].first.schedule
    with pytest.raises(SimError, match="cannot step now"):
        replay(setup, "S1 S1 T#Port<0.3>", schedulers=1)


def test_a_malformed_port_timer_is_refused_with_the_spelling_of_one():
    """The list of threads a refused schedule prints spells a port's timer
    as the replay commands do (``T#Port<0.5>``), not ``T<0.5>``, which is
    no thread."""
    with pytest.raises(SimError, match="is not a thread") as e:
        replay(_busy(True), "T#Port<0.5", schedulers=2)
    assert "T#Port<" in str(e.value) and "T<port>" not in str(e.value)
    with pytest.raises(SimError, match="is not a thread"):
        replay(_busy(True), "T<0.5>", schedulers=2)


def test_a_timer_thread_that_cannot_step_says_why_and_a_long_thread_name_keeps_the_columns():
    with pytest.raises(
        SimError, match=r"no timer of <0\.\d+\.0> is armed here under after_timeout"
    ):
        replay(_waiting(), "S2 T<0.84.0>", schedulers=2)
    r = explore(_busy(True), schedulers=2)
    lines = [ln for g in r.outcomes for ln in g.first.events]
    assert any("T#Port<" in ln for ln in lines)
    # in each execution's list, every event's text starts in one column
    for g in r.outcomes:
        starts = {re.match(r" *\d+\. +\S+  ", ln).end() for ln in g.first.events}
        assert len(starts) == 1, (starts, g.first.events)
