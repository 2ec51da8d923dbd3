"""statistics() in smp while the dispatcher is pushed back by a slow file
port: it returns quickly, made = delivered + dropped + queued whenever it
returns, the batch being dispatched counts as queued, and what the schedulers
made that has not reached the queue yet is reported as in_transit."""

from __future__ import annotations

import os
import threading
import time

import pytest
from helpers import check_counts

import smp
from smp import Atom as A
from smp.ports.reader import read_trace

pytestmark = pytest.mark.timeout(120)


async def flood(proc, peer, n):
    for i in range(n):
        await proc.send(peer, (A("ping"), i))


async def sink(proc):
    while True:
        await proc.receive()


class FifoReader:
    """The far end of a trace file that is a FIFO: it reads nothing until
    ``go()`` (the port's writes block: a slow file port), then everything up
    to the port's close, into a regular file."""

    def __init__(self, fifo, out):
        # open the read end first, so the port's open for writing does not block
        self.fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.out = out
        self._go = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def go(self) -> None:
        self._go.set()

    def _run(self) -> None:
        self._go.wait()
        os.set_blocking(self.fd, True)
        with open(self.out, "wb") as f:
            while True:
                data = os.read(self.fd, 1 << 16)
                if not data:
                    break
                f.write(data)
        os.close(self.fd)


def test_statistics_returns_quickly_and_adds_up_under_pushback(tmp_path):
    fifo, out = tmp_path / "slow.trc", tmp_path / "read.trc"
    os.mkfifo(fifo)
    reader = FifoReader(fifo, out)
    try:
        with smp.Emulator(mode="smp", schedulers=2) as vm:
            port = vm.open_trace_port("file", str(fifo))
            s = vm.spawn(sink)
            ps = [vm.spawn(flood, s, 10**7) for _ in range(2)]
            for p in ps:
                vm.trace(p, True, ["send"], tracer=port)
            assert vm.run_for(1.5) is False  # the port stalls: push-back
            for _ in range(2):
                t0 = time.monotonic()
                st = vm.statistics()
                assert time.monotonic() - t0 < 5
                assert st.made == st.delivered + st.dropped + st.queued, st
                assert st.queued > 0
                made_by_schedulers = sum(x["made"] for x in st.schedulers)
                assert st.made + st.in_transit == made_by_schedulers
            for p in ps:
                vm.exit(p, A("kill"))
            reader.go()
            vm.run(timeout=60)
            st = check_counts(vm)
            assert st.queued == 0 and st.in_transit == 0
            assert st.made == st.delivered == sum(x["made"] for x in st.schedulers)
            vm.close_trace_port(port)
    finally:
        reader.go()
        reader.thread.join(30)
    assert sum(1 for _ in read_trace(str(out))) == st.delivered


def test_statistics_right_after_run_for_counts_the_batch_being_dispatched(tmp_path):
    with smp.Emulator(mode="smp", schedulers=2) as vm:
        port = vm.open_trace_port("file", str(tmp_path / "t.trc"))
        s = vm.spawn(sink)
        for _ in range(2):
            vm.trace(vm.spawn(flood, s, 10**7), True, ["send"], tracer=port)
        for _ in range(8):
            vm.run_for(0.1)
            st = vm.statistics()
            assert st.made == st.delivered + st.dropped + st.queued, st
