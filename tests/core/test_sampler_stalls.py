"""A sampler tells the time the operating system did not run its process (a
stall) from the time a thread of the process kept it from sampling (a
hole): a real process stopped with SIGSTOP, and one whose main thread holds
the interpreter in a long C loop.  The CPU that tells them apart is its
Python threads' alone: ZeroMQ's I/O thread can be run while they are held."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from smp.app.series import missing_intervals

CHILD = r"""
import json, sys
from smp.core.sampler import Sampler
s = Sampler(lambda: {"x": 1}, 0.02).start()
print("ready", flush=True)
line = sys.stdin.readline()
if line.strip() == "hold":
    sum(range(40_000_000))  # one C call: the interpreter is not given up
    sys.stdin.readline()
s.stop()
print(json.dumps(s.to_json()), flush=True)
"""


def _child():
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert p.stdout.readline().strip() == "ready"
    return p


def _finish(p, *lines) -> dict:
    out, _ = p.communicate("".join(line + "\n" for line in lines), timeout=60)
    return json.loads(out.strip().splitlines()[-1])


def test_a_process_the_system_stopped_has_a_stall_and_no_hole():
    p = _child()
    os.kill(p.pid, signal.SIGSTOP)
    time.sleep(0.3)  # (how long it is stopped, not a wait for something)
    os.kill(p.pid, signal.SIGCONT)
    got = _finish(p, "go")
    t, iv = got["t_s"], got["interval_s"]
    assert got["stalls"], got
    assert max(b - a for a, b in got["stalls"]) >= 0.2
    # the stop left intervals without a sample, which the stall explains
    assert missing_intervals(t, iv, got["gc_pauses"]) != []
    assert missing_intervals(t, iv, got["gc_pauses"] + got["stalls"]) == []


def test_a_thread_holding_the_process_back_is_a_hole_not_a_stall():
    p = _child()
    got = _finish(p, "hold", "go")
    t, iv = got["t_s"], got["interval_s"]
    assert got["stalls"] == [], got["stalls"]
    assert missing_intervals(t, iv, got["gc_pauses"] + got["stalls"]) != []


def test_a_sampler_started_after_its_t0_notes_no_stall():
    """The sample command reaches a busy process late: the time before its
    sampler existed is a hole, not a stall (nothing says the process was
    not run)."""
    from smp.core.sampler import Sampler

    s = Sampler(lambda: {"x": 1}, 0.02, t0=time.monotonic() - 1.0)
    s.poll()
    s.stop()
    got = s.to_json()
    assert got["stalls"] == [] and got["late"] == 1
    assert missing_intervals(got["t_s"], got["interval_s"], got["stalls"]) != []


BUSY_CHILD = r"""
import json, sys, threading, time
from smp.core.sampler import Sampler
s = Sampler(lambda: {"x": 1}, 0.1).start()
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), done.set()), daemon=True).start()
print("ready", s.t0, flush=True)
while not done.is_set():  # a busy loop that polls, as a scheduler's does
    s.poll()
s.stop()
print(json.dumps(s.to_json()), flush=True)
"""


def test_a_busy_process_stopped_just_before_a_tick_has_a_stall_and_no_hole():
    """The process ran flat out for most of an interval, then the system
    stopped it across the next tick: the CPU it used since its last sample
    is no measure of that (it was run, then held); since it last looked at
    the clock before the tick it used none."""
    p = subprocess.Popen(
        [sys.executable, "-c", BUSY_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    word, t0 = p.stdout.readline().split()
    assert word == "ready"
    t0 = float(t0)
    # (times the stop, not a wait for something): 85 ms into an interval,
    # held 140 ms, across the next tick
    k = int((time.monotonic() - t0) / 0.1) + 2
    time.sleep(max(0.0, t0 + k * 0.1 + 0.085 - time.monotonic()))
    os.kill(p.pid, signal.SIGSTOP)
    time.sleep(0.14)
    os.kill(p.pid, signal.SIGCONT)
    got = _finish(p, "go")
    t, iv = got["t_s"], got["interval_s"]
    assert got["stalls"], got
    assert missing_intervals(t, iv, got["gc_pauses"] + got["stalls"]) == []


def test_the_cpu_a_stall_is_judged_by_is_the_python_threads_not_zeromqs_io_thread():
    """Data pumped over loopback TCP: the I/O thread does the copying while
    the Python thread waits in recv with the interpreter released; the
    process's CPU counts the I/O thread, the sampler's measure does not."""
    import zmq

    from smp.core.sampler import cpu_since, threads_cpu

    ctx = zmq.Context(io_threads=1)
    a, b = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    try:
        b.connect(f"tcp://127.0.0.1:{a.bind_to_random_port('tcp://127.0.0.1')}")
        chunk = b"x" * (1 << 20)
        a.send(chunk)
        b.recv()
        then, proc0 = threads_cpu(), time.process_time()
        for _ in range(300):
            a.send(chunk, copy=False)
            b.recv(copy=False)
        python, process = cpu_since(then), time.process_time() - proc0
    finally:
        a.close(0)
        b.close(0)
        ctx.term()
    assert 0 < python < 0.5 * process, (python, process)
