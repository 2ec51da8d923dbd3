"""Erlang External Term Format (ETF) codec, pure Python: the whole format
of OTP 25, both directions.

``encode(term)`` is what ``term_to_binary(Term, [{minor_version, 2}])`` writes
on OTP 25 for the same term (UTF-8 atoms, ``NEW_PID_EXT``, ``NEW_PORT_EXT``
(``V4_PORT_EXT`` for numbers of more than 28 bits, as the VM), ``NEWER_REFERENCE_EXT``,
``NEW_FLOAT_EXT``, byte lists as ``STRING_EXT``, ``MAP_EXT``, ``NEW_FUN_EXT``,
``EXPORT_EXT``, ``BIT_BINARY_EXT``, ``SMALL_BIG_EXT``/``LARGE_BIG_EXT``);
options give ``minor_version`` 1 and 0 (``ATOM_EXT`` latin-1 atoms,
``FLOAT_EXT``), ``compressed`` terms (tag 80, zlib) and the pre-OTP 23 id
encodings (``PID_EXT``, ``PORT_EXT``, ``REFERENCE_EXT``, ``NEW_REFERENCE_EXT``).
``decode(data)`` reads all of these, every atom tag (``ATOM_EXT``,
``SMALL_ATOM_EXT``, ``ATOM_UTF8_EXT``, ``SMALL_ATOM_UTF8_EXT``) included.

Python <-> Erlang mapping (see :mod:`smp.core.terms`):

* ``Atom`` -> atom; ``int`` -> integer (small or big); ``float`` -> float
  (``nan``/``inf`` have no Erlang form and are refused);
* ``tuple`` -> tuple; ``list`` -> proper list; ``ImproperList`` -> improper
  list; ``bytes``/``bytearray``/``memoryview`` -> binary (decoded as
  ``bytes``); ``BitString`` -> bit string; ``Map`` -> map;
* ``Pid``/``Port``/``Ref`` -> pid/port/reference; ``Fun`` -> local fun,
  ``ExportFun`` -> ``fun M:F/A``.

A map's pairs are written in the order of its keys (``Map`` keeps Erlang's
order), which is what the VM writes for maps of up to 32 keys; a larger map
is a hash trie in the VM, written in hash order, which this codec does not
reproduce (the node reads either order).

A Python ``bool`` is refused (booleans are ``Atom('true')``/``Atom('false')``
in this project), as are ``str`` (use ``Atom``, ``charlist`` or ``bytes``) and
``dict`` (use ``Map``): ``encode`` raises :class:`TypeError` naming the
offending value for anything it cannot represent (including out-of-range
pid/port/ref fields and nan/inf).

Neither direction recurses in Python: the decoder keeps each compound term
it is filling as a frame on a list, and the encoder goes on with an explicit
stack below 64 levels.  Both refuse a term nested deeper than ``max_depth``
(:mod:`smp.wire.limits`, 10,000 levels: ``encode`` raises ``ValueError``,
``decode`` a ``DecodeError``), so what one writes the other reads; a
compressed term whose header announces more than ``max_inflate`` bytes is a
``DecodeError`` before anything is inflated, and inflation never goes past
what the header announces.

Decoding errors raise :class:`smp.core.errors.DecodeError` whose ``offset`` is the
byte offset in ``data`` of the offending byte (for a compressed term, the
offset inside the decompressed payload, as the message says).  ``FUN_EXT``
(funs of nodes before R8, refused by OTP 23 and later) and
distribution-header atom cache refs are reported as ``DecodeError`` naming
the tag, as is a map with a repeated key.  Decoding ``LIST_EXT`` whose tail is
itself a list joins the two (Erlang semantics), so ``[1|[2]]`` decodes as
``[1, 2]``.
"""

from __future__ import annotations

import math
import struct
import zlib
from typing import Any, Callable, Protocol

from smp.core.errors import DecodeError
from smp.core.terms import (
    Atom,
    BitString,
    ExportFun,
    Fun,
    ImproperList,
    Map,
    Pid,
    Port,
    Ref,
    Term,
)
from smp.wire.limits import MAX_DEPTH, MAX_INFLATE

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
_S_FUN = struct.Struct(">IB16sII")
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


def _node_check(node: object) -> None:
    if type(node) is not Atom:
        raise TypeError(f"node of a pid/port/ref must be an Atom, not {node!r}")


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


def _enc_binary(t: bytes | bytearray | memoryview, out: bytearray) -> None:
    n = len(t) if type(t) is not memoryview else t.nbytes
    if n >= 0x100000000:
        raise TypeError(f"binary of {n} bytes is too large for BINARY_EXT")
    out += b"m"
    out += _pack_I(n)
    out += t


def _enc_bits(t: BitString, out: bytearray) -> None:
    data = t.data
    if len(data) >= 0x100000000:
        raise TypeError(f"bit string of {len(data)} bytes is too large for BIT_BINARY_EXT")
    out += b"M"
    out += _pack_I(len(data))
    out.append(t.size % 8)
    out += data


def _unencodable(t: object) -> str:
    if type(t) is bool:
        return (
            f"a Python bool ({t!r}) is not an Erlang term: "
            f"use Atom('true')/Atom('false') (or int) explicitly"
        )
    if type(t) is str:
        return f"a Python str is not an Erlang term: {t!r} (use Atom, charlist or bytes)"
    if type(t) is dict:
        return f"a Python dict is not an Erlang term: {t!r} (use smp.core.terms.Map)"
    return f"not an Erlang term: {t!r} (type {type(t).__name__})"


_INT_ONLY = {int}


#: how deep the encoder recurses before it goes on with an explicit stack
_SHALLOW = 64


class _FunEnd:
    """On the deep encoder's stack: a fun's size word, at ``at`` in the
    output, is to be written once its body is."""

    __slots__ = ("at",)

    def __init__(self, at: int) -> None:
        self.at = at


class _Encoder(Protocol):
    """An encoder: writes ``t``, ``d`` compound terms deep, at the end of ``out``."""

    def __call__(self, t: Term, out: bytearray, d: int = 0) -> None: ...


def _make_encoder(minor: int, old_ids: bool, max_depth: int = MAX_DEPTH) -> _Encoder:
    """An encoder writing what term_to_binary(T, [{minor_version, Minor}])
    writes on OTP 25 (old_ids: PID_EXT, PORT_EXT and (NEW_)REFERENCE_EXT, as
    nodes before OTP 23 wrote them); a term nested deeper than ``max_depth``
    is a ``ValueError``."""
    atom_cache: dict[Atom, bytes] = {}
    # a pid keeps the default encoding only (its node atom's encoding
    # depends on the minor version)
    pid_cached = minor == 2 and not old_ids

    def atom_bytes(a: Atom) -> bytes:
        name = a.name
        enc = None
        if minor < 2:
            try:
                raw = name.encode("latin-1")
                enc = bytes((ATOM_EXT,)) + _S_H.pack(len(raw)) + raw
            except UnicodeEncodeError:
                pass
        if enc is None:
            raw = name.encode("utf-8")
            n = len(raw)
            if n < 256:
                enc = bytes((SMALL_ATOM_UTF8_EXT, n)) + raw
            else:
                enc = bytes((ATOM_UTF8_EXT,)) + _S_H.pack(n) + raw
        atom_cache[a] = enc
        return enc

    def node_bytes(node: Atom) -> bytes:
        try:
            return atom_cache[node]
        except KeyError:
            _node_check(node)
            return atom_bytes(node)

    def enc_pid(t: Pid, out: bytearray) -> None:
        try:
            if old_ids:
                if not (
                    0 <= t.creation <= 3 and 0 <= t.number < 1 << 15 and 0 <= t.serial < 1 << 13
                ):
                    raise struct.error
                tail = _pack_II(t.number, t.serial) + bytes((t.creation,))
            else:
                tail = _pack_III(t.number, t.serial, t.creation)
        except (struct.error, TypeError):
            raise TypeError(
                f"pid fields out of range: {t!r} (number={t.number!r}, "
                f"serial={t.serial!r}, creation={t.creation!r})"
            ) from None
        node = node_bytes(t.node)
        out += b"g" if old_ids else b"X"
        out += node
        out += tail

    def enc_port(t: Port, out: bytearray) -> None:
        num = t.number
        try:
            if old_ids:
                if not (0 <= t.creation <= 3 and 0 <= num < 1 << 28):
                    raise struct.error
                tag, tail = b"f", _pack_I(num) + bytes((t.creation,))
            elif type(num) is int and 0 <= num < 0x10000000:
                # the VM writes V4_PORT_EXT for numbers beyond 28 bits
                tag, tail = b"Y", _pack_II(num, t.creation)
            else:
                tag, tail = b"x", _S_QI.pack(num, t.creation)
        except (struct.error, TypeError):
            raise TypeError(
                f"port fields out of range: {t!r} (number={t.number!r}, creation={t.creation!r})"
            ) from None
        node = node_bytes(t.node)
        out += tag
        out += node
        out += tail

    def enc_ref(t: Ref, out: bytearray) -> None:
        ids = t.ids
        n = len(ids)
        if not 1 <= n <= 0xFFFF:
            raise TypeError(f"reference must have 1..65535 id words: {t!r}")
        try:
            words = struct.pack(">%dI" % n, *ids)
            if old_ids:
                if not (0 <= t.creation <= 3 and n <= 3 and 0 <= ids[0] < 1 << 18):
                    raise struct.error
                cre = bytes((t.creation,))
            else:
                cre = _pack_I(t.creation)
        except (struct.error, TypeError):
            raise TypeError(
                f"reference fields out of range: {t!r} (ids={ids!r}, creation={t.creation!r})"
            ) from None
        node = node_bytes(t.node)
        if old_ids and n == 1:
            out += b"e"
            out += node
            out += words + cre
            return
        out += bytes((NEW_REFERENCE_EXT if old_ids else NEWER_REFERENCE_EXT,)) + _S_H.pack(n)
        out += node
        out += cre + words

    def enc_float(t: float, out: bytearray) -> None:
        if not math.isfinite(t):
            raise TypeError(f"float {t!r} has no Erlang representation")
        if minor == 0:
            out += b"c"
            out += (b"%.20e" % t).ljust(31, b"\0")
        else:
            out += b"F"
            out += _pack_d(t)

    # The compound terms.  Each takes ``d``, the number of compound terms
    # around it; below _SHALLOW levels they recurse (the fast path of every
    # real term), deeper ones are written by enc_deep, without recursion.

    def improper_parts(t: ImproperList) -> tuple[list[Term], Term]:
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
        return elements, tail

    def enc_improper(t: ImproperList, out: bytearray, d: int) -> None:
        elements, tail = improper_parts(t)
        out += b"l"
        out += _pack_I(len(elements))
        d += 1
        for e in elements:
            enc(e, out, d)
        enc(tail, out, d)

    def list_head(t: list[Term], out: bytearray) -> bool:
        """Write a list that is NIL or a STRING_EXT (True), or the header
        of its LIST_EXT (False: the elements and NIL are to follow)."""
        n = len(t)
        if n == 0:
            out += _NIL
            return True
        if n < 65536:
            raw: bytes | None
            try:
                raw = bytes(t)
            except (TypeError, ValueError):
                raw = None
            if raw is not None and set(map(type, t)) == _INT_ONLY:
                out += b"k"
                out += _S_H.pack(n)
                out += raw
                return True
        out += b"l"
        out += _pack_I(n)
        return False

    def enc_list(t: list[Term], out: bytearray, d: int) -> None:
        if list_head(t, out):
            return
        d += 1
        for e in t:
            enc(e, out, d)
        out += _NIL

    def enc_map(t: Map, out: bytearray, d: int) -> None:
        items = t._items
        out += b"t"
        out += _pack_I(len(items))
        d += 1
        for k, v in items:
            enc(k, out, d)
            enc(v, out, d)

    def fun_head(t: Fun) -> bytes:
        try:
            head = struct.pack(">B16sII", t.arity, t.uniq, t.index, len(t.free))
        except struct.error:
            raise TypeError(
                f"fun fields out of range: arity={t.arity!r}, index={t.index!r}"
            ) from None
        if type(t.pid) is not Pid:
            raise TypeError(f"the pid of a fun must be a Pid, not {t.pid!r}")
        return head

    def enc_fun(t: Fun, out: bytearray, d: int) -> None:
        body = bytearray(fun_head(t))
        d += 1
        enc(t.module, body, d)
        enc(t.old_index, body, d)
        enc(t.old_uniq, body, d)
        enc(t.pid, body, d)
        for e in t.free:
            enc(e, body, d)
        out += b"p"
        out += _pack_I(len(body) + 4)
        out += body

    def enc_deep(t: Term, out: bytearray, d: int) -> None:
        """Write ``t``, ``d`` levels deep, with an explicit stack."""
        stack: list[tuple[Term, int]] = [(t, d)]
        pop = stack.pop
        push = stack.append
        while stack:
            t, d = pop()
            tp = type(t)
            if tp is _FunEnd:  # the fun whose size word is at t.at is done
                out[t.at : t.at + 4] = _pack_I(len(out) - t.at)
                continue
            if tp is tuple or tp is Map:
                if not t:  # no elements: no level, as the decoder counts
                    out += _SMALL_TUPLE[0] if tp is tuple else b"t\0\0\0\0"
                    continue
            elif tp not in compound:
                enc(t, out, d)  # not compound: no recursion
                continue
            elif tp is list and list_head(t, out):
                continue
            if d >= max_depth:
                raise ValueError(
                    f"term nested deeper than {max_depth} levels (over the max_depth "
                    f"limit): not encoded"
                )
            d += 1
            if tp is tuple:
                n = len(t)
                if n < 256:
                    out += _SMALL_TUPLE[n]
                else:
                    out += b"i"
                    out += _pack_I(n)
                children = list(t)
            elif tp is list:
                push(([], d))
                children = t
            elif tp is ImproperList:
                elements, tail = improper_parts(t)
                out += b"l"
                out += _pack_I(len(elements))
                push((tail, d))
                children = elements
            elif tp is Map:
                out += b"t"
                out += _pack_I(len(t._items))
                children = [x for kv in t._items for x in kv]
            else:  # Fun
                head = fun_head(t)
                out += b"p"
                push((_FunEnd(len(out)), d))
                out += b"\0\0\0\0"
                out += head
                children = [t.module, t.old_index, t.old_uniq, t.pid, *t.free]
            for e in reversed(children):
                push((e, d))

    def enc_export(t: ExportFun, out: bytearray) -> None:
        out += b"q"
        enc(t.module, out)
        enc(t.function, out)
        out += _SMALL_INT[t.arity]

    # the encoders of the leaves and of the compound terms by the type they
    # take (a dict cannot tie each value's argument type to its key: Term)
    dispatch: dict[type, Callable[[Term, bytearray], None]] = {
        float: enc_float,
        bytes: _enc_binary,
        bytearray: _enc_binary,
        memoryview: _enc_binary,
        Port: enc_port,
        Ref: enc_ref,
        BitString: _enc_bits,
        ExportFun: enc_export,
    }
    if not pid_cached:
        dispatch[Pid] = enc_pid
    compound: dict[type, Callable[[Term, bytearray, int], None]] = {
        list: enc_list,
        ImproperList: enc_improper,
        Map: enc_map,
        Fun: enc_fun,
    }

    def enc(t: Term, out: bytearray, d: int = 0) -> None:
        tp = type(t)
        if tp is Atom:
            try:
                out += atom_cache[t]
            except KeyError:
                out += atom_bytes(t)
        elif tp is tuple:
            if d >= _SHALLOW:
                enc_deep(t, out, d)
                return
            n = len(t)
            if n < 256:
                out += _SMALL_TUPLE[n]
            else:
                out += b"i"
                out += _pack_I(n)
            for e in t:
                # an atom or an encoded pid inline: no call for the commonest
                # elements of a trace tuple (enc's own branches, unrolled)
                te = type(e)
                if te is Atom and e in atom_cache:
                    out += atom_cache[e]
                elif te is Pid and pid_cached and e._etf is not None:
                    out += e._etf
                else:
                    enc(e, out, d + 1)
        elif tp is int:
            if 0 <= t < 256:
                out += _SMALL_INT[t]
            elif -2147483648 <= t <= 2147483647:
                out += b"b"
                out += _pack_i(t)
            else:
                _enc_big(t, out)
        elif tp is Pid and pid_cached:
            b = t._etf  # pids are interned and immutable: encoded once
            if b is None:
                tmp = bytearray()
                enc_pid(t, tmp)
                b = bytes(tmp)
                object.__setattr__(t, "_etf", b)
            out += b
        else:
            f = dispatch.get(tp)
            if f is not None:
                f(t, out)
                return
            g = compound.get(tp)
            if g is None:
                raise TypeError(_unencodable(t))
            if d >= _SHALLOW:
                enc_deep(t, out, d)
            else:
                g(t, out, d)

    return enc


_encoders: dict[tuple[int, bool], _Encoder] = {}


def _encoder(minor: int, old_ids: bool) -> _Encoder:
    key = (minor, old_ids)
    e = _encoders.get(key)
    if e is None:
        if minor not in (0, 1, 2):
            raise ValueError(f"minor_version must be 0, 1 or 2, not {minor!r}")
        e = _encoders[key] = _make_encoder(minor, bool(old_ids))
    return e


_enc = _encoder(2, False)


def encode(
    term: Term, *, minor_version: int = 2, compressed: bool | int = False, old_ids: bool = False
) -> bytes:
    """Return the external term format of ``term`` (starts with byte 131).

    With no options it is ``term_to_binary(Term, [{minor_version, 2}])``;
    ``minor_version=1`` is OTP 25's ``term_to_binary(Term)`` (latin-1 atoms as
    ``ATOM_EXT``), ``0`` also writes floats as ``FLOAT_EXT`` text.
    ``compressed=True`` (zlib level 6) or a level 0..9 is
    ``term_to_binary(Term, [{compressed, Level}])``: tag 80, kept only when
    the deflated term is at least 5 bytes shorter, as the VM keeps it.
    ``old_ids=True`` writes pids, ports and refs in the encodings of nodes
    before OTP 23 (``PID_EXT``, ``PORT_EXT``, ``REFERENCE_EXT`` and
    ``NEW_REFERENCE_EXT``), which hold only what those nodes had: creation
    0..3, pid numbers below 2**15 and serials below 2**13, port numbers below
    2**28, refs of up to 3 words whose first is below 2**18.

    Raises ``TypeError`` naming the value for anything not representable,
    and ``ValueError`` for a term nested deeper than the ``max_depth`` of
    :mod:`smp.wire.limits` (which ``decode`` would refuse).
    """
    out = bytearray(b"\x83")
    if minor_version == 2 and not old_ids:
        _enc(term, out)
    else:
        _encoder(minor_version, old_ids)(term, out)
    if compressed is not False and compressed is not None:
        level = 6 if compressed is True else compressed
        if type(level) is not int or not 0 <= level <= 9:
            raise ValueError(f"compression level must be 0..9, not {compressed!r}")
        if level:
            payload = bytes(out[1:])
            packed = zlib.compress(payload, level)
            if len(packed) <= len(payload) - 5:
                return b"\x83\x50" + _pack_I(len(payload)) + packed
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
    ATOM_CACHE_REF: "ATOM_CACHE_REF (distribution header atom cache)",
    FUN_EXT: "FUN_EXT (funs of nodes before OTP R8, refused since OTP 23)",
    COMPRESSED: "COMPRESSED (nested)",
}


_ATOM_TAGS = frozenset((SMALL_ATOM_UTF8_EXT, SMALL_ATOM_EXT, ATOM_UTF8_EXT, ATOM_EXT))


def _leaf(data: bytes, pos: int, n: int, tag: int) -> tuple[Term, int]:
    """Decode the term at ``pos`` whose tag is ``tag``, one that holds no
    other term; return ``(term, next_pos)``."""
    p = pos + 1
    if tag == SMALL_ATOM_UTF8_EXT or tag == SMALL_ATOM_EXT:
        if p >= n:
            raise _truncated("atom length", p)
        end = p + 1 + data[p]
        if end > n:
            raise _truncated("atom text", p + 1)
        return _mk_atom(data[p + 1 : end], tag == SMALL_ATOM_UTF8_EXT, p + 1), end
    if tag == SMALL_INTEGER_EXT:
        if p >= n:
            raise _truncated("SMALL_INTEGER_EXT", p)
        return data[p], p + 1
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
        return _mk_atom(data[p + 2 : end], tag == ATOM_UTF8_EXT, p + 2), end
    if tag == NIL_EXT:
        return [], p
    if tag == STRING_EXT:
        if p + 2 > n:
            raise _truncated("string length", p)
        end = p + 2 + _S_H.unpack_from(data, p)[0]
        if end > n:
            raise _truncated("STRING_EXT characters", p + 2)
        return list(data[p + 2 : end]), end
    if tag == BINARY_EXT:
        if p + 4 > n:
            raise _truncated("binary length", p)
        end = p + 4 + _S_I.unpack_from(data, p)[0]
        if end > n:
            raise _truncated("binary data", p + 4)
        return bytes(data[p + 4 : end]), end
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
    if tag == BIT_BINARY_EXT:
        if p + 5 > n:
            raise _truncated("bit string header", p)
        size = _S_I.unpack_from(data, p)[0]
        bits = data[p + 4]
        end = p + 5 + size
        if end > n:
            raise _truncated("bit string data", p + 5)
        raw = bytes(data[p + 5 : end])
        if size == 0 and bits == 0:
            return b"", end
        if not 1 <= bits <= 8 or size == 0:
            raise DecodeError(f"bad bit count {bits} in BIT_BINARY_EXT of {size} bytes", p + 4)
        if bits == 8:
            return raw, end
        return BitString(raw, 8 * (size - 1) + bits), end
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


def _id_body(
    data: bytes, p: int, n: int, tag: int, node: Term, count: int
) -> tuple[Pid | Port | Ref, int]:
    """The fields after the node atom of a pid, port or reference at ``p``."""
    if type(node) is not Atom:
        raise DecodeError("node of a pid/port/reference is not an atom", p)
    if tag == NEW_PID_EXT:
        if p + 12 > n:
            raise _truncated("NEW_PID_EXT", p)
        num, ser, cre = _S_III.unpack_from(data, p)
        return Pid(num, ser, node, cre), p + 12
    if tag == PID_EXT:
        if p + 9 > n:
            raise _truncated("PID_EXT", p)
        num, ser = _S_II.unpack_from(data, p)
        return Pid(num, ser, node, data[p + 8]), p + 9
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
    if tag == PORT_EXT:
        if p + 5 > n:
            raise _truncated("PORT_EXT", p)
        return Port(_S_I.unpack_from(data, p)[0], node, data[p + 4]), p + 5
    if tag == REFERENCE_EXT:
        if p + 5 > n:
            raise _truncated("REFERENCE_EXT", p)
        return Ref((_S_I.unpack_from(data, p)[0],), node, data[p + 4]), p + 5
    # NEWER_REFERENCE_EXT / NEW_REFERENCE_EXT
    csize = 4 if tag == NEWER_REFERENCE_EXT else 1
    end = p + csize + 4 * count
    if end > n:
        raise _truncated("reference body", p)
    cre = _S_I.unpack_from(data, p)[0] if csize == 4 else data[p]
    ids = struct.unpack_from(">%dI" % count, data, p + csize)
    return Ref(ids, node, cre), end


_ID_TAGS = frozenset(
    (NEW_PID_EXT, PID_EXT, NEW_PORT_EXT, PORT_EXT, V4_PORT_EXT, REFERENCE_EXT)
    + (NEWER_REFERENCE_EXT, NEW_REFERENCE_EXT)
)


def _export_inline(data: bytes, p: int, n: int) -> tuple[ExportFun, int] | None:
    """The usual ``EXPORT_EXT`` at ``p`` (two atoms, a small integer), which
    is no level of nesting: ``(fun, next_pos)``, or None for any other."""
    if p < n and data[p] in _ATOM_TAGS:
        module, q = _leaf(data, p, n, data[p])
        if q < n and data[q] in _ATOM_TAGS:
            function, q = _leaf(data, q, n, data[q])
            if q + 1 < n and data[q] == SMALL_INTEGER_EXT:
                return ExportFun(module, function, data[q + 1]), q + 2
    return None


# The kinds of an open compound term on the decoder's stack.  A frame is a
# list [kind, items, left, a, b]: ``left`` terms still to come into ``items``.
_K_TUPLE, _K_LIST, _K_TAIL, _K_MAP, _K_ID, _K_FUN, _K_EXPORT = range(7)


def _too_deep(max_depth: int, at: int) -> DecodeError:
    return DecodeError(f"term nested deeper than {max_depth} levels (over the max_depth limit)", at)


def _dec(data: bytes, pos: int, n: int, max_depth: int = MAX_DEPTH) -> tuple[Term, int]:
    """Decode one term at ``pos``; return ``(term, next_pos)``.

    Iterative: each compound term whose elements are being decoded is a frame
    on an explicit stack, never a Python call, so the nesting a term may have
    is ``max_depth`` (a ``DecodeError`` beyond it), not Python's recursion
    limit."""
    # a frame's items are of several types by position (above): list[Any]
    stack: list[list[Any]] = []
    push = stack.append
    value: Term
    while True:
        # ---- one term at pos: a leaf gives ``value``; a compound term
        # with elements opens a frame and goes on with its first element
        if pos >= n:
            raise _truncated("tag byte", pos)
        tag = data[pos]
        p = pos + 1
        if tag == SMALL_ATOM_UTF8_EXT and p < n and p + 1 + data[p] <= n:
            end = p + 1 + data[p]
            raw = data[p + 1 : end]
            value = _utf8_atoms.get(raw)
            if value is None:
                value = _mk_atom(raw, True, p + 1)
            pos = end
        elif tag == SMALL_INTEGER_EXT and p < n:
            value = data[p]
            pos = p + 1
        elif tag == SMALL_TUPLE_EXT or tag == LARGE_TUPLE_EXT:
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
            if arity:
                if len(stack) >= max_depth:
                    raise _too_deep(max_depth, pos)
                push([_K_TUPLE, [], arity, 0, 0])
                pos = p
                continue
            value = ()
            pos = p
        elif tag == LIST_EXT:
            if p + 4 > n:
                raise _truncated("list length", p)
            length = _S_I.unpack_from(data, p)[0]
            p += 4
            if p + length + 1 > n:
                raise _truncated(f"list of length {length}", p)
            if length or data[p] != NIL_EXT:
                if len(stack) >= max_depth:
                    raise _too_deep(max_depth, pos)
                # no elements: only the tail is to come
                push([_K_LIST, [], length, 0, 0] if length else [_K_TAIL, [], 1, p, 0])
                pos = p
                continue
            value = []
            pos = p + 1
        elif tag == MAP_EXT:
            if p + 4 > n:
                raise _truncated("map arity", p)
            arity = _S_I.unpack_from(data, p)[0]
            p += 4
            if p + 2 * arity > n:
                raise _truncated(f"map of {arity} pairs", p)
            if arity:
                if len(stack) >= max_depth:
                    raise _too_deep(max_depth, pos)
                push([_K_MAP, [], 2 * arity, pos, 0])
                pos = p
                continue
            value = Map([])
            pos = p
        elif tag in _ID_TAGS:
            count = 0
            if tag == NEWER_REFERENCE_EXT or tag == NEW_REFERENCE_EXT:
                if p + 2 > n:
                    raise _truncated("reference length", p)
                count = _S_H.unpack_from(data, p)[0]
                if count == 0:
                    raise DecodeError("reference with no id words", p)
                p += 2
            if p < n and data[p] in _ATOM_TAGS:
                node, p = _leaf(data, p, n, data[p])
                value, pos = _id_body(data, p, n, tag, node, count)
            else:  # not an atom: decoded as a term, then refused
                if len(stack) >= max_depth:
                    raise _too_deep(max_depth, pos)
                push([_K_ID, [], 1, tag, count])
                pos = p
                continue
        elif tag == NEW_FUN_EXT:
            if p + 29 > n:
                raise _truncated("NEW_FUN_EXT header", p)
            header = _S_FUN.unpack_from(data, p)
            end = p + header[0]
            if end > n:
                raise _truncated("NEW_FUN_EXT", p)
            if len(stack) >= max_depth:
                raise _too_deep(max_depth, pos)
            # a: where the fun's body starts and ends, b: the header and the
            # end the outer terms are bounded by
            push([_K_FUN, [], 4 + header[4], (p, end), (header, n)])
            n = end
            pos = p + 29
            continue
        elif tag == EXPORT_EXT:
            done = _export_inline(data, p, n)
            if done is None:
                if len(stack) >= max_depth:
                    raise _too_deep(max_depth, pos)
                push([_K_EXPORT, [], 3, p, 0])
                pos = p
                continue
            value, pos = done
        else:
            value, pos = _leaf(data, pos, n, tag)
        # ---- hand ``value`` to the innermost open term; each one it
        # completes is in turn the value handed to the one around it
        while stack:
            fr = stack[-1]
            fr[1].append(value)
            fr[2] -= 1
            if fr[2]:
                break
            kind = fr[0]
            items = fr[1]
            if kind == _K_TUPLE:
                value = tuple(items)
            elif kind == _K_LIST:
                if pos < n and data[pos] == NIL_EXT:
                    value = items
                    pos += 1
                else:  # the tail, one more term
                    fr[0], fr[2], fr[3] = _K_TAIL, 1, pos
                    break
            elif kind == _K_TAIL:
                tail = items.pop()
                ttype = type(tail)
                if ttype is list:
                    items.extend(tail)
                    value = items
                else:
                    if ttype is ImproperList:
                        items.extend(tail.elements)
                        tail = tail.tail
                    if not items:
                        raise DecodeError("LIST_EXT with no elements and a non-list tail", fr[3])
                    value = ImproperList(items, tail)
            elif kind == _K_MAP:
                m = Map(list(zip(items[0::2], items[1::2], strict=True)))
                if 2 * len(m) != len(items):
                    raise DecodeError("map with a repeated key", fr[3])
                value = m
            elif kind == _K_ID:
                value, pos = _id_body(data, pos, n, fr[3], items[0], fr[4])
            elif kind == _K_FUN:
                (p, end), (header, outer_n) = fr[3], fr[4]
                size, arity, uniq, index, _ = header
                module, old_index, old_uniq, pid = items[:4]
                if (
                    type(module) is not Atom
                    or type(old_index) is not int
                    or type(old_uniq) is not int
                    or type(pid) is not Pid
                ):
                    raise DecodeError(
                        "bad NEW_FUN_EXT (module, old index, old uniq or pid)", p + 29
                    )
                if pos != end:
                    raise DecodeError(f"NEW_FUN_EXT size {size} does not match its contents", p)
                value = Fun(module, arity, uniq, index, old_index, old_uniq, pid, items[4:])
                n = outer_n
            else:  # _K_EXPORT
                module, function, arity = items
                if (
                    type(module) is not Atom
                    or type(function) is not Atom
                    or type(arity) is not int
                    or not 0 <= arity <= 255
                ):
                    raise DecodeError("bad EXPORT_EXT (module, function or arity)", fr[3])
                value = ExportFun(module, function, arity)
            stack.pop()
        else:
            return value, pos


def _decode_at(data: bytes, offset: int, max_depth: int, max_inflate: int) -> tuple[Term, int]:
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
        if size > max_inflate:
            raise DecodeError(
                f"compressed term would inflate to {size} bytes, over the max_inflate "
                f"limit of {max_inflate} bytes",
                p + 1,
            )
        d = zlib.decompressobj()
        try:
            inner = d.decompress(memoryview(data)[p + 5 :], size + 1)
        except zlib.error as e:
            raise DecodeError(f"bad zlib data in compressed term ({e})", p + 5) from None
        if len(inner) != size:
            raise DecodeError(
                f"compressed term inflates to {len(inner)} bytes, header says {size}", p + 1
            )
        if not d.eof:
            raise DecodeError("truncated zlib stream in compressed term", p + 5)
        try:
            term, q = _dec(inner, 0, size, max_depth)
        except DecodeError as e:
            raise DecodeError(
                f"in compressed term (offset is inside the inflated data): {e.args[0]}", None
            ) from None
        if q != size:
            raise DecodeError(
                "trailing bytes inside compressed term (offset inside the inflated data)", q
            )
        return term, n - len(d.unused_data)
    return _dec(data, p, n, max_depth)


def decode_prefix(
    data: bytes | bytearray | memoryview,
    offset: int = 0,
    *,
    max_depth: int = MAX_DEPTH,
    max_inflate: int = MAX_INFLATE,
) -> tuple[Term, int]:
    """Decode the term whose version byte (131) is at ``data[offset]``.

    Returns ``(term, next_offset)``; bytes after the term are left alone, so a
    stream of concatenated ``term_to_binary`` outputs can be read in a loop.
    The version byte is required (this reads what ``encode`` writes).
    Offsets in a ``DecodeError`` are relative to the start of ``data``.
    ``max_depth`` and ``max_inflate`` are the limits of
    :mod:`smp.wire.limits`: a deeper term, or a compressed one announcing a
    larger inflated size, is a ``DecodeError`` naming the limit.
    """
    if type(data) is not bytes:
        data = bytes(data)
    return _decode_at(data, offset, max_depth, max_inflate)


def decode(
    data: bytes | bytearray | memoryview,
    *,
    max_depth: int = MAX_DEPTH,
    max_inflate: int = MAX_INFLATE,
) -> Term:
    """Decode one complete external term; all of ``data`` must be consumed.
    ``max_depth`` and ``max_inflate`` as for :func:`decode_prefix`."""
    if type(data) is not bytes:
        data = bytes(data)
    term, pos = _decode_at(data, 0, max_depth, max_inflate)
    if pos != len(data):
        raise DecodeError(f"{len(data) - pos} trailing bytes after the term", pos)
    return term
