"""What a run looked like over time: counter samples, a latency histogram and
the schedulers' active/inactive intervals, as JSON-able summary parts.

Runs in the user's process.  ``execute`` feeds ``Series`` a
``vm.statistics()`` snapshot at a steady interval (``SAMPLE_INTERVAL_S``, or
what the command line asks): it runs the emulator until the next multiple of
the interval and samples there.  When the controller is held past a sampling
time (serving a BIF a process called, waiting for a busy scheduler) that
sample is missing, and the gap stays a gap: nothing is made up for it.  The
last interval ends with the run, so it is usually shorter (``partial_last``).
The rest are pure
functions of what the run left behind (``vm.latencies_ns()`` and the
``{profile, scheduler, Id, active|inactive, NActive, Ts}`` messages that
``profile_scheduler`` / ``profile_scheduler_q`` in ``erl_trace.c`` send).
Everything here is bounded, whatever the run's length: a long run is merged
into coarser samples and intervals, never cut off.
"""

from __future__ import annotations

import math

from smp.core.clock import ts_to_us
from smp.core.terms import Atom

__all__ = [
    "Series",
    "latency_histogram",
    "scheduler_timeline",
    "MAX_POINTS",
    "SAMPLE_INTERVAL_S",
    "GAP_FACTOR",
]

SAMPLE_INTERVAL_S = 0.1  # the steady sampling interval, unless asked otherwise
GAP_FACTOR = 1.5  # an interval this many times the sampling interval is a gap
MAX_POINTS = 500  # time series samples kept per run
MAX_INTERVALS = 1000  # active intervals kept per scheduler
PER_DECADE = 4  # latency buckets per power of ten
MIN_GAP_S = 0.005  # samples closer than this to the previous one replace it

_PROFILE, _SCHEDULER = Atom("profile"), Atom("scheduler")
_ACTIVE, _INACTIVE = Atom("active"), Atom("inactive")


class Series:
    """Cumulative counters sampled over a run, at most ``max_points`` of them.

    ``made``, ``delivered`` and ``dropped`` (per reason) only grow, so dropping
    a sample loses resolution but no count; ``queued`` is a level, so a merged
    sample keeps the highest level it stood for in ``queued_max``."""

    def __init__(self, max_points: int = MAX_POINTS, interval: float = SAMPLE_INTERVAL_S) -> None:
        if max_points < 3:
            raise ValueError("max_points must be >= 3")
        if not interval > 0:
            raise ValueError("interval must be > 0")
        self.max_points = max_points
        self.interval = interval
        self.merges = 0
        self._points: list[dict] = []

    def __len__(self) -> int:
        return len(self._points)

    def add(self, t: float, stats: dict) -> None:
        """Record the ``vm.statistics()`` snapshot ``stats`` taken ``t`` s into the run."""
        by_reason = {
            str(r): sum(bt.values()) for r, bt in stats.get("dropped_by_reason", {}).items()
        }
        q = stats.get("queued", 0)
        # the dispatcher reports the deepest its queue was since the last sample
        q_max = max(q, stats.get("queue_peak", 0))
        point = {
            "t": t,
            "made": stats.get("made", 0),
            "delivered": stats.get("delivered", 0),
            "dropped": stats.get("dropped", 0),
            "queued": q,
            "queued_max": q_max,
            "by_reason": by_reason,
        }
        pts = self._points
        if len(pts) > 1 and t - pts[-1]["t"] < MIN_GAP_S:
            # a sample right after the last (the end of a timed-out run) would make
            # a rate out of a few milliseconds: it replaces that one instead
            point["queued_max"] = max(q_max, pts[-1]["queued_max"])
            pts[-1] = point
            return
        pts.append(point)
        if len(self._points) > self.max_points:
            self._halve()

    def _halve(self) -> None:
        """Drop every other inner sample, folding its queue peak into the next one
        kept: the sampling interval doubles."""
        pts = self._points
        kept = [pts[0]]
        for i in range(1, len(pts) - 1):
            if i % 2:
                nxt = pts[i + 1]
                nxt["queued_max"] = max(nxt["queued_max"], pts[i]["queued_max"])
            else:
                kept.append(pts[i])
        kept.append(pts[-1])
        self._points = kept
        self.merges += 1
        self.interval *= 2

    def gaps(self) -> list[list[float]]:
        """``[start, end]`` of every interval between two samples that is longer
        than ``GAP_FACTOR`` sampling intervals: no sample was taken in it."""
        pts = self._points
        return [
            [round(a["t"], 6), round(b["t"], 6)]
            for a, b in zip(pts, pts[1:], strict=False)
            if b["t"] - a["t"] > GAP_FACTOR * self.interval
        ]

    def to_json(self) -> dict:
        """Columns, one value per sample; ``t_s`` is seconds since the run started.
        ``interval_s`` is the sampling interval, ``gaps`` the intervals with a
        missing sample, and ``partial_last`` says the last interval (it ends
        with the run) is shorter than the others."""
        pts = self._points
        reasons = sorted({r for p in pts for r in p["by_reason"]})
        last = pts[-1]["t"] - pts[-2]["t"] if len(pts) > 1 else 0.0
        return {
            "interval_s": round(self.interval, 6),
            "gaps": self.gaps(),
            "partial_last": len(pts) > 1 and last < 0.9 * self.interval,
            "t_s": [round(p["t"], 6) for p in pts],
            "made": [p["made"] for p in pts],
            "delivered": [p["delivered"] for p in pts],
            "dropped": [p["dropped"] for p in pts],
            "queued": [p["queued"] for p in pts],
            "queued_max": [p["queued_max"] for p in pts],
            "dropped_by_reason": {r: [p["by_reason"].get(r, 0) for p in pts] for r in reasons},
            "merges": self.merges,
        }


def latency_histogram(latencies_ns, per_decade: int = PER_DECADE) -> dict:
    """Bucket counts on a log scale: bucket ``k`` holds
    ``10**((first + k) / per_decade) <= ns < 10**((first + k + 1) / per_decade)``,
    so two runs' histograms line up by exponent."""
    counts: dict[int, int] = {}
    for v in latencies_ns:
        e = math.floor(math.log10(max(v, 1)) * per_decade + 1e-9)
        counts[e] = counts.get(e, 0) + 1
    if not counts:
        return {"per_decade": per_decade, "first": 0, "counts": [], "edges_ns": [], "count": 0}
    lo, hi = min(counts), max(counts)
    return {
        "per_decade": per_decade,
        "first": lo,
        "counts": [counts.get(e, 0) for e in range(lo, hi + 1)],
        "edges_ns": [round(10 ** (e / per_decade)) for e in range(lo, hi + 2)],
        "count": sum(counts.values()),
    }


def _scheduler_events(messages: dict) -> list[tuple[int, int, bool]]:
    """``(ts_us, scheduler, active)`` of every profile scheduler message, in time order."""
    out = []
    for terms in messages.values():
        for t in terms:
            if (
                type(t) is tuple
                and len(t) == 6
                and t[0] is _PROFILE
                and t[1] is _SCHEDULER
                and type(t[2]) is int
                and t[3] in (_ACTIVE, _INACTIVE)
                and type(t[5]) is tuple
                and len(t[5]) == 3
            ):
                out.append((ts_to_us(t[5]), t[2], t[3] is _ACTIVE))
    out.sort()
    return out


def _merge(intervals: list[list[float]], limit: int, span: float) -> list[list[float]]:
    """Close the shortest gaps until at most ``limit`` intervals are left."""
    gap = span / (limit * 4) if span > 0 else 0.0
    while len(intervals) > limit:
        merged = [intervals[0][:]]
        for s, e in intervals[1:]:
            if s - merged[-1][1] <= gap:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        intervals = merged
        gap = gap * 2 if gap else 1e-6
    return intervals


def scheduler_timeline(
    messages: dict, run_start_us: int | None = None, max_intervals: int = MAX_INTERVALS
) -> dict:
    """Per-scheduler active intervals from the profile scheduler messages in
    ``messages`` (tracer name -> terms).  Times are seconds after the first
    such message; ``offset_s`` is that message's time after ``run_start_us``
    (wall clock, as the timestamps are).  A scheduler still active at the last
    message has an interval that ends there, marked in ``open``."""
    ev = _scheduler_events(messages)
    if not ev:
        return {"messages": 0, "span_s": 0.0, "offset_s": None, "schedulers": []}
    first, last = ev[0][0], ev[-1][0]
    span = (last - first) / 1e6
    since: dict[int, float | None] = {}
    rows: dict[int, dict] = {}
    for us, k, active in ev:
        t = (us - first) / 1e6
        row = rows.setdefault(
            k, {"scheduler": k, "intervals": [], "transitions": 0, "active_s": 0.0, "open": False}
        )
        row["transitions"] += 1
        if k not in since:
            # the first we hear of it: inactive means it was active since profiling began
            since[k] = None if active else 0.0
        if active:
            if since[k] is None:
                since[k] = t
        elif since[k] is not None:
            row["intervals"].append([since[k], t])
            since[k] = None
    for k, row in rows.items():
        if since.get(k) is not None:
            row["intervals"].append([since[k], span])
            row["open"] = True
        row["active_s"] = round(sum(e - s for s, e in row["intervals"]), 6)
        row["merged"] = len(row["intervals"]) > max_intervals
        row["intervals"] = [
            [round(s, 6), round(e, 6)] for s, e in _merge(row["intervals"], max_intervals, span)
        ]
    offset = None if run_start_us is None else round((first - run_start_us) / 1e6, 6)
    return {
        "messages": len(ev),
        "span_s": round(span, 6),
        "offset_s": offset,
        "schedulers": [rows[k] for k in sorted(rows)],
    }
