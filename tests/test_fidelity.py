"""Events a user sees constantly, each as 17.x builds it (bif.c ``do_send``,
erl_process.c ``doit_exit_link`` / ``erts_continue_exit_process`` /
``schedule``, register.c, beam_bp.c, erl_bif_trace.c ``trace_3``,
erl_db_util.c's match-spec functions, erl_gc.c), in both modes."""

from __future__ import annotations

import pytest
from helpers import check_counts, mfa

import smp
from smp import Error
from smp.core.terms import A, ImproperList

T = A.trace
ST = A.seq_trace
SEND, RECV = 1, 2


# ---------------------------------------------------------------- bodies
async def waiter(proc):
    await proc.receive()


async def send_to(proc, to, msg):
    await proc.send(to, msg)


async def send_to_then_report(proc, to, msg, report):
    try:
        await proc.send(to, msg)
        await proc.send(report, A.ok)
    except Error as e:
        await proc.send(report, (A.error, e.reason))


async def register_then_wait(proc, name):
    await proc.register(name, proc.pid)
    await proc.receive()


async def register_other(proc, name, pid, report):
    await proc.register(name, pid)
    await proc.send(report, A.registered)


async def linker(proc, other, trap):
    if trap:
        await proc.process_flag(A.trap_exit, True)
    await proc.link(other)
    await proc.receive()


async def dies_after_message(proc, reason):
    await proc.receive()
    await proc.exit(reason)


async def noop(proc):
    return None


async def seq_send_to_dead(proc, dead, report):
    await proc.seq_trace(A.label, 3)
    await proc.seq_trace(A.send, True)
    before = await proc.get_token()
    await proc.send(dead, A.lost)
    await proc.send(report, (before, await proc.get_token()))


async def token_after_reset(proc, peer, report):
    await proc.seq_trace(A.label, 1)
    await proc.seq_trace(A.send, True)
    await proc.send(peer, A.hello)  # serial 1, lastcnt 0
    await proc.seq_trace(A.serial, (5, 9))  # lastcnt 5, clock 9
    await proc.set_token([])
    await proc.seq_trace(A.label, 2)
    await proc.send(report, await proc.get_token())


async def port_reader(proc, report):
    port = await proc.open_port("echo")
    await proc.seq_trace(A.label, 4)
    before = await proc.get_token()
    await proc.port_command(port, b"hi")
    msg = await proc.receive()
    await proc.send(report, (before, msg, await proc.get_token()))


async def sensitive_caller(proc):
    await proc.process_flag(A.sensitive, True)
    await proc.call("m", "double", [2])


async def double(proc, x):
    return 2 * x


async def caller(proc, x):
    await proc.call("m", "double", [x])


async def seq_caller(proc, x):
    await proc.seq_trace(A.label, 9)
    await proc.call("m", "double", [x])


async def call_then_send(proc, x, to):
    await proc.call("m", "double", [x])
    await proc.send(to, A.after)


async def tracer_of_self(proc, report):
    try:
        await proc.trace(proc.pid, True, [A.send])
        await proc.send(report, A.ok)
    except Error as e:
        await proc.send(report, (A.error, e.reason))


async def allocator(proc, rounds):
    for i in range(rounds):
        await proc.allocate(30000 * (i + 1))
        await proc.garbage_collect()


async def opens_port(proc):
    await proc.open_port("echo")
    await proc.receive()


# ---------------------------------------------------------------- sends (1-4)
def test_send_to_name_traced_as_written(vm):
    t = vm.spawn_collector()
    sink = vm.spawn(waiter)
    vm.register("sink", sink)
    p = vm.spawn(send_to, A.sink, A.hi)
    q = vm.spawn(send_to, (A.sink, A["nonode@nohost"]), A.ho)
    vm.trace(p, True, ["send"], tracer=t)
    vm.trace(q, True, ["send"], tracer=t)
    vm.run()
    msgs = vm.messages(t)
    assert [m for m in msgs if m[1] == p] == [(T, p, A.send, A.hi, A.sink)]
    assert [m for m in msgs if m[1] == q] == [(T, q, A.send, A.ho, (A.sink, A["nonode@nohost"]))]
    check_counts(vm)


def test_send_to_unregistered_name_traced_then_badarg(vm):
    t = vm.spawn_collector()
    report = vm.spawn_collector()
    p = vm.spawn(send_to_then_report, A.nobody, A.hi, report)
    q = vm.spawn(send_to_then_report, (A.nobody, A["nonode@nohost"]), A.ho, report)
    vm.trace(p, True, ["send"], tracer=t)
    vm.trace(q, True, ["send"], tracer=t)
    vm.run()
    msgs = vm.messages(t)
    assert (T, p, A.send, A.hi, A.nobody) in msgs
    assert (T, q, A.send, A.ho, (A.nobody, A["nonode@nohost"])) in msgs
    got = vm.messages(report)
    assert sorted(map(repr, got)) == sorted(map(repr, [(A.error, A.badarg), A.ok]))
    check_counts(vm)


def test_seq_traced_send_to_dead_pid_makes_nothing(vm):
    st = vm.spawn_collector()
    report = vm.spawn_collector()
    dead = vm.spawn(noop)
    vm.run()
    vm.set_system_seq_tracer(st)
    vm.spawn(seq_send_to_dead, dead, report)
    vm.run()
    ((before, after),) = vm.messages(report)
    assert before == after  # the serial did not move
    assert [m for m in vm.messages(st) if m[2][4] == dead] == []
    check_counts(vm)


def test_malformed_mfa_and_flags_are_badarg(vm):
    with pytest.raises(smp.BadArg):
        vm.trace_pattern(A.send, True)
    with pytest.raises(smp.BadArg):
        vm.trace_pattern(("m", "f"), True)
    with pytest.raises(smp.BadArg):
        vm.trace_pattern(("m", "f", 1), True, A["local"])
    t = vm.spawn_collector()
    p = vm.spawn(waiter)
    with pytest.raises(smp.BadArg):
        vm.trace(p, True, "send", tracer=t)
    with pytest.raises(smp.BadArg):
        vm.trace(p, True, ImproperList([A.send], A.receive), tracer=t)
    vm.run(timeout=5)


# ---------------------------------------------------------------- process events (5-8)
@pytest.mark.parametrize("trap", [False, True], ids=["no_trap", "trap_exit"])
def test_getting_unlinked_on_survivor(vm, trap):
    t = vm.spawn_collector()
    d = vm.spawn(dies_after_message, A.normal)
    s = vm.spawn(linker, d, trap)
    vm.trace(s, True, ["procs"], tracer=t)
    vm.run()
    vm.spawn(send_to, d, A.go)
    vm.run()
    msgs = vm.messages(t)
    assert msgs[0] == (T, s, A.link, d)
    assert (T, s, A.getting_unlinked, d) in msgs
    check_counts(vm)


async def links_then_dies(proc, others, unlinked):
    for o in others:
        await proc.link(o)
    for o in unlinked:
        await proc.unlink(o)
    await proc.receive()
    await proc.exit(A.normal)


@pytest.mark.parametrize(
    "unlink, expected",
    [
        # seven links made in pid order build the perfect tree 4(2(1,3),6(5,7))
        ((), [1, 3, 2, 5, 7, 6, 4]),
        # unlinking the root (4 sees it first) puts its predecessor in its
        # place: 3(2(1,-),6(5,7))
        ((4,), [4, 1, 2, 5, 7, 6, 3]),
        # a leaf out: 4(2(1,3),6(-,7)), no rotation
        ((5,), [5, 1, 3, 2, 7, 6, 4]),
    ],
    ids=["seven", "root_unlinked", "leaf_unlinked"],
)
def test_exit_signals_go_to_the_links_in_the_order_of_the_link_tree(vm, unlink, expected):
    """A process that exits signals its links in the order ``erts_sweep_links``
    visits its link tree (erl_monitors.c: an AVL tree ordered by the pids,
    swept in post-order), not in the pids' order: seven survivors it linked
    to in pid order (survivor 1 the least), each traced for procs, see
    ``getting_unlinked`` in the tree's post-order, after the unlinks that
    reshaped it.  All on one scheduler, so the events are made in that order."""
    t = vm.spawn_collector()
    survivors = sorted(vm.spawn(waiter, scheduler=1) for _ in range(7))
    for s in survivors:
        vm.trace(s, True, ["procs"], tracer=t)
    gone = [survivors[i - 1] for i in unlink]
    d = vm.spawn(links_then_dies, survivors, gone, scheduler=1)
    vm.run()
    vm.spawn(send_to, d, A.go, scheduler=1)
    vm.run()
    unlinked = [m[1] for m in vm.messages(t) if m[2] is A.getting_unlinked]
    assert [survivors.index(s) + 1 for s in unlinked] == expected
    check_counts(vm)


def test_registered_exit_then_unregister(vm):
    t = vm.spawn_collector()
    p = vm.spawn(dies_after_message, A.normal)
    vm.trace(p, True, ["procs"], tracer=t)
    vm.register("named", p)
    vm.run()
    vm.spawn(send_to, p, A.go)
    vm.run()
    assert vm.messages(t) == [
        (T, p, A.register, A.named),
        (T, p, A.exit, A.normal),
        (T, p, A.unregister, A.named),
    ]
    assert vm.whereis("named") == A.undefined
    check_counts(vm)


@pytest.mark.parametrize("where", ["same", "other"])
def test_register_traced_on_registered_process(vm, where):
    t = vm.spawn_collector()
    report = vm.spawn_collector()
    target = vm.spawn(waiter, scheduler=1)
    vm.trace(target, True, ["procs"], tracer=t)
    sched = 1 if where == "same" or vm.nsched == 1 else 2
    vm.spawn(register_other, A.reg1, target, report, scheduler=sched)
    vm.run()
    assert vm.messages(report) == [A.registered]
    assert vm.messages(t) == [(T, target, A.register, A.reg1)]
    check_counts(vm)


async def kill_then_register(proc, name, pid, report):
    await proc.exit(pid, A.kill)
    try:
        await proc.register(name, pid)
        await proc.send(report, A.registered)
    except Error as e:
        await proc.send(report, e.reason)


@pytest.mark.parametrize("where", ["same", "other"])
def test_register_of_a_process_just_sent_kill_is_badarg(vm, where):
    """register.c erts_register_name looks another process up with
    erts_pid2proc, which finds no exiting one, and 17.x's exit/2 marks its
    target before it returns: badarg, nothing traced, whether the victim
    is on the caller's scheduler or another (its exit signal is taken
    first)."""
    t = vm.spawn_collector()
    report = vm.spawn_collector()
    target = vm.spawn(waiter, scheduler=1)
    vm.trace(target, True, ["procs"], tracer=t)
    sched = 1 if where == "same" or vm.nsched == 1 else 2
    vm.spawn(kill_then_register, A.reg1, target, report, scheduler=sched)
    vm.run()
    assert vm.messages(report) == [A.badarg]
    assert vm.messages(t) == [(T, target, A.exit, A.killed)]
    assert vm.whereis("reg1") == A.undefined
    check_counts(vm)


def test_normal_end_gives_out_exited_only(vm):
    t = vm.spawn_collector()
    p = vm.spawn(noop)
    vm.trace(p, True, ["running", "exiting"], tracer=t)
    vm.run()
    msgs = vm.messages(t)
    assert [m[2] for m in msgs] == [A["in"], A.out_exited]


def test_killed_while_waiting_gives_in_exiting_out_exited(vm):
    t = vm.spawn_collector()
    p = vm.spawn(waiter)
    vm.run()
    vm.trace(p, True, ["exiting", "procs"], tracer=t)
    vm.exit(p, A.kill)
    vm.run()
    assert vm.messages(t) == [
        (T, p, A.in_exiting, 0),
        (T, p, A.exit, A.killed),
        (T, p, A.out_exited, 0),
    ]


def test_sensitive_process_makes_no_call_trace(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(sensitive_caller)
    q = vm.spawn(caller, 3)
    vm.trace(p, True, ["call"], tracer=t)
    vm.trace(q, True, ["call"], tracer=t)
    vm.trace_pattern(("m", "double", 1), True, ["local"])
    vm.run()
    assert vm.messages(t) == [(T, q, A.call, (A.m, A.double, [3]))]
    check_counts(vm)


# ---------------------------------------------------------------- trace/3 (9-11, 13, 14)
def test_process_cannot_be_its_own_tracer(vm):
    p = vm.spawn(waiter)
    with pytest.raises(smp.BadArg):
        vm.trace(p, True, ["send"], tracer=p)
    report = vm.spawn_collector()
    vm.spawn(tracer_of_self, report)
    vm.run()
    assert vm.messages(report) == [(A.error, A.badarg)]


def test_second_tracer_is_badarg_and_logged(vm):
    log = vm.spawn_collector()
    vm.register("error_logger", log)
    t1 = vm.spawn_collector()
    t2 = vm.spawn_collector()
    p = vm.spawn(waiter)
    vm.trace(p, True, ["send"], tracer=t1)
    with pytest.raises(smp.BadArg):
        vm.trace(p, True, ["receive"], tracer=t2)
    vm.run()
    text = [ord(c) for c in "** can only have one tracer per process\n"]
    assert vm.messages(log) == [
        (A.notify, (A.error, A.noproc, (A.emulator, [ord(c) for c in "~s~n"], [text])))
    ]
    assert vm.trace_info(p, "tracer") == (A.tracer, t1)
    check_counts(vm)


def test_second_tracer_without_error_logger_is_dropped(vm):
    t1 = vm.spawn_collector()
    t2 = vm.spawn_collector()
    p = vm.spawn(waiter)
    vm.trace(p, True, ["send"], tracer=t1)
    with pytest.raises(smp.BadArg):
        vm.trace(p, True, ["receive"], tracer=t2)
    vm.run()
    s = check_counts(vm)
    assert s.dropped_by_reason.get("no_error_logger") == {"ERRLGR": 1}, s


def test_trace_existing_counts_processes_only(vm):
    t = vm.spawn_collector()
    vm.spawn(opens_port)
    vm.spawn(waiter)
    vm.run()
    # the collector t itself is skipped; two processes, one port
    assert vm.trace(A.existing, True, ["send", "ports"], tracer=t) == 2


def test_trace_all_false_skips_tracer_and_other_tracees(vm):
    t1 = vm.spawn_collector()
    t2 = vm.spawn_collector()
    a = vm.spawn(waiter)
    b = vm.spawn(waiter)
    vm.trace(a, True, ["send"], tracer=t1)
    vm.trace(b, True, ["send"], tracer=t2)
    vm.trace(t1, True, ["send"], tracer=t2)
    # turning 'send' off for every process that t1 may trace: b and t1 itself
    # (traced by t2) are skipped and keep their flags
    n = vm.trace(A.all, False, ["send"], tracer=t1)
    assert vm.trace_info(a, "flags") == (A.flags, [])
    assert vm.trace_info(b, "flags") == (A.flags, [A.send])
    assert vm.trace_info(t1, "flags") == (A.flags, [A.send])
    assert n == 2  # a and t2 (untraced) matched; t1 and b skipped
    vm.run(timeout=5)


def test_closed_tracer_port_is_invalid_at_once(vm, tmp_path):
    port = vm.open_trace_port("file", str(tmp_path / "t.trc"))
    t = vm.spawn_collector()
    p = vm.spawn(waiter)
    vm.trace(p, True, ["send"], tracer=port)
    assert vm.trace_info(p, "tracer") == (A.tracer, port)
    vm.close_trace_port(port)
    assert vm.trace_info(p, "tracer") == (A.tracer, [])
    assert vm.trace(p, True, ["send"], tracer=t) == 1
    assert vm.trace_info(p, "tracer") == (A.tracer, t)
    vm.run(timeout=5)


# ---------------------------------------------------------------- seq_trace (15-16)
def test_new_token_takes_the_process_lastcnt(vm):
    report = vm.spawn_collector()
    peer = vm.spawn(waiter)
    vm.spawn(token_after_reset, peer, report)
    vm.run()
    (tok,) = vm.messages(report)
    assert tok[:3] == (0, 2, 0) and tok[4] == 5


def test_port_message_leaves_token_unchanged(vm):
    report = vm.spawn_collector()
    vm.spawn(port_reader, report)
    vm.run()
    ((before, msg, after),) = vm.messages(report)
    assert msg[1] == (A.data, b"hi")
    assert before != [] and after == before


# ---------------------------------------------------------------- match specs (17-18)
def test_match_spec_caller_and_self(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(caller, 21)
    vm.trace(p, True, ["call"], tracer=t)
    vm.trace_pattern(("m", "double", 1), "c")
    vm.run()
    assert vm.messages(t) == [(T, p, A.call, (A.m, A.double, [21]), mfa(caller, 1))]
    vm.trace_pattern(("m", "double", 1), [(A["_"], [], [(A.message, ((A.me, (A["self"],)),))])])
    q = vm.spawn(caller, 2)
    vm.trace(q, True, ["call"], tracer=t)
    vm.run()
    assert vm.messages(t)[-1] == (T, q, A.call, (A.m, A.double, [2]), (A.me, q))


def test_match_spec_text_and_shortcuts(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(caller, 4)
    vm.trace(p, True, ["call"], tracer=t)
    assert vm.trace_pattern(("m", "double", 1), "[{'_',[],[{return_trace}]}]") == 1
    vm.run()
    assert vm.messages(t) == [
        (T, p, A.call, (A.m, A.double, [4])),
        (T, p, A.return_from, (A.m, A.double, 1), 8),
    ]
    assert vm.trace_pattern(("m", "double", 1), "cx") == 1
    with pytest.raises(smp.BadArg):
        vm.trace_pattern(("m", "double", 1), "[{'_',[],[{no_such_fun}]}]")


def test_match_spec_guards_and_seq_token(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(caller, 7)
    q = vm.spawn(seq_caller, 30)
    vm.trace(p, True, ["call"], tracer=t)
    vm.trace(q, True, ["call"], tracer=t)
    ms = [
        (
            [A["$1"]],
            [
                (A["andalso"], (A.is_integer, A["$1"]), (A["<"], (A["*"], A["$1"], 2), 100)),
                (A["=="], (A.element, 1, ((A.x, A["$1"]),)), A.x),
            ],
            [(A.message, ((A.seq, (A.is_seq_trace,), (A.abs, (A["-"], 0, A["$1"]))),))],
        )
    ]
    vm.trace_pattern(("m", "double", 1), ms)
    vm.run()
    msgs = sorted(vm.messages(t), key=lambda m: m[3][2])
    assert msgs == [
        (T, p, A.call, (A.m, A.double, [7]), (A.seq, A.false, 7)),
        (T, q, A.call, (A.m, A.double, [30]), (A.seq, A.true, 30)),
    ]


def test_match_spec_enable_trace(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    sink = vm.spawn(waiter)
    p = vm.spawn(call_then_send, 1, sink)
    vm.trace(p, True, ["call"], tracer=t)
    vm.trace_pattern(("m", "double", 1), [(A["_"], [], [(A.enable_trace, A.send)])])
    vm.run()
    assert vm.messages(t) == [(T, p, A.call, (A.m, A.double, [1])), (T, p, A.send, A.after, sink)]


_DISPLAY_SCRIPT = """
import sys
import smp
from smp.core.terms import A
from test_fidelity import caller, double
with smp.Emulator(mode=sys.argv[1], schedulers=int(sys.argv[2])) as vm:
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    p = vm.spawn(caller, 5)
    vm.trace(p, True, ["call"], tracer=t)
    vm.trace_pattern(("m", "double", 1), [([A["$1"]], [], [(A.display, ((A.arg, A["$1"]),))])])
    vm.run()
    assert len(vm.messages(t)) == 1
"""


@pytest.mark.parametrize("mode,n", [("nonsmp", 1), ("smp", 2)])
def test_match_spec_display_prints(tmp_path, mode, n):
    """``{display, X}`` prints X on the emulator's standard output (erts_printf)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "display.py"
    script.write_text(_DISPLAY_SCRIPT)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]),
    )
    r = subprocess.run(
        [sys.executable, str(script), mode, str(n)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "{arg,5}\n"


def test_match_spec_errors_name_the_part():
    from smp.core.matchspec import compile_match_spec

    with pytest.raises(smp.BadArg, match="foo/1 is not a match-spec function"):
        compile_match_spec([(A["_"], [(A.foo, 1)], [])])
    with pytest.raises(smp.BadArg, match="message may only be used in the body"):
        compile_match_spec([(A["_"], [(A.message, 1)], [])])
    with pytest.raises(smp.BadArg, match=r"\$2 is not bound"):
        compile_match_spec([([A["$1"]], [], [(A.message, A["$2"])])])


# ---------------------------------------------------------------- system monitor (19)
def test_long_gc_only_above_the_limit(vm):
    mon = vm.spawn_collector()
    vm.system_monitor(mon, [("long_gc", 1)])
    vm.spawn(allocator, 3)
    vm.run()
    costs = [dict(m[3])[A.timeout] for m in vm.messages(mon)]
    assert costs and all(c > 1 for c in costs)
    top = max(costs)
    mon2 = vm.spawn_collector()
    vm.system_monitor(mon2, [("long_gc", top)])
    vm.spawn(allocator, 3)
    vm.run()
    assert [dict(m[3])[A.timeout] for m in vm.messages(mon2)] == []
    mon3 = vm.spawn_collector()
    vm.system_monitor(mon3, [("long_gc", top - 1)])
    vm.spawn(allocator, 3)
    vm.run()
    assert [dict(m[3])[A.timeout] for m in vm.messages(mon3)] == [top] * costs.count(top)


# ---------------------------------------------------------------- ports (12)
async def port_tracer_owner(proc, report):
    port = await proc.open_port("echo")
    await proc.send(report, port)
    while True:
        msg = await proc.receive()
        await proc.send(report, msg)


async def sends_two(proc, to):
    await proc.send(to, A.one)
    await proc.send(to, A.two)


def test_process_port_as_tracer(vm):
    """``trace/3`` takes a port a process opened; the trace messages reach its
    driver as external-format bytes (the echo driver sends them back to the
    owner).  In smp the tracee runs on the other scheduler."""
    from smp.wire.etf import decode

    report = vm.spawn_collector(scheduler=1)
    vm.spawn(port_tracer_owner, report, scheduler=1)
    vm.run()
    (port,) = vm.messages(report)
    sink = vm.spawn(waiter)
    p = vm.spawn(sends_two, sink, scheduler=vm.nsched)
    assert vm.trace(p, True, ["send"], tracer=port) == 1
    assert vm.trace_info(p, "tracer") == (A.tracer, port)
    vm.run()
    got = vm.messages(report)[1:]
    assert [m[0] for m in got] == [port, port]
    assert [decode(m[1][1]) for m in got] == [
        (T, p, A.send, A.one, sink),
        (T, p, A.send, A.two, sink),
    ]
    check_counts(vm)


# ---------------------------------------------------------------- ports (20)
async def owns_busy_port(proc, report):
    port = await proc.open_port("busy", busy_ms=200)
    await proc.send(report, port)
    while True:  # keeps the port (and its echoes)
        await proc.receive()


async def commands_port(proc, port, report):
    await proc.port_command(port, b"a")  # the port turns busy for 200 ms
    await proc.send(report, A.first)
    await proc.port_command(port, b"b")  # busy: waits, busy_port fires
    await proc.send(report, A.second)


@pytest.mark.parametrize("where", ["same", "other"])
def test_port_command_by_any_process(vm, where):
    mon = vm.spawn_collector()
    vm.system_monitor(mon, ["busy_port"])
    report = vm.spawn_collector(scheduler=1)
    owner = vm.spawn(owns_busy_port, report, scheduler=1)
    vm.run()
    (port,) = vm.messages(report)
    sched = 1 if where == "same" or vm.nsched == 1 else 2
    c = vm.spawn(commands_port, port, report, scheduler=sched)
    vm.run()
    assert vm.messages(report)[1:] == [A.first, A.second]
    assert vm.messages(mon) == [(A.monitor, c, A.busy_port, port)]
    assert vm.process_info(owner)["message_queue_len"] == 0
    check_counts(vm)


async def call_then_send_peer(proc, x, peer):
    await proc.call("m", "double", [x])
    await proc.send(peer, A.go)


async def sends_after_go(proc, to):
    await proc.receive()
    await proc.send(to, A.done)


def test_match_spec_enable_trace_on_another_process(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    sink = vm.spawn(waiter)
    q = vm.spawn(sends_after_go, sink, scheduler=vm.nsched)
    p = vm.spawn(call_then_send_peer, 1, q, scheduler=1)
    vm.trace(p, True, ["call"], tracer=t)
    vm.trace(q, True, ["receive"], tracer=t)
    vm.trace_pattern(("m", "double", 1), [(A["_"], [], [(A.enable_trace, q, A.send)])])
    vm.run()
    assert (T, q, A.send, A.done, sink) in vm.messages(t)


async def sets_pattern_then_calls(proc, report):
    n = await proc.trace_pattern(("m", "double", 1), "[{['$1'],[{'>','$1',1}],[{return_trace}]}]")
    await proc.send(report, n)
    await proc.call("m", "double", [1])
    await proc.call("m", "double", [2])


def test_process_trace_pattern_with_text(vm):
    vm.define("m", "double", double)
    t = vm.spawn_collector()
    report = vm.spawn_collector()
    p = vm.spawn(sets_pattern_then_calls, report)
    vm.trace(p, True, ["call"], tracer=t)
    vm.run()
    assert vm.messages(report) == [1]
    assert vm.messages(t) == [
        (T, p, A.call, (A.m, A.double, [2])),
        (T, p, A.return_from, (A.m, A.double, 1), 4),
    ]


def test_maps_funs_and_bit_strings_cross_schedulers(vm):
    from smp.core.terms import BitString, ExportFun, Map

    msg = (Map({A.k: [1, 2.5]}), BitString(b"\xff\x80", 9), ExportFun(A.lists, A.map, 2))
    t = vm.spawn_collector()
    sink = vm.spawn_collector(scheduler=vm.nsched)
    p = vm.spawn(send_to, sink, msg, scheduler=1)
    vm.trace(p, True, ["send"], tracer=t)
    vm.run()
    assert vm.messages(sink) == [msg]
    assert vm.messages(t) == [(T, p, A.send, msg, sink)]
    check_counts(vm)


class NotATerm:
    """A Python object a workload might send by mistake."""


async def sends_not_a_term(proc, to):
    await proc.send(to, A.before)
    await proc.send(to, NotATerm())
    await proc.send(to, A.after)


def test_a_traced_non_term_is_dropped_alone(smp2):
    """smp: a trace message holding what is not a term is dropped at its
    scheduler and counted; the rest of the batch arrives and run() is quiet."""
    t = smp2.spawn_collector(scheduler=2)
    sink = smp2.spawn(waiter, scheduler=1)
    p = smp2.spawn(sends_not_a_term, sink, scheduler=1)
    smp2.trace(p, True, ["send"], tracer=t)
    smp2.run(timeout=20)
    assert smp2.messages(t) == [(T, p, A.send, A.before, sink), (T, p, A.send, A.after, sink)]
    s = check_counts(smp2)
    assert s.unsendable == 1, s
