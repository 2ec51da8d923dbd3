"""``smp-emu report TREE.dot``: the explored tree ``explore --graph``
writes, read back line by line and drawn; every line it did not write is
refused in one line naming the file and the line, with the usage exit
code."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from smp.app.cli import cli
from smp.app.exitcodes import EXIT_USAGE
from smp.app.explore import tree_page
from smp.app.explore.tree_page import load_tree


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    """``explore default`` (exhaustive, 20 executions) with its tree and JSON."""
    d = tmp_path_factory.mktemp("tree")
    dot = d / "default.dot"
    r = CliRunner().invoke(
        cli, ["explore", "default", "--graph", str(dot), "--json", "--jobs", "1"]
    )
    assert r.exit_code == 0, r.output
    return dot, json.loads(r.stdout)["result"]


def test_the_tree_read_back_holds_every_execution_and_its_outcome(explored):
    dot, result = explored
    tree = load_tree(str(dot))
    assert tree.title == "explore default"
    assert tree.executions() == result["executions"] + result["blocked"] == 20
    ends: dict = {}
    for v in tree.leaves.values():
        for text, style in v:
            ends[text] = ends.get(text, 0) + 1
            assert style == "solid"  # no invariant broken, none blocked
    assert ends == {f"outcome {i}": o["count"] for i, o in enumerate(result["outcomes"], 1)}
    # each state is reached once, from the initial state
    reached = [c for v in tree.kids.values() for _t, _e, c in v]
    assert len(reached) == len(set(reached)) == len(tree.kids) - 1


def test_report_draws_a_row_per_execution(explored, tmp_path):
    dot, result = explored
    out = tmp_path / "tree.html"
    r = CliRunner().invoke(cli, ["report", str(dot), "-o", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert page.count("<g class='leaf'>") == 20
    assert "20 executions over" in page and "all 20 executions are drawn" in page
    assert f"{len(result['outcomes'])} distinct outcomes" in page
    # a branch's tooltip names its first step
    assert re.search(r"<title>S\d: scheduler \d runs ", page)


def test_a_long_search_draws_its_first_rows_and_says_so(explored, tmp_path, monkeypatch):
    dot, _ = explored
    monkeypatch.setattr(tree_page, "MAX_ROWS", 5)
    out = tmp_path / "tree.html"
    r = CliRunner().invoke(cli, ["report", str(dot), "-o", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert page.count("<g class='leaf'>") == 5
    assert "the first 5 of 20 executions are drawn" in page


GOOD_HEAD = 'digraph "explore x" {\n'
EDGE = '  n0 -> n1 [label="S1", tooltip="scheduler 1 runs p"];\n'
LEAF = '  l1 [shape=box, style=solid, width=0.5, label="outcome 1"];\n  n1 -> l1 [style=dotted, arrowhead=none];\n'


@pytest.mark.parametrize(
    "text, line, what",
    [
        ("digraph {\n}\n", 1, "no 'digraph"),
        (GOOD_HEAD + '  n3 -> n4 [label="S1", tooltip="x"];\n}\n', 2, "no earlier edge reaches"),
        (GOOD_HEAD + EDGE + EDGE + "}\n", 3, "a second edge into n1"),
        (GOOD_HEAD + EDGE + "  n1 -> l9 [style=dotted, arrowhead=none];\n}\n", 3, "leaf l9"),
        (GOOD_HEAD + EDGE + LEAF + "}\nmore\n", 6, "after the closing brace"),
        (GOOD_HEAD + EDGE + LEAF, 4, "no closing brace"),
        (GOOD_HEAD + '  n0 -> n1 [label="S1"];\n}\n', 2, "an unexpected line"),
        (GOOD_HEAD + '  l1 [shape=box, style=odd, width=0.5, label="x"];\n}\n', 2, "unexpected"),
        (GOOD_HEAD + '  l1 [shape=box, style=solid, width=0.5, label="x"];\n}\n', 3, "under no"),
    ],
    ids=["header", "orphan", "twice", "leaf", "after", "unclosed", "edge", "style", "loose"],
)
def test_a_line_the_explorer_did_not_write_is_refused_in_one_line(tmp_path, text, line, what):
    f = tmp_path / "t.dot"
    f.write_text(text)
    r = CliRunner().invoke(cli, ["report", str(f), "-o", str(tmp_path / "t.html")])
    assert r.exit_code == EXIT_USAGE
    out = r.output.strip().splitlines()
    assert len(out) == 1, r.output
    assert out[0].startswith(f"smp-emu: {f}:{line}: ") and what in out[0], out[0]
    assert not (tmp_path / "t.html").exists()


def test_a_tree_file_that_is_not_text_or_too_large_is_refused(tmp_path, monkeypatch):
    f = tmp_path / "t.dot"
    f.write_bytes(b'digraph "x" {\n\xff\n}\n')
    r = CliRunner().invoke(cli, ["report", str(f)])
    assert r.exit_code == EXIT_USAGE and f"{f}:2: not UTF-8" in r.output
    f.write_text(GOOD_HEAD + EDGE + LEAF + "}\n")
    monkeypatch.setattr(tree_page, "MAX_TREE_BYTES", 40)
    r = CliRunner().invoke(cli, ["report", str(f)])
    assert r.exit_code == EXIT_USAGE and "larger than" in r.output


def test_labels_with_quotes_backslashes_and_newlines_come_back_as_written(tmp_path):
    from smp.sim.graph import Trie

    t = Trie()
    odd = 'a "quoted" \\ back\nslash'
    t.add([("S1", odd), ("D", "dispatch 'm1'")], "blocked")
    t.add([("S1", odd), ("S2", "x")], "cut")
    f = tmp_path / "odd.dot"
    f.write_text(t.to_dot(title='explore "odd"'))
    tree = load_tree(str(f))
    assert tree.title == 'explore "odd"'
    ((thread, event, first),) = tree.kids[0]
    assert (thread, event) == ("S1", odd)
    assert [(th, ev) for th, ev, _c in tree.kids[first]] == [("D", "dispatch 'm1'"), ("S2", "x")]
    assert sorted(text for v in tree.leaves.values() for text, _ in v) == ["blocked", "cut"]


def test_a_state_where_two_executions_end_spans_both_rows(tmp_path):
    from smp.sim.graph import Trie

    t = Trie()
    t.add(["S1", "D"], "blocked")
    t.add(["S1", "D"], "cut")
    t.add(["S2"], "cut")
    f = tmp_path / "two.dot"
    f.write_text(t.to_dot())
    rows, segs, marks, depth_max = tree_page._layout(load_tree(str(f)))
    assert rows == 3 and depth_max == 2
    assert [(d, r) for d, r, _t, _s in marks] == [(2, 0), (2, 1), (1, 2)]
    # the branch into the state where two end meets it between their rows
    assert (0, 1.0, 2, 0.5, "S1:  (and 1 more steps)") in segs
