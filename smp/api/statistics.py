"""The counters: ``statistics()``, and the series each process samples.

smp: the dispatcher's queue counts (made = delivered + dropped + queued)
with what is still on its way from the schedulers; nonsmp: the one
scheduler's.  Both with every scheduler's own counts and the frames each
process refused.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from schedulers.delivery import FATES_MAX
from schedulers.engine import LINEAGE_MAX
from smp.core import messages as M
from smp.core.dispatch import DROP_REASONS
from smp.core.errors import BadArg, ProtocolError, SchedulerLost
from smp.core.terms import Atom, Pid, Port

__all__ = ["Statistics", "StatisticsCalls"]


@dataclasses.dataclass(frozen=True)
class Statistics:
    """What ``Emulator.statistics()`` returns: one snapshot of the counters,
    read as attributes (``st.made``); ``as_dict()`` gives the plain dict
    (for JSON).  ``made == delivered + dropped + queued`` in every snapshot.
    The docs' statistics table says what each field counts."""

    mode: str
    made: int
    made_by_type: dict[str, int]
    delivered: int
    delivered_by_type: dict[str, int]
    dropped: int
    #: ``{reason: {type: n}}``, the reasons of ``smp.core.dispatch.DROP_REASONS``
    dropped_by_reason: dict[str, dict[str, int]]
    queued: int
    #: smp: made by the schedulers, still on the way to the queue
    in_transit: int
    suppressed: int
    suppressed_by_reason: dict[str, dict[str, int]]
    fake_schedule_pairs: int
    tracer_checks_reset: int
    messages_sent: int
    unsendable: int
    processes: int
    #: each scheduler's own counters
    schedulers: list[dict[str, Any]]
    lost_schedulers: dict[int, str]
    bad_frames: int
    #: where frames were refused: ``ingest``, ``control``, ``controller``, ``schedulers``
    bad_frames_at: dict[str, int]
    last_bad_frame: str = ""
    auth_denied: int = 0
    handshake_failed: int = 0
    stderr_lines: list[str] = dataclasses.field(default_factory=list)
    #: smp: the deepest the queue was since the previous call (0 in nonsmp)
    queue_peak: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The snapshot as a plain dict, one key per field."""
        return dataclasses.asdict(self)


#: the seconds a scheduler or the dispatcher has to answer ``statistics()``
#: (past its one second of waiting for the batches on their way): one that
#: does not (stopped, held) is named in an ``Unanswered``, not waited for
STATS_ANSWER_S = 4.0


class StatisticsCalls:
    """The statistics and sampling calls of ``smp.Emulator``."""

    # -- statistics ----------------------------------------------------------
    def statistics(self) -> Statistics:
        """A ``Statistics`` snapshot: made = delivered + dropped (by reason) + queued, per type and in all;
        ``auth_denied`` counts peers refused by CURVE at the dispatcher and here.

        smp: ``made`` counts what entered the dispatcher's queue, ``queued``
        what it has not decided yet (the batch being dispatched included),
        and ``in_transit`` what the schedulers made that is still on its way
        to the queue (push-back from a slow port holds it there).  Returns
        within about a second whatever the dispatcher is doing; raises
        ``Unanswered`` naming the dispatcher or scheduler that did not answer
        at all within ``STATS_ANSWER_S`` (stopped, or held by a process that
        does not yield)."""
        scheds = list(self._all_scheds("stats", timeout=STATS_ANSWER_S).values())
        if self.smp:
            sts = self._sync_dispatcher(limit=1.0, answer=STATS_ANSWER_S)
            d = self._disp_call("stats", timeout=STATS_ANSWER_S)
            ingested = d.pop("ingested", None)
            d["in_transit"] = (
                0
                if ingested is None
                else sum(max(0, st["sys_made"] - ingested[k]) for k, st in sts.items())
            )
        else:
            if not scheds:  # (nonsmp's one scheduler holds every count)
                raise SchedulerLost("scheduler 1 is gone: no statistics to give")
            s = scheds[0]
            d = {
                k: s[k]
                for k in (
                    "made",
                    "made_by_type",
                    "delivered",
                    "delivered_by_type",
                    "dropped",
                    "dropped_by_reason",
                )
            }
            d.update(queued=0, in_transit=0, bad_frames=0, stderr_lines=[])
        suppressed: dict = {}
        for s in scheds:
            for reason, by_type in s["suppressed_by_reason"].items():
                for t, n in by_type.items():
                    suppressed.setdefault(reason, {}).setdefault(t, 0)
                    suppressed[reason][t] += n
        d["suppressed"] = sum(s["suppressed"] for s in scheds)
        d["suppressed_by_reason"] = suppressed
        d["fake_schedule_pairs"] = sum(s["fake_schedule_pairs"] for s in scheds)
        d["tracer_checks_reset"] = sum(s["tracer_checks_reset"] for s in scheds)
        d["messages_sent"] = sum(s["messages_sent"] for s in scheds)
        # what could not travel (a message that is not a term): never queued
        d["unsendable"] = sum(s.get("unsendable", 0) for s in scheds)
        d["processes"] = sum(s["processes"] for s in scheds)
        d["schedulers"] = scheds
        d["mode"] = self.mode
        d["lost_schedulers"] = dict(self.lost_schedulers)
        d["auth_denied"] = d.get("auth_denied", 0) + (self.auth.denied if self.auth else 0)
        # frames refused (counted, logged, ignored): at the dispatcher's ingest
        # and control sockets, at the controller's, at the schedulers'
        at = dict(d.get("bad_frames_at", {}))
        if self._frames.count:
            at["controller"] = self._frames.count
        in_scheds = sum(s.get("bad_frames", 0) for s in scheds)
        if in_scheds:
            at["schedulers"] = in_scheds
        d["bad_frames_at"] = at
        d["bad_frames"] = sum(at.values())
        d["last_bad_frame"] = d.get("last_bad_frame") or self._frames.last
        return Statistics(**d)

    # -- samples -------------------------------------------------------------
    def sample(self, interval: float, t0: float | None = None) -> None:
        """Each scheduler and the dispatcher sample their own counters every
        ``interval`` s from ``t0`` (``time.monotonic()`` here; now when
        None), in a thread of their own (``smp.core.sampler``)."""
        t0 = time.monotonic() if t0 is None else t0
        self._all_scheds("sample", interval, t0)
        if self.smp:
            self._disp_call("sample", interval, t0)

    def series(self, final: bool = True) -> dict:
        """``{"dispatcher": ..., "schedulers": {k: ...}}``: what each one
        sampled since ``sample()`` (``final``: with a last sample now, and
        sampling stops; otherwise only each one's latest ``(t_s, counters)``).
        None for one that was not sampling; a lost scheduler is left out."""
        scheds = self._all_scheds("series", final)
        return {
            "dispatcher": self._disp_call("series", final) if self.smp else None,
            "schedulers": dict(sorted(scheds.items())),
        }

    # -- records for compare -------------------------------------------------
    def spawn_lineage(self) -> list[tuple]:
        """``(parent, child)`` of every spawn a process made, each parent's in
        the order it spawned (at most a million per scheduler): how
        ``compare`` names the processes the scenario does not name."""
        out: list[tuple] = []
        for k in range(1, self.nsched + 1):
            if k in self.lost_schedulers:
                continue
            start = 0
            while True:
                got = _checked(self._sched_call(k, "lineage", start), _lineage_entry, k)
                out.extend(got)
                start += len(got)
                if not got:
                    break
                if start > LINEAGE_MAX:
                    raise ProtocolError(f"scheduler {k} sent more than {LINEAGE_MAX:,} spawns")
        return out

    def record_fates(self, on: bool = True) -> None:
        """nonsmp: from now on keep what became of every message the
        scheduler made or did not make (``fates()``); smp's record of the
        same is the dispatcher's journal (``journal=``)."""
        if self.smp:
            raise BadArg("smp's fates are in the dispatcher's journal: Emulator(journal=PATH)")
        self._sched_call(1, "record_fates", bool(on))

    def fates(self) -> tuple[list, int]:
        """nonsmp: ``(entries, not_kept)``: ``("m", type, to, term, fate)`` for
        each message in the order it was made or not (fate ``delivered``,
        ``dropped REASON`` or ``suppressed REASON``), ``("x", pid)`` for each
        tracer's death; ``not_kept`` counts entries past the million kept."""
        if self.smp:
            raise BadArg("smp's fates are in the dispatcher's journal: Emulator(journal=PATH)")
        out: list = []
        cut = 0
        while True:
            reply = self._sched_call(1, "fates", len(out))
            if type(reply) is not tuple or len(reply) != 2 or type(reply[1]) is not int:
                raise ProtocolError("scheduler 1 sent a fate log reply of another shape")
            got, cut = _checked(reply[0], _fate_entry, 1), reply[1]
            if not got:
                break
            out.extend(got)
            if len(out) > FATES_MAX:
                raise ProtocolError(f"scheduler 1 sent more than {FATES_MAX:,} fates")
        return out, cut


_ADDRESS = (Pid, Port, Atom, type(None))
_FATES = {"delivered"} | {f"{w} {r}" for w in ("dropped", "suppressed") for r in DROP_REASONS}


def _lineage_entry(x) -> bool:
    return type(x) is tuple and len(x) == 2 and type(x[0]) is Pid and type(x[1]) is Pid


def _fate_entry(x) -> bool:
    if type(x) is not tuple or not x:
        return False
    if x[0] == "x":
        return len(x) == 2 and type(x[1]) is Pid
    return (
        x[0] == "m"
        and len(x) == 5
        and type(x[1]) is int
        and x[1] in M.TYPE_NAMES
        and type(x[2]) in _ADDRESS
        and type(x[4]) is str
        and x[4] in _FATES
    )


def _checked(got, ok, k: int) -> list:
    """A scheduler's list reply, each entry checked (``ProtocolError``, one
    line, for one that is not what the command returns)."""
    if type(got) is not list or not all(ok(x) for x in got):
        raise ProtocolError(f"scheduler {k} sent a malformed record list")
    return got
