"""What a run looked like over time: counter samples, a latency histogram and
the schedulers' active/inactive intervals, as JSON-able summary parts.

Runs in the user's process.  The counters are sampled where they live: the
dispatcher and each scheduler sample their own in a thread of their own
(``smp.core.sampler``), every ``interval`` s on one grid from the run's
start, and hand the samples over at the end (``Emulator.series``), so no
interval lacks a sample because the controller was busy.  ``run_timeseries``
turns them into the summary's ``timeseries``: the counts of the process that
decides every message (the dispatcher in smp, the one scheduler in nonsmp)
and, per scheduler, what it made, the messages its processes sent and the
share of each interval it spent running processes (``activity``), measured
the same way in both modes.  A sample taken late keeps its real time; an
interval of the grid with no sample in it stays a gap (``gaps``,
``missing_intervals``), unless the process was held whole meanwhile (its
own garbage collection, ``gc_pauses``, or a stall the operating system
made, ``stalls``: ``held``): nothing is made up for it.  The last interval ends
with the run, so it is usually shorter (``partial_last``).  The rest are
pure functions of what the run left behind (``vm.latencies_ns()`` and the
``{profile, scheduler, Id, active|inactive, NActive, Ts}`` messages that
``profile_scheduler`` / ``profile_scheduler_q`` in ``erl_trace.c`` send).
Everything here is bounded, whatever the run's length: a long run is merged
into coarser samples and intervals, never cut off.
"""

from __future__ import annotations

import math

from smp.core.clock import ts_to_us
from smp.core.sampler import MAX_POINTS
from smp.core.terms import Atom

__all__ = [
    "run_timeseries",
    "missing_intervals",
    "paused_intervals",
    "held",
    "default_interval",
    "latency_histogram",
    "scheduler_timeline",
    "MAX_POINTS",
    "SAMPLE_INTERVAL_S",
    "MIN_INTERVALS",
]

SAMPLE_INTERVAL_S = 0.1  # the longest default sampling interval
#: a run bounded by time is cut into at least this many sampling intervals
#: (a sample begins each and one more ends the run: one more sample than
#: that, less a tick a process was held across, which is skipped)
MIN_INTERVALS = 50
FINE_INTERVAL_S = 0.001  # a run bounded by operations: its length is not known
MAX_INTERVALS = 1000  # active intervals kept per scheduler
PER_DECADE = 4  # latency buckets per power of ten
_EPS = 1e-6  # sample times are rounded to the microsecond

_PROFILE, _SCHEDULER = Atom("profile"), Atom("scheduler")
_ACTIVE, _INACTIVE = Atom("active"), Atom("inactive")


def default_interval(seconds: float | None) -> float:
    """The sampling interval of a run asked to last ``seconds``: that over
    ``MIN_INTERVALS`` (so at least that many intervals), at most
    ``SAMPLE_INTERVAL_S``; a run bounded by operations starts at
    ``FINE_INTERVAL_S`` and the samplers double it as the run goes on
    (``smp.core.sampler``)."""
    if not seconds:
        return FINE_INTERVAL_S
    return min(SAMPLE_INTERVAL_S, seconds / MIN_INTERVALS)


def missing_intervals(t_s: list, interval: float, pauses: list | tuple = ()) -> list[int]:
    """The intervals ``[j * interval, (j + 1) * interval)`` of the grid,
    from the first up to the one the last sample is in, that hold no sample,
    except those the process spent (in part) in a garbage collection of its
    own or not run by the operating system (``pauses``, ``[[start, end],
    ...]``, its ``gc_pauses`` and ``stalls``): every thread of the process
    was held, the sampler's too, or run too little to do an interval's
    work, so little or nothing counted changed meanwhile."""
    if not t_s:
        return []
    have = {math.floor((t + _EPS) / interval) for t in t_s}
    return [
        j
        for j in range(max(have) + 1)
        if j not in have and not any(a < (j + 1) * interval and b > j * interval for a, b in pauses)
    ]


def paused_intervals(t_s: list, interval: float, pauses: list | tuple) -> list[int]:
    """The intervals with no sample that a pause or a stall explains."""
    if not t_s:
        return []
    have = {math.floor((t + _EPS) / interval) for t in t_s}
    missing = set(missing_intervals(t_s, interval, pauses))
    return [j for j in range(max(have) + 1) if j not in have and j not in missing]


def _gaps(t_s: list, interval: float, pauses: list | tuple = ()) -> list[list[float]]:
    """``[t[k-1], t[k]]`` of the samples on either side of each interval with
    no sample (a pause or stall explains none of them)."""
    out: list[list[float]] = []
    for j in missing_intervals(t_s, interval, pauses):
        k = next(i for i, t in enumerate(t_s) if t + _EPS >= (j + 1) * interval)
        gap = [t_s[k - 1] if k else 0.0, t_s[k]]
        if not out or out[-1] != gap:
            out.append(gap)
    return out


def held(series: dict) -> list:
    """The times a process's series says every thread of it was held: its
    garbage collections and the stalls the operating system made."""
    return list(series.get("gc_pauses", [])) + list(series.get("stalls", []))


def _partial_last(t: list, interval: float) -> bool:
    return len(t) > 1 and t[-1] - t[-2] < 0.9 * interval


def _scheduler_series(k: int, s: dict) -> dict:
    t, cols = s["t_s"], s["columns"]
    busy = cols.get("busy_s", [0.0] * len(t))
    activity: list = [None]
    for i in range(1, len(t)):
        dt = t[i] - t[i - 1]
        activity.append(
            round(min(1.0, max(0.0, (busy[i] - busy[i - 1]) / dt)), 4) if dt > 0 else None
        )
    span = t[-1] - t[0] if t else 0.0
    return {
        "scheduler": k,
        "interval_s": round(s["interval_s"], 6),
        "merges": s["merges"],
        "late": s["late"],
        "gaps": _gaps(t, s["interval_s"], held(s)),
        "gc_pauses": s.get("gc_pauses", []),
        "stalls": s.get("stalls", []),
        "partial_last": _partial_last(t, s["interval_s"]),
        "t_s": t,
        "made": cols.get("made", [0] * len(t)),
        "messages": cols.get("messages", [0] * len(t)),
        "busy_s": [round(b - busy[0], 6) for b in busy],
        "activity": activity,
        "active_pct": round(100 * (busy[-1] - busy[0]) / span, 2) if span > 0 else 0.0,
    }


def run_timeseries(collected: dict, mode: str) -> dict:
    """The summary's ``timeseries`` from ``Emulator.series()``: the counts
    (made, delivered, dropped and by reason, queued and ``queued_max``, the
    deepest the queue was in each interval) of the dispatcher (smp) or of
    the one scheduler (nonsmp), ``queue_peak`` (the deepest over the run,
    which is the largest ``queued_max``) and ``schedulers``, each
    scheduler's own series."""
    scheds = {k: s for k, s in (collected.get("schedulers") or {}).items() if s}
    main = collected.get("dispatcher") if mode == "smp" else scheds.get(min(scheds, default=1))
    out: dict = {"source": "dispatcher" if mode == "smp" else "scheduler 1"}
    if not main or not main["t_s"]:
        out.update(t_s=[], interval_s=None, gaps=[], partial_last=False, schedulers=[])
        return out
    t, cols, iv = main["t_s"], main["columns"], main["interval_s"]
    zeros = [0] * len(t)
    reasons = sorted(c.split(".", 1)[1] for c in cols if c.startswith("dropped_by_reason."))
    qmax = cols.get("queued_max", zeros)
    out.update(
        interval_s=round(iv, 6),
        first_interval_s=round(main["first_interval_s"], 6),
        merges=main["merges"],
        late=main["late"],
        gaps=_gaps(t, iv, held(main)),
        gc_pauses=main.get("gc_pauses", []),
        stalls=main.get("stalls", []),
        partial_last=_partial_last(t, iv),
        t_s=t,
        made=cols.get("made", zeros),
        delivered=cols.get("delivered", zeros),
        dropped=cols.get("dropped", zeros),
        queued=cols.get("queued", zeros),
        queued_max=qmax,
        queue_peak=cols["queue_peak_run"][-1] if "queue_peak_run" in cols else max(qmax),
        dropped_by_reason={r: cols["dropped_by_reason." + r] for r in reasons},
        schedulers=[_scheduler_series(k, s) for k, s in sorted(scheds.items()) if s["t_s"]],
    )
    return out


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
