"""Helpers for tools/bench.py: the OS-process entry points of the transport and
dispatcher benchmarks, and the emulated process bodies of the end-to-end
workload.  Imported by bench.py (so forked children and the emulator's
scheduler processes find them under the module name ``bench_workers``)."""

from __future__ import annotations

import pickle
import signal
import time

import zmq

from smp.core import messages as M
from smp.core.terms import Atom
from smp.wire.frames import Batch, Run

_PICKLE = pickle.HIGHEST_PROTOCOL
am_ping, am_send, am_trace = Atom("ping"), Atom("send"), Atom("trace")


def _quiet_child() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# =============================================================== (a) transport
def puller_main(endpoint: str, per_frame: int, npushers: int, ready, out) -> None:
    """PULL that only counts frames; an empty frame is a pusher's end mark."""
    _quiet_child()
    ctx = zmq.Context()
    s = ctx.socket(zmq.PULL)
    s.bind(endpoint)
    ready.set()
    frames = nbytes = ends = 0
    t0 = t1 = None
    recv = s.recv
    idle_since = None
    while ends < npushers:
        # never wait forever for a pusher's end mark: give up after 2 s of
        # silence once frames came (30 s before any came)
        if not s.poll(200):
            now = time.monotonic()
            idle_since = idle_since or now
            if now - idle_since > (2 if frames else 30):
                break
            continue
        idle_since = None
        for _ in range(1024):
            try:
                f = recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            n = len(f)
            if n == 0:
                ends += 1
                continue
            if t0 is None:
                t0 = time.monotonic()
            frames += 1
            nbytes += n
        t1 = time.monotonic()
    out.put(
        {
            "frames": frames,
            "messages": frames * per_frame,
            "bytes": nbytes,
            "t0": t0,
            "t1": t1,
            "ends": ends,
        }
    )
    s.close(linger=0)
    ctx.term()


def pusher_main(endpoint: str, frame: bytes, duration: float, go, out) -> None:
    """PUSH the same pre-encoded frame for ``duration`` seconds, then an end mark."""
    _quiet_child()
    ctx = zmq.Context()
    s = ctx.socket(zmq.PUSH)
    s.setsockopt(zmq.LINGER, 10000)
    s.connect(endpoint)
    go.wait()
    send = s.send
    mono = time.monotonic
    deadline = mono() + duration
    sent = 0
    while True:
        for _ in range(64):
            send(frame)
        sent += 64
        if mono() >= deadline:
            break
    send(b"")
    out.put(sent)
    s.close()
    ctx.term()


# =============================================================== (b) dispatcher


def make_sys_batch(
    sched_id: int,
    seq: int,
    senders: list,
    targets: list,
    port,
    port_every: int,
    batch: int,
    ts_kind: int,
    run_len: int = 32,
) -> tuple[bytes, int, int]:
    """One ingest frame in exactly SmpTransport's wire format: runs of
    ``run_len`` consecutive messages to one receiver (a traced process's time
    slice makes such runs), each run's bodies pickled together.

    Every ``port_every``-th run (0 = none) goes to ``port``, the rest to the
    ``targets`` (live tracer pids) in turn.  Returns (frame, to_pids, to_port)."""
    items = []
    to_pids = to_port = 0
    now = time.monotonic_ns()
    for r in range(max(1, batch // run_len)):
        k = seq * batch + r
        frm = senders[k % len(senders)]
        if port_every and k % port_every == port_every - 1:
            to = port
            to_port += run_len
        else:
            to = targets[k % len(targets)]
            to_pids += run_len
        bodies = [
            (am_trace, frm, am_send, (am_ping, frm, k * run_len + i), targets[0])
            for i in range(run_len)
        ]
        items.append(
            Run(M.SYS_MSG_TYPE_TRACE, frm, to, ts_kind, run_len, pickle.dumps(bodies, _PICKLE), now)
        )
    return Batch(sched_id, items).encode(), to_pids, to_port


def feeder_main(
    endpoint: str,
    sched_id: int,
    nframes: int,
    distinct: int,
    senders: list,
    targets: list,
    port,
    port_every: int,
    batch: int,
    ts_kind: int,
    ready,
    go,
    out,
    routing_id: bytes | None = None,
    release=None,
) -> None:
    """Push ``nframes`` pre-made ingest batches (cycling ``distinct`` of them),
    as scheduler ``sched_id`` known to the dispatcher by ``routing_id``.

    The connection stays open until ``release`` is set (the benchmark sets it
    once the dispatcher took every frame): frames the dispatcher's ROUTER has
    received but not yet read are dropped when their sender's connection
    closes, and LINGER only waits until they have left the sender.  A
    scheduler hands over the same way (fin, then fin-ack, then close)."""
    _quiet_child()
    frames = []
    to_pids = to_port = 0
    for j in range(distinct):
        f, a, b = make_sys_batch(
            sched_id, sched_id * 1000 + j, senders, targets, port, port_every, batch, ts_kind
        )
        frames.append((f, a, b))
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    if routing_id is not None:
        s.setsockopt(zmq.ROUTING_ID, routing_id)
    s.setsockopt(zmq.LINGER, 30000)
    s.connect(endpoint)
    plan = [frames[j % distinct] for j in range(nframes)]
    for _, a, b in plan:
        to_pids += a
        to_port += b
    out.put(("plan", sched_id, to_pids, to_port))
    ready.set()
    go.wait()
    t0 = time.monotonic()
    send = s.send
    for f, _, _ in plan:
        send(f)
    out.put(
        (
            "done",
            {
                "sched": sched_id,
                "to_pids": to_pids,
                "to_port": to_port,
                "frames": nframes,
                "bytes": sum(len(f) for f, _, _ in plan),
                "t_send": time.monotonic() - t0,
            },
        )
    )
    if release is not None:
        release.wait(120)
    s.close()
    ctx.term()


def consumer_main(inbox_template: str, nsched: int, ready, stop, count, last_t, per_inbox) -> None:
    """Bind every scheduler inbox and count the deliveries the dispatcher sends."""
    _quiet_child()
    ctx = zmq.Context()
    socks = []
    poller = zmq.Poller()
    for k in range(1, nsched + 1):
        s = ctx.socket(zmq.ROUTER)
        s.bind(inbox_template.format(k))
        poller.register(s, zmq.POLLIN)
        socks.append((k, s))
    ready.set()
    loads = pickle.loads
    total = 0
    mine = [0] * (nsched + 1)
    while not stop.is_set():
        ev = dict(poller.poll(50))
        if not ev:
            continue
        got = 0
        for k, s in socks:
            if s not in ev:
                continue
            for _ in range(256):
                try:
                    raw = s.recv_multipart(zmq.NOBLOCK)[-1]
                except zmq.Again:
                    break
                obj = loads(raw[1:])
                if obj[0] == "d":
                    n = sum(x[2] for x in obj[1])
                    got += n
                    mine[k] += n
        if got:
            total += got
            now = time.monotonic()
            with count.get_lock():
                count.value = total
                last_t.value = now
            for k in range(1, nsched + 1):
                per_inbox[k] = mine[k]
    for _, s in socks:
        s.close(linger=0)
    ctx.term()


# =============================================================== (c)/(d) emulated bodies
async def sink(proc):
    while True:
        await proc.receive()


async def tracer_loop(proc):
    """A tracer that just takes what it is sent (keeps nothing)."""
    while True:
        await proc.receive()


async def sender(proc, to, n):
    msg = (am_ping, proc.pid, 12345)
    send = proc.send
    for _ in range(n):
        await send(to, msg)


async def paced_sender(proc, to, rate, total, tick_ms):
    """Send ``total`` messages at ``rate`` per second, sleeping ``tick_ms``
    between bursts (a token bucket on the monotonic clock)."""
    msg = (am_ping, proc.pid, 12345)
    start = time.monotonic()
    sent = 0
    while sent < total:
        due = min(total, int((time.monotonic() - start) * rate) + 1)
        while sent < due:
            await proc.send(to, msg)
            sent += 1
        if sent < total:
            await proc.sleep(tick_ms)
