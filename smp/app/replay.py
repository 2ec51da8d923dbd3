"""Replay a dispatcher journal: re-run every deliver/drop decision of a run.

Runs in the user's process (``smp-emu replay``, ``smp-emu stress``), never
next to a live dispatcher.  The journal (``dispatcher.journal``) holds, in
the order they happened in the dispatcher, the runs as the ingest thread
queued them (``q``), the process-table events (``e``, ``lost``), the state
after every change (``s``) and the decision taken for every run (``d``).
Replaying walks it once: table events rebuild a ``PidTable``, snapshots are
loaded into a ``TracerState``, and at each ``d`` the oldest undecided run is
decided again with ``smp.core.dispatch.resolve`` and the same scheduler-loss
rule as ``Dispatcher._dispatch``, then failures take their side effects
through ``disp_failure`` on the replayed state, as ``sys_msg_disp_failure``
does in the seed.

Tracer ports opened and closed and names registered through the control
socket are journaled as table events (``port_open``, ``port_close``,
``register``, ``unregister``); where a decision shows one the journal
lacks, it is learned from the decision, counted as ``inferred``.

The dispatch thread reads the table and the state *before* it records its
decision, so a change recorded between two decisions may or may not have
been seen by the second one.  When a replayed decision differs, it is tried
again against the table and state as they were at each earlier point since
the previous decision; a match there is a ``race_window`` decision (counted,
not a divergence).  A decision that matches nowhere is a divergence.

A journal is data from outside, so it is read whole and every record
checked before anything is replayed (``read_records``, in
``smp.app.journal_records``): a damaged or malformed record is a
``BadRecord`` and nothing is replayed; a file that does not start with a
journal header is ``NotAJournal``.  Whatever a report or a listing
(``smp.app.replay_report``, ``smp.app.replay_listing``) shows of a message is
cut short (``clip_term``).

Besides the decisions, the invariants the journal alone can show are
checked: timestamps strictly increase in queue order, every queued run is
decided exactly once (with the recorded type and count), delivered TRACE
messages keep per-tracee order, and every state reset the seed makes
(``erts_trace_check_exiting`` on an exit, ``sys_msg_disp_failure`` on a
failed SEQTRACE/SYSMON/SYSPROF) shows up in the recorded snapshots.
"""

from __future__ import annotations

import pickle
from collections import Counter, deque

from dispatcher.table import PidTable

# read_records and the errors (journal_records), the report (replay_report)
# and the listing (replay_listing) are importable from here, the replay's
# public API; _terms for smp.app.compare
from smp.app.journal_records import (
    ACTION_NAMES,
    MAX_DEPTH,
    MAX_NODES,
    BadRecord,
    NotAJournal,
    _read,
    read_records,
)
from smp.app.replay_listing import format_listing, queue_listing
from smp.app.replay_report import (
    ReplayReport,
    _brief,
    _cut,
    _entry,
    _fields,
    _nil,
    _Part,
    _same,
    _show,
    _terms,
    _totals,
    _triple,
    _word,
)
from smp.core import messages as M
from smp.core.clock import us_to_ts
from smp.core.dispatch import DELIVER_PID, DELIVER_PORT, DROP, Decision, disp_failure, resolve
from smp.core.placement import pid_owner
from smp.core.pretty import clip_term, format_term
from smp.core.state import TracerState
from smp.core.terms import Atom, Pid, Port
from smp.ports.order import OrderChecker
from smp.wire.codec import loads_terms

__all__ = [
    "replay",
    "ReplayReport",
    "NotAJournal",
    "BadRecord",
    "MAX_NODES",
    "MAX_DEPTH",
    "read_records",
    "queue_listing",
    "format_listing",
    "ACTION_NAMES",
]


am_error_logger = Atom("error_logger")


# ---------------------------------------------------------------- the replayed world
class _ReplayTable(PidTable):
    """The dispatcher's pid table rebuilt from ``e``/``lost`` records, plus
    what the journal does not record, learned from its decisions."""

    def __init__(self) -> None:
        super().__init__()
        self.closed_ports: set = set()

    def is_valid_tracer_port(self, port) -> bool:
        return type(port) is Port and port not in self.closed_ports


class _View:
    """The table and state as they were at an earlier point (for race windows):
    answers from the first saved prior value after that point, else now."""

    def __init__(self, table: _ReplayTable, undo: list, state: TracerState):
        self.t = table
        self.alive: dict = {}
        self.tracer: dict = {}
        self.reg: dict = {}
        self.st = None
        for kind, key, prior, _seq in undo:
            if kind == "alive":
                self.alive.setdefault(key, prior)
            elif kind == "tracer":
                self.tracer.setdefault(key, prior)
            elif kind == "reg":
                self.reg.setdefault(key, prior)
            elif kind == "state" and self.st is None:
                self.st = prior
        self.state = state if self.st is None else _state_from(self.st, self)

    def is_alive(self, pid) -> bool:
        return self.alive[pid] if pid in self.alive else self.t.is_alive(pid)

    def is_tracer(self, pid) -> bool:
        tr = self.tracer[pid] if pid in self.tracer else pid in self.t.tracers
        return tr and self.is_alive(pid)

    def whereis(self, name):
        pid = self.reg[name] if name in self.reg else self.t.registry.get(name)
        return pid if pid is not None and self.is_alive(pid) else None

    def is_valid_tracer_port(self, port) -> bool:
        return self.t.is_valid_tracer_port(port)


def _state_from(values: dict, liveness) -> TracerState:
    st = TracerState(liveness=liveness)
    for k, v in values.items():
        setattr(st, k, v)
    return st


def _effect(kind: str, payload, before: dict) -> dict | None:
    """The state after one reset the seed makes, from ``before``; None if it
    changes nothing."""
    st = _state_from(before, None)
    v = st.version
    if kind == "exit":
        st.trace_check_exiting(payload, smp=True)
    else:
        m, receiver = payload
        disp_failure(m, receiver, st, lambda line: None)
    return _fields(st) if st.version != v else None


# ---------------------------------------------------------------- replay
class _Replayer:
    def __init__(
        self,
        path: str,
        header,
        records: list,
        big: set,
        max_divergences: int,
        max_violations: int,
    ):
        self.nsched = header[2]
        self.records = records
        self.big = big  # seqs of runs too big to order-check whole
        self.table = _ReplayTable()
        self.state = TracerState(liveness=self.table)
        self.recorded_state = _fields(self.state)  # the chain of 's' records
        self.pending: deque = deque()  # undecided 'q' records
        self.lost: set = set()
        self.undo: list = []  # (kind, key, prior value, seq) since the last decision
        self.effects: list = []  # (cause seq, kind, payload, deadline)
        self.made, self.delivered, self.dropped = Counter(), Counter(), Counter()
        self.rec_delivered, self.rec_dropped = Counter(), Counter()
        self.last_ts: tuple | None = None  # (us, q seq)
        self.order = OrderChecker()
        self.max_div, self.max_viol = max_divergences, max_violations
        kinds = Counter(r[1] for r in records)
        self.report = ReplayReport(path, self.nsched, dict(sorted(kinds.items())))

    # -- reporting ------------------------------------------------------------
    def violate(self, text: str) -> None:
        r = self.report
        r.violation_count += 1
        if len(r.violations) < self.max_viol:
            r.violations.append(_cut(text))

    # -- table and state changes ----------------------------------------------
    def _save_pid(self, pid, seq: int) -> None:
        self.undo.append(("alive", pid, pid in self.table.alive, seq))
        self.undo.append(("tracer", pid, pid in self.table.tracers, seq))

    def _save_state(self, seq: int) -> None:
        self.undo.append(
            ("state", None, {**_fields(self.state), "version": self.state.version}, seq)
        )

    def _exited(self, pid, seq: int, deadline: str) -> None:
        self._save_pid(pid, seq)
        for name, p in self.table.registry.items():
            if p == pid:
                self.undo.append(("reg", name, p, seq))
        self.table.exited(pid)
        self._save_state(seq)
        self.state.trace_check_exiting(pid, smp=True)
        self.effects.append((seq, "exit", pid, deadline))

    def on_event(self, rec) -> None:
        seq, ev = rec[0], rec[2] if len(rec) > 2 else None
        self._check_effects(("q", "e"))
        if ev == "spawn":
            self._save_pid(rec[3], seq)
            self.table.spawned(rec[3])
        elif ev == "exit":
            self._exited(rec[3], seq, "ingest")
        elif ev == "tracer":
            self._save_pid(rec[3], seq)
            self.table.mark_tracer(rec[3])
        elif ev == "unregister":
            self.undo.append(("reg", rec[3], self.table.registry.get(rec[3]), seq))
            self.table.unregister(rec[3])
        elif ev == "register":  # recorded by the control thread
            self.undo.append(("reg", rec[3], self.table.registry.get(rec[3]), seq))
            self.table.registry[rec[3]] = rec[4]
        elif ev == "port_open":
            self.table.closed_ports.discard(rec[3])
        elif ev == "port_close":
            self.table.closed_ports.add(rec[3])
            self._save_state(seq)
            self.state.trace_check_exiting(rec[3], smp=True)
            self.effects.append((seq, "exit", rec[3], "control"))

    def on_lost(self, rec) -> None:
        seq, k, pids = rec[0], rec[2], rec[3]
        self._check_effects(("q", "e", "lost"))
        self.undo.append(("lost", None, set(self.lost), seq))
        self.lost.add(k)
        for pid in pids:
            self._exited(pid, seq, "lost")

    def on_snapshot(self, rec) -> None:
        seq, snap = rec[0], rec[2]
        got = _fields(snap)
        before = self.recorded_state
        for i, (_cause, kind, payload, _dl) in enumerate(self.effects):
            want = _effect(kind, payload, before)
            if want is None or want == got:
                del self.effects[i]
                break
        self.recorded_state = got
        self._save_state(seq)
        self.state.load(snap)

    def _check_effects(self, deadlines: tuple, final: bool = False) -> None:
        """Resets whose deadline has come must be in the recorded state by now."""
        keep = []
        for cause, kind, payload, deadline in self.effects:
            if not final and deadline not in deadlines:
                keep.append((cause, kind, payload, deadline))
                continue
            if _effect(kind, payload, self.recorded_state) is not None:
                what = (
                    f"exit of {_nil(payload)}"
                    if kind == "exit"
                    else f"failed {M.TYPE_NAMES[payload[0].type]} to {_nil(payload[1])}"
                )
                self.violate(
                    f"seq {cause}: state not reset after the {what} "
                    f"(erts_trace_check_exiting / sys_msg_disp_failure); recorded state "
                    f"{_brief(self.recorded_state)}"
                )
        self.effects = keep

    # -- queue ----------------------------------------------------------------
    def on_queue(self, rec) -> None:
        self._check_effects(("q", "e"))
        seq, _, type_, from_, to, ts_kind, blob, n, base, active = rec
        self.made[type_] += n
        self.pending.append(rec)
        if ts_kind:
            if self.last_ts is not None and base <= self.last_ts[0]:
                terms = _terms(rec, 1)
                self.violate(
                    f"seq {seq}: timestamp {format_term(us_to_ts(base))} of "
                    f"{_show(terms[0])} is not after {format_term(us_to_ts(self.last_ts[0]))}"
                    f" (the last of the run queued at seq {self.last_ts[1]})"
                )
            self.last_ts = (base + n - 1, seq)

    def on_decision(self, rec, i: int) -> None:
        self._check_effects(("dispatch",))
        dseq, _, d_type, d_n, d_action, d_receiver, d_reason = rec
        recorded = Decision(d_action, d_receiver, d_reason)
        q = self.pending[0] if self.pending else None
        # step mode (Emulator.step_dispatcher) decides the first d_n of a run
        if (
            q is not None
            and q[2] == d_type
            and type(d_n) is int
            and 0 < d_n < q[7]
            and (d_type != M.SYS_MSG_TYPE_PROC_MSG or d_receiver == q[4])
        ):
            q = self._split_head(d_n)
        elif q is None or (q[2], q[7]) != (d_type, d_n):
            if d_type == M.SYS_MSG_TYPE_PROC_MSG and d_n == 1 and type(d_receiver) is Pid:
                # trace_delivered's reply is queued by the control thread with no 'q' record
                q = (
                    dseq,
                    "q",
                    d_type,
                    d_receiver,
                    d_receiver,
                    M.TS_NONE,
                    pickle.dumps([]),
                    1,
                    0,
                    0,
                )
                self.made[d_type] += 1
                self.report.unjournaled += 1
            else:
                self.violate(
                    f"seq {dseq}: decision for {M.TYPE_NAMES.get(d_type, d_type)} x{d_n} "
                    + (
                        f"but the oldest undecided run (seq {q[0]}) is "
                        f"{M.TYPE_NAMES.get(q[2], q[2])} x{q[7]}"
                        if q
                        else "but no queued run is undecided"
                    )
                )
                self._count(self.rec_delivered, self.rec_dropped, d_type, d_n, recorded)
                self.undo.clear()
                return
        else:
            self.pending.popleft()
        qseq, _, type_, from_, to, ts_kind, blob, n, base, active = q
        m = M.SysMsg(type_, from_, to, None, ts_kind)
        d = self._decide(m, self.table, self.state, self.lost)
        race = False
        if not _same(d, recorded):
            d2 = self._window(m, recorded, i, qseq)
            if d2 is not None:
                d, race = d2, True
                self.report.race_window += 1
            elif (
                d.action == DELIVER_PORT
                and recorded.reason == "port_closed"
                and recorded.receiver == d.receiver
            ):
                self.table.closed_ports.add(d.receiver)  # closed by a control command
                self.report.inferred += 1
                d = self._decide(m, self.table, self.state, self.lost)
            elif recorded.action == DROP and recorded.reason == "emulator_closed":
                d = recorded  # left undecided when the stopping dispatcher ran out of time
            elif (
                type_ == M.SYS_MSG_TYPE_ERRLGR
                and recorded.action == DELIVER_PID
                and d.reason == "no_error_logger"
                and self.table.is_alive(recorded.receiver)
            ):
                self.table.registry[am_error_logger] = recorded.receiver  # registered by control
                self.report.inferred += 1
                d = self._decide(m, self.table, self.state, self.lost)
        self._count(self.delivered, self.dropped, type_, n, d)
        self._count(self.rec_delivered, self.rec_dropped, type_, n, recorded)
        self.report.runs += 1
        diverged = not _same(d, recorded)
        self.report.index.append((qseq, dseq, type_, n, _triple(recorded), _triple(d), race))
        if diverged:
            self._diverged(q, dseq, recorded, d)
        elif type_ == M.SYS_MSG_TYPE_TRACE and d.action != DROP:
            big = qseq in self.big
            for term in _terms(q):
                # a run too big to show whole is checked on its messages cut
                # short: the order needs their first few fields only
                v = self.order.feed(format_term(d.receiver), clip_term(term, 2000) if big else term)
                if v:
                    self.violate(f"seq {qseq}: {v}")
        self.undo.clear()
        if d.action == DROP and d.failure:
            # sys_msg_disp_failure, on the replayed state, before the next decision
            if type_ == M.SYS_MSG_TYPE_ERRLGR:
                return  # prints only
            if type_ in (M.SYS_MSG_TYPE_SEQTRACE, M.SYS_MSG_TYPE_SYSMON, M.SYS_MSG_TYPE_SYSPROF):
                before = self.state.version
                for _ in range(n):
                    disp_failure(m, d.receiver, self.state)
                if self.state.version != before:
                    self.effects.append((dseq, "fail", (m, d.receiver), "dispatch"))

    def _split_head(self, k: int) -> tuple:
        """The first ``k`` messages of the oldest undecided run as a record
        of their own; the rest stays undecided, its timestamps after them."""
        q = self.pending[0]
        seq, kind, e = q[0], q[1], _entry(q)
        part = e.blob if type(e.blob) is _Part else _Part(loads_terms(e.blob), 0)  # checked
        head = e._replace(blob=_Part(part.bodies, part.start), n=k)
        tail = e._replace(
            blob=_Part(part.bodies, part.start + k),
            n=e.n - k,
            base=e.base + k if e.ts_kind else 0,
        )
        self.pending[0] = (seq, kind, *tail.journal())
        return (seq, kind, *head.journal())

    def _decide(self, m, table, state, lost) -> Decision:
        return resolve(m.type, m.from_, m.to, state, table, lost, self.nsched)

    def _window(self, m, recorded: Decision, i: int, qseq: int) -> Decision | None:
        """The decision at an earlier point since the previous decision (and
        after the run was queued), if one matches."""
        undo = self.undo
        for j in range(len(undo) - 1, -1, -1):
            if undo[j][3] < qseq:
                break
            view = _View(self.table, undo[j:], self.state)
            lost = self.lost
            for kind, _k, prior, _s in undo[j:]:
                if kind == "lost":
                    lost = prior
                    break
            d = self._decide(m, view, view.state, lost)
            if _same(d, recorded):
                return d
        if recorded.reason == "scheduler_lost" and type(recorded.receiver) is Pid:
            # the loss is marked before its record is made
            k = pid_owner(recorded.receiver, self.nsched)
            for rec in self.records[i + 1 :]:
                if rec[1] == "d":
                    break
                if rec[1] == "lost" and rec[2] == k:
                    d = self._decide(m, self.table, self.state, self.lost | {k})
                    return d if _same(d, recorded) else None
        return None

    @staticmethod
    def _count(delivered: Counter, dropped: Counter, type_, n, d: Decision) -> None:
        if d.action == DROP:
            dropped[(type_, d.reason)] += n
        else:
            delivered[type_] += n

    def _diverged(self, q, dseq, recorded: Decision, d: Decision) -> None:
        r = self.report
        r.divergence_count += 1
        if len(r.divergences) >= self.max_div:
            return
        terms = _terms(q, 5)
        r.divergences.append(
            {
                "seq": dseq,
                "queued_seq": q[0],
                "type": M.TYPE_NAMES[q[2]],
                "n": q[7],
                "from": _nil(q[3]),
                "recorded": _word(recorded),
                "replayed": _word(d),
                "receiver_recorded": recorded.receiver,
                "receiver_replayed": d.receiver,
                "state": _brief(_fields(self.state)),
                "messages": [_show(t) for t in terms],
            }
        )

    # -- the walk ---------------------------------------------------------------
    def run(self) -> ReplayReport:
        for i, rec in enumerate(self.records):
            kind = rec[1]
            if kind == "q":
                self.on_queue(rec)
            elif kind == "d":
                self.on_decision(rec, i)
            elif kind == "s":
                self.on_snapshot(rec)
            elif kind == "e":
                self.on_event(rec)
            elif kind == "lost":
                self.on_lost(rec)
            elif kind == "end":
                self.report.whole = True
                made = sum(self.made.values())
                if rec[2] != made:
                    self.violate(
                        f"seq {rec[0]}: the end record says the dispatcher queued {rec[2]} "
                        f"messages, the journal's queue records {made}"
                    )
        self._check_effects((), final=True)
        r = self.report
        queued = sum(q[7] for q in self.pending)
        r.queued_at_end = queued
        r.totals = _totals(self.made, self.delivered, self.dropped, queued)
        r.recorded_totals = _totals(self.made, self.rec_delivered, self.rec_dropped, queued)
        return r


def replay(path: str, *, max_divergences: int = 20, max_violations: int = 50) -> ReplayReport:
    """Replay journal ``path``, every record checked first (``read_records``):
    raises ``NotAJournal`` for a file that is not a journal, ``BadRecord``
    for a journal with a record that cannot be read or is malformed."""
    header, records, big = _read(path)
    return _Replayer(path, header, records, big, max_divergences, max_violations).run()
