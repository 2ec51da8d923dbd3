"""``smp-emu``: run, compare, read, report and stress scenarios from the shell,
and replay a dispatcher journal (``smp-emu replay``, ``dispatcher.replay``).

Runs in the user's process.  Data goes to stdout (the trace, JSON); progress
and tables go to stderr, and only when stderr is a terminal.  Exit codes:
0 success, 1 a failed run or a violated invariant, 2 a usage error (click's
own, and bad scenario files), 130 interrupted (Ctrl-C stops the run cleanly:
the Emulator context manager stops every OS process, and what was measured
is still printed).
"""
from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import click

from .dbgfmt import format_dbg
from .errors import BadArg, DecodeError, ScenarioError, SmpError
from .terms import Atom, ImproperList, Pid, Port, Ref, format_term

__all__ = ["main", "cli", "term_to_json"]

EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130


# ---------------------------------------------------------------- output helpers
def term_to_json(t: Any):
    """A JSON value for an Erlang term: atoms as strings, tuples as {"tuple": [...]}."""
    if type(t) is Atom:
        return t.name
    if type(t) in (Pid, Port, Ref):
        return repr(t)
    if type(t) is tuple:
        return {"tuple": [term_to_json(x) for x in t]}
    if type(t) is list:
        return [term_to_json(x) for x in t]
    if type(t) is ImproperList:
        return {"improper": [term_to_json(x) for x in t.elements], "tail": term_to_json(t.tail)}
    if type(t) is bytes:
        return {"binary": t.hex()}
    if t is None or type(t) in (int, float, str, bool):
        return t
    return repr(t)


class _TraceWriter:
    def __init__(self, fmt: str, stream, with_tracer: bool):
        self.fmt, self.stream, self.with_tracer = fmt, stream, with_tracer
        self.lines = 0

    def __call__(self, tracer: str, term) -> None:
        if self.stream is None:
            return
        if self.fmt == "json":
            line = json.dumps({"kind": "trace", "tracer": tracer, "term": term_to_json(term),
                               "text": format_term(term)}) + "\n"
        elif self.fmt == "terms":
            line = format_term(term) + ".\n"
        else:
            # dbg's handler prints nothing for what it does not know (monitor
            # and profile messages): show those as the terms they are
            line = format_dbg(term) or format_term(term) + "\n"
        self.stream.write(line)
        self.stream.flush()
        self.lines += 1


def _stderr_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _console():
    from rich.console import Console
    return Console(stderr=True)


def _print_summary_table(s: dict) -> None:
    from rich.table import Table
    con = _console()
    st = s["stats"]
    title = f"{s['scenario']}: {s['mode']}, {s['schedulers']} scheduler(s)" + (
        " (interrupted)" if s["interrupted"] else "")
    t = Table(title=title)
    t.add_column("type")
    t.add_column("made", justify="right")
    t.add_column("delivered", justify="right")
    t.add_column("dropped", justify="right")
    dropped: dict = {}
    for reason, by_type in st["dropped_by_reason"].items():
        for ty, n in by_type.items():
            dropped.setdefault(ty, []).append(f"{n} {reason}")
    for ty in sorted(set(st["made_by_type"]) | set(st["delivered_by_type"])):
        t.add_row(ty, str(st["made_by_type"].get(ty, 0)), str(st["delivered_by_type"].get(ty, 0)),
                  ", ".join(dropped.get(ty, [])) or "0")
    t.add_row("all", str(st["made"]), str(st["delivered"]), str(st["dropped"]), style="bold")
    con.print(t)
    lat = s["latency_ns"]
    con.print(f"queued {st.get('queued', 0)}, suppressed {st.get('suppressed', 0)}, fake schedule "
              f"pairs {st.get('fake_schedule_pairs', 0)}; {s['elapsed_s']:.3f} s, "
              f"{s['throughput']['made_per_s']:.0f} made/s"
              + (f"; latency p50 {lat['p50'] / 1e3:.0f} us, p90 {lat['p90'] / 1e3:.0f} us, "
                 f"p99 {lat['p99'] / 1e3:.0f} us" if lat["count"] else ""))
    ps = Table(title="per scheduler")
    for col in ("scheduler", "made", "messages_sent", "processes_exited", "suppressed"):
        ps.add_column(col, justify="right")
    for row in s["per_scheduler"]:
        ps.add_row(*(str(row[c]) for c in ("scheduler", "made", "messages_sent",
                                            "processes_exited", "suppressed")))
    con.print(ps)


def _load(scenario):
    from .scenario import load_scenario
    try:
        return load_scenario(scenario)
    except ScenarioError as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE)


class _Interrupt:
    """Turn SIGTERM into KeyboardInterrupt; ignore a second Ctrl-C while cleaning up."""

    def __enter__(self):
        self._old_term = signal.getsignal(signal.SIGTERM)
        try:
            signal.signal(signal.SIGTERM, self._raise)
        except ValueError:   # not the main thread (CliRunner in a thread)
            self._old_term = None
        return self

    @staticmethod
    def _raise(signum, frame):
        raise KeyboardInterrupt

    def __exit__(self, *exc):
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)


def _shield() -> None:
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except ValueError:
        pass


def _execute(sc, mode, schedulers, writer, progress_label=None, extra_faults=None, journal=None,
             emulator_options=None):
    from .workloads import execute
    tty = _stderr_tty()
    on_progress = None
    status = None
    if tty:
        status = _console().status(f"running {progress_label or sc['name']} ...")
        status.start()

        def on_progress(p):
            status.update(f"running {progress_label or sc['name']}: {p['elapsed']:.1f} s, "
                          f"{p['received']} trace messages")
    try:
        with _Interrupt():
            try:
                return execute(sc, mode=mode, schedulers=schedulers, on_trace=writer,
                               on_progress=on_progress, extra_faults=extra_faults,
                               journal=journal, emulator_options=emulator_options)
            except KeyboardInterrupt:   # before the run started: nothing measured
                _shield()
                raise
    finally:
        if status is not None:
            status.stop()


# ---------------------------------------------------------------- commands
@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="smp-trace-emu")
def cli():
    """Emulate the Erlang VM's SMP trace subsystem on scenario files."""


@cli.command()
@click.argument("scenario", required=False)
@click.option("--mode", type=click.Choice(["smp", "nonsmp"]), help="override the scenario's mode")
@click.option("--schedulers", type=click.IntRange(1, 64), help="override the scheduler count (smp)")
@click.option("--format", "fmt", type=click.Choice(["dbg", "json", "terms"]), default="dbg",
              show_default=True, help="trace output: dbg text, JSON lines, or Erlang terms")
@click.option("--out", type=click.Path(dir_okay=False, writable=True),
              help="write the trace here instead of stdout")
@click.option("--json", "as_json", is_flag=True,
              help="print a machine-readable summary on stdout (the trace goes to --out, if given)")
@click.option("--summary/--no-summary", default=None,
              help="show the summary table on stderr (default: when stderr is a terminal)")
@click.option("--check", is_flag=True, help="check the invariants; exit 1 when one fails")
@click.option("--journal", "journal_path", type=click.Path(dir_okay=False, writable=True),
              help="record the dispatcher's queue and decisions here, for smp-emu replay (smp)")
def run(scenario, mode, schedulers, fmt, out, as_json, summary, check, journal_path):
    """Run SCENARIO (a TOML file or an example name; the built-in default if omitted)."""
    sc = _load(scenario)
    if mode == "nonsmp" and schedulers not in (None, 1):
        raise click.UsageError("nonsmp mode has exactly one scheduler")
    if journal_path and (mode or sc["mode"]) != "smp":
        raise click.UsageError("--journal records the dispatcher's queue: it needs smp mode")
    _run_and_report(sc, mode, schedulers, fmt, out, as_json, summary, check,
                    journal=journal_path)


def _run_and_report(sc, mode, schedulers, fmt, out, as_json, summary, check, journal=None,
                    emulator_options=None):
    stream = open(out, "w", encoding="utf-8") if out else (None if as_json else sys.stdout)
    writer = _TraceWriter(fmt, stream, True)
    try:
        outcome = _execute(sc, mode, schedulers, writer, journal=journal,
                           emulator_options=emulator_options)
    except KeyboardInterrupt:
        click.echo("smp-emu: interrupted before the run started", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except SmpError as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_FAILED)
    finally:
        if out and stream is not None:
            stream.close()
    _shield() if outcome.summary["interrupted"] else None
    s = outcome.summary
    from .compare import check_invariants
    violations = check_invariants(outcome)
    s["invariants"] = {"ok": not violations, "violations": violations}
    if fmt == "json" and not as_json and stream is sys.stdout:
        sys.stdout.write(json.dumps({"kind": "summary", **s}, default=repr) + "\n")
    if as_json:
        sys.stdout.write(json.dumps(s, indent=2, default=repr) + "\n")
    sys.stdout.flush()
    if summary or (summary is None and _stderr_tty()):
        _print_summary_table(s)
    if s["error"]:
        click.echo(f"smp-emu: {s['error']}", err=True)
        sys.exit(EXIT_FAILED)
    if check and violations:
        for v in violations:
            click.echo(f"smp-emu: invariant violated: {v}", err=True)
        sys.exit(EXIT_FAILED)
    if s["interrupted"]:
        click.echo("smp-emu: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)


@cli.command()
@click.argument("scenario", required=False)
@click.option("--bind", required=True, metavar="tcp://ADDR:PORT",
              help="where the controller listens; the dispatcher takes PORT+1..PORT+5")
@click.option("--schedulers", type=click.IntRange(1, 64), required=True,
              help="how many schedulers must join (smp-emu scheduler --connect ...)")
@click.option("--keys", type=click.Path(file_okay=False, exists=True),
              help="server.key_secret and authorized/*.key (CURVE; needed off loopback)")
@click.option("--no-curve", is_flag=True, help="run unauthenticated even off loopback")
@click.option("--advertise", metavar="HOST", help="address schedulers reach this host on")
@click.option("--wait", type=click.FloatRange(1, 3600), default=120, show_default=True,
              help="seconds to wait for the schedulers to join")
@click.option("--format", "fmt", type=click.Choice(["dbg", "json", "terms"]), default="dbg",
              show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, writable=True))
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON on stdout")
@click.option("--summary/--no-summary", default=None)
@click.option("--check", is_flag=True, help="check the invariants; exit 1 when one fails")
def dispatcher(scenario, bind, schedulers, keys, no_curve, advertise, wait, fmt, out, as_json,
               summary, check):
    """Run SCENARIO (smp) with the dispatcher here and schedulers that join
    from other hosts or process groups (``smp-emu scheduler --connect``)."""
    sc = _load(scenario)
    opts = {"bind": bind, "remote_schedulers": schedulers, "keys": keys,
            "curve": False if no_curve else None, "advertise": advertise,
            "start_timeout": wait}
    try:
        _run_and_report(sc, "smp", schedulers, fmt, out, as_json, summary, check,
                        emulator_options=opts)
    except (BadArg, SmpError) as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE if isinstance(e, BadArg) else EXIT_FAILED)


@cli.command()
@click.option("--connect", required=True, metavar="tcp://ADDR:PORT",
              help="the controller's address (smp-emu dispatcher --bind)")
@click.option("--count", type=click.IntRange(1, 64), default=1, show_default=True,
              help="schedulers to start on this host")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address this host's scheduler inboxes listen on")
@click.option("--keys", type=click.Path(file_okay=False, exists=True),
              help="NAME.key_secret of these schedulers and the controller's server.key")
@click.option("--name", default="scheduler", show_default=True, help="key pair name in --keys")
def scheduler(connect, count, host, keys, name):
    """Start schedulers on this host that join a controller (``smp-emu dispatcher``)."""
    from .cluster import run_schedulers
    try:
        failed = run_schedulers(connect, count, host=host, keys=keys, name=name)
    except (BadArg, SmpError) as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if failed else 0)


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--name", default="server", show_default=True,
              help="server for the controller's host, or a scheduler host's name")
def keygen(directory, name):
    """Make a CURVE key pair: DIRECTORY/NAME.key (public) and NAME.key_secret.

    The controller's host needs server.key_secret and an authorized/
    directory with the public key of every scheduler host allowed in; each
    scheduler host needs its own NAME.key_secret and the server.key."""
    from .security import keygen as _keygen
    try:
        public, secret = _keygen(directory, name)
    except SmpError as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE)
    click.echo(public)
    click.echo(secret)


@cli.command()
@click.argument("scenario", required=False)
@click.option("--schedulers", type=click.IntRange(1, 64), help="schedulers for the smp run")
@click.option("--json", "as_json", is_flag=True, help="print the comparison as JSON on stdout")
@click.option("--first", type=click.IntRange(1, 100), default=3, show_default=True,
              help="how many first differing messages to show per tracer")
def compare(scenario, schedulers, as_json, first):
    """Run the same seeded SCENARIO in nonsmp and smp mode and show what differs."""
    from .compare import compare_runs
    sc = _load(scenario)
    try:
        a = _execute(sc, "nonsmp", 1, None, f"{sc['name']} (nonsmp)")
        if a.summary["interrupted"]:
            raise KeyboardInterrupt
        b = _execute(sc, "smp", schedulers, None, f"{sc['name']} (smp)")
    except KeyboardInterrupt:
        click.echo("smp-emu: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except SmpError as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_FAILED)
    c = compare_runs(a, b, first=first)
    c["kind"] = "compare"
    if as_json:
        sys.stdout.write(json.dumps(c, indent=2, default=repr) + "\n")
    else:
        _print_compare(c)
    if any(r["error"] for r in c["runs"].values()):
        sys.exit(EXIT_FAILED)
    if b.summary["interrupted"]:
        sys.exit(EXIT_INTERRUPTED)


def _print_compare(c: dict) -> None:
    ma, mb = c["modes"]
    w = max(len(r["what"]) for r in c["rows"]) + 2
    out = sys.stdout
    out.write(f"{'':{w}}{ma:>14}{mb:>14}\n")
    for r in c["rows"]:
        mark = "  *" if r["differs"] else ""
        out.write(f"{r['what']:{w}}{_cell(r[ma]):>14}{_cell(r[mb]):>14}{mark}\n")
    reasons = [(r["what"], r["why"]) for r in c["rows"] if r.get("why")]
    if reasons:
        out.write("\nwhy they differ (the seed's #ifdef ERTS_SMP branches):\n")
        for what, text in reasons:
            out.write(f"  * {what}: {text}\n")
    if c.get("order_note"):
        out.write(f"\nordering: {c['order_note']}\n")
    for m in (ma, mb):
        v = c["invariants"][m]
        out.write(f"\ninvariants ({m}): " + ("all hold (counts add up, per-tracee order, "
                                               "timestamps increase)" if not v else
                                               f"{len(v)} violated") + "\n")
        for x in v:
            out.write(f"  {x}\n")
    for t in c["tracers"]:
        out.write(f"\ntracer {t['tracer']}: {ma} {t[ma]} messages, {mb} {t[mb]} messages\n")
        for d in t["first_differences"]:
            out.write(f"  first difference for {d['tracee']} at its message {d['index']}:\n"
                      f"    {ma}: {d[ma] or '(none)'}\n    {mb}: {d[mb] or '(none)'}\n")


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if v < 100 else f"{v:.0f}"
    return str(v)


@cli.command()
@click.argument("source")
@click.option("--wrap", "wrap_suffix", help="read a wrap log: SOURCE is the name, this the suffix")
@click.option("--wrap-count", type=click.IntRange(1, 10000), default=8, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["dbg", "json", "terms"]), default="dbg",
              show_default=True)
@click.option("--timeout", type=float, default=None, help="seconds to wait on an ip port")
def read(source, wrap_suffix, wrap_count, fmt, timeout):
    """Print a trace file, a wrap log or an ip trace port (HOST:PORT) as dbg does
    (messages dbg does not format, such as monitor and profile messages, are
    printed as terms)."""
    from .reader import read_trace
    src: Any = source
    if wrap_suffix:
        src = (source, "wrap", wrap_suffix, 0, wrap_count)
    elif not os.path.exists(source) and ":" not in source:
        click.echo(f"smp-emu: {source}: no such file", err=True)
        sys.exit(EXIT_FAILED)
    writer = _TraceWriter(fmt, sys.stdout, False)
    try:
        for term in read_trace(src, timeout=timeout):
            writer("", term)
    except (DecodeError, OSError, ValueError) as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_FAILED)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)


@cli.command()
@click.argument("result", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), default="report.html",
              show_default=True)
def report(result, output):
    """Write a self-contained HTML report from a saved run or compare JSON
    (``run --json`` / ``compare --json``): throughput, queue depth and drops
    over time, the latency histogram, the scheduler timeline (when the
    scenario profiles schedulers, as the ``profile`` example does) and the
    totals; a compare draws both modes on the same axes."""
    from .report import render_report
    try:
        with open(result, encoding="utf-8") as f:
            data = json.load(f)
        html = render_report(data)
    except (OSError, ValueError, KeyError, TypeError) as e:
        click.echo(f"smp-emu: {result}: not a run or compare result: {e}", err=True)
        sys.exit(EXIT_FAILED)
    with open(output, "w", encoding="utf-8") as f:
        f.write(html)
    click.echo(output)


@cli.command()
@click.argument("scenario", required=False)
@click.option("--duration", type=click.FloatRange(0.1, 3600), default=3.0, show_default=True,
              help="seconds the workload runs while faults are injected")
@click.option("--schedulers", type=click.IntRange(1, 64), default=None)
@click.option("--mode", type=click.Choice(["smp", "nonsmp"]), default=None)
@click.option("--seed", type=int, default=None, help="seed of the random faults")
@click.option("--faults", type=click.IntRange(0, 10000), default=12, show_default=True,
              help="how many random faults")
@click.option("--journal", "journal_path", type=click.Path(dir_okay=False, writable=True),
              help="record the dispatcher's queue and decisions here (smp; default: a temporary "
                   "file, kept and named only when an invariant fails)")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON on stdout")
def stress(scenario, duration, schedulers, mode, seed, faults, journal_path, as_json):
    """Random faults on top of a workload; exit 1 naming messages that break an invariant.

    In smp mode the dispatcher journals its queue as it runs and the journal
    is replayed at the end (``smp-emu replay``): every decision is taken
    again, and timestamps, per-tracee order and state resets are checked in
    queue order."""
    import random
    import shutil
    import tempfile
    from .compare import check_invariants
    sc = _load(scenario or "stress" if scenario or _has_example("stress") else None)
    sc["duration"] = {"seconds": duration, "operations": None}
    sc["timeout"] = max(sc["timeout"], duration * 10 + 30)
    run_mode = mode or sc["mode"]
    if run_mode != "smp" and journal_path:
        raise click.UsageError("--journal records the dispatcher's queue: it needs smp mode")
    tmpdir = None
    if run_mode == "smp" and not journal_path:
        tmpdir = tempfile.mkdtemp(prefix="smp-emu-journal-")
        journal_path = os.path.join(tmpdir, f"stress-{sc['name']}.journal")
    rng = random.Random(sc["seed"] if seed is None else seed)
    extra = _random_faults(sc, rng, duration, faults)
    try:
        outcome = _execute(sc, mode, schedulers, None, f"stress {sc['name']}", extra,
                           journal=journal_path)
    except KeyboardInterrupt:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
        sys.exit(EXIT_INTERRUPTED)
    except SmpError as e:
        click.echo(f"smp-emu: {e}", err=True)
        if tmpdir is not None:
            click.echo(f"smp-emu: journal kept: {journal_path}", err=True)
        sys.exit(EXIT_FAILED)
    s = outcome.summary
    violations = check_invariants(outcome, limit=50)
    rep = None
    if journal_path:
        rep = _replay_journal(journal_path, outcome.summary["stats"])
        violations += rep["violations"]
        s["replay"] = rep
    s["invariants"] = {"ok": not violations, "violations": violations}
    s["faults"] = [{k: v for k, v in f.items()} for f in extra]
    keep = journal_path is not None and (tmpdir is None or bool(violations) or bool(s["error"]))
    s["journal"] = journal_path if keep else None
    if as_json:
        sys.stdout.write(json.dumps(s, indent=2, default=repr) + "\n")
    else:
        st = s["stats"]
        sys.stdout.write(f"stress {s['scenario']} ({s['mode']}, {s['schedulers']} scheduler(s), "
                         f"{len(extra)} faults, {s['elapsed_s']:.2f} s): made {st['made']}, "
                         f"delivered {st['delivered']}, dropped {st['dropped']}, queued "
                         f"{st.get('queued', 0)}, suppressed {st.get('suppressed', 0)}\n")
        if rep is not None:
            sys.stdout.write(f"replayed {rep['runs']} runs from the journal: "
                             f"{rep['divergence_count']} divergences, "
                             f"{rep['race_window']} decided before a concurrent change\n")
        for v in violations:
            sys.stdout.write(f"VIOLATION: {v}\n")
        if not violations:
            sys.stdout.write("all invariants hold\n")
    if keep and (violations or s["error"]):
        click.echo(f"smp-emu: journal kept: {journal_path} (smp-emu replay {journal_path})",
                   err=True)
    elif tmpdir is not None:
        shutil.rmtree(tmpdir, ignore_errors=True)
    if s["error"]:
        click.echo(f"smp-emu: {s['error']}", err=True)
        sys.exit(EXIT_FAILED)
    if violations:
        sys.exit(EXIT_FAILED)
    if s["interrupted"]:
        sys.exit(EXIT_INTERRUPTED)


def _replay_journal(path: str, stats: dict) -> dict:
    """Replay a stress run's journal; its findings as invariant violations."""
    from dispatcher.replay import NotAJournal, replay
    try:
        r = replay(path)
    except NotAJournal as e:
        return {"runs": 0, "divergence_count": 0, "race_window": 0,
                "violations": [f"journal: {e}"]}
    out = [f"journal: {v}" for v in r.violations]
    for d in r.divergences:
        out.append(f"journal: seq {d['seq']}: {d['type']} x{d['n']} queued at seq "
                   f"{d['queued_seq']} was {d['recorded']}, replay says {d['replayed']}: "
                   + "; ".join(d["messages"]))
    if r.divergence_count > len(r.divergences):
        out.append(f"journal: ({r.divergence_count - len(r.divergences)} more divergences)")
    if r.violation_count > len(r.violations):
        out.append(f"journal: ({r.violation_count - len(r.violations)} more violations)")
    if r.truncated:
        out.append(f"journal: truncated: {r.truncated}")
    for key in ("made_by_type", "delivered_by_type", "dropped_by_reason", "queued"):
        if r.totals[key] != stats.get(key, {} if key != "queued" else 0):
            out.append(f"journal: replayed {key} {r.totals[key]} != the run's {stats.get(key)}")
    return {"runs": r.runs, "divergence_count": r.divergence_count,
            "race_window": r.race_window, "inferred": r.inferred, "violations": out}


@cli.command()
@click.argument("journal", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print the replay report as JSON on stdout")
@click.option("--around", type=click.IntRange(0), default=None,
              help="list the queue around this seq, in dbg's format, with each decision")
@click.option("--limit", type=click.IntRange(1, 100000), default=20, show_default=True,
              help="how many divergences to report and runs to list")
def replay(journal, as_json, around, limit):
    """Re-run the deliver/drop decisions recorded in JOURNAL (written by
    ``smp-emu stress`` or ``Emulator(journal=...)``); exit 1 on a divergence
    or a broken invariant, 2 when JOURNAL is not a journal."""
    from dispatcher.replay import NotAJournal, format_listing, queue_listing
    from dispatcher.replay import replay as do_replay
    if not os.path.exists(journal):
        click.echo(f"smp-emu: {journal}: no such file", err=True)
        sys.exit(EXIT_USAGE)
    try:
        r = do_replay(journal, max_divergences=limit)
        listing = None
        if around is not None or (not as_json and r.divergences):
            listing = queue_listing(journal, r, around, limit)
    except NotAJournal as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE)
    if as_json:
        out = r.to_json()
        if listing is not None:
            out["listing"] = listing
        sys.stdout.write(json.dumps(out, indent=2, default=repr) + "\n")
    else:
        sys.stdout.write(_replay_text(r))
        if listing:
            at = around if around is not None else r.divergences[0]["seq"]
            sys.stdout.write(f"\nqueue around seq {at}:\n" + format_listing(listing, at))
    sys.stdout.flush()
    if _stderr_tty():
        _print_replay_table(r)
    sys.exit(0 if r.ok else EXIT_FAILED)


def _replay_text(r) -> str:
    t = r.totals
    lines = [f"journal {r.path}: {r.schedulers} scheduler(s), "
             + ", ".join(f"{n} {k}" for k, n in r.records.items()) + " records",
             f"replayed {r.runs} runs: made {t['made']}, delivered {t['delivered']}, dropped "
             f"{t['dropped']}, queued {t['queued']}"]
    for reason, by_type in t["dropped_by_reason"].items():
        lines.append(f"  dropped {reason}: " + ", ".join(f"{ty} {n}" for ty, n in by_type.items()))
    if r.race_window or r.inferred or r.unjournaled:
        lines.append(f"{r.race_window} decided before a concurrent change was recorded, "
                     f"{r.inferred} learned from the journal (port closes, registrations), "
                     f"{r.unjournaled} unjournaled trace_delivered replies")
    if r.truncated:
        lines.append(f"journal truncated: {r.truncated}")
    lines.append(f"divergences: {r.divergence_count}")
    for d in r.divergences:
        lines.append(f"  seq {d['seq']}: {d['type']} x{d['n']} (queued at seq {d['queued_seq']}, "
                     f"from {d['from']}): recorded {d['recorded']}, replayed {d['replayed']}")
        lines += [f"      {m}" for m in d["messages"]]
    lines.append(f"invariant violations: {r.violation_count}")
    lines += [f"  {v}" for v in r.violations]
    lines.append("replay matches the run" if r.ok else "REPLAY FAILED")
    return "\n".join(lines) + "\n"


def _print_replay_table(r) -> None:
    from rich.table import Table
    t = Table(title=f"replay of {os.path.basename(r.path)}")
    for col in ("type", "made", "delivered", "dropped"):
        t.add_column(col, justify="left" if col == "type" else "right")
    tot = r.totals
    dropped: dict = {}
    for reason, by_type in tot["dropped_by_reason"].items():
        for ty, n in by_type.items():
            dropped.setdefault(ty, []).append(f"{n} {reason}")
    for ty in sorted(tot["made_by_type"]):
        t.add_row(ty, str(tot["made_by_type"][ty]), str(tot["delivered_by_type"].get(ty, 0)),
                  ", ".join(dropped.get(ty, [])) or "0")
    t.add_row("all", str(tot["made"]), str(tot["delivered"]), str(tot["dropped"]), style="bold")
    con = _console()
    con.print(t)
    con.print(f"divergences {r.divergence_count}, invariant violations {r.violation_count}: "
              + ("[green]replay matches the run[/]" if r.ok else "[red]REPLAY FAILED[/]"))


def _has_example(name: str) -> bool:
    from .scenario import example_names
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
        f = {"action": a, "target": None, "at": round(rng.uniform(0, duration * 0.9), 3),
             "every": 0.0, "times": 1, "count": 1, "reason": "kill", "value": rng.random() < 0.7,
             "replace": True}
        if a == "kill_tracer":
            f["target"] = rng.choice(collectors)
        elif a in ("kill_processes", "set_sensitive"):
            f["target"] = rng.choice(groups)
            f["count"] = rng.randint(1, 3)
        out.append(f)
    return out


def main(argv=None) -> None:
    try:
        cli.main(args=argv, prog_name="smp-emu", standalone_mode=True)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
