"""Unit tests of the external term format codec (smp.wire.etf)."""

import math
import struct
import zlib

import pytest
from erlnode import (
    REMOTE,
    SPLIT,
    collect,
    estr,
    exact,
    frames,
    needs_erl,
    node_atoms,
    node_terms,
    run_node,
    unframe,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from smp.core.errors import DecodeError
from smp.core.terms import (
    LOCAL_NODE,
    A,
    Atom,
    BitString,
    ExportFun,
    Fun,
    ImproperList,
    Map,
    Pid,
    Port,
    Ref,
)
from smp.wire.etf import decode, decode_prefix, encode

NODE = b"\x77\x0dnonode@nohost"  # SMALL_ATOM_UTF8_EXT nonode@nohost

# Bytes written by a real OTP 25 node: term_to_binary(T, [{minor_version, 2}]).
KNOWN = [
    (Atom("ok"), b"\x83\x77\x02ok"),
    (0, b"\x83\x61\x00"),
    (255, b"\x83\x61\xff"),
    (256, b"\x83\x62\x00\x00\x01\x00"),
    (-1, b"\x83\x62\xff\xff\xff\xff"),
    (2**31, b"\x83\x6e\x04\x00\x00\x00\x00\x80"),
    (-(2**70), b"\x83\x6e\x09\x01" + b"\x00" * 8 + b"\x40"),
    (1.5, b"\x83\x46\x3f\xf8\x00\x00\x00\x00\x00\x00"),
    ((), b"\x83\x68\x00"),
    ([], b"\x83\x6a"),
    ([97, 98, 99], b"\x83\x6b\x00\x03abc"),
    ([1, 2, 300], b"\x83\x6c\x00\x00\x00\x03\x61\x01\x61\x02\x62\x00\x00\x01\x2c\x6a"),
    (ImproperList([1, 2], 3), b"\x83\x6c\x00\x00\x00\x02\x61\x01\x61\x02\x61\x03"),
    (b"hi", b"\x83\x6d\x00\x00\x00\x02hi"),
    (Pid(80), b"\x83\x58" + NODE + b"\x00\x00\x00\x50" + b"\x00" * 8),
    (Port(5), b"\x83\x59" + NODE + b"\x00\x00\x00\x05\x00\x00\x00\x00"),
    (
        Ref((3, 2, 1)),
        b"\x83\x5a\x00\x03"
        + NODE
        + b"\x00\x00\x00\x00"
        + b"\x00\x00\x00\x03\x00\x00\x00\x02\x00\x00\x00\x01",
    ),
    (
        (Atom("ok"), Pid(9)),
        b"\x83\x68\x02\x77\x02ok\x58" + NODE + b"\x00\x00\x00\x09" + b"\x00" * 8,
    ),
    (Map([(Atom("a"), 1)]), b"\x83t\x00\x00\x00\x01w\x01aa\x01"),
    (BitString(b"\x01\x02\x18", 21), b"\x83M\x00\x00\x00\x03\x05\x01\x02\x18"),
    (ExportFun(Atom("lists"), Atom("map"), 2), b"\x83qw\x05listsw\x03mapa\x02"),
    # fun(X) -> X + 1 end, made by <0.9.0> in module t2
    (
        Fun(
            Atom("t2"),
            1,
            bytes([68, 102, 170, 45, 157, 226, 187, 202, 97, 198, 43, 7, 170, 18, 50, 87]),
            0,
            0,
            0x02233551,
            Pid(9),
        ),
        bytes(
            [
                131,
                112,
                0,
                0,
                0,
                68,
                1,
                68,
                102,
                170,
                45,
                157,
                226,
                187,
                202,
                97,
                198,
                43,
                7,
                170,
                18,
                50,
                87,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                119,
                2,
                116,
                50,
                97,
                0,
                98,
                2,
                35,
                53,
                81,
                88,
                119,
                13,
            ]
        )
        + b"nonode@nohost"
        + bytes([0, 0, 0, 9] + [0] * 8),
    ),
]

# term_to_binary(T) (minor version 1) and term_to_binary(T, [{minor_version, 0}])
OLDER = [
    (Atom("caf\u00e9"), 1, b"\x83d\x00\x04caf\xe9"),
    (Atom("\U0001f600"), 1, b"\x83w\x04\xf0\x9f\x98\x80"),
    (Atom("ok"), 0, b"\x83d\x00\x02ok"),
    (1.5, 1, b"\x83F?\xf8" + b"\x00" * 6),
    (1.5, 0, b"\x83c1.50000000000000000000e+00\x00\x00\x00\x00\x00"),
]


@pytest.mark.parametrize("term,minor,data", OLDER, ids=[repr(k) for k in OLDER])
def test_known_older_minor_versions(term, minor, data):
    assert encode(term, minor_version=minor) == data
    assert decode(data) == term


def test_compressed_only_when_it_pays():
    small = (Atom("a"), 1)
    assert encode(small, compressed=True) == encode(small)
    big = [Atom("x")] * 100
    data = encode(big, compressed=True)
    assert data[:2] == b"\x83\x50" and decode(data) == big
    assert encode(big, compressed=0) == encode(big)
    with pytest.raises(ValueError):
        encode(big, compressed=10)


def test_old_id_encodings_refuse_what_old_nodes_could_not_hold():
    assert encode(Pid(5, 1), old_ids=True)[1] == 103
    assert encode(Port(5), old_ids=True)[1] == 102
    assert encode(Ref((5,)), old_ids=True)[1] == 101
    assert encode(Ref((5, 6, 7)), old_ids=True)[1] == 114
    for bad in (Pid(1 << 15), Pid(1, 0, LOCAL_NODE, 4), Port(1 << 28), Ref((1 << 18, 1, 1))):
        with pytest.raises(TypeError):
            encode(bad, old_ids=True)


def test_map_keeps_erlang_key_order_and_exact_keys():
    m = Map([(Atom("b"), 1), (1.0, 2), (1, 3), ([1], 4), ((1,), 5), (b"x", 6), (-(2**70), 7)])
    assert list(m) == [-(2**70), 1, 1.0, Atom("b"), (1,), [1], b"x"]
    assert m[1] == 3 and m[1.0] == 2 and m[[1]] == 4 and [2] not in m
    assert Map([(1, 1), (1, 2)]) == Map([(1, 2)])
    assert (
        repr(m)
        == '#{-1180591620717411303424 => 7,1 => 3,1.0 => 2,b => 1,{1} => 5,[1] => 4,<<"x">> => 6}'
    )


def test_bit_strings():
    b = BitString(b"\x01\xff", 11)
    assert b.data == b"\x01\xe0" and b.tail_bits == 3 and repr(b) == "<<1,7:3>>"
    with pytest.raises(ValueError):
        BitString(b"\x01", 8)
    assert decode(b"\x83M\x00\x00\x00\x01\x08\x07") == b"\x07"


@pytest.mark.parametrize("term,data", KNOWN, ids=[repr(k[0]) for k in KNOWN])
def test_known_encodings(term, data):
    assert encode(term) == data
    assert decode(data) == term


def test_typical_trace_tuple_round_trip():
    t = (Atom("trace_ts"), Pid(80), Atom("send"), (Atom("ping"), 3), Pid(81), (1700, 12, 345))
    assert decode(encode(t)) == t


def test_long_string_becomes_list_ext():
    lst = [1] * 65536
    data = encode(lst)
    assert data[1] == 108  # LIST_EXT, not STRING_EXT
    assert decode(data) == lst
    assert encode([1] * 65535)[1] == 107


def test_big_integers_small_and_large():
    for v in (2**64, -(2**64) + 1, 2**2100, -(2**2100)):
        data = encode(v)
        assert data[1] == (110 if abs(v).bit_length() <= 255 * 8 else 111)
        assert decode(data) == v


def test_large_tuple():
    t = tuple(range(300))
    data = encode(t)
    assert data[1] == 105
    assert decode(data) == t


def test_long_utf8_atom_uses_atom_utf8_ext():
    a = Atom("\u00e9" * 200)  # 400 bytes of UTF-8
    data = encode(a)
    assert data[1] == 118
    assert decode(data) is a


@pytest.mark.parametrize("value", ["text", True, False, None, {1: 2}, {1}, 1j, object()])
def test_unencodable_values_raise_type_error(value):
    with pytest.raises(TypeError) as ei:
        encode((Atom("x"), [value]))
    assert repr(value)[:10] in str(ei.value)


def test_bool_message_suggests_atoms():
    with pytest.raises(TypeError, match="Atom\\('true'\\)"):
        encode(True)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_refused(value):
    with pytest.raises(TypeError):
        encode(value)


def test_out_of_range_pid_refused():
    # (no such pid or reference is made, so none reaches the encoder)
    with pytest.raises(ValueError, match="Pid: number"):
        encode(Pid(2**32))
    with pytest.raises(ValueError, match=r"Ref: ids\[0\]"):
        encode(Ref((2**32,)))


def test_old_encodings_decode():
    latin = b"\x83\x64\x00\x03caf\xe9"[:-1] + b"\xe9"
    assert decode(b"\x83\x64\x00\x02ok") is Atom("ok")  # ATOM_EXT
    assert decode(b"\x83\x73\x02ok") is Atom("ok")  # SMALL_ATOM_EXT
    assert decode(b"\x83\x64\x00\x04caf\xe9") is Atom("caf\u00e9")  # latin1
    assert latin
    old_node = b"\x64\x00\x0dnonode@nohost"
    assert decode(b"\x83\x67" + old_node + b"\x00\x00\x00\x50\x00\x00\x00\x02\x00") == Pid(80, 2)
    assert decode(b"\x83\x66" + old_node + b"\x00\x00\x00\x07\x00") == Port(7)
    assert decode(b"\x83\x78" + NODE + b"\x00" * 7 + b"\x07" + b"\x00" * 4) == Port(7)
    assert decode(b"\x83\x65" + old_node + b"\x00\x00\x00\x07\x00") == Ref((7,))
    assert decode(b"\x83\x72\x00\x02" + old_node + b"\x01\x00\x00\x00\x07\x00\x00\x00\x08") == Ref(
        (7, 8), LOCAL_NODE, 1
    )
    flt = b"%.20e" % 1.5
    assert decode(b"\x83\x63" + flt + b"\x00" * (31 - len(flt))) == 1.5


def test_list_ext_with_list_tail_is_joined():
    data = b"\x83\x6c\x00\x00\x00\x01\x61\x01\x6b\x00\x01\x02"
    assert decode(data) == [1, 2]


def test_compressed_term():
    payload = encode([Atom("x")] * 100)[1:]
    data = b"\x83\x50" + struct.pack(">I", len(payload)) + zlib.compress(payload)
    assert decode(data) == [Atom("x")] * 100


def test_compressed_size_mismatch():
    payload = encode(Atom("x"))[1:]
    data = b"\x83\x50" + struct.pack(">I", len(payload) + 1) + zlib.compress(payload)
    with pytest.raises(DecodeError) as ei:
        decode(data)
    assert ei.value.offset == 2


@pytest.mark.parametrize(
    "data,offset",
    [
        (b"", 0),
        (b"\x82\x61\x01", 0),  # bad version
        (b"\x83", 1),  # missing tag
        (b"\x83\x61", 2),  # truncated small int
        (b"\x83\x68\x02\x61\x01", 5),  # tuple of 2 with only 1 element
        (b"\x83\x68\x02\x61\x01\x62\x00", 6),  # truncated INTEGER_EXT inside the tuple
        (b"\x83\x77\x05ab", 3),  # truncated atom text
        (b"\x83\x6d\x00\x00\x00\x09ab", 6),  # truncated binary data
        (b"\x83\x01", 1),  # unknown tag
        (b"\x83\x74\x00\x00\x00\x02\x61\x01\x61\x02\x61\x01\x61\x03", 1),  # repeated map key
        (b"\x83\x74\x00\x00\x00\x01\x61\x01", 8),  # map value missing
        (b"\x83\x4d\x00\x00\x00\x01\x09\xff", 6),  # bit count 9
        (b"\x83\x4d\x00\x00\x00\x02\x03\xff", 7),  # bit string data truncated
        (b"\x83\x75\x00\x00\x00\x00", 1),  # FUN_EXT: refused, as OTP 23+ refuses it
        (b"\x83\x71\x61\x01\x77\x01f\x61\x01", 2),  # EXPORT_EXT module not an atom
        (b"\x83\x61\x01\x00", 3),  # trailing byte
        (b"\x83\x58\x61\x01" + b"\x00" * 12, 4),  # pid node not an atom
    ],
)
def test_decode_errors_name_offset(data, offset):
    with pytest.raises(DecodeError) as ei:
        decode(data)
    assert ei.value.offset == offset
    assert f"offset {offset}" in str(ei.value)


def test_decode_prefix_stream():
    a, b = encode(Atom("a")), encode((1, 2))
    stream = a + b
    t1, off = decode_prefix(stream)
    assert (t1, off) == (Atom("a"), len(a))
    t2, off2 = decode_prefix(stream, off)
    assert (t2, off2) == ((1, 2), len(stream))
    with pytest.raises(DecodeError) as ei:
        decode_prefix(stream + b"\x00", off2)
    assert ei.value.offset == off2


# ------------------------------------------------------------ property tests

node_names = st.sampled_from([LOCAL_NODE, Atom("a@b"), Atom("n\u00f6de@host")])
u32 = st.integers(0, 2**32 - 1)  # as erlnode.u32
atoms = st.text(min_size=0, max_size=20).map(Atom) | st.sampled_from(
    [Atom("ok"), Atom("true"), Atom("false"), Atom("")]
)
leaves = st.one_of(
    atoms,
    st.integers(-(2**80), 2**80) | st.integers(-300, 300),
    st.floats(allow_nan=False, allow_infinity=False),
    st.binary(max_size=20),
    st.builds(Pid, u32, u32, node_names, u32),
    st.builds(Port, st.integers(0, 2**64 - 1), node_names, u32),
    st.builds(Ref, st.lists(u32, min_size=1, max_size=5).map(tuple), node_names, u32),
    st.lists(st.integers(0, 255), max_size=10),
    st.builds(
        lambda d, b: BitString(d + b"\0", 8 * len(d) + b), st.binary(max_size=5), st.integers(1, 7)
    ),
    st.builds(ExportFun, atoms, atoms, st.integers(0, 255)),
)


def _improper(args):
    elems, tail = args
    return ImproperList(elems, tail)


terms = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        st.tuples(
            st.lists(children, min_size=1, max_size=4),
            children.filter(lambda t: type(t) not in (list, ImproperList)),
        ).map(_improper),
        st.lists(st.tuples(children, children), max_size=4).map(Map),
        st.builds(
            Fun,
            atoms,
            st.integers(0, 255),
            st.binary(min_size=16, max_size=16),
            u32,
            st.integers(0, 2**27),
            st.integers(-(2**27), 2**27),
            st.builds(Pid, u32, u32, node_names, u32),
            st.lists(children, max_size=3),
        ),
    ),
    max_leaves=25,
)


def _same(a, b):
    """Equality that also tells -0.0 from 0.0 and int from float."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return struct.pack(">d", a) == struct.pack(">d", b)
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=False))
    if type(a) is ImproperList:
        return _same(a.elements, b.elements) and _same(a.tail, b.tail)
    return a == b


@settings(max_examples=400, deadline=None)
@given(terms)
def test_round_trip(term):
    data = encode(term)
    assert data[0] == 131
    back = decode(data)
    assert _same(back, term), (term, back)
    assert encode(back) == data


@settings(max_examples=200, deadline=None)
@given(terms, st.integers(0, 10**6))
def test_truncation_always_raises_decode_error(term, cut):
    data = encode(term)
    cut = cut % len(data)
    with pytest.raises(DecodeError) as ei:
        decode(data[:cut])
    assert ei.value.offset is not None and 0 <= ei.value.offset <= cut


# ------------------------------------------------------------ every kind, against a real node


VARIANTS = [
    dict(),
    dict(minor_version=1),
    dict(minor_version=0),
    dict(minor_version=1, compressed=True),
    dict(compressed=1),
]
NODE_VARIANTS = (
    "[{minor_version, 2}]",
    "[]",
    "[{minor_version, 0}]",
    "[compressed]",
    "[{compressed, 1}, {minor_version, 2}]",
)


@needs_erl
@pytest.mark.parametrize("old_ids", [False, True], ids=["new-ids", "old-ids"])
def test_every_kind_round_trips_through_a_node_byte_for_byte(tmp_path_factory, old_ids):
    """Hypothesis batches of terms of every kind: the node reads each of our
    encodings (new and old id tags, minor versions 0-2, compressed) as the
    same term, its term_to_binary in each variant is our encode byte for
    byte, and we decode each of its binaries back to the exact term."""

    strategy = node_terms
    if old_ids:
        # the old id tags hold creation 0..3 and the old widths of numbers
        small_cre = st.integers(1, 3)
        strategy = st.recursive(
            st.one_of(
                node_atoms,
                st.builds(
                    Pid,
                    st.integers(0, 2**15 - 1),
                    st.integers(0, 2**13 - 1),
                    st.sampled_from(REMOTE),
                    small_cre,
                ),
                st.builds(Port, st.integers(0, 2**28 - 1), st.sampled_from(REMOTE), small_cre),
                st.builds(
                    lambda a, rest, node, cre: Ref((a,) + rest, node, cre),
                    st.integers(0, 2**18 - 1),
                    st.lists(u32, max_size=2).map(tuple),
                    st.sampled_from(REMOTE),
                    small_cre,
                ),
                st.builds(Pid, st.integers(0, 2**15 - 1), st.integers(0, 2**13 - 1)),
                st.builds(lambda a, b, c: Ref((a, b, c)), st.integers(0, 2**18 - 1), u32, u32),
            ),
            lambda ch: st.lists(ch, max_size=4).map(tuple),
            max_leaves=8,
        )

    batch = collect(strategy, 400)
    tmp = tmp_path_factory.mktemp("etf")
    inp, out = tmp / "in.bin", tmp / "out.bin"
    ours = []
    for t in batch:
        if old_ids:
            ours.append([encode(t, old_ids=True), encode(t, old_ids=True, minor_version=0)])
        else:
            ours.append([encode(t, **v) for v in VARIANTS])
    inp.write_bytes(frames([b for group in ours for b in group]))
    per = len(ours[0])
    code = (
        SPLIT
        + "{ok, In} = file:read_file("
        + estr(inp)
        + "),"
        + "Groups = fun G([]) -> []; G(L) -> {H, R} = lists:split("
        + str(per)
        + ", L), [H | G(R)] end,"
        + "Out = [begin [T | Ts] = [binary_to_term(B) || B <- Bs],"
        " [term_to_binary([X =:= T || X <- Ts]) | [term_to_binary(T, O) || O <- ["
        + ", ".join(NODE_VARIANTS)
        + "]]] end || Bs <- Groups(Split(In))],"
        + "ok = file:write_file("
        + estr(out)
        + ", [[<<0, (byte_size(X)):32>>, X] || X <- lists:append(Out)]), halt()."
    )
    run_node(code)
    k = 1 + len(VARIANTS)
    blobs = unframe(out.read_bytes())
    assert len(blobs) == k * len(batch)
    for i, term in enumerate(batch):
        same, *theirs = blobs[k * i : k * i + k]
        assert all(x is A.true for x in decode(same)), (term, decode(same))
        for v, b in zip(VARIANTS, theirs, strict=False):
            back = decode(b)
            assert exact(back, term), (v, term, back)
            if not old_ids or not v:
                assert encode(term, **v) == b, (v, term)


# ---------------------------------------------------------------- limits (smp.wire.limits)


def _nest(depth, kind):
    t = A.x
    for i in range(depth):
        k = kind if kind != "mix" else "tlmi"[i % 4]
        t = {"t": (t,), "l": [t, 1], "m": Map([(1, t)]), "i": ImproperList([t], A.z)}[k]
    return t


@pytest.mark.parametrize("kind", ["t", "l", "m", "i", "mix"])
def test_depth_limit_is_the_same_for_encoder_and_decoder(kind):
    from smp.wire.limits import MAX_DEPTH

    ok = encode(_nest(MAX_DEPTH, kind))
    assert encode(decode(ok)) == ok  # (== on the terms would recurse)
    with pytest.raises(ValueError, match="max_depth"):
        encode(_nest(MAX_DEPTH + 1, kind))
    with pytest.raises(DecodeError, match="max_depth"):
        decode(ok, max_depth=MAX_DEPTH - 1)


def test_a_too_deep_term_names_the_limit_and_the_offset():
    data = b"\x83" + b"h\x01" * 20_000 + b"a\x01"
    with pytest.raises(DecodeError) as e:
        decode(data)
    assert e.value.offset == 1 + 2 * 10_000  # the tuple that would be one too many
    assert "max_depth" in str(e.value)
    assert decode(data, max_depth=20_000) is not None


def test_a_compressed_term_over_max_inflate_is_refused_before_inflating():
    blob = encode(bytes(1 << 20), compressed=True)
    assert decode(blob) == bytes(1 << 20)
    with pytest.raises(DecodeError, match="max_inflate") as e:
        decode(blob, max_inflate=1000)
    assert e.value.offset == 2
    # a lying header: inflation stops one byte past what it says
    lie = blob[:2] + struct.pack(">I", 100) + blob[6:]
    with pytest.raises(DecodeError, match="header says 100"):
        decode(lie)


def test_an_export_fun_or_pid_deep_in_a_term_is_no_extra_level():
    from smp.wire.limits import MAX_DEPTH

    for leaf in (ExportFun(A.m, A.f, 2), Pid(1, 0, Atom("a@b"), 3), Port(5, Atom("a@b"), 1)):
        t = leaf
        for _ in range(MAX_DEPTH):
            t = (t,)
        assert encode(decode(encode(t))) == encode(t)


@pytest.mark.parametrize(
    "data",
    [
        b"\x83F\x7f\xf8\x00\x00\x00\x00\x00\x00",  # NEW_FLOAT_EXT NaN
        b"\x83F\x7f\xf0\x00\x00\x00\x00\x00\x00",  # NEW_FLOAT_EXT +inf
        b"\x83c" + b"nan".ljust(31, b"\0"),  # FLOAT_EXT text float() takes
        b"\x83c" + b"-inf".ljust(31, b"\0"),
    ],
)
def test_a_float_that_is_no_erlang_float_is_refused_as_the_node_refuses_it(data):
    """binary_to_term is badarg for NaN and the infinities (checked on the
    node); the decoder refuses them with the byte offset, so a trace reader
    names the source (it printed 'nan is not an Erlang float' alone, or
    printed the term in one format and failed in another)."""
    with pytest.raises(DecodeError, match="not an Erlang float"):
        decode(data)
