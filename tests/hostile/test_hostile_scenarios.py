"""A stranger's scenario: bounded, one line, never a crash.

A generator of adversarial scenario, explore and report files: a line that
used to make the header search backtrack for an hour, NaN and infinity in
every numeric key, workload parameters far over their bounds, TOML and JSON
nested 100,000 deep, bytes that are not UTF-8, match-spec text nested deep
(in a file and on ``--tp``), atoms over 255 characters, a match spec that is
not a string.  Each goes through ``smp-emu`` in a child under a memory cap
and a time limit, and must end with exactly one line on stderr, exit 2
(a set-up that outlasts the timeout: exit 1, naming the timeout), in
bounded time, with no traceback.  The exhaustive matrices (every numeric
key, every parameter) are checked in-process against the same validator.
"""

from __future__ import annotations

import json
import math
import sys

import pytest

from hostile.capped import assert_one_line, run_capped, run_cli
from smp.app import explore as explore_mod
from smp.app import scenario as scenario_mod
from smp.app.scenario import BOUNDS, SCHEMA, parse_scenario
from smp.app.workloads import MAX_PROCESSES, WORKLOADS, Bound, check_params
from smp.core.errors import ScenarioError
from smp.core.termtext import MAX_DEPTH, parse_term

EXIT_USAGE, EXIT_FAILED = 2, 1
DEEP = 100_000

# Every numeric key sits in this scenario at its @marker; a case replaces the
# marker with the hostile line.  It is a valid scenario with the markers empty.
BASE = """\
name = "hostile"
@top
[duration]
@duration
[[tracers]]
name = "t"
@tracers
[[groups]]
name = "g"
workload = "ring"
trace = ["send", "call"]
tracer = "t"
@groups
[[patterns]]
mfa = ["wl_calls", "fib", 1]
@patterns
[system_monitor]
monitor = "t"
@system_monitor
[[faults]]
action = "kill_processes"
target = "g"
@faults
[[expect]]
kind = "count"
tracer = "t"
@expect
"""
SECTIONS = (
    "top",
    "duration",
    "tracers",
    "groups",
    "patterns",
    "system_monitor",
    "faults",
    "expect",
)


def scenario(**lines: str) -> str:
    """BASE with ``section=line`` put at each section's marker."""
    text = BASE
    # the count clause needs a bound: min = 0 unless a case sets its own
    defaults = {"expect": "min = 0"}
    for s in SECTIONS:
        text = text.replace(f"@{s}\n", lines.get(s, defaults.get(s, "")) + "\n")
    return text


def placed(key: str, value: str) -> str:
    """BASE with the BOUNDS key ``key`` set to the TOML ``value``."""
    if key.startswith("rate["):
        i = int(key[5])
        pair = ["10", "100"]
        pair[i] = value
        return scenario(top=f"rate = [{', '.join(pair)}]")
    if key == "patterns[].mfa[2]":
        return scenario().replace(
            'mfa = ["wl_calls", "fib", 1]', f'mfa = ["wl_calls", "fib", {value}]'
        )
    section, _, name = key.partition(".")
    if not name:
        return scenario(top=f"{key} = {value}")
    return scenario(**{section.removesuffix("[]"): f"{name} = {value}"})


def write(tmp_path, name: str, data: str | bytes):
    p = tmp_path / name
    (p.write_bytes if isinstance(data, bytes) else p.write_text)(data)
    return str(p)


def _one_line_error(text: str, source: str = "h.toml") -> str:
    with pytest.raises(ScenarioError) as ei:
        parse_scenario(text, source)
    msg = str(ei.value)
    assert "\n" not in msg and len(msg) < 400, msg
    assert msg.startswith(source), msg
    return msg


# ---------------------------------------------------------------- the tables
def test_base_scenario_is_valid():
    sc = parse_scenario(scenario(), "h.toml")
    assert sc["groups"][0]["params"]["size"] == 4


def _schema_numbers(schema: dict, prefix: str = ""):
    for k, (kind, _default, extra) in schema.items():
        path = f"{prefix}{k}"
        if kind == "num":
            yield path
        elif kind == "table":
            yield from _schema_numbers(extra, path + ".")
        elif kind == "tables":
            yield from _schema_numbers(extra, path + "[].")


def test_bounds_table_covers_every_numeric_key():
    numeric = set(_schema_numbers(SCHEMA))
    assert numeric, "the schema has numeric keys"
    # every number the schema walk checks has its bound, written once ...
    assert numeric <= set(BOUNDS), numeric - set(BOUNDS)
    # ... and every bound is used: the schema's, or one checked by hand
    assert set(BOUNDS) - numeric == {"rate[0]", "rate[1]", "patterns[].mfa[2]"}
    for key, b in BOUNDS.items():
        assert isinstance(b, Bound) and b.kind in (int, float), key
        assert math.isfinite(b.lo) and math.isfinite(b.hi) and b.lo < b.hi, key
        assert b.meaning, key


def _accepts_a_number(check) -> bool:
    return any(check(v) is None for v in (0, 1, 2, 7, 0.5, 100))


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_every_numeric_workload_parameter_has_a_bound(workload):
    for name, (_default, check) in WORKLOADS[workload].params.items():
        if _accepts_a_number(check):
            assert isinstance(check, Bound), f"{workload}.{name} takes numbers without a Bound"
            assert check.hi <= MAX_PROCESSES or name not in ("pairs", "size", "senders", "length")


def test_explore_bounds_are_used():
    assert set(explore_mod.BOUNDS) >= {
        "queue[].count",
        "queue[].words",
        "explore.max_messages",
        "explore.samples",
    }


# ---------------------------------------------------------------- every number, in-process
@pytest.mark.parametrize("key", sorted(BOUNDS))
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "1000000000000000000000"])
def test_every_numeric_key_refuses_non_finite_and_huge(key, value):
    msg = _one_line_error(placed(key, value))
    leaf = key.rsplit(".", 1)[-1].split("[")[0]
    assert leaf in msg, msg


@pytest.mark.parametrize("key", sorted(BOUNDS))
def test_every_numeric_key_accepts_its_bounds(key):
    b = BOUNDS[key]
    for v in (b.hi, b.lo if not b.lo_open else b.lo + 1):
        text = placed(key, repr(float(v)) if b.kind is float else str(int(v)))
        try:
            parse_scenario(text, "h.toml")
        except ScenarioError as e:
            # a value at its bound may still fail a cross check (a fault past
            # the run's end, a scheduler beyond schedulers), never the bound
            assert not any(
                w in str(e) for w in ("must be an integer", "must be a number", "finite")
            ), str(e)


@pytest.mark.parametrize(
    "workload,name",
    [
        (w, k)
        for w in sorted(WORKLOADS)
        for k, (_, c) in WORKLOADS[w].params.items()
        if isinstance(c, Bound)
    ],
)
def test_every_parameter_refuses_over_its_bound(workload, name):
    b = WORKLOADS[workload].params[name][1]
    for v in (b.hi + 1, 10**30, math.nan, math.inf, -math.inf):
        params = {name: v}
        if workload == "ports":
            params["driver"] = "slow" if name == "cost_ms" else "busy"
        err = check_params(workload, params)
        assert err is not None and err[0] == name, (name, v, err)
        assert len(err[1]) < 200


def test_total_processes_are_bounded():
    groups = "".join(
        f'[[groups]]\nname = "g{i}"\nworkload = "calls"\ncount = 10000\n' for i in range(300)
    )
    msg = _one_line_error(f'name = "many"\n{groups}')
    assert f"at most {MAX_PROCESSES:,}" in msg and "h.toml:" in msg, msg


def test_every_zero_fires_bounded_times():
    text = scenario(duration="seconds = 86400", faults="every = 1e-9")
    msg = _one_line_error(text)
    assert "faults[0].every" in msg and "give 'times'" in msg, msg


@pytest.mark.parametrize("value", ["5", '["x"]', "{ a = 1 }", "1.5"])
def test_match_spec_must_be_a_string_or_boolean(value):
    text = scenario(patterns=f"match_spec = {value}")
    msg = _one_line_error(text)
    assert "patterns[0].match_spec" in msg and "must be true, false" in msg, msg


def test_term_text_is_bounded():
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_term(ok) is not None
    for text, why in [
        ("[" * DEEP, "nested deeper"),
        ("{" * (MAX_DEPTH + 1) + "}" * (MAX_DEPTH + 1), "nested deeper"),
        ("'" + "a" * 256 + "'", "at most 255"),
        ("a" * 256, "at most 255"),
        ("1.0e999", "out of range"),
        ("9" * 5000, "too long"),
        ("'\\x'", "bad escape"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse_term(text)
    assert parse_term("'" + "a" * 255 + "'") == parse_term("a" * 255)


# ---------------------------------------------------------------- the header line
def test_header_line_of_spaces_is_linear():
    """Reaching the line search (a schema error after a multi-line array)
    with a 20 KB line of "[" and spaces: the old regex took about an hour."""
    text = (
        'name = "x"\nrate = [\n['
        + " " * 20_000
        + "\n1]]\n"
        + scenario()[len('name = "hostile"\n') :]
    )
    script = (
        "import sys, time\n"
        "from smp.app.scenario import parse_scenario\n"
        "from smp.core.errors import ScenarioError\n"
        "text = sys.stdin.read()\n"
        "t = time.perf_counter()\n"
        "try:\n"
        "    parse_scenario(text, 'h.toml')\n"
        "except ScenarioError as e:\n"
        "    print(time.perf_counter() - t)\n"
        "    sys.exit(f'smp-emu: {e}')\n"
    )
    r = run_capped([sys.executable, "-c", script], stdin=text.encode(), timeout=60)
    line = assert_one_line(r, 1, contains="h.toml:2: rate:")
    assert float(r.stdout) < 1.0, (r.stdout, line)


# ---------------------------------------------------------------- through smp-emu
def _deep_toml() -> str:
    return f"rate = {'[' * DEEP}{']' * DEEP}\n"


RUN_CASES = {
    # item 4: the header search
    "header-spaces": (
        'name = "x"\nrate = [\n['
        + " " * 20_000
        + "\n1]]\n[[groups]]\nname = 'g'\nworkload = 'ring'\n",
        "rate",
    ),
    "header-spaces-alone": ("[" + " " * 20_000 + "\n", "not valid TOML"),
    # item 6: numbers
    "timeout-nan": (scenario(top="timeout = nan"), "timeout: must be a finite number"),
    "seconds-nan": (scenario(duration="seconds = nan"), "duration.seconds"),
    "at-nan": (scenario(faults="at = nan"), "faults[0].at"),
    "every-nan": (scenario(duration="seconds = 10", faults="every = nan"), "faults[0].every"),
    "seconds-inf-every": (
        scenario(duration="seconds = inf", faults="every = 1.0"),
        "duration.seconds",
    ),
    "pairs-huge": (
        scenario().replace('workload = "ring"', 'workload = "ping_pong"')
        + "[groups.params]\npairs = 1000000000000\n",
        "groups[0].params.pairs",
    ),
    "size-huge": (scenario() + "[groups.params]\nsize = 1000000000000\n", "params.size"),
    "senders-huge": (
        scenario().replace('workload = "ring"', 'workload = "fan_in"')
        + "[groups.params]\nsenders = 10000000\n",
        "params.senders",
    ),
    "groups-300x10000": (
        'name = "many"\n'
        + "".join(
            f'[[groups]]\nname = "g{i}"\nworkload = "calls"\ncount = 10000\n' for i in range(300)
        ),
        f"at most {MAX_PROCESSES:,}",
    ),
    # input that is not a scenario
    "not-utf8": (b'name = "x"\n# caf\xe9\n[[groups]]\n', ":2: not UTF-8"),
    "deep-array": (_deep_toml(), ":1: arrays or inline tables nested deeper"),
    "deep-inline-table": (
        "x = " + "{a = " * DEEP + "1" + "}" * DEEP + "\n",
        "nested deeper",
    ),
    "deep-match-spec": (
        scenario(patterns=f'match_spec = "{"[" * DEEP}"'),
        "patterns[0].match_spec: bad match spec: tuples and lists nested deeper",
    ),
    "match-spec-number": (scenario(patterns="match_spec = 5"), "patterns[0].match_spec"),
    "match-spec-long-atom": (
        scenario(patterns=f"match_spec = \"[{{'_',[],[{{message,'{'a' * 300}'}}]}}]\""),
        "at most 255",
    ),
    "mfa-256": (
        scenario().replace('mfa = ["wl_calls", "fib", 1]', f'mfa = ["{"m" * 256}", "_", "_"]'),
        "patterns[0].mfa: an atom has at most 255 characters",
    ),
    "arity-256": (
        scenario().replace('mfa = ["wl_calls", "fib", 1]', 'mfa = ["m", "f", 256]'),
        "patterns[0].mfa: the arity",
    ),
}


@pytest.mark.parametrize("case", sorted(RUN_CASES))
def test_run_refuses_in_one_line(tmp_path, case):
    data, why = RUN_CASES[case]
    path = write(tmp_path, f"{case}.toml", data)
    r = run_cli("run", path, timeout=60)
    line = assert_one_line(r, EXIT_USAGE, contains=why)
    assert path in line, line
    assert len(line) < 400, line


@pytest.mark.parametrize(
    "tp,why",
    [
        ("wl_calls:check/1 " + "[" * DEEP, "nested deeper"),
        ("wl_calls:check/1 " + "{" * 5000 + "}" * 5000, "nested deeper"),
        ("m" * 256 + ":f/1", "at most 255"),
        ("m:" + "f" * 256 + "/1", "at most 255"),
        ("m:f/256", "at most 255"),
        ("m:f/1 [{'_',[],[{message,'" + "a" * 256 + "'}]}]", "at most 255"),
        ("m:f/1 [{'_',[],[{message,1.0e999}]}]", "out of range"),
    ],
)
def test_tp_refuses_in_one_line(tmp_path, tp, why):
    path = write(tmp_path, "ok.toml", scenario())
    r = run_cli("run", path, "--tp", tp, timeout=60)
    line = assert_one_line(r, EXIT_USAGE, contains=why)
    assert line.startswith("smp-emu: --tp ") and len(line) < 400, line


EXPLORE_OK = """\
[[processes]]
name = "a"
[[queue]]
name = "q"
do = "send"
to = "a"
@queue
[[changes]]
action = "kill"
target = "a"
"""

EXPLORE_CASES = {
    "not-utf8": (EXPLORE_OK.replace("@queue", "# \xff").encode("latin-1"), ":7: not UTF-8"),
    "deep-array": (EXPLORE_OK.replace("@queue", "trace = " + "[" * DEEP), "nested deeper"),
    "count-huge": (EXPLORE_OK.replace("@queue", "count = 1000000000000"), "queue[0].count"),
    "count-nan": (EXPLORE_OK.replace("@queue", "count = nan"), "queue[0].count"),
    "words-inf": (
        EXPLORE_OK.replace('do = "send"', 'do = "gc"').replace("@queue", "words = inf"),
        "queue[0].words",
    ),
    "long-name": (
        EXPLORE_OK.replace('name = "q"', f'name = "q{"x" * 300}"').replace("@queue", ""),
        "at most 255",
    ),
    "samples-huge": (
        EXPLORE_OK.replace("@queue", "") + "[explore]\nsamples = 1000000000\n",
        "explore.samples",
    ),
}


@pytest.mark.parametrize("case", sorted(EXPLORE_CASES))
def test_explore_refuses_in_one_line(tmp_path, case):
    data, why = EXPLORE_CASES[case]
    path = write(tmp_path, f"{case}.toml", data)
    r = run_cli("explore", path, timeout=60)
    line = assert_one_line(r, EXIT_USAGE, contains=why)
    assert path in line and len(line) < 400, line


REPORT_CASES = {
    "not-utf8": (b'{"kind": "run",\n"name": "caf\xe9"}', ":2: not UTF-8"),
    "deep-array": ("[" * DEEP + "]" * DEEP, "nested deeper"),
    "deep-object": ('{"a": ' * 100 + "1" + "}" * 100, "nested deeper than 64"),
    "not-json": ('{"kind": "run",\n nope}', ":2: not JSON"),
    "not-an-object": ("[1, 2, 3]", "not a JSON object"),
    # past 4,300 digits Python's int() raises its own ValueError: it was a traceback
    "long-number": (
        '{"kind": "run", "made": ' + "9" * 5000 + "}",
        "made is an integer of more than 40 digits (5,000)",
    ),
    "long-negative": (
        '{"kind": "run", "stats": [{"seed": -' + "9" * 41 + "}]}",
        "stats[0].seed is an integer of more than 40 digits (41)",
    ),
}


@pytest.mark.parametrize("case", sorted(REPORT_CASES))
def test_report_refuses_in_one_line(tmp_path, case):
    data, why = REPORT_CASES[case]
    path = write(tmp_path, f"{case}.json", data)
    out = str(tmp_path / "out.html")
    r = run_cli("report", path, "-o", out, timeout=60)
    line = assert_one_line(r, EXIT_USAGE, contains=why)
    assert path in line and len(line) < 400, line


def test_report_loads_a_result(tmp_path):
    from smp.app.report import load_result

    path = write(tmp_path, "r.json", json.dumps({"kind": "run", "a": [[1], {"b": 2}]}))
    assert load_result(path) == {"kind": "run", "a": [[1], {"b": 2}]}


# ---------------------------------------------------------------- the timeout covers set-up
SETUP = """\
timeout = {timeout}
[duration]
operations = 1
[[groups]]
name = "r"
workload = "ring"
[groups.params]
size = {size}
"""


def test_setup_stops_within_timeout_plus_one_second(tmp_path):
    """100,000 processes take about 20 s to spawn; with timeout = 1 the run
    stops within 1 s of it, set-up included."""
    path = write(tmp_path, "setup.toml", SETUP.format(timeout=1, size=MAX_PROCESSES))
    script = (
        "import sys, time\n"
        "from smp.app.scenario import load_scenario\n"
        "from smp.app.workloads import SetupTimeout, execute\n"
        "sc = load_scenario(sys.argv[1])\n"
        "t = time.monotonic()\n"
        "try:\n"
        "    execute(sc, mode='nonsmp')\n"
        "except SetupTimeout as e:\n"
        "    print(time.monotonic() - t)\n"
        "    sys.exit(f'smp-emu: {e}')\n"
    )
    r = run_capped([sys.executable, "-c", script, path], timeout=60)
    assert_one_line(r, 1, contains="run not finished within timeout = 1 s: its set-up")
    assert float(r.stdout) < 1 + 1, r.stdout


def test_run_setup_timeout_is_one_line(tmp_path):
    path = write(tmp_path, "setup.toml", SETUP.format(timeout=1, size=MAX_PROCESSES))
    r = run_cli("run", path, "--mode", "smp", timeout=60)
    assert_one_line(r, EXIT_FAILED, contains="within timeout = 1 s: its set-up")
    assert r.stdout == ""


def test_scenario_module_names_its_limits():
    assert scenario_mod.MAX_NESTING < 400  # below where Python's TOML reader gives up
    assert scenario_mod.MAX_ATOM == 255
