"""Schedulers that join from another process group over tcp (loopback), with
and without CURVE; a peer without the key cannot inject a message."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest
import zmq
from helpers import free_base

import smp
from smp import Atom as A
from smp.app.demo import check as _check
from smp.app.demo import fact as _fact
from smp.app.demo import ping, pong
from smp.wire.codec import WIRE_VERSION
from smp.wire.curve import InsecureWarning, keygen

pytestmark = pytest.mark.timeout(90)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_remote(url: str, count: int, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "smp.app.cluster",
            "scheduler",
            "--connect",
            url,
            "--count",
            str(count),
            *extra,
        ],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        pytest.fail(f"remote schedulers did not stop: {err.decode()[-2000:]}")
    return proc.returncode, err.decode()


def workload(vm) -> None:
    tracer = vm.spawn_collector()
    peer = vm.spawn(pong)
    p = vm.spawn(ping, peer, 3)
    vm.define("demo", "fact", _fact)
    vm.define("demo", "check", _check)
    vm.trace(p, True, ["send"], tracer=tracer)
    vm.run(timeout=30)
    sends = [m for m in vm.messages(tracer) if m[2] == A("send")]
    assert [m[3] for m in sends] == [
        (A("ping"), p, 0),
        (A("ping"), p, 1),
        (A("ping"), p, 2),
        A("stop"),
    ]
    s = vm.statistics()
    assert s.made == s.delivered + s.dropped + s.queued == 4


def test_remote_schedulers_over_tcp_insecure():
    url = f"tcp://127.0.0.1:{free_base()}"
    remote = start_remote(url, 2, "--insecure")
    try:
        with pytest.warns(InsecureWarning, match="tcp without CURVE"):
            vm = smp.Emulator(
                mode="smp",
                schedulers=2,
                remote_schedulers=2,
                bind=url,
                start_timeout=30,
                insecure=True,
            )
        with vm:
            assert vm.security is None  # asked for: no CURVE, with a warning
            assert set(vm.scheduler_hosts) == {1, 2}
            workload(vm)
    finally:
        code, err = finish(remote)
    assert code == 0, err
    assert not psutil.pid_exists(remote.pid) or psutil.Process(remote.pid).status() == "zombie"


def test_curve_schedulers_join_and_a_peer_without_the_key_cannot_inject(tmp_path):
    keys = tmp_path / "keys"
    keygen(str(keys), "server")
    keygen(str(keys / "authorized"), "sched")
    sched_keys = tmp_path / "sched-keys"
    sched_keys.mkdir()
    for f in ("sched.key", "sched.key_secret"):
        (sched_keys / f).write_bytes((keys / "authorized" / f).read_bytes())
    (keys / "authorized" / "sched.key_secret").unlink()  # the controller keeps publics only
    (sched_keys / "server.key").write_bytes((keys / "server.key").read_bytes())
    base = free_base()
    url = f"tcp://127.0.0.1:{base}"
    remote = start_remote(url, 1, "--keys", str(sched_keys), "--name", "sched")
    try:
        with smp.Emulator(
            mode="smp",
            schedulers=1,
            remote_schedulers=1,
            bind=url,
            keys=str(keys),
            start_timeout=30,
        ) as vm:
            assert vm.security is not None
            workload(vm)
            before = vm.statistics()
            ctx = zmq.Context.instance()
            import pickle

            frame = pickle.dumps(
                ("b", WIRE_VERSION, 1, [("r", 1, None, None, 0, 1, pickle.dumps([A("x")]), 0)])
            )
            # a peer with no CURVE at all, and one with a key that is not allowed
            plain = ctx.socket(zmq.DEALER)
            plain.setsockopt(zmq.LINGER, 0)
            plain.connect(f"tcp://127.0.0.1:{base + 1}")
            plain.send(frame)
            rogue = ctx.socket(zmq.DEALER)
            rogue.setsockopt(zmq.LINGER, 0)
            pub, sec = zmq.curve_keypair()
            rogue.curve_publickey, rogue.curve_secretkey = pub, sec
            rogue.curve_serverkey = vm.security["server_public"]
            rogue.connect(f"tcp://127.0.0.1:{base + 1}")
            rogue.send(frame)
            # wait (bounded) until the handshake of the rogue has been refused
            for _ in range(200):
                st = vm.statistics()
                if st.auth_denied >= 1 and st.handshake_failed >= 1:
                    break
                vm.run()
            after = vm.statistics()
            assert after.auth_denied >= 1  # the unknown key, at the ZAP handler
            assert after.handshake_failed >= 1  # the peer with no CURVE at all
            assert after.made == before.made
            assert after.bad_frames == before.bad_frames
            plain.close()
            rogue.close()
    finally:
        code, err = finish(remote)
    assert code == 0, err


def test_cli_dispatcher_and_schedulers_in_separate_process_groups(tmp_path):
    import json

    base = free_base()
    url = f"tcp://127.0.0.1:{base}"
    env = dict(os.environ, PYTHONPATH=ROOT)
    sched = subprocess.Popen(
        ["smp-emu", "scheduler", "--connect", url, "--count", "2", "--insecure"],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        r = subprocess.run(
            [
                "smp-emu",
                "dispatcher",
                "--bind",
                url,
                "--schedulers",
                "2",
                "--json",
                "--wait",
                "30",
                "--insecure",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=80,
            start_new_session=True,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        assert "warning" in r.stderr and "without CURVE" in r.stderr
        summary = json.loads(r.stdout)
        assert summary["mode"] == "smp" and summary["schedulers"] == 2
        st = summary["stats"]
        assert st["made"] > 0 and st["made"] == st["delivered"] + st["dropped"] + st["queued"]
    finally:
        code, err = finish(sched)
    assert code == 0, err


def test_cli_keygen_refuses_to_overwrite(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run(
        ["smp-emu", "keygen", str(tmp_path), "--name", "h1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0 and (tmp_path / "h1.key_secret").stat().st_mode & 0o077 == 0
    r = subprocess.run(
        ["smp-emu", "keygen", str(tmp_path), "--name", "h1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2 and "not overwriting a key" in r.stderr


def test_tcp_bind_with_remote_schedulers_needs_keys():
    for host in ("10.255.255.1", "127.0.0.1"):
        with pytest.raises(smp.BadArg, match="CURVE is on for tcp endpoints"):
            smp.Emulator(mode="smp", schedulers=1, remote_schedulers=1, bind=f"tcp://{host}:7000")


def test_tcp_without_curve_needs_insecure():
    with pytest.raises(smp.BadArg, match="needs insecure=True"):
        smp.Emulator(mode="smp", schedulers=1, bind="tcp://127.0.0.1:7000", curve=False)
    r = subprocess.run(
        [sys.executable, "-m", "smp.app.cluster", "scheduler", "--connect", "tcp://127.0.0.1:7000"],
        env=dict(os.environ, PYTHONPATH=ROOT),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2 and "--insecure" in r.stderr


def test_loopback_tcp_is_curve_by_default():
    """Schedulers all on this host: CURVE with a key pair made for the run."""
    url = f"tcp://127.0.0.1:{free_base()}"
    with smp.Emulator(mode="smp", schedulers=2, bind=url) as vm:
        assert vm.security is not None
        workload(vm)


def _cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "smp.app.cli", *args],
        env=dict(os.environ, PYTHONPATH=ROOT),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_scheduler_with_an_unauthorized_key_stops_at_once_with_a_message(tmp_path):
    """Refused by the controller's authenticator, it says so in one line and
    exits (it does not wait for a welcome that never comes), and the refusal
    is counted in auth_denied."""
    import time

    keys = tmp_path / "keys"
    keygen(str(keys), "server")
    keygen(str(keys / "authorized"), "sched")
    good_keys, rogue_keys = tmp_path / "good", tmp_path / "rogue"
    good_keys.mkdir()
    for f in ("sched.key", "sched.key_secret"):
        (good_keys / f).write_bytes((keys / "authorized" / f).read_bytes())
    (keys / "authorized" / "sched.key_secret").unlink()
    keygen(str(rogue_keys), "rogue")  # a key pair nobody authorized
    for d in (good_keys, rogue_keys):
        (d / "server.key").write_bytes((keys / "server.key").read_bytes())
    url = f"tcp://127.0.0.1:{free_base()}"
    good = start_remote(url, 1, "--keys", str(good_keys), "--name", "sched")
    try:
        with smp.Emulator(
            mode="smp",
            schedulers=1,
            remote_schedulers=1,
            bind=url,
            keys=str(keys),
            start_timeout=30,
        ) as vm:
            t0 = time.monotonic()
            r = _cli("scheduler", "--connect", url, "--keys", str(rogue_keys), "--name", "rogue")
            took = time.monotonic() - t0
            assert r.returncode == 1, r.stderr
            assert took <= 5, took  # start-up included
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
            assert "refused this scheduler's key" in lines[0]
            assert "authorized" in lines[0]
            workload(vm)
            assert vm.statistics().auth_denied >= 1
    finally:
        code, err = finish(good)
    assert code == 0, err


def test_cli_errors_are_one_line_and_exit_2(tmp_path):
    (tmp_path / "a_file").write_text("")
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "h.key_secret").write_text("not a key\n")
    cases = [
        ("keygen", "/proc/smp-emu-keys"),  # cannot be created
        ("keygen", str(tmp_path / "a_file" / "keys")),  # under a file
        (
            "scheduler",
            "--connect",
            "tcp://127.0.0.1:9",
            "--keys",
            str(tmp_path / "empty"),
            "--name",
            "h",
        ),  # no key files
        (
            "scheduler",
            "--connect",
            "tcp://127.0.0.1:9",
            "--keys",
            str(tmp_path / "bad"),
            "--name",
            "h",
        ),  # not a key
        (
            "dispatcher",
            "--bind",
            "tcp://127.0.0.1:9",
            "--schedulers",
            "1",
            "--keys",
            str(tmp_path / "empty"),
        ),  # no server key
        ("dispatcher", "--bind", "tcp://127.0.0.1:9", "--schedulers", "1"),  # no keys at all
    ]
    for args in cases:
        r = _cli(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("smp-emu: "), (args, r.stderr)
