"""Built-in workloads, the fault controller, and ``execute``: one scenario, one run.

The process bodies run in the scheduler OS processes (they are pickled by
reference, so they live at module level); everything else runs in the user's
process.  Every workload message is ``(Tag, SenderPid, Seq, ...)`` with
``Seq`` strictly increasing per sender, so the per-tracee order invariant
(``smp.app.compare.check_invariants``) can be checked from the trace alone.
Linked processes die together when a fault kills one of them, and every
blocking receive has an idle backstop, so a run always becomes quiet.

Faults run inside ``vm.run()``: a controller process sleeps until each
planned moment and then calls ``exit(Pid, kill)`` or a trace BIF, as a
process racing the dispatcher in a real VM would.  The plan is computed here
in full before the run (which replacement tracer takes over when), so the
controller holds no state.
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from schedulers.process import message_of
from smp.app.limits import TraceLimit
from smp.app.series import (
    default_interval,
    latency_histogram,
    run_timeseries,
    scheduler_timeline,
)
from smp.core.bifs import MAX_SMALL
from smp.core.errors import (
    EmulatorTimeout,
    ErlangException,
    Error,
    Exit,
    SchedulerLost,
    SmpError,
    Throw,
)
from smp.core.flags import TRACE_FLAG_NAMES
from smp.core.pretty import format_term
from smp.core.terms import Atom, Pid, Port, atom_of
from smp.emulator import Emulator
from smp.ports.reader import read_trace

__all__ = [
    "WORKLOADS",
    "set_up",
    "Workload",
    "Bound",
    "MAX_PROCESSES",
    "SetupTimeout",
    "check_params",
    "processes_of",
    "execute",
    "RunOutcome",
    "CTL",
    "duration_note",
    "fault_notes",
    "fault_report",
    "lost_in_gap",
]

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
CHECK_S = 0.1  # the controller looks at a run this often: its end, faults, progress
am_kill, am_sensitive, am_new = A("kill"), A("sensitive"), A("new")


# ================================================================ process side
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
    end, i, seq = _end(secs), 0, 0
    await _start(proc, sensitive)
    worker = await proc.spawn_link(churn_echo)
    while _more(i, ops, end):
        t = await proc.spawn(churn_sink)
        try:
            await proc.trace(worker, True, list(flags) + [(A("tracer"), t)])
        except (ErlangException, SmpError):
            pass
        for _ in range(burst):
            await proc.send(worker, (REQ, proc.pid, seq))
            seq += 1
            await _recv(proc)
        await proc.exit(t, am_kill)
        i += 1
    await proc.send(worker, (STOP, proc.pid, seq))


# -- the fault controller -------------------------------------------------------------
#: the tag of the record the controller sends the fault log for each fault event
FAULT_REC = A("$smp_fault")
#: how long the controller waits for a killed process's ``{'EXIT', Pid, Reason}``
EXIT_WAIT_MS = 5000
am_EXIT, am_noproc, am_undefined, am_tracer = A("EXIT"), A("noproc"), A("undefined"), A("tracer")


def _why(e: BaseException) -> bytes:
    """What a BIF or signal raised, as a binary (a Python str is no term)."""
    text = format_term(e.reason) if isinstance(e, ErlangException) else type(e).__name__
    cause = e.__cause__
    if cause is not None and str(cause):
        text += f" ({cause})"
    elif not isinstance(e, ErlangException) and str(e):
        text += f": {e}"
    return text.encode("utf-8", "replace")


async def controller(proc, plan, log):
    """Carry out ``plan``: ``[(at_seconds, index, op, args), ...]`` in time order.

    Trapping exits, it kills as an Erlang program that must know a process is
    dead does: link, ``exit(Pid, Reason)``, then wait (at most
    ``EXIT_WAIT_MS``) for ``{'EXIT', Pid, _}``.  After each event it sends
    ``log`` one record, ``{FAULT_REC, Index, StartedUs, DoneUs, Result,
    Effect}``: the times in microseconds from the controller's start (the
    plan's clock), ``Result`` ``ok`` or a binary saying why the fault did not
    take, ``Effect`` a list of ``{Key, Value}``."""
    start = time.monotonic()
    await proc.process_flag("trap_exit", True)

    def now_us() -> int:
        return int((time.monotonic() - start) * 1e6)

    for at, idx, op, args in plan:
        wait = start + at - time.monotonic()
        if wait > 0:
            await proc.sleep(max(1, math.ceil(wait * 1000)))  # never before its moment
        began = now_us()
        try:
            result, effect = await _FAULT_OPS[op](proc, now_us, *args)
        except (ErlangException, SmpError) as e:
            result, effect = b"raised " + _why(e), []
        await proc.send(log, (FAULT_REC, idx, began, now_us(), result, effect))


async def _reap(proc, pids: list, reason) -> tuple[list, list, list]:
    """Kill ``pids`` with ``reason`` and wait for their deaths.

    Returns ``(died, gone, alive)``: ``died`` the pids whose ``'EXIT'`` came
    with another reason than ``noproc`` (with it), ``gone`` the pids that were
    not alive when linked, ``alive`` those still alive after ``EXIT_WAIT_MS``
    (unlinked again)."""
    for p in pids:
        await proc.link(p)
    for p in pids:
        await proc.exit(p, reason)
    waiting = set(pids)

    def match(x):
        return type(x) is tuple and len(x) == 3 and x[0] is am_EXIT and x[1] in waiting

    died, gone = [], []
    deadline = time.monotonic() + EXIT_WAIT_MS / 1000
    while waiting:
        left = int((deadline - time.monotonic()) * 1000)
        m = await proc.receive(timeout=left, match=match) if left > 0 else None
        if m is None:
            break
        waiting.discard(m[1])
        (gone if m[2] is am_noproc else died).append((m[1], m[2]))
    alive = [p for p in pids if p in waiting]
    for p in alive:
        await proc.unlink(p)
    return died, gone, alive


async def _alive(proc, pid) -> bool:
    return await proc.trace_info(pid, "flags") is not am_undefined


async def _pick_alive(proc, candidates: list, count: int) -> list:
    """The first ``count`` of ``candidates`` (shuffled by the plan) alive now."""
    out = []
    for p in candidates:
        if len(out) >= count:
            break
        if await _alive(proc, p):
            out.append(p)
    return out


async def _op_kill_tracer(proc, now_us, victim, held, replace):
    """``exit(Victim, kill)``; with ``replace = (New, Roles)``, once the
    victim is dead, every tracee in ``held`` (``[(Pid, Flags), ...]``: the
    processes the plan has the victim trace, with their flags) is traced
    again with its flags and ``{tracer, New}``, and every role in ``Roles``
    moves to ``New``.  A tracee that is itself gone by then is counted, not a
    failure."""
    died, gone, _alive_still = await _reap(proc, [victim], am_kill)
    death = now_us()
    problems: list[bytes] = []
    if gone:
        problems.append(b"the tracer was not alive (noproc)")
    elif not died:
        problems.append(f"the tracer was still alive after {EXIT_WAIT_MS} ms".encode())
    effect: list = [(A("held"), len(held)), (A("death_us"), death if died else am_undefined)]
    if replace is not None:
        new, roles = replace
        moved = lost = 0
        for p, flags in held:
            try:
                await proc.trace(p, True, flags + [(am_tracer, new)])
                moved += 1
            except (ErlangException, SmpError) as e:
                if await _alive(proc, p):
                    problems.append(b"retrace " + format_term(p).encode() + b": " + _why(e))
                else:
                    lost += 1  # it died meanwhile: nothing to move
        done_roles = []
        for role, args in roles:
            try:
                await _ROLE_OPS[role](proc, new, *args)
                done_roles.append(A(role))
            except (ErlangException, SmpError) as e:
                problems.append(role.encode() + b": " + _why(e))
        effect += [
            (A("moved"), moved),
            (A("tracees_gone"), lost),
            (A("roles"), done_roles),
            (A("retraced_us"), now_us()),
        ]
    return (A("ok") if not problems else b"; ".join(problems)), effect


async def _role_new(proc, new, flags):
    await proc.trace(A("new"), True, flags + [(am_tracer, new)])


async def _role_pattern(proc, new, mfa, ms):
    await proc.bif("trace_pattern", mfa, ms, [(A("meta"), new)])


async def _role_seq(proc, new):
    await proc.set_system_seq_tracer(new)


async def _role_monitor(proc, new, opts):
    await proc.system_monitor(new, opts)


async def _role_profile(proc, new, opts):
    await proc.system_profile(new, opts)


_ROLE_OPS = {
    "new": _role_new,
    "pattern": _role_pattern,
    "seq_tracer": _role_seq,
    "system_monitor": _role_monitor,
    "system_profile": _role_profile,
}


async def _op_replace(proc, now_us, role, new, args):
    """``set_system_seq_tracer``, ``system_monitor`` or ``system_profile``
    with ``new``; the effect names the one it replaced."""
    old = {
        "seq_tracer": lambda: proc.set_system_seq_tracer(new),
        "system_monitor": lambda: proc.system_monitor(new, *args),
        "system_profile": lambda: proc.system_profile(new, *args),
    }[role]
    prev = await old()
    return A("ok"), [(A("previous"), prev)]


async def _op_kill_processes(proc, now_us, candidates, count, reason):
    """Kill ``count`` live processes of ``candidates`` (in the plan's order):
    one found dead when linked is passed over for the next."""
    died, gone, alive = [], [], []
    rest = list(candidates)
    while rest and len(died) + len(alive) < count:
        batch, rest = rest[: count - len(died) - len(alive)], rest[count - len(died) - len(alive) :]
        d, g, a = await _reap(proc, batch, reason)
        died, gone, alive = died + d, gone + g, alive + a
    effect = [(A("killed"), len(died)), (A("gone"), len(gone)), (A("survived"), len(alive))]
    if alive:
        return f"{len(alive)} still alive after {EXIT_WAIT_MS} ms".encode(), effect
    if not died:
        return b"no process of the group was alive", effect
    return A("ok"), effect


async def _op_set_sensitive(proc, now_us, candidates, count, value):
    chosen = await _pick_alive(proc, candidates, count)
    for p in chosen:
        await proc.send(p, (CTL, am_sensitive, value))
    if not chosen:
        return b"no process of the group was alive", [(A("marked"), 0)]
    return A("ok"), [(A("marked"), len(chosen))]


_FAULT_OPS = {
    "kill_tracer": _op_kill_tracer,
    "replace": _op_replace,
    "kill_processes": _op_kill_processes,
    "set_sensitive": _op_set_sensitive,
}


# ================================================================ registry
@dataclass(frozen=True)
class Bound:
    """The documented range of one numeric key: ``kind`` (``int`` or
    ``float``), ``lo`` to ``hi`` (``lo`` itself excluded when ``lo_open``),
    what the key means, and whether it may be absent (``optional``: None).

    Calling it checks a value: None when the value is a finite number of the
    kind within the range, else why not (text without the value, as the
    other parameter checks give).  Every numeric key of a scenario has one:
    workload parameters here, in ``Workload.params``; the scenario's own keys
    in ``smp.app.scenario.BOUNDS``.
    """

    kind: type
    lo: int | float
    hi: int | float
    meaning: str
    lo_open: bool = False
    optional: bool = False

    def range_text(self) -> str:
        """``1 to 100,000`` / ``> 0 to 86,400``: the range as the docs print it."""
        return f"{'> ' if self.lo_open else ''}{self.lo:,} to {self.hi:,}"

    def __call__(self, v) -> str | None:
        if v is None and self.optional:
            return None
        if self.kind is int:
            if type(v) is not int:
                return "must be an integer"
            what = "an integer"
        else:
            if type(v) not in (int, float):
                return "must be a number"
            if not math.isfinite(v):
                return "must be a finite number"
            what = "a number"
        if v < self.lo or (self.lo_open and v == self.lo):
            return f"must be {what} {'>' if self.lo_open else '>='} {self.lo}"
        if v > self.hi:
            return f"must be {what} <= {self.hi}"
        return None


#: at most this many workload processes in one run, every group and count
#: together: about 20 s of set-up and 400 MiB across the schedulers on a
#: 2-core machine (0.2 ms and 3-4 KiB a process)
MAX_PROCESSES = 100_000
#: an upper bound for counters that only have to fit a long run
_MANY = 1_000_000_000


@dataclass(frozen=True)
class Workload:
    name: str
    doc: str
    params: dict  # name -> (default, check(value) -> error text or None); a Bound for numbers
    setup: Callable
    #: how many processes one instance (one ``count``) spawns, from its checked params
    processes: Callable[[dict], int] = lambda p: 1


class SetupTimeout(EmulatorTimeout):
    """A run's set-up (spawning its processes, tracing them) outlasted its
    ``timeout``; the run was stopped before it started."""


def _setup_ping_pong(env, g, p):
    out = []
    for _ in range(p["pairs"]):
        s1 = env.place(g)
        s2 = s1 if p["same_scheduler"] else env.place(g)
        pong = env.spawn(pp_pong, g["sensitive"], scheduler=s1)
        ping = env.spawn(
            pp_ping, pong, env.ops, env.secs, p["payload"], g["sensitive"], scheduler=s2
        )
        out += [("pong", pong), ("ping", ping)]
    return out


def _setup_ring(env, g, p, seq=None):
    name = A(f"{'seq' if seq else 'ring'}_{g['name']}_{env.counter()}")
    size = p["size"] if seq is None else p["length"]
    nxt, members = name, []
    for k in range(size - 1, 0, -1):
        pid = env.spawn(ring_member, nxt, g["sensitive"], scheduler=env.place(g))
        members.append((f"member{k}", pid))
        nxt = pid
    label = flags = every = None
    if seq is not None:
        label, flags, every = seq["label"], tuple(seq["flags"]), seq["print_every"]
    head = env.spawn(
        ring_head,
        name,
        nxt,
        env.ops,
        env.secs,
        label,
        flags or (),
        every or 0,
        g["sensitive"],
        scheduler=env.place(g),
    )
    return [("head", head)] + members[::-1]


def _setup_seq_chain(env, g, p):
    return _setup_ring(env, g, p, seq=p)


def _setup_fan_in(env, g, p):
    hot = env.spawn(fan_hot, p["senders"], g["sensitive"], scheduler=env.place(g))
    out = [("hot", hot)]
    for k in range(p["senders"]):
        out.append(
            (
                f"sender{k}",
                env.spawn(
                    fan_sender,
                    hot,
                    env.ops,
                    env.secs,
                    p["payload"],
                    g["sensitive"],
                    scheduler=env.place(g),
                ),
            )
        )
    return out


def _setup_calls(env, g, p):
    env.define_calls()
    return [
        (
            "caller",
            env.spawn(
                caller,
                env.ops,
                env.secs,
                p["depth"],
                p["exception_every"],
                g["sensitive"],
                scheduler=env.place(g),
            ),
        )
    ]


def _setup_gc(env, g, p):
    return [
        (
            "allocator",
            env.spawn(
                allocator,
                env.ops,
                env.secs,
                p["words"],
                p["keep_every"],
                p["gc_every"],
                g["sensitive"],
                scheduler=env.place(g),
            ),
        )
    ]


def _setup_ports(env, g, p):
    opts = {k: p[k] for k in ("busy_ms", "cost_ms") if p[k] is not None}
    return [
        (
            "user",
            env.spawn(
                port_user,
                p["driver"],
                opts,
                env.ops,
                env.secs,
                g["sensitive"],
                scheduler=env.place(g),
            ),
        )
    ]


def _setup_churn(env, g, p):
    return [
        (
            "churner",
            env.spawn(
                churner,
                env.ops,
                env.secs,
                p["burst"],
                tuple(p["flags"]),
                g["sensitive"],
                scheduler=env.place(g),
            ),
        )
    ]


def _driver_check(v):
    return (
        None if v in ("echo", "busy", "slow", "dist") else "must be one of echo, busy, slow, dist"
    )


def _flags_check(v):
    if not isinstance(v, list) or not all(isinstance(x, str) and x in TRACE_FLAG_NAMES for x in v):
        return "must be a list of trace flag names"
    return None


def _seq_flags_check(v):
    ok = ("send", "receive", "print", "timestamp")
    if not isinstance(v, list) or not all(x in ok for x in v):
        return f"must be a list of {', '.join(ok)}"
    return None


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload(
            "ping_pong",
            "pairs of processes bouncing a message",
            {
                "pairs": (1, Bound(int, 1, MAX_PROCESSES // 2, "pairs of processes (2 each)")),
                "payload": (0, Bound(int, 0, 100_000, "integers carried by each ping")),
                "same_scheduler": (
                    False,
                    lambda v: None if isinstance(v, bool) else "must be true or false",
                ),
            },
            _setup_ping_pong,
            lambda p: 2 * p["pairs"],
        ),
        Workload(
            "ring",
            "a token passed round a ring of linked processes",
            {"size": (4, Bound(int, 1, MAX_PROCESSES, "processes in the ring"))},
            _setup_ring,
            lambda p: p["size"],
        ),
        Workload(
            "fan_in",
            "many senders casting to one hot process",
            {
                "senders": (
                    4,
                    Bound(int, 1, MAX_PROCESSES - 1, "processes casting to the hot one"),
                ),
                "payload": (0, Bound(int, 0, 100_000, "integers carried by each cast")),
            },
            _setup_fan_in,
            lambda p: p["senders"] + 1,
        ),
        Workload(
            "calls",
            "recursive calls (wl_calls:fib/1) with returns, errors and throws",
            {
                "depth": (4, Bound(int, 0, 20, "N of the wl_calls:fib(N) each operation calls")),
                "exception_every": (
                    3,
                    Bound(
                        int, 0, _MANY, "an error and a throw every this many operations (0: none)"
                    ),
                ),
            },
            _setup_calls,
        ),
        Workload(
            "gc",
            "an allocator that keeps some data and collects garbage",
            {
                "words": (2000, Bound(int, 1, _MANY, "heap words allocated per operation")),
                "keep_every": (
                    4,
                    Bound(int, 0, _MANY, "keep the allocation live every this many (0: never)"),
                ),
                "gc_every": (
                    0,
                    Bound(int, 0, _MANY, "garbage_collect() every this many operations (0: never)"),
                ),
            },
            _setup_gc,
        ),
        Workload(
            "ports",
            "a driver user: commands to an echo, busy or slow port",
            {
                "driver": ("echo", _driver_check),
                "busy_ms": (
                    None,
                    Bound(int, 0, 60_000, "ms a busy port stays busy per command", optional=True),
                ),
                "cost_ms": (
                    None,
                    Bound(int, 0, 60_000, "ms a slow port takes per command", optional=True),
                ),
            },
            _setup_ports,
        ),
        Workload(
            "seq_chain",
            "a seq_trace token carried round a chain of processes",
            {
                "length": (4, Bound(int, 1, MAX_PROCESSES, "processes in the chain")),
                "label": (7, Bound(int, 0, MAX_SMALL, "the seq_trace label (a small integer)")),
                "flags": (["send", "receive", "print"], _seq_flags_check),
                "print_every": (
                    1,
                    Bound(int, 0, _MANY, "seq_trace_print every this many laps (0: never)"),
                ),
            },
            _setup_seq_chain,
            lambda p: p["length"],
        ),
        Workload(
            "churn",
            "a process that traces its worker to short-lived tracers it kills",
            {
                "burst": (5, Bound(int, 1, 100_000, "requests sent while one tracer lives")),
                "flags": (["send", "receive"], _flags_check),
            },
            _setup_churn,
            lambda p: 3,  # the churner, its worker and one short-lived tracer at a time
        ),
    ]
}


def processes_of(workload: str, params: dict) -> int:
    """How many processes one instance of ``workload`` spawns (checked params)."""
    return WORKLOADS[workload].processes(params)


def check_params(workload: str, params: dict):
    """Check a group's ``params`` table; returns ``(key, message)`` or None. Fills defaults."""
    w = WORKLOADS[workload]
    for k in params:
        if k not in w.params:
            return (
                k,
                f"unknown parameter {k!r} for workload {workload} "
                f"(parameters: {', '.join(w.params) or 'none'})",
            )
    for k, (default, check) in w.params.items():
        if k not in params:
            params[k] = list(default) if isinstance(default, list) else default
            continue
        err = check(params[k])
        if err:
            return k, f"{err}, not {_short(params[k])}"
    if workload == "ports":
        if params["busy_ms"] is not None and params["driver"] not in ("busy", "dist"):
            return "busy_ms", f"only the busy and dist drivers take busy_ms, not {params['driver']}"
        if params["cost_ms"] is not None and params["driver"] != "slow":
            return "cost_ms", f"only the slow driver takes cost_ms, not {params['driver']}"
    return None


def _short(v, width: int = 60) -> str:
    """``repr(v)``, cut to ``width`` characters: an error stays one short line."""
    r = repr(v)
    return r if len(r) <= width else r[: width - 3] + "..."


# ================================================================ one run
class _Env:
    """What a workload's set-up uses: the emulator, the run's length, and
    ``spawn``, which stops the set-up once the run's timeout has passed."""

    def __init__(
        self, vm: Emulator, ops: int, secs: float, rng: random.Random, deadline: Any = None
    ):
        self.vm, self.ops, self.secs, self.rng = vm, ops, secs, rng
        self.deadline = deadline  # a _SetupDeadline, or None: no limit
        self._n = 0
        self._defined = False

    def spawn(self, *args, **kw):
        if self.deadline is None:
            return self.vm.spawn(*args, **kw)
        self.deadline.check()
        pid = self.vm.spawn(*args, **kw)
        self.deadline.done += 1
        return pid

    def counter(self) -> int:
        self._n += 1
        return self._n

    def place(self, g):
        return g["scheduler"]

    def define_calls(self):
        if not self._defined:
            self.vm.define("wl_calls", "fib", wl_fib)
            self.vm.define("wl_calls", "check", wl_check)
            self.vm.define("wl_calls", "throw", wl_throw)
            self._defined = True


class _SetupDeadline:
    """The run's ``timeout`` counted from the start of ``execute``: set-up
    (starting the emulator, spawning and tracing the workload's processes)
    spends it too.  ``check()`` raises ``SetupTimeout`` once it has passed;
    it is called before every spawn and every per-process trace call, each of
    which takes well under a millisecond, so a set-up stops within a moment
    of the timeout."""

    def __init__(self, timeout: float, total: int):
        self.timeout = timeout
        self.at = time.monotonic() + timeout
        self.total = total  # the workload processes the set-up spawns
        self.done = 0

    def check(self) -> None:
        if time.monotonic() >= self.at:
            raise SetupTimeout(
                f"run not finished within timeout = {self.timeout:g} s: its set-up had "
                f"spawned {self.done:,} of {self.total:,} processes, "
                "so the run did not start (raise the timeout or spawn fewer processes)"
            )


def _atoms(flags) -> list:
    return [A(f) for f in flags]


def _monitor_opts(m: dict) -> list:
    out: list = []
    for k in ("long_gc", "long_schedule", "large_heap"):
        if m[k]:
            out.append((A(k), m[k]))
    for k in ("busy_port", "busy_dist_port"):
        if m[k]:
            out.append(A(k))
    return out


def _profile_opts(p: dict) -> list:
    return [A(k) for k in ("scheduler", "runnable_procs", "runnable_ports", "exclusive") if p[k]]


@dataclass
class RunOutcome:
    """What one run produced: the summary (JSON-able) and every trace term per tracer."""

    summary: dict
    messages: dict  # tracer name -> [term, ...] in arrival order
    labels: dict  # pid/port -> stable label ("pingpong[0].ping")


class _IpReader(threading.Thread):
    """Reads an ip trace port as dbg's trace client would, in the user's process."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.port = port
        self.terms: list = []
        self.error: str | None = None

    def run(self):
        try:
            for t in read_trace(("127.0.0.1", self.port), timeout=None):
                self.terms.append(t)
        except Exception as e:  # the port closed under us, or bad frames
            self.error = str(e)


def set_up(vm, env, sc: dict, tracers: dict, labels: dict, check=lambda: None) -> dict:
    """The scenario's processes and tracing, after its tracers: ``new``
    tracing, the groups (each process labelled ``group[i].role`` in
    ``labels``), ``all``/``existing`` tracing, the groups' tracing, the call
    patterns, the seq tracer, the system monitor and profiler, in that order.
    ``vm`` is an ``Emulator`` (``execute``) or the simulator's facade
    (``smp-emu explore``); ``check()`` runs before each per-process trace
    call (the set-up's share of the run's timeout).  Returns the pids of
    each group."""
    for t in sc["trace"]:
        if t["pids"] == "new":
            vm.trace("new", True, t["flags"], tracer=tracers[t["tracer"]])
    group_pids: dict[str, list] = {}
    for g in sc["groups"]:
        w = WORKLOADS[g["workload"]]
        pids = []
        for i in range(g["count"]):
            for role, pid in w.setup(env, g, g["params"]):
                labels[pid] = f"{g['name']}[{i}].{role}"
                pids.append(pid)
        group_pids[g["name"]] = pids
    for t in sc["trace"]:
        if t["pids"] in ("all", "existing"):
            vm.trace(t["pids"], True, t["flags"], tracer=tracers[t["tracer"]])
    for g in sc["groups"]:
        if g["tracer"] is not None and g["trace"]:
            for pid in group_pids[g["name"]]:
                check()
                vm.trace(pid, True, g["trace"], tracer=tracers[g["tracer"]])
    for p in sc["patterns"]:
        mfa = tuple(p["mfa"])
        flags: list = [f for f in p["flags"] if f != "meta"]
        if "meta" in p["flags"]:
            flags.append(("meta", tracers[p["meta_tracer"]]))
        if mfa[0] == "wl_calls":
            env.define_calls()
        vm.trace_pattern(mfa, p["match_spec"], flags)
    if sc["seq_trace"] is not None:
        vm.set_system_seq_tracer(tracers[sc["seq_trace"]["tracer"]])
    if sc["system_monitor"] is not None:
        m = sc["system_monitor"]
        vm.system_monitor(tracers[m["monitor"]], _monitor_opts(m))
    if sc["system_profile"] is not None:
        pr = sc["system_profile"]
        vm.system_profile(tracers[pr["profiler"]], _profile_opts(pr))
    return group_pids


def execute(  # noqa: C901 - one run, from set-up to summary
    sc: dict,
    *,
    mode: str | None = None,
    schedulers: int | None = None,
    on_trace: Callable[[str, Any], None] | None = None,
    on_progress: Callable[[dict], None] | None = None,
    extra_faults: list | None = None,
    journal: str | None = None,
    emulator_options: dict | None = None,
    sample_interval: float | None = None,
    check_expect: Callable[[RunOutcome, dict], list] | None = None,
) -> RunOutcome:
    """Run scenario ``sc`` once; ``on_trace(tracer_name, term)`` is called as
    terms arrive, ``on_progress({"elapsed", "made", "delivered", "received"})``
    every ``CHECK_S`` or so (the counts are the latest sample's).  The
    dispatcher and the schedulers sample their own counters every
    ``sample_interval`` s (by default at least 50 samples over the
    scenario's ``seconds``: ``smp.app.series.default_interval``) and hand
    them over at the end: ``summary["timeseries"]``.  ``journal`` (smp mode) is where the dispatcher records its
    queue and decisions for ``smp.app.replay``; ``emulator_options`` go to
    ``Emulator`` (``bind``, ``remote_schedulers``, ``keys``... for schedulers
    on other hosts).  KeyboardInterrupt stops the run early: the outcome is still
    returned, with ``summary["interrupted"] = True``.  The scenario's
    ``timeout`` counts from the start of the set-up: a set-up that outlasts it
    raises ``SetupTimeout`` (nothing ran), a run that does ends with
    ``summary["error"]``."""
    mode = mode or sc["mode"]
    n = 1 if mode == "nonsmp" else (schedulers or sc["schedulers"])
    rng = random.Random(sc["seed"])
    d = sc["duration"]
    ops = d["operations"] or 0
    secs = d["seconds"] or 0.0
    messages: dict[str, list] = {}
    labels: dict = {}
    emit = on_trace or (lambda name, term: None)
    limit = TraceLimit.from_scenario(sc)  # max_messages / rate, as recon_trace caps
    if limit is not None:
        emit = limit.printer(emit)
    t_setup = time.perf_counter()
    clock = _SetupDeadline(
        sc["timeout"],
        sum(g["count"] * processes_of(g["workload"], g["params"]) for g in sc["groups"]),
    )
    with Emulator(
        mode=mode,
        schedulers=n,
        journal=journal if mode == "smp" else None,
        **(emulator_options or {}),
    ) as vm:
        env = _Env(vm, ops, secs, rng, clock)
        collectors: dict[str, Any] = {}  # name -> pid, in display order
        ports: dict[str, tuple] = {}  # name -> (kind, Port, spec)
        ip_readers: dict[str, _IpReader] = {}
        tracers: dict[str, Any] = {}
        for t in sc["tracers"]:
            if t["kind"] == "collector":
                ref = vm.spawn_collector()
                collectors[t["name"]] = ref
            elif t["kind"] == "file":
                wrap = None
                if t["wrap_suffix"]:
                    wrap = (t["wrap_suffix"], t["wrap_size"], t["wrap_count"])
                ref = vm.open_trace_port("file", t["path"], wrap=wrap)
                ports[t["name"]] = ("file", ref, t)
            elif t["kind"] == "ip":
                ref = vm.open_trace_port("ip", t["port"], queue_size=t["queue_size"])
                ports[t["name"]] = ("ip", ref, t)
                if t["print"]:
                    r = _IpReader(vm.trace_port_info(ref)["port"])
                    r.start()
                    ip_readers[t["name"]] = r
            elif t["kind"] == "memory":
                ref = vm.open_trace_port("memory", heavy_every=t["heavy_every"])
                ports[t["name"]] = ("memory", ref, t)
            else:
                ref = vm.open_trace_port("null")
                ports[t["name"]] = ("null", ref, t)
            tracers[t["name"]] = ref
            labels[ref] = t["name"]
            messages[t["name"]] = []
        printed = {t["name"] for t in sc["tracers"] if t["print"]}

        faults = list(sc["faults"]) + list(extra_faults or [])
        plan_events, new_tracers = _plan(sc, faults, rng, tracers)
        for name, kind in new_tracers:
            if kind == "memory":
                ref = vm.open_trace_port("memory")
                ports[name] = ("memory", ref, {"print": True})
            else:
                ref = collectors[name] = vm.spawn_collector()
            tracers[name] = ref
            labels[ref] = name
            messages[name] = []
            printed.add(name)

        group_pids = set_up(vm, env, sc, tracers, labels, clock.check)
        plan, fault_records = _resolve_plan(plan_events, tracers, group_pids, sc)
        ctl = fault_log = None
        if plan:
            # the fault log keeps the controller's record of each fault event
            fault_log = vm.spawn_collector()
            ctl = vm.spawn(controller, plan, fault_log)
            labels[ctl], labels[fault_log] = "controller", "fault log"
            if any(t["pids"] in ("new", "all") for t in sc["trace"]):
                for pid in (fault_log, ctl):
                    vm.trace(pid, False, ["all"], tracer=next(iter(tracers.values())))
        setup_s = time.perf_counter() - t_setup

        offsets = {name: 0 for name in collectors}

        def pull():
            for name, pid in collectors.items():
                try:
                    new = vm.messages(pid, start=offsets[name])
                except SchedulerLost:  # it lived on a scheduler that was lost
                    continue
                offsets[name] += len(new)
                messages[name].extend(new)
                if name in printed:
                    for term in new:
                        emit(name, term)

        interrupted = completed = False
        error = None
        held = {"s": 0.0, "at": 0.0}  # the longest the controller overshot a check
        not_fired: list = []
        not_fired_at = None  # when the controller was stopped, the workload being over
        main = "dispatcher" if mode == "smp" else "scheduler"

        def latest() -> dict:
            """The latest sample of the process that counts every message (cheap)."""
            try:
                got = vm.series(final=False)
            except SmpError:
                return {}
            if main == "dispatcher":
                point = got["dispatcher"]
            else:
                point = next(iter(got["schedulers"].values()), None)
            return point[1] if point else {}

        collected: dict = {}

        def end_samples() -> None:
            """The run is over: the samplers take their last sample and hand
            their series over, before anything else is asked of the processes."""
            try:
                collected.update(vm.series())
            except SmpError:  # a scheduler or the dispatcher went away
                pass

        run_start_us = time.time_ns() // 1000  # the trace timestamps' clock
        # the samplers count from the same moment, on the same monotonic clock
        vm.sample(sample_interval or default_interval(secs), time.monotonic())
        t0 = time.perf_counter()
        deadline = clock.at  # the timeout counts from the start of the set-up
        run_for = vm.run_for if limit is None else limit.runner(vm, t0, tracers.values())
        k = 1
        try:
            while True:
                # run until the next check; the samples are taken meanwhile, where
                # the counters live, however long the controller is held
                target = k * CHECK_S
                wait = max(0.001, target - (time.perf_counter() - t0))
                if run_for(min(wait, max(0.01, deadline - time.monotonic()))):
                    completed = True
                    break
                now = time.perf_counter() - t0
                if now - target > held["s"]:
                    held.update(s=now - target, at=target)
                k = max(k + 1, int(now / CHECK_S + 1e-9) + 1)
                if ctl is not None and now < plan[-1][0] and _work_over(vm, group_pids):
                    # faults still to come would hold a finished run: they do not fire
                    not_fired, not_fired_at = _not_fired(plan_events, now), now
                    vm.exit(ctl, am_kill)
                    ctl = None
                if time.monotonic() >= deadline:
                    error = f"run not finished within {sc['timeout']:g} s"
                    break
                if on_trace is not None:
                    pull()  # only what is new since the last sample
                if on_progress:
                    last = latest()
                    on_progress(
                        {
                            "elapsed": time.perf_counter() - t0,
                            "made": last.get("made", 0),
                            "delivered": last.get("delivered", 0),
                            "received": sum(len(m) for m in messages.values()),
                        }
                    )
            elapsed = time.perf_counter() - t0
            end_samples()
            pull()
        except KeyboardInterrupt:
            elapsed = time.perf_counter() - t0
            interrupted = True
        except SchedulerLost as e:
            # the rest of the run became quiet: it ends here, measured, and
            # the summary says what was lost
            elapsed = time.perf_counter() - t0
            error = str(e)
            end_samples()
            pull()
        # From here on the run is over: a second Ctrl-C must not leave it half-measured.
        if not collected:
            end_samples()
        stats = vm.statistics()
        fault_log_terms: list = []
        if fault_log is not None:
            try:
                fault_log_terms = vm.messages(fault_log)
            except SmpError:  # it lived on a scheduler that was lost
                pass
        lat = sorted(vm.latencies_ns())
        port_info = {}
        for name, (kind, ref, t) in ports.items():
            try:
                if kind == "file":
                    vm.flush_trace_port(ref)
                    port_info[name] = vm.trace_port_info(ref)
                    vm.close_trace_port(ref)
                    src = (
                        t["path"]
                        if not t["wrap_suffix"]
                        else (t["path"], "wrap", t["wrap_suffix"], t["wrap_size"], t["wrap_count"])
                    )
                    for term in read_trace(src):
                        messages[name].append(term)
                        if t["print"]:
                            emit(name, term)
                elif kind == "memory":
                    for term in vm.trace_port_terms(ref):
                        messages[name].append(term)
                        if t["print"]:
                            emit(name, term)
                    port_info[name] = vm.trace_port_info(ref)
                elif kind == "ip":
                    vm.flush_trace_port(ref)
                    port_info[name] = vm.trace_port_info(ref)
                    vm.close_trace_port(ref)
                    r = ip_readers.get(name)
                    if r is not None:
                        r.join(5)
                        for term in r.terms:
                            messages[name].append(term)
                            emit(name, term)
                else:
                    port_info[name] = vm.trace_port_info(ref)
            except (SmpError, OSError) as e:
                port_info[name] = {"error": str(e)}
    summary = _summary(
        sc,
        mode,
        n,
        stats,
        lat,
        elapsed,
        setup_s,
        messages,
        port_info,
        completed=completed,
        interrupted=interrupted,
        error=error,
    )
    summary["timeseries"] = run_timeseries(collected, mode)
    summary["duration"] = _duration_report(sc, summary, held)
    summary["faults_not_fired"] = not_fired
    summary["faults"] = fault_report(
        fault_records,
        fault_log_terms,
        messages,
        not_fired_after=not_fired_at,
        ended_early=interrupted or error is not None,
        labels=labels,
    )
    summary["limit"] = limit.to_json() if limit is not None else None
    summary["latency_histogram"] = latency_histogram(lat)
    prof = sc["system_profile"]
    summary["scheduler_timeline"] = {
        "profiled": bool(prof and prof["scheduler"]),
        **(scheduler_timeline(messages, run_start_us) if prof and prof["scheduler"] else {}),
    }
    outcome = RunOutcome(summary, messages, labels)
    # the scenario's [[expect]] clauses, each held or broken with its
    # evidence: checked by the caller's checker (smp.app.compare.check_expect,
    # which reads this module, so it is handed in rather than imported)
    summary["expect"] = check_expect(outcome, sc) if check_expect is not None else []
    return outcome


def _work_over(vm, group_pids: dict) -> bool:
    """Every workload process has exited (asked until one is found alive)."""
    try:
        return not any(vm.is_alive(p) for pids in group_pids.values() for p in pids)
    except SmpError:
        return False


def _not_fired(events: list, now: float) -> list[dict]:
    """The faults (one entry each) with a planned time after ``now``."""
    out: dict = {}
    for at, f, _k, _ in events:
        if at > now:
            key = id(f)
            if key not in out:
                out[key] = {
                    "where": f.get("where"),
                    "action": f["action"],
                    "at": f["at"],
                    "first_missed_s": round(at, 6),
                    "missed": 0,
                    "why": f"the workload was over at {now:.2f} s",
                }
            out[key]["missed"] += 1
    return list(out.values())


def fault_report(
    records: list,
    log: list,
    messages: dict,
    *,
    not_fired_after=None,
    ended_early: bool = False,
    labels=None,
) -> list[dict]:
    """One entry per fault event: what was planned (``records``, from
    ``_resolve_plan``), what the controller did (its records in the fault
    log) and the effect seen in the run's trace.

    Each entry has ``action``, ``target``, ``victim`` (the tracer killed or
    replaced), ``replacement``, ``at`` and ``planned_at`` (seconds on the
    plan's clock, which starts with the controller), ``started_at`` and
    ``done_at``, ``result`` (``ok``, ``not fired``, or why the fault did not
    take), ``took`` (None when it did not fire or the run was interrupted
    or failed before the controller reported it; False when the controller
    did not report it from a run that ended normally), ``may_fail``, and
    ``effect``: for kill_tracer ``tracees_held`` (the victim's tracees among
    the groups' processes, as the set-up traced them), ``tracees_moved``,
    ``tracees_gone`` (died before they could be moved), ``roles_moved``,
    ``death_at`` and ``retraced_at`` (when the ``'EXIT'`` came and when the
    last tracee and role had moved), ``gap_ms`` between the two,
    ``replacement_received`` (messages the replacement got by the end of the
    run) and ``lost_before_retrace`` (see ``lost_in_gap``); for
    replace_seq_tracer, replace_monitor and replace_profiler the
    ``replacement_received``; for kill_processes ``killed``, ``gone`` and
    ``survived``; for set_sensitive ``marked``."""
    labels = labels or {}
    done = {}
    for term in log:
        if type(term) is tuple and len(term) == 6 and term[0] is FAULT_REC:
            done[term[1]] = term
    out = []
    for idx, rec in enumerate(records):
        e = dict(rec, at=rec["planned_at"], started_at=None, done_at=None, effect={})
        got = done.get(idx)
        if got is None:
            e["took"] = None
            if not_fired_after is not None and rec["planned_at"] > not_fired_after:
                e["result"] = "not fired: the workload was over"
            elif not_fired_after is not None:
                e["result"] = "cut short: the workload was over while it was carried out"
            elif ended_early:
                e["result"] = "no record: the run was interrupted or failed first"
            else:
                e["took"] = False
                e["result"] = "no record: the controller did not carry it out"
            out.append(e)
            continue
        _tag, _i, began, finished, result, effect = got
        e["started_at"], e["done_at"] = began / 1e6, finished / 1e6
        e["took"] = result is A("ok")
        e["result"] = (
            "ok"
            if e["took"]
            else result.decode("utf-8", "replace")
            if type(result) is bytes
            else format_term(result)
        )
        eff = {k.name: v for k, v in effect}
        out_eff: dict = {}
        if rec["action"] == "kill_tracer":
            death = eff.get("death_us")
            out_eff["tracees_held"] = eff.get("held", 0)
            out_eff["death_at"] = death / 1e6 if type(death) is int else None
            if rec["replacement"]:
                out_eff["tracees_moved"] = eff.get("moved", 0)
                out_eff["tracees_gone"] = eff.get("tracees_gone", 0)
                out_eff["roles_moved"] = [r.name for r in eff.get("roles", [])]
                out_eff["retraced_at"] = eff["retraced_us"] / 1e6 if "retraced_us" in eff else None
                out_eff["gap_ms"] = (
                    round((eff["retraced_us"] - death) / 1000, 3)
                    if type(death) is int and "retraced_us" in eff
                    else None
                )
                out_eff["lost_before_retrace"] = lost_in_gap(
                    messages.get(rec["victim"], []), messages.get(rec["replacement"], [])
                )
        elif rec["action"].startswith("replace_"):
            prev = eff.get("previous")
            if type(prev) is tuple and prev:  # {Tracer, Options}
                prev = prev[0]
            out_eff["previous"] = (
                labels.get(prev, format_term(prev))
                if type(prev) in (Pid, Port)
                else format_term(prev)
            )
        else:
            out_eff.update(eff)
        if rec["replacement"]:
            out_eff["replacement_received"] = len(messages.get(rec["replacement"], []))
        e["effect"] = out_eff
        out.append(e)
    return out


_TRACE_TAGS = (A("trace"), A("trace_ts"))
_SEND_RECV = (A("send"), A("receive"))


def _streams(terms: list, last: bool) -> dict:
    """``{(tracee, event, sender): seq}``: the last (or first) sequence number
    of each stream of workload messages in ``terms``."""
    out: dict = {}
    for t in terms:
        if not (type(t) is tuple and len(t) >= 4 and t[0] in _TRACE_TAGS and t[2] in _SEND_RECV):
            continue
        m = t[3]
        if not (type(m) is tuple and len(m) >= 3 and type(m[2]) is int):
            continue
        key = (t[1], t[2], m[1])
        if last or key not in out:
            out[key] = m[2]
    return out


def lost_in_gap(victim_terms: list, replacement_terms: list) -> int | None:
    """How many trace events of the victim's tracees no tracer received
    between the victim's last message and the replacement's first: the race
    of a tracer replaced after its death.

    Derived from the workload's own numbering, not counted by the VM: every
    workload message carries its sender's sequence number, one more for each
    message the sender sends, so for each stream (a tracee's ``send`` events,
    or its ``'receive'`` events of one sender's messages) that both tracers
    received, the numbers between the victim's last and the replacement's
    first are events that went to nobody.  In smp they were made and dropped
    (the tracer was dead, ``receiver_dead``) or were queued for the victim
    when it died; in nonsmp the first was suppressed and the rest were never
    made, the tracee having lost its flags.  Only ``send``/``'receive'``
    events of sequence-numbered workload messages count (call, gc, procs,
    seq_trace and port events are not numbered), and a stream only one of the
    two received is not counted, so this is a lower bound; an event the
    tracee did not trace meanwhile (a process made sensitive) would count.
    None when no stream is in both."""
    before, after = _streams(victim_terms, True), _streams(replacement_terms, False)
    both = before.keys() & after.keys()
    if not both:
        return None
    return sum(max(0, after[k] - before[k] - 1) for k in both)


def fault_notes(summary: dict, every: bool = True) -> list[str]:
    """One line per fault event with its result and effect (the faults that
    did not fire as one line per fault), naming the file and line; with
    ``every`` false only the events that did not take (and may not fail) and
    the faults that did not fire."""
    out = []
    for f in summary.get("faults") or []:
        if f["took"] is None and f["result"].startswith("not fired"):
            continue  # listed below, once per fault
        if every or (f["took"] is False and not f.get("may_fail")):
            out.append(_fault_line(f))
    for f in summary.get("faults_not_fired") or []:
        where = f"{f['where']}: " if f.get("where") else ""
        out.append(
            f"{where}{f['action']} at {f['first_missed_s']:g} s did not fire"
            + (f" ({f['missed']} times)" if f["missed"] > 1 else "")
            + f": {f['why']}"
        )
    return out


def _fault_line(f: dict) -> str:
    where = f"{f['where']}: " if f.get("where") else ""
    what = f["action"] + (f" {f['target']}" if f.get("target") else "")
    if f["action"] == "kill_tracer" and f.get("victim") not in (None, f.get("target")):
        what += f" (now {f['victim']})"
    head = f"{where}fault {what} at {f['planned_at']:g} s"
    if f["done_at"] is not None:
        head += f" (done at {f['done_at']:.3f} s)"
    if f["took"] is None:
        return f"{head}: {f['result']}"
    res = "ok" if f["took"] else "DID NOT TAKE: " + f["result"]
    if not f["took"] and f.get("may_fail"):
        res += " (may_fail)"
    eff = f["effect"]
    parts = []
    repl = f.get("replacement")
    if f["action"] == "kill_tracer":
        if repl and not eff["tracees_held"] and not eff.get("roles_moved"):
            parts.append(
                f"it held no tracee of the groups and no role: nothing moved to {repl}, "
                f"which received {eff['replacement_received']:,} messages"
            )
        elif repl:
            gone = f" ({eff['tracees_gone']} had exited)" if eff.get("tracees_gone") else ""
            roles = f" and {', '.join(eff['roles_moved'])}" if eff.get("roles_moved") else ""
            gap = f" {eff['gap_ms']:g} ms after its death" if eff.get("gap_ms") is not None else ""
            lost = eff.get("lost_before_retrace")
            parts.append(
                f"{eff.get('tracees_moved', 0)} of {eff['tracees_held']} tracees{roles} "
                f"moved to {repl}{gap}{gone}"
            )
            parts.append(f"{repl} received {eff['replacement_received']:,} messages")
            parts.append(
                "send/receive events lost before the retrace: "
                + ("- (no stream seen by both)" if lost is None else f"{lost:,}")
            )
        else:
            parts.append(f"{eff['tracees_held']} tracees left without a tracer")
    elif f["action"].startswith("replace_"):
        parts.append(
            f"{eff.get('previous') or f.get('victim')} replaced by {repl}, which received "
            f"{eff.get('replacement_received', 0):,} messages"
        )
    elif f["action"] == "kill_processes":
        parts.append(f"{eff.get('killed', 0)} killed")
    elif f["action"] == "set_sensitive":
        parts.append(f"{eff.get('marked', 0)} marked")
    return f"{head}: {res}" + ("; " + "; ".join(parts) if parts else "")


def _duration_report(sc: dict, summary: dict, held: dict) -> dict:
    """What was asked (``seconds`` or ``operations``) against how long the run
    took; when a time-bounded run took more than 10 % longer, ``why`` says
    what the samples show it was doing after its time was up."""
    d = sc["duration"]
    secs, elapsed = d["seconds"], summary["elapsed_s"]
    out = {
        "seconds": secs,
        "operations": d["operations"],
        "elapsed_s": elapsed,
        "within_10pct": None,
        "over_pct": None,
        "why": [],
    }
    if not secs:
        return out
    over = (elapsed - secs) / secs * 100
    out.update(within_10pct=elapsed <= secs * 1.1, over_pct=round(over, 1))
    if out["within_10pct"] or summary["interrupted"]:
        return out
    ts = summary["timeseries"]
    t = ts.get("t_s") or []
    made, qmax = ts.get("made") or [0], ts.get("queued_max") or [0]
    why = []
    at = next((i for i, x in enumerate(t) if x >= secs), None)
    if at is not None and made[-1] > made[at]:
        done = next(x for x, m in zip(t, made, strict=False) if m == made[-1])
        why.append(
            f"the workload processes stop at the end of the iteration they are in "
            f"at {secs:g} s; {made[-1] - made[at]:,} trace messages were made after "
            f"{t[at]:.2f} s, the last of them by {done:.2f} s"
        )
    peak = max(qmax[at:], default=0) if at is not None else 0
    if peak:
        why.append(
            f"the dispatcher still had up to {peak:,} messages queued after "
            f"{secs:g} s and delivered them before the end"
        )
    if held["s"] > max(0.1 * secs, 2 * CHECK_S):
        why.append(
            f"the controller was held {held['s']:.2f} s past a check of the run "
            f"(at {held['at']:.2f} s) serving the BIFs processes called or waiting "
            f"for a busy scheduler, so it noticed late that the run was over"
        )
    if not why:
        why.append(
            "the run became quiet (every process idle, every message delivered) "
            f"only at {elapsed:.2f} s"
        )
    out["why"] = why
    return out


def duration_note(summary: dict) -> str | None:
    """One line on stderr when a time-bounded run took more than 10 % longer."""
    d = summary.get("duration") or {}
    if not d.get("seconds") or d.get("within_10pct") is not False:
        return None
    return (
        f"ran {d['elapsed_s']:.2f} s for seconds = {d['seconds']:g} "
        f"(+{d['over_pct']:.0f} %): " + "; ".join(d["why"])
    )


def _pct(sorted_values: list, q: float):
    if not sorted_values:
        return None
    k = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[k]


def _summary(
    sc, mode, n, stats, lat, elapsed, setup_s, messages, port_info, *, completed, interrupted, error
) -> dict:
    per_sched = []
    for k, s in enumerate(stats.get("schedulers", []), 1):
        per_sched.append(
            {
                "scheduler": k,
                "made": s.get("made", 0),
                "messages_sent": s.get("messages_sent", 0),
                "processes_exited": s.get("processes_exited", 0),
                "processes": s.get("processes", 0),
                "suppressed": s.get("suppressed", 0),
                "fake_schedule_pairs": s.get("fake_schedule_pairs", 0),
                "sys_arrived_dead": s.get("sys_arrived_dead", 0),
            }
        )
    st = {k: v for k, v in stats.items() if k != "schedulers"}
    el = max(elapsed, 1e-9)
    return {
        "scenario": sc["name"],
        "source": sc.get("source"),
        "mode": mode,
        "schedulers": n,
        "seed": sc["seed"],
        "completed": completed,
        "interrupted": interrupted,
        "error": error,
        "elapsed_s": round(elapsed, 6),
        "setup_s": round(setup_s, 6),
        "stats": st,
        "throughput": {
            "made_per_s": round(st["made"] / el, 1),
            "delivered_per_s": round(st["delivered"] / el, 1),
            "messages_sent_per_s": round(st.get("messages_sent", 0) / el, 1),
        },
        "latency_ns": {
            "count": len(lat),
            "p50": _pct(lat, 0.5),
            "p90": _pct(lat, 0.9),
            "p99": _pct(lat, 0.99),
            "max": lat[-1] if lat else None,
        },
        "per_scheduler": per_sched,
        "tracers": {
            name: {"received": len(ms), **({"port": port_info[name]} if name in port_info else {})}
            for name, ms in messages.items()
        },
    }


# ================================================================ fault plans
def _plan(sc: dict, faults: list, rng: random.Random, tracers: dict):
    """Expand the faults into timed events; name the replacement collectors needed.

    Runs in the user's process.  Returns ``(events, new_tracers)`` where each
    event is ``(at, fault, k, replacement_name_or_None)``, in time order (the
    replacements of one tracer are numbered in that order: ``t~1`` takes over
    first), and ``new_tracers`` lists ``(name, kind)``: a collector, or for
    replace_profiler a memory port, since a profiler process would wake its
    own scheduler with every message it got and a run profiling schedulers
    would never become quiet.
    """
    timed = []
    for f in faults:
        for k in range(f["times"]):
            timed.append((f["at"] + k * f["every"], f, k))
    timed.sort(key=lambda e: e[0])
    events = []
    new: list[tuple[str, str]] = []
    serial: dict[str, int] = {}
    for at, f, k in timed:
        repl = None
        if f["action"] in ("replace_seq_tracer", "replace_monitor", "replace_profiler") or (
            f["action"] == "kill_tracer" and f["replace"]
        ):
            base = f["target"] or {
                "replace_seq_tracer": "seq",
                "replace_monitor": "monitor",
                "replace_profiler": "profiler",
            }.get(f["action"], "tracer")
            serial[base] = serial.get(base, 0) + 1
            repl = f"{base}~{serial[base]}"
            new.append((repl, "memory" if f["action"] == "replace_profiler" else "collector"))
        events.append((at, f, k, repl))
    return events, new


def _resolve_plan(events, tracers: dict, group_pids: dict, sc: dict) -> tuple[list, list]:
    """Turn timed events into the controller's plan, following which tracer
    is current, and one record per event (what ``execute`` reports).

    Returns ``(plan, records)``: ``plan`` is ``[(at, index, op, args), ...]``
    for ``controller``; ``records[index]`` names the event (``where``,
    ``action``, ``target``, ``victim``: the tracer a kill_tracer kills, which
    is the last replacement of its target, ``replacement``, ``planned_at``,
    ``may_fail``).  The tracees a kill_tracer moves are the processes of the
    groups whose tracer the victim is, or every group's when the victim
    traces ``new``, ``all`` or ``existing`` processes, each with the flags the
    set-up gave it.  Processes a workload spawns itself are not among them: a
    victim's tracee outside the groups keeps its dead tracer (a ``new`` or
    ``all`` role moves the default tracing, for processes spawned later)."""
    rng = random.Random(sc["seed"] + 1)
    # who each role's tracer is, by tracer name; replaced as the plan goes
    cur = {name: name for name in tracers}
    seq = sc["seq_trace"]["tracer"] if sc["seq_trace"] else None
    mon = sc["system_monitor"]["monitor"] if sc["system_monitor"] else None
    prof = sc["system_profile"]["profiler"] if sc["system_profile"] else None
    every_pid = [p for pids in group_pids.values() for p in pids]
    plan, records = [], []
    for idx, (at, f, _k, repl) in enumerate(events):
        a = f["action"]
        rec = {
            "where": f.get("where"),
            "action": a,
            "target": f.get("target"),
            "victim": None,
            "replacement": repl,
            "planned_at": round(at, 6),
            "may_fail": bool(f.get("may_fail", False)),
        }
        if a == "kill_tracer":
            victim = cur.get(f["target"], f["target"])
            rec["victim"] = victim
            held: dict = {}  # pid -> its flags, as the set-up traced it
            roles: list = []
            for t in sc["trace"]:
                if cur.get(t["tracer"]) == victim:
                    for pid in every_pid:
                        held.setdefault(pid, []).extend(t["flags"])
                    if t["pids"] in ("new", "all"):
                        roles.append(("new", (_atoms(t["flags"]),)))
            for g in sc["groups"]:
                if g["tracer"] is not None and cur.get(g["tracer"]) == victim and g["trace"]:
                    for pid in group_pids[g["name"]]:
                        held.setdefault(pid, []).extend(g["trace"])
            for p in sc["patterns"]:
                if "meta" in p["flags"] and cur.get(p["meta_tracer"]) == victim:
                    mfa = tuple(_atom_or(x) for x in p["mfa"])
                    roles.append(("pattern", (mfa, p["match_spec"])))
            if seq and cur.get(seq) == victim:
                roles.append(("seq_tracer", ()))
            if mon and cur.get(mon) == victim:
                roles.append(("system_monitor", (_monitor_opts(sc["system_monitor"]),)))
            if prof and cur.get(prof) == victim:
                roles.append(("system_profile", (_profile_opts(sc["system_profile"]),)))
            replace = None
            if repl:
                replace = (tracers[repl], roles)
                for name, c in list(cur.items()):
                    if c == victim:
                        cur[name] = repl
            moves = [(pid, _atoms(dict.fromkeys(fl))) for pid, fl in held.items()]
            plan.append((at, idx, "kill_tracer", (tracers[victim], moves, replace)))
        elif a == "replace_seq_tracer":
            plan.append((at, idx, "replace", ("seq_tracer", tracers[repl], ())))
            rec["victim"], cur[seq] = cur[seq], repl
        elif a == "replace_monitor":
            opts = (_monitor_opts(sc["system_monitor"]),)
            plan.append((at, idx, "replace", ("system_monitor", tracers[repl], opts)))
            rec["victim"], cur[mon] = cur[mon], repl
        elif a == "replace_profiler":
            opts = (_profile_opts(sc["system_profile"]),)
            plan.append((at, idx, "replace", ("system_profile", tracers[repl], opts)))
            rec["victim"], cur[prof] = cur[prof], repl
        elif a in ("kill_processes", "set_sensitive"):
            pids = list(group_pids[f["target"]])
            rng.shuffle(pids)  # the order the controller tries them in
            if a == "kill_processes":
                plan.append((at, idx, a, (pids, f["count"], A(f["reason"]))))
            else:
                # an atom: a Python bool is no Erlang term (a traced receive journals it)
                value = A("true") if f["value"] else A("false")
                plan.append((at, idx, a, (pids, f["count"], value)))
        records.append(rec)
    return plan, records


_atom_or = atom_of
