"""The text report of an exploration, for people.

Runs in the caller's process, over an ``ExploreResult`` (plain data).  It
follows Concuerror's shape: a summary with the counts and what cut the
search (with the estimate of the executions in all, two significant
digits), then each distinct outcome with its count, what each collector
received, the fate of every system message, the numbered events of the
first execution that reached it (processes by role and pid), the race pairs
that made the explorer try it, and the schedule string that replays it
(``smp.sim.replay(setup, schedule)``); nonsmp's single outcome last.
"""

from __future__ import annotations

from .explorer import Execution, ExploreResult
from .outcome import Outcome

__all__ = ["format_report", "format_execution", "nonsmp_verdict", "race_lines", "two_digits"]


def two_digits(x: float) -> str:
    """``x`` rounded to two significant digits, with thousands separators as
    the progress line and the page write them (``1234.5`` -> ``1,200``)."""
    if x <= 0:
        return "0"
    return f"{float(f'{x:.2g}'):,.0f}" if x >= 10 else f"{x:.2g}"


def nonsmp_verdict(oc: Outcome, nonsmp: Outcome | None) -> str | None:
    """Whether nonsmp's one order gives this outcome's collectors the same."""
    if nonsmp is None:
        return None
    if oc.received == nonsmp.received:
        return "the same: nonsmp's one order gives every collector what this outcome gives"
    differ = [
        role
        for role in sorted({r for r, _ in oc.received} | {r for r, _ in nonsmp.received})
        if dict(oc.received).get(role) != dict(nonsmp.received).get(role)
    ]
    return "smp only: in nonsmp " + ", ".join(differ) + " receive(s) otherwise"


def _summary(r: ExploreResult, fixed: bool = False) -> list[str]:
    what = {
        "dpor": "Explored",
        "random": "Ran",
        "pct": "Ran",
    }.get(r.method, "Ran")
    kind = {"random": " random", "pct": " PCT"}.get(r.method, "")
    if r.tasks <= 1:
        split = ""
    elif r.dpor == "optimal":
        split = f", {r.tasks} branches explored by workers"
    else:
        split = f", {r.tasks} subtrees"
    lines = [
        f"{what} {r.executions}{kind} execution(s) on {r.schedulers} scheduler(s) "
        f"in {r.elapsed:.2f} s ({r.events} events{split}): {len(r.outcomes)} distinct "
        f"outcome(s), {len(r.violations)} with a broken invariant.",
    ]
    lines += list(r.notes)
    if r.first_violation is not None:
        at = "" if r.first_violation_s is None else f", {r.first_violation_s:.2f} s in"
        lines.append(f"The first broken invariant came at execution {r.first_violation}{at}.")
    if r.misses:
        lines.append(
            f"Warning: {r.misses} step(s) the wakeup trees planned could not be taken when "
            "their turn came (the dependency relation missed how one step enables another): "
            "the search went on without them; --dpor source does not rely on the plans."
        )
    if r.blocked:
        if r.dpor == "source":
            why = (
                " (Source-DPOR plans only a race's first step: a sleep set stops an execution "
                "that would repeat a class already explored)"
            )
        elif r.tasks > 1:
            why = (
                " (a split search tries every thread at its first steps, outside the "
                "reduction, which can leave executions blocked)"
            )
        else:
            why = ""
        lines.append(f"{r.blocked} execution(s) were sleep-set blocked (not counted){why}.")
    if "interrupted" in r.cut_by:
        lines.append(
            f"Interrupted (Ctrl-C): the outcomes of the {r.executions} execution(s) run "
            "before it, not a complete search."
        )
    if r.method != "dpor":
        if "time" in r.cut_by:
            lines.append("The time budget cut the runs.")
        lines.append("A sample: it does not say how many orders there are, nor that none is left.")
    elif "interrupted" in r.cut_by:
        lines.append(f"About {two_digits(r.estimate)} execution(s) in all (estimate).")
    elif r.exhausted and "preemptions" in r.cut_by:
        lines.append(
            "The search is complete within the preemption bound: every equivalence class with "
            "at most that many preemptions the explorer had to add was explored; the bound cut "
            "the others."
        )
    elif r.exhausted:
        lines.append("The search is complete: every equivalence class was explored.")
    else:
        raise_ = [_BOUND_OF.get(c, c) for c in r.cut_by] or ["the bounds"]
        lines.append(
            f"The search was cut by {', '.join(r.cut_by) or 'a bound'}; about "
            f"{two_digits(r.estimate)} execution(s) in all (estimate). Tip: raise "
            f"{' and '.join(raise_)}"
            + ("." if fixed else ", or use fewer processes or schedulers.")
        )
    if r.cut_events:
        lines.append(f"{r.cut_events} execution(s) hit max_events (a process that never stops?).")
    return lines


def format_report(r: ExploreResult, events: bool = True, replay=None, fixed: bool = False) -> str:
    """The report; ``replay(schedule)`` gives the command that replays a
    schedule (printed under it); ``fixed``: a fixed workload (a race of the
    catalogue), whose processes and schedulers cannot be made fewer."""
    lines = _summary(r, fixed)
    shrunk_at: dict[str, int] = {}  # a shrunk schedule -> the outcome it was first printed under
    for n, g in enumerate(r.outcomes, 1):
        oc = g.outcome
        lines.append("")
        lines.append(f"Outcome {n}: {g.count} execution(s)")
        for v in oc.violations:
            lines.append(f"  ! {v}")
        for role, msgs in oc.received:
            lines.append(f"  {role} received: {', '.join(msgs) if msgs else 'nothing'}")
        for msg, fate in oc.fates:
            lines.append(f"  {msg}: {fate}")
        if events:
            lines.append("  Events of its first execution:")
            lines += [f"  {e}" for e in g.first.events]
        if g.first.races:
            lines.append(
                "  Race pairs that made the explorer try it (steps of the execution each was "
                "found in):"
                if r.method == "dpor"
                else "  Race pairs in it (the orders this sample fixed):"
            )
            lines += race_lines(g.first.races)
        lines.append(f"  Schedule: {g.first.schedule}")
        if replay is not None:
            lines.append(f"  Replay: {replay(g.first.schedule)}")
        if g.shrunk is not None:
            lines.append(_shrunk_line(g.shrunk, n, shrunk_at, replay))
        elif g.not_shrunk is not None:
            lines.append(f"  Not shrunk: {g.not_shrunk}.")
        verdict = nonsmp_verdict(oc, r.nonsmp)
        if verdict:
            lines.append(f"  nonsmp: {verdict}")
    if r.nonsmp is not None:
        lines.append("")
        lines.append("nonsmp (one order, messages decided when made):")
        for role, msgs in r.nonsmp.received:
            lines.append(f"  {role} received: {', '.join(msgs) if msgs else 'nothing'}")
        lines += [f"  {k}: {v}" for k, v in r.nonsmp.fates]
        for v in r.nonsmp.violations:
            lines.append(f"  ! {v}")
    return "\n".join(lines) + "\n"


#: the bound behind each reason a search was cut (``ExploreResult.cut_by``)
_BOUND_OF = {
    "executions": "the execution bound (--max-executions, 0 for none; from Python, max_executions=None)",
    "time": "the time budget (--time-budget; from Python, time_budget=)",
    "preemptions": "the preemption bound (--preemptions; from Python, preemptions=)",
}


def race_lines(races) -> list[str]:
    """The race pairs as text lines, each pair's reasons under it; a reason
    given in full above is named by its rule alone (``node 1 (as above)``):
    one scheduler's rule can order most pairs of a long execution."""
    out, said = [], set()
    for race in races:
        head, *reasons = race.split("\n")
        out.append(f"    {head}")
        for r in reasons:
            r = r.strip()
            rule, sep, _ = r.partition(": ")
            out.append(f"      {rule} (as above)" if sep and r in said else f"      {r}")
            said.add(r)
    return out


def _shrunk_line(sh, n: int, shrunk_at: dict, replay) -> str:
    """The line of an outcome's shrunk schedule (``smp.sim.shrink``)."""
    first = shrunk_at.setdefault(sh.schedule, n)
    if first != n:
        return f"  Shrunk: to outcome {first}'s shrunk schedule."
    run = replay(sh.schedule) if replay is not None else repr(sh.schedule)
    return f"  {shrunk_words(sh.choices, sh.original, sh.runs)}: {run}"


def shrunk_words(choices: int, original: int, runs: int) -> str:
    """What a shrink found, in words (the command that replays it follows)."""
    if original == 0:
        return "Shrunk: nothing to take out, its schedule is the default order"
    if choices == 0:
        return f"Shrunk: the default order alone breaks it too (from {original} choice(s))"
    return (
        f"Shrunk to {choices} choice(s) off the default order (from {original}; "
        f"{runs} run(s)), then the default order"
    )


def format_execution(ex: Execution, nonsmp: Outcome | None = None, events: bool = True) -> str:
    """One replayed execution: its outcome, events (unless not ``events``),
    races and schedule."""
    oc = ex.outcome
    lines = [f"Replayed {len(ex.events)} event(s)."]
    for v in oc.violations:
        lines.append(f"  ! {v}")
    for role, msgs in oc.received:
        lines.append(f"  {role} received: {', '.join(msgs) if msgs else 'nothing'}")
    for msg, fate in oc.fates:
        lines.append(f"  {msg}: {fate}")
    if events:
        lines.append("  Events:")
        lines += [f"  {e}" for e in ex.events]
    if ex.races:
        lines.append("  Race pairs in this execution (the orders it fixed):")
        lines += race_lines(ex.races)
    lines.append(f"  Schedule: {ex.schedule}")
    verdict = nonsmp_verdict(oc, nonsmp)
    if verdict:
        lines.append(f"  nonsmp: {verdict}")
    return "\n".join(lines) + "\n"
