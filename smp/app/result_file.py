"""Reading a saved result file (the ``--json`` of ``run``, ``stress``,
``compare`` or ``explore``) for ``smp-emu report``: a file from anywhere,
read whole into memory once (at most ``MAX_RESULT_BYTES``), decoded as UTF-8
JSON and refused in one line
(``ResultFileError``) when it is not one; its nesting is checked without
recursion.
"""

from __future__ import annotations

import json
import sys

from smp.core.errors import SmpError

__all__ = ["MAX_RESULT_BYTES", "MAX_RESULT_DEPTH", "ResultFileError", "load_result", "read_text"]

#: a saved result nests a few levels (summary, timeseries, a run's counters);
#: a file nested deeper than this is not one
MAX_RESULT_DEPTH = 64
#: a saved result larger than this is refused (a long stress run's is a few MB)
MAX_RESULT_BYTES = 256 * 1024 * 1024


class ResultFileError(SmpError):
    """A result file that cannot be read as a saved result; the message is
    one line naming the file (and the line, where there is one)."""


def read_text(path: str, max_bytes: int, kind: str) -> str:
    """The UTF-8 text of ``path`` (``-``: standard input), read whole once,
    or a ``ResultFileError`` in one line: the file cannot be read, is larger
    than ``max_bytes`` or is not UTF-8 (``kind`` says what it is not, then)."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(max_bytes + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(max_bytes + 1)
    except OSError as e:
        raise ResultFileError(f"{path}: cannot read: {e.strerror}") from None
    if len(data) > max_bytes:
        raise ResultFileError(f"{path}: larger than {max_bytes:,} bytes: not {kind}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ResultFileError(
            f"{path}:{line}: not UTF-8 text: byte 0x{data[e.start]:02x} (not {kind})"
        ) from None


def load_result(path: str, text: str | None = None) -> dict:
    """The JSON object of a saved result file (``run``/``stress``/``compare``/
    ``explore --json``), or a ``ResultFileError``: the file cannot be read,
    is not UTF-8, is not JSON, nests deeper than ``MAX_RESULT_DEPTH`` or is
    not a JSON object.  ``text``: the file's text, read already (a pipe
    cannot be read twice)."""
    if text is None:
        text = read_text(path, MAX_RESULT_BYTES, "a saved result")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ResultFileError(f"{path}:{e.lineno}: not JSON: {e.msg} (column {e.colno})") from None
    except RecursionError:
        raise ResultFileError(
            f"{path}: nested deeper than {MAX_RESULT_DEPTH} levels: not a saved result"
        ) from None
    if not isinstance(doc, dict):
        raise ResultFileError(
            f"{path}: not a run, stress, compare or explore result (not a JSON object)"
        )
    stack = [(doc, 1)]
    while stack:  # iteratively: the depth is what is being checked
        x, depth = stack.pop()
        if depth > MAX_RESULT_DEPTH:
            raise ResultFileError(
                f"{path}: nested deeper than {MAX_RESULT_DEPTH} levels: not a saved result"
            )
        items = x.values() if isinstance(x, dict) else x
        stack.extend((v, depth + 1) for v in items if isinstance(v, (dict, list)))
    return doc
