"""Every command, given a bad input, says so in one line.

Each row is a command line with one thing wrong: a missing file, a
directory, an empty file, JSON of the wrong kind, a journal or a trace
where something else is wanted, a port in use, a folder that is not there,
a file that is not TOML.  The command must exit with the documented code
(smp/app/exitcodes.py) and print one line on stderr that names the file or
option and what was wrong: no traceback, no errno, no Python exception name.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest
from helpers import PING_PONG_T, own_group, until
from hostile.capped import assert_one_line, run_capped, run_cli

from smp.app.exitcodes import EXIT_INTERRUPTED, EXIT_USAGE
from smp.core.terms import A, Pid
from smp.ports.traceport import FileTracePort
from smp.wire.etf import encode

SMALL = (
    """\
name = "small"
mode = "smp"
schedulers = 1
seed = 3
[duration]
operations = 3
"""
    + PING_PONG_T
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The inputs of the table, made once: good ones to hand to the wrong
    command, and bad ones."""
    d = tmp_path_factory.mktemp("bad-inputs")
    f = {"dir": d / "a-directory", "missing": d / "not-there.toml", "nodir": d / "no-dir" / "x"}
    f["dir"].mkdir()
    f["empty"] = d / "empty.toml"
    f["empty"].write_text("")
    f["boolsched"] = d / "boolsched.toml"  # (it said "not True", Python's spelling)
    f["boolsched"].write_text('schedulers = true\n[[groups]]\nname = "g"\nworkload = "ping_pong"\n')
    f["latefault"] = d / "latefault.toml"  # (a fault --duration puts past the end)
    f["latefault"].write_text(
        '[duration]\nseconds = 1.0\n[[tracers]]\nname = "t"\n'
        '[[groups]]\nname = "pp"\nworkload = "ping_pong"\ntracer = "t"\n'
        '[[faults]]\naction = "kill_processes"\ntarget = "pp"\nat = 0.5\n'
    )
    f["nottoml"] = d / "scenario.toml"
    f["nottoml"].write_text("name = 'x'\n[[groups]\nworkload =\n")
    f["nofolder"] = d / "nofolder.toml"
    f["nofolder"].write_text(
        '[[tracers]]\nname = "f"\nkind = "file"\npath = "no-such-folder/x.trace"\n'
        '[[groups]]\nname = "g"\nworkload = "ping_pong"\ntracer = "f"\n'
    )
    f["array"] = d / "array.json"
    f["array"].write_text("[1, 2, 3]\n")
    f["object"] = d / "object.json"
    f["object"].write_text('{"what": "not a result"}\n')
    f["kind"] = d / "kind.json"  # (it said the file had no key 'mode')
    f["kind"].write_text('{"kind": "nope"}\n')
    f["baddot"] = d / "graph.dot"  # a DOT graph explore --graph did not write
    f["baddot"].write_text("digraph G {\n  a -> b;\n}\n")
    f["garbage"] = d / "garbage.bin"
    f["garbage"].write_bytes(bytes(range(256)) * 3)
    # a trace frame that says 16 bytes and holds 2
    f["truncated"] = d / "truncated.trace"
    f["truncated"].write_bytes(b"\0\0\0\0\x10\x83h")
    f["trace"] = d / "good.trace"
    with FileTracePort(str(f["trace"])) as port:
        port.write(encode((A.trace, Pid(80), A.send, A.hello, Pid(81))))
    f["queue"] = d / "queue.toml"  # an explore scenario
    f["queue"].write_text('name = "q"\n[[queue]]\nkind = "send"\n')
    f["small"] = d / "small.toml"
    f["small"].write_text(SMALL)
    # a real journal and a real result, from one small run
    f["journal"], f["result"] = d / "run.journal", d / "run.json"
    r = run_cli("run", str(f["small"]), "--journal", str(f["journal"]), "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout)
    f["result"].write_text(r.stdout)
    # CURVE keys for the dispatcher rows (no --insecure warning line)
    f["keys"] = d / "keys"
    assert run_cli("keygen", str(f["keys"])).returncode == 0
    (f["keys"] / "authorized").mkdir()
    return {k: str(v) for k, v in f.items()}


@pytest.fixture(scope="module")
def busy_port():
    """A port something on this host listens on, for as long as the table runs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


U = EXIT_USAGE
# (command line, exit code, a fragment the one line must contain); {name} is
# a file of the fixture, {port} the busy port
ROWS = [
    # scenarios: run, compare, stress, explore
    (["run", "{missing}"], U, "not-there.toml"),
    (["run", "{dir}"], U, "a-directory"),
    (["run", "{empty}"], U, "empty.toml"),
    (["run", "{nottoml}"], U, "not valid TOML"),
    (["run", "{array}"], U, "not valid TOML"),
    (["run", "{journal}"], U, "run.journal"),
    (["run", "{nofolder}"], U, "tracers[0].path: no such folder 'no-such-folder'"),
    (["compare", "{missing}"], U, "not-there.toml"),
    (["compare", "{nottoml}"], U, "not valid TOML"),
    (["stress", "{dir}"], U, "a-directory"),
    (["stress", "{nottoml}"], U, "not valid TOML"),
    (["explore", "{nottoml}"], U, "not valid TOML"),
    # the other kind of scenario: named as such, not by its first unknown key
    (["compare", "seq"], U, "an explore example (smp-emu explore seq)"),
    (["run", "{queue}"], U, "an explore scenario (it has [[queue]])"),
    (["explore", "{dir}"], U, "a-directory"),
    (["explore", "{missing}"], U, "not-there.toml: no such file"),
    # explore options that would do nothing are refused, not ignored
    (["explore", "churn", "--schedule", "S1", "--graph", "{nodir}"], U, "--graph is for a search"),
    (["explore", "churn", "--schedule", "S1", "--jobs", "2"], U, "--jobs is for a search"),
    (["explore", "churn", "--depth", "2"], U, "--depth is the depth of --pct runs"),
    (["explore", "churn", "--seed", "3"], U, "--seed seeds --random and --pct runs"),
    (["explore", "churn", "--graph", "-"], U, "--graph -: give a file name"),
    (["explore", "churn", "--time-budget", "nan"], U, "nan is not a number"),
    (["explore", "churn", "--time-budget", "inf"], U, "inf is not a finite number"),
    (["explore", "churn", "--random", "3", "--max-executions", "3"], U, "--max-executions bounds"),
    (["explore", "churn", "--schedule", "S1", "--seed", "2"], U, "--seed is for a search"),
    (["explore", "seq_tracer_replaced", "--operations", "2"], U, "a fixed workload"),
    # a search's output that cannot be written: said before the search
    (["explore", "churn", "--graph", "{nodir}"], U, "x: no such directory"),
    # a file that cannot be read: that, not the options it was given
    (["explore", "{nottoml}", "--jobs", "2"], U, "not valid TOML"),
    (["explore", "{dir}", "--max-executions", "5"], U, "a-directory"),
    (["explore", "seq", "--no-events"], U, "--events/--no-events is for run scenarios"),
    (["explore", "seq", "--schedule", "replace@" + "9" * 5000], U, "at most 12 digits"),
    (["stress", "--duration", "nan"], U, "nan is not a number"),
    (["run", "{boolsched}"], U, "boolsched.toml:1: schedulers: must be an integer, not true"),
    # (it fired after the workload, as an invariant failure, exit 1)
    (["stress", "{latefault}", "--duration", "0.5"], U, "faults[0].at: 0.5 s is past the end"),
    (["stress", "--seed", str(1 << 70)], U, "not a 64-bit integer"),
    (["explore", "{empty}"], U, "empty.toml: an empty scenario"),
    # outputs that cannot be written
    (["run", "{small}", "--out", "{nodir}"], U, "--out"),
    (["run", "{small}", "--out", "{dir}"], U, "--out"),
    (["run", "{small}", "--journal", "{nodir}"], U, "--journal"),
    (["run", "{small}", "--out", "{nottoml}", "--journal", "{nottoml}"], U, "name the same file"),
    (["run", "{small}", "--out", ""], U, "--out '': give a file name"),
    (["stress", "{small}", "--journal", "{nodir}"], U, "--journal"),
    (["report", "{result}", "-o", "{nodir}"], U, "--output"),
    (["report", "{result}", "-o", "{dir}"], U, "--output"),
    # bad option values
    (["run", "{small}", "--seed", "seven"], U, "--seed"),
    (["compare", "{small}", "--seed", "1.5"], U, "--seed"),
    (["run", "{small}", "--seed", str(1 << 63)], U, "not a 64-bit integer"),
    (["run", "{small}", "--mode", "both"], U, "--mode"),
    (["read", "{trace}", "--node-number", "x"], U, "--node-number"),
    (["read", "{trace}", "--timeout", "-1"], U, "--timeout"),
    (["read", "{trace}", "--timeout", "nan"], U, "--timeout"),
    (["read", "{trace}", "--max-frame", "5G"], U, "--max-frame '5G': expected a size from 1 to 4G"),
    (["read", "{trace}", "--max-frame", "9" * 20], U, "expected a size from 1 to 4G"),
    (["read", "localhost:99999"], U, "port 99999 is not a TCP port"),
    (["read", "localhost:0"], U, "port 0 is not a TCP port"),
    # trace files
    (["read", "{missing}"], U, "not-there.toml"),
    (["read", "{dir}"], U, "is a directory"),
    (["read", "{empty}"], U, "empty"),
    (["read", os.devnull], U, f"{os.devnull}: no trace frames in it"),
    (["read", "{garbage}"], U, "garbage.bin"),
    (["read", "{truncated}"], U, "truncated"),
    (["read", "{journal}"], U, "run.journal"),
    (["read", "{result}"], U, "run.json"),
    # saved results
    (["report", "{missing}"], U, "not-there.toml"),
    (["report", "{dir}"], U, "a-directory"),
    (["report", "{empty}"], U, "empty.toml"),
    (["report", "{array}"], U, "not a run, stress, compare or explore result"),
    (["report", "{object}"], U, "not a run, stress, compare or explore result"),
    (["report", "{kind}"], U, 'kind "nope" is no saved result\'s (run, stress, compare, explore'),
    (["report", "{journal}"], U, "run.journal"),
    (["report", "{trace}"], U, "good.trace"),
    (["report", "{garbage}"], U, "garbage.bin"),
    (["report", "{baddot}"], U, "graph.dot:1: no 'digraph"),
    # journals
    (["replay", "{missing}"], U, "not-there.toml"),
    (["replay", "{dir}"], U, "is a directory"),
    (["replay", "{empty}"], U, "not a dispatcher journal"),
    (["replay", "{garbage}"], U, "not a dispatcher journal"),
    (["replay", "{trace}"], U, "not a dispatcher journal"),
    (["replay", "{result}"], U, "not a dispatcher journal"),
    # the dispatcher and its schedulers
    (["dispatcher", "{nottoml}", "--bind", "tcp://127.0.0.1:7000", "--schedulers", "1"], U, "TOML"),
    (
        ["dispatcher", "--bind", "tcp://127.0.0.1:{port}", "--schedulers", "1", "--keys", "{keys}"],
        U,
        "already in use",
    ),
    (
        [
            "dispatcher",
            "--bind",
            "tcp://127.0.0.1:{port_1}",
            "--schedulers",
            "1",
            "--keys",
            "{keys}",
        ],
        U,
        "already in use",
    ),
    (
        ["dispatcher", "--bind", "127.0.0.1:7000", "--schedulers", "1", "--keys", "{keys}"],
        U,
        "--bind",
    ),
    (
        [
            "dispatcher",
            "--bind",
            "tcp://127.0.0.1:7000",
            "--schedulers",
            "1",
            "--keys",
            "{missing}",
        ],
        U,
        "--keys",
    ),
    (
        ["dispatcher", "--bind", "tcp://127.0.0.1:7000", "--schedulers", "1", "--keys", "{dir}"],
        U,
        "server.key",
    ),
    (["scheduler", "--connect", "localhost:7000", "--insecure"], U, "--connect"),
    (["scheduler", "--connect", "tcp://127.0.0.1:99999", "--keys", "{keys}"], U, "--connect"),
    (
        ["scheduler", "--connect", "tcp://127.0.0.1:7000", "--keys", "{dir}"],
        U,
        "scheduler.key_secret",
    ),
    # the rest
    (["keygen", "{empty}"], U, "DIRECTORY"),
    (["schema", "everything"], U, "'everything' is not one of"),
    (["examples", "extra"], U, "extra"),
    (["nosuchcommand"], U, "nosuchcommand"),
]


def _ids(row) -> str:
    argv, _, _ = row
    return " ".join(a.strip("{}") for a in argv)[:60]


@pytest.mark.parametrize("row", ROWS, ids=[_ids(r) for r in ROWS])
def test_a_bad_input_is_one_line(row, files, busy_port):
    argv, code, fragment = row
    values = {**files, "port": busy_port, "port_1": busy_port - 1}
    args = [a.format(**values) for a in argv]
    r = run_cli(*args, timeout=90)
    line = assert_one_line(r, code, contains=fragment)
    assert line.startswith("smp-emu"), line


def test_the_port_row_names_the_busy_port(files, busy_port):
    """P+1 taken: the dispatcher's port, named, at once (not after --wait)."""
    r = run_cli(
        "dispatcher",
        "--bind",
        f"tcp://127.0.0.1:{busy_port - 1}",
        "--schedulers",
        "1",
        "--keys",
        files["keys"],
        timeout=90,
    )
    line = assert_one_line(r, EXIT_USAGE, contains=str(busy_port))
    assert r.seconds < 30, (r.seconds, line)


def test_a_scheduler_with_no_controller_at_its_address_says_so_in_seconds(tmp_path):
    """Every connect refused (nothing listens at --connect): one line naming
    the address well before the 60 s the welcome may take."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    url = f"tcp://127.0.0.1:{port}"
    keys = tmp_path / "keys"
    for name in ("server", "scheduler"):
        assert run_cli("keygen", str(keys), "--name", name, timeout=60).returncode == 0
    r = run_cli("scheduler", "--connect", url, "--keys", str(keys), timeout=90)
    line = assert_one_line(r, 1, contains=f"nothing listens at tcp://127.0.0.1:{port}")
    assert r.seconds < 30, (r.seconds, line)


# ------------------------------------------------- the summary, off a terminal
def _summary(stderr: str, command: str) -> str:
    lines = [x for x in stderr.splitlines() if x.startswith(f"smp-emu: {command} ")]
    assert len(lines) == 1, stderr[-2000:]
    return lines[0]


def test_run_says_its_summary_and_seed_off_a_terminal(files):
    r = run_cli("run", files["small"], "--seed", "11", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    line = _summary(r.stderr, "run")
    assert "small (smp, 1 scheduler(s), seed 11)" in line and "made " in line, line
    assert "interrupted" not in line
    # the scenario's seed unless --seed, recorded in the JSON
    assert json.loads(open(files["result"]).read())["seed"] == 3
    r = run_cli("run", files["small"], "--seed", "-12", "--json", timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout)["seed"] == -12, r.stderr[-2000:]
    assert "smp-emu: run " not in r.stderr  # the JSON on stdout is the summary


def test_compare_records_the_seed(files):
    r = run_cli("compare", files["small"], "--seed", "9", "--json", timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    c = json.loads(r.stdout)
    assert c["seed"] == 9 and {x["seed"] for x in c["runs"].values()} == {9}
    r = run_cli("compare", files["small"], "--seed", "9", timeout=180)
    assert r.returncode == 0 and "\nseed: 9\n" in r.stdout, r.stdout[:500]


def _interrupt(argv: list[str], journal) -> subprocess.CompletedProcess:
    """Start ``smp-emu ARGV``, wait until its ``journal`` (or another file it
    writes as it runs) grows (the run is under way), Ctrl-C its process group
    as a terminal does; its exit and output."""
    cmd = [sys.executable, "-c", "from smp.app.cli import main; main()", *argv]
    with own_group(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as p:
        until(lambda: journal.exists() and journal.stat().st_size > 50_000, p, 90)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=120)
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def test_an_interrupted_stress_says_interrupted(files, tmp_path):
    journal = tmp_path / "stress.journal"
    argv = ["stress", files["small"], "--duration", "30", "--faults", "0"]
    r = _interrupt([*argv, "--journal", str(journal)], journal)
    assert r.returncode == EXIT_INTERRUPTED, r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "interrupted after " in r.stdout and "of --duration 30" in r.stdout, r.stdout
    assert "within 10 %" not in r.stdout and "\nran " not in r.stdout, r.stdout
    assert "interrupted after " in _summary(r.stderr, "stress")


def test_an_interrupted_run_says_so_in_its_summary(files, tmp_path):
    scenario = tmp_path / "long.toml"
    scenario.write_text(SMALL.replace("operations = 3", "seconds = 30"))
    journal = tmp_path / "run.journal"
    r = _interrupt(["run", str(scenario), "--journal", str(journal)], journal)
    assert r.returncode == EXIT_INTERRUPTED, r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "interrupted after " in _summary(r.stderr, "run")


@pytest.mark.parametrize("mode", ["smp", "nonsmp"])
def test_an_interrupted_run_writes_every_message_it_counts_delivered(tmp_path, mode):
    """Ctrl-C mid-run: the trace file holds, once each, every message the
    summary counts as delivered to its tracer.  The last ones were in flight
    from the dispatcher, or not yet taken from the collector, and were lost
    (about 300 in a run of 5,000)."""
    scenario = tmp_path / "long.toml"
    scenario.write_text(
        SMALL.replace("operations = 3", "seconds = 30").replace("schedulers = 1", "schedulers = 2")
    )
    out = tmp_path / "trace.jsonl"
    argv = ["run", str(scenario), "--mode", mode, "--format", "json", "--out", str(out)]
    r = _interrupt([*argv, "--json"], out)
    assert r.returncode == EXIT_INTERRUPTED, r.stderr[-2000:]
    summary = json.loads(r.stdout)
    assert summary["interrupted"], summary["error"]
    stats, lines = summary["stats"], out.read_text().splitlines()
    assert stats["delivered"] == summary["tracers"]["t"]["received"] == len(lines) > 0
    assert len(set(lines)) == len(lines)  # (each send carries its own count)
    # its result draws (it was refused: a time-bounded run cut short has no over_pct)
    (tmp_path / "run.json").write_text(r.stdout)
    page = tmp_path / "run.html"
    drawn = run_cli("report", str(tmp_path / "run.json"), "-o", str(page), timeout=120)
    assert drawn.returncode == 0, drawn.stderr
    assert "interrupted after " in page.read_text()


@pytest.mark.parametrize("mode", ["smp", "nonsmp"])
def test_a_run_out_of_time_writes_every_message_it_counts_delivered(tmp_path, mode):
    """A run its timeout ends counted as delivered messages still on their
    way to the tracer's scheduler (delivered 3,488, received 3,486)."""
    scenario = tmp_path / "to.toml"
    scenario.write_text(
        SMALL.replace("operations = 3", "operations = 1000000")
        .replace("schedulers = 1", "schedulers = 2")
        .replace('name = "small"', 'name = "small"\ntimeout = 1')
    )
    out = tmp_path / "trace.jsonl"
    r = run_cli(
        "run",
        str(scenario),
        "--mode",
        mode,
        "--format",
        "json",
        "--out",
        str(out),
        "--json",
        timeout=120,
    )
    summary = json.loads(r.stdout)
    assert summary["error"].startswith("run not finished within 1 s"), summary["error"]
    lines = out.read_text().splitlines()
    assert summary["stats"]["delivered"] == summary["tracers"]["t"]["received"] == len(lines)


def test_the_demo_keeps_its_summary_off_the_trace():
    r = run_capped([sys.executable, "-m", "smp"], timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert " ! " in r.stdout and "-- " not in r.stdout
    assert [x.split(" (")[0] for x in r.stderr.splitlines()] == ["-- nonsmp", "-- smp"]


def test_the_demo_refuses_an_argument_in_one_line_and_says_what_it_is():
    r = run_capped([sys.executable, "-m", "smp", "explore", "churn"], timeout=60)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout[-500:])
    assert r.stderr.splitlines() == [
        "python -m smp: takes no argument, got 'explore' (see python -m smp --help)"
    ]
    h = run_capped([sys.executable, "-m", "smp", "--help"], timeout=60)
    assert h.returncode == 0 and h.stdout.startswith("usage: python -m smp\n")
    assert " ! " not in h.stdout  # (the demo did not run)


@pytest.mark.parametrize(
    "args, option",
    [
        (["report", "{result}", "-o", "/dev/full"], "-o/--output /dev/full"),
        (
            ["explore", "churn", "--max-executions", "2", "--no-nonsmp", "--graph", "/dev/full"],
            "--graph /dev/full",
        ),
        (["run", "--mode", "nonsmp", "--out", "/dev/full"], "--out /dev/full"),
    ],
)
def test_a_full_disk_names_the_file_it_could_not_write(files, args, option):
    """A write that fails at the write or the close (no space left), not at
    the open, still names the option and the file (it said only "no space
    left on device")."""
    if not os.path.exists("/dev/full"):
        pytest.fail("/dev/full is missing: the test needs a Linux /dev")
    r = run_cli(*[a.format(**files) for a in args], timeout=120)
    assert_one_line(r, EXIT_USAGE, contains=f"{option}: cannot write it: no space left on device")


def test_a_trace_read_to_a_full_disk_names_standard_output(tmp_path):
    """``smp-emu read FILE > /dev/full``: the write that fails names
    standard output, in one line (it printed ``[Errno 28] No space left on
    device``)."""
    if not os.path.exists("/dev/full"):
        pytest.fail("/dev/full is missing: the test needs a Linux /dev")
    trace = tmp_path / "t.trace"
    with FileTracePort(str(trace)) as p:
        for i in range(3):
            p.write(encode((A.trace, Pid(80), A.send, i, Pid(81))))
    for fmt in ("dbg", "terms", "json"):
        with open("/dev/full", "w") as full:
            r = subprocess.run(
                [sys.executable, "-c", "from smp.app.cli import main; main()", "read", str(trace),
                 "--format", fmt],
                stdout=full, stderr=subprocess.PIPE, text=True, timeout=60,
            )  # fmt: skip
        lines = r.stderr.strip().splitlines()
        assert r.returncode == EXIT_USAGE and len(lines) == 1, (fmt, r.stderr)
        assert lines[0] == "smp-emu: standard output: cannot write it: no space left on device"
