#!/usr/bin/env python
"""The emulator against a real BEAM on this machine, same workload, same run.

    python tools/bench_node.py [--messages N] [--repeat R] [--rows ...]
                               [--json FILE]

Workload: 4 sender processes, each sending N/4 messages to its own sink,
traced with ``[send]`` to one tracer process that only counts (or to a file
trace port).  The figure is trace messages delivered per second, from the
first send to the last delivery.  Each row is measured on the emulator and,
when ``erl`` is installed, on a real node started by this tool with the
matching scheduler count, alternately, ``--repeat`` times; the medians and
their ratio are printed with the target the project set for it.

rows
  smp2      smp mode, 2 schedulers      vs  erl +S 2     target 0.33
            (2 senders on each scheduler, the tracer on scheduler 2)
  smp2-apart  the same, placed as a user who keeps the tracer's scheduler
            light would: 3 senders on scheduler 1, the tracer and 1 sender
            on scheduler 2 (the node balances its schedulers itself)
  smp1      smp mode, 1 scheduler       vs  erl +S 1     target 0.33
  nonsmp    nonsmp mode                 vs  erl +S 1     target 0.50
  file      smp mode, 2 schedulers, a file trace port vs dbg:trace_port(file)
            on erl +S 2                                  target 0.33
It asserts nothing: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

import bench_workers as W  # noqa: E402

import smp  # noqa: E402

SENDERS = 4
#: row -> (mode, schedulers, file port?, the node's +S, target, each sender's
#: scheduler or None for i % schedulers + 1)
ROWS = {
    "smp2": ("smp", 2, False, 2, 0.33, None),
    "smp2-apart": ("smp", 2, False, 2, 0.33, (1, 1, 1, 2)),
    "smp1": ("smp", 1, False, 1, 0.33, None),
    "nonsmp": ("nonsmp", 1, False, 1, 0.50, None),
    "file": ("smp", 2, True, 2, 0.33, None),
}

ERLANG = r"""
-module(nodebench).
-export([run/3]).

sink() -> receive _ -> sink() end.

sender(_To, 0) -> ok;
sender(To, N) -> To ! {ping, self(), 12345}, sender(To, N - 1).

counter(C) ->
    receive
        {get, From} -> From ! {count, C}, counter(C);
        _ -> counter(C + 1)
    end.

%% Senders processes sending PerSender messages each, traced [send] to one
%% counting tracer process (Kind = process) or to a file trace port.
run(Senders, PerSender, Kind) ->
    {Tracer, Done} =
        case Kind of
            process ->
                T = spawn(fun() -> counter(0) end),
                {T, fun() -> wait_count(T, Senders * PerSender) end};
            {file, Path} ->
                Port = (dbg:trace_port(file, Path))(),
                {Port, fun() ->
                           Ref = erlang:trace_delivered(all),
                           receive {trace_delivered, all, Ref} -> ok end,
                           erlang:port_close(Port)
                       end}
        end,
    Me = self(),
    Ps = [spawn(fun() -> S = spawn(fun sink/0), Me ! {ready, self()},
                          receive go -> sender(S, PerSender) end, Me ! {done, self()} end)
          || _ <- lists:seq(1, Senders)],
    [receive {ready, P} -> ok end || P <- Ps],
    [1 = erlang:trace(P, true, [send, {tracer, Tracer}]) || P <- Ps],
    T0 = erlang:monotonic_time(microsecond),
    [P ! go || P <- Ps],
    [receive {done, P} -> ok end || P <- Ps],
    Done(),
    T1 = erlang:monotonic_time(microsecond),
    io:format("~p~n", [{Senders * PerSender, T1 - T0}]).

wait_count(T, N) ->
    T ! {get, self()},
    receive
        {count, C} when C >= N -> ok;
        {count, _} -> receive after 2 -> wait_count(T, N) end
    end.
"""


def node_run(tmp: str, sched: int, total: int, file_port: bool) -> float | None:
    """Messages per second on a real node, or None without ``erl``."""
    erl = shutil.which("erl")
    if erl is None:
        return None
    src = os.path.join(tmp, "nodebench.erl")
    if not os.path.exists(os.path.join(tmp, "nodebench.beam")):
        with open(src, "w") as f:
            f.write(ERLANG)
        subprocess.run(["erlc", "-o", tmp, src], check=True)
    per = total // SENDERS
    kind = f'{{file, "{os.path.join(tmp, "node.trc")}"}}' if file_port else "process"
    r = subprocess.run(
        [
            erl,
            "-noshell",
            "+S",
            str(sched),
            "-pa",
            tmp,
            "-eval",
            f"nodebench:run({SENDERS}, {per}, {kind}), halt().",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if r.returncode != 0:
        raise RuntimeError(f"erl failed: {r.stderr or r.stdout}")
    n, us = r.stdout.strip().splitlines()[-1].strip("{}").split(",")
    return int(n) / (int(us) / 1e6)


def emu_run(mode: str, nsched: int, total: int, file_port: bool, tmp: str, placed=None) -> float:
    """Messages per second delivered by the emulator (start-up not counted);
    ``placed``: each sender's scheduler (its sink goes with it)."""
    kw = {"schedulers": nsched} if mode == "smp" else {}
    with smp.Emulator(mode=mode, **kw) as vm:
        if file_port:
            tracer = vm.open_trace_port("file", os.path.join(tmp, "emu.trc"))
        else:
            tracer = vm.spawn(W.tracer_loop, scheduler=nsched)
        per = total // SENDERS
        for i in range(SENDERS):
            k = placed[i] if placed else i % nsched + 1
            s = vm.spawn(W.sink, scheduler=k)
            p = vm.spawn(W.sender, s, per, scheduler=k)
            vm.trace(p, True, ["send"], tracer=tracer)
        st0 = vm.statistics()
        t0 = time.perf_counter()
        vm.run(timeout=600)
        if file_port:
            vm.close_trace_port(tracer)
        wall = time.perf_counter() - t0
        st1 = vm.statistics()
        delivered = st1.delivered - st0.delivered
        if delivered < SENDERS * per:
            raise RuntimeError(f"only {delivered} of {SENDERS * per} trace messages delivered")
        return delivered / wall


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--messages",
        type=int,
        default=400_000,
        help="trace messages per run, all senders together (default 400000)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="runs per side and row (default 3)")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"which rows ({', '.join(ROWS)})")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    args = ap.parse_args(argv)
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    bad = [r for r in rows if r not in ROWS]
    if bad:
        print(
            f"bench_node: unknown row(s) {', '.join(bad)}; known: {', '.join(ROWS)}",
            file=sys.stderr,
        )
        return 2
    erl = shutil.which("erl")
    print(
        f"# {args.messages:,} trace messages per run, {SENDERS} senders, median of "
        f"{args.repeat}; node: {erl or 'not installed (emulator figures only)'}"
    )
    print(f"{'row':10} {'emulator msg/s':>15} {'node msg/s':>13} {'ratio':>7} {'target':>7}")
    out = {}
    with tempfile.TemporaryDirectory(prefix="bench-node-") as tmp:
        for row in rows:
            mode, nsched, file_port, node_s, target, placed = ROWS[row]
            runs = []
            node = []
            for _ in range(args.repeat):
                runs.append(emu_run(mode, nsched, args.messages, file_port, tmp, placed))
                n = node_run(tmp, node_s, args.messages, file_port)
                if n is not None:
                    node.append(n)
            n = statistics.median(node) if node else None
            e = statistics.median(runs)
            ratio = e / n if n else None
            out[row] = {
                "node": n,
                "node_runs": node,
                "target": target,
                "emulator": e,
                "ratio": ratio,
                "emulator_runs": runs,
            }
            print(
                f"{row:10} {e:>15,.0f} {(f'{n:,.0f}' if n else '-'):>13} "
                f"{(f'{ratio:.3f}' if ratio else '-'):>7} {target:>7.2f}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
