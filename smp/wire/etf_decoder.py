"""The decoder of the external term format (``binary_to_term``, the VM's
``dec_term`` in ``external.c``): every tag of OTP 25, read without Python
recursion (each compound term being filled is a frame on a list, and a
hot loop decodes the terms that hold no other term in place), refusing a
term deeper than ``max_depth`` and a compressed term announcing more than
``max_inflate`` bytes.  :func:`smp.wire.etf.decode` and
:func:`smp.wire.etf.decode_prefix` are its entries.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

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
from smp.wire.etf_tags import (
    _S_FUN,
    _S_H,
    _S_I,
    _S_II,
    _S_III,
    _S_QI,
    ATOM_CACHE_REF,
    ATOM_EXT,
    ATOM_UTF8_EXT,
    BINARY_EXT,
    BIT_BINARY_EXT,
    COMPRESSED,
    EXPORT_EXT,
    FLOAT_EXT,
    FUN_EXT,
    INTEGER_EXT,
    LARGE_BIG_EXT,
    LARGE_TUPLE_EXT,
    LIST_EXT,
    MAP_EXT,
    NEW_FLOAT_EXT,
    NEW_FUN_EXT,
    NEW_PID_EXT,
    NEW_PORT_EXT,
    NEW_REFERENCE_EXT,
    NEWER_REFERENCE_EXT,
    NIL_EXT,
    PID_EXT,
    PORT_EXT,
    REFERENCE_EXT,
    SMALL_ATOM_EXT,
    SMALL_ATOM_UTF8_EXT,
    SMALL_BIG_EXT,
    SMALL_INTEGER_EXT,
    SMALL_TUPLE_EXT,
    STRING_EXT,
    V4_PORT_EXT,
    VERSION,
    _S_d,
    _S_i,
)
from smp.wire.limits import MAX_DEPTH

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
        f = _S_d.unpack_from(data, p)[0]
        if f - f != 0.0:  # NaN or an infinity: binary_to_term is badarg
            raise DecodeError(f"NEW_FLOAT_EXT holds {f!r}: not an Erlang float", p)
        return f, p + 8
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
            f = float(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            raise DecodeError(f"bad FLOAT_EXT text {bytes(text)!r}", p) from None
        if f - f != 0.0:  # (nan, inf: float() takes them, the node does not)
            raise DecodeError(f"bad FLOAT_EXT text {bytes(text)!r}: not an Erlang float", p)
        return f, end
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
        return Port.from_checked(num, node, cre), p + 8
    if tag == V4_PORT_EXT:
        if p + 12 > n:
            raise _truncated("V4_PORT_EXT", p)
        num, cre = _S_QI.unpack_from(data, p)
        return Port.from_checked(num, node, cre), p + 12
    if tag == PORT_EXT:
        if p + 5 > n:
            raise _truncated("PORT_EXT", p)
        return Port.from_checked(_S_I.unpack_from(data, p)[0], node, data[p + 4]), p + 5
    if tag == REFERENCE_EXT:
        if p + 5 > n:
            raise _truncated("REFERENCE_EXT", p)
        return Ref.from_checked((_S_I.unpack_from(data, p)[0],), node, data[p + 4]), p + 5
    # NEWER_REFERENCE_EXT / NEW_REFERENCE_EXT
    csize = 4 if tag == NEWER_REFERENCE_EXT else 1
    end = p + csize + 4 * count
    if end > n:
        raise _truncated("reference body", p)
    cre = _S_I.unpack_from(data, p)[0] if csize == 4 else data[p]
    ids = struct.unpack_from(">%dI" % count, data, p + csize)
    return Ref.from_checked(ids, node, cre), end


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


#: How many map keys a map may sit inside (a key holding a map whose key
#: holds a map ...).  Making a map computes its keys' equality and order
#: keys, which take time in the size of the key: without a bound a term
#: of such maps nested ``max_depth`` deep would take time in the square of
#: its size; with it, at most ``MAX_KEY_NESTING`` + 1 times its size.
MAX_KEY_NESTING = 32


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
    in_keys = 0  # open frames that are a key of the map around them
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
                if len(stack) > 1 and stack[-2][0] == _K_MAP and not len(stack[-2][1]) & 1:
                    stack[-1].append(True)  # a key of the map around it
                    in_keys += 1
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
                if len(stack) > 1 and stack[-2][0] == _K_MAP and not len(stack[-2][1]) & 1:
                    stack[-1].append(True)  # a key of the map around it
                    in_keys += 1
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
                if len(stack) > 1 and stack[-2][0] == _K_MAP and not len(stack[-2][1]) & 1:
                    stack[-1].append(True)  # a key of the map around it
                    in_keys += 1
                if in_keys > MAX_KEY_NESTING:
                    raise DecodeError(
                        f"a map inside the keys of more than {MAX_KEY_NESTING} maps "
                        "(a key holding a map whose key holds a map ...)",
                        pos,
                    )
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
                if len(stack) > 1 and stack[-2][0] == _K_MAP and not len(stack[-2][1]) & 1:
                    stack[-1].append(True)  # a key of the map around it
                    in_keys += 1
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
            if len(stack) > 1 and stack[-2][0] == _K_MAP and not len(stack[-2][1]) & 1:
                stack[-1].append(True)  # a key of the map around it
                in_keys += 1
            n = end
            pos = p + 29
            continue
        elif tag == EXPORT_EXT:
            done = _export_inline(data, p, n)
            if done is None:
                if len(stack) >= max_depth:
                    raise _too_deep(max_depth, pos)
                push([_K_EXPORT, [], 3, p, 0])
                if len(stack) > 1 and stack[-2][0] == _K_MAP and not len(stack[-2][1]) & 1:
                    stack[-1].append(True)  # a key of the map around it
                    in_keys += 1
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
            if len(stack.pop()) == 6:
                in_keys -= 1
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
