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
        executions=8,
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
        executions=12,
        outcomes=11,
        tracer="T",
        nonsmp_received=(),
        checks=(killed_tracer_misses_something,),
    ),
)


def by_name(name: str) -> Race:
    for r in CATALOGUE:
        if r.name == name:
            return r
    raise KeyError(name)
