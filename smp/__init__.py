"""An emulator of the Erlang VM's SMP trace subsystem (``erl_trace.c``).

``smp.Emulator(mode="nonsmp")`` runs one scheduler OS process with synchronous
delivery; ``smp.Emulator(mode="smp", schedulers=N)`` runs N scheduler
processes and a dispatcher process that delivers or drops every trace,
seq_trace, system_monitor and system_profile message as the SMP build does.

The package is layered; each folder's docstring says what it may import:
``smp.core`` (the rules, pure) <- ``smp.wire`` (frames, codecs) <-
``smp.ports`` (trace ports, reading traces) <- ``schedulers``, ``dispatcher``
<- ``smp.emulator`` (the controller) <- ``smp.app`` (command line, scenarios,
reports).  Every name here is loaded on first use, so a process that needs
only the core (a scheduler, the dispatcher) does not load the controller and
the application above it.
"""

import importlib

__all__ = [
    "Emulator",
    "Statistics",
    "explore",
    "prove",
    "Atom",
    "Pid",
    "Port",
    "Ref",
    "ImproperList",
    "Map",
    "Fun",
    "ExportFun",
    "BitString",
    "A",
    "atom",
    "charlist",
    "format_term",
    "format_dbg",
    "read_trace",
    "merge_traces",
    "SmpError",
    "BadArg",
    "EmulatorTimeout",
    "StartupError",
    "DecodeError",
    "TracePortError",
    "ProtocolError",
    "ScenarioError",
    "SchedulerLost",
    "DispatcherLost",
    "Unanswered",
    "ErlangException",
    "Error",
    "Throw",
    "Exit",
]

#: Every name is loaded on first use, from the module that holds it: ``import
#: smp`` loads nothing else (the command's entry point, ``smp.app.entry``,
#: then takes a Ctrl-C while the command line loads).
_LAZY = {
    "Emulator": "smp.emulator",
    "Statistics": "smp.api.statistics",
    "explore": "smp.app.explore",
    "prove": "smp.app.explore.proof",
    **dict.fromkeys(
        (
            "BadArg",
            "DecodeError",
            "DispatcherLost",
            "EmulatorTimeout",
            "ErlangException",
            "Error",
            "Exit",
            "ProtocolError",
            "ScenarioError",
            "SchedulerLost",
            "SmpError",
            "StartupError",
            "Throw",
            "TracePortError",
            "Unanswered",
        ),
        "smp.core.errors",
    ),
    "format_term": "smp.core.pretty",
    **dict.fromkeys(
        (
            "A",
            "Atom",
            "BitString",
            "ExportFun",
            "Fun",
            "ImproperList",
            "Map",
            "Pid",
            "Port",
            "Ref",
            "atom",
            "charlist",
        ),
        "smp.core.terms",
    ),
    "format_dbg": "smp.ports.dbgfmt",
    "read_trace": "smp.ports.reader",
    "merge_traces": "smp.ports.reader",
}


#: the subpackages ``smp.NAME`` reaches without an import of its own (the
#: docs name ``smp.sim.SimError``, ``smp.sim.sample``, ...), loaded when
#: first used
_SUBPACKAGES = frozenset({"api", "app", "core", "ports", "sim", "wire"})


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"smp.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'smp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
