"""smp-only: the races between the dispatcher's queue and the tracer state,
made deterministic by holding the dispatcher while messages queue up."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from helpers import check_counts

import smp
from smp import Atom as A
from smp.emulator import smp_quiet

pytestmark = pytest.mark.timeout(60)


async def chain_sender(proc, to, n):
    await proc.seq_trace("label", 7)
    await proc.seq_trace("send", True)
    for i in range(n):
        await proc.send(to, (A("hop"), i))


async def waiter(proc):
    while True:
        msg = await proc.receive()
        if msg == A("stop"):
            return


async def sender(proc, to, n):
    for i in range(n):
        await proc.send(to, i)
    await proc.receive()  # stays alive, waiting to be woken


def test_seq_tracer_replaced_before_dispatch_gets_queued_messages(smp_vm):
    vm = smp_vm
    old, new, sink = vm.spawn_collector(), vm.spawn_collector(), vm.spawn_collector()
    assert vm.set_system_seq_tracer(old) == A("false")
    p = vm.spawn(chain_sender, sink, 3)
    vm.hold_dispatcher()
    vm.run()
    queued = vm.queued_messages()
    assert [to for (_f, to, _m) in queued] == [old, old, old]  # resolved now: the current tracer
    first = vm.statistics()
    assert first.queued == 3 and first.queue_peak >= 3
    assert vm.statistics().queue_peak == 3  # a new interval starts at the level now
    assert vm.set_system_seq_tracer(new) == old
    assert [to for (_f, to, _m) in vm.queued_messages()] == [new, new, new]
    vm.release_dispatcher()
    vm.run()
    assert vm.messages(old) == []
    assert vm.messages(new) == [
        (A("seq_trace"), 7, (A("send"), (0, i + 1), p, sink, (A("hop"), i))) for i in range(3)
    ]
    s = check_counts(vm)
    assert s.delivered_by_type["SEQTRACE"] == 3


async def gc_heavy(proc, report_to=None):
    await proc.receive()  # wait for 'go'
    await proc.allocate(30_000)
    await proc.garbage_collect()
    if report_to is not None:  # m2 becomes the monitor: pass on what it gets
        await proc.send(report_to, await proc.receive())


def test_monitor_replaced_before_dispatch_drops_event_from_new_monitor(smp2):
    vm = smp2
    m1, seen = vm.spawn_collector(), vm.spawn_collector()
    m2 = vm.spawn(gc_heavy, seen)  # will be the new monitor, makes a long_gc itself
    other = vm.spawn(gc_heavy)
    vm.system_monitor(m1, [(A("long_gc"), 1)])
    vm.hold_dispatcher()
    driver = vm.spawn(_go, [m2, other])
    vm.run()
    queued = vm.queued_messages()
    assert sorted((f, m[2]) for (f, _to, m) in queued if m[0] == A("monitor")) == sorted(
        [(m2, A("long_gc")), (other, A("long_gc"))]
    )
    prev = vm.system_monitor(m2, [(A("long_gc"), 1)])
    assert prev == (m1, [(A("long_gc"), 1)])
    vm.release_dispatcher()
    vm.run()
    assert vm.messages(m1) == []
    s = check_counts(vm)
    assert s.dropped_by_reason["sender_is_receiver"]["SYSMON"] == 1
    assert s.delivered_by_type["SYSMON"] == 1  # the event from 'other' reached m2
    assert vm.is_alive(driver) is False
    got = vm.messages(seen)
    assert [m[:3] for m in got] == [(A("monitor"), other, A("long_gc"))]
    assert got[0][3][0] == (A("timeout"), 3)  # 30,000 words at 10,000 words/ms


async def _go(proc, pids):
    for p in pids:
        await proc.send(p, A("go"))


def test_tracer_killed_with_messages_queued(smp_vm):
    vm = smp_vm
    tracer, sink = vm.spawn_collector(), vm.spawn_collector()
    p = vm.spawn(sender, sink, 5)
    assert vm.trace(p, True, ["send"], tracer=tracer) == 1
    vm.hold_dispatcher()
    vm.run()
    assert len(vm.queued_messages()) == 5
    vm.exit(tracer, A("kill"))
    vm.run()
    assert vm.is_alive(tracer) is False
    vm.release_dispatcher()
    vm.run()
    s = check_counts(vm)
    assert s.dropped_by_reason["receiver_dead"]["TRACE"] == 5
    assert vm.messages(sink) == [0, 1, 2, 3, 4]
    assert s.tracer_checks_reset == 0  # the tracee keeps its flags until scheduled in
    vm.spawn(_go, [p])
    vm.run()
    s = check_counts(vm)
    assert s.tracer_checks_reset == 1  # erts_check_my_tracer_proc at schedule-in
    assert s.delivered_by_type.get("TRACE", 0) == 0
    assert s.made_by_type["TRACE"] == 5


def test_run_returns_after_the_dispatcher_took_every_table_event(smp2):
    """A tracer's exit is a table event with no message in it.  run() must
    not call the emulator quiet before the dispatcher took it (only counting
    messages let it), or a release right after dispatches to a tracer the
    table still thinks alive.  The dispatcher is stopped while the tracer
    dies, so the event waits in its socket when the schedulers are quiet."""
    vm = smp2
    tracer, sink = vm.spawn_collector(), vm.spawn_collector()
    p = vm.spawn(sender, sink, 1)
    vm.trace(p, True, ["send"], tracer=tracer)
    vm.hold_dispatcher()
    vm.run()
    os.kill(vm.dispatcher_pid, signal.SIGSTOP)
    resume = threading.Timer(0.3, os.kill, (vm.dispatcher_pid, signal.SIGCONT))
    try:
        resume.start()
        vm.exit(tracer, A("kill"))
        vm.run()
    finally:
        resume.join()
    st = vm._disp_call("status")
    assert st["ingested_items"] == [
        0,
        *(s["sys_items"] for _, s in sorted(vm._all_scheds("status").items())),
    ]
    vm.release_dispatcher()
    vm.run()
    assert check_counts(vm).dropped_by_reason["receiver_dead"]["TRACE"] == 1


def _statuses(made, items, ingested, ingested_items, held=False):
    sched = {
        "peer_sent": [0, 0, 0],
        "peer_recv": [0, 0, 0],
        "sys_made": made,
        "sys_items": items,
        "deliveries": 0,
    }
    disp = {
        "ingested": [0, ingested, 0],
        "ingested_items": [0, ingested_items, 0],
        "held": held,
        "queued": 0,
        "dispatching": False,
        "delivered_to": [0, 0, 0],
    }
    other = {**sched, "sys_made": 0, "sys_items": 0}
    return {1: sched, 2: other}, disp


@pytest.mark.parametrize("held", [False, True])
def test_quiet_waits_for_a_table_event_with_no_message(held):
    """Scheduler 1 made 5 messages and then sent an exit (6 items); the
    dispatcher took the 5 messages but not yet the exit: not quiet."""
    sts, d = _statuses(made=5, items=6, ingested=5, ingested_items=5, held=held)
    assert smp_quiet(sts, d, [1, 2]) is False
    sts, d = _statuses(made=5, items=6, ingested=5, ingested_items=6, held=held)
    assert smp_quiet(sts, d, [1, 2]) is True


async def busy_worker(proc, n):
    for _ in range(n):
        await proc.sleep(0)


def test_profiler_killed_scheduler_messages_dropped_quietly_runnable_clears(smp2):
    """After the profiler dies, exiting_reset sets it to NIL and leaves the
    options for the dispatcher: profile_scheduler messages (from NIL) then
    match ``from == receiver`` and are dropped quietly; the first runnable
    event (from a pid) fails and clears the options (sys_msg_disp_failure)."""
    vm = smp2
    prof = vm.spawn_collector()
    vm.system_profile(prof, [A("runnable_procs"), A("scheduler")])
    vm.hold_dispatcher()
    vm.spawn(busy_worker, 3)
    vm.run()
    queued = [m for (_f, _t, m) in vm.queued_messages()]
    assert queued and all(m[0] == A("profile") for m in queued)
    made_before_kill = check_counts(vm).made_by_type["SYSPROF"]
    vm.exit(prof, A("kill"))
    vm.spawn(busy_worker, 3)
    vm.run()
    assert vm.system_profile() == A("undefined")
    s = check_counts(vm)
    # the options are still on until the dispatcher meets a failure
    assert s.made_by_type["SYSPROF"] > made_before_kill
    held = [m for (_f, _t, m) in vm.queued_messages()]
    first_runnable = next(i for i, m in enumerate(held) if m[1] != A("scheduler"))
    vm.release_dispatcher()
    vm.run()
    s = check_counts(vm)
    dropped = s.dropped_by_reason
    n_sched = sum(1 for m in held if m[1] == A("scheduler"))
    assert dropped["nil_sender_nil_receiver"]["SYSPROF"] == n_sched
    assert dropped["no_receiver"]["SYSPROF"] == len(held) - n_sched
    assert first_runnable < len(held)
    assert s.delivered_by_type.get("SYSPROF", 0) == 0
    # cleared: nothing more is made
    made = s.made_by_type["SYSPROF"]
    vm.spawn(busy_worker, 3)
    vm.run()
    assert check_counts(vm).made_by_type["SYSPROF"] == made


def test_hold_needs_smp():
    with smp.Emulator(mode="nonsmp") as vm:
        with pytest.raises(smp.SmpError, match="needs smp mode"):
            vm.hold_dispatcher()
