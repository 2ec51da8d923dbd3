"""Replay a dispatcher journal: re-run every deliver/drop decision of a run.

Runs in the user's process (``smp-emu replay``, ``smp-emu stress``), never
next to a live dispatcher.  The journal (``dispatcher.journal``) holds, in
the order they happened in the dispatcher, the runs as the ingest thread
queued them (``q``), the process-table events (``e``, ``lost``), the state
after every change (``s``) and the decision taken for every run (``d``).
Replaying walks it once: table events rebuild a ``PidTable``, snapshots are
loaded into a ``TracerState``, and at each ``d`` the oldest undecided run is
decided again with ``smp.core.dispatch.resolve`` and the same scheduler-loss
rule as ``Dispatcher._dispatch``, then failures take their side effects
through ``disp_failure`` on the replayed state, as ``sys_msg_disp_failure``
does in the seed.

Tracer ports opened and closed and names registered through the control
socket are journaled as table events (``port_open``, ``port_close``,
``register``, ``unregister``); where a decision shows one the journal
lacks, it is learned from the decision, counted as ``inferred``.

The dispatch thread reads the table and the state *before* it records its
decision, so a change recorded between two decisions may or may not have
been seen by the second one.  When a replayed decision differs, it is tried
again against the table and state as they were at each earlier point since
the previous decision; a match there is a ``race_window`` decision (counted,
not a divergence).  A decision that matches nowhere is a divergence.

A journal is data from outside (journals travel between users), so it is
read whole and checked before anything is replayed (``read_records``): each
record's frame (length and CRC-32, ``dispatcher.journal``), its pickle
through the restricted decoder, its seq (the next one), and every field's
type, range and kind; a run's bodies must be Erlang terms whose tree (each
reference to a shared value counted again) stays within ``MAX_NODES``
values and ``MAX_DEPTH`` levels, measured in time proportional to the
pickle, not to the tree.  The first record that fails is a ``BadRecord``
naming its byte offset and what is wrong, and nothing is replayed; a file
that does not start with a journal header is ``NotAJournal``.  Whatever a
report or a listing shows of a message is cut short (``clip_term``).

Besides the decisions, the invariants the journal alone can show are
checked: timestamps strictly increase in queue order, every queued run is
decided exactly once (with the recorded type and count), delivered TRACE
messages keep per-tracee order, and every state reset the seed makes
(``erts_trace_check_exiting`` on an exit, ``sys_msg_disp_failure`` on a
failed SEQTRACE/SYSMON/SYSPROF) shows up in the recorded snapshots.
"""

from __future__ import annotations

import io
import math
import os
import pickle
import re
import zlib
from collections import Counter, deque
from dataclasses import dataclass, field, fields

from dispatcher.journal import HEADER_CRC, JOURNAL_MAGIC, RECORD_HEAD
from dispatcher.table import PidTable
from smp.core import messages as M
from smp.core.clock import us_to_ts
from smp.core.dispatch import (
    DELIVER_PID,
    DELIVER_PORT,
    DROP,
    DROP_REASONS,
    Decision,
    disp_failure,
    resolve,
)
from smp.core.placement import pid_owner
from smp.core.pretty import clip_term, format_term
from smp.core.state import NIL, Snapshot, TracerState
from smp.core.stats import totals
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
)
from smp.ports.dbgfmt import format_dbg, term_to_json
from smp.ports.order import OrderChecker
from smp.wire.codec import MAX_FRAME, MAX_RUN, load_record, loads_terms
from smp.wire.frames import QueueEntry, run_terms

__all__ = [
    "replay",
    "ReplayReport",
    "NotAJournal",
    "BadRecord",
    "MAX_NODES",
    "MAX_DEPTH",
    "read_records",
    "queue_listing",
    "format_listing",
    "ACTION_NAMES",
]

ACTION_NAMES = {DELIVER_PID: "deliver", DELIVER_PORT: "deliver_port", DROP: "drop"}
am_error_logger = Atom("error_logger")
_STATE_FIELDS = [f.name for f in fields(Snapshot) if f.name != "version"]


class NotAJournal(ValueError):
    """The file is not a dispatcher journal (``smp-emu replay`` exits 2)."""


class BadRecord(NotAJournal):
    """The file is a journal, but one of its records cannot be read or is not
    a record the dispatcher writes (``smp-emu replay`` exits 1).  A subclass
    of ``NotAJournal``, so a caller that catches only that still refuses the
    file.  ``offset`` is the byte at which the record starts (0, with no
    ``seq``, for a damaged header)."""

    def __init__(self, path: str, offset: int, seq: int | None, why: str):
        self.path, self.offset, self.seq, self.why = path, offset, seq, why
        at = f"record at byte {offset:,}" + (f" (seq {seq})" if seq is not None else "")
        if offset == 0 and seq is None:
            at = "header"
        super().__init__(f"{path}: {at}: {why}; the journal cannot be replayed")


# ---------------------------------------------------------------- reading, checked
#: A record's pickle is at most this long (a run's bodies arrive in a frame
#: of at most ``MAX_FRAME`` bytes; the rest of a record is a few fields).
MAX_RECORD_BYTES = MAX_FRAME + (1 << 16)
#: A record, and the bodies of a ``q`` record's run, each decode to at most
#: this many values counted as a tree: a value the pickle refers to again
#: (its memo) counts again each time, as printing or walking it would.
MAX_NODES = 1_000_000
#: ... nested at most this deep (as ``smp.core.matchspec`` bounds match specs).
MAX_DEPTH = 200
#: Schedulers a journal may name (the VM's ``+S`` limit).
MAX_SCHEDULERS = 1024
#: Bodies of a run (their tree) above which it is shown and order-checked cut short.
_BIG_RUN = 20_000
_HEADER_BYTES = 4096  # the header's pickle is some 40 bytes
_U64 = 1 << 64
_I32 = 1 << 31

_TERM_LEAVES = frozenset((int, float, bytes, Atom, Pid, Port, Ref, ExportFun, BitString))
_RUN_TYPES = frozenset(t for t in M.TYPE_NAMES if t != M.SYS_MSG_TYPE_UNDEFINED)
_ADDRESS = (Pid, Port, Atom, type(None))  # a run's from and to, a decision's receiver
_TS_KINDS = (M.TS_NONE, M.TS_PATCH, M.TS_APPEND, M.TS_SCHED)
_SNAP_TRACERS = ("default_tracer", "system_seq_tracer", "system_monitor", "system_profile")
_SNAP_BOOLS = tuple(f.name for f in fields(Snapshot) if f.type == "bool")
_SNAP_INTS = tuple(f.name for f in fields(Snapshot) if f.type == "int")
#: each table event and the types of its arguments
_EVENTS = {
    "spawn": ((Pid,),),
    "exit": ((Pid,),),
    "tracer": ((Pid,),),
    "unregister": ((Atom,), (Pid, Port, type(None))),
    "register": ((Atom,), (Pid, Port)),
    "port_open": ((Port,),),
    "port_close": ((Port,),),
}


class _Refused(Exception):
    """Why a record is refused (becomes a ``BadRecord``)."""


def _what(x) -> str:
    """A value's kind for a message, never the value itself (it may be huge)."""
    if x is None:
        return "nil"
    name = {Pid: "pid", Port: "port", Atom: "atom", bool: "boolean", int: "integer"}.get(
        type(x), type(x).__name__
    )
    return ("an " if name[0] in "aeiou" else "a ") + name


def _val(x) -> str:
    """A field's value for a message, bounded (a refused record may hold
    anything): small integers and the start of a string as they are, the
    kind of anything else."""
    if type(x) is int:
        return str(x) if x.bit_length() <= 64 else f"an integer of {x.bit_length():,} bits"
    if type(x) is str:
        return repr(x[:40]) + ("..." if len(x) > 40 else "")
    return _what(x)


def _kids(x, tp):
    """The values inside a container the journal may hold, or None."""
    if tp is tuple or tp is list:
        return x
    if tp is Map:
        return [e for kv in x._items for e in kv]
    if tp is ImproperList:  # mutable: check it as it is now
        els = x.elements
        if type(els) is not list or not els or type(x.tail) is list:
            raise _Refused("holds a malformed improper list")
        return els + [x.tail]
    if tp is Fun:
        return x.free
    return None


_TOO_BIG = f"decodes to more than {MAX_NODES:,} values (counting each reference to a shared value)"
_NOT_FINITE = "holds a float that is not finite, which is no Erlang term"


def _measure(root) -> int:
    """The size of the term ``root`` as a tree (every reference to a shared
    value counted again), checked against ``MAX_NODES`` and ``MAX_DEPTH``,
    every value in it an Erlang term (an atom is at most 255 characters
    already: ``Atom`` refuses longer names, so the decoder makes none).  Takes time in proportion to the
    distinct values, not to the tree: a shared value is measured once.
    Raises ``_Refused``."""
    leaves = _TERM_LEAVES
    tp = type(root)
    if tp in leaves:
        if tp is float and not math.isfinite(root):
            raise _Refused(_NOT_FINITE)
        return 1
    kids = _kids(root, tp)
    if kids is None:
        raise _Refused(f"holds {_what(root)}, which is no Erlang term")
    done: dict = {}  # id -> tree size of a container measured
    path: set = {id(root)}  # the containers being measured (a cycle is refused)
    frames: list = [[root, iter(kids), 1]]  # [container, its values, size so far]
    while True:
        f = frames[-1]
        for x in f[1]:
            tp = type(x)
            if tp in leaves:
                if tp is float and not math.isfinite(x):
                    raise _Refused(_NOT_FINITE)
                f[2] += 1
                continue
            size = done.get(id(x))
            if size is not None:
                f[2] += size
                if f[2] > MAX_NODES:
                    raise _Refused(_TOO_BIG)
                continue
            kids = _kids(x, tp)
            if kids is None:
                raise _Refused(f"holds {_what(x)}, which is no Erlang term")
            if id(x) in path:
                raise _Refused(f"holds {_what(x)} that contains itself")
            if len(frames) >= MAX_DEPTH:
                raise _Refused(f"nests deeper than {MAX_DEPTH}")
            path.add(id(x))
            frames.append([x, iter(kids), 1])
            break
        else:  # every value of f's container measured
            frames.pop()
            size = f[2]
            if size > MAX_NODES:
                raise _Refused(_TOO_BIG)
            if not frames:
                return size
            path.discard(id(f[0]))
            done[id(f[0])] = size
            frames[-1][2] += size


def _is_int(x, lo: int, hi: int) -> bool:
    return type(x) is int and lo <= x < hi


def _check_queue(rec: tuple, nsched: int) -> int:
    """A ``q`` record's fields; returns its bodies' tree size."""
    if len(rec) != 10:
        raise _Refused(f"a queue record has 10 fields, this one {len(rec)}")
    _, _, type_, from_, to, ts_kind, blob, n, base, active = rec
    if type(type_) is not int or type_ not in _RUN_TYPES:
        raise _Refused(f"message type {_val(type_)} is none the dispatcher queues")
    for name, v in (("sender", from_), ("receiver", to)):
        if type(v) not in _ADDRESS:
            raise _Refused(f"the run's {name} is {_what(v)}, not a pid, port, atom or nil")
    if type(ts_kind) is not int or ts_kind not in _TS_KINDS:
        raise _Refused(f"timestamp kind {_val(ts_kind)} is not one of 0..3")
    if not _is_int(n, 1, MAX_RUN + 1):
        raise _Refused(f"a run of {_val(n)} messages (1..{MAX_RUN:,})")
    if not _is_int(base, 0, _U64 if ts_kind else 1):
        raise _Refused(f"timestamp base {_val(base)} out of range for timestamp kind {ts_kind}")
    if not _is_int(active, -_I32, _I32 if ts_kind == M.TS_SCHED else 1) or (
        ts_kind != M.TS_SCHED and active != 0
    ):
        raise _Refused(f"active scheduler count {_val(active)} out of range")
    if ts_kind == M.TS_SCHED and (type_ != M.SYS_MSG_TYPE_SYSPROF or n != 1):
        raise _Refused("a profile_scheduler run that is not one SYSPROF message")
    if type(blob) is not bytes:
        raise _Refused(f"the run's bodies are {_what(blob)}, not bytes")
    try:
        bodies = loads_terms(blob)
    except Exception as e:
        raise _Refused(f"the run's bodies cannot be decoded ({_reason(e)})") from None
    if type(bodies) is not list or len(bodies) != n:
        raise _Refused(f"the run does not hold the {n} message bodies it says")
    size = _measure(bodies)
    if ts_kind and not all(type(b) is tuple and b for b in bodies):
        raise _Refused("a body to complete with a timestamp is not a tuple")
    return size


def _check_decision(rec: tuple) -> None:
    if len(rec) != 7:
        raise _Refused(f"a decision record has 7 fields, this one {len(rec)}")
    _, _, type_, n, action, receiver, reason = rec
    if type(type_) is not int or type_ not in _RUN_TYPES:
        raise _Refused(f"message type {_val(type_)} is none the dispatcher decides")
    if not _is_int(n, 1, MAX_RUN + 1):
        raise _Refused(f"a decision for {_val(n)} messages (1..{MAX_RUN:,})")
    if type(action) is not int or action not in ACTION_NAMES:
        raise _Refused(f"action {_val(action)} is not deliver (0), deliver_port (1) or drop (2)")
    if type(receiver) not in _ADDRESS:
        raise _Refused(f"the receiver is {_what(receiver)}, not a pid, port, atom or nil")
    if action == DROP:
        if type(reason) is not str or reason not in DROP_REASONS:
            raise _Refused(f"drop reason {_val(reason)} is none the dispatcher gives")
    elif reason is not None:
        raise _Refused("a delivery with a drop reason")
    elif type(receiver) is not (Pid if action == DELIVER_PID else Port):
        raise _Refused(f"{ACTION_NAMES[action]} to {_what(receiver)}")


def _check_event(rec: tuple) -> None:
    ev = rec[2] if len(rec) > 2 else None
    want = _EVENTS.get(ev) if type(ev) is str else None
    if want is None:
        raise _Refused(f"table event {_val(ev)} is none the dispatcher records")
    if len(rec) != 3 + len(want):
        raise _Refused(f"the {ev} event has {len(want)} argument(s), this one {len(rec) - 3}")
    for i, (arg, types) in enumerate(zip(rec[3:], want, strict=True)):
        if type(arg) not in types:
            raise _Refused(f"argument {i + 1} of the {ev} event is {_what(arg)}")


def _check_snapshot(rec: tuple) -> None:
    if len(rec) != 3 or type(rec[2]) is not Snapshot:
        raise _Refused("a state record holds one state snapshot and nothing else")
    snap = rec[2]
    for name in _SNAP_TRACERS:
        if type(getattr(snap, name)) not in _ADDRESS:
            raise _Refused(f"the state's {name} is {_what(getattr(snap, name))}")
    for name in _SNAP_BOOLS:
        if type(getattr(snap, name)) is not bool:
            raise _Refused(f"the state's {name} is {_what(getattr(snap, name))}, not a boolean")
    for name in _SNAP_INTS:
        if not _is_int(getattr(snap, name), 0, _U64):
            raise _Refused(f"the state's {name} is not an integer in 0..2**64-1")


def _check_lost(rec: tuple, nsched: int) -> None:
    if len(rec) != 4:
        raise _Refused(f"a lost-scheduler record has 4 fields, this one {len(rec)}")
    if not _is_int(rec[2], 1, nsched + 1):
        raise _Refused(f"scheduler {_val(rec[2])} is not one of 1..{nsched}")
    if type(rec[3]) is not list or len(rec[3]) > MAX_NODES:
        raise _Refused(f"the lost scheduler's processes are {_what(rec[3])}, not a list of pids")
    if not all(type(p) is Pid for p in rec[3]):
        raise _Refused("the lost scheduler's processes are not a list of pids")


def _check_record(rec, seq: int, nsched: int) -> int:
    """Check a decoded record (``seq``: the one it must carry): its shape
    and every field's type and range, so the record itself is a few values
    (a lost scheduler's pids aside, at most ``MAX_NODES``); for a ``q``
    record the bodies of its run too (``_measure``), whose tree size it
    returns (else 0).  Raises ``_Refused``."""
    if type(rec) is not tuple or len(rec) < 2:
        raise _Refused(f"{_what(rec)}, not a (seq, kind, ...) record")
    if type(rec[0]) is not int or rec[0] != seq:
        raise _Refused(f"numbered {_val(rec[0])} where seq {seq} comes next")
    kind = rec[1]
    if kind == "q":
        return _check_queue(rec, nsched)
    if kind == "d":
        _check_decision(rec)
    elif kind == "e":
        _check_event(rec)
    elif kind == "s":
        _check_snapshot(rec)
    elif kind == "lost":
        _check_lost(rec, nsched)
    else:
        raise _Refused(f"record kind {_val(kind)} is none the dispatcher writes")
    return 0


_EXC_PREFIX = re.compile(r"^(undecodable frame: )?([A-Za-z_.]*(Error|Exception): )?")


def _reason(e: BaseException) -> str:
    """A decoder's complaint, short, on one line."""
    text = _EXC_PREFIX.sub("", str(e)) or "malformed pickle"
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    text = "".join(c if c.isprintable() else " " for c in text)
    return text if len(text) <= 120 else text[:117] + "..."


def _read_header(f, path: str) -> tuple:
    """The header, checked; the file is left where the records start.  Not
    a journal (``NotAJournal``): a file that does not start with the pickle
    of the journal's magic, or of another version; a damaged journal
    (``BadRecord`` at byte 0): a header whose checksum or fields are wrong."""
    head = f.read(_HEADER_BYTES)
    if not head:
        raise NotAJournal(f"{path}: not a dispatcher journal (the file is empty)")
    bio = io.BytesIO(head)
    try:
        header = load_record(bio)
    except Exception as e:
        raise NotAJournal(f"{path}: not a dispatcher journal ({_reason(e)})") from None
    if type(header) is not tuple or len(header) != 3 or header[0] != JOURNAL_MAGIC[0]:
        raise NotAJournal(f"{path}: not a dispatcher journal (no journal header)")
    if header[1] != JOURNAL_MAGIC[1]:
        raise NotAJournal(
            f"{path}: a dispatcher journal of version {_val(header[1])}; this replay reads "
            f"version {JOURNAL_MAGIC[1]}"
        )
    end = bio.tell()
    crc = head[end : end + HEADER_CRC.size]
    if len(crc) < HEADER_CRC.size or HEADER_CRC.unpack(crc)[0] != zlib.crc32(head[:end]):
        raise BadRecord(path, 0, None, "the header's checksum does not match its bytes (damaged)")
    if not _is_int(header[2], 1, MAX_SCHEDULERS + 1):
        raise BadRecord(
            path, 0, None, f"the header names {_val(header[2])} schedulers (1..{MAX_SCHEDULERS})"
        )
    f.seek(end + HEADER_CRC.size)
    return header


def _read(path: str) -> tuple[tuple, list, set]:
    """``(header, records, big)``: every record checked; ``big`` the seqs of
    the runs whose bodies are too big to show or order-check whole."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise NotAJournal(f"{path}: cannot read it ({(e.strerror or 'error').lower()})") from None
    with f:
        try:
            size = os.fstat(f.fileno()).st_size
            header = _read_header(f, path)
        except OSError as e:
            raise NotAJournal(
                f"{path}: cannot read it ({(e.strerror or 'error').lower()})"
            ) from None
        nsched = header[2]
        records: list = []
        big: set = set()
        head_len = RECORD_HEAD.size
        while True:
            offset = f.tell()
            seq = len(records) + 1
            head = f.read(head_len)
            if not head:
                return header, records, big
            try:
                if len(head) < head_len:
                    raise _Refused("the file ends inside the record's frame head (cut short)")
                length, crc = RECORD_HEAD.unpack(head)
                if length > MAX_RECORD_BYTES:
                    raise _Refused(
                        f"says it is {length:,} bytes long (at most {MAX_RECORD_BYTES:,})"
                    )
                if length > size - offset - head_len:
                    raise _Refused(
                        f"says it is {length:,} bytes long, the file has "
                        f"{max(0, size - offset - head_len):,} left (cut short or damaged)"
                    )
                data = f.read(length)
                if len(data) != length:
                    raise _Refused("the file ends inside the record (cut short)")
                if zlib.crc32(data) != crc:
                    raise _Refused("its checksum does not match its bytes (damaged)")
                bio = io.BytesIO(data)
                try:
                    rec = load_record(bio)
                except Exception as e:
                    raise _Refused(f"cannot be decoded ({_reason(e)})") from None
                if bio.tell() != length:
                    raise _Refused(f"has {length - bio.tell():,} bytes after its pickle")
                if _check_record(rec, seq, nsched) > _BIG_RUN:
                    big.add(seq)
            except _Refused as e:
                raise BadRecord(path, offset, seq, str(e)) from None
            except OSError as e:
                why = f"cannot be read ({(e.strerror or 'error').lower()})"
                raise BadRecord(path, offset, seq, why) from None
            records.append(rec)


def read_records(path: str) -> tuple[tuple, list, None]:
    """Read a whole journal: ``(header, records, None)``, every record
    checked (the third item, once why reading stopped early, is kept for
    callers that unpack three: a journal that cannot be read to its end is
    refused now).

    Raises ``NotAJournal`` (naming the file) when it does not start with a
    journal header this replay reads, ``BadRecord`` (naming the record's
    byte offset and what is wrong) when a record is damaged, cut short, out
    of sequence, bigger than the bounds above, or holds a field of the wrong
    type, out of range or of an unknown kind."""
    header, records, _big = _read(path)
    return header, records, None


# ---------------------------------------------------------------- the replayed world
class _ReplayTable(PidTable):
    """The dispatcher's pid table rebuilt from ``e``/``lost`` records, plus
    what the journal does not record, learned from its decisions."""

    def __init__(self) -> None:
        super().__init__()
        self.closed_ports: set = set()

    def is_valid_tracer_port(self, port) -> bool:
        return type(port) is Port and port not in self.closed_ports


class _View:
    """The table and state as they were at an earlier point (for race windows):
    answers from the first saved prior value after that point, else now."""

    def __init__(self, table: _ReplayTable, undo: list, state: TracerState):
        self.t = table
        self.alive: dict = {}
        self.tracer: dict = {}
        self.reg: dict = {}
        self.st = None
        for kind, key, prior, _seq in undo:
            if kind == "alive":
                self.alive.setdefault(key, prior)
            elif kind == "tracer":
                self.tracer.setdefault(key, prior)
            elif kind == "reg":
                self.reg.setdefault(key, prior)
            elif kind == "state" and self.st is None:
                self.st = prior
        self.state = state if self.st is None else _state_from(self.st, self)

    def is_alive(self, pid) -> bool:
        return self.alive[pid] if pid in self.alive else self.t.is_alive(pid)

    def is_tracer(self, pid) -> bool:
        tr = self.tracer[pid] if pid in self.tracer else pid in self.t.tracers
        return tr and self.is_alive(pid)

    def whereis(self, name):
        pid = self.reg[name] if name in self.reg else self.t.registry.get(name)
        return pid if pid is not None and self.is_alive(pid) else None

    def is_valid_tracer_port(self, port) -> bool:
        return self.t.is_valid_tracer_port(port)


def _state_from(values: dict, liveness) -> TracerState:
    st = TracerState(liveness=liveness)
    for k, v in values.items():
        setattr(st, k, v)
    return st


def _fields(obj) -> dict:
    return {k: getattr(obj, k) for k in _STATE_FIELDS}


def _effect(kind: str, payload, before: dict) -> dict | None:
    """The state after one reset the seed makes, from ``before``; None if it
    changes nothing."""
    st = _state_from(before, None)
    v = st.version
    if kind == "exit":
        st.trace_check_exiting(payload, smp=True)
    else:
        m, receiver = payload
        disp_failure(m, receiver, st, lambda line: None)
    return _fields(st) if st.version != v else None


# ---------------------------------------------------------------- the report
@dataclass
class ReplayReport:
    """What a replay found.  ``ok`` when no decision diverged and no invariant broke."""

    path: str
    schedulers: int
    records: dict
    runs: int = 0
    totals: dict = field(default_factory=dict)
    recorded_totals: dict = field(default_factory=dict)
    divergences: list = field(default_factory=list)
    divergence_count: int = 0
    violations: list = field(default_factory=list)
    violation_count: int = 0
    race_window: int = 0
    inferred: int = 0
    unjournaled: int = 0
    queued_at_end: int = 0
    #: always None: a journal that cannot be read to its end is refused
    #: (``BadRecord``); kept for readers of the JSON report
    truncated: str | None = None
    #: per decided run: (q_seq, d_seq, recorded (action, receiver, reason), replayed ...)
    index: list = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return not self.divergence_count and not self.violation_count

    def to_json(self) -> dict:
        out = {
            k: getattr(self, k)
            for k in (
                "path",
                "schedulers",
                "records",
                "runs",
                "totals",
                "recorded_totals",
                "divergence_count",
                "violation_count",
                "violations",
                "race_window",
                "inferred",
                "unjournaled",
                "queued_at_end",
                "truncated",
            )
        }
        out["ok"] = self.ok
        out["divergences"] = [
            {
                **d,
                "receiver_recorded": term_to_json(d["receiver_recorded"]),
                "receiver_replayed": term_to_json(d["receiver_replayed"]),
            }
            for d in self.divergences
        ]
        return out


def _totals(made: Counter, delivered: Counter, dropped: Counter, queued: int) -> dict:
    """The shape of the dispatcher's ``statistics()``."""
    return totals(made, delivered, dropped, queued)


def _entry(q: tuple) -> QueueEntry:
    """The queue entry a journal ``q`` record holds (``QueueEntry.journal``)."""
    return QueueEntry(*q[2:10], 0)


class _Part:
    """In place of a ``q`` record's blob, part of a run step mode split
    (``_Replayer._split_head``): the run's decoded bodies, decoded once, and
    where the part starts, so splitting a run message by message costs a
    constant each time."""

    __slots__ = ("bodies", "start")

    def __init__(self, bodies: list, start: int):
        self.bodies, self.start = bodies, start


def _terms(q: tuple, limit: int | None = None) -> list:
    """The completed messages of a ``q`` record (first ``limit`` of them)."""
    e = _entry(q)
    if type(e.blob) is _Part:
        k = min(limit, e.n) if limit else e.n
        bodies = e.blob.bodies[e.blob.start : e.blob.start + k]
        return run_terms(bodies, e.ts_kind, e.base, e.active)
    try:
        bodies = loads_terms(e.blob)
    except Exception:
        return ["(undecodable bodies)"]
    return run_terms(bodies[:limit] if limit else bodies, e.ts_kind, e.base, e.active)


#: a message is shown cut short (``clip_term``) to about this many characters
SHOW_CHARS = 400
#: a violation's text is cut to this many characters
_TEXT_CHARS = 2000
#: a listing shows this many messages of each run
SHOW_MESSAGES = 10


def _show(term) -> str:
    """A message as dbg prints it (else as a term), in a bounded number of
    characters whatever the size of the term."""
    if type(term) is str:
        return term
    t = clip_term(term, SHOW_CHARS)
    text = format_dbg(t).rstrip("\n") or format_term(t)
    return text if len(text) <= 2 * SHOW_CHARS else text[: 2 * SHOW_CHARS] + " ..."


def _cut(text: str, most: int = _TEXT_CHARS) -> str:
    return text if len(text) <= most else text[:most] + " ..."


# ---------------------------------------------------------------- replay
class _Replayer:
    def __init__(
        self,
        path: str,
        header,
        records: list,
        big: set,
        max_divergences: int,
        max_violations: int,
    ):
        self.nsched = header[2]
        self.records = records
        self.big = big  # seqs of runs too big to order-check whole
        self.table = _ReplayTable()
        self.state = TracerState(liveness=self.table)
        self.recorded_state = _fields(self.state)  # the chain of 's' records
        self.pending: deque = deque()  # undecided 'q' records
        self.lost: set = set()
        self.undo: list = []  # (kind, key, prior value, seq) since the last decision
        self.effects: list = []  # (cause seq, kind, payload, deadline)
        self.made, self.delivered, self.dropped = Counter(), Counter(), Counter()
        self.rec_delivered, self.rec_dropped = Counter(), Counter()
        self.last_ts: tuple | None = None  # (us, q seq)
        self.order = OrderChecker()
        self.max_div, self.max_viol = max_divergences, max_violations
        kinds = Counter(r[1] for r in records)
        self.report = ReplayReport(path, self.nsched, dict(sorted(kinds.items())))

    # -- reporting ------------------------------------------------------------
    def violate(self, text: str) -> None:
        r = self.report
        r.violation_count += 1
        if len(r.violations) < self.max_viol:
            r.violations.append(_cut(text))

    # -- table and state changes ----------------------------------------------
    def _save_pid(self, pid, seq: int) -> None:
        self.undo.append(("alive", pid, pid in self.table.alive, seq))
        self.undo.append(("tracer", pid, pid in self.table.tracers, seq))

    def _save_state(self, seq: int) -> None:
        self.undo.append(
            ("state", None, {**_fields(self.state), "version": self.state.version}, seq)
        )

    def _exited(self, pid, seq: int, deadline: str) -> None:
        self._save_pid(pid, seq)
        for name, p in self.table.registry.items():
            if p == pid:
                self.undo.append(("reg", name, p, seq))
        self.table.exited(pid)
        self._save_state(seq)
        self.state.trace_check_exiting(pid, smp=True)
        self.effects.append((seq, "exit", pid, deadline))

    def on_event(self, rec) -> None:
        seq, ev = rec[0], rec[2] if len(rec) > 2 else None
        self._check_effects(("q", "e"))
        if ev == "spawn":
            self._save_pid(rec[3], seq)
            self.table.spawned(rec[3])
        elif ev == "exit":
            self._exited(rec[3], seq, "ingest")
        elif ev == "tracer":
            self._save_pid(rec[3], seq)
            self.table.mark_tracer(rec[3])
        elif ev == "unregister":
            self.undo.append(("reg", rec[3], self.table.registry.get(rec[3]), seq))
            self.table.unregister(rec[3])
        elif ev == "register":  # recorded by the control thread
            self.undo.append(("reg", rec[3], self.table.registry.get(rec[3]), seq))
            self.table.registry[rec[3]] = rec[4]
        elif ev == "port_open":
            self.table.closed_ports.discard(rec[3])
        elif ev == "port_close":
            self.table.closed_ports.add(rec[3])
            self._save_state(seq)
            self.state.trace_check_exiting(rec[3], smp=True)
            self.effects.append((seq, "exit", rec[3], "control"))

    def on_lost(self, rec) -> None:
        seq, k, pids = rec[0], rec[2], rec[3]
        self._check_effects(("q", "e", "lost"))
        self.undo.append(("lost", None, set(self.lost), seq))
        self.lost.add(k)
        for pid in pids:
            self._exited(pid, seq, "lost")

    def on_snapshot(self, rec) -> None:
        seq, snap = rec[0], rec[2]
        got = _fields(snap)
        before = self.recorded_state
        for i, (_cause, kind, payload, _dl) in enumerate(self.effects):
            want = _effect(kind, payload, before)
            if want is None or want == got:
                del self.effects[i]
                break
        self.recorded_state = got
        self._save_state(seq)
        self.state.load(snap)

    def _check_effects(self, deadlines: tuple, final: bool = False) -> None:
        """Resets whose deadline has come must be in the recorded state by now."""
        keep = []
        for cause, kind, payload, deadline in self.effects:
            if not final and deadline not in deadlines:
                keep.append((cause, kind, payload, deadline))
                continue
            if _effect(kind, payload, self.recorded_state) is not None:
                what = (
                    f"exit of {_nil(payload)}"
                    if kind == "exit"
                    else f"failed {M.TYPE_NAMES[payload[0].type]} to {_nil(payload[1])}"
                )
                self.violate(
                    f"seq {cause}: state not reset after the {what} "
                    f"(erts_trace_check_exiting / sys_msg_disp_failure); recorded state "
                    f"{_brief(self.recorded_state)}"
                )
        self.effects = keep

    # -- queue ----------------------------------------------------------------
    def on_queue(self, rec) -> None:
        self._check_effects(("q", "e"))
        seq, _, type_, from_, to, ts_kind, blob, n, base, active = rec
        self.made[type_] += n
        self.pending.append(rec)
        if ts_kind:
            if self.last_ts is not None and base <= self.last_ts[0]:
                terms = _terms(rec, 1)
                self.violate(
                    f"seq {seq}: timestamp {format_term(us_to_ts(base))} of "
                    f"{_show(terms[0])} is not after {format_term(us_to_ts(self.last_ts[0]))}"
                    f" (the last of the run queued at seq {self.last_ts[1]})"
                )
            self.last_ts = (base + n - 1, seq)

    def on_decision(self, rec, i: int) -> None:
        self._check_effects(("dispatch",))
        dseq, _, d_type, d_n, d_action, d_receiver, d_reason = rec
        recorded = Decision(d_action, d_receiver, d_reason)
        q = self.pending[0] if self.pending else None
        # step mode (Emulator.step_dispatcher) decides the first d_n of a run
        if (
            q is not None
            and q[2] == d_type
            and type(d_n) is int
            and 0 < d_n < q[7]
            and (d_type != M.SYS_MSG_TYPE_PROC_MSG or d_receiver == q[4])
        ):
            q = self._split_head(d_n)
        elif q is None or (q[2], q[7]) != (d_type, d_n):
            if d_type == M.SYS_MSG_TYPE_PROC_MSG and d_n == 1 and type(d_receiver) is Pid:
                # trace_delivered's reply is queued by the control thread with no 'q' record
                q = (
                    dseq,
                    "q",
                    d_type,
                    d_receiver,
                    d_receiver,
                    M.TS_NONE,
                    pickle.dumps([]),
                    1,
                    0,
                    0,
                )
                self.made[d_type] += 1
                self.report.unjournaled += 1
            else:
                self.violate(
                    f"seq {dseq}: decision for {M.TYPE_NAMES.get(d_type, d_type)} x{d_n} "
                    + (
                        f"but the oldest undecided run (seq {q[0]}) is "
                        f"{M.TYPE_NAMES.get(q[2], q[2])} x{q[7]}"
                        if q
                        else "but no queued run is undecided"
                    )
                )
                self._count(self.rec_delivered, self.rec_dropped, d_type, d_n, recorded)
                self.undo.clear()
                return
        else:
            self.pending.popleft()
        qseq, _, type_, from_, to, ts_kind, blob, n, base, active = q
        m = M.SysMsg(type_, from_, to, None, ts_kind)
        d = self._decide(m, self.table, self.state, self.lost)
        race = False
        if not _same(d, recorded):
            d2 = self._window(m, recorded, i, qseq)
            if d2 is not None:
                d, race = d2, True
                self.report.race_window += 1
            elif (
                d.action == DELIVER_PORT
                and recorded.reason == "port_closed"
                and recorded.receiver == d.receiver
            ):
                self.table.closed_ports.add(d.receiver)  # closed by a control command
                self.report.inferred += 1
                d = self._decide(m, self.table, self.state, self.lost)
            elif recorded.action == DROP and recorded.reason == "emulator_closed":
                d = recorded  # left undecided when the stopping dispatcher ran out of time
            elif (
                type_ == M.SYS_MSG_TYPE_ERRLGR
                and recorded.action == DELIVER_PID
                and d.reason == "no_error_logger"
                and self.table.is_alive(recorded.receiver)
            ):
                self.table.registry[am_error_logger] = recorded.receiver  # registered by control
                self.report.inferred += 1
                d = self._decide(m, self.table, self.state, self.lost)
        self._count(self.delivered, self.dropped, type_, n, d)
        self._count(self.rec_delivered, self.rec_dropped, type_, n, recorded)
        self.report.runs += 1
        diverged = not _same(d, recorded)
        self.report.index.append((qseq, dseq, type_, n, _triple(recorded), _triple(d), race))
        if diverged:
            self._diverged(q, dseq, recorded, d)
        elif type_ == M.SYS_MSG_TYPE_TRACE and d.action != DROP:
            big = qseq in self.big
            for term in _terms(q):
                # a run too big to show whole is checked on its messages cut
                # short: the order needs their first few fields only
                v = self.order.feed(format_term(d.receiver), clip_term(term, 2000) if big else term)
                if v:
                    self.violate(f"seq {qseq}: {v}")
        self.undo.clear()
        if d.action == DROP and d.failure:
            # sys_msg_disp_failure, on the replayed state, before the next decision
            if type_ == M.SYS_MSG_TYPE_ERRLGR:
                return  # prints only
            if type_ in (M.SYS_MSG_TYPE_SEQTRACE, M.SYS_MSG_TYPE_SYSMON, M.SYS_MSG_TYPE_SYSPROF):
                before = self.state.version
                for _ in range(n):
                    disp_failure(m, d.receiver, self.state)
                if self.state.version != before:
                    self.effects.append((dseq, "fail", (m, d.receiver), "dispatch"))

    def _split_head(self, k: int) -> tuple:
        """The first ``k`` messages of the oldest undecided run as a record
        of their own; the rest stays undecided, its timestamps after them."""
        q = self.pending[0]
        seq, kind, e = q[0], q[1], _entry(q)
        part = e.blob if type(e.blob) is _Part else _Part(loads_terms(e.blob), 0)  # checked
        head = e._replace(blob=_Part(part.bodies, part.start), n=k)
        tail = e._replace(
            blob=_Part(part.bodies, part.start + k),
            n=e.n - k,
            base=e.base + k if e.ts_kind else 0,
        )
        self.pending[0] = (seq, kind, *tail.journal())
        return (seq, kind, *head.journal())

    def _decide(self, m, table, state, lost) -> Decision:
        return resolve(m.type, m.from_, m.to, state, table, lost, self.nsched)

    def _window(self, m, recorded: Decision, i: int, qseq: int) -> Decision | None:
        """The decision at an earlier point since the previous decision (and
        after the run was queued), if one matches."""
        undo = self.undo
        for j in range(len(undo) - 1, -1, -1):
            if undo[j][3] < qseq:
                break
            view = _View(self.table, undo[j:], self.state)
            lost = self.lost
            for kind, _k, prior, _s in undo[j:]:
                if kind == "lost":
                    lost = prior
                    break
            d = self._decide(m, view, view.state, lost)
            if _same(d, recorded):
                return d
        if recorded.reason == "scheduler_lost" and type(recorded.receiver) is Pid:
            # the loss is marked before its record is made
            k = pid_owner(recorded.receiver, self.nsched)
            for rec in self.records[i + 1 :]:
                if rec[1] == "d":
                    break
                if rec[1] == "lost" and rec[2] == k:
                    d = self._decide(m, self.table, self.state, self.lost | {k})
                    return d if _same(d, recorded) else None
        return None

    @staticmethod
    def _count(delivered: Counter, dropped: Counter, type_, n, d: Decision) -> None:
        if d.action == DROP:
            dropped[(type_, d.reason)] += n
        else:
            delivered[type_] += n

    def _diverged(self, q, dseq, recorded: Decision, d: Decision) -> None:
        r = self.report
        r.divergence_count += 1
        if len(r.divergences) >= self.max_div:
            return
        terms = _terms(q, 5)
        r.divergences.append(
            {
                "seq": dseq,
                "queued_seq": q[0],
                "type": M.TYPE_NAMES[q[2]],
                "n": q[7],
                "from": _nil(q[3]),
                "recorded": _word(recorded),
                "replayed": _word(d),
                "receiver_recorded": recorded.receiver,
                "receiver_replayed": d.receiver,
                "state": _brief(_fields(self.state)),
                "messages": [_show(t) for t in terms],
            }
        )

    # -- the walk ---------------------------------------------------------------
    def run(self) -> ReplayReport:
        for i, rec in enumerate(self.records):
            kind = rec[1]
            if kind == "q":
                self.on_queue(rec)
            elif kind == "d":
                self.on_decision(rec, i)
            elif kind == "s":
                self.on_snapshot(rec)
            elif kind == "e":
                self.on_event(rec)
            elif kind == "lost":
                self.on_lost(rec)
        self._check_effects((), final=True)
        r = self.report
        queued = sum(q[7] for q in self.pending)
        r.queued_at_end = queued
        r.totals = _totals(self.made, self.delivered, self.dropped, queued)
        r.recorded_totals = _totals(self.made, self.rec_delivered, self.rec_dropped, queued)
        return r


def _same(a: Decision, b: Decision) -> bool:
    return a.action == b.action and a.receiver == b.receiver and a.reason == b.reason


def _triple(d: Decision) -> tuple:
    return (d.action, d.receiver, d.reason)


def _word(d: Decision) -> str:
    if d.action == DROP:
        return f"drop {d.reason} ({_nil(d.receiver)})"
    return f"{ACTION_NAMES[d.action]} to {format_term(d.receiver)}"


def _nil(v) -> str:
    return "nil" if v is NIL else format_term(v)


def _brief(values: dict) -> str:
    show = _nil
    return (
        f"default_tracer={show(values['default_tracer'])} "
        f"seq_tracer={show(values['system_seq_tracer'])} "
        f"monitor={show(values['system_monitor'])} profile={show(values['system_profile'])}"
    )


def replay(path: str, *, max_divergences: int = 20, max_violations: int = 50) -> ReplayReport:
    """Replay journal ``path``, every record checked first (``read_records``):
    raises ``NotAJournal`` for a file that is not a journal, ``BadRecord``
    for a journal with a record that cannot be read or is malformed."""
    header, records, big = _read(path)
    return _Replayer(path, header, records, big, max_divergences, max_violations).run()


# ---------------------------------------------------------------- listing
def queue_listing(
    path: str, report: ReplayReport, around: int | None = None, limit: int = 20
) -> list[dict]:
    """The journal's records near ``around`` (a seq; default: the first
    divergence, else the start) with each run's messages and decisions.

    Shows ``limit`` runs, half before ``around``, and the table events and
    state changes recorded among them (at most ``10 * limit`` records in
    all), in seq order; each run with its first ``SHOW_MESSAGES`` messages,
    each cut short (``SHOW_CHARS``), so the listing is bounded whatever the
    journal holds."""
    idx = report.index
    if around is None:
        around = report.divergences[0]["seq"] if report.divergences else 0
    at = next((k for k, e in enumerate(idx) if e[1] >= around or e[0] >= around), len(idx))
    lo_k = max(0, at - limit // 2)
    chosen = idx[lo_k : lo_k + max(1, limit)]
    if not chosen:
        return []
    by_q = {e[0]: e for e in chosen}
    lo = min(min(e[0] for e in chosen), around)
    hi = max(max(e[1] for e in chosen), around)
    _, records, _ = read_records(path)
    out: list = []
    most = 10 * max(1, limit)
    for rec in records:
        seq, kind = rec[0], rec[1]
        if seq < lo or seq > hi:
            continue
        if len(out) >= most:
            out.append({"seq": seq, "kind": "more", "text": f"... records up to #{hi} not listed"})
            break
        if kind == "q":
            e = by_q.get(seq)
            item = {
                "seq": seq,
                "kind": "q",
                "type": M.TYPE_NAMES.get(rec[2], rec[2]),
                "n": rec[7],
                "messages": [_show(t) for t in _terms(rec, SHOW_MESSAGES)],
            }
            if rec[7] > SHOW_MESSAGES:
                item["messages"].append(f"... and {rec[7] - SHOW_MESSAGES} more")
            if e is not None:
                rec_d, rep_d = Decision(*e[4]), Decision(*e[5])
                item.update(
                    decided_at=e[1],
                    recorded=_word(rec_d),
                    replayed=_word(rep_d),
                    diverges=not _same(rec_d, rep_d),
                    race_window=e[6],
                )
            out.append(item)
        elif kind == "d":
            out.append(
                {
                    "seq": seq,
                    "kind": "d",
                    "type": M.TYPE_NAMES.get(rec[2], rec[2]),
                    "n": rec[3],
                    "text": _word(Decision(rec[4], rec[5], rec[6])),
                }
            )
        elif kind == "s":
            out.append(
                {"seq": seq, "kind": "s", "text": f"v{rec[2].version} " + _brief(_fields(rec[2]))}
            )
        elif kind == "e":
            out.append(
                {
                    "seq": seq,
                    "kind": "e",
                    "text": " ".join(x if type(x) is str else _nil(x) for x in rec[2:]),
                }
            )
        elif kind == "lost":
            out.append(
                {"seq": seq, "kind": "lost", "text": f"scheduler {rec[2]}: {len(rec[3])} processes"}
            )
    return out


def format_listing(items: list[dict], around: int | None = None) -> str:
    """The listing as text: each run's messages in dbg's format under its decision."""
    lines = []
    for it in items:
        mark = ">>" if around is not None and it["seq"] == around else "  "
        if it["kind"] == "q":
            head = f"{mark}#{it['seq']:<7} queued {it['type']} x{it['n']}"
            if "recorded" in it:
                head += f"  -> #{it['decided_at']} {it['recorded']}"
                if it["diverges"]:
                    head += f"  DIVERGES: replay says {it['replayed']}"
                elif it["race_window"]:
                    head += "  (seen before a concurrent change)"
            else:
                head += "  (undecided)"
            lines.append(head)
            lines += [f"{' ' * 11}{m}" for m in it["messages"]]
        else:
            lines.append(
                f"{mark}#{it['seq']:<7} {it['kind']:<6} "
                + (f"{it['type']} x{it['n']}: {it['text']}" if it["kind"] == "d" else it["text"])
            )
    return "\n".join(lines) + ("\n" if lines else "")
