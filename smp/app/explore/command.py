"""``smp-emu explore``: the click command.

Dispatches on the scenario's shape.  An explore scenario (``[[queue]]``,
``smp/app/examples/explore/``) runs on the real emulator as it always has:
``explore`` with a progress line on stderr (only when stderr is a
terminal), the result on stdout as text or, with ``--json``, as JSON (what
``smp-emu report`` renders).  A run or stress scenario (``[[groups]]``, the
examples of ``smp-emu run``) is explored in the simulator
(``smp.app.explore.simulate``), with its own progress line on a terminal
(the executions run and the estimate of the whole).  A bad scenario or schedule exits
``EXIT_USAGE``, a schedule that fails to run ``EXIT_FAILED``, Ctrl-C
``EXIT_INTERRUPTED`` (``smp.app.exitcodes``).
"""

from __future__ import annotations

import json
import os
import sys

import click

from smp.app.cli_options import NumberRange, _clip_text
from smp.app.exitcodes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from smp.app.explore.runner import explore
from smp.app.explore.scenario import MAX_CHANGES, MAX_MESSAGES, SAMPLES, explore_example_names
from smp.app.explore.simulate import (
    DEFAULT_MAX_EXECUTIONS,
    SHRINK_OUTCOMES,
    SimOptions,
    broken,
    default_jobs,
    default_max_executions,
    is_race,
    is_run_scenario,
    no_such_scenario,
    proved,
    simulate,
)
from smp.app.explore.text import format_text
from smp.app.explore.workload import MAX_BOUND, Bounds
from smp.app.scenario import read_file, read_toml
from smp.core.errors import BadArg, ScenarioError, SmpError
from smp.sim.nodes import AFTER_TIMEOUT_MS, MAX_AFTER_TIMEOUT_MS

__all__ = ["explore_command"]

#: the options of a search in the simulator
_SEARCH = (
    "max_executions",
    "time_budget",
    "preemptions",
    "dpor",
    "random_runs",
    "pct",
    "depth",
    "graph",
    "jobs",
)
#: the options only a run scenario takes, and only an explore scenario takes
_SIM_ONLY = (
    *_SEARCH,
    "operations",
    "count",
    "size",
    "firings",
    "schedulers",
    "after_timeout",
    "prove",
    "shrink",
    "events",
)
#: the workload bounds: a race of the catalogue is a fixed workload
_BOUNDS = ("operations", "count", "size", "firings")
_QUEUE_ONLY = ("max_messages", "max_changes", "samples", "no_prune")


def _is_empty(scenario: str) -> bool:
    """A file that holds no TOML key at all (empty, or comments only)."""
    if not os.path.isfile(scenario):
        return False
    try:
        return not read_toml(read_file(scenario), scenario)
    except ScenarioError:
        return False  # (the loader says what is wrong with it)


#: the options whose parameter is not named after them
_OPTION_OF = {"random_runs": "--random", "events": "--events/--no-events"}


def _option(name: str) -> str:
    return _OPTION_OF.get(name) or "--" + name.replace("_", "-")


def _make_command():

    @click.command("explore")
    @click.argument("scenario")
    @click.option(
        "--schedule",
        default=None,
        metavar="SCHEDULE",
        help="run this one schedule and print its outcome: 'CHANGE@K ...' for an explore "
        "scenario (each change after K queued messages), 'S1 S2 A1>2 D ...' (the threads in "
        "the order they step, as a replay command gives them) for a run scenario or a race",
    )
    @click.option("--json", "as_json", is_flag=True, help="print the result as JSON on stdout")
    @click.option(
        "--max-messages",
        type=click.IntRange(0, 10_000),
        default=None,
        help=f"exhaustive up to this many queued messages (default {MAX_MESSAGES})",
    )
    @click.option(
        "--max-changes",
        type=click.IntRange(0, 100),
        default=None,
        help=f"... and this many changes (default {MAX_CHANGES}); beyond, a sample",
    )
    @click.option(
        "--samples",
        type=click.IntRange(1, 100_000),
        default=None,
        help=f"classes a random sample runs (default {SAMPLES})",
    )
    @click.option("--seed", type=int, default=None, help="seed of the random sample")
    @click.option(
        "--no-prune", is_flag=True, help="run every schedule, not one per class of equivalent ones"
    )
    @click.option("--no-nonsmp", is_flag=True, help="do not run the scenario in nonsmp mode")
    @click.option(
        "--max-executions",
        type=click.IntRange(0),
        default=None,
        help=f"stop after this many executions (default {DEFAULT_MAX_EXECUTIONS} for a run "
        "scenario without --time-budget, no bound for a race of the catalogue; 0: no bound)",
    )
    @click.option(
        "--time-budget",
        type=NumberRange(0, min_open=True),
        default=None,
        help="run scenario or race: stop after this many seconds (given alone, the only bound: no "
        "default --max-executions beside it)",
    )
    @click.option(
        "--preemptions",
        type=click.IntRange(0),
        default=None,
        help="run scenario or race: explore only executions with at most this many preemptions "
        "(a thread other than the last one chosen while it could go on); the output says "
        "when the bound cut the search",
    )
    @click.option(
        "--dpor",
        type=click.Choice(["optimal", "source"]),
        default=None,
        help="run scenario or race: the partial-order reduction: optimal (wakeup trees: no "
        "sleep-set blocked execution on the catalogue and the tests' workloads; "
        "the default) or source (backtrack and sleep sets: the one --preemptions takes, "
        "and its default)",
    )
    @click.option(
        "--random",
        "random_runs",
        type=click.IntRange(1),
        default=None,
        help="run scenario or race: N random schedules instead of the exhaustive search",
    )
    @click.option(
        "--pct",
        type=click.IntRange(1),
        default=None,
        help="run scenario or race: N PCT runs (probabilistic concurrency testing) of depth --depth",
    )
    @click.option(
        "--depth", type=click.IntRange(1, 20), default=3, help="the depth of PCT (default 3)"
    )
    @click.option(
        "--graph",
        type=click.Path(dir_okay=False, writable=True),
        default=None,
        help="run scenario or race: write the explored tree to this file (graphviz DOT)",
    )
    @click.option(
        "--jobs",
        type=click.IntRange(1, 256),
        default=None,
        help="run scenario or race: processes sharing the search, this one and N - 1 workers, or N workers "
        "running the chunks of --random or --pct runs (default: the cores)",
    )
    @click.option(
        "--operations",
        type=click.IntRange(1, MAX_BOUND),
        default=Bounds.operations,
        help=f"run scenario: at most this many operations per process (default "
        f"{Bounds.operations})",
    )
    @click.option(
        "--count",
        type=click.IntRange(1, MAX_BOUND),
        default=Bounds.count,
        help=f"run scenario: at most this many instances per group (default {Bounds.count})",
    )
    @click.option(
        "--size",
        type=click.IntRange(1, MAX_BOUND),
        default=Bounds.size,
        help="run scenario: at most this for a workload's sizes: pairs, ring size, chain "
        f"length, senders, burst, call depth (default {Bounds.size})",
    )
    @click.option(
        "--firings",
        type=click.IntRange(1, MAX_BOUND),
        default=Bounds.firings,
        help=f"run scenario: each fault fires at most this many times (default {Bounds.firings})",
    )
    @click.option(
        "--schedulers",
        type=click.IntRange(1, 64),
        default=None,
        help="run scenario: simulate this many schedulers (default the scenario's)",
    )
    @click.option(
        "--after-timeout",
        type=click.IntRange(0, MAX_AFTER_TIMEOUT_MS),
        default=AFTER_TIMEOUT_MS,
        metavar="MS",
        help="run scenario or race: a receive timeout or a port's busy spell shorter than "
        "this many ms may end at any point while it is armed, a longer one never (there is "
        f"no clock in the simulator; default {AFTER_TIMEOUT_MS}: the built-in workloads' "
        "5,000 ms backstops stay quiet; 0: no timer fires)",
    )
    @click.option(
        "--prove",
        is_flag=True,
        help="run scenario or race: run each outcome's schedule again on a fresh smp emulator, its "
        "real processes stepped event by event, and check the same fates (exit 1 if not)",
    )
    @click.option(
        "--shrink",
        type=click.IntRange(0, 10_000),
        default=SHRINK_OUTCOMES,
        help=f"run scenario or race: shrink the schedule of the first N outcomes that break an "
        f"invariant or an expect clause (default {SHRINK_OUTCOMES}; 0: none)",
    )
    @click.option(
        "--events/--no-events",
        default=True,
        help="run scenario or race: list each outcome's events (default yes)",
    )
    @click.pass_context
    def explore_command(ctx, scenario, schedule, as_json, seed, no_nonsmp, **kw):
        """Explore the interleavings of SCENARIO and list the distinct outcomes.

        SCENARIO is an explore scenario (TOML with [[queue]], or a shipped one:
        seq, monitor, commute, races), a run/stress scenario (TOML with
        [[groups]], or an example of smp-emu run: churn, default...), or a
        race of the simulator's catalogue by its name
        (tracer_killed_with_messages_queued, seq_tracer_replaced, ...).

        An explore scenario runs once per distinct interleaving of its state
        changes with the dispatch of its queued messages, each on a fresh smp
        emulator, the dispatcher held and stepped message by message
        (Emulator.step_dispatcher); schedules that differ only in the order
        of a change and a message that commute are run once.  --schedule
        takes 'CHANGE@K ...'.

        A run scenario is explored in the simulator (smp.sim): its workloads,
        tracers (a tracer port: a sink of what the dispatcher writes), trace
        flags, patterns, seq_trace, system_monitor, system_profile and faults
        (each fault a step of the controller process), receive timeouts and
        busy spells under --after-timeout, run on simulated schedulers,
        bounded by --operations, --count, --size and --firings, and every
        order the SMP build allows is explored up to equivalence
        (optimal DPOR; --dpor source for Source-DPOR) until --max-executions
        or --time-budget cuts it; or
        --random N schedules, or --pct N runs.  Each outcome comes with its
        events, race pairs, schedule and the command that replays it
        (--schedule 'S1 S2 D ...').

        Both kinds also run in nonsmp mode, and the report names the smp
        outcomes nonsmp cannot produce.  Exit 1 when a search or a run fails,
        an outcome breaks an invariant or an expect clause, or a proof fails;
        2 for a bad option, file or --schedule.

        \b
        Example:
          smp-emu explore seq
          smp-emu explore seq --schedule 'replace@1'
          smp-emu explore races --json > races.json && smp-emu report races.json -o races.html
          smp-emu explore churn --max-executions 200
          smp-emu explore churn --pct 100 --depth 2 --seed 7
          smp-emu explore tracer_killed_with_messages_queued
        """
        given = {
            k
            for k in ctx.params
            if ctx.get_parameter_source(k) is not click.core.ParameterSource.DEFAULT
        }
        if _is_empty(scenario):
            click.echo(
                f"smp-emu: {scenario}: an empty scenario (an explore scenario has [[queue]], "
                "a run scenario [[groups]])",
                err=True,
            )
            sys.exit(EXIT_USAGE)
        if is_run_scenario(scenario) or is_race(scenario):
            bad = sorted(given & set(_QUEUE_ONLY))
            if bad:
                click.echo(
                    f"smp-emu: {_option(bad[0])} is for explore scenarios ([[queue]]), "
                    f"not for the run scenario {scenario}",
                    err=True,
                )
                sys.exit(EXIT_USAGE)
            _simulate(scenario, schedule, as_json, seed, no_nonsmp, kw, given)
            return
        if not os.path.exists(scenario) and (scenario.endswith(".toml") or os.sep in scenario):
            click.echo(f"smp-emu: {scenario}: no such file", err=True)
            sys.exit(EXIT_USAGE)
        if not os.path.exists(scenario) and scenario not in explore_example_names():
            click.echo(f"smp-emu: {no_such_scenario(scenario)}", err=True)
            sys.exit(EXIT_USAGE)
        bad = sorted(given & set(_SIM_ONLY))
        if bad and os.path.exists(scenario):
            try:  # (a file that cannot be read or parsed: that, not its options)
                read_toml(read_file(scenario), scenario)
            except ScenarioError as e:
                click.echo(f"smp-emu: {e}", err=True)
                sys.exit(EXIT_USAGE)
        if bad:
            takes = "run scenarios ([[groups]])" + (
                "" if bad[0] in _BOUNDS else " and races of the catalogue"
            )
            click.echo(
                f"smp-emu: {_option(bad[0])} is for {takes}, not for the explore scenario "
                f"{scenario}",
                err=True,
            )
            sys.exit(EXIT_USAGE)
        _queue_explore(
            scenario,
            schedule,
            as_json,
            kw["max_messages"],
            kw["max_changes"],
            kw["samples"],
            seed,
            kw["no_prune"],
            no_nonsmp,
        )

    return explore_command


#: what a replay of one schedule (--schedule) does not do: a search, or a shrink
_SEARCH_ONLY = (*_SEARCH, "shrink")


def _refused(given: set, schedule) -> str | None:
    """What is wrong with the options a run scenario was given, in words:
    each option that would do nothing is refused rather than ignored."""
    if schedule is not None:
        bad = sorted(given & {*_SEARCH_ONLY, "seed"})
        if bad:
            return f"{_option(bad[0])} is for a search; --schedule runs one execution"
    elif "depth" in given and "pct" not in given:
        return "--depth is the depth of --pct runs: give --pct N too"
    if "seed" in given and not given & {"random_runs", "pct"}:
        return "--seed seeds --random and --pct runs; the exhaustive search draws nothing"
    return None


def _search_refused(kw: dict, given: set) -> str | None:
    """What is wrong with the options of a search in words (options that
    contradict each other, a ``--graph`` that cannot be written: said
    before the search, whose result would be lost at its end), or None."""
    sampled = kw["random_runs"] is not None or kw["pct"] is not None
    if kw["random_runs"] is not None and kw["pct"] is not None:
        return "give one of --random and --pct"
    if kw["preemptions"] is not None and sampled:
        return "--preemptions bounds the exhaustive search, not --random or --pct"
    if kw["dpor"] is not None and sampled:
        return "--dpor chooses the exhaustive search, not --random or --pct"
    if "max_executions" in given and sampled:
        return (
            "--max-executions bounds the exhaustive search; --random N and --pct N give "
            "their own number of runs"
        )
    if kw["dpor"] == "optimal" and kw["preemptions"] is not None:
        return "--preemptions bounds source DPOR only: give --dpor source or no --dpor"
    if kw["graph"] == "-":
        return "--graph -: give a file name (the text report goes to stdout)"
    if kw["graph"] is not None:
        where = os.path.dirname(os.path.abspath(kw["graph"]))
        if not os.path.isdir(where):
            return f"--graph {kw['graph']}: no such directory: {where}"
        if not os.access(where, os.W_OK):
            return f"--graph {kw['graph']}: the directory is not writable: {where}"
    return None


def _simulate(scenario, schedule, as_json, seed, no_nonsmp, kw, given) -> None:
    why = _refused(given, schedule) or _search_refused(kw, given)
    bounds = sorted(given & set(_BOUNDS))
    if why is None and bounds and is_race(scenario):  # (given, even at its default)
        why = (
            f"the race {scenario} is a fixed workload: it takes no workload bounds "
            f"({_option(bounds[0])})"
        )
    if why is not None:
        click.echo(f"smp-emu: {why}", err=True)
        sys.exit(EXIT_USAGE)
    m = kw["max_executions"]
    tty = sys.stderr.isatty()

    sampled = kw["random_runs"] is not None or kw["pct"] is not None

    def progress(n: int, blocked: int, estimate: float) -> None:
        more = f" ({blocked:,} blocked)" if blocked else ""
        # (a sample's total is the runs asked for, not an estimate)
        total = f"of {estimate:,.0f}" if sampled else f"about {estimate:,.0f} in all"
        sys.stderr.write(f"\r\x1b[K{n:,} execution(s){more}, {total}")
        sys.stderr.flush()

    o = SimOptions(
        bounds=Bounds(kw["operations"], kw["count"], kw["size"], kw["firings"]),
        schedulers=kw["schedulers"],
        after_timeout=kw["after_timeout"],
        # (a time budget alone is the bound: no default execution bound beside it)
        max_executions=(
            (None if "time_budget" in given else default_max_executions(scenario))
            if m is None
            else (m or None)
        ),
        time_budget=kw["time_budget"],
        preemptions=kw["preemptions"],
        dpor=kw["dpor"],
        random=kw["random_runs"],
        pct=kw["pct"],
        depth=kw["depth"],
        seed=seed,
        schedule=schedule,
        graph=kw["graph"],
        jobs=kw["jobs"] or default_jobs(),
        nonsmp=not no_nonsmp,
        events=kw["events"],
        prove=kw["prove"],
        shrink=kw["shrink"],
        progress=progress if tty and schedule is None else None,
    )
    try:
        text, data = simulate(scenario, o)
    except (ScenarioError, BadArg) as e:
        click.echo(f"smp-emu: {_clip_text(str(e))}", err=True)
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except SmpError as e:
        click.echo(f"smp-emu: {_clip_text(str(e))}", err=True)
        sys.exit(EXIT_USAGE if schedule is not None else EXIT_FAILED)
    finally:
        if o.progress is not None:
            sys.stderr.write("\r\x1b[K")
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        sys.stdout.write(text)
    if data.get("interrupted"):
        sys.stdout.flush()
        click.echo("smp-emu: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if not proved(data) or broken(data):
        sys.exit(EXIT_FAILED)


def _queue_explore(
    scenario, schedule, as_json, max_messages, max_changes, samples, seed, no_prune, no_nonsmp
) -> None:
    tty = sys.stderr.isatty()

    def progress(i, total, sched):
        if tty:
            what = (
                "the nonsmp run"
                if sched == "nonsmp"
                else f"schedule {i + 1}{'' if total is None else '/' + str(total)}: {sched}"
            )
            sys.stderr.write(f"\r\x1b[K{what}")
            sys.stderr.flush()

    try:
        r = explore(
            scenario,
            schedule=schedule,
            max_messages=max_messages,
            max_changes=max_changes,
            samples=samples,
            seed=seed,
            prune=not no_prune,
            nonsmp=not no_nonsmp and schedule is None,
            progress=progress,
        )
    except ScenarioError as e:
        click.echo(f"smp-emu: {_clip_text(str(e))}", err=True)
        sys.exit(EXIT_USAGE)
    except BadArg as e:
        click.echo(f"smp-emu: {_clip_text(str(e))}", err=True)
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except SmpError as e:
        click.echo(f"smp-emu: {_clip_text(str(e))}", err=True)
        sys.exit(EXIT_FAILED)
    finally:
        if tty:
            sys.stderr.write("\r\x1b[K")
    d = r.to_json()
    if as_json:
        sys.stdout.write(json.dumps(d, indent=2) + "\n")
    else:
        sys.stdout.write(format_text(d))
    if r.interrupted:
        sys.exit(EXIT_INTERRUPTED)


explore_command = _make_command()
