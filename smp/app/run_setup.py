"""A run's set-up: the scenario's processes and tracing on an emulator.

Runs in the user's process.  ``set_up`` makes, after the tracers, what
``erl_trace.c``'s users would, in their order: default tracing, the groups'
processes (each workload's set-up, through ``_Env``), per-process tracing,
call patterns, the seq tracer, the system monitor and profiler.  It serves
``smp.app.workloads.execute`` on the real emulator and
``smp.app.explore.workload.ScenarioWorkload`` in the simulator.
``_SetupDeadline`` charges the set-up to the run's ``timeout``
(``SetupTimeout``); ``CHECK_S`` is how often ``execute`` looks at a run.
"""

from __future__ import annotations

import random
import time
from typing import Any

from smp.app.workload_bodies import wl_check, wl_fib, wl_throw
from smp.app.workload_registry import WORKLOADS
from smp.core.errors import EmulatorTimeout
from smp.core.terms import Atom
from smp.emulator import Emulator

A = Atom
CHECK_S = 0.1  # the controller looks at a run this often: its end, faults, progress


class SetupTimeout(EmulatorTimeout):
    """A run's set-up (spawning its processes, tracing them) outlasted its
    ``timeout``; the run was stopped before it started."""


class _Env:
    """What a workload's set-up uses: the emulator, the run's length, and
    ``spawn``, which stops the set-up once the run's timeout has passed."""

    def __init__(
        self, vm: Emulator, ops: int, secs: float, rng: random.Random, deadline: Any = None
    ):
        self.vm, self.ops, self.secs, self.rng = vm, ops, secs, rng
        self.deadline = deadline  # a _SetupDeadline, or None: no limit
        self._n = 0
        self._defined = False

    def spawn(self, *args, **kw):
        if self.deadline is None:
            return self.vm.spawn(*args, **kw)
        self.deadline.check()
        pid = self.vm.spawn(*args, **kw)
        self.deadline.done += 1
        return pid

    def counter(self) -> int:
        self._n += 1
        return self._n

    def place(self, g):
        return g["scheduler"]

    def define_calls(self):
        if not self._defined:
            self.vm.define("wl_calls", "fib", wl_fib)
            self.vm.define("wl_calls", "check", wl_check)
            self.vm.define("wl_calls", "throw", wl_throw)
            self._defined = True


class _SetupDeadline:
    """The run's ``timeout`` counted from the start of ``execute``: set-up
    (starting the emulator, spawning and tracing the workload's processes)
    spends it too.  ``check()`` raises ``SetupTimeout`` once it has passed;
    it is called before every spawn and every per-process trace call, each of
    which takes well under a millisecond, so a set-up stops within a moment
    of the timeout."""

    def __init__(self, timeout: float, total: int):
        self.timeout = timeout
        self.at = time.monotonic() + timeout
        self.total = total  # the workload processes the set-up spawns
        self.done = 0

    def check(self) -> None:
        if time.monotonic() >= self.at:
            raise SetupTimeout(
                f"run not finished within timeout = {self.timeout:g} s: its set-up had "
                f"spawned {self.done:,} of {self.total:,} processes, "
                "so the run did not start (raise the timeout or spawn fewer processes)"
            )


def _atoms(flags) -> list:
    return [A(f) for f in flags]


def _monitor_opts(m: dict) -> list:
    out: list = []
    for k in ("long_gc", "long_schedule", "large_heap"):
        if m[k]:
            out.append((A(k), m[k]))
    for k in ("busy_port", "busy_dist_port"):
        if m[k]:
            out.append(A(k))
    return out


def _profile_opts(p: dict) -> list:
    return [A(k) for k in ("scheduler", "runnable_procs", "runnable_ports", "exclusive") if p[k]]


def role_label(g: dict, i: int, role: str) -> str:
    """The label of process ``role`` of instance ``i`` of group ``g``,
    ``group[i].role`` (``pp[0].ping``): ``set_up`` gives it, and the
    ``[[expect]]`` checks find a group's processes by it."""
    return f"{g['name']}[{i}].{role}"


def leave_untraced(vm, sc: dict, tracers: dict, pids) -> None:
    """The run's own processes (the fault controller and its log) are not
    the workload's: the default tracing of new processes (``[[trace]]`` with
    ``pids = "new"`` or ``"all"``) is taken off them again, with the tracer
    it gave them (the last one ``set_up`` set: ``new`` entries come first,
    ``all`` ones after the groups)."""
    given = [t for t in sc["trace"] if t["pids"] == "new"]
    given += [t for t in sc["trace"] if t["pids"] == "all"]
    if given:
        tracer = tracers[given[-1]["tracer"]]
        for pid in pids:
            vm.trace(pid, False, ["all"], tracer=tracer)


def set_up(vm, env, sc: dict, tracers: dict, labels: dict, check=lambda: None) -> dict:
    """The scenario's processes and tracing, after its tracers: ``new``
    tracing, the groups (each process labelled ``group[i].role`` in
    ``labels``), ``all``/``existing`` tracing, the groups' tracing, the call
    patterns, the seq tracer, the system monitor and profiler, in that order.
    ``vm`` is an ``Emulator`` (``execute``) or the simulator's facade
    (``smp-emu explore``); ``check()`` runs before each per-process trace
    call (the set-up's share of the run's timeout).  Returns the pids of
    each group."""
    for t in sc["trace"]:
        if t["pids"] == "new":
            vm.trace("new", True, t["flags"], tracer=tracers[t["tracer"]])
    group_pids: dict[str, list] = {}
    for g in sc["groups"]:
        w = WORKLOADS[g["workload"]]
        pids = []
        for i in range(g["count"]):
            for role, pid in w.setup(env, g, g["params"]):
                labels[pid] = role_label(g, i, role)
                pids.append(pid)
        group_pids[g["name"]] = pids
    for t in sc["trace"]:
        if t["pids"] in ("all", "existing"):
            vm.trace(t["pids"], True, t["flags"], tracer=tracers[t["tracer"]])
    for g in sc["groups"]:
        if g["tracer"] is not None and g["trace"]:
            for pid in group_pids[g["name"]]:
                check()
                vm.trace(pid, True, g["trace"], tracer=tracers[g["tracer"]])
    for p in sc["patterns"]:
        mfa = tuple(p["mfa"])
        flags: list = [f for f in p["flags"] if f != "meta"]
        if "meta" in p["flags"]:
            flags.append(("meta", tracers[p["meta_tracer"]]))
        if mfa[0] == "wl_calls":
            env.define_calls()
        # (how many functions it matched, as dbg:tp's {matched, Node, N}:
        # run says when a --tp pattern matched none)
        p["matched"] = vm.trace_pattern(mfa, p["match_spec"], flags)
    if sc["seq_trace"] is not None:
        vm.set_system_seq_tracer(tracers[sc["seq_trace"]["tracer"]])
    if sc["system_monitor"] is not None:
        m = sc["system_monitor"]
        vm.system_monitor(tracers[m["monitor"]], _monitor_opts(m))
    if sc["system_profile"] is not None:
        pr = sc["system_profile"]
        vm.system_profile(tracers[pr["profiler"]], _profile_opts(pr))
    return group_pids
