"""Read a dispatcher journal whole and check every record before any replay.

A journal (written by ``dispatcher.journal``) is data from outside (journals
travel between users), so it is read whole and checked before anything is
replayed (``read_records``): each record's frame (length and CRC-32,
``dispatcher.journal``), its pickle through the restricted decoder, its seq
(the next one), and every field's type, range and kind; a run's bodies must
be Erlang terms whose tree (each reference to a shared value counted again)
stays within ``MAX_NODES`` values and ``MAX_DEPTH`` levels, measured in time
proportional to the pickle, not to the tree.  The first record that fails is
a ``BadRecord`` naming its byte offset and what is wrong, and nothing is
replayed; a file that does not start with a journal header is
``NotAJournal``.  ``smp.app.replay`` replays what this returns.
"""

from __future__ import annotations

import io
import math
import os
import re
import zlib
from dataclasses import fields

from dispatcher.journal import HEADER_CRC, JOURNAL_MAGIC, RECORD_HEAD
from smp.core import messages as M
from smp.core.dispatch import DELIVER_PID, DELIVER_PORT, DROP, DROP_REASONS
from smp.core.state import Snapshot
from smp.core.terms import Atom, BitString, ExportFun, Fun, ImproperList, Map, Pid, Port, Ref
from smp.wire.codec import MAX_FRAME, MAX_RUN, load_record, loads_terms

__all__ = [
    "NotAJournal",
    "BadRecord",
    "MAX_NODES",
    "MAX_DEPTH",
    "read_records",
    "frames_whole",
    "ACTION_NAMES",
]


ACTION_NAMES = {DELIVER_PID: "deliver", DELIVER_PORT: "deliver_port", DROP: "drop"}


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


#: the journal versions read: 2 had no ``end`` record (whether such a journal
#: is whole cannot be told), 3 ends with one
VERSIONS = (2, JOURNAL_MAGIC[1])


#: why a version 3 journal whose last record is not its end is refused
NO_END = (
    "the journal has no end record (cut short: the run was killed, a write failed, or the "
    "file was cut)"
)


def _check_end(rec: tuple) -> None:
    if len(rec) != 3:
        raise _Refused(f"an end record has 3 fields, this one {len(rec)}")
    if not _is_int(rec[2], 0, 1 << 63):
        raise _Refused(f"the end record's count of messages made is {_val(rec[2])}")


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
    elif kind == "end":
        _check_end(rec)
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
    except Exception:
        # (the decoder's complaint about a file of another kind says nothing
        # to its reader: "Memo value not found at index 101")
        raise NotAJournal(f"{path}: not a dispatcher journal (no journal header)") from None
    if type(header) is not tuple or len(header) != 3 or header[0] != JOURNAL_MAGIC[0]:
        raise NotAJournal(f"{path}: not a dispatcher journal (no journal header)")
    if header[1] not in VERSIONS:
        raise NotAJournal(
            f"{path}: a dispatcher journal of version {_val(header[1])}; this replay reads "
            f"versions {' and '.join(map(str, VERSIONS))}"
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


def _unreadable(path: str, e: OSError) -> NotAJournal:
    return NotAJournal(f"{path}: cannot read it ({(e.strerror or 'error').lower()})")


def _opened(path: str):
    """``(file, its size, its header)``: the journal opened and its header
    read and checked (``NotAJournal`` otherwise); the caller closes it."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise _unreadable(path, e) from None
    try:
        return f, os.fstat(f.fileno()).st_size, _read_header(f, path)
    except OSError as e:
        f.close()
        raise _unreadable(path, e) from None
    except BaseException:
        f.close()
        raise


def _read(path: str) -> tuple[tuple, list, set]:
    """``(header, records, big)``: every record checked; ``big`` the seqs of
    the runs whose bodies are too big to show or order-check whole."""
    f, size, header = _opened(path)
    with f:
        nsched = header[2]
        records: list = []
        big: set = set()
        head_len = RECORD_HEAD.size
        while True:
            offset = f.tell()
            seq = len(records) + 1
            head = f.read(head_len)
            if not head:
                if header[1] >= 3 and (not records or records[-1][1] != "end"):
                    raise BadRecord(path, offset, None, NO_END)
                return header, records, big
            if records and records[-1][1] == "end":
                raise BadRecord(path, offset, seq, "a record after the journal's end record")
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


def frames_whole(path: str) -> int:
    """Walk the journal's record frames without decoding them: how many
    there are, or ``NotAJournal``/``BadRecord`` as ``read_records`` raises
    them when the header is wrong, the file ends inside a frame or (version
    3) its last record is no end record (that one decoded).  What a
    run checks of the journal it wrote (decoding every record would take
    about as long as the run did: 3 s for 27 MB)."""
    f, size, header = _opened(path)
    with f:
        try:
            n, head_len, last = 0, RECORD_HEAD.size, None
            while True:
                offset = f.tell()
                head = f.read(head_len)
                if not head:
                    if header[1] >= 3 and not _is_end(f, last):
                        raise BadRecord(path, offset, None, NO_END)
                    return n
                length = RECORD_HEAD.unpack(head)[0] if len(head) == head_len else size
                if length > size - offset - head_len:
                    raise BadRecord(path, offset, n + 1, "the file ends inside it (cut short)")
                last = (offset + head_len, length)
                f.seek(length, os.SEEK_CUR)
                n += 1
        except OSError as e:
            raise _unreadable(path, e) from None


def _is_end(f, last: tuple | None) -> bool:
    """Whether the record whose pickle is at ``last`` (offset, length) is an
    end record, decoded alone (an end record's pickle is a few dozen bytes:
    a longer one is not)."""
    if last is None or last[1] > 64:
        return False
    f.seek(last[0])
    try:
        rec = load_record(io.BytesIO(f.read(last[1])))
    except Exception:
        return False
    return type(rec) is tuple and len(rec) == 3 and rec[1] == "end"


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
