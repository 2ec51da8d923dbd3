#!/usr/bin/env python
"""Where the time goes: the benchmark workload with every process of the
emulator sampled by py-spy, and the CPU time per delivered trace message of
each stage of a message's way, per process.

    python tools/profile.py [--messages N] [--mode smp|nonsmp] [--rate HZ] [--raw DIR]

Workload (as ``tools/bench_node.py``): 4 senders traced ``[send]`` to one
counting tracer.  In smp mode with 2 schedulers the senders run on both
schedulers and the tracer on scheduler 2, so scheduler 1 only makes, the
dispatcher decides, and scheduler 2 makes and receives.

Each OS process (dispatcher, schedulers) is recorded by ``py-spy record
--format raw`` (on-CPU samples only); a sample counts for the stage of the
innermost function of its stack that names one (``STAGES``, in order of
precedence from the leaf up), else "other".  The table gives microseconds of
CPU per delivered message: samples / rate / delivered.  py-spy must be
installed (``pip install py-spy``) and allowed to read the processes (root,
or ptrace permitted).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
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

#: stage -> function names (matched on the innermost frame that has one).
STAGES = {
    "make": {
        "trace_send",
        "trace_receive",
        "trace_sched",
        "_send_to_tracer",
        "_enqueue",
        "made",
        "sys",
        "trace_proc",
    },
    "batch": {"_close_run", "take_batch", "flush_sys", "_send_batch"},
    "ingest": {
        "enqueue_batch",
        "decode",
        "ingest_loop",
        "_ingest_frame",
        "drain_parked",
        "take_batch_in_order",
    },
    "decide": {"_dispatch", "decide", "resolve", "dispatch_loop"},
    "forward": {"_settle"},
    # the bodies' checked decode: the dispatcher's at ingest, the receiver's
    "decode bodies": {
        "handle_inbox",
        "decode_deliveries",
        "run_bodies",
        "run_terms",
        "complete",
        "loads_terms",
    },
    "mailbox": {"deliver_sys_run", "_queue_message", "deliver_remote"},
    "receive": {"receive", "on_message_removed"},
    "send (workload)": {"op_send", "_send_message", "send", "sender"},
    "scheduling": {
        "run_some",
        "_run_slice",
        "_schedule_in",
        "_schedule_out",
        "fire_timers",
        "_make_runnable",
    },
    "sockets and polling": {"poll", "recv", "recv_multipart", "send_multipart", "_pump"},
}
_FRAME = re.compile(r"^(?P<fn>[^ (]+) \(")


def classify(stack: list[str]) -> str:
    """The stage of one sample: the innermost frame that names a stage."""
    for frame in reversed(stack):
        m = _FRAME.match(frame)
        fn = (m.group("fn") if m else frame).rpartition(".")[2]  # Class.method -> method
        for stage, names in STAGES.items():
            if fn in names:
                return stage
    return "other"


def read_raw(path: str) -> collections.Counter:
    """py-spy's raw (folded) output: 'frame;frame;... count' per line."""
    out: collections.Counter = collections.Counter()
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, n = line.rpartition(" ")
            frames = stack.split(";")
            # the first frame is the process/thread header py-spy adds
            out[classify(frames)] += int(n)
    return out


def run(args) -> int:
    if shutil.which("py-spy") is None:
        print("profile: py-spy is not installed (pip install py-spy)", file=sys.stderr)
        return 2
    nsched = 2 if args.mode == "smp" else 1
    kw = {"schedulers": nsched} if args.mode == "smp" else {}
    per = args.messages // SENDERS
    with (
        tempfile.TemporaryDirectory(prefix="smp-profile-") as tmp,
        smp.Emulator(mode=args.mode, **kw) as vm,
    ):
        tracer = vm.spawn(W.tracer_loop, scheduler=nsched)
        for i in range(SENDERS):
            k = i % nsched + 1
            s = vm.spawn(W.sink, scheduler=k)
            p = vm.spawn(W.sender, s, per, scheduler=k)
            vm.trace(p, True, ["send"], tracer=tracer)
        pids = vm.os_pids
        labels = (
            ["dispatcher"] + [f"scheduler {k}" for k in range(1, nsched + 1)]
            if args.mode == "smp"
            else ["scheduler 1"]
        )
        outdir = args.raw or tmp
        os.makedirs(outdir, exist_ok=True)
        spies = []
        for pid, label in zip(pids, labels, strict=True):
            path = os.path.join(outdir, label.replace(" ", "_") + ".txt")
            spies.append(
                (
                    label,
                    path,
                    subprocess.Popen(
                        [
                            "py-spy",
                            "record",
                            "--pid",
                            str(pid),
                            "--rate",
                            str(args.rate),
                            "--format",
                            "raw",
                            "--output",
                            path,
                            "--nonblocking",
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                    ),
                )
            )
        time.sleep(0.5)  # py-spy attaches (a tool's start-up, not synchronisation of results)
        st0 = vm.statistics()
        t0 = time.perf_counter()
        vm.run(timeout=600)
        wall = time.perf_counter() - t0
        delivered = vm.statistics().delivered - st0.delivered
        for _, _, sp in spies:
            sp.send_signal(signal.SIGINT)
        for label, _, sp in spies:
            try:
                sp.wait(30)
            except subprocess.TimeoutExpired:
                sp.kill()
                print(f"profile: py-spy on {label} did not stop", file=sys.stderr)
        results = {label: read_raw(path) for label, path, _ in spies}
    print(
        f"# {args.mode}, {nsched} scheduler(s): {delivered:,} trace messages delivered in "
        f"{wall:.2f} s ({delivered / wall:,.0f}/s); py-spy at {args.rate} Hz; "
        "figures in us of CPU per delivered message"
    )
    stages = list(STAGES) + ["other"]
    print(f"{'stage':22}" + "".join(f"{label:>14}" for label in results))
    for stage in stages:
        cells = [results[label][stage] / args.rate / max(delivered, 1) * 1e6 for label in results]
        if any(c >= 0.005 for c in cells):
            print(f"{stage:22}" + "".join(f"{c:>14.2f}" for c in cells))
    totals = [sum(r.values()) / args.rate / max(delivered, 1) * 1e6 for r in results.values()]
    print(f"{'total':22}" + "".join(f"{c:>14.2f}" for c in totals))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--messages", type=int, default=400_000, help="trace messages (default 400000)")
    ap.add_argument("--mode", choices=["smp", "nonsmp"], default="smp")
    ap.add_argument("--rate", type=int, default=250, help="py-spy samples per second (default 250)")
    ap.add_argument("--raw", metavar="DIR", help="keep py-spy's raw stacks in DIR")
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
