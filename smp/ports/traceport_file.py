"""``trace_file_drv`` (OTP 17.x, lib/runtime_tools/c_src/trace_file_drv.c) and
what every trace port shares.

* The frame both drivers write (``OP_DATA``, ``OP_DROP`` and the 5-byte
  header, see :mod:`smp.ports.traceport`) and ``_BasePort``, the base of
  every trace port (``write_many``, the context manager).
* :class:`FileTracePort`, ``dbg:trace_port(file, Name)`` and
  ``dbg:trace_port(file, {Name, wrap, Suffix, WrapSize, WrapCnt})``: the
  driver's buffer (``FILE_BUFFER_SIZE``), its wrap log, and dbg's defaults
  for one (``DEFAULT_WRAP_SIZE``, ``DEFAULT_WRAP_COUNT``).
* :func:`wrap_file_name` and :func:`wrap_files`: the names of a wrap log's
  files, as the driver makes them and as dbg finds them
  (:mod:`smp.ports.reader` reads them back).

:mod:`smp.ports.traceport` re-exports all of it.
"""

from __future__ import annotations

import os
import re
import struct
import threading
from typing import Optional

from smp.core.errors import TracePortError

OP_DATA = 0
OP_DROP = 1

_HDR = struct.Struct(">BI")
_pack_hdr = _HDR.pack

#: trace_file_drv's ``BUFFER_SIZE`` is ``BUFSIZ*8``; glibc's BUFSIZ is 8192.
FILE_BUFFER_SIZE = 8192 * 8
#: dbg's defaults for ``{Name, wrap, Suffix}`` and ``{Name, wrap, Suffix, Size}``.
DEFAULT_WRAP_SIZE = 128 * 1024
DEFAULT_WRAP_COUNT = 8


def wrap_file_name(path: str, suffix: str, counter: int) -> str:
    """The name trace_file_drv gives wrap file ``counter``: Name ++ Counter ++ Suffix."""
    return f"{path}{counter}{suffix}"


def wrap_files(path: str, suffix: str) -> list[tuple[int, str]]:
    """Existing files of a wrap log, as dbg's ``wrap_presort`` finds them.

    Returns ``[(counter, filename)]`` sorted by counter: files in the directory
    of ``path`` whose name is basename(path) ++ Digits ++ suffix.
    """
    path = os.fspath(path)
    dirname = os.path.dirname(path) or "."
    base = os.path.basename(path)
    try:
        names = os.listdir(dirname)
    except OSError:
        return []
    found = []
    for name in names:
        if not name.startswith(base):
            continue
        rest = name[len(base) :]
        if not rest.endswith(suffix):
            continue
        digits = rest[: len(rest) - len(suffix)] if suffix else rest
        if digits and re.fullmatch(r"[0-9]+", digits):
            found.append((int(digits), os.path.join(os.path.dirname(path), name)))
    found.sort()
    return found


class _BasePort:
    kind = "base"

    def write_many(self, payloads) -> tuple[int, TracePortError | None]:
        """``write`` each payload in order (a run of messages to this port);
        returns how many were written and the error that stopped the rest,
        or None when all were."""
        written = 0
        try:
            for payload in payloads:
                self.write(payload)
                written += 1
        except TracePortError as e:
            return written, e
        return written, None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class FileTracePort(_BasePort):
    """``trace_file_drv``: buffered frames to a file or a size-wrapped file set.

    ``wrap`` is ``None`` or ``(suffix, size_bytes, count)`` as in
    ``dbg:trace_port(file, {Filename, wrap, Suffix, WrapSize, WrapCnt})``:
    files are named ``path ++ N ++ suffix`` with N = 0, 1, ... WrapCnt, 0, ...
    (the driver's counter runs over WrapCnt+1 values and at most WrapCnt files
    exist at once, the oldest being deleted).  A file is closed after the
    message that makes it reach ``size_bytes`` (so every file holds at least
    one message).  As dbg does, files of a previous wrap log with the same
    name pattern are deleted on open.

    The driver buffers ``buffer_size`` bytes (``BUFSIZ*8``); ``write`` returns
    True when the write was "heavy" as the driver flags it: the buffer went to
    the OS, or the file wrapped.

    ``write``, ``flush`` and ``close`` hold one lock, so a flush or close from
    another thread (the dispatcher's control thread while its dispatch thread
    writes) falls between two frames: the file only ever holds whole frames.
    """

    kind = "file"

    def __init__(self, path, *, wrap=None, buffer_size: int = FILE_BUFFER_SIZE):
        try:
            path = os.fspath(path)
        except TypeError:
            raise TracePortError(f"trace file name must be a path, not {path!r}") from None
        if not isinstance(path, str) or not path:
            raise TracePortError(f"bad trace file name {path!r}")
        if type(buffer_size) is not int or buffer_size < 1:
            raise TracePortError(f"buffer_size must be a positive int, not {buffer_size!r}")
        self.path = os.path.abspath(path)  # dbg passes filename:absname/1
        self.buffer_size = buffer_size
        self._buf = bytearray()
        self._fd = -1
        self._closed = False
        self._lock = threading.Lock()
        self.messages = 0
        self.bytes = 0
        self.wraps = 0
        self.os_writes = 0
        self.wrap = None
        if wrap is not None:
            if not (isinstance(wrap, tuple) and len(wrap) == 3):
                raise TracePortError(
                    f"wrap must be None or (suffix, size_bytes, count), not {wrap!r}"
                )
            suffix, size, count = wrap
            if not isinstance(suffix, str):
                raise TracePortError(f"wrap suffix must be a str, not {suffix!r}")
            if type(size) is not int or not 0 <= size < 1 << 32:
                raise TracePortError(f"wrap size must be an int in 0..2**32-1, not {size!r}")
            if type(count) is not int or not 1 <= count < 1 << 32:
                raise TracePortError(f"wrap count must be an int in 1..2**32-1, not {count!r}")
            self.wrap = (suffix, size, count)
            self._suffix = suffix
            self._wrap_size = size
            self._wrap_n = count
            self._countdown = count  # driver's wrap->cnt
            self._cur = 0  # driver's cur.cnt after next_name from ""
            self._del = 0
            self._len = 0
            # dbg:trace_port1 deletes all files from any previous wrap log.
            for _, name in wrap_files(self.path, suffix):
                try:
                    os.unlink(name)
                except OSError:
                    pass
            self._fd = self._open(wrap_file_name(self.path, suffix, 0))
        else:
            self._fd = self._open(self.path)

    @property
    def current_file(self) -> str:
        if self.wrap is None:
            return self.path
        return wrap_file_name(self.path, self._suffix, self._cur)

    @staticmethod
    def _open(name: str) -> int:
        # Mode 0777 as trace_file_drv's open(): the umask takes the rest, so a
        # node under umask 022 writes 0755 files and so do we.
        try:
            return os.open(name, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o777)
        except OSError as e:
            raise TracePortError(f"cannot open trace file {name!r}: {e.strerror}") from e

    def _os_write(self, data) -> None:
        view = memoryview(data)
        while view:
            try:
                w = os.write(self._fd, view)
            except InterruptedError:
                continue
            except OSError as e:
                raise TracePortError(
                    f"write to trace file {self.current_file!r} failed: {e.strerror}"
                ) from e
            if w == 0:
                raise TracePortError(f"write to trace file {self.current_file!r} failed: no space")
            view = view[w:]
        self.os_writes += 1

    def _my_write(self, data) -> bool:
        """trace_file_drv's my_write(): buffer ``data`` if it fits; else fill
        the buffer, write it, then write the rest directly when it is at
        least a buffer's worth, or buffer it.  True when the disk was written."""
        buf = self._buf
        room = self.buffer_size - len(buf)
        if len(data) <= room:
            buf += data
            return False
        buf += data[:room]
        self._os_write(buf)
        rest = memoryview(data)[room:]
        if len(rest) >= self.buffer_size:
            self._os_write(rest)
            self._buf = bytearray()
        else:
            self._buf = bytearray(rest)
        return True

    def write(self, payload: bytes) -> bool:
        """Append one frame (op 0, size, payload); return True if heavy.

        As trace_file_output: the 5-byte header and the payload are two
        my_write() calls, and a wrap-around is heavy too."""
        with self._lock:
            return self._write(payload)

    def write_many(self, payloads) -> tuple[int, TracePortError | None]:
        """``write`` for each payload, under one lock.  A frame that fits in
        the buffer with its header, in a file that does not wrap, is appended
        here: what write()'s two my_write() calls do when both fit.  Any
        other frame takes write()'s own path, so the file, its OS writes and
        the counters are the same as for one write() a frame."""
        written = fast = fast_bytes = 0
        size = self.buffer_size
        inline = self.wrap is None
        with self._lock:
            try:
                if self._closed:
                    raise TracePortError("trace port is closed")
                for payload in payloads:
                    n = len(payload)
                    buf = self._buf
                    if inline and len(buf) + 5 + n <= size:
                        buf += _pack_hdr(OP_DATA, n)
                        buf += payload
                        fast += 1
                        fast_bytes += 5 + n
                    else:
                        self._write(payload)  # counts its frame itself
                    written += 1
            except TracePortError as e:
                return written, e
            finally:
                self.messages += fast
                self.bytes += fast_bytes
        return written, None

    def _write(self, payload: bytes) -> bool:
        """write() with the lock held."""
        if self._closed:
            raise TracePortError("trace port is closed")
        n = len(payload)
        heavy = self._my_write(_pack_hdr(OP_DATA, n))
        heavy = self._my_write(payload) or heavy
        self.messages += 1
        self.bytes += 5 + n
        if self.wrap is not None:
            self._len += 5 + n
            if self._len >= self._wrap_size:
                self._wrap_file()
                heavy = True
        return heavy

    def _next(self, cnt: int) -> int:
        return 0 if cnt >= self._wrap_n else cnt + 1

    def _wrap_file(self) -> None:
        self._flush()
        os.close(self._fd)
        self._fd = -1
        self._len = 0
        if self._countdown > 0:
            self._countdown -= 1
        if self._countdown == 0:
            try:
                os.unlink(wrap_file_name(self.path, self._suffix, self._del))
            except OSError:
                pass
            self._del = self._next(self._del)
        self._cur = self._next(self._cur)
        self.wraps += 1
        self._fd = self._open(wrap_file_name(self.path, self._suffix, self._cur))

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Write the buffer to the OS (the driver's port_control 'f')."""
        with self._lock:
            self._flush()
        return True

    def _flush(self) -> None:
        if self._fd >= 0 and self._buf:
            self._os_write(self._buf)
            self._buf = bytearray()

    def close(self) -> None:
        """Flush and close, as trace_file_drv does when its port closes; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._flush()
            finally:
                if self._fd >= 0:
                    os.close(self._fd)
                    self._fd = -1

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def stats(self) -> dict:
        return {
            "messages": self.messages,
            "bytes": self.bytes,
            "wraps": self.wraps,
            "os_writes": self.os_writes,
            "buffered": len(self._buf),
        }
