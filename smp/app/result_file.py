"""Reading a saved result file (the ``--json`` of ``run``, ``stress``,
``compare`` or ``explore``) for ``smp-emu report``: a file from anywhere,
read whole into memory once (at most ``MAX_RESULT_BYTES``), decoded as UTF-8
JSON and refused in one line
(``ResultFileError``) when it is not one; its nesting is checked without
recursion, and every count a saved result of its kind holds (messages made,
delivered, dropped and queued, per scheduler, per sample, per outcome ...)
must be an integer of 0 or more: a count that is NaN, Infinity, negative, a
fraction, a string or true/false is refused by its field's path.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys

from smp.core.errors import SmpError

__all__ = [
    "MAX_RESULT_BYTES",
    "MAX_RESULT_DEPTH",
    "MAX_INT_DIGITS",
    "ResultFileError",
    "check_counts",
    "load_result",
    "read_text",
    "result_kind",
]

#: a saved result nests a few levels (summary, timeseries, a run's counters);
#: a file nested deeper than this is not one
MAX_RESULT_DEPTH = 64
#: a saved result larger than this is refused (a long stress run's is a few MB)
MAX_RESULT_BYTES = 256 * 1024 * 1024
#: an integer of more digits is in no saved result (a 64-bit seed has 20)
MAX_INT_DIGITS = 40


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


class _LongNumber:
    """An integer longer than any a result holds, left as its digit count
    (Python would refuse past 4,300 digits with its own ValueError; a long
    one is slow to convert): the file is refused naming where it is."""

    __slots__ = ("digits",)

    def __init__(self, digits: int):
        self.digits = digits


def _int(text: str) -> int | _LongNumber:
    digits = len(text.lstrip("-"))
    return _LongNumber(digits) if digits > MAX_INT_DIGITS else int(text)


def _long_number_at(doc) -> tuple[str, int] | None:
    """Where the first ``_LongNumber`` of ``doc`` is (``stats.made``,
    ``rows[2].n``) and its digits; None when there is none."""
    stack: list = [(doc, "")]
    while stack:
        x, where = stack.pop()
        if type(x) is _LongNumber:
            return where or "the file", x.digits
        if isinstance(x, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in reversed(x.items()))
        elif isinstance(x, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(x))))
    return None


def load_result(path: str, text: str | None = None) -> dict:
    """The JSON object of a saved result file (``run``/``stress``/``compare``/
    ``explore --json``), or a ``ResultFileError``: the file cannot be read,
    is not UTF-8, is not JSON, has an integer of more than
    ``MAX_INT_DIGITS`` digits, nests deeper than ``MAX_RESULT_DEPTH``, is
    not a JSON object or holds a count that is not one (``check_counts``).
    ``text``: the file's text, read already (a pipe cannot be read twice)."""
    if text is None:
        text = read_text(path, MAX_RESULT_BYTES, "a saved result")
    try:
        doc = json.loads(text, parse_int=_int)
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
    long = _long_number_at(doc)
    if long is not None:
        where, digits = long
        raise ResultFileError(
            f"{path}: {where} is an integer of more than {MAX_INT_DIGITS} digits ({digits:,}): "
            "not a saved result"
        )
    check_counts(path, doc)
    return doc


#: the ``kind`` of each command's saved result
KINDS = ("run", "stress", "compare", "explore", "explore-sim")


def result_kind(data: dict) -> str:
    """Which command saved a result: ``run``, ``stress``, ``compare``,
    ``explore`` or ``explore-sim`` (its ``kind``; an older file without one
    by its keys)."""
    if data.get("kind") in KINDS:
        return data["kind"]
    if "runs" in data and "rows" in data:
        return "compare"
    if "faults" in data and "invariants" in data and "journal" in data:
        return "stress"
    return "run"


# The counts of a saved result, by kind: a path of keys from the result's
# top ("*" any key of an object, "[]" every item of a list); "?" at the end:
# the field may be null there.  A field that is absent is not checked here
# (an older smp-emu saved fewer; the page says what it lacks).
_RUN_COUNTS = (
    "schedulers",
    *(
        f"stats.{k}"
        for k in (
            "made",
            "delivered",
            "dropped",
            "queued",
            "in_transit",
            "suppressed",
            "fake_schedule_pairs",
            "tracer_checks_reset",
            "messages_sent",
            "unsendable",
            "processes",
            "bad_frames",
            "auth_denied",
            "handshake_failed",
            "queue_peak",
        )
    ),
    "stats.made_by_type.*",
    "stats.delivered_by_type.*",
    "stats.dropped_by_reason.*.*",
    "stats.suppressed_by_reason.*.*",
    "latency_ns.count",
    *(
        f"per_scheduler[].{k}"
        for k in (
            "made",
            "messages_sent",
            "processes_exited",
            "processes",
            "suppressed",
            "fake_schedule_pairs",
            "sys_arrived_dead",
        )
    ),
    "tracers.*.received",
    "timeseries.made[]",
    "timeseries.delivered[]",
    "timeseries.dropped[]",
    "timeseries.queued[]",
    "timeseries.queued_max[]",
    "timeseries.dropped_by_reason.*[]",
    "timeseries.queue_peak",
    "timeseries.merges",
    "timeseries.late",
    "timeseries.schedulers[].made[]",
    "timeseries.schedulers[].messages[]",
    "timeseries.schedulers[].merges",
    "timeseries.schedulers[].late",
    "duration.operations?",
    "latency_histogram.count",
    "latency_histogram.per_decade",
    "latency_histogram.counts[]",
    "scheduler_timeline.messages",
    "scheduler_timeline.schedulers[].transitions",
)
_STRESS_COUNTS = (
    "replay.runs",
    "replay.divergence_count",
    "replay.race_window",
    "replay.inferred",
    "random_faults[].times",
    "random_faults[].count",
)
_COMPARE_COUNTS = (
    "first",
    "workload.operations",
    "messages.tracers[].only_count.*",
    "causes.total",
    "causes.not_kept",
    "causes.reordered",
    "causes.classes[].count",
    "causes.tracers[].nonsmp",
    "causes.tracers[].smp",
    "causes.tracers[].differ",
)
_EXPLORE_COUNTS = (
    "schedulers",
    "queue[].index",
    "schedules.possible",
    "schedules.classes",
    "schedules.run",
    "schedules.outcomes",
    "outcomes[].index",
    "outcomes[].positions[]",
    "nonsmp.same_as?",
    "nonsmp.outcomes",
)
_EXPLORE_SIM_COUNTS = (
    "schedulers",
    "bounds.*",
    "jobs?",
    "result.schedulers",
    "result.executions",
    "result.blocked",
    "result.cut_events",
    "result.events",
    "result.tasks",
    "result.misses",
    "result.outcomes[].count",
    "result.outcomes[].index",
    "replay.index",
    "replay.given_steps",
    "replay.completed_steps",
    "expect[].outcomes",
)
# the rows of a compare that are counts (the others: made/s, seconds, ns)
_COUNT_ROW = re.compile(
    r"(made|delivered|dropped|queued|suppressed|fake_schedule_pairs|tracer_checks_reset"
    r"|messages_sent)( .*)?",
    re.S,
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_~-]{0,39}")


def _steps(pattern) -> tuple[list[str], bool]:
    """A count's pattern as steps (a key, "*" or "[]") and whether null is
    allowed; a tuple is the steps already (a key of any text: a mode's name)."""
    if isinstance(pattern, tuple):
        return list(pattern), False
    nullable = pattern.endswith("?")
    steps: list[str] = []
    for part in pattern.rstrip("?").split("."):
        key = part.replace("[]", "")
        if key:
            steps.append(key)
        steps += ["[]"] * part.count("[]")
    return steps, nullable


def _key_text(key: str) -> str:
    return f".{key}" if _NAME.fullmatch(key) else "[" + _clip(json.dumps(key)) + "]"


def _clip(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _value_text(v) -> str:
    """A field's value as the file has it (JSON, clipped)."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    return _clip(json.dumps(v))


def _bad_counts(doc: dict, patterns, prefix: str = ""):
    """``(path, value)`` of each field matching ``patterns`` that is not a
    count, in the patterns' order; iterative, each field looked at once."""
    for pattern in patterns:
        steps, nullable = _steps(pattern)
        level = [(doc, prefix)]
        for step in steps:
            nxt = []
            for node, at in level:
                if step == "[]":
                    if isinstance(node, list):
                        nxt += [(v, f"{at}[{i}]") for i, v in enumerate(node)]
                elif isinstance(node, dict):
                    if step == "*":
                        nxt += [(v, at + _key_text(k)) for k, v in node.items()]
                    elif step in node:
                        nxt.append((node[step], at + _key_text(step)))
            level = nxt
        for v, at in level:
            if v is None and nullable:
                continue
            if type(v) is not int or v < 0:  # (bool is a subclass of int: refused)
                yield at.lstrip("."), v


def check_counts(path: str, doc: dict) -> None:
    """Refuse (``ResultFileError``, one line naming the file and the field's
    path) a saved result whose counts are not all integers of 0 or more:
    NaN, Infinity, a negative number, a fraction, a string, true or false."""
    if "kind" in doc and doc["kind"] not in KINDS:
        # (one without a kind is an older file, told by its keys)
        raise ResultFileError(
            f"{path}: kind {_value_text(doc['kind'])} is no saved result's ({', '.join(KINDS)})"
        )
    kind = result_kind(doc)
    bad = []
    if kind in ("run", "stress"):
        bad = _bad_counts(doc, _RUN_COUNTS + (_STRESS_COUNTS if kind == "stress" else ()))
    elif kind == "compare":
        modes = doc.get("modes")
        modes = modes if isinstance(modes, list) and all(isinstance(m, str) for m in modes) else []
        runs = doc.get("runs")
        rows = doc.get("rows")
        counts = _COMPARE_COUNTS + tuple(("messages", "tracers", "[]", m) for m in modes)
        parts = [_bad_counts(doc, counts)]
        if isinstance(runs, dict):
            parts += [
                _bad_counts(r, _RUN_COUNTS, f"runs{_key_text(m)}")
                for m, r in runs.items()
                if isinstance(r, dict)
            ]
        if isinstance(rows, list):
            parts.append(_bad_rows(rows, modes, runs if isinstance(runs, dict) else {}))
        bad = itertools.chain(*parts)
    elif kind == "explore":
        bad = _bad_counts(doc, _EXPLORE_COUNTS)
    elif kind == "explore-sim":
        bad = _bad_counts(doc, _EXPLORE_SIM_COUNTS)
    for at, v in bad:
        raise ResultFileError(
            f"{path}: {at} is {_value_text(v)}: not a count (an integer, 0 or more)"
        )


def _bad_rows(rows: list, modes: list, runs: dict):
    """The count rows of a compare (made, delivered, ...) whose column of a
    mode holds another value; a mode whose run is not in ``runs`` (a compare
    interrupted before it started that run) has null there."""
    for i, r in enumerate(rows):
        if not (isinstance(r, dict) and isinstance(r.get("what"), str)):
            continue
        if not _COUNT_ROW.fullmatch(r["what"]):
            continue
        for m in modes:
            v = r.get(m)
            if v is None and m not in runs:
                continue
            if m in r and (type(v) is not int or v < 0):
                yield f"rows[{i}]{_key_text(m)}", v
