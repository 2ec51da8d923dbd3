"""Scenario files: TOML that says what ``smp-emu`` runs, checked against a schema.

Runs in the user's process (the CLI).  ``load_scenario(path)`` parses the
TOML, checks every key against ``SCHEMA`` (and each workload's parameters
against ``smp.app.workloads.WORKLOADS``), cross-checks the names tracers and
groups refer to, fills in defaults and returns a plain dict.  Every error is a
``ScenarioError`` whose message names the file, the line and the bad key
("demo.toml:12: groups[1].count: must be an integer >= 1, not 0"); TOML has no
positions after parsing, so the line is found again in the raw text
(``_KeyLines``).  The schema mirrors what ``smp.app.workloads.execute`` sets up,
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

from smp.app.workloads import WORKLOADS, check_params
from smp.core.errors import BadArg, ScenarioError
from smp.core.flags import TRACE_FLAG_NAMES
from smp.core.matchspec import DBG_SHORTCUTS, compile_match_spec
from smp.core.termtext import parse_term

__all__ = [
    "load_scenario",
    "parse_scenario",
    "default_scenario_text",
    "example_names",
    "example_path",
    "parse_term",
    "match_spec_from",
    "TRACE_FLAG_NAMES",
    "FAULT_ACTIONS",
    "TRACER_KINDS",
    "NONSMP_RULE",
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

# ---------------------------------------------------------------- schema
# A field is (kind, default, extra); kind is one of
#   "str", "bool", "int" (extra: (min, max)), "num" (extra: min, exclusive),
#   "enum" (extra: choices), "strlist" (extra: choices or None),
#   "table" (extra: schema dict), "tables" (array of tables; extra: schema dict),
#   "any" (checked elsewhere).
# default REQUIRED means the key must be present.
REQUIRED = object()

_TRACER = {
    "name": ("str", REQUIRED, None),
    "kind": ("enum", "collector", TRACER_KINDS),
    "path": ("str", None, None),
    "wrap_suffix": ("str", None, None),
    "wrap_size": ("int", 1 << 20, (1, None)),
    "wrap_count": ("int", 8, (1, 1000)),
    "port": ("int", 0, (0, 65535)),
    "queue_size": ("int", 1000, (1, None)),
    "heavy_every": ("int", 0, (0, None)),
    "print": ("bool", True, None),
}
_GROUP = {
    "name": ("str", REQUIRED, None),
    "workload": ("enum", REQUIRED, None),  # choices filled in from WORKLOADS
    "count": ("int", 1, (1, 10000)),
    "scheduler": ("int", None, (1, 1024)),
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
    "long_gc": ("int", 0, (0, None)),
    "long_schedule": ("int", 0, (0, None)),
    "large_heap": ("int", 0, (0, None)),
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
    "at": ("num", 0.0, (0, False)),
    "every": ("num", None, (0, True)),
    "times": ("int", None, (1, 100000)),
    "count": ("int", 1, (1, 100000)),
    "reason": ("str", "kill", None),
    "value": ("bool", True, None),
    "replace": ("bool", True, None),
}
_DURATION = {
    "seconds": ("num", None, (0, True)),
    "operations": ("int", None, (1, None)),
}
SCHEMA = {
    "name": ("str", "scenario", None),
    "description": ("str", "", None),
    "mode": ("enum", "smp", ("smp", "nonsmp")),
    "schedulers": ("int", 2, (1, 64)),
    "seed": ("int", 0, (None, None)),
    "timeout": ("num", 120.0, (0, True)),
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
    "max_messages": ("int", None, (1, None)),
    "rate": ("any", None, None),
}


# ---------------------------------------------------------------- line finding
_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEYLINE = re.compile(
    r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')"
    r"(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*="
)


def _split_key(k: str) -> list[str]:
    parts = re.findall(r"\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+", k)
    return [p[1:-1] if p[:1] in "\"'" else p for p in parts]


class _KeyLines:
    """Where each key path of a TOML text is, found again in the raw lines.

    Paths use list indices for arrays of tables: ``("groups", 1, "count")``.
    """

    def __init__(self, text: str):
        self.lines: dict[tuple, int] = {}
        counts: dict[tuple, int] = {}
        current: tuple = ()
        in_multiline = False
        for no, line in enumerate(text.splitlines(), 1):
            if in_multiline:
                if line.count('"""') % 2 == 1 or line.count("'''") % 2 == 1:
                    in_multiline = False
                continue
            m = _HEADER.match(line)
            if m and not _KEYLINE.match(line):
                keys = _split_key(m.group(2))
                path: list = []
                # resolve prefixes through arrays of tables opened so far
                for k in keys:
                    path.append(k)
                    n = counts.get(tuple(path))
                    if n is not None and not (m.group(1) == "[[" and len(path) == len(keys)):
                        path.append(n - 1)
                if m.group(1) == "[[":
                    n = counts.get(tuple(path), 0)
                    counts[tuple(path)] = n + 1
                    path.append(n)
                current = tuple(path)
                self.lines.setdefault(current, no)
                self.lines.setdefault(current[:-1] if m.group(1) == "[[" else current, no)
                continue
            m = _KEYLINE.match(line)
            if m:
                path = current + tuple(_split_key(m.group(1)))
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
        if kind == "int":
            lo, hi = extra
            if type(v) is not int:
                self.fail(path, f"must be an integer, not {_show(v)}")
            if lo is not None and v < lo:
                self.fail(path, f"must be an integer >= {lo}, not {v}")
            if hi is not None and v > hi:
                self.fail(path, f"must be an integer <= {hi}, not {v}")
            return v
        if kind == "num":
            lo, exclusive = extra
            if type(v) not in (int, float):
                self.fail(path, f"must be a number, not {_show(v)}")
            if v < lo or (exclusive and v == lo):
                self.fail(path, f"must be a number {'>' if exclusive else '>='} {lo}, not {v}")
            return float(v)
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
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "a list"
    return repr(v)


_SHORT_MS = {
    "return_trace": "[{'_', [], [{return_trace}]}]",
    "exception_trace": "[{'_', [], [{exception_trace}]}]",
    "silent": "[{'_', [], [{silent, true}]}]",
}


def match_spec_from(v):
    """A scenario's ``match_spec``: true/false, a short name, or Erlang term text."""
    if v is True or v is False:
        return v
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
            f"messages per ms milliseconds), not {_show(r) if not isinstance(r, list) else r}",
        )


# ---------------------------------------------------------------- entry points
def parse_scenario(text: str, source: str = "<scenario>") -> dict:
    """Parse and validate scenario TOML text; returns the filled-in scenario."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        where = f"{source}:{m.group(1)}" if m else source
        raise ScenarioError(f"{where}: not valid TOML: {e}") from None
    c = _Checker(text, source)
    sc = c.table(data, SCHEMA, ())
    sc["notes"] = []
    if sc["mode"] == "nonsmp" and "schedulers" in data and sc["schedulers"] != 1:
        sc["notes"].append(f"{c.where(('schedulers',))}: {NONSMP_RULE}")
    _check_refs(c, sc)
    _check_rate(c, sc)
    sc["source"] = source
    return sc


def load_scenario(path: str | os.PathLike | None) -> dict:
    """Load a scenario file, a built-in example by name, or (None) the default."""
    if path is None:
        return parse_scenario(default_scenario_text(), "<default scenario>")
    p = os.fspath(path)
    if not os.path.exists(p) and p in example_names():
        p = example_path(p)
    try:
        with open(p, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ScenarioError(f"{p}: cannot read scenario: {e.strerror}") from None
    return parse_scenario(text, p)


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
