"""``explore(setup)`` and ``replay(setup, schedule)``: every distinct
outcome of a workload on the simulated SMP build, each with a schedule that
replays it.

Runs in the caller's process.  ``Explorer`` drives the DPOR tree
(``smp.sim.dpor``) over fresh worlds (``smp.sim.world``) built by the
user's ``setup(vm)``, groups the complete executions by ``Outcome``, keeps
for the first execution of each outcome its numbered events and the race
pairs that made the explorer try it, and stops at a bound (executions,
seconds) saying which one cut the search, with an estimate of the
executions left.  Results are plain data (``ExploreResult.as_dict``) so a
CLI, a JSON writer or an HTML report can take them as they are.
"""

from __future__ import annotations

import functools
import itertools
import re
import time
from dataclasses import dataclass, field
from typing import Callable

from .deps import explain
from .dpor import MAX_EVENTS, Task, Tree, all_executions, mazurkiewicz_key, races, split
from .graph import Trie
from .nodes import AFTER_TIMEOUT_MS, check_after_timeout
from .outcome import Namer, Outcome, nonsmp_outcome_of, outcome_of
from .share import Share
from .shrink import Shrunk, shrink
from .vm import SimVM
from .world import NonsmpWorld, SimError, World

__all__ = [
    "check_schedule",
    "checks_of",
    "not_steppable",
    "request_stop",
    "clear_stop",
    "stop_requested",
    "Explorer",
    "ExploreResult",
    "Execution",
    "OutcomeGroup",
    "explore",
    "replay",
    "brute_force",
    "merge",
    "explore_split",
    "run_task",
    "shrink_failures",
    "SHRINK_OUTCOMES",
]


class _Stop:
    """Whether the user asked the searches of this process to stop (a
    Ctrl-C the command line turns into ``request_stop``): each ends at its
    next execution, cut by ``"interrupted"``, with what it found so far."""

    asked = False


def request_stop() -> None:
    _Stop.asked = True


def clear_stop() -> None:
    _Stop.asked = False


def stop_requested() -> bool:
    return _Stop.asked


@dataclass
class Execution:
    """One execution: its schedule (replayable), outcome, numbered events
    and the races that made the explorer try it.  The events' words may be
    given as a function that makes them: they are made when first read
    (a search no one reports, a benchmark's or a test's, never makes them;
    two executions compare without them: the schedule makes them)."""

    index: int
    schedule: str
    outcome: Outcome
    _events: list[str] | Callable[[], list[str]] = field(
        default_factory=list, repr=False, compare=False
    )
    races: list[str] = field(default_factory=list)

    @property
    def events(self) -> list[str]:
        lines = self._events
        if callable(lines):
            lines = self._events = lines()
        return lines

    def __getstate__(self) -> dict:
        # (to another process: the words, not what makes them)
        return {**self.__dict__, "_events": self.events}

    def as_dict(self) -> dict:
        return {
            "index": self.index,
            "schedule": self.schedule,
            "outcome": self.outcome.as_dict(),
            "events": list(self.events),
            "races": list(self.races),
        }


@dataclass
class OutcomeGroup:
    outcome: Outcome
    count: int
    first: Execution
    #: for an outcome that breaks something, its first schedule shrunk
    #: (``smp.sim.shrink``), when asked for
    shrunk: Shrunk | None = None
    #: for one that breaks something and was not shrunk: why, in words
    not_shrunk: str | None = None


@dataclass
class ExploreResult:
    schedulers: int
    executions: int  # complete executions explored
    blocked: int  # sleep-set blocked (not complete)
    cut_events: int  # executions cut by max_events
    outcomes: list[OutcomeGroup]
    nonsmp: Outcome | None
    exhausted: bool  # every class explored
    cut_by: list[str]  # "executions", "time", "preemptions" when a bound cut the search
    estimate: float  # executions in all (exact when exhausted)
    elapsed: float
    events: int  # events of the executions run, their replayed prefixes included
    method: str = "dpor"  # "dpor", "random" or "pct"
    seed: int | None = None  # the random seed of "random" and "pct"
    notes: list = field(default_factory=list)  # what the method promises, in words
    first_violation: int | None = None  # the execution that first broke an invariant
    first_violation_s: float | None = None  # ... seconds into the search
    #: subtrees explored apart (a split, Source-DPOR; 1: one tree), or
    #: branches taken from tasks (a shared search, optimal DPOR; 0 or more)
    tasks: int = 1
    graph: Trie | None = None  # the explored tree, when asked for
    dpor: str = ""  # "optimal" (wakeup trees) or "source" (backtrack sets) for "dpor"
    misses: int = 0  # planned wakeup-tree steps that could not be taken (``Tree.misses``)

    @property
    def violations(self) -> list[OutcomeGroup]:
        return [g for g in self.outcomes if g.outcome.violations]

    def as_dict(self) -> dict:
        return {
            "schedulers": self.schedulers,
            "executions": self.executions,
            "blocked": self.blocked,
            "cut_events": self.cut_events,
            "exhausted": self.exhausted,
            "cut_by": list(self.cut_by),
            "estimate": self.estimate,
            "elapsed": self.elapsed,
            "events": self.events,
            "method": self.method,
            "seed": self.seed,
            "notes": list(self.notes),
            "first_violation": self.first_violation,
            "first_violation_s": self.first_violation_s,
            "tasks": self.tasks,
            "dpor": self.dpor,
            "misses": self.misses,
            "outcomes": [
                {
                    "count": g.count,
                    **g.first.as_dict(),
                    **({} if g.shrunk is None else {"shrunk": g.shrunk.as_dict()}),
                    **({} if g.not_shrunk is None else {"not_shrunk": g.not_shrunk}),
                }
                for g in self.outcomes
            ],
            "nonsmp": None if self.nonsmp is None else self.nonsmp.as_dict(),
        }


#: what a setup that does not do the same on every run is told
NOT_THE_SAME = (
    "the setup did not do the same as on its first run ({what}): every execution runs "
    "it again, so it and the bodies it spawns must do the same each time (seed a "
    "random number generator with a constant, read no clock)"
)


def world_factory(
    setup, schedulers: int, reductions: int, after_timeout: int = AFTER_TIMEOUT_MS
) -> Callable[[], World]:
    """A new world each call: ``setup`` run on it, its passive collectors
    started; a timer of ``after_timeout`` ms or more never fires in it.  A
    setup that raises leaves no body behind; one that made other processes,
    flags, names or tracer state than on its first call is refused
    (``SimError``): the explorer's executions would not be of one workload."""
    first: list = []

    def new_world() -> World:
        w = World(schedulers, reductions, after_timeout)
        try:
            setup(SimVM(w))
            w.start_collectors()
        except BaseException:
            w.dispose()  # (its bodies never started: closed, not left to warn)
            raise
        made = w.setup_print()
        if not first:
            first.append(made)
        elif made != first[0]:
            w.dispose()
            what = next(
                n
                for n, a, b in zip(
                    ("processes", "names", "tracer state"), made, first[0], strict=True
                )
                if a != b
            )
            raise SimError(NOT_THE_SAME.format(what=f"other {what}"))
        return w

    return new_world


def _describe(trace: list, namer: Namer) -> list[str]:
    """An execution's events, numbered, in words."""
    # (a T#Port<...> or R<...> thread widens the column)
    width = max(6, *(len(e.thread) for e in trace)) if trace else 6
    return [f"{i + 1:3}. {e.thread:>{width}}  {namer.text(e.label)}" for i, e in enumerate(trace)]


def execution_races(events: list, limit: int = 12, rel=None) -> list[tuple]:
    """The races of one execution, as ``Tree.why`` gives them (the first
    ``limit``): for a schedule no explorer branched on (a replay, a random
    run), the pairs of events whose order it fixed.  ``rel``: their
    happens-before relation, when one is built already."""
    out = []
    for i, j, _initials in races(events, rel=rel):
        out.append((i, j, events[i].label, events[j].label, explain(events[i], events[j])))
        if len(out) >= limit:
            break
    return out


def _describe_races(why: list, namer: Namer) -> list[str]:
    out = []
    for i, j, li, lj, reasons in why:
        head = (
            f"step {i + 1} ({namer.text(li)}) took the work of {_thread_text(lj, namer)}, "
            "which never stepped"
            if i == j
            else f"step {i + 1} ({namer.text(li)}) races with step {j + 1} ({namer.text(lj)})"
        )
        out.append(head + "".join(f"\n      {namer.text(r)}" for r in reasons))
    return out


def _thread_text(thread: str, namer: Namer) -> str:
    """A thread's name, with the role of the process whose BIF request or
    timer it is (``T<0.87.0> (C's timer)``)."""
    if thread[0] in "RT" and thread[1:2] == "<":
        what = "BIF request" if thread[0] == "R" else "timer"
        return f"{thread} ({namer.by_text.get(thread[1:], thread[1:])}'s {what})"
    return thread


def check_time_budget(time_budget) -> None:
    """Refuse a time budget that is no number of seconds > 0 (None: none)."""
    if time_budget is not None and not (
        type(time_budget) in (int, float) and 0 < time_budget < float("inf")
    ):
        raise SimError(f"time_budget must be a number of seconds > 0 or None, not {time_budget!r}")


def nonsmp_outcome(setup, schedulers: int, **options) -> Outcome:
    """nonsmp's outcome of ``setup`` (its one order), with the options of a
    search that bear on it (the rest are a search's and ignored)."""
    keep = ("reductions", "after_timeout", "checks", "blocked_ok")
    ex = Explorer(setup, schedulers=schedulers, **{k: v for k, v in options.items() if k in keep})
    return ex.run_nonsmp()


class Explorer:
    """Explore a workload: ``Explorer(setup, schedulers=2).run()``."""

    def __init__(
        self,
        setup: Callable[[SimVM], object],
        schedulers: int = 2,
        reductions: int = 200,
        after_timeout: int = AFTER_TIMEOUT_MS,
        max_executions: int | None = None,
        time_budget: float | None = None,
        max_events: int = MAX_EVENTS,
        checks=(),
        nonsmp: bool = True,
        blocked_ok: bool = False,
        prefix: tuple = (),
        task: Task | None = None,
        graph: bool = False,
        stop_at_violation: bool = False,
        preemptions: int | None = None,
        dpor: str | None = None,
        progress: Callable[[int, int, float], object] | None = None,
    ):
        if type(schedulers) is not int or schedulers < 1:
            raise SimError(f"schedulers must be an int >= 1, not {schedulers!r}")
        check_after_timeout(after_timeout)
        if max_executions is not None and (type(max_executions) is not int or max_executions < 1):
            # (0 ran nothing here where the command line's --max-executions 0
            # means no bound: None is that)
            raise SimError(
                f"max_executions must be an int >= 1 or None (no bound), not {max_executions!r}"
            )
        check_time_budget(time_budget)
        #: ``progress(executions, blocked, estimate)`` after the first
        #: execution, then at most every ``PROGRESS_EVERY`` seconds
        self.progress = progress
        self._told = float("-inf")
        self.setup = setup
        self.schedulers = schedulers
        self.reductions = reductions
        self.after_timeout = after_timeout
        self.max_executions = max_executions
        self.time_budget = time_budget
        self.checks = checks_of(checks)
        self.nonsmp = nonsmp
        self.blocked_ok = blocked_ok
        self._memo: dict = {}  # outcome_of's, across executions
        if preemptions is not None and (type(preemptions) is not int or preemptions < 0):
            raise SimError(f"preemptions must be an integer >= 0, not {preemptions!r}")
        if dpor not in (None, "optimal", "source"):
            raise SimError(f"dpor is 'optimal' or 'source', not {dpor!r}")
        if dpor == "optimal" and preemptions is not None:
            raise SimError("optimal DPOR takes no preemption bound: use source DPOR with it")
        self.tree = Tree(
            world_factory(setup, schedulers, reductions, after_timeout),
            max_events,
            tuple(prefix),
            preemptions=preemptions,
            optimal=None if dpor is None else dpor == "optimal",
            task=task,
        )
        self.executions = self.blocked = self.cut_events = self.events = 0
        self.groups: dict[Outcome, OutcomeGroup] = {}
        self._estimate = 0.0  # (of the executions in all, after the last one)
        self._below = 1.0  # (the tree's estimate of its leaves, unscaled: _execute_one)
        self.graph = Trie() if graph else None
        self.stop_at_violation = stop_at_violation
        self.first_violation: int | None = None
        self.first_violation_s: float | None = None
        self._t0 = 0.0
        #: a task's (``run_branch``): after each complete execution, its
        #: outcome and the counts so far (``TaskResult.upto``)
        self.marks: list | None = None

    @property
    def stats(self) -> dict:
        return {
            "executions": self.executions,
            "blocked": self.blocked,
            "cut_events": self.cut_events,
            "outcomes": len(self.groups),
            "events": self.events,
        }

    def run_nonsmp(self) -> Outcome:
        w = NonsmpWorld(self.reductions, self.after_timeout)
        self.setup(SimVM(w))
        w.run()
        oc = nonsmp_outcome_of(w, self.checks, self.blocked_ok)
        w.dispose()
        return oc

    def run(self, share: Share | None = None) -> ExploreResult:
        """Explore up to the bounds.  ``share``: branches of the tree it
        takes (``Share.takes``) are explored as tasks, in other processes
        ahead of their turn, and their results taken in the tree's order."""
        t0 = self._t0 = time.monotonic()
        deadline = None if self.time_budget is None else t0 + self.time_budget
        tree = self.tree
        cut_by: list[str] = []
        try:
            while not tree.finished:  # (a split's prefix past the preemption bound: nothing)
                if self.max_executions is not None and self.executions >= self.max_executions:
                    cut_by.append("executions")  # (run again with the bound it stopped at)
                    break
                if _Stop.asked:
                    cut_by.append("interrupted")
                    break
                if share is not None and share.takes(self):
                    cut = self._take_task(share.result())
                    if cut:
                        if self.progress is not None:
                            self._tell()
                        cut_by.extend(cut)  # (the search ends where that task's did)
                        break
                else:
                    self._execute_one()
                if self.progress is not None:
                    self._tell()
                if share is not None:
                    share.hand_out(self, deadline)
                if not tree.advance():
                    break
                if self.max_executions is not None and self.executions >= self.max_executions:
                    cut_by.append("executions")
                    break
                if deadline is not None and time.monotonic() > deadline:
                    cut_by.append("time")
                    break
                if self.stop_at_violation and self.first_violation is not None:
                    cut_by.append("violation")
                    break
        finally:
            tree.close()  # (its spare worlds: a search cut or failing too)
        exhausted = tree.finished
        if tree.bound_cut:
            cut_by.append("preemptions")
        estimate = (
            float(self.executions) if exhausted else max(float(self.executions), self._estimate)
        )
        return ExploreResult(
            schedulers=self.schedulers,
            executions=self.executions,
            blocked=self.blocked,
            cut_events=self.cut_events,
            outcomes=list(self.groups.values()),
            nonsmp=self.run_nonsmp() if self.nonsmp else None,
            exhausted=exhausted,
            cut_by=cut_by,
            estimate=estimate,
            elapsed=time.monotonic() - t0,
            events=self.events,
            first_violation=self.first_violation,
            first_violation_s=self.first_violation_s,
            graph=self.graph,
            dpor="optimal" if tree.optimal else "source",
            misses=tree.misses,
        )

    def _execute_one(self) -> None:
        """One execution of the tree, its races planned, counted."""
        tree = self.tree
        w, how = tree.execute()
        self.events += len(w.trace)
        tree.add_races()
        if how == "blocked":
            self.blocked += 1
            if self.graph is not None:
                self._graph_add(w, "blocked")
        else:
            self.executions += 1
            if how == "cut":
                self.cut_events += 1
            oc = self._record(w, how)
        # the tree's leaves estimated, less the share that was blocked so far
        # (a task's: those of its branch, from which the tree that handed it
        # out goes on as its own search would have: TaskResult.size)
        self._below = below = tree.estimate()
        self._estimate = max(float(self.executions), below * self.executions / tree.leaves)
        if self.marks is not None and how != "blocked":
            self.marks.append(
                (oc, len(tree.above or ()), tree.leaves, self.blocked, self.events,
                 self.cut_events, tree.misses, below)
            )  # fmt: skip
        w.dispose()

    def _take_task(self, got: TaskResult) -> list[str]:
        """The result of the tree's current branch explored as a task,
        counted here as its executions were, in order; the bounds that cut
        it (the search stops there), or none."""
        tree = self.tree
        r, above, event, leaves = got.result, got.above, got.event, got.leaves
        offset = self.executions
        _add_groups(self.groups, r.outcomes, offset)
        if self.first_violation is None and r.first_violation is not None:
            self.first_violation = r.first_violation + offset
            self.first_violation_s = time.monotonic() - self._t0
        if self.graph is not None and r.graph is not None:
            self.graph.merge(r.graph)
        self.executions += r.executions
        self.blocked += r.blocked
        self.cut_events += r.cut_events
        self.events += r.events
        tree.misses += r.misses
        tree.take_task(above, event, leaves)
        self._estimate = max(
            float(self.executions), tree.estimate(got.size) * self.executions / tree.leaves
        )
        if r.exhausted:
            return []
        return [c for c in r.cut_by if c != "preemptions"] or ["time"]

    @property
    def estimate(self) -> float:
        """The executions in all, estimated after the last one."""
        return self._estimate

    def _tell(self) -> None:
        now = time.monotonic()
        if now - self._told >= PROGRESS_EVERY:
            self._told = now
            n = self.executions
            assert self.progress is not None
            self.progress(n, self.blocked, max(float(n), self._estimate))

    def _graph_add(self, w: World, leaf) -> None:
        namer = Namer(w.names)
        trace = w.trace
        self.graph.add([e.thread for e in trace], leaf, lambda i: namer.text(trace[i].label))

    def _record(self, w: World, how: str, why=None) -> Outcome:
        """Count an execution under its outcome; ``why()`` the races to show
        (the tree's, by default), asked for a new outcome only."""
        oc = outcome_of(w, self.checks, self.blocked_ok, self._memo)
        if how == "cut":
            oc = Outcome(oc.fates, oc.received, oc.violations + ("cut by max_events",))
        if self.graph is not None:
            self._graph_add(w, oc)
        if oc.violations and self.first_violation is None:
            self.first_violation = self.executions
            self.first_violation_s = time.monotonic() - self._t0
        g = self.groups.get(oc)
        if g is not None:
            g.count += 1
            return oc
        namer = Namer(w.names)
        pairs = self.tree.why() if why is None else why()
        if not pairs:
            # reached by a branch no race made (the first execution, or a
            # step of a split tried for every thread): the races it holds
            pairs = execution_races(w.trace, rel=self.tree.relation_of(w.trace))
        first = Execution(
            self.executions,
            " ".join(e.thread for e in w.trace) if why is not None else self.tree.schedule(),
            oc,
            # (an event's words are made from what does not change after it)
            functools.partial(_describe, list(w.trace), namer),
            _describe_races(pairs, namer),
        )
        self.groups[oc] = OutcomeGroup(oc, 1, first)
        return oc


#: how many failing outcomes ``shrink_failures`` shrinks unless told
SHRINK_OUTCOMES = 5


def shrink_failures(
    r: ExploreResult,
    setup,
    schedulers: int = 2,
    reductions: int = 200,
    checks=(),
    limit: int = SHRINK_OUTCOMES,
    after_timeout: int = AFTER_TIMEOUT_MS,
    deadline: float | None = None,
) -> None:
    """Shrink the first schedule of each of the first ``limit`` outcomes of
    ``r`` that break an invariant or check (``OutcomeGroup.shrunk``); past
    ``deadline`` (``time.monotonic()``) no other outcome is shrunk.  Each
    failing outcome not shrunk says why (``OutcomeGroup.not_shrunk``)."""
    new_world = world_factory(setup, schedulers, reductions, after_timeout)
    for n, g in enumerate(g for g in r.outcomes if g.outcome.violations):
        if limit <= 0:
            g.not_shrunk = "no shrinking was asked for"
        elif n >= limit:
            g.not_shrunk = f"only the first {limit} failing outcome(s) are shrunk"
        elif deadline is not None and time.monotonic() > deadline:
            g.not_shrunk = "the time budget ran out before it"
        elif _Stop.asked:
            g.not_shrunk = "the search was interrupted (Ctrl-C)"
        else:
            g.shrunk = shrink(new_world, g.first.schedule, checks, deadline=deadline)


def explore(setup, schedulers: int = 2, **options) -> ExploreResult:
    """Explore every distinct outcome of ``setup``'s workload (see ``Explorer``)."""
    return Explorer(setup, schedulers=schedulers, **options).run()


def _clip(text: str, n: int = 20) -> str:
    return text if len(text) <= n else text[:n] + "..."


#: the name of a thread of the simulated build (``World.enabled``)
_THREAD = re.compile(r"S\d+|I\d+|P\d+|A\d+>\d+|[RT]<\d+\.\d+\.\d+>|T#Port<\d+\.\d+>|D")


def replay(
    setup,
    schedule: str,
    schedulers: int = 2,
    reductions: int = 200,
    checks=(),
    blocked_ok=False,
    after_timeout: int = AFTER_TIMEOUT_MS,
) -> Execution:
    """Run the execution a schedule string names (then the first enabled
    thread at each step, if the schedule ends early)."""
    check_schedule(schedule)
    checks = checks_of(checks)
    w = world_factory(setup, schedulers, reductions, after_timeout)()
    try:
        for i, t in enumerate(schedule.split()):
            en = w.enabled()
            if t not in en:
                raise SimError(not_steppable(i, t, en, schedulers, after_timeout))
            w.step(t)
        while True:
            en = w.enabled()
            if not en:
                break
            w.step(en[0])
        namer = Namer(w.names)
        oc = outcome_of(w, checks, blocked_ok)
        return Execution(
            0,
            " ".join(e.thread for e in w.trace),
            oc,
            _describe(w.trace, namer),
            _describe_races(execution_races(w.trace), namer),
        )
    finally:
        w.dispose()


def check_schedule(schedule) -> None:
    """Refuse a schedule that is not a string of thread names."""
    if not isinstance(schedule, str):
        raise SimError(
            "schedule must be a string of thread names ('S1 S2 D ...'), not "
            f"{type(schedule).__name__}"
        )


def not_steppable(i: int, t: str, en: list, schedulers: int, after_timeout: int) -> str:
    """Why step ``i`` (from 0) of a schedule, thread ``t``, cannot be run
    where ``en`` are the threads enabled."""
    what = "cannot step now" if _THREAD.fullmatch(t) else "is not a thread"
    if _THREAD.fullmatch(t) and t[0] == "T":
        what += f" (no timer of {t[1:]} is armed here under after_timeout {after_timeout} ms)"
    elif _THREAD.fullmatch(t) and t[0] != "R":
        # (compared as text first: a number of thousands of digits is no int)
        far = [
            x
            for x in re.findall(r"\d+", t)
            if len(x) > 4 or int(x) > schedulers or (x == "0" and t[0] != "A")
        ]
        if far:
            what = f"names scheduler {_clip(far[0])}, of {schedulers}"
    return (
        f"schedule step {i + 1}: {_clip(t, 40)!r} {what} (enabled: {' '.join(en) or 'none'}; "
        "threads: S<k> I<k> P<k> A<i>><k> R<pid> T<pid> T#Port<n.n> D)"
    )


def checks_of(checks) -> tuple:
    """The user's checks as a tuple: a list (any iterable) of functions of
    an outcome; anything else is refused, naming it."""
    if callable(checks):
        name = getattr(checks, "__name__", "f")
        raise SimError(
            f"checks must be a list of functions of an outcome, not one function (give [{name}])"
        )
    if checks is None or isinstance(checks, (str, bytes, dict)):
        raise SimError(f"checks must be a list of functions of an outcome, not {repr(checks)[:80]}")
    try:
        out = tuple(checks)
    except TypeError:
        raise SimError(
            f"checks must be a list of functions of an outcome, not {type(checks).__name__}"
        ) from None
    for i, c in enumerate(out):
        if not callable(c):
            raise SimError(f"checks[{i}] must be a function of an outcome, not {repr(c)[:80]}")
    return out


def brute_force(
    setup,
    schedulers: int = 2,
    reductions: int = 200,
    limit: int = 200_000,
    time_budget=None,
    after_timeout: int = AFTER_TIMEOUT_MS,
) -> dict:
    """Every interleaving by brute force: how many, how many Mazurkiewicz
    traces among them (by happens-before under ``smp.sim.deps``), and how
    many outcomes."""
    deadline = None if time_budget is None else time.monotonic() + time_budget
    traces, outcomes = set(), set()
    n = 0
    new_world = world_factory(setup, schedulers, reductions, after_timeout)
    for _sched, w in all_executions(new_world, limit, deadline):
        n += 1
        traces.add(mazurkiewicz_key(w.trace))
        outcomes.add(outcome_of(w, (), True))
        w.dispose()
    return {"interleavings": n, "traces": len(traces), "outcomes": len(outcomes)}


def _add_groups(groups: dict, outcomes: list[OutcomeGroup], offset: int) -> None:
    """Count ``outcomes`` (of executions numbered from ``offset`` on, after
    those of ``groups``) into ``groups``: a new outcome's first execution is
    theirs, renumbered."""
    for g in outcomes:
        have = groups.get(g.outcome)
        if have is None:
            f = g.first
            first = Execution(f.index + offset, f.schedule, f.outcome, f.events, f.races)
            groups[g.outcome] = OutcomeGroup(g.outcome, g.count, first)
        else:
            have.count += g.count


def merge(
    parts: list[ExploreResult], elapsed: float, nonsmp: Outcome | None = None
) -> ExploreResult:
    """One result from the results of the subtrees of a ``split``, in the
    split's order: counts added, each outcome's first execution the first
    met in that order (numbered across the parts), the trees joined."""
    groups: dict[Outcome, OutcomeGroup] = {}
    offset = 0
    first_violation = None
    graph = None
    for r in parts:
        _add_groups(groups, r.outcomes, offset)
        if first_violation is None and r.first_violation is not None:
            first_violation = r.first_violation + offset
        offset += r.executions
        if r.graph is not None:
            if graph is None:
                graph = Trie()
            graph.merge(r.graph)
    cut_by = sorted({c for r in parts for c in r.cut_by})
    exhausted = all(r.exhausted for r in parts)
    executions = sum(r.executions for r in parts)
    return ExploreResult(
        schedulers=parts[0].schedulers if parts else 0,
        executions=executions,
        blocked=sum(r.blocked for r in parts),
        cut_events=sum(r.cut_events for r in parts),
        outcomes=list(groups.values()),
        nonsmp=nonsmp,
        exhausted=exhausted,
        cut_by=cut_by,
        estimate=float(executions) if exhausted else sum(r.estimate for r in parts),
        elapsed=elapsed,
        events=sum(r.events for r in parts),
        first_violation=first_violation,
        first_violation_s=None,
        tasks=len(parts),
        graph=graph,
        dpor=parts[0].dpor if parts else "",
        misses=sum(r.misses for r in parts),
    )


#: the subtrees an execution bound cut, kept in the process that explored
#: them, by ``(split, task)``: given more executions, a subtree goes on
#: where it stopped rather than from its start (the same executions either
#: way: a search is a function of its bound)
_CUT: dict = {}
_splits = itertools.count(1)

#: seconds between two calls of a search's ``progress``
PROGRESS_EVERY = 0.25

#: executions one tree runs before ``explore_split`` splits the search, and
#: the estimate of the whole search under which that tree goes on alone
PROBE = 32
ONE_TREE = 5000
#: how many more executions that tree runs before it looks at its estimate again
ONE_TREE_STEP = 250


def _seconds_left(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()


def _part(setup, schedulers, options, budget, budget_s, **where) -> Explorer:
    """The explorer of part of a search (a split's subtree, a shared
    search's task: ``where``), under its own bounds, with no nonsmp run."""
    return Explorer(
        setup,
        schedulers=schedulers,
        max_executions=budget,
        time_budget=budget_s,
        nonsmp=False,
        **where,
        **options,
    )


def run_task(task: tuple, progress=None) -> ExploreResult | None:
    """Explore one subtree of a split: ``(setup, schedulers, options,
    prefix, max_executions, deadline, key)``, ``deadline`` a
    ``time.monotonic()`` instant (one clock for every process of the
    machine), ``key`` the split's and the subtree's numbers (or None).
    None when its budget is spent before it starts.  A subtree the bound
    cut is kept under ``key`` in this process, and goes on when it is run
    here again with a larger bound.  Module-level, so a worker process can
    run it; ``progress`` (in the caller's process only) is the explorer's."""
    setup, schedulers, options, prefix, budget, deadline, key = task
    if budget == 0 or _Stop.asked:
        return None
    budget_s = _seconds_left(deadline)
    if budget_s is not None and budget_s <= 0:
        return None
    ex = _CUT.pop(key, None) if key is not None else None
    if ex is None or budget is None or ex.executions > budget:
        ex = _part(setup, schedulers, options, budget, budget_s, prefix=prefix)
    else:
        ex.max_executions, ex.time_budget = budget, budget_s
    ex.progress = progress
    r = ex.run()
    if key is not None and r.cut_by == ["executions"]:
        _CUT[key] = ex
    return r


class TaskResult:
    """What a task of a shared search found (``run_branch``): its result,
    the plans it made before its branch (``Tree.above``), its branch's
    event, its leaves, and the counts after each complete execution."""

    __slots__ = ("result", "above", "event", "leaves", "marks", "size")

    def __init__(
        self, result: ExploreResult, above: list, event, leaves: int, marks: list, size: float
    ):
        self.result, self.above, self.event, self.leaves = result, above, event, leaves
        self.marks = marks
        #: its branch's leaves as its tree estimated them after its last
        #: execution (``Tree.estimate`` of the levels below the branch): the
        #: tree that takes it estimates the rest from there, as one tree would
        self.size = size

    def upto(self, n: int) -> TaskResult | None:
        """What the task finds when its search stops at ``n`` complete
        executions (it is a function of its bound: those are its first
        ``n``); None when that cannot be told from here (a tree drawn)."""
        r = self.result
        if r.graph is not None or not 0 < n <= len(self.marks):
            return None
        oc, above, leaves, blocked, events, cut_events, misses, size = self.marks[n - 1]
        counts: dict = {}
        for m in self.marks[:n]:
            counts[m[0]] = counts.get(m[0], 0) + 1
        groups = [
            OutcomeGroup(g.outcome, counts[g.outcome], g.first)
            for g in r.outcomes
            if g.outcome in counts
        ]
        fv = r.first_violation if r.first_violation is not None and r.first_violation < n else None
        cut = ExploreResult(
            schedulers=r.schedulers,
            executions=n,
            blocked=blocked,
            cut_events=cut_events,
            outcomes=groups,
            nonsmp=None,
            exhausted=False,
            cut_by=["executions"],
            estimate=max(float(n), size * n / leaves),  # (as Explorer estimates it)
            elapsed=r.elapsed,
            events=events,
            first_violation=fv,
            dpor=r.dpor,
            misses=misses,
        )
        return TaskResult(cut, self.above[:above], self.event, leaves, self.marks[:n], size)


def run_branch(args: tuple) -> TaskResult | None:
    """Explore one task of a shared search (``smp.sim.share``): ``(setup,
    schedulers, options, task, max_executions, deadline)``, ``deadline`` a
    ``time.monotonic()`` instant.  None when the time was up before it
    started.  Module-level, so a worker process can run it."""
    setup, schedulers, options, task, budget, deadline = args
    budget_s = _seconds_left(deadline)
    if budget_s is not None and budget_s <= 0:
        return None
    ex = _part(setup, schedulers, options, budget, budget_s, task=task)
    ex.marks = []
    r = ex.run()
    t = ex.tree
    return TaskResult(r, t.above, t.stack[t.floor - 1].event, t.leaves, ex.marks, ex._below)


def _cut_by_share(r: ExploreResult | None, budget) -> bool:
    return budget is not None and (r is None or (not r.exhausted and "time" not in r.cut_by))


def _mapped(mapper, args: list, results: list, progress):
    """``mapper(run_task, args)``; with ``map`` (this process) each subtree
    tells ``progress`` as it goes, its counts added to the finished ones'."""
    if progress is None or mapper is not map:
        return mapper(run_task, args)

    def one(task):
        done = [r for k, r in enumerate(results) if r is not None and k != task[-1][1]]
        n0 = sum(r.executions for r in done)
        b0 = sum(r.blocked for r in done)
        known = [r.estimate for r in done]

        def tell(n: int, b: int, e: float) -> None:
            progress(n0 + n, b0 + b, max(n0 + n, _split_estimate([*known, e], len(results))))

        return run_task(task, tell)

    return map(one, args)


def _tell_split(results: list, progress) -> None:
    """``progress`` after a subtree ended: the counts so far and the estimate."""
    done = [r for r in results if r is not None]
    if progress is None or not done:
        return
    n = sum(r.executions for r in done)
    est = _split_estimate([r.estimate for r in done], len(results))
    progress(n, sum(r.blocked for r in done), max(n, est))


def _split_estimate(known: list[float], tasks: int) -> float:
    """The estimate of a split search while it runs: the subtrees' estimates
    known so far, and their mean for each subtree still to come."""
    return sum(known) + sum(known) / len(known) * (tasks - len(known))


def _one_tree(setup, schedulers, probe, max_executions, time_budget, nonsmp, options, progress):
    """``explore_split``'s probe: the search as one tree when it ends within
    ``probe`` executions or reaches its bound there, or, estimated there at
    ``ONE_TREE`` executions at most, goes on and ends within ``ONE_TREE``
    or reaches its bound; else None."""
    ex = Explorer(
        setup,
        schedulers=schedulers,
        max_executions=probe if max_executions is None else min(probe, max_executions),
        time_budget=time_budget,
        nonsmp=False,  # (run once, below, when this tree's search is the result)
        progress=progress,
        **options,
    )
    r = ex.run()
    # ("executions" beside "preemptions": the bound stopped it, the other cut branches)
    cap = ONE_TREE if max_executions is None else min(ONE_TREE, max_executions)
    spent = 0.0
    while "executions" in r.cut_by and r.estimate <= ONE_TREE and ex.executions < cap:
        # on, ONE_TREE_STEP executions at a time while the estimate stays
        # within ONE_TREE (at most ONE_TREE: an estimate that was far too
        # small costs that many executions, run again split, rather than a
        # search on one core)
        spent += r.elapsed
        ex.max_executions = min(cap, ex.executions + ONE_TREE_STEP)
        if time_budget is not None:
            ex.time_budget = max(1e-9, time_budget - spent)
        had_violation = r.first_violation is not None
        r = ex.run()
        if not had_violation and ex.first_violation_s is not None:
            # (found in this run: seconds into it, after those spent before)
            ex.first_violation_s += spent
            r.first_violation_s = ex.first_violation_s
    if "executions" not in r.cut_by or ex.executions == max_executions:
        # finished, stopped by time or a violation, or at the bound
        if nonsmp:
            r.nonsmp = ex.run_nonsmp()
        return r
    return None


def _explore_shared(
    setup, schedulers, submit, window, max_executions, time_budget, nonsmp, probe, progress,
    options,
) -> ExploreResult:  # fmt: skip
    """``explore_split`` under optimal DPOR: one tree, its large branches
    explored as tasks (``smp.sim.share``) by ``submit`` once ``probe``
    executions have run and the search is estimated at more than
    ``ONE_TREE`` (or has run that many); ``probe=0``: at once."""
    t0 = time.monotonic()
    ex = Explorer(
        setup,
        schedulers=schedulers,
        max_executions=max_executions,
        time_budget=time_budget,
        nonsmp=nonsmp,
        progress=progress,
        **options,
    )
    share = None
    if submit is not None:
        share = Share(
            lambda a: submit(run_branch, a),
            lambda task, budget, deadline: (setup, schedulers, options, task, budget, deadline),
            window=window,
            start=probe,
            small=ONE_TREE if probe else 0,
        )
    r = ex.run(share)
    if share is not None:
        r.tasks = share.tasks
        if share.lost:
            r.notes.append(
                f"A worker died under way: the {share.lost} branch(es) it was exploring were "
                "explored by this process instead (the result is the same)."
            )
    r.elapsed = time.monotonic() - t0
    return r


def explore_split(
    setup,
    schedulers: int = 2,
    *,
    mapper=map,
    submit: Callable[[Callable, tuple], object] | None = None,
    window: int = 2,
    min_tasks: int = 8,
    max_executions: int | None = None,
    time_budget: float | None = None,
    nonsmp: bool = True,
    probe: int = PROBE,
    progress: Callable[[int, int, float], object] | None = None,
    **options,
) -> ExploreResult:
    """``explore``, shared among processes.

    Under optimal DPOR (no ``dpor="source"``, no preemption bound) the
    search is the one tree's, its large branches explored as tasks by
    ``submit(run_branch, args)`` (a handle with ``ready()`` and ``get()``,
    ``window`` of them at once: ``smp.sim.share``) once ``probe``
    executions have run and the search is estimated at more than
    ``ONE_TREE``; with no ``submit``, the one tree alone.  The result is
    the one tree's, whatever runs the tasks; ``progress`` is told as the
    tree goes and as each task is taken.

    Under Source-DPOR the tree is split into subtrees
    (``smp.sim.dpor.split``) each explored apart and merged:
    ``mapper(run_task, tasks)`` runs them (a process pool's ``imap`` shares
    them among workers).  One tree first runs up to ``probe`` executions (``max_executions``
    when it is smaller; ``probe=0`` splits at once); when it has not
    finished and estimates the whole search at ``ONE_TREE`` executions at
    most, it goes on (to ``ONE_TREE`` executions at most).  A search that
    tree finishes, or whose bound it reaches, is that tree's, with no
    split; a larger one starts again, split (the probe's executions are not counted: ``PROBE``,
    a few hundredths of a second).  The split depends on the workload only,
    so the result does not depend on how many workers share it;
    exhaustively it has the executions and outcomes ``explore`` finds (one
    execution per equivalence class), a few more of them sleep-set blocked.
    An execution bound is shared among the subtrees in order
    (``max_executions // tasks`` each, the first ones one more); what the
    small subtrees leave goes to the ones their share cut, which run again
    with it: on where they stopped when the same process runs them again
    (``run_task``), else from their start.  A subtree's search is a
    function of its bound, so either way, and for any number of workers,
    the result is the same.  ``progress(executions, blocked, estimate)`` is
    told as the search goes: by the one tree, then as each subtree ends
    (and, run in this process, as it goes)."""
    t0 = time.monotonic()
    if options.get("dpor") != "source" and options.get("preemptions") is None:
        return _explore_shared(
            setup, schedulers, submit, window, max_executions, time_budget, nonsmp, probe,
            progress, options,
        )  # fmt: skip
    if probe > 0:
        r = _one_tree(
            setup, schedulers, probe, max_executions, time_budget, nonsmp, options, progress
        )
        if r is not None:
            r.elapsed = time.monotonic() - t0
            return r
    new_world = world_factory(
        setup,
        schedulers,
        options.get("reductions", 200),
        options.get("after_timeout", AFTER_TIMEOUT_MS),
    )
    tasks = split(new_world, min_tasks)
    n = len(tasks)
    split_no = next(_splits)
    if max_executions is None:
        budgets = [None] * n
    else:
        budgets = [max_executions // n + (1 if i < max_executions % n else 0) for i in range(n)]
    deadline = None if time_budget is None else t0 + time_budget
    results: list = [None] * n
    todo = list(range(n))
    while todo:
        args = [
            (setup, schedulers, options, tasks[i], budgets[i], deadline, (split_no, i))
            for i in todo
        ]
        for i, r in zip(todo, _mapped(mapper, args, results, progress), strict=True):
            results[i] = r
            _tell_split(results, progress)
        if max_executions is None or _Stop.asked:
            break
        # what the subtrees that finished under their share left over goes to
        # the ones their share cut, in order, and they run again with it
        cut = [i for i in range(n) if _cut_by_share(results[i], budgets[i])]
        spare = max_executions - sum(budgets[i] for i in cut)
        spare -= sum(results[i].executions for i in range(n) if i not in cut and results[i])
        if not cut or spare <= 0:
            break
        for k, i in enumerate(cut):
            budgets[i] += spare // len(cut) + (1 if k < spare % len(cut) else 0)
        todo = [i for i in cut if budgets[i] > 0]
    for i in range(n):
        _CUT.pop((split_no, i), None)  # (those kept in this process)
    parts = [r for r in results if r is not None]
    skipped = [b for r, b in zip(results, budgets, strict=True) if r is None]
    nonsmp_oc = None
    if nonsmp:
        nonsmp_oc = nonsmp_outcome(setup, schedulers, **options)
    r = merge(parts, time.monotonic() - t0, nonsmp_oc)
    r.schedulers = schedulers
    r.tasks = n
    if skipped:
        r.exhausted = False
        why = "interrupted" if _Stop.asked else "executions" if 0 in skipped else "time"
        r.cut_by = sorted(set(r.cut_by) | {why})
        per = r.estimate / max(1, len(parts))
        r.estimate = max(float(r.executions), r.estimate + per * len(skipped))
    if r.first_violation is not None:
        r.first_violation_s = None  # subtrees run side by side: no one clock
    return r
