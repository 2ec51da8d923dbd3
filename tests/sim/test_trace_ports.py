"""Tracer ports in the simulator: a file, ip, memory or null port of the
dispatcher is a sink that keeps what the dispatcher writes to it, in queue
order; an outcome lists it by its role, in smp and in nonsmp, and a proof
reads back a memory port of the real dispatcher."""

from __future__ import annotations

import pytest
from classes import classes

from smp.app.explore.proof import prove
from smp.core.errors import BadArg, TracePortError
from smp.core.terms import Atom
from smp.sim import explore

A = Atom


async def pinger(proc, to, n):
    for i in range(n):
        await proc.send(to, (A("ping"), i))


async def seq_pinger(proc, to):
    await proc.seq_trace("label", 7)
    await proc.seq_trace("send", True)
    for i in range(2):
        await proc.send(to, (A("ping"), i))


async def set_seq_tracer(proc, new):
    await proc.bif("set_system_seq_tracer", new)


def _sent_to_port(kind="file", n=2):
    def setup(vm):
        port = vm.open_trace_port(kind, "x.trace", name="F")
        sink = vm.spawn_collector(scheduler=2, name="sink")
        p = vm.spawn(pinger, sink, n, scheduler=1, name="P")
        vm.trace(p, True, ["send"], tracer=port)

    return setup


def _received(g, role):
    return dict(g.outcome.received)[role]


@pytest.mark.parametrize("kind", ["file", "ip", "memory", "null"])
def test_a_tracer_port_keeps_what_the_dispatcher_writes_in_order(kind):
    r = explore(_sent_to_port(kind), schedulers=2)
    assert r.exhausted and len(r.outcomes) == 1
    (g,) = r.outcomes
    want = ("{trace,P,send,{ping,0},sink}", "{trace,P,send,{ping,1},sink}")
    assert _received(g, "F") == want
    assert all(f == "delivered F" for _m, f in g.outcome.fates)
    assert dict(r.nonsmp.received)["F"] == want


def test_the_port_is_the_seq_tracer_a_process_replaces():
    """SEQTRACE messages go to the seq tracer of dispatch time: a port, then
    a collector a process makes the seq tracer, split in every way the
    queue allows (as seq_tracer_replaced with two collectors)."""

    def setup(vm):
        port = vm.open_trace_port("memory", name="F")
        t2 = vm.spawn_collector(scheduler=1, name="T2")
        sink = vm.spawn_collector(scheduler=2, name="sink")
        vm.spawn(seq_pinger, sink, scheduler=1, name="P")
        vm.spawn(set_seq_tracer, t2, scheduler=2, name="R")
        vm.set_system_seq_tracer(port)

    r = explore(setup, schedulers=2)
    splits = {(len(_received(g, "F")), len(_received(g, "T2"))) for g in r.outcomes}
    assert {(2, 0), (1, 1), (0, 2)} <= splits, splits
    for g in r.outcomes:
        proof = prove(setup, g.first.schedule, schedulers=2)
        assert proof.same, (g.first.schedule, proof.mismatches)
        assert proof.ports == 1


def test_a_port_is_named_by_its_role_or_its_number():
    def setup(vm):
        a = vm.open_trace_port("null")
        vm.open_trace_port("memory", name="M")
        p = vm.spawn(pinger, vm.spawn_collector(name="sink"), 1, name="P")
        vm.trace(p, True, ["send"], tracer=a)

    r = explore(setup, schedulers=2)
    roles = {role for g in r.outcomes for role, _ in g.outcome.received}
    assert roles == {"#Port<trace:1>", "M", "sink"}


def test_a_bad_kind_is_refused():
    def bad_kind(vm):
        vm.open_trace_port("disk")

    with pytest.raises(TracePortError, match=r"unknown trace port kind 'disk' \(kinds: file, "):
        explore(bad_kind, schedulers=2)


async def port_tracer(proc, t, p, n):
    """Opens an echo port, makes it ``p``'s tracer, tells ``p`` to go and
    forwards the first ``n`` things the driver echoes to ``t``, then exits
    (its port closes)."""
    port = await proc.open_port("echo")
    await proc.trace(p, True, [A("send"), (A("tracer"), port)])
    await proc.send(p, A("go"))
    for _ in range(n):
        await proc.send(t, await proc.receive())


async def pinger_on_go(proc, to, n):
    await proc.receive()
    for i in range(n):
        await proc.send(to, (A("ping"), i))


def _process_port_tracer(vm):
    t = vm.spawn_collector(scheduler=1, name="T")
    sink = vm.spawn_collector(scheduler=2, name="sink")
    p = vm.spawn(pinger_on_go, sink, 2, scheduler=1, name="P")
    vm.spawn(port_tracer, t, p, 1, scheduler=2, name="O")


def test_a_port_a_process_opened_is_a_tracer_explored_and_proved():
    """The dispatcher hands a message for a port a process opened to the
    port's scheduler, which writes it to the driver: the second message
    races with the port's close (its opener exits) and is written, reaches
    a closed port, or is dropped at dispatch; each outcome is the same on
    real processes."""
    r = explore(_process_port_tracer, schedulers=2)
    assert r.exhausted and not r.violations and r.blocked == 0
    second = {
        dict(g.outcome.fates)["TRACE P -> #Port<O:1> {trace,P,send,{ping,1},sink}"]
        for g in r.outcomes
    }
    assert second == {
        "delivered #Port<O:1>",
        "arrived_dead #Port<O:1>",
        "dropped port_closed (#Port<O:1>)",
    }
    # what the driver echoed, forwarded to T: the bytes shown as the term
    # they hold, whose pids are named by role (as numbers, smp's and
    # nonsmp's differ, and nonsmp's verdict said "smp only")
    want = ("{#Port<O:1>,{data,term_to_binary({trace,P,send,{ping,0},sink})}}",)
    assert all(_received(g, "T") == want for g in r.outcomes)
    assert dict(r.nonsmp.received)["T"] == want
    for g in r.outcomes:
        proof = prove(_process_port_tracer, g.first.schedule, schedulers=2)
        assert proof.same, (g.first.schedule, proof.mismatches)


def test_only_a_binary_that_is_one_whole_term_is_shown_as_the_term():
    from smp.sim.outcome import _format

    shown = _format((b"\x83\x00", b"\x83h\x02a\x01a", b"abc", [b"\x83a\x05"]), False)
    assert shown == '{<<131,0>>,<<131,104,2,97,1,97>>,<<"abc">>,[term_to_binary(5)]}'
    # deeper than Python recurses: shown, as format_term shows it, and a
    # binary that holds such a term too
    from smp.wire.etf import encode

    deep: object = ()
    for _ in range(5000):
        deep = (deep,)
    assert _format(deep, False) == "{" * 5001 + "}" * 5001
    nested: list = []
    for _ in range(3000):
        nested = [nested]
    assert _format((encode(nested),), False).startswith("{term_to_binary([[[")


def test_a_trace_port_is_refused_as_a_tracee_in_one_line():
    def setup(vm):
        port = vm.open_trace_port("memory", name="F")
        vm.trace(port, True, ["send"], tracer=vm.spawn_collector(name="T"))

    with pytest.raises(BadArg, match=r"#Port<0\.\d+> is a trace port and cannot be traced"):
        explore(setup, schedulers=2)


async def port_user(proc, t, n):
    """Opens an echo port, traces it to ``t`` and commands it ``n`` times."""
    port = await proc.open_port("echo")
    await proc.trace(port, True, [A("ports"), A("running_ports"), (A("tracer"), t)])
    for i in range(n):
        await proc.port_command(port, (A("cmd"), i))
    await proc.send(t, A("done"))


def _traced_port(vm):
    t = vm.spawn_collector(scheduler=2, name="T")
    vm.spawn(port_user, t, 2, scheduler=1, name="U")


def test_a_port_a_process_traces_is_explored_and_each_outcome_proved():
    """``trace(Port, ...)`` from a process: the port's running_ports and
    ports events reach a tracer on the other scheduler, in every order the
    SMP build allows with the user's own message, and each outcome is the
    same on real processes."""
    r = explore(_traced_port, schedulers=2)
    assert r.exhausted and not r.violations
    got = [_received(g, "T") for g in r.outcomes]
    assert all(any(",in," in m or ",out," in m for m in ms) for ms in got), got
    assert len(r.outcomes) > 1  # ("done" against the port's messages)
    for g in r.outcomes:
        proof = prove(_traced_port, g.first.schedule, schedulers=2)
        assert proof.same, (g.first.schedule, proof.mismatches)


@pytest.mark.parametrize("setup", [_traced_port, _process_port_tracer], ids=["traced", "tracer"])
def test_every_class_random_schedules_meet_with_a_process_port_is_explored(setup):
    """A port a process opened, traced or a tracer; too many interleavings
    for the brute force: 300 random schedules' Mazurkiewicz traces are
    among the search's, which Source-DPOR finds too, and every conflict
    met in them has a rule with the seed's reason."""
    import random

    from smp.sim.deps import conflicting, explain
    from smp.sim.dpor import mazurkiewicz_key
    from smp.sim.explorer import world_factory

    nw = world_factory(setup, 2, 200)

    found, blocked, _ = classes(nw, True)
    explored = set(found)
    assert blocked == 0 and explored == set(classes(nw, False)[0])
    rng, met = random.Random(5), set()
    for _ in range(300):
        w = nw()
        while en := w.enabled():
            w.step(rng.choice(en))
        met.add(mazurkiewicz_key(w.trace))
        for j, b in enumerate(w.trace):
            for a in w.trace[:j]:
                if a.thread != b.thread and conflicting(a, b):
                    assert not any("no rule" in x for x in explain(a, b)), explain(a, b)
        w.dispose()
    assert len(met) > 1 and met <= explored, len(met - explored)
