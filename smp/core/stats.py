"""Counters of what was made, delivered and dropped, read through snapshots.

``made`` counts messages built and handed on (queued in smp mode, delivered
or written at once in nonsmp); each ends ``delivered`` or ``dropped`` with a
named reason, or is still queued.  ``suppressed`` counts messages the nonsmp
build never makes because the tracer was already found dead (in smp these
are made and then dropped by the dispatcher: one of the differences the two
modes show).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from smp.core.messages import TYPE_NAMES

__all__ = ["Stats", "StatsDict", "totals", "by_type", "by_reason"]

#: A statistics report: counts, and counts by type or reason, by name (values
#: of several shapes, read by key, as JSON would hold them)
StatsDict = dict[str, Any]


def by_type(c: Counter[int]) -> dict[str, int]:
    """{type name: count} from a Counter keyed by message type."""
    return {TYPE_NAMES[t]: n for t, n in sorted(c.items())}


def by_reason(c: Counter[tuple[int, str]]) -> dict[str, dict[str, int]]:
    """{reason: {type name: count}} from a Counter keyed by (type, reason)."""
    out: dict[str, dict[str, int]] = {}
    for (t, r), n in sorted(c.items()):
        out.setdefault(r, {})[TYPE_NAMES[t]] = n
    return out


def totals(
    made: Counter[int], delivered: Counter[int], dropped: Counter[tuple[int, str]], queued: int
) -> StatsDict:
    """The counts every ``statistics()`` reports, with made = delivered +
    dropped + queued when nothing is lost."""
    return {
        "made": sum(made.values()),
        "made_by_type": by_type(made),
        "delivered": sum(delivered.values()),
        "delivered_by_type": by_type(delivered),
        "dropped": sum(dropped.values()),
        "dropped_by_reason": by_reason(dropped),
        "queued": queued,
    }


class Stats:
    __slots__ = (
        "_made",
        "_delivered",
        "_dropped",
        "_suppressed",
        "fake_schedule_pairs",
        "messages_sent",
        "messages_to_dead",
        "processes_exited",
        "tracer_checks_reset",
        "sys_arrived_dead",
    )

    def __init__(self) -> None:
        self._made: Counter[int] = Counter()
        self._delivered: Counter[int] = Counter()
        self._dropped: Counter[tuple[int, str]] = Counter()
        self._suppressed: Counter[tuple[int, str]] = Counter()
        self.fake_schedule_pairs = 0
        self.messages_sent = 0
        self.messages_to_dead = 0
        self.processes_exited = 0
        self.tracer_checks_reset = 0
        self.sys_arrived_dead = 0

    def made(self, t: int, n: int = 1) -> None:
        self._made[t] += n

    def delivered(self, t: int, n: int = 1) -> None:
        self._delivered[t] += n

    def dropped(self, t: int, reason: str, n: int = 1) -> None:
        self._dropped[(t, reason)] += n

    def suppressed(self, t: int, reason: str) -> None:
        self._suppressed[(t, reason)] += 1

    def as_dict(self) -> StatsDict:
        return {
            **totals(self._made, self._delivered, self._dropped, 0),
            "suppressed": sum(self._suppressed.values()),
            "suppressed_by_reason": by_reason(self._suppressed),
            "fake_schedule_pairs": self.fake_schedule_pairs,
            "messages_sent": self.messages_sent,
            "messages_to_dead": self.messages_to_dead,
            "processes_exited": self.processes_exited,
            "tracer_checks_reset": self.tracer_checks_reset,
            "sys_arrived_dead": self.sys_arrived_dead,
        }
