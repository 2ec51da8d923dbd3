"""Every TRACE row of DESIGN.md section 3, reached from a workload, in both modes.

Each test runs a small emulated workload, reads what the tracer received and
compares whole Erlang terms built from the pids the API returned.  Across
schedulers only per-sender order is promised, so messages about different
tracees are compared per tracee.
"""

from __future__ import annotations

import pytest
from helpers import assert_increasing, check_counts, mfa

import smp
from smp import Error, Exit, Throw
from smp.core.terms import A, Atom, Pid, Port

T, TS = A.trace, A.trace_ts


def by_tracee(msgs: list, who) -> list:
    return [m for m in msgs if m[1] == who]


def assert_ts(ts) -> None:
    assert type(ts) is tuple and len(ts) == 3 and all(type(x) is int for x in ts)


# ---------------------------------------------------------------- bodies
async def yielder(proc):
    await proc.yield_()


async def exits_normally(proc):
    await proc.send(proc.pid, A.hello)
    await proc.receive()


async def noop(proc):
    return None


async def sender(proc, to, msg):
    await proc.send(to, msg)


async def receiver(proc, n):
    for _ in range(n):
        await proc.receive()


async def times_out(proc):
    assert await proc.receive(timeout=1) is None


async def slow_port_user(proc):
    port = await proc.open_port("slow", cost_ms=20)
    await proc.port_command(port, b"x")
    await proc.receive()


async def double(proc, x):
    return 2 * x


async def fails(proc, cls):
    if cls == 1:
        raise Error(A.badarg)
    if cls == 2:
        raise Throw(A.thrown)
    raise Exit(A.bye)


async def caller(proc, x):
    await proc.call("m", "double", [x])


async def caller_then_wait(proc, x):
    await proc.call("m", "double", [x])
    await proc.call("m", "double", [x + 1])
    await proc.receive()


async def local_caller(proc, x):
    await proc.call("m", "double", [x], local=True)


async def exception_caller(proc):
    for cls in (1, 2, 3):
        try:
            await proc.call("m", "fails", [cls])
        except (Error, Throw, Exit):
            pass


async def linker(proc, other):
    await proc.link(other)
    await proc.unlink(other)
    await proc.register(A.linker_name)
    await proc.unregister(A.linker_name)


async def waiter(proc):
    await proc.receive()


async def spawner(proc, report):
    child = await proc.spawn(noop_args, 1, A.two)
    await proc.send(report, child)


async def noop_args(proc, a, b):
    return None


async def gc_body(proc):
    await proc.allocate(100, keep=True)
    await proc.garbage_collect()


async def port_owner(proc):
    port = await proc.open_port("echo")
    await proc.port_command(port, b"hi")
    await proc.receive()
    await proc.port_close(port)


# ---------------------------------------------------------------- trace_sched
def test_trace_sched_in_out(vm):
    t = vm.spawn_collector()
    p = vm.spawn(yielder)
    assert vm.trace(p, True, ["running"], tracer=t) == 1
    vm.run()
    f = mfa(yielder)
    assert vm.messages(t) == [(T, p, A["in"], f), (T, p, A.out, f), (T, p, A["in"], f)]
    check_counts(vm)


def test_trace_sched_scheduler_id(vm):
    sid = vm.nsched
    t = vm.spawn_collector(scheduler=1)
    p = vm.spawn(yielder, scheduler=sid)
    vm.trace(p, True, ["running", "scheduler_id"], tracer=t)
    vm.run()
    f = mfa(yielder)
    assert vm.messages(t) == [
        (T, p, A["in"], sid, f),
        (T, p, A.out, sid, f),
        (T, p, A["in"], sid, f),
    ]
    check_counts(vm)


def test_trace_sched_exiting(vm):
    t = vm.spawn_collector()
    p = vm.spawn(noop)
    vm.trace(p, True, ["exiting"], tracer=t)
    vm.run()
    # schedule() scheduled it out FREE: out_exited alone (its exit never yields)
    assert vm.messages(t) == [(T, p, A.out_exited, 0)]
    check_counts(vm)


def test_trace_sched_running_and_exiting(vm):
    t = vm.spawn_collector()
    p = vm.spawn(noop)
    vm.trace(p, True, ["running", "exiting"], tracer=t)
    vm.run()
    assert vm.messages(t) == [(T, p, A["in"], mfa(noop)), (T, p, A.out_exited, 0)]
    check_counts(vm)


def test_trace_sched_running_procs(vm):
    t = vm.spawn_collector()
    p = vm.spawn(yielder)
    vm.trace(p, True, ["running_procs"], tracer=t)
    vm.run()
    f = mfa(yielder)
    assert vm.messages(t) == [(T, p, A["in"], f), (T, p, A.out, f), (T, p, A["in"], f)]
    check_counts(vm)


def test_trace_sched_timestamps_increase(vm):
    t = vm.spawn_collector()
    p = vm.spawn(yielder)
    vm.trace(p, True, ["running", "timestamp"], tracer=t)
    vm.run()
    msgs = vm.messages(t)
    f = mfa(yielder)
    assert [m[:4] for m in msgs] == [(TS, p, A["in"], f), (TS, p, A.out, f), (TS, p, A["in"], f)]
    assert all(len(m) == 5 for m in msgs)
    assert_increasing([m[4] for m in msgs])
    check_counts(vm)


def test_trace_virtual_sched_slow_port(vm):
    t = vm.spawn_collector()
    p = vm.spawn(slow_port_user)
    vm.trace(p, True, ["running"], tracer=t)
    vm.run()
    f = mfa(slow_port_user)
    # the virtual out/in pair around the synchronous port command; the reply
    # is queued already, so the receive does not schedule out
    assert vm.messages(t) == [(T, p, A["in"], f), (T, p, A.out, f), (T, p, A["in"], f)]
    check_counts(vm)


# ---------------------------------------------------------------- send / receive
def test_trace_send_and_receive(vm):
    t = vm.spawn_collector()
    r = vm.spawn(receiver, 1)
    s = vm.spawn(sender, r, (A.hello, [1, 2]))
    vm.trace(s, True, ["send"], tracer=t)
    vm.trace(r, True, ["receive"], tracer=t)
    vm.run()
    msgs = vm.messages(t)
    assert sorted(msgs, key=len) == [
        (T, r, A["receive"], (A.hello, [1, 2])),
        (T, s, A.send, (A.hello, [1, 2]), r),
    ]
    check_counts(vm)


def test_trace_send_to_non_existing_process(vm):
    t = vm.spawn_collector()
    dead = vm.spawn(noop)
    vm.run()
    assert not vm.is_alive(dead)
    s = vm.spawn(sender, dead, A.ping)
    vm.trace(s, True, ["send"], tracer=t)
    vm.run()
    assert vm.messages(t) == [(T, s, A.send_to_non_existing_process, A.ping, dead)]
    check_counts(vm)


def test_trace_receive_timeout(vm):
    t = vm.spawn_collector()
    p = vm.spawn(times_out)
    vm.trace(p, True, ["receive"], tracer=t)
    vm.run()
    assert vm.messages(t) == [(T, p, A["receive"], A.timeout)]
    assert not vm.is_alive(p)  # the assert in the body held
    check_counts(vm)


# ---------------------------------------------------------------- call tracing
def test_call_trace_args(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(caller, 21)
    vm.trace(p, True, ["call"], tracer=t)
    assert vm.trace_pattern(("m", "double", 1), True) == 1
    vm.run()
    assert vm.messages(t) == [(T, p, A.call, (A.m, A.double, [21]))]
    check_counts(vm)


def test_call_trace_arity(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(caller, 21)
    vm.trace(p, True, ["call", "arity"], tracer=t)
    vm.trace_pattern(("m", "double", 1), True)
    vm.run()
    assert vm.messages(t) == [(T, p, A.call, (A.m, A.double, 1))]
    check_counts(vm)


def test_call_trace_match_spec_message(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(caller, 21)
    q = vm.spawn(caller, 5)
    vm.trace(p, True, ["call"], tracer=t)
    vm.trace(q, True, ["call"], tracer=t)
    # {{big, '$1'}} builds the tuple {big, '$1'} in a match spec body
    ms = [([A["$1"]], [(A[">"], A["$1"], 10)], [(A.message, ((A.big, A["$1"]),))])]
    vm.trace_pattern(("m", "double", 1), ms)
    vm.run()
    # q's argument fails the guard: no message at all
    assert vm.messages(t) == [(T, p, A.call, (A.m, A.double, [21]), (A.big, 21))]
    check_counts(vm)


def test_call_trace_return_and_exception(vm):
    vm.define("m", "double", double)
    vm.define("m", "fails", fails)
    t = vm.spawn_collector()
    p = vm.spawn(caller, 4)
    q = vm.spawn(exception_caller)
    vm.trace(p, True, ["call"], tracer=t)
    vm.trace(q, True, ["call", "arity"], tracer=t)
    ms = [(A["_"], [], [(A.exception_trace,)])]
    assert vm.trace_pattern(("m", "_", "_"), ms) == 2
    vm.run()
    msgs = vm.messages(t)
    f1 = (A.m, A.fails, 1)
    assert by_tracee(msgs, p) == [
        (T, p, A.call, (A.m, A.double, [4])),
        (T, p, A.return_from, (A.m, A.double, 1), 8),
    ]
    assert by_tracee(msgs, q) == [
        (T, q, A.call, f1),
        (T, q, A.exception_from, f1, (A.error, A.badarg)),
        (T, q, A.call, f1),
        (T, q, A.exception_from, f1, (A.throw, A.thrown)),
        (T, q, A.call, f1),
        (T, q, A.exception_from, f1, (A.exit, A.bye)),
    ]
    check_counts(vm)


def test_call_trace_return_trace_only(vm):
    vm.define("m", "fails", fails)
    t = vm.spawn_collector()
    q = vm.spawn(exception_caller)
    vm.trace(q, True, ["call", "arity"], tracer=t)
    vm.trace_pattern(("m", "fails", 1), [(A["_"], [], [(A.return_trace,)])])
    vm.run()
    # return_trace alone gives no exception_from
    assert vm.messages(t) == [(T, q, A.call, (A.m, A.fails, 1))] * 3
    check_counts(vm)


def test_call_trace_meta(vm):
    vm.define("m", "double", double)
    meta = vm.spawn_collector()
    p = vm.spawn(caller, 3)  # not traced at all: meta trace needs no flags
    vm.trace_pattern(("m", "double", 1), [(A["_"], [], [(A.return_trace,)])], [("meta", meta)])
    vm.run()
    msgs = vm.messages(meta)
    assert [m[:-1] for m in msgs] == [
        (TS, p, A.call, (A.m, A.double, [3])),
        (TS, p, A.return_from, (A.m, A.double, 1), 6),
    ]
    assert_increasing([m[-1] for m in msgs])
    check_counts(vm)


def test_call_trace_silent(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(caller, 3)
    q = vm.spawn(caller, 4)
    vm.trace(p, True, ["call", "silent", "send"], tracer=t)
    vm.trace(q, True, ["call"], tracer=t)
    vm.trace_pattern(("m", "double", 1), True)
    vm.run()
    assert vm.messages(t) == [(T, q, A.call, (A.m, A.double, [4]))]
    check_counts(vm)


def test_call_trace_silent_by_match_spec(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(caller_then_wait, 3)
    vm.trace(p, True, ["call"], tracer=t)
    # {silent, true} turns silent mode on before this very call is reported
    vm.trace_pattern(("m", "double", 1), [(A["_"], [], [(A.silent, A.true)])])
    vm.run()
    assert vm.messages(t) == []
    assert vm.trace_info(p, "flags") == (A.flags, [A.silent, A.call])
    check_counts(vm)


def test_call_trace_return_to(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(local_caller, 2)
    vm.trace(p, True, ["call", "return_to", "arity"], tracer=t)
    vm.trace_pattern(("m", "double", 1), True, ["local"])
    vm.run()
    assert vm.messages(t) == [
        (T, p, A.call, (A.m, A.double, 1)),
        (T, p, A.return_to, mfa(local_caller, 1)),
    ]
    check_counts(vm)


def test_call_trace_pattern_off(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(caller, 3)
    vm.trace(p, True, ["call"], tracer=t)
    vm.trace_pattern(("m", "double", 1), True)
    assert vm.trace_pattern(("m", "double", 1), False) == 1
    vm.run()
    assert vm.messages(t) == []
    check_counts(vm)


# ---------------------------------------------------------------- procs
def test_trace_proc_link_unlink_register_exit(vm):
    t = vm.spawn_collector()
    w = vm.spawn(waiter)
    p = vm.spawn(linker, w)
    vm.trace(p, True, ["procs"], tracer=t)
    vm.trace(w, True, ["procs"], tracer=t)
    vm.run()
    msgs = vm.messages(t)
    assert by_tracee(msgs, p) == [
        (T, p, A.link, w),
        (T, p, A.unlink, w),
        (T, p, A.register, A.linker_name),
        (T, p, A.unregister, A.linker_name),
        (T, p, A.exit, A.normal),
    ]
    assert by_tracee(msgs, w) == [(T, w, A.getting_linked, p), (T, w, A.getting_unlinked, p)]
    assert vm.whereis("linker_name") == A.undefined
    check_counts(vm)


async def link_prober(proc, dead, other, report):
    """Every way link/1 can go: to a dead pid, itself, a live process twice,
    a closed port, an atom, then, trapping exits, the dead pid and the port."""
    port = await proc.open_port("echo")
    await proc.port_close(port)
    out = []

    async def attempt(x):
        try:
            out.append((A.ok, await proc.link(x)))
        except (Error, Exit) as e:
            out.append((Atom(e.erlang_class), e.reason))

    for x in (dead, proc.pid, other, other, port, A.foo):
        await attempt(x)
    await proc.process_flag(A.trap_exit, True)
    for x in (dead, port):
        await attempt(x)
        out.append(await proc.receive(timeout=50))
    await proc.send(report, (port, out))
    await proc.receive()


def test_link_is_traced_before_its_argument_is_checked(vm):
    """bif.c link_1 traces ``link`` first, whatever the argument; a dead pid
    or a closed port is error:noproc, or an ``'EXIT'`` message when the
    caller traps exits; linking itself or a process linked already traces
    getting_linked on it (insert_internal_link, 17.x: OTP 25 does not, see
    the differences table)."""
    dead = vm.spawn(noop)
    vm.run()
    t, report = vm.spawn_collector(), vm.spawn_collector()
    other = vm.spawn(waiter)
    p = vm.spawn(link_prober, dead, other, report)
    vm.trace(p, True, ["procs"], tracer=t)
    vm.trace(other, True, ["procs"], tracer=t)
    vm.run()
    [(port, results)] = vm.messages(report)
    assert results == [
        (A.error, A.noproc),
        (A.ok, A.true),
        (A.ok, A.true),
        (A.ok, A.true),
        (A.error, A.noproc),
        (A.error, A.badarg),
        (A.ok, A.true),
        (A.EXIT, dead, A.noproc),
        (A.ok, A.true),
        (A.EXIT, port, A.noproc),
    ]
    msgs = vm.messages(t)
    assert by_tracee(msgs, p) == [
        (T, p, A.getting_unlinked, port),  # (its own port, closed: the sweep)
        (T, p, A.link, dead),
        (T, p, A.link, p),
        (T, p, A.getting_linked, p),
        (T, p, A.link, other),
        (T, p, A.link, other),
        (T, p, A.link, port),
        (T, p, A.link, A.foo),
        (T, p, A.link, dead),
        (T, p, A.link, port),
    ]
    assert by_tracee(msgs, other) == [(T, other, A.getting_linked, p)] * 2
    check_counts(vm)


async def unlink_prober(proc, other, report):
    await proc.link(other)
    out = []
    for x in (other, other, proc.pid, A.foo):
        try:
            out.append(await proc.unlink(x))
        except Error as e:
            out.append(e.reason)
    await proc.send(report, out)
    await proc.receive()


def test_unlink_is_traced_before_its_argument_is_checked(vm):
    """bif.c unlink_1 traces ``unlink`` first, whatever the argument (a
    process not linked, itself, an atom, which is then badarg); the other
    side is traced getting_unlinked only while it had the link."""
    t, report = vm.spawn_collector(), vm.spawn_collector()
    other = vm.spawn(waiter)
    p = vm.spawn(unlink_prober, other, report)
    vm.trace(p, True, ["procs"], tracer=t)
    vm.trace(other, True, ["procs"], tracer=t)
    vm.run()
    assert vm.messages(report) == [[A.true, A.true, A.true, A.badarg]]
    msgs = vm.messages(t)
    assert by_tracee(msgs, p) == [
        (T, p, A.link, other),
        (T, p, A.unlink, other),
        (T, p, A.unlink, other),
        (T, p, A.unlink, p),
        (T, p, A.unlink, A.foo),
    ]
    assert by_tracee(msgs, other) == [
        (T, other, A.getting_linked, p),
        (T, other, A.getting_unlinked, p),
    ]
    check_counts(vm)


def test_trace_proc_spawn(vm):
    t = vm.spawn_collector()
    report = vm.spawn_collector()
    p = vm.spawn(spawner, report)
    vm.trace(p, True, ["procs"], tracer=t)
    vm.run()
    [child] = vm.messages(report)
    assert type(child) is Pid and child != p
    assert vm.messages(t) == [
        (T, p, A.spawn, child, (Atom(noop_args.__module__), A.noop_args, [1, A.two])),
        (T, p, A.exit, A.normal),
    ]
    check_counts(vm)


def test_trace_proc_exit_reason(vm):
    t = vm.spawn_collector()
    p = vm.spawn(waiter)
    vm.trace(p, True, ["procs"], tracer=t)
    vm.run()
    vm.exit(p, "shutdown")
    vm.run()
    assert vm.messages(t) == [(T, p, A.exit, A.shutdown)]
    check_counts(vm)


# ---------------------------------------------------------------- gc
def test_trace_gc_items_in_seed_order(vm):
    t = vm.spawn_collector()
    p = vm.spawn(gc_body)
    vm.trace(p, True, ["garbage_collection"], tracer=t)
    vm.run()
    tags = [
        A.old_heap_block_size,
        A.heap_block_size,
        A.mbuf_size,
        A.recent_size,
        A.stack_size,
        A.old_heap_size,
        A.heap_size,
        A.bin_vheap_size,
        A.bin_vheap_block_size,
        A.bin_old_vheap_size,
        A.bin_old_vheap_block_size,
    ]
    before = [0, 233, 0, 0, 10, 0, 100, 0, 46422, 0, 46422]
    after = [233, 233, 0, 100, 10, 100, 0, 0, 46422, 0, 46422]
    assert vm.messages(t) == [
        (T, p, A.gc_start, list(zip(tags, before, strict=False))),
        (T, p, A.gc_end, list(zip(tags, after, strict=False))),
    ]
    check_counts(vm)


# ---------------------------------------------------------------- ports
def test_trace_ports_open_sched_closed(vm):
    t = vm.spawn_collector()
    assert vm.trace("new", True, ["ports", "running_ports"], tracer=t) == 0
    p = vm.spawn(port_owner)
    vm.run()
    msgs = vm.messages(t)
    assert len(msgs) == 6
    port = msgs[0][3]
    assert type(port) is Port
    # erts_open_driver: open, then the driver's start callback as in/out 'start'
    assert msgs == [
        (T, p, A.open, port, A.echo),
        (T, port, A["in"], A.start),
        (T, port, A.out, A.start),
        (T, port, A["in"], A.command),
        (T, port, A.out, A.command),
        (T, port, A.closed, A.normal),
    ]
    check_counts(vm)


def test_trace_ports_scheduler_id(vm):
    t = vm.spawn_collector()
    vm.trace("new", True, ["running_ports", "scheduler_id"], tracer=t)
    vm.spawn(port_owner, scheduler=vm.nsched)
    vm.run()
    msgs = vm.messages(t)
    assert len(msgs) == 4
    port = msgs[0][1]
    sid = vm.nsched
    assert msgs == [
        (T, port, A["in"], sid, A.start),
        (T, port, A.out, sid, A.start),
        (T, port, A["in"], sid, A.command),
        (T, port, A.out, sid, A.command),
    ]
    check_counts(vm)


async def global_caller_local_pattern(proc, x):
    await proc.call("m", "double", [x])  # a remote call, but the pattern is local


def test_call_trace_return_to_with_local_breakpoint(vm):
    """``erts_call_trace``'s ``local`` is the breakpoint's kind: a local
    pattern traces remote calls too, and return_to comes with it."""
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(global_caller_local_pattern, 2)
    vm.trace(p, True, ["call", "return_to", "arity"], tracer=t)
    vm.trace_pattern(("m", "double", 1), True, ["local"])
    vm.run()
    assert vm.messages(t) == [
        (T, p, A.call, (A.m, A.double, 1)),
        (T, p, A.return_to, mfa(global_caller_local_pattern, 1)),
    ]
    check_counts(vm)


def test_call_trace_global_pattern_no_return_to(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(caller, 2)
    vm.trace(p, True, ["call", "return_to", "arity"], tracer=t)
    vm.trace_pattern(("m", "double", 1), True, ["global"])
    vm.run()
    assert vm.messages(t) == [(T, p, A.call, (A.m, A.double, 1))]
    check_counts(vm)


# ---------------------------------------------------------------- error logger
async def crasher(proc):
    raise Error(A.badarg)


async def thrower(proc):
    raise Throw(A.oops)


def test_error_logger_message(vm):
    el = vm.spawn_collector()
    vm.register("error_logger", el)
    p = vm.spawn(crasher)
    q = vm.spawn(thrower)
    vm.run()
    gl = Pid(0)
    r1 = (A.badarg, [(Atom(crasher.__module__), A.crasher, 0, [])])
    r2 = ((A.nocatch, A.oops), [(Atom(thrower.__module__), A.thrower, 0, [])])

    def report(pid, reason):
        # 17.x terminate_proc: erts_send_error_to_logger(gl, "Error in process ...")
        text = (
            f"Error in process {smp.format_term(pid)} with exit value: {smp.format_term(reason)}\n"
        )
        return (A.notify, (A.error, gl, (A.emulator, smp.charlist("~s~n"), [smp.charlist(text)])))

    got = vm.messages(el)
    assert sorted(got, key=repr) == sorted([report(p, r1), report(q, r2)], key=repr)
    s = check_counts(vm)
    assert s.made_by_type["ERRLGR"] == 2
    assert s.delivered_by_type["ERRLGR"] == 2


async def exits_with(proc, reason):
    await proc.exit(reason)


def test_error_logger_not_told_of_exit_class(vm):
    el = vm.spawn_collector()
    vm.register("error_logger", el)
    vm.spawn(exits_with, A.bye)
    vm.run()
    assert vm.messages(el) == []
    check_counts(vm)


@pytest.mark.parametrize("mode", ["nonsmp", "smp"])
def test_no_error_logger_prints_to_stderr(mode, capfd):
    """The emulator is started in the test body, not in a fixture: capfd
    swaps its capture file between the setup and call phases, and the
    scheduler and dispatcher processes keep the fd 2 they were started with."""
    with smp.Emulator(mode=mode, schedulers=1 if mode == "nonsmp" else 2) as vm:
        _no_error_logger(vm, capfd)


def _no_error_logger(vm, capfd):
    p = vm.spawn(crasher)
    vm.run()
    s = check_counts(vm)
    assert s.dropped_by_reason == {"no_error_logger": {"ERRLGR": 1}}
    err = capfd.readouterr().err
    assert f'(no error logger present) error: "Error in process {p!r} with exit value: ' in err


# ---------------------------------------------------------------- trace_delivered (PROC_MSG)
async def asks_trace_delivered(proc, report, target):
    ref = await proc.trace_delivered(target)
    msg = await proc.receive()
    await proc.send(report, (ref, msg))


def test_trace_delivered_from_process(vm):
    report = vm.spawn_collector()
    tracee = vm.spawn(waiter)
    p = vm.spawn(asks_trace_delivered, report, tracee)
    vm.run()
    [(ref, msg)] = vm.messages(report)
    assert msg == (A.trace_delivered, tracee, ref)
    s = check_counts(vm)
    assert s.delivered_by_type["PROC_MSG"] == 1
    assert vm.is_alive(p) is False


def test_trace_delivered_all_from_api(vm):
    t = vm.spawn_collector()
    p = vm.spawn(yielder)
    vm.trace(p, True, ["running"], tracer=t)
    vm.run()
    reply = vm.trace_delivered("all")
    assert reply[:2] == (A.trace_delivered, A.all)
    assert len(vm.messages(t)) == 3
    check_counts(vm)


# ---------------------------------------------------------------- save_calls
async def saves_calls(proc, peer):
    await proc.process_flag(A.save_calls, 10)
    await proc.call("m", "double", [1])
    await proc.send(peer, A.hi)
    await proc.send(proc.pid, A.me)
    await proc.receive()
    await proc.receive(timeout=0)
    await proc.call("m", "double", [2])
    await proc.call("m", "double", [3], local=True)  # local calls are not saved
    await proc.receive()


async def saves_few_calls(proc):
    await proc.process_flag(A.save_calls, 2)
    for i in range(3):
        await proc.call("m", "double", [i])
    await proc.send(proc.pid, A.me)
    await proc.receive()
    await proc.receive()


def test_save_calls(vm):
    vm.define("m", "double", double)
    peer = vm.spawn_collector()
    p = vm.spawn(saves_calls, peer)
    q = vm.spawn(saves_few_calls)
    vm.run()
    d = (A.m, A.double, 1)
    assert vm.process_info(p)["last_calls"] == [d, A.send, A.send, A["receive"], A.timeout, d]
    assert vm.process_info(q)["last_calls"] == [A.send, A["receive"]]
    check_counts(vm)


# ------------------------------------------- 17.x erl_create_process, exit_2
async def exit_self_normal(proc, report):
    await proc.exit(proc.pid, A.normal)
    await proc.send(report, A.still_alive)


def test_exit_of_itself_with_reason_normal_ends_the_caller(vm):
    """bif.c exit_2 sends its own process the signal with
    ERTS_XSIG_FLG_NO_IGN_NORMAL: a caller not trapping exits ends, reason
    normal (another process ignores a normal exit signal)."""
    t, report = vm.spawn_collector(), vm.spawn_collector()
    p = vm.spawn(exit_self_normal, report)
    vm.trace(p, True, ["procs"], tracer=t)
    vm.run()
    assert vm.messages(report) == []
    assert vm.messages(t) == [(T, p, A.exit, A.normal)]
    check_counts(vm)


async def child_exits_bye(proc):
    await proc.receive(timeout=20)
    await proc.exit(A.bye)


async def spawn_linked_trapping(proc):
    await proc.process_flag(A.trap_exit, True)
    child = await proc.spawn_link(child_exits_bye)
    await proc.receive()
    return child


def test_spawn_link_passes_set_on_link_on(vm):
    """erl_create_process, SPO_LINK: a parent traced set_on_link gives its
    flags and tracer to the child it spawns linked (the child was untraced)."""
    t = vm.spawn_collector()
    p = vm.spawn(spawn_linked_trapping)
    vm.trace(p, True, ["procs", "set_on_link"], tracer=t)
    vm.run()
    msgs = vm.messages(t)
    [child] = [m[3] for m in by_tracee(msgs, p) if m[2] == A.spawn]
    assert by_tracee(msgs, child) == [(T, child, A.exit, A.bye)]
    check_counts(vm)


async def child_sends(proc, to):
    await proc.send(to, A.from_child)


async def spawner_of_two(proc, to):
    await proc.spawn(child_sends, to)
    await proc.spawn(child_sends, to)


def test_inherited_flags_are_added_to_the_default_ones(vm):
    """erl_create_process ORs the parent's flags into the child's default
    tracing (trace(new, ...)); with set_on_spawn and set_on_first_spawn both
    set, the first child clears both from the parent and itself."""
    t, sink = vm.spawn_collector(), vm.spawn_collector()
    p = vm.spawn(spawner_of_two, sink)
    vm.trace("new", True, ["send"], tracer=t)
    vm.trace(p, True, ["procs", "set_on_spawn", "set_on_first_spawn"], tracer=t)
    vm.run()
    msgs = vm.messages(t)
    first, second = [m[3] for m in by_tracee(msgs, p) if m[2] == A.spawn]
    # the first child: procs from p and send from the default tracing
    assert by_tracee(msgs, first) == [
        (T, first, A.send, A.from_child, sink),
        (T, first, A.exit, A.normal),
    ]
    # the second: p lost both flags, so only the default tracing's send
    assert by_tracee(msgs, second) == [(T, second, A.send, A.from_child, sink)]
    vm.trace("new", False, ["send"], tracer=t)
    check_counts(vm)


async def kills_then_dies(proc):
    b = await proc.receive()
    await proc.exit(b, A.kill)  # (the kill and the link's exit signal: one sender, in order)
    await proc.exit(A.foo)


async def trapper_linked(proc, report):
    await proc.process_flag(A.trap_exit, True)
    a = await proc.spawn_link(kills_then_dies)
    await proc.send(report, a)
    await proc.receive(match=lambda m: False)


def test_an_exiting_process_gets_no_exit_signal_and_no_getting_unlinked(vm):
    """doit_exit_link looks the linked process up with erts_pid2proc, which
    finds no exiting one: B, killed already, is not traced getting_unlinked
    (nor sent an 'EXIT' message) when A, linked to it, dies."""
    t, report = vm.spawn_collector(), vm.spawn_collector()
    b = vm.spawn(trapper_linked, report)
    vm.run()
    [a] = vm.messages(report)
    vm.trace(b, True, ["procs", "receive"], tracer=t)
    vm.spawn(_sender, a, b)
    vm.run()
    assert by_tracee(vm.messages(t), b) == [(T, b, A.exit, A.killed)]
    check_counts(vm)


async def _sender(proc, to, msg):
    await proc.send(to, msg)


async def idles(proc):
    await proc.receive()


async def kills_then_registers(proc, victim, report):
    await proc.exit(victim, A.kill)
    try:
        await proc.register(A.foo, victim)
        await proc.send(report, A.registered)
    except Error as e:
        await proc.send(report, e.reason)


def test_a_process_sent_kill_cannot_be_registered(vm):
    """register.c erts_register_name finds another process with erts_pid2proc,
    which finds no exiting one: badarg and no register trace (OTP 25
    registers it; both modes now do as 17.x)."""
    t, report = vm.spawn_collector(), vm.spawn_collector()
    victim = vm.spawn(idles, scheduler=1) if vm.smp else vm.spawn(idles)
    vm.run()
    vm.trace(victim, True, ["procs"], tracer=t)
    vm.spawn(kills_then_registers, victim, report, **({"scheduler": 1} if vm.smp else {}))
    vm.run()
    assert vm.messages(report) == [A.badarg]
    assert by_tracee(vm.messages(t), victim) == [(T, victim, A.exit, A.killed)]
    assert vm.whereis("foo") == A.undefined
    check_counts(vm)
