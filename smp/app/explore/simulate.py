"""``smp-emu explore RUN-SCENARIO``: a run/stress scenario explored in the
simulator (``smp.sim``) rather than on the real emulator.

Runs in the user's process; with ``jobs > 1`` part of the search runs in
local worker processes (``multiprocess``), each building the workload
again from the scenario.  Under optimal DPOR, large branches of the one
tree are handed to them as tasks and taken in the tree's order
(``smp.sim.share``), so ``--jobs 1`` and ``--jobs N`` explore the same
executions in the same order.  Under Source-DPOR the tree is split into
subtrees (``smp.sim.explorer.explore_split``): a pool shares them when
there is no execution bound, and under one each subtree stays with one
worker, which goes on with it in the next round; the split does not
depend on the number of workers, so the outcomes and counts are the same
for any ``--jobs`` (a small search is not split).  Three ways
to search: exhaustive DPOR up to the bounds (the default; optimal DPOR,
or Source-DPOR with ``--dpor source`` or a preemption bound), ``random``
schedules and ``pct``; or one ``schedule`` replayed.  The text and the JSON
carry, per distinct outcome, its events (processes by scenario role and
pid), race pairs, schedule, the command that replays it and nonsmp's
verdict.
"""

from __future__ import annotations

import os
import shlex
import signal
import textwrap
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass

import multiprocess

from smp.app.expect import expect_checks
from smp.app.explore.scenario import explore_example_names
from smp.app.explore.workload import Bounds, ScenarioWorkload
from smp.app.scenario import example_names, load_scenario, read_file, read_toml
from smp.core.errors import ScenarioError
from smp.sim.catalogue import CATALOGUE, by_name
from smp.sim.explorer import (
    SHRINK_OUTCOMES,
    Explorer,
    clear_stop,
    explore_split,
    replay,
    request_stop,
    shrink_failures,
    stop_requested,
)
from smp.sim.nodes import AFTER_TIMEOUT_MS
from smp.sim.report import format_execution, format_report, nonsmp_verdict
from smp.sim.sampling import CHUNK, sample
from smp.sim.world import SimError

from .proof import proof_lines, prove

__all__ = [
    "is_run_scenario",
    "no_such_scenario",
    "SimOptions",
    "simulate",
    "DEFAULT_MAX_EXECUTIONS",
    "default_max_executions",
    "is_race",
    "race_names",
]

#: the execution bound when none is given (0: none)
DEFAULT_MAX_EXECUTIONS = 500


@dataclass
class SimOptions:
    bounds: Bounds = Bounds()
    schedulers: int | None = None
    max_executions: int | None = DEFAULT_MAX_EXECUTIONS
    time_budget: float | None = None
    preemptions: int | None = None
    dpor: str | None = None  # "optimal", "source" (None: optimal, source under --preemptions)
    random: int | None = None
    pct: int | None = None
    depth: int = 3
    seed: int | None = None
    schedule: str | None = None
    graph: str | None = None
    jobs: int = 1
    nonsmp: bool = True
    events: bool = True
    prove: bool = False  # each outcome's schedule run again on real processes
    shrink: int = SHRINK_OUTCOMES  # failing outcomes whose schedule is shrunk
    #: a receive timeout or busy spell of this many ms or more never fires
    after_timeout: int = AFTER_TIMEOUT_MS
    #: ``progress(executions, blocked, estimate)`` as the search goes
    progress: Callable[[int, int, float], object] | None = None

    def sampled(self) -> tuple[str, int] | None:
        """``(method, runs)`` of a random or PCT sample; None for a search."""
        if self.random is not None:
            return "random", self.random
        return None if self.pct is None else ("pct", self.pct)


def _replay_command(scenario: str, o: SimOptions):
    """``smp-emu explore SCENARIO [bounds] --schedule '...'``: the options that
    change the workload, then the schedule."""
    words = ["smp-emu", "explore", scenario]
    default = Bounds()
    for k, v in asdict(o.bounds).items():
        if v != getattr(default, k):
            words += [f"--{k}", str(v)]
    if o.schedulers is not None:
        words += ["--schedulers", str(o.schedulers)]
    if o.after_timeout != AFTER_TIMEOUT_MS:
        words += ["--after-timeout", str(o.after_timeout)]
    prefix = " ".join(shlex.quote(w) for w in words)
    return lambda schedule: f"{prefix} --schedule {shlex.quote(schedule)}"


def _run(wl: ScenarioWorkload, o: SimOptions, checks: list):
    common = dict(
        nonsmp=o.nonsmp,
        graph=o.graph is not None,
        checks=checks,
        progress=o.progress,
        after_timeout=o.after_timeout,
        time_budget=o.time_budget,
    )
    if o.sampled() is not None:
        method, runs = o.sampled()
        return sample_shared(
            wl.setup, wl.schedulers, runs, method, o.jobs, seed=o.seed, depth=o.depth, **common
        )
    opts = dict(max_executions=o.max_executions, **common)
    if o.preemptions is not None:
        opts["preemptions"] = o.preemptions
    if o.dpor is not None:
        opts["dpor"] = o.dpor
    return search_shared(wl.setup, wl.schedulers, o.jobs, **opts)


def sample_shared(setup, schedulers: int, runs: int, method: str, jobs: int = 1, **options):
    """``smp.sim.sample``'s runs of ``setup``, their chunks shared among
    ``jobs`` worker processes (no more than the cores) when there are
    more than one, whichever is free taking the next while this process
    counts them in order: the result one process gets."""
    _check_jobs(jobs)
    if jobs <= 1 or runs <= CHUNK:
        return sample(setup, runs, method=method, schedulers=schedulers, **options)
    return _on_workers(
        _Workers(min(jobs, os.cpu_count() or 1), pinned=False),
        lambda w: sample(setup, runs, method=method, schedulers=schedulers, mapper=w, **options),
        "chunk(s) of runs it was running were run",
    )


def search_shared(setup, schedulers: int, jobs: int = 1, **options):
    """``smp.sim.explorer.explore_split``'s search of ``setup``, shared with
    ``jobs`` - 1 worker processes (optimal DPOR) or among ``jobs`` of them
    (Source-DPOR's subtrees) when there are more than one."""
    _check_jobs(jobs)
    if jobs <= 1:
        return explore_split(setup, schedulers, **options)
    # (a shared search: this process explores too, beside jobs - 1
    # workers, no more than the cores leave: more would only wait)
    shared = max(1, min(jobs, os.cpu_count() or 1) - 1)
    # a bound shares executions in rounds: subtree i always goes to worker
    # i mod jobs, which goes on with it where it stopped (run_task); with
    # none, one round: whichever worker is free takes the next subtree
    return _on_workers(
        _Workers(jobs, pinned=options.get("max_executions") is not None),
        lambda w: explore_split(
            setup, schedulers, mapper=w, submit=w.submit, window=shared, **options
        ),
        "subtree(s) it was exploring were explored",
    )


def _on_workers(workers: _Workers, run, lost_words: str):
    """``run(workers)``, the workers closed after it, whatever happens; a
    note when one died under way (what it had, ``lost_words``, done here
    instead); the time taken with the workers' start and end."""
    t0 = time.monotonic()
    try:
        r = run(workers)
    finally:
        workers.close()
    if workers.lost:
        r.notes.append(
            f"A worker died under way: the {workers.lost} {lost_words} by this process "
            "instead (the result is the same)."
        )
    r.elapsed = time.monotonic() - t0
    return r


def _search_words(r) -> str:
    """How a search ended, for its tree's file: complete, or what cut it."""
    if r.method != "dpor":
        return f"a sample of {r.executions:,} {r.method} runs, not the whole of the orders"
    if r.exhausted:
        return "complete: every equivalence class was explored" + (
            " within the preemption bound" if "preemptions" in r.cut_by else ""
        )
    return (
        f"cut by {', '.join(r.cut_by) or 'a bound'}, about {r.estimate:,.0f} executions in "
        "all (estimate)"
    )


def _check_jobs(jobs) -> None:
    if type(jobs) is not int or jobs < 1:
        raise SimError(f"jobs must be an int >= 1, not {jobs!r}")


def _quiet_on_interrupt() -> None:
    """A worker takes Ctrl-C as a request to stop its search at the next
    execution and hand over what it found (it printed a KeyboardInterrupt
    traceback, and the search was lost)."""
    clear_stop()
    signal.signal(signal.SIGINT, lambda _signum, _frame: request_stop())


class _StopOnCtrlC:
    """While a search runs, the first Ctrl-C asks it (and its workers) to
    stop at the next execution: the command prints the outcomes found so
    far, marked interrupted, and exits 130.  A second Ctrl-C stops at once
    (``KeyboardInterrupt``: nothing printed)."""

    def __enter__(self):
        clear_stop()
        try:
            self._old = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread: Ctrl-C stays as it was
            self._old = None
        return self

    @staticmethod
    def _handle(_signum, _frame) -> None:
        if stop_requested():
            raise KeyboardInterrupt
        request_stop()
        # (a Ctrl-C at a terminal reaches the workers too; a SIGINT sent to
        # this process alone is passed on)
        for child in multiprocess.active_children():
            try:
                os.kill(child.pid, signal.SIGINT)
            except OSError:
                pass

    def __exit__(self, *exc) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


class _Workers:
    """``explore_split``'s ``mapper`` over worker processes, started when the
    subtrees are handed out (none for a search its first tree ends), no
    more of them than ``jobs`` nor than subtrees, each in a pool of its own
    and watched (``_Watched``).  ``pinned``: the task of subtree ``i``
    always runs in worker ``i % n`` (run_task goes on with a subtree where
    it stopped), all handed out at once; else whichever worker is free
    takes the next.  The results come in order; a task whose worker died
    is run in this process instead (``lost`` counts them)."""

    def __init__(self, jobs: int, pinned: bool):
        self.jobs, self.pinned = jobs, pinned
        self.pools: list = []
        self._last: list = []  # (submit: each pool's last task)
        self._next = 0
        #: tasks (subtrees) run in this process because their worker died
        self.lost = 0

    def __call__(self, f, args):
        if self.pinned:
            args = list(args)  # (all handed out at once; else one at a time)
        if not self.pools:
            n = min(self.jobs, len(args)) if isinstance(args, list) else self.jobs
            self.pools = [multiprocess.Pool(1, initializer=_quiet_on_interrupt) for _ in range(n)]
            self._last = [None] * n
        return self._results(f, args)

    def _results(self, f, args):
        last, n = self._last, len(self.pools)
        todo = iter(args)
        handed: deque = deque()  # (arg, handle) handed out, in order
        count = 0  # tasks handed out
        ended = False  # (args has no more)

        def hand_out() -> None:
            nonlocal count, ended
            while not ended:
                if self.pinned:
                    k = count % n
                else:
                    k = next((k for k in range(n) if last[k] is None or last[k].ready()), None)
                    if k is None:
                        return
                arg = next(todo, _END)
                if arg is _END:
                    ended = True
                    return
                pool = self._pool(k)
                h = last[k] = _Watched(pool, pool.apply_async(f, (arg,)))
                handed.append((arg, h))
                count += 1

        while True:
            hand_out()
            if not handed:
                return
            arg, h = handed[0]  # (handed out: the ones before it are done, their workers free)
            while not h.ready():
                h.result.wait(WATCH_S)
                hand_out()  # (a worker that ended its task takes the next meanwhile)
            handed.popleft()
            r = h.get()
            if h.gone:
                self.lost += 1
                r = f(arg)  # (from its start: the same result, run_task says)
            yield r

    def _pool(self, k: int):
        """Pool ``k``, replaced first if a worker died in it (a task handed
        to it could wait for ever: its worker may have held its queue)."""
        h = self._last[k]
        if h is not None and h.broken():
            _stop(self.pools[k])
            self.pools[k] = multiprocess.Pool(1, initializer=_quiet_on_interrupt)
            self._last[k] = None
        return self.pools[k]

    def submit(self, f, arg):
        """``f(arg)`` in a worker (a handle with ``ready()`` and ``get()``):
        a shared search's task (``smp.sim.share``).  A free worker takes it;
        a new one starts only when none is free (``jobs`` at most), else
        the one that was given a task longest ago queues it."""
        pools, last = self.pools, self._last
        for i in range(len(pools)):
            self._pool(i)  # (one whose worker died is replaced)
        free = next((i for i, h in enumerate(last) if h is None or h.ready()), None)
        if free is None and len(pools) < self.jobs:
            pools.append(multiprocess.Pool(1, initializer=_quiet_on_interrupt))
            last.append(None)
            free = len(pools) - 1
        if free is None:
            free = self._next % len(pools)
            self._next += 1
        h = last[free] = _Watched(pools[free], pools[free].apply_async(f, (arg,)))
        return h

    def close(self) -> None:
        for p in self.pools:
            _stop(p)


def _stop(pool) -> None:
    """Terminate ``pool`` and wait for its end, ``STOP_S`` at most.  A worker
    killed from outside while it waited for a task held the pool's task
    queue, and ``terminate`` then waits for that queue for ever; its
    worker processes are killed instead and the pool is left (its threads
    are daemons, and a pool's terminate runs once: not again at exit)."""
    t = threading.Thread(target=lambda: (pool.terminate(), pool.join()), daemon=True)
    t.start()
    t.join(STOP_S)
    if t.is_alive():
        for w in list(pool._pool):  # (the pool's workers: no public view)
            if w.exitcode is None:
                w.kill()
                w.join(1)


#: the end of a worker's task list
_END = object()

#: how long closing a pool of workers may take before its workers are killed
STOP_S = 2.0


class _Watched:
    """A task handed to a one-process pool, watched: the pool replaces a
    worker that dies (killed from outside), and the task it was exploring
    never ends, so a task whose pool has another worker than when it was
    handed out is given up (``get`` gives None: the search explores that
    branch itself) rather than waited for for ever, and the pool is given
    no other task (``_Workers.submit`` starts a new one)."""

    __slots__ = ("pool", "result", "pids", "gone")

    def __init__(self, pool, result):
        self.pool, self.result = pool, result
        self.pids = self._pids()
        #: the worker died before the task ended (``Share.lost``)
        self.gone = False

    def _pids(self) -> list:
        return [w.pid for w in self.pool._pool]  # (the pool's workers: no public view)

    def _lost(self) -> bool:
        return not self.result.ready() and self.broken()

    def broken(self) -> bool:
        """Whether a worker of the pool died since the task was handed out."""
        return self._pids() != self.pids or any(w.exitcode is not None for w in self.pool._pool)

    def ready(self) -> bool:
        return self.result.ready() or self._lost()

    def get(self):
        while not self.result.ready():
            if self._lost():
                self.gone = True
                return None
            self.result.wait(WATCH_S)
        return self.result.get()


#: how often a search waiting for a worker's task looks whether the worker is alive
WATCH_S = 0.05


def is_run_scenario(scenario: str) -> bool:
    """A run/stress scenario (``[[groups]]``), not an explore one
    (``[[queue]]``): by the file's shape, or by the example's name."""
    if os.path.exists(scenario):
        try:
            data = read_toml(read_file(scenario), scenario)
        except ScenarioError:
            return False  # the explore loader says what is wrong with it
        return "groups" in data and "queue" not in data
    return scenario not in explore_example_names() and scenario in example_names()


def no_such_scenario(name: str) -> str:
    """What ``smp-emu explore`` and ``smp.explore`` say of a name that is no
    file and no example or race: every kind it takes, by name."""
    return (
        f"{name}: no such explore scenario, run scenario or race (a TOML file; an explore "
        f"example: {', '.join(explore_example_names())}; a run example: "
        f"{', '.join(example_names())}; a race: {', '.join(race_names())})"
    )


def is_race(name: str) -> bool:
    """A race of the catalogue (``smp.sim.catalogue``), by its name."""
    return not os.path.exists(name) and name in race_names()


def names_a_race(scenario: str) -> bool:
    """``scenario`` is run as a race of the catalogue (an example of the
    same name is taken first)."""
    return is_race(scenario) and scenario not in example_names()


def default_max_executions(scenario: str) -> int | None:
    """The execution bound when none is given: none for a race of the
    catalogue (each is written to end, and is explored in full), else
    ``DEFAULT_MAX_EXECUTIONS``."""
    return None if names_a_race(scenario) else DEFAULT_MAX_EXECUTIONS


def race_names() -> list[str]:
    return [r.name for r in CATALOGUE]


@dataclass
class _RaceWorkload:
    """A catalogue race as ``_run`` takes a workload."""

    name: str
    setup: object
    schedulers: int
    notes: tuple = ()


def _race(name: str, o: SimOptions) -> tuple[_RaceWorkload, list, list, str]:
    race = by_name(name)
    if o.schedulers is not None and o.schedulers != race.schedulers:
        raise ScenarioError(f"the race {name} is written for {race.schedulers} schedulers")
    if o.bounds != Bounds():
        raise ScenarioError(f"the race {name} is a fixed workload: it takes no workload bounds")
    head = [
        f"Race {name} (smp.sim.catalogue) in the simulator, {race.schedulers} scheduler(s).",
        *textwrap.wrap(race.about, 88),
    ]
    return _RaceWorkload(name, race.setup, race.schedulers), list(race.checks), head, "catalogue"


def simulate(scenario: str, o: SimOptions) -> tuple[str, dict]:
    """Explore (or replay in) the run scenario ``scenario`` (a path or an
    example's name), or a race of the catalogue by its name; returns the
    text report and the same as data.  A bad scenario or one the simulator
    cannot run raises ``ScenarioError``, a schedule that cannot run
    ``SimError``."""
    if names_a_race(scenario):
        wl, checks, head, source = _race(scenario, o)
    else:
        sc = load_scenario(scenario)
        wl = ScenarioWorkload(sc, o.bounds, o.schedulers)
        source = sc["source"]
        head = [
            f"Scenario {wl.name} ({source}) in the simulator, {wl.schedulers} scheduler(s); "
            f"bounds: {o.bounds.operations} operation(s) per process, {o.bounds.count} "
            f"instance(s) per group, size {o.bounds.size}, {o.bounds.firings} firing(s) per "
            "fault.",
        ]
        head += [f"Bound: {n}" for n in wl.notes]
        if o.after_timeout != AFTER_TIMEOUT_MS:
            head.append(
                f"Timers: a receive timeout or busy spell under {o.after_timeout} ms may end "
                "at any point while armed (--after-timeout)."
            )
        # the scenario's [[expect]] clauses: user predicates on every outcome
        checks = expect_checks(wl.sc)
    data: dict = {
        "kind": "explore-sim",
        "scenario": wl.name,
        "source": source,
        "schedulers": wl.schedulers,
        # (a race of the catalogue is its own workload: no bound cuts it)
        "bounds": {} if isinstance(wl, _RaceWorkload) else asdict(o.bounds),
        "after_timeout": o.after_timeout,
        "notes": list(wl.notes),
    }
    command = _replay_command(scenario, o)
    nonsmp = None
    if o.schedule is not None:
        at = o.after_timeout
        ex = replay(wl.setup, o.schedule, schedulers=wl.schedulers, checks=checks, after_timeout=at)
        if o.nonsmp:
            nonsmp = Explorer(
                wl.setup, schedulers=wl.schedulers, checks=checks, after_timeout=at
            ).run_nonsmp()
        given = len(o.schedule.split())
        added = len(ex.schedule.split()) - given
        if added:
            head.append(
                f"The schedule names {given} step(s); the first enabled thread took each of the "
                f"{added} after them (the execution's whole schedule is printed below)."
            )
        data["replay"] = {
            **ex.as_dict(),
            "given_steps": given,
            "completed_steps": added,
            "nonsmp": None if nonsmp is None else nonsmp.as_dict(),
            "nonsmp_verdict": nonsmp_verdict(ex.outcome, nonsmp),
        }
        text = "\n".join(head) + "\n" + format_execution(ex, nonsmp, events=o.events)
        if o.prove:
            proof = prove(wl.setup, ex.schedule, schedulers=wl.schedulers, after_timeout=at)
            data["replay"]["proof"] = proof.as_dict()
            text += "\n" + proof_lines([("the execution", proof)])
        return text, data
    with _StopOnCtrlC():
        r = _run(wl, o, checks)
        # (a time budget covers the shrinking too: it gets what the search left)
        left = None if o.time_budget is None else time.monotonic() + o.time_budget - r.elapsed
        shrink_failures(
            r,
            wl.setup,
            wl.schedulers,
            checks=checks,
            limit=o.shrink,
            deadline=left,
            after_timeout=o.after_timeout,
        )
    if "interrupted" in r.cut_by:
        data["interrupted"] = True
    if o.graph is not None and r.graph is not None:
        number = {g.outcome: i for i, g in enumerate(r.outcomes, 1)}
        dot = r.graph.to_dot(number.get, title=f"explore {wl.name}", search=_search_words(r))
        try:
            with open(o.graph, "w", encoding="utf-8") as f:
                f.write(dot)
        except OSError as e:
            why = e.strerror or str(e)
            raise ScenarioError(
                f"--graph {o.graph}: cannot write it: {why[:1].lower() + why[1:]}"
            ) from None
        head.append(f"The explored tree ({len(r.graph)} nodes) is in {o.graph} (graphviz DOT).")
    d = r.as_dict()
    for od, g in zip(d["outcomes"], r.outcomes, strict=True):
        od["replay"] = command(g.first.schedule)
        if g.shrunk is not None:
            od["shrunk"]["replay"] = command(g.shrunk.schedule)
        od["nonsmp_verdict"] = nonsmp_verdict(g.outcome, r.nonsmp)
    data["result"] = d
    data["jobs"] = o.jobs
    # the bounds the search ran under (None: none); a sample's, its runs
    if o.sampled() is not None:
        data["limits"] = {"runs": o.sampled()[1], "time_budget": o.time_budget}
    else:
        data["limits"] = {"max_executions": o.max_executions, "time_budget": o.time_budget}
    data["expect"] = _expect_report(checks, r)
    head += [_expect_line(e) for e in data["expect"]]
    text = (
        "\n".join(head)
        + "\n"
        + format_report(r, events=o.events, replay=command, fixed=isinstance(wl, _RaceWorkload))
    )
    if o.prove:
        proofs = []
        for i, (od, g) in enumerate(zip(d["outcomes"], r.outcomes, strict=True), 1):
            proof = prove(
                wl.setup, g.first.schedule, schedulers=wl.schedulers, after_timeout=o.after_timeout
            )
            od["proof"] = proof.as_dict()
            proofs.append((f"outcome {i}", proof))
        text += "\n" + proof_lines(proofs)
    return text, data


def proved(data: dict) -> bool:
    """Every proof in an explore result held (True when none was asked)."""
    found = [od["proof"] for od in data.get("result", {}).get("outcomes", []) if "proof" in od]
    if "replay" in data and "proof" in data["replay"]:
        found.append(data["replay"]["proof"])
    return all(p["same"] for p in found)


def broken(data: dict) -> bool:
    """Whether an outcome of an explore result (or the replayed execution)
    broke an invariant, an ``expect`` clause or a race's own check: the
    command then exits 1, as every command does on a violated invariant."""
    found = [od["outcome"] for od in data.get("result", {}).get("outcomes", [])]
    if "replay" in data:
        found.append(data["replay"]["outcome"])
    return any(oc["violations"] for oc in found)


def _broke(check, oc) -> bool:
    prefix = f"check {check.__name__} failed"
    return any(v.startswith(prefix) for v in oc.violations)


def _expect_report(checks: list, r) -> list[dict]:
    """Per clause, the outcomes (numbered as in the report, from 1) that
    break it, and whether the nonsmp run does."""
    out = []
    for c in checks:
        if not hasattr(c, "sc"):
            continue  # a race's own predicate: its violations are in the outcomes
        e = c.sc["expect"][c.index]
        out.append(
            {
                "expect": c.index,
                "where": e.get("where") or f"expect[{c.index}]",
                "clause": c.__name__.split(" ", 1)[1],
                "outcomes": len(r.outcomes),
                "broken_in": [i for i, g in enumerate(r.outcomes, 1) if _broke(c, g.outcome)],
                "nonsmp_broken": None if r.nonsmp is None else _broke(c, r.nonsmp),
            }
        )
    return out


def _expect_line(e: dict) -> str:
    broken = e["broken_in"]
    nonsmp = (
        ""
        if e["nonsmp_broken"] is None
        else f"; nonsmp {'breaks' if e['nonsmp_broken'] else 'keeps'} it"
    )
    if not broken:
        return (
            f"Expect {e['where']}: {e['clause']}: held in all {e['outcomes']} outcome(s){nonsmp}."
        )
    shown = ", ".join(str(i) for i in broken[:10]) + (", ..." if len(broken) > 10 else "")
    return (
        f"Expect {e['where']}: {e['clause']}: BROKEN in {len(broken)} of {e['outcomes']} "
        f"outcome(s) ({shown}){nonsmp}."
    )


def default_jobs() -> int:
    return max(1, os.cpu_count() or 1)
