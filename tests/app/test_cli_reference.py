"""The commands that answer "what can I write?": ``schema``, ``examples``,
an unknown example name, and a reader that stops reading (``| head``)."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest
from click.testing import CliRunner

from smp.app.cli import cli
from smp.app.exitcodes import EXIT_BROKEN_PIPE, EXIT_USAGE
from smp.app.schema import keys_of, list_examples
from smp.core.terms import A, Pid
from smp.wire.etf import encode


def test_schema_lists_every_key_of_each_kind():
    for kind in ("run", "explore"):
        r = CliRunner().invoke(cli, ["schema", kind])
        assert r.exit_code == 0, r.output
        for key in keys_of(kind):
            assert key.path in r.output, (kind, key.path)


def test_schema_refuses_an_unknown_kind():
    r = CliRunner().invoke(cli, ["schema", "nope"])
    assert r.exit_code == EXIT_USAGE


def test_examples_lists_every_shipped_example_with_a_line():
    from smp.sim.catalogue import CATALOGUE

    r = CliRunner().invoke(cli, ["examples"])
    # the races explore takes by name are listed too (compare's output names them)
    assert all(f"  {race.name}  " in r.output for race in CATALOGUE)
    assert r.exit_code == 0
    for kind in ("run", "explore"):
        for name, line in list_examples(kind):
            assert line, name
            assert any(ln.split() and ln.split()[0] == name for ln in r.output.splitlines()), name


def test_run_of_an_unknown_example_names_the_examples():
    r = subprocess.run(
        [sys.executable, "-c", "from smp.app.cli import main; main()", "run", "nosuchexample"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == EXIT_USAGE and len(lines) == 1, r.stderr
    assert "nosuchexample" in lines[0]
    for name, _ in list_examples("run"):
        assert name in lines[0]


def test_a_reader_that_stops_is_not_an_error(tmp_path):
    """``smp-emu read F | head -1``: no "Broken pipe" line, exit 141."""
    path = tmp_path / "many.trc"
    term = encode((A.trace, Pid(80), A.send, A.hello, Pid(81)))
    frame = b"\0" + struct.pack(">I", len(term)) + term
    path.write_bytes(frame * 50_000)
    p = subprocess.Popen(
        [sys.executable, "-c", "from smp.app.cli import main; main()", "read", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = p.stdout.readline()
    p.stdout.close()  # the reader goes away, as head does
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == EXIT_BROKEN_PIPE
    assert first.startswith(b"(<0.80.0>) <0.81.0> ! hello")
    assert err == "", err


@pytest.mark.parametrize("mode", ["nonsmp", "smp"])
def test_a_reader_that_stops_ends_a_run_as_it_ends_read(mode):
    """``smp-emu run long | head -1``: the same exit 141 and nothing on
    stderr (click made it a silent exit 1, a failed run's code), and no
    process left behind: the emulator is closed on the way out.  (``long``
    prints for a minute: far more than a pipe holds, where the default's
    few kilobytes can all be written before the reader goes.)"""
    import psutil

    p = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from smp.app.cli import main; main()",
            "run",
            "long",
            "--mode",
            mode,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = p.stdout.readline()
    kids = psutil.Process(p.pid).children(recursive=True)  # (the run's processes)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == EXIT_BROKEN_PIPE
    assert first.startswith(b"(<")
    assert err == "", err
    _gone, alive = psutil.wait_procs(kids, timeout=5)
    assert [k for k in alive if k.status() != psutil.STATUS_ZOMBIE] == []
