"""Ports as tracers (DESIGN.md section 5), in both modes unless a behaviour is
one mode's own: a port as the system seq tracer and as the system profiler,
heavy writes of a real file trace port and the nonsmp fake schedule pair
(``send_to_port`` / ``do_send_schedfix_to_port``), the ip trace port's queue
and drop frame (``trace_ip_drv``), the ``exclusive`` profile option around a
slow port call, and a real node reading what the emulator's ports wrote.

Heavy writes are predicted with an oracle written from OTP's
``trace_file_drv.c``: ``trace_file_output`` calls ``my_write`` twice (the
5-byte header, then the payload) and the write is heavy when either call
wrote the buffer to the file, or when a wrap file rolled over.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from erlnode import COLLECT, WAIT, estr, run_erl
from helpers import assert_increasing, check_counts, mfa

from smp.core.terms import A
from smp.ports.reader import read_trace
from smp.ports.traceport import FileTracePort
from smp.wire.etf import decode, encode

pytestmark = pytest.mark.timeout(90)

SEND, RECV, TSF = 1, 2, 8
ST = A.seq_trace


# ---------------------------------------------------------------- helpers
def assert_ts(ts) -> None:
    assert type(ts) is tuple and len(ts) == 3 and all(type(x) is int for x in ts), ts


def assert_nondecreasing(stamps: list) -> None:
    for ts in stamps:
        assert_ts(ts)
    assert all(a <= b for a, b in zip(stamps, stamps[1:], strict=False)), stamps


class OtpFileDrv:
    """What ``trace_file_drv`` does with the frames it is given: the heavy
    flag of each ``trace_file_output`` call (a model of its buffer only)."""

    def __init__(self, buffer_size: int, wrap_size: int | None = None):
        self.siz = buffer_size
        self.pos = 0
        self.wrap_size = wrap_size
        self.len = 0

    def _my_write(self, siz: int) -> int:
        if self.siz - self.pos >= siz:
            self.pos += siz
            return 0
        wrote = self.siz - self.pos
        self.pos = 0  # the full buffer went to the file
        if siz - wrote >= self.siz:
            return 1  # the rest written directly
        self.pos = siz - wrote
        return 1

    def output(self, payload_len: int) -> bool:
        heavy = bool(self._my_write(5))
        heavy = bool(self._my_write(payload_len)) or heavy
        if self.wrap_size is not None:
            self.len += 5 + payload_len
            if self.len >= self.wrap_size:
                self.pos = 0  # wrap_file: my_flush, new file
                self.len = 0
                heavy = True
        return heavy


def fake_pairs_by_oracle(terms: list, pid, drv: OtpFileDrv) -> int:
    """Walk the terms a nonsmp file port got, in order, feeding their sizes to
    the driver model.  After a heavy write of a message that may cause a fake
    schedule (every message about ``pid`` here but an ``out``), the next two
    terms must be ``{trace_ts, Pid, out, 0, Ts}`` with the timestamp of the
    message written, and ``{trace_ts, Pid, in, 0, Ts2}``; elsewhere there is
    no ``out``/``in`` with 0 as the MFA.  Returns the number of pairs."""
    pairs = 0
    i = 0
    while i < len(terms):
        t = terms[i]
        heavy = drv.output(len(encode(t)))
        assert t[:2] == (A.trace_ts, pid), t
        if t[2] in (A.out, A["in"]):
            assert t[3] != 0, f"fake schedule message {t} where none was due (term {i})"
        if heavy and t[2] is not A.out:
            out_msg, in_msg = terms[i + 1], terms[i + 2]
            assert out_msg == (A.trace_ts, pid, A.out, 0, t[-1]), (i, t, out_msg)
            assert in_msg[:4] == (A.trace_ts, pid, A["in"], 0), (i, in_msg)
            assert_ts(in_msg[4])
            assert in_msg[4] >= out_msg[4]
            drv.output(len(encode(out_msg)))  # the pair is written too, never faked
            drv.output(len(encode(in_msg)))
            pairs += 1
            i += 3
        else:
            i += 1
    return pairs


# ---------------------------------------------------------------- bodies
async def sink(proc):
    while True:
        await proc.receive()


async def pinger(proc, peer, n, start=0):
    for i in range(start, start + n):
        await proc.send(peer, (A.ping, i))


async def seq_sender(proc, to, timestamp):
    await proc.seq_trace(A.label, 7)
    await proc.seq_trace(A.send, True)
    await proc.seq_trace(A["receive"], True)
    if timestamp:
        await proc.seq_trace(A.timestamp, True)
    await proc.send(to, A.one)


async def waits_for_one(proc):
    await proc.receive()


async def slow_port_user(proc):
    port = await proc.open_port("slow", cost_ms=20)
    await proc.port_command(port, b"x")
    await proc.receive()


def _read_port(vm, port, kind, path):
    if kind == "memory":
        return vm.trace_port_terms(port)
    vm.close_trace_port(port)
    return list(read_trace(path))


# ================================================================ 1. seq tracer port
@pytest.mark.parametrize("timestamp", [False, True], ids=["no_ts", "ts"])
@pytest.mark.parametrize("kind", ["memory", "file"])
def test_port_as_seq_tracer(vm, tmp_path, kind, timestamp):
    path = str(tmp_path / "seq.trc")
    port = vm.open_trace_port(kind, *([path] if kind == "file" else []))
    assert vm.set_system_seq_tracer(port) == A.false
    assert vm.get_system_seq_tracer() == port
    c = vm.spawn(sink, scheduler=1)
    a = vm.spawn(seq_sender, c, timestamp, scheduler=1)
    vm.run()
    terms = _read_port(vm, port, kind, path)
    expected = [
        (ST, 7, (A.send, (0, 1), a, c, A.one)),
        (ST, 7, (A["receive"], (0, 1), a, c, A.one)),
    ]
    if timestamp:
        assert [t[:3] for t in terms] == expected
        assert all(len(t) == 4 for t in terms)
        assert_nondecreasing([t[3] for t in terms])
    else:
        assert terms == expected
    s = check_counts(vm)
    assert s.made_by_type == {"SEQTRACE": 2}
    assert s.delivered == 2 and s.dropped == 0
    assert s.fake_schedule_pairs == 0


@pytest.mark.parametrize("timestamp", [False, True], ids=["no_ts", "ts"])
def test_seq_tracer_port_heavy_write_fake_schedule(vm, timestamp):
    """``seq_trace_send_to_port``: a heavy write gives the fake pair only in
    nonsmp, only with the token's timestamp flag, and only for a process
    traced with running and timestamp (the sender here, not the receiver)."""
    seq_port = vm.open_trace_port("memory", heavy_every=1)  # every write heavy
    other = vm.open_trace_port("memory")
    vm.set_system_seq_tracer(seq_port)
    c = vm.spawn(sink, scheduler=1)
    a = vm.spawn(seq_sender, c, timestamp, scheduler=1)
    assert vm.trace(a, True, ["running", "timestamp"], tracer=other) == 1
    vm.run()
    terms = vm.trace_port_terms(seq_port)
    send = (ST, 7, (A.send, (0, 1), a, c, A.one))
    recv = (ST, 7, (A["receive"], (0, 1), a, c, A.one))
    s = check_counts(vm)
    if not timestamp:
        assert terms == [send, recv]
        assert s.fake_schedule_pairs == 0
        return
    if vm.mode == "nonsmp":
        assert len(terms) == 4
        ts_send = terms[0][3]
        assert terms[0] == send + (ts_send,)
        assert terms[1] == (A.trace_ts, a, A.out, 0, ts_send)
        assert terms[2][:4] == (A.trace_ts, a, A["in"], 0) and terms[2][4] >= ts_send
        assert terms[3][:3] == recv and terms[3][3] >= terms[2][4]
        assert s.fake_schedule_pairs == 1
        assert s.delivered_by_type["TRACE"] == 2 + len(vm.trace_port_terms(other))
    else:
        assert [t[:3] for t in terms] == [send, recv]
        assert s.fake_schedule_pairs == 0
    # the running trace went to its own tracer, with no fake pair there
    assert all(t[3] != 0 for t in vm.trace_port_terms(other))


# ================================================================ 2. profiler port
@pytest.mark.parametrize("kind", ["memory", "file"])
def test_port_as_system_profiler(vm, tmp_path, kind):
    path = str(tmp_path / "prof.trc")
    port = vm.open_trace_port(kind, *([path] if kind == "file" else []))
    assert vm.system_profile(port, ["runnable_procs"]) == A.undefined
    assert vm.system_profile() == (port, [A.runnable_procs])
    vm.run()  # smp: every scheduler takes in the new profile state before the spawn
    w = vm.spawn(waits_for_one, scheduler=1)
    vm.run()
    p = vm.spawn(pinger, w, 1, scheduler=1)
    vm.run()
    terms = _read_port(vm, port, kind, path)
    fw, fp = mfa(waits_for_one), mfa(pinger, 2)  # arity: the args spawned with
    assert all(len(t) == 5 and t[0] is A.profile for t in terms)
    assert [t[:4] for t in terms if t[1] == w] == [
        (A.profile, w, A.active, fw),
        (A.profile, w, A.inactive, fw),  # spawned, waits
        (A.profile, w, A.active, fw),
        (A.profile, w, A.inactive, fw),
    ]  # message, exits
    assert [t[:4] for t in terms if t[1] == p] == [
        (A.profile, p, A.active, fp),
        (A.profile, p, A.inactive, fp),
    ]
    assert len(terms) == 6
    assert_increasing([t[4] for t in terms])
    s = check_counts(vm)
    assert s.made_by_type == {"SYSPROF": 6}
    assert s.delivered_by_type == {"SYSPROF": 6}
    assert s.dropped == 0 and s.queued == 0


def test_profiler_port_closed_resets_profiling(vm):
    """Closing the profiler port is ``erts_trace_check_exiting``: nonsmp clears
    the profile and its flags at once (``erts_system_profile_clear``); smp sets
    the profiler to NIL and the dispatcher clears the flags when a message
    finds no receiver (``sys_msg_disp_failure``), so later runs make nothing."""
    port = vm.open_trace_port("memory")
    vm.system_profile(port, ["runnable_procs"])
    vm.run()  # smp: every scheduler takes in the new profile state before the spawn
    vm.close_trace_port(port)
    assert vm.system_profile() == A.undefined
    vm.spawn(waits_for_one)
    vm.run()
    s = check_counts(vm)
    assert s.delivered == 0
    made = s.made
    if vm.mode == "nonsmp":
        assert made == 0 and s.suppressed == 0
    else:
        # made before the dispatcher cleared the flags, then dropped
        assert s.made_by_type["SYSPROF"] == made and made in (1, 2)
        assert s.dropped_by_reason == {"no_receiver": {"SYSPROF": made}}
    vm.spawn(waits_for_one)
    vm.run()
    s = check_counts(vm)
    assert s.made == made and s.delivered == 0
    assert vm.trace_port_terms(port) == []


# ================================================================ 3. heavy writes
N_PINGS = 30


def _heavy_run(vm, port):
    s_ = vm.spawn(sink, scheduler=1)
    p = vm.spawn(pinger, s_, N_PINGS, scheduler=1)
    assert vm.trace(p, True, ["send", "running", "timestamp"], tracer=port) == 1
    vm.run()
    return p, s_


def _check_real_messages(terms, p, s_):
    real = [t for t in terms if not (t[2] in (A.out, A["in"]) and t[3] == 0)]
    assert real[0][:4] == (A.trace_ts, p, A["in"], mfa(pinger, 2))
    assert [t[:5] for t in real[1:]] == [
        (A.trace_ts, p, A.send, (A.ping, i), s_) for i in range(N_PINGS)
    ]
    assert all(len(t) == 6 for t in real[1:])
    assert_nondecreasing([t[-1] for t in real])


def test_file_port_buffer_heavy_write_fake_schedule(vm, tmp_path):
    path = str(tmp_path / "heavy.trc")
    port = vm.open_trace_port("file", path, buffer_size=200)
    p, s_ = _heavy_run(vm, port)
    info = vm.trace_port_info(port)
    vm.close_trace_port(port)
    terms = list(read_trace(path))
    _check_real_messages(terms, p, s_)
    assert info["os_writes"] >= 5  # the buffer reached the disk many times
    s = check_counts(vm)
    assert info["messages"] == len(terms) == s.delivered_by_type["TRACE"]
    if vm.mode == "nonsmp":
        pairs = fake_pairs_by_oracle(terms, p, OtpFileDrv(200))
        assert pairs >= 3
        assert s.fake_schedule_pairs == pairs
        assert len(terms) == 1 + N_PINGS + 2 * pairs
    else:
        # smp: the dispatcher writes; a heavy write only clears the flag
        assert s.fake_schedule_pairs == 0
        assert len(terms) == 1 + N_PINGS


def test_wrap_file_rollover_heavy_write_fake_schedule(vm, tmp_path):
    base = str(tmp_path / "w")
    port = vm.open_trace_port("file", base, wrap=(".trc", 300, 60))
    p, s_ = _heavy_run(vm, port)
    info = vm.trace_port_info(port)
    vm.close_trace_port(port)
    terms = list(read_trace((base, "wrap", ".trc", 300, 60)))
    _check_real_messages(terms, p, s_)
    # the buffer (64 KiB) never fills: every heavy write is a roll-over
    assert info["os_writes"] == info["wraps"] and info["wraps"] >= 5  # before close
    s = check_counts(vm)
    if vm.mode == "nonsmp":
        pairs = fake_pairs_by_oracle(terms, p, OtpFileDrv(8192 * 8, wrap_size=300))
        assert pairs >= 3
        assert s.fake_schedule_pairs == pairs
    else:
        assert s.fake_schedule_pairs == 0
        assert len(terms) == 1 + N_PINGS
    # one file per roll-over plus the first; none deleted (count 60)
    files = sorted(f for f in os.listdir(tmp_path) if f.endswith(".trc"))
    assert len(files) == info["wraps"] + 1


def test_file_port_heavy_flag_follows_trace_file_drv_header_write():
    """Header and payload are two ``my_write`` calls in ``trace_file_output``."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        # frames of 62 bytes, then 66 with its header straddling the buffer end
        # (2 bytes free): the driver keeps a full buffer (64 bytes), so the
        # next small frame is a heavy write.
        sizes = [57, 61, 10, 10]
        drv = OtpFileDrv(64)
        expected = [drv.output(n) for n in sizes]
        assert expected == [False, True, True, False]
        with FileTracePort(os.path.join(d, "x"), buffer_size=64) as fp:
            got = [fp.write(bytes([131, 109]) + b"\0" * (n - 2)) for n in sizes]
        assert got == expected


# ================================================================ 4. ip port, drops
def test_ip_port_queue_and_drop_record(vm):
    qsize, n = 5, 12
    port = vm.open_trace_port("ip", 0, queue_size=qsize)
    s_ = vm.spawn(sink, scheduler=1)
    p = vm.spawn(pinger, s_, n, scheduler=1)
    vm.trace(p, True, ["send"], tracer=port)
    vm.run()
    info = vm.trace_port_info(port)
    # no client: qsize messages queued, then one drop frame counting the rest
    assert (info["messages"], info["dropped"], info["queued"], info["clients"]) == (
        n,
        n - qsize,
        qsize + 1,
        0,
    )
    reader = read_trace(("127.0.0.1", info["port"]), timeout=10)
    try:
        got = [next(reader) for _ in range(qsize + 1)]
        assert got == [(A.trace, p, A.send, (A.ping, i), s_) for i in range(qsize)] + [
            (A.drop, n - qsize)
        ]
        # connected now: later messages arrive whole, no more drops
        q = vm.spawn(pinger, s_, 3, 100, scheduler=1)
        vm.trace(q, True, ["send"], tracer=port)
        vm.run()
        assert [next(reader) for _ in range(3)] == [
            (A.trace, q, A.send, (A.ping, 100 + i), s_) for i in range(3)
        ]
    finally:
        reader.close()
    # "sent" counts a frame once send() returned, maybe after the reader had it.
    assert vm.flush_trace_port(port, 10)
    info = vm.trace_port_info(port)
    assert (info["messages"], info["sent"], info["dropped"], info["drop_frames_sent"]) == (
        n + 3,
        qsize + 3,
        n - qsize,
        1,
    )
    s = check_counts(vm)
    # written to the port is delivered; what the driver dropped is its own count
    assert s.delivered_by_type == {"TRACE": n + 3}
    vm.close_trace_port(port)


# ================================================================ 6. exclusive
@pytest.mark.parametrize("exclusive", [True, False], ids=["exclusive", "plain"])
def test_exclusive_profile_around_slow_port_call(vm, exclusive):
    port = vm.open_trace_port("memory")
    opts = ["runnable_procs"] + (["exclusive"] if exclusive else [])
    vm.system_profile(port, opts)
    vm.run()  # smp: every scheduler takes in the new profile state before the spawn
    q = vm.spawn(slow_port_user)
    vm.run()
    terms = vm.trace_port_terms(port)
    f = mfa(slow_port_user)
    states = [A.active, A.inactive, A.active, A.inactive] if exclusive else [A.active, A.inactive]
    # spawned: active; port call: inactive then active again; waits: inactive
    assert [t[:4] for t in terms] == [(A.profile, q, st, f) for st in states]
    assert all(len(t) == 5 for t in terms)
    assert_increasing([t[4] for t in terms])
    s = check_counts(vm)
    assert s.made_by_type == {"SYSPROF": len(states)}
    assert s.delivered == len(states)


# ================================================================ 5. interop
def _interop():
    return COLLECT, WAIT, estr, run_erl


@pytest.mark.interop
@pytest.mark.skipif(shutil.which("erl") is None, reason="no Erlang node: `erl` not on PATH")
def test_real_dbg_trace_client_reads_emulator_ip_port_with_drops(vm, tmp_path):
    COLLECT, WAIT, estr, _ = _interop()
    out = tmp_path / "out.bin"
    qsize, n = 4, 10
    port = vm.open_trace_port("ip", 0, queue_size=qsize)
    s_ = vm.spawn(sink, scheduler=1)
    p = vm.spawn(pinger, s_, n, scheduler=1)
    vm.trace(p, True, ["send"], tracer=port)
    vm.run()
    ipno = vm.trace_port_info(port)["port"]
    code = (
        "OUT = "
        + estr(out)
        + ","
        + COLLECT
        + f'dbg:trace_client(ip, {{"127.0.0.1", {ipno}}}, {{H, []}}),'
        + WAIT
    )
    proc = subprocess.Popen(
        ["erl", "-noshell", "-noinput", "-eval", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert vm.flush_trace_port(port, 60) is True, "the node did not read the queue"
        q = vm.spawn(pinger, s_, 2, 50, scheduler=1)
        vm.trace(q, True, ["send"], tracer=port)
        vm.run()
        assert vm.flush_trace_port(port, 30) is True
        vm.close_trace_port(port)  # the node's handler gets end_of_trace
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    expected = (
        [(A.trace, p, A.send, (A.ping, i), s_) for i in range(qsize)]
        + [(A.drop, n - qsize)]
        + [(A.trace, q, A.send, (A.ping, 50 + i), s_) for i in range(2)]
    )
    assert decode(out.read_bytes()) == expected


@pytest.mark.interop
@pytest.mark.skipif(shutil.which("erl") is None, reason="no Erlang node: `erl` not on PATH")
def test_real_dbg_trace_client_reads_emulator_wrap_log(vm, tmp_path):
    COLLECT, WAIT, estr, run_erl = _interop()
    base, out = str(tmp_path / "w"), tmp_path / "out.bin"
    port = vm.open_trace_port("file", base, wrap=(".trc", 150, 8))
    p, s_ = _heavy_run(vm, port)
    info = vm.trace_port_info(port)
    vm.close_trace_port(port)
    assert info["wraps"] > 8  # the oldest files were deleted
    ours = list(read_trace((base, "wrap", ".trc")))
    code = (
        "OUT = "
        + estr(out)
        + ","
        + COLLECT
        + "dbg:trace_client(file, {"
        + estr(base)
        + ', wrap, ".trc"}, {H, []}),'
        + WAIT
    )
    run_erl(code)
    theirs = decode(out.read_bytes())
    assert theirs == ours
    # what is left is the tail of the run: consecutive sends ending in the last
    sends = [t[3][1] for t in theirs if t[2] is A.send]
    assert sends == list(range(N_PINGS - len(sends), N_PINGS)) and len(sends) >= 5
    assert all(t[:2] == (A.trace_ts, p) for t in theirs)
    fakes = [t for t in theirs if t[2] in (A.out, A["in"]) and t[3] == 0]
    if vm.mode == "nonsmp":
        assert fakes, "a roll-over must have given fake schedule pairs"
    else:
        assert fakes == []
