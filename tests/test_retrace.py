"""A tracee whose tracer died can be given a new tracer (both modes)."""

from __future__ import annotations

import pytest

from smp import Atom as A
from smp import Emulator


async def sender(proc, to, n):
    for i in range(n):
        await proc.send(to, i)
        await proc.receive()


async def kicker(proc, p, n):
    for _ in range(n):
        await proc.send(p, A("go"))


def test_new_tracer_after_the_old_one_died(vm):
    old, new, sink = vm.spawn_collector(), vm.spawn_collector(), vm.spawn_collector()
    p = vm.spawn(sender, sink, 3)
    assert vm.trace(p, True, ["send"], tracer=old) == 1
    vm.run()
    vm.exit(old, A("kill"))
    vm.run()
    assert vm.trace(p, True, ["send"], tracer=new) == 1
    assert vm.trace_info(p, "tracer") == (A("tracer"), new)
    vm.spawn(kicker, p, 3)
    vm.run()
    assert [m[3] for m in vm.messages(new)] == [1, 2]
    assert [m[3] for m in vm.messages(old)] == [0]
    assert vm.messages(new, start=1) == vm.messages(new)[1:]


async def _sink(proc):
    while True:
        await proc.receive()


async def _spawn_then_trace(proc, tracee, n, out):
    """Spawn a tracer on the other scheduler and name it in trace/3 at once,
    kill it and wait for its death, ``n`` times (the churn workload's loop)."""
    await proc.process_flag("trap_exit", True)
    got = []
    for _ in range(n):
        t = await proc.spawn_link(_sink, scheduler=2)
        got.append(await proc.trace(tracee, True, ["send", (A("tracer"), t)]))
        await proc.exit(t, A("kill"))
        await proc.receive(match=lambda m, t=t: type(m) is tuple and m[:2] == (A("EXIT"), t))
    await proc.send(out, tuple(got))


@pytest.mark.parametrize("nsched", [2, 4])
def test_a_tracer_just_spawned_elsewhere_is_alive_for_trace(nsched):
    """17.x creates a process before spawn returns, so trace/3 right after
    spawn on another scheduler finds the tracer alive; and a tracer whose
    'EXIT' its killer received is gone for the next trace/3
    (``already_traced``).  Each of the 20 calls returns 1, none badarg."""
    with Emulator(mode="smp", schedulers=nsched) as vm:
        out = vm.spawn_collector(scheduler=1)
        tracee = vm.spawn(_sink, scheduler=1)
        vm.spawn(_spawn_then_trace, tracee, 20, out, scheduler=1)
        vm.run()
        assert vm.messages(out) == [tuple([1] * 20)]


async def _child(proc, sink):
    await proc.receive()
    await proc.send(sink, A("ping"))


async def _spawn_then_clear_all(proc, sink, flags):
    child = await proc.spawn(_child, sink, scheduler=2)
    await proc.trace(A("all"), False, flags)
    await proc.send(child, A("go"))


@pytest.mark.parametrize("nsched", [2, 4])
def test_a_clear_of_all_meets_a_spawn_on_its_way(nsched):
    """trace(all, false, ...) right after a spawn on another scheduler: 17.x
    blocks thread progress, so the child exists (with its parent's flags,
    set_on_spawn) and is cleared; it never comes to life traced after it."""
    flags = ["send", "procs", "set_on_spawn"]
    with Emulator(mode="smp", schedulers=nsched) as vm:
        t = vm.spawn_collector(scheduler=1)
        sink = vm.spawn_collector(scheduler=1)
        for _ in range(10):
            p = vm.spawn(_spawn_then_clear_all, sink, flags, scheduler=1)
            vm.trace(p, True, flags, tracer=t)
            vm.run()
        got = vm.messages(t)
        assert len(vm.messages(sink)) == 10
        assert [m[2] for m in got] == [A("spawn")] * 10  # the parents' spawns; no child's send


async def _send_on_go(proc, n):
    for i in range(n):
        go = await proc.receive()
        await proc.send(go[1], i)


async def _retrace_to_new_tracers(proc, tracee, n):
    """For each round: a new tracer on this scheduler, the tracee retraced to
    it, then let it send (its next schedule-in checks its tracer); then the
    tracer killed and its death awaited, as a program replacing it does."""
    await proc.process_flag("trap_exit", True)
    for _ in range(n):
        t = await proc.spawn_link(_sink, scheduler=1)
        await proc.trace(tracee, True, ["send", (A("tracer"), t)])
        await proc.send(tracee, (A("go"), proc.pid))
        await proc.receive(match=lambda m: type(m) is int)  # its send is made
        await proc.exit(t, A("kill"))
        await proc.receive(match=lambda m, t=t: type(m) is tuple and m[:2] == (A("EXIT"), t))


@pytest.mark.parametrize("nsched", [2, 4])
def test_a_new_tracer_on_another_scheduler_is_a_tracer_at_the_tracees_next_schedule_in(nsched):
    """trace_3 sets F_TRACER on the tracer itself: the tracee, on another
    scheduler, never takes it for a dead one (erts_check_my_tracer_proc) and
    keeps its flags: every send is made, none reset."""
    with Emulator(mode="smp", schedulers=nsched) as vm:
        p = vm.spawn(_send_on_go, 20, scheduler=2)
        vm.spawn(_retrace_to_new_tracers, p, 20, scheduler=1)
        vm.run()
        st = vm.statistics()
        assert st.made_by_type.get("TRACE", 0) == 20
        assert st.tracer_checks_reset == 0
