"""``smp-emu read F`` prints what ``dbg:trace_client(file, F)`` prints.

The emulator writes a trace file with a file tracer (sends, receives,
calls, return_from, return_to, exception_from, spawn, link, exit, gc,
in/out, register, seq_trace and system_profile messages); a real node reads
it with ``dbg:trace_client(file, F)`` and the default handler, and
``smp-emu read F`` must print the same bytes.  Both read the same file, so
timestamps and pids need no normalisation.  ``read --all`` prints, on top,
the messages dbg's handler prints nothing for (here: profile messages) as
terms.
"""

from __future__ import annotations

import pytest
from erlnode import estr, needs_erl, run_node
from hostile.capped import run_cli

from smp.core.terms import A
from smp.ports.reader import read_trace

SCENARIO = """\
name = "kinds"
mode = "smp"
schedulers = 2
seed = 5
[duration]
operations = 3

[[tracers]]
name = "file"
kind = "file"
path = {path}
print = false

[[trace]]
pids = "new"
flags = ["procs"]
tracer = "file"

[[groups]]
name = "pp"
workload = "ping_pong"
trace = ["send", "receive", "timestamp"]
tracer = "file"
[groups.params]
pairs = 1

[[groups]]
name = "calls"
workload = "calls"
trace = ["call", "return_to"]
tracer = "file"

[[groups]]
name = "gc"
workload = "gc"
trace = ["garbage_collection", "running"]
tracer = "file"
[groups.params]
words = 3000

[[groups]]
name = "churn"
workload = "churn"
trace = ["procs", "running"]
tracer = "file"
[groups.params]
burst = 2

[[groups]]
name = "seq"
workload = "seq_chain"
[groups.params]
length = 3
label = 17
flags = ["send", "receive", "print", "timestamp"]

[[patterns]]
mfa = ["wl_calls", "fib", 1]
match_spec = "[{{['$1'], [{{'<', '$1', 2}}], [{{return_trace}}]}}, {{'_', [], [{{message, false}}]}}]"
flags = ["local"]

[[patterns]]
mfa = ["wl_calls", "check", 1]
match_spec = "exception_trace"
flags = ["local"]

[seq_trace]
tracer = "file"

[system_profile]
profiler = "file"
scheduler = true
runnable_procs = true
"""

#: what the trace file must hold for the comparison to mean something
KINDS = {
    "send",
    "receive",
    "call",
    "return_from",
    "return_to",
    "exception_from",
    "spawn",
    "link",
    "getting_linked",
    "exit",
    "gc_start",
    "gc_end",
    "in",
    "out",
    "register",
    "seq_trace",
    "profile",
}


def _kind(term) -> str:
    tag = term[0]
    if tag in (A.trace, A.trace_ts):
        return term[2].name
    return tag.name


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("read-like-dbg")
    path = d / "kinds.trace"
    scenario = d / "kinds.toml"
    scenario.write_text(SCENARIO.format(path='"' + str(path).replace("\\", "\\\\") + '"'))
    r = run_cli("run", str(scenario), timeout=120, cwd=str(d))
    assert r.returncode == 0, r.stderr[-2000:]
    terms = list(read_trace(str(path)))
    assert KINDS <= {_kind(t) for t in terms}, KINDS - {_kind(t) for t in terms}
    return path, terms


@needs_erl
def test_read_prints_what_dbg_trace_client_prints(trace_file):
    path, terms = trace_file
    code = (
        "P = dbg:trace_client(file, "
        + estr(path)
        + "), R = monitor(process, P),"
        + " receive {'DOWN', R, process, P, _} -> ok after 60000 -> halt(3) end, halt()."
    )
    theirs = run_node(code)
    r = run_cli("read", str(path), timeout=60)
    assert r.returncode == 0, r.stderr
    ours = r.stdout.encode("latin-1")
    assert theirs, "dbg printed nothing"
    their_lines, our_lines = theirs.decode("latin-1").splitlines(), r.stdout.splitlines()
    for i, (a, b) in enumerate(zip(their_lines, our_lines, strict=False)):
        assert a == b, f"line {i + 1}: dbg printed {a!r}, read printed {b!r}"
    assert len(our_lines) == len(their_lines)
    assert ours == theirs
    # dbg's handler prints nothing for profile messages, and neither does read
    assert not any(line.startswith("{profile,") for line in our_lines)
    assert any(" ! " in line for line in our_lines) and any("SeqTrace" in x for x in our_lines)


def test_read_all_prints_every_term(trace_file):
    path, terms = trace_file
    default = run_cli("read", str(path), timeout=60)
    every = run_cli("read", "--all", str(path), timeout=60)
    assert default.returncode == every.returncode == 0, (default.stderr, every.stderr)
    extra = [x for x in every.stdout.splitlines() if x not in set(default.stdout.splitlines())]
    profiles = sum(1 for t in terms if t[0] is A.profile)
    assert profiles and len(extra) == profiles
    assert all(x.startswith("{profile,") for x in extra), extra[:5]
    # the lines dbg prints come in the same order, with the terms among them
    it = iter(every.stdout.splitlines())
    assert all(line in it for line in default.stdout.splitlines())
