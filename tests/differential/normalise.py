"""Normalise a trace from the node and one from the emulator the same way, and compare.

The pipeline, for each side:

1. node only: the OTP 25 -> 17.x rules of ``otp_differences.py``;
2. the noise rules below, on both sides: each names what it drops or blurs
   and why that part is not the trace subsystem's (node-specific sizes and
   timings, the emulator's own port drivers and module names);
3. renaming by first appearance: the scenario's role pids first, under their
   role names (``<tracer>``, ``<a>``), then any other pid as ``<P1>``,
   ``<P2>``..., ports ``<Port1>``..., refs ``<R1>``...; pids printed inside
   strings are renamed with them;
4. streams: messages grouped by what they are about (the tracee of a trace
   message, the subject of a monitor or profile message, the process that
   made a seq_trace event), since across schedulers only per-tracee order is
   promised; timestamps are renamed ``<T1>``, ``<T2>``... within a stream,
   so both sides must agree that a stream's timestamps are distinct and in
   the same places.

Placeholders are atoms whose names start with ``<`` (or ``_`` for a blurred
value), so normalised terms print in Erlang syntax.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from smp.core.pretty import format_term
from smp.core.terms import Atom, ImproperList, Pid, Port, Ref

from .otp_differences import apply_differences

__all__ = ["NOISE_RULES", "OPTIONAL_NOISE", "Side", "compare", "normalise", "stream_key"]

_a = Atom
am_trace, am_trace_ts, am_seq_trace = _a("trace"), _a("trace_ts"), _a("seq_trace")
am_monitor, am_profile = _a("monitor"), _a("profile")
BLUR = _a("_")
_SCHED_WHAT = {_a(w) for w in ("in", "out", "in_exiting", "out_exiting", "out_exited")}


# ------------------------------------------------------------------ noise rules
def _blur_values(info: list) -> list:
    return [(kv[0], BLUR) if type(kv) is tuple and len(kv) == 2 else kv for kv in info]


def gc_sizes(m, ctx):
    """Heap sizes in gc_start/gc_end: the emulator's GC cost model is its own
    (README: GC cost model); the tags and their order are compared."""
    if (
        type(m) is tuple
        and len(m) >= 4
        and m[0] in (am_trace, am_trace_ts)
        and m[2] in (_a("gc_start"), _a("gc_end"))
        and type(m[3]) is list
    ):
        return m[:3] + (_blur_values(m[3]),) + m[4:]
    return m


def monitor_values(m, ctx):
    """Sizes and times in long_gc, large_heap and long_schedule: real times and
    heap sizes on the node, the cost model in the emulator; tags, order and
    the in/out MFAs are compared."""
    if type(m) is tuple and len(m) == 4 and m[0] is am_monitor and type(m[3]) is list:
        if m[2] in (_a("long_gc"), _a("large_heap")):
            return m[:3] + (_blur_values(m[3]),)
        if m[2] == _a("long_schedule"):
            return m[:3] + ([(k, BLUR) if k == _a("timeout") else (k, v) for k, v in m[3]],)
    return m


def scheduler_ids(m, ctx):
    """Which scheduler ran what: timing (the node has 2 schedulers, nonsmp
    mode 1); the presence and place of the id is compared."""
    if (
        type(m) is tuple
        and m
        and m[0] in (am_trace, am_trace_ts)
        and len(m) > 4
        and m[2] in _SCHED_WHAT
        and len(m) - (m[0] is am_trace_ts) == 5
        and type(m[3]) is int
    ):
        return m[:3] + (_a("<S>"),) + m[4:]
    if type(m) is tuple and len(m) == 6 and m[0] is am_profile and m[1] == _a("scheduler"):
        return (m[0], m[1], _a("<S>"), m[3], _a("<N>"), m[5])
    return m


def foreign_subjects(m, ctx):
    """Events about processes and ports the scenario did not make: the node's
    own (code_server, erl_prim_loader, the scenario's coordinator, the tty
    port...), the emulator's helpers (the process that delivers a kick).
    Only in scenarios that watch the whole system (system_monitor,
    system_profile)."""
    if (
        type(m) is tuple
        and len(m) >= 2
        and m[0] in (am_profile, am_monitor, am_trace, am_trace_ts)
        and type(m[1]) in (Pid, Port)
        and m[1] not in ctx.role_pids
    ):
        return None
    return m


def port_io_tasks(m, ctx):
    """Port scheduling for I/O readiness ({trace, Port, in|out, 0}): the OS
    pipe behind the node's spawn driver tells the port when `cat` has
    answered; the emulator's drivers (README: the port drivers are the
    emulator's own) deliver their output inside the command and have no I/O
    tasks.  Every other callback (open, command) is compared."""
    if (
        type(m) is tuple
        and len(m) >= 4
        and m[0] in (am_trace, am_trace_ts)
        and type(m[1]) is Port
        and m[2] in (_a("in"), _a("out"))
        and m[-1] == 0
    ):
        return None
    return m


#: Rules every scenario gets, in order.
NOISE_RULES = [gc_sizes, monitor_values, scheduler_ids]
#: Rules a scenario opts into by name.
OPTIONAL_NOISE = {f.__name__: f for f in (foreign_subjects, port_io_tasks)}


# ------------------------------------------------------------------ renaming
@dataclass
class _Ctx:
    role_pids: set
    names: dict = field(default_factory=dict)  # Pid/Port/Ref -> placeholder atom
    texts: dict = field(default_factory=dict)  # "<0.80.0>" -> "<a>"
    counts: dict = field(default_factory=dict)
    aliases: dict = field(default_factory=dict)  # Atom -> Atom

    def name(self, x, prefix: str, label: str | None = None) -> Atom:
        ph = self.names.get(x)
        if ph is None:
            if label is None:
                self.counts[prefix] = self.counts.get(prefix, 0) + 1
                label = f"{prefix}{self.counts[prefix]}"
            ph = self.names[x] = _a(f"<{label}>")
            if type(x) is Pid:
                self.texts[_pid_text(x)] = ph.name
        return ph


def _pid_text(p: Pid) -> str:
    return f"<0.{p.number}.{p.serial}>"


_PID_TEXT = re.compile(r"<\d+\.\d+\.\d+>")


def _rename(t, ctx: _Ctx):
    tp = type(t)
    if tp is Pid:
        return ctx.name(t, "P")
    if tp is Port:
        return ctx.name(t, "Port")
    if tp is Ref:
        return ctx.name(t, "R")
    if tp is Atom:
        return ctx.aliases.get(t, t)
    if tp is tuple:
        return tuple(_rename(e, ctx) for e in t)
    if tp is list:
        if t and all(type(c) is int and (32 <= c < 127 or c in (9, 10)) for c in t):
            text = "".join(map(chr, t))
            if _PID_TEXT.search(text):
                text = _PID_TEXT.sub(lambda mo: ctx.texts.get(mo.group(0), mo.group(0)), text)
                # module names printed inside the text (a crash report's
                # stack trace) get the same aliases as module atoms
                for old, new in ctx.aliases.items():
                    text = text.replace(format_term(old), format_term(new))
                return [ord(c) for c in text]
            return t
        return [_rename(e, ctx) for e in t]
    if tp is ImproperList:
        return ImproperList([_rename(e, ctx) for e in t.elements], _rename(t.tail, ctx))
    return t


# ------------------------------------------------------------------ streams
def stream_key(m) -> str:
    """What a (renamed) message is about: its stream."""
    if type(m) is tuple and len(m) >= 2:
        if m[0] in (am_trace, am_trace_ts, am_monitor, am_profile):
            return format_term(m[1])
        if m[0] is am_seq_trace and len(m) >= 3 and type(m[2]) is tuple and len(m[2]) == 5:
            kind, _, frm, to, _ = m[2]
            return "seq_trace " + format_term(to if kind == _a("receive") else frm)
    return "other"


def _ts_index(m) -> int | None:
    """Where a message's timestamp is, if it has one."""
    if type(m) is not tuple or not m:
        return None
    if m[0] is am_trace_ts or m[0] is am_profile:
        return len(m) - 1
    if m[0] is am_seq_trace and len(m) == 4:
        return 3
    return None


def _is_ts(x) -> bool:
    return type(x) is tuple and len(x) == 3 and all(type(v) is int and v >= 0 for v in x)


@dataclass
class Side:
    """One side's normalised trace."""

    streams: dict  # stream key -> [message]
    table_lines: int = 0  # node: messages the OTP-differences table changed
    table_rules: dict = field(default_factory=dict)


def normalise(
    msgs: list,
    roles: list,
    *,
    node: bool,
    aliases: dict | None = None,
    noise: tuple = (),
    as_set: Callable | None = None,
) -> Side:
    """Normalise one side.  ``roles`` is ``[(role_name, pid)]``; ``aliases``
    renames atoms (the emulator's module names to the node's); ``noise`` names
    optional noise rules; ``as_set(msg)`` picks messages compared as a set of
    distinct shapes rather than a sequence."""
    table_lines, used = 0, {}
    if node:
        msgs, table_lines, used = apply_differences(msgs)
    ctx = _Ctx(role_pids={p for _, p in roles}, aliases=dict(aliases or {}))
    rules = NOISE_RULES + [OPTIONAL_NOISE[n] for n in noise]
    kept = []
    for m in msgs:
        for rule in rules:
            m = rule(m, ctx)
            if m is None:
                break
        if m is not None:
            kept.append(m)
    for name, pid in roles:
        ctx.name(pid, "P", label=name)
    renamed = [_rename(m, ctx) for m in kept]
    streams: dict[str, list] = {}
    for m in renamed:
        streams.setdefault(stream_key(m), []).append(m)
    for key, ms in streams.items():
        stamps: dict = {}
        out = []
        for m in ms:
            i = _ts_index(m)
            if i is not None and _is_ts(m[i]):
                ph = stamps.setdefault(m[i], _a(f"<T{len(stamps) + 1}>"))
                m = m[:i] + (ph,) + m[i + 1 :]
            out.append(m)
        if as_set is not None:
            seq = [m for m in out if not as_set(m)]
            shapes = sorted({format_term(_untime(m)) for m in out if as_set(m)})
            out = seq + [_a(f"<shape {s}>") for s in shapes]
        streams[key] = out
    return Side(streams, table_lines, used)


def _untime(m):
    i = _ts_index(m)
    return m if i is None else m[:i] + (_a("<T>"),) + m[i + 1 :]


def _lines(side: Side) -> list[str]:
    out = []
    for key in sorted(side.streams):
        out.append(f"== {key}")
        out.extend("   " + format_term(m) for m in side.streams[key])
    return out


def compare(node: Side, emu: Side) -> str | None:
    """None when both sides agree, else a unified diff (node = 17.x as
    expected, emulator = what it made)."""
    if node.streams == emu.streams:
        return None
    diff = difflib.unified_diff(
        _lines(node), _lines(emu), "node (OTP 25 -> 17.x)", "emulator", lineterm="", n=3
    )
    return "\n".join(diff)
