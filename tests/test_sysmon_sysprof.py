"""system_monitor and system_profile messages (SYSMON / SYSPROF rows of
DESIGN.md section 3), reached from workloads in both modes."""

from __future__ import annotations

from helpers import assert_increasing, check_counts, mfa

from smp.core.terms import A, Port


# ---------------------------------------------------------------- bodies
async def big_garbage(proc):
    await proc.allocate(20000)  # overflows the 233-word heap: a GC, cost 2 ms


async def big_live(proc):
    await proc.allocate(20000, keep=True)


async def busy_then_yield(proc):
    await proc.busy(60)
    await proc.yield_()


async def slow_port(proc):
    port = await proc.open_port("slow", cost_ms=20)
    await proc.port_command(port, b"x")
    await proc.receive()


async def busy_port_user(proc, driver):
    port = await proc.open_port(driver, busy_ms=2)
    await proc.port_command(port, b"1")
    await proc.port_command(port, b"2")  # busy: suspended until the port is free


async def echo_port(proc):
    port = await proc.open_port("echo")
    await proc.port_command(port, b"x")
    await proc.receive()
    await proc.port_close(port)


async def waits_for_one(proc):
    await proc.receive()


async def pinger(proc, to):
    await proc.send(to, A.ping)


# ---------------------------------------------------------------- system_monitor
def test_monitor_long_gc(vm):
    mon = vm.spawn_collector()
    vm.system_monitor(mon, [("long_gc", 1)])
    p = vm.spawn(big_garbage)
    vm.run()
    assert vm.messages(mon) == [
        (
            A.monitor,
            p,
            A.long_gc,
            [
                (A.timeout, 2),
                (A.old_heap_block_size, 0),
                (A.heap_block_size, 233),
                (A.mbuf_size, 0),
                (A.stack_size, 10),
                (A.old_heap_size, 0),
                (A.heap_size, 0),
            ],
        )
    ]
    check_counts(vm)


def test_monitor_long_gc_below_threshold(vm):
    mon = vm.spawn_collector()
    vm.system_monitor(mon, [("long_gc", 3)])
    vm.spawn(big_garbage)
    vm.run()
    assert vm.messages(mon) == []
    check_counts(vm)


def test_monitor_large_heap(vm):
    mon = vm.spawn_collector()
    vm.system_monitor(mon, [("large_heap", 1)])  # clamped to 16384 words
    p = vm.spawn(big_live)
    small = vm.spawn(big_garbage)  # 233 + 0 words: not large
    vm.run()
    assert vm.messages(mon) == [
        (
            A.monitor,
            p,
            A.large_heap,
            [
                (A.old_heap_block_size, 28657),
                (A.heap_block_size, 28657),
                (A.mbuf_size, 0),
                (A.stack_size, 10),
                (A.old_heap_size, 20000),
                (A.heap_size, 0),
            ],
        )
    ]
    assert small != p
    check_counts(vm)


def test_monitor_long_schedule_proc(vm):
    mon = vm.spawn_collector()
    vm.system_monitor(mon, [("long_schedule", 50)])
    p = vm.spawn(busy_then_yield)
    vm.run()
    [msg] = vm.messages(mon)
    f = mfa(busy_then_yield)
    timeout = msg[3][0][1]
    assert type(timeout) is int and timeout >= 60
    assert msg == (A.monitor, p, A.long_schedule, [(A.timeout, timeout), (A["in"], f), (A.out, f)])
    check_counts(vm)


def test_monitor_long_schedule_port(vm):
    mon = vm.spawn_collector()
    vm.system_monitor(mon, [("long_schedule", 10)])
    vm.spawn(slow_port)
    vm.run()
    msgs = vm.messages(mon)
    port_msgs = [m for m in msgs if type(m[1]) is Port]
    assert len(port_msgs) == 1
    port = port_msgs[0][1]
    assert port_msgs == [
        (A.monitor, port, A.long_schedule, [(A.timeout, 20), (A.port_op, A.proc_sig)])
    ]
    check_counts(vm)


def test_monitor_busy_port(vm):
    mon = vm.spawn_collector()
    vm.system_monitor(mon, ["busy_port"])
    p = vm.spawn(busy_port_user, "busy")
    q = vm.spawn(busy_port_user, "dist")  # a dist port: busy_port is not told
    vm.run()
    msgs = vm.messages(mon)
    assert len(msgs) == 1
    assert msgs == [(A.monitor, p, A.busy_port, msgs[0][3])]
    assert type(msgs[0][3]) is Port
    assert not vm.is_alive(p) and not vm.is_alive(q)  # both resumed and finished
    check_counts(vm)


def test_monitor_busy_dist_port(vm):
    mon = vm.spawn_collector()
    vm.system_monitor(mon, ["busy_dist_port"])
    vm.spawn(busy_port_user, "busy")
    q = vm.spawn(busy_port_user, "dist")
    vm.run()
    msgs = vm.messages(mon)
    assert len(msgs) == 1
    assert msgs == [(A.monitor, q, A.busy_dist_port, msgs[0][3])]
    check_counts(vm)


def test_monitor_cleared_gives_nothing(vm):
    mon = vm.spawn_collector()
    vm.system_monitor(mon, [("long_gc", 1)])
    vm.system_monitor(A.undefined)
    vm.spawn(big_garbage)
    vm.run()
    assert vm.messages(mon) == []
    assert vm.system_monitor() == A.undefined
    check_counts(vm)


# ---------------------------------------------------------------- system_profile
def test_profile_scheduler_to_port(vm):
    port = vm.open_trace_port("memory")
    vm.system_profile(port, ["scheduler"])
    for k in range(1, vm.nsched + 1):
        vm.spawn(busy_then_yield, scheduler=k)
    vm.run()
    terms = vm.trace_port_terms(port)
    assert terms
    for m in terms:
        assert len(m) == 6 and m[:2] == (A.profile, A.scheduler)
        assert m[2] in range(1, vm.nsched + 1) and m[3] in (A.active, A.inactive)
        assert type(m[4]) is int and 0 <= m[4] <= vm.nsched
    # in queue order: the count follows each change, timestamps increase
    active = 0
    for m in terms:
        active += 1 if m[3] is A.active else -1
        assert m[4] == active
    assert active == 0
    assert_increasing([m[5] for m in terms])
    for k in range(1, vm.nsched + 1):
        mine = [m[3] for m in terms if m[2] == k]
        assert mine[0] is A.active
        assert mine == [A.active, A.inactive] * (len(mine) // 2)
    check_counts(vm)


def test_profile_scheduler_nonsmp_exact(tmp_path):
    import smp

    with smp.Emulator(mode="nonsmp") as vm:
        port = vm.open_trace_port("memory")
        vm.system_profile(port, ["scheduler"])
        vm.spawn(busy_then_yield)
        vm.run()
        terms = vm.trace_port_terms(port)
        assert [m[:5] for m in terms] == [
            (A.profile, A.scheduler, 1, A.active, 1),
            (A.profile, A.scheduler, 1, A.inactive, 0),
        ]
        assert_increasing([m[5] for m in terms])
        check_counts(vm)


def test_profile_runnable_procs(vm):
    prof = vm.spawn_collector()
    vm.system_profile(prof, ["runnable_procs"])
    w = vm.spawn(waits_for_one)
    vm.run()
    vm.spawn(pinger, w)
    vm.run()
    msgs = [m for m in vm.messages(prof) if m[1] == w]
    f = mfa(waits_for_one)
    assert [m[:4] for m in msgs] == [
        (A.profile, w, A.active, f),
        (A.profile, w, A.inactive, f),  # spawned, waits
        (A.profile, w, A.active, f),
        (A.profile, w, A.inactive, f),
    ]  # message, exits
    assert_increasing([m[4] for m in msgs])
    # nothing about the profiler itself reached it
    assert not [m for m in vm.messages(prof) if m[1] == prof]
    check_counts(vm)


def test_profile_runnable_ports(vm):
    prof = vm.spawn_collector()
    vm.system_profile(prof, ["runnable_ports"])
    vm.spawn(echo_port)
    vm.run()
    msgs = vm.messages(prof)
    assert len(msgs) == 2
    port = msgs[0][1]
    assert type(port) is Port
    assert [m[:4] for m in msgs] == [
        (A.profile, port, A.active, 0),
        (A.profile, port, A.inactive, 0),
    ]
    assert_increasing([m[4] for m in msgs])
    check_counts(vm)
