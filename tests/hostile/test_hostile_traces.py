"""A stranger's trace file or ip trace port: bounded, one line, never a crash.

Each adversarial input (a term nested 20,000 deep, compressed bombs, a frame
announcing 4 GB, a 300 MB frame, big integers, a 900-deep valid term) is read
by ``smp-emu read`` in a child under a memory cap and a time limit: it either
prints what a node prints, or says on one line what limit of
:mod:`smp.wire.limits` it is over, with the file (or host:port) and the byte
offset, and exits 2.  A 100,000-deep term sent to a file trace port is refused
by the encoder without taking its scheduler down.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from erlnode import needs_erl, run_erl

from hostile.capped import assert_one_line, run_capped, run_cli
from smp.core.pretty import pformat
from smp.core.terms import A, Pid
from smp.ports.reader import read_trace
from smp.wire import limits
from smp.wire.etf import encode

pytestmark = pytest.mark.timeout(300)

MiB = 1 << 20
#: an RSS that only an unbounded reader reaches on these inputs (KiB)
RSS_BOUND_KIB = 300 * 1024


def frame(data: bytes) -> bytes:
    return b"\0" + struct.pack(">I", len(data)) + data


def deep_tuple_etf(depth: int, leaf: bytes = b"a\x01") -> bytes:
    """{{...{1}...}}, ``depth`` tuples deep, written by hand (no encoder)."""
    return b"\x83" + b"h\x01" * depth + leaf


def compressed_zeros(nbytes: int) -> bytes:
    """term_to_binary(<<0:nbytes/unit:8>>, [compressed]): its header tells
    the truth about the inflated size (the binary's 5-byte header and data)."""
    head = b"m" + struct.pack(">I", nbytes)
    c = zlib.compressobj(9)
    out = [c.compress(head)]
    zeros = bytes(4 * MiB)
    left = nbytes
    while left:
        k = min(left, len(zeros))
        out.append(c.compress(zeros[:k]))
        left -= k
    out.append(c.flush())
    return b"\x83\x50" + struct.pack(">I", len(head) + nbytes) + b"".join(out)


def assert_bounded(r, seconds: float = 60.0) -> None:
    assert r.max_rss_kib < RSS_BOUND_KIB, r.max_rss_kib
    assert r.seconds < seconds, r.seconds


class OneShotServer:
    """A TCP server on 127.0.0.1 that sends ``payload`` to the first client,
    then (``stream_zeros``) zeros until the client goes or ``seconds`` pass."""

    def __init__(self, payload: bytes, stream_zeros: bool = False, seconds: float = 30.0):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.payload, self.stream_zeros, self.seconds = payload, stream_zeros, seconds
        self.sent = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(self.seconds)
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            try:
                conn.sendall(self.payload)
                self.sent += len(self.payload)
                deadline = time.monotonic() + self.seconds
                zeros = bytes(MiB)
                while self.stream_zeros and time.monotonic() < deadline:
                    conn.sendall(zeros)
                    self.sent += len(zeros)
            except OSError:
                pass  # the client closed: what a refusing reader does

    def close(self) -> None:
        self.thread.join(self.seconds + 5)
        self.sock.close()


# ---------------------------------------------------------------- too deep


def test_a_term_nested_20000_deep_in_a_file_is_one_line_exit_2(tmp_path):
    path = tmp_path / "deep.trc"
    path.write_bytes(frame(deep_tuple_etf(20_000)))
    r = run_cli("read", str(path))
    line = assert_one_line(r, 2, contains=str(path))
    assert "max_depth" in line and "byte offset" in line, line
    assert_bounded(r)
    for fmt in ("json", "terms"):
        assert_one_line(run_cli("read", "--format", fmt, str(path)), 2, contains="max_depth")
    # the option raises the limit: then it is read, and printed cut short
    r = run_cli("read", "--format", "terms", "--max-depth", "30000", str(path))
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout.startswith("{" * 1000) and "..." in r.stdout


def test_a_term_nested_20000_deep_in_an_ip_frame_is_one_line_exit_2():
    server = OneShotServer(frame(deep_tuple_etf(20_000)))
    try:
        r = run_cli("read", "--timeout", "30", f"127.0.0.1:{server.port}")
    finally:
        server.close()
    assert_one_line(r, 2, contains=f"127.0.0.1:{server.port}")
    assert "max_depth" in r.stderr
    assert_bounded(r)


# ---------------------------------------------------------------- memory


@pytest.fixture(scope="module")
def bomb_4gib(tmp_path_factory):
    """A compressed term that honestly inflates to 4 GiB (less one byte:
    the most a 32-bit size says): about 4 MB on disk."""
    path = tmp_path_factory.mktemp("bomb") / "bomb4g.trc"
    path.write_bytes(frame(compressed_zeros((1 << 32) - 1 - 5)))
    assert path.stat().st_size < 5 * MiB
    return path


def test_a_compressed_term_inflating_to_4_gib_is_refused_in_a_file(bomb_4gib):
    r = run_cli("read", str(bomb_4gib), cap=512 * MiB)
    line = assert_one_line(r, 2, contains=str(bomb_4gib))
    assert "max_inflate" in line and "4294967295" in line, line
    assert_bounded(r)


def test_a_64_mib_binary_compressed_into_65_kb_is_refused(tmp_path):
    blob = compressed_zeros(64 * MiB)
    assert len(blob) < 70_000
    path = tmp_path / "bin64.trc"
    path.write_bytes(frame(blob))
    r = run_cli("read", str(path), cap=512 * MiB)
    line = assert_one_line(r, 2, contains="max_inflate")
    assert "byte offset 7" in line, line  # the size word after 131, 80
    assert_bounded(r)
    # the same in an ip frame
    server = OneShotServer(frame(blob))
    try:
        r = run_cli("read", "--timeout", "30", f"127.0.0.1:{server.port}", cap=512 * MiB)
    finally:
        server.close()
    assert_one_line(r, 2, contains="max_inflate")
    assert_bounded(r)


def test_a_64_mib_binary_read_with_a_raised_limit_prints_cut_short(tmp_path):
    path = tmp_path / "bin64.trc"
    path.write_bytes(frame(compressed_zeros(64 * MiB)))
    r = run_cli(
        "read", "--format", "terms", "--max-inflate", "128M", "--max-print", "4000", str(path)
    )
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout.startswith("<<0,0,0,") and r.stdout.rstrip().endswith("...>>.")
    assert len(r.stdout) < 6000
    assert_bounded(r)


def test_a_frame_announcing_4_gb_streaming_zeros_is_refused_at_its_header():
    server = OneShotServer(b"\0" + struct.pack(">I", 0xFFFFFFFF), stream_zeros=True, seconds=20)
    try:
        r = run_cli("read", "--timeout", "30", f"127.0.0.1:{server.port}")
    finally:
        server.close()
    line = assert_one_line(r, 2, contains="max_frame")
    assert "byte offset 0" in line, line
    assert_bounded(r, seconds=15)
    assert server.sent < 1024 * MiB  # it stopped reading: it did not drain the stream


def test_a_300_mb_frame_is_refused_over_the_default_max_frame(tmp_path):
    path = tmp_path / "big.trc"
    size = 300_000_000
    with open(path, "wb") as f:
        f.write(b"\0" + struct.pack(">I", size) + b"\x83m" + struct.pack(">I", size - 6))
        f.truncate(5 + size)  # sparse: the zeros of the binary
    assert size > limits.MAX_FRAME
    r = run_cli("read", str(path))
    line = assert_one_line(r, 2, contains="max_frame")
    assert f"frame of {size} bytes" in line and "byte offset 0" in line, line
    assert_bounded(r, seconds=15)


# ---------------------------------------------------------------- valid terms print


def _trace_file(tmp_path, name: str, terms) -> str:
    path = tmp_path / name
    path.write_bytes(b"".join(frame(encode(t)) for t in terms))
    return str(path)


def _deep(depth: int, tag=None):
    t = A.x
    for _ in range(depth):
        t = (t,) if tag is None else (tag, t)
    return t


def test_a_valid_900_deep_term_prints_in_every_format(tmp_path):
    # 900 levels: recursion (a frame or more a level) would pass Python's
    # default limit of 1000
    assert sys.getrecursionlimit() <= 1000 or pytest.skip("recursion limit raised")
    deep, tagged = _deep(900), _deep(900, A.tag)
    msg = (A.trace, Pid(1, 0), A.send, tagged, Pid(2, 0))
    path = _trace_file(tmp_path, "deep900.trc", [deep, msg])
    r = run_cli("read", "--format", "terms", path)
    assert r.returncode == 0, r.stderr[-500:]
    lines = r.stdout.splitlines()
    assert lines[0] == "{" * 900 + "x" + "}" * 900 + "."
    r = run_cli("read", "--all", path)  # dbg text: ~p with its line breaks
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout.startswith("{" * 900 + "x")
    assert "(<0.1.0>) <0.2.0> ! {tag," in r.stdout
    r = run_cli("read", "--format", "json", path)
    assert r.returncode == 0, r.stderr[-500:]
    recs = r.stdout.splitlines()  # (json.loads itself recurses: strings compared)
    assert len(recs) == 2
    assert '"text": "{trace,<0.1.0>,send,{tag,{tag,' in recs[1]
    assert json.loads(recs[1][: recs[1].index(', "term"')] + "}")["kind"] == "trace"
    assert recs[0].startswith('{"kind": "trace", "tracer": "", "term": ' + '{"tuple": [' * 900)
    assert '"text": "' + "{" * 900 + "x" in recs[0]


def test_files_merged_by_deep_timestamps(tmp_path):
    # ttb:format's merge compares timestamps in term order: 900-deep ones too
    a = _trace_file(tmp_path, "a.trc", [(A.trace_ts, Pid(1, 0), A.foo, _deep(900, 2))])
    b = _trace_file(tmp_path, "b.trc", [(A.trace_ts, Pid(2, 0), A.foo, _deep(900, 1))])
    r = run_cli("read", "--format", "terms", a, b)
    assert r.returncode == 0, r.stderr[-500:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"{b}: {{trace_ts,<0.2.0>,foo,{{1,")
    assert lines[1].startswith(f"{a}: {{trace_ts,<0.1.0>,foo,{{2,")


def test_an_integer_of_5000_digits_prints_every_digit(tmp_path):
    big = 7 << 16800  # about 5000 decimal digits: over Python's str() limit
    path = _trace_file(tmp_path, "big.trc", [(A.trace, Pid(1, 0), A.send, -big, Pid(2, 0))])
    r = run_cli("read", "--format", "terms", path)
    assert r.returncode == 0, r.stderr[-500:]
    saved = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        digits = str(-big)
    finally:
        sys.set_int_max_str_digits(saved)
    assert len(digits) > 5000
    assert r.stdout == f"{{trace,<0.1.0>,send,{digits},<0.2.0>}}.\n"
    assert sys.get_int_max_str_digits() == saved  # and no global change here
    r = run_cli("read", path)
    assert r.returncode == 0 and digits[:100] in r.stdout.replace("\n", "")


@needs_erl
def test_deep_terms_and_big_integers_print_as_a_real_node_prints_them():
    code = (
        "T0 = lists:foldl(fun(_, A) -> {A} end, x, lists:seq(1, 900)),"
        "T1 = lists:foldl(fun(_, A) -> {tag, A} end, x, lists:seq(1, 900)),"
        "T2 = lists:foldl(fun(_, A) -> [A, 1] end, x, lists:seq(1, 900)),"
        "I = -(7 bsl 16800),"
        'io:put_chars(io_lib:format("~p~n=====~n~p~n=====~n~p~n=====~n~p~n", '
        "[T0, T1, T2, I])), halt()."
    )
    got = run_erl(code, timeout=120).split("\n=====\n")
    t2 = A.x
    for _ in range(900):
        t2 = [t2, 1]
    expected = [pformat(_deep(900)), pformat(_deep(900, A.tag)), pformat(t2)]
    assert got[:3] == expected
    saved = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        assert got[3].rstrip("\n") == pformat(-(7 << 16800)) == str(-(7 << 16800))
    finally:
        sys.set_int_max_str_digits(saved)


# ---------------------------------------------------------------- bad sources, bad options


def test_bad_sources_and_options_are_one_line_exit_2(tmp_path):
    good = _trace_file(tmp_path, "ok.trc", [(A.trace, Pid(1, 0), A["receive"], A.hi)])
    assert_one_line(run_cli("read", str(tmp_path)), 2, contains="is a directory")
    assert_one_line(run_cli("read", str(tmp_path / "nope.trc")), 2, contains="no such file")
    empty = tmp_path / "empty.trc"
    empty.write_bytes(b"")
    assert_one_line(run_cli("read", str(empty)), 2, contains="empty file")
    huge = "9" * 5000
    assert_one_line(run_cli("read", good, "--node-number", f"a@b={huge}"), 2, contains="2**32")
    line = assert_one_line(run_cli("read", good, "--node-number", "n" * 100_000 + "=1"), 2)
    assert "255 characters" in line and len(line) < 400, line
    assert_one_line(run_cli("read", good, "--max-frame", "lots"), 2, contains="--max-frame")
    assert_one_line(run_cli("read", good, "--max-print", "0"), 2, contains="--max-print")
    r = run_cli("read", good, "--max-frame", "1K", "--max-print", "1k")
    assert r.returncode == 0 and r.stdout == "(<0.1.0>) << hi\n", r


def test_limits_are_one_table_with_each_default_far_above_a_real_trace():
    d = limits.DEFAULT
    assert (d.max_depth, d.max_frame, d.max_inflate, d.max_print) == (
        limits.MAX_DEPTH,
        limits.MAX_FRAME,
        limits.MAX_INFLATE,
        limits.MAX_PRINT,
    )
    assert d.max_depth >= 1000 and d.max_frame >= 16 * MiB and d.max_print >= 64 * 1024
    with pytest.raises(ValueError, match="max_frame"):
        limits.Limits(max_frame=0)
    with pytest.raises(AttributeError):
        d.max_depth = 5  # frozen


# ---------------------------------------------------------------- the encoder in a scheduler


async def _sink(proc):
    while True:
        await proc.receive()


async def _deep_sender(proc, peer, depth):
    t = A.leaf
    for _ in range(depth):
        t = (t,)
    await proc.send(peer, t)  # its trace message cannot be encoded
    await proc.send(peer, A.after)  # and this one is written


def test_a_100000_deep_send_to_a_file_trace_port_does_not_kill_a_scheduler(vm, tmp_path):
    """The encoder refuses the term (max_depth) and the next message is
    written.  nonsmp makes the message and drops it as not_a_term (the
    dispatcher's rule for a body a port cannot encode); smp cannot carry it
    to the dispatcher at all, so it is never queued and counted unsendable."""
    path = tmp_path / "deep.trc"
    port = vm.open_trace_port("file", str(path))
    c = vm.spawn(_sink, scheduler=1)
    p = vm.spawn(_deep_sender, c, 100_000, scheduler=1)
    vm.trace(p, True, ["send"], tracer=port)
    vm.run(timeout=60)
    s = vm.statistics()  # the scheduler is alive and answers
    vm.close_trace_port(port)
    assert s.made == s.delivered + s.dropped + s.queued, s
    if vm.smp:
        assert (s.made, s.unsendable, s.dropped) == (1, 1, 0), s
    else:
        assert (s.made, s.dropped) == (2, 1), s
    terms = list(read_trace(path))
    assert terms == [(A.trace, p, A.send, A.after, c)], terms


def test_the_encoder_refuses_past_max_depth_with_a_value_error():
    t = _deep(limits.MAX_DEPTH)
    assert encode(t)[: 1 + 2 * 3] == b"\x83" + b"h\x01" * 3
    with pytest.raises(ValueError, match="max_depth"):
        encode((t,))
    with pytest.raises(ValueError, match="max_depth"):
        encode(_deep(100_000))


def test_reading_needs_no_more_than_the_frame_size_in_memory(tmp_path):
    # a 48 MiB binary frame: the reader keeps about one copy of it at a time
    path = tmp_path / "b48.trc"
    n = 48 * MiB
    with open(path, "wb") as f:
        f.write(frame(b"\x83m" + struct.pack(">I", n) + os.urandom(1024) + bytes(n - 1024)))
    r = run_capped(
        [
            sys.executable,
            "-c",
            "import sys; from smp.ports.reader import read_trace; "
            "print(sum(len(t) for t in read_trace(sys.argv[1])))",
            str(path),
        ]
    )
    assert r.returncode == 0 and r.stdout.strip() == str(n), r.stderr[-500:]
    assert r.max_rss_kib < 4 * n // 1024 + 80 * 1024, r.max_rss_kib


def test_a_small_max_print_cuts_each_term_of_a_message_and_prints_every_message():
    """``--max-print`` cuts the terms in a message, never the message
    itself: cut as one term, a message lost its tail, dbg's handler knew it
    no more and printed nothing (every message of a real node's file was
    lost at 80 characters)."""
    node_file = str(Path(__file__).resolve().parents[2] / "docs" / "examples" / "node1.trace")
    whole = run_cli("read", node_file)
    assert whole.returncode == 0 and whole.stdout.count("\n") == 3
    for chars in ("5", "20", "80"):
        r = run_cli("read", node_file, "--max-print", chars)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert len(lines) == 3, (chars, r.stdout)
        # the pids and the kind of each message are kept; a term is cut short
        assert [x.split(")")[0] for x in lines] == [
            x.split(")")[0] for x in whole.stdout.splitlines()
        ]
        assert all("..." in x for x in lines) if chars != "80" else True
    r = run_cli("read", node_file, "--max-print", "20", "--format", "terms")
    assert r.stdout.splitlines()[0].startswith("{trace,<1.86.0>,send,{ping,...},")


@pytest.mark.parametrize(
    "data",
    [b"a" * 3000, b"x\n" * 1500, bytes(range(256)) * 12, list(b"hello " * 500)],
    ids=["text", "escapes", "bytes", "string"],
)
def test_a_binary_or_string_is_cut_at_about_its_print_limit(data):
    """A binary was cut at a quarter of the limit (``--max-print 1000``
    printed 280 characters of a 3,000-byte text binary; the default limit a
    quarter of a large one): its bytes were counted at four characters
    each.  Now each is counted as it prints; one that fits is whole."""
    from smp.core.pretty import format_term
    from smp.core.pretty_clip import clip_term

    for limit in (100, 1000, 2000):
        text = format_term(clip_term(data, limit))
        assert limit - 8 <= len(text) <= limit + 4, (limit, len(text), text[-30:])
        assert text.endswith(("...>>", "...]")), text[-30:]
    whole = data[:300]
    assert clip_term(whole, 2000) is whole  # (about 600 characters at most: it fits)
    t = (A.m, whole, 7)
    assert clip_term(t, 2000) is t  # (and the rest of a tuple after it is kept)


@pytest.mark.parametrize("payload", [b"", b"\x00\x00\x00"], ids=["silent", "half a frame"])
def test_an_ip_port_that_goes_quiet_is_named_when_the_timeout_ends(payload):
    """A trace port that accepts, then sends nothing more: the line said
    only "smp-emu: timed out"."""
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    done = threading.Event()

    def serve() -> None:
        conn, _ = sock.accept()
        with conn:
            conn.sendall(payload)
            done.wait(30)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        r = run_cli("read", "--timeout", "0.5", f"127.0.0.1:{port}")
    finally:
        done.set()
        t.join(5)
        sock.close()
    line = assert_one_line(r, 2, contains=f"trace port 127.0.0.1:{port}")
    assert "nothing arrived within the timeout of 0.5 s" in line, line
    assert r.seconds < 10, r.seconds
