"""Differential: message passing, process events, scheduling and GC traces.

Rows of DESIGN.md section 3: trace_send (to pids, dead pids, registered and
unregistered names), trace_receive (messages, timeouts), trace_proc (link,
unlink, getting_linked, getting_unlinked, exit, register, unregister),
trace_proc_spawn, trace_sched (running, exiting, scheduler_id, a killed
process), trace_gc, timestamps, and trace_info's flag list.
"""

from __future__ import annotations

import smp
from smp.core.terms import A

from .harness import Scenario, bif, kick, matching, scenario_tests

ERLANG_MODULE = "diff_trace"

ERLANG = r"""
-module(diff_trace).
-compile([export_all, nowarn_export_all]).
-import(diff_harness, [collector/0, msgs/1, kick/2, wait_waiting/1, wait_dead/1]).

%% ---- process bodies (the Python bodies below have the same names and arities)
sink() -> receive stop -> ok; _ -> sink() end.
sender(To, Msg) -> receive go -> ok end, To ! Msg, receive stop -> ok end.
sender3(To) -> receive go -> ok end, To ! one, To ! two, To ! three, receive stop -> ok end.
name_sender(Name, Msg) -> receive go -> ok end, Name ! Msg, receive stop -> ok end.
unregistered_sender() ->
    receive go -> ok end,
    Res = (catch nobody_here ! hello),
    receive stop -> Res end.
timeouter(Ctl) ->
    receive go -> ok end, receive nothing -> ok after 5 -> ok end,
    Ctl ! timed_out, receive stop -> ok end.
linker(Other) -> receive go -> ok end, link(Other), unlink(Other), receive stop -> ok end.
%% The link is made and seen by both before tracing starts: OTP 25 handles a
%% link signal in the receiver, lazily; `linked` comes after it from the same sender.
trapper() ->
    process_flag(trap_exit, true), receive linked -> ok end,
    receive {'EXIT', _, _} -> ok end, receive stop -> ok end.
dier(Peer) -> link(Peer), Peer ! linked, receive go -> ok end, exit(boom).
%% Does not trap exits: a linked process's abnormal exit ends it.
victim() -> receive linked -> ok end, receive stop -> ok end.
registrar(Name) -> receive go -> ok end, register(Name, self()), receive stop -> ok end, exit(byebye).
unregistrar(Name) -> receive go -> ok end, register(Name, self()), unregister(Name), receive stop -> ok end.
spawner() -> receive go -> ok end, spawn(?MODULE, sink, []), receive stop -> ok end.
spawn_linker() ->
    receive go -> ok end, C = spawn_link(?MODULE, sink, []), C ! stop, receive stop -> ok end.
runner() -> receive go -> ok end, receive go2 -> ok end.
gc_runner() -> receive go -> ok end, erlang:garbage_collect(), receive stop -> ok end.

%% ---- scenarios
send_to_pid() ->
    T = collector(), B = spawn(?MODULE, sink, []), A = spawn(?MODULE, sender, [B, hi]),
    wait_waiting(A), wait_waiting(B),
    1 = erlang:trace(A, true, [send, {tracer, T}]),
    1 = erlang:trace(B, true, ['receive', {tracer, T}]),
    kick(A, go), wait_waiting(B),
    {[{tracer, T}, {a, A}, {b, B}], msgs(T)}.

send_to_dead_pid() ->
    T = collector(), D = spawn(?MODULE, sink, []), wait_waiting(D), D ! stop, wait_dead(D),
    A = spawn(?MODULE, sender, [D, lost]), wait_waiting(A),
    1 = erlang:trace(A, true, [send, {tracer, T}]),
    kick(A, go),
    {[{tracer, T}, {a, A}, {dead, D}], msgs(T)}.

send_to_registered_name() ->
    T = collector(), B = spawn(?MODULE, sink, []), wait_waiting(B), register(diff_sink, B),
    A = spawn(?MODULE, name_sender, [diff_sink, hi]), wait_waiting(A),
    1 = erlang:trace(A, true, [send, {tracer, T}]),
    1 = erlang:trace(B, true, ['receive', {tracer, T}]),
    kick(A, go), wait_waiting(B),
    {[{tracer, T}, {a, A}, {b, B}], msgs(T)}.

send_to_unregistered_name() ->
    T = collector(), A = spawn(?MODULE, unregistered_sender, []), wait_waiting(A),
    1 = erlang:trace(A, true, [send, {tracer, T}]),
    kick(A, go),
    {[{tracer, T}, {a, A}], msgs(T)}.

send_timestamps() ->
    T = collector(), B = spawn(?MODULE, sink, []), A = spawn(?MODULE, sender3, [B]),
    wait_waiting(A), wait_waiting(B),
    1 = erlang:trace(A, true, [send, timestamp, {tracer, T}]),
    kick(A, go), wait_waiting(B),
    {[{tracer, T}, {a, A}, {b, B}], msgs(T)}.

receive_timeout() ->
    T = collector(), A = spawn(?MODULE, timeouter, [self()]), wait_waiting(A),
    1 = erlang:trace(A, true, ['receive', {tracer, T}]),
    A ! go, receive timed_out -> ok after 5000 -> error(no_timeout) end,
    {[{tracer, T}, {a, A}], msgs(T)}.

%% Every way link/1 goes: a dead pid, itself, a live process twice, a closed
%% port, an atom; then, trapping exits, the dead pid and the port again; then
%% unlink/1 of the live process twice, the dead pid, the port and an atom.
link_prober(Dead, Other) ->
    Port = receive {go, P} -> P end,
    [catch link(X) || X <- [Dead, self(), Other, Other, Port, foo]],
    process_flag(trap_exit, true),
    [catch link(X) || X <- [Dead, Port]],
    [catch unlink(X) || X <- [Other, Other, Dead, Port, foo]],
    receive stop -> ok end.
link_failures() ->
    T = collector(), D = spawn(?MODULE, sink, []), exit(D, kill), wait_dead(D),
    O = spawn(?MODULE, sink, []), Port = open_port({spawn, "cat"}, []), port_close(Port),
    P = spawn(?MODULE, link_prober, [D, O]), wait_waiting(P), wait_waiting(O),
    1 = erlang:trace(P, true, [procs, {tracer, T}]),
    1 = erlang:trace(O, true, [procs, {tracer, T}]),
    kick(P, {go, Port}), wait_waiting(O),
    {[{tracer, T}, {p, P}, {o, O}, {d, D}], msgs(T)}.

%% exit(self(), normal) ends a process that does not trap exits.
exit_self_normal() -> receive go -> ok end, exit(self(), normal), receive stop -> ok end.
exit_of_itself() ->
    T = collector(), P = spawn(?MODULE, exit_self_normal, []), wait_waiting(P),
    1 = erlang:trace(P, true, [procs, {tracer, T}]),
    kick(P, go), wait_dead(P),
    {[{tracer, T}, {p, P}], msgs(T)}.

%% A kills B, which traps exits and is linked to A, then dies: B, exiting,
%% gets no exit signal from the link and is not traced getting_unlinked.
kills_then_dies() -> B = receive X -> X end, exit(B, kill), exit(foo).
trapper_linked(Ctl) ->
    process_flag(trap_exit, true), A = spawn_link(?MODULE, kills_then_dies, []),
    Ctl ! {a, A}, receive never -> ok end.
exiting_not_unlinked() ->
    T = collector(), B = spawn(?MODULE, trapper_linked, [self()]),
    A = receive {a, X} -> X end, wait_waiting(B), wait_waiting(A),
    1 = erlang:trace(B, true, [procs, 'receive', {tracer, T}]),
    A ! B, wait_dead(B), wait_dead(A),
    {[{tracer, T}, {b, B}, {a, A}], msgs(T)}.

%% K exits kill; V, linked to K and not trapping exits, is ended by the link:
%% 17.x send_exit_signal ends it killed (25: kill), and the trapping W,
%% linked to V, gets {'EXIT', V, killed} (25: kill).
kill_dier(Peer) -> link(Peer), Peer ! linked, receive go -> ok end, exit(kill).
middle(W) -> link(W), W ! linked, receive linked -> ok end, receive stop -> ok end.
link_kill_chain() ->
    T = collector(), W = spawn(?MODULE, trapper, []), wait_waiting(W),
    V = spawn(?MODULE, middle, [W]), wait_waiting(V), wait_waiting(W),
    K = spawn(?MODULE, kill_dier, [V]), wait_waiting(K), wait_waiting(V),
    1 = erlang:trace(K, true, [procs, {tracer, T}]),
    1 = erlang:trace(V, true, [procs, {tracer, T}]),
    1 = erlang:trace(W, true, [procs, 'receive', {tracer, T}]),
    K ! go, wait_dead(K), wait_dead(V), wait_waiting(W),
    {[{tracer, T}, {k, K}, {v, V}, {w, W}], msgs(T)}.

%% K kills V, then registers it: 25 registers the dying process (and traces
%% register, then unregister at its exit); 17.x finds no exiting process.
kill_and_register(V) ->
    receive go -> ok end, exit(V, kill), catch register(diff_killed, V), receive stop -> ok end.
register_killed() ->
    T = collector(), V = spawn(?MODULE, sink, []), K = spawn(?MODULE, kill_and_register, [V]),
    wait_waiting(V), wait_waiting(K),
    1 = erlang:trace(V, true, [procs, {tracer, T}]),
    kick(K, go), wait_dead(V),
    {[{tracer, T}, {v, V}, {k, K}], msgs(T)}.

%% L kills V, then links it: 17.x insert_internal_link finds the exiting
%% process (ERTS_P2P_FLG_ALLOW_OTHER_X) and links it, and V's exit sends L
%% killed; 25 answers the link to an exiting process with noproc.
kill_and_link(V) ->
    process_flag(trap_exit, true), receive go -> ok end,
    exit(V, kill), link(V), receive {'EXIT', V, _} -> ok end, receive stop -> ok end.
link_killed() ->
    T = collector(), V = spawn(?MODULE, sink, []), L = spawn(?MODULE, kill_and_link, [V]),
    wait_waiting(V), wait_waiting(L),
    1 = erlang:trace(V, true, [procs, {tracer, T}]),
    1 = erlang:trace(L, true, [procs, 'receive', {tracer, T}]),
    kick(L, go), wait_dead(V), wait_waiting(L),
    {[{tracer, T}, {v, V}, {l, L}], msgs(T)}.

set_on_link_child() ->
    T = collector(), P = spawn(?MODULE, spawn_linker, []), wait_waiting(P),
    1 = erlang:trace(P, true, [procs, set_on_link, {tracer, T}]),
    kick(P, go),
    {[{tracer, T}, {parent, P}], msgs(T)}.

link_unlink() ->
    T = collector(), A = spawn(?MODULE, sink, []), B = spawn(?MODULE, linker, [A]),
    wait_waiting(A), wait_waiting(B),
    1 = erlang:trace(A, true, [procs, {tracer, T}]),
    1 = erlang:trace(B, true, [procs, {tracer, T}]),
    kick(B, go), wait_waiting(A),
    {[{tracer, T}, {a, A}, {b, B}], msgs(T)}.

exit_unlinks_survivor() ->
    T = collector(), S = spawn(?MODULE, trapper, []), wait_waiting(S),
    D = spawn(?MODULE, dier, [S]), wait_waiting(D), wait_waiting(S),
    1 = erlang:trace(S, true, [procs, 'receive', {tracer, T}]),
    1 = erlang:trace(D, true, [procs, {tracer, T}]),
    D ! go, wait_dead(D), wait_waiting(S),
    {[{tracer, T}, {survivor, S}, {dier, D}], msgs(T)}.

%% erl_process.c doit_exit_link: a linked process the exit signal ends is
%% not traced getting_unlinked (send_exit_signal returned -1), only exit.
exit_kills_linked() ->
    T = collector(), S = spawn(?MODULE, victim, []), wait_waiting(S),
    D = spawn(?MODULE, dier, [S]), wait_waiting(D), wait_waiting(S),
    1 = erlang:trace(S, true, [procs, {tracer, T}]),
    1 = erlang:trace(D, true, [procs, {tracer, T}]),
    D ! go, wait_dead(D), wait_dead(S),
    {[{tracer, T}, {victim, S}, {dier, D}], msgs(T)}.

registered_exit() ->
    T = collector(), R = spawn(?MODULE, registrar, [diff_reg]), wait_waiting(R),
    1 = erlang:trace(R, true, [procs, {tracer, T}]),
    kick(R, go), R ! stop, wait_dead(R),
    {[{tracer, T}, {r, R}], msgs(T)}.

register_unregister() ->
    T = collector(), R = spawn(?MODULE, unregistrar, [diff_unreg]), wait_waiting(R),
    1 = erlang:trace(R, true, [procs, {tracer, T}]),
    kick(R, go),
    {[{tracer, T}, {r, R}], msgs(T)}.

spawn_child() ->
    T = collector(), P = spawn(?MODULE, spawner, []), wait_waiting(P),
    1 = erlang:trace(P, true, [procs, {tracer, T}]),
    kick(P, go),
    {[{tracer, T}, {parent, P}], msgs(T)}.

spawn_link_child() ->
    T = collector(), P = spawn(?MODULE, spawn_linker, []), wait_waiting(P),
    1 = erlang:trace(P, true, [procs, {tracer, T}]),
    kick(P, go),
    {[{tracer, T}, {parent, P}], msgs(T)}.

set_on_spawn_child() ->
    T = collector(), P = spawn(?MODULE, spawn_linker, []), wait_waiting(P),
    1 = erlang:trace(P, true, [procs, set_on_spawn, {tracer, T}]),
    kick(P, go),
    {[{tracer, T}, {parent, P}], msgs(T)}.

running_exiting() ->
    T = collector(), P = spawn(?MODULE, runner, []), wait_waiting(P),
    1 = erlang:trace(P, true, [running, exiting, {tracer, T}]),
    kick(P, go), P ! go2, wait_dead(P),
    {[{tracer, T}, {p, P}], msgs(T)}.

exiting_only() ->
    T = collector(), P = spawn(?MODULE, runner, []), wait_waiting(P),
    1 = erlang:trace(P, true, [exiting, {tracer, T}]),
    kick(P, go), P ! go2, wait_dead(P),
    {[{tracer, T}, {p, P}], msgs(T)}.

running_scheduler_id() ->
    T = collector(), P = spawn(?MODULE, runner, []), wait_waiting(P),
    1 = erlang:trace(P, true, [running, scheduler_id, {tracer, T}]),
    kick(P, go),
    {[{tracer, T}, {p, P}], msgs(T)}.

killed_while_waiting() ->
    T = collector(), P = spawn(?MODULE, runner, []), wait_waiting(P),
    1 = erlang:trace(P, true, [running, exiting, procs, {tracer, T}]),
    exit(P, kill), wait_dead(P),
    {[{tracer, T}, {p, P}], msgs(T)}.

garbage_collection() ->
    T = collector(), P = spawn(?MODULE, gc_runner, []), wait_waiting(P),
    1 = erlang:trace(P, true, [garbage_collection, {tracer, T}]),
    kick(P, go),
    {[{tracer, T}, {p, P}], msgs(T)}.

trace_info_flags() ->
    T = collector(), P = spawn(?MODULE, sink, []), wait_waiting(P),
    1 = erlang:trace(P, true, [send, 'receive', procs, call, running, exiting,
                               garbage_collection, timestamp, arity, return_to,
                               set_on_spawn, set_on_link, {tracer, T}]),
    Info = erlang:trace_info(P, flags),
    {[{tracer, T}, {p, P}], [{bif, trace_info, Info}]}.
"""


# ---- process bodies: the Erlang functions above, same names and arities
async def sink(proc):
    while await proc.receive() != A.stop:
        pass


async def sender(proc, to, msg):
    await proc.receive(match=matching(A.go))
    await proc.send(to, msg)
    await proc.receive(match=matching(A.stop))


async def sender3(proc, to):
    await proc.receive(match=matching(A.go))
    for m in (A.one, A.two, A.three):
        await proc.send(to, m)
    await proc.receive(match=matching(A.stop))


async def name_sender(proc, name, msg):
    await proc.receive(match=matching(A.go))
    await proc.send(name, msg)
    await proc.receive(match=matching(A.stop))


async def unregistered_sender(proc):
    await proc.receive(match=matching(A.go))
    try:
        await proc.send(A.nobody_here, A.hello)
    except smp.Error:
        pass
    await proc.receive(match=matching(A.stop))


async def timeouter(proc, ctl):
    await proc.receive(match=matching(A.go))
    await proc.receive(timeout=5, match=matching(A.nothing))
    await proc.send(ctl, A.timed_out)
    await proc.receive(match=matching(A.stop))


async def linker(proc, other):
    await proc.receive(match=matching(A.go))
    await proc.link(other)
    await proc.unlink(other)
    await proc.receive(match=matching(A.stop))


async def link_prober(proc, dead, other):
    _, port = await proc.receive(match=lambda m: type(m) is tuple and m[0] == A.go)
    for x in (dead, proc.pid, other, other, port, A.foo):
        try:
            await proc.link(x)
        except (smp.Error, smp.Exit):
            pass
    await proc.process_flag(A.trap_exit, A.true)
    for x in (dead, port):
        await proc.link(x)
    for x in (other, other, dead, port, A.foo):
        try:
            await proc.unlink(x)
        except smp.Error:
            pass
    await proc.receive(match=matching(A.stop))


async def port_maker(proc, ctl):
    port = await proc.open_port("echo")
    await proc.port_close(port)
    await proc.send(ctl, port)


async def exit_self_normal(proc):
    await proc.receive(match=matching(A.go))
    await proc.exit(proc.pid, A.normal)
    await proc.receive(match=matching(A.stop))


async def kills_then_dies(proc):
    b = await proc.receive()
    await proc.exit(b, A.kill)
    await proc.exit(A.foo)


async def trapper_linked(proc, ctl):
    await proc.process_flag(A.trap_exit, A.true)
    a = await proc.spawn_link(kills_then_dies)
    await proc.send(ctl, (A.a, a))
    await proc.receive(match=lambda m: False)


async def kill_and_register(proc, victim):
    await proc.receive(match=matching(A.go))
    await proc.exit(victim, A.kill)
    try:
        await proc.register(A.diff_killed, victim)
    except smp.Error:
        pass
    await proc.receive(match=matching(A.stop))


async def trapper(proc):
    await proc.process_flag(A.trap_exit, A.true)
    await proc.receive(match=matching(A.linked))
    await proc.receive(match=lambda m: type(m) is tuple and m[0] == A.EXIT)
    await proc.receive(match=matching(A.stop))


async def dier(proc, peer):
    await proc.link(peer)
    await proc.send(peer, A.linked)
    await proc.receive(match=matching(A.go))
    await proc.exit(A.boom)


async def kill_and_link(proc, victim):
    await proc.process_flag(A.trap_exit, A.true)
    await proc.receive(match=matching(A.go))
    await proc.exit(victim, A.kill)
    await proc.link(victim)
    await proc.receive(match=lambda m: type(m) is tuple and m[:2] == (A.EXIT, victim))
    await proc.receive(match=matching(A.stop))


async def kill_dier(proc, peer):
    await proc.link(peer)
    await proc.send(peer, A.linked)
    await proc.receive(match=matching(A.go))
    await proc.exit(A.kill)


async def middle(proc, w):
    await proc.link(w)
    await proc.send(w, A.linked)
    await proc.receive(match=matching(A.linked))
    await proc.receive(match=matching(A.stop))


async def victim(proc):
    await proc.receive(match=matching(A.linked))
    await proc.receive(match=matching(A.stop))


async def registrar(proc, name):
    await proc.receive(match=matching(A.go))
    await proc.register(name)
    await proc.receive(match=matching(A.stop))
    await proc.exit(A.byebye)


async def unregistrar(proc, name):
    await proc.receive(match=matching(A.go))
    await proc.register(name)
    await proc.unregister(name)
    await proc.receive(match=matching(A.stop))


async def spawner(proc):
    await proc.receive(match=matching(A.go))
    await proc.spawn(sink)
    await proc.receive(match=matching(A.stop))


async def spawn_linker(proc):
    await proc.receive(match=matching(A.go))
    child = await proc.spawn_link(sink)
    await proc.send(child, A.stop)
    await proc.receive(match=matching(A.stop))


async def runner(proc):
    await proc.receive(match=matching(A.go))
    await proc.receive(match=matching(A.go2))


async def gc_runner(proc):
    await proc.receive(match=matching(A.go))
    await proc.garbage_collect()
    await proc.receive(match=matching(A.stop))


# ---- the same scenarios on the emulator
def _setup(vm, *procs):
    """Spawn ``procs`` ((body, args...) tuples) and a collector; run until quiet."""
    t = vm.spawn_collector()
    pids = [vm.spawn(body, *args) for body, *args in procs]
    vm.run(timeout=20)
    return t, pids


def e_send_to_pid(vm):
    t = vm.spawn_collector()
    b = vm.spawn(sink)
    a = vm.spawn(sender, b, A.hi)
    vm.run(timeout=20)
    vm.trace(a, True, ["send"], tracer=t)
    vm.trace(b, True, ["receive"], tracer=t)
    kick(vm, a, A.go)
    return [("tracer", t), ("a", a), ("b", b)], vm.messages(t)


def e_send_to_dead_pid(vm):
    t, (d,) = _setup(vm, (sink,))
    kick(vm, d, A.stop)
    a = vm.spawn(sender, d, A.lost)
    vm.run(timeout=20)
    vm.trace(a, True, ["send"], tracer=t)
    kick(vm, a, A.go)
    return [("tracer", t), ("a", a), ("dead", d)], vm.messages(t)


def e_send_to_registered_name(vm):
    t, (b,) = _setup(vm, (sink,))
    vm.register("diff_sink", b)
    a = vm.spawn(name_sender, A.diff_sink, A.hi)
    vm.run(timeout=20)
    vm.trace(a, True, ["send"], tracer=t)
    vm.trace(b, True, ["receive"], tracer=t)
    kick(vm, a, A.go)
    return [("tracer", t), ("a", a), ("b", b)], vm.messages(t)


def e_send_to_unregistered_name(vm):
    t, (a,) = _setup(vm, (unregistered_sender,))
    vm.trace(a, True, ["send"], tracer=t)
    kick(vm, a, A.go)
    return [("tracer", t), ("a", a)], vm.messages(t)


def e_send_timestamps(vm):
    t = vm.spawn_collector()
    b = vm.spawn(sink)
    a = vm.spawn(sender3, b)
    vm.run(timeout=20)
    vm.trace(a, True, ["send", "timestamp"], tracer=t)
    kick(vm, a, A.go)
    return [("tracer", t), ("a", a), ("b", b)], vm.messages(t)


def e_receive_timeout(vm):
    t, (ctl,) = _setup(vm, (sink,))
    a = vm.spawn(timeouter, ctl)
    vm.run(timeout=20)
    vm.trace(a, True, ["receive"], tracer=t)
    kick(vm, a, A.go)
    return [("tracer", t), ("a", a)], vm.messages(t)


def e_link_failures(vm):
    t, ctl = vm.spawn_collector(), vm.spawn_collector()
    d = vm.spawn(sink)
    vm.spawn(port_maker, ctl)
    vm.run(timeout=20)
    vm.exit(d, "kill")
    o = vm.spawn(sink)
    p = vm.spawn(link_prober, d, o)
    vm.run(timeout=20)
    [port] = vm.messages(ctl)
    vm.trace(p, True, ["procs"], tracer=t)
    vm.trace(o, True, ["procs"], tracer=t)
    kick(vm, p, (A.go, port))
    return [("tracer", t), ("p", p), ("o", o), ("d", d)], vm.messages(t)


def e_exit_of_itself(vm):
    t = vm.spawn_collector()
    p = vm.spawn(exit_self_normal)
    vm.run(timeout=20)
    vm.trace(p, True, ["procs"], tracer=t)
    kick(vm, p, A.go)
    return [("tracer", t), ("p", p)], vm.messages(t)


def e_exiting_not_unlinked(vm):
    t, ctl = vm.spawn_collector(), vm.spawn_collector()
    b = vm.spawn(trapper_linked, ctl)
    vm.run(timeout=20)
    [(_, a)] = vm.messages(ctl)
    vm.trace(b, True, ["procs", "receive"], tracer=t)
    kick(vm, a, b)
    return [("tracer", t), ("b", b), ("a", a)], vm.messages(t)


def e_register_killed(vm):
    t = vm.spawn_collector()
    v = vm.spawn(sink)
    k = vm.spawn(kill_and_register, v)
    vm.run(timeout=20)
    vm.trace(v, True, ["procs"], tracer=t)
    kick(vm, k, A.go)
    return [("tracer", t), ("v", v), ("k", k)], vm.messages(t)


def e_link_killed(vm):
    t = vm.spawn_collector()
    v = vm.spawn(sink)
    link = vm.spawn(kill_and_link, v)
    vm.run(timeout=20)
    vm.trace(v, True, ["procs"], tracer=t)
    vm.trace(link, True, ["procs", "receive"], tracer=t)
    kick(vm, link, A.go)
    return [("tracer", t), ("v", v), ("l", link)], vm.messages(t)


def e_link_kill_chain(vm):
    t = vm.spawn_collector()
    w = vm.spawn(trapper)
    vm.run(timeout=20)
    v = vm.spawn(middle, w)
    vm.run(timeout=20)
    k = vm.spawn(kill_dier, v)
    vm.run(timeout=20)
    vm.trace(k, True, ["procs"], tracer=t)
    vm.trace(v, True, ["procs"], tracer=t)
    vm.trace(w, True, ["procs", "receive"], tracer=t)
    kick(vm, k, A.go)
    return [("tracer", t), ("k", k), ("v", v), ("w", w)], vm.messages(t)


def e_link_unlink(vm):
    t = vm.spawn_collector()
    a = vm.spawn(sink)
    b = vm.spawn(linker, a)
    vm.run(timeout=20)
    vm.trace(a, True, ["procs"], tracer=t)
    vm.trace(b, True, ["procs"], tracer=t)
    kick(vm, b, A.go)
    return [("tracer", t), ("a", a), ("b", b)], vm.messages(t)


def _linked_to_a_dier(body, role: str, flags: list):
    """A ``body`` process linked to a ``dier`` that exits with ``boom``,
    traced with ``flags`` (the dier with procs)."""

    def run(vm):
        t, (s,) = _setup(vm, (body,))
        d = vm.spawn(dier, s)
        vm.run(timeout=20)
        vm.trace(s, True, flags, tracer=t)
        vm.trace(d, True, ["procs"], tracer=t)
        kick(vm, d, A.go)
        return [("tracer", t), (role, s), ("dier", d)], vm.messages(t)

    return run


def e_registered_exit(vm):
    t, (r,) = _setup(vm, (registrar, A.diff_reg))
    vm.trace(r, True, ["procs"], tracer=t)
    kick(vm, r, A.go)
    kick(vm, r, A.stop)
    return [("tracer", t), ("r", r)], vm.messages(t)


def e_register_unregister(vm):
    t, (r,) = _setup(vm, (unregistrar, A.diff_unreg))
    vm.trace(r, True, ["procs"], tracer=t)
    kick(vm, r, A.go)
    return [("tracer", t), ("r", r)], vm.messages(t)


def _spawn_scenario(body, flags):
    def run(vm):
        t, (p,) = _setup(vm, (body,))
        vm.trace(p, True, flags, tracer=t)
        kick(vm, p, A.go)
        return [("tracer", t), ("parent", p)], vm.messages(t)

    return run


def _runner_scenario(flags, second=True):
    def run(vm):
        t, (p,) = _setup(vm, (runner,))
        vm.trace(p, True, flags, tracer=t)
        kick(vm, p, A.go)
        if second:
            kick(vm, p, A.go2)
        return [("tracer", t), ("p", p)], vm.messages(t)

    return run


def e_killed_while_waiting(vm):
    t, (p,) = _setup(vm, (runner,))
    vm.trace(p, True, ["running", "exiting", "procs"], tracer=t)
    vm.exit(p, A.kill)
    vm.run(timeout=20)
    return [("tracer", t), ("p", p)], vm.messages(t)


def e_garbage_collection(vm):
    t, (p,) = _setup(vm, (gc_runner,))
    vm.trace(p, True, ["garbage_collection"], tracer=t)
    kick(vm, p, A.go)
    return [("tracer", t), ("p", p)], vm.messages(t)


def e_trace_info_flags(vm):
    t, (p,) = _setup(vm, (sink,))
    vm.trace(
        p,
        True,
        [
            "send",
            "receive",
            "procs",
            "call",
            "running",
            "exiting",
            "garbage_collection",
            "timestamp",
            "arity",
            "return_to",
            "set_on_spawn",
            "set_on_link",
        ],
        tracer=t,
    )
    return [("tracer", t), ("p", p)], [bif("trace_info", vm.trace_info(p, "flags"))]


SCENARIOS = [
    Scenario("send_to_pid", e_send_to_pid),
    Scenario("send_to_dead_pid", e_send_to_dead_pid),
    Scenario("send_to_registered_name", e_send_to_registered_name),
    Scenario("send_to_unregistered_name", e_send_to_unregistered_name),
    Scenario("send_timestamps", e_send_timestamps),
    Scenario("receive_timeout", e_receive_timeout),
    Scenario("link_unlink", e_link_unlink),
    Scenario("link_failures", e_link_failures),
    Scenario("exit_of_itself", e_exit_of_itself),
    Scenario("register_killed", e_register_killed),
    Scenario("link_kill_chain", e_link_kill_chain),
    Scenario("link_killed", e_link_killed),
    Scenario("exiting_not_unlinked", e_exiting_not_unlinked),
    Scenario("set_on_link_child", _spawn_scenario(spawn_linker, ["procs", "set_on_link"])),
    Scenario("exit_unlinks_survivor", _linked_to_a_dier(trapper, "survivor", ["procs", "receive"])),
    Scenario("exit_kills_linked", _linked_to_a_dier(victim, "victim", ["procs"])),
    Scenario("registered_exit", e_registered_exit),
    Scenario("register_unregister", e_register_unregister),
    Scenario("spawn_child", _spawn_scenario(spawner, ["procs"])),
    Scenario("spawn_link_child", _spawn_scenario(spawn_linker, ["procs"])),
    Scenario("set_on_spawn_child", _spawn_scenario(spawn_linker, ["procs", "set_on_spawn"])),
    Scenario("running_exiting", _runner_scenario(["running", "exiting"])),
    Scenario("exiting_only", _runner_scenario(["exiting"])),
    Scenario("running_scheduler_id", _runner_scenario(["running", "scheduler_id"], second=False)),
    Scenario("killed_while_waiting", e_killed_while_waiting),
    Scenario("garbage_collection", e_garbage_collection),
    Scenario("trace_info_flags", e_trace_info_flags),
]

node_results, test_scenario = scenario_tests(__name__, ERLANG_MODULE, ERLANG, SCENARIOS)
