"""A trace BIF a process calls blocks only what 17.x blocks for it.

``trace(Pid, ...)``, ``trace_info(Pid, ...)``, ``seq_trace:set_system_tracer``,
``system_monitor`` and ``system_profile`` take the tracee's locks or the
tracer state's lock and never wait for the dispatcher's queue
(erl_bif_trace.c blocks thread progress only for ``trace(all | existing,
...)`` and ``trace_pattern``), so a process calling them completes while
the dispatcher takes nothing.  A BIF
from the Python API still takes effect on every scheduler before any
process runs."""

from __future__ import annotations

import os
import time

import pytest

import smp
from dispatcher.server import MAX_QUEUE
from smp import Atom as A
from tests.test_time_bounds import FifoReader, bif_caller, closed_in_time, flood

pytestmark = pytest.mark.timeout(180)


FLAGS_SEND = (A("flags"), [A("send")])


async def lock_only_caller(proc, report_to, tracee, tracer, seq, monitor, profiler):
    """Each lock-only BIF once, each result reported as it comes."""
    await proc.send(report_to, await proc.trace(tracee, True, [A("send"), (A("tracer"), tracer)]))
    await proc.send(report_to, await proc.trace_info(tracee, "flags"))
    await proc.send(report_to, await proc.set_system_seq_tracer(seq))
    await proc.send(report_to, await proc.system_monitor(monitor, [(A("long_gc"), 1000)]))
    await proc.send(report_to, await proc.system_profile(profiler, [A("exclusive")]))


async def idle(proc):
    await proc.receive()


def stall(vm, port) -> list:
    """Two processes flood ``port`` (a FIFO nobody reads) until the dispatcher
    takes no more batches; returns them."""
    sink = vm.spawn_collector(scheduler=1)
    floods = [vm.spawn(flood, sink, scheduler=k) for k in (1, 2)]
    for p in floods:
        vm.trace(p, True, ["send"], tracer=port)
    deadline = time.monotonic() + 60
    while True:  # the port stalls: the dispatcher takes no more batches
        assert vm.run_for(0.5) is False
        st = vm.statistics()
        if st.queued >= MAX_QUEUE and st.in_transit > 0:
            return floods
        assert time.monotonic() < deadline, st


def test_lock_only_bifs_of_a_process_complete_while_the_dispatcher_takes_nothing(tmp_path):
    fifo = tmp_path / "stalled.trc"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    vm = smp.Emulator(mode="smp", schedulers=2)
    try:
        port = vm.open_trace_port("file", str(fifo))
        got = vm.spawn_collector(scheduler=1)
        tracer, seq, monitor, profiler = (vm.spawn_collector(scheduler=2) for _ in range(4))
        tracee = vm.spawn(idle, scheduler=2)
        vm.trace(vm.spawn(idle, scheduler=1), True, ["receive"], tracer=tracer)  # marked
        floods = stall(vm, port)
        vm.spawn(lock_only_caller, got, tracee, tracer, seq, monitor, profiler, scheduler=2)
        t0 = time.monotonic()
        while len(vm.messages(got)) < 5 and time.monotonic() - t0 < 10:
            vm.run_for(0.5)
        # every one answered although nothing the schedulers sent since the
        # stall reached the dispatcher (a BIF waiting for the queue would
        # have been put back, run after run)
        assert vm.messages(got) == [1, FLAGS_SEND, A("false"), A("undefined"), A("undefined")]
        assert vm.statistics().in_transit > 0
        for p in floods:
            vm.exit(p, A("kill"))
        reader.go()
        vm.run(timeout=60)
        # the changes took: the state at the dispatcher, the flags at the tracee
        assert vm.get_system_seq_tracer() == seq
        assert vm.system_monitor() == (monitor, [(A("long_gc"), 1000)])
        assert vm.system_profile() == (profiler, [A("exclusive")])
        assert vm.trace_info(tracee, "tracer") == (A("tracer"), tracer)
        assert vm.trace_info(tracee, "flags") == (A("flags"), [A("send")])
    finally:
        reader.go()
        closed_in_time(vm)
        reader.thread.join(30)


def test_a_bif_held_by_the_push_back_does_not_hold_the_bifs_of_other_processes(tmp_path):
    """A BIF that waits for the dispatcher's queue (get_system_seq_tracer)
    is put back run after run while the dispatcher is pushed back: behind
    the BIFs other processes called meanwhile, which are answered (the
    fault controller's kill_tracer waited 1.5 s behind a register/2 so)."""
    fifo = tmp_path / "stalled.trc"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    vm = smp.Emulator(mode="smp", schedulers=2)
    try:
        port = vm.open_trace_port("file", str(fifo))
        got, held = vm.spawn_collector(scheduler=1), vm.spawn_collector(scheduler=1)
        tracer, seq, monitor, profiler = (vm.spawn_collector(scheduler=2) for _ in range(4))
        tracee = vm.spawn(idle, scheduler=2)
        vm.trace(vm.spawn(idle, scheduler=1), True, ["receive"], tracer=tracer)  # marked
        floods = stall(vm, port)
        waiter = vm.spawn(bif_caller, held, 1, scheduler=1)
        assert vm.run_for(0.5) is False  # its BIF waits for the queue: put back
        vm.spawn(lock_only_caller, got, tracee, tracer, seq, monitor, profiler, scheduler=2)
        t0 = time.monotonic()
        while len(vm.messages(got)) < 5 and time.monotonic() - t0 < 15:
            vm.run_for(0.5)
        assert vm.messages(got) == [1, FLAGS_SEND, A("false"), A("undefined"), A("undefined")]
        # the first BIF is still waiting, not failed
        assert vm.messages(held) == [] and vm.is_alive(waiter)
        assert vm.statistics().in_transit > 0
        for p in floods:
            vm.exit(p, A("kill"))
        reader.go()
        vm.run(timeout=60)
        assert vm.messages(held) == [seq]
    finally:
        reader.go()
        closed_in_time(vm)
        reader.thread.join(30)


async def set_then_report(proc, report_to, seq):
    await proc.send(report_to, await proc.set_system_seq_tracer(seq))


async def read_seq_tracer(proc, report_to):
    await proc.send(report_to, await proc.bif("get_system_seq_tracer"))


def test_a_process_change_is_everywhere_by_the_next_run_and_the_api_before_any_process():
    with smp.Emulator(mode="smp", schedulers=2) as vm:
        got = vm.spawn_collector(scheduler=1)
        s1, s2 = vm.spawn_collector(scheduler=1), vm.spawn_collector(scheduler=2)
        vm.hold_dispatcher()  # nothing dispatched: the BIF waits for no queue
        vm.spawn(set_then_report, got, s1, scheduler=2)
        vm.run()
        assert vm.messages(got) == [A("false")]
        assert vm.get_system_seq_tracer() == s1
        # from the API: every scheduler sees it before any process runs
        assert vm.set_system_seq_tracer(s2) == s1
        for k in (1, 2):
            vm.spawn(read_seq_tracer, got, scheduler=k)
        vm.run()
        assert vm.messages(got)[1:] == [s2, s2]
        vm.release_dispatcher()
        vm.run()


async def ask_on(proc, tracee):
    """One BIF after the other, as a fault's steps call them."""
    while True:
        await proc.trace_info(tracee, "flags")


def test_a_bif_still_waiting_when_the_run_s_time_is_up_is_answered_before_run_returns():
    """Whichever call the caller's last slice made, the run has answered it
    by the time run_for returns (served once every scheduler has paused,
    when the loop had no pass left for it): between runs the caller is
    never found waiting for an answer, where it waited for the next run's
    resume and a pass of its loop under load."""
    with smp.Emulator(mode="smp", schedulers=2) as vm:
        tracee = vm.spawn(idle, scheduler=1)
        caller = vm.spawn(ask_on, tracee, scheduler=2)
        for _ in range(5):
            assert vm.run_for(0.1) is False
            assert vm.process_info(caller)["status"] == "runnable"
        vm.exit(caller, A("kill"))
        vm.run()
        assert vm.is_alive(caller) is False
