"""A dying process's linked ports close in a port task, after the process is
scheduled out (17.x erl_process.c ``doit_exit_link``: ``erts_port_exit``
with ``ERTS_PORT_SIG_FLG_FORCE_SCHED``; ``schedule()`` runs the port's task
before it picks the next process); a port it owns but unlinked from stays
open; a port that dies signals the processes linked to it.  In both
modes; the real node's runs of the same are the differential scenarios
``port_owner_exits`` and ``port_close_links``."""

from __future__ import annotations

from smp import Atom as A

CLOSED, OUT_EXITED = A("closed"), A("out_exited")


async def owner(proc, ctl, reason):
    linked = await proc.open_port("echo")
    unlinked = await proc.open_port("echo")
    await proc.unlink(unlinked)
    await proc.send(ctl, (linked, unlinked))
    await proc.receive()
    if reason != A("normal"):
        await proc.exit(reason)


async def linker(proc, ctl, reason):
    """Links to a port another process owns, then exits with ``reason``."""
    (port,) = await proc.receive()
    await proc.link(port)
    await proc.send(ctl, A("linked"))
    await proc.receive()
    if reason != A("normal"):
        await proc.exit(reason)


async def sender(proc, to, msg):
    await proc.send(to, msg)


def _send(vm, to, msg):
    vm.spawn(sender, to, msg)
    vm.run(timeout=20)


def _owner_run(vm, reason):
    t = vm.spawn_collector()
    ctl = vm.spawn_collector()
    u = vm.spawn(owner, ctl, reason)
    vm.trace(u, True, ["procs", "exiting"], tracer=t)
    vm.trace("new", True, ["ports"], tracer=t)
    vm.run(timeout=20)
    ((linked, unlinked),) = vm.messages(ctl)
    _send(vm, u, A("go"))
    return u, linked, unlinked, vm.messages(t)


def _events(msgs, who):
    return [m[2] for m in msgs if m[1] == who]


def test_a_linked_port_closes_after_its_owner_is_scheduled_out(vm):
    u, linked, unlinked, msgs = _owner_run(vm, A("normal"))
    closed = [m for m in msgs if m[2] is CLOSED]
    assert closed == [(A("trace"), linked, CLOSED, A("normal"))], msgs
    order = [m for m in msgs if (m[1] == u and m[2] is OUT_EXITED) or m[2] is CLOSED]
    assert [m[2] for m in order] == [OUT_EXITED, CLOSED], msgs
    # the port it unlinked from is still open: no 'closed', and it stays
    # connected to the dead pid
    assert CLOSED not in _events(msgs, unlinked)


def test_a_killed_owners_linked_port_closes_with_its_reason(vm):
    u, linked, unlinked, msgs = _owner_run(vm, A("boom"))
    assert [m for m in msgs if m[2] is CLOSED] == [(A("trace"), linked, CLOSED, A("boom"))]
    assert _events(msgs, u)[-1] is OUT_EXITED
    assert msgs.index((A("trace"), linked, CLOSED, A("boom"))) > msgs.index(
        next(m for m in msgs if m[1] == u and m[2] is OUT_EXITED)
    )


def _linker_run(vm, reason):
    t = vm.spawn_collector()
    ctl = vm.spawn_collector()
    # (a process links only to a port of its own scheduler here)
    u = vm.spawn(owner, ctl, A("normal"), scheduler=1)
    vm.run(timeout=20)
    ((port, _),) = vm.messages(ctl)
    vm.trace("all", True, ["ports"], tracer=t)
    other = vm.spawn(linker, ctl, reason, scheduler=1)
    _send(vm, other, (port,))
    _send(vm, other, A("go"))
    return u, port, vm.messages(t)


def test_a_normal_exit_of_a_linked_process_that_is_not_the_owner_leaves_the_port_open(vm):
    _, port, msgs = _linker_run(vm, A("normal"))
    assert CLOSED not in _events(msgs, port), msgs


def test_an_abnormal_exit_of_a_linked_process_closes_the_port(vm):
    _, port, msgs = _linker_run(vm, A("boom"))
    assert (A("trace"), port, CLOSED, A("boom")) in msgs, msgs


async def killer(proc, port, reason):
    await proc.exit(port, reason)


async def waiter(proc, ctl):
    (port,) = await proc.receive()
    await proc.link(port)
    await proc.send(ctl, A("linked"))
    await proc.receive()


def test_a_port_that_dies_takes_its_linked_processes_with_it(vm):
    """io.c erts_do_exit_port sweeps the port's links: exit(Port, boom)
    ends the owner and a process linked to it, neither trapping exits (the
    node does the same: differential scenario port_close_links for the
    trapping case)."""
    t = vm.spawn_collector()
    ctl = vm.spawn_collector()
    u = vm.spawn(owner, ctl, A("normal"), scheduler=1)
    vm.run(timeout=20)
    ((port, _),) = vm.messages(ctl)
    w = vm.spawn(waiter, ctl, scheduler=1)
    _send(vm, w, (port,))
    for p in (u, w):
        vm.trace(p, True, ["procs"], tracer=t)
    vm.spawn(killer, port, A("boom"), scheduler=1)
    vm.run(timeout=20)
    exits = {m[1]: m[3] for m in vm.messages(t) if m[2] == A("exit")}
    assert exits == {u: A("boom"), w: A("boom")}, vm.messages(t)
