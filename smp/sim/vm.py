"""``SimVM``: the part of ``smp.Emulator``'s API a workload's ``setup(vm)``
uses, over a simulated world (``smp.sim.world``).

Runs in the explorer's process, before the first event: like the emulator
between runs, every spawn and BIF here takes effect before any process
executes (the world settles after each).  The names and arguments are the
emulator's, so a setup written for the simulator reads like one for the real
emulator; ``name=`` on ``spawn`` is the simulator's own (the role a report
calls the process by, ``P1``, ``P2``... otherwise).
"""

from __future__ import annotations

import inspect

from smp.core.errors import BadArg
from smp.core.flags import flags_of, monitor_args_of
from smp.core.terms import Atom, Pid, Port, atom_of
from smp.ports.traceport_mem import check_kind

from .world import NonsmpWorld, World, check_body, collector

__all__ = ["SimVM"]


_atom = atom_of


_flags = flags_of


_monitor_args = monitor_args_of


class SimVM:
    """The setup facade: ``spawn``, ``spawn_collector``, ``open_trace_port``, ``trace``,
    ``trace_pattern``, ``set_system_seq_tracer``, ``system_monitor``,
    ``system_profile``, ``register``, ``define``, ``exit``, ``messages``."""

    def __init__(self, world: World | NonsmpWorld):
        self.world = world
        self._rr = 0

    @property
    def mode(self) -> str:
        return "smp" if self.world.smp else "nonsmp"

    @property
    def schedulers(self) -> int:
        return self.world.nsched

    def _place(self, scheduler) -> int:
        n = self.world.nsched
        if not self.world.smp:
            return 1  # one scheduler: every placement is it
        if scheduler is not None:
            if type(scheduler) is not int or not 1 <= scheduler <= n:
                raise BadArg(f"scheduler must be in 1..{n}, not {scheduler!r}")
            return scheduler
        self._rr = self._rr % n + 1
        return self._rr

    def spawn(self, fun, *args, scheduler=None, keep: bool = False, name: str | None = None):
        check_body(fun)
        return self.world.spawn(self._place(scheduler), fun, args, bool(keep), name)

    def spawn_collector(self, scheduler=None, name: str | None = None) -> Pid:
        return self.world.spawn(self._place(scheduler), collector, (), True, name)

    def open_trace_port(self, kind: str, *args, name: str | None = None, **kw) -> Port:
        """A tracer port (``file``, ``ip``, ``memory`` or ``null``): in the
        simulator each is a sink that keeps what the dispatcher writes to
        it, in order (what a file or a socket does with the bytes is not
        part of an outcome); ``name`` is its role in reports.  It stays open
        for the whole execution."""
        check_kind(kind)  # (as the emulator refuses it)
        return self.world.open_trace_port(name)

    def trace(self, pid_spec, how, flags, tracer=None) -> int:
        flags = _flags(flags)
        if tracer is not None:
            flags.append((Atom("tracer"), tracer))
        return self.world.bif("trace", _atom(pid_spec), how, flags)

    def trace_pattern(self, mfa, match_spec, flags=()) -> int:
        mfa = tuple(_atom(x) for x in mfa) if type(mfa) in (tuple, list) else _atom(mfa)
        return self.world.bif("trace_pattern", mfa, match_spec, _flags(flags))

    def set_system_seq_tracer(self, tracer):
        return self.world.bif("set_system_seq_tracer", tracer)

    def get_system_seq_tracer(self):
        return self.world.bif("get_system_seq_tracer")

    def system_monitor(self, *args):
        return self.world.bif("system_monitor", *_monitor_args(args))

    def system_profile(self, *args):
        return self.world.bif("system_profile", *_monitor_args(args))

    def trace_info(self, what, item):
        return self.world.bif("trace_info", _atom(what), _atom(item))

    def register(self, name, pid) -> Atom:
        name = _atom(name)
        if type(name) is not Atom:
            raise BadArg(f"registered name must be an atom, not {name!r}")
        if not self.world.register(name, pid):
            raise BadArg(f"cannot register {name!r} for {pid!r}")
        if self.world.smp:
            self.world.settle()
        return Atom("true")

    def exit(self, pid, reason) -> Atom:
        if type(pid) is not Pid:
            raise BadArg(f"exit/2 needs a pid, not {pid!r}")
        self.world.exit(pid, _atom(reason))
        return Atom("true")

    def define(self, module, function, fn) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise BadArg(f"{module}:{function} must be an async def function")
        arity = len(inspect.signature(fn).parameters) - 1
        if arity < 0:
            raise BadArg(f"{module}:{function} must take the process handle first")
        self.world.define((_atom(module), _atom(function), arity), fn)

    def messages(self, pid: Pid) -> list:
        p = self.world.proc(pid)
        if p is None or p.kept is None:
            raise BadArg(f"{pid!r} is not a collector")
        return list(p.kept)

    def is_alive(self, pid: Pid) -> bool:
        p = self.world.proc(pid)
        return p is not None and p.status != "exited"
