"""Closing trace ports, and the emulator, at any moment: a file port always
ends with whole frames and holds exactly the messages counted as delivered
to it, in both modes, on every exit path (close(), the with block, an error,
Ctrl-C, a crash), after run() or in the middle of a flood.  In smp a port
close is an event in queue order: what was queued before it is written, what
comes after is dropped as port_closed, and dispatching goes on."""

from __future__ import annotations

import random
import sys
import threading
import time

import pytest
from helpers import check_counts, ctrl_c_timer

import smp
from smp import Atom as A
from smp.ports.reader import read_trace
from smp.ports.traceport import FileTracePort
from smp.wire.etf import encode

pytestmark = pytest.mark.timeout(120)

MODES = [pytest.param("nonsmp", 1, id="nonsmp"), pytest.param("smp", 2, id="smp2")]


async def flood(proc, peer, n):
    for i in range(n):
        await proc.send(peer, (A("ping"), i))


async def flood_then_die(proc, peer, n):
    """A workload bug that takes its scheduler down (not an Erlang crash)."""
    for i in range(n):
        await proc.send(peer, (A("ping"), i))
    raise SystemExit("workload bug")


async def sink(proc):
    while True:
        await proc.receive()


def frames(path) -> int:
    """How many frames the file holds; read_trace raises on a cut or bad one."""
    return sum(1 for _ in read_trace(str(path)))


def start_flood(vm, port, n, procs=2, body=flood):
    s = vm.spawn(sink)
    ps = [vm.spawn(body, s, n) for _ in range(procs)]
    for p in ps:
        assert vm.trace(p, True, ["send"], tracer=port) == 1
    return ps


def final_delivered(vm) -> int:
    """What the emulator counted as delivered, as close() left it."""
    if vm.smp:
        return vm.final_dispatcher_statistics["delivered"]
    return vm.final_statistics[1]["delivered"]


# ---------------------------------------------------------------- every exit path
@pytest.mark.parametrize("mode,n", MODES)
@pytest.mark.parametrize("how", ["close", "with_mid_flood", "error", "ctrl_c"])
def test_emulator_close_writes_the_last_buffer(tmp_path, mode, n, how):
    path = tmp_path / "t.trc"
    vm = smp.Emulator(mode=mode, schedulers=n)
    try:
        with vm:
            port = vm.open_trace_port("file", str(path))
            if how == "close":
                start_flood(vm, port, 3000)
                vm.run(timeout=30)
                vm.close()
            elif how == "with_mid_flood":
                start_flood(vm, port, 10**7)
                assert vm.run_for(0.3) is False
            elif how == "error":
                start_flood(vm, port, 10**7)
                vm.run_for(0.2)
                raise RuntimeError("driver bug")
            else:
                start_flood(vm, port, 10**7)
                timer = ctrl_c_timer(0.3)
                try:
                    timer.start()
                    vm.run(timeout=30)  # never quiet: only Ctrl-C ends it
                finally:
                    timer.join()
    except (RuntimeError, KeyboardInterrupt) as e:
        assert how in ("error", "ctrl_c"), e
    delivered = final_delivered(vm)
    assert delivered > 0
    assert frames(path) == delivered


def test_smp_close_behind_a_slow_port_drops_what_it_cannot_write_in_time(tmp_path):
    """Closing the emulator while the dispatcher is far behind a slow port:
    it writes for a bounded time, drops the rest as emulator_closed, and the
    file holds exactly what was counted as delivered."""
    path = tmp_path / "t.trc"
    with smp.Emulator(mode="smp", schedulers=2) as vm:
        port = vm.open_trace_port("file", str(path), buffer_size=16)
        start_flood(vm, port, 10**7)
        assert vm.run_for(1.0) is False
    st = vm.final_dispatcher_statistics
    assert st["made"] == st["delivered"] + st["dropped"] and st["queued"] == 0
    assert set(st["dropped_by_reason"]) <= {"emulator_closed"}
    assert frames(path) == st["delivered"]


@pytest.mark.parametrize("mode,n", MODES)
def test_scheduler_crash_still_writes_the_last_buffer(tmp_path, mode, n):
    """A workload bug that kills the scheduler process (an exception no
    emulated process can catch): its ports still write their last buffer."""
    path = tmp_path / "t.trc"
    with smp.Emulator(mode=mode, schedulers=n) as vm:
        port = vm.open_trace_port("file", str(path))
        start_flood(vm, port, 1500, procs=1, body=flood_then_die)
        with pytest.raises(smp.SchedulerLost):
            vm.run(timeout=30)
    # nonsmp wrote every message as it was made; in smp the dispatcher wrote
    # what reached it (the dead scheduler's last batch never did)
    assert frames(path) == (1500 if mode == "nonsmp" else final_delivered(vm))


# ---------------------------------------------------------------- close at random moments
@pytest.mark.parametrize("mode,n", MODES)
def test_file_ports_closed_at_random_moments(tmp_path, mode, n):
    """Ports closed mid-flood (between run_for slices) or after the run, with
    floods of random sizes: each file reads back whole, and its frames are
    exactly what was counted as delivered to it (it is the only receiver)."""
    rng = random.Random(2024 + n)
    with smp.Emulator(mode=mode, schedulers=n) as vm:
        for i in range(6):
            path = tmp_path / f"t{i}.trc"
            before = check_counts(vm).delivered
            port = vm.open_trace_port("file", str(path), buffer_size=rng.choice([512, 65536]))
            ps = start_flood(vm, port, rng.choice([200, 5000, 10**7]), procs=rng.randint(1, 3))
            for _ in range(rng.randint(0, 3)):
                vm.run_for(rng.uniform(0.0, 0.15))
                if rng.random() < 0.3:
                    vm.flush_trace_port(port)
            vm.close_trace_port(port)
            got = frames(path)
            st = check_counts(vm)
            assert got == st.delivered - before
            info = vm.trace_port_info(port)
            assert info["closed"] is True and info["messages"] == got
            for p in ps:
                vm.exit(p, A("kill"))
            vm.run(timeout=30)
            assert frames(path) == got  # nothing after the close is written
        check_counts(vm)


@pytest.mark.parametrize("mode,n", MODES)
def test_messages_after_a_close_are_dropped_and_counted(tmp_path, mode, n):
    """Closing while the dispatcher is still working through a flood:
    dispatching goes on (run() becomes quiet), other tracers keep getting
    theirs, nothing more is written, and the port's later messages are
    counted as port_closed (smp: made, then dropped; nonsmp: never made)."""
    path = tmp_path / "t.trc"
    with smp.Emulator(mode=mode, schedulers=n) as vm:
        # a small buffer makes the port slow: the dispatcher falls behind
        port = vm.open_trace_port("file", str(path), buffer_size=256)
        coll = vm.spawn_collector()
        s = vm.spawn(sink)
        to_port = [vm.spawn(flood, s, 10**7) for _ in range(2)]
        to_pid = vm.spawn(flood, s, 3000)
        for p in to_port:
            vm.trace(p, True, ["send"], tracer=port)
        vm.trace(to_pid, True, ["send"], tracer=coll)
        assert vm.run_for(0.6) is False
        vm.close_trace_port(port)
        written = frames(path)
        assert vm.run_for(0.2) is False  # the floods go on after the close
        for p in to_port:
            vm.exit(p, A("kill"))
        vm.run(timeout=60)
        st = check_counts(vm)
        assert frames(path) == written
        assert len(vm.messages(coll)) == 3000
        assert st.delivered == written + 3000
        if vm.smp:
            late = st.dropped_by_reason["port_closed"]["TRACE"]
            assert late > 0 and st.made == written + 3000 + late
        else:
            assert st.made == written + 3000
            assert st.suppressed_by_reason["port_closed"]["TRACE"] == 2


# ---------------------------------------------------------------- the port itself
def test_file_port_flush_and_close_from_another_thread_keep_frames_whole(tmp_path):
    """The smp dispatcher writes from one thread and may flush or close from
    another: every flush and the close fall between two frames."""
    path = tmp_path / "t.trc"
    tp = FileTracePort(str(path), buffer_size=4096)
    payload = encode((A("trace"), A("x"), A("send"), list(range(20)), A("y")))
    written = [0]
    errors = []

    def writer():
        try:
            while True:
                tp.write(payload)
                written[0] += 1
        except smp.TracePortError:
            pass  # closed: the end
        except Exception as e:
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        t = threading.Thread(target=writer)
        t.start()
        deadline = time.monotonic() + 10
        while written[0] < 50000 and not errors and time.monotonic() < deadline:
            tp.flush()
        tp.close()
        t.join(10)
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    assert frames(path) == written[0] == tp.stats["messages"]
