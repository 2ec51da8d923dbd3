"""Scenario files: TOML that says what ``smp-emu`` runs, checked against a schema.

Runs in the user's process (the CLI).  ``load_scenario(path)`` parses the
TOML, checks every key against ``SCHEMA`` (every number against its entry in
``BOUNDS``: finite, of its type and within its range; each workload's
parameters against ``smp.app.workloads.WORKLOADS``, and all the groups'
processes together against ``MAX_PROCESSES``), cross-checks the names tracers
and groups refer to, fills in defaults and returns a plain dict.  Every error
is a one-line ``ScenarioError`` whose message names the file, the line and the
bad key ("demo.toml:12: groups[1].count: must be an integer >= 1, not 0"),
hostile input included: a file that is not UTF-8, nests deeper than
``MAX_NESTING`` or is larger than ``MAX_FILE_BYTES``, an atom longer than 255
characters, match-spec text nested too deep.  TOML has no positions after
parsing, so the line is found again in the raw text (``_KeyLines``, one linear
pass per line).  The schema mirrors what ``smp.app.workloads.execute`` sets up,
in the order ``erl_trace.c``'s users do it: tracers, default tracing,
processes, per-process tracing, call patterns, seq_trace, system_monitor,
system_profile, then faults while it runs.
"""

from __future__ import annotations

import os
import re
import tomllib
from importlib import resources
from typing import Any

from smp.app.workloads import MAX_PROCESSES, WORKLOADS, Bound, check_params, processes_of
from smp.core.bifs import MAX_SMALL
from smp.core.dispatch import DROP_REASONS
from smp.core.errors import BadArg, ScenarioError
from smp.core.flags import TRACE_FLAG_NAMES
from smp.core.matchspec import DBG_SHORTCUTS, compile_match_spec
from smp.core.termtext import parse_term

__all__ = [
    "load_scenario",
    "parse_scenario",
    "BOUNDS",
    "Bound",
    "MAX_NESTING",
    "read_toml",
    "read_file",
    "default_scenario_text",
    "example_names",
    "example_path",
    "parse_term",
    "match_spec_from",
    "TRACE_FLAG_NAMES",
    "FAULT_ACTIONS",
    "TRACER_KINDS",
    "NONSMP_RULE",
    "EXPECT_KINDS",
    "EXPECT_EVENTS",
    "EXPECT_REASONS",
    "EXPECT_KEYS",
]

TRACER_KINDS = ("collector", "file", "ip", "memory", "null")
# one rule for a scenario file and the command line alike
NONSMP_RULE = (
    "nonsmp always runs exactly 1 scheduler; the scheduler count (schedulers, "
    "--schedulers) is the smp one, used when the scenario runs in smp mode "
    "(--mode smp, compare), and not used in nonsmp mode"
)
FAULT_ACTIONS = (
    "kill_tracer",
    "replace_seq_tracer",
    "replace_monitor",
    "replace_profiler",
    "kill_processes",
    "set_sensitive",
)

#: the kinds of an ``[[expect]]`` clause (checked by ``smp.app.compare.check_expect``)
EXPECT_KINDS = ("receives_every", "no_drop", "order", "count")
#: the events ``receives_every`` counts
EXPECT_EVENTS = ("send",)
#: the reasons ``no_drop`` names: the dispatcher's, or any
EXPECT_REASONS = ("any",) + DROP_REASONS
#: the keys each kind of clause takes (``kind`` besides), the required ones first
EXPECT_KEYS = {
    "receives_every": ("tracer", "group", "event"),
    "no_drop": ("reason",),
    "order": ("tracer",),
    "count": ("tracer", "min", "max"),
}
_EXPECT_REQUIRED = {
    "receives_every": ("tracer", "group"),
    "order": ("tracer",),
    "count": ("tracer",),
}
#: workloads whose processes send no numbered (Tag, Sender, Seq) messages
_UNNUMBERED = ("calls", "gc")

# ---------------------------------------------------------------- schema
# A field is (kind, default, extra); kind is one of
#   "str", "bool", "num" (an integer or a float: its type and range are its
#   entry in BOUNDS, under the key's path), "enum" (extra: choices),
#   "strlist" (extra: choices or None),
#   "table" (extra: schema dict), "tables" (array of tables; extra: schema dict),
#   "any" (checked elsewhere).
# default REQUIRED means the key must be present.
REQUIRED = object()

_TRACER = {
    "name": ("str", REQUIRED, None),
    "kind": ("enum", "collector", TRACER_KINDS),
    "path": ("str", None, None),
    "wrap_suffix": ("str", None, None),
    "wrap_size": ("num", 1 << 20, None),
    "wrap_count": ("num", 8, None),
    "port": ("num", 0, None),
    "queue_size": ("num", 1000, None),
    "heavy_every": ("num", 0, None),
    "print": ("bool", True, None),
}
_GROUP = {
    "name": ("str", REQUIRED, None),
    "workload": ("enum", REQUIRED, None),  # choices filled in from WORKLOADS
    "count": ("num", 1, None),
    "scheduler": ("num", None, None),
    "trace": ("strlist", [], TRACE_FLAG_NAMES),
    "tracer": ("str", None, None),
    "sensitive": ("bool", False, None),
    "params": ("any", {}, None),
}
_TRACE = {
    "pids": ("enum", REQUIRED, ("new", "all", "existing")),
    "flags": ("strlist", REQUIRED, TRACE_FLAG_NAMES),
    "tracer": ("str", REQUIRED, None),
}
_PATTERN = {
    "mfa": ("any", REQUIRED, None),
    "match_spec": ("any", True, None),
    "flags": ("strlist", ["local"], ("global", "local", "meta")),
    "meta_tracer": ("str", None, None),
}
_SEQ = {
    "tracer": ("str", REQUIRED, None),
}
_MONITOR = {
    "monitor": ("str", REQUIRED, None),
    "long_gc": ("num", 0, None),
    "long_schedule": ("num", 0, None),
    "large_heap": ("num", 0, None),
    "busy_port": ("bool", False, None),
    "busy_dist_port": ("bool", False, None),
}
_PROFILE = {
    "profiler": ("str", REQUIRED, None),
    "scheduler": ("bool", False, None),
    "runnable_procs": ("bool", False, None),
    "runnable_ports": ("bool", False, None),
    "exclusive": ("bool", False, None),
}
_FAULT = {
    "action": ("enum", REQUIRED, FAULT_ACTIONS),
    "target": ("str", None, None),
    "at": ("num", 0.0, None),
    "every": ("num", None, None),
    "times": ("num", None, None),
    "count": ("num", 1, None),
    "reason": ("str", "kill", None),
    "value": ("bool", True, None),
    "replace": ("bool", True, None),
    "may_fail": ("bool", False, None),
}
_EXPECT = {
    "kind": ("enum", REQUIRED, EXPECT_KINDS),
    "tracer": ("str", None, None),
    "group": ("str", None, None),
    "event": ("enum", "send", EXPECT_EVENTS),
    "reason": ("enum", "any", EXPECT_REASONS),
    "min": ("num", 0, None),
    "max": ("num", None, None),
}
_DURATION = {
    "seconds": ("num", None, None),
    "operations": ("num", None, None),
}
SCHEMA = {
    "name": ("str", "scenario", None),
    "description": ("str", "", None),
    "mode": ("enum", "smp", ("smp", "nonsmp")),
    "schedulers": ("num", 2, None),
    "seed": ("num", 0, None),
    "timeout": ("num", 120.0, None),
    "duration": ("table", {}, _DURATION),
    "tracers": ("tables", [], _TRACER),
    "groups": ("tables", REQUIRED, _GROUP),
    "trace": ("tables", [], _TRACE),
    "patterns": ("tables", [], _PATTERN),
    "seq_trace": ("table", None, _SEQ),
    "system_monitor": ("table", None, _MONITOR),
    "system_profile": ("table", None, _PROFILE),
    "faults": ("tables", [], _FAULT),
    # recon_trace's caps: at most N trace messages, or N per window of ms
    "max_messages": ("num", None, None),
    "rate": ("any", None, None),
    # what the run must guarantee, checked after it (and on every explored outcome)
    "expect": ("tables", [], _EXPECT),
}

# ---------------------------------------------------------------- bounds
#: an upper bound for counters that only have to fit a long run
_MANY = 1_000_000_000
_DAY = 86_400.0
#: Every numeric key of a run scenario, by path (``[]``: each element of an
#: array of tables; ``rate[0]``: an element of a list), with its type, range
#: and meaning: the one place they are written.  The checker looks each
#: number up here (a numeric key missing from the table is a KeyError in the
#: tests, not a silent pass); the workloads' parameters have theirs in
#: ``smp.app.workloads.WORKLOADS``.  A number must be finite and within its
#: range; the ranges are what a run on a small machine can honour.
BOUNDS: dict[str, Bound] = {
    "schedulers": Bound(int, 1, 64, "scheduler OS processes of an smp run"),
    "seed": Bound(int, -(1 << 63), (1 << 63) - 1, "seed of the run's random choices"),
    "timeout": Bound(
        float, 0, _DAY, "seconds the whole run may take, its set-up included", lo_open=True
    ),
    "duration.seconds": Bound(
        float, 0, _DAY, "seconds the workload runs", lo_open=True, optional=True
    ),
    "duration.operations": Bound(
        int, 1, _MANY, "operations each workload process does", optional=True
    ),
    "tracers[].wrap_size": Bound(int, 1, 1 << 32, "bytes of a wrap file before the next"),
    "tracers[].wrap_count": Bound(int, 1, 1000, "wrap files kept"),
    "tracers[].port": Bound(int, 0, 65535, "TCP port of an ip tracer (0: any free one)"),
    "tracers[].queue_size": Bound(
        int, 1, 1_000_000, "messages an ip tracer queues before it drops"
    ),
    "tracers[].heavy_every": Bound(
        int, 0, _MANY, "a memory port turns heavy every this many messages (0: never)"
    ),
    "groups[].count": Bound(int, 1, 10_000, "instances of the group's workload"),
    "groups[].scheduler": Bound(
        int, 1, 64, "the scheduler the group's processes run on", optional=True
    ),
    "patterns[].mfa[2]": Bound(int, 0, 255, 'the arity of a call pattern (or "_")'),
    "system_monitor.long_gc": Bound(
        int, 0, (1 << 32) - 1, "ms a collection may take before a long_gc message (0: off)"
    ),
    "system_monitor.long_schedule": Bound(
        int, 0, (1 << 32) - 1, "ms a process may run before a long_schedule message (0: off)"
    ),
    "system_monitor.large_heap": Bound(
        int, 0, MAX_SMALL, "heap words before a large_heap message (0: off)"
    ),
    "faults[].at": Bound(float, 0, _DAY, "seconds into the run of the first firing"),
    "faults[].every": Bound(
        float, 0, _DAY, "seconds between two firings", lo_open=True, optional=True
    ),
    "faults[].times": Bound(int, 1, 100_000, "how many times the fault fires", optional=True),
    "faults[].count": Bound(int, 1, 100_000, "processes a fault kills or marks at each firing"),
    "max_messages": Bound(
        int, 1, _MANY, "stop tracing after this many trace messages", optional=True
    ),
    "rate[0]": Bound(int, 1, _MANY, "rate = [N, ms]: at most N trace messages ..."),
    "rate[1]": Bound(int, 1, 86_400_000, "... per window of ms milliseconds"),
    "expect[].min": Bound(int, 0, _MANY, "a count clause: at least this many trace messages"),
    "expect[].max": Bound(
        int, 0, _MANY, "a count clause: at most this many trace messages", optional=True
    ),
}
#: TOML nested deeper than this (arrays and inline tables) is refused: no
#: scenario value needs more than a few levels, and Python's TOML reader
#: gives up near 400
MAX_NESTING = 64
#: an Erlang atom has at most 255 characters (longer is a system_limit)
MAX_ATOM = 255
#: a scenario file larger than this is refused before it is read
MAX_FILE_BYTES = 16 * 1024 * 1024


def _bound_key(path: tuple) -> str:
    """The BOUNDS key of a value's path: ``("groups", 1, "count")`` is
    ``groups[].count``."""
    out = ""
    for k in path:
        out += "[]" if isinstance(k, int) else (f".{k}" if out else k)
    return out


# ---------------------------------------------------------------- line finding
# Headers and key lines are read by hand, one pass over each line: a regular
# expression with nested quantifiers over the same characters backtracks in
# polynomial time on a line such as "[" and 20,000 spaces.
_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_WS = " \t\r"


def _skip_ws(line: str, i: int) -> int:
    n = len(line)
    while i < n and line[i] in _WS:
        i += 1
    return i


def _key_path(line: str, i: int) -> tuple[list[str], int] | None:
    """The dotted key at ``line[i:]`` (bare, "quoted" or 'literal' parts) and
    where it ends, or None; linear in the line's length."""
    parts: list[str] = []
    n = len(line)
    while True:
        i = _skip_ws(line, i)
        if i >= n:
            return None
        c = line[i]
        if c in "\"'":
            j = line.find(c, i + 1)
            if j < 0:
                return None
            parts.append(line[i + 1 : j])
            i = j + 1
        else:
            j = i
            while j < n and line[j] in _BARE:
                j += 1
            if j == i:
                return None
            parts.append(line[i:j])
            i = j
        i = _skip_ws(line, i)
        if i < n and line[i] == ".":
            i += 1
            continue
        return parts, i


def _header(line: str) -> tuple[bool, list[str]] | None:
    """``(is_array, key parts)`` of a ``[table]`` or ``[[array]]`` header line."""
    i = _skip_ws(line, 0)
    if not line.startswith("[", i):
        return None
    double = line.startswith("[[", i)
    kp = _key_path(line, i + (2 if double else 1))
    if kp is None:
        return None
    keys, i = kp
    close = "]]" if double else "]"
    if not line.startswith(close, i):
        return None
    i = _skip_ws(line, i + len(close))
    if i < len(line) and line[i] != "#":
        return None
    return double, keys


def _key_line(line: str) -> list[str] | None:
    """The key parts of a ``key = value`` line."""
    kp = _key_path(line, 0)
    if kp is None or not line.startswith("=", kp[1]):
        return None
    return kp[0]


class _KeyLines:
    """Where each key path of a TOML text is, found again in the raw lines.

    Paths use list indices for arrays of tables: ``("groups", 1, "count")``.
    """

    def __init__(self, text: str):
        self.lines: dict[tuple, int] = {}
        counts: dict[tuple, int] = {}
        current: tuple = ()
        in_multiline = False
        for no, line in enumerate(text.split("\n"), 1):
            if in_multiline:
                if line.count('"""') % 2 == 1 or line.count("'''") % 2 == 1:
                    in_multiline = False
                continue
            h = _header(line)
            if h is not None:
                double, keys = h
                path: list = []
                # resolve prefixes through arrays of tables opened so far
                for k in keys:
                    path.append(k)
                    n = counts.get(tuple(path))
                    if n is not None and not (double and len(path) == len(keys)):
                        path.append(n - 1)
                if double:
                    n = counts.get(tuple(path), 0)
                    counts[tuple(path)] = n + 1
                    path.append(n)
                current = tuple(path)
                self.lines.setdefault(current, no)
                self.lines.setdefault(current[:-1] if double else current, no)
                continue
            keys = _key_line(line)
            if keys is not None:
                path = current + tuple(keys)
                self.lines.setdefault(path, no)
                if line.count('"""') % 2 == 1 or line.count("'''") % 2 == 1:
                    in_multiline = True

    def find(self, path: tuple) -> int | None:
        """The line of ``path`` or of its nearest enclosing key."""
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return None


def _fmt_path(path: tuple) -> str:
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out or "(top level)"


class _Checker:
    def __init__(self, text: str, source: str):
        self.text = text
        self.source = source
        self._lines: _KeyLines | None = None

    def where(self, path: tuple) -> str:
        """``file:line: key`` of ``path``."""
        if self._lines is None:
            self._lines = _KeyLines(self.text)
        line = self._lines.find(path)
        return (
            f"{self.source}:{line}: {_fmt_path(path)}"
            if line
            else f"{self.source}: {_fmt_path(path)}"
        )

    def fail(self, path: tuple, message: str):
        raise ScenarioError(f"{self.where(path)}: {message}")

    # -- generic schema walk --------------------------------------------------
    def table(self, data: Any, schema: dict, path: tuple) -> dict:
        if not isinstance(data, dict):
            self.fail(path, f"must be a table, not {_show(data)}")
        for k in data:
            if k not in schema:
                self.fail(path + (k,), f"unknown key {k!r} (known: {', '.join(schema)})")
        out = {}
        for k, (kind, default, extra) in schema.items():
            if k not in data:
                if default is REQUIRED:
                    self.fail(path, f"missing required key {k!r}")
                out[k] = (
                    default()
                    if callable(default)
                    else (
                        list(default)
                        if isinstance(default, list)
                        else dict(default)
                        if isinstance(default, dict) and kind != "table"
                        else default
                    )
                )
                if kind == "table" and isinstance(default, dict):
                    out[k] = self.table({}, extra, path + (k,))
                continue
            out[k] = self.value(data[k], kind, extra, path + (k,))
        return out

    def value(self, v: Any, kind: str, extra, path: tuple):
        if kind == "str":
            if not isinstance(v, str):
                self.fail(path, f"must be a string, not {_show(v)}")
            return v
        if kind == "bool":
            if not isinstance(v, bool):
                self.fail(path, f"must be true or false, not {_show(v)}")
            return v
        if kind == "num":
            b = BOUNDS[_bound_key(path)]
            err = b(v)
            if err:
                self.fail(path, f"{err}, not {_show(v)}")
            return float(v) if b.kind is float else v
        if kind == "enum":
            if not isinstance(v, str) or (extra is not None and v not in extra):
                self.fail(path, f"must be one of {', '.join(extra or ())}, not {_show(v)}")
            return v
        if kind == "strlist":
            if not isinstance(v, list):
                self.fail(path, f"must be a list of strings, not {_show(v)}")
            for i, x in enumerate(v):
                if not isinstance(x, str):
                    self.fail(path, f"element {i + 1} must be a string, not {_show(x)}")
                if extra is not None and x not in extra:
                    self.fail(path, f"unknown value {x!r} (known: {', '.join(extra)})")
            return list(v)
        if kind == "table":
            return self.table(v, extra, path)
        if kind == "tables":
            if not isinstance(v, list):
                self.fail(path, f"must be an array of tables ([[{path[-1]}]]), not {_show(v)}")
            return [self.table(t, extra, path + (i,)) for i, t in enumerate(v)]
        return v


def _show(v: Any) -> str:
    """A value as an error shows it: one short line."""
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "a list"
    return _cut(v)


def _cut(v: Any, width: int = 60) -> str:
    """``repr(v)`` cut to ``width`` characters."""
    r = repr(v)
    return r if len(r) <= width else r[: width - 3] + "..."


_SHORT_MS = {
    "return_trace": "[{'_', [], [{return_trace}]}]",
    "exception_trace": "[{'_', [], [{exception_trace}]}]",
    "silent": "[{'_', [], [{silent, true}]}]",
}


def match_spec_from(v):
    """A scenario's ``match_spec``: true/false, a short name, or Erlang term
    text; ``ValueError`` for anything else (and for text that is no term)."""
    if v is True or v is False:
        return v
    if not isinstance(v, str):
        raise ValueError(
            "must be true, false, a short name (return_trace, x, c, cx, ...) or "
            f"Erlang term text in a string, not {_show(v)}"
        )
    if v in ("true", "false"):
        return v == "true"
    text = _SHORT_MS.get(v, v)
    if text in DBG_SHORTCUTS:
        text = DBG_SHORTCUTS[text]
    return parse_term(text)


# ---------------------------------------------------------------- cross checks
def _check_refs(c: _Checker, sc: dict) -> None:
    """Cross checks: names refer to tracers and groups that exist, match
    specs compile, the duration is one of seconds or operations, faults come
    while the run does."""
    tracers = _check_tracers(c, sc)

    def ref(path, name, pids_only=False, what="tracer"):
        if name not in tracers:
            c.fail(path, f"unknown {what} {name!r} (tracers: {', '.join(tracers) or 'none'})")
        if pids_only and tracers[name]["kind"] != "collector":
            c.fail(
                path,
                f"{what} {name!r} must be a collector process, not a {tracers[name]['kind']} port",
            )

    groups = _check_groups(c, sc, ref)
    for i, t in enumerate(sc["trace"]):
        ref(("trace", i, "tracer"), t["tracer"])
    _check_patterns(c, sc, ref)
    if sc["seq_trace"] is not None:
        ref(("seq_trace", "tracer"), sc["seq_trace"]["tracer"])
    if sc["system_monitor"] is not None:
        ref(("system_monitor", "monitor"), sc["system_monitor"]["monitor"], True, "monitor")
    if sc["system_profile"] is not None:
        ref(("system_profile", "profiler"), sc["system_profile"]["profiler"], what="profiler")
    d = sc["duration"]
    if d["seconds"] is not None and d["operations"] is not None:
        c.fail(("duration",), "give either 'seconds' or 'operations', not both")
    if d["seconds"] is None and d["operations"] is None:
        d["operations"] = 100
    _check_faults(c, sc, groups, ref)


def _check_tracers(c: _Checker, sc: dict) -> dict:
    tracers = {}
    for i, t in enumerate(sc["tracers"]):
        if t["name"] in tracers:
            c.fail(("tracers", i, "name"), f"duplicate tracer name {t['name']!r}")
        tracers[t["name"]] = t
        if t["kind"] == "file" and not t["path"]:
            c.fail(("tracers", i), "a file tracer needs a 'path'")

    return tracers


def _check_groups(c: _Checker, sc: dict, ref) -> dict:
    groups = {}
    for i, g in enumerate(sc["groups"]):
        path = ("groups", i)
        if g["name"] in groups:
            c.fail(path + ("name",), f"duplicate group name {g['name']!r}")
        groups[g["name"]] = g
        if g["workload"] not in WORKLOADS:
            c.fail(
                path + ("workload",),
                f"unknown workload {g['workload']!r} (workloads: {', '.join(WORKLOADS)})",
            )
        if g["trace"] and g["tracer"] is None:
            c.fail(path, "'trace' flags need a 'tracer'")
        if g["tracer"] is not None:
            ref(path + ("tracer",), g["tracer"])
        if g["scheduler"] is not None and g["scheduler"] > sc["schedulers"]:
            c.fail(path + ("scheduler",), f"must be <= schedulers ({sc['schedulers']})")
        if not isinstance(g["params"], dict):
            c.fail(path + ("params",), "must be a table")
        err = check_params(g["workload"], g["params"])
        if err:
            key, msg = err
            c.fail(path + ("params", key), msg)
    if not groups:
        c.fail(("groups",), "at least one group is needed")
    total = 0
    for i, g in enumerate(sc["groups"]):
        total += g["count"] * processes_of(g["workload"], g["params"])
        if total > MAX_PROCESSES:
            c.fail(
                ("groups", i),
                f"the groups up to this one spawn {total:,} processes: at most "
                f"{MAX_PROCESSES:,} in all (count x the workload's processes, summed)",
            )
    return groups


def _check_patterns(c: _Checker, sc: dict, ref) -> None:
    for i, p in enumerate(sc["patterns"]):
        path = ("patterns", i)
        mfa = p["mfa"]
        if (
            not isinstance(mfa, list)
            or len(mfa) != 3
            or not all(isinstance(x, str) for x in mfa[:2])
            or not (isinstance(mfa[2], int) and not isinstance(mfa[2], bool) or mfa[2] == "_")
        ):
            c.fail(path + ("mfa",), 'must be [Module, Function, Arity] like ["calls", "_", "_"]')
        for name in mfa[:2]:
            if len(name) > MAX_ATOM:
                c.fail(
                    path + ("mfa",),
                    f"an atom has at most {MAX_ATOM} characters (Erlang's system_limit), "
                    f"not {len(name):,}: {_show(name)}",
                )
        if mfa[2] != "_":
            err = BOUNDS["patterns[].mfa[2]"](mfa[2])
            if err:
                c.fail(path + ("mfa",), f"the arity {err}, not {mfa[2]}")
        try:
            ms = match_spec_from(p["match_spec"])
            compile_match_spec(ms)
        except (ValueError, BadArg) as e:
            c.fail(path + ("match_spec",), f"bad match spec: {e}")
        p["match_spec"] = ms
        if "meta" in p["flags"]:
            if p["meta_tracer"] is None:
                c.fail(path, "a meta pattern needs a 'meta_tracer'")
            ref(path + ("meta_tracer",), p["meta_tracer"])


def _check_faults(c: _Checker, sc: dict, groups: dict, ref) -> None:
    d = sc["duration"]
    for i, f in enumerate(sc["faults"]):
        path = ("faults", i)
        a = f["action"]
        if a in ("kill_tracer",):
            if f["target"] is None:
                c.fail(path, f"{a} needs a 'target' tracer")
            ref(path + ("target",), f["target"], True)
        elif a in ("kill_processes", "set_sensitive"):
            if f["target"] not in groups:
                c.fail(
                    path + ("target",),
                    f"{a} needs a 'target' group "
                    f"(groups: {', '.join(groups)}), not {f['target']!r}",
                )
        elif a == "replace_seq_tracer" and sc["seq_trace"] is None:
            c.fail(path, "replace_seq_tracer needs a [seq_trace] section")
        elif a == "replace_monitor" and sc["system_monitor"] is None:
            c.fail(path, "replace_monitor needs a [system_monitor] section")
        elif a == "replace_profiler" and sc["system_profile"] is None:
            c.fail(path, "replace_profiler needs a [system_profile] section")
        if f["times"] is None:
            if f["every"] is None:
                f["times"] = 1
            elif d["seconds"] is not None:
                f["times"] = max(1, int((d["seconds"] - f["at"]) / f["every"]) + 1)
                most = BOUNDS["faults[].times"].hi
                if f["times"] > most:
                    c.fail(
                        path + ("every",),
                        f"every {f['every']:g} s for duration.seconds = {d['seconds']:g} "
                        f"fires {f['times']:,} times: at most {most:,} (give 'times')",
                    )
            else:
                c.fail(path, "'every' needs 'times' when the duration is in operations")
        if f["every"] is None:
            f["every"] = 0.0
        # a fault must come while the run does: one past its end never fires
        last = f["at"] + (f["times"] - 1) * f["every"]
        if d["seconds"] is not None and f["at"] >= d["seconds"]:
            c.fail(
                path + ("at",),
                f"{f['at']:g} s is past the end of the run "
                f"(duration.seconds = {d['seconds']:g}): it would never fire",
            )
        if d["seconds"] is not None and last >= d["seconds"]:
            c.fail(
                path + ("times",),
                f"{f['times']} times every {f['every']:g} s from "
                f"{f['at']:g} s ends at {last:g} s, past the end of the run "
                f"(duration.seconds = {d['seconds']:g}): the last would never fire",
            )
        if last >= sc["timeout"]:
            c.fail(
                path + ("at",) if f["times"] == 1 else path + ("times",),
                f"fires at {last:g} s, past the end of the run: it gives up after "
                f"timeout = {sc['timeout']:g} s",
            )
        f["where"] = c.where(path + ("at",))


def _check_rate(c: _Checker, sc: dict) -> None:
    """``rate = [N, ms]``: at most N trace messages per window of ms
    milliseconds (recon_trace's ``{N, Millisecs}``)."""
    r = sc["rate"]
    if r is None:
        return
    if not isinstance(r, list) or len(r) != 2 or not all(type(x) is int and x >= 1 for x in r):
        c.fail(
            ("rate",),
            f"must be [N, ms] with two integers >= 1 (at most N trace "
            f"messages per ms milliseconds), not {_cut(r) if isinstance(r, list) else _show(r)}",
        )
    for i, x in enumerate(r):
        err = BOUNDS[f"rate[{i}]"](x)
        if err:
            c.fail(("rate",), f"{('N', 'ms')[i]} {err}, not {x}")


def _a(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _check_expect(c: _Checker, sc: dict, given: list) -> None:
    """``[[expect]]``: each clause takes its kind's keys only (``EXPECT_KEYS``),
    names a tracer that keeps what it receives and a group whose processes
    send numbered messages; ``min <= max``.  Each clause gets its ``where``
    (``file:line``), which the run's report names."""
    tracers = {t["name"]: t for t in sc["tracers"]}
    groups = {g["name"]: g for g in sc["groups"]}
    for i, e in enumerate(sc["expect"]):
        path = ("expect", i)
        kind = e["kind"]
        mine = EXPECT_KEYS[kind]
        for k in given[i]:
            if k != "kind" and k not in mine:
                c.fail(
                    path + (k,),
                    f"{k!r} is no key of {_a(kind)} {kind} clause "
                    f"(its keys: kind, {', '.join(mine)})",
                )
        for k in _EXPECT_REQUIRED.get(kind, ()):
            if e[k] is None:
                c.fail(path, f"{_a(kind)} {kind} clause needs {k!r}")
        if "tracer" in mine:
            name = e["tracer"]
            if name not in tracers:
                c.fail(
                    path + ("tracer",),
                    f"unknown tracer {name!r} (tracers: {', '.join(tracers) or 'none'})",
                )
            t = tracers[name]
            if t["kind"] == "null" or (t["kind"] == "ip" and not t["print"]):
                what = "a null port" if t["kind"] == "null" else "an ip port with print = false"
                c.fail(
                    path + ("tracer",),
                    f"tracer {name!r} is {what}: the run keeps nothing it receives to check",
                )
        if kind == "receives_every":
            g = groups.get(e["group"])
            if g is None:
                c.fail(
                    path + ("group",),
                    f"unknown group {e['group']!r} (groups: {', '.join(groups)})",
                )
            if g["workload"] in _UNNUMBERED:
                c.fail(
                    path + ("group",),
                    f"group {g['name']!r} runs the {g['workload']} workload, which sends no "
                    "numbered messages: nothing for receives_every to count",
                )
        if kind == "count":
            if "min" not in given[i] and "max" not in given[i]:
                c.fail(path, "a count clause needs 'min', 'max' or both")
            if e["max"] is not None and e["max"] < e["min"]:
                c.fail(path + ("max",), f"must be >= min ({e['min']}), not {e['max']}")
        e["where"] = c.where(path)


# ---------------------------------------------------------------- entry points
_NESTING_CHARS = re.compile(r"[\n#\"'\[\]{}]")


def _too_deep(text: str, limit: int = MAX_NESTING) -> int | None:
    """The line where TOML arrays and inline tables first nest deeper than
    ``limit``, or None; one pass, strings and comments skipped."""
    depth, line, i, n = 0, 1, 0, len(text)
    while i < n:
        m = _NESTING_CHARS.search(text, i)
        if m is None:
            return None
        i = m.start()
        c = text[i]
        if c == "\n":
            line += 1
        elif c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif c in "\"'":
            q = text[i : i + 3] if text.startswith(c * 3, i) else c
            j = i + len(q)
            while j < n and not text.startswith(q, j):
                if c == '"' and text[j] == "\\":
                    j += 1
                elif text[j] == "\n":
                    if len(q) == 1:
                        break  # an unterminated one-line string: TOML refuses it anyway
                    line += 1
                j += 1
            i = j + len(q)
            continue
        elif c in "[{":
            depth += 1
            if depth > limit:
                return line
        elif c in "]}":
            depth = max(0, depth - 1)
        i += 1
    return None


def _decode(data: bytes, source: str) -> str:
    """UTF-8 ``data`` as text; a ScenarioError names the line of a bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ScenarioError(
            f"{source}:{line}: not UTF-8 text: byte 0x{data[e.start]:02x} at column {col}"
        ) from None


def read_toml(data: bytes | str, source: str) -> dict:
    """The TOML document of a scenario file's bytes (or text), unchecked.

    Every failure is a one-line ``ScenarioError`` naming ``source`` and,
    where there is one, the line: bytes that are not UTF-8, arrays and inline
    tables nested deeper than ``MAX_NESTING`` (refused before the TOML reader
    sees them: it would run out of stack), text that is not TOML.  The
    explore scenarios are read with it too."""
    text = _decode(data, source) if isinstance(data, bytes) else data
    deep = _too_deep(text)
    if deep is not None:
        raise ScenarioError(
            f"{source}:{deep}: arrays or inline tables nested deeper than {MAX_NESTING}"
        )
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        where = f"{source}:{m.group(1)}" if m else source
        raise ScenarioError(f"{where}: not valid TOML: {e}") from None
    except RecursionError:  # _too_deep missed a nesting the reader did not
        raise ScenarioError(f"{source}: nested too deeply to read") from None


def read_file(path: str) -> bytes:
    """A scenario file's bytes, at most ``MAX_FILE_BYTES`` of them."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read scenario: {e.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError(f"{path}: larger than {MAX_FILE_BYTES:,} bytes: not a scenario")
    return data


def parse_scenario(text: str, source: str = "<scenario>") -> dict:
    """Parse and validate scenario TOML text; returns the filled-in scenario."""
    data = read_toml(text, source)
    c = _Checker(text, source)
    sc = c.table(data, SCHEMA, ())
    sc["notes"] = []
    if sc["mode"] == "nonsmp" and "schedulers" in data and sc["schedulers"] != 1:
        sc["notes"].append(f"{c.where(('schedulers',))}: {NONSMP_RULE}")
    _check_refs(c, sc)
    _check_rate(c, sc)
    _check_expect(c, sc, data.get("expect") or [])
    sc["source"] = source
    return sc


def load_scenario(path: str | os.PathLike | None) -> dict:
    """Load a scenario file, a built-in example by name, or (None) the default."""
    if path is None:
        return parse_scenario(default_scenario_text(), "<default scenario>")
    p = os.fspath(path)
    if not os.path.exists(p):
        names = example_names()
        if p in names:
            p = example_path(p)
        elif os.sep not in p and not p.endswith(".toml"):
            raise ScenarioError(
                f"{p}: no such scenario file or example; the examples are "
                f"{', '.join(names)} (smp-emu examples)"
            )
    return parse_scenario(_decode(read_file(p), p), p)


def example_names() -> list[str]:
    """Names of the example scenarios shipped in ``smp/app/examples``."""
    d = resources.files("smp.app") / "examples"
    try:
        return sorted(x.name[:-5] for x in d.iterdir() if x.name.endswith(".toml"))
    except (FileNotFoundError, NotADirectoryError):
        return []


def example_path(name: str) -> str:
    return str(resources.files("smp.app") / "examples" / f"{name}.toml")


def default_scenario_text() -> str:
    """The scenario ``smp-emu run`` uses when none is given (examples/default.toml,
    shipped as package data)."""
    return (resources.files("smp.app") / "examples" / "default.toml").read_text("utf-8")
