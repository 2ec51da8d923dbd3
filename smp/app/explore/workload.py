"""A run or stress scenario as a workload of the simulator (``smp.sim``).

Runs in the user's process (and in each ``--jobs`` worker, which builds it
again from the same scenario dict).  ``ScenarioWorkload(sc, bounds)`` takes
a scenario ``smp.app.scenario.load_scenario`` validated and gives
``setup(vm)`` for ``smp.sim.explore``: the same set-up, in the same order,
as ``smp.app.workloads.execute`` makes on the real emulator -- collectors for
the tracers, default tracing, the groups' built-in workloads (their
processes named as ``execute``'s labels: ``pingpong[0].ping``), per-group
tracing, call patterns, the system seq tracer, monitor and profiler, and the
faults as the controller process ``execute`` spawns.

What differs, and why:

* the workload is bounded so that every order can be explored: at most
  ``operations`` operations per process, ``count`` instances per group,
  ``size`` for a workload's own sizes (pairs, ring size, chain length,
  senders, burst, call depth) and ``firings`` firings per fault; each bound
  that cut the scenario is one line of ``notes``;
* there is no wall-clock time: a duration in seconds becomes ``operations``,
  and each controller (one a lane of the plan, as ``execute`` spawns them:
  ``smp.app.fault_plan._lanes``) carries out its faults in order without
  sleeping, each fault a step of its own process that the explorer
  interleaves with the others and with the other lanes' (its times in the
  fault log are 0);
* a file, ip, memory or null tracer is a sink that keeps what the
  dispatcher writes to it, in order (``SimVM.open_trace_port``): what the
  file or the socket does with the bytes is not part of an outcome;
* a ``receive`` timeout or a port's busy spell (the ``busy`` and ``dist``
  drivers) shorter than ``after_timeout`` ms ends at whatever point the
  explorer chooses, a longer one never (``smp.sim.nodes.fires``);
* ``max_messages`` and ``rate`` (recon_trace's caps) are not applied.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass

from smp.app.fault_plan import _lanes, _plan, _resolve_plan
from smp.app.fault_steps import _FAULT_OPS, FAULT_REC, _why
from smp.app.run_setup import _Env, leave_untraced, set_up
from smp.core.errors import ErlangException, SmpError
from smp.sim.world import SimError

__all__ = ["Bounds", "ScenarioWorkload", "sim_controller"]

#: the workload parameters ``size`` bounds, by workload
SIZE_PARAMS = {
    "ping_pong": ("pairs",),
    "ring": ("size",),
    "seq_chain": ("length",),
    "fan_in": ("senders",),
    "churn": ("burst",),
    "calls": ("depth",),
}


@dataclass(frozen=True)
class Bounds:
    """How far a scenario is cut for exploration (each a maximum)."""

    operations: int = 2
    count: int = 1
    size: int = 2
    firings: int = 1

    def __post_init__(self) -> None:
        # (the command line's ranges: 1 to MAX_BOUND each)
        for name in ("operations", "count", "size", "firings"):
            v = getattr(self, name)
            if type(v) is not int or not 1 <= v <= MAX_BOUND:
                raise SimError(f"Bounds: {name} must be an int from 1 to {MAX_BOUND}, not {v!r}")


#: the largest value of each of ``Bounds``
MAX_BOUND = 1000


async def sim_controller(proc, plan, log):
    """``smp.app.workloads.controller`` without the clock: trapping exits, it
    carries out ``plan`` (``[(at, index, op, args), ...]``, in time order) one
    fault after the other, and sends ``log`` one record per fault event,
    ``{FAULT_REC, Index, 0, 0, Result, Effect}``."""
    await proc.process_flag("trap_exit", True)

    def now_us() -> int:
        return 0

    for _at, idx, op, args in plan:
        try:
            result, effect = await _FAULT_OPS[op](proc, now_us, *args)
        except (ErlangException, SmpError) as e:
            result, effect = b"raised " + _why(e), []
        await proc.send(log, (FAULT_REC, idx, 0, 0, result, effect))


def bound_scenario(sc: dict, b: Bounds) -> tuple[dict, list[str]]:
    """A copy of ``sc`` cut to ``b``, and one note per cut."""
    sc = copy.deepcopy(sc)
    notes: list[str] = []
    d = sc["duration"]
    if d["seconds"] is not None:
        notes.append(f"duration.seconds = {d['seconds']:g} -> operations = {b.operations}")
        d["seconds"], d["operations"] = None, b.operations
    elif d["operations"] > b.operations:
        notes.append(f"duration.operations {d['operations']} -> {b.operations}")
        d["operations"] = b.operations
    for g in sc["groups"]:
        if g["count"] > b.count:
            notes.append(f"groups {g['name']}: count {g['count']} -> {b.count}")
            g["count"] = b.count
        for k in SIZE_PARAMS.get(g["workload"], ()):
            if g["params"][k] > b.size:
                notes.append(f"groups {g['name']}: {k} {g['params'][k]} -> {b.size}")
                g["params"][k] = b.size
        if g["scheduler"] is not None and g["scheduler"] > sc["schedulers"]:
            g["scheduler"] = None
    for i, f in enumerate(sc["faults"]):
        if f["times"] > b.firings:
            notes.append(f"faults[{i}] {f['action']}: times {f['times']} -> {b.firings}")
            f["times"] = b.firings
    if sc.get("max_messages") is not None or sc.get("rate") is not None:
        notes.append("max_messages and rate are not applied")
    return sc, notes


class ScenarioWorkload:
    """``setup(vm)`` for ``smp.sim`` from a validated run/stress scenario.

    ``schedulers`` overrides the scenario's count (1..the scenario's groups'
    ``scheduler`` keys are dropped when above it).  Picklable: a ``--jobs``
    worker gets the object and calls ``setup`` there."""

    def __init__(self, sc: dict, bounds: Bounds = Bounds(), schedulers: int | None = None):
        if schedulers is not None:
            sc = dict(sc, schedulers=schedulers)
        self.sc, self.notes = bound_scenario(sc, bounds)
        self.bounds = bounds
        self.schedulers = self.sc["schedulers"]
        self.name = sc.get("name", "scenario")

    def setup(self, vm) -> None:  # noqa: C901 - execute's set-up, in its order
        sc = self.sc
        rng = random.Random(sc["seed"])
        env = _Env(vm, sc["duration"]["operations"], 0.0, rng, None)
        names = vm.world.names
        tracers: dict = {}
        for t in sc["tracers"]:
            if t["kind"] == "collector":
                tracers[t["name"]] = vm.spawn_collector(name=t["name"])
            else:  # (a sink in the simulator, whatever its kind)
                tracers[t["name"]] = vm.open_trace_port(t["kind"], name=t["name"])
        plan_events, new_tracers = _plan(sc, list(sc["faults"]), rng, tracers)
        for name, kind in new_tracers:
            if kind == "memory":
                tracers[name] = vm.open_trace_port("memory", name=name)
            else:
                tracers[name] = vm.spawn_collector(name=name)
        group_pids = set_up(vm, env, sc, tracers, names)
        plan, _records = _resolve_plan(plan_events, tracers, group_pids, sc)
        if plan:
            # one controller a lane, as execute spawns them: the faults of one
            # tracer or group in their order, those of others interleaved
            log = vm.spawn_collector(name="fault log")
            lanes = _lanes(plan, plan_events, sc)
            ctls = [
                vm.spawn(
                    sim_controller,
                    lane,
                    log,
                    name="controller" if len(lanes) == 1 else f"controller {i + 1}",
                )
                for i, lane in enumerate(lanes)
            ]
            leave_untraced(vm, sc, tracers, (log, *ctls))
