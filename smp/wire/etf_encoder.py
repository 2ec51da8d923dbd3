"""The encoder of the external term format (``term_to_binary``, the VM's
``enc_term_int`` in ``external.c``): one encoder per minor version and id
encoding, made by :func:`_make_encoder`, whose closures write a term at the
end of a ``bytearray``; it recurses less than 64 levels deep and goes on
with an explicit stack below that, up to ``max_depth``.
:func:`smp.wire.etf.encode` is its entry (the version byte, compression).
"""

from __future__ import annotations

import math
import struct
from typing import Callable, Protocol

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
from smp.wire.etf_tags import (
    _S_H,
    _S_I,
    _S_II,
    _S_III,
    _S_QI,
    ATOM_EXT,
    ATOM_UTF8_EXT,
    LARGE_BIG_EXT,
    NEW_REFERENCE_EXT,
    NEWER_REFERENCE_EXT,
    NIL_EXT,
    SMALL_ATOM_UTF8_EXT,
    SMALL_BIG_EXT,
    SMALL_INTEGER_EXT,
    SMALL_TUPLE_EXT,
    _S_d,
    _S_i,
)
from smp.wire.limits import MAX_DEPTH

_pack_I = _S_I.pack
_pack_i = _S_i.pack
_pack_d = _S_d.pack
_pack_III = _S_III.pack
_pack_II = _S_II.pack

# Pre-built small encodings.
_SMALL_INT = [bytes((SMALL_INTEGER_EXT, i)) for i in range(256)]
_SMALL_TUPLE = [bytes((SMALL_TUPLE_EXT, i)) for i in range(256)]
_NIL = bytes((NIL_EXT,))


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
