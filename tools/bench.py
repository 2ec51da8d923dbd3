#!/usr/bin/env python
"""Benchmark of the smp trace emulator: prints figures measured in one run on
this machine (and with ``--json FILE`` writes them).  It asserts nothing: the
targets are printed next to the figures for reading, never checked.

    python tools/bench.py [--quick] [--json FILE] [--only a,b,c,d,ports,codec]

Sections:

a      transport limit: N PUSH processes -> one PULL process that only counts
       (ipc://), 256 x ~100 B messages per frame, 1 message per frame, and the
       real ingest frames of section b.
b      the dispatcher process alone (dispatcher.server.dispatcher_main, started
       as smp.Emulator starts it), 10,000 live pids preloaded, fed pre-made
       batches in SmpTransport's wire format; deliveries counted at bound
       scheduler inboxes and at a ``null`` trace port.
c      smp.Emulator(mode="smp") end to end on 1, 2, 4, 8 schedulers: 2*N senders
       traced with ['send'] to tracer processes; throughput, make-to-dispatch
       latency, peak RSS; plus a run paced at 20,000 trace messages/s.
d      the same workload with smp.Emulator(mode="nonsmp").
ports  file and ip trace ports (smp.ports.traceport), messages/s.
codec  smp.wire.etf encode/decode of a typical trace tuple, side by side with
       erlang-py (``erlang`` module) when it can be imported or installed.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import pickle
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

import bench_workers as W  # noqa: E402
import multiprocess  # noqa: E402
import psutil  # noqa: E402
import zmq  # noqa: E402

from smp.core import messages as M  # noqa: E402
from smp.core.placement import pid_owner  # noqa: E402
from smp.core.terms import Atom, Pid  # noqa: E402
from smp.endpoints import plan_endpoints  # noqa: E402
from smp.link import DispatcherLink, FrameLog, TimeBounds  # noqa: E402
from smp.wire.frames import Batch, TableEvent  # noqa: E402

try:
    from rich.console import Console
    from rich.table import Table

    _console = Console(highlight=False, width=max(150, shutil.get_terminal_size((150, 40)).columns))
except Exception:  # rich is optional
    _console = None

SECTIONS = ("a", "b", "c", "d", "ports", "codec")
TARGET_B = 1_000_000  # msg/s, dispatcher alone, 10 % of the runs to a null port
TARGET_B_PIDS = 2_000_000  # decisions/s, dispatcher alone, all to tracer pids
TARGET_C = 250_000  # trace msg/s delivered, 2 schedulers
TARGET_P99_MS = 5.0  # at 20,000 msg/s
PACED_RATE = 20_000
MB = 1024 * 1024


# =============================================================== output helpers
def say(text: str = "") -> None:
    if _console is not None:
        _console.print(text, markup=False)
    else:
        print(text, flush=True)


def heading(text: str) -> None:
    if _console is not None:
        _console.rule(f"[bold]{text}")
    else:
        print(f"\n=== {text} ===", flush=True)


def table(title: str, columns: list[str], rows: list[list]) -> None:
    rows = [[str(c) for c in r] for r in rows]
    if _console is not None:
        t = Table(title=title, title_justify="left")
        for i, c in enumerate(columns):
            t.add_column(c, justify="left" if i == 0 else "right")
        for r in rows:
            t.add_row(*r)
        _console.print(t)
        return
    widths = [
        max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)
    ]
    print(title)
    print(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(columns, widths, strict=False))
        )
    )
    for r in rows:
        print(
            "  ".join(
                v.ljust(w) if i == 0 else v.rjust(w)
                for i, (v, w) in enumerate(zip(r, widths, strict=False))
            )
        )
    print(flush=True)


def rate(x) -> str:
    return "-" if x is None else f"{x:,.0f}/s"


def ms(ns) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.2f} ms"


def mb(b) -> str:
    return "-" if b is None else f"{b / MB:,.1f} MB"


def vs_target(value, target, *, below_is_good=False) -> str:
    if value is None:
        return "n/a"
    ok = value <= target if below_is_good else value >= target
    return ("meets" if ok else "below") if not below_is_good else ("meets" if ok else "above")


def pct(sorted_vals: list, q: float):
    if not sorted_vals:
        return None
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


# =============================================================== machine
def machine_info() -> dict:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    vm = psutil.virtual_memory()
    return {
        "cpu_model": cpu,
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "ram_bytes": vm.total,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "pyzmq": zmq.__version__,
        "libzmq": zmq.zmq_version(),
        "loadavg_at_start": os.getloadavg(),
    }


# =============================================================== RSS sampler
class RssSampler:
    """Peak RSS of a set of OS pids, sampled from a background thread."""

    def __init__(self, pids: list[int], labels: list[str], interval: float = 0.05):
        self.procs = []
        for pid, label in zip(pids, labels, strict=False):
            try:
                self.procs.append((label, pid, psutil.Process(pid)))
            except psutil.NoSuchProcess:
                pass
        self.peak = {label: 0 for label, _, _ in self.procs}
        self.interval = interval
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True, name="rss-sampler")

    def _sample(self) -> None:
        for label, _, p in self.procs:
            try:
                rss = p.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if rss > self.peak[label]:
                self.peak[label] = rss

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self):
        self._sample()
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(2)
        self._sample()


def _reap(procs) -> None:
    """End only the processes this benchmark started, by their own pid."""
    for p in procs:
        p.join(5)
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(3)
        if p.is_alive():
            p.kill()
            p.join(1)


# =============================================================== (a) transport
def _one_transport(
    mp, endpoint: str, frame: bytes, per_frame: int, npush: int, duration: float
) -> dict:
    ready, go = mp.Event(), mp.Event()
    out_pull, out_push = mp.Queue(), mp.Queue()
    puller = mp.Process(
        target=W.puller_main, args=(endpoint, per_frame, npush, ready, out_pull), daemon=True
    )
    puller.start()
    procs = [puller]
    try:
        if not ready.wait(10):
            raise RuntimeError("puller did not start")
        for _ in range(npush):
            p = mp.Process(
                target=W.pusher_main, args=(endpoint, frame, duration, go, out_push), daemon=True
            )
            p.start()
            procs.append(p)
        time.sleep(0.3)  # let every PUSH connect
        go.set()
        res = out_pull.get(timeout=duration + 60)
        if not res["frames"]:
            raise RuntimeError("the puller counted no frame")
        pushed = 0
        for _ in range(npush):
            try:
                pushed += out_push.get(timeout=10) + 1  # + its end mark
            except Exception:
                pass
        # a frame that never arrived is reported, not hidden (the rate counts what arrived)
        res["not_counted"] = pushed - res["frames"] - res["ends"]
    finally:
        _reap(procs)
    el = res["t1"] - res["t0"]
    return {
        "frames": res["frames"],
        "messages": res["messages"],
        "bytes": res["bytes"],
        "seconds": el,
        "msgs_per_s": res["messages"] / el,
        "frames_per_s": res["frames"] / el,
        "mb_per_s": res["bytes"] / el / MB,
        "frames_pushed": pushed,
        "end_marks": res["ends"],
        "frames_not_counted": res["not_counted"],
        "frame_bytes": len(frame),
        "per_frame": per_frame,
    }


def bench_a(cfg) -> dict:
    heading(
        f"(a) transport limit: {cfg.n} PUSH processes -> 1 PULL process (ipc://), counting only"
    )
    mp = multiprocess.get_context("fork")
    d = tempfile.mkdtemp(prefix="bench-a-")
    chunk = [bytes((i + j) & 0xFF for j in range(100)) for i in range(256)]
    frame256 = b"".join(chunk)
    frame1 = chunk[7]
    senders = [Pid(80 + i, 0) for i in range(1, 50)]
    targets = [Pid(80 + i * 100, 0) for i in range(100)]
    real, _, _ = W.make_sys_batch(1, 0, senders, targets, None, 0, 256, M.TS_NONE)
    variants = [
        ("batch: 256 x 100 B messages per frame", frame256, 256),
        ("single: 1 x 100 B message per frame", frame1, 1),
        (f"real ingest batch (256 msgs, {len(real) // 256} B/msg, as in b)", real, 256),
    ]
    out = {}
    rows = []
    try:
        for i, (name, frame, per) in enumerate(variants):
            r = _one_transport(mp, f"ipc://{d}/a{i}", frame, per, cfg.n, cfg.d_a)
            key = ("batch", "single", "real_batch")[i]
            out[key] = r
            rows.append(
                [
                    name,
                    f"{len(frame):,} B",
                    rate(r["msgs_per_s"]),
                    rate(r["frames_per_s"]),
                    f"{r['mb_per_s']:,.0f} MB/s",
                    f"{r['seconds']:.2f} s",
                ]
            )
            if r["frames_not_counted"] or r["end_marks"] < cfg.n:
                say(
                    f"   note ({key}): {r['frames_not_counted']} pushed frames were not counted, "
                    f"{r['end_marks']} of {cfg.n} end marks arrived"
                )
    finally:
        shutil.rmtree(d, ignore_errors=True)
    table(
        f"(a) {cfg.n} pushers, {cfg.d_a:g} s each variant",
        ["variant", "frame", "messages", "frames", "bandwidth", "measured"],
        rows,
    )
    out["pushers"] = cfg.n
    return out


# =============================================================== (b) dispatcher alone
class DispatcherRig:
    """The real dispatcher process with bound scheduler inboxes and a control socket."""

    def __init__(self, nsched: int):
        self.nsched = nsched
        self.mp = multiprocess.get_context("fork")
        self.dir = tempfile.mkdtemp(prefix="bench-b-")
        os.chmod(self.dir, 0o700)
        d = self.dir
        # smp.Emulator's endpoint layout; the directory is the rig's own, so
        # the dispatcher takes no hold on it (the rig removes it)
        self.endpoints = dataclasses.replace(plan_endpoints(d), dir=None).as_dict()
        self.procs = []
        self.ctx = zmq.Context()
        self.link = None
        self.ingest = None
        mp = self.mp
        self.c_ready, self.c_stop = mp.Event(), mp.Event()
        self.count = mp.Value("q", 0)
        self.last_t = mp.Value("d", 0.0)
        self.per_inbox = mp.Array("q", nsched + 1)
        c = mp.Process(
            target=W.consumer_main,
            args=(
                self.endpoints["inbox"],
                nsched,
                self.c_ready,
                self.c_stop,
                self.count,
                self.last_t,
                self.per_inbox,
            ),
            name="bench-inboxes",
            daemon=True,
        )
        c.start()
        self.consumer = c
        self.procs.append(c)
        if not self.c_ready.wait(10):
            raise RuntimeError("inbox consumer did not start")
        from dispatcher.server import dispatcher_main
        from smp.wire.curve import new_routing_id

        ready = mp.Event()
        # routing ids, as smp.Emulator makes them: the controller's, the
        # preload's and each feeder's (one per run) as scheduler k, and the
        # dispatcher's threads' to each inbox
        self.ctl_id = new_routing_id()
        self.preload_ids = {k: new_routing_id() for k in range(1, nsched + 1)}
        self.feeder_ids = {(r, k): new_routing_id() for r in range(8) for k in range(1, nsched + 1)}
        self.out_ids = {k: (new_routing_id(), new_routing_id()) for k in range(1, nsched + 1)}
        self.runs = 0
        p = mp.Process(
            target=dispatcher_main,
            args=(nsched, self.endpoints, ready, None, None, self.ctl_id),
            name="smp-dispatcher",
            daemon=True,
        )
        p.start()
        self.disp = p
        self.procs.append(p)
        if not ready.wait(10):
            raise RuntimeError("dispatcher did not start")
        # the controller's link to the dispatcher's control socket
        self.link = DispatcherLink(
            self.ctx,
            self.endpoints["disp_ctl"],
            self.ctl_id,
            None,
            itertools.count(1),
            TimeBounds(),
            FrameLog(),
            p.is_alive,
        )
        self.ingest = {}
        for k, rid in self.preload_ids.items():
            s = self.ingest[k] = self.ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.ROUTING_ID, rid)
            s.setsockopt(zmq.LINGER, 5000)
            s.connect(self.endpoints["ingest"])
        # what the controller tells the dispatcher after the schedulers' hellos
        ingest = {rid: k for k, rid in self.preload_ids.items()}
        ingest.update({rid: k for (_, k), rid in self.feeder_ids.items()})
        self.call(
            "set_inboxes",
            {k: (self.endpoints["inbox"].format(k), None) for k in range(1, nsched + 1)},
            {"ingest": ingest, "out": self.out_ids, "keys": {}},
        )

    def call(self, cmd: str, *args, timeout: float = 30.0):
        """A request over the controller's link (``smp.link.DispatcherLink``):
        ``PeerGone`` when the dispatcher died, ``Unanswered`` after ``timeout``."""
        ok, value = self.link.call(cmd, args, timeout)
        if not ok:
            raise value
        return value

    def close(self) -> None:
        try:
            if self.link is not None and self.disp.is_alive():
                self.call("stop", timeout=10)
        except Exception:
            pass
        self.c_stop.set()
        ctl = [self.link.sock] if self.link is not None else []
        for s in ctl + list((self.ingest or {}).values()):
            if s is not None:
                s.close(linger=0)
        _reap(self.procs)
        self.ctx.term()
        shutil.rmtree(self.dir, ignore_errors=True)


def bench_b(cfg) -> dict:
    n = cfg.n
    heading(
        f"(b) the dispatcher process alone: {n} feeders -> dispatcher -> {n} inboxes + null port"
    )
    rig = DispatcherRig(n)
    out: dict = {"feeders": n, "schedulers": n}
    try:
        # -- preload the process table: 10,000 live pids, 100 of them tracers
        pids = [Pid(80 + i, 0) for i in range(10_000)]
        tracers = pids[::97][:100]  # 97: spread over every scheduler's inbox
        tset = set(tracers)
        events = [TableEvent("spawn", (p,)) for p in pids]
        events += [TableEvent("tracer", (p,)) for p in tracers]
        t0 = time.perf_counter()
        by_owner: dict = {}  # a scheduler speaks for its own processes only
        for ev in events:
            by_owner.setdefault(pid_owner(ev.subject, n), []).append(ev)
        for k, evs in by_owner.items():
            for i in range(0, len(evs), 256):
                rig.ingest[k].send(Batch(k, evs[i : i + 256]).encode())
        rig.call("wait_ingested", [0] + [len(by_owner.get(k, [])) for k in range(1, n + 1)])
        out["preload_s"] = time.perf_counter() - t0
        port = rig.call("open_trace_port", "null", (), {})
        senders = [p for p in pids[1:2000:37] if p not in tset][:50]  # live, not tracers
        port_every = cfg.port_every
        disp_pid = rig.disp.pid

        def run(frames_per_feeder: int, port_every: int) -> dict:
            mp = rig.mp
            go, release = mp.Event(), mp.Event()
            q = mp.Queue()
            readies, feeders = [], []
            c0 = rig.count.value
            p0 = rig.call("trace_port_call", port, "info", ())["messages"]
            taken0 = sum(rig.call("stats")["ingested"])
            run_no, rig.runs = rig.runs, rig.runs + 1
            for k in range(1, n + 1):
                r = mp.Event()
                # a feeder hangs up only once the dispatcher took all it sent
                f = mp.Process(
                    target=W.feeder_main,
                    args=(
                        rig.endpoints["ingest"],
                        k,
                        frames_per_feeder,
                        16,
                        senders,
                        tracers,
                        port,
                        port_every,
                        256,
                        M.TS_NONE,
                        r,
                        go,
                        q,
                        rig.feeder_ids[(run_no, k)],
                        release,
                    ),
                    daemon=True,
                )
                f.start()
                readies.append(r)
                feeders.append(f)
            try:
                for r in readies:
                    if not r.wait(60):
                        raise RuntimeError("feeder did not get ready")
                time.sleep(0.2)
                exp_pids = exp_port = 0
                for _ in range(n):
                    tag, _k, a, b = q.get(timeout=30)
                    exp_pids += a
                    exp_port += b
                max_q = 0
                with RssSampler([disp_pid, rig.consumer.pid], ["dispatcher", "consumer"]) as rss:
                    t_start = time.monotonic()
                    go.set()
                    deadline = t_start + max(30.0, cfg.d_b * 20)
                    next_status = t_start + 0.1
                    while rig.count.value - c0 < exp_pids:
                        if time.monotonic() > deadline:
                            # say where the rest is: not taken by the dispatcher,
                            # or taken and not delivered
                            st = rig.call("stats")
                            raise RuntimeError(
                                f"only {rig.count.value - c0} of {exp_pids} deliveries arrived; "
                                f"the dispatcher took {sum(st['ingested']) - taken0} of the "
                                f"{exp_pids + exp_port} messages fed, and has made "
                                f"{st['made']:,}, delivered {st['delivered']:,}, dropped "
                                f"{st['dropped']:,}, queued {st['queued']:,} in all"
                            )
                        time.sleep(0.002)
                        if time.monotonic() >= next_status:
                            st = rig.call("status")
                            max_q = max(max_q, st.queued)
                            next_status = time.monotonic() + 0.1
                    t_pids = rig.last_t.value
                    t_port = t_pids
                    got_port = 0
                    if exp_port:
                        while True:
                            got_port = (
                                rig.call("trace_port_call", port, "info", ())["messages"] - p0
                            )
                            if got_port >= exp_port:
                                t_port = time.monotonic()
                                break
                            if time.monotonic() > deadline:
                                raise RuntimeError(f"null port got {got_port} of {exp_port}")
                            time.sleep(0.002)
                t_end = max(t_pids, t_port)
                fed = [q.get(timeout=30)[1] for _ in range(n)]
                release.set()
                for f in feeders:
                    f.join(10)
            finally:
                release.set()
                _reap(feeders)
            got_pids = rig.count.value - c0
            el = t_end - t_start
            return {
                "messages": got_pids + got_port,
                "to_pids": got_pids,
                "to_port": got_port,
                "expected": exp_pids + exp_port,
                "seconds": el,
                "msgs_per_s": (got_pids + got_port) / el,
                "feeders_done_s": max(f["t_send"] for f in fed),
                "ingest_bytes": sum(f["bytes"] for f in fed),
                "max_queued": max_q,
                "peak_rss": dict(rss.peak),
            }

        # calibration (also warms up), then sized runs
        cal = run(20, port_every)
        frames = int(min(max(cal["msgs_per_s"] * cfg.d_b / (256 * n), 40), 20_000))
        main = run(frames, port_every)
        frames_p = int(min(max(main["msgs_per_s"] * cfg.d_b2 / (256 * n), 40), 20_000))
        pid_only = run(frames_p, 0)
        stats = rig.call("stats")
        out.update(
            calibration=cal,
            main=main,
            pid_only=pid_only,
            port_fraction=(1 / port_every) if port_every else 0.0,
            dispatcher_stats={
                k: stats[k] for k in ("made", "delivered", "dropped", "queued", "bad_frames")
            },
            per_inbox=list(rig.per_inbox)[1:],
        )
    finally:
        rig.close()
    rows = []
    for name, r in (
        (
            f"mixed: {100 / port_every:.0f}% to null port, rest to tracer pids"
            if port_every
            else "mixed",
            out["main"],
        ),
        ("pid only: all to tracer pids", out["pid_only"]),
    ):
        rows.append(
            [
                name,
                f"{r['messages']:,}",
                f"{r['seconds']:.2f} s",
                rate(r["msgs_per_s"]),
                f"{r['feeders_done_s']:.2f} s",
                f"{r['max_queued']:,}",
                mb(r["peak_rss"].get("dispatcher")),
            ]
        )
    table(
        f"(b) dispatcher alone, 10,000 live pids / 100 tracers, ts_kind=TS_NONE, "
        f"preload {out['preload_s']:.2f} s",
        [
            "workload",
            "delivered",
            "elapsed",
            "decided+delivered",
            "feeders done",
            "max queued",
            "disp peak RSS",
        ],
        rows,
    )
    st = out["dispatcher_stats"]
    say(
        f"   dispatcher statistics(): made {st['made']:,}, delivered {st['delivered']:,}, "
        f"dropped {st['dropped']:,}, queued {st['queued']:,}, bad frames {st['bad_frames']}; "
        f"deliveries per inbox {out['per_inbox']}"
    )
    say(
        f"   target (b) >= {TARGET_B:,} msg/s: {vs_target(out['main']['msgs_per_s'], TARGET_B)} "
        f"({out['main']['msgs_per_s'] / TARGET_B:.1%} of target)"
    )
    pids = out["pid_only"]["msgs_per_s"]
    say(
        f"   target (b, pid only) >= {TARGET_B_PIDS:,} decisions/s: "
        f"{vs_target(pids, TARGET_B_PIDS)} ({pids / TARGET_B_PIDS:.1%} of target)"
    )
    return out


# =============================================================== (c)/(d) emulator end to end
def _run(vm, timeout: float) -> None:
    """vm.run(), and if it times out, say what the schedulers and dispatcher report."""
    try:
        vm.run(timeout=timeout)
    except Exception as e:
        detail = []
        try:
            for k, st in enumerate(vm._all_scheds("status"), 1):
                detail.append(
                    f"scheduler {k}: "
                    + ", ".join(f"{key}={st[key]}" for key in sorted(st) if key != "busy")
                )
            if vm.smp:
                detail.append(f"dispatcher: {vm._disp_call('status')}")
        except Exception as e2:
            detail.append(f"(status unavailable: {type(e2).__name__}: {e2})")
        raise RuntimeError(f"{type(e).__name__}: {e}\n      " + "\n      ".join(detail)) from e


def _emu_run(vm, nsched: int, total: int, tracers: list, timeout: float, labels: list[str]):
    """Spawn 2*N senders (each to a local sink, traced ['send'] to a tracer on
    another scheduler), run, and measure."""
    nsend = 2 * nsched
    per = max(1, total // nsend)
    for i in range(nsend):
        k = i % nsched + 1
        s = vm.spawn(W.sink, scheduler=k)
        p = vm.spawn(W.sender, s, per, scheduler=k)
        vm.trace(p, True, ["send"], tracer=tracers[(i + 1) % nsched])
    st0 = vm.statistics()
    with RssSampler(vm.os_pids, labels) as rss:
        t0 = time.perf_counter()
        _run(vm, timeout)
        wall = time.perf_counter() - t0
    st1 = vm.statistics()
    made = st1.made - st0.made
    delivered = st1.delivered - st0.delivered
    dropped = st1.dropped - st0.dropped
    res = {
        "senders": nsend,
        "per_sender": per,
        "seconds": wall,
        "made": made,
        "delivered": delivered,
        "dropped": dropped,
        "sent": st1.messages_sent - st0.messages_sent,
        "made_per_s": made / wall,
        "delivered_per_s": delivered / wall,
        "peak_rss": dict(rss.peak),
    }
    if vm.smp:
        lat = vm.latencies_ns()
        k = min(len(lat), delivered)
        s = sorted(lat[len(lat) - k :]) if k else []
        res.update(
            lat_samples=len(s),
            p50_ns=pct(s, 0.50),
            p99_ns=pct(s, 0.99),
            max_ns=s[-1] if s else None,
        )
    return res


def _labels(vm) -> list[str]:
    if vm.smp:
        return ["dispatcher"] + [f"scheduler {k}" for k in range(1, vm.nsched + 1)]
    return ["scheduler 1"]


def bench_emulator(mode: str, nsched: int, cfg, duration: float) -> dict:
    from smp import Emulator

    kw = {"schedulers": nsched} if mode == "smp" else {}
    t0 = time.perf_counter()
    vm = Emulator(mode=mode, **kw)
    try:
        start_s = time.perf_counter() - t0
        tracers = [vm.spawn(W.tracer_loop, scheduler=k) for k in range(1, nsched + 1)]
        labels = _labels(vm)
        cal = _emu_run(vm, nsched, cfg.c_cal, tracers, 60, labels)
        total = int(min(max(cal["made_per_s"] * duration, 4 * nsched), cfg.c_max))
        main = _emu_run(vm, nsched, total, tracers, max(60.0, duration * 20), labels)
        main["startup_s"] = start_s
        main["calibration"] = {k: cal[k] for k in ("made", "seconds", "made_per_s")}
        return main
    finally:
        vm.close()


def bench_paced(cfg) -> dict:
    """2 schedulers, 4 senders pacing themselves to 20,000 trace msg/s in all."""
    from smp import Emulator

    nsched, nsend = 2, 4
    per_rate = PACED_RATE / nsend
    per_total = int(per_rate * cfg.d_lat)
    vm = Emulator(mode="smp", schedulers=nsched)
    try:
        tracers = [vm.spawn(W.tracer_loop, scheduler=k) for k in range(1, nsched + 1)]
        for i in range(nsend):
            k = i % nsched + 1
            s = vm.spawn(W.sink, scheduler=k)
            p = vm.spawn(W.paced_sender, s, per_rate, per_total, cfg.tick_ms, scheduler=k)
            vm.trace(p, True, ["send"], tracer=tracers[(i + 1) % nsched])
        with RssSampler(vm.os_pids, _labels(vm)) as rss:
            t0 = time.perf_counter()
            _run(vm, cfg.d_lat * 10 + 30)
            wall = time.perf_counter() - t0
        st = vm.statistics()
        lat = sorted(vm.latencies_ns())
    finally:
        vm.close()
    return {
        "schedulers": nsched,
        "senders": nsend,
        "target_rate": PACED_RATE,
        "tick_ms": cfg.tick_ms,
        "seconds": wall,
        "made": st.made,
        "delivered": st.delivered,
        "achieved_per_s": st.made / wall,
        "lat_samples": len(lat),
        "p50_ns": pct(lat, 0.5),
        "p90_ns": pct(lat, 0.9),
        "p99_ns": pct(lat, 0.99),
        "p999_ns": pct(lat, 0.999),
        "max_ns": lat[-1] if lat else None,
        "peak_rss": dict(rss.peak),
    }


def _rss_cells(r: dict) -> tuple[str, str]:
    pk = r["peak_rss"]
    disp = pk.get("dispatcher")
    sch = [v for k, v in pk.items() if k.startswith("scheduler")]
    sched_txt = (
        "-"
        if not sch
        else (
            mb(sch[0])
            if len(sch) == 1
            else f"{mb(max(sch))} max ({', '.join(f'{v / MB:.0f}' for v in sch)})"
        )
    )
    return mb(disp), sched_txt


def bench_c(cfg) -> dict:
    heading("(c) smp.Emulator end to end: 2*N senders traced ['send'] -> tracer processes")
    out: dict = {"runs": {}}
    rows = []
    for n in cfg.c_ns:
        r = bench_emulator("smp", n, cfg, cfg.d_c)
        out["runs"][str(n)] = r
        disp, sch = _rss_cells(r)
        rows.append(
            [
                str(n),
                f"{r['delivered']:,}",
                f"{r['seconds']:.2f} s",
                rate(r["made_per_s"]),
                rate(r["delivered_per_s"]),
                ms(r.get("p50_ns")),
                ms(r.get("p99_ns")),
                disp,
                sch,
            ]
        )
    table(
        "(c) smp, unpaced (senders as fast as they can; latency includes queueing)",
        [
            "schedulers",
            "delivered",
            "run() wall",
            "made",
            "delivered",
            "p50",
            "p99",
            "dispatcher RSS",
            "scheduler RSS",
        ],
        rows,
    )
    two = out["runs"].get("2")
    if two:
        say(
            f"   target (c) >= {TARGET_C:,} trace msg/s delivered with 2 schedulers: "
            f"{vs_target(two['delivered_per_s'], TARGET_C)} "
            f"({two['delivered_per_s'] / TARGET_C:.1%} of target)"
        )
    p = bench_paced(cfg)
    out["paced"] = p
    disp, sch = _rss_cells(p)
    table(
        f"(c) smp, 2 schedulers, 4 senders paced to {PACED_RATE:,} trace msg/s "
        f"(burst, then proc.sleep({cfg.tick_ms}))",
        [
            "achieved",
            "delivered",
            "samples",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max",
            "dispatcher RSS",
            "scheduler RSS",
        ],
        [
            [
                rate(p["achieved_per_s"]),
                f"{p['delivered']:,}",
                f"{p['lat_samples']:,}",
                ms(p["p50_ns"]),
                ms(p["p90_ns"]),
                ms(p["p99_ns"]),
                ms(p["p999_ns"]),
                ms(p["max_ns"]),
                disp,
                sch,
            ]
        ],
    )
    p99 = None if p["p99_ns"] is None else p["p99_ns"] / 1e6
    say(
        f"   target p99 < {TARGET_P99_MS:g} ms at {PACED_RATE:,}/s: "
        f"{vs_target(p99, TARGET_P99_MS, below_is_good=True)}"
    )
    return out


def bench_d(cfg) -> dict:
    heading("(d) the same workload in nonsmp mode (1 scheduler, no dispatcher)")
    r = bench_emulator("nonsmp", 1, cfg, cfg.d_d)
    _, sch = _rss_cells(r)
    table(
        "(d) nonsmp",
        ["senders", "delivered", "run() wall", "made", "delivered", "scheduler RSS"],
        [
            [
                str(r["senders"]),
                f"{r['delivered']:,}",
                f"{r['seconds']:.2f} s",
                rate(r["made_per_s"]),
                rate(r["delivered_per_s"]),
                sch,
            ]
        ],
    )
    return r


# =============================================================== ports
def typical_trace_term():
    """{trace_ts, Pid, send, {ping, Pid, 12345}, To, {Mega, Sec, Micro}}."""
    msg = M.trace_send(Pid(83, 0), Atom("send"), (Atom("ping"), Pid(84, 0), 12345), Pid(85, 0))
    return M.complete(msg, M.TS_PATCH, (1_700, 123_456, 789_012))


def _timed_loop(fn, duration: float, chunk: int = 1000) -> tuple[int, float]:
    n = 0
    t0 = time.perf_counter()
    end = t0 + duration
    while True:
        for _ in range(chunk):
            fn()
        n += chunk
        if time.perf_counter() >= end:
            break
    return n, time.perf_counter() - t0


def bench_file_port(payload: bytes, term, duration: float, encode_each: bool) -> dict:
    from smp.ports.traceport import FileTracePort
    from smp.wire.etf import encode

    d = tempfile.mkdtemp(prefix="bench-port-")
    try:
        tp = FileTracePort(os.path.join(d, "trace.bin"))
        w = tp.write
        fn = (lambda: w(encode(term))) if encode_each else (lambda: w(payload))
        n, el0 = _timed_loop(fn, duration)
        t0 = time.perf_counter()
        tp.close()
        el = el0 + (time.perf_counter() - t0)
        size = os.path.getsize(os.path.join(d, "trace.bin"))
        return {
            "messages": n,
            "seconds": el,
            "msgs_per_s": n / el,
            "file_bytes": size,
            "mb_per_s": size / el / MB,
            "os_writes": tp.os_writes,
        }
    finally:
        shutil.rmtree(d, ignore_errors=True)


def bench_ip_port(payload: bytes, duration: float, queue_size: int) -> dict:
    from smp.ports.traceport import IpTracePort

    tp = IpTracePort(0, queue_size=queue_size)
    got = {"bytes": 0}
    stop = threading.Event()

    def client():
        c = socket.create_connection(("127.0.0.1", tp.port))
        c.settimeout(0.2)
        try:
            while not stop.is_set():
                try:
                    b = c.recv(1 << 20)
                except socket.timeout:
                    continue
                if not b:
                    break
                got["bytes"] += len(b)
        finally:
            c.close()

    th = threading.Thread(target=client, daemon=True, name="ip-trace-client")
    th.start()
    deadline = time.monotonic() + 5
    while tp.clients < 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    w = tp.write
    t0 = time.perf_counter()
    n, _ = _timed_loop(lambda: w(payload), duration)
    drained = tp.flush(60)
    el = time.perf_counter() - t0
    sent, dropped, drop_frames = tp.sent, tp.dropped, tp.drop_frames_sent
    time.sleep(0.05)
    stop.set()
    tp.close()
    th.join(2)
    return {
        "queue_size": queue_size,
        "written": n,
        "sent": sent,
        "dropped": dropped,
        "drop_frames": drop_frames,
        "drained": drained,
        "seconds": el,
        "write_per_s": n / el,
        "sent_per_s": sent / el,
        "client_bytes": got["bytes"],
        "client_mb_per_s": got["bytes"] / el / MB,
    }


def bench_ports(cfg) -> dict:
    heading("(ports) trace ports (smp.ports.traceport), one typical trace message per write")
    from smp.wire.etf import encode

    term = typical_trace_term()
    payload = encode(term)
    out = {"payload_bytes": len(payload)}
    out["file_preencoded"] = bench_file_port(payload, term, cfg.d_port, False)
    out["file_encode_each"] = bench_file_port(payload, term, cfg.d_port, True)
    out["ip_default_queue"] = bench_ip_port(payload, cfg.d_port, 200)
    out["ip_big_queue"] = bench_ip_port(payload, cfg.d_port, 10_000_000)
    rows = []
    for name, r in (
        ("file, pre-encoded payload", out["file_preencoded"]),
        ("file, smp.wire.etf.encode + write", out["file_encode_each"]),
    ):
        rows.append(
            [
                name,
                f"{r['messages']:,}",
                rate(r["msgs_per_s"]),
                "-",
                f"{r['mb_per_s']:,.1f} MB/s",
                f"{r['seconds']:.2f} s",
            ]
        )
    for name, r in (
        ("ip, queue_size=200 (dbg default), 1 client", out["ip_default_queue"]),
        ("ip, queue_size=10,000,000, 1 client", out["ip_big_queue"]),
    ):
        rows.append(
            [
                name,
                f"{r['written']:,} written",
                rate(r["sent_per_s"]) + " sent",
                f"{r['dropped']:,}",
                f"{r['client_mb_per_s']:,.1f} MB/s",
                f"{r['seconds']:.2f} s",
            ]
        )
    table(
        f"(ports) payload {len(payload)} B (+5 B frame header); ip: a client thread reads, "
        "rate = frames fully sent / time until flush() drained",
        ["port", "messages", "rate", "dropped", "bandwidth", "elapsed"],
        rows,
    )
    return out


# =============================================================== codec
def _get_erlang_py(allow_install: bool):
    try:
        import erlang  # erlang-py

        if hasattr(erlang, "term_to_binary") and hasattr(erlang, "binary_to_term"):
            return erlang, None
        return None, "a module 'erlang' is importable but has no term_to_binary/binary_to_term"
    except ImportError as e:
        reason = f"import erlang: {e}"
    if not allow_install:
        return None, reason + " (install not attempted: --no-install)"
    try:
        r = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "erlang-py"],
            capture_output=True,
            text=True,
            timeout=180,
        )
    except Exception as e:
        return None, f"{reason}; pip install erlang-py failed: {e}"
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]
        return None, f"{reason}; pip install erlang-py failed: {tail[0]}"
    try:
        import importlib

        importlib.invalidate_caches()
        import erlang

        return erlang, None
    except ImportError as e:
        return None, f"pip installed erlang-py but import erlang still fails: {e}"


def bench_codec(cfg) -> dict:
    heading("(codec) external term format of a typical trace tuple")
    from smp.wire.etf import decode, encode

    term = typical_trace_term()
    blob = encode(term)
    out = {"term": repr(term), "bytes": len(blob)}
    d = cfg.d_codec
    n, el = _timed_loop(lambda: encode(term), d)
    out["smp_etf_encode_per_s"] = n / el
    n, el = _timed_loop(lambda: decode(blob), d)
    out["smp_etf_decode_per_s"] = n / el
    pblob = pickle.dumps(term, pickle.HIGHEST_PROTOCOL)
    n, el = _timed_loop(lambda: pickle.dumps(term, pickle.HIGHEST_PROTOCOL), d)
    out["pickle_dumps_per_s"] = n / el
    n, el = _timed_loop(lambda: pickle.loads(pblob), d)
    out["pickle_loads_per_s"] = n / el
    erlang, why = _get_erlang_py(not cfg.no_install)
    if erlang is not None:
        et = erlang.binary_to_term(blob)
        eb = erlang.term_to_binary(et)
        out["erlang_py_identical_bytes"] = eb == blob
        n, el = _timed_loop(lambda: erlang.term_to_binary(et), d)
        out["erlang_py_encode_per_s"] = n / el
        n, el = _timed_loop(lambda: erlang.binary_to_term(blob), d)
        out["erlang_py_decode_per_s"] = n / el
        try:
            from importlib.metadata import version

            out["erlang_py_version"] = version("erlang-py")
        except Exception:
            out["erlang_py_version"] = "?"
    else:
        out["erlang_py_unavailable"] = why
    rows = [
        [
            "smp.wire.etf",
            rate(out["smp_etf_encode_per_s"]),
            rate(out["smp_etf_decode_per_s"]),
            "1.00x / 1.00x",
        ]
    ]
    if erlang is not None:
        rows.append(
            [
                f"erlang-py {out['erlang_py_version']} (same term, its own classes)",
                rate(out["erlang_py_encode_per_s"]),
                rate(out["erlang_py_decode_per_s"]),
                f"{out['erlang_py_encode_per_s'] / out['smp_etf_encode_per_s']:.2f}x / "
                f"{out['erlang_py_decode_per_s'] / out['smp_etf_decode_per_s']:.2f}x",
            ]
        )
    rows.append(
        [
            f"pickle (reference: the wire codec, {len(pblob)} B)",
            rate(out["pickle_dumps_per_s"]),
            rate(out["pickle_loads_per_s"]),
            f"{out['pickle_dumps_per_s'] / out['smp_etf_encode_per_s']:.2f}x / "
            f"{out['pickle_loads_per_s'] / out['smp_etf_decode_per_s']:.2f}x",
        ]
    )
    table(
        f"(codec) {len(blob)} B: {term!r}",
        ["codec", "encode", "decode", "vs smp.wire.etf (enc / dec)"],
        rows,
    )
    if erlang is None:
        say(f"   erlang-py not available: {why}")
    else:
        say(
            f"   erlang-py term_to_binary output byte-identical to smp.wire.etf.encode: "
            f"{'yes' if out['erlang_py_identical_bytes'] else 'NO'}"
        )
    return out


# =============================================================== summary
def summary(results: dict) -> dict:
    heading("summary: ratios and targets (printed, not asserted)")
    a = results.get("a") or {}
    b = results.get("b") or {}
    c = results.get("c") or {}
    d = results.get("d") or {}
    a_rate = a.get("batch", {}).get("msgs_per_s")
    a_real = a.get("real_batch", {}).get("msgs_per_s")
    b_rate = b.get("main", {}).get("msgs_per_s")
    b_pids = b.get("pid_only", {}).get("msgs_per_s")
    c2 = (c.get("runs") or {}).get("2", {})
    c_rate = c2.get("delivered_per_s")
    d_rate = d.get("delivered_per_s")
    p99 = (c.get("paced") or {}).get("p99_ns")

    def ratio(x, y):
        return None if x is None or y is None or not y else x / y

    out = {
        "b_over_a": ratio(b_rate, a_rate),
        "b_over_a_real_frames": ratio(b_rate, a_real),
        "c_over_a": ratio(c_rate, a_rate),
        "c_over_d": ratio(c_rate, d_rate),
    }
    fr = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    table(
        "ratios (c = smp with 2 schedulers, delivered)",
        ["ratio", "value", "of"],
        [
            ["(b)/(a)", fr(out["b_over_a"]), f"{rate(b_rate)} / {rate(a_rate)}"],
            [
                "(b)/(a, real ingest frames)",
                fr(out["b_over_a_real_frames"]),
                f"{rate(b_rate)} / {rate(a_real)}",
            ],
            ["(c)/(a)", fr(out["c_over_a"]), f"{rate(c_rate)} / {rate(a_rate)}"],
            ["(c)/(d)", fr(out["c_over_d"]), f"{rate(c_rate)} / {rate(d_rate)}"],
        ],
    )
    p99_ms = None if p99 is None else p99 / 1e6
    table(
        "targets",
        ["target", "measured", "status"],
        [
            [f"(b) >= {TARGET_B:,} msg/s", rate(b_rate), vs_target(b_rate, TARGET_B)],
            [
                f"(b, pid only) >= {TARGET_B_PIDS:,} decisions/s",
                rate(b_pids),
                vs_target(b_pids, TARGET_B_PIDS),
            ],
            [
                f"(c) >= {TARGET_C:,} trace msg/s delivered, 2 schedulers",
                rate(c_rate),
                vs_target(c_rate, TARGET_C),
            ],
            [
                f"p99 < {TARGET_P99_MS:g} ms at {PACED_RATE:,} msg/s",
                ms(p99),
                vs_target(p99_ms, TARGET_P99_MS, below_is_good=True),
            ],
        ],
    )
    out["targets"] = {
        "b_msgs_per_s": TARGET_B,
        "b_pid_only_decisions_per_s": TARGET_B_PIDS,
        "c_delivered_per_s_2_schedulers": TARGET_C,
        "p99_ms_at_20k": TARGET_P99_MS,
    }
    return out


# =============================================================== main
def config(args) -> argparse.Namespace:
    q = args.quick
    return argparse.Namespace(
        quick=q,
        n=args.n,
        no_install=args.no_install,
        d_a=0.7 if q else 2.0,  # seconds per transport variant
        d_b=1.5 if q else 5.0,  # target seconds of the main dispatcher run
        d_b2=1.0 if q else 3.0,  # pid-only dispatcher run
        port_every=10,  # every 10th message to the null port
        c_ns=[1, 2, 4, 8],
        d_c=1.0 if q else 4.0,  # target seconds of run() per N
        c_cal=4_000 if q else 8_000,  # messages of the calibration run
        c_max=2_000_000,
        d_lat=2.0 if q else 5.0,  # paced run
        tick_ms=5,
        d_d=1.0 if q else 4.0,
        d_port=0.5 if q else 2.0,
        d_codec=0.3 if q else 1.0,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="shorter runs (about a minute)")
    ap.add_argument("--json", metavar="FILE", help="also write every figure as JSON to FILE")
    ap.add_argument(
        "--only",
        metavar="LIST",
        default=",".join(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)}",
    )
    ap.add_argument(
        "-n",
        type=int,
        default=2,
        help="pushers in (a), feeders and scheduler inboxes in (b) (default 2)",
    )
    ap.add_argument(
        "--no-install",
        action="store_true",
        help="do not try 'pip install erlang-py' when it is missing",
    )
    args = ap.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in only if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s) {', '.join(bad)}; choose from {', '.join(SECTIONS)}")
    cfg = config(args)

    t_all = time.perf_counter()
    info = machine_info()
    heading("smp trace emulator benchmark" + (" (--quick)" if cfg.quick else ""))
    table(
        "machine",
        ["", ""],
        [
            ["CPU", info["cpu_model"]],
            ["cores", f"{info['logical_cores']} logical, {info['physical_cores']} physical"],
            ["RAM", f"{info['ram_bytes'] / 1024**3:.1f} GiB"],
            ["Python", f"{info['python']} ({info['implementation']})"],
            ["zmq", f"pyzmq {info['pyzmq']}, libzmq {info['libzmq']}"],
            ["platform", info["platform"]],
            [
                "load average",
                "{:.2f} {:.2f} {:.2f} (1/5/15 min) at start".format(*info["loadavg_at_start"]),
            ],
        ],
    )
    if info["loadavg_at_start"][0] > 0.5:
        say(
            f"   note: the machine is not idle (1-min load {info['loadavg_at_start'][0]:.2f} on "
            f"{info['logical_cores']} cores): other work competes with these figures"
        )
    results: dict = {
        "machine": info,
        "quick": cfg.quick,
        "sections": only,
        "config": {k: v for k, v in vars(cfg).items()},
        "errors": {},
    }
    runners = {
        "a": bench_a,
        "b": bench_b,
        "c": bench_c,
        "d": bench_d,
        "ports": bench_ports,
        "codec": bench_codec,
    }
    timings = {}
    for sec in SECTIONS:
        if sec not in only:
            continue
        t0 = time.perf_counter()
        try:
            results[sec] = runners[sec](cfg)
        except Exception as e:
            results["errors"][sec] = f"{type(e).__name__}: {e}"
            say(f"   section {sec} failed: {type(e).__name__}: {e}")
            traceback.print_exc()
        timings[sec] = time.perf_counter() - t0
    results["summary"] = summary(results)
    results["section_seconds"] = timings
    results["total_seconds"] = time.perf_counter() - t_all
    results["loadavg_at_end"] = os.getloadavg()
    say("load average at end: {:.2f} {:.2f} {:.2f}".format(*results["loadavg_at_end"]))
    say(
        f"total {results['total_seconds']:.1f} s ("
        + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
        + ")"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, default=repr)
        say(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
