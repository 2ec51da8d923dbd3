"""The examples in the documentation run, and print what the pages show.

Every fenced block of ``docs/**/*.md`` and of ``README.md`` that is an
example is run:

* a ``console`` block (or ``sh``/``bash`` with ``$ `` prompts): each ``$ ``
  line is a shell command, run in one fresh directory per page, in page
  order; the lines after it, up to the next prompt, are its output.  The
  output compared is stdout followed by stderr; a line ``...`` stands for
  any number of lines and ``...`` inside a line for any text.  A command
  exits 0 unless its line ends with ``# exit N``.  Before a page runs, its
  directory gets ``docs/examples/node1.trace`` as a clone has it: the file
  an OTP 25 node ``node1@host`` wrote, which the pages read;
* a ``python`` block runs as a script in that directory and must exit 0;
* a ``toml`` block must be a valid scenario (an explore scenario when it
  has a ``[[queue]]``); one whose fence names a file (```` ```toml
  title="swap.toml" ````) is also written there, for the commands after it.

``sh`` blocks without prompts are recipes (installing, benchmarks, other
hosts), not examples, and are not run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from smp.app.explore import load_explore_scenario
from smp.app.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
NODE_TRACE = DOCS / "examples" / "node1.trace"
PAGES = sorted(DOCS.rglob("*.md")) + [README]
SHELLS = ("console", "sh", "shell", "bash")
_FENCE = re.compile(r"^```([\w-]*)([^\n]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
_TITLE = re.compile(r'title="([\w.-]+)"')
_EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")
#: command output already seen in this process: (command, files there) -> result
_SEEN: dict[tuple, tuple[int, str]] = {}


def _blocks(page: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(3)) for m in _FENCE.finditer(page.read_text("utf-8"))]


def _titled(page: Path) -> dict[str, str]:
    """Block body -> the file its fence names (``title="NAME"``)."""
    out = {}
    for m in _FENCE.finditer(page.read_text("utf-8")):
        t = _TITLE.search(m.group(2))
        if t:
            out[m.group(3)] = t.group(1)
    return out


def _commands(body: str) -> list[tuple[str, list[str]]]:
    """``[(command, expected output lines)]`` of a console block."""
    out: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line)
    return out


def _pattern(expected: list[str]) -> re.Pattern:
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*".join(re.escape(x) for x in line.rstrip().split("...")) + r"\n")
    return re.compile("".join(parts))


def _ship_node_trace(cwd: Path) -> None:
    """The real node's trace file the repository ships, where a clone has it."""
    (cwd / "docs" / "examples").mkdir(parents=True)
    shutil.copyfile(NODE_TRACE, cwd / "docs" / "examples" / "node1.trace")


def _run(command: str, cwd: Path) -> tuple[int, str]:
    key = (command, frozenset(os.listdir(cwd)))
    if key in _SEEN and ">" not in command:
        return _SEEN[key]
    env = dict(os.environ, COLUMNS="80", NO_COLOR="1")
    r = subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    _SEEN[key] = (r.returncode, r.stdout + r.stderr)
    return _SEEN[key]


def _page_id(page: Path) -> str:
    return "README.md" if page == README else str(page.relative_to(DOCS))


def _is_example(lang: str, body: str) -> bool:
    return lang in ("python", "toml") or (lang in SHELLS and bool(_commands(body)))


EXAMPLE_PAGES = [p for p in PAGES if any(_is_example(lang, body) for lang, body in _blocks(p))]


@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=_page_id)
def test_examples_of_the_page_run(page, tmp_path):
    _ship_node_trace(tmp_path)
    titled = _titled(page)
    ran = 0
    for lang, body in _blocks(page):
        if body in titled:
            (tmp_path / titled[body]).write_text(body)
        if lang in SHELLS:
            for command, expected in _commands(body):
                m = _EXIT.search(command)
                want_rc = int(m.group(1)) if m else 0
                rc, out = _run(command, tmp_path)
                assert rc == want_rc, f"{page.name}: $ {command}\nexit {rc}\n{out}"
                if expected:
                    text = "".join(line.rstrip() + "\n" for line in out.splitlines())
                    assert _pattern(expected).fullmatch(text), (
                        f"{page.name}: $ {command}\nexpected:\n"
                        + "\n".join(expected)
                        + f"\ngot:\n{text}"
                    )
                ran += 1
        elif lang == "python":
            r = subprocess.run(
                [sys.executable, "-c", body],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
            )
            assert r.returncode == 0, f"{page.name}: python block failed:\n{r.stderr}"
            ran += 1
        elif lang == "toml":
            data = tomllib.loads(body)
            if "queue" in data:
                load_explore_scenario(data)
            else:
                parse_scenario(body, f"{page.name} example")
            ran += 1
    assert ran


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_console_blocks_have_commands(page):
    for lang, body in _blocks(page):
        if lang == "console":
            assert _commands(body), f"{page.name}: a console block without a '$ ' command"


def test_output_rule_matches_and_refuses():
    pat = _pattern(["a ... c", "...", "z"])
    assert pat.fullmatch("a b c\nx\ny\nz\n")
    assert pat.fullmatch("a  c\nz\n")
    assert not pat.fullmatch("a b c\nx\n")
    assert not pat.fullmatch("b c\nz\n")
    assert _commands("$ one\nout\n$ two # exit 2\n") == [("one", ["out"]), ("two # exit 2", [])]


def test_readme_is_short_and_its_links_resolve():
    text = README.read_text("utf-8")
    assert len(text.splitlines()) <= 250
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links
    for link in links:
        if "://" not in link:
            # the repository's front page: links are from the root
            assert (ROOT / link).exists(), link


def test_every_docs_page_is_in_the_site():
    nav = (ROOT / "mkdocs.yml").read_text("utf-8")
    for page in PAGES:
        rel = _page_id(page)
        if rel != "README.md":
            assert rel in nav, f"{rel} is not in mkdocs.yml's nav"
