"""The built-in workloads' process bodies: what runs in the scheduler OS processes.

They are pickled by reference, so they live at module level; the registry
(``smp.app.workload_registry.WORKLOADS``) says how each workload spawns them.
Every workload message is ``(Tag, SenderPid, Seq, ...)`` with ``Seq``
strictly increasing per sender, so the per-tracee order invariant
(``smp.app.compare.check_invariants``) can be checked from the trace alone.
Linked processes die together when a fault kills one of them, and every
blocking receive has an idle backstop (``IDLE_MS``), so a run always becomes
quiet.  A process's initial call, and so the ``{Module, Function, Arity}``
its ``spawn`` and ``caller`` trace messages show, names this module.
"""

from __future__ import annotations

import time

from schedulers.process import message_of
from smp.core.errors import Error, Exit, Throw
from smp.core.terms import Atom

A = Atom
CTL = A("$smp_emu")
STOP, PING, PONG, TOKEN, CAST, DONE, REQ, ECHO = (
    A("stop"),
    A("ping"),
    A("pong"),
    A("token"),
    A("cast"),
    A("done"),
    A("req"),
    A("echo"),
)
IDLE_MS = 5000  # a receive backstop: nothing for this long and the process gives up
am_kill, am_sensitive, am_new, am_EXIT = A("kill"), A("sensitive"), A("new"), A("EXIT")


def _is_echo(m) -> bool:
    return type(m) is tuple and len(m) == 4 and m[0] is ECHO


def _is_exit_of(m, pid) -> bool:
    return type(m) is tuple and len(m) == 3 and m[0] is am_EXIT and m[1] == pid


def _is_ctl(m) -> bool:
    return type(m) is tuple and len(m) == 3 and m[0] is CTL


async def _apply_ctl(proc, m) -> None:
    if m[1] is am_sensitive:
        await proc.process_flag("sensitive", m[2])


async def _start(proc, sensitive: bool) -> None:
    if sensitive:
        await proc.process_flag("sensitive", True)


async def _recv(proc, match=None):
    """Receive the next workload message, obeying control messages on the way."""
    pred = None if match is None else (lambda x: _is_ctl(x) or match(x))
    while True:
        m = await proc.receive(timeout=IDLE_MS, match=pred)
        if m is None:
            raise Exit(A("idle"))
        if _is_ctl(m):
            await _apply_ctl(proc, m)
            continue
        return m


async def _poll(proc) -> None:
    """Take pending control messages without blocking (for processes that never receive)."""
    if any(_is_ctl(message_of(e)) for e in proc.mailbox):
        await _apply_ctl(proc, await proc.receive(match=_is_ctl))


def _more(i: int, ops: int, end: float) -> bool:
    return time.monotonic() < end if end else i < ops


def _end(secs: float) -> float:
    return time.monotonic() + secs if secs else 0.0


# -- ping_pong -------------------------------------------------------------------
async def pp_pong(proc, sensitive):
    await _start(proc, sensitive)
    seq = 0
    while True:
        m = await _recv(proc)
        if m[0] is STOP:
            return
        await proc.send(m[1], (PONG, proc.pid, seq, m[2]))
        seq += 1


async def pp_ping(proc, peer, ops, secs, payload, sensitive):
    end, i, data = _end(secs), 0, list(range(payload))  # before any BIF that may wait
    await _start(proc, sensitive)
    await proc.link(peer)
    while _more(i, ops, end):
        await proc.send(peer, (PING, proc.pid, i, data))
        await _recv(proc)
        i += 1
    await proc.send(peer, (STOP, proc.pid, i))


# -- ring and seq_chain -------------------------------------------------------------
async def ring_member(proc, nxt, sensitive):
    await _start(proc, sensitive)
    if type(nxt) is not Atom:
        await proc.link(nxt)
    seq = 0
    while True:
        m = await _recv(proc)
        try:
            await proc.send(nxt, (m[0], proc.pid, seq))
        except Error:
            # ``catch Name ! Msg``: the head is gone (a fault killed the ring) and
            # this member's exit signal is still on its way: it ends without a report
            return
        seq += 1
        if m[0] is STOP:
            return


async def ring_head(proc, name, nxt, ops, secs, seq_label, seq_flags, print_every, sensitive):
    # the duration counts from the start: register waits for the controller
    end, i = _end(secs), 0
    await _start(proc, sensitive)
    await proc.register(name)
    if type(nxt) is not Atom:
        await proc.link(nxt)
    if seq_label is not None:
        await proc.seq_trace("label", seq_label)
        for f in seq_flags:
            await proc.seq_trace(f, True)
    while _more(i, ops, end):
        await proc.send(nxt, (TOKEN, proc.pid, i))
        await _recv(proc)
        if seq_label is not None and print_every and i % print_every == 0:
            await proc.seq_trace_print(seq_label, (A("lap"), i))
        i += 1
    await proc.send(nxt, (STOP, proc.pid, i))
    await _recv(proc)


# -- fan_in -----------------------------------------------------------------------
async def fan_hot(proc, senders, sensitive):
    await _start(proc, sensitive)
    done = 0
    while done < senders:
        m = await _recv(proc)
        if m[0] is DONE:
            done += 1


async def fan_sender(proc, hot, ops, secs, payload, sensitive):
    end, i, data = _end(secs), 0, list(range(payload))
    await _start(proc, sensitive)
    await proc.link(hot)
    while _more(i, ops, end):
        await _poll(proc)
        await proc.send(hot, (CAST, proc.pid, i, data))
        i += 1
    await proc.send(hot, (DONE, proc.pid, i))


# -- calls ------------------------------------------------------------------------
async def wl_fib(proc, n):
    if n < 2:
        return n
    a = await proc.call("wl_calls", "fib", [n - 1], local=True)
    b = await proc.call("wl_calls", "fib", [n - 2], local=True)
    return a + b


async def wl_check(proc, n):
    if n < 0:
        raise Error(A("badarg"))
    return A("ok")


async def wl_throw(proc, n):
    raise Throw((A("thrown"), n))


async def caller(proc, ops, secs, depth, exception_every, sensitive):
    await _start(proc, sensitive)
    end, i = _end(secs), 0
    while _more(i, ops, end):
        await _poll(proc)
        await proc.call("wl_calls", "fib", [depth])
        await proc.call("wl_calls", "check", [i])
        if exception_every and i % exception_every == 0:
            try:
                await proc.call("wl_calls", "check", [-1])
            except Error:
                pass
            try:
                await proc.call("wl_calls", "throw", [i])
            except Throw:
                pass
        i += 1


# -- gc ---------------------------------------------------------------------------
async def allocator(proc, ops, secs, words, keep_every, gc_every, sensitive):
    await _start(proc, sensitive)
    end, i = _end(secs), 0
    while _more(i, ops, end):
        await _poll(proc)
        await proc.allocate(words, keep=bool(keep_every) and i % keep_every == 0)
        if gc_every and i % gc_every == 0:
            await proc.garbage_collect()
        i += 1


# -- ports ------------------------------------------------------------------------
async def port_user(proc, driver, options, ops, secs, sensitive):
    await _start(proc, sensitive)
    port = await proc.open_port(driver, **options)
    end, i = _end(secs), 0
    while _more(i, ops, end):
        await proc.port_command(port, (A("cmd"), proc.pid, i))
        await _recv(proc, match=lambda m: type(m) is tuple and len(m) == 2 and m[0] == port)
        i += 1
    await proc.port_close(port)


# -- tracer churn -------------------------------------------------------------------
async def churn_sink(proc):
    while True:
        await proc.receive()


async def churn_echo(proc):
    seq = 0
    while True:
        m = await _recv(proc)
        if m[0] is STOP:
            return
        await proc.send(m[1], (ECHO, proc.pid, seq, m[2]))
        seq += 1


async def churner(proc, ops, secs, burst, flags, sensitive):
    """Trace the worker to a fresh tracer, make ``burst`` messages, kill the
    tracer and wait for its death before the next one takes over, as an
    Erlang program replacing a tracer does (trace/3 refuses a second tracer
    while the first is alive: ``already_traced``, erl_bif_trace.c).  The
    messages made in the burst may still wait in smp's queue when their
    tracer dies: the race this workload is for."""
    end, i, seq = _end(secs), 0, 0
    await _start(proc, sensitive)
    await proc.process_flag("trap_exit", True)
    worker = await proc.spawn_link(churn_echo)
    while _more(i, ops, end):
        t = await proc.spawn_link(churn_sink)
        await proc.trace(worker, True, list(flags) + [(A("tracer"), t)])
        for _ in range(burst):
            await proc.send(worker, (REQ, proc.pid, seq))
            seq += 1
            await _recv(proc, _is_echo)
        await proc.exit(t, am_kill)
        await _recv(proc, lambda m, t=t: _is_exit_of(m, t))
        i += 1
    await proc.send(worker, (STOP, proc.pid, seq))
