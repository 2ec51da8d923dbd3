"""The dispatcher's journal: what entered the queue, in queue order, what
changed the state and the table, and what was decided, so a run's
deliver/drop decisions can be replayed deterministically (``smp-emu replay``).

Runs in the dispatcher process; ``record`` is called from the ingest,
dispatch and control threads, so records are numbered under a lock: the
number is the order in which things happened in the dispatcher.

Records (after ``(seq, kind)``):

* ``q``  type, from, to, ts_kind, blob, n, base_us, active: a run of ``n``
  messages queued (``blob`` is their pickled bodies);
* ``e``  a process-table event as the schedulers sent it (``spawn``,
  ``exit``, ``tracer``, ``unregister`` ...);
* ``s``  a state snapshot after a change (any thread);
* ``d``  type, n, action, receiver, reason: the decision for the next run
  that was not on the TRACE fast path (with a journal every run is decided
  through ``resolve``, so every run has one);
* ``lost`` scheduler id, pids: a scheduler died.

The file is a sequence of pickles; ``dispatcher.replay.read_records`` reads
them back with the restricted decoder (``smp.wire.codec.load_record``).
"""

from __future__ import annotations

import pickle
import threading

__all__ = ["Journal", "JOURNAL_MAGIC"]

JOURNAL_MAGIC = ("smp-journal", 1)


class Journal:
    def __init__(self, path: str, nsched: int):
        self.path = path
        self.lock = threading.Lock()
        self.seq = 0
        self.f = open(path, "wb")
        pickle.dump(JOURNAL_MAGIC + (nsched,), self.f, pickle.HIGHEST_PROTOCOL)

    def record(self, kind: str, *payload) -> None:
        with self.lock:
            self.seq += 1
            pickle.dump((self.seq, kind) + payload, self.f, pickle.HIGHEST_PROTOCOL)

    def close(self) -> None:
        with self.lock:
            if not self.f.closed:
                self.f.close()
