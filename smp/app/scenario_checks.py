"""Checking a run scenario: its keys against the schema, then its cross checks.

Runs in the user's process.  ``_Checker`` walks the parsed TOML against
``smp.app.scenario_schema.SCHEMA`` (every number against its entry in
``BOUNDS``: finite, of its type and within its range), fills in defaults,
and fails with a one-line ``ScenarioError`` naming the file, the line and
the bad key.  The cross checks then look at the keys together: the names
tracers and groups refer to exist, each workload's parameters
(``check_params``) and all the groups' processes together
(``MAX_PROCESSES``), call patterns and their match specs
(``match_spec_from``), the duration, faults that fire while the run does,
and ``rate``.
"""

from __future__ import annotations

import os
from typing import Any

from smp.app.scenario_schema import BOUNDS, MAX_ATOM, REQUIRED
from smp.app.scenario_toml import _fmt_path, _KeyLines
from smp.app.workload_registry import MAX_PROCESSES, WORKLOADS, _cut, check_params, processes_of
from smp.core.errors import BadArg, ScenarioError
from smp.core.matchspec import DBG_SHORTCUTS, compile_match_spec
from smp.core.termtext import parse_term


def _bound_key(path: tuple) -> str:
    """The BOUNDS key of a value's path: ``("groups", 1, "count")`` is
    ``groups[].count``."""
    out = ""
    for k in path:
        out += "[]" if isinstance(k, int) else (f".{k}" if out else k)
    return out


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
    _check_one_tracer(c, sc)
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


def _check_one_tracer(c: _Checker, sc: dict) -> None:
    """A process has one tracer (17.x refuses another: ``** can only have
    one tracer per process``): a ``[[trace]]`` entry traces the groups'
    processes too (``new`` ones as they are spawned, ``all`` and
    ``existing`` ones after), so a group that traces its own names the
    same tracer."""
    for i, t in enumerate(sc["trace"]):
        for j, g in enumerate(sc["groups"]):
            if g["trace"] and g["tracer"] is not None and g["tracer"] != t["tracer"]:
                c.fail(
                    ("groups", j, "tracer"),
                    f"{g['tracer']!r}, but trace[{i}] (pids {t['pids']}) traces the group's "
                    f"processes to {t['tracer']!r}: a process has one tracer",
                )


def _check_tracers(c: _Checker, sc: dict) -> dict:
    tracers = {}
    for i, t in enumerate(sc["tracers"]):
        if t["name"] in tracers:
            c.fail(("tracers", i, "name"), f"duplicate tracer name {t['name']!r}")
        tracers[t["name"]] = t
        if t["kind"] == "file" and not t["path"]:
            c.fail(("tracers", i), "a file tracer needs a 'path'")
        if t["kind"] == "file":
            # an output file: a folder that is not there is refused before
            # the run, as --out's is (the trace port failed once running)
            folder = os.path.dirname(t["path"]) or "."
            if not os.path.isdir(folder):
                c.fail(("tracers", i, "path"), f"no such folder {folder!r} for the trace file")
            if os.path.isdir(t["path"]):
                c.fail(("tracers", i, "path"), f"{t['path']!r} is a folder, not a trace file")

    return tracers


def _check_groups(c: _Checker, sc: dict, ref) -> dict:
    groups = {}
    for i, g in enumerate(sc["groups"]):
        path = ("groups", i)
        if not g["name"].strip():  # (its processes' roles are named after it)
            c.fail(path + ("name",), "must not be empty")
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


def fault_past_end(f: dict, seconds: float, what: str = "duration.seconds"):
    """``(key, why)`` when fault ``f`` (checked: ``times`` and ``every``
    set) would fire at or after ``seconds``, the run's end (``what`` names
    where that came from), else None."""
    last = f["at"] + (f["times"] - 1) * f["every"]
    if f["at"] >= seconds:
        return "at", (
            f"{f['at']:g} s is past the end of the run ({what} = {seconds:g}): it would never fire"
        )
    if last >= seconds:
        return "times", (
            f"{f['times']} times every {f['every']:g} s from {f['at']:g} s ends at {last:g} s, "
            f"past the end of the run ({what} = {seconds:g}): the last would never fire"
        )
    return None


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
        if d["seconds"] is not None:
            past = fault_past_end(f, d["seconds"])
            if past is not None:
                c.fail(path + (past[0],), past[1])
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
