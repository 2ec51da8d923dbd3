"""The built-in workloads: their parameters, their ranges and their set-ups.

Runs in the user's process.  ``WORKLOADS`` names each workload with its
parameters (a default and a check each, a ``Bound`` for a number), the
set-up that spawns one instance's processes (the bodies of
``smp.app.workload_bodies``) and how many processes that is;
``check_params`` checks a group's ``params`` table against it, and
``MAX_PROCESSES`` caps a run's processes.  ``Bound``, the range of one
numeric key, serves the scenario's own keys too
(``smp.app.scenario_schema.BOUNDS``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from smp.app.workload_bodies import (
    allocator,
    caller,
    churner,
    fan_hot,
    fan_sender,
    port_user,
    pp_ping,
    pp_pong,
    ring_head,
    ring_member,
)
from smp.core.bifs import MAX_SMALL
from smp.core.flags import TRACE_FLAG_NAMES
from smp.core.terms import Atom

A = Atom


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
            "a process that traces its worker to short-lived tracers, each killed after "
            "a burst and replaced once it is dead",
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
            return k, f"{err}, not {_cut(params[k])}"
    if workload == "ports":
        if params["busy_ms"] is not None and params["driver"] not in ("busy", "dist"):
            return "busy_ms", f"only the busy and dist drivers take busy_ms, not {params['driver']}"
        if params["cost_ms"] is not None and params["driver"] != "slow":
            return "cost_ms", f"only the slow driver takes cost_ms, not {params['driver']}"
    return None


def _cut(v: Any, width: int = 60) -> str:
    """``repr(v)`` cut to ``width`` characters: an error stays one short line
    (every scenario check's, the explore scenario's included); true and
    false as a scenario file spells them."""
    if isinstance(v, bool):
        return "true" if v else "false"
    r = repr(v)
    return r if len(r) <= width else r[: width - 3] + "..."
