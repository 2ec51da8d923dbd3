"""Differential: call tracing and match specs.

Rows of DESIGN.md section 3: erts_call_trace (global and local patterns,
arity, timestamps, meta trace, sensitive processes, match-spec bodies
{message, X} with {caller} and {self}, guards, {message, false}),
erts_trace_return ({return_trace}), erts_trace_exception
({exception_trace}, error and throw) and erts_trace_return_to.
"""

from __future__ import annotations

import smp
from smp.core.terms import A

from .harness import Scenario, bif, kick, matching, scenario_tests

ERLANG_MODULE = "diff_calls"

ERLANG = r"""
-module(diff_calls).
-compile([export_all, nowarn_export_all]).
-import(diff_harness, [collector/0, msgs/1, kick/2, wait_waiting/1]).

%% ---- traced functions (emulated with vm.define under the same names)
double(X) -> 2 * X.
fails(error) -> error(badarg);
fails(throw) -> throw(thrown).

%% ---- process bodies
caller(X) -> receive go -> ok end, Y = ?MODULE:double(X), _ = ?MODULE:double(Y), receive stop -> ok end.
catcher(How) -> receive go -> ok end, _ = (catch ?MODULE:fails(How)), receive stop -> ok end.
local_caller(X) -> receive go -> ok end, _ = double(X), receive stop -> ok end.
sensitive_caller() ->
    receive go -> ok end,
    process_flag(sensitive, true), _ = ?MODULE:double(1),
    process_flag(sensitive, false), _ = ?MODULE:double(2),
    receive stop -> ok end.

%% ---- scenarios
traced_caller(Body, Args, Flags, Pattern, PFlags) ->
    T = collector(), P = spawn(?MODULE, Body, Args), wait_waiting(P),
    erlang:trace_pattern(Pattern, proplists:get_value(ms, PFlags, true),
                         proplists:get_value(how, PFlags, [global])),
    1 = erlang:trace(P, true, [{tracer, T} | Flags]),
    kick(P, go),
    {[{tracer, T}, {p, P}], msgs(T)}.

call_return_caller() ->
    traced_caller(caller, [3], [call], {?MODULE, double, 1},
                  [{ms, [{'_', [], [{return_trace}, {message, {caller}}]}]}]).

call_arity_self() ->
    traced_caller(caller, [3], [call, arity], {?MODULE, double, 1},
                  [{ms, [{['$1'], [], [{message, {self}}]}]}]).

call_guard_message() ->
    traced_caller(caller, [3], [call], {?MODULE, double, 1},
                  [{ms, [{['$1'], [{'>', '$1', 3}], [{message, big}]},
                         {'_', [], [{message, false}]}]}]).

call_timestamp() ->
    traced_caller(caller, [3], [call, timestamp], {?MODULE, double, 1}, []).

exception_error() ->
    traced_caller(catcher, [error], [call], {?MODULE, fails, 1},
                  [{ms, [{'_', [], [{exception_trace}]}]}]).

exception_throw() ->
    traced_caller(catcher, [throw], [call], {?MODULE, fails, 1},
                  [{ms, [{'_', [], [{exception_trace}]}]}]).

local_return_to() ->
    traced_caller(local_caller, [5], [call, return_to], {?MODULE, double, 1},
                  [{how, [local]}]).

sensitive_not_traced() ->
    traced_caller(sensitive_caller, [], [call], {?MODULE, double, 1}, []).

%% erl_bif_trace.c trace_info_func: undefined for a function the node lacks,
%% false for an untraced one whatever the key, else the pattern's parts.
trace_info_func() ->
    F = {?MODULE, double, 1}, None = {?MODULE, nothere, 1},
    R0 = [erlang:trace_info(F, traced), erlang:trace_info(F, all),
          erlang:trace_info(None, traced), erlang:trace_info(None, whatever)],
    erlang:trace_pattern(F, true, [global]),
    R1 = [erlang:trace_info(F, all)],
    erlang:trace_pattern(F, [{'_', [], [{return_trace}]}], [local]),
    R2 = [erlang:trace_info(F, traced), erlang:trace_info(F, match_spec),
          erlang:trace_info(F, all)],
    erlang:trace_pattern(F, false, [local]),
    T = collector(),
    erlang:trace_pattern(F, true, [{meta, T}]),
    R3 = [erlang:trace_info(F, meta), erlang:trace_info(F, meta_match_spec),
          erlang:trace_info(F, traced)],
    erlang:trace_pattern(F, false, [meta]),
    {[{tracer, T}], [{bif, trace_info, R} || R <- R0 ++ R1 ++ R2 ++ R3]}.

meta_return() ->
    T = collector(), P = spawn(?MODULE, caller, [7]), wait_waiting(P),
    erlang:trace_pattern({?MODULE, double, 1}, [{'_', [], [{return_trace}]}], [{meta, T}]),
    kick(P, go),
    {[{tracer, T}, {p, P}], msgs(T)}.
"""


# ---- emulated functions and process bodies
async def double(proc, x):
    return 2 * x


async def fails(proc, how):
    if how == A.error:
        raise smp.Error(A.badarg)
    raise smp.Throw(A.thrown)


async def caller(proc, x):
    await proc.receive(match=matching(A.go))
    y = await proc.call("diff_calls", "double", [x])
    await proc.call("diff_calls", "double", [y])
    await proc.receive(match=matching(A.stop))


async def catcher(proc, how):
    await proc.receive(match=matching(A.go))
    try:
        await proc.call("diff_calls", "fails", [how])
    except (smp.Error, smp.Throw):
        pass
    await proc.receive(match=matching(A.stop))


async def local_caller(proc, x):
    await proc.receive(match=matching(A.go))
    await proc.call("diff_calls", "double", [x], local=True)
    await proc.receive(match=matching(A.stop))


async def sensitive_caller(proc):
    await proc.receive(match=matching(A.go))
    await proc.process_flag(A.sensitive, A.true)
    await proc.call("diff_calls", "double", [1])
    await proc.process_flag(A.sensitive, A.false)
    await proc.call("diff_calls", "double", [2])
    await proc.receive(match=matching(A.stop))


# ---- the same scenarios on the emulator
_W = A["_"]


def _define(vm):
    vm.define("diff_calls", "double", double)
    vm.define("diff_calls", "fails", fails)


def _traced_caller(body, args, flags, mfa, ms=True, how=("global",)):
    def run(vm):
        _define(vm)
        t = vm.spawn_collector()
        p = vm.spawn(body, *args)
        vm.run(timeout=20)
        vm.trace_pattern(mfa, ms, list(how))
        vm.trace(p, True, flags, tracer=t)
        kick(vm, p, A.go)
        return [("tracer", t), ("p", p)], vm.messages(t)

    return run


def e_meta_return(vm):
    _define(vm)
    t = vm.spawn_collector()
    p = vm.spawn(caller, 7)
    vm.run(timeout=20)
    vm.trace_pattern(("diff_calls", "double", 1), [(_W, [], [(A.return_trace,)])], [("meta", t)])
    kick(vm, p, A.go)
    return [("tracer", t), ("p", p)], vm.messages(t)


def e_trace_info_func(vm):
    _define(vm)
    f, none = DOUBLE, ("diff_calls", "nothere", 1)
    ti = vm.trace_info
    r = [ti(f, "traced"), ti(f, "all"), ti(none, "traced"), ti(none, "whatever")]
    vm.trace_pattern(f, True, ["global"])
    r += [ti(f, "all")]
    vm.trace_pattern(f, [(_W, [], [(A.return_trace,)])], ["local"])
    r += [ti(f, "traced"), ti(f, "match_spec"), ti(f, "all")]
    vm.trace_pattern(f, False, ["local"])
    t = vm.spawn_collector()
    vm.trace_pattern(f, True, [("meta", t)])
    r += [ti(f, "meta"), ti(f, "meta_match_spec"), ti(f, "traced")]
    vm.trace_pattern(f, False, ["meta"])
    return [("tracer", t)], [bif("trace_info", x) for x in r]


DOUBLE = ("diff_calls", "double", 1)
FAILS = ("diff_calls", "fails", 1)
EXCEPTION_MS = [(_W, [], [(A.exception_trace,)])]

SCENARIOS = [
    Scenario("trace_info_func", e_trace_info_func),
    Scenario(
        "call_return_caller",
        _traced_caller(
            caller,
            (3,),
            ["call"],
            DOUBLE,
            [(_W, [], [(A.return_trace,), (A.message, (A.caller,))])],
        ),
    ),
    Scenario(
        "call_arity_self",
        _traced_caller(
            caller, (3,), ["call", "arity"], DOUBLE, [([A["$1"]], [], [(A.message, (A.self,))])]
        ),
    ),
    Scenario(
        "call_guard_message",
        _traced_caller(
            caller,
            (3,),
            ["call"],
            DOUBLE,
            [
                ([A["$1"]], [(A[">"], A["$1"], 3)], [(A.message, A.big)]),
                (_W, [], [(A.message, A.false)]),
            ],
        ),
    ),
    Scenario("call_timestamp", _traced_caller(caller, (3,), ["call", "timestamp"], DOUBLE)),
    Scenario("exception_error", _traced_caller(catcher, (A.error,), ["call"], FAILS, EXCEPTION_MS)),
    Scenario("exception_throw", _traced_caller(catcher, (A.throw,), ["call"], FAILS, EXCEPTION_MS)),
    Scenario(
        "local_return_to",
        _traced_caller(local_caller, (5,), ["call", "return_to"], DOUBLE, how=("local",)),
    ),
    Scenario("sensitive_not_traced", _traced_caller(sensitive_caller, (), ["call"], DOUBLE)),
    Scenario("meta_return", e_meta_return),
]

node_results, test_scenario = scenario_tests(__name__, ERLANG_MODULE, ERLANG, SCENARIOS)
