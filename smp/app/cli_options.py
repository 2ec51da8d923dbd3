"""What several ``smp-emu`` commands share: the click options defined once
(``--format``, ``--out``, ``--seed``), loading a scenario, opening an output
file, and the one-line texts of an error (exit 2 for a usage error, 141 when
stdout's reader went away).
"""

from __future__ import annotations

import os
import sys

import click

from smp.app.exitcodes import EXIT_BROKEN_PIPE, EXIT_USAGE
from smp.app.scenario import load_scenario
from smp.app.series import FINE_INTERVAL_S, MIN_INTERVALS, SAMPLE_INTERVAL_S
from smp.core.errors import ScenarioError

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


#: --sample-interval of run, compare and stress: by default the run picks it
#: (``series.default_interval``: a run bounded by time is cut into at least
#: ``MIN_INTERVALS`` intervals; one bounded by operations starts fine and the
#: samplers widen the interval as it goes on)
class NumberRange(click.FloatRange):
    """click's ``FloatRange``, refusing NaN (which every range lets through:
    no comparison with it is true) and infinity (which a range open above
    lets through: ``--time-budget inf``)."""

    def convert(self, value, param, ctx):
        v = super().convert(value, param, ctx)
        if v != v:
            self.fail("nan is not a number", param, ctx)
        if v in (float("inf"), float("-inf")):
            self.fail(f"{value} is not a finite number", param, ctx)
        return v


_sample_interval_option = click.option(
    "--sample-interval",
    type=NumberRange(0.001, 1.0),
    default=None,
    help=(
        "seconds between two samples of the counters (the series a report draws); "
        f"default: a run bounded by time is cut into at least {MIN_INTERVALS} intervals, "
        f"at most {SAMPLE_INTERVAL_S:g} s long; from {FINE_INTERVAL_S:g} s, widened as it goes on, "
        "for a run bounded by operations"
    ),
)


class _Seed(click.ParamType):
    """A 64-bit signed integer, as a scenario's ``seed`` (click's IntRange
    would print its two 19-digit bounds in the help, wrapped mid-number)."""

    name = "integer"

    def convert(self, value, param, ctx):
        if type(value) is int:
            n = value
        else:
            try:
                n = int(str(value), 10)
            except ValueError:
                self.fail(f"{value!r} is not an integer", param, ctx)
        if not -(1 << 63) <= n < (1 << 63):
            self.fail(f"{n} is not a 64-bit integer (-2**63 to 2**63-1)", param, ctx)
        return n


_seed_option = click.option(
    "--seed",
    type=_Seed(),
    default=None,
    help=(
        "the workload's random seed (a 64-bit integer), instead of the scenario's seed "
        "(the summary records it)"
    ),
)


def _load(scenario):

    try:
        sc = load_scenario(scenario)
    except ScenarioError as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE)
    for note in sc.get("notes", []):
        click.echo(f"smp-emu: note: {note}", err=True)
    return sc


def _open_out(path: str, option: str, mode: str = "w"):
    """Open an output file, or say in one line which option named a file that
    cannot be written and why (exit 2).  A write that fails later (a full
    disk) names the option and the file too (``Named``)."""
    try:
        return Named(open(path, mode, encoding="utf-8"), f"{option} {path}")
    except OSError as e:
        click.echo(f"smp-emu: {option} {path}: cannot write it: {_why(e)}", err=True)
        sys.exit(EXIT_USAGE)


class Named:
    """A stream whose failed write, flush or close raises an ``OSError`` that
    names it (``FILE: what``, as ``_os_text`` says it): ``--out FILE`` or
    ``standard output`` rather than a bare "no space left on device".  A
    reader gone (``BrokenPipeError``) is passed on as it is."""

    def __init__(self, stream, name: str):
        self._stream, self.name = stream, name

    def _named(self, call, *args):
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as e:
            if e.filename is not None:
                raise
            raise OSError(e.errno, f"cannot write it: {_why(e)}", self.name) from None

    def write(self, text):
        return self._named(self._stream.write, text)

    def flush(self) -> None:
        self._named(self._stream.flush)

    def close(self) -> None:
        self._named(self._stream.close)

    @property
    def buffer(self):
        """The bytes under a text stream (dbg's latin-1 text is written there),
        named as the stream is; None when there are none."""
        raw = getattr(self._stream, "buffer", None)
        return None if raw is None else Named(raw, self.name)

    def __enter__(self) -> Named:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getattr__(self, attr):
        return getattr(self._stream, attr)


def _write_out(path: str, option: str, text: str) -> None:
    """Write ``text`` to an output file whole, or say in one line which
    option named it and why it could not be written (exit 2): a full disk
    shows at the write or the close, not at the open."""
    f = _open_out(path, option)
    try:
        with f:
            f.write(text)
    except OSError as e:  # (Named's: the option, the file and why)
        click.echo(f"smp-emu: {_os_text(e)}", err=True)
        sys.exit(EXIT_USAGE)


def _writable(path: str, option: str) -> None:
    """Refuse, before a run, an output file a process will open later (the
    dispatcher's journal): one line naming the option, exit 2."""
    existed = os.path.lexists(path)
    _open_out(path, option, "a").close()
    if not existed:
        os.unlink(path)


def _clip_text(text: str, most: int = 300) -> str:
    """One line of at most ``most`` characters of ``text`` (a message that
    quotes what it got)."""
    text = " ".join(text.split())
    return text if len(text) <= most else text[: most - 3] + "..."


def _stdout_gone() -> None:
    """The reader of stdout went away (``| head``): no more output and no
    message, exit 141 as a program killed by SIGPIPE would.  stdout is
    pointed at /dev/null so the interpreter's own flush at exit cannot fail
    again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(EXIT_BROKEN_PIPE)


def _os_text(e: OSError) -> str:
    """An OSError as a user reads it: ``FILE: what`` (no errno, no class)."""
    return f"{e.filename}: {_why(e)}" if e.filename else _why(e)


def _why(e: OSError) -> str:
    """What went wrong, without the errno: ``no such file or directory``."""
    why = e.strerror or str(e)
    return why[:1].lower() + why[1:]
