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

This module is the codec's entry; the encoder is
:mod:`smp.wire.etf_encoder`, the decoder :mod:`smp.wire.etf_decoder`, and
the tags they share are :mod:`smp.wire.etf_tags`.
"""

from __future__ import annotations

import zlib

from smp.core.errors import DecodeError
from smp.core.terms import Term
from smp.wire.etf_decoder import _decode_at
from smp.wire.etf_encoder import _enc, _encoder, _pack_I
from smp.wire.etf_tags import VERSION as VERSION
from smp.wire.limits import MAX_DEPTH, MAX_INFLATE

__all__ = ["encode", "decode", "decode_prefix", "VERSION"]


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
