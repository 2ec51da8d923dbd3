"""smp-only invariants, on 1, 2 and 4 schedulers: every message accounted
for, per-tracee order at every tracer, timestamps strictly increasing in
queue order, and no message lost when the run ends."""

from __future__ import annotations

import pytest

import smp
from smp import Atom as A
from smp.core.clock import ts_to_us

pytestmark = pytest.mark.timeout(90)


async def pinger(proc, peers, n):
    for i in range(n):
        for peer in peers:
            await proc.send(peer, (A("ping"), proc.pid, i))


async def sink(proc):
    while True:
        await proc.receive()


def test_order_timestamps_and_counts(smp_vm):
    vm = smp_vm
    tracers = [vm.spawn_collector(scheduler=k) for k in range(1, vm.nsched + 1)]
    sinks = [vm.spawn(sink) for _ in range(3)]
    senders = [vm.spawn(pinger, sinks, 40) for _ in range(2 * vm.nsched)]
    for i, p in enumerate(senders):
        assert vm.trace(p, True, ["send", "timestamp"], tracer=tracers[i % len(tracers)]) == 1
    for s in sinks:
        vm.trace(s, True, ["receive", "timestamp"], tracer=tracers[0])
    vm.run(timeout=60)
    everything = []
    for t in tracers:
        msgs = vm.messages(t)
        everything += msgs
        # per-tracee order: each sender's sends arrive in the order it made them
        for p in senders:
            seq = [(m[3][2], m[5]) for m in msgs if m[1] == p and m[2] == A("send")]
            if seq:
                assert [x[0] for x in seq] == sorted(x[0] for x in seq)
                assert [x[0] for x in seq][:3] == [0, 0, 0]  # one ping to each of 3 sinks first
        # timestamps strictly increase at each tracer when they come from one tracee
        for p in senders + sinks:
            bad = [m for m in msgs if m[1] == p and type(m[-1]) is not tuple]
            assert not bad, bad[:3]
            ts = [ts_to_us(m[-1]) for m in msgs if m[1] == p]
            assert ts == sorted(ts) and len(set(ts)) == len(ts)
    # timestamps are unique system-wide: taken one by one in queue order
    all_ts = [ts_to_us(m[-1]) for m in everything]
    assert len(set(all_ts)) == len(all_ts)
    n_send = 2 * vm.nsched * 40 * 3
    assert sum(1 for m in everything if m[2] == A("send")) == n_send
    assert sum(1 for m in everything if m[2] == A("receive")) == n_send
    s = vm.statistics()
    assert s.made == s.delivered + s.dropped + s.queued
    assert s.made == 2 * n_send and s.delivered == 2 * n_send and s.queued == 0


async def flood(proc, to, n):
    for i in range(n):
        await proc.send(to, i)


@pytest.mark.parametrize("rep", range(3))
def test_no_loss_at_exit(rep):
    """Close the emulator while schedulers are still sending: every message a
    scheduler made is accepted by the dispatcher (explicit hand-over)."""
    vm = smp.Emulator(mode="smp", schedulers=2)
    try:
        t = vm.spawn(sink)
        s = vm.spawn(sink)
        for _ in range(4):
            p = vm.spawn(flood, s, 100_000)
            vm.trace(p, True, ["send"], tracer=t)
        with pytest.raises(smp.EmulatorTimeout, match="not quiet"):
            vm.run(timeout=0.5)
    finally:
        vm.close()
    made_by_schedulers = sum(b["made"] for b in vm.final_statistics.values())
    d = vm.final_dispatcher_statistics
    assert made_by_schedulers > 0
    assert d["made"] == made_by_schedulers
    assert d["made"] == d["delivered"] + d["dropped"] + d["queued"]


async def hello(proc, peer):
    await proc.send(peer, (A("hi"), proc.pid))


def test_thousands_of_processes_per_scheduler(smp2):
    vm = smp2
    sink = vm.spawn_collector()
    pids = vm.spawn_many(hello, [(sink,)] * 4000)
    assert len(set(pids)) == 4000
    vm.run(timeout=60)
    got = vm.messages(sink)
    assert sorted(m[1] for m in got) == sorted(pids)
    assert vm.statistics().processes == 1  # only the collector is left
