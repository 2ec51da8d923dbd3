"""Shrinking a failing schedule: fewer choices off the default order that
still break the same invariant.

Runs in the explorer's process.  A schedule that ``replay`` takes is a
prefix of steps, completed by the *default order* (the first enabled
thread, ``World.enabled()[0]``, at each step).  Along an execution, a
*choice* is a step where it took another thread than the default; every
other step is what the default would do anyway.

``shrink`` treats the failing schedule as a list of directives, run
leniently (at each step the next directive whose thread is enabled there
is taken, those before it dropped; once they run out, the default order),
and takes directives out as delta debugging does (halves, then quarters,
down to single ones), keeping a cut when the execution it gives still
breaks an invariant or check of the same kind with no more choices than
the best so far, until no single directive can go (1-minimal) or
``max_runs`` executions (or the time given) are spent.  The result is the shrunk execution's
schedule up to its last choice: ``smp-emu explore ... --schedule`` with it
runs that execution.

Two violations are of one kind when they name the same check
(``check NAME``) or, for the built-in invariants, read the same with every
word that holds a digit (an id, a count, a pid) set aside.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from .dpor import MAX_EVENTS
from .outcome import outcome_of
from .world import World

__all__ = ["MAX_SHRINK_RUNS", "Shrunk", "shrink", "violation_kind"]

#: executions one shrink may run at most
MAX_SHRINK_RUNS = 400

_DIGITS = re.compile(r"\S*\d\S*")


def violation_kind(text: str) -> str:
    """What a violation is about, without its particulars (see the module)."""
    if text.startswith("check "):
        return text.split(" failed", 1)[0]
    return _DIGITS.sub("#", text.split(":", 1)[0])


@dataclass
class Shrunk:
    schedule: str  # the steps up to the last choice (replay completes it)
    choices: int  # choices off the default order in it
    original: int  # choices off the default order in the schedule shrunk
    runs: int  # executions the shrinking ran
    violations: tuple  # what the shrunk execution breaks

    def as_dict(self) -> dict:
        return {
            "schedule": self.schedule,
            "choices": self.choices,
            "from_choices": self.original,
            "runs": self.runs,
            "violations": list(self.violations),
        }


def shrink(
    new_world: Callable[[], World],
    schedule: str,
    checks=(),
    blocked_ok: bool = False,
    max_runs: int = MAX_SHRINK_RUNS,
    deadline: float | None = None,
) -> Shrunk | None:
    """Shrink ``schedule`` (see the module's text); None when its execution
    breaks nothing.  Past ``deadline`` (``time.monotonic()``) no more cut is
    tried: what is shrunk so far is the result."""
    cur = schedule.split()
    trace, choices, last, broken = _lenient(new_world, cur, checks, blocked_ok)
    if not broken:
        return None
    kinds = {violation_kind(v) for v in broken}
    original = choices
    runs, parts = 0, 2

    def spent() -> bool:
        return runs >= max_runs or (deadline is not None and time.monotonic() > deadline)

    while len(cur) > 0 and not spent():
        size = -(-len(cur) // parts)  # (ceiling)
        for start in range(0, len(cur), size):
            cand = cur[:start] + cur[start + size :]
            runs += 1
            t, c, cl, v = _lenient(new_world, cand, checks, blocked_ok)
            if c <= choices and kinds & {violation_kind(x) for x in v}:
                cur, trace, choices, last, broken = cand, t, c, cl, v
                parts = max(parts - 1, 2)
                break
            if spent():
                break
        else:
            if parts >= len(cur):
                break  # no single directive can go
            parts = min(len(cur), parts * 2)
    return Shrunk(" ".join(trace[: last + 1]), choices, original, runs, tuple(broken))


def _lenient(new_world, directives: list[str], checks, blocked_ok):
    """Run ``directives`` leniently (see the module's text): the trace, its
    choices off the default order, the index of the last one (-1: none),
    and what it breaks."""
    w = new_world()
    try:
        trace: list[str] = []
        choices = k = 0
        last = -1
        while (en := w.enabled()) and len(trace) < MAX_EVENTS:
            while k < len(directives) and directives[k] not in en:
                k += 1
            if k < len(directives):
                t = directives[k]
                k += 1
            else:
                t = en[0]
            if t != en[0]:
                choices += 1
                last = len(trace)
            w.step(t)
            trace.append(t)
        return trace, choices, last, outcome_of(w, checks, blocked_ok).violations
    finally:
        w.dispose()
