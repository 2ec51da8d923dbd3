"""The key tables of ``smp.app.schema`` agree with the validators.

Every key a validator accepts has a description, every described key is
accepted, and the defaults, allowed values and bounds are the validators'
own: the known-key lists are read from the validators' "unknown key" errors,
the defaults from what they fill in, the bounds by feeding them values just
outside; every key of every shipped example is described.
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources

import pytest

from smp.app import explore as explore_mod
from smp.app import scenario as scenario_mod
from smp.app import schema
from smp.app.workloads import WORKLOADS
from smp.core.errors import ScenarioError
from smp.core.flags import TRACE_FLAG_NAMES

RUN = {k.path: k for k in schema.keys_of("run")}
EXPLORE = {k.path: k for k in schema.EXPLORE_KEYS}


# ------------------------------------------------------------ helpers
def _walk(data: dict, prefix: str = ""):
    """Key paths of a parsed TOML document: ``tracers[].name``."""
    for k, v in data.items():
        path = f"{prefix}{k}"
        yield path, v
        if isinstance(v, dict):
            yield from _walk(v, path + ".")
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for x in v:
                yield from _walk(x, path + "[].")


def _examples(kind: str):
    d = resources.files("smp.app") / "examples"
    if kind == "explore":
        d = d / "explore"
    return sorted((f.name, f.read_text("utf-8")) for f in d.iterdir() if f.name.endswith(".toml"))


def _known(err: ScenarioError) -> set[str]:
    m = re.search(r"\((?:known|parameters): ([^)]*)\)", str(err))
    assert m, f"no list of known keys in {err}"
    return {x.strip() for x in m.group(1).split(",") if x.strip()}


def _children(table: dict, parent: str) -> set[str]:
    """The described keys directly under ``parent`` ('' for the top)."""
    out = set()
    for path in table:
        if parent:
            if not path.startswith(parent + "."):
                continue
            rest = path[len(parent) + 1 :]
        else:
            rest = path
        if "." not in rest:
            out.add(rest.removesuffix("[]"))
    return out


# ------------------------------------------------------------ run/stress scenarios
_RUN_BASE = """\
@top
[duration]
@duration
[[tracers]]
name = "t"
@tracers
[[groups]]
name = "g"
workload = "WORKLOAD"
tracer = "t"
@groups
[groups.params]
@params
[[trace]]
pids = "new"
flags = ["send"]
tracer = "t"
@trace
[[patterns]]
mfa = ["m", "f", 1]
@patterns
[seq_trace]
tracer = "t"
@seq_trace
[system_monitor]
monitor = "t"
@system_monitor
[system_profile]
profiler = "t"
@system_profile
[[faults]]
action = "kill_tracer"
target = "t"
@faults
"""
_RUN_TABLES = {
    "top": "",
    "duration": "duration",
    "tracers": "tracers[]",
    "groups": "groups[]",
    "trace": "trace[]",
    "patterns": "patterns[]",
    "seq_trace": "seq_trace",
    "system_monitor": "system_monitor",
    "system_profile": "system_profile",
    "faults": "faults[]",
}


def _run_text(where: str = "", line: str = "", workload: str = "ring") -> str:
    text = _RUN_BASE.replace("WORKLOAD", workload)
    if where:
        text = text.replace(f"@{where}\n", line + "\n")
    return re.sub(r"^@\w+\n", "", text, flags=re.MULTILINE)


def test_run_base_scenario_is_valid():
    sc = scenario_mod.parse_scenario(_run_text())
    assert sc["tracers"][0]["name"] == "t"


@pytest.mark.parametrize("table", sorted(_RUN_TABLES))
def test_run_keys_match_the_validator(table):
    with pytest.raises(ScenarioError, match="unknown key 'zz_unknown'") as e:
        scenario_mod.parse_scenario(_run_text(table, "zz_unknown = 1"))
    assert _known(e.value) == _children(RUN, _RUN_TABLES[table])


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_workload_params_match_the_validator(workload):
    with pytest.raises(ScenarioError, match="unknown parameter 'zz_unknown'") as e:
        scenario_mod.parse_scenario(_run_text("params", "zz_unknown = 1", workload))
    doc, keys = schema.WORKLOAD_PARAMS[workload]
    assert _known(e.value) == {k.path for k in keys}
    assert doc == WORKLOADS[workload].doc
    for k in keys:
        default = WORKLOADS[workload].params[k.path][0]
        assert k.default == default, (workload, k.path)


def test_workloads_and_run_constants_agree():
    assert set(schema.WORKLOAD_PARAMS) == set(WORKLOADS)
    assert RUN["groups[].workload"].choices == tuple(WORKLOADS)
    assert RUN["tracers[].kind"].choices == scenario_mod.TRACER_KINDS
    assert RUN["faults[].action"].choices == scenario_mod.FAULT_ACTIONS
    for path in ("groups[].trace", "trace[].flags"):
        assert RUN[path].choices == tuple(TRACE_FLAG_NAMES)


# keys the cross-checks fill in from other keys (their meaning says how)
_DERIVED = {"faults[].times", "faults[].every", "duration.operations"}


def _filled(sc: dict, path: str):
    node = sc
    for part in path.split("."):
        node = node[part.removesuffix("[]")]
        if part.endswith("[]"):
            node = node[0]
    return node


def test_run_defaults_are_the_validators():
    sc = scenario_mod.parse_scenario(_run_text())
    given = {p for p, _ in _walk(tomllib.loads(_run_text()))}
    checked = 0
    for path, k in RUN.items():
        if path in given or path in _DERIVED or ".params." in path:
            continue
        parent = path.rsplit(".", 1)[0] if "." in path else ""
        if parent and parent.removesuffix("[]") not in {p.removesuffix("[]") for p in given}:
            # a section the base leaves out: the validator fills in the section's default
            if "." not in parent:
                continue
        want = None if k.default is schema.REQUIRED else k.default
        got = _filled(sc, path)
        if isinstance(want, dict) and not want:
            assert isinstance(got, dict), path
        else:
            assert got == want, path
        checked += 1
    assert checked > 20
    # a section left out is off
    bare = scenario_mod.parse_scenario('[[groups]]\nname = "g"\nworkload = "ring"\n')
    for path in ("seq_trace", "system_monitor", "system_profile", "max_messages", "rate"):
        assert bare[path] is None and RUN[path].default is None
    assert bare["duration"]["operations"] == 100  # neither seconds nor operations


def _bounded(table: dict):
    for path, k in table.items():
        if k.type in ("integer", "number") and (k.low is not None or k.high is not None):
            yield path, k


def _run_with(path: str, value) -> str:
    parent, name = path.rsplit(".", 1) if "." in path else ("", path)
    table = next(t for t, p in _RUN_TABLES.items() if p == parent)
    return _run_text(table, f"{name} = {value!r}".replace("'", '"'))


@pytest.mark.parametrize(
    "path", [p for p, _ in _bounded(RUN) if ".params." not in p], ids=lambda p: p
)
def test_run_bounds_are_the_validators(path):
    k = RUN[path]
    typ = int if k.type == "integer" else float
    if k.low is not None:
        low = typ(k.low)
        bad = low if k.low_open else low - 1
        with pytest.raises(ScenarioError, match=re.escape(path.split(".")[-1].replace("[]", ""))):
            scenario_mod.parse_scenario(_run_with(path, bad))
        if not k.low_open:
            scenario_mod.parse_scenario(_run_with(path, low))
    if k.high is not None:
        with pytest.raises(ScenarioError):
            scenario_mod.parse_scenario(_run_with(path, typ(k.high) + 1))


def test_every_key_of_every_run_example_is_described():
    seen = 0
    for name, text in _examples("run"):
        data = tomllib.loads(text)
        for path, _v in _walk(data):
            if path.startswith("groups[].params."):
                continue
            assert path in RUN, f"{name}: {path} has no description in smp.app.schema"
            seen += 1
        for g in data.get("groups", []):
            for p in g.get("params", {}):
                assert f"groups[].params.{p}" in RUN, f"{name}: {g['workload']}.{p}"
                keys = {k.path for k in schema.WORKLOAD_PARAMS[g["workload"]][1]}
                assert p in keys, f"{name}: {p} is no parameter of {g['workload']}"
    assert seen > 100


# ------------------------------------------------------------ explore scenarios
def _explore_base() -> dict:
    return {
        "processes": [{"name": "a"}, {"name": "b"}],
        "setup": {
            "seq_tracer": "a",
            "system_monitor": {"monitor": "a"},
            "system_profile": {"profiler": "a"},
            "trace": [{"tracee": "b", "flags": ["send"], "tracer": "a"}],
        },
        "queue": [{"name": "q", "do": "send", "to": "b"}],
        "changes": [{"action": "kill", "target": "a"}],
        "explore": {},
    }


_CHANGE_BASE = {
    "seq_tracer": {"action": "seq_tracer", "tracer": "b"},
    "system_monitor": {"action": "system_monitor", "monitor": "b"},
    "system_profile": {"action": "system_profile", "profiler": "b"},
    "trace": {"action": "trace", "tracee": "b", "tracer": "a"},
    "kill": {"action": "kill", "target": "a"},
}


def _explore_probe(mutate) -> set[str]:
    data = _explore_base()
    mutate(data)
    with pytest.raises(ScenarioError, match="unknown key") as e:
        explore_mod.load_explore_scenario(data)
    return _known(e.value)


@pytest.mark.parametrize(
    "parent, mutate",
    [
        ("", lambda d: d.update(zz_unknown=1)),
        ("processes[]", lambda d: d["processes"][0].update(zz_unknown=1)),
        ("setup", lambda d: d["setup"].update(zz_unknown=1)),
        ("setup.system_monitor", lambda d: d["setup"]["system_monitor"].update(zz_unknown=1)),
        ("setup.system_profile", lambda d: d["setup"]["system_profile"].update(zz_unknown=1)),
        ("setup.trace[]", lambda d: d["setup"]["trace"][0].update(zz_unknown=1)),
        ("queue[]", lambda d: d["queue"][0].update(zz_unknown=1)),
        ("explore", lambda d: d["explore"].update(zz_unknown=1)),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_explore_keys_match_the_validator(parent, mutate):
    assert _explore_probe(mutate) == _children(EXPLORE, parent)


def _applies(k: schema.Key, field: str, value: str) -> bool:
    if not k.when:
        return True
    m = re.fullmatch(rf"{field} = (.*)", k.when)
    assert m, f"{k.path}: cannot read when = {k.when!r}"
    return value in [x.strip() for x in m.group(1).split(",")]


@pytest.mark.parametrize("action", explore_mod.CHANGE_ACTIONS)
def test_explore_change_keys_match_the_validator(action):
    def mutate(d):
        d["changes"] = [dict(_CHANGE_BASE[action], zz_unknown=1)]

    described = {
        k.name
        for p, k in EXPLORE.items()
        if p.startswith("changes[].") and _applies(k, "action", action)
    }
    assert _explore_probe(mutate) == described


def test_explore_constants_agree():
    assert EXPLORE["queue[].do"].choices == explore_mod.QUEUE_ACTIONS
    assert EXPLORE["changes[].action"].choices == explore_mod.CHANGE_ACTIONS
    assert set(_CHANGE_BASE) == set(explore_mod.CHANGE_ACTIONS)
    types = {int: "integer", bool: "boolean"}
    for prefix, options in (
        ("setup.system_monitor", explore_mod.MONITOR_OPTIONS),
        ("setup.system_profile", explore_mod.PROFILE_OPTIONS),
    ):
        for name, t in options.items():
            assert EXPLORE[f"{prefix}.{name}"].type == types[t]
            assert EXPLORE[f"changes[].{name}"].type == types[t]
    assert EXPLORE["explore.max_messages"].default == explore_mod.MAX_MESSAGES
    assert EXPLORE["explore.max_changes"].default == explore_mod.MAX_CHANGES
    assert EXPLORE["explore.samples"].default == explore_mod.SAMPLES


def test_explore_defaults_are_the_validators():
    sc = explore_mod.load_explore_scenario(_explore_base())
    assert sc["schedulers"] == EXPLORE["schedulers"].default
    assert sc["description"] == EXPLORE["description"].default
    q = sc["queue"][0]
    for name in ("count", "label", "words"):
        assert q[name] == EXPLORE[f"queue[].{name}"].default, name
    assert q["trace"] == EXPLORE["queue[].trace"].default
    assert q["tracer"] is None and EXPLORE["queue[].tracer"].default is None
    assert sc["processes"][0]["register"] is None
    for name, v in sc["explore"].items():
        assert v == EXPLORE[f"explore.{name}"].default, name
    kill = sc["changes"][0]
    assert kill["reason"] == EXPLORE["changes[].reason"].default
    assert kill["name"] == "kill"  # none: the action's name
    trace = explore_mod.load_explore_scenario(
        dict(_explore_base(), changes=[_CHANGE_BASE["trace"]])
    )["changes"][0]
    assert trace["how"] is EXPLORE["changes[].how"].default
    assert trace["flags"] == EXPLORE["changes[].flags"].default


@pytest.mark.parametrize("path", [p for p, _ in _bounded(EXPLORE)], ids=lambda p: p)
def test_explore_lower_bounds_are_the_validators(path):
    k = EXPLORE[path]

    def put(value):
        d = _explore_base()
        if path.startswith("changes[]."):
            action = "system_monitor"
            d["changes"] = [dict(_CHANGE_BASE[action], **{k.name: value})]
        elif path.startswith("queue[]."):
            d["queue"] = [{"name": "q", "do": "seq_send", "to": "b", k.name: value}]
            if k.name == "words":
                d["queue"][0]["do"] = "gc"
        else:
            node = d
            parts = path.split(".")
            for part in parts[:-1]:
                node = node[part]
            node[parts[-1]] = value
        return d

    with pytest.raises(ScenarioError, match=re.escape(k.name)):
        explore_mod.load_explore_scenario(put(int(k.low) - 1))
    explore_mod.load_explore_scenario(put(int(k.low)))
    if k.high is not None:
        with pytest.raises(ScenarioError, match=re.escape(k.name)):
            explore_mod.load_explore_scenario(put(int(k.high) + 1))


def test_every_key_of_every_explore_example_is_described():
    seen = 0
    for name, text in _examples("explore"):
        for path, _v in _walk(tomllib.loads(text)):
            assert path in EXPLORE, f"explore/{name}: {path} has no description in smp.app.schema"
            seen += 1
    assert seen > 50


# ------------------------------------------------------------ rendering
@pytest.mark.parametrize("kind", schema.SCHEMA_KINDS)
@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_render_schema_names_every_key(kind, fmt):
    out = schema.render_schema(kind, fmt)
    for k in schema.keys_of(kind):
        shown = k.path.rsplit(".", 1)[-1] if ".params." in k.path and fmt == "markdown" else k.path
        assert shown in out, k.path
        assert k.meaning.split(" (")[0] in out.replace("\\|", "|"), k.path


def test_render_schema_refuses_unknown_kinds():
    with pytest.raises(ValueError, match="schema kind must be one of run, explore"):
        schema.render_schema("stress")
    with pytest.raises(ValueError, match="fmt must be text or markdown"):
        schema.render_schema("run", "html")


def test_list_examples_matches_the_loaders():
    run = schema.list_examples()
    assert [n for n, _ in run] == scenario_mod.example_names()
    assert [n for n, _ in schema.list_examples("explore")] == explore_mod.explore_example_names()
    lines = dict(run)
    assert lines["default"] == "ping-pong pairs and recursive calls, traced to one collector"
    assert lines["churn"] == "Tracer churn: tracers die while their tracees run"
    assert all(0 < len(line) <= 120 for _, line in run)
