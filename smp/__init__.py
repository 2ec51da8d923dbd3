"""An emulator of the Erlang VM's SMP trace subsystem (``erl_trace.c``).

``smp.Emulator(mode="nonsmp")`` runs one scheduler OS process with synchronous
delivery; ``smp.Emulator(mode="smp", schedulers=N)`` runs N scheduler
processes and a dispatcher process that delivers or drops every trace,
seq_trace, system_monitor and system_profile message as the SMP build does.
"""

from .dbgfmt import format_dbg
from .emulator import Emulator
from .errors import (
    BadArg,
    DecodeError,
    DispatcherLost,
    EmulatorTimeout,
    ErlangException,
    Error,
    Exit,
    ProtocolError,
    ScenarioError,
    SchedulerLost,
    SmpError,
    StartupError,
    Throw,
    TracePortError,
)
from .explore import explore
from .reader import merge_traces, read_trace
from .terms import (
    A,
    Atom,
    BitString,
    ExportFun,
    Fun,
    ImproperList,
    Map,
    Pid,
    Port,
    Ref,
    atom,
    charlist,
    format_term,
)

__all__ = [
    "Emulator",
    "explore",
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
    "ErlangException",
    "Error",
    "Throw",
    "Exit",
]
