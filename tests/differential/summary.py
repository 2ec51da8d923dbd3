"""The differential suite's summary: how many scenario-modes match the real node.

Registered by the root ``tests/conftest.py`` (so the controller of an xdist
run has it whichever tests were asked for).

Each scenario test records its outcome in ``user_properties`` (which
pytest-xdist carries from the workers to the controller); this conftest adds
them up and prints, at the end of the run, how many scenario-modes match the
node exactly, how many match once the node's messages go through
``otp_differences.py`` (and how many lines that took), and how many differ.
"""

from __future__ import annotations

from .otp_differences import DIFFERENCES

_results: dict[tuple[str, str, str], dict] = {}


def pytest_runtest_logreport(report):
    if report.when != "call":
        return
    for key, value in report.user_properties:
        if key == "differential":
            _results[(report.nodeid.split("::")[0], value["scenario"], value["mode"])] = value


def pytest_terminal_summary(terminalreporter):
    if not _results:
        return
    tr = terminalreporter
    exact = [v for v in _results.values() if v["status"] == "exact"]
    table = [v for v in _results.values() if v["status"] == "table"]
    differ = [(k, v) for k, v in _results.items() if v["status"] == "differs"]
    rules: dict[str, int] = {}
    for v in table:
        for name, n in v["rules"].items():
            rules[name] = rules.get(name, 0) + n
    tr.write_sep("=", "differential: emulator vs OTP 25 node")
    tr.write_line(f"{len(exact)} scenario-modes match the node exactly")
    tr.write_line(
        f"{len(table)} scenario-modes match with "
        f"{sum(v['table_lines'] for v in table)} node lines that differ only "
        "through otp_differences.py"
        + (" (" + ", ".join(f"{k}: {n}" for k, n in sorted(rules.items())) + ")" if rules else "")
    )
    tr.write_line(
        f"{len(differ)} scenario-modes differ"
        + (": " + ", ".join(f"{s}[{m}]" for (_, s, m), _ in sorted(differ)) if differ else "")
    )
    used = {name for v in _results.values() for name in v["rules"]}
    unused = [d.name for d in DIFFERENCES if d.name not in used]
    if unused:
        tr.write_line(
            "otp_differences.py entries no scenario needed in this run: " + ", ".join(unused)
        )
