"""A first catalogue of SMP trace races, as workloads for ``smp.sim.explore``.

Runs wherever the explorer runs.  Each entry is a ``setup(vm)`` with the
number of schedulers it wants, a paragraph saying which part of
``erl_trace.c`` makes the race and what the SMP build does that nonsmp does
not, and the counts an exhaustive exploration finds (complete executions,
distinct outcomes), which ``tests/sim/test_catalogue.py`` asserts.  The
counts are of this simulator's model (its threads and dependency relation,
``smp.sim.world`` and ``smp.sim.deps``): a change to either shows up there
first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from smp.core.terms import Atom

__all__ = ["Race", "CATALOGUE", "by_name"]

am_kill, am_go, am_ping = Atom("kill"), Atom("go"), Atom("ping")
am_all, am_done, am_trap_exit = Atom("all"), Atom("done"), Atom("trap_exit")
am_timeout = Atom("timeout")
_LONG_GC = [(Atom("long_gc"), 1)]  # ms: a collection of 30,000 words takes 3 (schedulers.heap)
_ALL_PROC_FLAGS = ["send", "procs", "set_on_spawn"]


@dataclass(frozen=True)
class Race:
    name: str
    setup: Callable
    schedulers: int
    about: str
    executions: int  # complete executions an exhaustive exploration runs
    outcomes: int  # distinct outcomes among them
    tracer: str  # the role whose received messages the entry is about
    nonsmp_received: tuple  # what the tracer gets in nonsmp
    checks: tuple = ()  # user predicates (``explore(checks=...)``) the entry is about


# ---------------------------------------------------------------- bodies
async def _send_after_go(proc, to, n):
    await proc.receive()
    for i in range(n):
        await proc.send(to, (am_ping, i))


async def _kill_then_go(proc, tracer, tracee):
    await proc.exit(tracer, am_kill)
    await proc.send(tracee, am_go)


async def _seq_sender(proc, to, n):
    await proc.seq_trace("label", 17)
    await proc.seq_trace("send", True)
    for i in range(n):
        await proc.send(to, (am_ping, i))


async def _replace_seq_tracer(proc, new):
    await proc.set_system_seq_tracer(new)


async def _send_and_exit(proc, to):
    await proc.send(to, am_ping)


async def _wait_go(proc):
    await proc.receive()


async def _starter(proc, a, b):
    await proc.send(a, am_go)
    await proc.send(b, am_go)


async def _send_yield_send_then_go(proc, to, n):
    for i in range(n):
        if i:
            await proc.yield_()
        await proc.send(to, (am_ping, i))
    await proc.receive()
    await proc.send(to, (am_ping, n))


async def _replace_tracer_on_exit(proc, old, tracee, new):
    # the process API has no erlang:monitor/2: a link with trap_exit gives
    # {'EXIT', T, killed} where a monitor gives {'DOWN', ...}, both sent as T exits
    await proc.process_flag(am_trap_exit, True)
    await proc.link(old)
    await proc.exit(old, am_kill)
    await proc.receive()
    await proc.trace(tracee, True, ["send", ("tracer", new)])
    await proc.send(tracee, am_go)


async def _long_gc(proc):
    await proc.allocate(30000)  # the heap overflows: a collection of 3 ms


async def _long_gc_then_monitor(proc, options):
    await proc.allocate(30000)
    await proc.system_monitor(proc.self(), options)
    while True:
        await proc.receive()


async def _send_go_send(proc, to, asker):
    await proc.send(to, (am_ping, 0))
    await proc.send(asker, (am_go, proc.self()))
    await proc.yield_()
    await proc.send(to, (am_ping, 1))


async def _trace_delivered_then_done(proc, tracer):
    _go, tracee = await proc.receive()
    await proc.trace_delivered(tracee)
    await proc.receive()  # {trace_delivered, P, Ref}
    await proc.send(tracer, am_done)


async def _send_then_go(proc, to, asker):
    await proc.send(to, (am_ping, 0))
    await proc.send(asker, (am_go, proc.self()))


async def _trace_delivered_or_give_up(proc, tracer, ms):
    _go, tracee = await proc.receive()
    await proc.trace_delivered(tracee)
    answer = await proc.receive(timeout=ms)  # {trace_delivered, P, Ref}, or None
    await proc.send(tracer, am_done if answer is not None else am_timeout)


async def _ping(proc, to):
    await proc.send(to, am_ping)


async def _spawn_on(proc, to, scheduler):
    await proc.spawn(_ping, to, scheduler=scheduler)


async def _untrace_all(proc, flags):
    await proc.trace(am_all, False, flags)


async def _go_to_then_wait(proc, name):
    await proc.send(name, am_go)
    await proc.receive()


# ---------------------------------------------------------------- workloads
def tracer_killed_with_messages_queued(vm):
    t = vm.spawn_collector(scheduler=2, name="T")
    sink = vm.spawn_collector(scheduler=1, name="sink")
    p = vm.spawn(_send_after_go, sink, 2, scheduler=1, name="P")
    vm.spawn(_kill_then_go, t, p, scheduler=1, name="K")
    vm.trace(p, True, ["send"], tracer=t)


def tracer_killed_before_a_burst(vm):
    t = vm.spawn_collector(scheduler=2, name="T")
    sink = vm.spawn_collector(scheduler=1, name="sink")
    p = vm.spawn(_send_after_go, sink, 3, scheduler=1, name="P")
    vm.spawn(_kill_then_go, t, p, scheduler=1, name="K")
    vm.trace(p, True, ["send"], tracer=t)


def killed_tracer_misses_something(outcome) -> bool | str:
    """K kills T before it lets P send: T must not get all of P's burst."""
    got = dict(outcome.received)["T"]
    return len(got) < 3 or f"T, killed before P sent, got all {len(got)} messages"


def seq_tracer_replaced(vm):
    t1 = vm.spawn_collector(scheduler=2, name="T1")
    t2 = vm.spawn_collector(scheduler=2, name="T2")
    sink = vm.spawn_collector(scheduler=1, name="sink")
    vm.set_system_seq_tracer(t1)
    vm.spawn(_seq_sender, sink, 2, scheduler=1, name="P")
    vm.spawn(_replace_seq_tracer, t2, scheduler=2, name="R")


def tracee_exiting_while_its_messages_wait(vm):
    t = vm.spawn_collector(scheduler=2, name="T")
    sink = vm.spawn_collector(scheduler=2, name="sink")
    p = vm.spawn(_send_and_exit, sink, scheduler=1, name="P")
    vm.trace(p, True, ["send", "procs"], tracer=t)


def running_pairs_at_one_tracer(vm):
    t = vm.spawn_collector(scheduler=1, name="T")
    a = vm.spawn(_wait_go, scheduler=1, name="A")
    b = vm.spawn(_wait_go, scheduler=2, name="B")
    vm.trace(a, True, ["running", "exiting"], tracer=t)
    vm.trace(b, True, ["running", "exiting"], tracer=t)
    vm.spawn(_starter, a, b, scheduler=2, name="S")


def tracer_replaced_on_down(vm):
    t = vm.spawn_collector(scheduler=2, name="T")
    t2 = vm.spawn_collector(scheduler=1, name="T2")
    sink = vm.spawn_collector(scheduler=2, name="sink")
    p = vm.spawn(_send_yield_send_then_go, sink, 2, scheduler=2, name="P")
    vm.spawn(_replace_tracer_on_exit, t, p, t2, scheduler=1, name="C")
    vm.trace(p, True, ["send"], tracer=t)


def monitor_replaced_with_its_own_event_queued(vm):
    m = vm.spawn_collector(scheduler=2, name="M")
    vm.spawn(_long_gc_then_monitor, _LONG_GC, scheduler=1, keep=True, name="G")
    vm.spawn(_long_gc, scheduler=2, name="H")
    vm.system_monitor(m, _LONG_GC)


def trace_delivered_against_queue(vm):
    t = vm.spawn_collector(scheduler=2, name="T")
    sink = vm.spawn_collector(scheduler=1, name="sink")
    c = vm.spawn(_trace_delivered_then_done, t, scheduler=2, name="C")
    p = vm.spawn(_send_go_send, sink, c, scheduler=1, name="P")
    vm.trace(p, True, ["send"], tracer=t)


def trace_delivered_with_a_timeout(vm):
    t = vm.spawn_collector(scheduler=2, name="T")
    sink = vm.spawn_collector(scheduler=1, name="sink")
    c = vm.spawn(_trace_delivered_or_give_up, t, 100, scheduler=2, name="C")
    p = vm.spawn(_send_then_go, sink, c, scheduler=1, name="P")
    vm.trace(p, True, ["send"], tracer=t)


def trace_all_false_racing_spawn(vm):
    t = vm.spawn_collector(scheduler=2, name="T")
    sink = vm.spawn_collector(scheduler=1, name="sink")
    # the child on the other scheduler (nonsmp has one)
    p = vm.spawn(_spawn_on, sink, vm.schedulers, scheduler=1, name="P")
    vm.spawn(_untrace_all, _ALL_PROC_FLAGS, scheduler=2, name="K")
    vm.trace(p, True, _ALL_PROC_FLAGS, tracer=t)


def profiler_active_count(vm):
    prof = vm.spawn_collector(scheduler=1, name="Prof")
    a = vm.spawn(_go_to_then_wait, Atom("b"), scheduler=1, name="A")
    b = vm.spawn(_go_to_then_wait, Atom("a"), scheduler=2, name="B")
    vm.register("a", a)
    vm.register("b", b)
    vm.system_profile(prof, ["scheduler"])


CATALOGUE: tuple[Race, ...] = (
    Race(
        "tracer_killed_with_messages_queued",
        tracer_killed_with_messages_queued,
        2,
        "K kills the tracer T (on another scheduler) and then lets the tracee P send "
        "twice.  In smp P's trace messages are made without looking at the tracer "
        "(enqueue_sys_msg); P drops its flags only when it is scheduled in after its "
        "scheduler's replica has seen T dead (erts_check_my_tracer_proc), so they may be "
        "never made, made and dropped receiver_dead by sys_msg_dispatcher_func, delivered "
        "to T before its exit is queued, or delivered and reach T dead.  In nonsmp T is "
        "gone before P runs: ERTS_GET_TRACER_REF resets P and nothing is made.",
        executions=12,
        outcomes=7,
        tracer="T",
        nonsmp_received=(),
    ),
    Race(
        "seq_tracer_replaced",
        seq_tracer_replaced,
        2,
        "P sends twice with a seq_trace token; R replaces the system seq tracer T1 by T2.  "
        "A SEQTRACE message goes to whoever is the seq tracer when the dispatcher takes "
        "it (sys_msg_dispatcher_func reads system_seq_tracer under sys_trace_rwmtx), not "
        "when it was made, so the two messages split between T1 and T2 in every way the "
        "queue order allows.  In nonsmp seq_trace_output_generic sends at once: R runs "
        "after P, and T1 gets both.",
        executions=10,
        outcomes=3,
        tracer="T1",
        nonsmp_received=(
            "{seq_trace,17,{send,{0,1},P,sink,{ping,0}}}",
            "{seq_trace,17,{send,{0,2},P,sink,{ping,1}}}",
        ),
    ),
    Race(
        "tracee_exiting_while_its_messages_wait",
        tracee_exiting_while_its_messages_wait,
        2,
        "P, traced for send and procs by T on another scheduler, sends and exits while "
        "its trace messages wait in the queue.  The dispatcher checks the receiver (the "
        "tracer), never the sender: every message reaches T, in P's order, whatever the "
        "timing of P's exit.",
        executions=1,
        outcomes=1,
        tracer="T",
        nonsmp_received=(
            "{trace,P,send,ping,sink}",
            "{trace,P,exit,normal}",
        ),
    ),
    Race(
        "running_pairs_at_one_tracer",
        running_pairs_at_one_tracer,
        2,
        "A and B, on two schedulers and traced with running and exiting by one T, are "
        "scheduled in and out around a go from S, then exit.  Each scheduler queues its own in/out messages in "
        "order, but the two streams interleave at T as the batches reach the queue: "
        "only per-tracee order is promised (the invariant checked on every execution).",
        executions=7,
        outcomes=7,
        tracer="T",
        nonsmp_received=(
            "{trace,A,in,{'smp.sim.catalogue','_wait_go',0}}",
            "{trace,A,out,{'smp.sim.catalogue','_wait_go',0}}",
            "{trace,B,in,{'smp.sim.catalogue','_wait_go',0}}",
            "{trace,B,out,{'smp.sim.catalogue','_wait_go',0}}",
            "{trace,A,in,{'smp.sim.catalogue','_wait_go',0}}",
            "{trace,A,out_exited,0}",
            "{trace,B,in,{'smp.sim.catalogue','_wait_go',0}}",
            "{trace,B,out_exited,0}",
        ),
    ),
    Race(
        "tracer_killed_before_a_burst",
        tracer_killed_before_a_burst,
        2,
        "As tracer_killed_with_messages_queued with a burst of three sends, and a user "
        "predicate (killed_tracer_misses_something) that a killed tracer gets less than "
        "the whole burst, which nonsmp keeps.  It fails on one outcome: K's exit signal "
        "reaches T (another scheduler) only after the dispatcher delivered all three, an "
        "order of depth 2 (the arrival after three dispatches, the dispatches after P's "
        "sends): a target for the search strategies (tools/bench_explore.py).",
        executions=22,
        outcomes=11,
        tracer="T",
        nonsmp_received=(),
        checks=(killed_tracer_misses_something,),
    ),
    Race(
        "tracer_replaced_on_down",
        tracer_replaced_on_down,
        2,
        "C kills the tracer T, waits for its exit (a link with trap_exit: the process API "
        "has no monitors), retraces P to T2 and lets P send a third time; P, on T's "
        "scheduler, sends twice before that, yielding between.  A TRACE message names its "
        "tracer when it is made (in smp ERTS_GET_TRACER_REF only copies the pid) and "
        "sys_msg_dispatcher_func looks the receiver up when it takes it: one made while T "
        "lived is delivered, reaches T as it dies, or is dropped receiver_dead "
        "(sys_msg_disp_failure leaves TRACE alone).  P drops its flags only when "
        "scheduled in after T is gone (erts_check_my_tracer_proc), so the second may be "
        "never made; made after the retrace (trace_3 sets P's tracer) it goes to T2, as "
        "the third always does, though T2 is on another scheduler than P (trace_3 sets "
        "F_TRACER on T2 itself, so P never finds it unmarked at schedule-in), and never "
        "dropped not_tracer (the retrace returns once the dispatcher has T2's mark, and "
        "the batches of P's scheduler that mark waits for): 12 combinations in queue "
        "order and arrival.  In nonsmp T gets the first two, T2 the "
        "third.",
        executions=785,
        outcomes=12,
        tracer="T",
        nonsmp_received=(
            "{trace,P,send,{ping,0},sink}",
            "{trace,P,send,{ping,1},sink}",
        ),
    ),
    Race(
        "monitor_replaced_with_its_own_event_queued",
        monitor_replaced_with_its_own_event_queued,
        2,
        "G has a long_gc event queued (monitor_long_gc: enqueue_sys_msg(SYS_MSG_TYPE_SYSMON, "
        "G, NIL, ...)) and then makes itself the system monitor in place of M; H, on the "
        "other scheduler, has one queued too.  A SYSMON message goes to whoever is the "
        "monitor when the dispatcher takes it (sys_msg_dispatcher_func reads "
        "erts_get_system_monitor()), and one from the monitor itself is dropped "
        "(smqp->from == receiver: drop_sys_msg, no failure, the monitor stays): G's own "
        "event reaches M or is dropped sender_is_receiver, H's reaches M or G, in either "
        "order of the two batches.  In nonsmp monitor_long_gc looks the monitor up when "
        "the event is made (#ifndef ERTS_SMP: !monitor_p || p == monitor_p): M gets G's, "
        "G gets H's.",
        executions=15,
        outcomes=5,
        tracer="M",
        nonsmp_received=(
            "{monitor,G,long_gc,[{timeout,3},{old_heap_block_size,0},{heap_block_size,233},"
            "{mbuf_size,0},{stack_size,10},{old_heap_size,0},{heap_size,0}]}",
        ),
    ),
    Race(
        "trace_delivered_against_queue",
        trace_delivered_against_queue,
        2,
        "P, traced for send by T, sends, has C (on T's scheduler) call trace_delivered(P), "
        "yields and sends again.  trace_delivered_1 (erl_bif_trace.c) queues its answer "
        "with erts_send_sys_msg_proc: a PROC_MSG to the caller in sys_message_queue, behind "
        "every message made before (the emulator takes every batch sent first), which the "
        "dispatcher delivers first: C's done reaches T after them.  P's last send races "
        "the call: queued before the answer or after it, then done can reach T first.  In "
        "nonsmp everything is delivered already: done comes before the last message.  On "
        "another scheduler than T, C's answer and T's deliveries travel apart and done may "
        "overtake them, which the seed (erts_queue_message into T's queue before the "
        "answer is taken) never does.",
        executions=20,
        outcomes=2,
        tracer="T",
        nonsmp_received=(
            "{trace,P,send,{ping,0},sink}",
            "{trace,P,send,{go,P},C}",
            "done",
            "{trace,P,send,{ping,1},sink}",
        ),
    ),
    Race(
        "trace_delivered_with_a_timeout",
        trace_delivered_with_a_timeout,
        2,
        "P, traced for send by T, sends once and tells C (on T's scheduler) go; C calls "
        "trace_delivered(P) and waits for the answer at most 100 ms (receive ... after "
        "100), then tells T done or timeout.  trace_delivered_1 (erl_bif_trace.c) queues "
        "the answer in sys_message_queue behind P's two messages, so it reaches C only "
        "once the dispatcher has taken them; on a machine slow enough the timeout fires "
        "first, and T gets timeout before, between or after P's messages, while the "
        "answer is dropped receiver_dead or reaches C dead (7 outcomes).  In nonsmp the "
        "answer is in C's "
        "mailbox when the call returns: T always gets done, after both messages.  A "
        "timeout on trace_delivered's answer measures the SMP dispatcher's queue, not "
        "the tracee.",
        executions=18,
        outcomes=7,
        tracer="T",
        nonsmp_received=(
            "{trace,P,send,{ping,0},sink}",
            "{trace,P,send,{go,P},C}",
            "done",
        ),
    ),
    Race(
        "trace_all_false_racing_spawn",
        trace_all_false_racing_spawn,
        2,
        "P, traced with send, procs and set_on_spawn, spawns a child on the other "
        "scheduler that sends once; K calls trace(all, false, the same flags).  trace_3 "
        "clears the flags of every process there is, and a child takes its parent's flags "
        "when created (set_on_spawn): T gets nothing (K first), P's spawn and exit (K "
        "after the child is created, before it runs) or everything (K after it ran).  In "
        "nonsmp K runs before the child: T gets P's spawn and exit.  The seed blocks "
        "thread progress for trace(all, ...), so a spawn is done or not begun: a clear "
        "served while P's spawn signal is on its way to the child's scheduler takes the "
        "signal first (the child made, with P's flags, then cleared), never misses it.  "
        "K is the tracer the call names (its caller): its tracer mark reaches the "
        "dispatcher in its scheduler's stream, which the BIF waits for, so the order of "
        "that stream's batches against the call is explored too (12 executions before).",
        executions=27,
        outcomes=3,
        tracer="T",
        nonsmp_received=(
            "{trace,P,spawn,P.1,{'smp.sim.catalogue','_ping',[sink]}}",
            "{trace,P,exit,normal}",
        ),
    ),
    Race(
        "profiler_active_count",
        profiler_active_count,
        2,
        "Prof profiles the schedulers (system_profile(Prof, [scheduler])); A on scheduler 1 "
        "and B on scheduler 2 each send go to the other and wait for the other's, so "
        "whoever runs first waits and each scheduler goes active once or twice, one of "
        "them twice.  erts_system_profile_setup_active_schedulers sets active_sched to "
        "erts_active_schedulers() with thread progress blocked (here the schedulers marked "
        "active: 0, none has run).  profile_scheduler takes smq_mtx, moves active_sched by "
        "one, makes {profile, scheduler, Id, active|inactive, NumActive, Ts} with GET_NOW "
        "and queues it (enqueue_sys_msg_unlocked) under that lock.  Here a scheduler makes "
        "the message without count or time (TS_SCHED) and the dispatcher completes it as "
        "it takes the batch into the queue under smq_mtx: counts and timestamps follow "
        "queue order, the order Prof receives them in, so each count is the one before "
        "plus or minus one, within 0..2, ending at 0.  The race is how the two schedulers' "
        "periods interleave: 9 outcomes.  A slice's messages leave in one batch, so "
        "nothing comes between the active and the inactive of a one-slice period (the "
        "seed queues each as the scheduler wakes and as it sleeps, and another's may come "
        "between): NumActive reaches 2 only when B's first period falls inside scheduler "
        "1's first, which spans Prof's first slice and A's.  A period a go starts is "
        "queued after the batches its sender made before sending it.  Prof takes its "
        "messages without being scheduled (a passive collector), so they wake no "
        "scheduler.  In nonsmp the one scheduler runs until nothing can: one active, one "
        "inactive.",
        executions=63,
        outcomes=9,
        tracer="Prof",
        nonsmp_received=(
            "{profile,scheduler,1,active,1,Ts}",
            "{profile,scheduler,1,inactive,0,Ts}",
        ),
    ),
)


def by_name(name: str) -> Race:
    for r in CATALOGUE:
        if r.name == name:
            return r
    raise KeyError(name)
