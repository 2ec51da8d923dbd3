"""The trace points of ``schedulers.tracepoints`` against the seed, on one
scheduler driven in the test process (as ``test_nonsmp_rules`` does for the
tracer mark): the nonsmp build's make-time rules (``ERTS_GET_TRACER_REF``,
``send_to_port`` with its fake schedule pair, ``profile_send``, the monitor
and error-logger lookups), and, for the smp build, what each trace point
hands to the dispatcher's queue (``enqueue_sys_msg``)."""

from __future__ import annotations

import io

import pytest

from schedulers.engine import Node
from schedulers.process import EXITED, EXITING
from smp.core import messages as M
from smp.core.flags import (
    F_TIMESTAMP,
    F_TRACE_PROCS,
    F_TRACE_SCHED,
    F_TRACE_SCHED_NO,
    F_TRACE_SEND,
    F_TRACER,
    TRACEE_FLAGS,
)
from smp.core.state import NIL
from smp.core.terms import A, Pid
from smp.ports.traceport import MemoryTracePort

T, TS = A.trace, A.trace_ts
MFA = (A.m, A.f, 1)
RUNNING_TS = F_TRACE_SCHED | F_TIMESTAMP


async def idle(proc):
    await proc.receive()


async def done(proc):
    return None


def is_ts(ts) -> bool:
    return type(ts) is tuple and len(ts) == 3 and all(type(x) is int for x in ts)


class Sched:
    """One nonsmp scheduler in the test process, with helpers."""

    def __init__(self, smp=False, transport=None, sched_id=1, nsched=1):
        self.err = io.StringIO()
        self.node = Node(
            sched_id=sched_id, nsched=nsched, smp=smp, transport=transport, stderr=self.err
        )

    def proc(self, fun=idle, args=(), tracer_mark=False):
        p = self.node.spawn_local(self.node.new_pid(), fun, args, kept=True)
        self.run()  # to its first receive, untraced
        if tracer_mark:
            p.flags |= F_TRACER
        return p

    def port(self, heavy_every=0):
        port = self.node.new_port_id()
        tp = MemoryTracePort(heavy_every=heavy_every)
        self.node.trace_ports[port] = tp
        return port, tp

    def traced(self, tracer, flags, current=MFA):
        p = self.proc()
        p.tracer, p.flags, p.current = tracer, flags, current
        return p

    def run(self):
        while self.node.run_some():
            pass

    def stats(self):
        return self.node.stats.as_dict()


@pytest.fixture
def s():
    return Sched()


# ---------------------------------------------------------------- trace_sched_aux (806-899)
def test_trace_sched_to_a_tracer_process(s):
    """seed 877, 797-799: ``{trace, Pid, What, MFA}``, stamped when the tracee
    has ``timestamp`` (``patch_ts``), queued to the tracer at once."""
    t = s.proc(tracer_mark=True)
    p = s.traced(t.pid, F_TRACE_SCHED)
    s.node.trace_sched(p, A["in"])
    p.flags |= F_TIMESTAMP
    s.node.trace_sched(p, A.out)
    first, second = t.kept
    assert first == (T, p.pid, A["in"], MFA)
    assert second[:4] == (TS, p.pid, A.out, MFA) and is_ts(second[4])
    st = s.stats()
    assert (st["made"], st["delivered"]) == (2, 2)


def test_no_tracer_no_message(s):
    """seed 818-819: ``is_nil(ERTS_TRACER_PROC(p))``: nothing."""
    p = s.traced(NIL, F_TRACE_SCHED)
    s.node.trace_sched(p, A["in"])
    st = s.stats()
    assert (st["made"], st["suppressed"]) == (0, 0)


def test_an_unknown_current_function_is_0(s):
    """seed 857-867: ``curr_func = p->current != NULL``, else ``make_small(0)``."""
    t = s.proc(tracer_mark=True)
    p = s.traced(t.pid, F_TRACE_SCHED, current=None)
    s.node.trace_sched(p, A["in"])
    assert t.kept == [(T, p.pid, A["in"], 0)]


def test_an_exiting_process_reports_0(s):
    """seed 857-858: ``ERTS_PROC_IS_EXITING(p)``: ``curr_func = 0``."""
    t = s.proc(tracer_mark=True)
    p = s.traced(t.pid, F_TRACE_SCHED)
    p.status = EXITING
    s.node.trace_sched(p, A.in_exiting)
    assert t.kept == [(T, p.pid, A.in_exiting, 0)]


def test_scheduler_number_is_1_in_nonsmp(s):
    """seed 880-886: ``scheduler_no``: ``{trace, Pid, What, 1, MFA}`` (the
    nonsmp build's ``make_small(1)``)."""
    t = s.proc(tracer_mark=True)
    p = s.traced(t.pid, F_TRACE_SCHED | F_TRACE_SCHED_NO)
    s.node.trace_sched(p, A.out)
    assert t.kept == [(T, p.pid, A.out, 1, MFA)]


# ---------------------------------------------------------------- ERTS_GET_TRACER_REF (162-172)
def test_a_dead_tracer_resets_the_tracee_and_makes_nothing(s):
    """seed 162-172: no tracer process: ``TPID = NIL``, tracee flags cleared,
    return; the tracer mark and other non-tracee bits stay."""
    t = s.proc()
    p = s.traced(t.pid, F_TRACE_SEND | F_TRACE_SCHED | F_TRACER)
    t.status = EXITED
    s.node.trace_sched(p, A["in"])
    assert (p.tracer, p.flags) == (NIL, F_TRACER)
    st = s.stats()
    assert st["made"] == 0 and st["suppressed_by_reason"] == {"receiver_dead": {"TRACE": 1}}


def test_a_closed_tracer_port_resets_the_tracee(s):
    """seed 513-519: ``erts_id2port_sflgs`` finds no port: reset, nothing written."""
    port, tp = s.port()
    tp.close()
    p = s.traced(port, F_TRACE_SEND | F_TRACE_PROCS)
    s.node.trace_proc(p, p, A.link, A.x)
    assert (p.tracer, p.flags & TRACEE_FLAGS, tp.payloads) == (NIL, 0, [])
    assert s.stats()["suppressed_by_reason"] == {"port_closed": {"TRACE": 1}}


def test_a_tracer_port_gets_the_message_stamped_or_not(s):
    port, tp = s.port()
    p = s.traced(port, F_TRACE_PROCS)
    s.node.trace_proc(None, p, A.link, A.x)
    p.flags |= F_TIMESTAMP
    s.node.trace_proc(None, p, A.unlink, A.x)
    first, second = tp.terms()
    assert first == (T, p.pid, A.link, A.x)
    assert second[:4] == (TS, p.pid, A.unlink, A.x) and is_ts(second[4])
    st = s.stats()
    assert (st["made"], st["delivered"], st["fake_schedule_pairs"]) == (2, 2, 0)


# ---------------------------------------------------------------- the fake schedule pair (493-580)
def pair_terms(tp, start=0):
    return [m[:4] for m in tp.terms(start)]


def test_heavy_write_gives_the_fake_pair_with_the_message_s_timestamp(s):
    """seed 543-552, 563-578: the message's own stamp for the fake ``out``
    (``do_send_schedfix_to_port``, seed 459-478), a new one for ``in``."""
    port, tp = s.port(heavy_every=1)
    p = s.traced(port, RUNNING_TS | F_TRACE_PROCS)
    s.node.trace_sched(p, A["in"])
    msgs = tp.terms()
    assert [m[:4] for m in msgs] == [
        (TS, p.pid, A["in"], MFA),
        (TS, p.pid, A.out, 0),
        (TS, p.pid, A["in"], 0),
    ]
    assert [len(m) for m in msgs] == [5, 5, 5]
    assert msgs[1][4] == msgs[0][4] and msgs[2][4] > msgs[1][4]
    st = s.stats()
    assert (st["fake_schedule_pairs"], st["made"], st["delivered"]) == (1, 3, 3)
    assert st["made_by_type"] == {"TRACE": 3}


def test_the_pair_gets_a_dummy_timestamp_when_the_message_has_none(s):
    """seed 553-561: the tracee has no ``timestamp`` but the running process
    has ``running`` and ``timestamp``: a fresh stamp for the fake ``out``."""
    port, tp = s.port(heavy_every=1)
    c_p = s.traced(NIL, RUNNING_TS)
    t_p = s.traced(port, F_TRACE_PROCS)
    s.node.trace_proc(c_p, t_p, A.getting_linked, c_p.pid)
    msgs = tp.terms()
    assert msgs[0] == (T, t_p.pid, A.getting_linked, c_p.pid)
    assert [m[:4] for m in msgs[1:]] == [(TS, c_p.pid, A.out, 0), (TS, c_p.pid, A["in"], 0)]
    assert is_ts(msgs[1][4]) and is_ts(msgs[2][4]) and msgs[2][4] > msgs[1][4]


@pytest.mark.parametrize("what", ["out", "out_exiting", "out_exited"])
def test_no_fake_pair_after_a_schedule_out(s, what):
    """seed 823-831: ``out``, ``out_exiting``, ``out_exited``: ``no_fake_sched = 1``."""
    port, tp = s.port(heavy_every=1)
    p = s.traced(port, RUNNING_TS)
    s.node.trace_sched(p, A[what])
    assert pair_terms(tp) == [(TS, p.pid, A[what], MFA)]
    assert s.stats()["fake_schedule_pairs"] == 0


def test_in_exiting_may_get_the_fake_pair(s):
    """seed 832-834: ``in`` and ``in_exiting`` keep ``never_fake_sched``."""
    port, tp = s.port(heavy_every=1)
    p = s.traced(port, RUNNING_TS)
    p.status = EXITING
    s.node.trace_sched(p, A.in_exiting)
    assert pair_terms(tp) == [
        (TS, p.pid, A.in_exiting, 0),
        (TS, p.pid, A.out, 0),
        (TS, p.pid, A["in"], 0),
    ]


def test_no_fake_pair_from_trace_virtual_sched(s):
    """seed 2703-2706: ``trace_sched_aux(p, what, 1)``."""
    port, tp = s.port(heavy_every=1)
    p = s.traced(port, RUNNING_TS)
    s.node.trace_virtual_sched(p, A["in"])
    assert pair_terms(tp) == [(TS, p.pid, A["in"], MFA)]


def test_no_fake_pair_after_exit(s):
    """seed 2028-2032: nonsmp ``what == am_exit ? NULL : c_p``; another
    ``trace_proc`` event (``link``) gets it."""
    port, tp = s.port(heavy_every=1)
    p = s.traced(port, RUNNING_TS | F_TRACE_PROCS)
    s.node.trace_proc(p, p, A.exit, A.normal)
    assert pair_terms(tp) == [(TS, p.pid, A.exit, A.normal)]
    s.node.trace_proc(p, p, A.link, A.x)
    assert pair_terms(tp, 1) == [
        (TS, p.pid, A.link, A.x),
        (TS, p.pid, A.out, 0),
        (TS, p.pid, A["in"], 0),
    ]


def test_no_fake_pair_unless_running_and_timestamp(s):
    """seed 538-541: ``c_p == NULL || !IS_TRACED_FL(c_p, F_TRACE_SCHED |
    F_TIMESTAMP)``: written as it is."""
    port, tp = s.port(heavy_every=1)
    c_p = s.traced(NIL, F_TRACE_SCHED)  # running without timestamp
    t_p = s.traced(port, F_TRACE_PROCS | F_TIMESTAMP)
    s.node.trace_proc(c_p, t_p, A.getting_linked, c_p.pid)
    s.node.trace_proc(None, t_p, A.getting_unlinked, c_p.pid)
    assert pair_terms(tp) == [
        (TS, t_p.pid, A.getting_linked, c_p.pid),
        (TS, t_p.pid, A.getting_unlinked, c_p.pid),
    ]
    assert s.stats()["fake_schedule_pairs"] == 0


def test_no_fake_pair_after_a_light_write(s):
    """seed 566-577: only ``PORT_CONTROL_FLAG_HEAVY`` asks for the pair."""
    port, tp = s.port(heavy_every=2)
    p = s.traced(port, RUNNING_TS | F_TRACE_PROCS)
    s.node.trace_proc(p, p, A.link, A.x)  # write 1: light
    s.node.trace_proc(p, p, A.unlink, A.x)  # write 2: heavy
    assert pair_terms(tp) == [
        (TS, p.pid, A.link, A.x),
        (TS, p.pid, A.unlink, A.x),
        (TS, p.pid, A.out, 0),
        (TS, p.pid, A["in"], 0),
    ]


@pytest.mark.parametrize("point", ["receive", "spawn", "gc", "send"])
def test_process_events_may_get_the_fake_pair(s, point):
    """seed 958 (send), 1015 (receive), 2105 (spawn), 2280 (gc): ``c_p`` is
    the tracee itself."""
    port, tp = s.port(heavy_every=1)
    p = s.traced(port, RUNNING_TS | F_TRACE_SEND)
    if point == "receive":
        s.node.trace_receive(p, A.hi)
    elif point == "spawn":
        s.node.trace_proc_spawn(p, Pid(5), A.m, A.f, [])
    elif point == "gc":
        s.node.trace_gc(p, A.gc_start)
    else:
        s.node.trace_send(p, A.somewhere, A.hi)
    assert [m[2] for m in tp.terms()[1:]] == [A.out, A["in"]]


@pytest.mark.parametrize("point", ["open", "port", "sched"])
def test_port_events_never_get_the_fake_pair(s, point):
    """seed 2716-2860: the port trace points pass no process to
    ``send_to_port``."""
    port, tp = s.port(heavy_every=1)
    traced_port = s.node.new_port_id()

    class Holder:  # a port's trace fields
        id = traced_port
        tracer = port
        flags = F_TIMESTAMP | F_TRACE_SCHED_NO

    h = Holder()
    if point == "open":
        s.node.trace_port_open(h, Pid(5), A.echo)
        expected = (TS, Pid(5), A.open, traced_port, A.echo)
    elif point == "port":
        s.node.trace_port(h, A.closed, A.normal)
        expected = (TS, traced_port, A.closed, A.normal)
    else:
        s.node.trace_sched_ports_where(h, A["in"], A.command)
        expected = (TS, traced_port, A["in"], 1, A.command)
    (msg,) = tp.terms()
    assert msg[:-1] == expected and is_ts(msg[-1])


def test_sched_ports_without_the_scheduler_number(s):
    """seed 2864: ``{trace, Port, What, Where}``."""
    port, tp = s.port()
    traced_port = s.node.new_port_id()

    class Holder:
        id = traced_port
        tracer = port
        flags = 0

    s.node.trace_sched_ports_where(Holder(), A.out, A.command)
    assert tp.terms() == [(T, traced_port, A.out, A.command)]


# ---------------------------------------------------------------- trace_send (912-995)
def test_send_to_a_live_local_process(s):
    """seed 923-925: ``operation = am_send``."""
    t = s.proc(tracer_mark=True)
    q = s.proc()
    p = s.traced(t.pid, F_TRACE_SEND)
    s.node.trace_send(p, q.pid, A.hi, local=q)
    s.node.trace_send(p, q.pid, A.hi)
    s.node.trace_send(p, A.registered_name, A.hi)
    assert t.kept == [(T, p.pid, A.send, A.hi, q.pid)] * 2 + [
        (T, p.pid, A.send, A.hi, A.registered_name)
    ]


def test_send_to_a_local_process_that_already_exited(s):
    """seed 925-928: ``!erts_proc_lookup(to)``: ``send_to_non_existing_process``,
    whether the sender found the process (exited) or only its pid."""
    t = s.proc(tracer_mark=True)
    q = s.proc(done)
    s.run()
    assert q.status == EXITED
    p = s.traced(t.pid, F_TRACE_SEND)
    s.node.trace_send(p, q.pid, A.hi, local=q)
    s.node.trace_send(p, Pid(4000), A.hi)
    assert t.kept == [
        (T, p.pid, A.send_to_non_existing_process, A.hi, q.pid),
        (T, p.pid, A.send_to_non_existing_process, A.hi, Pid(4000)),
    ]


def test_no_send_trace_without_the_send_flag(s):
    """seed 920-922: ``!ARE_TRACE_FLAGS_ON(p, F_TRACE_SEND)``: nothing."""
    t = s.proc(tracer_mark=True)
    p = s.traced(t.pid, F_TRACE_PROCS)
    s.node.trace_send(p, t.pid, A.hi)
    assert t.kept == [] and s.stats()["made"] == 0


def test_receive_spawn_and_gc_messages(s):
    t = s.proc(tracer_mark=True)
    p = s.traced(t.pid, F_TRACE_PROCS)
    s.node.trace_receive(p, A.hi)
    s.node.trace_proc_spawn(p, Pid(5), A.m, A.f, [1])
    s.node.trace_gc(p, A.gc_end)
    assert t.kept[0] == (T, p.pid, A.receive, A.hi)
    assert t.kept[1] == (T, p.pid, A.spawn, Pid(5), (A.m, A.f, [1]))
    assert t.kept[2][:3] == (T, p.pid, A.gc_end) and len(t.kept[2][3]) == 11


# ---------------------------------------------------------------- smp: erts_check_my_tracer_proc
def test_check_my_tracer_proc_resets_a_tracee_whose_tracer_is_gone(s):
    """seed 3020-3035: the tracer is no tracer any more: flags and tracer reset."""
    t = s.proc(tracer_mark=True)
    p = s.traced(t.pid, F_TRACE_SEND | F_TRACER)
    s.node.erts_check_my_tracer_proc(p)
    assert (p.tracer, p.flags) == (t.pid, F_TRACE_SEND | F_TRACER)
    t.flags &= ~F_TRACER
    s.node.erts_check_my_tracer_proc(p)
    assert (p.tracer, p.flags) == (NIL, F_TRACER)
    assert s.stats()["tracer_checks_reset"] == 1
    port, _ = s.port()
    q = s.traced(port, F_TRACE_SEND)
    s.node.erts_check_my_tracer_proc(q)
    assert (q.tracer, q.flags) == (port, F_TRACE_SEND)
    assert s.stats()["tracer_checks_reset"] == 1


# ---------------------------------------------------------------- SYSMON (2293-2600)
def test_monitor_messages_go_to_the_monitor(s):
    """seed 2343, 2408, 2478, 2553, 2589: each built as the core builds it."""
    mon = s.proc()
    p = s.traced(NIL, 0)
    s.node.state.set_system_monitor(mon.pid, 1, 1, 1, True, False)
    s.node.monitor_long_gc(p, 10)
    s.node.monitor_large_heap(p)
    s.node.monitor_long_schedule_proc(p, MFA, None, 20)
    port = s.node.new_port_id()

    class PortHolder:
        id = port

    s.node.monitor_long_schedule_port(PortHolder(), A.input, 30)
    s.node.monitor_generic(p.pid, A.busy_port, port)
    sizes = p.heap.monitor_sizes()
    assert mon.kept == [
        M.monitor_long_gc(p.pid, 10, sizes),
        M.monitor_large_heap(p.pid, sizes),
        M.monitor_long_schedule_proc(p.pid, MFA, None, 20),
        M.monitor_long_schedule_port(port, A.input, 30),
        M.monitor_generic(p.pid, A.busy_port, port),
    ]
    st = s.stats()
    assert st["delivered_by_type"] == {"SYSMON": 5} and st["made"] == 5


def test_monitor_not_told_about_itself_nor_when_gone(s):
    """seed 2446-2449 (nonsmp): ``!monitor_p || p == monitor_p``: return."""
    mon = s.proc()
    s.node.state.set_system_monitor(mon.pid, 1)
    s.node.monitor_long_gc(mon, 10)
    mon.status = EXITED
    s.node.monitor_long_gc(s.traced(NIL, 0), 10)
    port, _ = s.port()
    s.node.state.set_system_monitor(port, 1)  # a port is no monitor process
    s.node.monitor_long_gc(s.traced(NIL, 0), 10)
    assert mon.kept == []
    st = s.stats()
    assert st["made"] == 0
    assert st["suppressed_by_reason"] == {
        "sender_is_receiver": {"SYSMON": 1},
        "receiver_dead": {"SYSMON": 1},
        "no_receiver": {"SYSMON": 1},
    }


# ---------------------------------------------------------------- SYSPROF (591-650, 2608-3010)
def test_profile_send_to_a_process_a_port_or_nobody(s):
    """seed 598-648: not about the profiler itself; a port profiler is
    written to; a process profiler gets the message; a dead one nothing."""
    prof = s.proc()
    s.node.state.set_system_profile(prof.pid, runnable_procs=True)
    s.node.profile_send(prof.pid, (A.profile, A.x))
    s.node.profile_send(NIL, (A.profile, A.y))
    port, tp = s.port()
    s.node.state.set_system_profile(port, runnable_procs=True)
    s.node.profile_send(NIL, (A.profile, A.z))
    prof.status = EXITED
    s.node.state.set_system_profile(prof.pid, runnable_procs=True)
    s.node.profile_send(NIL, (A.profile, A.w))
    assert prof.kept == [(A.profile, A.y)]
    assert tp.terms() == [(A.profile, A.z)]
    st = s.stats()
    assert st["delivered_by_type"] == {"SYSPROF": 2}
    # the second about itself: its own ``active`` when the message woke it
    assert st["suppressed_by_reason"] == {
        "sender_is_receiver": {"SYSPROF": 2},
        "receiver_dead": {"SYSPROF": 1},
    }


def test_profile_scheduler_counts_active_schedulers(s):
    """seed 2624-2645 (nonsmp): ``active_sched`` up on ``active``, down on
    ``inactive``; ``{profile, scheduler, Id, State, Active, Ts}``."""
    prof = s.proc()
    s.node.state.set_system_profile(prof.pid, scheduler=True, active_schedulers=0)
    s.node.profile_scheduler(A.active)
    s.node.profile_scheduler(A.inactive)
    (a, i) = prof.kept
    assert a[:5] == (A.profile, A.scheduler, 1, A.active, 1) and is_ts(a[5])
    assert i[:5] == (A.profile, A.scheduler, 1, A.inactive, 0) and i[5] > a[5]
    assert s.node.state.active_sched == 0
    s.node.profile_scheduler_q(A.active, 4, (1, 2, 3))
    assert prof.kept[2] == (A.profile, A.scheduler, 1, A.active, 4, (1, 2, 3))


def test_profile_runnable_messages(s):
    """seed 2985-3004: ``Where`` is the current function or 0; seed 2950: a
    port's count is 0; both stamped."""
    prof = s.proc()
    p = s.traced(NIL, 0)
    s.node.state.set_system_profile(prof.pid, runnable_procs=True, runnable_ports=True)
    s.node.profile_runnable_proc(p, A.active)
    p.current = None
    s.node.profile_runnable_proc(p, A.inactive)

    class PortHolder:
        id = s.node.new_port_id()

    s.node.profile_runnable_port(PortHolder(), A.active)
    heads = [m[:4] for m in prof.kept]
    assert heads == [
        (A.profile, p.pid, A.active, MFA),
        (A.profile, p.pid, A.inactive, 0),
        (A.profile, PortHolder.id, A.active, 0),
    ]
    assert all(len(m) == 5 and is_ts(m[4]) for m in prof.kept)


# ---------------------------------------------------------------- ERRLGR and PROC_MSG
def test_error_logger_message_delivered(s):
    """seed 3412-3420: to the registered ``error_logger``."""
    el = s.proc()
    s.node.registry[A.error_logger] = el.pid
    s.node.erts_queue_error_logger_message(Pid(5), A.report)
    assert el.kept == [A.report]
    st = s.stats()
    assert (st["made"], st["delivered"]) == (1, 1)


def test_no_error_logger_prints_the_failure(s):
    """seed 3414-3415, 3188-3215: printed on stderr, dropped."""
    msg = M.error_logger_str("boom")
    s.node.erts_queue_error_logger_message(Pid(5), msg)
    assert s.err.getvalue() == '(no error logger present) error: "boom"\n'
    st = s.stats()
    assert st["made"] == 1 and st["dropped_by_reason"] == {"no_error_logger": {"ERRLGR": 1}}


def test_the_error_logger_s_own_message_is_dropped_silently(s):
    """seed 3416-3417."""
    el = s.proc()
    s.node.registry[A.error_logger] = el.pid
    s.node.erts_queue_error_logger_message(el.pid, A.report)
    assert el.kept == [] and s.err.getvalue() == ""
    assert s.stats()["dropped_by_reason"] == {"error_logger_self": {"ERRLGR": 1}}


def test_sys_msg_proc(s):
    """seed 3108-3112, 3376-3389: to a live process; a dead one: dropped."""
    q = s.proc()
    s.node.erts_send_sys_msg_proc(Pid(5), q.pid, A.note)
    q.status = EXITED
    s.node.erts_send_sys_msg_proc(Pid(5), q.pid, A.lost)
    assert q.kept == [A.note]
    st = s.stats()
    assert (st["made"], st["delivered"]) == (2, 1)
    assert st["dropped_by_reason"] == {"receiver_dead": {"PROC_MSG": 1}}


# ---------------------------------------------------------------- smp: enqueue_sys_msg
class Queue:
    """The dispatcher's side of a scheduler's transport: records each
    ``enqueue_sys_msg``."""

    def __init__(self):
        self.sys_msgs: list[tuple] = []

    def sys(self, type_, from_, to, msg, ts_kind):
        self.sys_msgs.append((type_, from_, to, msg, ts_kind))

    def table_event(self, ev):
        pass

    def peer(self, owner, signal_):
        pass

    async def rpc(self, p, *request):
        return None


def test_smp_trace_points_enqueue_for_the_dispatcher():
    """seed 124-130, 778-804: smp ``ERTS_ENQ_TRACE_MSG`` to the tracer in the
    queue, the stamp patched there (``TS_PATCH``); no fake pair, no check."""
    q = Queue()
    s = Sched(smp=True, transport=q, sched_id=2, nsched=2)
    t = Pid(5)
    p = s.traced(t, F_TRACE_SCHED)
    s.node.trace_sched(p, A["in"])
    p.flags |= F_TIMESTAMP | F_TRACE_SCHED_NO
    s.node.trace_sched(p, A.out)
    traced_port = s.node.new_port_id()

    class Holder:  # a port's trace fields
        id = traced_port
        tracer = t
        flags = F_TRACE_SCHED_NO

    s.node.trace_sched_ports_where(Holder(), A["in"], A.command)
    # seed 882-883, 2855-2857: the smp build's own scheduler number
    assert q.sys_msgs == [
        (M.SYS_MSG_TYPE_TRACE, p.pid, t, (T, p.pid, A["in"], MFA), M.TS_NONE),
        (M.SYS_MSG_TYPE_TRACE, p.pid, t, (T, p.pid, A.out, 2, MFA), M.TS_PATCH),
        (M.SYS_MSG_TYPE_TRACE, traced_port, t, (T, traced_port, A["in"], 2, A.command), M.TS_NONE),
    ]


def test_smp_system_messages_enqueue_with_their_type():
    """seed 3061-3112: SYSMON, SYSPROF (stamp appended; the scheduler count
    and stamp for ``profile_scheduler``, whose state rides in ``to``), ERRLGR
    and PROC_MSG each queued with its type; smp counts no active scheduler
    here (the queue does)."""
    q = Queue()
    s = Sched(smp=True, transport=q, sched_id=2, nsched=2)
    p = s.traced(NIL, 0)
    s.node.monitor_generic(p.pid, A.busy_port, A.x)
    s.node.profile_runnable_proc(p, A.active)
    s.node.profile_scheduler(A.active)
    s.node.profile_scheduler_q(A.inactive, 2, (1, 2, 3))
    s.node.erts_queue_error_logger_message(p.pid, A.report)
    s.node.erts_send_sys_msg_proc(p.pid, Pid(5), A.note)
    assert q.sys_msgs == [
        (M.SYS_MSG_TYPE_SYSMON, p.pid, NIL, (A.monitor, p.pid, A.busy_port, A.x), M.TS_NONE),
        (M.SYS_MSG_TYPE_SYSPROF, p.pid, NIL, (A.profile, p.pid, A.active, MFA), M.TS_APPEND),
        (M.SYS_MSG_TYPE_SYSPROF, NIL, A.active, (A.profile, A.scheduler, 2, A.active), M.TS_SCHED),
        (
            M.SYS_MSG_TYPE_SYSPROF,
            NIL,
            NIL,
            (A.profile, A.scheduler, 2, A.inactive, 2, (1, 2, 3)),
            M.TS_NONE,
        ),
        (M.SYS_MSG_TYPE_ERRLGR, p.pid, A.error_logger, A.report, M.TS_NONE),
        (M.SYS_MSG_TYPE_PROC_MSG, p.pid, Pid(5), A.note, M.TS_NONE),
    ]
    assert s.node.state.active_sched == 0
    st = s.stats()
    assert (st["made"], st["suppressed"]) == (0, 0)  # the transport counts what it queues
    assert s.err.getvalue() == ""


def test_a_message_a_port_cannot_encode_is_dropped_and_is_no_heavy_write(s):
    """nonsmp's ``WRITE_SYS_MSG_TO_PORT`` (``do_send_to_port``, seed 407-437)
    encodes the message (``erts_encode_ext``) into the port.  A body that is
    not a term (which a workload's Python object can make, a BEAM process
    cannot) cannot be encoded: it is made, counted dropped as ``not_a_term``
    (as smp's dispatcher counts it), never written, and being no write it is
    no heavy one: no fake ``out``/``in`` pair follows (seed 543-552), while
    the next message, a term, gets its pair."""
    port, tp = s.port(heavy_every=1)
    p = s.traced(port, RUNNING_TS | F_TRACE_SEND)
    s.node.trace_send(p, A.somewhere, (A.hi, object()))
    st = s.stats()
    assert tp.terms() == [] and st["fake_schedule_pairs"] == 0
    assert (st["made"], st["delivered"], st["dropped"]) == (1, 0, 1)
    assert st["dropped_by_reason"] == {"not_a_term": {"TRACE": 1}}
    s.node.trace_send(p, A.somewhere, A.hi)
    assert [m[2] for m in tp.terms()] == [A.send, A.out, A["in"]]
    assert s.stats()["fake_schedule_pairs"] == 1
