"""Built-in port drivers for ports that emulated processes open.

``echo``   sends each command's data back to the owner as ``{Port, {data, Data}}``.
``busy``   echoes, then stays busy for ``busy_ms`` ms (default 5) after each
           command: a command while busy suspends the caller and, with
           ``busy_port`` monitoring, fires ``{monitor, Pid, busy_port, Port}``.
``dist``   as ``busy``, but a distribution port: ``busy_dist_port``.
``slow``   echoes and takes ``cost_ms`` ms (default 20) per command,
           synchronously: the caller is virtually scheduled out and in
           (``trace_virtual_sched``) and ``long_schedule`` may fire for the port.

Ports that trace (file, ip, memory, null) are made with
``Emulator.open_trace_port`` instead (``smp.ports.traceport``).
"""

from __future__ import annotations

from smp.core.errors import BadArg
from smp.core.linktree import LinkTree

__all__ = ["PortObj", "make_driver", "DRIVERS"]


class PortObj:
    __slots__ = (
        "id",
        "driver",
        "owner",
        "flags",
        "tracer",
        "closed",
        "busy",
        "busy_ms",
        "cost_ms",
        "dist",
        "commands",
        "reg_name",
        "links",
    )

    def __init__(self, port_id, driver: str, owner, busy_ms=0, cost_ms=0, dist=False):
        self.id = port_id
        self.driver = driver
        self.owner = owner
        self.flags = 0
        self.tracer = None
        self.closed = False
        self.busy = False
        self.reg_name = None
        self.busy_ms = busy_ms
        self.cost_ms = cost_ms
        self.dist = dist
        self.commands = 0
        # the processes linked to it (17.x ERTS_P_LINKS(prt)), in the tree
        # its close sweeps (io.c erts_do_exit_port, erts_sweep_links)
        self.links = LinkTree()

    @property
    def valid_tracer(self) -> bool:
        """``erts_is_valid_tracer_port``: open, not busy, not a distribution
        port (``ERTS_PORT_SFLGS_INVALID_TRACER_LOOKUP``)."""
        return not (self.closed or self.busy or self.dist)

    def command(self, data) -> list:
        """Run one command; returns the data to send to the owner."""
        self.commands += 1
        if self.busy_ms:
            self.busy = True
        return [data]


def _opts(driver: str, options: dict, allowed: dict) -> dict:
    for k in options:
        if k not in allowed:
            raise BadArg(
                f"driver '{driver}' has no option '{k}' (options: {', '.join(allowed) or 'none'})"
            )
    out = dict(allowed)
    out.update(options)
    for k, v in out.items():
        if type(v) is not int or v < 0:
            raise BadArg(f"driver '{driver}' option '{k}' must be an integer >= 0, not {v!r}")
    return out


DRIVERS = {"echo": {}, "busy": {"busy_ms": 5}, "dist": {"busy_ms": 5}, "slow": {"cost_ms": 20}}


def make_driver(driver: str, port_id, owner, options: dict) -> PortObj:
    if driver not in DRIVERS:
        raise BadArg(f"unknown port driver '{driver}' (drivers: {', '.join(DRIVERS)})")
    o = _opts(driver, options, DRIVERS[driver])
    return PortObj(
        port_id,
        driver,
        owner,
        busy_ms=o.get("busy_ms", 0),
        cost_ms=o.get("cost_ms", 0),
        dist=driver == "dist",
    )
