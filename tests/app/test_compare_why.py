"""`smp-emu compare` says why the seed makes each differing row differ."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from smp.app.cli import cli
from smp.app.compare import why


def test_each_kind_of_difference_has_its_seed_reason():
    assert "ERTS_GET_TRACER_REF" in why("suppressed receiver_dead TRACE")
    assert "erts_check_my_tracer_proc" in why("dropped receiver_dead TRACE")
    assert "do_send_schedfix_to_port" in why("fake_schedule_pairs")
    assert "from == receiver" in why("dropped sender_is_receiver SYSMON")
    assert "exiting_reset" in why("dropped nil_sender_nil_receiver SYSPROF")
    assert why("messages_sent") is None


DETERMINISTIC = """\
name = "det"
seed = 5
[duration]
operations = 3
[[tracers]]
name = "t"
[[tracers]]
name = "mem"
kind = "memory"
heavy_every = 2
[[groups]]
name = "pp"
workload = "ping_pong"
trace = ["send", "running", "timestamp"]
tracer = "mem"
[[groups]]
name = "ring"
workload = "ring"
trace = ["send", "receive", "timestamp"]
tracer = "t"
[groups.params]
size = 3
"""

TIMED = """\
name = "timed"
seed = 2
[duration]
seconds = 0.3
[[tracers]]
name = "t"
[[groups]]
name = "pp"
workload = "ping_pong"
trace = ["send", "receive"]
tracer = "t"
"""


def _compare(args):
    r = CliRunner().invoke(cli, ["compare", *args])
    assert r.exit_code == 0, r.output
    return r


def test_a_time_bounded_scenario_is_converted_and_both_modes_do_the_same_work(tmp_path):
    p = tmp_path / "timed.toml"
    p.write_text(TIMED)
    c = json.loads(_compare([str(p), "--json", "--operations", "7"]).stdout)
    w = c["workload"]
    assert w["converted_from_seconds"] == 0.3 and w["operations"] == 7
    assert "compare converted it" in w["note"] and "7 operations" in w["note"]
    made = next(r for r in c["rows"] if r["what"] == "made")
    # ping: 7 pings + stop, pong: 7 pongs, receive of each: the same work in both modes
    assert made["nonsmp"] == made["smp"] == 2 * (7 + 1 + 7)
    assert all(r["duration"]["operations"] == 7 for r in c["runs"].values())
    text = _compare([str(p)]).stdout
    assert text.splitlines()[0].startswith("work: ") and "time-bounded" in text.splitlines()[0]


def test_why_names_only_causes_whose_counters_are_not_zero():
    from smp.app.compare import explain_row

    a = {
        "made": 120,
        "delivered": 100,
        "made_by_type": {"TRACE": 120},
        "delivered_by_type": {"TRACE": 100},
        "dropped_by_reason": {"no_error_logger": {"TRACE": 20}},
        "suppressed_by_reason": {},
        "fake_schedule_pairs": 0,
    }
    b = {
        "made": 100,
        "delivered": 100,
        "made_by_type": {"TRACE": 100},
        "delivered_by_type": {"TRACE": 100},
        "dropped_by_reason": {},
        "suppressed_by_reason": {},
        "fake_schedule_pairs": 0,
    }
    text = explain_row("made", a, b, "nonsmp", "smp", "REST")
    assert text.startswith("nonsmp made 20 more") and "no_error_logger" in text
    for absent in ("suppress", "receiver_dead", "fake", "REST"):
        assert absent not in text, absent
    # delivered = made - dropped - queued: its difference is named by those
    # (each counter that differs), and what they leave (smp's 10 made and
    # neither delivered, dropped nor queued) has no counter
    b["delivered"] = b["delivered_by_type"]["TRACE"] = 90
    text = explain_row("delivered", a, b, "nonsmp", "smp", "REST")
    assert text == (
        "nonsmp delivered 10 more: made: nonsmp 120, smp 100 (the made row says why); "
        "dropped no_error_logger: nonsmp 20, smp 0; 10 more delivered by nonsmp than smp "
        "with no counter for it: REST"
    )
    b["delivered"] = b["delivered_by_type"]["TRACE"] = 80  # (balanced: 100 = 80 + 20)
    b["dropped_by_reason"] = {"receiver_dead": {"TRACE": 20}}
    text = explain_row("delivered", a, b, "nonsmp", "smp", "REST")
    assert text.startswith("nonsmp delivered 20 more: made: nonsmp 120, smp 100")
    assert "dropped receiver_dead: nonsmp 0, smp 20" in text and "no counter" not in text


def test_a_made_difference_is_put_down_to_the_messages_one_build_made_alone():
    from smp.app.compare import explain_row

    a = {"made": 131, "made_by_type": {"TRACE": 121, "SEQTRACE": 10}}
    b = {"made": 100, "made_by_type": {"TRACE": 100}}
    only = {
        "nonsmp": {"TRACE": 25, "SEQTRACE": 10},
        "smp": {"TRACE": 4},
        "by_class": {
            "fake_schedule_pair": {"nonsmp": 20, "smp": 0},
            "timing": {"nonsmp": 15, "smp": 4},
        },
    }
    text = explain_row("made", a, b, "nonsmp", "smp", "REST", made_only=only)
    assert text == (
        "nonsmp made 31 more: 35 made by nonsmp only and 4 by smp only, lined up from both "
        "runs' records (by class, below: fake_schedule_pair nonsmp 20, smp 0; timing "
        "nonsmp 15, smp 4)"
    )
    # per type: the classes mix types, so none is named
    text = explain_row("made TRACE", a, b, "nonsmp", "smp", "REST", made_only=only)
    assert text.startswith("nonsmp made 21 more: 25 made by nonsmp only and 4 by smp only")
    assert "by class" not in text and "records hold" not in text
    # what the records do not hold is said, not put down to a class
    a["made"] = 140
    text = explain_row("made", a, b, "nonsmp", "smp", "REST", made_only=only)
    assert text.endswith(
        "; 9 more made by nonsmp than the records hold (nonsmp keeps the "
        "fates of its first million messages)"
    )


def test_time_bounded_difference_is_not_blamed_on_suppression():
    from smp.app.compare import explain_row

    a = {"made": 63284, "delivered": 63284, "dropped_by_reason": {}, "suppressed_by_reason": {}}
    b = {"made": 9718, "delivered": 9718, "dropped_by_reason": {}, "suppressed_by_reason": {}}
    text = explain_row("made", a, b, "nonsmp", "smp", "the workload is time-bounded")
    assert "suppress" not in text and "time-bounded" in text


def test_compare_lists_each_message_only_one_mode_made_with_the_seed_reason(tmp_path):
    p = tmp_path / "det.toml"
    p.write_text(DETERMINISTIC)
    c = json.loads(_compare([str(p), "--json"]).stdout)
    msgs = c["messages"]
    assert msgs["deterministic"]
    fake = c["runs"]["nonsmp"]["stats"]["fake_schedule_pairs"]
    assert fake > 0
    by = {t["tracer"]: t for t in msgs["tracers"]}
    assert by["t"]["only_count"] == {"nonsmp": 0, "smp": 0} and by["t"]["only"] == []
    mem = by["mem"]
    assert len(mem["only"]) == sum(mem["only_count"].values())
    fakes = [d for d in mem["only"] if re.search(r"\) (out|in) 0 ", d["message"])]
    assert len(fakes) == 2 * fake
    for d in fakes:
        assert d["mode"] == "nonsmp" and d["tracee"].startswith("<pp[0].")
        assert d["why"].startswith("do_send_schedfix_to_port")
    for d in mem["only"]:
        # the rest: real schedule in/out, which depends on the interleaving
        assert d in fakes or d["why"].startswith("scheduling (trace_sched)"), d
    # the same from both runs' records, by cause
    causes = c["causes"]
    counts = {k["class"]: k["count"] for k in causes["classes"]}
    mem_diffs = [d for d in causes["diffs"] if d["tracer"] == "mem"]
    assert counts.get("fake_schedule_pair") == 2 * fake
    assert {d["class"] for d in mem_diffs} <= {"fake_schedule_pair", "scheduling"}
    assert not [d for d in causes["diffs"] if d["tracer"] == "t"]
    text = _compare([str(p), "--first", "2"]).stdout
    assert "fake_schedule_pair: " in text and "do_send_schedfix_to_port" in text
    assert "[fake_schedule_pair] at mem" in text and "--first N lists more" in text
    assert "None" not in text


def test_a_message_smp_made_and_dropped_gets_erts_check_my_tracer_proc():
    from smp.app.compare_messages import _classify
    from smp.core.terms import A, Pid

    item = {
        "term": (A.trace, Pid(80), A.send, 1, Pid(81)),
        "mode": "smp",
        "fate": "dropped receiver_dead",
    }
    ctx = {"nonsmp": "nonsmp", "smp": "smp", "fake": 0, "deterministic": True, "rest": ""}
    assert _classify(item, ctx).startswith("erts_check_my_tracer_proc")
    item = {
        "term": (A.seq_trace, 7, (A.send, 1, 2, 3)),
        "mode": "nonsmp",
        "fate": "delivered",
        "moved_to": "seqt~1",
    }
    assert _classify(item, ctx).startswith("queue-time receiver resolution")


def test_compare_explains_every_differing_row():
    r = CliRunner().invoke(cli, ["compare", "churn", "--json"])
    assert r.exit_code == 0, r.output
    c = json.loads(r.stdout)
    differing = [row for row in c["rows"] if row["differs"]]
    assert differing  # latency alone differs: only smp has a queue
    assert all(row["why"] for row in differing), [
        row["what"] for row in differing if not row["why"]
    ]
    assert "per-tracee order holds" in c["order_note"]
    # what was made differs by the messages only one build made (from the
    # records, by class), not by the fates of those both made
    made = next(row for row in c["rows"] if row["what"] == "made")
    only = c["causes"]["made_only"]
    na, nb = sum(only["nonsmp"].values()), sum(only["smp"].values())
    assert made["nonsmp"] != made["smp"] and na - nb == made["nonsmp"] - made["smp"]
    assert f"{na:,} made by nonsmp only and {nb:,} by smp only" in made["why"], made["why"]
    assert "dropped" not in made["why"] and "delivered" not in made["why"]
    by = only["by_class"]
    assert sum(v["nonsmp"] for v in by.values()) == na
    assert sum(v["smp"] for v in by.values()) == nb
    assert set(by) <= {k["class"] for k in c["causes"]["classes"]}
    r = CliRunner().invoke(cli, ["compare", "churn"])
    assert "why they differ" in r.stdout and "ordering:" in r.stdout
    # a "why" names a suppression only where something was suppressed
    for row in differing:
        if "suppressed" in (row["why"] or "") and not row["what"].startswith("suppressed"):
            assert (
                c["runs"]["nonsmp"]["stats"]["suppressed"]
                or c["runs"]["smp"]["stats"]["suppressed"]
            )


def test_read_all_prints_what_dbg_does_not_format_as_terms(tmp_path):
    from smp.core.terms import A
    from smp.ports.traceport import FileTracePort
    from smp.wire.etf import encode

    path = tmp_path / "p.trc"
    with FileTracePort(str(path)) as port:
        port.write(encode((A.profile, A.scheduler, 1, A.active, 1, (1, 2, 3))))
        port.write(encode((A.drop, 4)))
    r = CliRunner().invoke(cli, ["read", "--all", str(path)])
    assert r.exit_code == 0
    assert r.stdout.splitlines() == [
        "{profile,scheduler,1,active,1,{1,2,3}}",
        "*** Dropped 4 messages.",
    ]
