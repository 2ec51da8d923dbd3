"""The run directory (the ipc endpoints) goes with the last of the
emulator's processes, also when the process that owns the emulator is
SIGKILLed; its trace files still end with whole frames."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from smp.ports.reader import read_trace
from smp.wire import rundir

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]

OWNER = r"""
import json, sys
import smp
from smp import Atom as A

async def flood(proc, peer, n):
    for i in range(n):
        await proc.send(peer, (A("ping"), i))

async def sink(proc):
    while True:
        await proc.receive()

mode, n, where, trace = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
vm = smp.Emulator(mode=mode, schedulers=n, endpoint_dir=where)
port = vm.open_trace_port("file", trace)
s = vm.spawn(sink)
for _ in range(2):
    vm.trace(vm.spawn(flood, s, 10**7), True, ["send"], tracer=port)
vm.run_for(0.2)
print(json.dumps(vm.os_pids), flush=True)
vm.run(timeout=600)                      # flooding when it is killed
"""


def _running(p: psutil.Process) -> bool:
    """Orphans are reaped by whoever adopts them, maybe late: a zombie has exited."""
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _poll(cond, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("mode,n", [("nonsmp", 1), ("smp", 2)])
def test_owner_sigkilled_last_process_removes_the_directory(tmp_path, mode, n):
    where, trace = tmp_path / "run", tmp_path / "t.trc"
    where.mkdir()
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, mode, str(n), str(where), str(trace)],
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        pids = json.loads(owner.stdout.readline())
        dirs = list(where.iterdir())
        assert len(dirs) == 1 and dirs[0].name.startswith("smp-emu-")
        children = [psutil.Process(pid) for pid in pids]
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        owner.stdout.close()
    try:
        assert _poll(lambda: not any(map(_running, children)), 30), (
            "the emulator's processes outlived their owner"
        )
    finally:
        for p in filter(_running, children):
            p.kill()
    assert _poll(lambda: not dirs[0].exists(), 5), f"{dirs[0]} was left behind"
    assert sum(1 for _ in read_trace(str(trace))) > 0  # whole frames, or it raises


def test_last_holder_removes_the_directory(tmp_path):
    """A forked child must not keep its parent's hold: when the parent
    lets go first, the child is the last and removes the directory."""
    d = tmp_path / "run"
    d.mkdir()
    fd = rundir.hold(str(d))
    to_parent_r, to_parent_w = os.pipe()
    to_child_r, to_child_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            mine = rundir.hold(str(d))
            os.write(to_parent_w, b"h")
            os.read(to_child_r, 1)  # the parent has let go
            os.write(to_parent_w, b"1" if rundir.release(str(d), mine) else b"0")
        finally:
            os._exit(0)
    try:
        assert os.read(to_parent_r, 1) == b"h"
        assert rundir.release(str(d), fd) is False  # the child still holds it
        assert d.exists()
        os.write(to_child_w, b"g")
        assert os.read(to_parent_r, 1) == b"1"
    finally:
        os.waitpid(pid, 0)
        for x in (to_parent_r, to_parent_w, to_child_r, to_child_w):
            os.close(x)
    assert not d.exists()
