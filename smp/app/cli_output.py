"""What ``smp-emu`` writes: each trace message as dbg, JSON or Erlang terms
(``_TraceWriter``), and a run's summary on stderr: the table on a terminal,
else one line, with the notes on duration, faults, limits and [[expect]].
"""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

from smp.app.compare import expect_broken
from smp.app.limits import trip_note
from smp.app.run_summary import port_drops, port_failures
from smp.app.workloads import duration_note, fault_notes
from smp.core.pretty import format_term, write_one_line
from smp.ports.dbgfmt import format_dbg, json_record


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

    def _text(self, term) -> str:
        """A term on one line, other nodes' ids numbered as the dbg text
        numbers them (``<1.86.0>``, ``--node-number``) when told the nodes:
        the terms and JSON formats printed ``<node1@host.86.0>``."""
        return format_term(term) if self.nodes is None else write_one_line(term, self.nodes)

    def __call__(self, tracer: str, term, source: str | None = None) -> None:
        """Write one term; ``source`` (smp-emu read of several files) marks
        it: a ``source`` key in JSON, ``SOURCE: `` before every line else."""
        if self.stream is None:
            return
        if self.fmt == "json":
            rec = {"kind": "trace", "tracer": tracer, "term": term, "text": self._text(term)}
            if source is not None:
                rec["source"] = source
            # json.dumps(rec) with the term's JSON written without recursion
            line = json_record(rec) + "\n"
        elif self.fmt == "terms":
            line = self._text(term) + ".\n"
        else:
            # dbg's handler prints nothing for what it does not know (monitor
            # and profile messages, {dbg, ok} receives, ...)
            line = format_dbg(term, self.nodes) or (self._text(term) + "\n" if self.every else "")
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
        # (the seed, as the one-line summary gives it: what runs it again)
        + f"; seed {s['seed']}"
        + (f", fault seed {s['fault_seed']}" if s.get("fault_seed") is not None else "")
        + (
            f"; latency per run p50 {lat['p50'] / 1e3:.0f} us, p90 {lat['p90'] / 1e3:.0f} us, "
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


def _summary_line(s: dict, command: str) -> str:
    """The run in one line, for stderr: scenario, mode, seed, how long (or
    that it was interrupted, and when) and the trace messages' fate."""
    st = s["stats"]
    took = f"{s['elapsed_s']:.2f} s"
    return (
        f"smp-emu: {command} {s['scenario']} ({s['mode']}, {s['schedulers']} scheduler(s), "
        f"seed {s['seed']}"
        + (f", fault seed {s['fault_seed']}" if s.get("fault_seed") is not None else "")
        + ") "
        + (f"interrupted after {took}" if s["interrupted"] else took)
        + f": made {st['made']:,}, delivered {st['delivered']:,}, dropped {st['dropped']:,}, "
        f"queued {st.get('queued', 0):,} trace messages"
        + "".join(
            f"; trace port {name} dropped {n:,} of those delivered to it (its queue)"
            for name, n in port_drops(s).items()
        )
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


def _port_notes(s: dict) -> bool:
    """Each failed trace port on stderr; True when there was one."""
    lines = port_failures(s)
    for line in lines:
        click.echo(f"smp-emu: {line}", err=True)
    return bool(lines)


def _limit_note(s: dict) -> None:

    note = trip_note(s.get("limit"))
    if note:
        click.echo(f"smp-emu: {note}", err=True)


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
