"""The sampler thread, due to sample while a busy loop of its process is
taking that sample (``poll``, holding the sampler's lock), waits for the
lock blocked: it uses no CPU meanwhile, and the tick that falls due while
it waits is then taken at its real time, counted late."""

from __future__ import annotations

import threading
import time

import pytest

from smp.core.sampler import Sampler

pytestmark = pytest.mark.skipif(
    not hasattr(time, "pthread_getcpuclockid"), reason="no CPU clock per thread here"
)

HELD_S = 0.3  # how long the busy loop holds the lock (a measurement window)


class _Watched:
    """The sampler's lock, telling when the sampler thread first tries it."""

    def __init__(self, lock, sampler_thread_tried: threading.Event) -> None:
        self.lock, self.tried = lock, sampler_thread_tried

    def acquire(self, *args, **kwargs) -> bool:
        if threading.current_thread().name == "sampler":
            self.tried.set()
        return self.lock.acquire(*args, **kwargs)

    def release(self) -> None:
        self.lock.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _cpu(thread: threading.Thread) -> float:
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def test_a_held_lock_costs_the_sampler_thread_no_cpu_and_the_late_tick_keeps_its_time():
    entered, let_go, sampled = threading.Event(), threading.Event(), threading.Event()
    holder_name = "busy loop"

    def read() -> dict:
        who = threading.current_thread().name
        if who == holder_name and not let_go.is_set():
            entered.set()
            let_go.wait(10)  # a read that takes long (a C call, a slow count)
        elif who == "sampler":
            sampled.set()
        return {"x": 1}

    s = Sampler(read, 0.01)  # the first tick is due at once
    tried = threading.Event()
    s._lock = _Watched(s._lock, tried)
    holder = threading.Thread(target=s.poll, name=holder_name)
    holder.start()
    assert entered.wait(10)  # the busy loop holds the lock, taking the first tick
    s.start()
    try:
        assert tried.wait(10)  # the sampler thread's tick came, and the lock is held
        cpu0 = _cpu(s._thread)
        time.sleep(HELD_S)  # (how long the lock is held, not a wait for something)
        used = _cpu(s._thread) - cpu0
        released_at = time.monotonic() - s.t0
        let_go.set()
        holder.join(10)
        assert sampled.wait(10)  # the sampler thread takes the tick that fell due
    finally:
        let_go.set()
        s.stop()
    # a spin on the lock would use the CPU it is given: most of HELD_S on an idle core
    assert used < 0.05 * HELD_S, used
    t = [p[0] for p in s.points]
    assert t[0] < 0.01 and t[1] >= released_at, t
    assert s.late >= 1


def test_a_stopped_sampler_takes_no_more_samples_when_polled():
    """The scheduler's and the dispatcher's busy loops poll their sampler
    after it has stopped and handed its series over: that reads nothing
    more."""
    reads = []
    s = Sampler(lambda: reads.append(1) or {"x": len(reads)}, 0.01)  # a tick due at once
    s.stop()  # the last sample
    assert len(reads) == 1
    late = s.late
    s.poll()
    assert len(reads) == 1 and len(s.points) == 1 and s.late == late
