"""The dispatcher's journal: what entered the queue, in queue order, what
changed the state and the table, and what was decided, so a run's
deliver/drop decisions can be replayed deterministically (``smp-emu replay``).

Runs in the dispatcher process; ``record`` is called from the ingest,
dispatch and control threads, so records are numbered under a lock: the
number is the order in which things happened in the dispatcher.

Records (after ``(seq, kind)``; ``seq`` counts from 1 with no gap):

* ``q``  type, from, to, ts_kind, blob, n, base_us, active: a run of ``n``
  messages queued (``blob`` is their pickled bodies);
* ``e``  a process-table event as the schedulers sent it (``spawn``,
  ``exit``, ``tracer``, ``unregister`` ...);
* ``s``  a state snapshot after a change (any thread);
* ``d``  type, n, action, receiver, reason: the decision for the next run
  that was not on the TRACE fast path (with a journal every run is decided
  through ``resolve``, so every run has one);
* ``lost`` scheduler id, pids: a scheduler died;
* ``end``  made: the last record, written when the dispatcher closes the
  journal (``made``: the messages it queued in all); a journal without it
  was cut short (the dispatcher killed, a write that failed, the file cut).

The file (version 3; version 2 had no ``end`` record) is a header, the
pickle of ``("smp-journal", 3, nsched)`` and its CRC-32 (``HEADER_CRC``: a big-endian 32-bit word), then
one frame per record: the length of the record's pickle and its CRC-32
(``RECORD_HEAD``: two big-endian 32-bit words), then the pickle.  A reader finds every record's end without decoding it and knows a
damaged record from a well-formed one; ``smp.app.replay.read_records``
reads them back with the restricted decoder (``smp.wire.codec.load_record``)
and checks every field.
"""

from __future__ import annotations

import os
import pickle
import struct
import threading
import zlib

__all__ = [
    "Journal",
    "JOURNAL_MAGIC",
    "HEADER_CRC",
    "RECORD_HEAD",
    "encode_header",
    "encode_record",
]

JOURNAL_MAGIC = ("smp-journal", 3)
#: after the header's pickle: its CRC-32
HEADER_CRC = struct.Struct(">I")
#: before each record's pickle: its length in bytes and its CRC-32
RECORD_HEAD = struct.Struct(">II")
_PICKLE = pickle.HIGHEST_PROTOCOL


def encode_header(nsched: int) -> bytes:
    """The bytes a journal starts with."""
    data = pickle.dumps(JOURNAL_MAGIC + (nsched,), _PICKLE)
    return data + HEADER_CRC.pack(zlib.crc32(data))


def encode_record(rec: tuple) -> bytes:
    """One record as it is written: its frame head, then its pickle."""
    data = pickle.dumps(rec, _PICKLE)
    return RECORD_HEAD.pack(len(data), zlib.crc32(data)) + data


class Journal:
    """The dispatcher's journal file.  A write that fails (a full disk)
    stops the journal, not the dispatcher: one line on stderr names the file
    and the error (``error``), the records after it are not written, and
    the run goes on; a reader finds the journal cut short."""

    def __init__(self, path: str, nsched: int):
        self.path = path
        self.lock = threading.Lock()
        self.seq = 0
        self.error: str | None = None
        self.f = open(path, "wb")
        self._write(encode_header(nsched))

    def _write(self, data: bytes) -> None:
        if self.error is not None:
            return
        try:
            self.f.write(data)
        except OSError as e:
            self._failed(e)

    def _failed(self, e: OSError) -> None:
        self.error = f"write to journal {self.path} failed: {e.strerror or e}"
        os.write(2, f"dispatcher: {self.error}; the journal stops at record {self.seq}\n".encode())
        try:
            self.f.close()
        except OSError:
            pass

    def record(self, kind: str, *payload) -> None:
        with self.lock:
            self.seq += 1
            self._write(encode_record((self.seq, kind) + payload))

    def close(self, made: int | None = None) -> None:
        """Close the file, after the ``end`` record when ``made`` is given
        (the dispatcher's count of messages queued: its run is over)."""
        with self.lock:
            if made is not None and not self.f.closed:
                self.seq += 1
                self._write(encode_record((self.seq, "end", made)))
            if not self.f.closed:
                try:
                    self.f.close()
                except OSError as e:
                    if self.error is None:
                        self._failed(e)
