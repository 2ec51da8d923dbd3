#!/usr/bin/env escript
%%! -sname node1@host
%% Write the node1.trace the documentation reads, on a node named
%% node1@host with dbg's file trace port: a send, its receive and a call
%% with a timestamp.  Usage: escript node1_trace.escript FILE
main([File]) ->
    Recv = spawn(fun R() -> receive _ -> R() end end),
    Sender = spawn(fun() -> receive go -> Recv ! {ping, 1} end end),
    Caller = spawn(fun() -> receive go -> lists:seq(1, 3) end end),
    {ok, _} = dbg:tracer(port, dbg:trace_port(file, File)),
    {ok, _} = dbg:p(Sender, [s]),
    {ok, _} = dbg:p(Recv, [r]),
    {ok, _} = dbg:p(Caller, [c, timestamp]),
    {ok, _} = dbg:tpl(lists, seq, 2, []),
    [begin
         MRef = monitor(process, P),
         P ! go,
         receive {'DOWN', MRef, _, _, _} -> ok end,
         %% (Recv takes the ping, traced, before it answers this: on a
         %% busy machine it did so after the call was traced)
         _ = process_info(Recv, message_queue_len)
     end
     || P <- [Sender, Caller]],
    ok = dbg:flush_trace_port(),
    dbg:stop();
main(_) ->
    io:format(standard_error, "usage: escript node1_trace.escript FILE~n", []),
    halt(2).
