"""Behaviour that is the nonsmp build's own (the seed's ``#ifndef ERTS_SMP``
branches): tracer looked up at once, fake schedule pairs after a heavy port
write, ``profile_send``, ``exiting_reset`` at once, the node's clock.  The smp
counterparts are pinned beside them where the difference is the point."""

from __future__ import annotations

import pytest
from helpers import assert_increasing, check_counts, mfa

import smp
from smp.core.terms import A

T, TS = A.trace, A.trace_ts


@pytest.fixture
def nonsmp():
    with smp.Emulator(mode="nonsmp") as emulator:
        yield emulator


async def waiter(proc):
    await proc.receive()


async def chatter(proc, to, n):
    for i in range(n):
        await proc.send(to, i)
    await proc.receive()


async def short_lived(proc):
    return None


async def big_garbage(proc):
    await proc.allocate(20000)


async def self_gc(proc):
    await proc.allocate(20000)
    await proc.receive()


# ---------------------------------------------------------------- dead tracer
def test_dead_tracer_resets_tracee_and_makes_nothing(nonsmp):
    vm = nonsmp
    tracer = vm.spawn(waiter)
    sink = vm.spawn_collector()
    p = vm.spawn(chatter, sink, 3)
    vm.trace(p, True, ["send"], tracer=tracer)
    vm.exit(tracer, "kill")
    vm.run()
    s = check_counts(vm)
    assert s.made == 0
    assert s.suppressed == 1  # the first send found it dead
    assert s.suppressed_by_reason == {"receiver_dead": {"TRACE": 1}}
    assert vm.trace_info(p, "flags") == (A.flags, [])
    assert vm.trace_info(p, "tracer") == (A.tracer, [])
    assert vm.messages(sink) == [0, 1, 2]


def test_dead_tracer_smp_reset_when_scheduled_in(smp2):
    """The smp counterpart: the tracee keeps its flags until it is next
    scheduled in (``erts_check_my_tracer_proc``), then loses them."""
    vm = smp2
    tracer = vm.spawn(waiter, scheduler=1)
    sink = vm.spawn_collector(scheduler=1)
    p = vm.spawn(chatter_on_go, sink, 3, scheduler=2)
    vm.trace(p, True, ["send"], tracer=tracer)
    vm.run()  # p waits for go
    vm.exit(tracer, "kill")
    vm.run()  # the tracer is gone; p not scheduled
    vm.spawn(go, p, scheduler=1)
    vm.run()
    s = check_counts(vm)
    assert s.made == 0 and s.tracer_checks_reset == 1
    assert vm.trace_info(p, "flags") == (A.flags, [])
    assert vm.messages(sink) == [0, 1, 2]


async def chatter_on_go(proc, to, n):
    await proc.receive()
    for i in range(n):
        await proc.send(to, i)
    await proc.receive()


async def go(proc, to):
    await proc.send(to, A.go)


async def forever(proc):
    while True:
        await proc.receive()


def test_tracer_without_tracer_mark():
    """A live tracer pid without the tracer mark is no tracer: the tracee is
    reset and nothing is made (``ERTS_GET_TRACER_REF``).  The public API
    always marks the tracer it installs, so this drives a nonsmp ``Node``
    directly, in the test process."""
    from schedulers.engine import Node
    from smp.core.flags import F_TRACE_SEND, F_TRACER

    node = Node(sched_id=1, nsched=1, smp=False)
    tracer = node.spawn_local(node.new_pid(), waiter, (), kept=True)
    sink = node.spawn_local(node.new_pid(), forever, (), kept=True)
    p = node.spawn_local(node.new_pid(), chatter, (sink.pid, 2))
    p.flags |= F_TRACE_SEND
    p.tracer = tracer.pid
    assert not tracer.flags & F_TRACER
    while node.run_some():
        pass
    s = node.stats.as_dict()
    assert s["made"] == 0
    assert s["suppressed_by_reason"] == {"not_tracer": {"TRACE": 1}}
    assert p.tracer is None and p.flags == 0
    assert tracer.kept == [] and sink.kept == [0, 1]
    # with the mark the same tracer is one
    tracer.flags |= F_TRACER
    q = node.spawn_local(node.new_pid(), chatter, (sink.pid, 1))
    q.flags |= F_TRACE_SEND
    q.tracer = tracer.pid
    while node.run_some():
        pass
    assert tracer.kept == [(T, q.pid, A.send, 0, sink.pid)]


async def gc_then_forward(proc, report):
    await proc.allocate(20000)  # its own long_gc: never reported to itself
    while True:
        await proc.send(report, await proc.receive())


def test_system_monitor_not_told_about_itself(nonsmp):
    vm = nonsmp
    report = vm.spawn_collector()
    mon = vm.spawn(gc_then_forward, report)
    vm.system_monitor(mon, [("long_gc", 1)])
    vm.run()
    other = vm.spawn(big_garbage)
    vm.run()
    s = check_counts(vm)
    assert s.suppressed_by_reason == {"sender_is_receiver": {"SYSMON": 1}}
    assert [m[:3] for m in vm.messages(report)] == [(A.monitor, other, A.long_gc)]


def test_system_profile_not_told_about_itself(nonsmp):
    vm = nonsmp
    prof = vm.spawn_collector()
    vm.system_profile(prof, ["runnable_procs"])
    w = vm.spawn(short_lived)
    vm.run()
    msgs = vm.messages(prof)
    assert [m[:4] for m in msgs] == [
        (A.profile, w, A.active, mfa(short_lived)),
        (A.profile, w, A.inactive, mfa(short_lived)),
    ]
    s = check_counts(vm)
    assert s.suppressed_by_reason.get("sender_is_receiver", {}).get("SYSPROF", 0) >= 1


def test_profile_send_to_port(nonsmp):
    vm = nonsmp
    port = vm.open_trace_port("memory")
    vm.system_profile(port, ["runnable_procs"])
    w = vm.spawn(short_lived)
    vm.run()
    terms = vm.trace_port_terms(port)
    assert [m[:4] for m in terms] == [
        (A.profile, w, A.active, mfa(short_lived)),
        (A.profile, w, A.inactive, mfa(short_lived)),
    ]
    assert_increasing([m[4] for m in terms])
    s = check_counts(vm)
    assert s.delivered_by_type == {"SYSPROF": 2}


# ---------------------------------------------------------------- heavy port writes
async def pinger(proc, to):
    await proc.send(to, A.ping)
    await proc.send(to, A.pong)


def test_fake_schedule_pair_after_heavy_write(nonsmp):
    vm = nonsmp
    port = vm.open_trace_port("memory", heavy_every=1)
    sink = vm.spawn_collector()
    p = vm.spawn(pinger, sink)
    vm.trace(p, True, ["running", "timestamp", "send"], tracer=port)
    vm.run()
    terms = vm.trace_port_terms(port)
    f = mfa(pinger, 1)
    shapes = [m[:-1] for m in terms]
    # 'in' may itself get a fake pair (in is not an out message);
    # each send does; 'out' never does
    assert shapes == [
        (TS, p, A["in"], f),
        (TS, p, A.out, 0),
        (TS, p, A["in"], 0),
        (TS, p, A.send, A.ping, sink),
        (TS, p, A.out, 0),
        (TS, p, A["in"], 0),
        (TS, p, A.send, A.pong, sink),
        (TS, p, A.out, 0),
        (TS, p, A["in"], 0),
    ]
    stamps = [m[-1] for m in terms]
    # the fake out carries the real message's timestamp, the fake in a new one
    for i in (0, 3, 6):
        assert stamps[i + 1] == stamps[i]
        assert stamps[i + 2] > stamps[i + 1]
    s = check_counts(vm)
    assert s.fake_schedule_pairs == 3


def test_no_fake_pair_without_timestamp(nonsmp):
    vm = nonsmp
    port = vm.open_trace_port("memory", heavy_every=1)
    sink = vm.spawn_collector()
    p = vm.spawn(pinger, sink)
    vm.trace(p, True, ["running", "send"], tracer=port)
    vm.run()
    assert vm.trace_port_terms(port) == [
        (T, p, A["in"], mfa(pinger, 1)),
        (T, p, A.send, A.ping, sink),
        (T, p, A.send, A.pong, sink),
    ]
    assert check_counts(vm).fake_schedule_pairs == 0


def test_smp_heavy_write_gives_no_fake_pair(smp2):
    vm = smp2
    port = vm.open_trace_port("memory", heavy_every=1)
    sink = vm.spawn_collector()
    p = vm.spawn(pinger, sink)
    vm.trace(p, True, ["running", "timestamp", "send"], tracer=port)
    vm.run()
    terms = vm.trace_port_terms(port)
    assert [m[:-1] for m in terms] == [
        (TS, p, A["in"], mfa(pinger, 1)),
        (TS, p, A.send, A.ping, sink),
        (TS, p, A.send, A.pong, sink),
    ]
    assert check_counts(vm).fake_schedule_pairs == 0


# ---------------------------------------------------------------- exiting_reset
def test_dying_seq_tracer_resets(nonsmp):
    vm = nonsmp
    st = vm.spawn(waiter)
    assert vm.set_system_seq_tracer(st) == A.false
    assert vm.get_system_seq_tracer() == st
    vm.exit(st, "kill")
    vm.run()
    assert vm.get_system_seq_tracer() == A.false


def test_dying_monitor_and_profiler_reset(nonsmp):
    vm = nonsmp
    mon = vm.spawn(waiter)
    prof = vm.spawn(waiter)
    vm.system_monitor(mon, ["busy_port", ("long_gc", 5)])
    vm.system_profile(prof, ["runnable_procs"])
    vm.exit(mon, "kill")
    vm.exit(prof, "kill")
    vm.run()
    assert vm.system_monitor() == A.undefined
    assert vm.system_profile() == A.undefined


def test_dying_default_tracer_resets(nonsmp):
    vm = nonsmp
    t = vm.spawn(waiter)
    vm.trace("new", True, ["send", "procs"], tracer=t)
    assert vm.trace_info("new", "tracer") == (A.tracer, t)
    vm.exit(t, "kill")
    vm.run()
    assert vm.trace_info("new", "flags") == (A.flags, [])
    assert vm.trace_info("new", "tracer") == (A.tracer, [])
    p = vm.spawn(waiter)
    assert vm.trace_info(p, "flags") == (A.flags, [])


def test_closed_trace_port_resets_seq_tracer(nonsmp):
    vm = nonsmp
    port = vm.open_trace_port("memory")
    vm.set_system_seq_tracer(port)
    vm.close_trace_port(port)
    assert vm.get_system_seq_tracer() == A.false


# ---------------------------------------------------------------- timestamps
async def many_sends(proc, to, n):
    for i in range(n):
        await proc.send(to, i)


def test_timestamps_strictly_increase(nonsmp):
    vm = nonsmp
    t = vm.spawn_collector()
    sink = vm.spawn_collector()
    p = vm.spawn(many_sends, sink, 50)
    vm.trace(p, True, ["send", "timestamp"], tracer=t)
    vm.run()
    msgs = vm.messages(t)
    assert len(msgs) == 50
    assert [m[:-1] for m in msgs] == [(TS, p, A.send, i, sink) for i in range(50)]
    assert_increasing([m[-1] for m in msgs])
    check_counts(vm)


def test_cpu_timestamp(nonsmp):
    vm = nonsmp
    t = vm.spawn_collector()
    sink = vm.spawn_collector()
    p = vm.spawn(many_sends, sink, 5)
    assert vm.trace("all", True, ["cpu_timestamp", "send", "timestamp"], tracer=t) == 2
    vm.run()
    msgs = [m for m in vm.messages(t) if m[1] == p]
    assert len(msgs) == 5
    stamps = [m[-1] for m in msgs]
    assert_increasing(stamps)
    # process CPU time: far below the wall clock's megaseconds
    assert stamps[0][0] == 0 and stamps[-1][1] < 1000
    check_counts(vm)
