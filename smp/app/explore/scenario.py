"""The explore scenario: what it may say and how it is checked.

An explore scenario (TOML, ``smp/app/examples/explore/``, or a dict) names
the processes, the set-up (seq tracer, system monitor and profiler, trace
flags), the queue processes whose messages the held dispatcher queues, the
state changes to make between them, and the bounds of the search.
``load_explore_scenario`` reads one (a dict, a path, or the name of a
shipped example) and checks it key by key: an error is a
``ScenarioError`` naming the file and the key.  ``BOUNDS`` is the one place
every integer's range is written; ``smp.app.schema`` documents the keys.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from typing import Any

from smp.app.scenario_schema import MAX_ATOM
from smp.app.scenario_toml import _KeyLines, read_file, read_toml
from smp.app.workload_registry import Bound, _cut
from smp.core.bifs import MAX_SMALL
from smp.core.errors import ScenarioError

__all__ = [
    "MAX_MESSAGES",
    "MAX_CHANGES",
    "SAMPLES",
    "QUEUE_ACTIONS",
    "CHANGE_ACTIONS",
    "MONITOR_OPTIONS",
    "PROFILE_OPTIONS",
    "BOUNDS",
    "explore_example_names",
    "load_explore_scenario",
    "describe_change",
]

MAX_MESSAGES = 12  # exhaustive up to this many queued messages ...
MAX_CHANGES = 4  # ... and this many changes; beyond, a seeded sample
SAMPLES = 40  # classes a sample runs

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
    raw = read_file(path)
    data = read_toml(raw, path)  # (it refuses what is not UTF-8)
    return _check(data, path, raw.decode("utf-8"))


class _Checker:
    """Checks an explore scenario key by key; an error names the key (and,
    for a file, its line)."""

    def __init__(self, where: str, text: str | None = None):
        self.where = where
        self.text = text
        self.names: list[str] = []

    def fail(self, key: str, msg: str):
        line = None
        if self.text is not None:
            path = tuple(int(k) if k.isdigit() else k for k in re.findall(r"[^.\[\]]+", key or ""))
            line = _KeyLines(self.text).find(path)
        where = self.where if line is None else f"{self.where}:{line}"
        raise ScenarioError(f"{where}: {key}: {msg}")

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
                if e["to"] == e["name"]:  # (it is spawned after the names it sends to)
                    self.fail(f"{key}.to", f"must name another process than {e['name']!r} itself")
            for k in ("count", "label", "words"):
                self.bounded(e[k], f"queue[].{k}", f"{key}.{k}")
            if "trace" in q:
                e["trace"] = self.flags(q["trace"], f"{key}.trace")
                e["tracer"] = self.ref(q.get("tracer"), f"{key}.tracer")
                if e["tracer"] == e["name"]:
                    self.fail(f"{key}.tracer", f"{e['name']!r} cannot be its own tracer")
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


def _check(data: dict, where: str, text: str | None = None) -> dict:
    c = _Checker(where, text)
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
