"""Ctrl-C during ``smp-emu compare`` prints what was measured.

A real ``compare`` is started, interrupted with SIGINT while it runs its
nonsmp or its smp side (to the process, or to its process group as a
terminal sends it), and must print the runs it has, each marked
``UNFINISHED`` (interrupted, or not run), without lining up the messages,
exit 130 and leave no process behind.  It printed nothing measured (the
nonsmp side), or a whole comparison of a cut-short smp run with a
difference "explained" for every message it had not made yet (the smp
side).  The test waits for the side to be under way by polling a file that
run writes (the trace file, the smp run's journal), with a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import psutil
import pytest
from helpers import own_group, until
from hostile.capped import run_cli

from smp.app.exitcodes import EXIT_INTERRUPTED

SMP_EMU = [sys.executable, "-c", "from smp.app.cli import main; main()"]

SCENARIO = """\
name = "interrupted"
seed = 1
timeout = 300
[duration]
operations = 10
[[tracers]]
name = "f"
kind = "file"
path = "{trace}"
[[groups]]
name = "pp"
workload = "ping_pong"
trace = ["send", "receive"]
tracer = "f"
"""

#: how far into a side the interrupt comes: this many bytes written
UNDER_WAY = 64 * 1024
#: --operations: interrupting nonsmp, its run would last minutes; interrupting
#: smp, nonsmp takes seconds and smp minutes
OPERATIONS = {"nonsmp": "1000000", "smp": "20000"}


def _size(path) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


def _interrupted_compare(tmp_path, side: str, to_group: bool, as_json: bool):
    """Run compare, SIGINT it once ``side`` is under way; its output, exit
    code and the processes it had then."""
    trace, journal = tmp_path / "f.trace", tmp_path / "smp.journal"
    sc = tmp_path / "interrupted.toml"
    sc.write_text(SCENARIO.format(trace=trace))
    argv = [*SMP_EMU, "compare", str(sc), "--operations", OPERATIONS[side]]
    argv += ["--journal", str(journal)] + (["--json"] if as_json else [])

    # nonsmp under way: its trace file grows and smp's journal is not there
    # yet; smp under way: its journal grows
    def under_way() -> bool:
        if side == "nonsmp":
            return _size(trace) > UNDER_WAY and not journal.exists()
        return _size(journal) > UNDER_WAY

    with own_group(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as p:
        until(under_way, p, 120, f"the {side} run did not get under way")
        children = psutil.Process(p.pid).children(recursive=True)
        if to_group:
            os.killpg(p.pid, signal.SIGINT)
        else:
            p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    return p.returncode, out, err, children


CASES = [
    ("nonsmp", False, False),
    ("smp", False, False),
    ("nonsmp", True, True),
    ("smp", True, True),
]


@pytest.mark.parametrize(
    "side,to_group,as_json",
    CASES,
    ids=[f"{s}-{'group' if g else 'process'}-{'json' if j else 'text'}" for s, g, j in CASES],
)
def test_an_interrupted_compare_prints_what_it_measured(tmp_path, side, to_group, as_json):
    rc, out, err, children = _interrupted_compare(tmp_path, side, to_group, as_json)
    assert rc == EXIT_INTERRUPTED, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert err.splitlines()[-1] == "smp-emu: interrupted", err
    assert f"smp-emu: {side}: interrupted after " in err
    # the interrupted compare left none of its processes behind
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not [c for c in alive if c.status() != psutil.STATUS_ZOMBIE], alive
    if as_json:
        c = json.loads(out)
        assert c["kind"] == "compare" and c["interrupted"] is True
        assert c["unfinished"][side].startswith("interrupted after ")
        assert c["runs"][side]["interrupted"] is True
        made = next(r for r in c["rows"] if r["what"] == "made")
        assert made["nonsmp"] > 0
        if side == "nonsmp":  # smp never started: its column is empty
            assert "smp" not in c["runs"] and made["smp"] is None
            assert c["unfinished"]["smp"] == "not run: interrupted before it started"
        else:  # nonsmp ran whole, smp made part of it
            assert c["runs"]["nonsmp"]["completed"] and "nonsmp" not in c["unfinished"]
            assert 0 < made["smp"] < made["nonsmp"]
        assert c["messages"] is None and c["causes"] is None
        assert all(r["why"] is None for r in c["rows"])
        # and report draws it, the interrupt said first
        f = tmp_path / "cmp.json"
        f.write_text(out)
        page = tmp_path / "cmp.html"
        r = run_cli("report", str(f), "-o", str(page), timeout=120)
        assert r.returncode == 0, r.stderr
        html = page.read_text()
        said = html.index(f"<b>The {side} run did not finish:</b> interrupted after ")
        assert said < html.index("<table")
        assert ("<b>The smp run did not run:</b>" in html) == (side == "nonsmp")
        return
    lines = out.splitlines()
    assert lines[0].startswith(f"UNFINISHED: the {side} run did not finish (interrupted after "), (
        out
    )
    if side == "nonsmp":
        assert (
            lines[1]
            == "UNFINISHED: the smp run did not run (interrupted before it started); its column is empty"
        )
        assert "invariants (smp): not checked: the run did not run" in out
    made = next(ln for ln in lines if ln.startswith("made "))
    counts = made.split()[1:]
    assert int(counts[0]) > 0
    if side == "nonsmp":
        assert counts[1] == "-", made
    else:
        assert 0 < int(counts[1]) < int(counts[0]), made
    assert "interrupted: the columns are what each run made until it stopped" in out
    assert "why they differ" not in out and "why the messages differ" not in out
