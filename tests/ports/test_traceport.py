"""Unit tests of the trace ports (smp.ports.traceport)."""

import os
import socket
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smp.core.errors import TracePortError
from smp.core.terms import Atom, ImproperList, Pid
from smp.ports.reader import read_frames
from smp.ports.traceport import (
    FILE_BUFFER_SIZE,
    FileTracePort,
    IpTracePort,
    NullTracePort,
    open_trace_port,
)
from smp.wire.etf import decode, encode


def frame(payload):
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, f"connection closed after {len(data)} of {n} bytes"
        data += chunk
    return data


def test_nested_improper_list_is_flattened():
    t = ImproperList([1], ImproperList([2], 3))
    assert decode(encode(t)) == ImproperList([1, 2], 3)


# ---------------------------------------------------------------- file port


def test_file_frames(tmp_path):
    path = tmp_path / "t.trc"
    payloads = [encode((Atom("trace"), Pid(80), Atom("send"), i, Pid(81))) for i in range(10)]
    with FileTracePort(path) as p:
        heavy = [p.write(pl) for pl in payloads]
        assert os.path.getsize(path) == 0  # still buffered
    assert not any(heavy)
    assert path.read_bytes() == b"".join(frame(pl) for pl in payloads)
    assert p.stats["messages"] == 10
    assert p.stats["bytes"] == sum(len(pl) + 5 for pl in payloads)


def test_file_buffering_heavy_exactly_when_buffer_spills(tmp_path):
    path = tmp_path / "t.trc"
    p = FileTracePort(path, buffer_size=100)
    pl = encode(b"x" * 40)  # 46 bytes, frame 51
    assert p.write(pl) is False  # 51 in buffer
    assert p.write(pl) is True  # 102 > 100: buffer written
    assert os.path.getsize(path) == 100
    assert p.write(encode(b"y" * 300)) is True  # larger than a buffer: written directly
    p.flush()
    p.close()
    p.close()  # idempotent
    data = path.read_bytes()
    assert list(read_frames(data)) == [b"x" * 40, b"x" * 40, b"y" * 300]
    with pytest.raises(TracePortError):
        p.write(pl)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 300), min_size=1, max_size=40),
    buffer_size=st.integers(1, 400),
    wrap=st.sampled_from([None, (".trc", 200, 3), (".trc", 0, 2)]),
    runs=st.integers(1, 4),
)
def test_write_many_is_one_write_a_frame(tmp_path_factory, sizes, buffer_size, wrap, runs):
    """The dispatcher writes a run with write_many: the files, their OS
    writes and the counters are those of one write() per frame, whatever the
    buffer size, the frame sizes and the wrapping."""
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    cut = [payloads[i::runs] for i in range(runs)]  # consecutive runs of frames
    out = []
    for how in ("write", "write_many"):
        d = tmp_path_factory.mktemp(how)
        p = FileTracePort(d / "t", wrap=wrap, buffer_size=buffer_size)
        for run in cut:
            if how == "write":
                for pl in run:
                    p.write(pl)
            else:
                assert p.write_many(run) == (len(run), None)
        p.flush()
        files = {f.name: f.read_bytes() for f in sorted(d.iterdir())}
        p.close()
        out.append((files, p.stats, p.os_writes))
    assert out[0] == out[1]


def test_write_many_stops_at_the_first_failure(tmp_path):
    """A driver that fails mid-run: what was written is counted, the error is
    returned, and a closed port writes nothing."""
    p = FileTracePort(tmp_path / "t", buffer_size=10)
    os.close(p._fd)  # the file goes away under the driver
    p._fd = os.open(os.devnull, os.O_RDONLY)
    written, error = p.write_many([b"a", b"bb" * 10, b"c"])
    assert written == 1 and isinstance(error, TracePortError)
    assert p.stats["messages"] == 1
    with pytest.raises(TracePortError):
        p.close()  # its buffer cannot be written either
    written, error = p.write_many([b"x"])
    assert written == 0 and "closed" in str(error)
    null = NullTracePort()
    assert null.write_many([b"a", b"b"]) == (2, None) and null.stats["messages"] == 2


def test_file_default_buffer_size_is_bufsiz_times_8(tmp_path):
    p = FileTracePort(tmp_path / "t")
    assert p.buffer_size == FILE_BUFFER_SIZE == 65536
    p.close()


def test_wrap_naming_and_rotation(tmp_path):
    base = str(tmp_path / "w")
    # Stale files of an earlier wrap log are deleted on open, as dbg does.
    (tmp_path / "w7.trc").write_bytes(b"old")
    p = FileTracePort(base, wrap=(".trc", 1, 3))  # every message wraps
    assert not (tmp_path / "w7.trc").exists()
    seen = []
    for i in range(6):
        assert p.write(encode(i)) is True
        seen.append(sorted(os.listdir(tmp_path)))
    p.close()
    # Counter runs 0..WrapCnt (4 values), at most WrapCnt files exist.
    assert seen[0] == ["w0.trc", "w1.trc"]
    assert seen[1] == ["w0.trc", "w1.trc", "w2.trc"]
    assert seen[2] == ["w1.trc", "w2.trc", "w3.trc"]
    assert seen[3] == ["w0.trc", "w2.trc", "w3.trc"]
    assert seen[4] == ["w0.trc", "w1.trc", "w3.trc"]
    assert p.stats["wraps"] == 6
    contents = {n: list(read_frames((tmp_path / n).read_bytes())) for n in os.listdir(tmp_path)}
    assert contents == {"w0.trc": [4], "w1.trc": [5], "w2.trc": []}


def test_wrap_size_threshold(tmp_path):
    base = str(tmp_path / "s")
    pl = encode(Atom("abc"))  # 6 bytes, frame 11
    p = FileTracePort(base, wrap=("", 30, 8))
    heavy = [p.write(pl) for _ in range(7)]
    p.close()
    # 11, 22, 33 >= 30 -> wrap after the 3rd message
    assert heavy == [False, False, True, False, False, True, False]
    assert [len(list(read_frames((tmp_path / f"s{i}").read_bytes()))) for i in range(3)] == [
        3,
        3,
        1,
    ]


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(wrap=(".x", -1, 3)), "wrap size"),
        (dict(wrap=(".x", 10, 0)), "wrap count"),
        (dict(wrap=(b".x", 10, 3)), "suffix"),
        (dict(wrap="yes"), "wrap"),
        (dict(buffer_size=0), "buffer_size"),
    ],
)
def test_file_bad_arguments(tmp_path, kw, match):
    with pytest.raises(TracePortError, match=match):
        FileTracePort(tmp_path / "f", **kw)


def test_unwritable_path(tmp_path):
    with pytest.raises(TracePortError, match="cannot open"):
        open_trace_port("file", str(tmp_path / "no" / "such" / "dir" / "f"))


def test_factory(tmp_path):
    with pytest.raises(TracePortError, match="unknown trace port kind"):
        open_trace_port("udp")
    with pytest.raises(TracePortError, match="queue_size"):
        open_trace_port("ip", 0, queue_size=-1)
    with pytest.raises(TracePortError, match="bad arguments"):
        open_trace_port("null", 1)
    n = open_trace_port("null")
    assert isinstance(n, NullTracePort)
    assert n.write(b"abc") is False
    assert n.stats == {"messages": 1, "bytes": 8}
    f = open_trace_port("file", tmp_path / "f")
    assert isinstance(f, FileTracePort)
    f.close()


# ---------------------------------------------------------------- ip port


@pytest.fixture
def ip_port():
    ports = []

    def make(**kw):
        p = IpTracePort(0, **kw)
        ports.append(p)
        return p

    yield make
    for p in ports:
        p.close()


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.settimeout(10)
    return s


def test_ip_absent_client_drop_counting(ip_port):
    p = ip_port(queue_size=5)
    assert p.port > 0
    payloads = [encode(i) for i in range(12)]
    assert [p.write(pl) for pl in payloads] == [False] * 12
    assert p.stats["dropped"] == 7
    c = connect(p.port)
    expected = b"".join(frame(pl) for pl in payloads[:5]) + b"\x01" + struct.pack(">I", 7)
    assert recv_exactly(c, len(expected)) == expected
    assert p.flush(10) is True
    # After draining, messages flow again.
    p.write(payloads[0])
    assert recv_exactly(c, len(frame(payloads[0]))) == frame(payloads[0])
    assert p.flush(10)
    st = p.stats
    assert (st["sent"], st["dropped"], st["drop_frames_sent"], st["clients"]) == (6, 7, 1, 1)
    c.close()


def test_ip_refill_gives_second_drop_frame(ip_port):
    p = ip_port(queue_size=2)
    for i in range(4):  # 2 queued, drop(2)
        p.write(encode(i))
    c = connect(p.port)
    got = list(read_frames(recv_exactly(c, 2 * 8 + 5)))
    assert got == [0, 1, (Atom("drop"), 2)]
    c.close()


def test_ip_one_client_at_a_time(ip_port):
    p = ip_port(queue_size=10)
    c1 = connect(p.port)
    p.write(encode(Atom("one")))
    assert recv_exactly(c1, 5 + 6) == frame(encode(Atom("one")))
    c2 = connect(p.port)
    assert c2.recv(10) == b""  # accepted and closed at once
    p.write(encode(Atom("two")))
    assert recv_exactly(c1, 5 + 6) == frame(encode(Atom("two")))
    assert p.flush(10)
    assert p.stats["rejected"] == 1 and p.stats["clients"] == 1
    c2.close()
    # When the first client leaves, queued messages go to the next one.
    c1.close()
    assert p.wait_connected(False, 10)
    p.write(encode(Atom("three")))
    c3 = connect(p.port)
    assert p.wait_connected(True, 10)
    assert recv_exactly(c3, 5 + 8) == frame(encode(Atom("three")))
    assert p.stats["clients"] == 2
    c3.close()


def test_ip_slow_client_drops_without_blocking(ip_port):
    p = ip_port(queue_size=50)
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.settimeout(10)
    c.connect(("127.0.0.1", p.port))
    big = encode(b"z" * 20000)
    n = 2000
    for _ in range(n):  # 40 MB: far beyond socket buffers
        p.write(big)
    st = p.stats
    assert st["dropped"] > 0
    assert st["queued"] <= 51
    # Read everything: frames + drop frames account for every message.
    total = 0
    buf = b""
    seen_data = seen_dropped = 0
    while seen_data + seen_dropped < n:
        chunk = c.recv(1 << 16)
        assert chunk, "port closed early"
        buf += chunk
        total += len(chunk)
        while len(buf) >= 5:
            op, size = struct.unpack(">BI", buf[:5])
            if op == 1:
                seen_dropped += size
                buf = buf[5:]
            else:
                assert op == 0
                if len(buf) < 5 + size:
                    break
                assert decode(buf[5 : 5 + size]) == b"z" * 20000
                seen_data += 1
                buf = buf[5 + size :]
    # The port counts a frame as sent after send() returns, which can be after
    # the client has read it: wait until the queue is empty before comparing.
    assert p.flush(10)
    st = p.stats
    assert seen_dropped == st["dropped"]
    assert seen_data == st["sent"]
    assert st["queued"] == 0
    c.close()


def test_ip_close_is_idempotent_and_refuses_writes(ip_port):
    p = ip_port()
    port = p.port
    p.close()
    p.close()
    with pytest.raises(TracePortError):
        p.write(b"x")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).recv(1)


def test_ip_flush_times_out_without_client(ip_port):
    p = ip_port()
    p.write(encode(1))
    assert p.flush(0.05) is False
    assert p.stats["queued"] == 1


def test_ip_keep_holds_what_was_written_whatever_the_client_got(ip_port):
    """keep=True: terms() gives every message written, those a client was
    sent and those the full queue dropped alike; a port without it refuses."""
    p = ip_port(queue_size=3, keep=True)
    for i in range(5):  # 3 queued, then a drop frame counting 2
        p.write(encode(i))
    assert p.terms() == [0, 1, 2, 3, 4] and p.terms(3) == [3, 4]
    c = connect(p.port)
    got = list(read_frames(recv_exactly(c, sum(len(frame(encode(i))) for i in range(3)) + 5)))
    assert got == [0, 1, 2, (Atom("drop"), 2)]
    assert p.stats["connected"] is True
    c.close()
    plain = ip_port()
    plain.write(encode(0))
    with pytest.raises(TracePortError, match="keeps no copy"):
        plain.terms()
    with pytest.raises(TracePortError, match="keep must be"):
        ip_port(keep=1)
