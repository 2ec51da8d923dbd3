"""The benchmark's dispatcher run (b) counts every delivery; a frame it feeds
must not be lost on the way.  A ROUTER whose queue is full (HWM) loses the
frames still in its socket buffer when the sender hangs up, however long the
sender lingers: a feeder keeps its connection until it is released, after
the dispatcher took everything (as a scheduler's fin/fin-ack handover)."""

from __future__ import annotations

import os
import sys

import multiprocess
import pytest
import zmq

from dispatcher.server import HWM
from smp.core.terms import Pid, Port
from smp.wire.curve import new_routing_id

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import bench_workers as W  # noqa: E402

pytestmark = pytest.mark.timeout(90)


def test_a_feeder_hangs_up_only_once_released(tmp_path):
    ctx = zmq.Context()
    ingest = ctx.socket(zmq.ROUTER)  # as the dispatcher's ingest socket
    ingest.setsockopt(zmq.RCVHWM, HWM)
    ingest.setsockopt(zmq.LINGER, 0)
    endpoint = f"ipc://{tmp_path}/ingest"
    ingest.bind(endpoint)
    mp = multiprocess.get_context("fork")
    ready, go, release, out = mp.Event(), mp.Event(), mp.Event(), mp.Queue()
    pids = [Pid(80 + i, 0) for i in range(200)]
    n = HWM + 4  # a full queue, and a few frames more
    feeder = mp.Process(
        target=W.feeder_main,
        args=(
            endpoint,
            1,
            n,
            16,
            pids[:50],
            pids[::7],
            Port(3),
            0,
            256,
            0,
            ready,
            go,
            out,
            new_routing_id(),
            release,
        ),
        daemon=True,
    )
    feeder.start()
    try:
        assert ready.wait(30)
        go.set()
        assert out.get(timeout=30)[0] == "plan"
        assert out.get(timeout=30)[0] == "done"  # every frame has left the feeder
        feeder.join(2)  # it would hang up here: it must not
        assert feeder.is_alive()
        got = 0
        while got < n and ingest.poll(5000):
            ingest.recv_multipart()
            got += 1
        assert got == n, f"{n - got} of {n} frames lost"
        release.set()
        feeder.join(30)
        assert feeder.exitcode == 0
    finally:
        release.set()
        feeder.join(5)
        if feeder.is_alive():
            feeder.kill()
            feeder.join(5)
        ingest.close(linger=0)
        ctx.term()
