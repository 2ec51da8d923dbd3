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

import time
from dataclasses import dataclass, field
from typing import Callable

from .dpor import Tree, all_executions, mazurkiewicz_key
from .outcome import Namer, Outcome, nonsmp_outcome_of, outcome_of
from .vm import SimVM
from .world import NonsmpWorld, SimError, World

__all__ = [
    "Explorer",
    "ExploreResult",
    "Execution",
    "OutcomeGroup",
    "explore",
    "replay",
    "brute_force",
]


@dataclass
class Execution:
    """One execution: its schedule (replayable), outcome, numbered events
    and the races that made the explorer try it."""

    index: int
    schedule: str
    outcome: Outcome
    events: list[str] = field(default_factory=list)
    races: list[str] = field(default_factory=list)

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


@dataclass
class ExploreResult:
    schedulers: int
    executions: int  # complete executions explored
    blocked: int  # sleep-set blocked (not complete)
    cut_events: int  # executions cut by max_events
    outcomes: list[OutcomeGroup]
    nonsmp: Outcome | None
    exhausted: bool  # every class explored
    cut_by: list[str]  # "executions", "time" when a bound cut the search
    estimate: float  # executions in all (exact when exhausted)
    elapsed: float
    events: int  # events run, replays included

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
            "outcomes": [{"count": g.count, **g.first.as_dict()} for g in self.outcomes],
            "nonsmp": None if self.nonsmp is None else self.nonsmp.as_dict(),
        }


def _world_factory(setup, schedulers: int, reductions: int) -> Callable[[], World]:
    def new_world() -> World:
        w = World(schedulers, reductions)
        setup(SimVM(w))
        w.start_collectors()
        return w

    return new_world


def _describe(world: World, namer: Namer) -> list[str]:
    return [f"{i + 1:3}. {e.thread:>6}  {namer.text(e.label)}" for i, e in enumerate(world.trace)]


def _describe_races(why: list, namer: Namer) -> list[str]:
    out = []
    for i, j, li, lj, reasons in why:
        out.append(
            f"step {i + 1} ({namer.text(li)}) races with step {j + 1} ({namer.text(lj)})"
            + "".join(f"\n      {namer.text(r)}" for r in reasons)
        )
    return out


class Explorer:
    """Explore a workload: ``Explorer(setup, schedulers=2).run()``."""

    def __init__(
        self,
        setup: Callable[[SimVM], object],
        schedulers: int = 2,
        reductions: int = 200,
        max_executions: int | None = None,
        time_budget: float | None = None,
        max_events: int = 5000,
        checks=(),
        nonsmp: bool = True,
        blocked_ok: bool = False,
    ):
        if schedulers < 1:
            raise SimError("schedulers must be >= 1")
        self.setup = setup
        self.schedulers = schedulers
        self.reductions = reductions
        self.max_executions = max_executions
        self.time_budget = time_budget
        self.checks = tuple(checks)
        self.nonsmp = nonsmp
        self.blocked_ok = blocked_ok
        self.tree = Tree(_world_factory(setup, schedulers, reductions), max_events)
        self.executions = self.blocked = self.cut_events = self.events = 0
        self.groups: dict[Outcome, OutcomeGroup] = {}
        self._estimates = 0.0

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
        w = NonsmpWorld(self.reductions)
        self.setup(SimVM(w))
        w.run()
        oc = nonsmp_outcome_of(w, self.checks, self.blocked_ok)
        w.dispose()
        return oc

    def run(self) -> ExploreResult:
        t0 = time.monotonic()
        deadline = None if self.time_budget is None else t0 + self.time_budget
        tree = self.tree
        cut_by = []
        while True:
            w, how = tree.execute()
            self.events += len(w.trace)
            tree.add_races()
            if how == "blocked":
                self.blocked += 1
            else:
                self.executions += 1
                if how == "cut":
                    self.cut_events += 1
                self._estimates += tree.branching()
                self._record(w, how)
            w.dispose()
            if not tree.advance():
                break
            if self.max_executions is not None and self.executions >= self.max_executions:
                cut_by.append("executions")
                break
            if deadline is not None and time.monotonic() > deadline:
                cut_by.append("time")
                break
        exhausted = tree.finished
        estimate = (
            float(self.executions)
            if exhausted
            else max(self.executions, self._estimates / max(1, self.executions))
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
        )

    def _record(self, w: World, how: str) -> None:
        oc = outcome_of(w, self.checks, self.blocked_ok)
        if how == "cut":
            oc = Outcome(oc.fates, oc.received, oc.violations + ("cut by max_events",))
        g = self.groups.get(oc)
        if g is not None:
            g.count += 1
            return
        namer = Namer(w.names)
        first = Execution(
            self.executions,
            self.tree.schedule(),
            oc,
            _describe(w, namer),
            _describe_races(self.tree.why(), namer),
        )
        self.groups[oc] = OutcomeGroup(oc, 1, first)


def explore(setup, schedulers: int = 2, **options) -> ExploreResult:
    """Explore every distinct outcome of ``setup``'s workload (see ``Explorer``)."""
    return Explorer(setup, schedulers=schedulers, **options).run()


def replay(
    setup, schedule: str, schedulers: int = 2, reductions: int = 200, checks=(), blocked_ok=False
) -> Execution:
    """Run the execution a schedule string names (then the first enabled
    thread at each step, if the schedule ends early)."""
    w = _world_factory(setup, schedulers, reductions)()
    try:
        for i, t in enumerate(schedule.split()):
            en = w.enabled()
            if t not in en:
                raise SimError(f"step {i + 1}: {t} cannot step now (enabled: {' '.join(en)})")
            w.step(t)
        while True:
            en = w.enabled()
            if not en:
                break
            w.step(en[0])
        namer = Namer(w.names)
        oc = outcome_of(w, checks, blocked_ok)
        return Execution(0, " ".join(e.thread for e in w.trace), oc, _describe(w, namer))
    finally:
        w.dispose()


def brute_force(
    setup, schedulers: int = 2, reductions: int = 200, limit: int = 200_000, time_budget=None
) -> dict:
    """Every interleaving by brute force: how many, how many Mazurkiewicz
    traces among them (by happens-before under ``smp.sim.deps``), and how
    many outcomes."""
    deadline = None if time_budget is None else time.monotonic() + time_budget
    traces, outcomes = set(), set()
    n = 0
    for _sched, w in all_executions(_world_factory(setup, schedulers, reductions), limit, deadline):
        n += 1
        traces.add(mazurkiewicz_key(w.trace))
        outcomes.add(outcome_of(w, (), True))
        w.dispose()
    return {"interleavings": n, "traces": len(traces), "outcomes": len(outcomes)}
