"""smp-only: the dispatcher journal replays to the same decisions, and a
doctored journal is caught at the record that was changed."""

from __future__ import annotations

import json
import pickle

import pytest
from click.testing import CliRunner

import smp
from dispatcher.journal import encode_header, encode_record
from smp import Atom as A
from smp.app.cli import cli
from smp.app.replay import (
    NotAJournal,
    format_listing,
    queue_listing,
    read_records,
    replay,
)
from smp.app.scenario import load_scenario
from smp.app.workloads import execute
from smp.core.dispatch import DELIVER_PID, DROP
from smp.core.messages import SYS_MSG_TYPE_SYSPROF, SYS_MSG_TYPE_TRACE

pytestmark = pytest.mark.timeout(90)

KEYS = (
    "made",
    "made_by_type",
    "delivered",
    "delivered_by_type",
    "dropped",
    "dropped_by_reason",
    "queued",
)


def same_totals(report, stats) -> None:
    assert {k: report.totals[k] for k in KEYS} == {k: stats[k] for k in KEYS}


# ---------------------------------------------------------------- workload bodies
async def chain_sender(proc, to, n):
    await proc.seq_trace("label", 7)
    await proc.seq_trace("send", True)
    for i in range(n):
        await proc.send(to, (A("hop"), proc.pid, i))


async def sender(proc, to, n):
    for i in range(n):
        await proc.send(to, (A("cast"), proc.pid, i))
    await proc.receive()


async def busy_worker(proc, n):
    for _ in range(n):
        await proc.sleep(0)


async def go(proc, pids):
    for p in pids:
        await proc.send(p, A("go"))


# ---------------------------------------------------------------- journals
@pytest.fixture(scope="module")
def raced(tmp_path_factory):
    """A journaled run with the races of test_smp_races: the seq tracer
    replaced and a tracer killed while their messages wait in a held queue,
    the profiler killed (its options cleared by the dispatcher on the first
    failure), then tracer churn."""
    path = str(tmp_path_factory.mktemp("j") / "raced.journal")
    with smp.Emulator(mode="smp", schedulers=2, journal=path) as vm:
        old, new, sink, tracer = (vm.spawn_collector() for _ in range(4))
        vm.set_system_seq_tracer(old)
        vm.spawn(chain_sender, sink, 3)
        p = vm.spawn(sender, sink, 5)
        vm.trace(p, True, ["send", "timestamp"], tracer=tracer)
        kept = vm.spawn_collector()
        p2 = vm.spawn(sender, sink, 4)
        vm.trace(p2, True, ["send", "timestamp"], tracer=kept)
        prof = vm.spawn_collector()
        vm.system_profile(prof, [A("runnable_procs"), A("scheduler")])
        vm.hold_dispatcher()
        vm.spawn(busy_worker, 3)
        vm.run()
        assert vm.queued_messages()
        vm.set_system_seq_tracer(new)
        vm.exit(tracer, A("kill"))
        vm.exit(prof, A("kill"))
        vm.spawn(busy_worker, 3)
        vm.run()
        vm.release_dispatcher()
        vm.run()
        vm.spawn(go, [p, p2])
        vm.run()
        assert len(vm.messages(new)) == 3 and vm.messages(old) == []
        assert len(vm.messages(kept)) == 4
        stats = vm.statistics()
    assert stats.dropped_by_reason["receiver_dead"]["TRACE"] == 5
    assert stats.dropped_by_reason["no_receiver"]["SYSPROF"] >= 1
    return path, stats.as_dict()


@pytest.fixture(scope="module")
def churned(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("j") / "churn.journal")
    out = execute(load_scenario("churn"), mode="smp", schedulers=2, journal=path)
    assert out.summary["completed"]
    return path, out.summary["stats"]


def test_raced_run_replays_without_divergence(raced):
    path, stats = raced
    r = replay(path)
    assert r.ok, (r.divergences, r.violations)
    assert r.divergence_count == r.violation_count == 0 and r.truncated is None
    assert r.records["q"] == r.records["d"] == r.runs
    same_totals(r, stats)
    assert r.recorded_totals == r.totals


def test_churn_scenario_replays_without_divergence(churned):
    path, stats = churned
    r = replay(path)
    assert r.ok, (r.divergences, r.violations)
    assert r.totals["dropped_by_reason"]["receiver_dead"]["TRACE"] > 0  # churned tracers
    same_totals(r, stats)


# ---------------------------------------------------------------- doctored journals
def read_all(path):
    """The header and the records of a journal (checked, as replay reads them)."""
    header, records, _ = read_records(path)
    return [header, *records]


def write_all(path, recs) -> None:
    """A journal of the header ``recs[0]`` and the records after it, framed
    as the dispatcher writes them."""
    with open(path, "wb") as f:
        f.write(encode_header(recs[0][2]))
        for r in recs[1:]:
            f.write(encode_record(r))


def test_doctored_decision_is_reported_at_its_seq(raced, tmp_path):
    path, _ = raced
    recs = read_all(path)
    k = next(
        i
        for i, r in enumerate(recs[1:], 1)
        if r[1] == "d" and r[2] == SYS_MSG_TYPE_TRACE and r[4] == DELIVER_PID
    )
    seq = recs[k][0]
    recs[k] = recs[k][:4] + (DROP, recs[k][5], "receiver_dead")
    bad = str(tmp_path / "doctored.journal")
    write_all(bad, recs)
    r = replay(bad)
    assert not r.ok and r.divergence_count == 1
    d = r.divergences[0]
    assert d["seq"] == seq and d["type"] == "TRACE"
    assert d["recorded"].startswith("drop receiver_dead") and d["replayed"].startswith("deliver")
    assert d["messages"] and " ! " in d["messages"][0]  # named, in dbg's format
    items = queue_listing(bad, r, seq, 6)
    text = format_listing(items, seq)
    assert f">>#{seq}" in text and "DIVERGES" in text

    res = CliRunner().invoke(cli, ["replay", bad])
    assert res.exit_code == 1, res.output
    assert f"seq {seq}: TRACE" in res.output and "REPLAY FAILED" in res.output
    res = CliRunner().invoke(cli, ["replay", bad, "--json", "--around", str(seq)])
    assert res.exit_code == 1
    j = json.loads(res.stdout)
    assert j["divergences"][0]["seq"] == seq and not j["ok"]
    assert any(x["seq"] == seq for x in j["listing"])


def test_swapped_timestamps_break_queue_order(raced, tmp_path):
    path, _ = raced
    recs = read_all(path)
    ts = [i for i, r in enumerate(recs[1:], 1) if r[1] == "q" and r[5] != 0]
    a, b = ts[0], ts[1]
    base_a, base_b = recs[a][8], recs[b][8]
    recs[a] = recs[a][:8] + (base_b,) + recs[a][9:]
    recs[b] = recs[b][:8] + (base_a,) + recs[b][9:]
    bad = str(tmp_path / "swapped.journal")
    write_all(bad, recs)
    r = replay(bad)
    assert r.divergence_count == 0 and not r.ok
    assert r.violations[0].startswith(f"seq {recs[b][0]}: timestamp ")
    res = CliRunner().invoke(cli, ["replay", bad])
    assert res.exit_code == 1 and f"seq {recs[b][0]}: timestamp" in res.output


def test_missing_state_reset_is_a_violation(raced, tmp_path):
    """Drop the snapshot in which the dispatcher cleared the profile options
    after the first failed runnable event (sys_msg_disp_failure)."""
    path, _ = raced
    recs = read_all(path)
    k = next(
        i
        for i, r in enumerate(recs[1:], 1)
        if r[1] == "d" and r[2] == SYS_MSG_TYPE_SYSPROF and r[6] == "no_receiver"
    )
    s = next(i for i in range(k + 1, len(recs)) if recs[i][1] == "s")
    assert not recs[s][2].profile_runnable_procs
    bad = str(tmp_path / "noreset.journal")
    # the records after it numbered on, as a journal that never had it is
    kept = recs[:s] + [(r[0] - 1, *r[1:]) for r in recs[s + 1 :]]
    write_all(bad, kept)
    r = replay(bad)
    assert any(
        v.startswith(f"seq {recs[k][0]}: state not reset after the failed SYSPROF")
        for v in r.violations
    ), r.violations


def test_not_a_journal_exits_2_naming_the_file(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello\n")
    with pytest.raises(NotAJournal, match="notes.txt: not a dispatcher journal"):
        replay(str(p))
    res = CliRunner().invoke(cli, ["replay", str(p)])
    assert res.exit_code == 2
    assert f"{p}: not a dispatcher journal (no journal header)" in res.output
    q = tmp_path / "other.pickle"
    q.write_bytes(pickle.dumps(("something", 1)))
    res = CliRunner().invoke(cli, ["replay", str(q)])
    assert res.exit_code == 2 and f"{q}: not a dispatcher journal" in res.output
    res = CliRunner().invoke(cli, ["replay", str(tmp_path / "missing.journal")])
    assert res.exit_code == 2 and "missing.journal: no such file" in res.output


# ---------------------------------------------------------------- the CLI
def test_stress_leaves_a_journal_that_replays_clean(tmp_path):
    j = tmp_path / "stress.journal"
    res = CliRunner().invoke(
        cli, ["stress", "--duration", "2", "--schedulers", "2", "--journal", str(j), "--json"]
    )
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert s["invariants"]["ok"] and s["journal"] == str(j)
    assert s["replay"]["runs"] > 0 and s["replay"]["divergence_count"] == 0
    res = CliRunner().invoke(cli, ["replay", str(j)])
    assert res.exit_code == 0, res.output
    assert "divergences: 0" in res.output and "replay matches the run" in res.output
    assert f"made {s['stats']['made']}," in res.output


def test_stress_journal_needs_smp(tmp_path):
    res = CliRunner().invoke(
        cli,
        [
            "stress",
            "--mode",
            "nonsmp",
            "--duration",
            "0.2",
            "--journal",
            str(tmp_path / "x.journal"),
        ],
    )
    assert res.exit_code == 2 and "needs smp mode" in res.output


def test_run_journal_replays_clean(tmp_path):
    j = tmp_path / "run.journal"
    res = CliRunner().invoke(cli, ["run", "churn", "--journal", str(j), "--json"])
    assert res.exit_code == 0, res.output
    stats = json.loads(res.stdout)["stats"]
    res = CliRunner().invoke(cli, ["replay", str(j), "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["ok"] and rep["divergence_count"] == 0
    assert {k: rep["totals"][k] for k in KEYS} == {k: stats[k] for k in KEYS}


def test_a_seq_past_the_journals_end_is_named_as_such(raced):
    path, _ = raced
    last = max(rec[0] for rec in read_all(path)[1:])
    r = replay(path)
    text = format_listing(queue_listing(path, r, last + 1000, 6), last + 1000)
    assert text.rstrip().endswith(
        f">>#{last + 1000:<7} end    past the journal's end: its last record is #{last}"
    )
    inside = format_listing(queue_listing(path, r, last, 6), last)
    assert "past the journal's end" not in inside and f">>#{last}" in inside


def test_a_journal_the_disk_could_not_hold_fails_the_run_in_one_line():
    """A journal on a full disk: the dispatcher stops the journal, not
    itself (it died with a traceback, and up to 84 messages were lost); the
    run's messages are all delivered and the run exits 1 naming the journal."""
    import os
    import subprocess
    import sys

    if not os.path.exists("/dev/full"):
        pytest.fail("/dev/full is missing: the test needs a Linux /dev")
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "from smp.app.cli import main; main()",
            "run",
            "--journal",
            "/dev/full",
            "--json",
        ],
        capture_output=True,
        timeout=120,
    )
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert "Traceback" not in err
    assert "dispatcher: write to journal /dev/full failed: No space left on device" in err
    assert "smp-emu: --journal /dev/full: not written whole" in err
    stats = json.loads(r.stdout)["stats"]
    assert stats["made"] == stats["delivered"] + stats["dropped"] and stats["queued"] == 0


def test_the_frame_walk_counts_a_whole_journal_and_refuses_one_cut_short(raced, tmp_path):
    """What run --journal checks after a run, decoding no record but the last."""
    from smp.app.journal_records import BadRecord, frames_whole, read_records

    path, _ = raced
    assert frames_whole(path) == len(read_records(path)[1])
    data = open(path, "rb").read()
    cut = tmp_path / "cut.journal"
    cut.write_bytes(data[:-3])
    with pytest.raises(BadRecord, match="cut short"):
        frames_whole(str(cut))
    # cut where a record ends: whole frames, no end record (the walk took it for whole)
    _, records, _ = read_records(path)
    cut.write_bytes(data[: -len(encode_record(records[-1]))])
    with pytest.raises(BadRecord, match="the journal has no end record"):
        frames_whole(str(cut))


def test_a_journal_without_its_end_record_is_cut_short_and_one_of_version_2_is_read(
    raced, tmp_path
):
    """Cut where a record ends, a journal was well formed and replayed clean,
    "replay matches the run" with messages left undecided.  It ends with an
    end record now (version 3), and one without is refused as cut short; a
    record after it, or an end that counts other messages than the records,
    is refused too.  A version 2 journal (no end record) is still read: with
    messages undecided at its end it is said to match the journal only."""
    import zlib

    from dispatcher.journal import HEADER_CRC, RECORD_HEAD, encode_header

    path, _ = raced
    _, records, _ = read_records(path)
    assert records[-1][1] == "end" and replay(path).whole
    data = open(path, "rb").read()
    head = len(encode_header(2))
    last = len(data) - len(encode_record(records[-1]))
    cut = tmp_path / "cut.journal"
    cut.write_bytes(data[:last])
    res = CliRunner().invoke(cli, ["replay", str(cut)])
    assert res.exit_code == 1, res.output
    assert f"record at byte {last:,}: the journal has no end record (cut short" in res.output
    cut.write_bytes(data + encode_record((len(records) + 1, "e", "spawn", records[0][3])))
    res = CliRunner().invoke(cli, ["replay", str(cut)])
    assert res.exit_code == 1 and "a record after the journal's end record" in res.output
    end = records[-1]
    cut.write_bytes(data[:last] + encode_record((end[0], "end", end[2] + 1)))
    r = replay(str(cut))
    assert not r.ok and any("the end record says the dispatcher queued" in v for v in r.violations)
    # version 2: the same records but the end, cut where a record ends
    v2 = pickle.dumps(("smp-journal", 2, 2), pickle.HIGHEST_PROTOCOL)
    v2 += HEADER_CRC.pack(zlib.crc32(v2))
    ends, pos = [], head
    while pos < last:
        n, _crc = RECORD_HEAD.unpack_from(data, pos)
        pos += RECORD_HEAD.size + n
        ends.append(pos)
    left = 0
    for e in ends:
        cut.write_bytes(v2 + data[head:e])
        r = replay(str(cut))
        if r.ok and r.totals["queued"]:
            left = r.totals["queued"]
            break
    assert left and not r.whole, "no record's end leaves a message undecided and the rest clean"
    res = CliRunner().invoke(cli, ["replay", str(cut)])
    assert res.exit_code == 0, res.output
    assert "replay matches the run" not in res.output
    assert f"replay matches the journal; {left} message(s) undecided at its end" in res.output
    cut.write_bytes(v2)
    res = CliRunner().invoke(cli, ["replay", str(cut)])
    assert res.exit_code == 0 and ": 2 scheduler(s), no records\n" in res.output, res.output


def test_a_listing_gives_every_run_in_its_window_its_decision(tmp_path):
    """The runs listed beside the chosen ones around a seq were all said to
    be "(undecided)" though the replay had decided every one; and a message
    dbg prints on several lines lost its indentation after the first."""
    j = tmp_path / "stress.journal"
    args = ["stress", "--duration", "1", "--faults", "2", "--journal", str(j), "--json"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    r = replay(str(j))
    assert r.totals["queued"] == 0
    seqs = sorted(rec[0] for rec in read_all(str(j))[1:])
    mid = seqs[len(seqs) // 2]
    text = format_listing(queue_listing(str(j), r, mid, 20), mid)
    queued = [x for x in text.splitlines() if " queued " in x]
    assert queued, text[:2000]
    assert [x for x in queued if "(undecided)" in x] == []
    assert [x for x in text.splitlines() if not x.startswith(("  ", ">>"))] == []
    # (the stress example's gc group: a gc_start's list breaks over lines)
    wide = format_listing(queue_listing(str(j), r, seqs[0], 400), seqs[0])
    assert any(x.startswith(" " * 12 + "{") for x in wide.splitlines()), wide[:3000]
