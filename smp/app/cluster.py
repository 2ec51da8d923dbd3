"""Schedulers on other hosts.

A controller started with ``smp.Emulator(mode="smp", schedulers=N,
remote_schedulers=N, bind="tcp://ADDR:PORT", keys=DIR)`` (``smp-emu
dispatcher``) waits for schedulers to join; ``run_schedulers`` (``smp-emu
scheduler --connect tcp://ADDR:PORT --count N``) starts them on this host.
Every endpoint is derived from the controller's address (``tcp_endpoints``);
each scheduler binds its inbox on ``host`` and tells the controller where.
The workload's code must be importable on every host (process bodies travel
by reference).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import warnings

import multiprocess
import psutil

from schedulers.worker import scheduler_main
from smp.core.errors import BadArg, SmpError
from smp.emulator import tcp_endpoints
from smp.wire.curve import InsecureWarning, load_keys, load_public

__all__ = ["run_schedulers", "scheduler_security"]


def scheduler_security(keys_dir: str, name: str) -> dict:
    """A remote scheduler's keys: its own ``NAME.key_secret`` and the
    controller's ``server.key`` in ``keys_dir``."""

    public, secret = load_keys(os.path.join(keys_dir, f"{name}.key_secret"))
    server_public = load_public(os.path.join(keys_dir, "server.key"))
    return {"public": public, "secret": secret, "server_public": server_public}


def run_schedulers(
    connect: str,
    count: int,
    *,
    host: str = "127.0.0.1",
    keys: str | None = None,
    name: str = "scheduler",
    reductions: int = 200,
    placement: str = "round_robin",
    start_timeout: float = 60.0,
    curve: bool | None = None,
    insecure: bool = False,
) -> int:
    """Start ``count`` schedulers that join the controller at ``connect`` and
    wait until they stop (the controller closes, or stops answering).
    Returns the number of schedulers that ended with an error.  CURVE is on
    (``keys`` needed) unless ``insecure``, which warns."""
    if not connect.startswith("tcp://"):
        raise BadArg(f"--connect must be tcp://ADDR:PORT, not {connect!r}")
    if type(count) is not int or count < 1:
        raise BadArg(f"--count must be >= 1, not {count!r}")
    if curve is None:  # tcp, loopback included, is CURVE unless --insecure
        curve = not insecure
    if not curve and not insecure:
        raise BadArg("tcp without CURVE needs --insecure")
    if curve and keys is None:
        raise BadArg(
            "CURVE is on for tcp endpoints: give --keys DIR with this scheduler's "
            "key pair and the controller's server.key, or --insecure to join a "
            "controller that runs without it"
        )
    if not curve:
        warnings.warn(
            f"{connect}: tcp without CURVE (insecure): any process that can reach "
            "these ports can send the emulator frames",
            InsecureWarning,
            stacklevel=2,
        )
    security = scheduler_security(keys, name) if curve else None
    endpoints = tcp_endpoints(connect)
    endpoints["inbox"] = f"tcp://{host}:*"
    endpoints["advertise_host"] = host
    endpoints["start_timeout"] = start_timeout

    mp = multiprocess.get_context("fork")
    options = {"reductions": reductions, "placement": placement}
    procs = [
        mp.Process(
            target=scheduler_main,
            args=(None, True, endpoints, options, security),
            name=f"smp-remote-scheduler-{i}",
        )
        for i in range(count)
    ]
    for p in procs:
        p.start()

    def stop(signum, frame):
        for p in procs:
            if p.is_alive():
                p.terminate()

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for p in procs:
            p.join()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        left = [psutil.Process(p.pid) for p in procs if p.is_alive()]
        for q in left:
            q.kill()
    return sum(1 for p in procs if p.exitcode not in (0, -signal.SIGTERM))


def main(argv=None) -> int:
    """``python -m smp.app.cluster scheduler --connect URL --count N [--host H] [--keys DIR --name N]``."""

    ap = argparse.ArgumentParser(prog="python -m smp.app.cluster")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("scheduler", help="start schedulers that join a controller")
    sp.add_argument("--connect", required=True)
    sp.add_argument("--count", type=int, default=1)
    sp.add_argument("--host", default="127.0.0.1")
    sp.add_argument("--keys")
    sp.add_argument("--name", default="scheduler")
    sp.add_argument(
        "--insecure", action="store_true", help="join a controller that runs tcp without CURVE"
    )
    a = ap.parse_args(argv)
    try:
        return (
            1
            if run_schedulers(
                a.connect, a.count, host=a.host, keys=a.keys, name=a.name, insecure=a.insecure
            )
            else 0
        )
    except (BadArg, SmpError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
