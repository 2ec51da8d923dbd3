"""Read trace frames back, as ``dbg:trace_client`` does.

``read_trace(source)`` yields the terms of a trace file, a wrap log or an ip
trace port; ``read_trace(path, follow=True)`` keeps reading a file as it
grows, as ``dbg:trace_client(follow_file, Path)`` does.  ``merge_traces``
merges several sources by timestamp as ``ttb:format`` does.  A drop frame
(op 1) is yielded as ``(Atom('drop'), N)``, as dbg's reader does.  Errors
raise :class:`smp.core.errors.DecodeError` naming the byte offset in the file (or
in the stream read from the socket): the offset of a bad op byte, of a
truncated frame header, or of the start of a truncated or undecodable term.
"""

from __future__ import annotations

import heapq
import os
import re
import socket
import struct
import time
from typing import Any, Iterator, Optional

from smp.core.errors import DecodeError
from smp.core.terms import Atom, term_order_key
from smp.ports.traceport import DEFAULT_WRAP_COUNT, wrap_files
from smp.wire import etf

__all__ = ["read_trace", "read_frames", "wrap_log_files", "merge_traces", "merge_key"]

_DROP = Atom("drop")
_WRAP = Atom("wrap")
_TRACE_TS = Atom("trace_ts")
_SEQ_TRACE = Atom("seq_trace")
_HDR = struct.Struct(">BI")
_CHUNK = 1 << 20
_HOSTPORT = re.compile(r"\A(\[[^\]]*\]|[^:/\\]+):([0-9]{1,5})\Z")


def _frames(read_chunk, where: str) -> Iterator:
    """Parse frames from successive chunks; yield terms."""
    buf = b""
    pos = 0  # position in buf
    base = 0  # stream offset of buf[0]
    unpack = _HDR.unpack_from
    decode = etf.decode
    eof = False
    while True:
        # Make sure a whole header is buffered (or we are at eof).
        while len(buf) - pos < 5 and not eof:
            chunk = read_chunk()
            if not chunk:
                eof = True
                break
            buf = buf[pos:] + chunk
            base += pos
            pos = 0
        avail = len(buf) - pos
        if avail == 0:
            return
        if avail < 5:
            op = buf[pos]
            if op not in (0, 1):
                raise DecodeError(f"{where}: bad trace frame op byte {op}", base + pos)
            raise DecodeError(f"{where}: truncated frame header ({avail} of 5 bytes)", base + pos)
        op, size = unpack(buf, pos)
        if op == 1:
            pos += 5
            yield (_DROP, size)
            continue
        if op != 0:
            raise DecodeError(f"{where}: bad trace frame op byte {op}", base + pos)
        start = pos + 5
        end = start + size
        while len(buf) < end and not eof:
            chunk = read_chunk()
            if not chunk:
                eof = True
                break
            buf = buf[pos:] + chunk
            base += pos
            start -= pos
            end -= pos
            pos = 0
        if len(buf) < end:
            raise DecodeError(
                f"{where}: truncated term: frame says {size} bytes, "
                f"only {len(buf) - start} present",
                base + start,
            )
        try:
            term = decode(buf[start:end])
        except DecodeError as e:
            inner = e.offset
            msg = e.args[0]
            if inner is not None:
                suffix = f" at byte offset {inner}"
                if msg.endswith(suffix):
                    msg = msg[: -len(suffix)]
            raise DecodeError(
                f"{where}: bad term in frame: {msg}", base + start + (inner or 0)
            ) from None
        pos = end
        yield term


def read_frames(data: bytes, where: str = "data") -> Iterator:
    """Yield the terms of an in-memory sequence of trace frames."""
    chunks = [bytes(data)]
    return _frames(lambda: chunks.pop() if chunks else b"", where)


def _read_file(path: str) -> Iterator:
    with open(path, "rb") as f:
        yield from _frames(lambda: f.read(_CHUNK), path)


def _follow_file(path: str, poll: float) -> Iterator:
    """A file that is still being written: at its end, wait for more (every
    ``poll`` seconds) instead of stopping, as dbg's ``follow_read`` retries
    from the same offset until the whole header or term is there.  It never
    ends by itself: the caller stops reading (Ctrl-C in ``smp-emu read
    --follow``)."""
    with open(path, "rb", buffering=0) as f:

        def read_chunk():
            while True:
                chunk = f.read(_CHUNK)
                if chunk:
                    return chunk
                time.sleep(poll)

        yield from _frames(read_chunk, path)


def wrap_log_files(path, suffix: str, count: int = DEFAULT_WRAP_COUNT) -> list[str]:
    """The files of a wrap log in reading order, as dbg's wrap_sort orders them.

    Raises ``DecodeError`` (offset None) for an inconsistent wrap file set,
    as dbg exits with ``inconsistent_wrap_file_trace_set``.
    """
    files = wrap_files(os.path.abspath(os.fspath(path)), suffix)
    n = count
    cs = [c for c, _ in files]
    bad = DecodeError(
        f"inconsistent wrap file trace set {path}N{suffix}: file counters "
        f"{', '.join(map(str, cs))} do not fit a wrap log of count {n}"
    )
    if not files:
        return []
    if cs[0] == 0:
        if len(cs) == 1:
            return [files[0][1]]
        # 0,1,..,k  then (gap of one) k+2..N : the gap is the wrap point
        for i in range(len(cs) - 1):
            c1, c2 = cs[i], cs[i + 1]
            if c1 + 1 == c2 and c2 < n:
                continue
            if c1 + 2 == c2 and c2 <= n:
                rest = cs[i + 1 :]
                if rest[-1] != n or any(b != a + 1 for a, b in zip(rest, rest[1:], strict=False)):
                    raise bad
                return [f for _, f in files[i + 1 :]] + [f for _, f in files[: i + 1]]
            raise bad
        if cs[-1] < n:
            return [f for _, f in files]
        raise bad
    if cs[0] == 1:
        if cs[-1] != n or any(b != a + 1 for a, b in zip(cs, cs[1:], strict=False)):
            raise bad
        return [f for _, f in files]
    raise bad


def _read_wrap(path, suffix: str, count: int) -> Iterator:
    for name in wrap_log_files(path, suffix, count):
        yield from _read_file(name)


def _read_ip(host: str, port: int, timeout: Optional[float]) -> Iterator:
    where = f"{host}:{port}"
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        raise ConnectionError(f"cannot connect to trace port {where}: {e}") from e
    with sock:
        sock.settimeout(timeout)

        def read_chunk():
            try:
                return sock.recv(_CHUNK)
            except ConnectionResetError:
                return b""

        yield from _frames(read_chunk, where)


def read_trace(
    source, *, timeout: Optional[float] = None, follow: bool = False, poll: float = 0.05
) -> Iterator:
    """Yield the trace terms of ``source``.

    ``source`` is one of:

    * a path (str or PathLike) of a trace file written by a file trace port;
    * a wrap log: ``(path, 'wrap', suffix)`` or ``(path, 'wrap', suffix,
      size, count)`` as ``dbg:trace_client(file, {Name, wrap, Suffix...})``
      takes it (``'wrap'`` may be ``Atom('wrap')``; count defaults to 8);
    * an ip trace port: ``("host", port)`` or ``"host:port"`` (a str that is
      not an existing file); reads until the port closes the connection.
      ``timeout`` bounds each socket wait (``TimeoutError`` when exceeded).

    ``follow=True`` (a file path only) reads on past the end of the file as
    it grows, as ``dbg:trace_client(follow_file, Path)`` does, checking for
    new data every ``poll`` seconds; it never ends by itself.
    """
    if follow:
        if isinstance(source, tuple):
            raise ValueError("follow reads one trace file, not a wrap log or an ip port")
        path = os.fspath(source)
        path = os.fsdecode(path) if isinstance(path, bytes) else path
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file")
        return _follow_file(path, poll)
    if isinstance(source, tuple):
        if len(source) == 2 and isinstance(source[0], str) and type(source[1]) is int:
            return _read_ip(source[0], source[1], timeout)
        if len(source) in (3, 4, 5) and (source[1] == "wrap" or source[1] is _WRAP):
            path, _, suffix = source[:3]
            count = source[4] if len(source) == 5 else DEFAULT_WRAP_COUNT
            if not isinstance(suffix, str):
                raise TypeError(f"wrap suffix must be a str, not {suffix!r}")
            if type(count) is not int or count < 1:
                raise ValueError(f"wrap count must be an int >= 1, not {count!r}")
            return _read_wrap(path, suffix, count)
        raise ValueError(f"unrecognised trace source {source!r}")
    path = os.fspath(source)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not os.path.exists(path):
        m = _HOSTPORT.match(path)
        if m:
            return _read_ip(m.group(1).strip("[]"), int(m.group(2)), timeout)
    return _read_file(path)


def merge_key(term: Any):
    """The key ``ttb:format`` sorts a message by (its ``timestamp/1``): the
    timestamp of a ``trace_ts`` message and of a ``seq_trace`` message with
    one (4 elements), else 0, which sorts before every timestamp.  Keys
    compare in Erlang's term order."""
    if (
        type(term) is tuple
        and term
        and (term[0] is _TRACE_TS or (term[0] is _SEQ_TRACE and len(term) == 4))
    ):
        return term_order_key(term[-1])
    return term_order_key(0)


def merge_traces(sources, *, timeout: Optional[float] = None) -> Iterator:
    """Yield ``(i, term)``: the terms of ``sources`` (anything ``read_trace``
    takes) merged by timestamp as ``ttb:format`` merges the files of several
    nodes, ``i`` being the index of the source the term came from.

    As ttb's collector does, it holds the next message of every source and
    takes the one with the smallest ``merge_key`` (``lists:keysort``, which
    is stable): on equal keys the source it took from last goes first, then
    the order of ``sources``.  A source's own messages keep their order, so
    messages without a timestamp (key 0) come out as soon as they are at the
    head of their file, in file order.
    """
    readers = [iter(read_trace(s, timeout=timeout)) for s in sources]
    heap: list = []
    for i, r in enumerate(readers):
        for term in r:
            heap.append((merge_key(term), i, i, term))
            break
    heapq.heapify(heap)
    # ttb puts the source it just read from at the head of the list before
    # the stable sort: a tie goes to the newest entry, so its rank decreases
    rank = 0
    while heap:
        _, _, i, term = heapq.heappop(heap)
        yield i, term
        for nxt in readers[i]:
            rank -= 1
            heapq.heappush(heap, (merge_key(nxt), rank, i, nxt))
            break
