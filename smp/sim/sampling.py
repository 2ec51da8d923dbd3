"""Random schedules and PCT: sampling the orders of a workload when there
are too many to explore.

Runs in the caller's process, over the same worlds as the explorer
(``smp.sim.world``), and returns the same ``ExploreResult`` (its ``method``
``random`` or ``pct`` and its ``seed``), so the report, the JSON and the
replay of a schedule do not change.  Each run starts from a fresh world and
steps until no thread can:

* ``random``: each step, a thread chosen uniformly among the enabled ones;
* ``pct`` (probabilistic concurrency testing, Burckhardt, Kothari,
  Musuvathi, Nagarakatte, ASPLOS 2010): each thread gets a random priority
  when it first becomes enabled (all above ``depth``), ``depth - 1``
  change points are drawn among the ``k`` steps of a run, and each step
  runs the enabled thread of highest priority; at the ``i``-th change point
  the thread that just ran drops to priority ``i`` (below every initial
  one).  A bug of depth ``d`` (``d`` ordering constraints) is found with
  probability at least ``1/(n k^(d-1))`` per run, ``n`` threads and ``k``
  steps.  The simulator's threads appear as the run goes (a BIF request, a
  channel), so ``n`` and ``k`` are the most one run has had so far (the
  first run, in the default order, measures them); the guarantee printed
  is with the largest seen.

Each run's races are the pairs of events in race in that execution (what a
replay of its schedule would reverse), not the explorer's branches.

The runs are cut into chunks of ``CHUNK`` runs, the first from the seed's
own random stream, each other from one of its own made from the seed and
the chunk's number, and PCT's ``n`` and ``k`` start again from the
default order in each: a chunk depends on nothing run before it, so
worker processes can run chunks side by side (``sample``'s ``mapper``)
and the result is the one a single process gets.  Under a time budget
the chunks are counted in order up to the first one not started: a chunk
the budget cut is followed by those other workers ran meanwhile.
"""

from __future__ import annotations

import math
import random
import time
from functools import partial

from .dpor import MAX_EVENTS
from .explorer import (
    Explorer,
    ExploreResult,
    check_time_budget,
    checks_of,
    execution_races,
    merge,
    nonsmp_outcome,
    stop_requested,
)
from .nodes import AFTER_TIMEOUT_MS
from .world import SimError

__all__ = ["sample", "pct_bound", "run_chunk", "CHUNK"]


def _chance(p: float) -> str:
    """A probability in words short enough for a line, never rounded up to
    a certainty nor down to nothing."""
    if p >= 1.0:
        return "1"
    if p > 0.999:
        return f"1 - {1 - p:.2g}"
    return f"{p:.3g}"


def pct_bound(n: int, k: int, depth: int) -> float:
    """PCT's lower bound on finding a bug of depth ``depth`` in one run."""
    return 1.0 / (max(1, n) * max(1, k) ** max(0, depth - 1))


def _random_run(w, rng: random.Random, max_events: int) -> str:
    while True:
        en = w.enabled()
        if not en:
            return "complete"
        if len(w.trace) >= max_events:
            return "cut"
        w.step(en[rng.randrange(len(en))])


def _pct_run(w, rng: random.Random, depth: int, k: int, max_events: int) -> str:
    prio: dict[str, float] = {}
    change = {}
    for i, step in enumerate(sorted(rng.sample(range(1, k + 1), min(depth - 1, k)))):
        change[step] = float(i + 1)
    step = 0
    while True:
        en = w.enabled()
        if not en:
            return "complete"
        if len(w.trace) >= max_events:
            return "cut"
        for t in en:
            if t not in prio:
                prio[t] = depth + rng.random()
        t = max(en, key=prio.__getitem__)
        w.step(t)
        step += 1
        if step in change:
            prio[t] = change[step]


#: runs in a chunk of a sample: a sample's runs are cut into chunks of this
#: many, each from its own random stream of the seed (``_stream``), so
#: that worker processes can run the chunks apart and the result is still
#: the one a single process gets (the chunks counted in order)
CHUNK = 100


def _stream(seed: int, c: int) -> random.Random:
    """Chunk ``c``'s random numbers: the first chunk's are the seed's own
    (a seed of 0 or more), the others' made from the seed and ``c``."""
    # (random.Random takes an int's absolute value: -1 and 1 were one stream)
    return random.Random(seed if c == 0 and seed >= 0 else f"{seed}/{c}")


def run_chunk(args: tuple, progress=None):
    """Run one chunk of a sample: ``(setup, options, method, depth, seed, c,
    runs, deadline, stop_at_violation)``, ``deadline`` a ``time.monotonic()``
    instant (one clock for every process of the machine).  Gives ``(result,
    n, k, violation_at)``: its ``ExploreResult`` (executions numbered from
    0), PCT's largest thread and step counts, and the instant of its first
    broken invariant; or None when its deadline had passed or a stop was
    asked before it started.  Module-level, so a worker process can run it;
    ``progress`` (in the caller's process only) is the explorer's."""
    setup, options, method, depth, seed, c, runs, deadline, stop_at_violation = args
    if stop_requested() or (deadline is not None and time.monotonic() > deadline):
        return None
    max_events = options["max_events"]
    ex = Explorer(setup, nonsmp=False, progress=progress, **options)
    ex._t0 = time.monotonic()
    rng = _stream(seed, c)
    n = k = 0
    cut_by = []
    if method == "pct":  # n and k from the default order
        w = ex.tree.new_world()
        while (en := w.enabled()) and len(w.trace) < max_events:
            w.step(en[0])
        k = len(w.trace)
        n = len({e.thread for e in w.trace})
        ex.events += len(w.trace)
        w.dispose()
    for _ in range(runs):
        w = ex.tree.new_world()
        if method == "random":
            how = _random_run(w, rng, max_events)
        else:
            how = _pct_run(w, rng, depth, max(1, k), max_events)
            k = max(k, len(w.trace))
            n = max(n, len({e.thread for e in w.trace}))
        ex.events += len(w.trace)
        ex.executions += 1
        if how == "cut":
            ex.cut_events += 1
        ex._record(w, how, why=partial(execution_races, w.trace))
        w.dispose()
        if progress is not None:
            ex._tell()
        if deadline is not None and time.monotonic() > deadline and ex.executions < runs:
            cut_by.append("time")
            break
        if stop_at_violation and ex.first_violation is not None:
            cut_by.append("violation")
            break
        if stop_requested() and ex.executions < runs:
            cut_by.append("interrupted")
            break
    r = ExploreResult(
        schedulers=ex.schedulers,
        executions=ex.executions,
        blocked=0,
        cut_events=ex.cut_events,
        outcomes=list(ex.groups.values()),
        nonsmp=None,
        exhausted=False,
        cut_by=cut_by,
        estimate=0.0,
        elapsed=time.monotonic() - ex._t0,
        events=ex.events,
        first_violation=ex.first_violation,
        graph=ex.graph,
    )
    for g in r.outcomes:
        # (each new outcome's events in words now, as a worker sends them:
        # kept until the chunks are counted, the events they are made from
        # were a thousand objects an outcome for the collector to go over)
        g.first.events  # noqa: B018
    at = None if ex.first_violation_s is None else ex._t0 + ex.first_violation_s
    return r, n, k, at


def _chunks(mapper, chunks, parts: list, runs: int, progress):
    """``mapper(run_chunk, chunks)``; with ``map`` (this process) each chunk
    tells ``progress`` as it goes, after the runs of those before it."""
    if progress is None or mapper is not map:
        return mapper(run_chunk, chunks)

    def one(args):
        before = sum(p.executions for p in parts)
        return run_chunk(args, lambda m, b, _e: progress(before + m, b, float(runs)))

    return map(one, chunks)


def sample(
    setup,
    runs: int,
    method: str = "random",
    seed: int | None = None,
    depth: int = 3,
    schedulers: int = 2,
    reductions: int = 200,
    after_timeout: int = AFTER_TIMEOUT_MS,
    max_events: int = MAX_EVENTS,
    time_budget: float | None = None,
    checks=(),
    nonsmp: bool = True,
    blocked_ok: bool = False,
    graph: bool = False,
    stop_at_violation: bool = False,
    progress=None,
    mapper=map,
) -> ExploreResult:
    """``runs`` schedules of ``setup``'s workload, random or PCT (``method``),
    from ``seed`` (a fresh one, returned in the result, when None);
    ``progress(done, 0, runs)`` as they go (see ``Explorer``).  The runs
    are cut into chunks of ``CHUNK``, each from its own random stream of
    the seed (``run_chunk``), and ``mapper(run_chunk, chunks)`` runs them
    (a pool of worker processes can: the result is the same, the chunks
    counted in order)."""
    if method not in ("random", "pct"):
        raise SimError(f"method must be random or pct, not {method!r}")
    if type(depth) is not int or depth < 1:
        raise SimError(f"depth must be an int >= 1, not {depth!r}")
    if type(runs) is not int or runs < 1:
        raise SimError(f"runs must be an int >= 1, not {runs!r}")
    if seed is not None and type(seed) is not int:
        raise SimError(f"seed must be an int or None (a fresh one), not {seed!r}")
    if type(max_events) is not int or max_events < 1:
        raise SimError(f"max_events must be an int >= 1, not {max_events!r}")
    check_time_budget(time_budget)
    if seed is None:
        seed = random.SystemRandom().randrange(1 << 32)
    t0 = time.monotonic()
    deadline = None if time_budget is None else t0 + time_budget
    options = dict(
        schedulers=schedulers,
        reductions=reductions,
        after_timeout=after_timeout,
        max_events=max_events,
        checks=checks_of(checks),
        blocked_ok=blocked_ok,
        graph=graph,
    )
    # (made as they are handed out: a billion runs asked for under a time
    # budget are ten million chunks, most never run)
    chunks = (
        (setup, options, method, depth, seed, c, min(CHUNK, runs - c * CHUNK), deadline,
         stop_at_violation)
        for c in range(-(-runs // CHUNK))
    )  # fmt: skip
    parts: list[ExploreResult] = []
    n = k = 0
    violation_at = None
    cut_by: list[str] = []
    for got in _chunks(mapper, chunks, parts, runs, progress):
        if got is None:  # (not started: its time had passed, or a stop was asked)
            cut_by.append("interrupted" if stop_requested() else "time")
            break
        r, cn, ck, at = got
        parts.append(r)
        n, k = max(n, cn), max(k, ck)
        if violation_at is None:
            violation_at = at
        if progress is not None:
            progress(sum(p.executions for p in parts), 0, float(runs))
        if "violation" in r.cut_by or "interrupted" in r.cut_by:
            break  # (the chunks after it are not counted)
        # (a chunk the time budget cut: those after it that other workers
        # ran meanwhile are counted too, up to the first one not started)
    r = merge(parts, 0.0, nonsmp_outcome(setup, **options) if nonsmp else None)
    executions = r.executions
    notes = []
    if method == "random":
        notes.append(f"{executions} random schedule(s), seed {seed}")
    else:
        p = pct_bound(n, k, depth)
        # (1 - (1 - p)^runs, exact for a p far below the float's step)
        total = -math.expm1(max(1, executions) * math.log1p(-p)) if p < 1 else 1.0
        notes.append(
            f"PCT, depth {depth}, seed {seed}: with n = {n} threads and k = {k} steps, a bug "
            f"of depth {depth} is found with probability at least 1/(n·k^{depth - 1}) = "
            f"{p:.3g} per run, {_chance(total)} over {executions} run(s)"
        )
        if depth - 1 >= k:
            notes.append(
                f"With depth {depth}, each of a run's {k} steps is one of its {depth - 1} "
                "change points: every thread drops to a low priority after each step, and "
                "the runs differ little; a depth well below k samples more orders."
            )
    r.schedulers = schedulers
    r.method, r.seed, r.notes = method, seed, notes
    r.cut_by = sorted(set(r.cut_by) | set(cut_by))
    r.exhausted, r.estimate, r.tasks, r.dpor = False, 0.0, 1, ""
    r.first_violation_s = None if violation_at is None else violation_at - t0
    r.elapsed = time.monotonic() - t0
    return r
