"""Run one test module's scenarios on a real Erlang node and read back what it traced.

One ``erl -noshell`` per test module: it compiles the harness and the
module's scenario module (both written to a tmp dir, compiled in the node
with ``no_line_info`` so stack frames carry no file/line), runs every
scenario function in turn and writes ``[{Name, Roles, Msgs} | ...]`` with
``term_to_binary``; :func:`smp.wire.etf.decode` reads it.

A scenario function ``Name() -> {Roles, Msgs}`` returns the pids that play
the scenario's roles (``[{RoleName, Pid}]``) and everything its tracers,
monitor and profiler received, in arrival order.  Maps (the logger's
metadata) are written as sorted ``[{Key, Value}]`` lists: the project's terms
have no map type.  Between scenarios the harness resets all tracing, the seq
tracer, the system monitor and the profiler, so scenarios do not leak into
each other.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from smp.core.terms import Atom
from smp.wire.etf import decode

__all__ = ["HARNESS", "OTP_RELEASE", "NodeError", "erl_available", "role_list", "run_node"]

NODE_TIMEOUT = 60

HARNESS = r"""
-module(diff_harness).
-export([run/3, collector/0, msgs/1, wait_waiting/1, wait_dead/1, kick/2, kick_done/2,
         await_msgs/3, settle/1, unmap/1]).

%% Run the scenarios, write the results, halt.
run(Out, Mod, Names) ->
    Results = [run_one(Mod, N) || N <- Names],
    Release = list_to_binary(erlang:system_info(otp_release)),
    ok = file:write_file(Out, term_to_binary({Release, Results})),
    halt(0).

run_one(Mod, Name) ->
    Res = try Mod:Name() of
              {Roles, Msgs} -> {Name, Roles, unmap(Msgs)}
          catch C:R:S -> {Name, error, unmap({C, R, S})}
          end,
    reset(Mod),
    Res.

reset(Mod) ->
    erlang:trace(all, false, [all]),
    erlang:trace_pattern({Mod, '_', '_'}, false, [local, meta, call_count, call_time]),
    erlang:trace_pattern({Mod, '_', '_'}, false, [global]),
    seq_trace:set_system_tracer(false),
    erlang:system_monitor(undefined),
    erlang:system_profile(undefined, []),
    ok.

%% A process that keeps everything it receives.
collector() -> spawn(fun() -> collect([]) end).
collect(Acc) ->
    receive
        {'$diff_get', From} -> From ! {'$diff_msgs', self(), lists:reverse(Acc)}, collect(Acc);
        M -> collect([M | Acc])
    end.

%% What a collector got so far, once every trace message made so far is delivered.
msgs(T) ->
    settle(all),
    T ! {'$diff_get', self()},
    receive {'$diff_msgs', T, L} -> L after 5000 -> error({collector_silent, T}) end.

settle(What) ->
    Ref = erlang:trace_delivered(What),
    receive {trace_delivered, What, Ref} -> ok after 5000 -> error(trace_not_delivered) end.

%% Until P waits in a receive (or is gone): the emulator's run()-until-quiet.
wait_waiting(P) -> wait_waiting(P, erlang:monotonic_time(millisecond) + 10000).
wait_waiting(P, Deadline) ->
    case process_info(P, status) of
        {status, waiting} -> ok;
        undefined -> ok;
        _ ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> error({never_waiting, P, process_info(P, [status, current_function])});
                false -> erlang:yield(), wait_waiting(P, Deadline)
            end
    end.

wait_dead(P) ->
    MRef = monitor(process, P),
    receive {'DOWN', MRef, process, P, _} -> ok after 5000 -> error({still_alive, P}) end.

%% Send Msg to P and wait until P waits again.
kick(P, Msg) -> P ! Msg, wait_waiting(P).

%% Send Msg to P and wait for P's {done, P} (for bodies that wait on ports midway).
kick_done(P, Msg) ->
    P ! Msg,
    receive {done, P} -> wait_waiting(P) after 5000 -> error({not_done, P}) end.

%% A collector's messages once N of them satisfy Pred (events ports make later,
%% in their own tasks); polls with a receive-after, for at most 5 s.
await_msgs(T, Pred, N) -> await_msgs(T, Pred, N, 500).
await_msgs(T, _, _, 0) -> error({too_few_messages, msgs(T)});
await_msgs(T, Pred, N, Tries) ->
    Ms = msgs(T),
    case length(lists:filter(Pred, Ms)) >= N of
        true -> Ms;
        false -> receive after 10 -> await_msgs(T, Pred, N, Tries - 1) end
    end.

unmap(M) when is_map(M) -> lists:sort([{unmap(K), unmap(V)} || {K, V} <- maps:to_list(M)]);
unmap(L) when is_list(L) -> unmap_list(L);
unmap(T) when is_tuple(T) -> list_to_tuple([unmap(E) || E <- tuple_to_list(T)]);
unmap(F) when is_function(F) -> {'$fun', erlang:fun_to_list(F)};
unmap(X) -> X.

unmap_list([H | T]) when is_list(T) -> [unmap(H) | unmap_list(T)];
unmap_list([H | T]) -> [unmap(H) | unmap(T)];
unmap_list([]) -> [].
"""


#: The release otp_differences.py describes.
OTP_RELEASE = b"25"


class NodeError(AssertionError):
    """The node failed: compile errors, a crash, or a timeout (with its output)."""


def erl_available() -> bool:
    return shutil.which("erl") is not None


def _estr(path) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def run_node(tmp: Path, module: str, source: str, names: list[str]) -> tuple[bytes, dict]:
    """Compile ``source`` (module ``module``) with the harness, run ``names``.

    Returns the node's OTP release and ``{name: (roles, msgs)}``; a scenario
    that raised on the node maps to ``("error", {Class, Reason, Stack})``."""
    tmp.mkdir(parents=True, exist_ok=True)
    files = [tmp / "diff_harness.erl", tmp / f"{module}.erl"]
    files[0].write_text(HARNESS)
    files[1].write_text(source)
    out = tmp / "results.bin"
    code = (
        "Opts = [binary, return_errors, no_line_info, nowarn_export_all, nowarn_unused_vars],"
        "lists:foreach(fun(F) -> case compile:file(F, Opts) of"
        " {ok, M, B} -> {module, M} = code:load_binary(M, F, B);"
        ' Err -> io:format(standard_error, "~p~n", [Err]), halt(2) end end, ['
        + ", ".join(_estr(f) for f in files)
        + "]),"
        f"diff_harness:run({_estr(out)}, {module}, [{', '.join(names)}])."
    )
    try:
        r = subprocess.run(
            ["erl", "-noshell", "-noinput", "-eval", code],
            cwd=tmp,
            check=False,
            capture_output=True,
            text=True,
            timeout=NODE_TIMEOUT,
        )
    except subprocess.TimeoutExpired as e:
        raise NodeError(
            f"erl did not finish within {NODE_TIMEOUT} s:\n{e.stdout}\n{e.stderr}"
        ) from None
    if r.returncode != 0 or not out.exists():
        raise NodeError(f"erl failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    release, scenarios = decode(out.read_bytes())
    return release, {name.name: (roles, msgs) for name, roles, msgs in scenarios}


def role_list(roles) -> list[tuple[str, object]]:
    """``[{Name, Pid}]`` from the node (or ``[(name, pid)]`` from the emulator)."""
    return [(r[0].name if type(r[0]) is Atom else str(r[0]), r[1]) for r in roles]
