"""Differential: system_monitor, system_profile, port tracing, the error logger
and messages the VM sends to processes.

Rows of DESIGN.md section 3: monitor_long_gc (over and at the limit),
monitor_large_heap, monitor_long_schedule_proc, monitor_generic (busy_port),
profile_runnable_proc, profile_runnable_port, profile_scheduler,
trace_port_open, trace_port (closed), trace_sched_ports_where,
erts_queue_error_logger_message (a crash report) and erts_send_sys_msg_proc
(the trace_delivered reply).

Not here, because a stock OTP 25 node cannot be made to do them on purpose:
monitor_long_schedule_port (no standard driver blocks in a callback for a
chosen time), busy_dist_port (needs a distribution channel that fills up),
profile_scheduler_q (the emulator calls it for a scheduler that died).
"""

from __future__ import annotations

import smp
from smp.core.terms import A, Atom

from .harness import Scenario, bif, kick, matching, scenario_tests

ERLANG_MODULE = "diff_sys"

ERLANG = r"""
-module(diff_sys).
-compile([export_all, nowarn_export_all]).
-import(diff_harness, [collector/0, msgs/1, kick/2, kick_done/2, await_msgs/3,
                       wait_waiting/1, wait_dead/1]).

%% ---- process bodies
%% A big live heap built before the monitor is set, collected once after.
big_gc() -> L = lists:seq(1, 2000000), receive go -> ok end, erlang:garbage_collect(),
            receive stop -> length(L) end.
%% A small one: its collection takes well under a millisecond on the node.
small_gc() -> L = lists:seq(1, 2000), receive go -> ok end, erlang:garbage_collect(),
              receive stop -> length(L) end.
%% One time slice far over the limit: make_tuple/2 does not yield.
long_slice() -> receive go -> ok end, _ = erlang:make_tuple(8000000, a), receive stop -> ok end.
%% The second command finds the port busy (the pipe to `sleep` is full).
busy_user() ->
    receive go -> ok end,
    P = open_port({spawn, "sleep 3"}, [binary]), B = binary:copy(<<0>>, 1000000),
    port_command(P, B), port_command(P, B), receive stop -> ok end.
runner() -> receive go -> ok end, receive go2 -> ok end.
port_owner(Ctl) ->
    P = open_port({spawn, "sleep 3"}, [binary]), Ctl ! {port, P},
    receive go -> ok end, port_command(P, <<"x">>), receive stop -> ok end.
echo_port_user(Ctl) ->
    receive go -> ok end,
    P = open_port({spawn, "cat"}, [binary]), port_command(P, <<"x">>),
    receive {P, {data, _}} -> ok end, port_close(P), Ctl ! {done, self()},
    receive stop -> ok end.
%% Keeps its port open: how 17.x schedules a port's close is not checked here.
echo_port_registrar(Ctl) ->
    receive go -> ok end,
    P = open_port({spawn, "cat"}, [binary]), register(diff_port, P),
    port_close(P), Ctl ! {done, self()},
    receive stop -> ok end.

%% Opens two ports, unlinks from the second, and dies when told.
port_owner_dies(Ctl) ->
    receive go -> ok end,
    P1 = open_port({spawn, "cat"}, [binary]), P2 = open_port({spawn, "cat"}, [binary]),
    unlink(P2), Ctl ! {ports, P1, P2},
    receive die -> ok end.

%% Traps exits, opens a port, closes it when told, and takes the 'EXIT'.
port_close_owner(Ctl) ->
    process_flag(trap_exit, true),
    receive go -> ok end,
    P = open_port({spawn, "cat"}, [binary]), Ctl ! {port, P},
    receive close -> port_close(P) end,
    receive {'EXIT', P, _} -> ok end,
    receive stop -> ok end.
%% Traps exits, links to the port it is given, and takes the 'EXIT'.
port_linker(_Ctl) ->
    process_flag(trap_exit, true),
    P = receive {link, X} -> link(X), X end,
    receive {'EXIT', P, _} -> ok end,
    receive stop -> ok end.

echo_port_keeper(Ctl) ->
    receive go -> ok end,
    P = open_port({spawn, "cat"}, [binary]), port_command(P, <<"x">>),
    receive {P, {data, _}} -> ok end, Ctl ! {done, self()},
    receive stop -> ok end.
crasher() -> receive go -> ok end, throw(oops).
deliverer(To) ->
    receive go -> ok end,
    Ref = erlang:trace_delivered(all),
    receive {trace_delivered, all, Ref} = M -> To ! M end,
    receive stop -> ok end.

wait_status(P, S) -> wait_status(P, S, erlang:monotonic_time(millisecond) + 10000).
wait_status(P, S, Deadline) ->
    case process_info(P, status) of
        {status, S} -> ok;
        _ ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> error({never, S, P});
                false -> erlang:yield(), wait_status(P, S, Deadline)
            end
    end.

%% ---- scenarios
%% Monitor messages go to the monitor of the moment they are dispatched (as in
%% the seed's dispatcher): keep the monitor until the last body's has arrived;
%% the bodies run in order, so whatever the earlier ones made has too.
monitored(Bodies, Options) ->
    T = collector(), Ps = [spawn(?MODULE, B, []) || B <- Bodies], [wait_waiting(P) || P <- Ps],
    erlang:system_monitor(T, Options),
    [kick(P, go) || P <- Ps],
    Last = lists:last(Ps),
    Msgs = await_msgs(T, fun(M) -> element(2, M) =:= Last end, 1),
    erlang:system_monitor(undefined),
    {[{monitor, T} | lists:zip(Bodies, Ps)], Msgs}.

long_gc() -> monitored([big_gc], [{long_gc, 1}]).
long_gc_at_limit() -> monitored([small_gc, big_gc], [{long_gc, 1}]).
large_heap() -> monitored([big_gc], [{large_heap, 100000}]).
long_schedule() -> monitored([long_slice], [{long_schedule, 5}]).

busy_port() ->
    T = collector(), B = spawn(?MODULE, busy_user, []), wait_waiting(B),
    erlang:system_monitor(T, [busy_port]),
    B ! go, wait_status(B, suspended),
    Msgs = await_msgs(T, fun(M) -> element(2, M) =:= B end, 1), exit(B, kill),
    {[{monitor, T}, {busy_user, B}], Msgs}.

%% Profile messages are dispatched to the profiler of the moment (as in the
%% seed's dispatcher): keep the profiler until they have arrived.  R is not
%% polled while profiled: since OTP 21 process_info is a signal the target
%% is scheduled to handle, one more active/inactive pair when a poll finds
%% it still running (17.x reads it under a lock); its two messages say it
%% waits again.
profile_runnable_procs() ->
    T = collector(), R = spawn(?MODULE, runner, []), wait_waiting(R),
    erlang:system_profile(T, [runnable_procs]),
    R ! go,
    Msgs = await_msgs(T, fun(M) -> element(2, M) =:= R end, 2),
    erlang:system_profile(undefined, []),
    {[{profiler, T}, {r, R}], Msgs}.

profile_runnable_ports() ->
    T = collector(), O = spawn(?MODULE, port_owner, [self()]),
    Port = receive {port, P} -> P after 5000 -> error(no_port) end, wait_waiting(O),
    erlang:system_profile(T, [runnable_ports]),
    kick(O, go),
    Msgs = await_msgs(T, fun(M) -> element(2, M) =:= Port end, 2),
    erlang:system_profile(undefined, []),
    {[{profiler, T}, {owner, O}, {port, Port}], Msgs}.

profile_scheduler() ->
    T = collector(), R = spawn(?MODULE, runner, []), wait_waiting(R),
    erlang:system_profile(T, [scheduler]),
    kick(R, go),
    await_msgs(T, fun(M) -> element(4, M) =:= active end, 1),
    Msgs = await_msgs(T, fun(M) -> element(4, M) =:= inactive end, 1),
    erlang:system_profile(undefined, []),
    {[{profiler, T}, {r, R}], Msgs}.

port_open_closed() ->
    T = collector(), U = spawn(?MODULE, echo_port_user, [self()]), wait_waiting(U),
    erlang:trace(new_ports, true, [ports, {tracer, T}]),
    kick_done(U, go),
    {[{tracer, T}, {user, U}], msgs(T)}.

%% 17.x trace_info_2 takes on_load, an atom or a pid, or a tuple: a port is
%% badarg (OTP 19 answers for ports: the table).
trace_info_port() ->
    P = open_port({spawn, "cat"}, [binary]),
    R = [try erlang:trace_info(P, I) catch error:E -> {error, E} end || I <- [flags, tracer]],
    port_close(P),
    {[], [{bif, trace_info_port, X} || X <- R]}.

%% io.c erts_do_exit_port: a registered port that closes loses its name
%% ('closed', then 'unregister'), and whereis/1 no longer finds it.
registered_port_closed() ->
    T = collector(), U = spawn(?MODULE, echo_port_registrar, [self()]), wait_waiting(U),
    erlang:trace(new_ports, true, [ports, {tracer, T}]),
    kick_done(U, go),
    {[{tracer, T}, {user, U}], msgs(T) ++ [{bif, whereis, whereis(diff_port)}]}.

%% erl_process.c doit_exit_link: a dying process's linked port gets its exit
%% signal as a port task (erts_port_exit with ERTS_PORT_SIG_FLG_FORCE_SCHED),
%% which runs once the process is scheduled out: 'closed' after 'out_exited';
%% the port it unlinked from stays open (closed here once the messages are in).
port_owner_exits() ->
    T = collector(), U = spawn(?MODULE, port_owner_dies, [self()]), wait_waiting(U),
    erlang:trace(U, true, [procs, exiting, {tracer, T}]),
    erlang:trace(new_ports, true, [ports, {tracer, T}]),
    kick(U, go),
    {P1, P2} = receive {ports, A, B} -> {A, B} end,
    U ! die, wait_dead(U),
    Ms = await_msgs(T, fun(M) -> M =:= {trace, P1, closed, normal} end, 1),
    erlang:trace(new_ports, false, [ports]),
    exit(P2, kill),
    %% the order of the owner's last event and the port's close, at the tracer
    Order = [element(3, M) || M <- Ms, element(3, M) =:= out_exited orelse element(3, M) =:= closed],
    {[{tracer, T}, {user, U}], Ms ++ [{bif, exit_then_close, Order}]}.

%% io.c erts_do_exit_port: a closing port signals every process linked to
%% it (sweep_one_link), its owner too: a trapping one gets
%% {'EXIT', Port, normal} from port_close, and is traced getting_unlinked.
port_close_links() ->
    T = collector(),
    U = spawn(?MODULE, port_close_owner, [self()]), L = spawn(?MODULE, port_linker, [self()]),
    wait_waiting(U), wait_waiting(L),
    kick(U, go),
    P = receive {port, X} -> X end,
    %% (traced once the port is open: how open_port links is not this scenario's)
    erlang:trace(U, true, [procs, 'receive', {tracer, T}]),
    erlang:trace(L, true, [procs, 'receive', {tracer, T}]),
    kick(L, {link, P}),
    U ! close,
    Ms = await_msgs(T, fun({trace, _, 'receive', {'EXIT', _, _}}) -> true; (_) -> false end, 2),
    {[{tracer, T}, {owner, U}, {linker, L}], Ms}.

%% The same, the linker on another scheduler than the port in the emulator
%% (its link, and the close's exit signal, travel between the two).
port_close_links_across() -> port_close_links().

%% A port_command runs in the caller when the port is free (traced {in,
%% command}, {out, command}) and as a port task when the port is busy at that
%% moment, with an I/O task of cat's pipe (traced {in, 0}, which
%% port_io_tasks drops); on a loaded machine the node sometimes takes that
%% path.  The emulator's drivers have no I/O tasks, so its ports are always
%% idle: compare the idle port's run, trying again (a new port each time)
%% when the node's port happened to be busy.
running_ports() -> running_ports(20).
running_ports(Tries) ->
    T = collector(), U = spawn(?MODULE, echo_port_keeper, [self()]), wait_waiting(U),
    erlang:trace(new_ports, true, [running_ports, {tracer, T}]),
    kick_done(U, go),
    Ms = msgs(T),
    case [M || {trace, _, in, command} = M <- Ms] of
        [] when Tries > 1 -> running_ports(Tries - 1);
        _ -> {[{tracer, T}, {user, U}], Ms}
    end.

crash_report() ->
    T = collector(), LP = whereis(logger_proxy),
    1 = erlang:trace(LP, true, ['receive', {tracer, T}]),
    C = spawn(?MODULE, crasher, []), wait_waiting(C),
    C ! go, wait_dead(C),
    {[{crasher, C}], crash_reports(T, 500)}.

%% The VM hands the report to logger_proxy after the process is gone: wait for it.
crash_reports(T, 0) -> error({no_crash_report, msgs(T)});
crash_reports(T, N) ->
    case [M || {trace, _, 'receive', {log, error, _, _, #{error_logger := #{emulator := true}}} = M}
                   <- msgs(T)] of
        [] -> receive after 10 -> crash_reports(T, N - 1) end;
        Reports -> Reports
    end.

trace_delivered_reply() ->
    T = collector(), D = spawn(?MODULE, deliverer, [T]), wait_waiting(D),
    kick(D, go),  % D then waits for the reply: the forward to T comes later
    {[{collector, T}, {deliverer, D}],
     await_msgs(T, fun({trace_delivered, all, _}) -> true; (_) -> false end, 1)}.
"""


# ---- process bodies
async def big_gc(proc):
    await proc.allocate(200_000, keep=True)
    await proc.receive(match=matching(A.go))
    await proc.garbage_collect()
    await proc.receive(match=matching(A.stop))


async def small_gc(proc):
    # 10,000 live words: 1 ms in the emulator's cost model, as long as the limit
    await proc.allocate(10_000, keep=True)
    await proc.receive(match=matching(A.go))
    await proc.garbage_collect()
    await proc.receive(match=matching(A.stop))


async def long_slice(proc):
    await proc.receive(match=matching(A.go))
    await proc.busy(30)
    await proc.receive(match=matching(A.stop))


async def busy_user(proc):
    await proc.receive(match=matching(A.go))
    port = await proc.open_port("busy", busy_ms=50)
    await proc.port_command(port, b"x")
    await proc.port_command(port, b"x")
    await proc.receive(match=matching(A.stop))


async def runner(proc):
    await proc.receive(match=matching(A.go))
    await proc.receive(match=matching(A.go2))


async def port_owner(proc, ctl):
    port = await proc.open_port("echo")
    await proc.send(ctl, (A.port, port))
    await proc.receive(match=matching(A.go))
    await proc.port_command(port, b"x")
    await proc.receive(match=matching(A.stop))


async def echo_port_user(proc, ctl):
    await proc.receive(match=matching(A.go))
    port = await proc.open_port("echo")
    await proc.port_command(port, b"x")
    await proc.receive(match=lambda m: type(m) is tuple and m[0] == port)
    await proc.port_close(port)
    await proc.send(ctl, (A.done, proc.pid))
    await proc.receive(match=matching(A.stop))


async def echo_port_registrar(proc, ctl):
    await proc.receive(match=matching(A.go))
    port = await proc.open_port("echo")
    await proc.register(A.diff_port, port)
    await proc.port_close(port)
    await proc.send(ctl, (A.done, proc.pid))
    await proc.receive(match=matching(A.stop))


async def port_owner_dies(proc, ctl):
    await proc.receive(match=matching(A.go))
    p1 = await proc.open_port("echo")
    p2 = await proc.open_port("echo")
    await proc.unlink(p2)
    await proc.send(ctl, (A.ports, p1, p2))
    await proc.receive(match=matching(A.die))


def _is_exit(m) -> bool:
    return type(m) is tuple and len(m) == 3 and m[0] == A.EXIT


async def port_close_owner(proc, ctl):
    await proc.process_flag(A.trap_exit, True)
    await proc.receive(match=matching(A.go))
    port = await proc.open_port("echo")
    await proc.send(ctl, (A.port, port))
    await proc.receive(match=matching(A.close))
    await proc.port_close(port)
    await proc.receive(match=_is_exit)
    await proc.receive(match=matching(A.stop))


async def port_linker(proc, ctl):
    await proc.process_flag(A.trap_exit, True)
    m = await proc.receive(match=lambda m: type(m) is tuple and m[0] == A.link)
    await proc.link(m[1])
    await proc.receive(match=_is_exit)
    await proc.receive(match=matching(A.stop))


async def echo_port_keeper(proc, ctl):
    await proc.receive(match=matching(A.go))
    port = await proc.open_port("echo")
    await proc.port_command(port, b"x")
    await proc.receive(match=lambda m: type(m) is tuple and m[0] == port)
    await proc.send(ctl, (A.done, proc.pid))
    await proc.receive(match=matching(A.stop))


async def crasher(proc):
    await proc.receive(match=matching(A.go))
    raise smp.Throw(A.oops)


async def deliverer(proc, to):
    await proc.receive(match=matching(A.go))
    ref = await proc.trace_delivered(A.all)
    m = await proc.receive(
        match=lambda m: type(m) is tuple and m[0] == A.trace_delivered and m[2] == ref
    )
    await proc.send(to, m)
    await proc.receive(match=matching(A.stop))


# ---- the same scenarios on the emulator
def _monitored(bodies, options):
    def run(vm):
        t = vm.spawn_collector()
        ps = [vm.spawn(b) for b in bodies]
        vm.run(timeout=20)
        vm.system_monitor(t, options)
        for p in ps:
            kick(vm, p, A.go)
        vm.system_monitor("undefined")
        return [("monitor", t)] + [
            (b.__name__, p) for b, p in zip(bodies, ps, strict=False)
        ], vm.messages(t)

    return run


def e_busy_port(vm):
    t = vm.spawn_collector()
    b = vm.spawn(busy_user)
    vm.run(timeout=20)
    vm.system_monitor(t, ["busy_port"])
    kick(vm, b, A.go)
    return [("monitor", t), ("busy_user", b)], vm.messages(t)


def _profiled(options, to_port=False):
    """``to_port``: profile to a memory trace port, as the README asks for
    ``scheduler`` (a profiler process is woken by its own profile messages, so
    the emulator never becomes quiet); the node's profiler is a process."""

    def run(vm):
        t = vm.open_trace_port("memory") if to_port else vm.spawn_collector()
        r = vm.spawn(runner)
        vm.run(timeout=20)
        vm.system_profile(t, options)
        kick(vm, r, A.go)
        vm.system_profile("undefined", [])
        msgs = vm.trace_port_terms(t) if to_port else vm.messages(t)
        return [("profiler", t), ("r", r)], msgs

    return run


def e_profile_runnable_ports(vm):
    t = vm.spawn_collector()
    ctl = vm.spawn_collector()
    o = vm.spawn(port_owner, ctl)
    vm.run(timeout=20)
    ((_, port),) = vm.messages(ctl)
    vm.system_profile(t, ["runnable_ports"])
    kick(vm, o, A.go)
    vm.system_profile("undefined", [])
    return [("profiler", t), ("owner", o), ("port", port)], vm.messages(t)


def _port_traced(body, flags):
    def run(vm):
        t = vm.spawn_collector()
        u = vm.spawn(body, vm.spawn_collector())
        vm.run(timeout=20)
        vm.trace("new", True, flags, tracer=t)
        kick(vm, u, A.go)
        return [("tracer", t), ("user", u)], vm.messages(t)

    return run


async def port_trace_info(proc, report):
    port = await proc.open_port("echo")
    out = []
    for item in (A.flags, A.tracer):
        try:
            out.append(await proc.trace_info(port, item))
        except smp.Error as e:
            out.append((A.error, e.reason))
    await proc.port_close(port)
    await proc.send(report, out)


def e_trace_info_port(vm):
    report = vm.spawn_collector()
    vm.spawn(port_trace_info, report)
    vm.run(timeout=20)
    ((*results,),) = vm.messages(report)
    return [], [bif("trace_info_port", r) for r in results]


def e_registered_port_closed(vm):
    roles, msgs = _port_traced(echo_port_registrar, ["ports"])(vm)
    return roles, msgs + [bif("whereis", vm.whereis("diff_port"))]


def e_port_owner_exits(vm):
    t = vm.spawn_collector()
    u = vm.spawn(port_owner_dies, vm.spawn_collector())
    vm.run(timeout=20)
    vm.trace(u, True, ["procs", "exiting"], tracer=t)
    vm.trace("new", True, ["ports"], tracer=t)
    kick(vm, u, A.go)
    kick(vm, u, A.die)
    msgs = vm.messages(t)
    order = [m[2] for m in msgs if m[2] in (A.out_exited, A.closed)]
    return [("tracer", t), ("user", u)], msgs + [bif("exit_then_close", order)]


def e_port_close_links(vm, across: bool = False):
    t = vm.spawn_collector()
    ctl = vm.spawn_collector()
    u = vm.spawn(port_close_owner, ctl, scheduler=1)
    lk = vm.spawn(port_linker, ctl, scheduler=vm.nsched if across else 1)
    vm.run(timeout=20)
    kick(vm, u, A.go)
    ((_, port),) = vm.messages(ctl)
    vm.trace(u, True, ["procs", "receive"], tracer=t)
    vm.trace(lk, True, ["procs", "receive"], tracer=t)
    kick(vm, lk, (A.link, port))
    kick(vm, u, A.close)
    return [("tracer", t), ("owner", u), ("linker", lk)], vm.messages(t)


def e_crash_report(vm):
    el = vm.spawn_collector()
    vm.register("error_logger", el)
    c = vm.spawn(crasher)
    vm.run(timeout=20)
    kick(vm, c, A.go)
    return [("crasher", c)], vm.messages(el)


def e_trace_delivered_reply(vm):
    t = vm.spawn_collector()
    d = vm.spawn(deliverer, t)
    vm.run(timeout=20)
    kick(vm, d, A.go)
    return [("collector", t), ("deliverer", d)], vm.messages(t)


def _scheduler_profile(m) -> bool:
    return type(m) is tuple and len(m) == 6 and m[0] == A.profile and m[1] == A.scheduler


#: The emulator's echo driver stands for the node's `cat` spawn driver.
ECHO_IS_CAT = {Atom("echo"): Atom("cat")}
#: These watch the whole node: events about its own processes and ports are not the scenario's.
SYSTEM_WIDE = ("foreign_subjects",)

SCENARIOS = [
    Scenario("long_gc", _monitored([big_gc], [("long_gc", 1)]), noise=SYSTEM_WIDE),
    Scenario(
        "long_gc_at_limit", _monitored([small_gc, big_gc], [("long_gc", 1)]), noise=SYSTEM_WIDE
    ),
    Scenario("large_heap", _monitored([big_gc], [("large_heap", 100_000)]), noise=SYSTEM_WIDE),
    Scenario("long_schedule", _monitored([long_slice], [("long_schedule", 5)]), noise=SYSTEM_WIDE),
    Scenario("busy_port", e_busy_port, noise=SYSTEM_WIDE),
    Scenario("profile_runnable_procs", _profiled(["runnable_procs"]), noise=SYSTEM_WIDE),
    Scenario("profile_runnable_ports", e_profile_runnable_ports, noise=SYSTEM_WIDE),
    Scenario(
        "profile_scheduler",
        _profiled(["scheduler"], to_port=True),
        noise=SYSTEM_WIDE,
        as_set=_scheduler_profile,
    ),
    Scenario("port_open_closed", _port_traced(echo_port_user, ["ports"]), aliases=ECHO_IS_CAT),
    Scenario("registered_port_closed", e_registered_port_closed, aliases=ECHO_IS_CAT),
    Scenario("port_owner_exits", e_port_owner_exits, aliases=ECHO_IS_CAT),
    Scenario("port_close_links", e_port_close_links, aliases=ECHO_IS_CAT),
    Scenario(
        "port_close_links_across",
        lambda vm: e_port_close_links(vm, across=True),
        aliases=ECHO_IS_CAT,
    ),
    Scenario("trace_info_port", e_trace_info_port),
    Scenario(
        "running_ports",
        _port_traced(echo_port_keeper, ["running_ports"]),
        noise=("port_io_tasks",),
        aliases=ECHO_IS_CAT,
    ),
    Scenario("crash_report", e_crash_report),
    Scenario("trace_delivered_reply", e_trace_delivered_reply),
]

node_results, test_scenario = scenario_tests(__name__, ERLANG_MODULE, ERLANG, SCENARIOS)
