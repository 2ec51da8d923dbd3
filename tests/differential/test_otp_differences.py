"""The table of OTP 25 -> 17.x differences itself: each rule on the terms the
OTP 25 node actually sent (copied from the differential runs), and each entry
naming a scenario that exists and a seed line that builds what it says.
Needs no node."""

from __future__ import annotations

from pathlib import Path

import pytest

from smp.core.terms import A, Pid, Port, charlist

from . import test_calls_diff, test_seq_trace_diff, test_sys_diff, test_trace_diff
from .normalise import normalise
from .otp_differences import BY_NAME, DIFFERENCES, DROP, Also, apply_differences

SEED = Path("/work/shared/seed/erl_trace.c")
P, Q, PORT = Pid(80), Pid(81), Port(5)
T = A.trace
MFA = (A.m, A.runner, 0)


DIER, LINKED = Pid(90), [Pid(n) for n in range(100, 107)]


def _exit_send(serial, to):
    return (A.seq_trace, 9, (A.send, (0, serial), DIER, to, (A.EXIT, DIER, A.normal)))


def _one(name, msgs):
    """Apply only the rule ``name``."""
    return BY_NAME[name].rule(list(msgs))


CASES = {
    "spawned_event": ([(T, Q, A.spawned, P, (A.m, A.sink, []))], []),
    "getting_linked_at_spawn_link": (
        [
            (T, Q, A.spawned, P, (A.m, A.sink, [])),
            (T, Q, A.getting_linked, P),
            (T, Q, A.getting_linked, Pid(82)),
        ],
        [(T, Q, A.spawned, P, (A.m, A.sink, [])), (T, Q, A.getting_linked, Pid(82))],
    ),
    "gc_event_names": (
        [
            (T, P, A.gc_major_start, [(A.wordsize, 0), (A.heap_size, 5)]),
            (T, P, A.gc_minor_end, [(A.wordsize, 0), (A.heap_size, 0)]),
        ],
        [(T, P, A.gc_start, [(A.heap_size, 5)]), (T, P, A.gc_end, [(A.heap_size, 0)])],
    ),
    "scheduler_id_after_mfa": (
        [(T, P, A["in"], MFA, 1), (A.trace_ts, P, A.out, MFA, 2, (1, 2, 3))],
        [(T, P, A["in"], 1, MFA), (A.trace_ts, P, A.out, 2, MFA, (1, 2, 3))],
    ),
    "port_getting_linked_at_open": (
        [(T, PORT, A.open, P, A.cat), (T, PORT, A.getting_linked, P)],
        [(T, PORT, A.open, P, A.cat)],
    ),
    "open_port_link_trace": (
        # the link open_port makes is dropped; a later link/1 to the port is traced in 17.x too
        [(T, PORT, A.open, P, A.cat), (T, P, A.link, PORT), (T, P, A.link, PORT)],
        [(T, PORT, A.open, P, A.cat), (T, P, A.link, PORT)],
    ),
    "port_getting_unlinked": (
        [(T, P, A.unlink, PORT), (T, PORT, A.getting_unlinked, P)],
        [(T, P, A.unlink, PORT)],
    ),
    "port_open_subject": ([(T, PORT, A.open, P, A.cat)], [(T, P, A.open, PORT, A.cat)]),
    "killed_scheduled_in": (
        [(T, P, A["in"], MFA), (T, P, A.exit, A.killed), (T, P, A.out_exited, 0)],
        [(T, P, A.in_exiting, 0), (T, P, A.exit, A.killed), (T, P, A.out_exited, 0)],
    ),
    "getting_unlinked_before_exit_message": (
        [(T, P, A.getting_unlinked, Q), (T, P, A["receive"], (A.EXIT, Q, A.boom))],
        [(T, P, A["receive"], (A.EXIT, Q, A.boom)), (T, P, A.getting_unlinked, Q)],
    ),
    "port_start_callback_where": (
        [(T, PORT, A["in"], A.open), (T, PORT, A.out, A.open)],
        [(T, PORT, A["in"], A.start), (T, PORT, A.out, A.start)],
    ),
    "trace_info_flag_order": (
        [(A.bif, A.trace_info, (A.flags, [A.garbage_collection, A.arity, A.timestamp]))],
        [(A.bif, A.trace_info, (A.flags, [A.arity, A.timestamp, A.garbage_collection]))],
    ),
    "seq_trace_print_any_label": (
        [(A.bif, A.seq_trace_print, A.false)] * 3 + [(A.bif, A.seq_trace_print, A.true)],
        [(A.bif, A.seq_trace_print, (A.error, A.badarg))] * 2
        + [(A.bif, A.seq_trace_print, A.false), (A.bif, A.seq_trace_print, A.true)],
    ),
    "trace_info_ports": (
        [(A.bif, A.trace_info_port, (A.flags, [])), (A.bif, A.trace_info_port, (A.tracer, []))],
        [(A.bif, A.trace_info_port, (A.error, A.badarg))] * 2,
    ),
    "emulator_error_report": (
        [
            (
                A.log,
                A.error,
                charlist("Error in process ~p with exit value:~n~p~n"),
                [P, (A.badarg, [])],
                [
                    (A.error_logger, [(A.emulator, A.true), (A.tag, A.error)]),
                    (A.gl, Pid(65)),
                    (A.pid, P),
                    (A.time, 1),
                ],
            )
        ],
        [
            (
                A.notify,
                (
                    A.error,
                    Pid(65),
                    (
                        A.emulator,
                        charlist("~s~n"),
                        [charlist("Error in process <0.80.0> with exit value: {badarg,[]}\n")],
                    ),
                ),
            )
        ],
    ),
    "register_killed": (
        [
            (T, P, A.register, A.foo),
            (T, P, A.exit, A.killed),
            (T, P, A.unregister, A.foo),
        ],
        [(T, P, A.exit, A.killed)],
    ),
    "getting_linked_self": (
        [(T, P, A.link, Pid(82)), (T, P, A.link, P), (T, P, A.link, Q)],
        [
            (T, P, A.link, Pid(82)),
            (T, P, A.link, P),
            (T, P, A.getting_linked, P),
            (T, P, A.link, Q),
        ],
    ),
    "getting_linked_again": (
        # as the node sent them: the other's one getting_linked comes after both calls
        [(T, P, A.link, Q), (T, P, A.link, Q), (T, Q, A.getting_linked, P)],
        [(T, P, A.link, Q), (T, P, A.link, Q), (T, Q, A.getting_linked, P)]
        + [(T, Q, A.getting_linked, P)],
    ),
    "link_exiting": (
        [
            (T, Q, A.link, P),
            (T, P, A.exit, A.killed),
            (T, Q, A["receive"], (A.EXIT, P, A.noproc)),
            (T, Q, A.getting_unlinked, P),
        ],
        [
            (T, Q, A.link, P),
            (T, P, A.getting_linked, Q),
            (T, P, A.exit, A.killed),
            (T, Q, A["receive"], (A.EXIT, P, A.killed)),
            (T, Q, A.getting_unlinked, P),
        ],
    ),
    "link_kill": (
        [
            (T, P, A.exit, A.kill),
            (T, Q, A.exit, A.kill),
            (T, Pid(82), A["receive"], (A.EXIT, Q, A.kill)),
            (T, Pid(82), A["receive"], (A.EXIT, P, A.kill)),
        ],
        [
            (T, P, A.exit, A.kill),
            (T, Q, A.exit, A.killed),
            (T, Pid(82), A["receive"], (A.EXIT, Q, A.killed)),
            (T, Pid(82), A["receive"], (A.EXIT, P, A.kill)),
        ],
    ),
    # seven links made in pid order: the red-black tree's post-order in, the
    # AVL tree's out (serials stay where they are: they count the sends)
    "link_sweep_order": (
        [_exit_send(n, LINKED[k - 1]) for n, k in enumerate((1, 3, 5, 7, 6, 4, 2), 1)],
        [_exit_send(n, LINKED[k - 1]) for n, k in enumerate((1, 3, 2, 5, 7, 6, 4), 1)],
    ),
}


@pytest.mark.parametrize("name", [d.name for d in DIFFERENCES])
def test_rule_rewrites_the_observed_term(name):
    before, after = CASES[name]
    out = _one(name, before)
    assert len(out) == len(before)  # one for each: DROP, the same, another, or Also(...)
    flat = [x for m in out for x in (m if type(m) is Also else (m,))]
    assert [m for m in flat if m is not DROP] == after


def test_rules_leave_17x_terms_alone():
    for before, _ in CASES.values():
        seventeen, changed, _ = apply_differences(before)
        assert changed > 0
        assert apply_differences(seventeen)[1] == 0, seventeen


def test_every_entry_names_a_scenario_and_a_seed_line():
    scenarios = {
        s.name
        for mod in (test_trace_diff, test_calls_diff, test_seq_trace_diff, test_sys_diff)
        for s in mod.SCENARIOS
    }
    lines = SEED.read_text().splitlines() if SEED.exists() else None
    for d in DIFFERENCES:
        assert d.observed_in in scenarios, d.name
        assert d.otp.split(".")[0] in {"18", "19", "20", "21", "22", "23", "24", "25"}, d.name
        if d.seed_line is not None and lines is not None:
            assert 0 < d.seed_line <= len(lines) and lines[d.seed_line - 1].strip(), d.name


def test_normalise_renames_by_role_then_first_appearance():
    ts = (1796, 1, 2)
    side = normalise(
        [
            (T, Q, A.send, (A.hi, Pid(90)), P),
            (A.trace_ts, P, A["receive"], Port(3), ts),
            (A.trace_ts, P, A["receive"], Port(3), (1796, 1, 3)),
        ],
        [("a", P)],
        node=False,
    )
    assert side.streams == {
        "'<P1>'": [(T, A["<P1>"], A.send, (A.hi, A["<P2>"]), A["<a>"])],
        "'<a>'": [
            (A.trace_ts, A["<a>"], A["receive"], A["<Port1>"], A["<T1>"]),
            (A.trace_ts, A["<a>"], A["receive"], A["<Port1>"], A["<T2>"]),
        ],
    }


def test_a_link_to_an_exiting_process_ends_a_caller_that_does_not_trap_exits_killed():
    """17.x links it, so its exit ends the caller killed; 25's noproc ends
    the caller noproc."""
    out = _one(
        "link_exiting",
        [(T, Q, A.link, P), (T, Q, A.exit, A.noproc), (T, P, A.exit, A.killed)],
    )
    assert out[:2] == [(T, Q, A.link, P), (T, Q, A.exit, A.killed)]
    assert out[2] == Also(((T, P, A.getting_linked, Q), (T, P, A.exit, A.killed)))
    # a process dead before the link (never seen exiting killed) stays noproc
    dead = [(T, Q, A.link, P), (T, Q, A.exit, A.noproc)]
    assert _one("link_exiting", dead) == dead
