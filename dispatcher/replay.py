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
``register``, ``unregister``); a journal from before they were recorded is
still replayed by learning them from the decisions, counted as
``inferred``.

The dispatch thread reads the table and the state *before* it records its
decision, so a change recorded between two decisions may or may not have
been seen by the second one.  When a replayed decision differs, it is tried
again against the table and state as they were at each earlier point since
the previous decision; a match there is a ``race_window`` decision (counted,
not a divergence).  A decision that matches nowhere is a divergence.

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
from dataclasses import dataclass, field, fields

from smp.core import messages as M
from smp.core.clock import us_to_ts
from smp.core.dispatch import DELIVER_PID, DELIVER_PORT, DROP, Decision, disp_failure, resolve
from smp.core.placement import pid_owner
from smp.core.pretty import format_term
from smp.core.state import NIL, Snapshot, TracerState
from smp.core.stats import totals
from smp.core.terms import Atom, Pid, Port
from smp.ports.dbgfmt import format_dbg, term_to_json
from smp.ports.order import OrderChecker
from smp.wire.codec import load_record, loads_terms
from smp.wire.frames import QueueEntry, run_terms

from .journal import JOURNAL_MAGIC
from .table import PidTable

__all__ = [
    "replay",
    "ReplayReport",
    "NotAJournal",
    "read_records",
    "queue_listing",
    "format_listing",
    "ACTION_NAMES",
]

ACTION_NAMES = {DELIVER_PID: "deliver", DELIVER_PORT: "deliver_port", DROP: "drop"}
am_error_logger = Atom("error_logger")
_STATE_FIELDS = [f.name for f in fields(Snapshot) if f.name != "version"]


class NotAJournal(ValueError):
    """The file is not a dispatcher journal."""


def read_records(path: str) -> tuple[tuple, list, str | None]:
    """Read a whole journal: ``(header, records, truncated)``.

    Raises ``NotAJournal`` (naming the file) when it does not start with the
    journal header; ``truncated`` says why reading stopped early, if it did
    (a dispatcher killed mid-write leaves a partial last record)."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise NotAJournal(f"{path}: cannot read: {e.strerror}") from None
    with f:
        try:
            header = load_record(f)
        except Exception as e:
            raise NotAJournal(
                f"{path}: not a dispatcher journal ({type(e).__name__}: {e})"
            ) from None
        if (
            type(header) is not tuple
            or len(header) != 3
            or tuple(header[:2]) != JOURNAL_MAGIC
            or type(header[2]) is not int
            or header[2] < 1
        ):
            raise NotAJournal(f"{path}: not a dispatcher journal (header {header!r:.80})")
        records: list = []
        truncated = None
        while True:
            try:
                rec = load_record(f)  # one per record: each has its own memo
            except EOFError:
                break
            except Exception as e:
                truncated = (
                    f"unreadable record after seq {records[-1][0] if records else 0}: "
                    f"{type(e).__name__}: {e}"
                )
                break
            if type(rec) is not tuple or len(rec) < 2 or type(rec[0]) is not int:
                truncated = f"malformed record after seq {records[-1][0] if records else 0}"
                break
            records.append(rec)
    return header, records, truncated


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


def _fields(obj) -> dict:
    return {k: getattr(obj, k) for k in _STATE_FIELDS}


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


# ---------------------------------------------------------------- the report
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
    truncated: str | None = None
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


def _terms(q: tuple, limit: int | None = None) -> list:
    """The completed messages of a ``q`` record (first ``limit`` of them)."""
    e = _entry(q)
    try:
        bodies = loads_terms(e.blob)
    except Exception as exc:
        return [f"(undecodable bodies: {type(exc).__name__})"]
    return run_terms(bodies[:limit] if limit else bodies, e.ts_kind, e.base, e.active)


def _show(term) -> str:
    if type(term) is str:
        return term
    return format_dbg(term).rstrip("\n") or format_term(term)


# ---------------------------------------------------------------- replay
class _Replayer:
    def __init__(self, path: str, header, records: list, max_divergences: int, max_violations: int):
        self.nsched = header[2]
        self.records = records
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
            r.violations.append(text)

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
        else:
            self.violate(f"seq {seq}: unknown table event {rec[2:]!r}")

    def on_lost(self, rec) -> None:
        seq, k, pids = rec[0], rec[2], rec[3]
        self._check_effects(("q", "e", "lost"))
        self.undo.append(("lost", None, set(self.lost), seq))
        self.lost.add(k)
        for pid in pids:
            self._exited(pid, seq, "lost")

    def on_snapshot(self, rec) -> None:
        seq, snap = rec[0], rec[2]
        if type(snap) is not Snapshot:
            self.violate(f"seq {seq}: state record is not a snapshot: {snap!r:.80}")
            return
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
        if len(rec) != 10:
            self.violate(f"seq {rec[0]}: malformed queue record")
            return
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
        if len(rec) != 7:
            self.violate(f"seq {rec[0]}: malformed decision record")
            return
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
            for term in _terms(q):
                v = self.order.feed(format_term(d.receiver), term)
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
        try:
            head, tail = e.split(k)
        except Exception:  # undecodable: both parts keep the bytes (_terms says so)
            head = e._replace(n=k)
            tail = e._replace(n=e.n - k, base=e.base + k if e.ts_kind else 0)
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
            else:
                self.violate(f"seq {rec[0]}: unknown record kind {kind!r}")
        self._check_effects((), final=True)
        r = self.report
        queued = sum(q[7] for q in self.pending)
        r.queued_at_end = queued
        r.totals = _totals(self.made, self.delivered, self.dropped, queued)
        r.recorded_totals = _totals(self.made, self.rec_delivered, self.rec_dropped, queued)
        return r


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


def replay(path: str, *, max_divergences: int = 20, max_violations: int = 50) -> ReplayReport:
    """Replay journal ``path``; raises ``NotAJournal`` for any other file."""
    header, records, truncated = read_records(path)
    r = _Replayer(path, header, records, max_divergences, max_violations).run()
    r.truncated = truncated
    return r


# ---------------------------------------------------------------- listing
def queue_listing(
    path: str, report: ReplayReport, around: int | None = None, limit: int = 20
) -> list[dict]:
    """The journal's records near ``around`` (a seq; default: the first
    divergence, else the start) with each run's messages and decisions.

    Shows ``limit`` runs, half before ``around``, and every table event and
    state change recorded among them, in seq order."""
    idx = report.index
    if around is None:
        around = report.divergences[0]["seq"] if report.divergences else 0
    at = next((k for k, e in enumerate(idx) if e[1] >= around or e[0] >= around), len(idx))
    lo_k = max(0, at - limit // 2)
    chosen = idx[lo_k : lo_k + max(1, limit)]
    if not chosen:
        return []
    by_q = {e[0]: e for e in chosen}
    lo = min(min(e[0] for e in chosen), around)
    hi = max(max(e[1] for e in chosen), around)
    _, records, _ = read_records(path)
    out = []
    for rec in records:
        seq, kind = rec[0], rec[1]
        if seq < lo or seq > hi:
            continue
        if kind == "q":
            e = by_q.get(seq)
            item = {
                "seq": seq,
                "kind": "q",
                "type": M.TYPE_NAMES.get(rec[2], rec[2]),
                "n": rec[7],
                "messages": [_show(t) for t in _terms(rec)],
            }
            if e is not None:
                rec_d, rep_d = Decision(*e[4]), Decision(*e[5])
                item.update(
                    decided_at=e[1],
                    recorded=_word(rec_d),
                    replayed=_word(rep_d),
                    diverges=not _same(rec_d, rep_d),
                    race_window=e[6],
                )
            out.append(item)
        elif kind == "d":
            out.append(
                {
                    "seq": seq,
                    "kind": "d",
                    "type": M.TYPE_NAMES.get(rec[2], rec[2]),
                    "n": rec[3],
                    "text": _word(Decision(rec[4], rec[5], rec[6])),
                }
            )
        elif kind == "s":
            out.append(
                {"seq": seq, "kind": "s", "text": f"v{rec[2].version} " + _brief(_fields(rec[2]))}
            )
        elif kind == "e":
            out.append(
                {
                    "seq": seq,
                    "kind": "e",
                    "text": " ".join(str(x) if type(x) is str else format_term(x) for x in rec[2:]),
                }
            )
        elif kind == "lost":
            out.append(
                {"seq": seq, "kind": "lost", "text": f"scheduler {rec[2]}: {len(rec[3])} processes"}
            )
    return out


def format_listing(items: list[dict], around: int | None = None) -> str:
    """The listing as text: each run's messages in dbg's format under its decision."""
    lines = []
    for it in items:
        mark = ">>" if around is not None and it["seq"] == around else "  "
        if it["kind"] == "q":
            head = f"{mark}#{it['seq']:<7} queued {it['type']} x{it['n']}"
            if "recorded" in it:
                head += f"  -> #{it['decided_at']} {it['recorded']}"
                if it["diverges"]:
                    head += f"  DIVERGES: replay says {it['replayed']}"
                elif it["race_window"]:
                    head += "  (seen before a concurrent change)"
            else:
                head += "  (undecided)"
            lines.append(head)
            lines += [f"{' ' * 11}{m}" for m in it["messages"]]
        else:
            lines.append(
                f"{mark}#{it['seq']:<7} {it['kind']:<6} "
                + (f"{it['type']} x{it['n']}: {it['text']}" if it["kind"] == "d" else it["text"])
            )
    return "\n".join(lines) + ("\n" if lines else "")
