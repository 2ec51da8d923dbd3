"""compare explains every differing message by its cause, from both runs'
records, and the classes are checked against the smp run's journal."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from smp.app.cli import cli
from smp.app.compare_causes import CLASSES, _classify, full_labels
from smp.app.replay import read_records
from smp.core.dispatch import DROP
from smp.core.terms import Atom, Pid


def _compare(tmp_path, *args) -> tuple[dict, str]:
    journal = str(tmp_path / "smp.journal")
    r = CliRunner().invoke(
        cli, ["compare", "churn", "--json", "--first", "5000", "--journal", journal, *args]
    )
    assert r.exit_code == 0, r.output
    c = json.loads(r.stdout)
    # the line-up of the named tracers' messages points to the causes, which
    # compare the churn workload's own tracers too (it said those were not
    # compared, and blamed timing, beside causes that classed them)
    note = c["messages"]["note"]
    assert "not compared" not in note and "some differences are timing" not in note, note
    assert "Why each message differs: the causes" in note
    assert any(t["tracer"].startswith("churn[") for t in c["causes"]["tracers"])
    return c["causes"], journal


def _journal_facts(path: str):
    """From the journal alone: each queue record's receiver and the seq and
    fate of its decision, and the seq of each process's exit."""
    _, records, _ = read_records(path)
    runs, exits, pending = {}, {}, []
    for rec in records:
        if rec[1] == "q":
            pending.append(rec)
        elif rec[1] == "d" and pending and (pending[0][2], pending[0][7]) == (rec[2], rec[3]):
            q = pending.pop(0)
            runs[q[0]] = (q[4], rec[0], rec[4] == DROP and rec[6])
        elif rec[1] == "e" and rec[2] == "exit":
            exits.setdefault(rec[3], rec[0])
    return runs, exits


@pytest.mark.parametrize("schedulers", ["2", "4"])
def test_every_differing_message_is_in_a_class_the_journal_confirms(tmp_path, schedulers):
    """``compare churn`` (three kills of t, and the churn workload's own
    tracers, killed after each burst): every message that differs is in a
    class, none unexplained, and each class's defining order of events is
    what the journal holds; the race compare is for happened."""
    causes, journal = _compare(tmp_path, "--schedulers", schedulers)
    counts = {k["class"]: k["count"] for k in causes["classes"]}
    assert sum(counts.values()) == causes["total"] == len(causes["diffs"])
    assert "unexplained" not in counts, causes["classes"]
    assert counts.get("dead_at_dispatch", 0) > 0  # the race happened, and was found
    runs, exits = _journal_facts(journal)
    moved = {d["tracer"].split("~")[0] for d in causes["timing_deaths"]}
    for d in causes["diffs"]:
        # (nonsmp's fate fits the race's order, or its tracer died at another point)
        timed = d["tracer"].split("~")[0] in moved
        if d["class"] == "dead_at_dispatch":
            to, decided, reason = runs[d["queue_seq"]]
            assert reason == "receiver_dead" and (d["nonsmp"] == "delivered" or timed)
            assert d["queue_seq"] < exits[to] < decided  # queued alive, decided dead
        elif d["class"] == "made_after_death":
            to, decided, reason = runs[d["queue_seq"]]
            assert reason == "receiver_dead" and exits[to] < d["queue_seq"]
            assert d["nonsmp"] in (None, "suppressed receiver_dead") or timed
        elif d["class"] == "timing":
            assert d["tracer"].split("~")[0] in moved
    for k in causes["classes"]:
        assert k["seed"] and k["example"]["message"]


def test_the_text_prints_one_line_per_class_with_the_command_that_shows_it(tmp_path):
    journal = str(tmp_path / "c.journal")
    r = CliRunner().invoke(cli, ["compare", "churn", "--journal", journal, "--first", "3"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "why the messages differ, from both runs' records" in out
    assert "dead_at_dispatch: " in out and f"see: smp-emu replay {journal} --around " in out
    assert "without a counter" not in out and "timing, not the seed" not in out
    # the counters' why no longer repeats a sentence per counter
    assert out.count("sys_msg_dispatcher_func") <= 2


def _item(type_, to, fate, seq=None):
    return (type_, to, (Atom("trace"), Pid(1, 0), Atom("send"), 1, Pid(2, 0)), fate, seq)


@pytest.mark.parametrize(
    ("nonsmp", "q_seq", "moved", "want"),
    [
        ("delivered", 5, set(), "dead_at_dispatch"),  # queued before the exit at 10
        ("delivered", 15, set(), "unexplained"),  # queued after it, yet nonsmp delivered
        # ... nonsmp's t died later in its work: smp's drop is still the race
        ("delivered", 15, {"t"}, "made_after_death"),
        ("suppressed receiver_dead", 15, set(), "made_after_death"),
        (None, 15, set(), "made_after_death"),
        ("suppressed receiver_dead", 5, set(), "unexplained"),
        (None, 5, set(), "unexplained"),  # queued while t lived, yet nonsmp never made it
        # ... nonsmp's t died earlier in its work: smp's drop is still the race
        (None, 5, {"t"}, "dead_at_dispatch"),
    ],
)
def test_a_class_is_given_only_when_its_order_of_events_holds(nonsmp, q_seq, moved, want):
    t = Pid(9, 0)
    d = {
        "key": ("t", "p"),
        "a": _item("TRACE", t, nonsmp) if nonsmp else None,
        "b": _item("TRACE", t, "dropped receiver_dead", (q_seq, 20)),
    }
    ctx = {"smp_exits": {t: (10, 3)}, "fake": 0, "moved_deaths": moved}
    assert _classify(d, ctx) == want
    assert want in {c[0] for c in CLASSES}


def test_a_message_smp_delivered_and_nonsmp_did_not_make_is_timing_when_the_death_moved():
    t = Pid(9, 0)
    d = {"key": ("t", "p"), "a": None, "b": _item("TRACE", t, "delivered", (15, 20))}
    ctx = {"smp_exits": {t: (10, 3)}, "fake": 0, "moved_deaths": {"t"}}
    assert _classify(d, ctx) == "timing"
    assert _classify(d, {**ctx, "moved_deaths": set()}) == "unexplained"


def test_spawned_processes_are_named_after_their_parent_in_spawn_order():
    p, a, b, c, x = (Pid(i, 0) for i in range(5))
    labels = full_labels({p: "churn[0].churner"}, [(p, a), (a, c), (p, b), (x, Pid(7, 0))])
    assert labels[a] == "churn[0].churner.1" and labels[b] == "churn[0].churner.2"
    assert labels[c] == "churn[0].churner.1.1"
    assert x not in labels  # a process nobody named stays unnamed


async def _sink(proc):
    while True:
        await proc.receive()


async def _trace_kill_send(proc, out):
    t = await proc.spawn(_sink)
    await proc.trace(proc.pid, True, ["send", (Atom("tracer"), t)])
    await proc.send(out, 1)
    await proc.process_flag("trap_exit", True)
    await proc.link(t)
    await proc.exit(t, Atom("kill"))
    await proc.receive(match=lambda m: type(m) is tuple and m[0] == Atom("EXIT"))
    await proc.send(out, 2)
    await proc.send(out, 3)


def test_nonsmp_keeps_each_message_fate_and_each_tracer_death():
    """The fate log holds the message nonsmp did not make (with its term and
    why), the tracer's death between, and nothing after the reset; the
    lineage names the parent of the tracer it spawned."""
    from smp import Emulator
    from smp.core.errors import BadArg

    with Emulator("nonsmp") as vm:
        vm.record_fates()
        out = vm.spawn_collector()
        p = vm.spawn(_trace_kill_send, out)
        vm.run()
        fates, cut = vm.fates()
        ((parent, t),) = vm.spawn_lineage()
    assert parent == p and cut == 0
    kinds = [(e[0], e[-1]) if e[0] == "m" else e for e in fates]
    assert kinds == [("m", "delivered"), ("x", t), ("m", "suppressed receiver_dead")]
    assert fates[0][2] == fates[2][2] == t and fates[2][3][3] == 2  # the send of 2, to t
    with Emulator("smp", schedulers=1) as vm, pytest.raises(BadArg, match="journal"):
        vm.record_fates()


def test_a_message_made_in_both_in_another_order_or_renumbered_is_paired():
    """Left over by the alignment: the same text in both is an order
    difference (not counted); a seq_trace message that differs only by its
    serial is paired as serial_order; anything else stays unpaired."""
    from smp.app.compare_causes import _reordered, _serial_free

    send = "{seq_trace,7,{send,{501,%d},<a>,<%s>,{'EXIT',<a>,normal}}}"
    xa = [(send % (503, "b"), 0), (send % (504, "c"), 1), ("{x}", 2)]
    xb = [(send % (503, "c"), 0), (send % (504, "b"), 1), ("{y}", 2), ("{x}", 3)]
    same, oa, ob = _reordered(xa, xb, [0, 1, 2], [0, 1, 2, 3])
    assert same == [(2, 3)] and oa == [0, 1] and ob == [0, 1, 2]
    renumbered, oa, ob = _reordered(xa, xb, oa, ob, _serial_free)
    assert renumbered == [(0, 1), (1, 0)] and oa == [] and ob == [2]
    assert _serial_free("{seq_trace,7,{print,{1,2}}}") == "{seq_trace,7,{print,{1,2}}}"


def test_each_class_names_a_race_the_catalogue_has():
    from smp.app.compare_causes import RACES
    from smp.sim.catalogue import by_name

    assert set(RACES) <= {c[0] for c in CLASSES}
    for cls, name in RACES.items():
        assert by_name(name).name == name, cls


def test_a_malformed_fate_log_or_lineage_reply_is_refused_in_one_line():
    from smp.api.statistics import _checked, _fate_entry, _lineage_entry
    from smp.core.errors import ProtocolError

    p = Pid(3, 0)
    good = [("m", 1, p, (Atom("trace"), p), "suppressed receiver_dead"), ("x", p)]
    assert _checked(good, _fate_entry, 1) == good
    for bad in (
        [("m", 1, p, 0, "eaten")],  # no such fate
        [("m", 99, p, 0, "delivered")],  # no such type
        [("x", "pid")],
        [("m", 1, p)],
        "not a list",
    ):
        with pytest.raises(ProtocolError, match="scheduler 1 sent a malformed record list"):
            _checked(bad, _fate_entry, 1)
    assert _checked([(p, p)], _lineage_entry, 2) == [(p, p)]
    with pytest.raises(ProtocolError):
        _checked([(p,)], _lineage_entry, 2)
