"""``smp-emu``: run, compare, read, report and stress scenarios from the shell,
and replay a dispatcher journal (``smp-emu replay``, ``smp.app.replay``).

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
import random
import re
import shutil
import signal
import sys
import tempfile
import warnings

import click
from rich.console import Console
from rich.table import Table

from smp.app.cluster import ports_taken, run_schedulers, tcp_address
from smp.app.compare import (
    check_expect,
    check_invariants,
    compare_runs,
    expect_broken,
    journal_messages,
    same_work,
)
from smp.app.exitcodes import EXIT_BROKEN_PIPE, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from smp.app.limits import parse_limit, trip_note
from smp.app.replay import BadRecord, NotAJournal, format_listing, queue_listing
from smp.app.replay import replay as do_replay
from smp.app.report import ResultFileError, load_result, render_report
from smp.app.scenario import (
    MAX_ATOM,
    NONSMP_RULE,
    example_names,
    load_scenario,
    match_spec_from,
)
from smp.app.schema import SCHEMA_KINDS, list_examples, render_schema
from smp.app.workloads import SetupTimeout, duration_note, execute, fault_notes
from smp.core.errors import BadArg, DecodeError, ScenarioError, SmpError
from smp.core.matchspec import compile_match_spec
from smp.core.pretty import NodeNumbers, clip_term, format_term
from smp.core.terms import Atom
from smp.ports.dbgfmt import format_dbg, json_record
from smp.ports.reader import merge_traces, read_trace, wrap_log_files
from smp.wire.curve import InsecureWarning, server_security
from smp.wire.curve import keygen as _keygen
from smp.wire.limits import DEFAULT as READ_LIMITS
from smp.wire.limits import Limits

__all__ = ["main", "cli"]


# ---------------------------------------------------------------- output helpers
class _TraceWriter:
    def __init__(
        self,
        fmt: str,
        stream,
        with_tracer: bool,
        nodes=None,
        latin1: bool = False,
        every: bool = True,
    ):
        self.fmt, self.stream, self.with_tracer = fmt, stream, with_tracer
        # every: in dbg text, a term dbg's handler prints nothing for is
        # printed as the term it is (run; read --all); else nothing, as dbg
        self.every = every
        self.lines = 0
        self.nodes = nodes
        # dbg's text is latin-1 (what a node writes on its latin-1 device)
        self.raw = getattr(stream, "buffer", None) if latin1 and fmt == "dbg" else None

    def __call__(self, tracer: str, term, source: str | None = None) -> None:
        """Write one term; ``source`` (smp-emu read of several files) marks
        it: a ``source`` key in JSON, ``SOURCE: `` before every line else."""
        if self.stream is None:
            return
        if self.fmt == "json":
            rec = {"kind": "trace", "tracer": tracer, "term": term, "text": format_term(term)}
            if source is not None:
                rec["source"] = source
            # json.dumps(rec) with the term's JSON written without recursion
            line = json_record(rec) + "\n"
        elif self.fmt == "terms":
            line = format_term(term) + ".\n"
        else:
            # dbg's handler prints nothing for what it does not know (monitor
            # and profile messages, {dbg, ok} receives, ...)
            line = format_dbg(term, self.nodes) or (format_term(term) + "\n" if self.every else "")
            if not line:
                return
        if source is not None and self.fmt != "json":
            parts = line.split("\n")
            tail = parts.pop()
            line = "".join(f"{source}: {x}\n" for x in parts) + (
                f"{source}: {tail}" if tail else ""
            )
        if self.raw is not None:
            self.raw.write(line.encode("latin-1", "backslashreplace"))
            self.raw.flush()
            self.lines += 1
            return
        self.stream.write(line)
        self.stream.flush()
        self.lines += 1


def _stderr_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _console():

    return Console(stderr=True)


def _print_summary_table(s: dict) -> None:

    con = _console()
    st = s["stats"]
    title = f"{s['scenario']}: {s['mode']}, {s['schedulers']} scheduler(s)" + (
        " (interrupted)" if s["interrupted"] else ""
    )
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
        t.add_row(
            ty,
            str(st["made_by_type"].get(ty, 0)),
            str(st["delivered_by_type"].get(ty, 0)),
            ", ".join(dropped.get(ty, [])) or "0",
        )
    t.add_row("all", str(st["made"]), str(st["delivered"]), str(st["dropped"]), style="bold")
    con.print(t)
    lat = s["latency_ns"]
    con.print(
        f"queued {st.get('queued', 0)}, suppressed {st.get('suppressed', 0)}, fake schedule "
        f"pairs {st.get('fake_schedule_pairs', 0)}; {s['elapsed_s']:.3f} s, "
        f"{s['throughput']['made_per_s']:.0f} made/s"
        + (
            f"; latency p50 {lat['p50'] / 1e3:.0f} us, p90 {lat['p90'] / 1e3:.0f} us, "
            f"p99 {lat['p99'] / 1e3:.0f} us"
            if lat["count"]
            else ""
        )
    )
    ps = Table(title="per scheduler")
    for col in ("scheduler", "made", "messages_sent", "processes_exited", "suppressed"):
        ps.add_column(col, justify="right")
    for row in s["per_scheduler"]:
        ps.add_row(
            *(
                str(row[c])
                for c in ("scheduler", "made", "messages_sent", "processes_exited", "suppressed")
            )
        )
    con.print(ps)


def _load(scenario):

    try:
        sc = load_scenario(scenario)
    except ScenarioError as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE)
    for note in sc.get("notes", []):
        click.echo(f"smp-emu: note: {note}", err=True)
    return sc


def _summary_line(s: dict, command: str) -> str:
    """The run in one line, for stderr: scenario, mode, seed, how long (or
    that it was interrupted, and when) and the trace messages' fate."""
    st = s["stats"]
    took = f"{s['elapsed_s']:.2f} s"
    return (
        f"smp-emu: {command} {s['scenario']} ({s['mode']}, {s['schedulers']} scheduler(s), "
        f"seed {s['seed']}) "
        + (f"interrupted after {took}" if s["interrupted"] else took)
        + f": made {st['made']:,}, delivered {st['delivered']:,}, dropped {st['dropped']:,}, "
        f"queued {st.get('queued', 0):,} trace messages"
    )


def _after_run_notes(s: dict, every: bool = True) -> None:
    """Say on stderr when a time-bounded run took over 10 % longer, and list
    the faults with their effect (with ``every`` false, as under --json whose
    summary holds them all: only those that did not take and may not fail, and
    those that did not fire)."""

    note = duration_note(s)
    if note:
        click.echo(f"smp-emu: {note}", err=True)
    for line in fault_notes(s, every):
        click.echo(f"smp-emu: {line}", err=True)


class _Interrupt:
    """Turn SIGTERM into KeyboardInterrupt; ignore a second Ctrl-C while cleaning up."""

    def __enter__(self):
        self._old_term = signal.getsignal(signal.SIGTERM)
        try:
            signal.signal(signal.SIGTERM, self._raise)
        except ValueError:  # not the main thread (CliRunner in a thread)
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


def progress_text(label: str, sc: dict, p: dict) -> str:
    """The live progress line: elapsed against the asked duration, and the
    trace messages made and delivered so far (the run's own counters)."""
    secs = sc["duration"]["seconds"]
    of = f" of {secs:g} s" if secs else ""
    return (
        f"running {label}: {p['elapsed']:.1f} s{of}, {p.get('made', 0):,} trace messages "
        f"made, {p.get('delivered', 0):,} delivered"
    )


def _execute(
    sc,
    mode,
    schedulers,
    writer,
    progress_label=None,
    extra_faults=None,
    journal=None,
    emulator_options=None,
    sample_interval=None,
):

    tty = _stderr_tty()
    on_progress = None
    status = None
    if tty:
        status = _console().status(f"running {progress_label or sc['name']} ...")
        status.start()

        def on_progress(p):
            status.update(progress_text(progress_label or sc["name"], sc, p))

    options = {} if sample_interval is None else {"sample_interval": sample_interval}
    try:
        with _Interrupt():
            try:
                return execute(
                    sc,
                    mode=mode,
                    schedulers=schedulers,
                    on_trace=writer,
                    on_progress=on_progress,
                    extra_faults=extra_faults,
                    journal=journal,
                    emulator_options=emulator_options,
                    check_expect=check_expect,
                    **options,
                )
            except KeyboardInterrupt:  # before the run started: nothing measured
                _shield()
                raise
    finally:
        if status is not None:
            status.stop()


# ---------------------------------------------------------------- commands
# options several commands share (one definition each)
_format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["dbg", "json", "terms"]),
    default="dbg",
    show_default=True,
    help="trace output: dbg text, JSON lines, or Erlang terms",
)
_out_option = click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True),
    help="write the trace here instead of stdout",
)

_seed_option = click.option(
    "--seed",
    type=click.IntRange(-(1 << 63), (1 << 63) - 1),
    default=None,
    help="the workload's random seed, instead of the scenario's seed (the summary records it)",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="smp-trace-emu")
def cli():
    """Emulate the Erlang VM's SMP trace subsystem on scenario files."""


@cli.command(
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
@click.option(
    "--sample-interval",
    type=click.FloatRange(0.01, 1.0),
    default=0.1,
    show_default=True,
    help="seconds between two samples of the counters (the time series a report draws)",
)
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
    if (mode or sc["mode"]) == "nonsmp" and schedulers not in (None, 1):
        click.echo(f"smp-emu: note: --schedulers {schedulers}: {NONSMP_RULE}", err=True)
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


def _limit_note(s: dict) -> None:

    note = trip_note(s.get("limit"))
    if note:
        click.echo(f"smp-emu: {note}", err=True)


def _open_out(path: str, option: str, mode: str = "w"):
    """Open an output file, or say in one line which option named a file that
    cannot be written and why (exit 2)."""
    try:
        return open(path, mode, encoding="utf-8")
    except OSError as e:
        click.echo(f"smp-emu: {option} {path}: cannot write it: {_why(e)}", err=True)
        sys.exit(EXIT_USAGE)


def _writable(path: str, option: str) -> None:
    """Refuse, before a run, an output file a process will open later (the
    dispatcher's journal): one line naming the option, exit 2."""
    existed = os.path.lexists(path)
    _open_out(path, option, "a").close()
    if not existed:
        os.unlink(path)


def _run_and_report(
    sc,
    mode,
    schedulers,
    fmt,
    out,
    as_json,
    summary,
    check,
    journal=None,
    emulator_options=None,
    sample_interval=None,
):
    if journal:
        _writable(journal, "--journal")
    stream = _open_out(out, "--out") if out else (None if as_json else sys.stdout)
    writer = _TraceWriter(fmt, stream, True)
    try:
        outcome = _execute(
            sc,
            mode,
            schedulers,
            writer,
            journal=journal,
            emulator_options=emulator_options,
            sample_interval=sample_interval,
        )
    except KeyboardInterrupt:
        click.echo("smp-emu: interrupted before the run started", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except SmpError as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE if isinstance(e, BadArg) else EXIT_FAILED)
    finally:
        if out and stream is not None:
            stream.close()
    _shield() if outcome.summary["interrupted"] else None
    s = outcome.summary

    violations = check_invariants(outcome)
    s["invariants"] = {"ok": not violations, "violations": violations}
    if fmt == "json" and not as_json and stream is sys.stdout:
        sys.stdout.write(json.dumps({"kind": "summary", **s}, default=repr) + "\n")
    if as_json:
        sys.stdout.write(json.dumps(s, indent=2, default=repr) + "\n")
    sys.stdout.flush()
    if summary or (summary is None and _stderr_tty()):
        _print_summary_table(s)
    elif summary is None and not as_json and not (fmt == "json" and stream is sys.stdout):
        # off a terminal, and on Ctrl-C: one line (stdout's JSON holds the summary)
        click.echo(_summary_line(s, "run"), err=True)
    _after_run_notes(s, every=not as_json)
    _limit_note(s)
    broken = _expect_notes(s)
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
    if broken:
        sys.exit(EXIT_FAILED)


def _expect_notes(s: dict) -> list[str]:
    """The scenario's [[expect]] clauses on stderr: a line per broken one
    (where, clause, evidence), or that all held; returns the broken ones."""
    results = s.get("expect") or []
    broken = expect_broken(results)
    for line in broken:
        click.echo(f"smp-emu: expect broken: {line}", err=True)
    if results and not broken:
        click.echo(f"smp-emu: expect: all {len(results)} clause(s) held", err=True)
    return broken


def _warn_insecure(endpoint: str) -> None:
    """--insecure: say so once on stderr (the Python warning would repeat it)."""

    click.echo(
        f"smp-emu: warning: {endpoint}: tcp without CURVE (--insecure): any process "
        "that can reach these ports can send the emulator frames",
        err=True,
    )
    warnings.simplefilter("ignore", InsecureWarning)


@cli.command(
    epilog="\b\nExample:\n  smp-emu dispatcher default --bind tcp://10.0.0.1:7000 --schedulers 4 --keys keys"
)
@click.argument("scenario", required=False)
@click.option(
    "--bind",
    required=True,
    metavar="tcp://ADDR:PORT",
    help="where the controller listens; the dispatcher takes PORT+1..PORT+5",
)
@click.option(
    "--schedulers",
    type=click.IntRange(1, 64),
    required=True,
    help="how many schedulers must join (smp-emu scheduler --connect ...)",
)
@click.option(
    "--keys",
    type=click.Path(file_okay=False, exists=True),
    help="server.key_secret and authorized/*.key (CURVE, on for every tcp endpoint)",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="run tcp without CURVE: anyone who can reach the ports can send frames",
)
@click.option("--advertise", metavar="HOST", help="address schedulers reach this host on")
@click.option(
    "--wait",
    type=click.FloatRange(1, 3600),
    default=120,
    show_default=True,
    help="seconds to wait for the schedulers to join",
)
@_format_option
@_out_option
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON on stdout")
@click.option(
    "--summary/--no-summary",
    default=None,
    help="show the summary table on stderr (default: when stderr is a terminal)",
)
@click.option("--check", is_flag=True, help="check the invariants; exit 1 when one fails")
def dispatcher(
    scenario, bind, schedulers, keys, insecure, advertise, wait, fmt, out, as_json, summary, check
):
    """Run SCENARIO (smp) with the dispatcher here and schedulers that join
    from other hosts or process groups (started with smp-emu scheduler --connect)."""
    sc = _load(scenario)
    opts = {
        "bind": bind,
        "remote_schedulers": schedulers,
        "keys": keys,
        "insecure": insecure,
        "advertise": advertise,
        "start_timeout": wait,
    }
    if keys is not None:  # unreadable keys are a usage error, said before the run
        try:
            server_security(keys)
        except SmpError as e:
            click.echo(f"smp-emu: {e}", err=True)
            sys.exit(EXIT_USAGE)
    try:  # a port in use is said now, not after --wait seconds
        taken = ports_taken(bind)
    except BadArg as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE)
    if taken:
        click.echo(
            f"smp-emu: --bind {bind}: port {', '.join(map(str, taken))} already in use "
            "(the controller takes PORT, the dispatcher PORT+1..PORT+5)",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    if insecure:
        _warn_insecure(bind)
    try:
        _run_and_report(
            sc, "smp", schedulers, fmt, out, as_json, summary, check, emulator_options=opts
        )
    except (BadArg, SmpError) as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE if isinstance(e, BadArg) else EXIT_FAILED)


@cli.command(
    epilog="\b\nExample:\n  smp-emu scheduler --connect tcp://10.0.0.1:7000 --count 4 --host 10.0.0.2 \\\n      --keys host2keys --name host2"
)
@click.option(
    "--connect",
    required=True,
    metavar="tcp://ADDR:PORT",
    help="the controller's address (smp-emu dispatcher --bind)",
)
@click.option(
    "--count",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="schedulers to start on this host",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="address this host's scheduler inboxes listen on",
)
@click.option(
    "--keys",
    type=click.Path(file_okay=False, exists=True),
    help="NAME.key_secret of these schedulers and the controller's server.key",
)
@click.option("--name", default="scheduler", show_default=True, help="key pair name in --keys")
@click.option(
    "--insecure",
    is_flag=True,
    help="join a controller that runs tcp without CURVE (smp-emu dispatcher --insecure)",
)
def scheduler(connect, count, host, keys, name, insecure):
    """Start schedulers on this host that join a controller (smp-emu dispatcher)."""

    try:
        tcp_address(connect, "--connect")
    except BadArg as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE)
    if insecure:
        _warn_insecure(connect)
    try:
        failed = run_schedulers(connect, count, host=host, keys=keys, name=name, insecure=insecure)
    except (BadArg, SmpError) as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if failed else 0)


@cli.command(
    epilog="\b\nExample:\n  smp-emu keygen keys && smp-emu keygen keys/authorized --name host2"
)
@click.argument("directory", type=click.Path(file_okay=False))
@click.option(
    "--name",
    default="server",
    show_default=True,
    help="server for the controller's host, or a scheduler host's name",
)
def keygen(directory, name):
    """Make a CURVE key pair: DIRECTORY/NAME.key (public) and NAME.key_secret.

    The controller's host needs server.key_secret and an authorized/
    directory with the public key of every scheduler host allowed in; each
    scheduler host needs its own NAME.key_secret and the server.key."""

    try:
        public, secret = _keygen(directory, name)
    except SmpError as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE)
    click.echo(public)
    click.echo(secret)


@cli.command(
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
    help="how many messages only one mode made to list per tracer",
)
@click.option(
    "--sample-interval",
    type=click.FloatRange(0.01, 1.0),
    default=0.1,
    show_default=True,
    help="seconds between two samples of the counters",
)
@_seed_option
def compare(scenario, schedulers, operations, as_json, first, sample_interval, seed):
    """Run the same seeded SCENARIO in nonsmp and smp mode and show what differs.

    Both modes do the same work: a time-bounded scenario is converted to a
    number of operations, and the output says so.  Every differing counter
    comes with the seed's reason, and every message only one mode made is
    listed per tracer and tracee (smp's drops come from the dispatcher's
    journal)."""

    sc = _load(scenario)
    if seed is not None:
        sc["seed"] = seed
    sc, work = same_work(sc, operations)
    tmpdir = tempfile.mkdtemp(prefix="smp-emu-compare-")
    journal = os.path.join(tmpdir, "smp.journal")
    try:
        try:
            a = _execute(
                sc, "nonsmp", 1, None, f"{sc['name']} (nonsmp)", sample_interval=sample_interval
            )
            if a.summary["interrupted"]:
                raise KeyboardInterrupt
            b = _execute(
                sc,
                "smp",
                schedulers,
                None,
                f"{sc['name']} (smp)",
                journal=journal,
                sample_interval=sample_interval,
            )
        except KeyboardInterrupt:
            click.echo("smp-emu: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except SmpError as e:
            click.echo(f"smp-emu: {e}", err=True)
            sys.exit(EXIT_FAILED)
        try:
            made = journal_messages(journal)
        except (OSError, ValueError):
            made = None
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    c = compare_runs(a, b, first=first, scenario=sc, smp_made=made)
    c["workload"] = work
    c["seed"] = sc["seed"]
    if as_json:
        sys.stdout.write(json.dumps(c, indent=2, default=repr) + "\n")
    else:
        _print_compare(c)
    for m, r in c["runs"].items():
        for line in fault_notes(r, every=not as_json):
            click.echo(f"smp-emu: {m}: {line}", err=True)
    if any(r["error"] for r in c["runs"].values()):
        sys.exit(EXIT_FAILED)
    if b.summary["interrupted"]:
        sys.exit(EXIT_INTERRUPTED)


def _print_compare(c: dict) -> None:
    ma, mb = c["modes"]
    w = max(len(r["what"]) for r in c["rows"]) + 2
    out = sys.stdout
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
    for m in (ma, mb):
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


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if v < 100 else f"{v:.0f}"
    return str(v)


_SIZE = re.compile(r"\A([0-9]{1,15})([KMG]?)\Z", re.IGNORECASE)


def _read_size(ctx, param, value):
    """A size option of smp-emu read: N, or N followed by K, M or G (KiB,
    MiB, GiB); one line and exit 2 for anything else."""
    m = _SIZE.match(str(value).strip())
    n = int(m.group(1)) << (10 * "_KMG".index(m.group(2).upper() or "_")) if m else 0
    if not m or n < 1:
        click.echo(
            f"smp-emu: --{param.name.replace('_', '-')} {_clip_text(str(value), 40)!r}: "
            f"expected a size >= 1: N, or N followed by K, M or G",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    return n


@cli.command(
    epilog="\b\nExample:\n  smp-emu read everything.trace\n  smp-emu read calls --wrap .trc --wrap-count 4\n  smp-emu read a@host.trc b@host.trc 'c@host-*.trc'\n  smp-emu read --follow live.trace"
)
@click.argument("sources", metavar="SOURCE...", nargs=-1, required=True)
@click.option(
    "--wrap",
    "wrap_suffix",
    help="read a wrap log: SOURCE is the file name before the counter, this the "
    "suffix after it (NAME0SUFFIX, NAME1SUFFIX, ...: --wrap .trc reads NAME0.trc, "
    "NAME1.trc, ...); a SOURCE written "
    "NAME*SUFFIX (quoted) is a wrap log too, as ttb names them",
)
@click.option(
    "--wrap-count",
    type=click.IntRange(1, 10000),
    default=8,
    show_default=True,
    help="how many files the wrap log was written with (the wrap count of the "
    "trace port: wrap_count in a scenario)",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["dbg", "json", "terms"]),
    default="dbg",
    show_default=True,
    help="output: dbg text, JSON lines, or Erlang terms",
)
@click.option(
    "--timeout",
    type=float,
    default=None,
    help="seconds to wait for data on an ip port (default: until it closes)",
)
@click.option(
    "--node-number",
    "node_numbers",
    multiple=True,
    metavar="NODE=N",
    help="print ids of NODE as <N.X.Y> (what the reading node would print: the "
    "index of NODE's atom there); other nodes are numbered 1, 2, ...",
)
@click.option(
    "--follow",
    is_flag=True,
    help="keep reading the file as it grows, as dbg:trace_client(follow_file, F) "
    "does, until Ctrl-C (one trace file)",
)
@click.option(
    "--mark/--no-mark",
    default=None,
    help="start every line with the SOURCE it came from and ': ' (JSON: a "
    '"source" key); default: when reading more than one SOURCE',
)
@click.option(
    "--max-depth",
    type=click.IntRange(1, 10_000_000),
    default=READ_LIMITS.max_depth,
    show_default=True,
    help="refuse a term nested deeper than this (a frame of a stranger's trace)",
)
@click.option(
    "--max-frame",
    metavar="BYTES",
    callback=_read_size,
    default=str(READ_LIMITS.max_frame),
    show_default=True,
    help="refuse a trace frame larger than this (BYTES may end in K, M or G)",
)
@click.option(
    "--max-inflate",
    metavar="BYTES",
    callback=_read_size,
    default=str(READ_LIMITS.max_inflate),
    show_default=True,
    help="refuse a compressed term that inflates to more than this",
)
@click.option(
    "--max-print",
    metavar="CHARS",
    callback=_read_size,
    default=str(READ_LIMITS.max_print),
    show_default=True,
    help="print a term longer than about this many characters cut short with "
    "'...' where the rest would be, as ~P does",
)
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="dbg text: print the messages dbg's handler prints nothing for (monitor "
    "and profile messages, a receive of {dbg,ok}, ...) as the terms they are",
)
def read(
    sources,
    wrap_suffix,
    wrap_count,
    fmt,
    timeout,
    node_numbers,
    follow,
    mark,
    max_depth,
    max_frame,
    max_inflate,
    max_print,
    every,
):
    """Print trace files, wrap logs or ip trace ports (HOST:PORT) as dbg does,
    in latin-1 as dbg:trace_client prints it on a node's latin-1 device: what
    dbg's handler prints nothing for (monitor and profile messages, ...) is
    not printed, unless --all.  Several SOURCEs (the files of several nodes) are merged by
    timestamp as ttb:format merges them, each line marked with its SOURCE;
    messages without a timestamp keep their file's order.  Exit 2, with one
    line on stderr naming the SOURCE and the byte offset, when a SOURCE is
    missing, unreadable or not a trace, or holds a frame over one of the
    --max-* limits."""

    known = {}
    for item in node_numbers:
        name, sep, num = item.rpartition("=")
        try:
            if not sep or not name or not num.isdigit() or len(num) > 10:
                raise ValueError("expected NODE=N, N a number below 2**32")
            if int(num) >= 1 << 32:
                raise ValueError("expected NODE=N, N a number below 2**32")
            known[Atom(name)] = int(num)
        except ValueError as e:
            click.echo(f"smp-emu: --node-number {_clip_text(item)}: {e}", err=True)
            sys.exit(EXIT_USAGE)
    limits = Limits(max_depth, max_frame, max_inflate, max_print)
    srcs = [_read_source(x, wrap_suffix, wrap_count) for x in sources]
    for src in srcs:
        if isinstance(src, str) and os.path.isdir(src):
            click.echo(f"smp-emu: {src}: is a directory, not a trace file", err=True)
            sys.exit(EXIT_USAGE)
        if not follow and isinstance(src, str) and os.path.isfile(src):
            if os.path.getsize(src) == 0:
                click.echo(f"smp-emu: {src}: empty file: no trace frames in it", err=True)
                sys.exit(EXIT_USAGE)
    if follow and (len(srcs) != 1 or isinstance(srcs[0], tuple) or not os.path.isfile(srcs[0])):
        raise click.UsageError(
            "--follow reads one trace file (not a wrap log, an ip port or "
            "several files), as dbg:trace_client(follow_file, F) does"
        )
    if mark is None:
        mark = len(srcs) > 1
    writer = _TraceWriter(fmt, sys.stdout, False, NodeNumbers(known), latin1=True, every=every)
    try:
        if len(srcs) == 1:
            label = sources[0] if mark else None
            for term in read_trace(srcs[0], timeout=timeout, follow=follow, limits=limits):
                writer("", clip_term(term, max_print), label)
        else:
            for i, term in merge_traces(srcs, timeout=timeout, limits=limits):
                writer("", clip_term(term, max_print), sources[i] if mark else None)
    except BrokenPipeError:
        _stdout_gone()
    except (DecodeError, OSError, ValueError) as e:
        click.echo(f"smp-emu: {_clip_text(str(e))}", err=True)
        sys.exit(EXIT_USAGE)
    except MemoryError:
        click.echo(
            "smp-emu: out of memory reading the trace (lower --max-frame, --max-inflate or "
            "--max-print)",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)


def _clip_text(text: str, most: int = 300) -> str:
    """One line of at most ``most`` characters of ``text`` (a message that
    quotes what it got)."""
    text = " ".join(text.split())
    return text if len(text) <= most else text[: most - 3] + "..."


def _read_source(source: str, wrap_suffix, wrap_count: int):
    """What ``read_trace`` takes for one SOURCE of smp-emu read; exits 2 when
    it names no file, wrap log or HOST:PORT."""
    name = None
    if wrap_suffix and "*" not in source:
        name, suffix = source, wrap_suffix
    elif not os.path.exists(source) and source.count("*") == 1:
        name, _, suffix = source.partition("*")
    if name is not None:
        try:
            if not wrap_log_files(name, suffix, wrap_count):
                click.echo(
                    f"smp-emu: {name}N{suffix}: no such wrap log (no file "
                    f"{name}0{suffix}, {name}1{suffix}, ...)",
                    err=True,
                )
                sys.exit(EXIT_USAGE)
        except DecodeError as e:
            click.echo(
                f"smp-emu: {e}; the wrap log's file count is --wrap-count "
                f"({wrap_count} now; in Python the count in (path, 'wrap', suffix, "
                f"size, count))",
                err=True,
            )
            sys.exit(EXIT_USAGE)
        return (name, "wrap", suffix, 0, wrap_count)
    if not os.path.exists(source) and ":" not in source:
        click.echo(f"smp-emu: {source}: no such file", err=True)
        sys.exit(EXIT_USAGE)
    return source


@cli.command(
    epilog="\b\nExample:\n  smp-emu compare profile --json > cmp.json && smp-emu report cmp.json -o cmp.html"
)
@click.argument("result", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default="report.html",
    show_default=True,
    help="where to write the HTML page",
)
def report(result, output):
    """Write a self-contained HTML report from a saved result: the JSON of
    run --json, stress --json, compare --json or explore --json.  It shows throughput, queue
    depth and drops over time, the latency histogram, the scheduler timeline
    (when the scenario profiles schedulers, as the profile example does) and
    the totals; a compare draws both modes on the same axes and lists the
    messages only one mode made."""

    try:
        data = load_result(result)
    except ResultFileError as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE)
    try:
        html = render_report(data)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        what = _result_fault(e)
        click.echo(f"smp-emu: {result}: not a run, stress or compare result ({what})", err=True)
        sys.exit(EXIT_USAGE)
    with _open_out(output, "-o/--output") as f:
        f.write(html)
    click.echo(output)


def _result_fault(e: Exception) -> str:
    """What a result file lacks, in words (no Python exception names)."""
    if isinstance(e, KeyError):
        return f"no key {_clip_text(str(e), 60)}"
    if isinstance(e, ValueError):
        return _clip_text(str(e), 200)
    if isinstance(e, IndexError):
        return "a list shorter than a result's"
    return "a value of the wrong kind where a result has " + (
        "an object" if isinstance(e, AttributeError) else "another"
    )


@cli.command(
    epilog="\b\nExample:\n  smp-emu stress --duration 10 --schedulers 4 --faults 50 --json > stress.json"
)
@click.argument("scenario", required=False)
@click.option(
    "--duration",
    type=click.FloatRange(0.1, 3600),
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
@click.option("--seed", type=int, default=None, help="seed of the random faults")
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
    help="record the dispatcher's queue and decisions here (smp; default: a temporary "
    "file, kept and named only when an invariant fails)",
)
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON on stdout")
@click.option(
    "--sample-interval",
    type=click.FloatRange(0.01, 1.0),
    default=0.1,
    show_default=True,
    help="seconds between two samples of the counters",
)
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
    rng = random.Random(sc["seed"] if seed is None else seed)
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
    keep = journal_path is not None and (
        tmpdir is None or bool(violations) or bool(s["error"]) or s["interrupted"]
    )
    s["journal"] = journal_path if keep else None
    s["kind"] = "stress"
    if as_json:
        sys.stdout.write(json.dumps(s, indent=2, default=repr) + "\n")
    else:
        _print_stress_text(s, extra, rep, violations, duration)
    sys.stdout.flush()
    if not as_json:
        click.echo(_summary_line(s, "stress"), err=True)
    for line in fault_notes(s, every=not as_json):
        click.echo(f"smp-emu: {line}", err=True)
    broken = _expect_notes(s)
    if keep and (violations or s["error"] or s["interrupted"]):
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


def _print_stress_text(s: dict, extra: list, rep, violations: list, duration) -> None:
    """smp-emu stress's report on stdout (without --json)."""
    st = s["stats"]
    sys.stdout.write(
        f"stress, scenario {s['scenario']} ({s['mode']}, {s['schedulers']} scheduler(s), "
        f"{len(extra)} faults, {s['elapsed_s']:.2f} s): made {st['made']}, "
        f"delivered {st['delivered']}, dropped {st['dropped']}, queued "
        f"{st.get('queued', 0)}, suppressed {st.get('suppressed', 0)}\n"
    )
    if rep is not None:
        sys.stdout.write(
            f"replayed {rep['runs']} runs from the journal: "
            f"{rep['divergence_count']} divergences, "
            f"{rep['race_window']} decided before a concurrent change\n"
        )
    for v in violations:
        sys.stdout.write(f"VIOLATION: {v}\n")
    if not violations:
        sys.stdout.write("all invariants hold\n")
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


@cli.command(epilog="\b\nExample:\n  smp-emu replay stress.journal --around 1200")
@click.argument("journal", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="print the replay report as JSON on stdout")
@click.option(
    "--around",
    type=click.IntRange(0),
    default=None,
    help="list the queue around this seq, in dbg's format, with each decision",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 100000),
    default=20,
    show_default=True,
    help="how many divergences to report and runs to list",
)
def replay(journal, as_json, around, limit):
    """Re-run the deliver/drop decisions recorded in JOURNAL (written by
    smp-emu stress, smp-emu run --journal or Emulator(journal=...)); exit 1 on
    a divergence or a broken invariant, and on a record that cannot be read
    or is malformed (one line on stderr naming its byte offset: the journal
    is not replayed); 2 when JOURNAL is missing, a directory or not a
    journal at all (one line)."""
    if not os.path.lexists(journal):
        click.echo(f"smp-emu: {journal}: no such file", err=True)
        sys.exit(EXIT_USAGE)
    try:
        r = do_replay(journal, max_divergences=limit)
        listing = None
        if around is not None or (not as_json and r.divergences):
            listing = queue_listing(journal, r, around, limit)
    except BadRecord as e:  # a journal, but not one that can be replayed
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_FAILED)
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
    lines = [
        f"journal {r.path}: {r.schedulers} scheduler(s), "
        + ", ".join(f"{n} {k}" for k, n in r.records.items())
        + " records",
        f"replayed {r.runs} runs: made {t['made']}, delivered {t['delivered']}, dropped "
        f"{t['dropped']}, queued {t['queued']}",
    ]
    for reason, by_type in t["dropped_by_reason"].items():
        lines.append(f"  dropped {reason}: " + ", ".join(f"{ty} {n}" for ty, n in by_type.items()))
    if r.race_window or r.inferred or r.unjournaled:
        lines.append(
            f"{r.race_window} decided before a concurrent change was recorded, "
            f"{r.inferred} learned from the journal (port closes, registrations), "
            f"{r.unjournaled} unjournaled trace_delivered replies"
        )
    if r.truncated:
        lines.append(f"journal truncated: {r.truncated}")
    lines.append(f"divergences: {r.divergence_count}")
    for d in r.divergences:
        lines.append(
            f"  seq {d['seq']}: {d['type']} x{d['n']} (queued at seq {d['queued_seq']}, "
            f"from {d['from']}): recorded {d['recorded']}, replayed {d['replayed']}"
        )
        lines += [f"      {m}" for m in d["messages"]]
    lines.append(f"invariant violations: {r.violation_count}")
    lines += [f"  {v}" for v in r.violations]
    lines.append("replay matches the run" if r.ok else "REPLAY FAILED")
    return "\n".join(lines) + "\n"


def _print_replay_table(r) -> None:

    t = Table(title=f"replay of {os.path.basename(r.path)}")
    for col in ("type", "made", "delivered", "dropped"):
        t.add_column(col, justify="left" if col == "type" else "right")
    tot = r.totals
    dropped: dict = {}
    for reason, by_type in tot["dropped_by_reason"].items():
        for ty, n in by_type.items():
            dropped.setdefault(ty, []).append(f"{n} {reason}")
    for ty in sorted(tot["made_by_type"]):
        t.add_row(
            ty,
            str(tot["made_by_type"][ty]),
            str(tot["delivered_by_type"].get(ty, 0)),
            ", ".join(dropped.get(ty, [])) or "0",
        )
    t.add_row("all", str(tot["made"]), str(tot["delivered"]), str(tot["dropped"]), style="bold")
    con = _console()
    con.print(t)
    con.print(
        f"divergences {r.divergence_count}, invariant violations {r.violation_count}: "
        + ("[green]replay matches the run[/]" if r.ok else "[red]REPLAY FAILED[/]")
    )


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


# smp-emu explore: every interleaving of the queue and the state (smp/app/explore/)
from smp.app.explore import explore_command as _explore_command  # noqa: E402

cli.add_command(_explore_command)


@cli.command(epilog="\b\nExample:\n  smp-emu schema run\n  smp-emu schema explore")
@click.argument("kind", type=click.Choice(SCHEMA_KINDS), default="run")
def schema(kind):
    """Print every key of a scenario file: for run, stress and compare
    (``run``) or for explore (``explore``), with its type, default, allowed
    values and meaning.  The same table checks the files and makes the
    documentation's reference pages."""
    click.echo(render_schema(kind), nl=False)


@cli.command(epilog="\b\nExample:\n  smp-emu examples\n  smp-emu run churn")
def examples():
    """List the shipped example scenarios, one line each: those run, stress
    and compare take by name, then those explore takes."""
    for kind, title in (("run", "run, stress, compare"), ("explore", "explore")):
        click.echo(f"{title}:")
        names = list_examples(kind)
        width = max((len(n) for n, _ in names), default=0)
        for name, line in names:
            click.echo(f"  {name:<{width}}  {line}")


def _stdout_gone() -> None:
    """The reader of stdout went away (``| head``): no more output and no
    message, exit 141 as a program killed by SIGPIPE would.  stdout is
    pointed at /dev/null so the interpreter's own flush at exit cannot fail
    again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(EXIT_BROKEN_PIPE)


_NO_ARGS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _usage_line(e: click.ClickException) -> str:
    """click's error as one line: the command, what was wrong (the option or
    argument named, as click names it) and where the help is."""
    ctx = getattr(e, "ctx", None)
    where = ctx.command_path if ctx is not None else "smp-emu"
    hint = f" (see {where} --help)" if isinstance(e, click.UsageError) else ""
    return f"{where}: {_clip_text(e.format_message())}{hint}"


def main(argv=None) -> None:
    try:
        rv = cli.main(args=argv, prog_name="smp-emu", standalone_mode=False)
    except click.ClickException as e:  # click's own usage errors: one line, exit 2
        if isinstance(e, _NO_ARGS_HELP):  # plain smp-emu: the help, as click shows it
            e.show()
        else:
            click.echo(_usage_line(e), err=True)
        sys.exit(e.exit_code)
    except (KeyboardInterrupt, click.Abort):
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        _stdout_gone()
    except (OSError, SmpError) as e:  # an error no command handled: one line
        click.echo(f"smp-emu: {_os_text(e) if isinstance(e, OSError) else e}", err=True)
        sys.exit(EXIT_FAILED if type(e) is SmpError else EXIT_USAGE)
    # --help, --version and click's Exit give their code; a command that
    # returns has succeeded
    sys.exit(rv if type(rv) is int else 0)


def _os_text(e: OSError) -> str:
    """An OSError as a user reads it: ``FILE: what`` (no errno, no class)."""
    return f"{e.filename}: {_why(e)}" if e.filename else _why(e)


def _why(e: OSError) -> str:
    """What went wrong, without the errno: ``no such file or directory``."""
    why = e.strerror or str(e)
    return why[:1].lower() + why[1:]


if __name__ == "__main__":
    main()
