"""A remote scheduler whose link goes down: after the heartbeat (5 s of
silence) it is lost as a local scheduler that died is: ``SchedulerLost``,
its processes exit (links fire), the counts still add up, and
``smp-emu dispatcher`` prints its summary and exits 1.

The remote scheduler runs in a network namespace of its own, joined to this
one by a veth pair; taking the host end of the pair down is the link going
down.  Needs root and ``ip`` (skipped otherwise)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from helpers import free_base

import smp
from schedulers.membership import HEARTBEAT_EVERY
from smp import Atom as A
from smp.supervision import REMOTE_SILENCE_S
from smp.wire.curve import InsecureWarning

pytestmark = pytest.mark.timeout(120)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ip(*args: str, ns: str | None = None) -> None:
    cmd = (["ip", "netns", "exec", ns, "ip"] if ns else ["ip"]) + list(args)
    subprocess.run(cmd, check=True, capture_output=True, timeout=30)


class Link:
    """A network namespace joined to this one by a veth pair (10.X.Y.1 here,
    10.X.Y.2 there, X.Y from this process's pid)."""

    def __init__(self):
        pid = os.getpid()
        net = f"10.{200 + pid % 50}.{pid // 50 % 250}"  # one per test process
        self.ns = f"smp-remote-{pid}"
        self.host_if, self.ns_if = f"smpH{pid}"[:15], f"smpN{pid}"[:15]
        self.here, self.there = f"{net}.1", f"{net}.2"
        _ip("netns", "add", self.ns)
        try:
            _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            _ip("link", "set", self.ns_if, "netns", self.ns)
            _ip("addr", "add", f"{self.here}/30", "dev", self.host_if)
            _ip("link", "set", self.host_if, "up")
            _ip("addr", "add", f"{self.there}/30", "dev", self.ns_if, ns=self.ns)
            _ip("link", "set", self.ns_if, "up", ns=self.ns)
            _ip("link", "set", "lo", "up", ns=self.ns)
        except BaseException:
            self.remove()
            raise

    def down(self) -> None:
        _ip("link", "set", self.host_if, "down")

    def remove(self) -> None:
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True, timeout=30)

    def popen(self, args: list[str]) -> subprocess.Popen:
        """``args`` run in the namespace."""
        return subprocess.Popen(
            ["ip", "netns", "exec", self.ns] + args,
            env=_env(),
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )


def _env() -> dict:
    """The remote schedulers import this module's process bodies."""
    path = [ROOT, os.path.join(ROOT, "tests"), os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path))


@pytest.fixture
def link():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and ip(8) for a network namespace")
    try:
        lk = Link()
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot make a network namespace here: {e}")
    yield lk
    lk.remove()


def finish(proc: subprocess.Popen, timeout: float = 30) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        _, err = proc.communicate()
        pytest.fail(f"remote schedulers did not stop: {err.decode()[-2000:]}")
    return proc.returncode, err.decode()


async def waiter(proc):
    await proc.receive()


async def watcher(proc, victim, report_to):
    await proc.process_flag("trap_exit", True)
    await proc.link(victim)
    await proc.send(report_to, A("linked"))
    await proc.send(report_to, await proc.receive())


async def sender(proc, sink, n):
    """About 5,000 messages a second (``n`` of them; None: for ever)."""
    i = 0
    while n is None or i < n:
        await proc.send(sink, i)
        i += 1
        if i % 50 == 0:
            await proc.sleep(10)


def test_remote_link_down_is_a_lost_scheduler(link):
    url = f"tcp://{link.here}:{free_base()}"
    remote = link.popen(
        [
            sys.executable,
            "-m",
            "smp.app.cluster",
            "scheduler",
            "--connect",
            url,
            "--count",
            "1",
            "--host",
            link.there,
            "--insecure",
        ]
    )
    try:
        with pytest.warns(InsecureWarning):
            vm = smp.Emulator(
                mode="smp",
                schedulers=2,
                remote_schedulers=1,
                bind=url,
                insecure=True,
                start_timeout=30,
            )
        try:
            assert 2 in vm._sup.links.remote
            seen, sink, tracer = (vm.spawn_collector(scheduler=1) for _ in range(3))
            victim = vm.spawn(waiter, scheduler=2)
            vm.spawn(watcher, victim, seen, scheduler=1)
            far = vm.spawn(sender, sink, None, scheduler=2)  # traced, on the remote
            # traced to the remote, for about 3 s after the link goes down
            near = vm.spawn(sender, vm.spawn_collector(scheduler=2), 20_000, scheduler=1)
            remote_tracer = vm.spawn_collector(scheduler=2)
            vm.trace(far, True, ["send"], tracer=tracer)
            vm.trace(near, True, ["send"], tracer=remote_tracer)
            assert vm.run_for(1.0) is False  # flowing both ways
            assert vm.messages(seen) == [A("linked")]
            assert len(vm.messages(tracer)) > 0
            link.down()
            t0 = time.monotonic()
            with pytest.raises(
                smp.SchedulerLost,
                match=r"scheduler 2 \(remote scheduler on "
                r".*no word from it for [\d.]+ s",
            ):
                vm.run(timeout=60)
            took = time.monotonic() - t0
            # noticed after the heartbeat's silence, not after a 30 s timeout;
            # the silence counts from the last heartbeat, up to one interval
            # before the cut
            assert REMOTE_SILENCE_S - HEARTBEAT_EVERY <= took <= REMOTE_SILENCE_S + 3, took
            assert 2 in vm.lost_schedulers
            assert vm.messages(seen) == [A("linked"), (A("EXIT"), victim, A("killed"))]
            assert vm.is_alive(victim) is False and vm.is_alive(near) is False
            s = vm.statistics()
            assert s.made == s.delivered + s.dropped + s.queued, s
            assert s.queued == 0
            assert 2 in s.lost_schedulers
            # what the lost scheduler made before the link went down still counts
            assert s.made >= len(vm.messages(tracer)) > 0
        finally:
            t0 = time.monotonic()
            vm.close()
            assert time.monotonic() - t0 <= 5.0
    finally:
        finish(remote)  # it stops by itself: the dispatcher went silent


LONG = """\
name = "long-pp"
mode = "smp"
seed = 3
[duration]
seconds = 40
[[tracers]]
name = "t1"
[[groups]]
name = "pp"
workload = "ping_pong"
count = 2
trace = ["send"]
tracer = "t1"
"""


def test_cli_dispatcher_summary_and_exit_1_when_a_remote_link_goes_down(link, tmp_path):
    base = free_base()
    url = f"tcp://{link.here}:{base}"
    scenario = tmp_path / "long.toml"
    scenario.write_text(LONG)
    out = tmp_path / "trace.txt"
    args = ["scheduler", "--connect", url, "--count", "1", "--insecure"]
    near = subprocess.Popen(
        [sys.executable, "-m", "smp.app.cli"] + args + ["--host", link.here],
        env=_env(),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    far = link.popen([sys.executable, "-m", "smp.app.cli"] + args + ["--host", link.there])
    disp = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "smp.app.cli",
            "dispatcher",
            str(scenario),
            "--bind",
            url,
            "--schedulers",
            "2",
            "--insecure",
            "--json",
            "--wait",
            "30",
            "--out",
            str(out),
        ],
        env=_env(),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 40
        while not (out.exists() and out.stat().st_size > 0):  # the run is under way
            assert disp.poll() is None, disp.communicate()[1].decode()[-3000:]
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.05)
        link.down()
        t0 = time.monotonic()
        stdout, stderr = disp.communicate(timeout=60)
        took = time.monotonic() - t0
        stderr = stderr.decode()
        assert disp.returncode == 1, stderr[-3000:]
        # the heartbeat, the rest of the run becoming quiet, close()
        assert took <= REMOTE_SILENCE_S + 1 + 5 + 2, took
        summary = json.loads(stdout)
        assert re.search(
            r"scheduler \d \(remote scheduler on .*no word from it", summary["error"]
        ), summary["error"]
        st = summary["stats"]
        assert len(st["lost_schedulers"]) == 1
        assert st["made"] > 0 and st["made"] == st["delivered"] + st["dropped"] + st["queued"]
        assert "lost" in stderr or "no word" in stderr
    finally:
        if disp.poll() is None:
            os.killpg(disp.pid, 9)
            disp.communicate()
        for p in (near, far):
            finish(p)
