"""The commands of a run over several hosts: ``smp-emu dispatcher`` (the
dispatcher here, schedulers joining over CURVE tcp), ``smp-emu scheduler``
(schedulers that join it) and ``smp-emu keygen`` (their key pairs).
"""

from __future__ import annotations

import sys
import warnings

import click

from smp.app.cli_execute import _run_and_report
from smp.app.cli_options import NumberRange, _format_option, _load, _out_option
from smp.app.cluster import ports_taken, run_schedulers, tcp_address
from smp.app.exitcodes import EXIT_FAILED, EXIT_USAGE
from smp.core.errors import BadArg, SmpError
from smp.wire.curve import InsecureWarning, server_security
from smp.wire.curve import keygen as _keygen

__all__ = ["dispatcher", "scheduler", "keygen"]


def _warn_insecure(endpoint: str) -> None:
    """--insecure: say so once on stderr (the Python warning would repeat it)."""

    click.echo(
        f"smp-emu: warning: {endpoint}: tcp without CURVE (--insecure): any process "
        "that can reach these ports can send the emulator frames",
        err=True,
    )
    warnings.simplefilter("ignore", InsecureWarning)


@click.command(
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
    type=NumberRange(1, 3600),
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
            sc, "smp", schedulers, fmt, out, as_json, summary, check, emulator_options=opts,
            notes=sc.get("notes", []),
        )  # fmt: skip
    except (BadArg, SmpError) as e:
        click.echo(f"smp-emu: {e}", err=True)
        sys.exit(EXIT_USAGE if isinstance(e, BadArg) else EXIT_FAILED)


@click.command(
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


@click.command(
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
