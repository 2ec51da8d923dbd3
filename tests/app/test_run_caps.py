"""Match specs as users write them (dbg's x, c, cx in scenario files, and
``smp-emu run --tp``), recon_trace's caps on a run (``max_messages``,
``rate``, ``--limit``) and the 17.x timestamp flags."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from smp.app.cli import cli
from smp.app.limits import TraceLimit, parse_limit
from smp.app.scenario import TRACE_FLAG_NAMES, parse_scenario
from smp.core.errors import BadArg, ScenarioError
from smp.core.flags import parse_trace_flags
from smp.core.matchspec import DBG_SHORTCUTS
from smp.core.termtext import parse_term

CALLS = """\
name = "calls"
mode = "nonsmp"
seed = 1
{top}
[duration]
operations = {ops}
[[tracers]]
name = "t"
[[groups]]
name = "calls"
workload = "calls"
trace = {flags}
tracer = "t"
[groups.params]
depth = 2
exception_every = 2
{patterns}"""

PINGPONG = """\
name = "pp"
mode = "nonsmp"
seed = 1
{top}
[duration]
operations = {ops}
[[tracers]]
name = "t"
[[groups]]
name = "pp"
workload = "ping_pong"
trace = ["send", "receive", "timestamp"]
tracer = "t"
"""


def scenario(tmp_path, text, name="s.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def calls(tmp_path, ms=None, ops=4, flags='["call"]', top=""):
    pat = "" if ms is None else f'[[patterns]]\nmfa = ["wl_calls", "_", "_"]\nmatch_spec = "{ms}"\n'
    return scenario(tmp_path, CALLS.format(top=top, ops=ops, flags=flags, patterns=pat))


# ---------------------------------------------------------------- x, c, cx in scenario files


@pytest.mark.parametrize("short", ["x", "c", "cx"])
def test_scenario_match_spec_takes_dbg_shortcuts(tmp_path, short):
    sc = parse_scenario(open(calls(tmp_path, short)).read())
    assert sc["patterns"][0]["match_spec"] == parse_term(DBG_SHORTCUTS[short])
    r = CliRunner().invoke(cli, ["run", calls(tmp_path, short)])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "call wl_calls:check(" in out
    # x: exception_trace (returns and exceptions); c: the caller with each call
    assert ("exception_from {wl_calls,check,1} {error,badarg}" in out) == ("x" in short)
    assert ("returned from wl_calls:check/1 -> ok" in out) == ("x" in short)
    assert ("call wl_calls:check(0) ({'smp.app.workload_bodies',caller,5})" in out) == (
        "c" in short
    )


def test_scenario_bad_match_spec_names_file_and_line(tmp_path):
    with pytest.raises(
        ScenarioError, match=r"s\.toml:19: patterns\[0\]\.match_spec: bad match spec"
    ):
        parse_scenario(open(calls(tmp_path, "xc")).read(), "s.toml")


# ---------------------------------------------------------------- --tp


def test_tp_sets_global_patterns_with_text_or_shortcut_match_specs(tmp_path):
    path = calls(tmp_path, None, ops=4)
    r = CliRunner().invoke(
        cli,
        [
            "run",
            path,
            "--tp",
            "wl_calls:check/1 x",
            "--tp",
            "wl_calls:fib/1 [{['$1'],[{'>','$1',1}],[]}]",
        ],
    )
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert out.count("call wl_calls:check(") == 6  # 4 iterations, 2 with check(-1)
    assert out.count("exception_from {wl_calls,check,1} {error,badarg}") == 2
    # global, as dbg:tp: only the caller's wl_calls:fib(2), not fib's local recursion
    assert out.count("call wl_calls:fib(") == 4 and "call wl_calls:fib(2)" in out
    assert "throw" not in out
    r = CliRunner().invoke(cli, ["run", path])
    assert r.exit_code == 0 and "call wl_calls" not in r.stdout  # no pattern, no call


@pytest.mark.parametrize(
    "bad,why",
    [
        ("wl_calls:check/1 [{'_'", "bad match spec"),
        ("wl_calls:check/1 xx", "bad match spec"),
        ("_:check/1", "with module _"),
        ("wl_calls:check/one", "expected MOD:FUN/ARITY"),
    ],
)
def test_tp_refuses_what_trace_pattern_would(tmp_path, bad, why):
    r = CliRunner().invoke(cli, ["run", calls(tmp_path), "--tp", bad])
    assert r.exit_code == 2 and "--tp" in r.stderr and why in r.stderr


def test_tp_says_when_no_process_has_the_call_flag(tmp_path):
    path = calls(tmp_path, flags='["send"]', ops=1)
    r = CliRunner().invoke(cli, ["run", path, "--tp", "wl_calls", "--format", "terms"])
    assert r.exit_code == 0
    assert "no process of this scenario is traced with the call flag" in r.stderr


# ---------------------------------------------------------------- caps, as recon_trace


def test_count_cap_as_recons_count_tracer():
    lim = TraceLimit(max_messages=5)
    assert not lim.update(3, 0.01)
    assert lim.update(9, 0.02)
    assert lim.tripped["allowed"] == 5 and lim.tripped["delivered_at_trip"] == 9
    assert not lim.update(12, 0.03)  # tripped once


def test_rate_cap_as_recons_rate_tracer():
    # {3, 100}: the 4th message within 100 ms trips, and is still let through
    lim = TraceLimit(rate=[3, 100])
    assert not lim.update(2, 0.0) and not lim.update(3, 0.05)
    assert lim.update(4, 0.06) and lim.tripped["allowed"] == 4
    # a message more than 100 ms after the window began starts a new one,
    # uncounted
    lim = TraceLimit(rate=[3, 100])
    assert not lim.update(3, 0.0)
    assert not lim.update(4, 0.2) and lim.count == 0
    assert not lim.update(7, 0.25) and lim.count == 3
    assert lim.update(8, 0.26) and lim.tripped["allowed"] == 8
    # many at once: the first past the cap trips, whichever cap comes first
    lim = TraceLimit(max_messages=10, rate=[3, 100])
    assert lim.update(50, 0.01) and lim.tripped["allowed"] == 4
    lim = TraceLimit(max_messages=2, rate=[3, 100])
    assert lim.update(50, 0.01) and lim.tripped["allowed"] == 2


def test_parse_limit():
    assert parse_limit("25") == (25, None)
    assert parse_limit("10/1000") == (None, [10, 1000])
    assert parse_limit(" 10 / 50ms ") == (None, [10, 50])
    for bad in ("0", "x", "10/0", "-1", "1/2/3", ""):
        with pytest.raises(ValueError):
            parse_limit(bad)


def _trace_and_summary(r):
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    return [x for x in recs if x["kind"] == "trace"], recs[-1]


def test_limit_switches_tracing_off_and_says_so(tmp_path):
    path = scenario(tmp_path, PINGPONG.format(top="", ops=50000))
    r = CliRunner().invoke(cli, ["run", path, "--limit", "25", "--format", "json"])
    assert r.exit_code == 0, r.output
    traces, s = _trace_and_summary(r)
    assert len(traces) == 25
    lim = s["limit"]
    assert lim["tripped"] and lim["max_messages"] == 25 and lim["printed"] == 25
    assert lim["switched_off"]["trace"] == 2  # the ping and the pong
    assert lim["not_printed"] == s["stats"]["delivered"] - 25 > 0
    # tracing was off long before the 200,000 messages the workload would make
    assert s["stats"]["made"] < 100000 and s["completed"]
    assert "smp-emu: trace limit reached (max_messages = 25)" in r.stderr
    assert "tracing switched off as recon_trace:clear() does" in r.stderr


def test_rate_limit_from_the_command_line(tmp_path):
    path = scenario(tmp_path, PINGPONG.format(top="", ops=20000))
    r = CliRunner().invoke(cli, ["run", path, "--limit", "30/1000", "--format", "json"])
    assert r.exit_code == 0, r.output
    traces, s = _trace_and_summary(r)
    assert s["limit"]["tripped"] and s["limit"]["rate"] == [30, 1000]
    assert len(traces) == s["limit"]["allowed"] == 31  # the one that trips goes through
    assert "more than 30 trace messages within 1000 ms" in r.stderr


def test_scenario_caps_and_a_rate_never_reached(tmp_path):
    path = scenario(tmp_path, PINGPONG.format(top="max_messages = 12", ops=500))
    r = CliRunner().invoke(cli, ["run", path, "--format", "json"])
    traces, s = _trace_and_summary(r)
    assert len(traces) == 12 and s["limit"]["tripped"]
    path = scenario(tmp_path, PINGPONG.format(top="rate = [100000, 10]", ops=5), "r.toml")
    r = CliRunner().invoke(cli, ["run", path, "--format", "json"])
    traces, s = _trace_and_summary(r)
    assert not s["limit"]["tripped"] and len(traces) == s["stats"]["delivered"] > 20
    assert "trace limit" not in r.stderr
    r = CliRunner().invoke(cli, ["run", path, "--format", "json", "--limit", "nope"])
    assert r.exit_code == 2 and "--limit" in r.stderr


@pytest.mark.parametrize(
    "top,why",
    [
        ("max_messages = 0", "s.toml:4: max_messages: must be an integer >= 1, not 0"),
        ("rate = [5]", "s.toml:4: rate: must be [N, ms] with two integers >= 1"),
        ('rate = ["5", 100]', "s.toml:4: rate: must be [N, ms]"),
    ],
)
def test_scenario_caps_are_checked(tmp_path, top, why):
    with pytest.raises(ScenarioError) as ei:
        parse_scenario(PINGPONG.format(top=top, ops=1), "s.toml")
    assert why in str(ei.value)


# ---------------------------------------------------------------- timestamps of the seed


def test_only_the_seeds_timestamp_flags():
    assert [f for f in TRACE_FLAG_NAMES if "timestamp" in f] == ["timestamp", "cpu_timestamp"]
    for f in ("monotonic_timestamp", "strict_monotonic_timestamp"):
        with pytest.raises(BadArg, match="came with OTP 18"):
            parse_trace_flags([f])
    with pytest.raises(
        ScenarioError,
        match=r"s\.toml:12: groups\[0\]\.trace: unknown value "
        r"'monotonic_timestamp'",
    ):
        parse_scenario(
            PINGPONG.format(top="", ops=1).replace('"timestamp"]', '"monotonic_timestamp"]'),
            "s.toml",
        )
