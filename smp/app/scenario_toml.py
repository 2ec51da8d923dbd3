"""Reading a scenario file: its bytes, its TOML, and the line of each key.

Runs in the user's process.  ``read_file`` reads at most ``MAX_FILE_BYTES``
of a file; ``read_toml`` refuses text that is not UTF-8 or that nests deeper
than ``MAX_NESTING`` before Python's TOML reader sees it, and turns the
reader's own errors into one-line ``ScenarioError``s naming the file and the
line.  TOML has no positions after parsing, so ``_KeyLines`` finds a key's
line again in the raw text (one linear pass per line) for the checks'
errors.  The explore scenarios are read with it too.
"""

from __future__ import annotations

import re
import tomllib

from smp.core.errors import ScenarioError

#: TOML nested deeper than this (arrays and inline tables) is refused: no
#: scenario value needs more than a few levels, and Python's TOML reader
#: gives up near 400
MAX_NESTING = 64
#: a scenario file larger than this is refused before it is read
MAX_FILE_BYTES = 16 * 1024 * 1024


# ---------------------------------------------------------------- line finding
# Headers and key lines are read by hand, one pass over each line: a regular
# expression with nested quantifiers over the same characters backtracks in
# polynomial time on a line such as "[" and 20,000 spaces.
_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_WS = " \t\r"


def _skip_ws(line: str, i: int) -> int:
    n = len(line)
    while i < n and line[i] in _WS:
        i += 1
    return i


def _key_path(line: str, i: int) -> tuple[list[str], int] | None:
    """The dotted key at ``line[i:]`` (bare, "quoted" or 'literal' parts) and
    where it ends, or None; linear in the line's length."""
    parts: list[str] = []
    n = len(line)
    while True:
        i = _skip_ws(line, i)
        if i >= n:
            return None
        c = line[i]
        if c in "\"'":
            j = line.find(c, i + 1)
            if j < 0:
                return None
            parts.append(line[i + 1 : j])
            i = j + 1
        else:
            j = i
            while j < n and line[j] in _BARE:
                j += 1
            if j == i:
                return None
            parts.append(line[i:j])
            i = j
        i = _skip_ws(line, i)
        if i < n and line[i] == ".":
            i += 1
            continue
        return parts, i


def _header(line: str) -> tuple[bool, list[str]] | None:
    """``(is_array, key parts)`` of a ``[table]`` or ``[[array]]`` header line."""
    i = _skip_ws(line, 0)
    if not line.startswith("[", i):
        return None
    double = line.startswith("[[", i)
    kp = _key_path(line, i + (2 if double else 1))
    if kp is None:
        return None
    keys, i = kp
    close = "]]" if double else "]"
    if not line.startswith(close, i):
        return None
    i = _skip_ws(line, i + len(close))
    if i < len(line) and line[i] != "#":
        return None
    return double, keys


def _key_line(line: str) -> list[str] | None:
    """The key parts of a ``key = value`` line."""
    kp = _key_path(line, 0)
    if kp is None or not line.startswith("=", kp[1]):
        return None
    return kp[0]


class _KeyLines:
    """Where each key path of a TOML text is, found again in the raw lines.

    Paths use list indices for arrays of tables: ``("groups", 1, "count")``.
    """

    def __init__(self, text: str):
        self.lines: dict[tuple, int] = {}
        counts: dict[tuple, int] = {}
        current: tuple = ()
        in_multiline = False
        for no, line in enumerate(text.split("\n"), 1):
            if in_multiline:
                if line.count('"""') % 2 == 1 or line.count("'''") % 2 == 1:
                    in_multiline = False
                continue
            h = _header(line)
            if h is not None:
                double, keys = h
                path: list = []
                # resolve prefixes through arrays of tables opened so far
                for k in keys:
                    path.append(k)
                    n = counts.get(tuple(path))
                    if n is not None and not (double and len(path) == len(keys)):
                        path.append(n - 1)
                if double:
                    n = counts.get(tuple(path), 0)
                    counts[tuple(path)] = n + 1
                    path.append(n)
                current = tuple(path)
                self.lines.setdefault(current, no)
                self.lines.setdefault(current[:-1] if double else current, no)
                continue
            keys = _key_line(line)
            if keys is not None:
                path = current + tuple(keys)
                self.lines.setdefault(path, no)
                if line.count('"""') % 2 == 1 or line.count("'''") % 2 == 1:
                    in_multiline = True

    def find(self, path: tuple) -> int | None:
        """The line of ``path`` or of its nearest enclosing key."""
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return None


def _fmt_path(path: tuple) -> str:
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out or "(top level)"


_NESTING_CHARS = re.compile(r"[\n#\"'\[\]{}]")


def _too_deep(text: str, limit: int = MAX_NESTING) -> int | None:
    """The line where TOML arrays and inline tables first nest deeper than
    ``limit``, or None; one pass, strings and comments skipped."""
    depth, line, i, n = 0, 1, 0, len(text)
    while i < n:
        m = _NESTING_CHARS.search(text, i)
        if m is None:
            return None
        i = m.start()
        c = text[i]
        if c == "\n":
            line += 1
        elif c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif c in "\"'":
            q = text[i : i + 3] if text.startswith(c * 3, i) else c
            j = i + len(q)
            while j < n and not text.startswith(q, j):
                if c == '"' and text[j] == "\\":
                    j += 1
                elif text[j] == "\n":
                    if len(q) == 1:
                        break  # an unterminated one-line string: TOML refuses it anyway
                    line += 1
                j += 1
            i = j + len(q)
            continue
        elif c in "[{":
            depth += 1
            if depth > limit:
                return line
        elif c in "]}":
            depth = max(0, depth - 1)
        i += 1
    return None


def _decode(data: bytes, source: str) -> str:
    """UTF-8 ``data`` as text; a ScenarioError names the line of a bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ScenarioError(
            f"{source}:{line}: not UTF-8 text: byte 0x{data[e.start]:02x} at column {col}"
        ) from None


def read_toml(data: bytes | str, source: str) -> dict:
    """The TOML document of a scenario file's bytes (or text), unchecked.

    Every failure is a one-line ``ScenarioError`` naming ``source`` and,
    where there is one, the line: bytes that are not UTF-8, arrays and inline
    tables nested deeper than ``MAX_NESTING`` (refused before the TOML reader
    sees them: it would run out of stack), text that is not TOML.  The
    explore scenarios are read with it too."""
    text = _decode(data, source) if isinstance(data, bytes) else data
    deep = _too_deep(text)
    if deep is not None:
        raise ScenarioError(
            f"{source}:{deep}: arrays or inline tables nested deeper than {MAX_NESTING}"
        )
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        where = f"{source}:{m.group(1)}" if m else source
        raise ScenarioError(f"{where}: not valid TOML: {e}") from None
    except RecursionError:  # _too_deep missed a nesting the reader did not
        raise ScenarioError(f"{source}: nested too deeply to read") from None


def read_file(path: str) -> bytes:
    """A scenario file's bytes, at most ``MAX_FILE_BYTES`` of them."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read scenario: {e.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError(f"{path}: larger than {MAX_FILE_BYTES:,} bytes: not a scenario")
    return data
