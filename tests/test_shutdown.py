"""Shutdown at any moment leaves no process behind: a normal end, an
exception in the code driving the emulator, a crash in a workload, and
Ctrl-C at random moments of start-up and of a run, many times over."""

from __future__ import annotations

import random

import psutil
import pytest
from helpers import ctrl_c_timer

import smp
from smp import Atom as A

pytestmark = pytest.mark.timeout(120)


async def busy_loop(proc, peer):
    i = 0
    while True:
        await proc.send(peer, i)
        i += 1


async def crasher(proc):
    raise ZeroDivisionError("workload bug")


def children() -> set[int]:
    out = set()
    for c in psutil.Process().children(recursive=True):
        try:
            if c.status() != psutil.STATUS_ZOMBIE:
                out.add(c.pid)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.mark.parametrize("mode,n", [("nonsmp", 1), ("smp", 2)])
def test_normal_end_and_exceptions_leave_nothing(mode, n):
    before = children()
    for _ in range(3):
        with smp.Emulator(mode=mode, schedulers=n) as vm:
            t = vm.spawn_collector()
            p = vm.spawn(crasher)  # a workload bug: that process dies
            vm.trace(p, True, ["procs"], tracer=t)
            vm.run()
            assert vm.messages(t)[0][2] == A("exit")
        assert children() == before
        with pytest.raises(RuntimeError, match="driver bug"):
            with smp.Emulator(mode=mode, schedulers=n) as vm:
                vm.spawn(busy_loop, vm.spawn_collector())
                raise RuntimeError("driver bug")
        assert children() == before


@pytest.mark.parametrize("mode,n", [("nonsmp", 1), ("smp", 2)])
def test_ctrl_c_at_random_moments_leaves_nothing(mode, n):
    rng = random.Random(1234)
    before = children()
    interrupted = 0
    for _ in range(8):
        timer = ctrl_c_timer(rng.uniform(0.0, 0.4))
        try:
            timer.start()
            with smp.Emulator(mode=mode, schedulers=n) as vm:
                sink = vm.spawn_collector()
                vm.spawn(busy_loop, sink)
                vm.run(timeout=30)  # never quiet: only Ctrl-C ends it
        except KeyboardInterrupt:
            interrupted += 1
        finally:
            timer.join()
        assert children() == before
    assert interrupted == 8


_SAY_BYE_AND_EXIT = """
import sys, zmq
from smp.wire.protocol import Bye
ctx = zmq.Context()
s = ctx.socket(zmq.DEALER)
s.setsockopt(zmq.ROUTING_ID, b"s1")
s.connect(sys.argv[1])
s.send(Bye(1, {"made": 7}).encode())
s.close(linger=2000)
ctx.term()
"""


def test_a_goodbye_sent_as_the_scheduler_exits_is_taken(tmp_path):
    """The controller waits for each scheduler's goodbye (its last counts)
    while the scheduler's process lives; a goodbye the process sent just
    before it exited can still be on its way when the process is gone.  The
    controller reads its socket once more for it: here the process is
    reaped before the controller has read anything."""
    import itertools
    import subprocess
    import sys
    import time

    import zmq

    from smp.link import FrameLog, SchedulerLinks, TimeBounds

    ctx = zmq.Context()
    links = SchedulerLinks(ctx, None, 1, itertools.count(), TimeBounds(), FrameLog(), False)
    try:
        addr = f"ipc://{tmp_path}/ctl"
        links.sock.bind(addr)
        links.ident[1], links.by_ident[b"s1"] = b"s1", 1
        subprocess.run([sys.executable, "-c", _SAY_BYE_AND_EXIT, addr], check=True, timeout=30)
        started = time.monotonic()
        links.await_byes([1], started + 5.0, lambda: False)  # its process is gone
        assert links.byes == {1: {"made": 7}}
        assert time.monotonic() - started < 1.0
        # with nobody left to say one, the last look is all it waits
        links.byes.clear()
        started = time.monotonic()
        links.await_byes([1], started + 5.0, lambda: False)
        assert links.byes == {} and time.monotonic() - started < 1.0
    finally:
        links.sock.close(linger=0)
        ctx.term()
