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
import errno
import os
import re
import signal
import socket
import sys
import warnings

import multiprocess
import psutil

from schedulers.worker import scheduler_main
from smp.core.errors import BadArg, SmpError
from smp.emulator import tcp_endpoints
from smp.wire.curve import InsecureWarning, load_keys, load_public

__all__ = ["run_schedulers", "scheduler_security", "tcp_address", "ports_taken"]


def scheduler_security(keys_dir: str, name: str) -> dict:
    """A remote scheduler's keys: its own ``NAME.key_secret`` and the
    controller's ``server.key`` in ``keys_dir``."""

    public, secret = load_keys(os.path.join(keys_dir, f"{name}.key_secret"))
    server_public = load_public(os.path.join(keys_dir, "server.key"))
    return {"public": public, "secret": secret, "server_public": server_public}


#: the controller takes PORT, the dispatcher PORT+1..PORT+5 (tcp_endpoints)
PORT_SPAN = 6

_TCP = re.compile(r"\Atcp://(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):([0-9]{1,5})\Z")


def tcp_address(url: str, option: str) -> tuple[str, int]:
    """``(host, port)`` of a ``tcp://ADDR:PORT`` option value; BadArg naming
    ``option`` when it is not one (PORT+5 must be a port too)."""
    m = _TCP.match(url)
    last = 65535 - (PORT_SPAN - 1)
    if not m or not 1 <= int(m.group(2)) <= last:
        shown = repr(url) if len(url) <= 80 else repr(url[:77]) + "..."
        raise BadArg(
            f"{option} {shown}: expected tcp://ADDR:PORT with PORT 1..{last} "
            f"(the dispatcher takes PORT+1..PORT+{PORT_SPAN - 1})"
        )
    return m.group(1).strip("[]"), int(m.group(2))


def ports_taken(url: str, option: str = "--bind") -> list[int]:
    """The ports of the controller at ``url`` (PORT..PORT+5) that something
    on this host already listens on; BadArg when ADDR is no address of this
    host.  Checked before a run, so that a port in use is one line at once and
    not a dispatcher that never starts."""
    host, port = tcp_address(url, option)
    if host == "*":
        host = "0.0.0.0"
    taken = []
    for p in range(port, port + PORT_SPAN):
        try:
            infos = socket.getaddrinfo(host, p, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except socket.gaierror as e:
            raise BadArg(f"{option} {url}: cannot resolve {host}: {e.strerror}") from None
        family, kind, proto, _, addr = infos[0]
        with socket.socket(family, kind, proto) as s:
            # as zmq binds: a port left in TIME_WAIT is free
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(addr)
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    why = (e.strerror or str(e)).lower()
                    raise BadArg(f"{option} {url}: cannot listen on {host}: {why}") from None
                taken.append(p)
    return taken


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
    tcp_address(connect, "--connect")
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
