"""The commands that read what a run left: ``smp-emu read`` (trace files,
wrap logs and ip ports, printed as dbg:trace_client does), ``smp-emu
report`` (a saved result as an HTML page) and ``smp-emu replay`` (a
dispatcher journal, ``smp.app.replay``).
"""

from __future__ import annotations

import json
import os
import re
import sys

import click
from rich.table import Table

from smp.app.cli_options import Named, NumberRange, _clip_text, _os_text, _stdout_gone, _write_out
from smp.app.cli_output import _console, _stderr_tty, _TraceWriter
from smp.app.exitcodes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from smp.app.explore.tree_page import is_dot, load_tree
from smp.app.replay import BadRecord, NotAJournal, format_listing, queue_listing
from smp.app.replay import replay as do_replay
from smp.app.report import render_report, render_tree
from smp.app.result_file import MAX_RESULT_BYTES, ResultFileError, load_result, read_text
from smp.core.errors import DecodeError
from smp.core.pretty import NodeNumbers, clip_message
from smp.core.terms import Atom
from smp.ports.reader import merge_traces, read_trace, wrap_log_files
from smp.wire.limits import DEFAULT as READ_LIMITS
from smp.wire.limits import Limits

__all__ = ["read", "report", "replay"]


_SIZE = re.compile(r"\A([0-9]{1,15})([KMG]?)\Z", re.IGNORECASE)

#: the largest size option: a frame's size and a compressed term's inflated
#: size are 4-byte fields, so no frame or term is larger than 4 GiB
_MOST_SIZE = 4 << 30


def _read_size(ctx, param, value):
    """A size option of smp-emu read: N, or N followed by K, M or G (KiB,
    MiB, GiB), from 1 to 4G; one line and exit 2 for anything else."""
    m = _SIZE.match(str(value).strip())
    n = int(m.group(1)) << (10 * "_KMG".index(m.group(2).upper() or "_")) if m else 0
    if not m or not 1 <= n <= _MOST_SIZE:
        click.echo(
            f"smp-emu: --{param.name.replace('_', '-')} {_clip_text(str(value), 40)!r}: "
            f"expected a size from 1 to 4G: N, or N followed by K, M or G",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    return n


@click.command(
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
    type=NumberRange(0, 1e9, min_open=True),
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
    help="print each term of a message longer than about this many characters "
    "cut short with '...' where the rest would be, as ~P does",
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
    if follow and wrap_suffix:
        raise click.UsageError(
            "--follow reads one trace file, not a wrap log (--wrap), as "
            "dbg:trace_client(follow_file, F) does"
        )
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
    out = Named(sys.stdout, "standard output")  # (a write that fails names it)
    writer = _TraceWriter(fmt, out, False, NodeNumbers(known), latin1=True, every=every)
    heard = set()
    try:
        if len(srcs) == 1:
            label = sources[0] if mark else None
            for term in read_trace(srcs[0], timeout=timeout, follow=follow, limits=limits):
                heard.add(0)
                writer("", clip_message(term, max_print), label)
        else:
            for i, term in merge_traces(srcs, timeout=timeout, limits=limits):
                heard.add(i)
                writer("", clip_message(term, max_print), sources[i] if mark else None)
    except BrokenPipeError:
        _stdout_gone()
    except (DecodeError, OSError, ValueError) as e:
        named = isinstance(e, OSError) and e.filename is not None
        click.echo(f"smp-emu: {_clip_text(_os_text(e) if named else str(e))}", err=True)
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
    for i, src in enumerate(srcs):
        # A device or a pipe with nothing in it (/dev/null) is as empty as an
        # empty file: no trace frames.  An ip port that closes at once is not:
        # a node may close it having traced nothing.
        if i not in heard and isinstance(src, str) and os.path.exists(src):
            click.echo(f"smp-emu: {src}: no trace frames in it", err=True)
            sys.exit(EXIT_USAGE)


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


@click.command(
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
    run --json, stress --json, compare --json or explore --json (an explore
    of a run scenario in the simulator: its outcomes, fates, race pairs,
    events and replay commands), or the explored tree explore --graph
    writes (DOT), drawn.  It shows throughput, queue depth and drops
    over time, the latency histogram, the scheduler timeline
    (when the scenario profiles schedulers, as the profile example does) and
    the totals; a compare draws both modes on the same axes and lists the
    messages only one mode made.  RESULT '-' reads standard input, so
    explore --json | smp-emu report - draws a result without a file."""

    try:
        # (read once: RESULT may be a pipe, '-' standard input)
        text = read_text(result, MAX_RESULT_BYTES, "a saved result or an explored tree")
        html = render_tree(load_tree(result, text)) if is_dot(text) else _result_page(result, text)
    except ResultFileError as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE)
    _write_out(output, "-o/--output", html)
    click.echo(output)


def _result_page(result: str, text: str) -> str:
    """The page of a saved result file's text, or a ``ResultFileError``."""
    data = load_result(result, text)
    try:
        return render_report(data)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise ResultFileError(
            f"{result}: not a run, stress, compare or explore result ({_result_fault(e)})"
        ) from None


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


@click.command(epilog="\b\nExample:\n  smp-emu replay stress.journal --around 1200")
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
        + (
            ", ".join(f"{n} {k}" for k, n in r.records.items()) + " records"
            if r.records
            else "no records"
        ),
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
    lines.append(_verdict(r) if r.ok else "REPLAY FAILED")
    return "\n".join(lines) + "\n"


def _verdict(r) -> str:
    """What a replay that found no divergence and no violation can say: the
    run, when the journal ends with its end record (or, a version 2
    journal, with every message decided); else only the journal (a version
    2 journal cut at a record's end cannot be told from a run stopped with
    messages queued)."""
    queued = r.totals["queued"]
    if r.whole or not queued:
        return "replay matches the run"
    return (
        f"replay matches the journal; {queued} message(s) undecided at its end: the run "
        "was stopped with them queued, or the journal is cut short"
    )


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
        + (f"[green]{_verdict(r)}[/]" if r.ok else "[red]REPLAY FAILED[/]")
    )
