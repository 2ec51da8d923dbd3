#!/usr/bin/env python
"""Benchmark of the explorer (``smp.sim``): prints executions per second and
events per execution on small workloads, and how many executions the
explorer runs against every interleaving the brute force enumerates.  It
asserts nothing: the target (1,000 executions/s for executions of up to 50
events, one core) is printed next to the figures for reading.  Rates are given per wall
second and per CPU second of this process (``time.process_time``), which
a machine busy with other work disturbs less; each is taken over
explorations of at least ``--min-cpu`` CPU seconds in all, after one not
counted (it warms the caches up).

    python tools/bench_explore.py [--brute-seconds S] [--repeat N] [--min-cpu S]
        [--seeds N] [--scenario-executions N] [--jobs N] [--jobs-executions N]
        [--sample-runs N] [--json FILE]

Each race runs with optimal DPOR (the default) and with Source-DPOR beside
it: the latter's sleep-set blocked executions and its CPU time against the
default's (below 1: Source-DPOR is faster) close the row.

Workloads: the catalogue's races (``smp.sim.catalogue``): a tracer killed with
messages queued, the seq tracer replaced, a tracee exiting while its messages
wait, running in/out pairs at one tracer.  The brute force stops after
``--brute-seconds`` per workload; a count it did not finish is printed as
``>= N``.

Then two run scenarios of ``smp/app/examples`` as ``smp-emu explore`` cuts
them (``seqtrace --operations 1``: about 55 events an execution, the
target's size; ``churn`` with the default bounds: about 110), each
stopped after ``--scenario-executions`` executions, one explorer (no
split), with the same rates.

Then the time to the first violation on the catalogue entry with a user
predicate that fails on one outcome (``tracer_killed_before_a_burst``):
the exhaustive search (optimal DPOR, stopped at the first broken invariant),
random schedules and PCT of depth 2 and 3, each sampling method over
``--seeds`` seeds (median and worst executions and seconds; a seed that
finds nothing in ``--max-runs`` runs counts as that many).

Last, ``--jobs`` against one job: ``churn --operations 1`` and ``2`` and
``seqtrace --operations 1``, each cut at ``--jobs-executions``
executions, explored as one tree and shared with ``--jobs`` - 1 workers,
``--repeat`` times each, alternating (median wall seconds, their ratio,
the branches taken from workers and those explored again, and whether
the two searches found the same outcomes with the same counts and first
schedules); and ``--sample-runs`` random and PCT runs of ``churn`` in
this process against their chunks run by ``--jobs`` workers, the same
way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from smp.sim import Explorer, brute_force
from smp.sim.catalogue import CATALOGUE, by_name
from smp.sim.sampling import sample

TARGET = 1000.0  # executions/s, executions of up to 50 events


#: CPU seconds each rate is measured over at least (``--min-cpu``)
MIN_CPU_S = 1.0


def _rate(setup, schedulers: int, repeat: int, min_cpu: float = MIN_CPU_S, **options) -> dict:
    """One exploration to warm up, then at least ``repeat`` more and as many
    as ``min_cpu`` CPU seconds take: the counts of one, the rates over all
    (a race of 1-30 executions explores in a few ms, too short to time
    once: the best of three such runs moved by half from run to run)."""
    Explorer(setup, schedulers=schedulers, nonsmp=False, **options).run()
    n = 0
    dt = dc = 0.0
    while n < repeat or dc < min_cpu:
        t0, c0 = time.perf_counter(), time.process_time()
        r = Explorer(setup, schedulers=schedulers, nonsmp=False, **options).run()
        dt, dc, n = dt + time.perf_counter() - t0, dc + time.process_time() - c0, n + 1
    runs = r.executions + r.blocked
    return {
        "executions": r.executions,
        "blocked": r.blocked,
        "outcomes": len(r.outcomes),
        "events_per_execution": r.events / max(1, runs),
        "explorations": n,
        "seconds": dt / n,
        "cpu_seconds": dc / n,
        "executions_per_s": n * runs / dt,
        "executions_per_cpu_s": n * runs / dc,
        "events_per_cpu_s": n * r.events / dc,
    }


def _explore_rate(race, args, dpor: str | None = None) -> dict:
    return _rate(race.setup, race.schedulers, args.repeat, args.min_cpu, dpor=dpor)


def _scenario_rates(args) -> list[dict]:
    from smp.app.explore.workload import Bounds, ScenarioWorkload
    from smp.app.scenario import load_scenario

    rows = []
    print()
    print(f"run scenarios, {args.scenario_executions} executions each, one explorer")
    print(
        f"{'scenario':40} {'explored':>8} {'blocked':>7} {'outcomes':>8} {'ev/exec':>7} "
        f"{'exec/s':>7} {'exec/cpu-s':>10} {'ev/cpu-s':>8}"
    )
    for name, bounds in (("seqtrace --operations 1", Bounds(operations=1)), ("churn", Bounds())):
        sc = load_scenario(name.split()[0])  # (a shipped example, by name)
        wl = ScenarioWorkload(sc, bounds)
        row = {
            "scenario": name,
            **_rate(
                wl.setup,
                wl.schedulers,
                args.repeat,
                args.min_cpu,
                max_executions=args.scenario_executions,
            ),
        }
        rows.append(row)
        print(
            f"{name:40} {row['executions']:>8} {row['blocked']:>7} {row['outcomes']:>8} "
            f"{row['events_per_execution']:>7.1f} {row['executions_per_s']:>7,.0f} "
            f"{row['executions_per_cpu_s']:>10,.0f} {row['events_per_cpu_s']:>8,.0f}"
        )
    return rows


def _first_violation(args) -> list[dict]:
    race = by_name("tracer_killed_before_a_burst")
    rows = []
    t0 = time.perf_counter()
    r = Explorer(
        race.setup, race.schedulers, checks=race.checks, nonsmp=False, stop_at_violation=True
    ).run()
    rows.append(
        {
            "method": "exhaustive (DPOR)",
            "executions": [r.first_violation],
            "seconds": [time.perf_counter() - t0],
        }
    )
    for method, depth in (("random", 3), ("pct", 2), ("pct", 3)):
        execs, secs = [], []
        for seed in range(args.seeds):
            t0 = time.perf_counter()
            r = sample(
                race.setup,
                args.max_runs,
                method,
                seed=seed,
                depth=depth,
                schedulers=race.schedulers,
                checks=race.checks,
                nonsmp=False,
                stop_at_violation=True,
            )
            execs.append(r.first_violation or args.max_runs)
            secs.append(time.perf_counter() - t0)
        name = "random" if method == "random" else f"PCT depth {depth}"
        rows.append({"method": name, "executions": execs, "seconds": secs})
    print()
    print(f"time to the first violation: {race.name} (one failing outcome of {race.outcomes})")
    print(
        f"{'method':20} {'runs':>5} {'median execs':>12} {'worst execs':>11} "
        f"{'median s':>9} {'worst s':>8}"
    )
    for row in rows:
        e, t = row["executions"], row["seconds"]
        print(
            f"{row['method']:20} {len(e):>5} {statistics.median(e):>12.1f} {max(e):>11} "
            f"{statistics.median(t):>9.3f} {max(t):>8.3f}"
        )
    return rows


def _jobs(args) -> list[dict]:
    """One tree against the same search shared with ``--jobs`` - 1 worker
    processes (``smp.sim.share``), side by side, wall seconds: the speed-up
    ``--jobs`` gives, and a check that the two searches are one."""
    import multiprocess

    from smp.app.explore.workload import Bounds, ScenarioWorkload
    from smp.app.scenario import load_scenario
    from smp.sim import share
    from smp.sim.explorer import explore_split

    made: list = []

    class Kept(share.Share):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

    workers = max(1, args.jobs - 1)
    print()
    print(
        f"--jobs {args.jobs} (this process and {workers} worker(s), started before the clock) "
        f"against one tree, {args.jobs_executions} executions, {args.repeat} runs each, "
        "alternating"
    )
    print(
        f"{'scenario':40} {'one tree s':>10} {'shared s':>9} {'ratio':>6} {'tasks':>6} "
        f"{'again':>6} {'same':>5}"
    )
    rows = []
    from smp.sim import explorer

    keep = explorer.Share
    explorer.Share = Kept
    try:
        with multiprocess.Pool(workers) as pool:
            pool.map(abs, range(workers))  # (the workers started)
            for name, ops in (("churn", 1), ("churn", 2), ("seqtrace", 1)):
                wl = ScenarioWorkload(load_scenario(name), Bounds(operations=ops))
                one_s, shared_s, tasks, again, same = [], [], 0, 0, True
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    one = explore_split(
                        wl.setup, wl.schedulers, nonsmp=False, max_executions=args.jobs_executions
                    )
                    one_s.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    two = explore_split(
                        wl.setup,
                        wl.schedulers,
                        nonsmp=False,
                        max_executions=args.jobs_executions,
                        submit=lambda f, a: pool.apply_async(f, (a,)),
                        window=workers,
                    )
                    shared_s.append(time.perf_counter() - t0)
                    tasks, again = made[-1].tasks, made[-1].again
                    same = same and [(g.count, g.first.schedule) for g in one.outcomes] == [
                        (g.count, g.first.schedule) for g in two.outcomes
                    ]
                a, b = statistics.median(one_s), statistics.median(shared_s)
                label = f"{name} --operations {ops}"
                row = {"scenario": label, "one_s": one_s, "shared_s": shared_s, "tasks": tasks}
                row.update({"again": again, "same": same, "ratio": a / b})
                rows.append(row)
                print(
                    f"{label:40} {a:>10.2f} {b:>9.2f} {a / b:>6.2f} {tasks:>6} {again:>6} "
                    f"{'yes' if same else 'NO':>5}"
                )
    finally:
        explorer.Share = keep
    return rows


def _jobs_sample(args) -> list[dict]:
    """Random and PCT runs of ``churn`` (the command's default bounds) in
    this process against their chunks shared among ``--jobs`` workers
    (``_Workers``, as ``smp-emu explore --jobs`` runs them), side by side,
    wall seconds, and whether the two found the same result."""
    from smp.app.explore.simulate import _Workers
    from smp.app.explore.workload import Bounds, ScenarioWorkload
    from smp.app.scenario import load_scenario

    wl = ScenarioWorkload(load_scenario("churn"), Bounds())
    print()
    print(
        f"--jobs {args.jobs} on --random and --pct (chunks of runs in {args.jobs} worker(s), "
        f"started before the clock) against this process, churn, {args.sample_runs} runs, "
        f"{args.repeat} runs each, alternating"
    )
    print(f"{'method':40} {'one s':>8} {'shared s':>9} {'ratio':>6} {'same':>5}")
    rows = []
    workers = _Workers(args.jobs, pinned=False)
    try:
        list(workers(abs, range(args.jobs)))  # (the workers started)
        for method in ("random", "pct"):
            kw = dict(method=method, seed=1, depth=3, schedulers=wl.schedulers, nonsmp=False)
            one_s, shared_s, same = [], [], True
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                one = sample(wl.setup, args.sample_runs, **kw)
                one_s.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                two = sample(wl.setup, args.sample_runs, mapper=workers, **kw)
                shared_s.append(time.perf_counter() - t0)
                same = same and [(g.count, g.first.schedule) for g in one.outcomes] == [
                    (g.count, g.first.schedule) for g in two.outcomes
                ]
            a, b = statistics.median(one_s), statistics.median(shared_s)
            label = f"churn --{method} {args.sample_runs}"
            rows.append(
                {
                    "method": label,
                    "one_s": one_s,
                    "shared_s": shared_s,
                    "ratio": a / b,
                    "same": same,
                }
            )
            print(f"{label:40} {a:>8.2f} {b:>9.2f} {a / b:>6.2f} {'yes' if same else 'NO':>5}")
    finally:
        workers.close()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brute-seconds", type=float, default=20.0)
    ap.add_argument("--repeat", type=int, default=3, help="explorations per rate at least")
    ap.add_argument(
        "--min-cpu",
        type=float,
        default=MIN_CPU_S,
        help="CPU seconds per rate at least (more explorations when they are short)",
    )
    ap.add_argument("--seeds", type=int, default=20, help="seeds per sampling method")
    ap.add_argument("--max-runs", type=int, default=2000, help="runs per seed at most")
    ap.add_argument("--scenario-executions", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=2, help="processes of the shared search")
    ap.add_argument("--jobs-executions", type=int, default=2000)
    ap.add_argument("--sample-runs", type=int, default=1000, help="runs of --random and --pct")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = []
    print(f"target: {TARGET:,.0f} executions/s for executions of up to 50 events, one core")
    print(
        f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
    )
    print(
        f"{'workload':40} {'explored':>8} {'blocked':>7} {'outcomes':>8} {'ev/exec':>7} "
        f"{'exec/s':>7} {'exec/cpu-s':>10} {'ev/cpu-s':>8} {'all interleavings':>17} "
        f"{'traces':>6} {'source: blocked':>16} {'cpu-s ratio':>11}"
    )
    for race in CATALOGUE:
        row = {"workload": race.name, **_explore_rate(race, args)}
        src = _explore_rate(race, args, "source")
        row["source"] = src
        t0 = time.perf_counter()
        bf = brute_force(race.setup, race.schedulers, time_budget=args.brute_seconds)
        done = time.perf_counter() - t0 < args.brute_seconds
        row["interleavings"] = bf["interleavings"]
        row["interleavings_complete"] = done
        row["traces_seen"] = bf["traces"]
        rows.append(row)
        inter = f"{'' if done else '>= '}{bf['interleavings']:,}"
        print(
            f"{race.name:40} {row['executions']:>8} {row['blocked']:>7} {row['outcomes']:>8} "
            f"{row['events_per_execution']:>7.1f} {row['executions_per_s']:>7,.0f} "
            f"{row['executions_per_cpu_s']:>10,.0f} {row['events_per_cpu_s']:>8,.0f} "
            f"{inter:>17} {bf['traces']:>6} {src['blocked']:>16} "
            f"{src['cpu_seconds'] / row['cpu_seconds']:>11.2f}"
        )
    scenarios = _scenario_rates(args)
    violation = _first_violation(args)
    jobs = _jobs(args)
    jobs_sample = _jobs_sample(args)
    if args.json:
        with open(args.json, "w") as f:
            out = {"rates": rows, "scenarios": scenarios, "first_violation": violation}
            json.dump({**out, "jobs": jobs, "jobs_sample": jobs_sample}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
