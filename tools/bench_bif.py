#!/usr/bin/env python
"""Latency of the trace BIFs a process calls while other processes flood.

    python tools/bench_bif.py [--calls N] [--seconds S] [--json FILE]

Workload (smp mode, 2 schedulers): 4 sender processes, 2 on each scheduler,
send to their own sinks as fast as they can, traced ``[send]`` to one
tracer process that only takes what it is sent.  Meanwhile a caller process
on scheduler 1 calls each BIF ``N`` times, a few ms apart:

  trace_pid    erlang:trace(Tracee, How, [receive, {tracer, T}]) (Tracee on
               scheduler 2, How alternating between true and false)
  seq_tracer   seq_trace:set_system_tracer(S) (alternating between two)
  monitor      erlang:system_monitor(M, [{long_gc, 1000}]) (alternating)
  profile      erlang:system_profile(P, [exclusive]) (alternating)

Each call is timed inside the caller (monotonic ns around the call), into an
HDR histogram per BIF: p50, p99 and max.  ``held`` is how long other
schedulers were held while a BIF ran: each sender notes the time every 100
sends, and for each call the largest gap between two notes of one sender
that overlaps the call is taken; its p50 and max are printed, beside the
largest gap of any sender outside every call (the machine's own noise).

The first call of ``trace_pid`` with a tracer the dispatcher has not yet
seen marked waits for that mark to reach the dispatcher (see
docs/performance.md); the tracer is marked in a warm-up (two calls) before
the timed calls, and the warm-up's latency is printed as ``first``.

Where ``erl`` is installed, the same BIFs are timed on a node (``erl +S 2``)
under the same flood, and the ratios emulator/node printed.  It asserts
nothing: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

from hdrh.histogram import HdrHistogram  # noqa: E402

import smp  # noqa: E402
from smp.core.terms import Atom  # noqa: E402

SENDERS = 4
KINDS = ("trace_pid", "seq_tracer", "monitor", "profile")
NOTE_EVERY = 100
am_ping, am_go, am_done = Atom("ping"), Atom("go"), Atom("done")


# ---------------------------------------------------------------- processes
async def sink(proc):
    while True:
        await proc.receive()


async def flooder(proc, to, seconds, report_to):
    """Send to ``to`` for ``seconds``; note the time every NOTE_EVERY sends."""
    msg = (am_ping, proc.pid, 12345)
    send, now = proc.send, time.monotonic_ns
    notes = [now()]
    end = notes[0] + int(seconds * 1e9)
    while notes[-1] < end:
        for _ in range(NOTE_EVERY):
            await send(to, msg)
        notes.append(now())
    await proc.send(report_to, (Atom("notes"), proc.pid, notes))


async def bif_caller(proc, report_to, tracee, pairs, calls, pause_ms):
    """Warm up (mark each tracer once), then call each BIF ``calls`` times."""
    (t1, _t2), (s1, s2), (m1, m2), (p1, p2) = pairs
    now = time.monotonic_ns
    recv = Atom("receive")
    ops = {
        "trace_pid": lambda i: proc.trace(tracee, i % 2 == 0, [recv, (Atom("tracer"), t1)]),
        "seq_tracer": lambda i: proc.set_system_seq_tracer((s1, s2)[i % 2]),
        "monitor": lambda i: proc.system_monitor((m1, m2)[i % 2], [(Atom("long_gc"), 1000)]),
        "profile": lambda i: proc.system_profile((p1, p2)[i % 2], [Atom("exclusive")]),
    }
    first = []
    for i in (0, 1):  # the tracer marked once
        t0 = now()
        await ops["trace_pid"](i)
        first.append(now() - t0)
    out = []
    for i in range(calls):
        for kind in KINDS:
            await proc.receive(timeout=pause_ms)
            t0 = now()
            await ops[kind](i)
            out.append((kind, t0, now()))
    await proc.send(report_to, (am_done, first, out))


# ---------------------------------------------------------------- emulator
def emu_run(calls: int, seconds: float, pause_ms: int) -> dict:
    # the bodies by this module's name, so the schedulers import them
    B = importlib.import_module("bench_bif")
    sink, flooder, bif_caller = B.sink, B.flooder, B.bif_caller
    with smp.Emulator(mode="smp", schedulers=2) as vm:
        got = vm.spawn_collector(scheduler=2)
        tracer = vm.spawn(sink, scheduler=2)
        senders = []
        for i in range(SENDERS):
            k = i % 2 + 1
            senders.append(
                vm.spawn(flooder, vm.spawn(sink, scheduler=k), seconds, got, scheduler=k)
            )
            vm.trace(senders[-1], True, ["send"], tracer=tracer)
        tracee = vm.spawn(sink, scheduler=2)
        pairs = [tuple(vm.spawn(sink, scheduler=k) for k in (1, 2)) for _ in range(4)]
        vm.spawn(bif_caller, got, tracee, pairs, calls, pause_ms, scheduler=1)
        vm.run(timeout=seconds + 120)
        st = vm.statistics()
        msgs = vm.messages(got)
    notes = [m[2] for m in msgs if m[0] == Atom("notes")]
    (done,) = [m for m in msgs if m[0] == am_done]
    return summarize(done[1], done[2], notes, st)


def summarize(first, calls, notes, st=None) -> dict:
    gaps = []  # (start, end) of each interval between two notes of a sender
    for ns in notes:
        gaps += list(zip(ns, ns[1:], strict=False))
    gaps.sort()
    out: dict = {"first_trace_pid_ms": [f / 1e6 for f in first]}
    windows = [(t0, t1) for _k, t0, t1 in calls]
    for kind in KINDS:
        h = HdrHistogram(1, 60_000_000_000, 3)
        held = []
        for k, t0, t1 in calls:
            if k != kind:
                continue
            h.record_value(max(1, t1 - t0))
            over = [b - a for a, b in gaps if a < t1 and b > t0]
            if over:  # a call after the flood ended has no figure here
                held.append(max(over))
        held.sort()
        out[kind] = {
            "n": h.get_total_count(),
            "p50_ms": h.get_value_at_percentile(50) / 1e6,
            "p99_ms": h.get_value_at_percentile(99) / 1e6,
            "max_ms": h.get_max_value() / 1e6,
            "held_p50_ms": held[len(held) // 2] / 1e6 if held else 0.0,
            "held_max_ms": held[-1] / 1e6 if held else 0.0,
        }
    outside = [b - a for a, b in gaps if not any(a < t1 and b > t0 for t0, t1 in windows)]
    out["gap_outside_calls_max_ms"] = max(outside, default=0) / 1e6
    out["sends_noted"] = sum(len(ns) - 1 for ns in notes) * NOTE_EVERY
    if st is not None:
        out["delivered"] = st.delivered
    return out


# ---------------------------------------------------------------- node
ERLANG = r"""
-module(bifbench).
-export([run/3]).

sink() -> receive _ -> sink() end.

flood(To, End, Notes) ->
    [To ! {ping, self(), 12345} || _ <- lists:seq(1, 100)],
    T = erlang:monotonic_time(nanosecond),
    case T >= End of
        true -> lists:reverse([T | Notes]);
        false -> flood(To, End, [T | Notes])
    end.

op(trace_pid, {Tracee, {A, _}}, I) ->
    erlang:trace(Tracee, I rem 2 =:= 0, ['receive', {tracer, A}]);
op(seq_tracer, {A, B}, I) -> seq_trace:set_system_tracer(element(I rem 2 + 1, {A, B}));
op(monitor, {A, B}, I) -> erlang:system_monitor(element(I rem 2 + 1, {A, B}), [{long_gc, 1000}]);
op(profile, {A, B}, I) -> erlang:system_profile(element(I rem 2 + 1, {A, B}), [exclusive]).

timed(F) ->
    T0 = erlang:monotonic_time(nanosecond),
    F(),
    {T0, erlang:monotonic_time(nanosecond)}.

run(Calls, Seconds, PauseMs) ->
    Me = self(),
    Tracer = spawn(fun sink/0),
    Two = fun() -> {spawn(fun sink/0), spawn(fun sink/0)} end,
    Tracee = spawn(fun sink/0),
    Args = [{trace_pid, {Tracee, Two()}}, {seq_tracer, Two()}, {monitor, Two()},
            {profile, Two()}],
    End = erlang:monotonic_time(nanosecond) + round(Seconds * 1.0e9),
    Ps = [spawn(fun() -> S = spawn(fun sink/0),
                          receive go -> ok end,
                          Me ! {notes, flood(S, End, [erlang:monotonic_time(nanosecond)])}
                end) || _ <- lists:seq(1, 4)],
    [1 = erlang:trace(P, true, [send, {tracer, Tracer}]) || P <- Ps],
    [P ! go || P <- Ps],
    First = [begin
                 {A0, A1} = timed(fun() -> op(trace_pid, element(2, hd(Args)), I) end),
                 A1 - A0
             end || I <- [0, 1]],
    Calls1 = [begin
                  receive after PauseMs -> ok end,
                  {T0, T1} = timed(fun() -> op(K, A, I) end),
                  {K, T0, T1}
              end || I <- lists:seq(0, Calls - 1), {K, A} <- Args],
    Notes = [receive {notes, N} -> N end || _ <- Ps],
    io:format("~w.~n", [{First, Calls1, Notes}]).
"""


def node_run(tmp: str, calls: int, seconds: float, pause_ms: int) -> dict | None:
    erl = shutil.which("erl")
    if erl is None:
        return None
    src = os.path.join(tmp, "bifbench.erl")
    with open(src, "w") as f:
        f.write(ERLANG)
    subprocess.run(["erlc", "-o", tmp, src], check=True, capture_output=True)
    r = subprocess.run(
        [
            erl,
            "+S",
            "2",
            "-noshell",
            "-pa",
            tmp,
            "-eval",
            f"bifbench:run({calls}, {seconds}, {pause_ms}), halt().",
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 300,
    )
    if r.returncode != 0:
        raise RuntimeError(f"erl failed: {r.stderr or r.stdout}")
    first, rows, notes = _parse_erl(r.stdout)
    calls_ = [(k, t0, t1) for k, t0, t1 in rows]
    return summarize(first, calls_, notes)


def _parse_erl(text: str):
    """The node prints ``{First, [{Kind, T0, T1}], [[Ns]]}`` with ``~w``:
    atoms and integers only, so a Python literal once atoms are quoted."""
    import ast
    import re

    text = text.strip().rstrip(".")
    text = re.sub(r"\b([a-z_][a-z_0-9]*)\b", r"'\1'", text)
    text = text.replace("{", "(").replace("}", ")")
    return ast.literal_eval(text)


# ---------------------------------------------------------------- main
def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"1-minute load {load:.1f}"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--calls", type=int, default=100, help="calls of each BIF (default 100)")
    ap.add_argument("--pause-ms", type=int, default=5, help="pause between calls (default 5)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    args = ap.parse_args(argv)
    # the flood lasts as long as the calls need, with some to spare
    seconds = 3.0 + args.calls * len(KINDS) * (args.pause_ms + 40) / 1000
    print(f"# {machine()}")
    print(f"# {args.calls} calls of each BIF, {SENDERS} flooding senders, {seconds:.1f} s flood")
    emu = emu_run(args.calls, seconds, args.pause_ms)
    with tempfile.TemporaryDirectory(prefix="bench-bif-") as tmp:
        node = node_run(tmp, args.calls, seconds, args.pause_ms)
    print(
        f"{'BIF':11} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'held p50':>9} "
        f"{'held max':>9} {'node p99':>9} {'ratio p99':>9}"
    )
    for kind in KINDS:
        e = emu[kind]
        n = node[kind] if node else None
        ratio = e["p99_ms"] / n["p99_ms"] if n and n["p99_ms"] else None
        node_p99 = f"{n['p99_ms']:.3f}" if n else "-"
        print(
            f"{kind:11} {e['p50_ms']:>8.2f} {e['p99_ms']:>8.2f} {e['max_ms']:>8.2f} "
            f"{e['held_p50_ms']:>9.2f} {e['held_max_ms']:>9.2f} "
            f"{node_p99:>9} {(f'{ratio:.0f}x' if ratio else '-'):>9}"
        )
    print(
        f"first trace_pid calls (tracer marked): "
        f"{', '.join(f'{x:.1f}' for x in emu['first_trace_pid_ms'])} ms; "
        f"largest sender gap outside every call: {emu['gap_outside_calls_max_ms']:.1f} ms; "
        f"sends noted: {emu['sends_noted']:,}"
    )
    if node:
        print(
            f"node: largest sender gap outside every call "
            f"{node['gap_outside_calls_max_ms']:.1f} ms; sends noted {node['sends_noted']:,}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "emulator": emu, "node": node}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
