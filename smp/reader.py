"""Read trace frames back, as ``dbg:trace_client`` does.

``read_trace(source)`` yields the terms of a trace file, a wrap log or an ip
trace port.  A drop frame (op 1) is yielded as ``(Atom('drop'), N)``, as dbg's
reader does.  Errors raise :class:`smp.errors.DecodeError` naming the byte
offset in the file (or in the stream read from the socket): the offset of a
bad op byte, of a truncated frame header, or of the start of a truncated or
undecodable term.
"""
from __future__ import annotations

import os
import re
import socket
import struct
from typing import Iterator, Optional

from . import etf
from .errors import DecodeError
from .terms import Atom
from .traceport import DEFAULT_WRAP_COUNT, wrap_files

__all__ = ["read_trace", "read_frames", "wrap_log_files"]

_DROP = Atom("drop")
_WRAP = Atom("wrap")
_HDR = struct.Struct(">BI")
_CHUNK = 1 << 20
_HOSTPORT = re.compile(r"\A(\[[^\]]*\]|[^:/\\]+):([0-9]{1,5})\Z")


def _frames(read_chunk, where: str) -> Iterator:
    """Parse frames from successive chunks; yield terms."""
    buf = b""
    pos = 0          # position in buf
    base = 0         # stream offset of buf[0]
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
            raise DecodeError(f"{where}: truncated term: frame says {size} bytes, "
                              f"only {len(buf) - start} present", base + start)
        try:
            term = decode(buf[start:end])
        except DecodeError as e:
            inner = e.offset
            msg = e.args[0]
            if inner is not None:
                suffix = f" at byte offset {inner}"
                if msg.endswith(suffix):
                    msg = msg[:-len(suffix)]
            raise DecodeError(f"{where}: bad term in frame: {msg}",
                              base + start + (inner or 0)) from None
        pos = end
        yield term


def read_frames(data: bytes, where: str = "data") -> Iterator:
    """Yield the terms of an in-memory sequence of trace frames."""
    chunks = [bytes(data)]
    return _frames(lambda: chunks.pop() if chunks else b"", where)


def _read_file(path: str) -> Iterator:
    with open(path, "rb") as f:
        yield from _frames(lambda: f.read(_CHUNK), path)


def wrap_log_files(path, suffix: str, count: int = DEFAULT_WRAP_COUNT) -> list[str]:
    """The files of a wrap log in reading order, as dbg's wrap_sort orders them.

    Raises ``DecodeError`` (offset None) for an inconsistent wrap file set,
    as dbg exits with ``inconsistent_wrap_file_trace_set``.
    """
    files = wrap_files(os.path.abspath(os.fspath(path)), suffix)
    n = count
    cs = [c for c, _ in files]
    bad = DecodeError(f"inconsistent wrap file trace set {path}N{suffix}: file counters "
                      f"{', '.join(map(str, cs))} do not fit a wrap log of count {n}")
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
                rest = cs[i + 1:]
                if rest[-1] != n or any(b != a + 1 for a, b in zip(rest, rest[1:])):
                    raise bad
                return [f for _, f in files[i + 1:]] + [f for _, f in files[:i + 1]]
            raise bad
        if cs[-1] < n:
            return [f for _, f in files]
        raise bad
    if cs[0] == 1:
        if cs[-1] != n or any(b != a + 1 for a, b in zip(cs, cs[1:])):
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


def read_trace(source, *, timeout: Optional[float] = None) -> Iterator:
    """Yield the trace terms of ``source``.

    ``source`` is one of:

    * a path (str or PathLike) of a trace file written by a file trace port;
    * a wrap log: ``(path, 'wrap', suffix)`` or ``(path, 'wrap', suffix,
      size, count)`` as ``dbg:trace_client(file, {Name, wrap, Suffix...})``
      takes it (``'wrap'`` may be ``Atom('wrap')``; count defaults to 8);
    * an ip trace port: ``("host", port)`` or ``"host:port"`` (a str that is
      not an existing file); reads until the port closes the connection.
      ``timeout`` bounds each socket wait (``TimeoutError`` when exceeded).
    """
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
