"""``execute``: one scenario, one run, from its set-up to its summary.

Runs in the user's process.  ``execute`` starts an ``Emulator``, opens the
scenario's tracers, sets the run up (``smp.app.run_setup.set_up``), spawns
the fault controllers (``smp.app.fault_steps``), one per lane of its plan
(``smp.app.fault_plan``), runs the workload until it is quiet, its time is
up or its timeout passes, and collects every tracer's terms, the summary
(``smp.app.run_summary``) and what the faults did
(``smp.app.fault_report``).  The built-in workloads are in
``smp.app.workload_registry``, their process bodies in
``smp.app.workload_bodies``; every name of ``__all__`` is importable from
here, where they all were before the module was split by job.
"""

from __future__ import annotations

import gc
import random
import signal
import sys
import time
from typing import Any, Callable

from smp.app.fault_plan import _lanes, _not_fired, _plan, _resolve_plan
from smp.app.fault_report import fault_notes, fault_report, lost_in_gap
from smp.app.fault_steps import controller
from smp.app.limits import TraceLimit
from smp.app.run_setup import (
    CHECK_S,
    SetupTimeout,
    _Env,
    _SetupDeadline,
    leave_untraced,
    set_up,
)
from smp.app.run_summary import RunOutcome, _duration_report, _summary, duration_note
from smp.app.series import (
    default_interval,
    latency_histogram,
    run_timeseries,
    scheduler_timeline,
)
from smp.app.workload_bodies import CTL, am_kill
from smp.app.workload_registry import (
    MAX_PROCESSES,
    WORKLOADS,
    Bound,
    Workload,
    check_params,
    processes_of,
)
from smp.core.errors import SchedulerLost, SmpError
from smp.emulator import Emulator
from smp.ports.reader import read_trace
from smp.ports.traceport import IP_EXIT_WAIT

#: the longest a run cut short (Ctrl-C, its timeout) waits for what the
#: dispatcher delivered to reach its collectors (``Emulator.settle``)
SETTLE_S = 1.0

#: the signals that stop a run (Ctrl-C, and SIGTERM, which the CLI turns into one)
_STOPS = {signal.SIGINT, signal.SIGTERM}

#: the longest a check of a running run spends passing the trace on: the
#: processes are paused meanwhile, and the BIFs they call (the fault
#: controller's among them) wait; what is left goes at the next check, and
#: all of it once the run is over
PULL_BUDGET_S = CHECK_S / 5

#: the shortest the processes run between two checks: every scheduler is
#: paused and resumed around each (tens of milliseconds on a busy machine),
#: and a run() whose time is up when its resume is done serves only the
#: BIFs that wait at its pause (a check that overran left 1 ms to the next,
#: and the fault controller's BIF waited for the one after)
MIN_RUN_S = CHECK_S / 2


__all__ = [
    "WORKLOADS",
    "set_up",
    "Workload",
    "Bound",
    "MAX_PROCESSES",
    "SetupTimeout",
    "check_params",
    "processes_of",
    "execute",
    "RunOutcome",
    "CTL",
    "duration_note",
    "fault_notes",
    "fault_report",
    "lost_in_gap",
    "TracePull",
    "PULL_BUDGET_S",
    "MIN_RUN_S",
]


def execute(  # noqa: C901 - one run, from set-up to summary
    sc: dict,
    *,
    mode: str | None = None,
    schedulers: int | None = None,
    on_trace: Callable[[str, Any], None] | None = None,
    on_progress: Callable[[dict], None] | None = None,
    extra_faults: list | None = None,
    journal: str | None = None,
    emulator_options: dict | None = None,
    sample_interval: float | None = None,
    check_expect: Callable[[RunOutcome, dict], list] | None = None,
    record_fates: bool = False,
) -> RunOutcome:
    """Run scenario ``sc`` once; ``on_trace(tracer_name, term)`` is called as
    terms arrive, ``on_progress({"elapsed", "made", "delivered", "received"})``
    every ``CHECK_S`` or so (the counts are the latest sample's).  The
    dispatcher and the schedulers sample their own counters every
    ``sample_interval`` s (by default the scenario's ``seconds`` cut into at
    least 50 intervals: ``smp.app.series.default_interval``) and hand
    them over at the end: ``summary["timeseries"]``.  ``journal`` (smp mode) is where the dispatcher records its
    queue and decisions for ``smp.app.replay``; ``emulator_options`` go to
    ``Emulator`` (``bind``, ``remote_schedulers``, ``keys``... for schedulers
    on other hosts).  ``record_fates``: keep what ``compare`` lines up,
    nonsmp's fate log (``RunOutcome.fates``) and every run's spawn lineage
    (``RunOutcome.lineage``).  KeyboardInterrupt stops the run early: the outcome is still
    returned, with ``summary["interrupted"] = True``.  The scenario's
    ``timeout`` counts from the start of the set-up: a set-up that outlasts it
    raises ``SetupTimeout`` (nothing ran), a run that does ends with
    ``summary["error"]``."""
    mode = mode or sc["mode"]
    n = 1 if mode == "nonsmp" else (schedulers or sc["schedulers"])
    rng = random.Random(sc["seed"])
    d = sc["duration"]
    ops = d["operations"] or 0
    secs = d["seconds"] or 0.0
    messages: dict[str, list] = {}
    labels: dict = {}
    emit = on_trace or (lambda name, term: None)
    limit = TraceLimit.from_scenario(sc)  # max_messages / rate, as recon_trace caps
    if limit is not None:
        emit = limit.printer(emit)
    t_setup = time.perf_counter()
    clock = _SetupDeadline(
        sc["timeout"],
        sum(g["count"] * processes_of(g["workload"], g["params"]) for g in sc["groups"]),
    )
    with (
        Emulator(
            mode=mode,
            schedulers=n,
            journal=journal if mode == "smp" else None,
            **(emulator_options or {}),
        ) as vm,
        _Frozen() as frozen,
    ):
        if record_fates and mode == "nonsmp":
            vm.record_fates()  # smp's are the dispatcher's journal
        env = _Env(vm, ops, secs, rng, clock)
        collectors: dict[str, Any] = {}  # name -> pid, in display order
        ports: dict[str, tuple] = {}  # name -> (kind, Port, spec)
        tracers: dict[str, Any] = {}
        for t in sc["tracers"]:
            if t["kind"] == "collector":
                ref = vm.spawn_collector()
                collectors[t["name"]] = ref
            elif t["kind"] == "file":
                wrap = None
                if t["wrap_suffix"]:
                    wrap = (t["wrap_suffix"], t["wrap_size"], t["wrap_count"])
                ref = vm.open_trace_port("file", t["path"], wrap=wrap)
                ports[t["name"]] = ("file", ref, t)
            elif t["kind"] == "ip":
                # printing keeps a copy at the port (what was dispatched to it):
                # the port's one client slot stays free for dbg:trace_client
                ref = vm.open_trace_port(
                    "ip", t["port"], queue_size=t["queue_size"], keep=bool(t["print"])
                )
                ports[t["name"]] = ("ip", ref, t)
            elif t["kind"] == "memory":
                ref = vm.open_trace_port("memory", heavy_every=t["heavy_every"])
                ports[t["name"]] = ("memory", ref, t)
            else:
                ref = vm.open_trace_port("null")
                ports[t["name"]] = ("null", ref, t)
            tracers[t["name"]] = ref
            labels[ref] = t["name"]
            messages[t["name"]] = []
        printed = {t["name"] for t in sc["tracers"] if t["print"]}

        faults = list(sc["faults"]) + list(extra_faults or [])
        plan_events, new_tracers = _plan(sc, faults, rng, tracers)
        for name, kind in new_tracers:
            if kind == "memory":
                ref = vm.open_trace_port("memory")
                ports[name] = ("memory", ref, {"print": True})
            else:
                ref = collectors[name] = vm.spawn_collector()
            tracers[name] = ref
            labels[ref] = name
            messages[name] = []
            printed.add(name)

        group_pids = set_up(vm, env, sc, tracers, labels, clock.check)
        plan, fault_records = _resolve_plan(plan_events, tracers, group_pids, sc)
        ctls: list = []
        fault_log = None
        if plan:
            # the fault log keeps the controllers' record of each fault event;
            # one controller a lane: a fault that waits holds only those of
            # its own tracer or group after it
            fault_log = vm.spawn_collector()
            labels[fault_log] = "fault log"
            lanes = _lanes(plan, plan_events, sc)
            for i, lane in enumerate(lanes):
                ctl = vm.spawn(controller, lane, fault_log)
                labels[ctl] = "controller" if len(lanes) == 1 else f"controller {i + 1}"
                ctls.append(ctl)
            leave_untraced(vm, sc, tracers, (fault_log, *ctls))
        setup_s = time.perf_counter() - t_setup

        pull = TracePull(vm, collectors, messages, printed, emit)

        interrupted = completed = False
        error = None
        held = {"s": 0.0, "at": 0.0}  # the longest the controller overshot a check
        not_fired: list = []
        not_fired_at = None  # when the controller was stopped, the workload being over
        main = "dispatcher" if mode == "smp" else "scheduler"

        def latest() -> dict:
            """The latest sample of the process that counts every message (cheap)."""
            try:
                got = vm.series(final=False)
            except SmpError:
                return {}
            if main == "dispatcher":
                point = got["dispatcher"]
            else:
                point = next(iter(got["schedulers"].values()), None)
            return point[1] if point else {}

        collected: dict = {}

        def end_samples() -> None:
            """The run is over: the samplers take their last sample and hand
            their series over, before anything else is asked of the processes."""
            try:
                collected.update(vm.series())
            except SmpError:  # a scheduler or the dispatcher went away
                pass

        run_start_us = time.time_ns() // 1000  # the trace timestamps' clock
        # the samplers count from the same moment, on the same monotonic clock
        vm.sample(sample_interval or default_interval(secs), time.monotonic())
        t0 = time.perf_counter()
        deadline = clock.at  # the timeout counts from the start of the set-up
        run_for = vm.run_for if limit is None else limit.runner(vm, t0, tracers.values())
        k = 1
        frozen()  # the set-up's objects: the emulator, the modules
        try:
            while True:
                # run until the next check, and for MIN_RUN_S at least; the
                # samples are taken meanwhile, where the counters live, however
                # long the controller is held
                began = time.perf_counter() - t0
                target = max(k * CHECK_S, began + MIN_RUN_S)
                wait = target - began
                if run_for(min(wait, max(0.01, deadline - time.monotonic()))):
                    completed = True
                    break
                now = time.perf_counter() - t0
                if now - target > held["s"]:
                    held.update(s=now - target, at=target)
                k = max(k + 1, int(now / CHECK_S + 1e-9) + 1)
                if ctls and now < plan[-1][0] and _work_over(vm, group_pids):
                    # faults still to come would hold a finished run: they do not fire
                    not_fired, not_fired_at = _not_fired(plan_events, now), now
                    for ctl in ctls:
                        vm.exit(ctl, am_kill)
                    ctls = []
                if time.monotonic() >= deadline:
                    error = f"run not finished within {sc['timeout']:g} s" + (
                        f"; still busy: {vm.last_busy}" if vm.last_busy else ""
                    )
                    break
                if on_trace is not None:
                    # only what is new since the last sample, and no longer
                    # than PULL_BUDGET_S: the processes do not run meanwhile
                    pull(PULL_BUDGET_S)
                    frozen()
                if on_progress:
                    last = latest()
                    on_progress(
                        {
                            "elapsed": time.perf_counter() - t0,
                            "made": last.get("made", 0),
                            "delivered": last.get("delivered", 0),
                            "received": sum(len(m) for m in messages.values()),
                        }
                    )
            elapsed = time.perf_counter() - t0
            if not completed:  # out of time, not quiet: what was delivered is taken in
                vm.settle(SETTLE_S)
            end_samples()
            pull()
        except KeyboardInterrupt:
            elapsed = time.perf_counter() - t0
            interrupted = True
            # what the dispatcher delivered before the Ctrl-C reaches its collector
            vm.settle(SETTLE_S)
        except SchedulerLost as e:
            # the rest of the run became quiet: it ends here, measured, and
            # the summary says what was lost
            elapsed = time.perf_counter() - t0
            error = str(e)
            end_samples()
            pull()
        frozen.release()
        # From here on the run is over: a second Ctrl-C must not leave it half-measured.
        if not collected:
            end_samples()
        if interrupted:
            pull()  # what the tracers received before the Ctrl-C is written too
        stats = vm.statistics().as_dict()  # the result is plain data (JSON)
        fates = lineage = None
        if record_fates:
            try:
                lineage = vm.spawn_lineage()
                fates = vm.fates() if mode == "nonsmp" else None
            except SmpError:  # a scheduler went away: nothing to line up
                pass
        fault_log_terms: list = []
        if fault_log is not None:
            try:
                fault_log_terms = vm.messages(fault_log)
            except SmpError:  # it lived on a scheduler that was lost
                pass
        lat = sorted(vm.latencies_ns())
        port_info = {}
        for name, (kind, ref, t) in ports.items():
            try:
                if kind == "file":
                    vm.flush_trace_port(ref)
                    port_info[name] = vm.trace_port_info(ref)
                    vm.close_trace_port(ref)
                    src = (
                        t["path"]
                        if not t["wrap_suffix"]
                        else (t["path"], "wrap", t["wrap_suffix"], t["wrap_size"], t["wrap_count"])
                    )
                    for term in read_trace(src):
                        messages[name].append(term)
                        if t["print"]:
                            emit(name, term)
                elif kind == "memory":
                    for term in vm.trace_port_terms(ref):
                        messages[name].append(term)
                        if t["print"]:
                            emit(name, term)
                    port_info[name] = vm.trace_port_info(ref)
                elif kind == "ip":
                    # a client connected gets a bounded time to take the queue;
                    # without one nothing waits (the driver drops on close)
                    if vm.trace_port_info(ref)["connected"]:
                        vm.flush_trace_port(ref, IP_EXIT_WAIT)
                    port_info[name] = vm.trace_port_info(ref)
                    if t["print"]:
                        for term in vm.trace_port_terms(ref):
                            messages[name].append(term)
                            emit(name, term)
                    vm.close_trace_port(ref)
                    refused = port_info[name]["rejected"]
                    if refused:
                        sys.stderr.write(
                            f"ip tracer {name} (port {port_info[name]['port']}): refused "
                            f"{refused} client(s) while one was served "
                            "(trace_ip_drv serves one client at a time)\n"
                        )
                else:
                    port_info[name] = vm.trace_port_info(ref)
            except (SmpError, OSError) as e:
                port_info[name] = {"error": str(e)}
    summary = _summary(
        sc,
        mode,
        n,
        stats,
        lat,
        elapsed,
        setup_s,
        messages,
        port_info,
        completed=completed,
        interrupted=interrupted,
        error=error,
    )
    summary["timeseries"] = run_timeseries(collected, mode)
    summary["duration"] = _duration_report(sc, summary, held)
    summary["faults_not_fired"] = not_fired
    summary["faults"] = fault_report(
        fault_records,
        fault_log_terms,
        messages,
        not_fired_after=not_fired_at,
        ended_early=interrupted or error is not None,
        labels=labels,
    )
    summary["limit"] = limit.to_json() if limit is not None else None
    summary["latency_histogram"] = latency_histogram(lat)
    prof = sc["system_profile"]
    summary["scheduler_timeline"] = {
        "profiled": bool(prof and prof["scheduler"]),
        **(scheduler_timeline(messages, run_start_us) if prof and prof["scheduler"] else {}),
    }
    outcome = RunOutcome(summary, messages, labels, fates, lineage)
    # the scenario's [[expect]] clauses, each held or broken with its
    # evidence: checked by the checker the caller hands in
    # (smp.app.compare.check_expect)
    summary["expect"] = check_expect(outcome, sc) if check_expect is not None else []
    return outcome


class _Frozen:
    """While a run goes on, what the controller holds (the set-up's objects,
    then every trace term a check took in) is moved out of the cyclic garbage
    collector's reach as it comes (``gc.freeze``): the collector's full
    passes walked it all, tens to hundreds of milliseconds each, two or three
    times a run of 1.5 s, while no BIF a process called was served (a
    kill_tracer's retraces among them).  ``release`` (also on the way out)
    puts it back; nothing is done when something else in the process has
    frozen objects already."""

    def __init__(self) -> None:
        self.on = False

    def __enter__(self) -> _Frozen:
        self.on = gc.get_freeze_count() == 0
        return self

    def __call__(self) -> None:
        if self.on:
            gc.freeze()

    def release(self) -> None:
        if self.on:
            self.on = False
            gc.unfreeze()

    def __exit__(self, *exc) -> None:
        self.release()


def _work_over(vm, group_pids: dict) -> bool:
    """Every workload process has exited (asked until one is found alive)."""
    try:
        return not any(vm.is_alive(p) for pids in group_pids.values() for p in pids)
    except SmpError:
        return False


class TracePull:
    """Takes what is new from each collector (``vm.messages``) into
    ``messages`` and passes the printed collectors' terms on to ``emit``.

    ``pull(budget)`` stops passing terms on once ``budget`` seconds
    (``clock``) have gone, leaving the rest for the next call; ``pull()``
    passes everything on.  Safe to call again after a Ctrl-C cut it short:
    what was taken is kept (one ``extend``), and a Ctrl-C waits while terms
    go out (so none is written twice or half), which are counted term by
    term."""

    def __init__(
        self, vm, collectors: dict, messages: dict, printed, emit, clock=time.perf_counter
    ):
        self.vm, self.collectors, self.messages = vm, collectors, messages
        self.printed, self.emit, self.clock = printed, emit, clock
        #: how many of ``messages[name]`` went out
        self.emitted = {name: 0 for name in collectors}

    def __call__(self, budget: float | None = None) -> None:
        end = None if budget is None else self.clock() + budget
        for name, pid in self.collectors.items():
            try:
                self.messages[name].extend(self.vm.messages(pid, start=len(self.messages[name])))
            except SchedulerLost:  # it lived on a scheduler that was lost
                pass
        for name in self.collectors:
            got, emitted = self.messages[name], self.emitted
            if name not in self.printed or emitted[name] >= len(got):
                continue
            old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
            try:
                while emitted[name] < len(got):
                    if end is not None and self.clock() >= end:
                        return
                    self.emit(name, got[emitted[name]])
                    emitted[name] += 1
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
