"""Where the processes of one emulator meet, and who may speak there.

Runs in the user's process (the controller, ``smp.Emulator``, and the
dispatcher benchmark in ``tools/bench.py``); ``tcp_endpoints`` also runs in a
scheduler launcher on another host (``smp.app.cluster``), which derives the
same addresses from the one it is given.

The layout is decided once, before any process starts, and every process
gets the same plain dict (``Endpoints.as_dict``): a frozen record built by
one function, so the controller and the tools that start a dispatcher on
their own cannot drift apart.  The security plan (CURVE or not) is decided
next to it because it follows from the same choice: ipc in an owner-only
directory needs no CURVE, tcp does unless ``insecure=True`` says otherwise.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from smp.core.errors import BadArg
from smp.wire.curve import InsecureWarning, ephemeral_security, server_security

__all__ = ["Endpoints", "plan_endpoints", "plan_security", "tcp_endpoints"]


def tcp_endpoints(base: str) -> dict:
    """Endpoints of a controller at ``tcp://ADDR:PORT``: the controller on
    PORT, the dispatcher's ingest on PORT+1, its control on PORT+2 and its
    three state publishers on PORT+3..PORT+5 (schedulers elsewhere derive
    them from the one address they are given)."""
    host, port = base[6:].rsplit(":", 1)
    port = int(port)
    ep = lambda n: f"tcp://{host}:{port + n}"  # noqa: E731
    return {"ctl": ep(0), "ingest": ep(1), "disp_ctl": ep(2), "pub": [ep(3), ep(4), ep(5)]}


@dataclass(frozen=True, slots=True)
class Endpoints:
    """The sockets of one emulator: the controller's ROUTER (``ctl``), the
    dispatcher's ingest, control (``disp_ctl``) and three state publishers
    (``pub``), and each scheduler's inbox (``inbox``, ``{}`` for its id; tcp:
    a port of the system's choosing, announced as ``advertise_host``)."""

    ctl: str
    ingest: str
    disp_ctl: str
    pub: tuple[str, ...]
    inbox: str
    #: The run directory every process holds (None: the processes hold none).
    dir: str | None
    start_timeout: float
    advertise_host: str | None = None

    @property
    def tcp(self) -> bool:
        return self.ctl.startswith("tcp://")

    def as_dict(self) -> dict:
        """The dict the scheduler and dispatcher processes are given."""
        d = {
            "ctl": self.ctl,
            "ingest": self.ingest,
            "disp_ctl": self.disp_ctl,
            "pub": list(self.pub),
            "inbox": self.inbox,
        }
        if self.advertise_host is not None:
            d["advertise_host"] = self.advertise_host
        d["start_timeout"] = self.start_timeout
        d["dir"] = self.dir
        return d


def plan_endpoints(
    run_dir: str,
    bind: str | None = None,
    advertise: str | None = None,
    start_timeout: float = 10.0,
) -> Endpoints:
    """The layout: ipc in ``run_dir`` (owner-only), or with ``bind`` tcp on
    ``bind``'s host and the ports after it (``tcp_endpoints``), inboxes on
    ports the system picks, announced as ``advertise`` (default: the bound
    host, or 127.0.0.1 for a wildcard)."""
    if bind is None:
        return Endpoints(
            ctl=f"ipc://{run_dir}/ctl",
            ingest=f"ipc://{run_dir}/ingest",
            disp_ctl=f"ipc://{run_dir}/disp",
            pub=tuple(f"ipc://{run_dir}/pub{i}" for i in range(3)),
            inbox=f"ipc://{run_dir}/s{{}}",
            dir=run_dir,
            start_timeout=start_timeout,
        )
    base = tcp_endpoints(bind)
    host = bind[6:].rsplit(":", 1)[0]
    return Endpoints(
        ctl=base["ctl"],
        ingest=base["ingest"],
        disp_ctl=base["disp_ctl"],
        pub=tuple(base["pub"]),
        inbox=f"tcp://{host}:*",
        dir=run_dir,
        start_timeout=start_timeout,
        advertise_host=advertise or (host if host not in ("0.0.0.0", "*") else "127.0.0.1"),
    )


def plan_security(
    bind: str | None, curve: bool | None, keys: str | None, insecure: bool, remote: int
) -> tuple[dict | None, bool]:
    """``(security, insecure)`` for an emulator: CURVE on tcp (loopback
    included) unless ``insecure=True``, which warns; ``keys`` (a directory
    from ``smp-emu keygen``) when schedulers on other hosts join, a key pair
    made for the run otherwise; None on ipc."""
    if curve is None:  # tcp, loopback included, is CURVE unless insecure=True
        curve = bind is not None and not insecure
    if bind is not None and not curve:
        if not insecure:
            raise BadArg(
                "tcp without CURVE needs insecure=True: any process that can "
                "reach the ports could send the emulator frames"
            )
        warnings.warn(
            f"{bind}: tcp without CURVE (insecure=True): any process that can "
            "reach these ports can send the emulator frames",
            InsecureWarning,
            stacklevel=3,  # the Emulator(...) call
        )
    if curve and keys is None and remote:
        raise BadArg(
            "CURVE is on for tcp endpoints: give keys=DIR (smp-emu keygen DIR), "
            "or insecure=True to run unauthenticated"
        )
    security = (
        (server_security(keys) if keys is not None else ephemeral_security()) if curve else None
    )
    return security, bool(bind is not None and not curve)
