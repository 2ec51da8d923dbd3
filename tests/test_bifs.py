"""The trace BIFs through the public API: return values as erl_bif_trace.c and
erl_bif_info.c give them (OTP 17), and ``smp.BadArg`` with a message naming
the bad part.  Both modes."""

from __future__ import annotations

import pytest
from helpers import check_counts

from smp import BadArg
from smp.core.terms import A


async def waiter(proc):
    await proc.receive()


async def noop(proc):
    return None


async def double(proc, x):
    return 2 * x


async def triple(proc, x):
    return 3 * x


# ---------------------------------------------------------------- trace/3
def test_trace_counts(vm):
    t = vm.spawn_collector()
    ps = [vm.spawn(waiter) for _ in range(3)]
    assert vm.trace(ps[0], True, ["send"], tracer=t) == 1
    assert vm.trace("all", True, ["send"], tracer=t) == 3  # the tracer is skipped
    assert vm.trace("existing", True, ["receive"], tracer=t) == 3
    assert vm.trace("new", True, ["send"], tracer=t) == 0
    # with {tracer, T} the tracer itself is skipped for false too (trace_3)
    assert vm.trace("all", False, ["send", "receive"], tracer=t) == 3
    assert vm.trace(ps[1], False, ["send"], tracer=t) == 1
    check_counts(vm)


def test_trace_badargs(vm):
    t = vm.spawn_collector()
    p = vm.spawn(waiter)
    dead = vm.spawn(noop)
    vm.run()
    with pytest.raises(BadArg, match="unknown trace flag 'bogus'"):
        vm.trace(p, True, ["send", "bogus"], tracer=t)
    with pytest.raises(BadArg, match=f"process {dead!r} is not alive"):
        vm.trace(dead, True, ["send"], tracer=t)
    with pytest.raises(BadArg, match=f"tracer {dead!r} is not alive"):
        vm.trace(p, True, ["send"], tracer=dead)
    with pytest.raises(BadArg, match="cpu_timestamp can only be set with pid spec 'all'"):
        vm.trace(p, True, ["cpu_timestamp"], tracer=t)
    with pytest.raises(BadArg, match="pid spec must be"):
        vm.trace("everyone", True, ["send"], tracer=t)
    with pytest.raises(BadArg, match="how must be true or false"):
        vm.trace(p, "maybe", ["send"], tracer=t)
    with pytest.raises(BadArg, match="needs a {tracer, T} flag"):
        vm.trace(p, True, ["send"])
    assert vm.trace_info(p, "flags") == (A.flags, [])


def test_trace_already_traced_by_another(vm):
    t1 = vm.spawn_collector()
    t2 = vm.spawn_collector()
    p = vm.spawn(waiter)
    q = vm.spawn(waiter)
    vm.trace(p, True, ["send"], tracer=t1)
    with pytest.raises(BadArg, match="already has another tracer"):
        vm.trace(p, True, ["receive"], tracer=t2)
    assert vm.trace_info(p, "tracer") == (A.tracer, t1)
    # 'all' skips p (and both tracers) instead of failing
    assert vm.trace("all", True, ["receive"], tracer=t2) == 2
    assert vm.trace_info(q, "tracer") == (A.tracer, t2)
    assert vm.trace_info(p, "flags") == (A.flags, [A.send])


def test_trace_info_flag_order(vm):
    t = vm.spawn_collector()
    p = vm.spawn(waiter)
    vm.trace(
        p,
        True,
        [
            "timestamp",
            "send",
            "garbage_collection",
            "procs",
            "call",
            "receive",
            "running",
            "set_on_spawn",
            "return_to",
            "arity",
            "silent",
            "scheduler_id",
            "exiting",
            "set_on_link",
            "set_on_first_spawn",
            "set_on_first_link",
        ],
        tracer=t,
    )
    # FLAG(...) order of erl_bif_trace.c built with CONS: last flag first
    assert vm.trace_info(p, "flags") == (
        A.flags,
        [
            A.scheduler_id,
            A.silent,
            A.return_to,
            A.arity,
            A.timestamp,
            A.garbage_collection,
            A.exiting,
            A.running,
            A.set_on_first_link,
            A.set_on_link,
            A.set_on_first_spawn,
            A.procs,
            A.call,
            A.set_on_spawn,
            A["receive"],
            A.send,
        ],
    )
    assert vm.trace_info(p, "tracer") == (A.tracer, t)
    vm.trace(p, False, ["all"], tracer=t)
    assert vm.trace_info(p, "flags") == (A.flags, [])
    assert vm.trace_info(p, "tracer") == (A.tracer, [])


def test_trace_info_all_flags(vm):
    t = vm.spawn_collector()
    p = vm.spawn(waiter)
    vm.trace(p, True, ["all"], tracer=t)
    assert vm.trace_info(p, "flags") == (
        A.flags,
        [
            A.running_procs,
            A.running_ports,
            A.ports,
            A.scheduler_id,
            A.silent,
            A.return_to,
            A.arity,
            A.timestamp,
            A.garbage_collection,
            A.exiting,
            A.running,
            A.set_on_first_link,
            A.set_on_link,
            A.set_on_first_spawn,
            A.procs,
            A.call,
            A.set_on_spawn,
            A["receive"],
            A.send,
        ],
    )


def test_trace_info_new_and_badarg(vm):
    t = vm.spawn_collector()
    assert vm.trace_info("new", "flags") == (A.flags, [])
    assert vm.trace_info("new", "tracer") == (A.tracer, [])
    vm.trace("new", True, ["send", "procs"], tracer=t)
    assert vm.trace_info("new", "flags") == (A.flags, [A.procs, A.send])
    assert vm.trace_info("new", "tracer") == (A.tracer, t)
    p = vm.spawn(waiter)
    assert vm.trace_info(p, "flags") == (A.flags, [A.procs, A.send])
    assert vm.trace_info(p, "tracer") == (A.tracer, t)
    with pytest.raises(BadArg, match="trace_info item must be flags or tracer"):
        vm.trace_info(p, "bogus")
    with pytest.raises(BadArg, match="trace_info needs a pid, new, on_load or"):
        vm.trace_info(42, "flags")


def test_trace_info_dead_pid(vm):
    dead = vm.spawn(noop)
    vm.run()
    assert vm.trace_info(dead, "flags") == A.undefined


# ---------------------------------------------------------------- trace_pattern
def test_trace_pattern_counts_and_badargs(vm):
    vm.define("m", "double", double)
    vm.define("m", "triple", triple)
    vm.define("n", "double", double)
    assert vm.trace_pattern(("m", "double", 1), True) == 1
    assert vm.trace_pattern(("m", "_", "_"), True) == 2
    assert vm.trace_pattern(("_", "_", "_"), True, ["local"]) == 3
    assert vm.trace_pattern(("m", "double", 2), True) == 0
    assert vm.trace_pattern(("x", "_", "_"), False) == 0
    with pytest.raises(BadArg, match="trace_pattern needs"):
        vm.trace_pattern(("m", "double"), True)
    with pytest.raises(BadArg, match="with module '_' the function and arity must be '_' too"):
        vm.trace_pattern(("_", "double", 1), True)
    with pytest.raises(BadArg, match="with function '_' the arity must be '_' too"):
        vm.trace_pattern(("m", "_", 1), True)
    with pytest.raises(BadArg, match="unknown trace_pattern flag"):
        vm.trace_pattern(("m", "_", "_"), True, ["sideways"])
    with pytest.raises(BadArg, match="launch_missiles/0 is not a match-spec function"):
        vm.trace_pattern(("m", "_", "_"), [(A["_"], [], [(A.launch_missiles,)])])


# ---------------------------------------------------------------- seq tracer
def test_system_seq_tracer(vm):
    st = vm.spawn_collector()
    st2 = vm.spawn_collector()
    dead = vm.spawn(noop)
    vm.run()
    assert vm.get_system_seq_tracer() == A.false
    assert vm.set_system_seq_tracer(st) == A.false
    assert vm.set_system_seq_tracer(st2) == st
    assert vm.get_system_seq_tracer() == st2
    with pytest.raises(BadArg, match=f"seq tracer {dead!r} is not a valid tracer"):
        vm.set_system_seq_tracer(dead)
    with pytest.raises(BadArg, match="seq tracer must be a pid, a port or false"):
        vm.set_system_seq_tracer(A.bogus)
    assert vm.get_system_seq_tracer() == st2
    assert vm.set_system_seq_tracer(False) == st2
    assert vm.get_system_seq_tracer() == A.false


# ---------------------------------------------------------------- system_monitor
def test_system_monitor_clamping_and_order(vm):
    mon = vm.spawn_collector()
    assert vm.system_monitor() == A.undefined
    assert (
        vm.system_monitor(
            mon,
            [
                ("long_gc", 0),
                ("large_heap", 100),
                "busy_port",
                ("long_schedule", 0),
                "busy_dist_port",
            ],
        )
        == A.undefined
    )
    # erl_bif_info.c builds the list with CONS
    assert vm.system_monitor() == (
        mon,
        [
            A.busy_dist_port,
            A.busy_port,
            (A.large_heap, 16384),
            (A.long_schedule, 1),
            (A.long_gc, 1),
        ],
    )
    prev = vm.system_monitor(mon, [("large_heap", 20000)])
    assert prev == (
        mon,
        [
            A.busy_dist_port,
            A.busy_port,
            (A.large_heap, 16384),
            (A.long_schedule, 1),
            (A.long_gc, 1),
        ],
    )
    assert vm.system_monitor() == (mon, [(A.large_heap, 20000)])
    assert vm.system_monitor((mon, [(A.long_gc, 7)])) == (mon, [(A.large_heap, 20000)])
    assert vm.system_monitor() == (mon, [(A.long_gc, 7)])
    assert vm.system_monitor(A.undefined) == (mon, [(A.long_gc, 7)])
    assert vm.system_monitor() == A.undefined


def test_system_monitor_badargs(vm):
    mon = vm.spawn_collector()
    dead = vm.spawn(noop)
    vm.run()
    with pytest.raises(BadArg, match="unknown system_monitor option"):
        vm.system_monitor(mon, ["busy_bee"])
    with pytest.raises(BadArg, match="needs a non-negative integer"):
        vm.system_monitor(mon, [("long_gc", -1)])
    with pytest.raises(BadArg, match="system monitor must be a live process"):
        vm.system_monitor(dead, [("long_gc", 1)])
    assert vm.system_monitor() == A.undefined


# ---------------------------------------------------------------- system_profile
def test_system_profile(vm):
    prof = vm.spawn_collector()
    dead = vm.spawn(noop)
    vm.run()
    assert vm.system_profile() == A.undefined
    assert vm.system_profile(prof, ["runnable_ports", "runnable_procs"]) == A.undefined
    assert vm.system_profile() == (prof, [A.runnable_procs, A.runnable_ports])
    port = vm.open_trace_port("memory")
    assert vm.system_profile(port, ["scheduler", "exclusive"]) == (
        prof,
        [A.runnable_procs, A.runnable_ports],
    )
    assert vm.system_profile() == (port, [A.exclusive, A.scheduler])
    with pytest.raises(BadArg, match="unknown system_profile option"):
        vm.system_profile(prof, ["bogus"])
    with pytest.raises(BadArg, match=f"profiler {dead!r} is not alive"):
        vm.system_profile(dead, ["scheduler"])
    assert vm.system_profile(A.undefined, []) == (port, [A.exclusive, A.scheduler])
    assert vm.system_profile() == A.undefined


# ---------------------------------------------------------------- register / exit
def test_register_whereis(vm):
    p = vm.spawn(waiter)
    q = vm.spawn(waiter)
    assert vm.whereis("svc") == A.undefined
    assert vm.register("svc", p) == A.true
    assert vm.whereis("svc") == p
    with pytest.raises(BadArg, match="cannot register svc"):
        vm.register("svc", q)
    with pytest.raises(BadArg, match="cannot register other"):
        vm.register("other", p)  # p already has a name
    vm.exit(p, "kill")
    vm.run()
    assert vm.whereis("svc") == A.undefined
    assert vm.register("svc", q) == A.true
    assert vm.whereis("svc") == q


def test_exit2_from_api(vm):
    p = vm.spawn(waiter)
    q = vm.spawn(waiter)
    assert vm.exit(p, "normal") == A.true  # ignored: not trapping
    assert vm.exit(q, "shutdown") == A.true
    vm.run()
    assert vm.is_alive(p) and not vm.is_alive(q)
    assert vm.exit(p, "kill") == A.true
    vm.run()
    assert not vm.is_alive(p)
    with pytest.raises(BadArg, match="exit/2 needs a pid"):
        vm.exit("p", "kill")
