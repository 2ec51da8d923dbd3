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

from .explorer import ExploreResult

__all__ = ["format_report", "two_digits"]


def two_digits(x: float) -> str:
    """``x`` rounded to two significant digits (``1234.5`` -> ``1200``)."""
    if x <= 0:
        return "0"
    return f"{float(f'{x:.2g}'):.0f}" if x >= 10 else f"{x:.2g}"


def _summary(r: ExploreResult) -> list[str]:
    lines = [
        f"Explored {r.executions} execution(s) on {r.schedulers} scheduler(s) "
        f"in {r.elapsed:.2f} s ({r.events} events): {len(r.outcomes)} distinct outcome(s), "
        f"{len(r.violations)} with a broken invariant.",
    ]
    if r.blocked:
        lines.append(f"{r.blocked} execution(s) were sleep-set blocked (not counted).")
    if r.exhausted:
        lines.append("The search is complete: every equivalence class was explored.")
    else:
        lines.append(
            f"The search was cut by {', '.join(r.cut_by) or 'a bound'}; about "
            f"{two_digits(r.estimate)} execution(s) in all (estimate). Tip: raise "
            "max_executions or time_budget, or use fewer processes or schedulers."
        )
    if r.cut_events:
        lines.append(f"{r.cut_events} execution(s) hit max_events (a process that never stops?).")
    return lines


def format_report(r: ExploreResult, events: bool = True) -> str:
    lines = _summary(r)
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
            lines.append("  Race pairs that made the explorer try it:")
            lines += [f"    {x}" for x in g.first.races]
        lines.append(f"  Schedule: {g.first.schedule}")
    if r.nonsmp is not None:
        lines.append("")
        lines.append("nonsmp (one order, messages decided when made):")
        for role, msgs in r.nonsmp.received:
            lines.append(f"  {role} received: {', '.join(msgs) if msgs else 'nothing'}")
        lines += [f"  {k}: {v}" for k, v in r.nonsmp.fates]
        for v in r.nonsmp.violations:
            lines.append(f"  ! {v}")
    return "\n".join(lines) + "\n"
