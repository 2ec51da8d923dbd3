"""Unit tests of smp.ports.reader and smp.ports.dbgfmt."""

import struct

import pytest

from smp.core.errors import DecodeError
from smp.core.terms import A, Pid, Port, charlist
from smp.ports.dbgfmt import format_dbg
from smp.ports.reader import read_frames, read_trace, wrap_log_files
from smp.ports.traceport import FileTracePort, IpTracePort
from smp.wire.etf import encode


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


@pytest.mark.parametrize(
    "data,offset,what",
    [
        (frame(encode(1)) + b"\x07\x00\x00\x00\x00", 8, "bad trace frame op"),
        (frame(encode(1)) + b"\x00\x00\x00", 8, "truncated frame header"),
        (frame(encode(1)) + b"\x00\x00\x00\x00\x09\x83a", 13, "truncated term"),
        (frame(encode(1)) + frame(b"\x83\x68\x02\x61\x01"), 18, "bad term"),
        (frame(b"\x84\x61\x01"), 5, "bad version"),
    ],
)
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
            p.write(encode((A.n, i)))  # 5 + 7 bytes each: 2 per file
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
    (
        (A.trace, P80, A.exception_from, (A.m, A.f, 1), (A.error, A.badarg)),
        "(<0.80.0>) exception_from {m,f,1} {error,badarg}\n",
    ),
    ((A.trace, P80, A.spawn, P81, (A.m, A.f, [1])), "(<0.80.0>) spawn <0.81.0> as m:f(1)\n"),
    ((A.trace, P80, A.spawned, P81, (A.m, A.f, [])), "(<0.80.0>) spawned <0.81.0> {m,f,[]}\n"),
    ((A.trace, P80, A.link, P81), "(<0.80.0>) link <0.81.0>\n"),
    ((A.trace, P80, A.getting_unlinked, Port(3)), "(<0.80.0>) getting_unlinked #Port<0.3>\n"),
    ((A.trace, P80, A.exit, A.normal), "(<0.80.0>) exit normal\n"),
    ((A.trace, P80, A["in"], (A.m, A.f, 0)), "(<0.80.0>) in {m,f,0}\n"),
    ((A.trace, P80, A.out, 0), "(<0.80.0>) out 0\n"),
    (
        (A.trace, P80, A.gc_minor_start, [(A.heap_size, 10)]),
        "(<0.80.0>) gc_minor_start [{heap_size,10}]\n",
    ),
    (
        (A.trace_ts, P80, A.send, A.hello, P81, TS),
        "(<0.80.0>) <0.81.0> ! hello (Timestamp: {1,2,3})\n",
    ),
    ((A.trace_ts, P80, A["receive"], A.hello, TS), "(<0.80.0>) << hello (Timestamp: {1,2,3})\n"),
    (
        (A.trace_ts, P80, A.call, (A.m, A.f, [A.a]), TS),
        "(<0.80.0>) call m:f(a) (Timestamp: {1,2,3})\n",
    ),
    (
        (A.trace_ts, P80, A.return_from, (A.m, A.f, 1), A.ok, TS),
        "(<0.80.0>) returned from m:f/1 -> ok (Timestamp: {1,2,3})\n",
    ),
    ((A.trace_ts, P80, A.exit, A.normal, TS), "(<0.80.0>) exit normal (Timestamp: {1,2,3})\n"),
    (
        (A.trace_ts, P80, A.spawn, P81, (A.m, A.f, []), TS),
        "(<0.80.0>) spawn <0.81.0> as m:f() (Timestamp: {1,2,3})\n",
    ),
    (
        (A.seq_trace, 0, (A.send, (0, 1), P80, P81, A.hello)),
        "SeqTrace [0]: (<0.80.0>) <0.81.0> ! hello [Serial: {0,1}]\n",
    ),
    (
        (A.seq_trace, 0, (A["receive"], (0, 1), P80, P81, A.hello)),
        "SeqTrace [0]: (<0.81.0>) << hello [Serial: {0,1}, From: <0.80.0>]\n",
    ),
    (
        (A.seq_trace, 0, (A.print, (0, 1), P80, P81, A.info), TS),
        "SeqTrace {1,2,3} [0]: -> info [Serial: {0,1}, From: <0.80.0>]\n",
    ),
    ((A.seq_trace, 0, (A.other, 1)), "SeqTrace [0]: {other,1}\n"),
    ((A.drop, 42), "*** Dropped 42 messages.\n"),
    (A.end_of_trace, ""),
    ((A.foo, 1), ""),
    (42, ""),
]


@pytest.mark.parametrize("term,text", CASES, ids=[c[1][:40] or repr(c[0])[:40] for c in CASES])
def test_format_dbg(term, text):
    assert format_dbg(term) == text


def test_format_dbg_breaks_long_terms_as_dbg_does():
    text = format_dbg((A.trace, P80, A.send, (A.tag, list(range(30))), P81))
    assert text == (
        "(<0.80.0>) <0.81.0> ! {tag,[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,\n"
        "                            20,21,22,23,24,25,26,27,28,29]}\n"
    )
    # each argument of a call is its own io_lib:format call, starting at column 0
    text = format_dbg((A.trace, P80, A.call, (A.m, A.f, [list(range(40))])))
    assert text.splitlines()[1] == " 29,30,31,32,33,34,35,36,37,38,39])"


def test_format_dbg_latin1_and_unicode_text():
    assert format_dbg(
        (
            A.trace,
            P80,
            A["receive"],
            [b"caf\xe9", [233, 114], Atom("\u00fc"), Atom("\U0001f600"), [0x1F600]],
        )
    ) == ('(<0.80.0>) << [<<"caf\xe9">>,"\xe9r",\xfc,\'\\x{1F600}\',[128512]]\n')


def test_format_dbg_other_nodes_numbers():
    from smp.core.pretty import NodeNumbers

    a, b = Atom("a@h"), Atom("b@h")
    nodes = NodeNumbers({a: 8616})
    text = format_dbg((A.trace, Pid(5, 1, a, 3), A.link, Port(7, b, 1)), nodes)
    assert text == "(<8616.5.1>) link #Port<1.7>\n"
    assert (
        format_dbg((A.trace, Pid(5, 1, b, 3), A.exit, A.normal), nodes) == "(<1.5.1>) exit normal\n"
    )


@pytest.mark.parametrize(
    "f,text",
    [
        (1000.0, "1.0e3"),
        (0.000425929080548906, "4.25929080548906e-4"),
        (100.0, "100.0"),
        (0.0001, "0.0001"),
        (1.5e-5, "1.5e-5"),
        (123456789.0, "123456789.0"),
        (9007199254740992.0, "9.007199254740992e15"),
        (1200.0, "1.2e3"),
        (-0.0, "-0.0"),
        (0.1, "0.1"),
        (5e-324, "5.0e-324"),
        (1.7976931348623157e308, "1.7976931348623157e308"),
    ],
)
def test_float_text_is_float_to_list_short(f, text):
    from smp.core.pretty import erl_float

    assert erl_float(f) == text


def test_funs_print_as_the_vm_prints_them():
    from smp.core.terms import ExportFun, Fun

    f = Fun(A.erl_eval, 0, bytes(16), 43, 43, 3316493, Pid(9), [1])
    assert format_dbg((A.trace, P80, A.spawn, P81, (A.erlang, A.apply, [f, []]))) == (
        "(<0.80.0>) spawn <0.81.0> as erlang:apply(#Fun<erl_eval.43.3316493>,[])\n"
    )
    assert repr(ExportFun(Atom("Foo"), A["after"], 0)) == "fun 'Foo':after/0"
    assert repr(ExportFun(Atom("\u00fc"), Atom("x@Y"), 1)) == "fun \xc3\xbc:'x@Y'/1"


def test_smp_emu_read_writes_latin1_and_takes_node_numbers(tmp_path):
    from click.testing import CliRunner

    from smp.app.cli import cli

    path = tmp_path / "t.trc"
    path.write_bytes(frame(encode((A.trace, Pid(5, 1, Atom("w@h"), 2), A["receive"], b"caf\xe9"))))
    r = CliRunner().invoke(cli, ["read", str(path), "--node-number", "w@h=8800"])
    assert r.exit_code == 0, r.output
    assert r.stdout_bytes == b'(<8800.5.1>) << <<"caf\xe9">>\n'
    r = CliRunner().invoke(cli, ["read", str(path), "--node-number", "w@h"])
    assert r.exit_code == 2


# ---------------------------------------------------------------- ~p against a real node


from erlnode import REMOTE, SPLIT, collect, estr, frames, needs_erl, node_terms, run_node, unframe  # noqa: E402

from smp.core.pretty import NodeNumbers, erl_float, fmt  # noqa: E402
from smp.core.terms import Atom, BitString, ExportFun, ImproperList, Map, Ref  # noqa: E402

PREFIXES = ["", "(<0.80.0>) << ", "x" * 37, "y" * 66, "\t(z) "]


def node_numbers_code(nodes):
    """Erlang that binds Nums to the reading node's number for each node."""
    return (
        "Nums = [begin <<131, A/binary>> = term_to_binary(N), "
        "list_to_binary(pid_to_list(binary_to_term(<<131, 88, A/binary, 0:96>>))) end"
        " || N <- ["
        + ",".join(
            "binary_to_atom(<<" + ",".join(map(str, n.name.encode("utf-8"))) + ">>, utf8)"
            for n in nodes
        )
        + "]],"
    )


def parse_numbers(blobs, nodes):
    return NodeNumbers(
        {n: int(b.decode().strip("<>").split(".")[0]) for n, b in zip(nodes, blobs, strict=False)}
    )


@needs_erl
def test_p_is_io_lib_format_byte_for_byte(tmp_path_factory):
    """~p of terms of every kind, starting at several columns, is what
    io_lib:format prints on OTP 25, byte for byte (line breaks included)."""
    batch = collect(node_terms, 500)
    tmp = tmp_path_factory.mktemp("pp")
    inp, out = tmp / "in.bin", tmp / "out.bin"
    inp.write_bytes(frames([encode(t) for t in batch]))
    code = (
        SPLIT
        + node_numbers_code(REMOTE)
        + "{ok, In} = file:read_file("
        + estr(inp)
        + "),"
        + 'Out = [list_to_binary(io_lib:format(P ++ "~p", [binary_to_term(B)])) || B <- Split(In),'
        + " P <- ["
        + ",".join(estr(p) for p in PREFIXES)
        + "]],"
        + "ok = file:write_file("
        + estr(out)
        + ", [[<<0, (byte_size(X)):32>>, X] || X <- Nums ++ Out]),"
        + "halt()."
    )
    run_node(code)
    blobs = unframe(out.read_bytes())
    nodes = parse_numbers(blobs[: len(REMOTE)], REMOTE)
    theirs = iter(blobs[len(REMOTE) :])
    for t in batch:
        for p in PREFIXES:
            assert fmt(p + "~p", [t], nodes).encode("latin-1") == next(theirs), (p, t)


LONG = [
    list(range(100)),
    (A.tag, list(range(30)), (A.inner, charlist("a string that is fairly long, isn't it?") * 2)),
    Map([(Atom("k%d" % i), (i, list(range(i)))) for i in range(12)]),
    Map([(A.key, Map([(A.nested, list(range(40)))])), (list(range(30)), A.v)]),
    bytes(range(256)),
    BitString(bytes(range(60)) + b"\x80", 481),
    [
        charlist("line one\n"),
        b"caf\xe9",
        [233, 114],
        Atom("\u00fc"),
        Atom("\U0001f600"),
        1000.0,
        0.000425929080548906,
        2**200,
        -(2**70),
        ExportFun(A.lists, A.map, 2),
    ]
    * 3,
    ImproperList(list(range(40)), A.tail),
    ImproperList(list(range(10)), (A.a, list(range(40)))),
    tuple(Ref((i, i, i)) for i in range(8)),
    [[[[[[list(range(20))]]]]]] * 3,
    (A.a, (A.b, (A.c, (A.d, (A.e, (A.f, (A.g, list(range(40))))))))),
    (A.very_long_tag_name_that_pushes_the_elements_far_to_the_right, list(range(30)), 1, 2),
]


@needs_erl
def test_p_of_long_nested_terms(tmp_path):
    inp, out = tmp_path / "in.bin", tmp_path / "out.bin"
    inp.write_bytes(frames([encode(t) for t in LONG]))
    code = (
        SPLIT
        + "{ok, In} = file:read_file("
        + estr(inp)
        + "),"
        + 'Out = [list_to_binary(io_lib:format(P ++ "~p", [binary_to_term(B)])) || B <- Split(In),'
        + " P <- ["
        + ",".join(estr(p) for p in PREFIXES)
        + "]],"
        + "ok = file:write_file("
        + estr(out)
        + ", [[<<0, (byte_size(X)):32>>, X] || X <- Out]),"
        + "halt()."
    )
    run_node(code)
    theirs = iter(unframe(out.read_bytes()))
    for t in LONG:
        for p in PREFIXES:
            assert fmt(p + "~p", [t]).encode("latin-1") == next(theirs), (p, t)


def _random_floats(n, seed=12):
    import random
    import struct as _st

    rnd = random.Random(seed)
    out = [1000.0, 0.000425929080548906, 9007199254740992.0, 2.0**53 + 2, 5e-324, 1e23, 0.1]
    while len(out) < n:
        k = rnd.randrange(3)
        if k == 0:  # any bit pattern
            f = _st.unpack(">d", rnd.getrandbits(64).to_bytes(8, "big"))[0]
        elif k == 1:  # short decimals around the fixed/scientific switch
            f = rnd.randrange(1, 10 ** rnd.randrange(1, 18)) * 10.0 ** rnd.randrange(-25, 25)
        else:  # integers near 2**53
            f = float(rnd.randrange(1, 2**60)) * rnd.choice((1, -1))
        if f == f and f not in (float("inf"), float("-inf")):
            out.append(f)
    return out


@needs_erl
def test_float_printing_is_float_to_list_short(tmp_path):
    floats = _random_floats(30000)
    out, inp = tmp_path / "out.bin", tmp_path / "in.bin"
    inp.write_bytes(encode(floats))
    code = (
        "{ok, In} = file:read_file("
        + estr(inp)
        + "),"
        + "ok = file:write_file("
        + estr(out)
        + ', lists:join(" ", '
        "[float_to_list(F, [short]) || F <- binary_to_term(In)])), halt()."
    )
    run_node(code)
    theirs = out.read_text().split(" ")
    bad = [
        (f, e, t) for f, e, t in zip(floats, map(erl_float, floats), theirs, strict=False) if e != t
    ]
    assert not bad, bad[:10]


# ---------------------------------------------------------------- dbg:trace_client vs smp-emu read

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from smp.core.terms import Fun, Pid, Port  # noqa: E402

WRITER = r"""
F = PATH,
Big = lists:seq(1, 60),
Terms = [#{a => 1, "str" => <<"bin">>, 1.5 => [x], 2 => two},
         maps:from_list([{N, {N, lists:seq(1, N)}} || N <- lists:seq(1, 14)]),
         <<1,2,3:5>>, <<"caf", 233>>, <<"caf", 233/utf8>>, [233,114], 'ü', '\x{1F600}',
         "latin-1: café", "unicode: \x{1F600}", <<"line\nbreak">>, make_ref(),
         1 bsl 100, -(1 bsl 70), 1000.0, 0.000425929080548906, 3.14159, -0.0, 1.0e300,
         fun lists:map/2, fun(X) -> {X, Big} end,
         {deep, [{nested, lists:seq(1, 40)}, #{k => lists:seq(1, 30)}, <<0:800>>]},
         self(), hd(erlang:ports()), list_to_tuple(lists:seq(1, 30)), [a | b], <<>>, [], {}, #{},
         lists:duplicate(5, {tagged_tuple_with_a_long_name, lists:seq(1, 12), "text", 2.5}),
         [{K, V} || {K, V} <- [{'after', 1}, {'A b', 2}, {'a\nb', 3}]]],
Recv = spawn(fun R() -> receive stop -> ok; _ -> R() end end),
Sender = spawn(fun() -> receive go -> ok end,
                        [Recv ! T || T <- Terms],
                        lists:reverse(Big),
                        Kid = spawn(fun() -> receive after 10 -> lists:reverse("abc") end end),
                        link(Kid),
                        Recv ! {kid, Kid},
                        Recv ! stop,
                        receive after 50 -> ok end end),
{ok, _} = dbg:tracer(port, dbg:trace_port(file, F)),
{ok, _} = dbg:tp(lists, reverse, 1, [{'_', [], [{return_trace}]}]),
{ok, _} = dbg:p(Sender, [s, procs, c, timestamp]),
{ok, _} = dbg:p(Recv, [r]),
MRef = monitor(process, Sender),
Sender ! go,
receive {'DOWN', MRef, _, _, _} -> ok end,
ok = dbg:flush_trace_port(), dbg:stop(),
halt().
"""

READER = r"""
Client = dbg:trace_client(file, PATH),
MRef = monitor(process, Client),
receive {'DOWN', MRef, _, _, _} -> ok after 60000 -> halt(3) end,
Nums = [begin <<131, A/binary>> = term_to_binary(N),
              pid_to_list(binary_to_term(<<131, 88, A/binary, 0:96>>)) end || N <- NODES],
ok = file:write_file(NUMS, lists:join("\n", Nums)),
halt().
"""


def _atom_code(a):
    return "binary_to_atom(<<" + ",".join(map(str, a.name.encode("utf-8"))) + ">>, utf8)"


def dbg_text_of_node(path, nodes, tmp):
    """What a fresh node's dbg:trace_client(file, Path) prints, and the number
    that node has for each of ``nodes``."""
    nums = tmp / "nums.txt"
    code = (
        READER.replace("NUMS", estr(nums))
        .replace("PATH", estr(path))
        .replace("NODES", "[" + ",".join(map(_atom_code, nodes)) + "]")
    )
    text = run_node(code)
    numbers = {}
    if nodes:
        for node, s in zip(nodes, nums.read_text(encoding="latin-1").split("\n"), strict=False):
            numbers[node] = int(s.strip("<>").split(".")[0])
    return text, numbers


def smp_emu_read(path, numbers):
    args = [sys.executable, "-c", "from smp.app.cli import main; main()", "read", str(path)]
    for node, n in numbers.items():
        args += ["--node-number", f"{node.name}={n}"]
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    r = subprocess.run(args, capture_output=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout


def _first_difference(a: bytes, b: bytes) -> str:
    la, lb = a.split(b"\n"), b.split(b"\n")
    for i, (x, y) in enumerate(zip(la, lb, strict=False)):
        if x != y:
            return f"line {i + 1}:\n node: {x!r}\n  smp: {y!r}"
    return f"{len(la)} lines vs {len(lb)} lines"


@needs_erl
def test_dbg_text_of_a_named_nodes_trace_file(tmp_path):
    """A trace file written by a real named node (maps, funs of spawn with procs,
    bit strings, refs, bignums, floats, latin-1 and unicode text, long nested
    terms, call/return_from): smp-emu read prints what dbg:trace_client prints."""
    path = tmp_path / "node.trc"
    name = f"smpw{os.getpid()}"
    run_node(WRITER.replace("PATH", estr(path)), args=("-sname", name))
    terms = list(read_trace(path))
    writer = next(t[1].node for t in terms if type(t) is tuple and type(t[1]) is Pid)
    assert writer.name.startswith(name + "@")
    assert len(terms) > 40
    theirs, numbers = dbg_text_of_node(path, [writer], tmp_path)
    assert any(type(t[4]) is tuple and type(t[4][2][0]) is Fun for t in terms if t[2] is A.spawn), (
        "no spawn(fun ...) trace"
    )
    ours = smp_emu_read(path, numbers)
    assert ours == theirs, _first_difference(theirs, ours)


@needs_erl
def test_dbg_text_of_our_trace_file(tmp_path):
    """Our trace file, with every kind of term and ids of other nodes: the same."""
    path = tmp_path / "ours.trc"
    batch = collect(node_terms, 150)
    remote = Pid(7, 3, REMOTE[0], 5)
    msgs = []
    for i, t in enumerate(batch):
        p = Pid(80 + i % 3) if i % 4 else remote
        msgs.append(
            [
                (A.trace, p, A.send, t, Pid(81)),
                (A.trace_ts, p, A["receive"], t, (1700, i, 345)),
                (A.trace, p, A.call, (A.m, A.f, [t, i])),
                (A.trace, p, A.return_from, (A.m, A.f, 2), t),
                (A.trace, p, A.spawn, Pid(90), (A.erlang, A.apply, [t, []])),
                (A.trace, p, A.link, Port(3, REMOTE[1], 2)),
                (A.trace_ts, p, A.exit, t, (1, 2, 3)),
                (A.seq_trace, i, (A.send, (0, i), p, Pid(81), t)),
                (A.seq_trace, i, (A.print, (0, i), p, Pid(81), t), (1, 2, i)),
            ][i % 9]
        )
    msgs.append((A.drop, 42))
    with FileTracePort(path) as port:
        for m in msgs:
            port.write(encode(m))
    theirs, numbers = dbg_text_of_node(path, REMOTE, tmp_path)
    ours = smp_emu_read(path, numbers)
    assert ours == theirs, _first_difference(theirs, ours)
