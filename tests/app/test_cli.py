"""``smp-emu`` driven as a user drives it: CliRunner in-process, and a real
subprocess for exit codes and Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import psutil
import pytest
from click.testing import CliRunner

from smp.app import entry
from smp.app.cli import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SMALL = """\
name = "small"
mode = "nonsmp"
seed = 1
[duration]
operations = 5
[[tracers]]
name = "t1"
[[tracers]]
name = "f"
kind = "file"
path = "{path}"
[[groups]]
name = "pp"
workload = "ping_pong"
trace = ["send", "receive", "timestamp"]
tracer = "t1"
[[groups]]
name = "calls"
workload = "calls"
trace = ["call"]
tracer = "f"
[[patterns]]
mfa = ["wl_calls", "_", "_"]
match_spec = "exception_trace"
"""


@pytest.fixture
def small(tmp_path):
    trace = tmp_path / "calls.trace"
    p = tmp_path / "small.toml"
    p.write_text(SMALL.format(path=trace))
    return p, trace


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_default_run_prints_dbg_trace():
    r = CliRunner().invoke(cli, ["run", "--mode", "nonsmp"])
    assert r.exit_code == 0, r.output
    assert " ! {ping," in r.output
    assert "call wl_calls:fib(" in r.output


def test_json_summary_parses(small):
    path, _ = small
    r = CliRunner().invoke(cli, ["run", str(path), "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["mode"] == "nonsmp" and s["completed"] and not s["interrupted"]
    st = s["stats"]
    assert st["made"] == st["delivered"] + st["dropped"] + st["queued"] > 0
    assert s["invariants"]["ok"]
    assert s["tracers"]["t1"]["received"] > 0


def test_json_lines_format(small):
    path, _ = small
    r = CliRunner().invoke(cli, ["run", str(path), "--format", "json"])
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in r.output.splitlines()]
    assert lines[-1]["kind"] == "summary"
    assert all(x["kind"] == "trace" for x in lines[:-1]) and len(lines) > 1


def test_read_trace_file_written_by_a_run(small):
    path, trace = small
    r = CliRunner().invoke(cli, ["run", str(path), "--out", os.devnull])
    assert r.exit_code == 0, r.output
    assert trace.exists()
    r = CliRunner().invoke(cli, ["read", str(trace)])
    assert r.exit_code == 0, r.output
    assert "call wl_calls:check(-1)" in r.output
    assert "exception_from {wl_calls,check,1} {error,badarg}" in r.output


WRAPPED = """\
name = "wrapped"
mode = "{mode}"
seed = 1
[duration]
operations = 4
[[tracers]]
name = "w"
kind = "file"
path = "{path}"
wrap_suffix = ".trc"
wrap_size = {size}
wrap_count = 3
[[groups]]
name = "pp"
workload = "ping_pong"
trace = ["send"]
tracer = "w"
"""


@pytest.mark.parametrize("mode", ["smp", "nonsmp"])
@pytest.mark.parametrize("size", [0, 200])
def test_a_run_writes_a_wrap_log_the_reader_reads(tmp_path, mode, size):
    """A file tracer with a wrap log, its size 0 as dbg takes it (each
    message ends its file) or 200 bytes: the run leaves the wrap log's 3
    files, and ``read --wrap`` prints the messages they kept; a size the
    driver cannot hold is refused in one line."""
    base = tmp_path / "w"
    p = tmp_path / "wrapped.toml"
    p.write_text(WRAPPED.format(mode=mode, path=base, size=size))
    r = CliRunner().invoke(cli, ["run", str(p), "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    delivered, w = s["stats"]["delivered"], s["tracers"]["w"]
    assert w["port"]["messages"] == delivered > 3 and w["port"]["wraps"] > 0
    assert s["invariants"]["ok"]
    # (3 files kept, numbered from 0 to 3 as trace_file_drv cycles them)
    files = sorted(f for f in os.listdir(tmp_path) if f.endswith(".trc"))
    assert len(files) == 3 and set(files) <= {f"w{i}.trc" for i in range(4)}, files
    if size == 0:  # (one message at most each: a file ends after every one)
        assert all(os.path.getsize(tmp_path / f) < 200 for f in files)
    r = CliRunner().invoke(cli, ["read", str(base), "--wrap", ".trc", "--wrap-count", "3"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    # (what the kept files hold: the run's received for a file tracer)
    assert all(" ! {" in x for x in lines) and 0 < len(lines) == w["received"] < delivered
    big = WRAPPED.format(mode=mode, path=base, size=1 << 32)
    p.write_text(big)
    r = CliRunner().invoke(cli, ["run", str(p)])
    assert r.exit_code == 2 and "tracers[0].wrap_size: must be an integer <= 4294967295" in (
        r.output
    )


def test_read_missing_file_fails():
    r = CliRunner().invoke(cli, ["read", "/nonexistent/trace.bin"])
    assert r.exit_code == 2
    assert "no such file" in r.output


def test_bad_scenario_names_key_and_line(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('name = "x"\n\n[[groups]]\nname = "g"\nworkload = "ping_pong"\ncount = -1\n')
    r = CliRunner().invoke(cli, ["run", str(p)])
    assert r.exit_code == 2
    assert f"{p}:6: groups[0].count: must be an integer >= 1, not -1" in r.output


def test_unknown_flag_is_a_usage_error():
    r = subprocess.run(
        [sys.executable, "-m", "smp.app.cli", "run", "--no-such-flag"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert r.returncode == 2
    assert "No such option" in r.stderr


def test_compare_shows_both_modes(tmp_path):
    p = tmp_path / "cmp.toml"
    p.write_text(
        'name = "cmp"\nseed = 2\n[duration]\noperations = 3\n[[tracers]]\nname = "t"\n'
        '[[groups]]\nname = "pp"\nworkload = "ping_pong"\ntrace = ["send"]\ntracer = "t"\n'
    )
    r = CliRunner().invoke(cli, ["compare", str(p)])
    assert r.exit_code == 0, r.output
    assert "nonsmp" in r.output and "smp" in r.output
    assert "invariants (nonsmp): all hold" in r.output
    assert "invariants (smp): all hold" in r.output
    r = CliRunner().invoke(cli, ["compare", str(p), "--json"])
    c = json.loads(r.stdout)
    assert c["modes"] == ["nonsmp", "smp"]
    made = next(x for x in c["rows"] if x["what"] == "made")
    assert made["nonsmp"] == made["smp"] == 7  # ping: 3 pings + stop; pong: 3 pongs


def test_report_is_self_contained(small, tmp_path):
    path, _ = small
    r = CliRunner().invoke(cli, ["run", str(path), "--json"])
    res = tmp_path / "run.json"
    res.write_text(r.output)
    out = tmp_path / "report.html"
    r = CliRunner().invoke(cli, ["report", str(res), "-o", str(out)])
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert "<svg" in html and "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_stress_nonsmp_holds_invariants():
    r = CliRunner().invoke(cli, ["stress", "--duration", "0.3", "--mode", "nonsmp", "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["invariants"]["ok"] and len(s["faults"]) == 12


def test_ctrl_c_stops_cleanly_and_prints_summary():
    p = subprocess.Popen(
        [sys.executable, "-m", "smp.app.cli", "run", "long", "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        first: list = []
        t = threading.Thread(target=lambda: first.append(p.stdout.readline()), daemon=True)
        t.start()
        t.join(60)  # wait (bounded) for the first trace line
        assert first and json.loads(first[0])["kind"] == "trace"
        children = psutil.Process(p.pid).children(recursive=True)
        assert children, "the run should have scheduler processes"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 130, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["kind"] == "summary" and summary["interrupted"]
    assert summary["stats"]["made"] > 0
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert not [c for c in alive if c.status() != psutil.STATUS_ZOMBIE]


def test_ctrl_c_during_smp_stress_exits_130_with_summary_and_journal(tmp_path):
    """Ctrl-C (to the whole process group, as a terminal sends it) while the
    fault controller's BIFs are being served: the interrupt stops the run
    instead of becoming a process's crash; exit 130, the summary, and the
    journal kept where it says."""
    import time

    journal = tmp_path / "stress.journal"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "smp.app.cli",
            "stress",
            "--mode",
            "smp",
            "--duration",
            "20",
            "--schedulers",
            "2",
            "--faults",
            "200",
            "--journal",
            str(journal),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (journal.exists() and journal.stat().st_size > 2_000_000):  # well under way
            assert p.poll() is None, p.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the run did not get going"
            time.sleep(0.02)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
    assert p.returncode == 130, err[-3000:]
    assert "KeyboardInterrupt" not in err and "Traceback" not in err, err[-3000:]
    assert out.startswith("stress, scenario stress (smp, 2 scheduler(s)"), out
    assert f"journal kept: {journal}" in err
    assert journal.exists() and journal.stat().st_size > 2_000_000


NEW_TRACED = """\
name = "new_traced"
seed = 2
[duration]
operations = 2
[[tracers]]
name = "t1"
[[tracers]]
name = "t2"
[[trace]]
pids = "new"
flags = ["procs"]
tracer = "t2"
[[groups]]
name = "pp"
workload = "ping_pong"
[[faults]]
action = "kill_tracer"
target = "t1"
at = 0.01
"""


@pytest.mark.parametrize("mode", ["smp", "nonsmp"])
def test_a_fault_controller_is_untraced_with_the_tracer_new_processes_got(tmp_path, mode):
    """New processes traced to t2, not the first tracer: the controller and
    the fault log spawned for the faults are untraced with t2 (with t1, the
    first tracer, the run failed: they already had another tracer); the
    run and its exploration complete, and t2 gets the workload's events."""
    p = tmp_path / "new.toml"
    p.write_text(NEW_TRACED)
    r = CliRunner().invoke(cli, ["run", str(p), "--mode", mode, "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["tracers"]["t2"]["received"] > 0
    x = CliRunner().invoke(cli, ["explore", str(p), "--max-executions", "5", "--jobs", "1"])
    assert x.exit_code == 0, x.output


def test_a_ctrl_c_while_the_command_line_loads_is_one_line_and_exit_130(monkeypatch, capsys):
    """Loading the command line takes about a second; a Ctrl-C then gave a
    KeyboardInterrupt traceback from deep in an import."""

    def interrupted(name):
        assert name == "smp.app.cli"
        raise KeyboardInterrupt

    monkeypatch.setattr(entry.importlib, "import_module", interrupted)
    with pytest.raises(SystemExit) as e:
        entry.main()
    assert e.value.code == 130
    assert capsys.readouterr().err == "smp-emu: interrupted\n"


def test_the_entry_point_loads_next_to_nothing_before_it_takes_a_ctrl_c():
    """What runs before ``entry.main`` can take a Ctrl-C (the package and
    the entry module) loads no heavy module: every name of ``smp`` is lazy
    (the terms, the pretty printer and the trace reader were loaded first,
    and a Ctrl-C then printed a traceback)."""
    code = (
        "import sys; import smp.app.entry; "
        "print(sorted(m for m in sys.modules if m.startswith(('smp', 'schedulers', 'dispatcher'))))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    loaded = set(eval(r.stdout))  # (a list of module names)
    assert loaded <= {"smp", "smp.app", "smp.app.entry", "smp.app.exitcodes"}, loaded
    import smp

    assert smp.Atom("a") == smp.A.a and callable(smp.read_trace)
    assert issubclass(smp.ScenarioError, smp.SmpError)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        smp.nothing  # noqa: B018


def test_the_command_is_the_entry_point_that_loads_the_command_line():
    r = subprocess.run(
        [sys.executable, "-c", "from smp.app.entry import main; main()", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and r.stdout.startswith("smp-emu"), (r.stdout, r.stderr[-500:])


def test_a_second_ctrl_c_while_a_run_is_cut_short_is_ignored():
    """The first Ctrl-C (or SIGTERM) stops the run; a second one, while it
    takes in what was delivered and is measured, is ignored: it raised in
    the middle of that, and the run's summary was lost."""
    from smp.app.cli_execute import _Interrupt

    before = signal.getsignal(signal.SIGINT)
    with _Interrupt():
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)  # (ignored: no exception)
        signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGINT) is before


def test_format_json_says_on_stderr_what_json_says():
    """``--format json`` ends stdout with the summary, as ``--json`` prints
    it: stderr then names only the faults that did not take, fire or keep
    their time, as under ``--json`` (it printed every fault's line)."""
    for how in (["--json"], ["--format", "json"]):
        r = CliRunner().invoke(cli, ["run", "churn", *how])
        assert r.exit_code == 0, r.output
        summary = (
            json.loads(r.stdout) if how == ["--json"] else json.loads(r.stdout.splitlines()[-1])
        )
        assert summary["faults"], how
        for line in r.stderr.splitlines():
            if ": fault " in line:
                assert "LATE" in line or "DID NOT TAKE" in line or "did not fire" in line, (
                    how,
                    line,
                )


def test_the_summary_table_gives_the_seed():
    """The table ``--summary`` prints records the seed, as the one-line
    summary and the JSON do (the guide says the summary records it)."""
    r = CliRunner().invoke(cli, ["run", "--mode", "nonsmp", "--summary", "--seed", "77"])
    assert r.exit_code == 0, r.output
    assert "; seed 77" in r.stderr


@pytest.mark.parametrize("mode", ["smp", "nonsmp"])
def test_a_tp_pattern_that_matches_no_function_is_said(mode):
    """``--tp nosuchmod`` matched nothing and the run said nothing; it now
    notes it on stderr and in the JSON, as dbg:tp's {matched,Node,0} would
    show it, and says nothing of a pattern that matched."""
    r = CliRunner().invoke(
        cli, ["run", "--mode", mode, "--tp", "nosuchmod", "--tp", "wl_calls:check/1", "--json"]
    )
    assert r.exit_code == 0, r.output
    notes = json.loads(r.stdout)["notes"]
    assert len(notes) == 1 and notes[0].startswith("--tp nosuchmod: matched no function"), notes
    assert f"smp-emu: note: {notes[0]}" in r.stderr and "wl_calls:check" not in r.stderr


@pytest.mark.parametrize("fmt", ["terms", "json"])
def test_read_numbers_other_nodes_ids_in_every_format(fmt):
    """The guide says ids of other nodes print as the reading node prints
    them, ``<N.X.Y>``: the dbg text did, the terms and JSON formats printed
    ``<node1@host.86.0>``; ``--node-number`` gives the number in each."""
    trace = os.path.join(ROOT, "docs", "examples", "node1.trace")
    for extra, pid in (([], "<1.86.0>"), (["--node-number", "node1@host=0"], "<0.86.0>")):
        r = CliRunner().invoke(cli, ["read", trace, "--format", fmt, *extra])
        assert r.exit_code == 0, r.output
        first = r.stdout.splitlines()[0]
        text = first if fmt == "terms" else json.loads(first)["text"]
        assert text.startswith(f"{{trace,{pid},send,{{ping,1}},"), text
        assert "node1@host" not in text
