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
"""

from __future__ import annotations

import random
import time
from functools import partial

from .dpor import MAX_EVENTS
from .explorer import Explorer, ExploreResult, execution_races, stop_requested
from .nodes import AFTER_TIMEOUT_MS
from .world import SimError

__all__ = ["sample", "pct_bound"]


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
) -> ExploreResult:
    """``runs`` schedules of ``setup``'s workload, random or PCT (``method``),
    from ``seed`` (a fresh one, returned in the result, when None);
    ``progress(done, 0, runs)`` as they go (see ``Explorer``)."""
    if method not in ("random", "pct"):
        raise SimError(f"method must be random or pct, not {method!r}")
    if depth < 1:
        raise SimError("depth must be >= 1")
    if seed is None:
        seed = random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)
    ex = Explorer(
        setup,
        schedulers=schedulers,
        reductions=reductions,
        after_timeout=after_timeout,
        max_events=max_events,
        checks=checks,
        nonsmp=nonsmp,
        blocked_ok=blocked_ok,
        graph=graph,
        # (the estimate of a sample is the runs asked for)
        progress=None if progress is None else (lambda n, b, _e: progress(n, b, float(runs))),
    )
    t0 = ex._t0 = time.monotonic()
    deadline = None if time_budget is None else t0 + time_budget
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
    notes = []
    if method == "random":
        notes.append(f"{ex.executions} random schedule(s), seed {seed}")
    else:
        p = pct_bound(n, k, depth)
        total = 1 - (1 - p) ** max(1, ex.executions)
        notes.append(
            f"PCT, depth {depth}, seed {seed}: with n = {n} threads and k = {k} steps, a bug "
            f"of depth {depth} is found with probability at least 1/(n·k^{depth - 1}) = "
            f"{p:.3g} per run, {total:.3g} in {ex.executions} run(s)"
        )
    return ExploreResult(
        schedulers=schedulers,
        executions=ex.executions,
        blocked=0,
        cut_events=ex.cut_events,
        outcomes=list(ex.groups.values()),
        nonsmp=ex.run_nonsmp() if nonsmp else None,
        exhausted=False,
        cut_by=cut_by,
        estimate=0.0,
        elapsed=time.monotonic() - t0,
        events=ex.events,
        method=method,
        seed=seed,
        notes=notes,
        first_violation=ex.first_violation,
        first_violation_s=ex.first_violation_s,
        graph=ex.graph,
    )
