"""Between two checks of a run the processes run for ``MIN_RUN_S`` at
least: a check that overran (a slow progress line, a long fetch of the
collectors' terms) left 1 ms to the next run(), which paused and resumed
every scheduler and served no BIF (its time was up once the resume was
done), so a fault's BIF waited for the run() after."""

from __future__ import annotations

import time

import pytest
from helpers import PING_PONG_T

from smp.app.run_setup import CHECK_S
from smp.app.scenario import parse_scenario
from smp.app.workloads import MIN_RUN_S, execute
from smp.emulator import Emulator

pytestmark = pytest.mark.timeout(120)

SC = (
    """
name = "windows"
mode = "nonsmp"
seed = 1
[duration]
seconds = 0.8
"""
    + PING_PONG_T
)


def test_a_check_that_overran_leaves_the_next_run_its_time(monkeypatch):
    asked: list = []
    run_for = Emulator.run_for

    def recording(self, seconds):
        asked.append(seconds)
        return run_for(self, seconds)

    monkeypatch.setattr(Emulator, "run_for", recording)
    slow = []

    def progress(p):
        if not slow:  # the first check overruns the next by half a check
            slow.append(p)
            time.sleep(1.5 * CHECK_S)  # a progress line written to a stalled terminal

    out = execute(parse_scenario(SC, "windows.toml"), on_progress=progress)
    assert out.summary["completed"] and slow
    assert len(asked) >= 4
    assert min(asked) >= MIN_RUN_S - 1e-6, asked
