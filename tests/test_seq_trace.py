"""seq_trace: tokens, serials and lastcnt (``seq_trace_update_send``), the
``seq_trace_output_generic`` messages, and the ``{'EXIT', From, Reason}``
wrapping, in both modes."""

from __future__ import annotations

from helpers import assert_increasing, check_counts

from smp.core.terms import A

SEND, RECV, PRINT, TSF = 1, 2, 4, 8
ST = A.seq_trace


async def first(proc, to, report, timestamp):
    await proc.seq_trace(A.label, 7)
    await proc.seq_trace(A.send, True)
    await proc.seq_trace(A["receive"], True)
    if timestamp:
        await proc.seq_trace(A.timestamp, True)
    await proc.send(report, (A.a, await proc.get_token()))
    await proc.send(to, A.one)


async def middle(proc, to, report):
    await proc.receive()
    await proc.send(report, (A.b, await proc.get_token()))
    await proc.send(to, A.two)


async def last(proc, report):
    await proc.receive()
    await proc.send(report, (A.c, await proc.get_token()))


def _chain(vm, timestamp=False):
    report = vm.spawn_collector()
    st = vm.spawn_collector()
    assert vm.set_system_seq_tracer(st) == A.false
    c = vm.spawn(last, report)
    b = vm.spawn(middle, c, report)
    a = vm.spawn(first, b, report, timestamp)
    vm.run()
    return a, b, c, st, report


def test_seq_trace_chain_serials(vm):
    a, b, c, st, report = _chain(vm)
    msgs = vm.messages(st)
    # sends to the report collector are traced as well: filter the chain
    chain = [m for m in msgs if m[2][3] in (b, c)]
    assert chain == [
        (ST, 7, (A.send, (0, 2), a, b, A.one)),
        (ST, 7, (A["receive"], (0, 2), a, b, A.one)),
        (ST, 7, (A.send, (2, 4), b, c, A.two)),
        (ST, 7, (A["receive"], (2, 4), b, c, A.two)),
    ]
    tokens = dict(vm.messages(report))
    # {Flags, Label, Serial, From, Lastcnt}
    assert tokens[A.a] == (SEND | RECV, 7, 0, a, 0)
    assert tokens[A.b] == (SEND | RECV, 7, 2, a, 0)
    assert tokens[A.c] == (SEND | RECV, 7, 4, b, 2)
    s = check_counts(vm)
    assert s.made_by_type["SEQTRACE"] == len(msgs)


def test_seq_trace_report_sends(vm):
    a, b, c, st, report = _chain(vm)
    # the collector's receives are traced too (the messages carry the token)
    rep = [m for m in vm.messages(st) if m[2][3] == report and m[2][0] is A.send]
    assert rep == [
        (ST, 7, (A.send, (0, 1), a, report, (A.a, (SEND | RECV, 7, 0, a, 0)))),
        (ST, 7, (A.send, (2, 3), b, report, (A.b, (SEND | RECV, 7, 2, a, 0)))),
        (ST, 7, (A.send, (4, 5), c, report, (A.c, (SEND | RECV, 7, 4, b, 2)))),
    ]
    check_counts(vm)


def test_seq_trace_timestamps(vm):
    a, b, c, st, report = _chain(vm, timestamp=True)
    msgs = vm.messages(st)
    assert all(len(m) == 4 for m in msgs)
    chain = [m for m in msgs if m[2][3] in (b, c)]
    assert [m[:3] for m in chain] == [
        (ST, 7, (A.send, (0, 2), a, b, A.one)),
        (ST, 7, (A["receive"], (0, 2), a, b, A.one)),
        (ST, 7, (A.send, (2, 4), b, c, A.two)),
        (ST, 7, (A["receive"], (2, 4), b, c, A.two)),
    ]
    # the chain is causal, so its timestamps are ordered even across schedulers
    assert_increasing([m[3] for m in chain])
    check_counts(vm)


async def printer(proc, report):
    assert await proc.seq_trace_print(A.nothing) == A.false  # no token
    await proc.seq_trace(A.label, 3)
    await proc.seq_trace(A.print, True)
    assert await proc.seq_trace_print(4, A.other_label) == A.false
    assert await proc.seq_trace_print(3, A.hello) == A.true
    assert await proc.seq_trace_print(A.again) == A.true
    await proc.send(report, await proc.get_token())


def test_seq_trace_print(vm):
    st = vm.spawn_collector()
    report = vm.spawn_collector()
    vm.set_system_seq_tracer(st)
    p = vm.spawn(printer, report)
    vm.run()
    assert vm.messages(st) == [
        (ST, 3, (A.print, (0, 1), p, [], A.hello)),
        (ST, 3, (A.print, (0, 2), p, [], A.again)),
    ]
    # each print advances the serial as a send does (seq_trace_update_send)
    assert vm.messages(report) == [(PRINT, 3, 2, p, 0)]
    assert not vm.is_alive(p)  # every assert in the body held
    check_counts(vm)


async def serial_setter(proc, report):
    # no token yet: a new one {0, 0, 0, Self, 0} is made first
    assert await proc.seq_trace(A.serial, (5, 9)) == (0, 0)
    await proc.seq_trace(A.send, True)
    assert await proc.seq_trace(A.serial, (5, 9)) == (5, 9)
    await proc.send(report, A.x)
    await proc.send(report, await proc.get_token())


def test_seq_trace_serial(vm):
    st = vm.spawn_collector()
    report = vm.spawn_collector()
    vm.set_system_seq_tracer(st)
    p = vm.spawn(serial_setter, report)
    vm.run()
    # serial {P, C}: lastcnt P, clock C; a send makes serial C+1
    assert vm.messages(st)[0] == (ST, 0, (A.send, (5, 10), p, report, A.x))
    assert vm.messages(report) == [A.x, (SEND, 0, 10, p, 5)]
    assert not vm.is_alive(p)
    check_counts(vm)


async def token_dies(proc, other):
    await proc.link(other)
    await proc.seq_trace(A.label, 1)
    await proc.seq_trace(A.send, True)
    await proc.exit(A.boom)


async def traps(proc):
    await proc.process_flag(A.trap_exit, True)
    await proc.receive()


def test_seq_trace_exit_wrapping(vm):
    st = vm.spawn_collector()
    vm.set_system_seq_tracer(st)
    other = vm.spawn(traps)
    vm.run()
    p = vm.spawn(token_dies, other)
    vm.run()
    assert vm.messages(st) == [(ST, 1, (A.send, (0, 1), p, other, (A.EXIT, p, A.boom)))]
    info = vm.process_info(other)
    assert info is None  # it took the {'EXIT', P, boom} and finished
    check_counts(vm)


def test_seq_tracer_gets_nothing_about_itself(vm):
    st = vm.spawn_collector()
    vm.set_system_seq_tracer(st)
    report = vm.spawn_collector()
    vm.spawn(first, st, report, False)  # sends one to the seq tracer itself
    vm.run()
    msgs = vm.messages(st)
    # the message to the tracer is there; no seq_trace message about it
    assert A.one in msgs
    assert not [m for m in msgs if type(m) is tuple and m[0] is ST and m[2][3] == st]
    check_counts(vm)


def test_set_token_roundtrip(vm):
    report = vm.spawn_collector()
    vm.spawn(token_setter, report)
    vm.run()
    [old1, old2, now] = vm.messages(report)
    assert old1 == []
    assert old2 == (SEND, 9, 1, old2[3], 0)
    assert now == []
    check_counts(vm)


async def token_setter(proc, report):
    old1 = await proc.set_token((SEND, 9, 1, proc.pid, 0))
    old2 = await proc.set_token([])
    await proc.send(report, old1)
    await proc.send(report, old2)
    await proc.send(report, await proc.get_token())


async def token_maker(proc, report):
    await proc.send(report, await proc.seq_trace(A.send, False))  # makes a token
    await proc.send(report, await proc.get_token())
    await proc.set_token([])
    await proc.send(report, await proc.seq_trace(A.label, 5))  # old label of a new token
    await proc.send(report, await proc.seq_trace(A.label, 6))
    await proc.send(report, await proc.get_token())


def test_seq_trace_new_token_values(vm):
    """``new_seq_trace_token`` runs before the old value is read."""
    report = vm.spawn_collector()
    p = vm.spawn(token_maker, report)
    vm.run()
    # every send with a token advances the clock, even with no flag set
    assert vm.messages(report) == [A.false, (0, 0, 1, p, 0), 0, 5, (0, 6, 4, p, 0)]
    check_counts(vm)


async def bouncer(proc, rounds):
    for _ in range(rounds):
        msg = await proc.receive()
        await proc.send(msg[1], (A.pong, proc.pid))


async def starter(proc, peer, rounds):
    for _ in range(rounds):
        await proc.send(peer, (A.ping, proc.pid))
        await proc.receive()


def test_cross_scheduler_trace_order_is_causal(smp2):
    """A send is queued before the receive it causes, whichever scheduler
    makes each (the seed enqueues at make time): on a tracer that sees both
    ends, with timestamps, every receive comes after its send."""
    rounds = 200
    t = smp2.spawn_collector(scheduler=1)
    b = smp2.spawn(bouncer, rounds, scheduler=2)
    a = smp2.spawn(starter, b, rounds, scheduler=1)
    for p in (a, b):
        smp2.trace(p, True, ["send", "receive", "timestamp"], tracer=t)
    smp2.run(timeout=60)
    msgs = smp2.messages(t)
    assert len(msgs) == 4 * rounds
    stamps = [m[-1] for m in msgs]
    assert stamps == sorted(stamps)
    # and the tracer got them in causal order: a send, then its receive
    kinds = [(m[1], m[2]) for m in msgs]
    for i in range(rounds):
        assert kinds[4 * i : 4 * i + 4] == [
            (a, A.send),
            (b, A["receive"]),
            (b, A.send),
            (a, A["receive"]),
        ], (i, kinds[4 * i : 4 * i + 4])
