"""`smp-emu compare` says why the seed makes each differing row differ."""
from __future__ import annotations

import json

from click.testing import CliRunner

from smp.cli import cli
from smp.compare import why


def test_each_kind_of_difference_has_its_seed_reason():
    assert "ERTS_GET_TRACER_REF" in why("suppressed receiver_dead TRACE")
    assert "erts_check_my_tracer_proc" in why("dropped receiver_dead TRACE")
    assert "do_send_schedfix_to_port" in why("fake_schedule_pairs")
    assert "from == receiver" in why("dropped sender_is_receiver SYSMON")
    assert "exiting_reset" in why("dropped nil_sender_nil_receiver SYSPROF")
    assert why("messages_sent") is None


def test_compare_explains_every_differing_row():
    r = CliRunner().invoke(cli, ["compare", "churn", "--json"])
    assert r.exit_code == 0, r.output
    c = json.loads(r.stdout)
    differing = [row for row in c["rows"] if row["differs"]]
    assert differing                      # latency alone differs: only smp has a queue
    assert all(row["why"] for row in differing), [row["what"] for row in differing
                                                 if not row["why"]]
    assert "per-tracee order holds" in c["order_note"]
    r = CliRunner().invoke(cli, ["compare", "churn"])
    assert "why they differ" in r.stdout and "ordering:" in r.stdout


def test_read_prints_what_dbg_does_not_format_as_terms(tmp_path):
    from smp.etf import encode
    from smp.terms import A
    from smp.traceport import FileTracePort
    path = tmp_path / "p.trc"
    with FileTracePort(str(path)) as port:
        port.write(encode((A.profile, A.scheduler, 1, A.active, 1, (1, 2, 3))))
        port.write(encode((A.drop, 4)))
    r = CliRunner().invoke(cli, ["read", str(path)])
    assert r.exit_code == 0
    assert r.stdout.splitlines() == ["{profile,scheduler,1,active,1,{1,2,3}}",
                                     "*** Dropped 4 messages."]
