"""Ports as tracers, in both modes: trace files a real node reads, ip ports,
memory ports; in smp mode the dispatcher process writes to them."""

from __future__ import annotations

import shutil

import pytest
from erlnode import COLLECT, WAIT, estr, run_erl

from smp import Atom as A
from smp.ports.reader import read_trace

pytestmark = pytest.mark.timeout(90)


async def pinger(proc, peer, n):
    for i in range(n):
        await proc.send(peer, (A("ping"), i))


async def sink(proc):
    while True:
        await proc.receive()


def _traced_run(vm, tracer, n=5):
    s = vm.spawn(sink)
    p = vm.spawn(pinger, s, n)
    assert vm.trace(p, True, ["send", "timestamp"], tracer=tracer) == 1
    assert vm.trace(s, True, ["receive"], tracer=tracer) == 1
    vm.run()
    return p, s


def _expected(p, s, n):
    sends = [(A("trace_ts"), p, A("send"), (A("ping"), i), s) for i in range(n)]
    recvs = [(A("trace"), s, A("receive"), (A("ping"), i)) for i in range(n)]
    return sends, recvs


def _check(terms, p, s, n):
    sends, recvs = _expected(p, s, n)
    got_sends = [t[:5] for t in terms if t[1] == p]
    got_recvs = [t for t in terms if t[1] == s]
    assert got_sends == sends
    assert all(len(t) == 6 and len(t[5]) == 3 for t in terms if t[1] == p)
    assert got_recvs == recvs


def test_memory_port_tracer(vm):
    port = vm.open_trace_port("memory")
    p, s = _traced_run(vm, port)
    _check(vm.trace_port_terms(port), p, s, 5)
    st = vm.statistics()
    assert st.made == st.delivered + st.dropped + st.queued
    assert st.delivered_by_type["TRACE"] == 10


def test_file_port_tracer_read_back(vm, tmp_path):
    path = tmp_path / "emu.trc"
    port = vm.open_trace_port("file", str(path))
    p, s = _traced_run(vm, port)
    vm.close_trace_port(port)
    terms = list(read_trace(str(path)))
    _check(terms, p, s, 5)
    assert vm.trace_port_info(port)["closed"] is True


def test_trace_port_closed_tracee_reset(vm):
    port = vm.open_trace_port("memory")
    s = vm.spawn(sink)
    p = vm.spawn(pinger, s, 3)
    vm.trace(p, True, ["send"], tracer=port)
    vm.close_trace_port(port)
    vm.run()
    st = vm.statistics()
    assert st.made == st.delivered + st.dropped + st.queued
    if vm.mode == "nonsmp":
        # ERTS_GET_TRACER_REF/send_to_port: the tracee is reset, nothing is made
        assert st.made == 0 and st.suppressed_by_reason["port_closed"]["TRACE"] == 1
    else:
        # made, then dropped by the dispatcher
        assert st.made == 3 and st.dropped_by_reason["port_closed"]["TRACE"] == 3


def test_ip_port_tracer(vm):
    port = vm.open_trace_port("ip", 0, queue_size=1000)
    info = vm.trace_port_info(port)
    p, s = _traced_run(vm, port)
    vm.flush_trace_port(port, 0.1)
    reader = read_trace(("127.0.0.1", info["port"]), timeout=10)
    got = [next(reader) for _ in range(10)]
    _check(got, p, s, 5)


@pytest.mark.interop
@pytest.mark.skipif(shutil.which("erl") is None, reason="no Erlang node: `erl` not on PATH")
def test_emulator_trace_file_read_by_real_dbg_trace_client(vm, tmp_path):
    from smp.wire.etf import decode

    path, out = tmp_path / "emu.trc", tmp_path / "out.bin"
    port = vm.open_trace_port("file", str(path))
    tracer_mem = vm.open_trace_port("memory")
    p, s = _traced_run(vm, port)
    vm.close_trace_port(port)
    meant = list(read_trace(str(path)))
    code = (
        "OUT = "
        + estr(out)
        + ","
        + COLLECT
        + "dbg:trace_client(file, "
        + estr(path)
        + ", {H, []}),"
        + WAIT
    )
    run_erl(code)
    node_terms = decode(out.read_bytes())
    assert node_terms == meant
    _check(node_terms, p, s, 5)
    assert vm.trace_port_terms(tracer_mem) == []
