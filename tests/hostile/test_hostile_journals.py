"""Hostile journals: ``smp-emu replay`` reads a journal as data from a
stranger.  Whatever the file holds, replay answers with the replay report of
a journal it read to its end, or one line on stderr: exit 1 naming the byte
offset of a record that cannot be read or is malformed, exit 2 for a file
that is not a journal at all; never a traceback, never unbounded memory.

One real journal (a traced seq_trace chain: several thousand decisions) is
made per module.  Byte flips and the CLI cases run in a child under a memory
cap and a time limit (``hostile.capped``), each batch in one child so the
module stays cheap; the hand edits run in-process (each read stops at the
edited record, early in the journal)."""

from __future__ import annotations

import json
import os
import pickle
import random
import sys
import time
import traceback
import zlib

import pytest

import smp
from dispatcher.journal import HEADER_CRC, RECORD_HEAD, encode_header, encode_record
from hostile.capped import Capped, assert_one_line, run_capped, run_cli
from smp import Atom as A
from smp.app.replay import (
    MAX_DEPTH,
    MAX_NODES,
    BadRecord,
    NotAJournal,
    format_listing,
    queue_listing,
    read_records,
    replay,
)
from smp.core.dispatch import DELIVER_PID, DROP
from smp.core.messages import SYS_MSG_TYPE_TRACE
from smp.core.state import Snapshot
from smp.core.terms import Port
from smp.wire.codec import MAX_RUN

pytestmark = pytest.mark.timeout(120)

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CAP = 512 * 1024 * 1024
DECISIONS = 3000  # the seq_trace chain makes two runs per send


async def chain_sender(proc, to, n):
    await proc.seq_trace("label", 7)
    await proc.seq_trace("send", True)
    for i in range(n):
        await proc.send(to, (A("hop"), proc.pid, i))


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """A real journal: spawns, tracer marks, a state change and an exit, then
    a traced seq_trace chain (every send makes a TRACE and a SEQTRACE run)."""
    path = str(tmp_path_factory.mktemp("j") / "chain.journal")
    with smp.Emulator(mode="smp", schedulers=2, journal=path) as vm:
        seqt, sink, tracer, doomed = (vm.spawn_collector() for _ in range(4))
        vm.set_system_seq_tracer(seqt)
        vm.exit(doomed, A("kill"))
        p = vm.spawn(chain_sender, sink, DECISIONS // 2)
        vm.trace(p, True, ["send", "timestamp"], tracer=tracer)
        vm.run()
    r = replay(path)
    assert r.ok and r.runs == DECISIONS, (r.divergences, r.violations)
    header, records, _ = read_records(path)
    return path, header, records


def frame_offsets(header, records) -> list[int]:
    """The byte offset of every record of a journal of these records."""
    at = len(encode_header(header[2]))
    out = []
    for rec in records:
        out.append(at)
        at += len(encode_record(rec))
    return out


def end_record(records) -> tuple:
    """The end record the dispatcher writes after ``records``."""
    made = sum(r[7] for r in records if type(r) is tuple and r[1:2] == ("q",))
    return (len(records) + 1, "end", made)


def write(path, nsched: int, records, raw: bytes = b"", end: bool = True) -> str:
    """A journal of ``records`` (then ``raw``), closed with its end record
    unless ``records`` have one or ``end`` is False."""
    records = list(records)
    with open(path, "wb") as f:
        f.write(encode_header(nsched))
        for rec in records:
            f.write(encode_record(rec))
        f.write(raw)
        if end and not (records and records[-1][1:2] == ("end",)):
            f.write(encode_record(end_record(records)))
    return str(path)


def first(records, kind: str, pred=lambda r: True) -> int:
    return next(i for i, r in enumerate(records) if r[1] == kind and pred(r))


def as_cli(e: Exception, code: int) -> Capped:
    """What the CLI prints for an exception replay raised (``smp-emu: ...``)."""
    return Capped(code, "", f"smp-emu: {e}\n", 0.0, 0)


# ---------------------------------------------------------------- the memo DAG
def dag(depth: int) -> list:
    """A list whose tree has 2**depth leaves: each level refers to the one
    below twice (the pickle's memo keeps it a few hundred bytes)."""
    x: list = []
    for _ in range(depth):
        x = [x, x]
    return x


def test_memo_dag_record_is_refused_in_one_line(real, tmp_path):
    path, header, records = real
    rec = (1, "e", "spawn", dag(30))
    assert len(pickle.dumps(rec, pickle.HIGHEST_PROTOCOL)) < 400
    bad = write(tmp_path / "dag.journal", 2, [rec])
    with pytest.raises(BadRecord) as ei:
        replay(bad)
    assert ei.value.offset == len(encode_header(2)) and ei.value.seq == 1
    assert "argument 1 of the spawn event is a list" in str(ei.value)
    assert_one_line(as_cli(ei.value, 1), 1)


def test_memo_dag_in_message_bodies_is_refused_by_its_tree_size(real, tmp_path):
    path, header, records = real
    q = records[first(records, "q", lambda r: r[2] == SYS_MSG_TYPE_TRACE)]
    for depth, ok in ((12, True), (30, False)):
        body = (A("trace"), q[3], A("send"), dag(depth), q[4])
        blob = pickle.dumps([body], pickle.HIGHEST_PROTOCOL)
        assert len(blob) < 400
        rec = (1, "q", SYS_MSG_TYPE_TRACE, q[3], q[4], 0, blob, 1, 0, 0)
        j = write(tmp_path / f"dag{depth}.journal", 2, [rec])
        if ok:  # 2**12 leaves: a term like any other
            assert replay(j).records == {"q": 1, "end": 1}
            continue
        with pytest.raises(BadRecord, match=f"more than {MAX_NODES:,} values") as ei:
            replay(j)
        assert ei.value.offset == len(encode_header(2))


# ---------------------------------------------------------------- hand edits
def edits(records, nsched: int):
    """(name, index of the record replaced, the edited record, what the
    refusal says): every field of every kind of record, wrong."""
    iq = first(records, "q", lambda r: r[2] == SYS_MSG_TYPE_TRACE and r[5])
    idl = first(records, "d", lambda r: r[4] == DELIVER_PID)
    ie = first(records, "e", lambda r: r[2] == "spawn")
    is_ = first(records, "s")
    # each edit goes where the first run was queued: every record is checked
    # as it is read, so a journal of the records before it and the edit will do
    at = first(records, "q")
    q, d, e, s = ((at + 1, *records[k][1:]) for k in (iq, idl, ie, is_))
    pid, port = e[3], Port(3 * (nsched + 1))
    body = pickle.dumps

    def qf(i, v):
        return q[:i] + (v,) + q[i + 1 :]

    def df(i, v):
        return d[:i] + (v,) + d[i + 1 :]

    def snap(**kw):
        f = {k: getattr(s[2], k) for k in Snapshot.__slots__}
        return (s[0], "s", Snapshot(**{**f, **kw}))

    deep = 1
    for _ in range(MAX_DEPTH + 5):
        deep = (deep,)
    loop: list = [1]
    loop.append(loop)
    yield from [
        ("q type str", at, qf(2, "1"), "message type '1'"),
        ("q type undefined", at, qf(2, 0), "message type 0"),
        ("q type unknown", at, qf(2, 99), "message type 99"),
        ("q sender", at, qf(3, [pid]), "sender is a list"),
        ("q receiver", at, qf(4, 3.5), "receiver is a float"),
        ("q ts_kind", at, qf(5, 7), "timestamp kind 7"),
        ("q ts_kind negative", at, qf(5, -1), "timestamp kind -1"),
        ("q blob type", at, qf(6, "bodies"), "bodies are a str"),
        ("q blob garbage", at, qf(6, b"\x80\x05garbage"), "bodies cannot be decoded"),
        ("q blob count", at, qf(6, body([(A("a"),), (A("b"),)])), "does not hold the 1"),
        ("q blob not tuples", at, qf(6, body([A("a")])), "is not a tuple"),
        ("q blob str", at, qf(6, body([("text",)])), "a str, which is no Erlang term"),
        ("q blob nan", at, qf(6, body([(float("nan"),)])), "not finite"),
        ("q blob deep", at, qf(6, body([deep])), f"nests deeper than {MAX_DEPTH}"),
        ("q blob cycle", at, qf(6, body([(loop,)])), "contains itself"),
        ("q blob class", at, qf(6, body([({1: 2},)])), "a dict, which is no Erlang term"),
        ("q n zero", at, qf(7, 0), "a run of 0 messages"),
        ("q n huge", at, qf(7, MAX_RUN + 1), "a run of 1000001"),
        ("q n bool", at, qf(7, True), "a run of a boolean"),
        ("q base negative", at, qf(8, -5), "timestamp base -5"),
        ("q base huge", at, qf(8, 1 << 70), "an integer of 71 bits"),
        ("q active", at, qf(9, 3), "active scheduler count 3"),
        ("q arity", at, q + (0,), "10 fields, this one 11"),
        ("d type", at, df(2, "TRACE"), "message type 'TRACE'"),
        ("d n", at, df(3, -1), "a decision for -1 messages"),
        ("d action", at, df(4, 3), "action 3"),
        ("d action str", at, df(4, "deliver"), "action 'deliver'"),
        ("d receiver", at, df(5, (pid,)), "receiver is a tuple"),
        ("d deliver to port", at, df(5, port), "deliver to a port"),
        ("d reason on delivery", at, df(6, "receiver_dead"), "a delivery with a drop reason"),
        ("d drop reason", at, df(4, DROP)[:6] + ("because",), "drop reason 'because'"),
        ("d drop no reason", at, df(4, DROP)[:6] + (None,), "drop reason nil"),
        ("d arity", at, d[:6], "7 fields, this one 6"),
        ("e kind", at, e[:2] + ("respawn", pid), "table event 'respawn'"),
        ("e kind type", at, e[:2] + (7, pid), "table event 7"),
        ("e spawn port", at, e[:3] + (port,), "argument 1 of the spawn event is a port"),
        ("e spawn arity", at, e + (pid,), "the spawn event has 1 argument(s), this one 2"),
        ("e register name", at, e[:2] + ("register", "name", pid), "argument 1 of the register"),
        ("e unregister pid", at, e[:2] + ("unregister", A("n"), 5), "argument 2 of the unreg"),
        ("e port_close pid", at, e[:2] + ("port_close", pid), "port_close event is a pid"),
        ("e spawn set", at, e[:3] + ({pid},), "argument 1 of the spawn event is a set"),
        ("s not snapshot", at, (s[0], "s", tuple(s[2].__reduce__()[1])), "one state snapshot"),
        ("s arity", at, s + (s[2],), "one state snapshot"),
        ("s tracer", at, snap(default_tracer=5), "default_tracer is an integer"),
        ("s seq tracer", at, snap(system_seq_tracer="false"), "system_seq_tracer is a str"),
        ("s bool", at, snap(busy_port=1), "busy_port is an integer, not a boolean"),
        ("s int", at, snap(long_gc=-1), "long_gc is not an integer in 0..2**64-1"),
        ("s version", at, snap(version="7"), "version is not an integer"),
        ("lost scheduler 0", at, (q[0], "lost", 0, []), "scheduler 0 is not one of 1..2"),
        ("lost scheduler big", at, (q[0], "lost", nsched + 1, []), "scheduler 3 is not one"),
        ("lost pids", at, (q[0], "lost", 1, [port]), "not a list of pids"),
        ("lost pids tuple", at, (q[0], "lost", 1, (pid,)), "processes are a tuple"),
        ("lost arity", at, (q[0], "lost", 1), "4 fields, this one 3"),
        ("seq skipped", at, (q[0] + 5, *q[1:]), f"numbered {q[0] + 5} where seq {q[0]}"),
        ("seq type", at, (str(q[0]), *q[1:]), "numbered '"),
        ("kind unknown", at, (q[0], "z", *q[2:]), "record kind 'z'"),
        ("kind type", at, (q[0], 1.5, *q[2:]), "record kind a float"),
        ("not a tuple", at, list(q), "a list, not a (seq, kind, ...) record"),
        ("empty tuple", at, (), "a tuple, not a (seq, kind"),
        ("a dag", at, dag(25), "a list, not a (seq"),
    ]


def test_hand_edits_of_every_field_are_refused_at_their_offset(real, tmp_path):
    path, header, records = real
    at = first(records, "q")
    for k in ("q", "d", "e", "s"):  # unedited, each record is read where the edits go
        rec = (at + 1, *records[first(records, k)][1:])
        assert read_records(write(tmp_path / "ok.journal", header[2], records[:at] + [rec]))
    seen = set()
    for name, i, rec, says in edits(records, header[2]):
        # what follows the edited record is never read: leave it out
        j = write(tmp_path / "edited.journal", header[2], records[:i] + [rec])
        with pytest.raises(BadRecord) as ei:
            replay(j)
        e = ei.value
        assert (e.offset, e.seq) == (frame_offsets(header, records[: i + 1])[i], i + 1), (name, e)
        assert says in e.why, (name, e.why)
        assert_one_line(as_cli(e, 1), 1)
        seen.add(name.split()[0])
    assert seen >= {"q", "d", "e", "s", "lost", "seq", "kind"}


def test_well_formed_records_of_every_kind_are_read(real, tmp_path):
    """The control for the edits: the same kinds, well formed, are read."""
    path, header, records = real
    i = first(records, "q")
    pid = records[first(records, "e")][3]
    port = Port(3 * (header[2] + 1))
    extra = [
        ("lost", 2, [pid]),
        ("e", "register", A("name"), port),
        ("e", "unregister", A("name"), None),
        ("e", "port_open", port),
        ("e", "port_close", port),
    ]
    recs = records[:i] + [(i + 1 + k, *x) for k, x in enumerate(extra)]
    j = write(tmp_path / "kinds.journal", header[2], recs)
    got = replay(j).records
    assert got["lost"] == 1 and got["e"] >= 4


def test_frame_damage_is_refused_at_its_offset(real, tmp_path):
    path, header, records = real
    i = first(records, "d")
    good = encode_record(records[i])
    data = good[RECORD_HEAD.size :]
    crc = RECORD_HEAD.unpack(good[: RECORD_HEAD.size])[1]
    cases = [
        ("checksum", RECORD_HEAD.pack(len(data), crc ^ 1) + data, "checksum does not match"),
        ("too long", RECORD_HEAD.pack(1 << 31, crc) + data, "at most"),
        ("past the end", RECORD_HEAD.pack(len(data) + 9, crc) + data, "the file has"),
        ("cut head", good[:5], "inside the record's frame head"),
        (
            "trailing bytes",
            RECORD_HEAD.pack(len(data) + 2, zlib.crc32(data + b"zz")) + data + b"zz",
            "2 bytes after its pickle",
        ),
        ("os.system", encode_record((i + 1, "e", "spawn", os.system)), "cannot be decoded"),
    ]
    offset = frame_offsets(header, records)[i]
    for name, raw, says in cases:
        j = str(tmp_path / "framed.journal")
        with open(j, "wb") as f:
            f.write(encode_header(header[2]))
            for rec in records[:i]:
                f.write(encode_record(rec))
            f.write(raw)
        with pytest.raises(BadRecord) as ei:
            replay(j)
        assert ei.value.offset == offset and says in ei.value.why, (name, ei.value)
        assert_one_line(as_cli(ei.value, 1), 1)


def test_a_header_not_ours_is_not_a_journal_a_damaged_one_is_refused(tmp_path):
    def header(h, crc=None) -> bytes:
        data = pickle.dumps(h, pickle.HIGHEST_PROTOCOL)
        return data + HEADER_CRC.pack(zlib.crc32(data) if crc is None else crc)

    good = encode_header(2)
    assert good == header(("smp-journal", 3, 2))
    cases = [
        (header(("smp-journal", 1, 2)), 2, "of version 1; this replay reads versions 2 and 3"),
        (header(("smp-journal", 4, 2)), 2, "of version 4; this replay reads versions 2 and 3"),
        (pickle.dumps(("smp-journal", 1, 2)) + pickle.dumps((1, "e", "spawn")), 2, "version 1"),
        (header(("smq-journal", 2, 2)), 2, "no journal header"),
        (header(dag(30)), 2, "no journal header"),
        (b"\x80\x05" + bytes(100), 2, "not a dispatcher journal"),
        (header(("smp-journal", 2, 2), crc=7), 1, "header: the header's checksum does not match"),
        (good[:-1], 1, "the header's checksum"),
        (header(("smp-journal", 2, 0)), 1, "the header names 0 schedulers"),
        (header(("smp-journal", 2, "2")), 1, "the header names '2' schedulers"),
        (header(("smp-journal", 2, 1 << 80)), 1, "names an integer of 81 bits"),
    ]
    for raw, code, says in cases:
        p = tmp_path / "h.journal"
        p.write_bytes(raw)
        with pytest.raises(NotAJournal) as ei:
            replay(str(p))
        assert (type(ei.value) is BadRecord) == (code == 1), (raw, ei.value)
        assert says in str(ei.value), (raw, ei.value)
        assert_one_line(as_cli(ei.value, code), code)


def test_printing_a_record_is_bounded(real, tmp_path):
    """A record within the bounds but large (a 4 MB binary, a list of 200,000
    integers, a run of 5,000 messages): the listing around it and the
    divergence it makes stay small."""
    path, header, records = real
    q = records[first(records, "q", lambda r: r[2] == SYS_MSG_TYPE_TRACE)]
    iq = first(records, "q")  # the table events and states before the first run
    big = [
        (A("trace"), q[3], A("send"), bytes(4_000_000), q[4]),
        (A("trace"), q[3], A("send"), list(range(200_000)), q[4]),
    ] + [(A("trace"), q[3], A("send"), (A("m"), i), q[4]) for i in range(5_000)]
    q2 = (iq + 1, *q[1:5], 0, pickle.dumps(big, pickle.HIGHEST_PROTOCOL), len(big), 0, 0)
    d2 = (iq + 2, "d", SYS_MSG_TYPE_TRACE, len(big), DROP, q[4], "receiver_dead")  # diverges
    j = write(tmp_path / "big.journal", header[2], records[:iq] + [q2, d2])
    r = replay(j)
    assert r.divergence_count == 1 and len(r.divergences[0]["messages"]) == 5
    assert all(len(m) < 1000 for m in r.divergences[0]["messages"])
    text = format_listing(queue_listing(j, r, q2[0], 20), q2[0])
    assert f">>#{q2[0]}" in text and "... and 4992 more" in text
    assert len(text) < 20_000


# ---------------------------------------------------------------- byte flips
def flip_outcomes(path: str, seed: int, count: int, work: str, head: int) -> list[dict]:
    """Flip one byte of ``path`` at a time (each of its first ``head`` bytes,
    then ``count`` seeded flips) and replay each in this process: what
    happened, with what replay said."""
    data = open(path, "rb").read()
    want = read_records(path)[:2]
    rng = random.Random(seed)
    out = []
    flipped = os.path.join(work, "flipped.journal")
    flips = [(at, 0xFF) for at in range(head)]
    flips += [(rng.randrange(len(data)), rng.randrange(1, 256)) for _ in range(count)]
    for at, mask in flips:
        b = bytearray(data)
        b[at] ^= mask
        with open(flipped, "wb") as f:
            f.write(b)
        o: dict = {"at": at}
        try:
            r = replay(flipped)
            o["code"] = 0 if r.ok else 1
            o["same"] = read_records(flipped)[:2] == want
        except BadRecord as e:
            o["code"], o["line"], o["offset"] = 1, str(e), e.offset
        except NotAJournal as e:
            o["code"], o["line"] = 2, str(e)
        except BaseException:
            o["code"], o["crash"] = -1, traceback.format_exc()[-3000:]
        out.append(o)
    return out


def _flip_child() -> None:
    path, seed, count, work, head = sys.argv[1], *map(int, sys.argv[2:4]), *sys.argv[4:6]
    sys.stdout.write(json.dumps(flip_outcomes(path, seed, count, work, int(head))))


def test_byte_flips_are_refused_in_one_line_or_change_nothing(real, tmp_path):
    """A flip of each byte of the header, then 300 seeded flips over a real
    journal (its first 200 records: each replay reads it to its end when
    nothing is found), in a capped child.
    A flip in a record is refused at that record (exit 1); one in the header
    makes the file not a journal (exit 2); a replay that completes must have
    read the same records."""
    path, header, records = real
    small = write(tmp_path / "small.journal", header[2], records[:200])
    assert replay(small).ok
    header_len = len(encode_header(header[2]))
    offsets = frame_offsets(header, records[:200])
    r = run_capped(
        [
            sys.executable,
            "-c",
            "from hostile.test_hostile_journals import _flip_child; _flip_child()",
            small,
            "21",
            "300",
            str(tmp_path),
            str(header_len),
        ],
        cap=CAP,
        timeout=90,
        env={"PYTHONPATH": TESTS + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    outcomes = json.loads(r.stdout)
    assert len(outcomes) == header_len + 300
    for o in outcomes:
        assert "crash" not in o, o
        if o["code"] == 0:
            assert o["same"], o  # a full match only for the same journal
            continue
        assert "line" in o, o  # never a replay report about a damaged journal
        assert_one_line(as_cli(o["line"], o["code"]), o["code"])
        if o["at"] < header_len:  # not a journal (2), or a damaged header (1)
            assert o["code"] in (1, 2), o
        else:  # refused at the record the flipped byte is in, or at one before
            assert o["code"] == 1 and o["offset"] <= o["at"], o
            assert o["offset"] in offsets
    codes = {o["code"] for o in outcomes}
    assert {1, 2} <= codes and r.max_rss_kib < 300 * 1024


# ---------------------------------------------------------------- through the CLI
def cli_outcomes(argvs: list[list[str]]) -> list[dict]:
    """Run ``smp-emu ARGV`` (``smp.app.cli.main``) for each argv in this
    process, one after the other: exit code, stdout, stderr, seconds."""
    import io

    from smp.app.cli import main

    out = []
    for argv in argvs:
        so, se = io.StringIO(), io.StringIO()
        old = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = so, se
        t0 = time.monotonic()
        code = 0
        try:
            main(argv)
        except SystemExit as e:
            code = e.code if type(e.code) is int else 1
        except BaseException:
            se.write(traceback.format_exc())
            code = -1
        finally:
            sys.stdout, sys.stderr = old
        out.append(
            {"code": code, "out": so.getvalue()[-5000:], "err": se.getvalue()[-5000:],
             "len": len(so.getvalue()), "s": time.monotonic() - t0}
        )  # fmt: skip
    return out


def _cli_child() -> None:
    sys.stdout.write(json.dumps(cli_outcomes(json.loads(sys.argv[1]))))


def _in_a_record_body(data: bytes, header, at: int) -> int:
    """``at``, or the first byte of its record's body when ``at`` is in
    that record's length (a damaged length is refused as one, not as a
    checksum that does not match)."""
    head = RECORD_HEAD.size  # (the body's length, then its checksum)
    pos = len(encode_header(header[2]))
    while pos < at:
        size, _crc = RECORD_HEAD.unpack_from(data, pos)
        if at < pos + head + size:
            break
        pos += head + size
    return pos + head if pos <= at < pos + head // 2 else at


def test_cli_answers_every_hostile_file_in_one_line(real, tmp_path):
    """A DAG record, a DAG in a run's bodies (with --around), a journal cut
    short, one byte damaged 30 % into the journal, /etc/passwd, an empty file
    and a directory: one line, the documented exit code, in a capped child;
    the real journal, unchanged, still matches."""
    path, header, records = real
    data = open(path, "rb").read()
    q = records[first(records, "q", lambda r: r[2] == SYS_MSG_TYPE_TRACE)]
    body = pickle.dumps([(A("trace"), q[3], A("send"), dag(30), q[4])])
    files = {
        "dag": write(tmp_path / "dag.journal", 2, [(1, "e", "spawn", dag(30))]),
        "dagbody": write(
            tmp_path / "dagbody.journal", 2, [(1, "q", 1, q[3], q[4], 0, body, 1, 0, 0)]
        ),
        "cut": str(tmp_path / "cut.journal"),
        "damaged": str(tmp_path / "damaged.journal"),
        "empty": str(tmp_path / "empty.journal"),
        "dir": str(tmp_path),
    }
    with open(files["cut"], "wb") as f:
        f.write(data[: len(data) * 2 // 3])
    b = bytearray(data)
    b[_in_a_record_body(data, header, len(b) * 3 // 10)] ^= 0x5A
    with open(files["damaged"], "wb") as f:
        f.write(b)
    open(files["empty"], "wb").close()
    cases = [
        (["replay", files["dag"]], 1, "record at byte"),
        (["replay", files["dagbody"], "--around", "1"], 1, f"more than {MAX_NODES:,} values"),
        (["replay", files["cut"], "--json"], 1, "cut short"),
        (["replay", files["damaged"]], 1, "checksum does not match"),
        (["replay", "/etc/passwd"], 2, "not a dispatcher journal"),
        (["replay", files["empty"]], 2, "the file is empty"),
        (["replay", files["dir"]], 2, "is a directory"),
        (["replay", path], 0, None),
    ]
    r = run_capped(
        [
            sys.executable,
            "-c",
            "from hostile.test_hostile_journals import _cli_child; _cli_child()",
            json.dumps([c[0] for c in cases]),
        ],
        cap=CAP,
        timeout=90,
        env={"PYTHONPATH": TESTS + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    for (argv, code, says), o in zip(cases, got, strict=True):
        if code == 0:
            assert o["code"] == 0 and "replay matches the run" in o["out"], o
            assert f"replayed {DECISIONS} runs" in o["out"]
            continue
        c = Capped(o["code"], o["out"], o["err"], o["s"], 0)
        assert_one_line(c, code, contains=says)
        assert o["len"] == 0, (argv, o["out"])  # nothing on stdout, "matches" least of all
    damaged = got[3]["err"]
    at = int(damaged.split("record at byte ")[1].split(" ")[0].replace(",", ""))
    assert at <= len(data) * 3 // 10 < at + 1000  # the record holding the damaged byte
    assert r.max_rss_kib < 300 * 1024


def test_the_dag_record_in_a_process_of_its_own(tmp_path):
    """The end-to-end path once (``smp-emu replay`` as a user runs it) on
    the 360-byte DAG record: one line, exit 1, little memory, quickly."""
    x = dag(30)
    j = write(tmp_path / "dag.journal", 2, [(1, "e", "exit", x)])
    assert os.path.getsize(j) < 400
    r = run_cli("replay", j, "--around", "1", cap=CAP, timeout=60)
    assert_one_line(r, 1, contains="argument 1 of the exit event is a list")
    assert r.stdout == "" and r.max_rss_kib < 300 * 1024
