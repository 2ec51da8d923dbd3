"""The command line tells the truth: live progress, durations, faults past
the end, one scheduler rule, exit codes, help texts and the README."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

import smp.app.cli_execute as cli_execute
from smp.app.cli import cli
from smp.app.scenario import NONSMP_RULE, parse_scenario
from smp.core.errors import ScenarioError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")

PP = """\
name = "pp"
mode = "{mode}"
{extra}seed = 1
[duration]
{duration}
[[tracers]]
name = "t"
[[groups]]
name = "pp"
workload = "ping_pong"
trace = ["send", "receive"]
tracer = "t"
"""


def _scenario(tmp_path, mode="nonsmp", extra="", duration="operations = 5", tail=""):
    p = tmp_path / "s.toml"
    p.write_text(PP.format(mode=mode, extra=extra, duration=duration) + tail)
    return p


def _invoke(args):
    return CliRunner().invoke(cli, args)


# ---------------------------------------------------------------- 8: live progress
class _Status:
    def __init__(self, text, log):
        self.log = log
        log.append(text)

    def start(self):
        pass

    def stop(self):
        pass

    def update(self, text):
        self.log.append(text)


class _Console:
    def __init__(self, log):
        self.log = log

    def status(self, text):
        return _Status(text, self.log)


def test_stress_progress_counts_live(monkeypatch):
    log: list[str] = []
    monkeypatch.setattr(cli_execute, "_stderr_tty", lambda: True)
    monkeypatch.setattr(cli_execute, "_console", lambda: _Console(log))
    r = _invoke(["stress", "--duration", "0.6", "--mode", "nonsmp", "--faults", "2"])
    assert r.exit_code == 0, r.output
    updates = log[1:]
    assert updates, log
    made = [
        int(m.group(1).replace(",", ""))
        for u in updates
        if (m := re.search(r"([\d,]+) trace messages made", u))
    ]
    assert made and made[-1] > 0 and made == sorted(made), updates
    assert not any("stress stress" in u for u in log), log
    assert all("of 0.6 s" in u for u in updates)


# ---------------------------------------------------------------- 9: durations
def test_duration_is_honoured_or_the_output_says_why():
    r = _invoke(["stress", "--duration", "1", "--mode", "nonsmp", "--faults", "2"])
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stdout.splitlines() if x.startswith("ran "))
    elapsed = float(line.split()[1])
    if elapsed <= 1.1:
        assert line.endswith("within 10 %"), line
    else:
        assert "%): " in line and len(line.split("%): ")[1]) > 20, line


def test_an_overrun_is_explained_from_the_samples():
    from smp.app.run_summary import _duration_report, duration_note

    sc = {"duration": {"seconds": 1.0, "operations": None}}
    summary = {
        "elapsed_s": 1.6,
        "interrupted": False,
        "timeseries": {
            "interval_s": 0.1,
            "t_s": [0.0, 0.5, 1.0, 1.3, 1.6],
            "made": [0, 50, 100, 140, 140],
            "queued_max": [0, 0, 0, 30, 0],
        },
    }
    d = _duration_report(sc, summary, {"s": 0.4, "at": 1.1})
    assert d["within_10pct"] is False and d["over_pct"] == 60.0
    text = "; ".join(d["why"])
    assert "40 trace messages were made after 1.00 s" in text
    assert "30 messages queued" in text and "held 0.40 s" in text
    summary["duration"] = d
    assert duration_note(summary).startswith("ran 1.60 s for seconds = 1 (+60 %)")
    # an interrupted run was not to last its time: no verdict (it said
    # "within 10 %" at -91 % for a minute's run stopped at 5 s)
    short = {**summary, "elapsed_s": 0.09, "interrupted": True}
    d = _duration_report(sc, short, {"s": 0.0, "at": None})
    assert d["within_10pct"] is None and d["over_pct"] is None and d["why"] == []


# ---------------------------------------------------------------- 10: faults past the end
def test_a_fault_past_a_timed_end_is_refused_with_file_line_and_key(tmp_path):
    p = _scenario(
        tmp_path,
        duration="seconds = 3.0",
        tail='[[faults]]\naction = "kill_tracer"\ntarget = "t"\nat = 99\n',
    )
    r = _invoke(["run", str(p)])
    assert r.exit_code == 2
    assert f"{p}:16: faults[0].at: 99 s is past the end of the run" in r.output
    p = _scenario(
        tmp_path,
        duration="seconds = 1.0",
        tail='[[faults]]\naction = "kill_tracer"\ntarget = "t"\nat = 0.2\nevery = 0.5\ntimes = 3\n',
    )
    r = _invoke(["run", str(p)])
    assert r.exit_code == 2 and "faults[0].times: 3 times every 0.5 s" in r.output


def test_a_fault_past_the_timeout_is_refused():
    with pytest.raises(ScenarioError, match=r"x.toml:16: faults\[0\].at: .*timeout = 120 s"):
        parse_scenario(
            PP.format(mode="nonsmp", extra="", duration="operations = 5")
            + '[[faults]]\naction = "kill_tracer"\ntarget = "t"\nat = 200\n',
            "x.toml",
        )


def test_a_fault_after_the_work_is_over_does_not_hold_the_run_and_is_named(tmp_path):
    p = _scenario(tmp_path, tail='[[faults]]\naction = "kill_tracer"\ntarget = "t"\nat = 20\n')
    r = _invoke(["run", str(p), "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["elapsed_s"] < 10
    (nf,) = s["faults_not_fired"]
    assert nf["where"] == f"{p}:16: faults[0].at" and nf["action"] == "kill_tracer"
    assert re.search(
        rf"{re.escape(str(p))}:16: faults\[0\].at: kill_tracer at 20 s did not "
        r"fire: the workload was over at [\d.]+ s",
        r.stderr,
    )


# ---------------------------------------------------------------- 11: one scheduler rule
def test_nonsmp_with_schedulers_is_one_rule_in_the_file_and_on_the_command_line(tmp_path):
    p = _scenario(tmp_path, extra="schedulers = 2\n")
    r = _invoke(["run", str(p), "--json"])
    assert r.exit_code == 0, r.output
    assert f"{p}:3: schedulers: {NONSMP_RULE}" in r.stderr
    # (each note in the JSON too, as the guide says of the notes on stderr)
    assert json.loads(r.stdout)["schedulers"] == 1
    assert json.loads(r.stdout)["notes"] == [f"{p}:3: schedulers: {NONSMP_RULE}"]
    p = _scenario(tmp_path, mode="smp", extra="schedulers = 2\n")
    r = _invoke(["run", str(p), "--mode", "nonsmp", "--schedulers", "2", "--json"])
    assert r.exit_code == 0, r.output
    assert f"--schedulers 2: {NONSMP_RULE}" in r.stderr
    assert json.loads(r.stdout)["schedulers"] == 1
    assert json.loads(r.stdout)["notes"] == [f"--schedulers 2: {NONSMP_RULE}"]
    # the file's count is the smp one: --mode nonsmp alone says nothing
    r = _invoke(["run", str(p), "--mode", "nonsmp", "--json"])
    assert r.exit_code == 0 and "note" not in r.stderr
    assert json.loads(r.stdout)["notes"] == []
    with open(os.path.join(ROOT, "smp", "app", "examples", "default.toml"), encoding="utf-8") as f:
        assert "nonsmp always runs 1 and does not use it" in f.read()


# ---------------------------------------------------------------- 12: exit codes
def test_exit_codes_are_the_same_in_every_command(tmp_path):
    missing = str(tmp_path / "missing")
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x00\x01 not anything")
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"hello": 1}')
    for args in (
        ["read", missing],
        ["replay", missing],
        ["report", missing],
        ["run", missing],
        ["compare", missing],
        ["stress", missing],
        ["read", str(garbage)],
        ["replay", str(garbage)],
        ["report", str(garbage)],
        ["report", str(wrong)],
        ["run", str(garbage)],
    ):
        r = _invoke(args)
        assert r.exit_code == 2, (args, r.exit_code, r.output)
        assert "Traceback" not in r.output
    p = _scenario(tmp_path, extra="timeout = 0.001\n", duration="seconds = 0.5")
    r = _invoke(["run", str(p), "--out", os.devnull])
    assert r.exit_code == 1 and "run not finished within" in r.output
    # a run past its timeout names what was still busy
    p = _scenario(tmp_path, extra="timeout = 2\n", duration="seconds = 30")
    r = _invoke(["run", str(p), "--out", os.devnull])
    assert r.exit_code == 1 and "run not finished within 2 s; still busy: scheduler" in r.output
    assert "runnable" in r.output


# ---------------------------------------------------------------- 13: help texts
COMMANDS = [
    "run",
    "compare",
    "stress",
    "replay",
    "read",
    "report",
    "dispatcher",
    "scheduler",
    "keygen",
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"{c}-help")
def test_help_is_plain_words_with_help_for_every_option_and_ends_with_an_example(command):
    r = _invoke([command, "--help"])
    assert r.exit_code == 0
    text = r.stdout
    assert "``" not in text
    cmd = cli.commands[command]
    for param in cmd.params:
        if getattr(param, "help", None) is None and param.param_type_name == "option":
            pytest.fail(f"{command} {param.opts}: no help text")
    tail = text.rstrip().split("\n\n")[-1]
    assert tail.lstrip().startswith("Example:") and f"smp-emu {command}" in tail, tail


# ---------------------------------------------------------------- 14, 15: README
def _readme() -> str:
    with open(README, encoding="utf-8") as f:
        return f.read()


def test_readme_api_example_prints_erlang(tmp_path):
    code = re.search(r"```python\n(.*?)```", _readme(), re.S).group(1)
    assert "print(smp.format_term(vm.messages(t)))" in code
    script = tmp_path / "example.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout.strip()
    assert out.startswith("[{trace_ts,<0.") and ",send,{ping,0}," in out, out
    assert "(" not in out and "Atom" not in out


def test_readme_documents_the_command_line(tmp_path):
    # the command line's user guide (the README links to it)
    section = "".join(
        open(os.path.join(ROOT, "docs", "guide", page), encoding="utf-8").read()
        for page in ("cli.md", "reading-traces.md")
    )
    for option in ("--wrap-count", "--sample-interval", "--operations", "--first"):
        assert option in section, option
    assert '(path, "wrap", suffix, size, count)' in section
    for command in ("compare", "stress", "report"):
        for param in cli.commands[command].params:
            for opt in param.opts:
                if opt.startswith("--") and opt != "--help":
                    assert opt in section, (command, opt)
    # the wrap error names the count option
    for k in (2, 5):
        (tmp_path / f"w{k}.trc").write_bytes(b"")
    r = _invoke(["read", str(tmp_path / "w"), "--wrap", ".trc"])
    assert r.exit_code == 2 and "--wrap-count" in r.output and "'" not in r.output.split(":")[0]


def test_the_default_sample_interval_is_described_as_what_it_gives():
    """The help of ``--sample-interval`` and the guide promise, by default,
    what ``tests/app/test_samples.py`` checks on a real run: a run bounded
    by time is cut into at least ``MIN_INTERVALS`` intervals.  Not as many
    samples: a tick a process was held across is skipped."""
    from smp.app.series import MIN_INTERVALS

    promise = f"at least {MIN_INTERVALS} intervals"
    guide = open(os.path.join(ROOT, "docs", "guide", "cli.md"), encoding="utf-8").read()
    for command in ("run", "compare", "stress"):
        (opt,) = [p for p in cli.commands[command].params if p.name == "sample_interval"]
        assert promise in opt.help and not re.search(r"\d+ samples", opt.help), command
    assert guide.count(promise) == 2, guide.count(promise)
    assert not re.search(r"\d+\s+samples", guide)
