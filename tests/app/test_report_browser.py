"""Every kind of report (run, compare, stress, profile) opened in a real
headless browser (Debian's chromium, which tools/test.sh installs), driven
over the DevTools protocol: each chart is drawn with data, its axes are
labelled, and the page logs no error."""

from __future__ import annotations

import json

import pytest
from browser import Browser, available
from click.testing import CliRunner

from smp.app.cli import cli
from smp.app.scenario import example_path

pytestmark = pytest.mark.skipif(
    not available(), reason="chromium is not installed (sh tools/test.sh installs it)"
)

SMALL = """\
name = "small"
mode = "smp"
schedulers = 2
seed = 2
[duration]
seconds = 0.3
[[tracers]]
name = "t"
[[groups]]
name = "pp"
workload = "ping_pong"
trace = ["send", "receive", "timestamp"]
tracer = "t"
[[groups]]
name = "churn"
workload = "churn"
[groups.params]
burst = 3
flags = ["send", "receive", "timestamp"]
"""

CHECK = """(() => {
  const out = [];
  for (const fig of document.querySelectorAll('figure.plot')) {
    const svg = fig.querySelector('svg');
    const r = {id: fig.id, caption: fig.querySelector('figcaption').textContent,
               svg: !!svg, text: fig.textContent.slice(0, 200)};
    if (svg) {
      const b = svg.getBoundingClientRect();
      r.w = b.width; r.h = b.height;
      const label = k => { const e = svg.querySelector('[id$="-' + k + '"]');
                           return e ? e.textContent.trim() : ''; };
      r.xlabel = label('xlabel'); r.ylabel = label('ylabel');
      const data = [...svg.querySelectorAll(
          'g[id*="-series-"], g[id*="-bars-"], g[id*="-sched-"]')];
      r.series = data.length;
      r.drawn = data.filter(g => { const bb = g.getBBox();
                                   return bb.width > 0 || bb.height > 0; }).length;
    }
    out.push(r);
  }
  return out;
})()"""


def _json(args) -> dict:
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    d = tmp_path_factory.mktemp("browser")
    small = d / "small.toml"
    small.write_text(SMALL)
    with open(example_path("profile"), encoding="utf-8") as f:
        prof = f.read().replace("seconds = 1.0", "seconds = 0.3")
    (d / "profile.toml").write_text(prof)
    results = {
        "run": _json(["run", str(small), "--json"]),
        "compare": _json(["compare", str(small), "--json", "--operations", "15"]),
        "stress": _json(["stress", str(small), "--duration", "0.3", "--faults", "4", "--json"]),
        "profile": _json(["run", str(d / "profile.toml"), "--json"]),
    }
    pages = {}
    for kind, data in results.items():
        (d / f"{kind}.json").write_text(json.dumps(data))
        r = CliRunner().invoke(
            cli, ["report", str(d / f"{kind}.json"), "-o", str(d / f"{kind}.html")]
        )
        assert r.exit_code == 0, r.output
        pages[kind] = str(d / f"{kind}.html")
    return results, pages


@pytest.mark.timeout(150)
def test_every_report_kind_draws_its_charts_in_a_browser(reports):
    results, pages = reports
    with Browser() as browser:
        for kind, path in pages.items():
            page = browser.open(path)
            figures = page.evaluate(CHECK)
            assert page.errors() == [], (kind, page.errors())
            drawn = [f for f in figures if f["svg"]]
            ids = {f["id"] for f in drawn}
            assert {"plot-throughput", "plot-queue", "plot-totals"} <= ids, (kind, ids)
            for f in drawn:
                where = (kind, f["id"])
                assert f["w"] > 200 and f["h"] > 80, where
                assert f["xlabel"] and f["ylabel"], where
                assert f["series"] >= 1 and f["drawn"] >= 1, where
            for f in figures:
                if not f["svg"]:  # a chart with nothing to draw says why instead
                    assert f["text"].strip() != f["caption"].strip(), (kind, f["id"])
            page.close()
    # the profile run has the scheduler timeline, smp runs the latency histogram
    assert results["profile"]["scheduler_timeline"]["schedulers"]
    assert results["run"]["latency_histogram"]["count"] > 0


TREE_CHECK = """(() => {
  const svg = document.querySelector('figure#explore-tree svg');
  const b = svg.getBoundingClientRect();
  const drawn = g => [...svg.querySelectorAll(g)].filter(e => {
    const bb = e.getBBox(); return bb.width > 0 || bb.height > 0; }).length;
  return {w: b.width, h: b.height, leaves: drawn('g.leaf'), branches: drawn('path'),
          tips: svg.querySelectorAll('path > title').length,
          xlabel: svg.querySelector('#tree-xlabel').textContent};
})()"""


@pytest.mark.timeout(120)
def test_the_explored_tree_is_drawn_in_a_browser(tmp_path):
    """``explore --graph`` then ``report`` on the DOT file: a leaf drawn for
    every execution, branch lines with their tooltips, no error logged."""
    dot, page = tmp_path / "tree.dot", tmp_path / "tree.html"
    result = _json(["explore", "default", "--graph", str(dot), "--json", "--jobs", "1"])["result"]
    r = CliRunner().invoke(cli, ["report", str(dot), "-o", str(page)])
    assert r.exit_code == 0, r.output
    with Browser() as browser:
        p = browser.open(str(page))
        got = p.evaluate(TREE_CHECK)
        assert p.errors() == [], p.errors()
        p.close()
    assert got["w"] > 200 and got["h"] > 80, got
    assert got["leaves"] == result["executions"] + result["blocked"] == 20, got
    assert got["branches"] >= got["leaves"] and got["tips"] == got["branches"], got
    assert got["xlabel"].startswith("steps from the initial state"), got


LABELS_APART = """(() => {
  const boxes = [...document.querySelectorAll('figure#explore-tree svg text')].map(t => {
    const b = t.getBBox(); return {x0: b.x, x1: b.x + b.width, y0: b.y, y1: b.y + b.height,
                                   text: t.textContent}; });
  const over = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1) over.push([a.text, b.text]);
  }
  return {labels: boxes.length, over: over};
})()"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("scenario", ["seq", "races"])
def test_the_outcome_tree_of_an_explore_scenario_has_no_label_over_another(tmp_path, scenario):
    """The columns of the outcome tree are as wide as their headings: on
    ``seq`` "m1 SEQTRACE" ran into "m2 SEQTRACE" (the column was as wide as
    the fates, "new" and "old")."""
    page = tmp_path / f"{scenario}.html"
    data = tmp_path / f"{scenario}.json"
    data.write_text(json.dumps(_json(["explore", scenario, "--json"])))
    r = CliRunner().invoke(cli, ["report", str(data), "-o", str(page)])
    assert r.exit_code == 0, r.output
    with Browser() as browser:
        p = browser.open(str(page))
        got = p.evaluate(LABELS_APART)
        assert p.errors() == [], p.errors()
        p.close()
    assert got["labels"] > 5 and got["over"] == [], got


@pytest.mark.timeout(120)
def test_an_explore_page_keeps_its_long_lines_on_the_page(tmp_path):
    """Race pairs and events are lines of 300 characters: the page wraps
    them rather than running past its right edge (they were cut off)."""
    data = tmp_path / "ex.json"
    data.write_text(json.dumps(_json(["explore", "churn", "--max-executions", "5", "--json"])))
    page = tmp_path / "ex.html"
    r = CliRunner().invoke(cli, ["report", str(data), "-o", str(page)])
    assert r.exit_code == 0, r.output
    with Browser() as browser:
        p = browser.open(str(page))
        got = p.evaluate(
            "(() => { const pres = [...document.querySelectorAll('pre')];"
            " return {pres: pres.length, wide: pres.filter(e => e.scrollWidth > e.clientWidth + 1)"
            ".length, page: document.documentElement.scrollWidth, view: window.innerWidth}; })()"
        )
        assert p.errors() == [], p.errors()
        p.close()
    assert got["pres"] > 0 and got["wide"] == 0 and got["page"] <= got["view"], got
