"""Interop with a real Erlang/OTP node (marker: interop)."""

import os
import shutil
import struct
import subprocess

import pytest
from erlnode import COLLECT, SPLIT, WAIT, estr, run_erl
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from smp.core.terms import LOCAL_NODE, A, Atom, ImproperList, Pid, Port, Ref, charlist
from smp.ports.dbgfmt import format_dbg
from smp.ports.reader import read_frames, read_trace
from smp.ports.traceport import FileTracePort, IpTracePort
from smp.wire.etf import decode, encode

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(shutil.which("erl") is None, reason="no Erlang node: `erl` not on PATH"),
]

SAMPLE = [
    (A.trace, Pid(80), A.send, (A.ping, 3), Pid(81)),
    (A.trace_ts, Pid(80, 2), A["receive"], charlist("hello"), (1700, 12, 345)),
    (A.trace, Pid(80), A.call, (A.lists, A.seq, [1, 10])),
    (A.trace, Pid(80), A.return_from, (A.m, A.f, 2), ImproperList([1, 2.5], b"t")),
    (A.trace, Pid(80), A.link, Port(7)),
    (A.trace, Pid(80), A.exit, (A.shutdown, Ref((1, 2, 3)), 2**70, -5)),
    (A.trace, Pid(3, 0, Atom("other@host"), 7), A.out, 0),
    (A.seq_trace, 0, (A.send, (0, 1), Pid(80), Pid(81), A.hello)),
]


def test_our_trace_file_read_by_dbg_trace_client(tmp_path):
    path, out = tmp_path / "ours.trc", tmp_path / "out.bin"
    with FileTracePort(path) as p:
        for t in SAMPLE:
            p.write(encode(t))
    code = (
        "OUT = "
        + estr(out)
        + ","
        + COLLECT
        + "dbg:trace_client(file, "
        + estr(path)
        + ", {H, []}),"
        + WAIT
    )
    run_erl(code)
    assert decode(out.read_bytes()) == SAMPLE


def test_our_wrap_log_read_by_dbg_trace_client(tmp_path):
    base, out = tmp_path / "w", tmp_path / "out.bin"
    terms = [(A.trace, Pid(80), A.send, i, Pid(81)) for i in range(40)]
    with FileTracePort(base, wrap=(".trc", 100, 4)) as p:
        for t in terms:
            p.write(encode(t))
    code = (
        "OUT = "
        + estr(out)
        + ","
        + COLLECT
        + "dbg:trace_client(file, {"
        + estr(base)
        + ', wrap, ".trc", 100, 4}, {H, []}),'
        + WAIT
    )
    run_erl(code)
    theirs = decode(out.read_bytes())
    assert theirs == list(read_trace((str(base), "wrap", ".trc", 100, 4)))
    assert theirs == terms[-len(theirs) :] and len(theirs) >= 4


def test_our_ip_port_read_by_dbg_trace_client(tmp_path):
    out = tmp_path / "out.bin"
    port = IpTracePort(0, queue_size=5)
    try:
        for i in range(12):  # no client yet: 5 queued + drop(7)
            port.write(encode((A.trace, Pid(80), A.send, i, Pid(81))))
        code = (
            "OUT = "
            + estr(out)
            + ","
            + COLLECT
            + f'dbg:trace_client(ip, {{"127.0.0.1", {port.port}}}, {{H, []}}),'
            + WAIT
        )
        proc = subprocess.Popen(
            ["erl", "-noshell", "-noinput", "-eval", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert port.wait_connected(True, 30), "the node did not connect"
            assert port.flush(30)
            port.write(encode(A.last))
            assert port.flush(30)
        finally:
            port.close()
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        port.close()
    expected = [(A.trace, Pid(80), A.send, i, Pid(81)) for i in range(5)] + [(A.drop, 7), A.last]
    assert decode(out.read_bytes()) == expected


def test_real_trace_ip_drv_drop_frames_equal_ours():
    """The real trace_ip_drv (as dbg opens it) and IpTracePort send the same bytes."""
    payloads = [encode(i) for i in range(12)]
    code = """
F = dbg:trace_port(ip, {0, 5}), Port = F(),
<<0, P:16>> = list_to_binary([erlang:port_control(Port, $p, "")]),
[erlang:port_command(Port, term_to_binary(I)) || I <- lists:seq(0, 11)],
io:format("~w~n", [P]),
receive stop -> ok after 20000 -> ok end, halt()."""
    proc = subprocess.Popen(
        ["erl", "-noshell", "-noinput", "-eval", code], stdout=subprocess.PIPE, text=True
    )
    try:
        real_port = int(proc.stdout.readline())
        import socket

        c = socket.create_connection(("127.0.0.1", real_port), timeout=20)
        c.settimeout(20)
        expected_len = 5 * (5 + 3) + 5
        theirs = b""
        while len(theirs) < expected_len:
            chunk = c.recv(4096)
            assert chunk
            theirs += chunk
        c.close()
    finally:
        proc.kill()
        proc.wait(10)
    ours = IpTracePort(0, queue_size=5)
    try:
        for pl in payloads:
            ours.write(pl)
        it = read_trace(("127.0.0.1", ours.port), timeout=20)
        got = [next(it) for _ in range(6)]
    finally:
        ours.close()
    assert list(read_frames(theirs)) == got == [0, 1, 2, 3, 4, (A.drop, 7)]
    assert (
        theirs
        == b"".join(b"\0" + struct.pack(">I", 3) + pl for pl in payloads[:5])
        + b"\x01\x00\x00\x00\x07"
    )


@pytest.mark.parametrize("size", [60, 0])
def test_real_trace_file_drv_wrap_files_equal_ours(tmp_path, size):
    """Same payloads through the real trace_file_drv and FileTracePort: same
    files, same modes; also with a wrap size of 0, which dbg takes (every
    message ends its file)."""
    real, mine = tmp_path / "real", tmp_path / "mine"
    real.mkdir()
    mine.mkdir()
    payloads = [encode((A.n, i, b"x" * (i % 7))) for i in range(30)]
    inp = tmp_path / "in.bin"
    inp.write_bytes(b"".join(b"\0" + struct.pack(">I", len(p)) + p for p in payloads))
    code = (
        SPLIT
        + "{ok, In} = file:read_file("
        + estr(inp)
        + "),"
        + "F1 = dbg:trace_port(file, {"
        + estr(real / "w")
        + f', wrap, ".trc", {size}, 3}}),'
        + "P1 = F1(), [erlang:port_command(P1, B) || B <- Split(In)], port_close(P1),"
        + "F2 = dbg:trace_port(file, "
        + estr(real / "plain")
        + "),"
        + "P2 = F2(), [erlang:port_command(P2, B) || B <- Split(In)], port_close(P2),"
        + "halt()."
    )
    run_erl(code)
    with FileTracePort(mine / "w", wrap=(".trc", size, 3)) as p:
        for pl in payloads:
            p.write(pl)
    with FileTracePort(mine / "plain") as p:
        for pl in payloads:
            p.write(pl)
    assert sorted(os.listdir(real)) == sorted(os.listdir(mine))
    for name in os.listdir(real):
        assert (real / name).read_bytes() == (mine / name).read_bytes(), name
        # The same permissions too: trace_file_drv creates with 0777, less the umask.
        assert (real / name).stat().st_mode == (mine / name).stat().st_mode, name


def test_node_trace_file_read_by_reader(tmp_path):
    path, out = tmp_path / "node.trc", tmp_path / "out.bin"
    code = (
        "OUT = "
        + estr(out)
        + ","
        + """
Recv = spawn(fun R() -> receive stop -> ok; _ -> R() end end),
Sender = spawn(fun() -> receive go -> ok end,
                        [Recv ! {msg, I, self(), make_ref(), 1.5, <<"b">>, "str"} || I <- lists:seq(1, 20)],
                        Recv ! stop end),
{ok, _} = dbg:tracer(port, dbg:trace_port(file, """
        + estr(path)
        + """)),
{ok, _} = dbg:p(Sender, [s, r, timestamp]),
{ok, _} = dbg:p(Recv, [r]),
Sender ! go,
MRef = monitor(process, Recv), receive {'DOWN', MRef, _, _, _} -> ok end,
ok = dbg:flush_trace_port(), dbg:stop(),
"""
        + COLLECT
        + "dbg:trace_client(file, "
        + estr(path)
        + ", {H, []}),"
        + WAIT
    )
    run_erl(code)
    theirs = decode(out.read_bytes())
    ours = list(read_trace(path))
    assert ours == theirs
    sends = [
        t
        for t in ours
        if t[0] is A.trace_ts and t[2] is A.send and type(t[3]) is tuple and t[3][0] is A.msg
    ]
    assert [s[3][1] for s in sends] == list(range(1, 21))
    assert all(type(s[3][3]) is Ref and s[3][6] == charlist("str") for s in sends)


# ------------------------------------------------------------ ETF vs the node

local_terms_leaves = st.one_of(
    st.text(max_size=10).map(Atom),
    st.integers(-(2**100), 2**100) | st.integers(-300, 300),
    st.floats(allow_nan=False, allow_infinity=False),
    st.binary(max_size=12),
    # A real node accepts local pids only with number < 2**15, serial < 2**13,
    # ports < 2**28, refs of 3 words with the first < 2**18.
    st.builds(Pid, st.integers(0, 2**15 - 1), st.integers(0, 2**13 - 1)),
    st.builds(Port, st.integers(0, 2**28 - 1)),
    st.builds(
        lambda a, b, c: Ref((a, b, c)),
        st.integers(0, 2**18 - 1),
        st.integers(0, 2**32 - 1),
        st.integers(0, 2**32 - 1),
    ),
    st.builds(
        Pid,
        st.integers(0, 2**32 - 1),
        st.integers(0, 2**32 - 1),
        st.just(Atom("remote@host")),
        st.integers(1, 2**32 - 1),
    ),
    st.builds(
        Port, st.integers(0, 2**64 - 1), st.just(Atom("remote@host")), st.integers(1, 2**32 - 1)
    ),
    st.builds(
        Ref,
        st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=5).map(tuple),
        st.just(Atom("remote@host")),
        st.integers(1, 2**32 - 1),
    ),
    st.lists(st.integers(0, 255), max_size=8),
)
node_terms = st.recursive(
    local_terms_leaves,
    lambda ch: st.one_of(
        st.lists(ch, max_size=4),
        st.lists(ch, max_size=4).map(tuple),
        st.tuples(
            st.lists(ch, min_size=1, max_size=3),
            ch.filter(lambda t: type(t) not in (list, ImproperList)),
        ).map(lambda a: ImproperList(*a)),
    ),
    max_leaves=12,
)


def _exact(a, b):
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return struct.pack(">d", a) == struct.pack(">d", b)
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(_exact(x, y) for x, y in zip(a, b, strict=False))
    if type(a) is ImproperList:
        return _exact(a.elements, b.elements) and _exact(a.tail, b.tail)
    return a == b


@settings(
    max_examples=2, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
)
@given(st.lists(node_terms, min_size=200, max_size=200))
def test_node_round_trip_of_our_encodings(tmp_path_factory, batch):
    tmp = tmp_path_factory.mktemp("rt")
    inp, out = tmp / "in.bin", tmp / "out.bin"
    inp.write_bytes(b"".join(b"\0" + struct.pack(">I", len(e)) + e for e in map(encode, batch)))
    code = (
        SPLIT
        + "{ok, In} = file:read_file("
        + estr(inp)
        + "),"
        + "Out = [begin T = binary_to_term(B), "
        "[term_to_binary({B =:= term_to_binary(T, [{minor_version, 2}]), T}), "
        "term_to_binary(T, [{minor_version, 0}]), term_to_binary(T, [compressed])] end"
        " || B <- Split(In)],"
        + "ok = file:write_file("
        + estr(out)
        + ", [[<<0, (byte_size(X)):32>>, X] || X <- lists:append(Out)]),"
        + "halt()."
    )
    run_erl(code)
    results = list(read_frames(out.read_bytes()))
    assert len(results) == 3 * len(batch)
    for i, term in enumerate(batch):
        (same_bytes, back), old, compressed = results[3 * i : 3 * i + 3]
        # The node reads every kind we write, gives it back unchanged in all
        # its encodings, and term_to_binary(T, [{minor_version, 2}]) is our
        # encoding byte for byte.
        assert _exact(back, term), (term, back)
        assert _exact(old, term), (term, old)
        assert _exact(compressed, term), (term, compressed)
        assert same_bytes is A.true, term


def test_we_decode_what_the_node_writes(tmp_path):
    out = tmp_path / "out.bin"
    code = """
T = {self(), make_ref(), hd(erlang:ports()), 1.0e300, -0.5, 1 bsl 200, -(1 bsl 3000), "abc",
     [1, 2 | three], <<1, 2, 3>>, [], {}, 'caf\\x{e9}', '\\x{1F600}', lists:seq(1, 300),
     list_to_tuple(lists:seq(1, 300))},
Bins = [term_to_binary(T), term_to_binary(T, [{minor_version, 0}]),
        term_to_binary(T, [{minor_version, 2}]), term_to_binary(T, [compressed]),
        term_to_binary(T, [{compressed, 9}, {minor_version, 0}])],
Text = lists:flatten(io_lib:format("~w", [T])),
ok = file:write_file(OUT, [[<<0, (byte_size(X)):32>>, X] || X <- Bins ++ [term_to_binary(Text)]]),
halt().""".replace("OUT", estr(out))
    run_erl(code)
    *decoded, text = list(read_frames(out.read_bytes()))
    first = decoded[0]
    assert all(d == first for d in decoded)
    pid, ref, port = first[:3]
    assert type(pid) is Pid and pid.node is LOCAL_NODE
    assert type(ref) is Ref and type(port) is Port
    assert first[3:] == (
        1.0e300,
        -0.5,
        1 << 200,
        -(1 << 3000),
        charlist("abc"),
        ImproperList([1, 2], A.three),
        b"\x01\x02\x03",
        [],
        (),
        Atom("caf\u00e9"),
        Atom("\U0001f600"),
        list(range(1, 301)),
        tuple(range(1, 301)),
    )
    # and our encoding of what we decoded is what the node printed with ~w
    assert repr(pid) in "".join(map(chr, text))


def test_format_dbg_matches_dhandler(tmp_path):
    inp = tmp_path / "in.bin"
    terms = [
        (A.trace, Pid(80), A.send, A.hello, Pid(81)),
        (A.trace, Pid(80), A["receive"], charlist("text")),
        (A.trace, Pid(80), A.call, (A.m, A.f, [A.a, 1, b"b"])),
        (A.trace, Pid(80), A.call, (A.m, A.f, []), [A.x]),
        (A.trace, Pid(80), A.return_from, (A.m, A.f, 1), A.ok),
        (A.trace, Pid(80), A.return_to, (A.m, A.f, 1)),
        (A.trace, Pid(80), A.exception_from, (A.m, A.f, 1), (A.error, A.badarg)),
        (A.trace, Pid(80), A.spawn, Pid(81), (A.m, A.f, [1, 2])),
        (A.trace, Pid(80), A.exit, A.normal),
        (A.trace, Pid(80), A.gc_minor_start, [(A.heap_size, 10)]),
        (A.trace, Pid(80), A.link, Port(3)),
        (A.trace_ts, Pid(80), A.send, A.hello, Pid(81), (1700, 12, 345)),
        (A.trace_ts, Pid(80), A["in"], (A.m, A.f, 0), (1, 2, 3)),
        (A.trace_ts, Pid(80), A.call, (A.m, A.f, [A.a]), [A.y], (1, 2, 3)),
        (A.seq_trace, 0, (A.send, (0, 1), Pid(80), Pid(81), A.hello)),
        (A.seq_trace, 7, (A["receive"], (0, 1), Pid(80), Pid(81), A.hello), (1, 2, 3)),
        (A.seq_trace, 0, (A.print, (0, 1), Pid(80), Pid(81), A.info)),
        (A.drop, 42),
        (A.trace, Pid(80), A["receive"], (A.dbg, A.ok)),
        (A.other, 1),
    ]
    inp.write_bytes(b"".join(b"\0" + struct.pack(">I", len(e)) + e for e in map(encode, terms)))
    code = (
        SPLIT
        + "{ok, In} = file:read_file("
        + estr(inp)
        + "),"
        + '[begin dbg:dhandler(binary_to_term(B), user), io:format(user, "@@~n", []) end'
        " || B <- Split(In)], halt()."
    )
    stdout = run_erl(code)
    theirs = stdout.split("@@\n")[:-1]
    assert len(theirs) == len(terms)
    for term, text in zip(terms, theirs, strict=False):
        assert format_dbg(term) == text, term


# ------------------------------------------------------------ the shipped node file

NODE_TRACE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "examples", "node1.trace")
NODE_SCRIPT = os.path.join(os.path.dirname(NODE_TRACE), "node1_trace.escript")


def test_the_shipped_node_trace_prints_as_dbg_trace_client_prints_it():
    """``docs/examples/node1.trace``, the real node's file the docs read, is
    printed by a node's ``dbg:trace_client`` (its default handler) as the
    reader prints it, with the number that node gave ``node1@host``."""
    import re

    from smp.core.pretty import NodeNumbers

    code = (
        "Self = self(),"
        "H = fun(end_of_trace, Out) -> Self ! done, Out; (T, Out) -> dbg:dhandler(T, Out) end,"
        "dbg:trace_client(file, " + estr(NODE_TRACE) + ", {H, user})," + WAIT
    )
    theirs = run_erl(code)
    number = re.match(r"\(<(\d+)\.", theirs)
    assert number is not None, theirs
    nodes = NodeNumbers({"node1@host": int(number.group(1))})
    ours = "".join(format_dbg(t, nodes) for t in read_trace(NODE_TRACE))
    assert ours == theirs
    assert ours.count("\n") == 3 and "call lists:seq(1,3)" in ours


def _shape(terms: list) -> list:
    """The terms with each pid named by its first appearance and each
    timestamp left out: what a second run of the escript keeps."""
    seen: dict = {}

    def norm(x):
        if type(x) is Pid:
            return ("pid", x.node, seen.setdefault(x, len(seen)))
        if type(x) is tuple:
            return tuple(norm(y) for y in x)
        if type(x) is list:
            return [norm(y) for y in x]
        return x

    return [norm(t[:-1] if t[0] is A.trace_ts else t) for t in terms]


def test_the_escript_writes_the_shipped_files_messages(tmp_path):
    """The escript beside the shipped file writes, on a node of this
    machine, the same messages (but for pid numbers and timestamps)."""
    out = tmp_path / "node1.trace"
    r = subprocess.run(
        ["escript", NODE_SCRIPT, str(out)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    shipped, again = list(read_trace(NODE_TRACE)), list(read_trace(str(out)))
    assert _shape(again) == _shape(shipped)
    assert {p.node for t in again for p in t if type(p) is Pid} == {Atom("node1@host")}
