"""``smp-emu explore``: the click command.

Parses the options, runs ``explore`` with a progress line on stderr (only
when stderr is a terminal), and prints the result on stdout, as text or,
with ``--json``, as JSON (what ``smp-emu report`` renders).  A bad scenario
or schedule exits ``EXIT_USAGE``, a schedule that fails to run
``EXIT_FAILED``, Ctrl-C ``EXIT_INTERRUPTED`` (``smp.app.exitcodes``).
"""

from __future__ import annotations

import json
import sys

import click

from smp.app.exitcodes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from smp.app.explore.runner import explore
from smp.app.explore.scenario import MAX_CHANGES, MAX_MESSAGES, SAMPLES
from smp.app.explore.text import format_text
from smp.core.errors import BadArg, ScenarioError, SmpError

__all__ = ["explore_command"]


def _make_command():

    @click.command("explore")
    @click.argument("scenario")
    @click.option(
        "--schedule",
        default=None,
        metavar="'CHANGE@K ...'",
        help="run this one schedule (each change after K queued messages) and print its outcome",
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
    def explore_command(
        scenario, schedule, as_json, max_messages, max_changes, samples, seed, no_prune, no_nonsmp
    ):
        """Run SCENARIO once per distinct interleaving of its state changes
        with the dispatch of its queued messages and list the outcomes.

        SCENARIO is an explore scenario (TOML) or the name of a shipped one
        (seq, monitor, commute, races).  Each schedule runs on a fresh smp
        emulator, the dispatcher held and stepped message by message
        (Emulator.step_dispatcher); schedules that differ only in the order
        of a change and a message that commute are run once.  The scenario
        also runs in nonsmp mode, and the report names the smp outcomes
        nonsmp cannot produce.  Exit 1 when a schedule fails to run.

        \b
        Example:
          smp-emu explore seq
          smp-emu explore seq --schedule 'replace@1'
          smp-emu explore races --json > races.json && smp-emu report races.json -o races.html
        """
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
            click.echo(f"smp-emu: {e}", err=True)
            sys.exit(EXIT_USAGE)
        except BadArg as e:
            click.echo(f"smp-emu: {e}", err=True)
            sys.exit(EXIT_USAGE)
        except KeyboardInterrupt:
            sys.exit(EXIT_INTERRUPTED)
        except SmpError as e:
            click.echo(f"smp-emu: {e}", err=True)
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

    return explore_command


explore_command = _make_command()
