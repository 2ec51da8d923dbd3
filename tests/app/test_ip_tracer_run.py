"""A run with an ip tracer: printing takes a copy at the port, so the port's
one client slot stays free for a user's ``dbg:trace_client(ip, ...)``, and a
port without a client does not hold up the end of the run."""

from __future__ import annotations

import socket
import time

import pytest

import smp
from smp.app.scenario import parse_scenario
from smp.app.workloads import execute
from smp.core.terms import Atom as A
from smp.ports.reader import read_frames

pytestmark = pytest.mark.timeout(120)

SCENARIO = """
name = "ip"
mode = "{mode}"
schedulers = 2
seed = 1
[duration]
operations = 20
[[tracers]]
name = "t"
kind = "{kind}"
print = true
[[groups]]
name = "pingpong"
workload = "ping_pong"
count = 2
trace = ["send", "receive"]
tracer = "t"
"""


def _run(mode: str, kind: str):
    sc = parse_scenario(SCENARIO.format(mode=mode, kind=kind), f"{kind}.toml")
    printed: list = []
    t0 = time.perf_counter()
    out = execute(sc, on_trace=lambda name, term: printed.append(term))
    return out, printed, time.perf_counter() - t0


@pytest.mark.parametrize("mode", ["smp", "nonsmp"])
def test_an_ip_tracer_without_client_prints_what_was_dispatched_without_delay(mode, capfd):
    out, printed, took = _run(mode, "ip")
    info = out.summary["tracers"]["t"]["port"]
    assert info["clients"] == 0 and info["sent"] == 0
    assert len(printed) == info["messages"] > 0  # every message dispatched to it, printed
    kinds = {term[2] for term in printed}
    assert kinds == {A("send"), A("receive")}
    _, _, memory_took = _run(mode, "memory")
    # the end of the run waits for no client (it waited 5 s for one before)
    assert took < memory_took + 1.0, (took, memory_took)
    assert "refused" not in capfd.readouterr().err


def test_a_client_gets_the_trace_the_keeping_port_prints_and_a_second_is_refused():
    """The emulator's ip port with keep=True: a real TCP client (the dbg
    trace-client frame format) receives what terms() returns; a second client
    while it is served is accepted and closed, as trace_ip_drv does."""
    with smp.Emulator(mode="smp", schedulers=2) as vm:
        port = vm.open_trace_port("ip", 0, keep=True)
        number = vm.trace_port_info(port)["port"]
        first = socket.create_connection(("127.0.0.1", number), timeout=10)
        second = socket.create_connection(("127.0.0.1", number), timeout=10)
        # accepted in order: the first is served, the second closed at once
        assert second.recv(10) == b""
        second.close()

        async def sink(proc):
            while True:
                await proc.receive()

        async def pinger(proc, peer):
            for i in range(30):
                await proc.send(peer, (A("ping"), i))

        s = vm.spawn(sink)
        p = vm.spawn(pinger, s)
        assert vm.trace(p, True, ["send"], tracer=port) == 1
        vm.run(timeout=30)
        assert vm.flush_trace_port(port, 10)
        kept = vm.trace_port_terms(port)
        info = vm.trace_port_info(port)
        vm.close_trace_port(port)
        data = b""
        while chunk := first.recv(65536):
            data += chunk
        first.close()
    got = list(read_frames(data))
    assert len(kept) == 30 and [t[3] for t in kept] == [(A("ping"), i) for i in range(30)]
    assert got == kept
    assert info["rejected"] == 1 and info["clients"] == 1
