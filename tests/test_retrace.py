"""A tracee whose tracer died can be given a new tracer (both modes)."""

from __future__ import annotations

from smp import Atom as A


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
