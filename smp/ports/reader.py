"""Read trace frames back, as ``dbg:trace_client`` does.

``read_trace(source)`` yields the terms of a trace file, a wrap log or an ip
trace port; ``read_trace(path, follow=True)`` keeps reading a file as it
grows, as ``dbg:trace_client(follow_file, Path)`` does.  ``merge_traces``
merges several sources by timestamp as ``ttb:format`` does.  A drop frame
(op 1) is yielded as ``(Atom('drop'), N)``, as dbg's reader does.  Errors
raise :class:`smp.core.errors.DecodeError` naming the byte offset in the file (or
in the stream read from the socket): the offset of a bad op byte, of a
truncated frame header, or of the start of a truncated or undecodable term.

A source may come from a node nobody here controls: what it can cost is
bounded by :mod:`smp.wire.limits` (pass ``limits=``).  A frame over
``max_frame`` is refused at its header, before any of it is buffered; the
frames are buffered in one growing ``bytearray`` (reading is linear in the
bytes read, whatever the chunk size); depth and inflated size are the
decoder's limits; and merging compares timestamps without recursion.
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
from smp.core.terms import Atom, ImproperList, Map, _order_key
from smp.ports.traceport import DEFAULT_WRAP_COUNT, wrap_files
from smp.wire import etf
from smp.wire.limits import DEFAULT as DEFAULT_LIMITS
from smp.wire.limits import Limits

__all__ = ["read_trace", "read_frames", "wrap_log_files", "merge_traces", "merge_key"]

_DROP = Atom("drop")
_WRAP = Atom("wrap")
_TRACE_TS = Atom("trace_ts")
_SEQ_TRACE = Atom("seq_trace")
_HDR = struct.Struct(">BI")
_CHUNK = 1 << 20
_HOSTPORT = re.compile(r"\A(\[[^\]]*\]|[^:/\\]+):([0-9]{1,5})\Z")


def _frames(read_chunk, where: str, limits: Limits = DEFAULT_LIMITS) -> Iterator:
    """Parse frames from successive chunks; yield terms.

    The chunks go into one ``bytearray`` that grows by appending and drops
    what was read only once that is at least half of it, so reading costs
    time linear in the bytes read, whatever the chunk and frame sizes.  A
    frame larger than ``limits.max_frame`` is refused at its header, before
    anything of it is buffered."""
    buf = bytearray()
    pos = 0  # position in buf
    base = 0  # stream offset of buf[0]
    unpack = _HDR.unpack_from
    decode = etf.decode
    max_frame = limits.max_frame
    max_depth, max_inflate = limits.max_depth, limits.max_inflate
    eof = False

    def fill(need: int) -> bool:
        """Read until ``need`` bytes from ``pos`` on are buffered; False at eof."""
        nonlocal buf, pos, base, eof
        while len(buf) - pos < need:
            if eof:
                return False
            chunk = read_chunk()
            if not chunk:
                eof = True
                return False
            if pos and pos >= len(buf) - pos:  # drop the read half: amortised linear
                del buf[:pos]
                base += pos
                pos = 0
            buf += chunk
        return True

    while True:
        if not fill(5):
            avail = len(buf) - pos
            if avail == 0:
                return
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
        if size > max_frame:
            raise DecodeError(
                f"{where}: frame of {size} bytes is over the max_frame limit of {max_frame} bytes",
                base + pos,
            )
        if not fill(5 + size):
            start = pos + 5
            raise DecodeError(
                f"{where}: truncated term: frame says {size} bytes, "
                f"only {len(buf) - start} present",
                base + start,
            )
        start = pos + 5
        end = start + size
        with memoryview(buf) as view:
            data = bytes(view[start:end])
        try:
            term = decode(data, max_depth=max_depth, max_inflate=max_inflate)
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
        del data
        pos = end
        yield term


def read_frames(data: bytes, where: str = "data", limits: Limits = DEFAULT_LIMITS) -> Iterator:
    """Yield the terms of an in-memory sequence of trace frames."""
    chunks = [bytes(data)]
    return _frames(lambda: chunks.pop() if chunks else b"", where, limits)


def _read_file(path: str, limits: Limits) -> Iterator:
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path}: is a directory, not a trace file")
    try:
        f = open(path, "rb")
    except OSError as e:
        raise OSError(f"{path}: cannot read: {e.strerror or e}") from None
    with f:
        yield from _frames(lambda: f.read(_CHUNK), path, limits)


def _follow_file(path: str, poll: float, limits: Limits) -> Iterator:
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

        yield from _frames(read_chunk, path, limits)


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


def _read_wrap(path, suffix: str, count: int, limits: Limits) -> Iterator:
    for name in wrap_log_files(path, suffix, count):
        yield from _read_file(name, limits)


def _tcp_port(host: str, port: int) -> int:
    """``port``, when it can be an ip trace port's (1-65535); else a
    ``ValueError`` (a connection to it could only be refused)."""
    if not 1 <= port <= 65535:
        raise ValueError(f"{host}:{port}: port {port} is not a TCP port (1-65535)")
    return port


def _read_ip(host: str, port: int, timeout: Optional[float], limits: Limits) -> Iterator:
    """The frames of an ip trace port; ``port`` is checked by ``_tcp_port``
    before this generator starts."""
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
            except TimeoutError:
                # (the socket's own words, "timed out", named no source)
                raise TimeoutError(
                    f"trace port {where}: nothing arrived within the timeout of {timeout:g} s"
                ) from None

        yield from _frames(read_chunk, where, limits)


def read_trace(
    source,
    *,
    timeout: Optional[float] = None,
    follow: bool = False,
    poll: float = 0.05,
    limits: Limits = DEFAULT_LIMITS,
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

    ``limits`` (:class:`smp.wire.limits.Limits`) bounds the frame size, the
    nesting depth and the inflated size of a compressed term: what is over
    one is a ``DecodeError`` naming the limit and the byte offset.
    """
    if follow:
        if isinstance(source, tuple):
            raise ValueError("follow reads one trace file, not a wrap log or an ip port")
        path = os.fspath(source)
        path = os.fsdecode(path) if isinstance(path, bytes) else path
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file")
        return _follow_file(path, poll, limits)
    if isinstance(source, tuple):
        if len(source) == 2 and isinstance(source[0], str) and type(source[1]) is int:
            return _read_ip(source[0], _tcp_port(source[0], source[1]), timeout, limits)
        if len(source) in (3, 4, 5) and (source[1] == "wrap" or source[1] is _WRAP):
            path, _, suffix = source[:3]
            count = source[4] if len(source) == 5 else DEFAULT_WRAP_COUNT
            if not isinstance(suffix, str):
                raise TypeError(f"wrap suffix must be a str, not {suffix!r}")
            if type(count) is not int or count < 1:
                raise ValueError(f"wrap count must be an int >= 1, not {count!r}")
            return _read_wrap(path, suffix, count, limits)
        raise ValueError(f"unrecognised trace source {source!r}")
    path = os.fspath(source)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not os.path.exists(path):
        m = _HOSTPORT.match(path)
        if m:
            host = m.group(1).strip("[]")
            return _read_ip(host, _tcp_port(host, int(m.group(2))), timeout, limits)
    return _read_file(path, limits)


_END = (8,)  # [] and the end of a proper list
_CONS = (9, 1)  # one more element of a list


def _flat_order_key(term: Any) -> tuple:
    """``term_order_key(term)`` flattened: the keys of the atomic terms and a
    marker for each compound one, in order, as one flat tuple.

    Two flat keys compare as the nested keys do (every compound term's
    markers make its part of the sequence prefix-free: a tuple or a map starts
    with its size, a list ends with ``[]`` or its tail), and comparing them
    never recurses, so a timestamp as deep as the decoder's limit allows
    sorts as well as ``{Mega, Sec, Micro}``."""
    out: list = []
    stack: list = [(term, False)]
    while stack:
        t, exact = stack.pop()
        tp = type(t)
        if tp is tuple:
            out.append((6, len(t)))
            stack.extend((e, exact) for e in reversed(t))
        elif tp is Map:
            out.append((7, len(t)))
            stack.extend((v, exact) for _, v in reversed(t._items))
            stack.extend((k, True) for k, _ in reversed(t._items))
        elif tp is list or tp is ImproperList:
            elements, tail = (t, None) if tp is list else (t.elements, t.tail)
            if not elements:
                out.append(_END)
                continue
            out.append((9,))
            stack.append((_CONS_END, exact) if tail is None else (tail, exact))
            for e in reversed(elements):
                stack.append((e, exact))
                stack.append((_CONS_MARK, exact))
        elif t is _CONS_MARK:
            out.append(_CONS)
        elif t is _CONS_END:
            out.append(_END)
        else:
            out.append(_order_key(t, exact))
    return tuple(out)


_CONS_MARK, _CONS_END = object(), object()


def merge_key(term: Any):
    """The key ``ttb:format`` sorts a message by (its ``timestamp/1``): the
    timestamp of a ``trace_ts`` message and of a ``seq_trace`` message with
    one (4 elements), else 0, which sorts before every timestamp.  Keys
    compare in Erlang's term order (as ``term_order_key`` of the timestamp,
    flattened: a timestamp of any depth the decoder accepts compares without
    recursion)."""
    if (
        type(term) is tuple
        and term
        and (term[0] is _TRACE_TS or (term[0] is _SEQ_TRACE and len(term) == 4))
    ):
        return _flat_order_key(term[-1])
    return _ZERO_KEY


_ZERO_KEY = _flat_order_key(0)


def merge_traces(
    sources, *, timeout: Optional[float] = None, limits: Limits = DEFAULT_LIMITS
) -> Iterator:
    """Yield ``(i, term)``: the terms of ``sources`` (anything ``read_trace``
    takes) merged by timestamp as ``ttb:format`` merges the files of several
    nodes, ``i`` being the index of the source the term came from.

    As ttb's collector does, it holds the next message of every source and
    takes the one with the smallest ``merge_key`` (``lists:keysort``, which
    is stable): on equal keys the source it took from last goes first, then
    the order of ``sources``.  A source's own messages keep their order, so
    messages without a timestamp (key 0) come out as soon as they are at the
    head of their file, in file order.  ``limits`` as for ``read_trace``.
    """
    readers = [iter(read_trace(s, timeout=timeout, limits=limits)) for s in sources]
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
