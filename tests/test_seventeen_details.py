"""17.x details of the trace BIFs and the registry, each pinned in both modes
against the line of OTP 17.4 that decides it (``erl_bif_trace.c``,
``register.c``, ``io.c``)."""

from __future__ import annotations

import pytest
from helpers import check_counts

import smp
from smp import A, Error

T = A.trace


async def noop(proc):
    pass


async def double(proc, x):
    return 2 * x


async def reports(proc, report, fun, *args):
    try:
        r = await fun(proc, *args)
    except Error as e:
        r = (A.error, e.reason)
    await proc.send(report, r)


async def _seq_print(proc, label, msg):
    await proc.seq_trace(A.label, 1)
    return await proc.seq_trace_print(label, msg)


async def _trace_info(proc, what, item):
    return await proc.trace_info(what, item)


async def opens_registers_closes(proc, tracer, report):
    """Open a port, trace it with ``ports``, register it, close it, and say
    what ``whereis`` answers before and after."""
    port = await proc.open_port("echo")
    await proc.trace(port, True, [A.ports, (A.tracer, tracer)])
    await proc.register(A.myport, port)
    before = await proc.whereis(A.myport)
    await proc.port_close(port)
    await proc.send(report, (port, before, await proc.whereis(A.myport)))


async def opens_and_registers(proc, report):
    port = await proc.open_port("echo")
    await proc.register(A.theport, port)
    await proc.send(report, port)
    await proc.receive()


async def opens_and_waits(proc, report):
    await proc.send(report, await proc.open_port("echo"))
    await proc.receive()


# ------------------------------------------------------- 2. seq_trace:print/2
@pytest.mark.parametrize(
    "label",
    [A.x, 1, -(1 << 59), (1 << 59) - 1],
    ids=["atom", "small", "min-small", "max-small"],
)
def test_seq_trace_print_label_atom_or_small_is_taken(vm, label):
    report = vm.spawn_collector()
    vm.spawn(reports, report, _seq_print, label, A.hello)
    vm.run()
    # the token's label is 1: any other label answers false, no badarg
    assert vm.messages(report) == [A.true if label == 1 else A.false]


@pytest.mark.parametrize(
    "label",
    [(A.a, 1), [1], b"x", 1.0, 1 << 59, -(1 << 59) - 1],
    ids=["tuple", "list", "binary", "float", "big", "negative-big"],
)
def test_seq_trace_print_label_neither_atom_nor_small_is_badarg(vm, label):
    """erl_bif_trace.c seq_trace_print_2: ``if (!(is_atom(BIF_ARG_1) ||
    is_small(BIF_ARG_1))) BIF_ERROR(BIF_P, BADARG);`` before the token is
    looked at (OTP 21 accepts any label: a row of the differences table)."""
    report = vm.spawn_collector()
    vm.spawn(reports, report, _seq_print, label, A.hello)
    vm.run()
    assert vm.messages(report) == [(A.error, A.badarg)]


# ------------------------------------------------------- 3. trace_info({M,F,A})
def test_trace_info_of_a_function_before_and_after_patterns(vm):
    """erl_bif_trace.c trace_info_func / function_is_traced: a function the
    node lacks is undefined and an untraced one false, whatever the key;
    ``all`` lists traced, match_spec, meta, meta_match_spec, call_time,
    call_count in that order."""
    vm.define("m", "double", double)
    mfa = ("m", "double", 1)
    assert vm.trace_info(("m", "nothere", 1), "traced") == (A.traced, A.undefined)
    assert vm.trace_info(("m", "nothere", 1), "whatever") == (A.whatever, A.undefined)
    assert vm.trace_info(mfa, "traced") == (A.traced, A.false)
    assert vm.trace_info(mfa, "all") == (A.all, A.false)
    assert vm.trace_pattern(mfa, True, []) == 1
    assert vm.trace_info(mfa, "traced") == (A.traced, A["global"])
    assert vm.trace_info(mfa, "match_spec") == (A.match_spec, [])
    assert vm.trace_info(mfa, "all") == (
        A.all,
        [
            (A.traced, A["global"]),
            (A.match_spec, []),
            (A.meta, A.false),
            (A.meta_match_spec, A.false),
            (A.call_time, A.false),
            (A.call_count, A.false),
        ],
    )
    ms = [(A._, [], [(A.return_trace,)])]
    vm.trace_pattern(mfa, ms, ["local"])
    assert vm.trace_info(mfa, "traced") == (A.traced, A.local)
    assert vm.trace_info(mfa, "match_spec") == (A.match_spec, ms)
    with pytest.raises(smp.BadArg, match="trace_info item for a function"):
        vm.trace_info(mfa, "flags")
    vm.trace_pattern(mfa, False, ["local"])
    assert vm.trace_info(mfa, "traced") == (A.traced, A.false)


def test_trace_info_of_a_meta_traced_function(vm):
    vm.define("m", "double", double)
    mfa = ("m", "double", 1)
    t = vm.spawn_collector()
    vm.trace_pattern(mfa, True, [(A.meta, t)])
    assert vm.trace_info(mfa, "traced") == (A.traced, A.false)
    assert vm.trace_info(mfa, "match_spec") == (A.match_spec, A.false)
    assert vm.trace_info(mfa, "meta") == (A.meta, t)
    assert vm.trace_info(mfa, "meta_match_spec") == (A.meta_match_spec, [])


def test_trace_info_on_load_is_false_for_every_key(vm):
    """trace_info_on_load: no default pattern is ever on here."""
    for key in ("traced", "match_spec", "all", "meta"):
        assert vm.trace_info("on_load", key) == (A[key], A.false)


@pytest.mark.parametrize(
    "what",
    [(A.m, A.f), (A.m, A.f, A._), (A.m, 1.0, 1), (A.m, A.f, 1 << 60)],
    ids=["arity-2", "wild-arity", "float-function", "big-arity"],
)
def test_trace_info_of_a_bad_function_spec_is_badarg(vm, what):
    with pytest.raises(smp.BadArg):
        vm.trace_info(what, "traced")


def test_trace_info_from_a_process(vm):
    vm.define("m", "double", double)
    report = vm.spawn_collector()
    vm.trace_pattern(("m", "double", 1), True, ["local"])
    vm.spawn(reports, report, _trace_info, ("m", "double", 1), "traced")
    vm.spawn(reports, report, _trace_info, ("m", "double", 1), "flags")
    vm.run()
    got = sorted(map(repr, vm.messages(report)))
    assert got == sorted(map(repr, [(A.traced, A.local), (A.error, A.badarg)]))


# ------------------------------------------------------- 4. trace_info(Port, _)
def test_trace_info_of_a_port_is_badarg(vm):
    """17.x trace_info_2 takes on_load, an atom or a pid, or a tuple; a port
    is badarg although trace/3 takes ports (OTP 19 added them)."""
    report = vm.spawn_collector()
    vm.spawn(opens_and_waits, report)
    vm.run()
    (port,) = vm.messages(report)
    for item in ("flags", "tracer"):
        with pytest.raises(smp.BadArg, match="trace_info needs"):
            vm.trace_info(port, item)
    with pytest.raises(smp.BadArg):
        vm.trace_info(vm.open_trace_port("null"), "flags")


def test_trace_info_of_a_dead_process_is_undefined_whatever_the_item(vm):
    """trace_info_pid: ``if (!tracee) return am_undefined;`` before the key."""
    p = vm.spawn(noop)
    vm.run()
    assert vm.trace_info(p, "flags") == A.undefined
    assert vm.trace_info(p, "bogus") == A.undefined
    live = vm.spawn_collector()
    with pytest.raises(smp.BadArg, match="flags or tracer"):
        vm.trace_info(live, "bogus")
    with pytest.raises(smp.BadArg):
        vm.trace_info("all", "flags")  # an atom other than new


# ------------------------------------------------------- 5. a closing port loses its name
def test_registered_port_that_closes_is_unregistered_and_traced(vm):
    """io.c erts_do_exit_port: 'closed' is traced, then the name goes
    (erts_unregister_name traces 'unregister' on a port with ``ports``)."""
    t = vm.spawn_collector()
    report = vm.spawn_collector()
    vm.spawn(opens_registers_closes, t, report)
    vm.run()
    ((port, before, after),) = vm.messages(report)
    assert before == port
    assert after == A.undefined
    assert vm.whereis("myport") == A.undefined
    of_port = [m[2:] for m in vm.messages(t) if m[1] == port]
    assert of_port == [
        (A.register, A.myport),
        (A.closed, A.normal),
        (A.unregister, A.myport),
    ]
    check_counts(vm)


# ------------------------------------------------------- 6, 7. ports in the registry
def test_register_a_live_port_from_the_api(vm):
    """register.c erts_register_name takes a port id as well as a pid."""
    report = vm.spawn_collector()
    vm.spawn(opens_and_waits, report)
    vm.run()
    (port,) = vm.messages(report)
    assert vm.register("apiport", port) == A.true
    assert vm.whereis("apiport") == port
    with pytest.raises(smp.BadArg):
        vm.register("again", port)  # a port holds one name


def test_whereis_from_the_api_finds_a_port_a_process_registered(vm):
    """register.c erts_whereis_name looks ports up too."""
    report = vm.spawn_collector()
    vm.spawn(opens_and_registers, report)
    vm.run()
    (port,) = vm.messages(report)
    assert vm.whereis("theport") == port


# ------------------------------------------------------- 1. match specs that hold no term
@pytest.mark.parametrize(
    "body,part",
    [
        ([(A.message, True)], "a Python bool"),
        ([(A.message, "text")], "a Python str"),
        ([(A.message, float("inf"))], "inf is not an Erlang float"),
    ],
    ids=["bool", "str", "inf"],
)
def test_trace_pattern_with_a_part_that_is_no_term_is_badarg(vm, body, part):
    vm.define("m", "double", double)
    with pytest.raises(smp.BadArg, match=f"match spec clause 1, body 1: {part}"):
        vm.trace_pattern(("m", "double", 1), [(A._, [], body)], [])
    deep = A.leaf
    for _ in range(5_000):
        deep = (deep,)
    with pytest.raises(smp.BadArg, match="nested deeper than"):
        vm.trace_pattern(("m", "double", 1), [(A._, [], [(A.message, (A.const, deep))])], [])
    assert vm.trace_info(("m", "double", 1), "traced") == (A.traced, A.false)
