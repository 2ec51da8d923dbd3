"""``smp-emu run`` (with ``--tp`` and ``--limit``, as dbg:tp and recon_trace
take them) and ``smp-emu compare`` (the same seeded work in nonsmp and smp
mode, and what differs).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile

import click

from smp.app.cli_execute import _execute, _run_and_report, _shield
from smp.app.cli_options import (
    _format_option,
    _load,
    _out_option,
    _sample_interval_option,
    _seed_option,
    _writable,
)
from smp.app.compare import compare_measured, compare_runs, journal_events, same_work
from smp.app.compare_causes import death_text, message_causes
from smp.app.exitcodes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from smp.app.limits import parse_limit
from smp.app.scenario import MAX_ATOM, NONSMP_RULE, match_spec_from
from smp.app.workloads import fault_notes
from smp.core.errors import BadArg, SmpError
from smp.core.matchspec import compile_match_spec

__all__ = ["run", "compare"]


@click.command(
    epilog="\b\nExample:\n  smp-emu run profile --json > run.json && smp-emu report run.json -o run.html\n  smp-emu run --tp 'wl_calls:check/1 x' --limit 100/1000"
)
@click.argument("scenario", required=False)
@click.option(
    "--mode",
    type=click.Choice(["smp", "nonsmp"]),
    help="run in this mode instead of the scenario's",
)
@click.option(
    "--schedulers",
    type=click.IntRange(1, 64),
    help="how many schedulers smp mode runs instead of the scenario's (nonsmp always runs 1)",
)
@_format_option
@_out_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="print a machine-readable summary on stdout (the trace goes to --out, if given)",
)
@click.option(
    "--summary/--no-summary",
    default=None,
    help="show the summary table on stderr (default: when stderr is a terminal)",
)
@click.option("--check", is_flag=True, help="check the invariants; exit 1 when one fails")
@click.option(
    "--journal",
    "journal_path",
    type=click.Path(dir_okay=False, writable=True),
    help="record the dispatcher's queue and decisions here, for smp-emu replay (smp)",
)
@_sample_interval_option
@click.option(
    "--tp",
    "tps",
    multiple=True,
    metavar="'MOD:FUN/ARITY [MS]'",
    help="set a global call pattern, as dbg:tp does (repeatable): FUN and ARITY "
    "may be _ or left out; MS is a match spec in Erlang text or dbg's x, c, cx "
    "(default: every call); processes still need the call flag",
)
@click.option(
    "--limit",
    "limit",
    metavar="N | N/MS",
    help="stop tracing after N trace messages, or when more than N come within "
    "MS milliseconds, as recon_trace does (replaces the scenario's "
    "max_messages and rate)",
)
@_seed_option
def run(
    scenario,
    mode,
    schedulers,
    fmt,
    out,
    as_json,
    summary,
    check,
    journal_path,
    sample_interval,
    tps,
    limit,
    seed,
):
    """Run SCENARIO (a TOML file or an example name; the built-in default if omitted)."""

    sc = _load(scenario)
    if seed is not None:
        sc["seed"] = seed
    _apply_tp_and_limit(sc, tps, limit)
    notes = list(sc.get("notes", []))  # (the file's, said as it was read)
    if (mode or sc["mode"]) == "nonsmp" and schedulers not in (None, 1):
        notes.append(f"--schedulers {schedulers}: {NONSMP_RULE}")
        click.echo(f"smp-emu: note: {notes[-1]}", err=True)
    if journal_path and (mode or sc["mode"]) != "smp":
        raise click.UsageError("--journal records the dispatcher's queue: it needs smp mode")
    _run_and_report(
        sc,
        mode,
        schedulers,
        fmt,
        out,
        as_json,
        summary,
        check,
        journal=journal_path,
        sample_interval=sample_interval,
        notes=notes,
    )


def _parse_tp(text: str) -> dict:
    """A --tp value, ``MOD:FUN/ARITY [MS]``, as a scenario's [[patterns]] entry
    with the global flag (``dbg:tp``).  A bad value is one line on stderr
    naming --tp, and exit 2."""

    shown = repr(text) if len(text) <= 60 else repr(text[:57]) + "..."

    def refuse(why: str):
        click.echo(f"smp-emu: --tp {shown}: {why}", err=True)
        sys.exit(EXIT_USAGE)

    m = _TP.match(text)
    if not m:
        refuse(
            "expected MOD:FUN/ARITY followed by an optional match spec, like 'wl_calls:check/1 x'"
        )
    mod, fun, arity = (x.strip("'") if x else "_" for x in m.group("m", "f", "a"))
    if mod == "_" and (fun, arity) != ("_", "_") or fun == "_" and arity != "_":
        refuse("with module _ the function and arity must be _ too, and with function _ the arity")
    for name in (mod, fun):
        if len(name) > MAX_ATOM:
            refuse(
                f"an atom of {len(name):,} characters: at most {MAX_ATOM} (Erlang's system_limit)"
            )
    if arity != "_" and (len(arity.lstrip("0")) > 3 or int(arity) > 255):
        refuse(f"arity {arity[:20]}: at most 255")
    ms_text = (m.group("ms") or "").strip()
    try:
        ms = match_spec_from(ms_text) if ms_text else True
        compile_match_spec(ms)
    except (ValueError, BadArg) as e:
        refuse(f"bad match spec: {e}")
    return {
        "mfa": [mod, fun, int(arity) if arity.isdigit() else "_"],
        "match_spec": ms,
        "flags": ["global"],
        "meta_tracer": None,
        "tp": text,  # (run notes a --tp pattern that matched no function)
    }


_TP = re.compile(
    r"\A\s*(?P<m>'[^']*'|[^\s:/']+)(?::(?P<f>'[^']*'|[^\s/']+)(?:/(?P<a>[0-9]+|_))?)?"
    r"(?:\s+(?P<ms>.*))?\s*\Z",
    re.S,
)


def _apply_tp_and_limit(sc: dict, tps, limit) -> None:
    """--tp patterns go after the scenario's; --limit replaces its caps."""

    for text in tps:
        sc["patterns"].append(_parse_tp(text))
    if tps and not any(
        "call" in f or "all" in f
        for f in [g["trace"] for g in sc["groups"]] + [t["flags"] for t in sc["trace"]]
    ):
        click.echo(
            "smp-emu: note: --tp: no process of this scenario is traced with the call "
            "flag, so the pattern traces nothing (dbg:p(..., c) is needed too)",
            err=True,
        )
    if limit is not None:
        try:
            sc["max_messages"], sc["rate"] = parse_limit(limit)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--limit") from None


@click.command(
    epilog="\b\nExample:\n  smp-emu compare churn --json > cmp.json && smp-emu report cmp.json -o cmp.html"
)
@click.argument("scenario", required=False)
@click.option(
    "--schedulers",
    type=click.IntRange(1, 64),
    help="how many schedulers the smp run has (default: the scenario's)",
)
@click.option(
    "--operations",
    type=click.IntRange(1, 10_000_000),
    default=None,
    help="loop iterations per workload process in both modes (default: the "
    "scenario's; a time-bounded scenario gets 100)",
)
@click.option("--json", "as_json", is_flag=True, help="print the comparison as JSON on stdout")
@click.option(
    "--first",
    type=click.IntRange(1, 100000),
    default=20,
    show_default=True,
    help="how many tracers and differing messages to list (--json: of each class)",
)
@click.option(
    "--journal",
    "journal_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="keep the smp run's dispatcher journal in this file (the commands "
    "that show each class of differing messages replay it)",
)
@_sample_interval_option
@_seed_option
def compare(scenario, schedulers, operations, as_json, first, journal_path, sample_interval, seed):
    """Run the same seeded SCENARIO in nonsmp and smp mode and show what differs.

    Both modes do the same work: a time-bounded scenario is converted to a
    number of operations, and the output says so.  Every differing counter
    comes with the seed's reason, and every message only one mode made is
    listed per tracer and tracee (smp's drops come from the dispatcher's
    journal).  Interrupted (Ctrl-C), it prints the counters of the runs it
    has, each marked UNFINISHED, without lining up the messages, and exits
    130."""

    sc = _load(scenario)
    if seed is not None:
        sc["seed"] = seed
    sc, work = same_work(sc, operations)
    if journal_path:
        _writable(journal_path, "--journal")
    tmpdir = tempfile.mkdtemp(prefix="smp-emu-compare-")
    journal = journal_path or os.path.join(tmpdir, "smp.journal")
    a = b = None
    try:
        try:
            a = _execute(
                sc,
                "nonsmp",
                1,
                None,
                f"{sc['name']} (nonsmp)",
                sample_interval=sample_interval,
                record_fates=True,
            )
            if not a.summary["interrupted"]:
                b = _execute(
                    sc,
                    "smp",
                    schedulers,
                    None,
                    f"{sc['name']} (smp)",
                    journal=journal,
                    sample_interval=sample_interval,
                    record_fates=True,
                )
        except KeyboardInterrupt:  # before a run started: the smp run's, if nonsmp's is done
            if a is None:
                click.echo("smp-emu: interrupted before the run started", err=True)
                sys.exit(EXIT_INTERRUPTED)
        except SmpError as e:
            click.echo(f"smp-emu: {e}", err=True)
            sys.exit(EXIT_FAILED)
        interrupted = b is None or b.summary["interrupted"]
        if interrupted:  # what was measured until then; a second Ctrl-C is ignored
            _shield()
            c = compare_measured(a, b, "smp")
        else:
            c = _compare_whole(a, b, sc, journal, journal_path, first)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    c["first"] = first
    c["workload"] = work
    c["seed"] = sc["seed"]
    # a run that did not finish (or was interrupted, or not run) compares
    # what it made: said first, and on stderr
    c["unfinished"] = _unfinished(c)
    if as_json:
        sys.stdout.write(json.dumps(c, indent=2, default=repr) + "\n")
    else:
        _print_compare(c)
    sys.stdout.flush()
    for m, r in c["runs"].items():
        for line in fault_notes(r, every=not as_json):
            click.echo(f"smp-emu: {m}: {line}", err=True)
    for m, error in c["unfinished"].items():
        click.echo(f"smp-emu: {m}: {error}", err=True)
    if interrupted:
        click.echo("smp-emu: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if c["unfinished"]:
        sys.exit(EXIT_FAILED)


def _compare_whole(a, b, sc, journal, journal_path, first) -> dict:
    """The compare of two runs that both ran to their end: the counters and
    the messages lined up by cause from both runs' records."""
    try:
        events = journal_events(journal)
        made = [e[:4] for e in events[0]]
        causes = message_causes(a, b, events, limit=first)
    except (OSError, ValueError):
        made = causes = None
    if causes is not None:
        causes["journal"] = journal_path
    return compare_runs(a, b, first=first, scenario=sc, smp_made=made, causes=causes)


def _unfinished(c: dict) -> dict:
    """``{mode: why}`` of each run that did not finish: its error (a
    timeout, a lost scheduler), an interrupt, or, not in ``runs``, an
    interrupt before it started."""
    out = {}
    for m in c["modes"]:
        r = c["runs"].get(m)
        if r is None:
            out[m] = "not run: interrupted before it started"
        elif r["error"]:
            out[m] = r["error"]
        elif r["interrupted"]:
            out[m] = f"interrupted after {r['elapsed_s']:.2f} s"
    return out


def _unfinished_text(c: dict) -> str:
    """The first lines of a compare whose runs did not all finish."""
    return "".join(
        f"UNFINISHED: the {m} run did not finish ({error}); its column is what it made until then\n"
        if m in c["runs"]
        else f"UNFINISHED: the {m} run did not run ({error.removeprefix('not run: ')}); "
        "its column is empty\n"
        for m, error in c.get("unfinished", {}).items()
    )


def _print_compare(c: dict) -> None:
    ma, mb = c["modes"]
    w = max(len(r["what"]) for r in c["rows"]) + 2
    out = sys.stdout
    out.write(_unfinished_text(c))
    if c.get("workload"):
        out.write(f"work: {c['workload']['note']}\n")
    if "seed" in c:
        out.write(f"seed: {c['seed']}\n")
    out.write("\n")
    out.write(f"{'':{w}}{ma:>14}{mb:>14}\n")
    for r in c["rows"]:
        mark = "  *" if r["differs"] else ""
        out.write(f"{r['what']:{w}}{_cell(r[ma]):>14}{_cell(r[mb]):>14}{mark}\n")
    reasons = [(r["what"], r["why"]) for r in c["rows"] if r.get("why")]
    if reasons:
        out.write(
            "\nwhy they differ (from the counters that differ, with the seed's "
            "#ifdef ERTS_SMP branches):\n"
        )
        for what, text in reasons:
            out.write(f"  * {what}: {text}\n")
    if c.get("order_note"):
        out.write(f"\nordering: {c['order_note']}\n")
    _print_invariants(c)
    if c.get("interrupted"):
        out.write(
            "\ninterrupted: the columns are what each run made until it stopped; the "
            "messages are not lined up (a run cut short differs from a whole one by where "
            "it stopped)\n"
        )
        return
    if c.get("causes") is not None:
        _print_causes(c["causes"], c.get("first", 20))
        return
    msgs = c.get("messages") or {}
    if msgs:
        out.write(f"\nmessages only one mode made: {msgs['note']}\n")
    for t in msgs.get("tracers", []):
        n = t["only_count"]
        out.write(
            f"\ntracer {t['tracer']}: {ma} made {t[ma]}, {mb} made {t[mb]}; only in "
            f"{ma} {n[ma]}, only in {mb} {n[mb]}\n"
        )
        if not t["only"]:
            out.write("  (none)\n")
        for d in t["only"]:
            out.write(
                f"  only {d['mode']} ({d['fate']}), {d['tracee']} #{d['index']}: "
                f"{d['message'] or '(none)'}\n      why: {d['why']}\n"
            )
        more = n[ma] + n[mb] - len(t["only"])
        if more > 0:
            out.write(f"  ({more} more not listed: --first N lists more)\n")


def _print_invariants(c: dict) -> None:
    """Each mode's invariants: all hold, or the violations; a mode that did
    not run (an interrupted compare) was not checked."""
    out = sys.stdout
    for m in c["modes"]:
        if m not in c["invariants"]:
            out.write(f"\ninvariants ({m}): not checked: the run did not run\n")
            continue
        v = c["invariants"][m]
        out.write(
            f"\ninvariants ({m}): "
            + (
                "all hold (counts add up, per-tracee order, timestamps increase)"
                if not v
                else f"{len(v)} violated"
            )
            + "\n"
        )
        for x in v:
            out.write(f"  {x}\n")


def _print_causes(causes: dict, first: int) -> None:
    """The differing messages by class: count, seed reason, an example in
    dbg's text and the command that shows it."""
    out = sys.stdout
    j = causes.get("journal")
    out.write(
        f"\nwhy the messages differ, from both runs' records (nonsmp's fate log, smp's "
        f"journal), lined up per tracer and tracee: {causes['total']:,} differ\n"
    )
    for k in causes["classes"]:
        ex = k["example"]
        out.write(
            f"\n  {k['class']}: {k['count']:,} ({k['title']})\n"
            f"    seed: {k['seed']}\n"
            f"    e.g. at {ex['tracer']} from {ex['tracee']}: {ex['message']} "
            f"({ex['fates']})\n"
        )
        if ex["queue_seq"] is not None:
            out.write(
                f"    see: smp-emu replay {j} --around {ex['queue_seq']}\n"
                if j
                else "    see: compare with --journal FILE keeps smp's journal; then "
                f"smp-emu replay FILE --around {ex['queue_seq']}\n"
            )
        if k.get("explore"):
            out.write(f"    every order of it, in the simulator: {k['explore']}\n")
        if k["class"] == "timing":
            for d in causes["timing_deaths"]:
                out.write(f"    {death_text(d)}\n")
    if not causes["classes"]:
        out.write("  (none: every message was made and met the same fate in both)\n")
    if causes.get("reordered"):
        out.write(
            f"  ({causes['reordered']:,} more were made and met the same fate in both, in "
            "another order among other senders' messages: not a difference)\n"
        )
    if causes.get("not_kept"):
        out.write(
            f"  ({causes['not_kept']:,} of nonsmp's messages past the first million not kept)\n"
        )
    out.write("\nper tracer, most differing first (messages made; differing):\n")
    ranked = sorted(causes["tracers"], key=lambda t: -t["differ"])  # stable: by name after
    for t in ranked[:first]:
        out.write(
            f"  {t['tracer']}: nonsmp {t['nonsmp']:,}, smp {t['smp']:,}; {t['differ']:,} differ\n"
        )
    if len(ranked) > first:
        out.write(f"  ({len(ranked) - first} more tracers: --first N lists more)\n")
    shown = causes["diffs"][:first]
    if shown:
        out.write(f"\nthe first {len(shown)} differing messages (--first N lists more):\n")
        for d in shown:
            out.write(
                f"  [{d['class']}] at {d['tracer']} from {d['tracee']}: {d['message']} "
                f"(nonsmp {d['nonsmp'] or 'none'}, smp {d['smp'] or 'none'})\n"
            )


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if v < 100 else f"{v:.0f}"
    return str(v)
