"""Every rule of ``smp.core.state`` against the seed: the global tracer state
of ``erl_trace.c`` (``sys_trace_rwmtx``), one test per rule."""

from __future__ import annotations

import pickle

import pytest

from smp.core.errors import BadArg
from smp.core.flags import F_TIMESTAMP, F_TRACE_PROCS, F_TRACE_SEND, F_TRACER, TRACEE_FLAGS
from smp.core.state import (
    FALSE,
    NIL,
    STATE_OPS,
    STATE_READS,
    UNDEFINED,
    Snapshot,
    TracerState,
    apply_state_op,
)
from smp.core.terms import A, Pid, Port

P1, P2, P3 = Pid(71), Pid(72), Pid(73)
PORT, DEAD_PORT = Port(23), Port(26)
NOT_TRACEE = F_TRACER  # a bit outside TRACEE_FLAGS


class Live:
    def __init__(self, alive=(), ports=()):
        self.alive, self.ports = set(alive), set(ports)

    def is_alive(self, pid):
        return pid in self.alive

    def is_valid_tracer_port(self, port):
        return port in self.ports


def new_state(alive=(P1, P2), ports=(PORT,), **fields) -> TracerState:
    st = TracerState(liveness=Live(alive, ports))
    for k, v in fields.items():
        setattr(st, k, v)
    return st


# ---------------------------------------------------------------- the initial state (95-110)
def test_the_initial_state_is_erts_init_trace_s():
    """seed 95-110: no cpu timestamp, monitor and profiler cleared
    (``erts_system_monitor_clear``, ``erts_system_profile_clear``), default
    flags ``F_INITIAL_TRACE_FLAGS`` (0 outside DEBUG), default tracer NIL, seq
    tracer ``false``; seed 188: ``active_sched`` a zeroed static."""
    st = TracerState(liveness=Live())
    assert st.snapshot() == Snapshot(
        0, NIL, 0, False, FALSE, NIL, 0, 0, 0, False, False, NIL, False, False, False, False
    )
    assert st.active_sched == 0
    assert st.system_monitor_get() is UNDEFINED and st.system_profile_get() is UNDEFINED
    assert (st.monitor_enabled(), st.profile_enabled()) == (False, False)
    assert st.get_default_tracing() == (0, NIL)
    assert st.get_system_seq_tracer() is FALSE
    assert (FALSE, UNDEFINED) == (A.false, A.undefined) and NIL is None


# ---------------------------------------------------------------- versions and snapshots
def test_every_change_bumps_the_version_and_reports_a_snapshot():
    seen: list[Snapshot] = []
    st = new_state(on_change=seen.append)
    st.set_system_monitor(P1, 5)
    assert st.version == 1
    assert seen == [st.snapshot()]
    assert seen[0].system_monitor == P1 and seen[0].long_gc == 5 and seen[0].version == 1


def test_load_takes_every_field_without_reporting_a_change():
    seen: list[Snapshot] = []
    src = new_state()
    src.set_system_monitor(P1, 1, 2, 3, True, False)
    src.set_system_profile(P2, True, True, False, True)
    src.change_default_tracing(True, F_TRACE_SEND, P1, True)
    src.set_system_seq_tracer(PORT)
    snap = src.snapshot()
    dst = new_state(on_change=seen.append)
    dst.load(snap)
    assert dst.snapshot() == snap and dst.version == snap.version == 4
    assert seen == []


def test_a_snapshot_pickles_by_its_fields():
    st = new_state()
    st.set_system_monitor(P1, 1, 2, 3, False, True)
    snap = st.snapshot()
    assert snap.__reduce__() == (Snapshot, tuple(getattr(snap, f) for f in Snapshot.__slots__))
    assert pickle.loads(pickle.dumps(snap)) == snap


# ---------------------------------------------------------------- seq tracer (263-291)
def test_set_system_seq_tracer_validates_and_returns_the_old_one():
    """seed 263-281: ``false`` is always accepted, a pid must be alive, a port
    a valid tracer port; anything else is refused (THE_NON_VALUE, badarg)."""
    st = new_state()
    assert st.set_system_seq_tracer(P3) is None  # not alive
    assert st.set_system_seq_tracer(DEAD_PORT) is None
    assert st.set_system_seq_tracer(A.somebody) is None
    assert st.version == 0
    assert st.set_system_seq_tracer(P1) is FALSE
    assert st.set_system_seq_tracer(PORT) == P1
    assert st.set_system_seq_tracer(FALSE) == PORT
    assert st.get_system_seq_tracer() is FALSE
    assert st.version == 3


# ---------------------------------------------------------------- default tracing (236-325)
def test_change_default_tracing_sets_and_clears_exactly_the_given_flags():
    """seed 290-295: ``|= *flagsp`` or ``&= ~(*flagsp)``."""
    st = new_state()
    flags, tracer = st.change_default_tracing(True, F_TRACE_SEND | F_TRACE_PROCS, P1)
    assert (flags, tracer) == (F_TRACE_SEND | F_TRACE_PROCS, P1)
    assert st.change_default_tracing(True, F_TIMESTAMP) == (
        F_TRACE_SEND | F_TRACE_PROCS | F_TIMESTAMP,
        P1,
    )
    assert st.change_default_tracing(False, F_TRACE_SEND) == (F_TRACE_PROCS | F_TIMESTAMP, P1)
    assert st.default_trace_flags == F_TRACE_PROCS | F_TIMESTAMP
    assert st.version == 3


def test_change_default_tracing_without_flags_or_tracer_keeps_them():
    """seed 290, 296: ``flagsp``/``tracerp`` NULL: left as they are."""
    st = new_state()
    st.change_default_tracing(True, F_TRACE_SEND, P1)
    assert st.change_default_tracing(False, None) == (F_TRACE_SEND, P1)
    assert st.change_default_tracing(True, None, P2) == (F_TRACE_SEND, P2)
    assert st.default_cpu_timestamp is False
    assert st.change_default_tracing(True, None, cpu_timestamp=True) == (F_TRACE_SEND, P2)
    assert st.default_cpu_timestamp is True
    st.change_default_tracing(True, None)
    assert st.default_cpu_timestamp is True
    st.change_default_tracing(True, None, cpu_timestamp=False)
    assert st.default_cpu_timestamp is False


def test_no_tracee_flags_left_makes_the_default_tracer_nil():
    """seed 239-240: ``!(default_trace_flags & TRACEE_FLAGS)``: tracer NIL,
    then seed 242-243 masks the flags."""
    st = new_state()
    st.change_default_tracing(True, F_TRACE_SEND, P1)
    assert st.change_default_tracing(False, F_TRACE_SEND) == (0, NIL)
    assert st.default_tracer is NIL
    st.default_trace_flags, st.default_tracer = NOT_TRACEE, P1
    assert st.get_default_tracing() == (NOT_TRACEE, NIL)


def test_a_nil_default_tracer_masks_the_flags():
    """seed 242-243: ``is_nil(default_tracer)``: ``&= ~TRACEE_FLAGS``."""
    st = new_state(default_trace_flags=F_TRACE_SEND | NOT_TRACEE)
    assert st.get_default_tracing() == (NOT_TRACEE, NIL)


@pytest.mark.parametrize("tracer", [P3, DEAD_PORT])
def test_an_invalid_default_tracer_is_reset(tracer):
    """seed 244-254: a pid not alive, a port not a valid tracer port:
    ``reset_tracer``."""
    st = new_state(default_trace_flags=F_TRACE_SEND | NOT_TRACEE, default_tracer=tracer)
    assert st.get_default_tracing() == (NOT_TRACEE, NIL)
    assert st.version == 1


@pytest.mark.parametrize("tracer", [P1, PORT])
def test_a_valid_default_tracer_is_kept_and_reading_changes_nothing(tracer):
    """seed 244-258, 319-325: a live pid or valid port: both kept; a read
    that resets nothing is no change (no version)."""
    st = new_state(default_trace_flags=F_TRACE_SEND, default_tracer=tracer)
    assert st.get_default_tracing() == (F_TRACE_SEND, tracer)
    assert st.version == 0


def test_the_default_tracer_exiting_becomes_nil_with_its_flags_masked():
    """seed 201-207: ``default_tracer = NIL; default_trace_flags &=
    TRACEE_FLAGS`` (the seed keeps the tracee bits and drops the others)."""
    st = new_state(default_trace_flags=F_TRACE_SEND | NOT_TRACEE, default_tracer=P1)
    assert st.trace_check_exiting(P1, smp=True)
    assert (st.default_tracer, st.default_trace_flags) == (NIL, F_TRACE_SEND)
    assert st.default_trace_flags & TRACEE_FLAGS == F_TRACE_SEND
    # the next read: the tracer NIL masks the rest (seed 242-243)
    assert st.get_default_tracing() == (0, NIL)


# ---------------------------------------------------------------- system monitor
def test_set_system_monitor_keeps_each_option_in_its_place():
    st = new_state()
    st.set_system_monitor(P1, 11, 22, 33, True, False)
    assert (st.system_monitor, st.long_gc, st.long_schedule, st.large_heap) == (P1, 11, 22, 33)
    assert (st.busy_port, st.busy_dist_port) == (True, False)
    assert st.get_system_monitor() == P1
    st.set_system_monitor(P2, 0, 0, 0, False, True)
    assert (st.busy_port, st.busy_dist_port) == (False, True)
    assert st.version == 2


def test_system_monitor_get_lists_the_options_as_erl_bif_info_builds_them():
    """``system_monitor/0``: ``{Pid, Options}``, the options CONSed in the
    order long_gc, long_schedule, large_heap, busy_port, busy_dist_port."""
    st = new_state()
    st.set_system_monitor(P1, 11, 22, 33, True, True)
    assert st.system_monitor_get() == (
        P1,
        [
            A.busy_dist_port,
            A.busy_port,
            (A.large_heap, 33),
            (A.long_schedule, 22),
            (A.long_gc, 11),
        ],
    )
    st.set_system_monitor(P1)
    assert st.system_monitor_get() == (P1, [])
    st.system_monitor_clear()
    assert st.system_monitor_get() is UNDEFINED


@pytest.mark.parametrize(
    "option",
    [
        {"long_gc": 1},
        {"long_schedule": 1},
        {"large_heap": 1},
        {"busy_port": True},
        {"busy_dist_port": True},
    ],
)
def test_each_monitor_option_alone_enables_the_monitor(option):
    """seed 3167-3173: the monitor is disabled only when every option is off."""
    assert new_state(**option).monitor_enabled() is True
    assert new_state().monitor_enabled() is False


def test_system_monitor_clear_resets_every_option():
    """``erts_system_monitor_clear``."""
    st = new_state()
    st.set_system_monitor(P1, 1, 2, 3, True, True)
    st.system_monitor_clear()
    assert (st.system_monitor, st.long_gc, st.long_schedule, st.large_heap) == (NIL, 0, 0, 0)
    assert (st.busy_port, st.busy_dist_port) == (False, False)


# ---------------------------------------------------------------- system profile (191-196)
def test_set_system_profile_keeps_each_option_in_its_place():
    st = new_state()
    st.set_system_profile(P1, True, False, True, False)
    assert (st.system_profile, st.profile_scheduler, st.profile_runnable_procs) == (
        P1,
        True,
        False,
    )
    assert (st.profile_runnable_ports, st.profile_exclusive) == (True, False)
    st.set_system_profile(P2, False, True, False, True)
    assert (st.profile_scheduler, st.profile_runnable_procs) == (False, True)
    assert (st.profile_runnable_ports, st.profile_exclusive) == (False, True)
    assert st.get_system_profile() == P2 and st.version == 2


def test_profiling_the_scheduler_sets_up_the_active_count():
    """seed 191-196: ``erts_system_profile_setup_active_schedulers`` when
    ``scheduler`` is turned on; not otherwise."""
    st = new_state()
    st.set_system_profile(P1, False, True, False, False, active_schedulers=3)
    assert st.active_sched == 0
    st.set_system_profile(P1, True, False, False, False)
    assert st.active_sched == 0
    st.set_system_profile(P1, True, False, False, False, active_schedulers=3)
    assert st.active_sched == 3
    st.set_system_profile(P1, True, False, False, False, active_schedulers=0)
    assert st.active_sched == 0


def test_system_profile_get_lists_the_options_as_erl_bif_trace_builds_them():
    st = new_state()
    st.set_system_profile(P1, True, True, True, True)
    assert st.system_profile_get() == (
        P1,
        [A.exclusive, A.scheduler, A.runnable_procs, A.runnable_ports],
    )
    st.set_system_profile(P1)
    assert st.system_profile_get() == (P1, [])
    st.system_profile_clear()
    assert st.system_profile_get() is UNDEFINED


@pytest.mark.parametrize(
    "option",
    [
        {"profile_scheduler": True},
        {"profile_runnable_procs": True},
        {"profile_runnable_ports": True},
        {"profile_exclusive": True},
    ],
)
def test_each_profile_option_alone_enables_the_profiler(option):
    """seed 3179-3184: disabled only when every option is off."""
    assert new_state(**option).profile_enabled() is True
    assert new_state().profile_enabled() is False


def test_system_profile_clear_resets_every_option():
    st = new_state()
    st.set_system_profile(P1, True, True, True, True)
    st.system_profile_clear()
    assert (st.system_profile, st.profile_scheduler, st.profile_runnable_procs) == (
        NIL,
        False,
        False,
    )
    assert (st.profile_runnable_ports, st.profile_exclusive) == (False, False)


# ---------------------------------------------------------------- exits (198-261)
def full_state() -> TracerState:
    st = new_state(default_trace_flags=F_TRACE_SEND, default_tracer=P1)
    st.system_seq_tracer = P1
    st.set_system_monitor(P1, 1, 2, 3, True, True)
    st.set_system_profile(P1, True, True, True, True)
    return st


@pytest.mark.parametrize("smp", [True, False])
def test_an_exiting_process_that_is_nothing_resets_nothing(smp):
    """seed 244-261: ``reset`` stays 0: no ``exiting_reset``."""
    st = full_state()
    before = st.snapshot()
    assert st.trace_check_exiting(P2, smp) is False
    assert st.snapshot() == before


def test_nil_never_exits():
    """An exit is always of a pid or a port: NIL (an unset monitor) is not
    part of the state even where a field is NIL."""
    st = new_state(long_gc=5, profile_scheduler=True)
    assert st.trace_check_exiting(NIL, smp=False) is False
    assert (st.long_gc, st.profile_scheduler, st.version) == (5, True, 0)


@pytest.mark.parametrize(
    "field,value",
    [
        ("default_tracer", P2),
        ("system_seq_tracer", P2),
        ("system_monitor", P2),
        ("system_profile", P2),
    ],
)
def test_each_part_of_the_state_is_reset_when_it_exits(field, value):
    """seed 244-256: any of the four equal to ``exiting`` resets, and only
    that one (seed 200-229)."""
    st = full_state()
    if field == "default_tracer":
        st.default_tracer = value
    else:
        setattr(st, field, value)
    assert st.trace_check_exiting(value, smp=True) is True
    expected = {
        "default_tracer": NIL,
        "system_seq_tracer": FALSE,
        "system_monitor": NIL,
        "system_profile": NIL,
    }
    for f, reset in expected.items():
        assert getattr(st, f) == (reset if f == field else P1), f


def test_exiting_seq_tracer_becomes_false():
    """seed 209-214."""
    st = new_state(system_seq_tracer=PORT)
    assert st.trace_check_exiting(PORT, smp=True)
    assert st.system_seq_tracer is FALSE and st.version == 1


def test_exiting_monitor_and_profiler_smp_keep_their_options():
    """seed 215-229 (ERTS_SMP): only the receiver becomes NIL; "Let the trace
    message dispatcher clear flags"."""
    st = full_state()
    st.exiting_reset(P1, smp=True)
    assert (st.system_monitor, st.long_gc, st.long_schedule, st.large_heap) == (NIL, 1, 2, 3)
    assert (st.busy_port, st.busy_dist_port) == (True, True)
    assert (st.system_profile, st.profile_scheduler, st.profile_runnable_procs) == (NIL, True, True)
    assert (st.profile_runnable_ports, st.profile_exclusive) == (True, True)


def test_exiting_monitor_and_profiler_nonsmp_are_cleared():
    """seed 215-229 (not ERTS_SMP): ``erts_system_monitor_clear`` and
    ``erts_system_profile_clear``."""
    st = full_state()
    st.exiting_reset(P1, smp=False)
    assert (st.system_monitor, st.long_gc, st.long_schedule, st.large_heap) == (NIL, 0, 0, 0)
    assert (st.busy_port, st.busy_dist_port) == (False, False)
    assert (st.system_profile, st.profile_scheduler, st.profile_runnable_procs) == (
        NIL,
        False,
        False,
    )
    assert (st.profile_runnable_ports, st.profile_exclusive) == (False, False)
    assert st.system_seq_tracer is FALSE and st.default_tracer is NIL


# ---------------------------------------------------------------- failure side effects
def test_seq_tracer_failed_resets_only_the_same_tracer():
    """seed 3160-3165."""
    st = new_state(system_seq_tracer=P1)
    st.seq_tracer_failed(P2)
    assert (st.system_seq_tracer, st.version) == (P1, 0)
    st.seq_tracer_failed(P1)
    assert (st.system_seq_tracer, st.version) == (FALSE, 1)
    # a message that waited while the seq tracer was turned off fails to
    # `false`: the state is what the reset would make, so no new version
    # (stress's replay took the bump for a reset the journal lacked)
    st.seq_tracer_failed(FALSE)
    assert (st.system_seq_tracer, st.version) == (FALSE, 1)


def test_monitor_failed():
    """seed 3166-3177: NIL with everything off: nothing; the monitor itself
    or NIL: cleared; another receiver: nothing."""
    st = new_state()
    assert st.monitor_failed(NIL) is False and st.version == 0
    st.set_system_monitor(P1, 0, 0, 0, False, True)
    assert st.monitor_failed(P2) is False
    assert (st.system_monitor, st.busy_dist_port, st.version) == (P1, True, 1)
    assert st.monitor_failed(P1) is True
    assert (st.system_monitor, st.busy_dist_port, st.version) == (NIL, False, 2)
    st.large_heap = 8
    assert st.monitor_failed(NIL) is True
    assert (st.large_heap, st.version) == (0, 3)


def test_profile_failed():
    """seed 3178-3187, as the monitor."""
    st = new_state()
    assert st.profile_failed(NIL) is False and st.version == 0
    st.set_system_profile(P1, False, False, False, True)
    assert st.profile_failed(P2) is False
    assert (st.system_profile, st.profile_exclusive, st.version) == (P1, True, 1)
    assert st.profile_failed(P1) is True
    assert (st.system_profile, st.profile_exclusive, st.version) == (NIL, False, 2)
    st.profile_runnable_procs = True
    assert st.profile_failed(NIL) is True
    assert (st.profile_runnable_procs, st.version) == (False, 3)


# ---------------------------------------------------------------- the frame operations
def test_state_ops_name_the_methods_and_the_reads_only_read():
    assert STATE_OPS == {
        name: getattr(TracerState, name)
        for name in (
            "change_default_tracing",
            "get_default_tracing",
            "set_system_seq_tracer",
            "get_system_seq_tracer",
            "set_system_monitor",
            "system_monitor_get",
            "system_monitor_clear",
            "set_system_profile",
            "system_profile_get",
            "system_profile_clear",
        )
    }
    assert STATE_READS == {
        "get_default_tracing",
        "get_system_seq_tracer",
        "system_monitor_get",
        "system_profile_get",
    }
    st = full_state()
    before = st.snapshot()
    for op in STATE_READS:
        apply_state_op(st, op, ())
    assert st.snapshot() == before


def test_apply_state_op_runs_the_named_operation():
    st = new_state()
    assert apply_state_op(st, "set_system_seq_tracer", (P1,)) is FALSE
    assert st.system_seq_tracer == P1
    assert apply_state_op(st, "change_default_tracing", (True, F_TRACE_SEND, P2)) == (
        F_TRACE_SEND,
        P2,
    )
    with pytest.raises(BadArg, match="bad state operation"):
        apply_state_op(st, "get_system_seq_tracer", [])  # arguments not a tuple
    with pytest.raises(BadArg, match="state operation get_system_seq_tracer: "):
        apply_state_op(st, "get_system_seq_tracer", (1,))


@pytest.mark.parametrize("kind", ["monitor", "profile"])
def test_the_receiver_itself_is_cleared_even_with_every_option_off(kind):
    """seed 3167-3176 / 3179-3185: "everything is disabled" skips only a NIL
    receiver; the monitor (profiler) itself is cleared whatever its options."""
    st = new_state()
    if kind == "monitor":
        st.set_system_monitor(P1)
        assert st.monitor_failed(P1) is True
        assert st.system_monitor is NIL
    else:
        st.set_system_profile(P1)
        assert st.profile_failed(P1) is True
        assert st.system_profile is NIL
    assert st.version == 2


def test_a_snapshot_is_immutable():
    snap = new_state().snapshot()
    with pytest.raises(AttributeError):
        snap.version = 9
    assert hash(snap) == hash(new_state().snapshot())
