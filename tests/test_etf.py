"""Unit tests of the external term format codec (smp.etf)."""
import math
import struct
import zlib

import pytest
from hypothesis import given, settings, strategies as st

from smp.errors import DecodeError
from smp.etf import decode, decode_prefix, encode
from smp.terms import Atom, ImproperList, LOCAL_NODE, Pid, Port, Ref

NODE = b"\x77\x0dnonode@nohost"  # SMALL_ATOM_UTF8_EXT nonode@nohost

# Bytes written by a real OTP 25 node: term_to_binary(T, [{minor_version, 2}]).
KNOWN = [
    (Atom("ok"), b"\x83\x77\x02ok"),
    (0, b"\x83\x61\x00"),
    (255, b"\x83\x61\xff"),
    (256, b"\x83\x62\x00\x00\x01\x00"),
    (-1, b"\x83\x62\xff\xff\xff\xff"),
    (2 ** 31, b"\x83\x6e\x04\x00\x00\x00\x00\x80"),
    (-(2 ** 70), b"\x83\x6e\x09\x01" + b"\x00" * 8 + b"\x40"),
    (1.5, b"\x83\x46\x3f\xf8\x00\x00\x00\x00\x00\x00"),
    ((), b"\x83\x68\x00"),
    ([], b"\x83\x6a"),
    ([97, 98, 99], b"\x83\x6b\x00\x03abc"),
    ([1, 2, 300], b"\x83\x6c\x00\x00\x00\x03\x61\x01\x61\x02\x62\x00\x00\x01\x2c\x6a"),
    (ImproperList([1, 2], 3), b"\x83\x6c\x00\x00\x00\x02\x61\x01\x61\x02\x61\x03"),
    (b"hi", b"\x83\x6d\x00\x00\x00\x02hi"),
    (Pid(80), b"\x83\x58" + NODE + b"\x00\x00\x00\x50" + b"\x00" * 8),
    (Port(5), b"\x83\x59" + NODE + b"\x00\x00\x00\x05\x00\x00\x00\x00"),
    (Ref((3, 2, 1)), b"\x83\x5a\x00\x03" + NODE + b"\x00\x00\x00\x00"
     + b"\x00\x00\x00\x03\x00\x00\x00\x02\x00\x00\x00\x01"),
    ((Atom("ok"), Pid(9)), b"\x83\x68\x02\x77\x02ok\x58" + NODE
     + b"\x00\x00\x00\x09" + b"\x00" * 8),
]


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
    assert data[1] == 108            # LIST_EXT, not STRING_EXT
    assert decode(data) == lst
    assert encode([1] * 65535)[1] == 107


def test_big_integers_small_and_large():
    for v in (2 ** 64, -(2 ** 64) + 1, 2 ** 2100, -(2 ** 2100)):
        data = encode(v)
        assert data[1] == (110 if abs(v).bit_length() <= 255 * 8 else 111)
        assert decode(data) == v


def test_large_tuple():
    t = tuple(range(300))
    data = encode(t)
    assert data[1] == 105
    assert decode(data) == t


def test_long_utf8_atom_uses_atom_utf8_ext():
    a = Atom("\u00e9" * 200)       # 400 bytes of UTF-8
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
    with pytest.raises(TypeError, match="pid"):
        encode(Pid(2 ** 32))
    with pytest.raises(TypeError, match="reference"):
        encode(Ref((2 ** 32,)))


def test_old_encodings_decode():
    latin = b"\x83\x64\x00\x03caf\xe9"[:-1] + b"\xe9"
    assert decode(b"\x83\x64\x00\x02ok") is Atom("ok")                 # ATOM_EXT
    assert decode(b"\x83\x73\x02ok") is Atom("ok")                     # SMALL_ATOM_EXT
    assert decode(b"\x83\x64\x00\x04caf\xe9") is Atom("caf\u00e9")      # latin1
    assert latin
    old_node = b"\x64\x00\x0dnonode@nohost"
    assert decode(b"\x83\x67" + old_node + b"\x00\x00\x00\x50\x00\x00\x00\x02\x00") == Pid(80, 2)
    assert decode(b"\x83\x66" + old_node + b"\x00\x00\x00\x07\x00") == Port(7)
    assert decode(b"\x83\x78" + NODE + b"\x00" * 7 + b"\x07" + b"\x00" * 4) == Port(7)
    assert decode(b"\x83\x65" + old_node + b"\x00\x00\x00\x07\x00") == Ref((7,))
    assert (decode(b"\x83\x72\x00\x02" + old_node + b"\x01\x00\x00\x00\x07\x00\x00\x00\x08")
            == Ref((7, 8), LOCAL_NODE, 1))
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


@pytest.mark.parametrize("data,offset", [
    (b"", 0),
    (b"\x82\x61\x01", 0),                 # bad version
    (b"\x83", 1),                         # missing tag
    (b"\x83\x61", 2),                     # truncated small int
    (b"\x83\x68\x02\x61\x01", 5),         # tuple of 2 with only 1 element
    (b"\x83\x68\x02\x61\x01\x62\x00", 6),  # truncated INTEGER_EXT inside the tuple
    (b"\x83\x77\x05ab", 3),               # truncated atom text
    (b"\x83\x6d\x00\x00\x00\x09ab", 6),   # truncated binary data
    (b"\x83\x01", 1),                     # unknown tag
    (b"\x83\x74\x00\x00\x00\x00", 1),     # map: unsupported
    (b"\x83\x4d\x00\x00\x00\x01\x03\xff", 1),  # bit binary: unsupported
    (b"\x83\x61\x01\x00", 3),             # trailing byte
    (b"\x83\x58\x61\x01" + b"\x00" * 12, 4),  # pid node not an atom
])
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
u32 = st.integers(0, 2 ** 32 - 1)
atoms = st.text(min_size=0, max_size=20).map(Atom) | st.sampled_from(
    [Atom("ok"), Atom("true"), Atom("false"), Atom("")])
leaves = st.one_of(
    atoms,
    st.integers(-(2 ** 80), 2 ** 80) | st.integers(-300, 300),
    st.floats(allow_nan=False, allow_infinity=False),
    st.binary(max_size=20),
    st.builds(Pid, u32, u32, node_names, u32),
    st.builds(Port, st.integers(0, 2 ** 64 - 1), node_names, u32),
    st.builds(Ref, st.lists(u32, min_size=1, max_size=5).map(tuple), node_names, u32),
    st.lists(st.integers(0, 255), max_size=10),
)


def _improper(args):
    elems, tail = args
    return ImproperList(elems, tail)


terms = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        st.tuples(st.lists(children, min_size=1, max_size=4),
                  children.filter(lambda t: type(t) not in (list, ImproperList))).map(_improper),
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
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
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
@given(terms, st.integers(0, 10 ** 6))
def test_truncation_always_raises_decode_error(term, cut):
    data = encode(term)
    cut = cut % len(data)
    with pytest.raises(DecodeError) as ei:
        decode(data[:cut])
    assert ei.value.offset is not None and 0 <= ei.value.offset <= cut
