"""One run of a scenario for a command (``workloads.execute``): the live
progress line on a terminal, SIGTERM and Ctrl-C turned into a clean stop,
and ``_run_and_report``, the run, check and report that run and dispatcher
share.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import click

from smp.app.cli_options import _clip_text, _open_out, _writable
from smp.app.cli_output import (
    _after_run_notes,
    _console,
    _expect_notes,
    _limit_note,
    _port_notes,
    _print_summary_table,
    _stderr_tty,
    _summary_line,
    _TraceWriter,
)
from smp.app.compare import check_expect, check_invariants
from smp.app.exitcodes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from smp.app.journal_records import NotAJournal, frames_whole
from smp.app.workloads import execute
from smp.core.errors import BadArg, SmpError

__all__ = ["progress_text"]


class _Interrupt:
    """Turn Ctrl-C and SIGTERM into one KeyboardInterrupt; ignore a second
    while the run is cut short and measured (``execute`` takes in what was
    delivered, up to ``SETTLE_S``, then its counters and samples)."""

    _STOPS = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self):
        self._hit = False
        self._old: dict = {}
        try:
            for s in self._STOPS:
                self._old[s] = signal.signal(s, self._raise)
        except ValueError:  # not the main thread (CliRunner in a thread)
            self._old = {}
        return self

    def _raise(self, signum, frame):
        if self._hit:
            return  # a second one while the run is being cut short
        self._hit = True
        raise KeyboardInterrupt

    def __exit__(self, *exc):
        for s, old in self._old.items():
            signal.signal(s, old)


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
    record_fates=False,
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
                    record_fates=record_fates,
                    **options,
                )
            except KeyboardInterrupt:  # before the run started: nothing measured
                _shield()
                raise
    finally:
        if status is not None:
            status.stop()


def _outputs_apart(out, journal) -> None:
    """--out names a file, and not the journal's (the trace text
    overwrote the journal): one line, exit 2, before the run."""
    if out is not None and not out:
        click.echo(
            "smp-emu: --out '': give a file name (without --out the trace goes to stdout)", err=True
        )
        sys.exit(EXIT_USAGE)
    if out and journal and os.path.abspath(out) == os.path.abspath(journal):
        click.echo(f"smp-emu: --out and --journal name the same file, {out}", err=True)
        sys.exit(EXIT_USAGE)


def _journal_whole(journal: str) -> bool:
    """The journal is an output too: one the dispatcher could not write
    whole (a full disk) is said in one line, and fails the run."""
    try:
        frames_whole(journal)
    except NotAJournal as e:  # (BadRecord too)
        click.echo(
            f"smp-emu: --journal {journal}: not written whole ({_clip_text(str(e), 200)})", err=True
        )
        return False
    return True


def _tp_notes(sc: dict) -> list[str]:
    """A note, said on stderr and kept for the JSON, for each --tp pattern
    that matched no function when it was set (dbg:tp's ``{matched, Node,
    0}``): the emulator's functions are its workloads' (``wl_calls``)."""
    out = []
    for p in sc["patterns"]:
        if p.get("tp") is not None and p.get("matched") == 0:
            out.append(
                f"--tp {p['tp']}: matched no function (dbg:tp's {{matched,Node,0}}): the "
                "emulator's functions are its workloads' (wl_calls:...), so it traces nothing"
            )
            click.echo(f"smp-emu: note: {out[-1]}", err=True)
    return out


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
    notes=(),
):
    """Run ``sc`` and report it; ``notes`` (said on stderr before the run)
    are kept in the summary's ``notes`` too, for the JSON."""
    _outputs_apart(out, journal)
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
    s["notes"] = list(notes) + _tp_notes(sc)

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
    # (a summary on stdout, --json's or --format json's last line, holds
    # every fault: stderr says only those that did not take or fire)
    _after_run_notes(s, every=not (as_json or (fmt == "json" and stream is sys.stdout)))
    _limit_note(s)
    broken = _expect_notes(s)
    port_failed = _port_notes(s) | (journal is not None and not _journal_whole(journal))
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
    if broken or port_failed:
        sys.exit(EXIT_FAILED)
