"""Erlang External Term Format (ETF) codec, pure Python.

``encode(term)`` is what ``term_to_binary(Term, [{minor_version, 2}])`` writes
on OTP 25 for the same term (UTF-8 atoms, ``NEW_PID_EXT``, ``NEW_PORT_EXT``,
``NEWER_REFERENCE_EXT``, ``NEW_FLOAT_EXT``, byte lists as ``STRING_EXT``);
``decode(data)`` reads anything such a node writes for the term kinds of
:mod:`smp.terms`, old encodings and compressed terms (tag 80) included.

Python <-> Erlang mapping (see :mod:`smp.terms`):

* ``Atom`` -> atom; ``int`` -> integer (small or big); ``float`` -> float
  (``nan``/``inf`` have no Erlang form and are refused);
* ``tuple`` -> tuple; ``list`` -> proper list; ``ImproperList`` -> improper
  list; ``bytes``/``bytearray``/``memoryview`` -> binary (decoded as ``bytes``);
* ``Pid``/``Port``/``Ref`` -> pid/port/reference.

A Python ``bool`` is refused (booleans are ``Atom('true')``/``Atom('false')``
in this project), as is ``str`` (use ``Atom``, ``charlist`` or ``bytes``):
``encode`` raises :class:`TypeError` naming the offending value for anything it
cannot represent (including out-of-range pid/port/ref fields and nan/inf).

Decoding errors raise :class:`smp.errors.DecodeError` whose ``offset`` is the
byte offset in ``data`` of the offending byte (for a compressed term, the
offset inside the decompressed payload, as the message says).  Bit strings
(``BIT_BINARY_EXT``), maps, funs and distribution-header atom cache refs are
not term kinds of this project and are reported as ``DecodeError`` naming the
tag.  Decoding ``LIST_EXT`` whose tail is itself a list joins the two (Erlang
semantics), so ``[1|[2]]`` decodes as ``[1, 2]``.
"""
from __future__ import annotations

import math
import struct
import zlib
from typing import Any

from .errors import DecodeError
from .terms import Atom, ImproperList, Pid, Port, Ref

__all__ = ["encode", "decode", "decode_prefix", "VERSION"]

VERSION = 131

# Tags.
NEW_FLOAT_EXT = 70
BIT_BINARY_EXT = 77
COMPRESSED = 80
ATOM_CACHE_REF = 82
NEW_PID_EXT = 88
NEW_PORT_EXT = 89
NEWER_REFERENCE_EXT = 90
SMALL_INTEGER_EXT = 97
INTEGER_EXT = 98
FLOAT_EXT = 99
ATOM_EXT = 100
REFERENCE_EXT = 101
PORT_EXT = 102
PID_EXT = 103
SMALL_TUPLE_EXT = 104
LARGE_TUPLE_EXT = 105
NIL_EXT = 106
STRING_EXT = 107
LIST_EXT = 108
BINARY_EXT = 109
SMALL_BIG_EXT = 110
LARGE_BIG_EXT = 111
NEW_FUN_EXT = 112
EXPORT_EXT = 113
NEW_REFERENCE_EXT = 114
SMALL_ATOM_EXT = 115
MAP_EXT = 116
FUN_EXT = 117
ATOM_UTF8_EXT = 118
SMALL_ATOM_UTF8_EXT = 119
V4_PORT_EXT = 120

_S_I = struct.Struct(">I")
_S_i = struct.Struct(">i")
_S_d = struct.Struct(">d")
_S_H = struct.Struct(">H")
_S_III = struct.Struct(">III")
_S_II = struct.Struct(">II")
_S_QI = struct.Struct(">QI")
_pack_I = _S_I.pack
_pack_i = _S_i.pack
_pack_d = _S_d.pack
_pack_III = _S_III.pack
_pack_II = _S_II.pack

# Pre-built small encodings.
_SMALL_INT = [bytes((SMALL_INTEGER_EXT, i)) for i in range(256)]
_SMALL_TUPLE = [bytes((SMALL_TUPLE_EXT, i)) for i in range(256)]
_NIL = bytes((NIL_EXT,))

# ---------------------------------------------------------------- encoding

_atom_cache: dict[Atom, bytes] = {}


def _atom_bytes(a: Atom) -> bytes:
    raw = a.name.encode("utf-8")
    n = len(raw)
    if n < 256:
        enc = bytes((SMALL_ATOM_UTF8_EXT, n)) + raw
    else:
        enc = bytes((ATOM_UTF8_EXT,)) + _S_H.pack(n) + raw
    _atom_cache[a] = enc
    return enc


def _node_bytes(node) -> bytes:
    if type(node) is not Atom:
        raise TypeError(f"node of a pid/port/ref must be an Atom, not {node!r}")
    try:
        return _atom_cache[node]
    except KeyError:
        return _atom_bytes(node)


def _enc_big(t: int, out: bytearray) -> None:
    sign = 0
    if t < 0:
        sign = 1
        t = -t
    n = (t.bit_length() + 7) >> 3
    digits = t.to_bytes(n, "little")
    if n < 256:
        out += bytes((SMALL_BIG_EXT, n, sign))
    else:
        out += bytes((LARGE_BIG_EXT,)) + _pack_I(n) + bytes((sign,))
    out += digits


def _enc_pid(t: Pid, out: bytearray) -> None:
    try:
        tail = _pack_III(t.number, t.serial, t.creation)
    except (struct.error, TypeError):
        raise TypeError(f"pid fields out of range (0..2**32-1): {t!r} "
                        f"(number={t.number!r}, serial={t.serial!r}, creation={t.creation!r})") from None
    out += b"X"
    out += _node_bytes(t.node)
    out += tail


def _enc_port(t: Port, out: bytearray) -> None:
    num = t.number
    try:
        if type(num) is int and 0 <= num < 0x100000000:
            tail = b"Y", _pack_II(num, t.creation)
        else:
            tail = b"x", _S_QI.pack(num, t.creation)
    except (struct.error, TypeError):
        raise TypeError(f"port fields out of range: {t!r} "
                        f"(number={t.number!r}, creation={t.creation!r})") from None
    out += tail[0]
    out += _node_bytes(t.node)
    out += tail[1]


def _enc_ref(t: Ref, out: bytearray) -> None:
    ids = t.ids
    n = len(ids)
    if not 1 <= n <= 0xFFFF:
        raise TypeError(f"reference must have 1..65535 id words: {t!r}")
    try:
        body = _pack_I(t.creation) + struct.pack(">%dI" % n, *ids)
    except (struct.error, TypeError):
        raise TypeError(f"reference fields out of range (0..2**32-1): {t!r} "
                        f"(ids={ids!r}, creation={t.creation!r})") from None
    out += bytes((NEWER_REFERENCE_EXT,)) + _S_H.pack(n)
    out += _node_bytes(t.node)
    out += body


def _enc_float(t: float, out: bytearray) -> None:
    if math.isfinite(t):
        out += b"F"
        out += _pack_d(t)
    else:
        raise TypeError(f"float {t!r} has no Erlang representation")


def _enc_binary(t, out: bytearray) -> None:
    n = len(t) if type(t) is not memoryview else t.nbytes
    if n >= 0x100000000:
        raise TypeError(f"binary of {n} bytes is too large for BINARY_EXT")
    out += b"m"
    out += _pack_I(n)
    out += t


def _enc_improper(t: ImproperList, out: bytearray) -> None:
    elements = t.elements
    tail = t.tail
    # [1|[2|3]] is [1,2|3]: flatten nested improper tails as Erlang would.
    if type(tail) is ImproperList:
        elements = list(elements)
        while type(tail) is ImproperList:
            elements.extend(tail.elements)
            tail = tail.tail
    if type(tail) is list:  # cannot happen via the constructor, but be safe
        raise TypeError(f"improper list tail is a list: {t!r}")
    out += b"l"
    out += _pack_I(len(elements))
    for e in elements:
        _enc(e, out)
    _enc(tail, out)


def _enc_list(t: list, out: bytearray) -> None:
    n = len(t)
    if n == 0:
        out += _NIL
        return
    if n < 65536:
        try:
            raw = bytes(t)
        except (TypeError, ValueError):
            raw = None
        if raw is not None and set(map(type, t)) == _INT_ONLY:
            out += b"k"
            out += _S_H.pack(n)
            out += raw
            return
    out += b"l"
    out += _pack_I(n)
    enc = _enc
    for e in t:
        enc(e, out)
    out += _NIL


_INT_ONLY = {int}


def _enc_tuple(t: tuple, out: bytearray) -> None:
    n = len(t)
    if n < 256:
        out += _SMALL_TUPLE[n]
    else:
        out += b"i"
        out += _pack_I(n)
    enc = _enc
    for e in t:
        enc(e, out)


def _enc(t: Any, out: bytearray) -> None:
    tp = type(t)
    if tp is Atom:
        try:
            out += _atom_cache[t]
        except KeyError:
            out += _atom_bytes(t)
    elif tp is tuple:
        n = len(t)
        if n < 256:
            out += _SMALL_TUPLE[n]
        else:
            out += b"i"
            out += _pack_I(n)
        for e in t:
            _enc(e, out)
    elif tp is int:
        if 0 <= t < 256:
            out += _SMALL_INT[t]
        elif -2147483648 <= t <= 2147483647:
            out += b"b"
            out += _pack_i(t)
        else:
            _enc_big(t, out)
    elif tp is Pid:
        try:
            tail = _pack_III(t.number, t.serial, t.creation)
            node = _atom_cache[t.node]
        except (KeyError, struct.error, TypeError):
            _enc_pid(t, out)
            return
        out += b"X"
        out += node
        out += tail
    else:
        f = _DISPATCH.get(tp)
        if f is None:
            raise TypeError(_unencodable(t))
        f(t, out)


def _unencodable(t: Any) -> str:
    if type(t) is bool:
        return (f"a Python bool ({t!r}) is not an Erlang term: "
                f"use Atom('true')/Atom('false') (or int) explicitly")
    if type(t) is str:
        return (f"a Python str is not an Erlang term: {t!r} "
                f"(use Atom, charlist or bytes)")
    return f"not an Erlang term: {t!r} (type {type(t).__name__})"


_DISPATCH = {
    list: _enc_list,
    float: _enc_float,
    bytes: _enc_binary,
    bytearray: _enc_binary,
    memoryview: _enc_binary,
    Port: _enc_port,
    Ref: _enc_ref,
    ImproperList: _enc_improper,
}


def encode(term: Any) -> bytes:
    """Return the external term format of ``term`` (starts with byte 131).

    Raises ``TypeError`` naming the value for anything not representable.
    """
    out = bytearray(b"\x83")
    _enc(term, out)
    return bytes(out)


# ---------------------------------------------------------------- decoding

_latin1_atoms: dict[bytes, Atom] = {}
_utf8_atoms: dict[bytes, Atom] = {}
_ATOM_CACHE_MAX = 65536


def _mk_atom(raw: bytes, utf8: bool, at: int) -> Atom:
    cache = _utf8_atoms if utf8 else _latin1_atoms
    try:
        return cache[raw]
    except KeyError:
        pass
    try:
        name = raw.decode("utf-8" if utf8 else "latin-1")
        a = Atom(name)
    except (UnicodeDecodeError, ValueError) as e:
        raise DecodeError(f"invalid atom text ({e})", at) from None
    if len(cache) < _ATOM_CACHE_MAX:
        cache[raw] = a
    return a


def _truncated(what: str, at: int) -> DecodeError:
    return DecodeError(f"truncated term: {what} runs past the end of the data", at)


_TAG_NAMES = {
    BIT_BINARY_EXT: "BIT_BINARY_EXT (bit strings)",
    ATOM_CACHE_REF: "ATOM_CACHE_REF (distribution header atom cache)",
    MAP_EXT: "MAP_EXT (maps)",
    NEW_FUN_EXT: "NEW_FUN_EXT (funs)",
    EXPORT_EXT: "EXPORT_EXT (external funs)",
    FUN_EXT: "FUN_EXT (funs)",
    COMPRESSED: "COMPRESSED (nested)",
}


def _node_at(data: bytes, pos: int, n: int):
    """Decode the node atom of a pid/port/ref; returns (atom, pos)."""
    node, pos = _dec(data, pos, n)
    if type(node) is not Atom:
        raise DecodeError("node of a pid/port/reference is not an atom", pos)
    return node, pos


def _dec(data: bytes, pos: int, n: int):
    """Decode one term at ``pos``; return ``(term, next_pos)``."""
    if pos >= n:
        raise _truncated("tag byte", pos)
    tag = data[pos]
    p = pos + 1
    if tag == SMALL_ATOM_UTF8_EXT or tag == SMALL_ATOM_EXT:
        if p >= n:
            raise _truncated("atom length", p)
        end = p + 1 + data[p]
        if end > n:
            raise _truncated("atom text", p + 1)
        return _mk_atom(data[p + 1:end], tag == SMALL_ATOM_UTF8_EXT, p + 1), end
    if tag == SMALL_INTEGER_EXT:
        if p >= n:
            raise _truncated("SMALL_INTEGER_EXT", p)
        return data[p], p + 1
    if tag == SMALL_TUPLE_EXT or tag == LARGE_TUPLE_EXT:
        if tag == SMALL_TUPLE_EXT:
            if p >= n:
                raise _truncated("tuple arity", p)
            arity = data[p]
            p += 1
        else:
            if p + 4 > n:
                raise _truncated("tuple arity", p)
            arity = _S_I.unpack_from(data, p)[0]
            p += 4
        if p + arity > n:
            raise _truncated(f"tuple of arity {arity}", p)
        items = []
        append = items.append
        for _ in range(arity):
            e, p = _dec(data, p, n)
            append(e)
        return tuple(items), p
    if tag == NEW_PID_EXT or tag == PID_EXT:
        node, p = _node_at(data, p, n)
        if tag == NEW_PID_EXT:
            if p + 12 > n:
                raise _truncated("NEW_PID_EXT", p)
            num, ser, cre = _S_III.unpack_from(data, p)
            return Pid(num, ser, node, cre), p + 12
        if p + 9 > n:
            raise _truncated("PID_EXT", p)
        num, ser = _S_II.unpack_from(data, p)
        return Pid(num, ser, node, data[p + 8]), p + 9
    if tag == INTEGER_EXT:
        if p + 4 > n:
            raise _truncated("INTEGER_EXT", p)
        return _S_i.unpack_from(data, p)[0], p + 4
    if tag == ATOM_UTF8_EXT or tag == ATOM_EXT:
        if p + 2 > n:
            raise _truncated("atom length", p)
        end = p + 2 + _S_H.unpack_from(data, p)[0]
        if end > n:
            raise _truncated("atom text", p + 2)
        return _mk_atom(data[p + 2:end], tag == ATOM_UTF8_EXT, p + 2), end
    if tag == NIL_EXT:
        return [], p
    if tag == STRING_EXT:
        if p + 2 > n:
            raise _truncated("string length", p)
        end = p + 2 + _S_H.unpack_from(data, p)[0]
        if end > n:
            raise _truncated("STRING_EXT characters", p + 2)
        return list(data[p + 2:end]), end
    if tag == LIST_EXT:
        if p + 4 > n:
            raise _truncated("list length", p)
        length = _S_I.unpack_from(data, p)[0]
        p += 4
        if p + length + 1 > n:
            raise _truncated(f"list of length {length}", p)
        items = []
        append = items.append
        for _ in range(length):
            e, p = _dec(data, p, n)
            append(e)
        if p < n and data[p] == NIL_EXT:
            return items, p + 1
        tail_at = p
        tail, p = _dec(data, p, n)
        ttype = type(tail)
        if ttype is list:
            items.extend(tail)
            return items, p
        if ttype is ImproperList:
            items.extend(tail.elements)
            tail = tail.tail
        if not items:
            raise DecodeError("LIST_EXT with no elements and a non-list tail", tail_at)
        return ImproperList(items, tail), p
    if tag == BINARY_EXT:
        if p + 4 > n:
            raise _truncated("binary length", p)
        end = p + 4 + _S_I.unpack_from(data, p)[0]
        if end > n:
            raise _truncated("binary data", p + 4)
        return bytes(data[p + 4:end]), end
    if tag == NEW_FLOAT_EXT:
        if p + 8 > n:
            raise _truncated("NEW_FLOAT_EXT", p)
        return _S_d.unpack_from(data, p)[0], p + 8
    if tag == SMALL_BIG_EXT or tag == LARGE_BIG_EXT:
        if tag == SMALL_BIG_EXT:
            if p + 2 > n:
                raise _truncated("big integer header", p)
            size = data[p]
            p += 1
        else:
            if p + 5 > n:
                raise _truncated("big integer header", p)
            size = _S_I.unpack_from(data, p)[0]
            p += 4
        sign = data[p]
        if sign > 1:
            raise DecodeError(f"bad big integer sign byte {sign}", p)
        p += 1
        end = p + size
        if end > n:
            raise _truncated("big integer digits", p)
        v = int.from_bytes(data[p:end], "little")
        return (-v if sign else v), end
    if tag == NEW_PORT_EXT or tag == PORT_EXT or tag == V4_PORT_EXT:
        node, p = _node_at(data, p, n)
        if tag == NEW_PORT_EXT:
            if p + 8 > n:
                raise _truncated("NEW_PORT_EXT", p)
            num, cre = _S_II.unpack_from(data, p)
            return Port(num, node, cre), p + 8
        if tag == V4_PORT_EXT:
            if p + 12 > n:
                raise _truncated("V4_PORT_EXT", p)
            num, cre = _S_QI.unpack_from(data, p)
            return Port(num, node, cre), p + 12
        if p + 5 > n:
            raise _truncated("PORT_EXT", p)
        return Port(_S_I.unpack_from(data, p)[0], node, data[p + 4]), p + 5
    if tag == NEWER_REFERENCE_EXT or tag == NEW_REFERENCE_EXT:
        if p + 2 > n:
            raise _truncated("reference length", p)
        count = _S_H.unpack_from(data, p)[0]
        if count == 0:
            raise DecodeError("reference with no id words", p)
        node, p = _node_at(data, p + 2, n)
        csize = 4 if tag == NEWER_REFERENCE_EXT else 1
        end = p + csize + 4 * count
        if end > n:
            raise _truncated("reference body", p)
        cre = _S_I.unpack_from(data, p)[0] if csize == 4 else data[p]
        ids = struct.unpack_from(">%dI" % count, data, p + csize)
        return Ref(ids, node, cre), end
    if tag == REFERENCE_EXT:
        node, p = _node_at(data, p, n)
        if p + 5 > n:
            raise _truncated("REFERENCE_EXT", p)
        return Ref((_S_I.unpack_from(data, p)[0],), node, data[p + 4]), p + 5
    if tag == FLOAT_EXT:
        end = p + 31
        if end > n:
            raise _truncated("FLOAT_EXT", p)
        text = data[p:end].split(b"\0", 1)[0]
        try:
            return float(text.decode("ascii")), end
        except (UnicodeDecodeError, ValueError):
            raise DecodeError(f"bad FLOAT_EXT text {bytes(text)!r}", p) from None
    name = _TAG_NAMES.get(tag)
    if name is not None:
        raise DecodeError(f"unsupported term kind {name}, tag {tag}", pos)
    raise DecodeError(f"unknown term tag {tag}", pos)


def _decode_at(data: bytes, offset: int):
    n = len(data)
    if offset >= n:
        raise DecodeError("empty input: expected version byte 131", offset)
    if data[offset] != VERSION:
        raise DecodeError(f"bad version byte {data[offset]} (expected 131)", offset)
    p = offset + 1
    if p < n and data[p] == COMPRESSED:
        if p + 5 > n:
            raise _truncated("compressed term header", p + 1)
        size = _S_I.unpack_from(data, p + 1)[0]
        d = zlib.decompressobj()
        try:
            inner = d.decompress(data[p + 5:], size + 1)
        except zlib.error as e:
            raise DecodeError(f"bad zlib data in compressed term ({e})", p + 5) from None
        if len(inner) != size:
            raise DecodeError(f"compressed term inflates to {len(inner)} bytes, "
                              f"header says {size}", p + 1)
        if not d.eof:
            raise DecodeError("truncated zlib stream in compressed term", p + 5)
        try:
            term, q = _dec(inner, 0, size)
        except DecodeError as e:
            raise DecodeError(f"in compressed term (offset is inside the inflated data): "
                              f"{e.args[0]}", None) from None
        if q != size:
            raise DecodeError("trailing bytes inside compressed term "
                              "(offset inside the inflated data)", q)
        return term, n - len(d.unused_data)
    return _dec(data, p, n)


def decode_prefix(data, offset: int = 0):
    """Decode the term whose version byte (131) is at ``data[offset]``.

    Returns ``(term, next_offset)``; bytes after the term are left alone, so a
    stream of concatenated ``term_to_binary`` outputs can be read in a loop.
    The version byte is required (this reads what ``encode`` writes).
    Offsets in a ``DecodeError`` are relative to the start of ``data``.
    """
    if type(data) is not bytes:
        data = bytes(data)
    try:
        return _decode_at(data, offset)
    except RecursionError:
        raise DecodeError("term nested too deeply", offset) from None


def decode(data) -> Any:
    """Decode one complete external term; all of ``data`` must be consumed."""
    if type(data) is not bytes:
        data = bytes(data)
    try:
        term, pos = _decode_at(data, 0)
    except RecursionError:
        raise DecodeError("term nested too deeply", 0) from None
    if pos != len(data):
        raise DecodeError(f"{len(data) - pos} trailing bytes after the term", pos)
    return term
