"""Reading traces as Erlang people do: the files of several nodes merged by
timestamp as ttb:format merges them, each line marked with its file, and a
growing file followed as dbg:trace_client(follow_file, F) follows it."""

from __future__ import annotations

import json
import os
import queue
import signal
import struct
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

import smp
from smp.app.cli import cli
from smp.core.terms import A, Pid
from smp.ports.dbgfmt import format_dbg
from smp.ports.reader import merge_key, merge_traces, read_trace
from smp.ports.traceport import FileTracePort
from smp.wire.etf import encode

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write(path, terms):
    with FileTracePort(path) as p:
        for t in terms:
            p.write(encode(t))


def ts(us):
    return (1700, 0, us)


def send(pid, msg, at=None):
    """A send trace message of ``pid``, with a timestamp when ``at`` is given."""
    if at is None:
        return (A.trace, Pid(pid), A.send, msg, Pid(99))
    return (A.trace_ts, Pid(pid), A.send, msg, Pid(99), ts(at))


# ---------------------------------------------------------------- the merge itself


def test_merge_key_is_ttbs_timestamp():
    assert merge_key(send(1, A.x, 5)) == merge_key(send(2, A.y, 5))
    assert merge_key(send(1, A.x)) < merge_key(send(1, A.x, 0))  # 0 < any tuple
    seq_ts = (A.seq_trace, 0, (A.send, (0, 1), Pid(1), Pid(2), A.m), ts(3))
    assert merge_key(seq_ts) == merge_key(send(1, A.x, 3))
    assert merge_key((A.seq_trace, 0, (A.send, (0, 1), Pid(1), Pid(2), A.m))) == merge_key(
        (A.drop, 7)
    )


def test_merge_takes_the_smallest_head_and_keeps_each_files_order(tmp_path):
    a, b = tmp_path / "a.trc", tmp_path / "b.trc"
    write(a, [send(1, A.a1, 5), send(1, A.a2), send(1, A.a3, 7)])
    write(b, [send(2, A.b1, 5), send(2, A.b2, 6), (A.drop, 3)])
    got = [(i, t[3] if t[0] is not A.drop else t) for i, t in merge_traces([a, b])]
    # a1 before b1 (same time: file order); a2 has no timestamp and is at the
    # head of a.trc: out at once; the drop record (no timestamp) likewise
    assert got == [(0, A.a1), (0, A.a2), (1, A.b1), (1, A.b2), (1, (A.drop, 3)), (0, A.a3)]


def test_merge_tie_goes_to_the_file_read_last_as_in_ttb(tmp_path):
    # ttb puts the file it just read from at the head of its list before the
    # stable keysort: b2 (time 5, read after b1) comes before a1 (time 5)
    a, b = tmp_path / "a.trc", tmp_path / "b.trc"
    write(a, [send(1, A.a1, 5), send(1, A.a2, 9)])
    write(b, [send(2, A.b1, 3), send(2, A.b2, 5)])
    assert [t[3] for _, t in merge_traces([a, b])] == [A.b1, A.b2, A.a1, A.a2]


def test_smp_emu_read_merges_and_marks_every_line(tmp_path):
    a, b = tmp_path / "a.trc", tmp_path / "b.trc"
    long_msg = [list(range(30))] * 3  # dbg breaks it over lines
    write(a, [send(1, long_msg, 2), send(1, A.late, 9)])
    write(b, [send(2, A.first, 1), send(2, A.mid, 4)])
    r = CliRunner().invoke(cli, ["read", str(a), str(b)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert len(lines) > 4
    expected = [
        (str(b), send(2, A.first, 1)),
        (str(a), send(1, long_msg, 2)),
        (str(b), send(2, A.mid, 4)),
        (str(a), send(1, A.late, 9)),
    ]
    assert r.stdout == "".join(
        "".join(f"{src}: {x}\n" for x in format_dbg(t).splitlines()) for src, t in expected
    )
    r = CliRunner().invoke(cli, ["read", str(a), str(b), "--no-mark"])
    assert r.stdout == "".join(format_dbg(t) for _, t in expected)
    r = CliRunner().invoke(cli, ["read", str(a), str(b), "--format", "json"])
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["source"] for x in recs] == [str(b), str(a), str(b), str(a)]
    r = CliRunner().invoke(cli, ["read", str(a), str(tmp_path / "missing.trc")])
    assert r.exit_code == 2 and "missing.trc: no such file" in r.stderr


def test_files_and_a_wrap_log_written_by_the_emulator_merge_by_time(tmp_path):
    """Three tracer ports of one emulated run (two files and a wrap log),
    each getting one process's sends with timestamps: read together they come
    out in timestamp order, each line marked with the file it came from."""
    from smp.app.workload_bodies import pp_ping, pp_pong

    fa, fb, fw = str(tmp_path / "a.trc"), str(tmp_path / "b.trc"), str(tmp_path / "w")
    with smp.Emulator(mode="smp", schedulers=2) as vm:
        ports = [
            vm.open_trace_port("file", fa),
            vm.open_trace_port("file", fb),
            vm.open_trace_port("file", fw, wrap=(".wrp", 400, 4)),
        ]
        pings = []
        for k, port in enumerate(ports):
            pong = vm.spawn(pp_pong, False, scheduler=1 + k % 2)
            ping = vm.spawn(pp_ping, pong, 12, 0.0, 1, False, scheduler=2 - k % 2)
            vm.trace(ping, True, ["send", "timestamp"], tracer=port)
            pings.append(ping)
        vm.run(timeout=30)
        for port in ports:
            vm.close_trace_port(port)
    sources = [fa, fb, f"{fw}*.wrp"]
    r = CliRunner().invoke(cli, ["read", *sources, "--wrap-count", "4", "--format", "json"])
    assert r.exit_code == 0, r.output
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    owner = {repr(p): src for p, src in zip(pings, sources, strict=True)}
    assert {x["source"] for x in recs} == set(sources)
    assert all(x["source"] == owner[x["term"]["tuple"][1]] for x in recs)
    stamps = [tuple(x["term"]["tuple"][-1]["tuple"]) for x in recs]
    assert stamps == sorted(stamps)
    # the wrap log kept its last files only: what it holds is all there
    kept = list(read_trace((fw, "wrap", ".wrp", 400, 4)))
    assert len([x for x in recs if x["source"] == sources[2]]) == len(kept) > 0
    assert len(recs) == len(kept) + len(list(read_trace(fa))) + len(list(read_trace(fb)))


# ---------------------------------------------------------------- --follow


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_follow_prints_what_is_appended_until_ctrl_c(tmp_path):
    path = tmp_path / "live.trc"
    first = [send(1, A.one, 1), send(1, A.two, 2)]
    write(path, first)
    p = subprocess.Popen(
        [sys.executable, "-m", "smp.app.cli", "read", "--follow", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(x) for x in iter(p.stdout.readline, b"")], daemon=True
    ).start()

    def expect(terms, within=30.0):
        deadline = time.monotonic() + within
        want = [format_dbg(t).encode("latin-1") for t in terms]
        for w in want:
            left = deadline - time.monotonic()
            assert left > 0, f"waited {within} s for {w!r}"
            assert lines.get(timeout=left) == w

    try:
        expect(first)
        # a frame written in two parts: nothing is printed from the half of it
        third = (
            b"\x00"
            + len(encode(send(1, A.three, 3))).to_bytes(4, "big")
            + encode(send(1, A.three, 3))
        )
        with open(path, "ab") as f:
            f.write(third[:7])
            f.flush()
            assert p.poll() is None
            f.write(third[7:])
            f.flush()
        expect([send(1, A.three, 3)])
        with open(path, "ab") as f:
            for t in (send(2, A.four, 4), (A.drop, 2)):
                b = encode(t)
                f.write(b"\x00" + len(b).to_bytes(4, "big") + b)
        expect([send(2, A.four, 4), (A.drop, 2)])
        assert lines.empty() and p.poll() is None  # still following
        p.send_signal(signal.SIGINT)
        p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()
    assert p.returncode == 130


def test_follow_takes_one_file():
    r = CliRunner().invoke(cli, ["read", "--follow", "localhost:4711"])
    assert r.exit_code == 2 and "--follow reads one trace file" in r.stderr


# ---------------------------------------------------------------- against ttb:format on a real node

from erlnode import estr, needs_erl, run_node  # noqa: E402


def ttb_source():
    """observer's ttb.erl next to the node (Debian's erlang-src ships it even
    where observer itself, which needs wx, is not installed), or None."""
    import glob
    import shutil

    root = os.path.dirname(os.path.dirname(os.path.realpath(shutil.which("erl"))))
    found = sorted(glob.glob(os.path.join(root, "lib", "observer-*", "src", "ttb.erl")))
    return found[-1] if found else None


WRITER = r"""
PA = (dbg:trace_port(file, FA))(),
PB = (dbg:trace_port(file, FB))(),
Self = self(),
Sink = spawn(fun() -> (fun S(36) -> Self ! all_in, S(37);
                          S(N) -> receive _ -> S(N + 1) end end)(0) end),
Mk = fun(Tag) -> spawn(fun() -> receive go -> ok end,
        [begin Sink ! {Tag, I, lists:seq(1, I * 3)}, receive after 1 -> ok end end
         || I <- lists:seq(1, 12)],
        receive done -> ok end end) end,
P1 = Mk(a), P2 = Mk(b), P3 = Mk(c),
1 = erlang:trace(P1, true, [send, timestamp, {tracer, PA}]),
1 = erlang:trace(P2, true, [send, timestamp, {tracer, PB}]),
1 = erlang:trace(P3, true, [send, {tracer, PB}]),
[P ! go || P <- [P3, P1, P2]],
receive all_in -> ok end,
Ref = erlang:trace_delivered(all),
receive {trace_delivered, all, Ref} -> ok end,
[erlang:trace(P, false, [all]) || P <- [P1, P2, P3]],
erlang:port_close(PA), erlang:port_close(PB),
halt().
"""

FORMAT = r"""
code:add_patha(EBIN),
ok = ttb:format(FILES),
Nums = [begin <<131, A/binary>> = term_to_binary(N),
              pid_to_list(binary_to_term(<<131, 88, A/binary, 0:96>>)) end || N <- NODES],
io:format("~s~n", [lists:join(" ", Nums)]),
halt().
"""


def ttb_format(tmp_path, files, nodes):
    """What ttb:format(Files) prints on a fresh node (its 'no meta data file'
    warnings left out), and that node's number for each of ``nodes``."""
    ebin = tmp_path / "ebin"
    ebin.mkdir(exist_ok=True)
    src = ttb_source()
    if src is not None and not (ebin / "ttb.beam").exists():
        subprocess.run(["erlc", "-o", str(ebin), src], check=True, capture_output=True, timeout=120)
    elif src is None and b"non_existing" in run_node('io:format("~p", [code:which(ttb)]), halt().'):
        pytest.skip("no ttb on this node and no ttb.erl to compile (observer, erlang-src)")
    node_code = (
        "["
        + ",".join(
            "binary_to_atom(<<" + ",".join(map(str, n.name.encode())) + ">>, utf8)" for n in nodes
        )
        + "]"
    )
    out = run_node(
        FORMAT.replace("EBIN", estr(ebin))
        .replace("NODES", node_code)
        .replace("FILES", "[" + ",".join(estr(f) for f in files) + "]")
    )
    lines = out.split(b"\n")
    nums = lines[-2].decode().split(" ") if nodes else []
    text = b"".join(x + b"\n" for x in lines[:-2] if not x.startswith(b"Warning: no meta data"))
    return text, {n: int(s.strip("<>").split(".")[0]) for n, s in zip(nodes, nums, strict=True)}


def smp_emu_read(files, numbers, *extra):
    args = [sys.executable, "-m", "smp.app.cli", "read", *map(str, files), *extra]
    for node, n in numbers.items():
        args += ["--node-number", f"{node.name}={n}"]
    r = subprocess.run(args, capture_output=True, timeout=120, env=_env())
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout


@needs_erl
def test_two_files_of_a_real_node_merge_as_ttb_format_merges_them(tmp_path):
    fa, fb = tmp_path / "a.trc", tmp_path / "b.trc"
    name = f"smpm{os.getpid()}"
    run_node(f"FA = {estr(fa)}, FB = {estr(fb)}," + WRITER, args=("-sname", name))
    node = next(t[1].node for t in read_trace(fa))
    assert node.name.startswith(name + "@")
    theirs, numbers = ttb_format(tmp_path, [fa, fb], [node])
    assert theirs.count(b"\n") >= 36
    assert smp_emu_read([fa, fb], numbers, "--no-mark") == theirs
    # marked: the same lines, each after the file it came from
    marked = smp_emu_read([fa, fb], numbers).split(b"\n")
    assert b"\n".join(x.split(b": ", 1)[1] for x in marked[:-1]) + b"\n" == theirs
    recs = [
        json.loads(x) for x in smp_emu_read([fa, fb], numbers, "--format", "json").split(b"\n") if x
    ]
    tags = {str(fa): set(), str(fb): set()}
    for x in recs:
        tags[x["source"]].add(x["term"]["tuple"][3]["tuple"][0])
    assert tags == {str(fa): {"a"}, str(fb): {"b", "c"}}


@needs_erl
def test_ties_and_untimestamped_messages_merge_as_ttb_format_merges_them(tmp_path):
    """Files with equal timestamps across files, messages without one, drop
    and seq_trace records: the same order as ttb:format."""
    fa, fb, fc = tmp_path / "a.trc", tmp_path / "b.trc", tmp_path / "c.trc"
    seq = (A.seq_trace, 0, (A.send, (0, 1), Pid(3), Pid(4), A.token), ts(5))
    write(
        fa, [send(1, A.a1, 5), send(1, A.a2), send(1, A.a3, 7), send(1, A.a4, 7), send(1, A.a5, 9)]
    )
    write(fb, [send(2, A.b1, 3), send(2, A.b2, 5), (A.drop, 3), send(2, A.b3, 7), seq])
    write(fc, [send(3, A.c1), send(3, A.c2, 5), send(3, A.c3, 7), send(3, A.c4, 10)])
    theirs, _ = ttb_format(tmp_path, [fa, fb, fc], [])
    assert theirs.count(b"\n") == 14
    assert smp_emu_read([fa, fb, fc], {}, "--no-mark") == theirs


# ---------------------------------------------------------------- bounded reading


def _chunked(data: bytes, size: int):
    """A read_chunk over ``data`` in ``size``-byte chunks, as a socket gives them."""
    view = memoryview(data)
    pos = [0]

    def read_chunk():
        p = pos[0]
        pos[0] = p + size
        return bytes(view[p : p + size])

    return read_chunk


def test_reader_buffering_is_linear_in_the_frame_size():
    # a frame read in small chunks: re-copying the buffer on every chunk
    # (buf = buf[pos:] + chunk) costs frame_size**2 / chunk; appending to
    # one buffer costs frame_size
    from smp.ports.reader import _frames

    def seconds(n: int) -> float:
        body = b"\x83m" + struct.pack(">I", n) + bytes(n)
        data = b"\0" + struct.pack(">I", len(body)) + body
        t0 = time.perf_counter()
        (term,) = list(_frames(_chunked(data, 16 * 1024), "mem"))
        took = time.perf_counter() - t0
        assert len(term) == n
        return took

    small = min(seconds(2 << 20) for _ in range(3))
    big = min(seconds(32 << 20) for _ in range(2))
    # 16 times the bytes: linear is ~16x; quadratic would be ~256x
    assert big < 64 * small + 0.5, (small, big)
    assert big < 10.0, big


def test_frames_over_max_frame_are_refused_at_the_header():
    from smp.ports.reader import read_frames
    from smp.wire.limits import Limits

    body = encode((A.trace, Pid(1), A.foo, bytes(5000)))
    data = b"\1" + struct.pack(">I", 7) + b"\0" + struct.pack(">I", len(body)) + body
    assert len(list(read_frames(data))) == 2
    with pytest.raises(smp.DecodeError, match="max_frame") as e:
        list(read_frames(data, "x", Limits(max_frame=1000)))
    assert e.value.offset == 5  # the header of the second frame


def test_merge_key_compares_as_term_order_at_any_depth():
    def deep(n, leaf):
        t = leaf
        for _ in range(n):
            t = [t, 1]
        return t

    a = (A.trace_ts, Pid(1), A.foo, deep(5000, 1))
    b = (A.trace_ts, Pid(1), A.foo, deep(5000, 2))
    assert merge_key(a) < merge_key(b)
    assert merge_key((A.trace_ts, Pid(1), A.foo, (1, 2, 3))) < merge_key(a)  # tuple < list


@pytest.mark.parametrize("source", [("localhost", 0), ("localhost", 70000), "localhost:99999"])
def test_an_ip_source_outside_the_tcp_ports_is_refused_before_connecting(source):
    with pytest.raises(ValueError, match="is not a TCP port"):
        read_trace(source)
