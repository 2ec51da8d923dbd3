"""``smp-emu stress``: random faults on top of a workload, the run's
dispatcher journal replayed at the end (``smp.app.replay``) and every
finding reported as an invariant violation.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile

import click

from smp.app.cli_execute import _execute, _shield
from smp.app.cli_options import NumberRange, _load, _sample_interval_option, _Seed, _writable
from smp.app.cli_output import _expect_notes, _summary_line
from smp.app.compare import check_invariants
from smp.app.exitcodes import EXIT_FAILED, EXIT_INTERRUPTED
from smp.app.expect import expect_broken
from smp.app.fault_report import FAULT_LATE_S
from smp.app.replay import NotAJournal
from smp.app.replay import replay as do_replay
from smp.app.scenario import NONSMP_RULE, example_names
from smp.app.scenario_checks import fault_past_end
from smp.app.workloads import SetupTimeout, fault_notes
from smp.core.errors import SmpError

__all__ = ["stress"]


@click.command(
    epilog="\b\nExample:\n  smp-emu stress --duration 10 --schedulers 4 --faults 50 --json > stress.json"
)
@click.argument("scenario", required=False)
@click.option(
    "--duration",
    type=NumberRange(0.1, 3600),
    default=3.0,
    show_default=True,
    help="seconds the workload runs while faults are injected",
)
@click.option(
    "--schedulers",
    type=click.IntRange(1, 64),
    default=None,
    help="how many schedulers smp mode runs instead of the scenario's (nonsmp always runs 1)",
)
@click.option(
    "--mode",
    type=click.Choice(["smp", "nonsmp"]),
    default=None,
    help="run in this mode instead of the scenario's",
)
@click.option(
    "--seed", type=_Seed(), default=None, help="seed of the random faults (a 64-bit integer)"
)
@click.option(
    "--faults",
    type=click.IntRange(0, 10000),
    default=12,
    show_default=True,
    help="how many random faults",
)
@click.option(
    "--journal",
    "journal_path",
    type=click.Path(dir_okay=False, writable=True),
    help="record the dispatcher's queue and decisions here, and keep them (smp; default: "
    "a temporary file, kept and named only when an invariant fails, the run fails or it is "
    "interrupted)",
)
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON on stdout")
@_sample_interval_option
def stress(
    scenario, duration, schedulers, mode, seed, faults, journal_path, as_json, sample_interval
):
    """Random faults on top of a workload; exit 1 naming messages that break an invariant.

    In smp mode the dispatcher journals its queue as it runs and the journal
    is replayed at the end (as smp-emu replay does): every decision is taken
    again, and timestamps, per-tracee order and state resets are checked in
    queue order."""

    sc = _load(scenario or "stress" if scenario or _has_example("stress") else None)
    if (mode or sc["mode"]) == "nonsmp" and schedulers not in (None, 1):
        click.echo(f"smp-emu: note: --schedulers {schedulers}: {NONSMP_RULE}", err=True)
    for i, f in enumerate(sc["faults"]):
        # (the scenario's own faults, checked against its duration: --duration replaces it)
        past = fault_past_end(f, duration, "--duration")
        if past is not None:
            raise click.UsageError(f"faults[{i}].{past[0]}: {past[1]}")
    sc["duration"] = {"seconds": duration, "operations": None}
    sc["timeout"] = max(sc["timeout"], duration * 10 + 30)
    run_mode = mode or sc["mode"]
    if run_mode != "smp" and journal_path:
        raise click.UsageError("--journal records the dispatcher's queue: it needs smp mode")
    if journal_path:
        _writable(journal_path, "--journal")
    tmpdir = None
    if run_mode == "smp" and not journal_path:
        tmpdir = tempfile.mkdtemp(prefix="smp-emu-journal-")
        journal_path = os.path.join(tmpdir, f"stress-{sc['name']}.journal")
    fault_seed = sc["seed"] if seed is None else seed
    rng = random.Random(fault_seed)
    extra = _random_faults(sc, rng, duration, faults)
    try:
        outcome = _execute(
            sc,
            mode,
            schedulers,
            None,
            f"{sc['name']} with {len(extra)} random faults",
            extra,
            journal=journal_path,
            sample_interval=sample_interval,
        )
    except KeyboardInterrupt:
        click.echo("smp-emu: interrupted before the run started", err=True)
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
        sys.exit(EXIT_INTERRUPTED)
    except SmpError as e:
        click.echo(f"smp-emu: {e}", err=True)
        if tmpdir is not None and isinstance(e, SetupTimeout):
            shutil.rmtree(tmpdir, ignore_errors=True)  # nothing ran: the journal is empty
        elif tmpdir is not None:
            click.echo(f"smp-emu: journal kept: {journal_path}", err=True)
        sys.exit(EXIT_FAILED)
    s = outcome.summary
    if s["interrupted"]:
        _shield()  # the run is over: a second Ctrl-C must not lose the summary
    violations = check_invariants(outcome, limit=50)
    rep = None
    if journal_path:
        try:
            # an interrupted run's statistics were taken before the dispatcher
            # stopped: its journal goes on, so only the decisions are compared
            rep = _replay_journal(
                journal_path, outcome.summary["stats"], totals=not s["interrupted"]
            )
            violations += rep["violations"]
            s["replay"] = rep
        except KeyboardInterrupt:  # Ctrl-C during the replay: the run stands
            _shield()
            s["interrupted"] = True
            s["replay"] = None
    s["invariants"] = {"ok": not violations, "violations": violations}
    # s["faults"] (from execute): every fault event, the scenario's and these, with its effect
    s["random_faults"] = [dict(f) for f in extra]
    s["fault_seed"] = fault_seed
    unmet = expect_broken(s.get("expect") or [])  # (a broken expect clause fails the run)
    failed = bool(violations) or bool(s["error"]) or s["interrupted"] or bool(unmet)
    keep = journal_path is not None and (tmpdir is None or failed)
    s["journal"] = journal_path if keep else None
    s["kind"] = "stress"
    if as_json:
        sys.stdout.write(json.dumps(s, indent=2, default=repr) + "\n")
    else:
        _print_stress_text(s, extra, rep, violations, duration, unmet)
    sys.stdout.flush()
    if not as_json:
        click.echo(_summary_line(s, "stress"), err=True)
    for line in fault_notes(s, every=not as_json):
        click.echo(f"smp-emu: {line}", err=True)
    broken = _expect_notes(s)
    if keep and failed:
        click.echo(
            f"smp-emu: journal kept: {journal_path} (smp-emu replay {journal_path})", err=True
        )
    elif tmpdir is not None:
        shutil.rmtree(tmpdir, ignore_errors=True)
    if s["error"]:
        click.echo(f"smp-emu: {s['error']}", err=True)
    if s["interrupted"]:
        click.echo("smp-emu: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if s["error"] or violations or broken:
        sys.exit(EXIT_FAILED)


def _print_stress_text(
    s: dict, extra: list, rep, violations: list, duration, unmet: list = ()
) -> None:
    """smp-emu stress's report on stdout (without --json); ``unmet``: the
    scenario's expect clauses that broke (each also on stderr)."""
    st = s["stats"]
    sys.stdout.write(
        f"stress, scenario {s['scenario']} ({s['mode']}, {s['schedulers']} scheduler(s), "
        f"{len(extra)} faults, {s['elapsed_s']:.2f} s): made {st['made']:,}, "
        f"delivered {st['delivered']:,}, dropped {st['dropped']:,}, queued "
        f"{st.get('queued', 0):,}, suppressed {st.get('suppressed', 0):,}\n"
    )
    if rep is not None:
        sys.stdout.write(
            f"replayed {rep['runs']} runs from the journal: "
            f"{rep['divergence_count']} divergences, "
            f"{rep['race_window']} decided before a concurrent change\n"
        )
    late = [f for f in s.get("faults") or [] if f.get("late")]
    if late:
        sys.stdout.write(
            f"{len(late)} of {len(s['faults'])} fault events were late (carried out more than "
            f"{FAULT_LATE_S:g} s after their time, or not by the end of the workload): they "
            "did not come while the workload ran\n"
        )
    for v in violations:
        sys.stdout.write(f"VIOLATION: {v}\n")
    if not violations:
        sys.stdout.write("all invariants hold\n")
    for line in unmet:
        sys.stdout.write(f"EXPECT BROKEN: {line}\n")
    d = s["duration"]
    if s["interrupted"]:
        sys.stdout.write(f"interrupted after {s['elapsed_s']:.2f} s of --duration {duration:g}\n")
    elif d["within_10pct"] is not None:
        sys.stdout.write(
            f"ran {s['elapsed_s']:.2f} s for --duration {duration:g}"
            + (
                ": within 10 %\n"
                if d["within_10pct"]
                else f" (+{d['over_pct']:.0f} %): " + "; ".join(d["why"]) + "\n"
            )
        )


def _replay_journal(path: str, stats: dict, totals: bool = True) -> dict:
    """Replay a stress run's journal; its findings as invariant violations
    (with ``totals``, also where its totals differ from the run's ``stats``)."""

    try:
        r = do_replay(path)
    except NotAJournal as e:
        return {"runs": 0, "divergence_count": 0, "race_window": 0, "violations": [f"journal: {e}"]}
    out = [f"journal: {v}" for v in r.violations]
    for d in r.divergences:
        out.append(
            f"journal: seq {d['seq']}: {d['type']} x{d['n']} queued at seq "
            f"{d['queued_seq']} was {d['recorded']}, replay says {d['replayed']}: "
            + "; ".join(d["messages"])
        )
    if r.divergence_count > len(r.divergences):
        out.append(f"journal: ({r.divergence_count - len(r.divergences)} more divergences)")
    if r.violation_count > len(r.violations):
        out.append(f"journal: ({r.violation_count - len(r.violations)} more violations)")
    if r.truncated:
        out.append(f"journal: truncated: {r.truncated}")
    for key in ("made_by_type", "delivered_by_type", "dropped_by_reason", "queued"):
        if totals and r.totals[key] != stats.get(key, {} if key != "queued" else 0):
            out.append(f"journal: replayed {key} {r.totals[key]} != the run's {stats.get(key)}")
    return {
        "runs": r.runs,
        "divergence_count": r.divergence_count,
        "race_window": r.race_window,
        "inferred": r.inferred,
        "violations": out,
    }


def _has_example(name: str) -> bool:

    return name in example_names()


def _random_faults(sc: dict, rng, duration: float, n: int) -> list:
    collectors = [t["name"] for t in sc["tracers"] if t["kind"] == "collector"]
    groups = [g["name"] for g in sc["groups"]]
    actions = []
    if collectors:
        actions.append("kill_tracer")
    if sc["seq_trace"]:
        actions.append("replace_seq_tracer")
    if sc["system_monitor"]:
        actions.append("replace_monitor")
    if sc["system_profile"]:
        actions.append("replace_profiler")
    actions += ["kill_processes", "set_sensitive"]
    out = []
    for _ in range(n):
        a = rng.choice(actions)
        f = {
            "action": a,
            "target": None,
            "at": round(rng.uniform(0, duration * 0.9), 3),
            "every": 0.0,
            "times": 1,
            "count": 1,
            "reason": "kill",
            "value": rng.random() < 0.7,
            "replace": True,
            # an earlier random fault may have killed the whole group (linked processes
            # die together): listed when it finds no live process, not a violation
            "may_fail": a in ("kill_processes", "set_sensitive"),
        }
        if a == "kill_tracer":
            f["target"] = rng.choice(collectors)
        elif a in ("kill_processes", "set_sensitive"):
            f["target"] = rng.choice(groups)
            f["count"] = rng.randint(1, 3)
        out.append(f)
    return out
