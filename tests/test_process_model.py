"""The process model under the trace points: links and exit signals,
selective receive, spawn_link, the registry, sensitive processes and
preemption.  Both modes unless stated."""

from __future__ import annotations

import pytest
from helpers import check_counts, mfa

import smp
from smp.core.terms import A

T = A.trace


async def waiter(proc):
    await proc.receive()


async def forever(proc):
    while True:
        await proc.receive()


async def noop(proc):
    return None


async def trapper(proc, report):
    await proc.process_flag(A.trap_exit, True)
    while True:
        await proc.send(report, await proc.receive())


async def linked_dier(proc, other, reason):
    await proc.link(other)
    await proc.exit(reason)


async def link_then_wait(proc, other):
    await proc.link(other)
    await proc.receive()


# ---------------------------------------------------------------- links and exits
def test_exit_signal_kills_linked(vm):
    w = vm.spawn(waiter)
    vm.run()
    p = vm.spawn(linked_dier, w, A.boom)
    vm.run()
    assert not vm.is_alive(w) and not vm.is_alive(p)


def test_trap_exit_gets_exit_message(vm):
    report = vm.spawn_collector()
    tr = vm.spawn(trapper, report)
    vm.run()
    p = vm.spawn(linked_dier, tr, A.boom)
    q = vm.spawn(linked_dier, tr, A.normal)
    vm.run()
    assert sorted(vm.messages(report), key=lambda m: m[1]) == sorted(
        [(A.EXIT, p, A.boom), (A.EXIT, q, A.normal)], key=lambda m: m[1]
    )
    assert vm.is_alive(tr)


def test_normal_exit_ignored_when_not_trapping(vm):
    w = vm.spawn(waiter)
    vm.run()
    vm.spawn(linked_dier, w, A.normal)
    vm.run()
    assert vm.is_alive(w)


async def kills(proc, to):
    await proc.exit(to, A.kill)


def test_kill_is_untrappable(vm):
    report = vm.spawn_collector()
    tr = vm.spawn(trapper, report)
    tr2 = vm.spawn(trapper, report)
    vm.run()
    p = vm.spawn(link_then_wait, tr2)
    vm.run()
    vm.spawn(kills, tr)
    vm.spawn(kills, p)
    vm.run()
    assert not vm.is_alive(tr) and not vm.is_alive(p)
    # p died of 'killed', and tr2 (trapping, linked to p) was told so
    assert vm.messages(report) == [(A.EXIT, p, A.killed)]


async def exit2_sender(proc, to, reason):
    await proc.exit(to, reason)


def test_exit2_trapped_and_normal(vm):
    report = vm.spawn_collector()
    tr = vm.spawn(trapper, report)
    w = vm.spawn(waiter)
    vm.run()
    s1 = vm.spawn(exit2_sender, tr, A.stop)
    vm.spawn(exit2_sender, w, A.normal)
    vm.run()
    assert vm.messages(report) == [(A.EXIT, s1, A.stop)]
    assert vm.is_alive(w)


async def link_dead(proc, dead, report):
    await proc.process_flag(A.trap_exit, True)
    await proc.link(dead)
    await proc.send(report, await proc.receive())


def test_link_to_dead_pid_noproc(vm):
    report = vm.spawn_collector()
    dead = vm.spawn(noop)
    vm.run()
    p = vm.spawn(link_dead, dead, report)
    q = vm.spawn(link_then_wait, dead)  # not trapping: dies with noproc
    t = vm.spawn_collector()
    vm.trace(q, True, ["procs"], tracer=t)
    vm.run()
    assert vm.messages(report) == [(A.EXIT, dead, A.noproc)]
    assert not vm.is_alive(q)
    # link_1 traces the call first; a caller not trapping exits fails with
    # error:noproc (EXC_NOPROC), so it exits {noproc, Stacktrace}
    (link, (tag, tracee, what, (reason, stack))) = vm.messages(t)
    assert link == (T, q, A.link, dead)
    assert (tag, tracee, what, reason) == (T, q, A.exit, A.noproc) and type(stack) is list
    assert not vm.is_alive(p)
    check_counts(vm)


async def spawn_linker(proc, report):
    await proc.process_flag(A.trap_exit, True)
    child = await proc.spawn_link(child_dies)
    await proc.send(report, (child, await proc.receive()))


async def child_dies(proc):
    await proc.exit(A.oops)


def test_spawn_link(vm):
    report = vm.spawn_collector()
    vm.spawn(spawn_linker, report)
    vm.run()
    [(child, msg)] = vm.messages(report)
    assert msg == (A.EXIT, child, A.oops)


# ---------------------------------------------------------------- receive
async def selective(proc, report):
    await proc.send(proc.pid, (A.b, 1))
    await proc.send(proc.pid, (A.a, 2))
    await proc.send(proc.pid, (A.b, 3))
    got = [await proc.receive(match=lambda m: m[0] is A.a)]
    got.append(await proc.receive(timeout=0, match=lambda m: m[0] is A.c))
    got.append(await proc.receive())
    got.append(await proc.receive())
    got.append(await proc.receive(timeout=5))
    await proc.send(report, got)


def test_selective_receive_and_timeout(vm):
    report = vm.spawn_collector()
    vm.spawn(selective, report)
    vm.run()
    assert vm.messages(report) == [[(A.a, 2), None, (A.b, 1), (A.b, 3), None]]


# ---------------------------------------------------------------- registry
async def registrar(proc, report, other):
    await proc.register(A.me)
    await proc.send(report, await proc.whereis(A.me))
    try:
        await proc.register(A.me, other)
    except smp.Error as e:
        await proc.send(report, (A.error, e.reason))
    await proc.send(A.me, A.to_myself)
    await proc.send(report, await proc.receive())
    await proc.unregister(A.me)
    await proc.send(report, await proc.whereis(A.me))
    try:
        await proc.send(A.me, A.x)
    except smp.Error as e:
        await proc.send(report, (A.error, e.reason))


def test_register_from_process(vm):
    report = vm.spawn_collector()
    other = vm.spawn(waiter)
    p = vm.spawn(registrar, report, other)
    vm.run()
    assert vm.messages(report) == [
        p,
        (A.error, A.badarg),
        A.to_myself,
        A.undefined,
        (A.error, A.badarg),
    ]


# ---------------------------------------------------------------- sensitive
async def sensitive_body(proc, to):
    await proc.process_flag(A.sensitive, True)
    await proc.send(to, A.secret)
    await proc.yield_()
    await proc.send(to, A.secret2)


def test_sensitive_process_produces_no_trace(vm):
    t = vm.spawn_collector()
    st = vm.spawn_collector()
    sink = vm.spawn_collector()
    vm.set_system_seq_tracer(st)
    p = vm.spawn(sensitive_body, sink)
    vm.trace(p, True, ["send", "running", "procs"], tracer=t)
    vm.run()
    # only the first in (before the flag was set): no send, out or exit after it
    assert vm.messages(t) == [(T, p, A["in"], mfa(sensitive_body, 1))]
    assert vm.messages(sink) == [A.secret, A.secret2]
    check_counts(vm)


# ---------------------------------------------------------------- preemption
async def counter(proc, n):
    for _ in range(n):
        await proc.make_ref()


@pytest.mark.parametrize("mode", ["nonsmp", "smp"])
def test_preemption_gives_in_out_pairs(mode):
    with smp.Emulator(mode=mode, reductions=10) as vm:
        t = vm.spawn_collector()
        p = vm.spawn(counter, 45)
        vm.trace(p, True, ["running"], tracer=t)
        vm.run()
        f = mfa(counter, 1)
        # 45 refs + the final return: slices of 10 reductions
        msgs = vm.messages(t)
        assert msgs == [(T, p, A["in"], f), (T, p, A.out, f)] * 4 + [(T, p, A["in"], f)]
        check_counts(vm)


async def _finisher(proc):
    await proc.receive()


def test_process_info_last_calls_false_without_save_calls(vm):
    p = vm.spawn(_finisher)
    vm.run()
    assert vm.process_info(p)["last_calls"] == A.false


def test_system_monitor_accepts_strings_for_atoms(vm):
    m = vm.spawn(_finisher)
    assert vm.system_monitor((m, [("long_gc", 7)])) == A.undefined
    assert vm.system_monitor() == (m, [(A.long_gc, 7)])
    assert vm.system_monitor("undefined") == (m, [(A.long_gc, 7)])
    assert vm.system_monitor() == A.undefined


# ---------------------------------------------------------------- set_on_* inheritance
async def _spawns_two(proc, report):
    for _ in range(2):
        child = await proc.spawn(_finisher)
        await proc.send(report, child)
    await proc.receive()


async def _links_two(proc, a, b):
    await proc.link(a)
    await proc.link(b)
    await proc.receive()


@pytest.mark.parametrize("flag,first_only", [("set_on_spawn", False), ("set_on_first_spawn", True)])
def test_set_on_spawn_inheritance(vm, flag, first_only):
    t, report = vm.spawn_collector(), vm.spawn_collector()
    p = vm.spawn(_spawns_two, report)
    vm.trace(p, True, ["send", flag], tracer=t)
    vm.run()
    c1, c2 = vm.messages(report)
    # set_on_first_spawn is not passed on; set_on_spawn is, in trace_info's order
    expected = [A.send] if first_only else sorted([A.send, A[flag]], key=_flag_pos)
    assert vm.trace_info(c1, "flags") == (A.flags, expected)
    assert vm.trace_info(c1, "tracer") == (A.tracer, t)
    if first_only:
        assert vm.trace_info(c2, "flags") == (A.flags, [])
        assert vm.trace_info(p, "flags") == (A.flags, [A.send])  # the parent lost it
    else:
        assert vm.trace_info(c2, "tracer") == (A.tracer, t)


@pytest.mark.parametrize("flag,first_only", [("set_on_link", False), ("set_on_first_link", True)])
def test_set_on_link_inheritance(vm, flag, first_only):
    t = vm.spawn_collector()
    a, b = vm.spawn(_finisher), vm.spawn(_finisher)
    p = vm.spawn(_links_two, a, b)
    vm.trace(p, True, ["send", flag], tracer=t)
    vm.run()
    assert vm.trace_info(a, "tracer") == (A.tracer, t)
    if first_only:
        assert vm.trace_info(a, "flags") == (A.flags, [A.send])
        assert vm.trace_info(b, "flags") == (A.flags, [])
        assert vm.trace_info(p, "flags") == (A.flags, [A.send])
    else:
        assert A[flag] in vm.trace_info(a, "flags")[1]
        assert vm.trace_info(b, "tracer") == (A.tracer, t)


def _flag_pos(a):
    from smp.core.flags import flags_to_list, parse_trace_flags

    order = flags_to_list(parse_trace_flags(["all"])[0])
    return order.index(a)
