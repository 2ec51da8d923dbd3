"""Opt-in soak (``--run-stress``): ten minutes of traced ping-pong with tracer
churn; the memory of every process stays bounded.  ``SMP_SOAK_SECONDS`` sets
the length (default 600); the peak figures are printed for the README."""

from __future__ import annotations

import os
import time

import psutil
import pytest

import smp
from smp import Atom as A

pytestmark = [pytest.mark.stress, pytest.mark.timeout(3600)]

SECONDS = float(os.environ.get("SMP_SOAK_SECONDS", "600"))


async def pinger(proc, peer):
    i = 0
    while True:
        await proc.send(peer, (A("ping"), proc.pid, i))
        await proc.receive()
        i += 1


async def ponger(proc):
    while True:
        msg = await proc.receive()
        await proc.send(msg[1], A("pong"))


async def tracer(proc):
    while True:
        await proc.receive()


async def churn(proc, tracees, every_ms):
    """Every ``every_ms``: a new tracer takes over the tracees, the old one is killed."""
    old = None
    while True:
        new = await proc.spawn(tracer)
        flags = [A("send"), A("receive"), A("timestamp")]
        for p in tracees:
            if old is not None:  # one tracer per process: untrace first
                await proc.trace(p, False, flags)
            await proc.trace(p, True, flags + [(A("tracer"), new)])
        if old is not None:
            await proc.exit(old, A("kill"))
        old = new
        await proc.sleep(every_ms)


@pytest.mark.parametrize("mode,n", [("smp", 2), ("nonsmp", 1)])
def test_soak_memory_bounded_with_tracer_churn(mode, n):
    with smp.Emulator(mode=mode, schedulers=n) as vm:
        tracees = []
        for _ in range(4):
            q = vm.spawn(ponger)
            tracees += [vm.spawn(pinger, q), q]
        vm.spawn(churn, tracees, 50)
        procs = [psutil.Process(p) for p in vm.os_pids]
        samples: list[list[int]] = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < SECONDS / 2:  # each mode gets half
            assert vm.run_for(5.0) is False  # it never goes quiet
            samples.append([q.memory_info().rss for q in procs])
            s = vm.statistics()
            assert s.made == s.delivered + s.dropped + s.queued
        third = max(1, len(samples) // 3)
        early = [max(col) for col in zip(*samples[:third], strict=False)]
        late = [max(col) for col in zip(*samples[-third:], strict=False)]
        peak = [max(col) for col in zip(*samples, strict=False)]
        s = vm.statistics()
        print(
            f"\nsoak {mode}: {SECONDS / 2:.0f} s, made {s.made}, delivered {s.delivered}, "
            f"dropped {s.dropped}; peak RSS MiB per process "
            f"{[round(p / 2**20, 1) for p in peak]} (early {[round(e / 2**20, 1) for e in early]})"
        )
        for e, last in zip(early, late, strict=False):
            assert last <= e * 1.5 + 32 * 2**20, (early, late)
        exited = sum(x["processes_exited"] for x in s.schedulers)
        assert exited > SECONDS / 2 / 0.05 / 4  # the churn really swapped tracers
