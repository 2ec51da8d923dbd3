"""Schedules and their reduction: the algebra the explorer searches.

A *schedule* gives, for each change in the scenario's order, after how many
queued messages it is made (``replace@1 kill@3``); ``parse_schedule`` and
``format_schedule`` read and write that text.

Partial-order reduction: a change and a message commute when the message's
deliver/drop decision reads nothing the change writes and vice versa (a
TRACE message reads its tracer's liveness, not the seq tracer; a SYSMON
message reads and, on failure, clears the monitor, never the profiler):
``change_footprint``, ``message_footprint`` and ``dependent`` say which
pairs do not.  Two schedules that order every dependent (change, message)
pair alike are equivalent; ``canonicalize`` gives a class's earliest
schedule, ``canonical_classes`` lists the classes and ``count_classes``
counts them exactly.  ``_why`` names, for one schedule, the changes that
landed between the making and the dispatch of a message they do not
commute with: what nonsmp, which delivers every message when it is made,
cannot do.
"""

from __future__ import annotations

import re
from functools import lru_cache

from smp.core.errors import BadArg

__all__ = [
    "format_schedule",
    "parse_schedule",
    "canonicalize",
    "canonical_classes",
    "count_classes",
    "change_footprint",
    "message_footprint",
    "dependent",
]


def format_schedule(changes: list, positions) -> str:
    """``replace@1 kill@3``: each change after that many queued messages."""
    return " ".join(f"{c['name']}@{p}" for c, p in zip(changes, positions, strict=False))


def _short(text: str, most: int = 60) -> str:
    """``text`` as an error quotes it: at most ``most`` characters."""
    return text if len(text) <= most else text[: most - 3] + "..."


def parse_schedule(text: str, changes: list, n: int | None = None) -> tuple:
    """The positions of ``change@k`` text (space or comma separated, every
    change once, positions not decreasing in the changes' order)."""
    parts = [p for p in re.split(r"[\s,]+", text.strip()) if p]
    by = {}
    text = _short(text)  # (as the messages below quote it)
    for part in parts:
        m = re.match(r"^([A-Za-z0-9_-]+)@(\d{1,12})$", part)
        if not m:
            raise BadArg(
                f"schedule {text!r}: {_short(part)!r} is not change@k (k: at most 12 digits)"
            )
        if m.group(1) in by:
            raise BadArg(f"schedule {text!r}: {m.group(1)} is given twice")
        by[m.group(1)] = int(m.group(2))
    names = [c["name"] for c in changes]
    unknown = sorted(set(by) - set(names))
    if unknown or set(by) != set(names):
        raise BadArg(
            f"schedule {text!r}: give every change once: {', '.join(names)}"
            + (f" (unknown: {', '.join(unknown)})" if unknown else "")
        )
    pos = tuple(by[x] for x in names)
    if any(a > b for a, b in zip(pos, pos[1:], strict=False)):
        raise BadArg(
            f"schedule {text!r}: the changes are made in the order "
            f"{', '.join(names)}, so their positions cannot decrease"
        )
    if n is not None and pos and pos[-1] > n:
        raise BadArg(f"schedule {text!r}: only {n} messages are queued")
    return pos


def canonicalize(positions, deps: list) -> tuple:
    """The earliest schedule equivalent to ``positions``: each change moved
    back to just after the last message it depends on (or the previous
    change).  ``deps[j]`` are the (1-based) queue positions of the messages
    change ``j`` does not commute with."""
    out, prev = [], 0
    for p, d in zip(positions, deps, strict=False):
        last = max((i for i in d if i <= p), default=0)
        prev = max(prev, last)
        out.append(prev)
    return tuple(out)


def canonical_classes(deps: list):
    """Every equivalence class, by its earliest schedule, in a fixed order
    (all changes first, then later and later)."""
    k = len(deps)

    def rec(j, prev):
        if j == k:
            yield ()
            return
        for q in [prev] + [i for i in sorted(deps[j]) if i > prev]:
            for rest in rec(j + 1, q):
                yield (q,) + rest

    yield from rec(0, 0)


def count_classes(deps: list) -> int:
    """How many classes there are (exact, without listing them)."""
    k = len(deps)
    ds = [sorted(d) for d in deps]

    @lru_cache(maxsize=None)
    def c(j, prev):
        if j == k:
            return 1
        return c(j + 1, prev) + sum(c(j + 1, i) for i in ds[j] if i > prev)

    return c(0, 0)


# ---------------------------------------------------------------- footprints
def _roles(sc: dict) -> dict:
    """Who can hold each role at some point: the conservative candidates a
    message's decision may read the liveness of."""
    seq, mon, prof = set(), set(), set()
    st = sc["setup"]
    if st["seq_tracer"]:
        seq.add(st["seq_tracer"])
    if st["system_monitor"] and st["system_monitor"]["monitor"] != "undefined":
        mon.add(st["system_monitor"]["monitor"])
    if st["system_profile"] and st["system_profile"]["profiler"] != "undefined":
        prof.add(st["system_profile"]["profiler"])
    for c in sc["changes"]:
        if c["action"] == "seq_tracer" and c["tracer"] is not False:
            seq.add(c["tracer"])
        elif c["action"] == "system_monitor" and c["monitor"] != "undefined":
            mon.add(c["monitor"])
        elif c["action"] == "system_profile" and c["profiler"] != "undefined":
            prof.add(c["profiler"])
    logger = {p["name"] for p in sc["processes"] if p["register"] == "error_logger"}
    tracers = {t["tracer"] for t in st["trace"]} | {q["tracer"] for q in sc["queue"] if q["tracer"]}
    tracers |= {c["tracer"] for c in sc["changes"] if c["action"] == "trace" and c["tracer"]}
    return {"seq": seq, "mon": mon, "prof": prof, "reg": logger, "tracers": tracers}


def change_footprint(ch: dict, roles: dict) -> tuple[set, set]:
    """(reads, writes) of a change: the parts of the state it reads and
    changes.  ``("proc", X)`` is X's liveness and tracer mark."""
    a = ch["action"]
    if a == "seq_tracer":
        return ({("proc", ch["tracer"])} if ch["tracer"] else set()), {"seq"}
    if a == "system_monitor":
        return ({("proc", ch["monitor"])} if ch["monitor"] != "undefined" else set()), {"mon"}
    if a == "system_profile":
        return ({("proc", ch["profiler"])} if ch["profiler"] != "undefined" else set()), {"prof"}
    if a == "trace":
        reads = {("proc", ch["tracee"])} | {("proc", t) for t in roles["tracers"]}
        writes = {("flags", ch["tracee"])}
        if ch["tracer"] and ch["how"]:
            reads.add(("proc", ch["tracer"]))
            writes.add(("proc", ch["tracer"]))
        return reads, writes
    x = ch["target"]
    writes = {("proc", x), ("flags", x)}
    for role in ("seq", "mon", "prof", "reg"):
        if x in roles[role]:
            writes.add(role)
    return set(), writes


def message_footprint(mtype: str, to_name, roles: dict) -> tuple[set, set]:
    """(reads, writes) of the dispatcher's decision on one message
    (``sys_msg_dispatcher_func`` and ``sys_msg_disp_failure``)."""
    if mtype in ("TRACE", "PROC_MSG"):
        return {("proc", to_name)}, set()
    if mtype == "ERRLGR":
        return {"reg"} | {("proc", x) for x in roles["reg"]}, set()
    role = {"SEQTRACE": "seq", "SYSMON": "mon", "SYSPROF": "prof"}[mtype]
    return {role} | {("proc", x) for x in roles[role]}, {role}


def dependent(cfp: tuple, mfp: tuple) -> bool:
    (cr, cw), (mr, mw) = cfp, mfp
    return bool(cw & (mr | mw) or mw & (cr | cw))


def _why(sc: dict, deps: list, positions, types) -> list[dict]:
    """Why nonsmp cannot produce a schedule's outcome: each change that
    landed between the making and the dispatch of messages it does not
    commute with (in nonsmp every message is delivered when it is made)."""
    out = []
    for j, (ch, p) in enumerate(zip(sc["changes"], positions, strict=False)):
        late = [i for i in sorted(deps[j]) if i > p]
        if late:
            ts = sorted({types[i - 1] for i in late})
            out.append(
                {
                    "change": ch["name"],
                    "messages": [f"m{i}" for i in late],
                    "types": ts,
                    "text": f"{', '.join(f'm{i}' for i in late)} ({', '.join(ts)}) made "
                    f"before {ch['name']} and dispatched after it",
                }
            )
    if not out:
        out.append(
            {
                "change": None,
                "messages": [],
                "types": [],
                "text": "every change came after every queued message, as in nonsmp, yet "
                "the outcome differs: see the state and what each process received",
            }
        )
    return out
