#!/usr/bin/env python
"""Make-to-delivery latency of every send trace message, paced, in an HDR histogram.

    python tools/bench_latency.py [--mode smp|nonsmp|both] [--schedulers N]
                                  [--rate R] [--seconds S] [--json FILE] [--no-node]

Workload: ``--senders`` (4) processes spread over the schedulers, each
sending to its own sink, traced ``[send]`` to ONE tracer process.  The
senders pace themselves to ``--rate`` messages per second in all (each one
sleeps with the process timer until its next message is due, never
spinning), staggered so that the total is evenly spread, for ``--seconds``.
Every message carries ``time.monotonic_ns()`` taken just before its send,
so the trace message that send makes carries its make time; the tracer (an
emulated process, not a collector) takes every trace message, and records
``time.monotonic_ns() - make_ns`` for EACH of them in an HDR histogram
(1 us to 60 s, 3 significant digits).  CLOCK_MONOTONIC is system-wide on
Linux, so a time taken in a scheduler process compares with one taken in
another.  The latency so measured runs from just before the send to the
moment the tracer's ``receive`` returns the message: making it, batching,
the dispatcher (smp), the tracer's mailbox and its scheduler's turn.

A second histogram records delivery minus the time the message was DUE by
the pacing schedule: it adds the senders' own lateness (a sender whose
scheduler is busy sends late, which the make time does not show; the
"coordinated omission" correction).

Counts: the tracer's count is compared with the emulator's ``statistics()``
(made, delivered, dropped) and with what the senders sent; the tool exits 1
when a delivered message was not recorded, or a sent one not delivered.

When ``erl`` is installed the same workload runs on a real node started with
``+S N`` (``erlang:trace(P, true, [send])`` to one tracer process that keeps
``erlang:monotonic_time(nanosecond) - T0`` of every message); its values go
into the same kind of histogram here, and the emulator/node ratio of each
percentile is printed.  It asserts nothing about speed: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
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

import smp  # noqa: E402
from smp.core.terms import Atom  # noqa: E402

try:
    from hdrh.histogram import HdrHistogram
except ImportError:  # reported by main(); the module stays importable
    HdrHistogram = None

SENDERS = 4
RATE = 20_000  # trace messages per second, all senders together
SECONDS = 5.0
TARGET_P99_MS = 2.0
LOWEST_NS = 1_000  # 1 us
HIGHEST_NS = 60_000_000_000  # 60 s
DIGITS = 3
LEAD_NS = 300_000_000  # the senders start this long after they are spawned
PERCENTILES = (50.0, 90.0, 99.0, 99.9)

am_lat, am_trace, am_send = Atom("lat"), Atom("trace"), Atom("send")
am_dump, am_hist, am_done = Atom("dump"), Atom("histogram"), Atom("done")


def new_histogram():
    return HdrHistogram(LOWEST_NS, HIGHEST_NS, DIGITS)


# =============================================================== emulated bodies
# Module-level, so the scheduler processes find them as bench_latency:<name>
# (main() runs from the module imported under that name, never from __main__).
async def sink(proc):
    while True:
        await proc.receive()


async def sender(proc, to, start_ns, interval_ns, n, report_to):
    """Send ``n`` messages, message i due at ``start_ns + i * interval_ns``;
    sleep (the process timer, whole ms, at least 1) while the next one is
    not due.  Each message is ``{lat, MakeNs, DueNs}``, MakeNs taken just
    before the send.  Then stop being traced and report to ``report_to``."""
    mono = time.monotonic_ns
    send = proc.send
    i = first = last = max_lag = sleeps = 0
    while i < n:
        due = start_ns + int(i * interval_ns)
        now = mono()
        if now < due:
            await proc.sleep(max(1, -(-(due - now) // 1_000_000)))
            sleeps += 1
            continue
        t = mono()
        await send(to, (am_lat, t, due))
        if i == 0:
            first = t
        last = t
        if t - due > max_lag:
            max_lag = t - due
        i += 1
    await proc.trace(proc.pid, False, ["send"])  # the report is no trace message
    await send(report_to, (am_done, proc.pid, i, first, last, max_lag, sleeps))


async def tracer(proc):
    """Take every message; for each send trace message carrying a make time,
    record delivery - make (and delivery - due) in the histograms.  On
    ``{dump, To}`` send ``To`` the counts and the encoded histograms."""
    hist, due_hist = new_histogram(), new_histogram()
    rec, rec_due = hist.record_value, due_hist.record_value
    mono = time.monotonic_ns
    recorded = other_trace = stray = over = 0
    max_ns = max_due_ns = 0
    while True:
        m = await proc.receive()
        now = mono()
        if type(m) is tuple and len(m) == 5 and m[0] == am_trace and m[2] == am_send:
            body = m[3]
            if type(body) is tuple and len(body) == 3 and body[0] == am_lat:
                d = now - body[1]
                dd = now - body[2]
                if not rec(max(d, 1)):
                    over += 1
                rec_due(max(dd, 1))
                if d > max_ns:
                    max_ns = d
                if dd > max_due_ns:
                    max_due_ns = dd
                recorded += 1
            else:
                other_trace += 1
        elif type(m) is tuple and len(m) == 2 and m[0] == am_dump:
            await proc.send(
                m[1],
                (
                    am_hist,
                    recorded,
                    other_trace,
                    stray,
                    over,
                    max_ns,
                    max_due_ns,
                    hist.encode(),
                    due_hist.encode(),
                ),
            )
        else:
            stray += 1


async def ask_dump(proc, tracer_pid, reply_to):
    await proc.send(tracer_pid, (am_dump, reply_to))


# =============================================================== figures
def figures(hist, max_ns: int) -> dict:
    """Percentiles (ns, the histogram's 3-digit values) and the exact max.

    A percentile is the top of its histogram bucket, which near the max can
    lie above the exact max (a bucket is 128-256 ns wide around 200 us): it
    is given as at most the max, which it cannot exceed."""
    out = {f"p{p:g}_ns": min(hist.get_value_at_percentile(p), max_ns) for p in PERCENTILES}
    out["max_ns"] = max_ns
    out["count"] = hist.get_total_count()
    return out


def pace(senders: int, rate: float, seconds: float, sent: int, span_ns: int, wall: float) -> dict:
    """What a run asked for and what it achieved (both sides report it alike)."""
    return {
        "senders": senders,
        "target_rate": rate,
        "seconds": seconds,
        "sent": sent,
        "achieved_rate": sent / (span_ns / 1e9),
        "send_span_s": span_ns / 1e9,
        "run_wall_s": wall,
    }


def latencies(hist, max_ns: int, due_hist, max_due_ns: int, encoded: bytes) -> dict:
    """A run's latency figures and its whole histogram, ``encoded`` (both sides alike)."""
    return {
        "latency": figures(hist, max_ns),
        "latency_from_due": figures(due_hist, max_due_ns),
        "histogram": encoded.decode("ascii"),
    }


def emu_run(mode: str, nsched: int, senders: int, rate: float, seconds: float) -> dict:
    """One paced run on the emulator; every trace message's latency."""
    kw = {"schedulers": nsched} if mode == "smp" else {}
    n_sched = nsched if mode == "smp" else 1
    per = max(1, round(rate * seconds / senders))
    interval_ns = 1e9 * senders / rate  # per sender
    with smp.Emulator(mode=mode, **kw) as vm:
        coll = vm.spawn_collector(scheduler=1)
        tr = vm.spawn(tracer, scheduler=n_sched)
        sinks = [vm.spawn(sink, scheduler=i % n_sched + 1) for i in range(senders)]
        st0 = vm.statistics()
        start_ns = time.monotonic_ns() + LEAD_NS
        for i in range(senders):
            k = i % n_sched + 1
            # staggered by a fraction of the interval: the total is evenly spread
            s0 = start_ns + int(i * interval_ns / senders)
            p = vm.spawn(sender, sinks[i], s0, interval_ns, per, coll, scheduler=k)
            vm.trace(p, True, ["send"], tracer=tr)
        late_start = time.monotonic_ns() - start_ns
        t0 = time.perf_counter()
        vm.run(timeout=seconds * 4 + 60)
        wall = time.perf_counter() - t0
        st = vm.statistics()
        dispatch = sorted(vm.latencies_ns()) if vm.smp else []
        vm.spawn(ask_dump, tr, coll, scheduler=1)
        vm.run(timeout=30)
        got = vm.messages(coll)
    done = [m for m in got if type(m) is tuple and m and m[0] == am_done]
    reply = [m for m in got if type(m) is tuple and m and m[0] == am_hist]
    if len(done) != senders or len(reply) != 1:
        raise RuntimeError(f"expected {senders} sender reports and 1 histogram, got {got!r}")
    _, recorded, other_trace, stray, over, max_ns, max_due_ns, enc, enc_due = reply[0]
    hist, due_hist = HdrHistogram.decode(enc), HdrHistogram.decode(enc_due)
    sent = sum(m[2] for m in done)
    first = min(m[3] for m in done)
    last = max(m[4] for m in done)
    span_ns = max(1, last - first)
    made = st.made - st0.made
    delivered = st.delivered - st0.delivered
    dropped = st.dropped - st0.dropped
    problems = []
    if recorded + other_trace != delivered:
        problems.append(
            f"the tracer took {recorded + other_trace:,} trace messages, "
            f"statistics() says {delivered:,} delivered"
        )
    if recorded != sent:
        problems.append(f"{sent:,} sent, {recorded:,} recorded by the tracer")
    if made != sent:
        problems.append(f"{sent:,} traced sends, {made:,} trace messages made")
    if dropped or st.queued or st.in_transit:
        problems.append(
            f"dropped {dropped:,} {st.get('dropped_by_reason')}, queued "
            f"{st.get('queued')}, in transit {st.get('in_transit')}"
        )
    if over:
        problems.append(f"{over:,} latencies above the histogram's {HIGHEST_NS / 1e9:g} s")
    if stray:
        problems.append(f"{stray:,} stray messages at the tracer")
    res = {
        "side": "emulator",
        "mode": mode,
        "schedulers": n_sched,
        **pace(senders, rate, seconds, sent, span_ns, wall),
        "setup_used_of_lead_ms": late_start / 1e6,
        "max_sender_lag_ms": max(m[5] for m in done) / 1e6,
        "sender_sleeps": sum(m[6] for m in done),
        "made": made,
        "delivered": delivered,
        "dropped": dropped,
        "recorded": recorded,
        "other_trace": other_trace,
        "counts_match": not problems,
        "problems": problems,
        **latencies(hist, max_ns, due_hist, max_due_ns, enc),
    }
    if dispatch:
        res["dispatch_sampled"] = {
            "samples": len(dispatch),
            "p50_ns": dispatch[len(dispatch) // 2],
            "p99_ns": dispatch[min(len(dispatch) - 1, int(0.99 * len(dispatch)))],
            "max_ns": dispatch[-1],
        }
    return res


# =============================================================== the real node
ERLANG = r"""
-module(latbench).
-export([run/4]).

sink() -> receive _ -> sink() end.

%% N messages, message I due at Start + I * Iv ns; sleep (receive after,
%% whole ms, at least 1) while the next one is not due, as the emulator's
%% senders do.  Each message is {lat, MakeNs, DueNs}.
sender(To, Start, Iv, N) -> sender(To, Start, Iv, N, 0, 0, 0, 0).

sender(_To, _Start, _Iv, N, N, First, Last, MaxLag) -> {N, First, Last, MaxLag};
sender(To, Start, Iv, N, I, First, Last, MaxLag) ->
    Due = Start + trunc(I * Iv),
    Now = erlang:monotonic_time(nanosecond),
    if
        Now < Due ->
            Ms = max(1, (Due - Now + 999999) div 1000000),
            receive after Ms -> ok end,
            sender(To, Start, Iv, N, I, First, Last, MaxLag);
        true ->
            T = erlang:monotonic_time(nanosecond),
            To ! {lat, T, Due},
            F = case I of 0 -> T; _ -> First end,
            sender(To, Start, Iv, N, I + 1, F, T, max(MaxLag, T - Due))
    end.

%% Keeps every latency in an atomics array (off the heap: a tracer holding
%% 100,000s of terms would stall in its own garbage collections).
tracer(A, Max, N, Other) ->
    receive
        {trace, _, send, {lat, T, Due}, _} when N < Max ->
            Now = erlang:monotonic_time(nanosecond),
            atomics:put(A, 2 * N + 1, Now - T),
            atomics:put(A, 2 * N + 2, Now - Due),
            tracer(A, Max, N + 1, Other);
        {dump, From} ->
            From ! {lats, N, Other},
            tracer(A, Max, N, Other);
        _ ->
            tracer(A, Max, N, Other + 1)
    end.

run(Senders, Rate, Ms, Path) ->
    Me = self(),
    PerN = max(1, round(Rate * Ms / 1000 / Senders)),
    A = atomics:new(2 * Senders * PerN, [{signed, true}]),
    Tracer = spawn(fun() -> tracer(A, Senders * PerN, 0, 0) end),
    Iv = 1.0e9 * Senders / Rate,
    Start = erlang:monotonic_time(nanosecond) + 300000000,
    Ps = [spawn(fun() ->
                    S = spawn(fun sink/0),
                    receive go -> ok end,
                    R = sender(S, Start + trunc(K * Iv / Senders), Iv, PerN),
                    erlang:trace(self(), false, [send]),
                    Me ! {done, self(), R}
                end)
          || K <- lists:seq(0, Senders - 1)],
    [1 = erlang:trace(P, true, [send, {tracer, Tracer}]) || P <- Ps],
    [P ! go || P <- Ps],
    Rs = [receive {done, P, R} -> R end || P <- Ps],
    Ref = erlang:trace_delivered(all),
    receive {trace_delivered, all, Ref} -> ok end,
    Tracer ! {dump, self()},
    {N, Other} = receive {lats, N0, O0} -> {N0, O0} end,
    ok = file:write_file(Path, [[integer_to_list(atomics:get(A, 2 * I + 1)), $\s,
                                 integer_to_list(atomics:get(A, 2 * I + 2)), $\n]
                                || I <- lists:seq(0, N - 1)]),
    Sent = lists:sum([X || {X, _, _, _} <- Rs]),
    First = lists:min([X || {_, X, _, _} <- Rs]),
    Last = lists:max([X || {_, _, X, _} <- Rs]),
    MaxLag = lists:max([X || {_, _, _, X} <- Rs]),
    io:format("latbench ~s ~b ~b ~b ~b ~b ~b ~b~n",
              [erlang:system_info(otp_release), erlang:system_info(schedulers_online),
               Sent, First, Last, MaxLag, N, Other]).
"""


def node_run(tmp: str, nsched: int, senders: int, rate: float, seconds: float) -> dict | None:
    """The same paced workload on a real node (``erl +S nsched``); None without erl."""
    erl, erlc = shutil.which("erl"), shutil.which("erlc")
    if erl is None or erlc is None:
        return None
    src = os.path.join(tmp, "latbench.erl")
    with open(src, "w") as f:
        f.write(ERLANG)
    subprocess.run([erlc, "-o", tmp, src], check=True, capture_output=True, timeout=60)
    path = os.path.join(tmp, "node-latencies.txt")
    t0 = time.perf_counter()
    r = subprocess.run(
        [
            erl,
            "-noshell",
            "+S",
            str(nsched),
            "-pa",
            tmp,
            "-eval",
            f'latbench:run({senders}, {float(rate)!r}, {round(seconds * 1000)}, "{path}"), halt().',
        ],
        capture_output=True,
        text=True,
        timeout=seconds * 4 + 60,
    )
    wall = time.perf_counter() - t0
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("latbench ")]
    if r.returncode != 0 or not line:
        raise RuntimeError(f"erl failed ({r.returncode}): {r.stderr or r.stdout}")
    _, otp, online, sent, first, last, max_lag, n, other = line[-1].split()
    sent, first, last, max_lag, n, other = map(int, (sent, first, last, max_lag, n, other))
    hist, due_hist = new_histogram(), new_histogram()
    max_ns = max_due_ns = over = lines = 0
    with open(path) as f:
        for ln in f:
            d, dd = map(int, ln.split())
            if not hist.record_value(max(d, 1)):
                over += 1
            due_hist.record_value(max(dd, 1))
            max_ns, max_due_ns = max(max_ns, d), max(max_due_ns, dd)
            lines += 1
    problems = []
    if not n == lines == sent:
        problems.append(f"node: {sent:,} sent, tracer took {n:,}, {lines:,} latencies written")
    if other:
        problems.append(f"node: {other:,} other messages at the tracer")
    if over:
        problems.append(f"node: {over:,} latencies above {HIGHEST_NS / 1e9:g} s")
    span_ns = max(1, last - first)
    return {
        "side": "node",
        "otp_release": otp,
        "schedulers": int(online),
        **pace(senders, rate, seconds, sent, span_ns, wall),
        "max_sender_lag_ms": max_lag / 1e6,
        "recorded": n,
        "counts_match": not problems,
        "problems": problems,
        **latencies(hist, max_ns, due_hist, max_due_ns, hist.encode()),
    }


# =============================================================== output
def machine() -> dict:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    cpu = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu_model": cpu,
        "logical_cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "loadavg_at_start": os.getloadavg(),
        "erl": shutil.which("erl"),
    }


def _ms(ns) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f}"


def print_row(label: str, r: dict) -> None:
    lat, due = r["latency"], r["latency_from_due"]
    cells = [_ms(lat[f"p{p:g}_ns"]) for p in PERCENTILES] + [_ms(lat["max_ns"])]
    verdict = "yes" if lat["p99_ns"] < TARGET_P99_MS * 1e6 else "NO"
    print(
        f"{label:14} {r['target_rate']:>8,.0f} {r['achieved_rate']:>10,.0f} {r['sent']:>9,} "
        + " ".join(f"{c:>8}" for c in cells)
        + f"  {verdict:>5}",
        flush=True,
    )
    counts = f"sent {r['sent']:,}, tracer recorded {r['recorded']:,}"
    if r["side"] == "emulator":
        counts += (
            f"; statistics(): made {r['made']:,}, delivered {r['delivered']:,}, "
            f"dropped {r['dropped']:,}"
        )
    print(
        f"{'':14} {counts}; counts {'match' if r['counts_match'] else 'DIFFER'}; "
        f"send span {r['send_span_s']:.2f} s, max sender lag {r['max_sender_lag_ms']:.2f} ms"
    )
    print(
        f"{'':14} from the due time (adds sender lateness): p99 {_ms(due['p99_ns'])} ms, "
        f"max {_ms(due['max_ns'])} ms"
    )
    if "dispatch_sampled" in r:
        d = r["dispatch_sampled"]
        print(
            f"{'':14} dispatcher's own make-to-dispatch (one sample per run, "
            f"{d['samples']:,}): p50 {_ms(d['p50_ns'])}, p99 {_ms(d['p99_ns'])}, "
            f"max {_ms(d['max_ns'])} ms"
        )
    for p in r["problems"]:
        print(f"{'':14} PROBLEM: {p}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mode", choices=("smp", "nonsmp", "both"), default="both")
    ap.add_argument("--schedulers", type=int, default=2, help="smp schedulers and node +S (2)")
    ap.add_argument("--rate", type=float, default=RATE, help=f"messages/s in all ({RATE})")
    ap.add_argument("--seconds", type=float, default=SECONDS, help=f"paced seconds ({SECONDS:g})")
    ap.add_argument("--senders", type=int, default=SENDERS, help=f"sender processes ({SENDERS})")
    ap.add_argument("--no-node", action="store_true", help="skip the real node even with erl")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    args = ap.parse_args(argv)
    if HdrHistogram is None:
        print(
            "bench_latency: needs hdrhistogram (pip install 'hdrhistogram>=0.10')", file=sys.stderr
        )
        return 2
    if args.rate <= 0 or args.seconds <= 0 or args.senders < 1 or args.schedulers < 1:
        ap.error("--rate, --seconds, --senders and --schedulers must be positive")
    modes = ["nonsmp", "smp"] if args.mode == "both" else [args.mode]
    info = machine()
    print(
        f"# {info['cpu_model']}, {info['logical_cores']} cores, Python {info['python']}, "
        f"{info['platform']}; load {'/'.join(f'{x:.2f}' for x in info['loadavg_at_start'])} "
        f"(1/5/15 min) at start"
    )
    print(
        f"# {args.senders} senders traced [send] to one tracer, paced to {args.rate:,.0f} msg/s "
        f"for {args.seconds:g} s; latency = tracer's receive - make, every message, "
        f"HDR histogram ({DIGITS} digits); target p99 < {TARGET_P99_MS:g} ms"
    )
    head = (
        f"{'run':14} {'target/s':>8} {'achieved/s':>10} {'messages':>9} "
        + " ".join(f"{f'p{p:g}':>8}" for p in PERCENTILES)
        + f" {'max':>8}  {'p99<' + format(TARGET_P99_MS, 'g'):>5}   (ms)"
    )
    print(head)
    out: dict = {"machine": info, "args": vars(args), "runs": {}}
    ok = True
    for mode in modes:
        r = emu_run(mode, args.schedulers, args.senders, args.rate, args.seconds)
        label = f"smp {r['schedulers']}" if mode == "smp" else "nonsmp"
        out["runs"][mode] = r
        ok &= r["counts_match"]
        print_row(label, r)
    node = None
    if not args.no_node:
        with tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp:
            node = node_run(tmp, args.schedulers, args.senders, args.rate, args.seconds)
        if node is None:
            print("node: erl not installed (emulator figures only)")
        else:
            print_row(f"node +S {node['schedulers']}", node)
            ok &= node["counts_match"]
            ratios = {}
            for mode in modes:
                e, n = out["runs"][mode]["latency"], node["latency"]
                keys = [f"p{p:g}_ns" for p in PERCENTILES] + ["max_ns"]
                ratios[mode] = {k: (e[k] / n[k] if n[k] else None) for k in keys}
                print(
                    f"{'ratio ' + mode:14} emulator/node (OTP {node['otp_release']}): "
                    + ", ".join(
                        f"{k[:-3]} {v:.1f}x" if v is not None else f"{k[:-3]} -"
                        for k, v in ratios[mode].items()
                    )
                )
            out["ratios"] = ratios
    out["node"] = node
    out["counts_match"] = ok
    out["loadavg_at_end"] = os.getloadavg()
    print("# load at end: {:.2f} {:.2f} {:.2f}".format(*out["loadavg_at_end"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    # the bodies must be found by the schedulers as bench_latency:<name>, not
    # __main__:<name>: run main() from the module imported under its name
    import bench_latency

    sys.exit(bench_latency.main())
