"""``smp-emu explore``: every interleaving of the dispatcher's queue with the
state changes, each one run on the real emulator.

The SMP build decides a system message when the dispatcher thread takes it
off the queue, not when it is made: a state change (a new seq tracer, a new
monitor, a killed tracer, a cleared profiler) made while messages wait lands
between two of them, wherever the ``sys_trace_rwmtx`` lets the writer in.
An explore scenario (TOML, ``smp/app/examples/explore/``) names the messages to
queue (processes that each do one thing under a held dispatcher) and the
changes to make, in order.  A *schedule* says after how many queued
messages each change is made (``replace@1 kill@3``); the explorer runs
schedules on a fresh smp emulator each (``Emulator.step_dispatcher``
dispatches the queue message by message between the changes) and groups
them by outcome: the receiver or drop reason of every queued message, what
each process received, the tracer state once the queue is dispatched and
the changes' return values.

Partial-order reduction: a change and a message commute when the message's
deliver/drop decision reads nothing the change writes and vice versa (a
TRACE message reads its tracer's liveness, not the seq tracer; a SYSMON
message reads and, on failure, clears the monitor, never the profiler).
Two schedules that order every dependent (change, message) pair alike are
equivalent; the explorer runs one of each class, the one with the earliest
positions (the shortest).  The number of classes is counted exactly; up to
``max_messages`` x ``max_changes`` every class is run, beyond that a seeded
random sample of them.

The same scenario runs once in nonsmp mode, which has one outcome (no
dispatcher: every message is delivered when it is made, before any
change); the report names the smp outcomes nonsmp cannot produce and the
``#ifdef ERTS_SMP`` of the seed that makes the difference.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import re
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from html import escape
from importlib import resources
from typing import Any

import click

from smp.app.scenario import MAX_ATOM, read_file, read_toml
from smp.app.workloads import Bound
from smp.core.bifs import MAX_SMALL
from smp.core.errors import BadArg, Error, ScenarioError, SmpError
from smp.core.pretty import format_term
from smp.core.terms import Atom, Pid
from smp.emulator import Emulator

__all__ = [
    "explore",
    "load_explore_scenario",
    "explore_example_names",
    "parse_schedule",
    "format_schedule",
    "ExploreResult",
    "ExploreError",
    "explore_command",
    "explore_html",
    "count_classes",
    "canonical_classes",
    "canonicalize",
]

MAX_MESSAGES = 12  # exhaustive up to this many queued messages ...
MAX_CHANGES = 4  # ... and this many changes; beyond, a seeded sample
SAMPLES = 40  # classes a sample runs
EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130

QUEUE_ACTIONS = ("send", "seq_send", "gc", "spin", "crash")
CHANGE_ACTIONS = ("seq_tracer", "system_monitor", "system_profile", "trace", "kill")
MONITOR_OPTIONS = {
    "long_gc": int,
    "long_schedule": int,
    "large_heap": int,
    "busy_port": bool,
    "busy_dist_port": bool,
}
PROFILE_OPTIONS = {
    "scheduler": bool,
    "runnable_procs": bool,
    "runnable_ports": bool,
    "exclusive": bool,
}
#: Every integer of an explore scenario, by path (``[]``: each element of an
#: array of tables), with its range and meaning: the one place they are written.
BOUNDS: dict[str, Bound] = {
    "queue[].count": Bound(int, 1, 1000, "messages (or yields) the queue process makes"),
    "queue[].label": Bound(int, 0, MAX_SMALL, "the seq_trace label of a seq_send"),
    "queue[].words": Bound(int, 1, 1_000_000_000, "heap words a gc process allocates"),
    "system_monitor.long_gc": Bound(int, 0, (1 << 32) - 1, "ms (0: off)"),
    "system_monitor.long_schedule": Bound(int, 0, (1 << 32) - 1, "ms (0: off)"),
    "system_monitor.large_heap": Bound(int, 0, MAX_SMALL, "heap words (0: off)"),
    "explore.max_messages": Bound(int, 0, 10_000, "every class is run up to this many messages"),
    "explore.max_changes": Bound(int, 0, 100, "... and this many changes"),
    "explore.samples": Bound(int, 0, 100_000, "classes a random sample runs"),
    "explore.seed": Bound(
        int, -(1 << 63), (1 << 63) - 1, "seed of the random sample", optional=True
    ),
}
_NAME = re.compile(r"^[a-z][A-Za-z0-9_-]*$")
_SYS_TAGS = {"trace", "trace_ts", "seq_trace", "monitor", "profile", "notify", "trace_delivered"}
_TS_TAGS = {"trace_ts", "profile"}


def _cut(v, width: int = 60) -> str:
    """``repr(v)`` cut to ``width`` characters: an error stays one short line."""
    r = repr(v)
    return r if len(r) <= width else r[: width - 3] + "..."


class ExploreError(SmpError):
    """A schedule could not be run as the scenario says (the queue differs
    from run to run, a step dispatched less than it should, ...)."""


# ====================================================================== bodies
async def explore_actor(proc, do, to, count, label, words):
    """A queue process: makes its messages, then receives forever (the
    emulator keeps what it gets: it is spawned with ``keep=True``)."""
    if do == "send":
        for i in range(count):
            await proc.send(to, (Atom("explore"), i))
    elif do == "seq_send":
        await proc.seq_trace("label", label)
        await proc.seq_trace("send", True)
        for i in range(count):
            await proc.send(to, (Atom("explore"), i))
        await proc.set_token([])
    elif do == "gc":
        await proc.allocate(words)
        await proc.garbage_collect()
    elif do == "spin":
        for _ in range(count):
            await proc.sleep(0)
    elif do == "crash":
        raise Error(Atom("explore_crash"))
    while True:
        await proc.receive()


# ====================================================================== scenarios
def explore_example_names() -> list[str]:
    """The explore scenarios shipped in ``smp/app/examples/explore``."""
    d = resources.files("smp.app") / "examples" / "explore"
    try:
        return sorted(x.name[:-5] for x in d.iterdir() if x.name.endswith(".toml"))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _example_path(name: str) -> str:
    return str(resources.files("smp.app") / "examples" / "explore" / f"{name}.toml")


def load_explore_scenario(src) -> dict:
    """An explore scenario from a dict, a TOML file or the name of a shipped
    example, checked; a ``ScenarioError`` names the file and the key."""
    if isinstance(src, dict):
        return _check(dict(src), "<scenario>")
    path = os.fspath(src)
    if not os.path.exists(path) and path in explore_example_names():
        path = _example_path(path)
    if not os.path.exists(path):
        known = ", ".join(explore_example_names())
        raise ScenarioError(
            f"{path}: no such explore scenario (a TOML file, or one of the examples: {known})"
        )
    # one reader for every scenario file: a size cap, UTF-8, a nesting
    # bound, and each failure one line naming the file (and the line)
    return _check(read_toml(read_file(path), path), path)


class _Checker:
    """Checks an explore scenario key by key; an error names the key."""

    def __init__(self, where: str):
        self.where = where
        self.names: list[str] = []

    def fail(self, key: str, msg: str):
        raise ScenarioError(f"{self.where}: {key}: {msg}")

    def keys(self, d, allowed, key: str) -> None:
        if type(d) is not dict:
            self.fail(key or "scenario", f"must be a table, not {_cut(d)}")
        for k in d:
            if k not in allowed:
                self.fail(f"{key}.{k}" if key else k, f"unknown key (known: {', '.join(allowed)})")

    def tables(self, data: dict, name: str) -> list:
        v = data.get(name, [])
        if type(v) is not list or not all(type(x) is dict for x in v):
            self.fail(name, f"must be an array of tables ([[{name}]]), not {_cut(v)}")
        return v

    def new_name(self, v, key: str) -> str:
        if type(v) is not str or not _NAME.match(v) or len(v) > MAX_ATOM:
            self.fail(
                key,
                "must be a name (a lower-case letter, then letters, digits, _ or -; "
                f"at most {MAX_ATOM} characters), not {_cut(v)}",
            )
        if v in self.names:
            self.fail(key, f"{_cut(v)} is used twice")
        self.names.append(v)
        return v

    def bounded(self, v, bound: str, key: str) -> None:
        """Fail unless ``v`` is within ``BOUNDS[bound]``."""
        err = BOUNDS[bound](v)
        if err:
            self.fail(key, f"{err}, not {_cut(v)}")

    def ref(self, v, key: str) -> str:
        if v not in self.names:
            self.fail(key, f"unknown process {_cut(v)} (known: {', '.join(self.names) or 'none'})")
        return v

    def flags(self, v, key: str) -> list:
        if type(v) is not list or not all(type(x) is str for x in v):
            self.fail(key, f"must be a list of trace flag names, not {_cut(v)}")
        return list(v)

    def role_opts(self, d, role: str, options: dict, key: str, extra=()) -> dict:
        """``{monitor|profiler = NAME | "undefined", option = value...}``."""
        self.keys(d, extra + (role,) + tuple(options), key)
        who = d.get(role)
        out: dict[str, Any] = {
            role: "undefined" if who == "undefined" else self.ref(who, f"{key}.{role}")
        }
        for k, t in options.items():
            if k in d:
                v = d[k]
                if t is int:
                    self.bounded(v, f"system_monitor.{k}", f"{key}.{k}")
                elif type(v) is not t:
                    self.fail(f"{key}.{k}", f"must be true or false, not {_cut(v)}")
                out[k] = v
        return out

    # -- sections -------------------------------------------------------------
    def processes(self, data: dict) -> list:
        out = []
        for i, p in enumerate(self.tables(data, "processes")):
            key = f"processes[{i}]"
            self.keys(p, ("name", "register"), key)
            reg = p.get("register")
            if reg is not None and (type(reg) is not str or not reg or len(reg) > MAX_ATOM):
                self.fail(f"{key}.register", f"must be a name, not {_cut(reg)}")
            out.append({"name": self.new_name(p.get("name"), f"{key}.name"), "register": reg})
        return out

    def setup(self, data: dict) -> dict:
        setup = data.get("setup", {})
        self.keys(setup, ("seq_tracer", "system_monitor", "system_profile", "trace"), "setup")
        st: dict[str, Any] = {
            "seq_tracer": None,
            "system_monitor": None,
            "system_profile": None,
            "trace": [],
        }
        if "seq_tracer" in setup:
            st["seq_tracer"] = self.ref(setup["seq_tracer"], "setup.seq_tracer")
        if "system_monitor" in setup:
            st["system_monitor"] = self.role_opts(
                setup["system_monitor"], "monitor", MONITOR_OPTIONS, "setup.system_monitor"
            )
        if "system_profile" in setup:
            st["system_profile"] = self.role_opts(
                setup["system_profile"], "profiler", PROFILE_OPTIONS, "setup.system_profile"
            )
        for i, t in enumerate(self.tables(setup, "trace")):
            key = f"setup.trace[{i}]"
            self.keys(t, ("tracee", "flags", "tracer"), key)
            st["trace"].append(
                {
                    "tracee": self.ref(t.get("tracee"), f"{key}.tracee"),
                    "flags": self.flags(t.get("flags", []), f"{key}.flags"),
                    "tracer": self.ref(t.get("tracer"), f"{key}.tracer"),
                }
            )
        return st

    def queue(self, data: dict) -> list:
        out = []
        for i, q in enumerate(self.tables(data, "queue")):
            key = f"queue[{i}]"
            self.keys(q, ("name", "do", "to", "count", "label", "words", "trace", "tracer"), key)
            self.new_name(q.get("name"), f"{key}.name")  # a queue process exists from here on
            do = q.get("do")
            if do not in QUEUE_ACTIONS:
                self.fail(f"{key}.do", f"must be one of {', '.join(QUEUE_ACTIONS)}, not {_cut(do)}")
            e = {
                "name": q["name"],
                "do": do,
                "to": None,
                "count": q.get("count", 1),
                "label": q.get("label", 0),
                "words": q.get("words", 30000),
                "trace": [],
                "tracer": None,
            }
            if do in ("send", "seq_send"):
                e["to"] = self.ref(q.get("to"), f"{key}.to")
            for k in ("count", "label", "words"):
                self.bounded(e[k], f"queue[].{k}", f"{key}.{k}")
            if "trace" in q:
                e["trace"] = self.flags(q["trace"], f"{key}.trace")
                e["tracer"] = self.ref(q.get("tracer"), f"{key}.tracer")
            out.append(e)
        if not out:
            self.fail("queue", "must name at least one process that makes messages")
        return out

    def change(self, c: dict, key: str, taken: list) -> dict:
        action = c.get("action")
        if action not in CHANGE_ACTIONS:
            self.fail(
                f"{key}.action", f"must be one of {', '.join(CHANGE_ACTIONS)}, not {_cut(action)}"
            )
        name = c.get("name", action)
        if type(name) is not str or not _NAME.match(name) or name in taken:
            self.fail(
                f"{key}.name", f"must be a name used once among the changes, not {_cut(name)}"
            )
        ch: dict[str, Any] = {"name": name, "action": action}
        if action == "seq_tracer":
            self.keys(c, ("name", "action", "tracer"), key)
            v = c.get("tracer")
            ch["tracer"] = False if v is False else self.ref(v, f"{key}.tracer")
        elif action in ("system_monitor", "system_profile"):
            role, options = (
                ("monitor", MONITOR_OPTIONS)
                if action == "system_monitor"
                else ("profiler", PROFILE_OPTIONS)
            )
            ch.update(self.role_opts(c, role, options, key, extra=("name", "action")))
        elif action == "trace":
            self.keys(c, ("name", "action", "tracee", "flags", "how", "tracer"), key)
            how = c.get("how", True)
            if type(how) is not bool:
                self.fail(f"{key}.how", f"must be true or false, not {_cut(how)}")
            ch.update(
                tracee=self.ref(c.get("tracee"), f"{key}.tracee"),
                how=how,
                flags=self.flags(c.get("flags", []), f"{key}.flags"),
                tracer=self.ref(c["tracer"], f"{key}.tracer") if "tracer" in c else None,
            )
        else:
            self.keys(c, ("name", "action", "target", "reason"), key)
            reason = c.get("reason", "kill")
            if type(reason) is not str or len(reason) > MAX_ATOM:
                self.fail(f"{key}.reason", f"must be an atom name, not {_cut(reason)}")
            ch.update(target=self.ref(c.get("target"), f"{key}.target"), reason=reason)
        return ch

    def changes(self, data: dict) -> list:
        out: list = []
        for i, c in enumerate(self.tables(data, "changes")):
            out.append(self.change(c, f"changes[{i}]", [x["name"] for x in out]))
        if not out:
            self.fail("changes", "must name at least one state change")
        return out

    def explore(self, data: dict) -> dict:
        ex = data.get("explore", {})
        self.keys(ex, ("max_messages", "max_changes", "samples", "seed"), "explore")
        out = {
            "max_messages": ex.get("max_messages", MAX_MESSAGES),
            "max_changes": ex.get("max_changes", MAX_CHANGES),
            "samples": ex.get("samples", SAMPLES),
            "seed": ex.get("seed"),
        }
        for k, v in out.items():
            self.bounded(v, f"explore.{k}", f"explore.{k}")
        return out


def _check(data: dict, where: str) -> dict:
    c = _Checker(where)
    c.keys(
        data,
        ("name", "description", "schedulers", "processes", "setup", "queue", "changes", "explore"),
        "",
    )
    n = data.get("schedulers", 1)
    if type(n) is not int or not 1 <= n <= 2:
        c.fail(
            "schedulers", f"must be 1 or 2 (each schedule starts an smp emulator), not {_cut(n)}"
        )
    sc: dict[str, Any] = {
        "name": data.get("name", os.path.splitext(os.path.basename(where))[0]),
        "description": data.get("description", ""),
        "source": where,
        "schedulers": n,
    }
    sc["processes"] = c.processes(data)
    sc["setup"] = c.setup(data)  # before the queue: the processes only
    sc["queue"] = c.queue(data)
    sc["changes"] = c.changes(data)
    sc["explore"] = c.explore(data)
    return sc


def describe_change(ch: dict) -> str:
    a = ch["action"]
    if a == "seq_tracer":
        return f"set_system_seq_tracer({'false' if ch['tracer'] is False else ch['tracer']})"
    if a in ("system_monitor", "system_profile"):
        role = "monitor" if a == "system_monitor" else "profiler"
        who = ch[role]
        if who == "undefined":
            return f"{a}(undefined)"
        opts = [
            k if v is True else f"{{{k},{v}}}"
            for k, v in ch.items()
            if k not in ("name", "action", role) and v is not False
        ]
        return f"{a}({who}, [{','.join(opts)}])"
    if a == "trace":
        fl = list(ch["flags"]) + ([f"{{tracer,{ch['tracer']}}}"] if ch["tracer"] else [])
        return f"trace({ch['tracee']}, {str(ch['how']).lower()}, [{','.join(fl)}])"
    return f"exit({ch['target']}, {ch['reason']})"


# ====================================================================== schedules
def format_schedule(changes: list, positions) -> str:
    """``replace@1 kill@3``: each change after that many queued messages."""
    return " ".join(f"{c['name']}@{p}" for c, p in zip(changes, positions, strict=False))


def parse_schedule(text: str, changes: list, n: int | None = None) -> tuple:
    """The positions of ``change@k`` text (space or comma separated, every
    change once, positions not decreasing in the changes' order)."""
    parts = [p for p in re.split(r"[\s,]+", text.strip()) if p]
    by = {}
    for part in parts:
        m = re.match(r"^([A-Za-z0-9_-]+)@(\d+)$", part)
        if not m:
            raise BadArg(f"schedule {text!r}: {part!r} is not change@k")
        if m.group(1) in by:
            raise BadArg(f"schedule {text!r}: {m.group(1)} is given twice")
        by[m.group(1)] = int(m.group(2))
    names = [c["name"] for c in changes]
    unknown = sorted(set(by) - set(names))
    if unknown or set(by) != set(names):
        raise BadArg(
            f"schedule {text!r}: give every change once: {', '.join(names)}"
            + (f" (unknown: {', '.join(unknown)})" if unknown else "")
        )
    pos = tuple(by[x] for x in names)
    if any(a > b for a, b in zip(pos, pos[1:], strict=False)):
        raise BadArg(
            f"schedule {text!r}: the changes are made in the order "
            f"{', '.join(names)}, so their positions cannot decrease"
        )
    if n is not None and pos and pos[-1] > n:
        raise BadArg(f"schedule {text!r}: only {n} messages are queued")
    return pos


def canonicalize(positions, deps: list) -> tuple:
    """The earliest schedule equivalent to ``positions``: each change moved
    back to just after the last message it depends on (or the previous
    change).  ``deps[j]`` are the (1-based) queue positions of the messages
    change ``j`` does not commute with."""
    out, prev = [], 0
    for p, d in zip(positions, deps, strict=False):
        last = max((i for i in d if i <= p), default=0)
        prev = max(prev, last)
        out.append(prev)
    return tuple(out)


def canonical_classes(deps: list):
    """Every equivalence class, by its earliest schedule, in a fixed order
    (all changes first, then later and later)."""
    k = len(deps)

    def rec(j, prev):
        if j == k:
            yield ()
            return
        for q in [prev] + [i for i in sorted(deps[j]) if i > prev]:
            for rest in rec(j + 1, q):
                yield (q,) + rest

    yield from rec(0, 0)


def count_classes(deps: list) -> int:
    """How many classes there are (exact, without listing them)."""
    k = len(deps)
    ds = [sorted(d) for d in deps]

    @lru_cache(maxsize=None)
    def c(j, prev):
        if j == k:
            return 1
        return c(j + 1, prev) + sum(c(j + 1, i) for i in ds[j] if i > prev)

    return c(0, 0)


# ---------------------------------------------------------------- footprints
def _roles(sc: dict) -> dict:
    """Who can hold each role at some point: the conservative candidates a
    message's decision may read the liveness of."""
    seq, mon, prof = set(), set(), set()
    st = sc["setup"]
    if st["seq_tracer"]:
        seq.add(st["seq_tracer"])
    if st["system_monitor"] and st["system_monitor"]["monitor"] != "undefined":
        mon.add(st["system_monitor"]["monitor"])
    if st["system_profile"] and st["system_profile"]["profiler"] != "undefined":
        prof.add(st["system_profile"]["profiler"])
    for c in sc["changes"]:
        if c["action"] == "seq_tracer" and c["tracer"] is not False:
            seq.add(c["tracer"])
        elif c["action"] == "system_monitor" and c["monitor"] != "undefined":
            mon.add(c["monitor"])
        elif c["action"] == "system_profile" and c["profiler"] != "undefined":
            prof.add(c["profiler"])
    logger = {p["name"] for p in sc["processes"] if p["register"] == "error_logger"}
    tracers = {t["tracer"] for t in st["trace"]} | {q["tracer"] for q in sc["queue"] if q["tracer"]}
    tracers |= {c["tracer"] for c in sc["changes"] if c["action"] == "trace" and c["tracer"]}
    return {"seq": seq, "mon": mon, "prof": prof, "reg": logger, "tracers": tracers}


def change_footprint(ch: dict, roles: dict) -> tuple[set, set]:
    """(reads, writes) of a change: the parts of the state it reads and
    changes.  ``("proc", X)`` is X's liveness and tracer mark."""
    a = ch["action"]
    if a == "seq_tracer":
        return ({("proc", ch["tracer"])} if ch["tracer"] else set()), {"seq"}
    if a == "system_monitor":
        return ({("proc", ch["monitor"])} if ch["monitor"] != "undefined" else set()), {"mon"}
    if a == "system_profile":
        return ({("proc", ch["profiler"])} if ch["profiler"] != "undefined" else set()), {"prof"}
    if a == "trace":
        reads = {("proc", ch["tracee"])} | {("proc", t) for t in roles["tracers"]}
        writes = {("flags", ch["tracee"])}
        if ch["tracer"] and ch["how"]:
            reads.add(("proc", ch["tracer"]))
            writes.add(("proc", ch["tracer"]))
        return reads, writes
    x = ch["target"]
    writes = {("proc", x), ("flags", x)}
    for role in ("seq", "mon", "prof", "reg"):
        if x in roles[role]:
            writes.add(role)
    return set(), writes


def message_footprint(mtype: str, to_name, roles: dict) -> tuple[set, set]:
    """(reads, writes) of the dispatcher's decision on one message
    (``sys_msg_dispatcher_func`` and ``sys_msg_disp_failure``)."""
    if mtype in ("TRACE", "PROC_MSG"):
        return {("proc", to_name)}, set()
    if mtype == "ERRLGR":
        return {"reg"} | {("proc", x) for x in roles["reg"]}, set()
    role = {"SEQTRACE": "seq", "SYSMON": "mon", "SYSPROF": "prof"}[mtype]
    return {role} | {("proc", x) for x in roles[role]}, {role}


def dependent(cfp: tuple, mfp: tuple) -> bool:
    (cr, cw), (mr, mw) = cfp, mfp
    return bool(cw & (mr | mw) or mw & (cr | cw))


# ====================================================================== one run
def _msg_type(to, msg) -> str:
    if to == Atom("error_logger"):
        return "ERRLGR"
    tag = msg[0] if type(msg) is tuple and msg else None
    return {
        "trace": "TRACE",
        "trace_ts": "TRACE",
        "seq_trace": "SEQTRACE",
        "monitor": "SYSMON",
        "profile": "SYSPROF",
        "notify": "ERRLGR",
    }.get(str(tag) if type(tag) is Atom else "", "PROC_MSG")


class _Names:
    """Pids by role name in one run (and back), to compare runs."""

    def __init__(self):
        self.pid: dict[str, Pid] = {}
        self.name: dict[Pid, str] = {}
        self.others: dict[Pid, str] = {}  # pids no process of the scenario has

    def add(self, name: str, pid: Pid) -> None:
        self.pid[name], self.name[pid] = pid, name

    def norm(self, t):
        """The term with pids as their names and timestamps as ``ts``."""
        if type(t) is Pid:
            if t in self.name:
                return Atom(self.name[t])
            if t not in self.others:
                self.others[t] = f"pid{len(self.others) + 1}"
            return Atom(self.others[t])
        if type(t) is tuple:
            if (
                len(t) >= 4
                and type(t[0]) is Atom
                and (str(t[0]) in _TS_TAGS or (str(t[0]) == "seq_trace" and len(t) == 4))
            ):
                t = t[:-1] + (Atom("ts"),)
            return tuple(self.norm(x) for x in t)
        if type(t) is list:
            return [self.norm(x) for x in t]
        return t

    def text(self, t) -> str:
        if t is None:
            return "nil"
        out = format_term(self.norm(t))
        if "<" in out:  # pids printed inside strings (an error report's text)
            for pid, name in self.name.items():
                out = out.replace(repr(pid), name)
        return out


def _is_sys(msg) -> bool:
    return type(msg) is tuple and bool(msg) and type(msg[0]) is Atom and str(msg[0]) in _SYS_TAGS


def _atoms(flags) -> list:
    return [Atom(f) for f in flags]


def _opts(d: dict, options: dict) -> list:
    out = []
    for k in options:
        if k in d:
            v = d[k]
            if options[k] is bool:
                if v:
                    out.append(Atom(k))
            else:
                out.append((Atom(k), v))
    return out


def _apply(vm, names: _Names, ch: dict):
    """Make one change; its return value (or the error) as text."""
    a = ch["action"]
    try:
        if a == "seq_tracer":
            r = vm.set_system_seq_tracer(
                Atom("false") if ch["tracer"] is False else names.pid[ch["tracer"]]
            )
        elif a == "system_monitor":
            r = (
                vm.system_monitor(Atom("undefined"))
                if ch["monitor"] == "undefined"
                else vm.system_monitor(names.pid[ch["monitor"]], _opts(ch, MONITOR_OPTIONS))
            )
        elif a == "system_profile":
            r = (
                vm.system_profile(Atom("undefined"), [])
                if ch["profiler"] == "undefined"
                else vm.system_profile(names.pid[ch["profiler"]], _opts(ch, PROFILE_OPTIONS))
            )
        elif a == "trace":
            r = vm.trace(
                names.pid[ch["tracee"]],
                ch["how"],
                _atoms(ch["flags"]),
                tracer=names.pid[ch["tracer"]] if ch["tracer"] else None,
            )
        else:
            r = vm.exit(names.pid[ch["target"]], Atom(ch["reason"]))
        text = names.text(r)
    except BadArg as e:
        text = f"badarg ({e})"
    vm.run()
    return text


def _setup(vm, sc: dict, names: _Names) -> None:
    for p in sc["processes"]:
        names.add(p["name"], vm.spawn_collector())
    for p in sc["processes"]:
        if p["register"]:
            vm.register(p["register"], names.pid[p["name"]])
    st = sc["setup"]
    for t in st["trace"]:
        vm.trace(names.pid[t["tracee"]], True, _atoms(t["flags"]), tracer=names.pid[t["tracer"]])
    if st["seq_tracer"]:
        vm.set_system_seq_tracer(names.pid[st["seq_tracer"]])
    if st["system_monitor"]:
        m = st["system_monitor"]
        vm.system_monitor(names.pid[m["monitor"]], _opts(m, MONITOR_OPTIONS))
    if st["system_profile"]:
        p = st["system_profile"]
        vm.system_profile(names.pid[p["profiler"]], _opts(p, PROFILE_OPTIONS))
    vm.run()


def _state(vm, names: _Names) -> dict:
    return {
        "seq_tracer": names.text(vm.get_system_seq_tracer()),
        "system_monitor": names.text(vm.system_monitor()),
        "system_profile": names.text(vm.system_profile()),
        "dead": sorted(n for n, p in names.pid.items() if not vm.is_alive(p)),
    }


def run_schedule(sc: dict, positions, mode: str = "smp", expect_queue: list | None = None) -> dict:
    """Run the scenario once on a fresh emulator: build the queue behind a
    held dispatcher, then make change ``j`` after ``positions[j]`` queued
    messages were dispatched (``step_dispatcher``).  In nonsmp every
    message is delivered when it is made and the changes come after."""

    smp_mode = mode == "smp"
    t0 = time.monotonic()
    names = _Names()
    with Emulator(mode=mode, schedulers=sc["schedulers"] if smp_mode else 1) as vm:
        _setup(vm, sc, names)
        if smp_mode:
            vm.hold_dispatcher()
        start = {n: len(vm.messages(p)) for n, p in names.pid.items()}
        for q in sc["queue"]:
            pid = vm.spawn(
                explore_actor,
                q["do"],
                names.pid.get(q["to"]),
                q["count"],
                q["label"],
                q["words"],
                keep=True,
            )
            names.add(q["name"], pid)
            start[q["name"]] = 0
            if q["trace"]:
                vm.trace(pid, True, _atoms(q["trace"]), tracer=names.pid[q["tracer"]])
            vm.run()
        queue = []
        if smp_mode:
            for from_, to, msg in vm.queued_messages():
                queue.append(
                    {
                        "type": _msg_type(to, msg),
                        "from": names.text(from_),
                        "to": names.text(to),
                        "msg": names.text(msg),
                    }
                )
            if expect_queue is not None and [(q["type"], q["msg"]) for q in queue] != [
                (q["type"], q["msg"]) for q in expect_queue
            ]:
                raise ExploreError(
                    "the queue is not the same from run to run: first "
                    + "; ".join(q["msg"] for q in expect_queue)
                    + " now "
                    + "; ".join(q["msg"] for q in queue)
                )
        n = len(queue)
        if positions and positions[-1] > n and smp_mode:
            raise BadArg(
                f"schedule {format_schedule(sc['changes'], positions)}: only {n} "
                f"messages are queued"
            )
        fates: list = []
        results: list = []
        done = 0
        end = None

        def step(k):
            got = vm.step_dispatcher(k)
            if len(got) != k:
                raise ExploreError(f"step_dispatcher({k}) dispatched {len(got)} messages")
            for _from, receiver, msg, outcome in got:
                fates.append(
                    {"receiver": names.text(receiver), "outcome": outcome, "msg": names.text(msg)}
                )

        for j, ch in enumerate(sc["changes"]):
            if smp_mode and positions[j] > done:
                step(positions[j] - done)
                done = positions[j]
            if end is None and not smp_mode:
                end = {nm: len(vm.messages(p)) for nm, p in names.pid.items()}
            results.append(_apply(vm, names, ch))
        if smp_mode and n > done:
            step(n - done)
        if end is None:
            end = {nm: len(vm.messages(p)) for nm, p in names.pid.items()}
        received = {}
        for nm, p in names.pid.items():
            got = [names.text(m) for m in vm.messages(p)[start.get(nm, 0) : end[nm]] if _is_sys(m)]
            if got:
                received[nm] = got
        state = _state(vm, names)
        if smp_mode:
            vm.release_dispatcher()
        vm.run()
        stats = vm.statistics()
    if smp_mode:
        # what the dispatcher decided and what the processes got must agree
        want: dict[str, list] = {}
        for f in fates:
            if f["outcome"] == "delivered":
                want.setdefault(f["receiver"], []).append(f["msg"])
        if want != received:
            raise ExploreError(
                f"schedule {format_schedule(sc['changes'], positions)}: the "
                f"dispatcher delivered {want} but the processes got {received}"
            )
    return {
        "positions": tuple(positions) if smp_mode else None,
        "queue": queue,
        "fates": [
            (f["receiver"] if f["outcome"] == "delivered" else f"drop:{f['outcome']}")
            for f in fates
        ],
        "received": received,
        "state": state,
        "results": results,
        "made": stats["made"],
        "elapsed_s": round(time.monotonic() - t0, 3),
    }


def _observed(r: dict) -> str:
    """What both modes can show: who received which queued message, the
    state after the queue and the changes' return values."""
    return json.dumps(
        {"received": r["received"], "state": r["state"], "results": r["results"]}, sort_keys=True
    )


def _key(r: dict) -> str:
    return json.dumps(
        {
            "fates": r["fates"],
            "received": r["received"],
            "state": r["state"],
            "results": r["results"],
        },
        sort_keys=True,
    )


# ====================================================================== nonsmp reasons
WHY = {
    "SEQTRACE": (
        "seq_trace_output_generic: nonsmp looks the seq tracer up and sends to it when "
        "the message is made (erl_trace.c:1168-1174, #ifndef ERTS_SMP); smp queues the "
        "message (erl_trace.c:1241-1242, #ifdef ERTS_SMP: enqueue_sys_msg_unlocked("
        "SYS_MSG_TYPE_SEQTRACE, ...)) and sys_msg_dispatcher_func reads the seq tracer "
        "when it dispatches (erl_trace.c:3344)"
    ),
    "SYSMON": (
        "monitor_long_gc and the other monitor_* functions: nonsmp looks the monitor up "
        "when the event happens and skips the monitor's own event (erl_trace.c:2452-2456, "
        "#ifndef ERTS_SMP: if (!monitor_p || p == monitor_p) return); smp queues the event "
        "(erl_trace.c:2485-2486, #ifdef ERTS_SMP: enqueue_sys_msg(SYS_MSG_TYPE_SYSMON, "
        "...)) and the dispatcher reads the monitor, and drops an event from it, when it "
        "dispatches (erl_trace.c:3347-3353)"
    ),
    "SYSPROF": (
        "profile_runnable_proc and the other profile_* functions: nonsmp sends through "
        "profile_send to the profiler of the moment (erl_trace.c:3005-3006, #ifndef "
        "ERTS_SMP; erl_trace.c:598-640); smp queues the message (erl_trace.c:3009-3010: "
        "enqueue_sys_msg_unlocked(SYS_MSG_TYPE_SYSPROF, ...)) and the dispatcher reads the "
        "profiler when it dispatches (erl_trace.c:3357-3363)"
    ),
    "TRACE": (
        "send_to_tracer: nonsmp checks the tracer when the message is made and resets the "
        "tracee instead of sending to a dead one (erl_trace.c:161-172, the #else of "
        "ERTS_SMP: ERTS_GET_TRACER_REF); smp never finds the tracer invalid there "
        "(erl_trace.c:149-156) and the dispatcher checks it when it dispatches "
        "(erl_trace.c:3378-3382)"
    ),
    "ERRLGR": (
        "erts_queue_error_logger_message exists in smp only (erl_trace.c:3102-3105); "
        "nonsmp delivers the report to error_logger at once"
    ),
    "PROC_MSG": "erts_send_sys_msg_proc queues in smp only (erl_trace.c:3108-3112)",
}


def _why(sc: dict, deps: list, positions, types) -> list[dict]:
    """Why nonsmp cannot produce a schedule's outcome: each change that
    landed between the making and the dispatch of messages it does not
    commute with (in nonsmp every message is delivered when it is made)."""
    out = []
    for j, (ch, p) in enumerate(zip(sc["changes"], positions, strict=False)):
        late = [i for i in sorted(deps[j]) if i > p]
        if late:
            ts = sorted({types[i - 1] for i in late})
            out.append(
                {
                    "change": ch["name"],
                    "messages": [f"m{i}" for i in late],
                    "types": ts,
                    "text": f"{', '.join(f'm{i}' for i in late)} ({', '.join(ts)}) made "
                    f"before {ch['name']} and dispatched after it",
                }
            )
    if not out:
        out.append(
            {
                "change": None,
                "messages": [],
                "types": [],
                "text": "every change came after every queued message, as in nonsmp, yet "
                "the outcome differs: see the state and what each process received",
            }
        )
    return out


# ====================================================================== explore
@dataclass
class ExploreResult:
    scenario: dict
    source: str
    queue: list
    deps: list
    possible: int
    classes: int
    run: int
    exhaustive: bool
    pruned: bool
    seed: int | None
    outcomes: list
    runs: list
    nonsmp: dict | None
    elapsed_s: float
    single: bool = False
    interrupted: bool = False
    notes: list = field(default_factory=list)

    @property
    def coverage(self) -> float:
        return (
            1.0
            if self.classes == 0
            else min(1.0, len({tuple(r["class"]) for r in self.runs}) / self.classes)
        )

    def to_json(self) -> dict:
        sc = self.scenario
        return {
            "kind": "explore",
            "scenario": sc["name"],
            "source": self.source,
            "description": sc["description"],
            "mode": "smp",
            "schedulers": sc["schedulers"],
            "queue": [{"index": i + 1, **q} for i, q in enumerate(self.queue)],
            "changes": [
                {
                    "name": c["name"],
                    "call": describe_change(c),
                    "depends_on": [f"m{i}" for i in sorted(d)],
                }
                for c, d in zip(sc["changes"], self.deps, strict=False)
            ],
            "schedules": {
                "possible": self.possible,
                "classes": self.classes,
                "run": self.run,
                "outcomes": len(self.outcomes),
                "exhaustive": self.exhaustive,
                "pruned": self.pruned,
                "seed": self.seed,
                "coverage": round(self.coverage, 4),
                "elapsed_s": self.elapsed_s,
                "single": self.single,
                "interrupted": self.interrupted,
            },
            "outcomes": self.outcomes,
            "nonsmp": self.nonsmp,
            "runs": [
                {"schedule": r["schedule"], "outcome": r["outcome"], "elapsed_s": r["elapsed_s"]}
                for r in self.runs
            ],
            "notes": self.notes,
        }

    def text(self) -> str:
        return format_text(self.to_json())


def _source_arg(src) -> str:
    if isinstance(src, dict):
        return "SCENARIO.toml"
    s = os.fspath(src)
    return s


def explore(
    scenario,
    *,
    schedule: str | None = None,
    max_messages: int | None = None,
    max_changes: int | None = None,
    samples: int | None = None,
    seed: int | None = None,
    prune: bool = True,
    nonsmp: bool = True,
    progress=None,
) -> ExploreResult:
    """Run the explore scenario (a dict, a TOML path or a shipped example's
    name) once per class of equivalent schedules and group the runs by
    outcome; with ``schedule`` (``"replace@1 kill@3"``) run that one
    schedule only.  ``prune=False`` runs every schedule (up to the bound).
    ``progress(done, total, schedule)`` is called before each run."""
    sc = load_explore_scenario(scenario)
    ex = sc["explore"]
    max_messages = ex["max_messages"] if max_messages is None else max_messages
    max_changes = ex["max_changes"] if max_changes is None else max_changes
    samples = ex["samples"] if samples is None else samples
    seed = ex["seed"] if seed is None else seed
    t0 = time.monotonic()
    changes = sc["changes"]
    k = len(changes)
    roles = _roles(sc)
    single = None
    if schedule is not None:
        single = parse_schedule(schedule, changes)
    first_pos = single if single is not None else (0,) * k
    runs: list[dict] = []
    if progress:
        progress(0, None, format_schedule(changes, first_pos))
    first = run_schedule(sc, first_pos)
    queue = first["queue"]
    n = len(queue)
    types = [q["type"] for q in queue]
    mfps = [
        message_footprint(q["type"], q["to"] if q["type"] in ("TRACE", "PROC_MSG") else None, roles)
        for q in queue
    ]
    deps = [
        {i + 1 for i, mfp in enumerate(mfps) if dependent(change_footprint(c, roles), mfp)}
        for c in changes
    ]
    possible = math.comb(n + k, k)
    classes = count_classes(deps)
    notes: list[str] = []
    exhaustive = n <= max_messages and k <= max_changes
    interrupted = False
    first["class"] = canonicalize(first_pos, deps)
    runs.append(first)
    if single is not None:
        todo: list = []
        exhaustive = False
    elif not prune:
        if not exhaustive:
            raise BadArg(
                f"every schedule without pruning: {n} messages and {k} changes are "
                f"beyond the bound ({max_messages} messages, {max_changes} changes)"
            )
        todo = [
            p for p in itertools.combinations_with_replacement(range(n + 1), k) if p != first_pos
        ]
    elif exhaustive:
        todo = [c for c in canonical_classes(deps) if c != first_pos]
    else:
        if seed is None:
            seed = random.SystemRandom().randrange(1 << 32)
        rng = random.Random(seed)
        seen = {first_pos}
        todo = []
        last = canonicalize((n,) * k, deps)  # the nonsmp-like order, always
        if last not in seen:
            todo.append(last)
            seen.add(last)
        for _ in range(samples * 50):
            if len(seen) >= min(samples, classes):
                break
            slots = sorted(rng.sample(range(n + k), k))
            c = canonicalize(tuple(s - j for j, s in enumerate(slots)), deps)
            if c not in seen:
                seen.add(c)
                todo.append(c)
        notes.append(
            f"{n} messages and {k} changes are beyond the exhaustive bound "
            f"({max_messages} messages, {max_changes} changes): a random sample of "
            f"classes, seed {seed}"
        )
    total = 1 + len(todo)
    try:
        for i, pos in enumerate(todo):
            if progress:
                progress(i + 1, total, format_schedule(changes, pos))
            r = run_schedule(sc, pos, expect_queue=queue)
            r["class"] = canonicalize(pos, deps)
            runs.append(r)
    except KeyboardInterrupt:
        interrupted = True
        notes.append(f"interrupted after {len(runs)} of {total} schedules")
    # outcomes, each with its shortest schedule
    by_key: dict[str, dict] = {}
    for r in runs:
        r["schedule"] = format_schedule(changes, r["positions"])
        o = by_key.get(_key(r))
        if o is None:
            o = by_key[_key(r)] = {"runs": [], "r": r}
        o["runs"].append(r)
    ns = None
    if nonsmp:
        if progress:
            progress(total, total, "nonsmp")
        ns = run_schedule(sc, (), mode="nonsmp")
    outcomes = []
    for o in by_key.values():
        rs = sorted(o["runs"], key=lambda r: (sum(r["positions"]), r["positions"]))
        o["runs"] = rs
    ordered = sorted(by_key.values(), key=lambda o: _order(o["runs"][0]["positions"]))
    src = _source_arg(scenario)
    for idx, o in enumerate(ordered, 1):
        r = o["runs"][0]
        for x in o["runs"]:
            x["outcome"] = idx
        same = ns is not None and _observed(r) == _observed(ns)
        outcomes.append(
            {
                "index": idx,
                "schedule": r["schedule"],
                "positions": list(r["positions"]),
                "schedules": [x["schedule"] for x in o["runs"]],
                "fates": r["fates"],
                "received": r["received"],
                "state": r["state"],
                "results": r["results"],
                "nonsmp": None if ns is None else same,
                "why_not_nonsmp": []
                if ns is None or same
                else _why(sc, deps, r["positions"], types),
                "replay": f"smp-emu explore {src} --schedule '{r['schedule']}'",
                "key": _key(r),
            }
        )
    nonsmp_out = None
    if ns is not None:
        match = [o["index"] for o in outcomes if o["nonsmp"]]
        nonsmp_out = {
            "received": ns["received"],
            "state": ns["state"],
            "results": ns["results"],
            "same_as": match[0] if match else None,
            "outcomes": 1,
        }
    return ExploreResult(
        scenario=sc,
        source=src,
        queue=queue,
        deps=deps,
        possible=possible,
        classes=classes,
        run=len(runs),
        exhaustive=exhaustive and single is None,
        pruned=prune,
        seed=seed,
        outcomes=outcomes,
        runs=runs,
        nonsmp=nonsmp_out,
        elapsed_s=round(time.monotonic() - t0, 2),
        single=single is not None,
        interrupted=interrupted,
        notes=notes,
    )


def _order(pos) -> tuple:
    """Outcomes listed from the earliest changes to the latest."""
    return tuple(pos)


# ====================================================================== text
def _state_text(state: dict, keys) -> str:
    parts = []
    for k in keys:
        v = state[k]
        if k == "dead":
            parts.append("dead: " + (", ".join(v) if v else "none"))
        else:
            parts.append(f"{k} {v}")
    return "; ".join(parts)


def format_text(d: dict) -> str:
    """The terminal report of an explore result (its JSON)."""
    s = d["schedules"]
    lines = [
        f"explore {d['scenario']}: {len(d['queue'])} queued message(s), "
        f"{len(d['changes'])} change(s), smp with {d['schedulers']} scheduler(s) per schedule"
    ]
    if d.get("description"):
        lines.append(f"  {d['description']}")
    lines.append("queue (as the dispatcher holds it):")
    for q in d["queue"]:
        lines.append(f"  m{q['index']:<3} {q['type']:<8} from {q['from']:<8} {q['msg']}")
    lines.append("changes, in this order:")
    for c in d["changes"]:
        dep = (
            "does not commute with " + ", ".join(c["depends_on"])
            if c["depends_on"]
            else "commutes with every message"
        )
        lines.append(f"  {c['name']:<10} {c['call']}; {dep}")
    if s["single"]:
        lines.append(f"schedule {d['outcomes'][0]['schedule']}: run 1, {s['elapsed_s']:.1f} s")
    else:
        how = (
            "exhaustive"
            if s["exhaustive"]
            else f"a random sample, seed {s['seed']}, coverage {100 * s['coverage']:.1f} % "
            f"of the classes"
        )
        if not s["pruned"]:
            how = "every schedule, no pruning"
        lines.append(
            f"schedules: {s['possible']} possible, {s['classes']} classes, "
            f"{s['run']} run ({how}); {s['outcomes']} outcome(s); "
            f"{s['elapsed_s']:.1f} s"
        )
    outs = d["outcomes"]
    varying = [
        k
        for k in ("seq_tracer", "system_monitor", "system_profile", "dead")
        if len({json.dumps(o["state"][k]) for o in outs}) > 1
    ]
    res_vary = len({json.dumps(o["results"]) for o in outs}) > 1
    common = [
        k for k in ("seq_tracer", "system_monitor", "system_profile", "dead") if k not in varying
    ]
    every = ", in every outcome" if len(outs) > 1 else ""
    if outs and common:
        lines.append(f"state after the queue{every}: " + _state_text(outs[0]["state"], common))
    if outs and not res_vary:
        lines.append(
            f"the changes returned{every}: "
            + ", ".join(
                f"{c['name']} {r}" for c, r in zip(d["changes"], outs[0]["results"], strict=False)
            )
        )
    nq = len(d["queue"])
    head = ["#", "schedule" if s["single"] else "shortest schedule"] + [
        f"m{i + 1}" for i in range(nq)
    ]
    head += ["state after"] if varying else []
    head += ["changes returned"] if res_vary else []
    head += ["runs"] + (["nonsmp"] if d.get("nonsmp") else [])
    rows = []
    for o in outs:
        row = [str(o["index"]), o["schedule"]] + list(o["fates"])
        if varying:
            row.append(_state_text(o["state"], varying))
        if res_vary:
            row.append(", ".join(o["results"]))
        row.append(str(len(o["schedules"])))
        if d.get("nonsmp"):
            row.append("same" if o["nonsmp"] else "cannot")
        rows.append(row)
    lines.append("outcomes (mN: who got queued message N, or why it was dropped):")
    lines += _table(head, rows)
    ns = d.get("nonsmp")
    if ns:
        same = ns["same_as"]
        lines.append(
            "nonsmp: 1 outcome (no dispatcher: every message is delivered when it is "
            "made, before any change), "
            + (
                f"the same as #{same}"
                if same
                else "none of the smp outcomes: "
                + _state_text(
                    ns["state"], ("seq_tracer", "system_monitor", "system_profile", "dead")
                )
                + "; received "
                + json.dumps(ns["received"])
            )
        )
        cannot = [o for o in outs if o["nonsmp"] is False]
        if cannot:
            lines.append(
                "smp outcomes nonsmp cannot produce (nonsmp delivers every message when "
                "it is made):"
            )
            for o in cannot:
                lines.append(
                    f"  #{o['index']} ({o['schedule']}): "
                    + "; ".join(w["text"] for w in o["why_not_nonsmp"])
                )
            lines.append("  why, in the seed:")
            for t in sorted({t for o in cannot for w in o["why_not_nonsmp"] for t in w["types"]}):
                lines.append(f"    {t}: {WHY.get(t, WHY['PROC_MSG'])}")
    lines.append("replay an outcome:")
    for o in outs:
        lines.append(f"  #{o['index']}  {o['replay']}")
    for note in d.get("notes", []):
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"


def _table(head: list, rows: list) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=False)]
    out = ["  " + "  ".join(str(h).ljust(w) for h, w in zip(head, widths, strict=False)).rstrip()]
    for r in rows:
        out.append(
            "  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=False)).rstrip()
        )
    return out


# ====================================================================== report
def explore_html(d: dict) -> tuple[str, str]:
    """(title, body) of the report page for an explore result: the figures,
    the outcome tree (one level per queued message, a branch per receiver
    or drop reason, a leaf per outcome) and the outcome table."""
    s = d["schedules"]
    title = f"smp-emu explore: {d['scenario']}"
    parts = [
        f"<p>{len(d['queue'])} queued messages, {len(d['changes'])} changes: "
        f"{s['possible']} schedules possible, {s['classes']} classes, {s['run']} run"
        f"{' (exhaustive)' if s['exhaustive'] else ''}"
        f"{'' if s['exhaustive'] or s['seed'] is None else ', seed ' + str(s['seed'])}, "
        f"{s['outcomes']} outcomes, {s['elapsed_s']:.1f} s.</p>"
    ]
    parts.append(
        "<h2>Queue</h2><table><tr><th>#</th><th>type</th><th>from</th><th>message</th>"
        "</tr>"
        + "".join(
            f"<tr><td>m{q['index']}</td><td>{escape(q['type'])}</td>"
            f"<td>{escape(q['from'])}</td><td><code>{escape(q['msg'])}</code></td></tr>"
            for q in d["queue"]
        )
        + "</table>"
    )
    parts.append(
        "<h2>Changes</h2><ul>"
        + "".join(
            f"<li><code>{escape(c['name'])}</code>: <code>{escape(c['call'])}</code>, does not "
            f"commute with {escape(', '.join(c['depends_on']) or 'any message')}</li>"
            for c in d["changes"]
        )
        + "</ul>"
    )
    parts.append(
        "<h2>Outcomes as a tree</h2>"
        + _tree_svg(d)
        + "<p class='note'>One column per queued message, in queue order: a branch is "
        "the receiver that got it or <code>drop:reason</code>; a leaf is an outcome "
        "with its shortest schedule (<code>change@k</code>: made after k queued "
        "messages were dispatched).</p>"
    )
    rows = "".join(
        f"<tr><td>#{o['index']}</td><td><code>{escape(o['schedule'])}</code></td>"
        f"<td>{escape(_state_text(o['state'], ('seq_tracer', 'system_monitor', 'system_profile', 'dead')))}</td>"
        f"<td>{'' if o['nonsmp'] is None else ('same as nonsmp' if o['nonsmp'] else 'not in nonsmp')}</td>"
        f"<td class='why'>{escape('; '.join(w['text'] for w in o['why_not_nonsmp']))}</td></tr>"
        for o in d["outcomes"]
    )
    parts.append(
        "<h2>Outcomes</h2><table><tr><th>#</th><th>shortest schedule</th>"
        "<th>state after the queue</th><th>nonsmp</th><th>why nonsmp cannot</th></tr>"
        + rows
        + "</table>"
    )
    return title, "".join(parts)


def _tree_svg(d: dict) -> str:
    outs = d["outcomes"]
    nq = len(d["queue"])
    # the prefix tree of the fates
    root: dict = {"label": "queue", "kids": {}, "leaf": None}
    for o in outs:
        node = root
        for f in o["fates"]:
            node = node["kids"].setdefault(f, {"label": f, "kids": {}, "leaf": None})
        leaf = {
            "label": f"#{o['index']} {o['schedule']}" + (" (nonsmp)" if o["nonsmp"] else ""),
            "kids": {},
            "leaf": o,
        }
        node["kids"][f"#{o['index']}"] = leaf
    cw = 7  # about a character at 12 px
    longest = max([len(f) for o in outs for f in o["fates"]] + [5])
    col_w, row_h, pad = cw * longest + 40, 26, 12
    leaves: list = []
    pos: dict[int, tuple] = {}

    def layout(node, depth):
        kids = list(node["kids"].values())
        if not kids:
            y = pad + row_h * len(leaves) + row_h / 2
            leaves.append(node)
        else:
            ys = [layout(k, depth + 1) for k in kids]
            y = (ys[0] + ys[-1]) / 2
        pos[id(node)] = (pad + depth * col_w, y)
        return y

    layout(root, 0)
    width = pad * 2 + (nq + 1) * col_w + cw * max(len(n["label"]) for n in leaves) + 20
    height = pad * 2 + row_h * max(1, len(leaves)) + 20
    el = []

    def draw(node):
        x, y = pos[id(node)]
        for k in node["kids"].values():
            kx, ky = pos[id(k)]
            x0 = x + cw * len(node["label"]) + 4
            el.append(
                f"<path d='M{x0:.0f},{y:.0f} C{x0 + 20:.0f},{y:.0f} {kx - 20:.0f},"
                f"{ky:.0f} {kx - 4:.0f},{ky:.0f}' fill='none' stroke='#999'/>"
            )
            draw(k)
        leaf = node["leaf"]
        color = "#222"
        if leaf is not None:
            color = "#1a7f37" if leaf["nonsmp"] else "#b42318"
        elif node["label"].startswith("drop:"):
            color = "#b54708"
        el.append(
            f"<text x='{x:.0f}' y='{y + 4:.0f}' font-size='12' fill='{color}'>"
            f"{escape(node['label'])}</text>"
        )

    draw(root)
    heads = "".join(
        f"<text x='{pad + (i + 1) * col_w}' y='{height - 6}' font-size='11' "
        f"fill='#666'>m{i + 1} {escape(d['queue'][i]['type'])}</text>"
        for i in range(nq)
    )
    return (
        f"<figure class='plot' id='explore-tree'><figcaption>outcomes of "
        f"{escape(d['scenario'])}</figcaption><svg class='chart' xmlns='http://www.w3.org/2000/svg' "
        f"width='{width}' height='{height}' viewBox='0 0 {width} {height}' role='img'>"
        + "".join(el)
        + heads
        + "</svg></figure>"
    )


# ====================================================================== command line
def _make_command():

    @click.command("explore")
    @click.argument("scenario")
    @click.option(
        "--schedule",
        default=None,
        metavar="'CHANGE@K ...'",
        help="run this one schedule (each change after K queued messages) and print its outcome",
    )
    @click.option("--json", "as_json", is_flag=True, help="print the result as JSON on stdout")
    @click.option(
        "--max-messages",
        type=click.IntRange(0, 10_000),
        default=None,
        help=f"exhaustive up to this many queued messages (default {MAX_MESSAGES})",
    )
    @click.option(
        "--max-changes",
        type=click.IntRange(0, 100),
        default=None,
        help=f"... and this many changes (default {MAX_CHANGES}); beyond, a sample",
    )
    @click.option(
        "--samples",
        type=click.IntRange(1, 100_000),
        default=None,
        help=f"classes a random sample runs (default {SAMPLES})",
    )
    @click.option("--seed", type=int, default=None, help="seed of the random sample")
    @click.option(
        "--no-prune", is_flag=True, help="run every schedule, not one per class of equivalent ones"
    )
    @click.option("--no-nonsmp", is_flag=True, help="do not run the scenario in nonsmp mode")
    def explore_command(
        scenario, schedule, as_json, max_messages, max_changes, samples, seed, no_prune, no_nonsmp
    ):
        """Run SCENARIO once per distinct interleaving of its state changes
        with the dispatch of its queued messages and list the outcomes.

        SCENARIO is an explore scenario (TOML) or the name of a shipped one
        (seq, monitor, commute, races).  Each schedule runs on a fresh smp
        emulator, the dispatcher held and stepped message by message
        (Emulator.step_dispatcher); schedules that differ only in the order
        of a change and a message that commute are run once.  The scenario
        also runs in nonsmp mode, and the report names the smp outcomes
        nonsmp cannot produce.  Exit 1 when a schedule fails to run.

        \b
        Example:
          smp-emu explore seq
          smp-emu explore seq --schedule 'replace@1'
          smp-emu explore races --json > races.json && smp-emu report races.json -o races.html
        """
        tty = sys.stderr.isatty()

        def progress(i, total, sched):
            if tty:
                what = (
                    "the nonsmp run"
                    if sched == "nonsmp"
                    else f"schedule {i + 1}{'' if total is None else '/' + str(total)}: {sched}"
                )
                sys.stderr.write(f"\r\x1b[K{what}")
                sys.stderr.flush()

        try:
            r = explore(
                scenario,
                schedule=schedule,
                max_messages=max_messages,
                max_changes=max_changes,
                samples=samples,
                seed=seed,
                prune=not no_prune,
                nonsmp=not no_nonsmp and schedule is None,
                progress=progress,
            )
        except ScenarioError as e:
            click.echo(f"smp-emu: {e}", err=True)
            sys.exit(EXIT_USAGE)
        except BadArg as e:
            click.echo(f"smp-emu: {e}", err=True)
            sys.exit(EXIT_USAGE)
        except KeyboardInterrupt:
            sys.exit(EXIT_INTERRUPTED)
        except SmpError as e:
            click.echo(f"smp-emu: {e}", err=True)
            sys.exit(EXIT_FAILED)
        finally:
            if tty:
                sys.stderr.write("\r\x1b[K")
        d = r.to_json()
        if as_json:
            sys.stdout.write(json.dumps(d, indent=2) + "\n")
        else:
            sys.stdout.write(format_text(d))
        if r.interrupted:
            sys.exit(EXIT_INTERRUPTED)

    return explore_command


explore_command = _make_command()
