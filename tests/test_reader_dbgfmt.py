"""Unit tests of smp.reader and smp.dbgfmt."""
import struct

import pytest

from smp.dbgfmt import format_dbg
from smp.errors import DecodeError
from smp.etf import encode
from smp.reader import read_frames, read_trace, wrap_log_files
from smp.terms import A, Pid, Port, charlist
from smp.traceport import FileTracePort, IpTracePort


def frame(payload):
    return b"\x00" + struct.pack(">I", len(payload)) + payload


P80, P81 = Pid(80), Pid(81)


# ---------------------------------------------------------------- reader

def test_read_file_and_drop_records(tmp_path):
    path = tmp_path / "t.trc"
    terms = [(A.trace, P80, A.send, A.hello, P81), (A.trace, P80, A["receive"], A.hi)]
    path.write_bytes(frame(encode(terms[0])) + b"\x01\x00\x00\x00\x05" + frame(encode(terms[1])))
    assert list(read_trace(path)) == [terms[0], (A.drop, 5), terms[1]]
    assert list(read_trace(str(path))) == [terms[0], (A.drop, 5), terms[1]]


def test_read_large_file_across_chunks(tmp_path):
    path = tmp_path / "big.trc"
    with FileTracePort(path) as p:
        for i in range(3000):
            p.write(encode((A.x, b"y" * 700, i)))
    got = list(read_trace(path))
    assert len(got) == 3000 and got[-1] == (A.x, b"y" * 700, 2999)


@pytest.mark.parametrize("data,offset,what", [
    (frame(encode(1)) + b"\x07\x00\x00\x00\x00", 8, "bad trace frame op"),
    (frame(encode(1)) + b"\x00\x00\x00", 8, "truncated frame header"),
    (frame(encode(1)) + b"\x00\x00\x00\x00\x09\x83a", 13, "truncated term"),
    (frame(encode(1)) + frame(b"\x83\x68\x02\x61\x01"), 18, "bad term"),
    (frame(b"\x84\x61\x01"), 5, "bad version"),
])
def test_reader_errors_name_offsets(tmp_path, data, offset, what):
    path = tmp_path / "bad.trc"
    path.write_bytes(data)
    with pytest.raises(DecodeError) as ei:
        list(read_trace(path))
    assert ei.value.offset == offset
    assert what in str(ei.value) and str(path) in str(ei.value)
    with pytest.raises(DecodeError) as ei2:
        list(read_frames(data))
    assert ei2.value.offset == offset


def test_read_wrap_log_in_order(tmp_path):
    base = str(tmp_path / "w")
    with FileTracePort(base, wrap=(".log", 20, 3)) as p:
        for i in range(11):
            p.write(encode((A.n, i)))        # 5 + 7 bytes each: 2 per file
    # files: counters cycle 0..3, the last 3 files are kept
    files = wrap_log_files(base, ".log", 3)
    assert len(files) == 3
    got = list(read_trace((base, "wrap", ".log", 20, 3)))
    assert got == [(A.n, i) for i in range(6, 11)]
    assert list(read_trace((base, A.wrap, ".log", 20, 3))) == got


def test_inconsistent_wrap_set(tmp_path):
    for c in (0, 2, 5):
        (tmp_path / f"x{c}.t").write_bytes(b"")
    with pytest.raises(DecodeError, match="inconsistent"):
        list(read_trace((str(tmp_path / "x"), "wrap", ".t", 100, 8)))


def test_read_ip_until_closed():
    port = IpTracePort(0, queue_size=3)
    try:
        for i in range(5):
            port.write(encode(i))
        it = read_trace(f"127.0.0.1:{port.port}", timeout=10)
        assert [next(it) for _ in range(4)] == [0, 1, 2, (A.drop, 2)]
        port.write(encode(A.last))
        assert next(it) == A.last
        assert port.flush(10)
    finally:
        port.close()
    assert list(it) == []
    with pytest.raises(ValueError):
        read_trace(("h", "p", "q", "r"))


# ---------------------------------------------------------------- dbgfmt

TS = (1, 2, 3)
CASES = [
    ((A.trace, P80, A.send, A.hello, P81), "(<0.80.0>) <0.81.0> ! hello\n"),
    ((A.trace, P80, A["receive"], A.hello), "(<0.80.0>) << hello\n"),
    ((A.trace, P80, A["receive"], (A.dbg, A.ok)), ""),
    ((A.trace, P80, A.call, (A.m, A.f, [A.a, A.b])), "(<0.80.0>) call m:f(a,b)\n"),
    ((A.trace, P80, A.call, (A.m, A.f, []), charlist("hi")), '(<0.80.0>) call m:f() ("hi")\n'),
    ((A.trace, P80, A.return_from, (A.m, A.f, 1), A.ok), "(<0.80.0>) returned from m:f/1 -> ok\n"),
    ((A.trace, P80, A.return_to, (A.m, A.f, 1)), "(<0.80.0>) returning to m:f/1\n"),
    ((A.trace, P80, A["return"], (A.m, A.f, 1)), "(<0.80.0>) old_ret m:f/1\n"),
    ((A.trace, P80, A.exception_from, (A.m, A.f, 1), (A.error, A.badarg)),
     "(<0.80.0>) exception_from {m,f,1} {error,badarg}\n"),
    ((A.trace, P80, A.spawn, P81, (A.m, A.f, [1])), "(<0.80.0>) spawn <0.81.0> as m:f(1)\n"),
    ((A.trace, P80, A.spawned, P81, (A.m, A.f, [])), "(<0.80.0>) spawned <0.81.0> {m,f,[]}\n"),
    ((A.trace, P80, A.link, P81), "(<0.80.0>) link <0.81.0>\n"),
    ((A.trace, P80, A.getting_unlinked, Port(3)), "(<0.80.0>) getting_unlinked #Port<0.3>\n"),
    ((A.trace, P80, A.exit, A.normal), "(<0.80.0>) exit normal\n"),
    ((A.trace, P80, A["in"], (A.m, A.f, 0)), "(<0.80.0>) in {m,f,0}\n"),
    ((A.trace, P80, A.out, 0), "(<0.80.0>) out 0\n"),
    ((A.trace, P80, A.gc_minor_start, [(A.heap_size, 10)]),
     "(<0.80.0>) gc_minor_start [{heap_size,10}]\n"),
    ((A.trace_ts, P80, A.send, A.hello, P81, TS),
     "(<0.80.0>) <0.81.0> ! hello (Timestamp: {1,2,3})\n"),
    ((A.trace_ts, P80, A["receive"], A.hello, TS), "(<0.80.0>) << hello (Timestamp: {1,2,3})\n"),
    ((A.trace_ts, P80, A.call, (A.m, A.f, [A.a]), TS),
     "(<0.80.0>) call m:f(a) (Timestamp: {1,2,3})\n"),
    ((A.trace_ts, P80, A.return_from, (A.m, A.f, 1), A.ok, TS),
     "(<0.80.0>) returned from m:f/1 -> ok (Timestamp: {1,2,3})\n"),
    ((A.trace_ts, P80, A.exit, A.normal, TS), "(<0.80.0>) exit normal (Timestamp: {1,2,3})\n"),
    ((A.trace_ts, P80, A.spawn, P81, (A.m, A.f, []), TS),
     "(<0.80.0>) spawn <0.81.0> as m:f() (Timestamp: {1,2,3})\n"),
    ((A.seq_trace, 0, (A.send, (0, 1), P80, P81, A.hello)),
     "SeqTrace [0]: (<0.80.0>) <0.81.0> ! hello [Serial: {0,1}]\n"),
    ((A.seq_trace, 0, (A["receive"], (0, 1), P80, P81, A.hello)),
     "SeqTrace [0]: (<0.81.0>) << hello [Serial: {0,1}, From: <0.80.0>]\n"),
    ((A.seq_trace, 0, (A.print, (0, 1), P80, P81, A.info), TS),
     "SeqTrace {1,2,3} [0]: -> info [Serial: {0,1}, From: <0.80.0>]\n"),
    ((A.seq_trace, 0, (A.other, 1)), "SeqTrace [0]: {other,1}\n"),
    ((A.drop, 42), "*** Dropped 42 messages.\n"),
    (A.end_of_trace, ""),
    ((A.foo, 1), ""),
    (42, ""),
]


@pytest.mark.parametrize("term,text", CASES, ids=[c[1][:40] or repr(c[0])[:40] for c in CASES])
def test_format_dbg(term, text):
    assert format_dbg(term) == text
