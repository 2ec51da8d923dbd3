"""What a journal replay reports, and how it shows what it found.

``ReplayReport`` (the result of ``smp.app.replay.replay``), the totals in the
shape of the dispatcher's ``statistics()``, a ``q`` record's messages
(``_terms``) and the bounded text of a message, a decision or a tracer state
that the report and the listing (``smp.app.replay_listing``) show.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields

from smp.app.journal_records import ACTION_NAMES
from smp.core.dispatch import DROP, Decision
from smp.core.pretty import clip_term, format_term
from smp.core.state import NIL, Snapshot
from smp.core.stats import totals
from smp.ports.dbgfmt import format_dbg, term_to_json
from smp.wire.codec import loads_terms
from smp.wire.frames import QueueEntry, run_terms

__all__ = ["ReplayReport", "SHOW_CHARS", "SHOW_MESSAGES"]


_STATE_FIELDS = [f.name for f in fields(Snapshot) if f.name != "version"]


def _fields(obj) -> dict:
    return {k: getattr(obj, k) for k in _STATE_FIELDS}


@dataclass
class ReplayReport:
    """What a replay found.  ``ok`` when no decision diverged and no invariant broke."""

    path: str
    schedulers: int
    records: dict
    runs: int = 0
    totals: dict = field(default_factory=dict)
    recorded_totals: dict = field(default_factory=dict)
    divergences: list = field(default_factory=list)
    divergence_count: int = 0
    violations: list = field(default_factory=list)
    violation_count: int = 0
    race_window: int = 0
    inferred: int = 0
    unjournaled: int = 0
    queued_at_end: int = 0
    #: always None: a journal that cannot be read to its end is refused
    #: (``BadRecord``); kept for readers of the JSON report
    truncated: str | None = None
    #: the journal ends with its end record (version 3: ``read_records``
    #: refuses one without); False for a version 2 journal, which has none
    whole: bool = False
    #: per decided run: (q_seq, d_seq, recorded (action, receiver, reason), replayed ...)
    index: list = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return not self.divergence_count and not self.violation_count

    def to_json(self) -> dict:
        out = {
            k: getattr(self, k)
            for k in (
                "path",
                "schedulers",
                "records",
                "runs",
                "totals",
                "recorded_totals",
                "divergence_count",
                "violation_count",
                "violations",
                "race_window",
                "inferred",
                "unjournaled",
                "queued_at_end",
                "truncated",
                "whole",
            )
        }
        out["ok"] = self.ok
        out["divergences"] = [
            {
                **d,
                "receiver_recorded": term_to_json(d["receiver_recorded"]),
                "receiver_replayed": term_to_json(d["receiver_replayed"]),
            }
            for d in self.divergences
        ]
        return out


def _totals(made: Counter, delivered: Counter, dropped: Counter, queued: int) -> dict:
    """The shape of the dispatcher's ``statistics()``."""
    return totals(made, delivered, dropped, queued)


def _entry(q: tuple) -> QueueEntry:
    """The queue entry a journal ``q`` record holds (``QueueEntry.journal``)."""
    return QueueEntry(*q[2:10], 0)


class _Part:
    """In place of a ``q`` record's blob, part of a run step mode split
    (``_Replayer._split_head``): the run's decoded bodies, decoded once, and
    where the part starts, so splitting a run message by message costs a
    constant each time."""

    __slots__ = ("bodies", "start")

    def __init__(self, bodies: list, start: int):
        self.bodies, self.start = bodies, start


def _terms(q: tuple, limit: int | None = None) -> list:
    """The completed messages of a ``q`` record (first ``limit`` of them)."""
    e = _entry(q)
    if type(e.blob) is _Part:
        k = min(limit, e.n) if limit else e.n
        bodies = e.blob.bodies[e.blob.start : e.blob.start + k]
        return run_terms(bodies, e.ts_kind, e.base, e.active)
    try:
        bodies = loads_terms(e.blob)
    except Exception:
        return ["(undecodable bodies)"]
    return run_terms(bodies[:limit] if limit else bodies, e.ts_kind, e.base, e.active)


#: a message is shown cut short (``clip_term``) to about this many characters
SHOW_CHARS = 400
#: a violation's text is cut to this many characters
_TEXT_CHARS = 2000
#: a listing shows this many messages of each run
SHOW_MESSAGES = 10


def _show(term) -> str:
    """A message as dbg prints it (else as a term), in a bounded number of
    characters whatever the size of the term."""
    if type(term) is str:
        return term
    t = clip_term(term, SHOW_CHARS)
    text = format_dbg(t).rstrip("\n") or format_term(t)
    return text if len(text) <= 2 * SHOW_CHARS else text[: 2 * SHOW_CHARS] + " ..."


def _cut(text: str, most: int = _TEXT_CHARS) -> str:
    return text if len(text) <= most else text[:most] + " ..."


def _same(a: Decision, b: Decision) -> bool:
    return a.action == b.action and a.receiver == b.receiver and a.reason == b.reason


def _triple(d: Decision) -> tuple:
    return (d.action, d.receiver, d.reason)


def _word(d: Decision) -> str:
    if d.action == DROP:
        return f"drop {d.reason} ({_nil(d.receiver)})"
    return f"{ACTION_NAMES[d.action]} to {format_term(d.receiver)}"


def _nil(v) -> str:
    return "nil" if v is NIL else format_term(v)


def _brief(values: dict) -> str:
    show = _nil
    return (
        f"default_tracer={show(values['default_tracer'])} "
        f"seq_tracer={show(values['system_seq_tracer'])} "
        f"monitor={show(values['system_monitor'])} profile={show(values['system_profile'])}"
    )
