"""A scheduler or the dispatcher killed with SIGKILL in the middle of a run:
noticed, reported, accounted for, and no process left behind."""

from __future__ import annotations

import os
import signal

import pytest

import smp
from smp import Atom as A

pytestmark = pytest.mark.timeout(60)


async def waiter(proc):
    await proc.receive()


async def watcher(proc, victim, report_to):
    await proc.process_flag("trap_exit", True)
    await proc.link(victim)
    await proc.send(report_to, A("linked"))
    await proc.send(report_to, await proc.receive())


async def traced_sender(proc, sink, killer, n):
    await proc.receive()  # 'go'
    for i in range(n):
        await proc.send(sink, i)
    await proc.send(killer, A("die"))


async def suicide(proc):
    await proc.receive()
    os.kill(os.getpid(), signal.SIGKILL)  # kills this scheduler's OS process


async def go(proc, pids):
    for p in pids:
        await proc.send(p, A("go"))


def test_scheduler_killed_mid_run():
    vm = smp.Emulator(mode="smp", schedulers=2)
    try:
        seen, sink = vm.spawn_collector(scheduler=1), vm.spawn_collector(scheduler=1)
        victim = vm.spawn(waiter, scheduler=2)
        tracer = vm.spawn_collector(scheduler=2)
        seqt = vm.spawn_collector(scheduler=2)
        vm.set_system_seq_tracer(seqt)
        vm.spawn(watcher, victim, seen, scheduler=1)
        killer = vm.spawn(suicide, scheduler=2)
        p = vm.spawn(traced_sender, sink, killer, 3, scheduler=1)
        vm.trace(p, True, ["send"], tracer=tracer)
        vm.run()
        assert vm.messages(seen) == [A("linked")]
        vm.hold_dispatcher()
        vm.spawn(go, [p], scheduler=1)
        with pytest.raises(smp.SchedulerLost, match=r"scheduler 2 \(os pid \d+ died by signal 9\)"):
            vm.run(timeout=20)
        assert 2 in vm.lost_schedulers
        # links fired, the seq tracer that lived there was reset
        assert vm.messages(seen) == [A("linked"), (A("EXIT"), victim, A("killed"))]
        assert vm.get_system_seq_tracer() == A("false")
        assert vm.is_alive(victim) is False
        vm.release_dispatcher()
        vm.run()
        s = vm.statistics()
        assert s.made == s.delivered + s.dropped + s.queued
        assert s.dropped_by_reason["scheduler_lost"]["TRACE"] == 4  # 3 to sink, 1 to the killer
        assert vm.messages(sink) == [0, 1, 2]
    finally:
        vm.close()


async def kill_dispatcher(proc, os_pid):
    await proc.receive()
    os.kill(os_pid, signal.SIGKILL)
    while True:
        await proc.sleep(1)


def test_dispatcher_killed_mid_run():
    vm = smp.Emulator(mode="smp", schedulers=2)
    try:
        t = vm.spawn_collector()
        k = vm.spawn(kill_dispatcher, vm.os_pids[0])
        vm.trace(k, True, ["receive"], tracer=t)
        vm.spawn(go, [k])
        with pytest.raises(smp.DispatcherLost, match=r"dispatcher \(os pid \d+\) died by signal 9"):
            vm.run(timeout=20)
    finally:
        vm.close()
    assert all(not p.is_alive() for p in vm._sup.procs)


async def spin_then_die(proc, peer):
    await proc.send(peer, A("ready"))
    await proc.receive()
    for _ in range(50_000):  # keep scheduler 2 active (and flushing)
        await proc.busy(0)
    os.kill(os.getpid(), signal.SIGKILL)


def test_lost_active_scheduler_reported_inactive_with_profile_scheduler_q():
    vm = smp.Emulator(mode="smp", schedulers=2)
    try:
        # a port profiler: a profiler process would wake its own scheduler
        # with every message it gets, and scheduler profiling never settles
        prof, seen = vm.open_trace_port("memory"), vm.spawn_collector(scheduler=1)
        victim = vm.spawn(spin_then_die, seen, scheduler=2)
        vm.run()
        vm.system_profile(prof, [A("scheduler")])
        vm.spawn(go, [victim], scheduler=1)
        with pytest.raises(smp.SchedulerLost):
            vm.run(timeout=20)
        msgs = vm.trace_port_terms(prof)
        mine = [m for m in msgs if m[2] == 2]
        # scheduler 2 went active, then is reported inactive by the dispatcher
        assert mine[0][:4] == (A("profile"), A("scheduler"), 2, A("active"))
        last = mine[-1]
        assert last[:4] == (A("profile"), A("scheduler"), 2, A("inactive"))
        counts = [m[4] for m in msgs]
        assert all(c >= 0 for c in counts) and counts[-1] == 0
        s = vm.statistics()
        assert s.made == s.delivered + s.dropped + s.queued
    finally:
        vm.close()


async def flood(proc, sink):
    i = 0
    while True:
        await proc.send(sink, i)
        i += 1


def test_dispatcher_lost_counts_what_the_schedulers_received():
    """Killed in the middle of a flood: DispatcherLost says how many messages
    are known delivered from what the schedulers took, not from a dispatcher
    status that a run never quiet did not ask for."""
    import re

    vm = smp.Emulator(mode="smp", schedulers=2)
    try:
        t = vm.spawn_collector(scheduler=1)
        p = vm.spawn(flood, vm.spawn_collector(scheduler=2), scheduler=2)
        vm.trace(p, True, ["send"], tracer=t)
        assert vm.run_for(1.0) is False
        got = len(vm.messages(t))
        assert got > 0
        os.kill(vm.os_pids[0], signal.SIGKILL)
        with pytest.raises(smp.DispatcherLost) as e:
            vm.run(timeout=20)
        m = re.search(
            r"(\d+) system message\(s\) made by the schedulers, (\d+) known "
            r"delivered \(the schedulers received them\), so up to (\d+) lost",
            str(e.value),
        )
        assert m, str(e.value)
        made, known, lost = map(int, m.groups())
        assert made >= known >= got and lost == made - known
    finally:
        vm.close()


def test_nonsmp_statistics_without_its_scheduler_say_so():
    """nonsmp's one scheduler holds every count: with it killed,
    statistics() raises SchedulerLost naming it (it raised IndexError, a
    traceback under SIGTERM)."""
    with smp.Emulator(mode="nonsmp", schedulers=1) as vm:
        os.kill(vm.os_pids[0], signal.SIGKILL)
        with pytest.raises(smp.SchedulerLost):
            vm.run(timeout=20)
        with pytest.raises(smp.SchedulerLost, match="scheduler 1"):
            vm.statistics()
