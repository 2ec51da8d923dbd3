"""Tracer ports in the simulator: a file, ip, memory or null port of the
dispatcher is a sink that keeps what the dispatcher writes to it, in queue
order; an outcome lists it by its role, in smp and in nonsmp, and a proof
reads back a memory port of the real dispatcher."""

from __future__ import annotations

import pytest

from smp.app.explore.proof import prove
from smp.core.errors import BadArg
from smp.core.terms import Atom
from smp.sim import explore
from smp.sim.world import SimError

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


def test_a_bad_kind_and_a_process_port_as_tracer_are_refused():
    def bad_kind(vm):
        vm.open_trace_port("disk")

    with pytest.raises(BadArg, match="trace port kind must be one of file, ip, null, memory"):
        explore(bad_kind, schedulers=2)

    async def opener(proc, t):
        port = await proc.open_port("echo")
        await proc.trace(t, True, [A("send"), (A("tracer"), port)])
        await proc.send(t, A("x"))

    def process_port(vm):
        t = vm.spawn(pinger, vm.spawn_collector(name="sink"), 1, name="T", keep=True)
        vm.spawn(opener, t, name="O")

    with pytest.raises(SimError, match="a port a process opened, as a tracer: not simulated"):
        explore(process_port, schedulers=1)


def test_tracing_a_port_is_refused_in_one_line():
    def setup(vm):
        port = vm.open_trace_port("memory", name="F")
        vm.trace(port, True, ["send"], tracer=vm.spawn_collector(name="T"))

    with pytest.raises(BadArg, match=r"tracing a port \(trace\(Port, \.\.\.\)\) is not simulated"):
        explore(setup, schedulers=2)
