"""MkDocs hook: the tables that come from the code, rendered at build time.

A page asks for one with a marker on a line of its own:

* ``<!-- schema:run -->``, ``<!-- schema:explore -->``: every key of a
  scenario file, from ``smp.app.schema`` (what the validators accept);
* ``<!-- examples:run -->``, ``<!-- examples:explore -->``: the shipped
  example scenarios and their one-line descriptions;
* ``<!-- otp-differences -->``: where a real OTP 25 node differs from the
  OTP 17 seed on purpose, from ``tests/differential/otp_differences.py``
  (the rules the differential suite applies).

An unknown marker fails the build, so a page cannot silently lose a table.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from smp.app.schema import list_examples, render_schema

ROOT = Path(__file__).resolve().parents[1]
_MARKER = re.compile(r"^<!-- ([a-z-]+)(?::([a-z]+))? -->$", re.MULTILINE)


def _otp_differences():
    """``tests/differential/otp_differences.py``, loaded from its file (the
    tests folder is not a package the docs build can import)."""
    name = "otp_differences"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, ROOT / "tests" / "differential" / "otp_differences.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def differences_table() -> str:
    """One row per entry of ``DIFFERENCES``, in the suite's order."""
    rows = [
        "| name | OTP release | seed line | seen in scenario | what differs | how the 17.x side was checked |",
        "|---|---|---|---|---|---|",
    ]
    for d in _otp_differences().DIFFERENCES:
        line = "-" if d.seed_line is None else f"`erl_trace.c:{d.seed_line}`"
        rows.append(
            f"| `{d.name}` | {d.otp} | {line} | `{d.observed_in}` | "
            f"{_cell(d.summary)} | {_cell(d.verified)} |"
        )
    return "\n".join(rows) + "\n"


def examples_table(kind: str) -> str:
    rows = ["| example | what it shows |", "|---|---|"]
    rows += [f"| `{name}` | {_cell(line)} |" for name, line in list_examples(kind)]
    return "\n".join(rows) + "\n"


def _render(match: re.Match) -> str:
    what, arg = match.group(1), match.group(2)
    if what == "schema":
        return render_schema(arg, "markdown")
    if what == "examples":
        return examples_table(arg)
    if what == "otp-differences" and arg is None:
        return differences_table()
    raise ValueError(f"unknown docs marker {match.group(0)!r}")


def on_page_markdown(markdown: str, **kwargs) -> str:
    return _MARKER.sub(_render, markdown)
