"""Counters sampled where they live: a thread in the scheduler or dispatcher
process that reads its own counters at a fixed interval.

Runs in the scheduler and dispatcher processes.  ``Sampler(read, interval,
t0)`` calls ``read()`` at ``t0``, ``t0 + interval``, ``t0 + 2 * interval``...
(monotonic clock) until ``stop()``, which takes one last sample.  ``read``
returns a flat ``{name: number}``; the names in ``fold_max`` are levels kept
as their highest value (a peak since the previous read), the others are
read as they are (cumulative counts, or a level at that moment).  A sample
taken late (the process was busy) keeps its real time; a tick missed
entirely is skipped, never made up.  A sample more than an interval late
whose delay the process's own work cannot explain (its Python threads,
which run one at a time under the interpreter lock, did at most an
interval's worth of work after the tick: the operating system held them,
or ran them too little) is kept as a *stall* from its tick (the last
``MAX_PAUSES``), as a garbage collection is kept as a pause; one that more
than an interval of their own work kept waiting (a thread holding the
interpreter in a long C call) is not, however long the system stretched
that work.  Only the threads ``threading`` knows are counted: a thread of
C code (ZeroMQ's I/O thread) can be run while they are held, and never
holds the sampler back, as it takes no interpreter lock.  At most
``max_points`` samples are kept: past that the interval doubles and every
interval of the new length keeps its first sample, the peaks of the
others folded into the next kept one, so a long run loses resolution but
no peak.
"""

from __future__ import annotations

import gc
import threading
import time
from collections import deque
from typing import Callable

__all__ = ["Sampler", "MAX_POINTS"]

MAX_POINTS = 500  # samples kept per process

Point = tuple[float, dict[str, float]]
MAX_PAUSES = 1000  # garbage collections kept (the longest)
PAUSE_MIN_S = 0.001  # a collection shorter than this is not recorded
#: the longest the sampler thread waits for its lock at a time (held by a
#: busy loop taking the sample) before it looks whether it is stopped
LOCK_WAIT_S = 0.1

_thread_clock = getattr(time, "pthread_getcpuclockid", None)


def threads_cpu() -> dict[int, float]:
    """The CPU seconds each Python thread of the process has used, by
    thread (``threading``'s); where no clock per thread is available, the
    whole process's as one entry."""
    if _thread_clock is None:
        return {0: time.process_time()}
    out = {}
    for t in threading.enumerate():
        ident = t.ident
        if ident is None:
            continue
        try:
            out[ident] = time.clock_gettime(_thread_clock(ident))
        except OSError:  # it ended meanwhile
            pass
    return out


def cpu_since(then: dict[int, float]) -> float:
    """The CPU seconds the Python threads used since ``then`` (a thread
    started meanwhile counts whole; one that ended meanwhile, not at all)."""
    return sum(cpu - then.get(ident, 0.0) for ident, cpu in threads_cpu().items())


class Sampler:
    def __init__(
        self,
        read: Callable[[], dict[str, float]],
        interval: float,
        t0: float | None = None,
        fold_max: tuple[str, ...] = (),
        max_points: int = MAX_POINTS,
    ) -> None:
        if not interval > 0:
            raise ValueError("interval must be > 0")
        if max_points < 3:
            raise ValueError("max_points must be >= 3")
        self.read = read
        self.interval = float(interval)
        self.first_interval = float(interval)
        self.t0 = time.monotonic() if t0 is None else float(t0)
        self.fold_max = fold_max
        self.max_points = max_points
        self.merges = 0
        self.late = 0  # samples taken more than half an interval after their tick
        self.failed = 0  # reads that raised (the sample is missing)
        self.points: list[Point] = []
        # the process's own garbage collections: while one runs it holds
        # every thread of the process (the sampler's too) and nothing changes
        self.pauses: list[tuple[float, float]] = []
        # times the operating system did not run the process (see poll)
        self.stalls: deque[tuple[float, float]] = deque(maxlen=MAX_PAUSES)
        # the last sample (or the sampler's start, which may come after t0):
        # wall time and the Python threads' CPU times
        self._prev = (time.monotonic(), threads_cpu())
        # the last look at the clock before the tick that is due (a poll that
        # found it not yet due, at most a 16th of an interval before the
        # last one): wall time and the Python threads' CPU times
        self._seen = self._prev
        self._gc_began = 0.0
        self._due = self.t0  # when the next sample is due (monotonic)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        # runs in whichever thread collects, maybe one holding a lock read()
        # takes: it only notes the times (a list append is one step)
        now = time.monotonic()
        if phase == "start":
            self._gc_began = now
        elif self._gc_began and now - self._gc_began >= PAUSE_MIN_S:
            self.pauses.append((self._gc_began - self.t0, now - self.t0))

    def start(self) -> Sampler:
        gc.callbacks.append(self._on_gc)
        self._thread = threading.Thread(target=self._loop, name="sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        """The sampler thread: at each tick it takes the sample, waiting for
        the lock while a busy loop of the process holds it (taking that
        sample itself): blocked, so a held lock costs it no CPU, and never
        longer than ``LOCK_WAIT_S`` at a time, so ``stop`` is not kept
        waiting."""
        while not self._stop.is_set():
            left = self._due - time.monotonic()
            if left > 0:
                if self._stop.wait(left):
                    return
                continue
            if self._lock.acquire(timeout=LOCK_WAIT_S):
                try:
                    self._take_due()
                finally:
                    self._lock.release()

    def poll(self) -> None:
        """Take the sample that is due, if one is (and no other thread is
        taking it): a busy loop of the process may call this, so a thread
        the process keeps from running holds no sample back; it never waits
        for the lock, and does nothing once the sampler is stopped.  Never
        from a thread that holds a lock ``read`` takes."""
        if self._stop.is_set():
            return
        now = time.monotonic()
        if now < self._due:
            if now - self._seen[0] >= self.interval / 16:
                # (reading the CPU clocks costs 50 times a wall clock read:
                # a busy loop looks at most 16 times an interval)
                self._seen = (now, threads_cpu())
            return
        if not self._lock.acquire(blocking=False):
            return
        try:
            self._take_due()
        finally:
            self._lock.release()

    def _take_due(self) -> None:
        """Under the lock: take the sample that is due, at the time it is
        taken (another thread may have taken it meanwhile)."""
        now = time.monotonic()
        if now < self._due:
            return
        if now - self._due > self.interval / 2:
            self.late += 1
        if now - self._due > self.interval:
            self._stalled(now)
        self._take(now)
        # the next tick after now: a tick missed while the process was held is skipped
        self._due = self.t0 + (int((now - self.t0) / self.interval) + 1) * self.interval

    def _stalled(self, now: float) -> None:
        """A sample more than an interval late: a stall from its tick to now
        when the Python threads did at most an interval of work after the
        tick, so their own work, had the system run them throughout, would
        not have kept the sample from its interval.  Their work after the
        tick is the CPU they used since they last looked at the clock
        before it (or since the sample before, if that is later) less the
        time from there to the tick: they run one at a time, so no more of
        it came before.  (Their CPU as a share of the time since then judged
        a process held back by its own work as stalled when the system gave
        it under a quarter of a CPU, and one busy before the tick and then
        held as run.)"""
        wall0, cpu0 = self._prev if self._prev[0] >= self._seen[0] else self._seen
        span = now - wall0  # (over an interval: a sampler started late is no stall)
        worked = cpu_since(cpu0) - max(0.0, self._due - wall0)
        if span > self.interval and worked <= self.interval:
            self.stalls.append((self._due - self.t0, now - self.t0))

    def sample(self) -> None:
        """Take one sample now (its real time); one taken for a tick long due
        is counted late, and a stall before it noted, as ``poll`` does."""
        with self._lock:
            now = time.monotonic()
            if now - self._due > self.interval / 2:
                self.late += 1
            if now - self._due > self.interval:
                self._stalled(now)
            self._take(now)

    def _take(self, now: float) -> None:
        try:
            values = self.read()
        except Exception:
            self.failed += 1
            return
        self.points.append((max(0.0, now - self.t0), values))
        self._prev = (now, threads_cpu())
        if len(self.points) > self.max_points:
            self._halve()

    def _halve(self) -> None:
        """Double the interval: keep the first sample of each new interval
        (and the last sample), folding the peaks of the others forward."""
        self.interval *= 2
        self.merges += 1
        pts, kept = self.points, [self.points[0]]
        carry: dict[str, float] = {}
        last_slot = int(pts[0][0] / self.interval)
        for i in range(1, len(pts)):
            t, v = pts[i]
            slot = int(t / self.interval)
            if slot == last_slot and i != len(pts) - 1:
                for key in self.fold_max:
                    if key in v:
                        carry[key] = max(carry.get(key, v[key]), v[key])
                continue
            if carry:
                v = dict(v)
                for key, peak in carry.items():
                    v[key] = max(v.get(key, peak), peak)
                carry = {}
            kept.append((t, v))
            last_slot = slot
        self.points = kept

    def latest(self) -> Point | None:
        with self._lock:
            return self.points[-1] if self.points else None

    def stop(self) -> None:
        """Stop the thread and take the last sample."""
        self._stop.set()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2)
        self.sample()

    def to_json(self) -> dict[str, object]:
        """Columns, one value per sample (a name a sample lacks is 0 there);
        ``t_s`` is seconds since ``t0``."""
        with self._lock:
            pts = list(self.points)
        names = sorted({k for _, v in pts for k in v})
        pauses = sorted(self.pauses, key=lambda p: p[0] - p[1])[:MAX_PAUSES]
        return {
            "interval_s": self.interval,
            "first_interval_s": self.first_interval,
            "merges": self.merges,
            "late": self.late,
            "failed": self.failed,
            "t_s": [round(t, 6) for t, _ in pts],
            "columns": {k: [v.get(k, 0) for _, v in pts] for k in names},
            "gc_pauses": sorted([round(a, 6), round(b, 6)] for a, b in pauses),
            "stalls": [[round(a, 6), round(b, 6)] for a, b in list(self.stalls)],
        }
