"""``smp-emu``: run, compare, read, report and stress scenarios from the shell,
and replay a dispatcher journal (``smp-emu replay``, ``smp.app.replay``).

Runs in the user's process.  Data goes to stdout (the trace, JSON); progress
and tables go to stderr, and only when stderr is a terminal.  Exit codes:
0 success, 1 a failed run or a violated invariant, 2 a usage error (click's
own, and bad scenario files), 130 interrupted (Ctrl-C stops the run cleanly:
the Emulator context manager stops every OS process, and what was measured
is still printed).

This module holds the command group and the entry point (``main``); the
commands live in sibling modules, by family: ``cli_run`` (run, compare),
``cli_stress``, ``cli_read`` (read, report, replay), ``cli_nodes``
(dispatcher, scheduler, keygen) and ``smp.app.explore``, with what they
share in ``cli_options``, ``cli_output`` and ``cli_execute``.
"""

from __future__ import annotations

import sys

import click

from smp.app.cli_nodes import dispatcher, keygen, scheduler
from smp.app.cli_options import _clip_text, _os_text, _stdout_gone
from smp.app.cli_read import read, replay, report
from smp.app.cli_run import compare, run
from smp.app.cli_stress import stress
from smp.app.exitcodes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from smp.app.explore import explore_command
from smp.app.schema import SCHEMA_KINDS, list_examples, render_schema
from smp.core.errors import SmpError
from smp.sim.catalogue import CATALOGUE

__all__ = ["main", "cli"]


class _Commands(click.Group):
    """The commands; a reader of stdout that went away (``| head``) ends
    any of them as ``read`` ends: no message, exit 141 (click's own main
    would make it a silent exit 1, a failed run's code)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _stdout_gone()


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="smp-trace-emu")
def cli():
    """Emulate the Erlang VM's SMP trace subsystem on scenario files."""


for _command in (run, dispatcher, scheduler, keygen, compare, read, report, stress, replay):
    cli.add_command(_command)
# smp-emu explore: every interleaving of the queue and the state (smp/app/explore/)
cli.add_command(explore_command)


@cli.command(epilog="\b\nExample:\n  smp-emu schema run\n  smp-emu schema explore")
@click.argument("kind", type=click.Choice(SCHEMA_KINDS), default="run", metavar="[run|explore]")
def schema(kind):
    """Print every key of a scenario file: for run, stress and compare
    (run) or for explore (explore), with its type, default, allowed values
    and meaning.  The same table checks the files and makes the
    documentation's reference pages."""
    click.echo(render_schema(kind), nl=False)


@cli.command(epilog="\b\nExample:\n  smp-emu examples\n  smp-emu run churn")
def examples():
    """List the shipped example scenarios, one line each: those run, stress
    and compare take by name, then those explore takes, then the races of
    the simulator's catalogue (explore takes them by name too)."""
    races = [(r.name, _clip_text(" ".join(r.about.split()).split(". ")[0], 80)) for r in CATALOGUE]
    for title, names in (
        ("run, stress, compare", list_examples("run")),
        ("explore", list_examples("explore")),
        ("explore, races of the simulator's catalogue", races),
    ):
        click.echo(f"{title}:")
        width = max((len(n) for n, _ in names), default=0)
        for name, line in names:
            click.echo(f"  {name:<{width}}  {line}")


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


if __name__ == "__main__":
    main()
