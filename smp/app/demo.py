"""A small traced workload: ping-pong pairs, a call with return and
exception traces, seq_trace across a chain, in nonsmp and in smp mode, each
trace printed as ``dbg`` prints it on stdout, each mode's summary line on
stderr."""

from __future__ import annotations

import sys
import time

from smp.core.errors import Error
from smp.core.terms import Atom
from smp.emulator import Emulator
from smp.ports.dbgfmt import format_dbg

A = Atom


async def pong(proc):
    while True:
        msg = await proc.receive()
        if msg == A("stop"):
            return
        sender, n = msg[1], msg[2]
        await proc.send(sender, (A("pong"), n))


async def ping(proc, peer, n):
    for i in range(n):
        await proc.send(peer, (A("ping"), proc.pid, i))
        await proc.receive()
    await proc.call("demo", "fact", [3])
    try:
        await proc.call("demo", "check", [-1])
    except Error:
        pass
    await proc.send(peer, A("stop"))


async def fact(proc, n):
    if n <= 1:
        return 1
    return n * await proc.call("demo", "fact", [n - 1], local=True)


async def check(proc, n):
    if n < 0:
        raise Error(A("badarg"))
    return A("ok")


def run_demo(mode: str, schedulers: int, out=None, err=None) -> dict:
    """Run the demo in ``mode``: its trace as dbg prints it on ``out``
    (stdout), the one-line summary on ``err`` (stderr), apart from the trace."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    with Emulator(mode=mode, schedulers=schedulers) as vm:
        vm.define("demo", "fact", fact)
        vm.define("demo", "check", check)
        tracer = vm.spawn_collector()
        peer = vm.spawn(pong)
        p = vm.spawn(ping, peer, 2)
        vm.trace(p, True, ["send", "receive", "call", "procs"], tracer=tracer)
        vm.trace(peer, True, ["send", "receive"], tracer=tracer)
        vm.trace_pattern(("demo", "_", "_"), [(A("_"), [], [(A("exception_trace"),)])], ["local"])
        t0 = time.perf_counter()
        vm.run(timeout=10)
        elapsed = time.perf_counter() - t0
        for m in vm.messages(tracer):
            out.write(format_dbg(m))
        stats = vm.statistics()
        out.flush()
        err.write(
            f"-- {mode} ({schedulers} scheduler(s)): made {stats.made}, "
            f"delivered {stats.delivered}, dropped {stats.dropped} "
            f"in {elapsed * 1000:.1f} ms\n"
        )
        return stats.as_dict()


USAGE = (
    "usage: python -m smp\n"
    "Runs the built-in demo workload (ping-pong, calls with return and exception\n"
    "traces, a seq_trace chain) in nonsmp and in smp mode and prints each trace as\n"
    "dbg prints it; it takes no argument.  Every other command: smp-emu --help.\n"
)


def main(argv: list[str] | None = None) -> int:
    """``python -m smp``: the demo; ``-h``/``--help`` prints what it does,
    any other argument is refused in one line with exit 2 (a usage error,
    as in every ``smp-emu`` command)."""
    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        sys.stdout.write(USAGE)
        return 0
    if args:
        sys.stderr.write(
            f"python -m smp: takes no argument, got {args[0]!r} (see python -m smp --help)\n"
        )
        return 2
    run_demo("nonsmp", 1)
    run_demo("smp", 2)
    return 0
