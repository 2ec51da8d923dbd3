"""Differential: seq_trace.

The seq_trace_output_generic row of DESIGN.md section 3: send, 'receive'
and print events with labels and {Lastcnt, Serial} (seq_trace_update_send),
a print with another label, the 'EXIT' wrapping of an exit signal that
carries a token, timestamps, and a send to a dead pid (neither traced nor
counted: 17.x bif.c sends, and so updates the token, only to a live
process).
"""

from __future__ import annotations

import smp
from smp.core.terms import A

from .harness import Scenario, bif, kick, matching, scenario_tests

ERLANG_MODULE = "diff_seq"

ERLANG = r"""
-module(diff_seq).
-compile([export_all, nowarn_export_all]).
-import(diff_harness, [collector/0, msgs/1, kick/2, wait_waiting/1, wait_dead/1]).

%% ---- process bodies
sink() -> receive stop -> ok; _ -> sink() end.
echo() -> receive {From, M} -> From ! M, echo(); stop -> ok end.

client(Server) ->
    receive go -> ok end,
    seq_trace:set_token(label, 17), seq_trace:set_token(send, true),
    seq_trace:set_token('receive', true), seq_trace:set_token(print, true),
    Server ! {self(), hello}, receive hello -> ok end,
    seq_trace:print(17, printed), seq_trace:print(99, not_printed),
    Server ! {self(), again}, receive again -> ok end,
    seq_trace:set_token([]),
    receive stop -> ok end.

dead_sender(Dead) ->
    receive go -> ok end,
    seq_trace:set_token(label, 7), seq_trace:set_token(send, true),
    seq_trace:set_token(print, true),
    Dead ! lost, seq_trace:print(7, after_dead),
    seq_trace:set_token([]),
    receive stop -> ok end.

stamper(Server) ->
    receive go -> ok end,
    seq_trace:set_token(label, 3), seq_trace:set_token(send, true),
    seq_trace:set_token(timestamp, true),
    Server ! {self(), stamped}, receive stamped -> ok end,
    seq_trace:set_token([]),
    receive stop -> ok end.

trapper() ->
    process_flag(trap_exit, true), receive linked -> ok end,
    receive {'EXIT', _, _} -> ok end, receive stop -> ok end.
exiter(Peer) ->
    link(Peer), Peer ! linked, receive go -> ok end,
    seq_trace:set_token(label, 5), seq_trace:set_token(send, true),
    seq_trace:set_token('receive', true),
    exit(bang).
%% links to each of Ss in their order, then exits carrying a token: one
%% traced exit signal a link, in the order the exit sweeps its link tree
link_sweeper(Ss) ->
    [link(S) || S <- Ss], receive go -> ok end,
    seq_trace:set_token(label, 9), seq_trace:set_token(send, true),
    exit(normal).

%% ---- scenarios
seq_send_receive_print() ->
    T = collector(), S = spawn(?MODULE, echo, []), C = spawn(?MODULE, client, [S]),
    wait_waiting(S), wait_waiting(C),
    seq_trace:set_system_tracer(T),
    kick(C, go),
    {[{tracer, T}, {client, C}, {server, S}], msgs(T)}.

seq_dead_pid_send() ->
    T = collector(), D = spawn(?MODULE, sink, []), wait_waiting(D), D ! stop, wait_dead(D),
    C = spawn(?MODULE, dead_sender, [D]), wait_waiting(C),
    seq_trace:set_system_tracer(T),
    kick(C, go),
    {[{tracer, T}, {client, C}, {dead, D}], msgs(T)}.

seq_timestamps() ->
    T = collector(), S = spawn(?MODULE, echo, []), C = spawn(?MODULE, stamper, [S]),
    wait_waiting(S), wait_waiting(C),
    seq_trace:set_system_tracer(T),
    kick(C, go),
    {[{tracer, T}, {client, C}, {server, S}], msgs(T)}.

%% erl_bif_trace.c seq_trace_print_2 (the BIF under seq_trace:print/2): a label
%% that is neither an atom nor a small integer is badarg in 17.x; OTP 21 takes
%% any label (the table).
seq_print_bad_label() ->
    seq_trace:set_token(label, 1),
    R = [try erlang:seq_trace_print(L, hi) catch error:E -> {error, E} end
         || L <- [{a, 1}, 1.0, 1, other]],
    seq_trace:set_token([]),
    {[], [{bif, seq_trace_print, X} || X <- R]}.

seq_exit_signal() ->
    T = collector(), S = spawn(?MODULE, trapper, []), wait_waiting(S),
    E = spawn(?MODULE, exiter, [S]), wait_waiting(E), wait_waiting(S),
    seq_trace:set_system_tracer(T),
    E ! go, wait_dead(E), wait_waiting(S),
    {[{tracer, T}, {exiter, E}, {survivor, S}], msgs(T)}.

seq_exit_link_order() ->
    T = collector(), Ss = lists:sort([spawn(?MODULE, sink, []) || _ <- lists:seq(1, 7)]),
    [wait_waiting(S) || S <- Ss],
    D = spawn(?MODULE, link_sweeper, [Ss]), wait_waiting(D),
    seq_trace:set_system_tracer(T),
    D ! go, wait_dead(D), [wait_waiting(S) || S <- Ss],
    Linked = [{list_to_atom("linked" ++ integer_to_list(I)), S}
              || {I, S} <- lists:zip(lists:seq(1, 7), Ss)],
    {[{tracer, T}, {dier, D} | Linked], msgs(T)}.
"""


# ---- process bodies
async def sink(proc):
    while await proc.receive() != A.stop:
        pass


async def echo(proc):
    while True:
        m = await proc.receive()
        if m == A.stop:
            return
        await proc.send(m[0], m[1])


async def _token(proc, label, *flags):
    await proc.seq_trace(A.label, label)
    for f in flags:
        await proc.seq_trace(f, A.true)


async def client(proc, server):
    await proc.receive(match=matching(A.go))
    await _token(proc, 17, A.send, A["receive"], A.print)
    await proc.send(server, (proc.pid, A.hello))
    await proc.receive(match=matching(A.hello))
    await proc.seq_trace_print(17, A.printed)
    await proc.seq_trace_print(99, A.not_printed)
    await proc.send(server, (proc.pid, A.again))
    await proc.receive(match=matching(A.again))
    await proc.set_token([])
    await proc.receive(match=matching(A.stop))


async def dead_sender(proc, dead):
    await proc.receive(match=matching(A.go))
    await _token(proc, 7, A.send, A.print)
    await proc.send(dead, A.lost)
    await proc.seq_trace_print(7, A.after_dead)
    await proc.set_token([])
    await proc.receive(match=matching(A.stop))


async def stamper(proc, server):
    await proc.receive(match=matching(A.go))
    await _token(proc, 3, A.send, A.timestamp)
    await proc.send(server, (proc.pid, A.stamped))
    await proc.receive(match=matching(A.stamped))
    await proc.set_token([])
    await proc.receive(match=matching(A.stop))


async def trapper(proc):
    await proc.process_flag(A.trap_exit, A.true)
    await proc.receive(match=matching(A.linked))
    await proc.receive(match=lambda m: type(m) is tuple and m[0] == A.EXIT)
    await proc.receive(match=matching(A.stop))


async def exiter(proc, peer):
    await proc.link(peer)
    await proc.send(peer, A.linked)
    await proc.receive(match=matching(A.go))
    await _token(proc, 5, A.send, A["receive"])
    await proc.exit(A.bang)


async def link_sweeper(proc, survivors):
    for s in survivors:
        await proc.link(s)
    await proc.receive(match=matching(A.go))
    await _token(proc, 9, A.send)
    await proc.exit(A.normal)


# ---- the same scenarios on the emulator
def _client_server(body):
    def run(vm):
        t = vm.spawn_collector()
        s = vm.spawn(echo)
        c = vm.spawn(body, s)
        vm.run(timeout=20)
        vm.set_system_seq_tracer(t)
        kick(vm, c, A.go)
        return [("tracer", t), ("client", c), ("server", s)], vm.messages(t)

    return run


def e_seq_dead_pid_send(vm):
    t = vm.spawn_collector()
    d = vm.spawn(sink)
    vm.run(timeout=20)
    kick(vm, d, A.stop)
    c = vm.spawn(dead_sender, d)
    vm.run(timeout=20)
    vm.set_system_seq_tracer(t)
    kick(vm, c, A.go)
    return [("tracer", t), ("client", c), ("dead", d)], vm.messages(t)


async def print_labels(proc, report):
    await proc.seq_trace(A.label, 1)
    out = []
    for label in [(A.a, 1), 1.0, 1, A.other]:
        try:
            out.append(await proc.seq_trace_print(label, A.hi))
        except smp.Error as e:
            out.append((A.error, e.reason))
    await proc.set_token([])
    await proc.send(report, out)


def e_seq_print_bad_label(vm):
    report = vm.spawn_collector()
    vm.spawn(print_labels, report)
    vm.run(timeout=20)
    ((*results,),) = vm.messages(report)
    return [], [bif("seq_trace_print", r) for r in results]


def e_seq_exit_signal(vm):
    t = vm.spawn_collector()
    s = vm.spawn(trapper)
    vm.run(timeout=20)
    e = vm.spawn(exiter, s)
    vm.run(timeout=20)
    vm.set_system_seq_tracer(t)
    kick(vm, e, A.go)
    return [("tracer", t), ("exiter", e), ("survivor", s)], vm.messages(t)


def e_seq_exit_link_order(vm):
    t = vm.spawn_collector()
    survivors = sorted(vm.spawn(sink) for _ in range(7))
    vm.run(timeout=20)
    d = vm.spawn(link_sweeper, survivors)
    vm.run(timeout=20)
    vm.set_system_seq_tracer(t)
    kick(vm, d, A.go)
    linked = [(f"linked{i}", s) for i, s in enumerate(survivors, 1)]
    return [("tracer", t), ("dier", d), *linked], vm.messages(t)


SCENARIOS = [
    Scenario("seq_send_receive_print", _client_server(client)),
    Scenario("seq_dead_pid_send", e_seq_dead_pid_send),
    Scenario("seq_timestamps", _client_server(stamper)),
    Scenario("seq_exit_signal", e_seq_exit_signal),
    Scenario("seq_exit_link_order", e_seq_exit_link_order),
    Scenario("seq_print_bad_label", e_seq_print_bad_label),
]

node_results, test_scenario = scenario_tests(__name__, ERLANG_MODULE, ERLANG, SCENARIOS)
