"""Trace flags, as the process and port flag words of OTP 17 (``global.h``).

``erlang:trace/3`` takes a list of flag atoms; the emulator keeps them as a bit
word per tracee, as the VM does, so that the seed's tests (``IS_TRACED_FL``,
``ARE_TRACE_FLAGS_ON``, ``TRACEE_FLAGS``) read the same here.
"""

from __future__ import annotations

from smp.core.errors import BadArg
from smp.core.terms import Atom, Term, atom_of

__all__ = [
    "flags_of",
    "monitor_args_of",
    "F_TRACE_SEND",
    "F_TRACE_RECEIVE",
    "F_TRACE_SOS",
    "F_TRACE_SOS1",
    "F_TRACE_SOL",
    "F_TRACE_SOL1",
    "F_TRACE_CALLS",
    "F_TIMESTAMP",
    "F_TRACE_PROCS",
    "F_TRACE_SCHED",
    "F_TRACE_SCHED_EXIT",
    "F_TRACE_GC",
    "F_TRACE_ARITY_ONLY",
    "F_TRACE_RETURN_TO",
    "F_TRACE_SILENT",
    "F_TRACE_SCHED_NO",
    "F_TRACE_PORTS",
    "F_TRACE_SCHED_PORTS",
    "F_TRACE_SCHED_PROCS",
    "F_TRACER",
    "F_SENSITIVE",
    "F_EXCEPTION_TRACE",
    "TRACEE_FLAGS",
    "TRACEE_MODIFIER_FLAGS",
    "PORT_ONLY_FLAGS",
    "PROC_ONLY_FLAGS",
    "FLAG_NAMES",
    "parse_trace_flags",
    "flags_to_list",
    "flag_bit",
    "TRACE_FLAG_NAMES",
    "CPU_TIMESTAMP",
]

F_TRACE_SEND = 1 << 0
F_TRACE_RECEIVE = 1 << 1
F_TRACE_SOS = 1 << 2
F_TRACE_SOS1 = 1 << 3
F_TRACE_SOL = 1 << 4
F_TRACE_SOL1 = 1 << 5
F_TRACE_CALLS = 1 << 6
F_TIMESTAMP = 1 << 7
F_TRACE_PROCS = 1 << 8
F_TRACE_SCHED = 1 << 9
F_TRACE_SCHED_EXIT = 1 << 10
F_TRACE_GC = 1 << 11
F_TRACE_ARITY_ONLY = 1 << 12
F_TRACE_RETURN_TO = 1 << 13
F_TRACE_SILENT = 1 << 14
F_TRACE_SCHED_NO = 1 << 15
F_TRACE_PORTS = 1 << 16
F_TRACE_SCHED_PORTS = 1 << 17
F_TRACE_SCHED_PROCS = 1 << 18
# Not tracee flags: the tracer mark and the sensitive process flag.
F_TRACER = 1 << 24
F_SENSITIVE = 1 << 25
F_EXCEPTION_TRACE = 1 << 26

TRACEE_FLAGS = (1 << 19) - 1
# erl_bif_trace.c: which tracees trace(all|existing, ...) walks for a mask.
TRACEE_MODIFIER_FLAGS = F_TRACE_SILENT | F_TIMESTAMP | F_TRACE_SCHED_NO
PORT_ONLY_FLAGS = F_TRACE_PORTS | F_TRACE_SCHED_PORTS
PROC_ONLY_FLAGS = TRACEE_FLAGS & ~(PORT_ONLY_FLAGS | TRACEE_MODIFIER_FLAGS)

# The atom of each flag, in the order erl_bif_trace.c builds trace_info's list
# with FLAG(...) calls; CONS prepends, so the returned list is this reversed.
FLAG_NAMES: list[tuple[int, str]] = [
    (F_TRACE_SEND, "send"),
    (F_TRACE_RECEIVE, "receive"),
    (F_TRACE_SOS, "set_on_spawn"),
    (F_TRACE_CALLS, "call"),
    (F_TRACE_PROCS, "procs"),
    (F_TRACE_SOS1, "set_on_first_spawn"),
    (F_TRACE_SOL, "set_on_link"),
    (F_TRACE_SOL1, "set_on_first_link"),
    (F_TRACE_SCHED, "running"),
    (F_TRACE_SCHED_EXIT, "exiting"),
    (F_TRACE_GC, "garbage_collection"),
    (F_TIMESTAMP, "timestamp"),
    (F_TRACE_ARITY_ONLY, "arity"),
    (F_TRACE_RETURN_TO, "return_to"),
    (F_TRACE_SILENT, "silent"),
    (F_TRACE_SCHED_NO, "scheduler_id"),
    (F_TRACE_PORTS, "ports"),
    (F_TRACE_SCHED_PORTS, "running_ports"),
    (F_TRACE_SCHED_PROCS, "running_procs"),
]
_BY_NAME = {name: bit for bit, name in FLAG_NAMES}
#: Every name trace/3 takes in its flag list: the tracee flags, 'all' and
#: 'cpu_timestamp' (the {tracer, T} tuple aside).
TRACE_FLAG_NAMES = ("all",) + tuple(name for _, name in FLAG_NAMES) + ("cpu_timestamp",)
# 'all' sets every tracee flag (erl_bif_trace.c: mask |= TRACEE_FLAGS).
_ALL = TRACEE_FLAGS
CPU_TIMESTAMP = "cpu_timestamp"
# OTP 18's timestamp flags: not in the 17.x seed, refused as 17.x refuses them
OTP18_TIMESTAMPS = ("monotonic_timestamp", "strict_monotonic_timestamp")


def _name(flag: Term) -> str:
    if type(flag) is Atom:
        return flag.name
    if isinstance(flag, str):
        return flag
    raise BadArg(f"trace flag must be an atom, not {flag!r}")


def parse_trace_flags(flags: Term) -> tuple[int, bool, object]:
    """Parse an ``erlang:trace/3`` flag list.

    Returns ``(bits, cpu_timestamp, tracer)`` where ``tracer`` is the value of
    a ``{tracer, T}`` element or ``None``.

    Raises:
        BadArg: naming the flag that is not a trace flag.
    """
    if not isinstance(flags, (list, tuple)):
        raise BadArg(f"trace flags must be a list, not {flags!r}")
    bits = 0
    cpu_ts = False
    tracer = None
    for f in flags:
        if isinstance(f, tuple):
            if len(f) == 2 and _name(f[0]) == "tracer":
                tracer = f[1]
                continue
            raise BadArg(f"bad trace flag {f!r}")
        name = _name(f)
        if name == "all":
            bits |= _ALL
        elif name == CPU_TIMESTAMP:
            cpu_ts = True
        elif name in _BY_NAME:
            bits |= _BY_NAME[name]
        elif name in OTP18_TIMESTAMPS:
            raise BadArg(
                f"unknown trace flag '{name}': it came with OTP 18; the 17.x "
                "trace/3 has timestamp and cpu_timestamp only"
            )
        else:
            raise BadArg(f"unknown trace flag '{name}'")
    return bits, cpu_ts, tracer


def flag_bit(flag: Term) -> int | None:
    """The bit of one tracee flag atom (``erts_trace_flag2bit``), or None."""
    name = flag.name if type(flag) is Atom else flag
    return _BY_NAME.get(name) if isinstance(name, str) else None


def flags_to_list(bits: int) -> list[Atom]:
    """Return the flag atoms of ``bits`` in the order ``trace_info/2`` gives."""
    out: list[Atom] = []
    for bit, name in FLAG_NAMES:
        if bits & bit:
            out.insert(0, Atom(name))
    return out


def flags_of(flags: Term) -> list[Term]:
    """A flag list as Python users write it (strings for atoms, also as the
    key of a ``(key, value)`` pair).  Anything but a list (or a tuple) of
    flags is a ``BadArg``, as a flag list that is not a proper list is
    ``badarg`` in the VM."""
    if type(flags) not in (list, tuple):
        raise BadArg(f"flags must be a list, not {flags!r}")
    out: list[Term] = []
    for f in flags:
        if isinstance(f, tuple) and len(f) == 2 and isinstance(f[0], str):
            out.append((Atom(f[0]), f[1]))
        else:
            out.append(atom_of(f))
    return out


def monitor_args_of(args: tuple[Term, ...]) -> list[Term]:
    """``system_monitor``/``system_profile`` arguments as Python users write
    them: ``"undefined"``, option lists, ``(Pid, Options)``."""
    out: list[Term] = []
    for a in args:
        if isinstance(a, list):
            a = flags_of(a)
        elif type(a) is tuple and len(a) == 2 and isinstance(a[1], list):
            a = (a[0], flags_of(a[1]))
        out.append(atom_of(a))
    return out
