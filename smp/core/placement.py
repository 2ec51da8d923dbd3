"""Where a pid or a port lives: the one formula every part of the emulator
uses to find the scheduler that owns a process or a port.

A pid's full index (``number + serial << 15``, the VM's split, so a real
node reads every pid written) encodes its owner: ``(index - PID_BASE) %
nsched + 1``.  A port's number does the same with ``nsched + 1`` slots, slot
0 being the trace ports (the dispatcher's in smp, the nonsmp node's)."""

from __future__ import annotations

from smp.core.terms import Pid, Port

__all__ = ["PID_BASE", "pid_index", "pid_owner", "port_owner", "port_of", "owner"]

#: The first pid index the emulator hands out (<0.80.0>, as a fresh VM).
PID_BASE = 80


def pid_index(pid: Pid) -> int:
    return pid.number + (pid.serial << 15)


def pid_owner(pid: Pid, nsched: int) -> int:
    """The scheduler (1..nsched) that runs ``pid``."""
    return (pid.number + (pid.serial << 15) - PID_BASE) % nsched + 1


def port_owner(port: Port, nsched: int) -> int:
    """The scheduler that holds ``port``; 0 for a trace port."""
    return port.number % (nsched + 1)


def port_of(owner: int, n: int, nsched: int) -> Port:
    """The ``n``-th port (from 1) that ``owner`` holds (0: a trace port):
    ``port_owner`` of it is ``owner``."""
    return Port(owner + (nsched + 1) * n)


def owner(x: object, nsched: int) -> int:
    """``pid_owner`` or ``port_owner``; ValueError for anything else."""
    if type(x) is Pid:
        return pid_owner(x, nsched)
    if type(x) is Port:
        return port_owner(x, nsched)
    raise ValueError(f"not a pid or a port: {x!r}")
