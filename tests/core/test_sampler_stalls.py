"""A sampler tells the time the operating system did not run its process (a
stall) from the time a thread of the process kept it from sampling (a
hole): a real process stopped with SIGSTOP, and one whose main thread holds
the interpreter in a long C loop.  The CPU that tells them apart is its
Python threads' alone: ZeroMQ's I/O thread can be run while they are held."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
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


def _time_share(p, run_s: float, stop_s: float, until: threading.Event) -> None:
    """Share a CPU with ``p`` as a loaded machine does: run it ``run_s``
    and hold it ``stop_s``, over and over, until ``until`` is set (the
    sleeps are the operating system's time slices, not waits for
    something)."""
    while not until.is_set():
        os.kill(p.pid, signal.SIGCONT)
        time.sleep(run_s)
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(stop_s)
    os.kill(p.pid, signal.SIGCONT)


def _lines(p) -> queue.Queue:
    got: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [got.put(x) for x in p.stdout], daemon=True).start()
    return got


HELD_CHILD = r"""
import json, sys, time
from smp.core.sampler import Sampler
c = time.thread_time(); sum(range(1_000_000)); per = (time.thread_time() - c) / 1_000_000
s = Sampler(lambda: {"x": 1}, 0.02).start()
print("ready", flush=True)
sys.stdin.readline()
c0, w0 = time.thread_time(), time.monotonic()
sum(range(int(0.15 / per)))  # one C call of 0.15 s of CPU: the interpreter is not given up
c1, w1 = time.thread_time(), time.monotonic()
print(json.dumps({"cpu": c1 - c0, "wall": w1 - w0, "at": [w0 - s.t0, w1 - s.t0]}), flush=True)
sys.stdin.readline()
s.stop()
print(json.dumps(s.to_json()), flush=True)
"""


def test_a_thread_holding_the_process_back_is_a_hole_on_a_loaded_machine_too():
    """The machine is loaded: the process is run a sixth of the time while
    its main thread holds the interpreter in one C call.  Its sampler waits
    for its own thread's work, however long the system stretches it: a
    hole, not a stall."""
    p = subprocess.Popen(
        [sys.executable, "-c", HELD_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert p.stdout.readline().strip() == "ready"
    lines, done = _lines(p), threading.Event()
    sharing = threading.Thread(target=_time_share, args=(p, 0.003, 0.015, done))
    p.stdin.write("hold\n")
    p.stdin.flush()
    sharing.start()
    try:
        call = json.loads(lines.get(timeout=60))
    finally:
        done.set()
        sharing.join()
    p.stdin.write("go\n")
    p.stdin.flush()
    got = json.loads(lines.get(timeout=60))
    p.wait(60)
    # (the time sharing took hold: the call got under a quarter of a CPU)
    assert call["wall"] > 4 * call["cpu"], call
    start, end = call["at"]
    t, iv = got["t_s"], got["interval_s"]
    assert not [s for s in got["stalls"] if s[1] > start and s[0] < end], (call, got["stalls"])
    holes = missing_intervals(t, iv, got["gc_pauses"] + got["stalls"])
    assert [j for j in holes if start < j * iv and (j + 1) * iv < end], (call, t)


BUSY_NO_POLL_CHILD = r"""
import json, sys, threading
from smp.core.sampler import Sampler
s = Sampler(lambda: {"x": 1}, 0.05).start()
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), done.set()), daemon=True).start()
print("ready", s.t0, flush=True)
while not done.is_set():  # pure Python: the interpreter is handed over every 5 ms
    pass
s.stop()
print(json.dumps(s.to_json()), flush=True)
"""


def test_a_process_the_system_runs_part_time_has_stalls_where_its_sampler_was_not_run():
    """The machine is loaded: the process, busy in Python code that hands the
    interpreter over every few milliseconds (and never polls its sampler),
    is held from just before a tick for 1.3 intervals, then run 2.7, over
    and over: under half of a CPU over the sample before and the late one
    after, mostly before the tick.  Its own work kept the sampler from the
    tick a few milliseconds only, the system the rest: each such hole is a
    stall."""
    p = subprocess.Popen(
        [sys.executable, "-c", BUSY_NO_POLL_CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    word, t0 = p.stdout.readline().split()
    assert word == "ready"
    t0, iv = float(t0), 0.05
    lines = _lines(p)
    # (times the slices, not waits for something): held from 2 ms before
    # every 4th tick for 65 ms
    k = int((time.monotonic() - t0) / iv) + 2
    for j in range(6):
        stop_at = t0 + (k + 4 * j) * iv - 0.002
        time.sleep(max(0.0, stop_at - time.monotonic()))
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(max(0.0, stop_at + 0.065 - time.monotonic()))
        os.kill(p.pid, signal.SIGCONT)
    p.stdin.write("go\n")
    p.stdin.flush()
    got = json.loads(lines.get(timeout=60))
    p.wait(60)
    t = got["t_s"]
    assert got["interval_s"] == iv
    # (most of the 6 holds made a hole: a hold that came a few milliseconds
    # late, after the tick's sample, makes none)
    assert len(missing_intervals(t, iv, got["gc_pauses"])) >= 3, t
    assert missing_intervals(t, iv, got["gc_pauses"] + got["stalls"]) == [], (t, got["stalls"])
