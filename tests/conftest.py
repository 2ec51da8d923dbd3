"""Shared fixtures.

``vm`` runs a behaviour test in both modes (nonsmp, and smp with two
schedulers); ``smp_vm`` is for smp-only behaviour.  After every test no
scheduler or dispatcher process of this test run may be left (checked with
psutil over the children of the test process).
"""

from __future__ import annotations

import signal

import psutil
import pytest

# the differential suite's end-of-run summary (its hooks, see the module)
from differential.summary import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401

import smp


def pytest_addoption(parser):
    parser.addoption(
        "--run-stress",
        action="store_true",
        default=False,
        help="run the slow stress and soak tests",
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-stress"):
        return
    skip = pytest.mark.skip(reason="stress/soak test: opt in with --run-stress")
    for item in items:
        if "stress" in item.keywords:
            item.add_marker(skip)


def _emulator_children() -> list[psutil.Process]:
    me = psutil.Process()
    out = []
    for c in me.children(recursive=True):
        try:
            if c.status() != psutil.STATUS_ZOMBIE:
                out.append(c)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.fixture(autouse=True)
def restore_signal_handlers():
    """A CLI command run in-process may ignore Ctrl-C while it cleans up
    (as it should); later tests in the same worker must get it back."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, h in saved.items():
        if signal.getsignal(s) is not h:
            signal.signal(s, h)


@pytest.fixture(autouse=True)
def no_stray_processes():
    before = {p.pid for p in _emulator_children()}
    yield
    left = [p for p in _emulator_children() if p.pid not in before]
    if left:
        for p in left:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        pytest.fail(f"stray processes left behind: {[p.pid for p in left]}")


MODES = [pytest.param(("nonsmp", 1), id="nonsmp"), pytest.param(("smp", 2), id="smp2")]


@pytest.fixture(params=MODES)
def vm(request):
    mode, n = request.param
    with smp.Emulator(mode=mode, schedulers=n) as emulator:
        yield emulator


@pytest.fixture(params=[1, 2, 4], ids=lambda n: f"smp{n}")
def smp_vm(request):
    with smp.Emulator(mode="smp", schedulers=request.param) as emulator:
        yield emulator


@pytest.fixture
def smp2():
    with smp.Emulator(mode="smp", schedulers=2) as emulator:
        yield emulator
