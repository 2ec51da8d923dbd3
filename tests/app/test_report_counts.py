"""``smp-emu report`` refuses a saved result whose counts are not counts.

Each kind of result ``report`` draws is made for real (``run``, ``stress``,
``compare``, ``explore`` of an explore scenario, of a race in the simulator,
and one schedule of it, each ``--json``), one count in it is corrupted (NaN,
Infinity, negative, a fraction, a string, true or false: all JSON a tool
could write), and ``report`` must exit 2 with one line naming the file and
the field's path; it drew such a file as if the value were a number.
"""

from __future__ import annotations

import json
import math

import pytest
from helpers import PING_PONG_T
from hostile.capped import assert_one_line, run_cli

from smp.app.exitcodes import EXIT_USAGE

SMALL = (
    """\
name = "small"
mode = "smp"
schedulers = 2
seed = 3
[duration]
operations = 5
"""
    + PING_PONG_T
)

RACE = "tracer_killed_with_messages_queued"

#: the command line of each kind of saved result
MAKE = {
    "run": ["run", "{small}", "--json"],
    "stress": ["stress", "--duration", "0.3", "--json"],
    "compare": ["compare", "{small}", "--json"],
    "explore": ["explore", "seq", "--json"],
    "explore-sim": ["explore", RACE, "--json"],
    "explore-sim-one": ["explore", RACE, "--schedule", "S1 S1 S1 A1>2 S2", "--json"],
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Each kind of result as its command saved it (the JSON on stdout)."""
    d = tmp_path_factory.mktemp("counts")
    small = d / "small.toml"
    small.write_text(SMALL)
    out = {}
    for name, argv in MAKE.items():
        r = run_cli(*[a.format(small=small) for a in argv], timeout=120)
        assert r.returncode == 0, (name, r.stderr[-2000:])
        out[name] = json.loads(r.stdout)
    return out


def _at(doc, path: tuple):
    for step in path[:-1]:
        doc = doc[step]
    return doc


NAN, INF = float("nan"), float("inf")

#: (result, the field's path in it, the value put there, how the line shows it)
CASES = [
    ("run", ("stats", "made"), NAN, "NaN"),
    ("run", ("stats", "delivered"), True, "true"),
    ("run", ("per_scheduler", 0, "made"), -1, "-1"),
    ("run", ("timeseries", "made", 1), "3", '"3"'),
    ("run", ("tracers", "t", "received"), 2.5, "2.5"),
    ("run", ("latency_histogram", "counts", 0), INF, "Infinity"),
    ("run", ("stats", "made_by_type", "TRACE"), None, "null"),
    ("stress", ("stats", "dropped"), -INF, "-Infinity"),
    ("stress", ("replay", "divergence_count"), -7, "-7"),
    ("stress", ("timeseries", "schedulers", 1, "made", 0), False, "false"),
    ("compare", ("runs", "smp", "stats", "queued"), NAN, "NaN"),
    ("compare", ("rows", 0, "nonsmp"), "14", '"14"'),
    ("compare", ("causes", "total"), -1, "-1"),
    ("compare", ("messages", "tracers", 0, "smp"), True, "true"),
    ("explore", ("schedules", "run"), NAN, "NaN"),
    ("explore", ("outcomes", 0, "index"), False, "false"),
    ("explore-sim", ("result", "executions"), -1, "-1"),
    ("explore-sim", ("result", "outcomes", 0, "count"), "2", '"2"'),
    ("explore-sim-one", ("replay", "given_steps"), INF, "Infinity"),
]


def _path_text(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


@pytest.mark.parametrize("kind", list(MAKE), ids=[f"{k}-json" for k in MAKE])
def test_each_kind_of_result_as_saved_is_drawn(saved, kind, tmp_path):
    """The results as their commands saved them pass: a corrupted one below
    is refused for the field, not for its kind."""
    f = tmp_path / f"{kind}.json"
    f.write_text(json.dumps(saved[kind]))
    r = run_cli("report", str(f), "-o", str(tmp_path / "page.html"), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "page.html").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize(
    "kind,path,value,shown", CASES, ids=[f"{c[0]}:{_path_text(c[1])}" for c in CASES]
)
def test_a_count_that_is_not_one_is_refused_naming_its_field(
    saved, kind, path, value, shown, tmp_path
):
    doc = json.loads(json.dumps(saved[kind]))
    holder = _at(doc, path)
    assert type(holder[path[-1]]) is int  # a count as the command wrote it
    holder[path[-1]] = value
    text = json.dumps(doc)  # NaN and Infinity as the literals Python's json writes
    if isinstance(value, float) and not math.isfinite(value):
        assert shown in text
    f = tmp_path / f"{kind}.json"
    f.write_text(text)
    page = tmp_path / "page.html"
    r = run_cli("report", str(f), "-o", str(page), timeout=120)
    line = assert_one_line(r, EXIT_USAGE)
    assert line == (
        f"smp-emu: {f}: {_path_text(path)} is {shown}: not a count (an integer, 0 or more)"
    )
    assert not page.exists()
