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

This module is the entry point and the home of the public names; the work
is split by job: ``smp.app.scenario_toml`` (reading the file, finding a
key's line), ``smp.app.scenario_schema`` (``SCHEMA``, ``BOUNDS``),
``smp.app.scenario_checks`` (the schema walk and the cross checks) and
``smp.app.expect`` (the ``[[expect]]`` clauses).
"""

from __future__ import annotations

import os
from importlib import resources

from smp.app.expect import _check_expect
from smp.app.scenario_checks import _check_rate, _check_refs, _Checker, match_spec_from
from smp.app.scenario_schema import (
    BOUNDS,
    EXPECT_EVENTS,
    EXPECT_KEYS,
    EXPECT_KINDS,
    EXPECT_REASONS,
    FAULT_ACTIONS,
    NONSMP_RULE,
    SCHEMA,
    TRACER_KINDS,
)
from smp.app.scenario_schema import MAX_ATOM as MAX_ATOM
from smp.app.scenario_toml import MAX_FILE_BYTES as MAX_FILE_BYTES
from smp.app.scenario_toml import MAX_NESTING, _decode, read_file, read_toml
from smp.app.workload_registry import Bound
from smp.core.errors import ScenarioError
from smp.core.flags import TRACE_FLAG_NAMES
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


def parse_scenario(text: str, source: str = "<scenario>") -> dict:
    """Parse and validate scenario TOML text; returns the filled-in scenario."""
    data = read_toml(text, source)
    c = _Checker(text, source)
    if "queue" in data and "queue" not in SCHEMA:
        # (the other kind of scenario: say so rather than its first unknown key)
        raise ScenarioError(
            f"{source}: an explore scenario (it has [[queue]]): `smp-emu explore` takes "
            "it; run, stress and compare take a run scenario (smp-emu examples)"
        )
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
        elif (resources.files("smp.app") / "examples" / "explore" / f"{p}.toml").is_file():
            raise ScenarioError(
                f"{p}: an explore example (smp-emu explore {p}); run, stress and compare "
                f"take a run scenario: {', '.join(names)}"
            )
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
