"""The dispatcher's view of the process table (alive pids, tracer marks,
registered names, open tracer ports).

Runs in the dispatcher process.  Schedulers report spawns, exits and tracer
marks on the ingest socket in the order they happen, interleaved with the
system messages they make, so a message made before its receiver died is
decided against the table as the seed's dispatcher finds it: live at the time
of dispatch or not.  Pid numbers are never reused.
"""

from __future__ import annotations

import threading

from smp.core.placement import port_of
from smp.core.terms import Atom, Pid, Port

__all__ = ["PidTable", "take_table_event"]


class PidTable:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.alive: set[Pid] = set()
        self.tracers: set[Pid] = set()
        self.registry: dict[Atom, Pid] = {}
        self.ports: dict[Port, object] = {}
        # ports processes opened (not distribution ports), by their schedulers'
        # port_open/port_close events: valid tracers too (erts_is_valid_tracer_port)
        self.proc_ports: set[Port] = set()
        self._trace_ports_made = 0

    def add_trace_port(self, tp, nsched: int) -> Port:
        """A tracer port of the dispatcher: numbered with owner 0 among the
        ``nsched`` schedulers (``port_owner``), kept in ``ports``."""
        self._trace_ports_made += 1
        port = port_of(0, self._trace_ports_made, nsched)
        self.ports[port] = tp
        return port

    # ProcTable / Liveness
    def is_alive(self, pid) -> bool:
        return pid in self.alive

    def is_tracer(self, pid) -> bool:
        return pid in self.tracers and pid in self.alive

    def whereis(self, name):
        """``erts_whereis_name`` (register.c): a live process or an open port."""
        pid = self.registry.get(name)
        if pid is None:
            return None
        if type(pid) is Port:
            return pid if self.is_valid_tracer_port(pid) else None
        return pid if pid in self.alive else None

    def is_valid_tracer_port(self, port) -> bool:
        tp = self.ports.get(port)
        if tp is None:
            return port in self.proc_ports
        return not tp.closed

    def open_tracer_ports(self) -> list:
        """What the schedulers' replicas take as valid tracer ports."""
        return [p for p, tp in self.ports.items() if not tp.closed] + list(self.proc_ports)

    # events
    def spawned(self, pid: Pid) -> None:
        with self.lock:
            self.alive.add(pid)

    def exited(self, pid: Pid) -> list:
        """Returns the names that pid held."""
        with self.lock:
            self.alive.discard(pid)
            self.tracers.discard(pid)
            names = [n for n, p in self.registry.items() if p == pid]
            for n in names:
                del self.registry[n]
            return names

    def port_opened(self, port) -> None:
        """A port a process opened: a valid tracer until it closes."""
        with self.lock:
            self.proc_ports.add(port)

    def port_closed(self, port) -> list:
        """Returns the names the port held (io.c ``erts_do_exit_port``
        unregisters a closing port)."""
        with self.lock:
            self.proc_ports.discard(port)
            names = [n for n, p in self.registry.items() if p == port]
            for n in names:
                del self.registry[n]
            return names

    def mark_tracer(self, pid: Pid) -> None:
        with self.lock:
            if pid in self.alive:
                self.tracers.add(pid)

    def register(self, name: Atom, pid) -> bool:
        with self.lock:
            if self.whereis(name) is not None:
                return False
            if type(pid) is Pid and pid not in self.alive:
                return False
            if type(pid) is Port and not self.is_valid_tracer_port(pid):
                return False
            if pid in self.registry.values():
                return False
            self.registry[name] = pid
            return True

    def unregister(self, name: Atom) -> bool:
        with self.lock:
            return self.registry.pop(name, None) is not None


def take_table_event(table: PidTable, state, kind: str, args: tuple, dead: list, tracers: list):
    """One table event of a scheduler's batch, taken in queue order as the
    ingest takes it (``SysMsgQueue.ingest``; the simulator's ingest is this
    too): the table and the tracer state (``state``) changed, the pids the
    dead and tracer publications that follow carry added to ``dead`` and
    ``tracers``.  Returns whether the registry and whether the open tracer
    ports changed (each a publication of its own)."""
    subject = args[-1]
    reg = ports = False
    if kind == "spawn":
        table.spawned(subject)
    elif kind == "exit":
        reg = bool(table.exited(subject))
        dead.append(subject)
        state.trace_check_exiting(subject, smp=True)
    elif kind == "tracer":
        table.mark_tracer(subject)
        tracers.append(subject)
    elif kind == "unregister":
        table.unregister(args[0])
        reg = True
    elif kind == "port_open":
        table.port_opened(subject)
        ports = True
    elif kind == "port_close":
        # io.c erts_do_exit_port: a closing port loses its names
        reg = bool(table.port_closed(subject))
        state.trace_check_exiting(subject, smp=True)
        ports = True
    return reg, ports
