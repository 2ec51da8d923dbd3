"""Running schedules on the real emulator, and the explorer itself.

``run_schedule`` runs a scenario once on a fresh emulator: the queue is
built behind a held dispatcher, and each change is made after its number of
queued messages were dispatched (``Emulator.step_dispatcher`` dispatches
the queue message by message between the changes); in nonsmp every message
is delivered when it is made and the changes come after.  ``explore`` runs
the first schedule, works out which changes and messages commute, then
runs one schedule per class of equivalent ones (every class up to
``max_messages`` x ``max_changes``, beyond that a seeded random sample),
once more in nonsmp mode, and groups the runs by outcome into an
``ExploreResult``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import time
from dataclasses import dataclass, field

from smp.app.expect import expect_checks
from smp.app.explore.bodies import (
    _apply,
    _atoms,
    _is_sys,
    _msg_type,
    _Names,
    _setup,
    _state,
    explore_actor,
)
from smp.app.explore.scenario import (
    describe_change,
    explore_example_names,
    load_explore_scenario,
)
from smp.app.explore.schedules import (
    _roles,
    _why,
    canonical_classes,
    canonicalize,
    change_footprint,
    count_classes,
    dependent,
    format_schedule,
    message_footprint,
    parse_schedule,
)
from smp.app.explore.simulate import (
    DEFAULT_MAX_EXECUTIONS,
    is_run_scenario,
    no_such_scenario,
    sample_shared,
    search_shared,
)
from smp.app.explore.text import format_text
from smp.app.explore.workload import Bounds, ScenarioWorkload
from smp.app.scenario import load_scenario
from smp.core.errors import BadArg, ScenarioError, SmpError
from smp.emulator import Emulator
from smp.sim import explore as sim_explore
from smp.sim import replay as sim_replay
from smp.sim.catalogue import CATALOGUE
from smp.sim.explorer import checks_of

__all__ = ["ExploreError", "ExploreResult", "explore", "run_schedule"]


class ExploreError(SmpError):
    """A schedule could not be run as the scenario says (the queue differs
    from run to run, a step dispatched less than it should, ...)."""


def run_schedule(sc: dict, positions, mode: str = "smp", expect_queue: list | None = None) -> dict:
    """Run the scenario once on a fresh emulator: build the queue behind a
    held dispatcher, then make change ``j`` after ``positions[j]`` queued
    messages were dispatched (``step_dispatcher``).  In nonsmp every
    message is delivered when it is made and the changes come after."""

    smp_mode = mode == "smp"
    t0 = time.monotonic()
    names = _Names()
    with Emulator(mode=mode, schedulers=sc["schedulers"] if smp_mode else 1) as vm:
        _setup(vm, sc, names)
        if smp_mode:
            vm.hold_dispatcher()
        start = {n: len(vm.messages(p)) for n, p in names.pid.items()}
        for q in sc["queue"]:
            pid = vm.spawn(
                explore_actor,
                q["do"],
                names.pid.get(q["to"]),
                q["count"],
                q["label"],
                q["words"],
                keep=True,
            )
            names.add(q["name"], pid)
            start[q["name"]] = 0
            if q["trace"]:
                vm.trace(pid, True, _atoms(q["trace"]), tracer=names.pid[q["tracer"]])
            vm.run()
        queue = []
        if smp_mode:
            for from_, to, msg in vm.queued_messages():
                queue.append(
                    {
                        "type": _msg_type(to, msg),
                        "from": names.text(from_),
                        "to": names.text(to),
                        "msg": names.text(msg),
                    }
                )
            if expect_queue is not None and [(q["type"], q["msg"]) for q in queue] != [
                (q["type"], q["msg"]) for q in expect_queue
            ]:
                raise ExploreError(
                    "the queue is not the same from run to run: first "
                    + "; ".join(q["msg"] for q in expect_queue)
                    + " now "
                    + "; ".join(q["msg"] for q in queue)
                )
        n = len(queue)
        if positions and positions[-1] > n and smp_mode:
            raise BadArg(
                f"schedule {format_schedule(sc['changes'], positions)}: only {n} "
                f"messages are queued"
            )
        fates: list = []
        results: list = []
        done = 0
        end = None

        def step(k):
            got = vm.step_dispatcher(k)
            if len(got) != k:
                raise ExploreError(f"step_dispatcher({k}) dispatched {len(got)} messages")
            for _from, receiver, msg, outcome in got:
                fates.append(
                    {"receiver": names.text(receiver), "outcome": outcome, "msg": names.text(msg)}
                )

        for j, ch in enumerate(sc["changes"]):
            if smp_mode and positions[j] > done:
                step(positions[j] - done)
                done = positions[j]
            if end is None and not smp_mode:
                end = {nm: len(vm.messages(p)) for nm, p in names.pid.items()}
            results.append(_apply(vm, names, ch))
        if smp_mode and n > done:
            step(n - done)
        if end is None:
            end = {nm: len(vm.messages(p)) for nm, p in names.pid.items()}
        received = {}
        for nm, p in names.pid.items():
            got = [names.text(m) for m in vm.messages(p)[start.get(nm, 0) : end[nm]] if _is_sys(m)]
            if got:
                received[nm] = got
        state = _state(vm, names)
        if smp_mode:
            vm.release_dispatcher()
        vm.run()
        stats = vm.statistics()
    if smp_mode:
        # what the dispatcher decided and what the processes got must agree
        want: dict[str, list] = {}
        for f in fates:
            if f["outcome"] == "delivered":
                want.setdefault(f["receiver"], []).append(f["msg"])
        if want != received:
            raise ExploreError(
                f"schedule {format_schedule(sc['changes'], positions)}: the "
                f"dispatcher delivered {want} but the processes got {received}"
            )
    return {
        "positions": tuple(positions) if smp_mode else None,
        "queue": queue,
        "fates": [
            (f["receiver"] if f["outcome"] == "delivered" else f"drop:{f['outcome']}")
            for f in fates
        ],
        "received": received,
        "state": state,
        "results": results,
        "made": stats.made,
        "elapsed_s": round(time.monotonic() - t0, 3),
    }


def _observed(r: dict) -> str:
    """What both modes can show: who received which queued message, the
    state after the queue and the changes' return values."""
    return json.dumps(
        {"received": r["received"], "state": r["state"], "results": r["results"]}, sort_keys=True
    )


def _key(r: dict) -> str:
    return json.dumps(
        {
            "fates": r["fates"],
            "received": r["received"],
            "state": r["state"],
            "results": r["results"],
        },
        sort_keys=True,
    )


@dataclass
class ExploreResult:
    scenario: dict
    source: str
    queue: list
    deps: list
    possible: int
    classes: int
    run: int
    exhaustive: bool
    pruned: bool
    seed: int | None
    outcomes: list
    runs: list
    nonsmp: dict | None
    elapsed_s: float
    single: bool = False
    interrupted: bool = False
    notes: list = field(default_factory=list)

    @property
    def coverage(self) -> float:
        return (
            1.0
            if self.classes == 0
            else min(1.0, len({tuple(r["class"]) for r in self.runs}) / self.classes)
        )

    def to_json(self) -> dict:
        sc = self.scenario
        return {
            "kind": "explore",
            "scenario": sc["name"],
            "source": self.source,
            "description": sc["description"],
            "mode": "smp",
            "schedulers": sc["schedulers"],
            "queue": [{"index": i + 1, **q} for i, q in enumerate(self.queue)],
            "changes": [
                {
                    "name": c["name"],
                    "call": describe_change(c),
                    "depends_on": [f"m{i}" for i in sorted(d)],
                }
                for c, d in zip(sc["changes"], self.deps, strict=False)
            ],
            "schedules": {
                "possible": self.possible,
                "classes": self.classes,
                "run": self.run,
                "outcomes": len(self.outcomes),
                "exhaustive": self.exhaustive,
                "pruned": self.pruned,
                "seed": self.seed,
                "coverage": round(self.coverage, 4),
                "elapsed_s": self.elapsed_s,
                "single": self.single,
                "interrupted": self.interrupted,
            },
            "outcomes": self.outcomes,
            "nonsmp": self.nonsmp,
            "runs": [
                {"schedule": r["schedule"], "outcome": r["outcome"], "elapsed_s": r["elapsed_s"]}
                for r in self.runs
            ],
            "notes": self.notes,
        }

    def text(self) -> str:
        return format_text(self.to_json())


def _source_arg(src) -> str:
    if isinstance(src, dict):
        return "SCENARIO.toml"
    s = os.fspath(src)
    return s


def _run_scenario_setup(scenario, schedulers, sim_options: dict):
    """``(setup, schedulers)`` of a run scenario, as ``smp-emu explore`` cuts
    it (taking ``bounds`` and adding its expect clauses to ``checks`` and
    the default execution bound in ``sim_options``), or None for another
    kind of scenario."""
    if isinstance(scenario, dict) or callable(scenario):
        return None
    path = os.fspath(scenario)
    if not is_run_scenario(path):
        return None
    wl = ScenarioWorkload(load_scenario(path), sim_options.pop("bounds", Bounds()), schedulers)
    sim_options["checks"] = (*expect_checks(wl.sc), *sim_options.get("checks", ()))
    if not {"time_budget", "random", "pct"} & set(sim_options):
        sim_options.setdefault("max_executions", DEFAULT_MAX_EXECUTIONS)
    return wl.setup, wl.schedulers


def _simulate(fn, n: int, nonsmp: bool, checks: tuple, seed, sim_options: dict):
    """A setup function's search, as ``smp-emu explore`` runs it when given
    ``random``, ``pct`` or ``jobs`` (the options the command refuses
    together refused here too: a Source-DPOR search is split, so its
    result is the same for any ``jobs``); else the one tree's."""
    given_jobs = "jobs" in sim_options
    jobs = sim_options.pop("jobs", 1)
    runs = {k: sim_options.pop(k) for k in ("random", "pct") if k in sim_options}
    depth = sim_options.pop("depth", None)
    if len(runs) > 1:
        raise TypeError("explore: give random= or pct=, not both")
    if runs:
        ((method, n_runs),) = runs.items()
        for k in ("max_executions", "preemptions", "dpor"):
            if k in sim_options:
                raise TypeError(f"explore: {k} is for the exhaustive search, not {method}= runs")
        if depth is not None and method != "pct":
            raise TypeError("explore: depth= is the depth of pct= runs")
        return sample_shared(
            fn, n, n_runs, method, jobs, seed=seed, depth=3 if depth is None else depth,
            nonsmp=nonsmp, checks=checks, **sim_options,
        )  # fmt: skip
    if depth is not None:
        raise TypeError("explore: depth= is the depth of pct= runs")
    if seed is not None:
        raise TypeError(
            "explore: seed= seeds random= and pct= runs (or an explore scenario's sample), "
            "not the exhaustive search"
        )
    if given_jobs:
        return search_shared(fn, n, jobs, nonsmp=nonsmp, checks=checks, **sim_options)
    return sim_explore(fn, schedulers=n, nonsmp=nonsmp, checks=checks, **sim_options)


def _setup_of(scenario):
    """``(setup, schedulers, checks)`` when ``scenario`` is a setup function
    or a catalogue race's name (with the race's own checks), else None."""
    if callable(scenario):
        return scenario, 2, ()
    if isinstance(scenario, str):
        for race in CATALOGUE:
            if race.name == scenario:
                return race.setup, race.schedulers, tuple(race.checks)
    return None


def explore(
    scenario,
    *,
    schedule: str | None = None,
    max_messages: int | None = None,
    max_changes: int | None = None,
    samples: int | None = None,
    seed: int | None = None,
    prune: bool = True,
    nonsmp: bool = True,
    progress=None,
    schedulers: int | None = None,
    **sim_options,
):
    """``smp.explore``.  ``scenario`` is one of:

    * a function ``setup(vm)`` that spawns and traces through the usual API
      (``smp.sim.SimVM``), or the name of a race of the simulator's
      catalogue (``smp.sim.catalogue``, with its own checks): the simulator of the SMP build
      explores every order up to equivalence on ``schedulers`` logical
      schedulers (default 2; a race: its own), with ``sim_options`` as
      ``smp.sim.Explorer`` takes them (``max_executions``, ``time_budget``,
      ``preemptions``, ``dpor``, ``checks``...); with ``schedule`` (``"S1 S2
      D ..."``) it runs that one execution (``smp.sim.replay``).  Returns a
      ``smp.sim.ExploreResult`` (or ``smp.sim.Execution``).
    * an explore scenario (a dict, a TOML path or a shipped example's name):
      run once per class of equivalent schedules and the runs grouped by
      outcome; with ``schedule`` (``"replace@1 kill@3"``) that one schedule
      only.  ``prune=False`` runs every schedule (up to the bound).
      ``progress(done, total, schedule)`` is called before each run.
      Returns an ``ExploreResult``.

    * a run scenario (a TOML path with ``[[groups]]`` or a run example's
      name): cut to ``bounds`` (an ``smp.app.explore.workload.Bounds``; the
      command's defaults unless given) and its ``[[expect]]`` clauses made
      checks, then explored as a setup function is, at most
      ``DEFAULT_MAX_EXECUTIONS`` executions unless ``max_executions`` or
      ``time_budget`` says otherwise (as ``smp-emu explore`` does)."""
    if not isinstance(scenario, (str, dict, os.PathLike)) and not callable(scenario):
        raise TypeError(
            "explore: give a setup function, a race's name, an explore scenario (a dict, a "
            "TOML path or an example's name) or a run scenario, not "
            f"{type(scenario).__name__}"
        )
    run = _run_scenario_setup(scenario, schedulers, sim_options)
    if run is not None:
        scenario, schedulers = run
    setup = _setup_of(scenario)
    if setup is not None:
        fn, n, checks = setup
        n = schedulers if schedulers is not None else n
        checks = (*checks, *checks_of(sim_options.pop("checks", ())))
        if schedule is not None:
            return sim_replay(fn, schedule, schedulers=n, checks=checks)
        return _simulate(fn, n, nonsmp, checks, seed, sim_options)
    if (
        not isinstance(scenario, dict)
        and not os.path.exists(os.fspath(scenario))
        and os.fspath(scenario) not in explore_example_names()
    ):
        # (before the options: a name nothing has is what is wrong)
        raise ScenarioError(no_such_scenario(os.fspath(scenario)))
    if schedulers is not None or sim_options:
        extra = ["schedulers"] if schedulers is not None else []
        raise TypeError(
            f"explore: {', '.join(extra + sorted(sim_options))} is for a setup function, a "
            "race of the catalogue or a run scenario, not an explore scenario"
        )
    sc = load_explore_scenario(scenario)
    ex = sc["explore"]
    max_messages = ex["max_messages"] if max_messages is None else max_messages
    max_changes = ex["max_changes"] if max_changes is None else max_changes
    samples = ex["samples"] if samples is None else samples
    seed_given = seed
    seed = ex["seed"] if seed is None else seed
    t0 = time.monotonic()
    changes = sc["changes"]
    k = len(changes)
    roles = _roles(sc)
    single = None
    if schedule is not None:
        single = parse_schedule(schedule, changes)
    first_pos = single if single is not None else (0,) * k
    runs: list[dict] = []
    if progress:
        progress(0, None, format_schedule(changes, first_pos))
    first = run_schedule(sc, first_pos)
    queue = first["queue"]
    n = len(queue)
    types = [q["type"] for q in queue]
    mfps = [
        message_footprint(q["type"], q["to"] if q["type"] in ("TRACE", "PROC_MSG") else None, roles)
        for q in queue
    ]
    deps = [
        {i + 1 for i, mfp in enumerate(mfps) if dependent(change_footprint(c, roles), mfp)}
        for c in changes
    ]
    possible = math.comb(n + k, k)
    classes = count_classes(deps)
    notes: list[str] = []
    exhaustive = n <= max_messages and k <= max_changes
    interrupted = False
    first["class"] = canonicalize(first_pos, deps)
    runs.append(first)
    if single is not None:
        todo: list = []
        exhaustive = False
    elif not prune:
        if not exhaustive:
            raise BadArg(
                f"every schedule without pruning: {n} messages and {k} changes are "
                f"beyond the bound ({max_messages} messages, {max_changes} changes)"
            )
        todo = [
            p for p in itertools.combinations_with_replacement(range(n + 1), k) if p != first_pos
        ]
    elif exhaustive:
        todo = [c for c in canonical_classes(deps) if c != first_pos]
        if seed_given is not None:
            notes.append(
                f"seed {seed_given} not used: every class is run (within --max-messages and "
                "--max-changes), none drawn at random"
            )
    else:
        if seed is None:
            seed = random.SystemRandom().randrange(1 << 32)
        rng = random.Random(seed)
        seen = {first_pos}
        todo = []
        last = canonicalize((n,) * k, deps)  # the nonsmp-like order, always
        if last not in seen:
            todo.append(last)
            seen.add(last)
        for _ in range(samples * 50):
            if len(seen) >= min(samples, classes):
                break
            slots = sorted(rng.sample(range(n + k), k))
            c = canonicalize(tuple(s - j for j, s in enumerate(slots)), deps)
            if c not in seen:
                seen.add(c)
                todo.append(c)
        met = f", which met all {classes} classes" if len(seen) >= classes else ""
        notes.append(
            f"{n} messages and {k} changes are beyond the exhaustive bound "
            f"({max_messages} messages, {max_changes} changes): a random sample of "
            f"classes, seed {seed}{met}"
        )
    total = 1 + len(todo)
    try:
        for i, pos in enumerate(todo):
            if progress:
                progress(i + 1, total, format_schedule(changes, pos))
            r = run_schedule(sc, pos, expect_queue=queue)
            r["class"] = canonicalize(pos, deps)
            runs.append(r)
    except KeyboardInterrupt:
        interrupted = True
        if exhaustive:  # (not every class was run; no sample drew them: no seed)
            exhaustive, seed = False, None
        notes.append(f"interrupted after {len(runs)} of {total} schedules")
    # outcomes, each with its shortest schedule
    by_key: dict[str, dict] = {}
    for r in runs:
        r["schedule"] = format_schedule(changes, r["positions"])
        o = by_key.get(_key(r))
        if o is None:
            o = by_key[_key(r)] = {"runs": [], "r": r}
        o["runs"].append(r)
    ns = None
    if nonsmp:
        if progress:
            progress(total, total, "nonsmp")
        ns = run_schedule(sc, (), mode="nonsmp")
    outcomes = []
    for o in by_key.values():
        rs = sorted(o["runs"], key=lambda r: (sum(r["positions"]), r["positions"]))
        o["runs"] = rs
    ordered = sorted(by_key.values(), key=lambda o: _order(o["runs"][0]["positions"]))
    src = _source_arg(scenario)
    for idx, o in enumerate(ordered, 1):
        r = o["runs"][0]
        for x in o["runs"]:
            x["outcome"] = idx
        same = ns is not None and _observed(r) == _observed(ns)
        outcomes.append(
            {
                "index": idx,
                "schedule": r["schedule"],
                "positions": list(r["positions"]),
                "schedules": [x["schedule"] for x in o["runs"]],
                "fates": r["fates"],
                "received": r["received"],
                "state": r["state"],
                "results": r["results"],
                "nonsmp": None if ns is None else same,
                "why_not_nonsmp": []
                if ns is None or same
                else _why(sc, deps, r["positions"], types),
                "replay": f"smp-emu explore {src} --schedule '{r['schedule']}'",
                "key": _key(r),
            }
        )
    nonsmp_out = None
    if ns is not None:
        match = [o["index"] for o in outcomes if o["nonsmp"]]
        nonsmp_out = {
            "received": ns["received"],
            "state": ns["state"],
            "results": ns["results"],
            "same_as": match[0] if match else None,
            "outcomes": 1,
        }
    return ExploreResult(
        scenario=sc,
        source=src,
        queue=queue,
        deps=deps,
        possible=possible,
        classes=classes,
        run=len(runs),
        exhaustive=exhaustive and single is None,
        pruned=prune,
        seed=seed,
        outcomes=outcomes,
        runs=runs,
        nonsmp=nonsmp_out,
        elapsed_s=round(time.monotonic() - t0, 2),
        single=single is not None,
        interrupted=interrupted,
        notes=notes,
    )


def _order(pos) -> tuple:
    """Outcomes listed from the earliest changes to the latest."""
    return tuple(pos)
