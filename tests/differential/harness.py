"""A scenario: the same workload on the real node and on the emulator, compared.

A test module holds one Erlang module (``ERLANG``, compiled on the node) and
a list of :class:`Scenario`; each scenario names an Erlang function of that
module (``Name() -> {Roles, Msgs}``) and gives the Python function that runs
the same workload on an emulator and returns ``(roles, msgs)`` the same way.
The Python process bodies live in the test module beside their Erlang twins,
under the same names and arities: their module name is what the node's
module name stands for in the comparison.
:func:`scenario_tests` turns the list into a test per scenario and mode
(nonsmp, and smp with 2 schedulers) and a module fixture that runs the node
once for all of them.

Both sides synchronise by quiescence, not by time: the node waits until a
process waits in ``receive`` (``diff_harness:kick/2``) or says it is done
(``kick_done/2``), the emulator runs until quiet (:func:`kick`); the node's
tracers are read after ``erlang:trace_delivered(all)``.  Monitor and profile
messages go to the monitor or profiler of the moment they are dispatched, on
the node as in the seed, so the node keeps them until the expected messages
have arrived (``await_msgs/3``, a receive-after poll of at most 5 s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

import smp
from smp.core.terms import Atom

from .node import OTP_RELEASE, erl_available, role_list, run_node
from .normalise import compare, normalise

__all__ = ["MODES", "Scenario", "bif", "kick", "matching", "scenario_tests"]

MODES = [pytest.param(("nonsmp", 1), id="nonsmp"), pytest.param(("smp", 2), id="smp2")]

RUN_TIMEOUT = 20


@dataclass(frozen=True)
class Scenario:
    name: str
    emulate: Callable  # (vm) -> (roles, msgs)
    noise: tuple = ()  # optional noise rules (normalise.OPTIONAL_NOISE)
    as_set: Callable | None = None  # messages compared as a set of shapes
    aliases: dict = field(default_factory=dict)  # extra emulator atom -> node atom


async def _kicker(proc, to, msg):
    await proc.send(to, msg)


def kick(vm, to, msg) -> None:
    """``To ! Msg`` from a fresh untraced process, then run until quiet (the
    node's ``diff_harness:kick/2``)."""
    vm.spawn(_kicker, to, msg)
    vm.run(timeout=RUN_TIMEOUT)


def matching(atom) -> Callable:
    """A selective receive's pattern for one atom: ``receive go -> ...``."""
    return lambda m: m == atom


def bif(name: str, result) -> tuple:
    """A BIF result reported among the messages, as the node's scenarios do."""
    return (Atom("bif"), Atom(name), result)


def _record(request, scenario: str, mode: str, status: str, table_lines: int, rules: dict):
    request.node.user_properties.append(
        (
            "differential",
            {
                "scenario": scenario,
                "mode": mode,
                "status": status,
                "table_lines": table_lines,
                "rules": dict(rules),
            },
        )
    )


def scenario_tests(
    module_name: str, erlang_module: str, erlang_source: str, scenarios: list[Scenario]
):
    """The module fixture and the test function for a test module.

    Use as ``node_results, test_scenario = scenario_tests(__name__, ...)``."""
    by_name = {s.name: s for s in scenarios}
    aliases = {Atom(module_name): Atom(erlang_module)}

    @pytest.fixture(scope="module")
    def node_results(tmp_path_factory):
        if not erl_available():
            pytest.skip("no Erlang node: `erl` not on PATH")
        release, results = run_node(
            tmp_path_factory.mktemp(erlang_module), erlang_module, erlang_source, list(by_name)
        )
        if release != OTP_RELEASE:
            pytest.skip(
                f"otp_differences.py describes OTP {OTP_RELEASE.decode()}; "
                f"this node is OTP {release.decode()}"
            )
        return results

    @pytest.mark.interop
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("name", list(by_name))
    def test_scenario(name, mode, node_results, request):
        scn = by_name[name]
        roles_n, msgs_n = node_results[name]
        if roles_n == Atom("error"):
            pytest.fail(f"scenario {name} crashed on the node: {smp.format_term(msgs_n)}")
        kind, n = mode
        label = kind if kind == "nonsmp" else f"smp{n}"
        try:
            with smp.Emulator(mode=kind, schedulers=n) as vm:
                roles_e, msgs_e = scn.emulate(vm)
        except BaseException:
            _record(request, name, label, "differs", 0, {})
            raise
        node = normalise(msgs_n, role_list(roles_n), node=True, noise=scn.noise, as_set=scn.as_set)
        assert node.streams, f"the node traced nothing in {name}: the scenario checks nothing"
        emu = normalise(
            msgs_e,
            role_list(roles_e),
            node=False,
            aliases={**aliases, **scn.aliases},
            noise=scn.noise,
            as_set=scn.as_set,
        )
        diff = compare(node, emu)
        status = "differs" if diff else ("table" if node.table_lines else "exact")
        _record(request, name, label, status, node.table_lines, node.table_rules)
        if diff:
            pytest.fail(
                f"{name} ({label}): the emulator differs from the node beyond "
                f"otp_differences.py\n{diff}",
                pytrace=False,
            )

    return node_results, test_scenario
