"""A dying process's linked ports close in a port task, after the process is
scheduled out (17.x erl_process.c ``doit_exit_link``: ``erts_port_exit``
with ``ERTS_PORT_SIG_FLG_FORCE_SCHED``; ``schedule()`` runs the port's task
before it picks the next process); a port it owns but unlinked from stays
open; a port that dies signals the processes linked to it.  In both
modes, and in smp with the linked process on the port's scheduler or on
another; the real node's runs of the same are the differential scenarios
``port_owner_exits``, ``port_close_links`` and ``port_close_links_across``."""

from __future__ import annotations

import pytest

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


#: where the process that links to a port runs: on the port's scheduler,
#: or (smp) on another, where the link, the unlink and the exit signals
#: travel between the two
WHERE = ["same", "other"]


def _sched(vm, where: str) -> int:
    return 1 if where == "same" or vm.nsched == 1 else 2


def _linker_run(vm, reason, where):
    t = vm.spawn_collector()
    ctl = vm.spawn_collector()
    u = vm.spawn(owner, ctl, A("normal"), scheduler=1)
    vm.run(timeout=20)
    ((port, _),) = vm.messages(ctl)
    vm.trace("all", True, ["ports"], tracer=t)
    other = vm.spawn(linker, ctl, reason, scheduler=_sched(vm, where))
    _send(vm, other, (port,))
    assert vm.messages(ctl)[-1] == A("linked")
    _send(vm, other, A("go"))
    return u, port, vm.messages(t)


@pytest.mark.parametrize("where", WHERE)
def test_a_normal_exit_of_a_linked_process_that_is_not_the_owner_leaves_the_port_open(vm, where):
    _, port, msgs = _linker_run(vm, A("normal"), where)
    assert CLOSED not in _events(msgs, port), msgs


@pytest.mark.parametrize("where", WHERE)
def test_an_abnormal_exit_of_a_linked_process_closes_the_port(vm, where):
    _, port, msgs = _linker_run(vm, A("boom"), where)
    assert (A("trace"), port, CLOSED, A("boom")) in msgs, msgs


async def killer(proc, port, reason):
    await proc.exit(port, reason)


async def waiter(proc, ctl):
    (port,) = await proc.receive()
    await proc.link(port)
    await proc.send(ctl, A("linked"))
    await proc.receive()


@pytest.mark.parametrize("killer_at", WHERE)
@pytest.mark.parametrize("where", WHERE)
def test_a_port_that_dies_takes_its_linked_processes_with_it(vm, where, killer_at):
    """io.c erts_do_exit_port sweeps the port's links: exit(Port, boom)
    ends the owner and a process linked to it, neither trapping exits (the
    node does the same: differential scenario port_close_links for the
    trapping case), wherever the linked process and the caller of exit/2
    run."""
    t = vm.spawn_collector()
    ctl = vm.spawn_collector()
    u = vm.spawn(owner, ctl, A("normal"), scheduler=1)
    vm.run(timeout=20)
    ((port, _),) = vm.messages(ctl)
    w = vm.spawn(waiter, ctl, scheduler=_sched(vm, where))
    _send(vm, w, (port,))
    assert vm.messages(ctl)[-1] == A("linked")
    for p in (u, w):
        vm.trace(p, True, ["procs"], tracer=t)
    vm.spawn(killer, port, A("boom"), scheduler=_sched(vm, killer_at))
    vm.run(timeout=20)
    exits = {m[1]: m[3] for m in vm.messages(t) if m[2] == A("exit")}
    assert exits == {u: A("boom"), w: A("boom")}, vm.messages(t)


async def link_then_unlink(proc, ctl):
    """Links to the port it is given, unlinks, says so, then traps exits
    and waits."""
    (port,) = await proc.receive()
    await proc.link(port)
    await proc.unlink(port)
    await proc.process_flag(A("trap_exit"), True)
    await proc.send(ctl, A("unlinked"))
    m = await proc.receive()
    await proc.send(ctl, m)


@pytest.mark.parametrize("where", WHERE)
def test_a_process_that_unlinked_from_a_port_gets_nothing_when_it_closes(vm, where):
    """unlink_1 takes both sides of the link away: the port's close then
    signals only its owner (io.c sweep_one_link finds no link on the other)."""
    t = vm.spawn_collector()
    ctl = vm.spawn_collector()
    vm.spawn(owner, ctl, A("normal"), scheduler=1)
    vm.run(timeout=20)
    ((port, _),) = vm.messages(ctl)
    w = vm.spawn(link_then_unlink, ctl, scheduler=_sched(vm, where))
    vm.trace(w, True, ["procs", "receive"], tracer=t)
    _send(vm, w, (port,))
    assert vm.messages(ctl)[-1] == A("unlinked")
    vm.spawn(killer, port, A("boom"), scheduler=1)
    vm.run(timeout=20)
    _send(vm, w, A("done"))
    assert vm.messages(ctl)[-1] == A("done")  # no {'EXIT', Port, boom} before it
    assert [m[2:] for m in vm.messages(t) if m[1] == w] == [
        (A("receive"), (port,)),
        (A("link"), port),
        (A("unlink"), port),
        (A("receive"), A("done")),
        (A("exit"), A("normal")),
    ], vm.messages(t)


async def links_to_closed(proc, ctl, trap):
    await proc.process_flag(A("trap_exit"), trap)
    (port,) = await proc.receive()
    await proc.link(port)
    await proc.send(ctl, A("linked"))
    m = await proc.receive()
    await proc.send(ctl, m)


@pytest.mark.parametrize("trap", [True, False])
@pytest.mark.parametrize("where", WHERE)
def test_a_link_to_a_closed_port_is_noproc(vm, where, trap):
    """bif.c link_1 on a port gone: res_no_proc, wherever the port was: a
    trapping caller gets {'EXIT', Port, noproc} and goes on, another fails
    with error:noproc."""
    t = vm.spawn_collector()
    ctl = vm.spawn_collector()
    u = vm.spawn(owner, ctl, A("normal"), scheduler=1)
    vm.run(timeout=20)
    ((port, _),) = vm.messages(ctl)
    vm.spawn(killer, port, A("boom"), scheduler=1)
    vm.run(timeout=20)
    w = vm.spawn(links_to_closed, ctl, trap, scheduler=_sched(vm, where))
    vm.trace(w, True, ["procs"], tracer=t)
    _send(vm, w, (port,))
    if trap:
        assert vm.messages(ctl)[-2:] == [A("linked"), (A("EXIT"), port, A("noproc"))]
    else:
        assert A("linked") not in vm.messages(ctl)
        (reason,) = [m[3] for m in vm.messages(t) if m[1] == w and m[2] == A("exit")]
        assert reason[0] == A("noproc"), reason
    assert u not in [m[1] for m in vm.messages(t)]
