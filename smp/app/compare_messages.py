"""The messages only one of two runs made, each with the seed's reason.

Runs in the user's process.  ``message_differences`` lines the two runs up
per (tracer, tracee), with timestamps dropped and pids replaced by stable
labels (``normalise``), and lists every message only one mode made -- in
smp mode with the drops the dispatcher's journal recorded
(``journal_messages``) -- each with the reason ``_classify`` finds: a fake
schedule pair (``do_send_schedfix_to_port``), a drop nonsmp makes no message
for (``erts_check_my_tracer_proc``), a receiver resolved at queue time
(``sys_msg_dispatcher_func``), scheduling, ``profile_scheduler``, or timing.
"""

from __future__ import annotations

import difflib
from collections import Counter, deque

from smp.app.compare_why import _rest
from smp.app.replay import _terms, read_records
from smp.core import messages as M
from smp.core.dispatch import DROP
from smp.core.pretty import format_term
from smp.core.terms import Atom, Pid, Port
from smp.ports.dbgfmt import format_dbg

_TRACE, _TRACE_TS, _SEQ, _PROFILE = (
    Atom("trace"),
    Atom("trace_ts"),
    Atom("seq_trace"),
    Atom("profile"),
)


def normalise(term, labels: dict):
    """A term with timestamps dropped and pids/ports replaced by their labels."""
    if type(term) is tuple and term:
        if term[0] is _TRACE_TS and len(term) >= 4:
            term = (_TRACE,) + term[1:-1]
        elif term[0] is _SEQ and len(term) == 4:
            term = term[:3]
        elif term[0] is _PROFILE and len(term) >= 5:
            term = term[:-1]
    return _relabel(term, labels)


def _relabel(t, labels):
    if type(t) in (Pid, Port):
        return (
            Atom(f"<{labels[t]}>") if t in labels else Atom("<pid>" if type(t) is Pid else "<port>")
        )
    if type(t) is tuple:
        return tuple(_relabel(x, labels) for x in t)
    if type(t) is list:
        return [_relabel(x, labels) for x in t]
    return t


def _by_tracee(terms, labels) -> dict:
    out: dict = {}
    for t in terms:
        n = normalise(t, labels)
        who = n[1] if type(n) is tuple and len(n) > 1 and n[0] is _TRACE else Atom("*")
        out.setdefault(format_term(who).strip("'"), []).append(n)
    return out


_TYPES_COMPARED = ("TRACE", "SEQTRACE", "SYSMON", "SYSPROF")
_OUT, _IN = Atom("out"), Atom("in")
_MONITOR = Atom("monitor")


def journal_events(path: str) -> tuple[list, dict]:
    """From an smp run's journal: ``(type, receiver, term, fate, (q_seq,
    d_seq))`` of every message its dispatcher queued, in queue order
    (``receiver``: where it went or, when dropped, the tracer it was made
    for; ``fate``: ``delivered`` or ``dropped REASON``; the seqs of its
    queue and decision records), and ``{pid: (exit seq, trace messages
    queued for it before)}`` from the exit events."""
    _, records, _ = read_records(path)
    queued: deque = deque()
    out = []
    exits: dict = {}
    made: Counter = Counter()
    for rec in records:
        kind = rec[1]
        if kind == "q" and len(rec) == 10:
            queued.append(rec)
            if rec[2] == M.SYS_MSG_TYPE_TRACE:
                made[rec[4]] += rec[7]
        elif kind == "e" and rec[2] == "exit":
            exits.setdefault(rec[3], (rec[0], made[rec[3]]))
        elif kind == "d" and len(rec) == 7:
            _, d_seq, d_type, d_n, action, receiver, reason = rec
            if not queued or (queued[0][2], queued[0][7]) != (d_type, d_n):
                continue  # a trace_delivered reply: queued with no 'q' record
            q = queued.popleft()
            tname = M.TYPE_NAMES.get(q[2], str(q[2]))
            if tname not in _TYPES_COMPARED:
                continue
            dropped = action == DROP
            who = q[4] if dropped and tname == "TRACE" else receiver
            fate = f"dropped {reason}" if dropped else "delivered"
            for term in _terms(q):
                if type(term) is not str:
                    out.append((tname, who, term, fate, (q[0], d_seq)))
    return out, exits


def journal_messages(path: str) -> list[tuple]:
    """``(type, receiver, term, fate)`` of every message an smp run's
    dispatcher queued, in queue order (``journal_events`` without the seqs)."""
    return [e[:4] for e in journal_events(path)[0]]


def _kind(term) -> str:
    if type(term) is tuple and term and type(term[0]) is Atom:
        return term[0].name
    return ""


def _classify(item: dict, ctx: dict) -> str:
    """The seed's reason why only ``item["mode"]`` made this message."""
    term, mode, fate = item["term"], item["mode"], item["fate"]
    k = _kind(term)
    nonsmp, smp = ctx["nonsmp"], ctx["smp"]
    if (
        mode == nonsmp
        and k in ("trace", "trace_ts")
        and len(term) >= 5
        and term[2] in (_OUT, _IN)
        and term[3] == 0
        and ctx["fake"]
    ):
        return (
            "do_send_schedfix_to_port (nonsmp only): a heavy write to a trace port sends "
            "the running process a fake out/in pair; smp never fakes schedules"
        )
    if mode == smp and fate in (
        "dropped receiver_dead",
        "dropped not_tracer",
        "dropped port_closed",
    ):
        return (
            "erts_check_my_tracer_proc: smp makes the message without looking at the "
            "tracer and the dispatcher drops it (" + fate[8:] + "); the tracee keeps its "
            "flags until it is next scheduled in, while nonsmp looks the tracer up when "
            "making a message (ERTS_GET_TRACER_REF), resets the tracee and makes nothing"
        )
    if item.get("moved_to") or (mode == smp and fate == "dropped no_receiver"):
        where = f" (the other mode's went to {item['moved_to']})" if item.get("moved_to") else ""
        return (
            "queue-time receiver resolution: smp's dispatcher looks up the seq tracer, "
            "monitor or profiler when it takes the message off the queue "
            "(sys_msg_dispatcher_func), nonsmp when the message is made; a change in "
            "between sends it elsewhere" + where
        )
    if (
        k in ("trace", "trace_ts")
        and len(term) >= 4
        and term[2] in (_OUT, _IN, Atom("out_exiting"), Atom("out_exited"), Atom("in_exiting"))
    ):
        return (
            "scheduling (trace_sched): whether a process is scheduled out while it waits "
            "depends on when its message arrives, and that differs between one scheduler "
            "(nonsmp) and several that run at once (smp)"
        )
    if k == "profile" and len(term) >= 3 and term[1] == Atom("scheduler"):
        return (
            "profile_scheduler: each of smp's schedulers reports its own active/inactive "
            "changes with the count of active schedulers; nonsmp has one scheduler"
        )
    if not ctx["deterministic"]:
        return f"timing, not the seed: {ctx['rest']}"
    return (
        "no difference between the builds explains it: the modes' processes did not make "
        "the same messages"
    )


def _sequences(items, labels) -> dict:
    """tracer -> tracee -> [(normalised text, item)] in order."""
    out: dict = {}
    for tracer, term, fate in items:
        n = normalise(term, labels)
        who = n[1] if type(n) is tuple and len(n) > 1 and n[0] is _TRACE else Atom("*")
        out.setdefault(tracer, {}).setdefault(format_term(who).strip("'"), []).append(
            (format_term(n), {"term": term, "fate": fate})
        )
    return out


def _only(xa: list, xb: list) -> tuple[list, list]:
    """Indexes only in a and only in b, aligned on the normalised texts."""
    ta, tb = [x[0] for x in xa], [x[0] for x in xb]
    lo = 0
    while lo < len(ta) and lo < len(tb) and ta[lo] == tb[lo]:
        lo += 1
    hi_a, hi_b = len(ta), len(tb)
    while hi_a > lo and hi_b > lo and ta[hi_a - 1] == tb[hi_b - 1]:
        hi_a, hi_b = hi_a - 1, hi_b - 1
    ma, mb = ta[lo:hi_a], tb[lo:hi_b]
    if len(ma) * len(mb) > 4_000_000:  # too long to align: compare as multisets
        ca, cb = Counter(ma), Counter(mb)
        ra, rb = ca - cb, cb - ca
        oa, ob = [], []
        for i, t in enumerate(ma):
            if ra[t] > 0:
                ra[t] -= 1
                oa.append(lo + i)
        for i, t in enumerate(mb):
            if rb[t] > 0:
                rb[t] -= 1
                ob.append(lo + i)
        return oa, ob
    oa, ob = [], []
    sm = difflib.SequenceMatcher(None, ma, mb, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag in ("delete", "replace"):
            oa += range(lo + i1, lo + i2)
        if tag in ("insert", "replace"):
            ob += range(lo + j1, lo + j2)
    return oa, ob


def message_differences(
    a,
    b,
    *,
    smp_made: list | None = None,
    scenario: dict | None = None,
    limit: int = 20,
    causes: bool = False,
) -> dict:
    """Every message only one of the runs made, per tracer and tracee, with
    the seed's reason.  ``a``'s messages are what its tracers got (nonsmp
    delivers as it makes); ``smp_made`` (``journal_messages``), when given,
    is everything ``b``'s dispatcher queued, drops included.  ``causes``:
    the compare also classes every message from both runs' records
    (``compare_causes``), which the note then points to."""
    sa, sb = a.summary, b.summary
    ma, mb = sa["mode"], sb["mode"]
    if ma == mb:
        ma, mb = ma + "(a)", mb + "(b)"

    def delivered(o):
        return [(name, t, "delivered") for name, terms in o.messages.items() for t in terms]

    items_a = delivered(a)
    skipped = 0
    if smp_made is not None:

        def name(r):
            return b.labels.get(
                r, "(no receiver)" if r is None or type(r) is Atom else format_term(r)
            )

        known = set(a.messages) | set(b.messages)
        items_b, skipped = [], 0
        for _, r, t, fate in smp_made:
            n = name(r)
            if n in known:
                items_b.append((n, t, fate))
            else:
                skipped += 1
        source = "the smp dispatcher's journal (drops included)"
    else:
        items_b = delivered(b)
        source = "what the tracers got"
    ga, gb = _sequences(items_a, a.labels), _sequences(items_b, b.labels)
    faults = (scenario or {}).get("faults") or []
    ctx = {
        "nonsmp": ma if sa["mode"] == "nonsmp" else None,
        "smp": mb if sb["mode"] == "smp" else None,
        "fake": sa["stats"].get("fake_schedule_pairs", 0)
        + sb["stats"].get("fake_schedule_pairs", 0),
        "deterministic": not faults,
        "rest": _rest(scenario, sa, sb),
    }
    only: list[dict] = []
    made = {}
    for tracer in sorted(set(ga) | set(gb)):
        made[tracer] = {
            ma: sum(len(v) for v in ga.get(tracer, {}).values()),
            mb: sum(len(v) for v in gb.get(tracer, {}).values()),
        }
        for who in sorted(set(ga.get(tracer, {})) | set(gb.get(tracer, {}))):
            xa, xb = ga.get(tracer, {}).get(who, []), gb.get(tracer, {}).get(who, [])
            oa, ob = _only(xa, xb)
            for mode, xs, idx in ((ma, xa, oa), (mb, xb, ob)):
                for i in idx:
                    text, it = xs[i]
                    only.append(
                        {
                            "tracer": tracer,
                            "tracee": who,
                            "mode": mode,
                            "index": i + 1,
                            "norm": text,
                            **it,
                        }
                    )
    # a message one mode sent to one tracer and the other to another moved
    by_norm: dict = {}
    for d in only:
        by_norm.setdefault((d["mode"], d["norm"]), []).append(d)
    for d in only:
        other = mb if d["mode"] == ma else ma
        for e in by_norm.get((other, d["norm"]), []):
            if e["tracer"] != d["tracer"]:
                d["moved_to"] = e["tracer"]
                break
    tracers = []
    for tracer in sorted(made):
        mine = [d for d in only if d["tracer"] == tracer]
        counts = Counter(d["mode"] for d in mine)
        listed = []
        for d in mine[:limit]:
            listed.append(
                {
                    "tracee": d["tracee"],
                    "mode": d["mode"],
                    "index": d["index"],
                    "message": _show(d["term"]),
                    "fate": d["fate"],
                    "why": _classify(d, ctx),
                }
            )
        tracers.append(
            {
                "tracer": tracer,
                ma: made[tracer][ma],
                mb: made[tracer][mb],
                "only_count": {ma: counts.get(ma, 0), mb: counts.get(mb, 0)},
                "only": listed,
            }
        )
    note = (
        f"{ma}: what its tracers got (nonsmp delivers a message as it makes it); {mb}: "
        f"{source}. Timestamps are left out and pids named by their role before the "
        f"messages are lined up per tracer and tracee."
    )
    if skipped:
        note += (
            f" {skipped:,} messages {mb} made for tracers the scenario does not name (such "
            f"as the churn workload's own short-lived tracers) are not lined up here: "
            f"{ma}'s delivered ones are not kept"
            + ("; the causes compare them from both runs' records." if causes else ".")
        )
    other_drops = sum(
        n
        for r, bt in sa["stats"].get("dropped_by_reason", {}).items()
        for t, n in bt.items()
        if t in _TYPES_COMPARED
    )
    if other_drops:
        note += (
            f" {ma} also dropped {other_drops:,} trace messages it made; they are not "
            f"listed (only smp's dispatcher keeps a journal)."
        )
    if causes:
        note += " Why each message differs: the causes, from both runs' records."
    elif not ctx["deterministic"]:
        note += f" This scenario has faults, so some differences are timing: {ctx['rest']}."
    return {
        "deterministic": ctx["deterministic"],
        "source": {ma: "delivered", mb: source},
        "note": note,
        "tracers": tracers,
    }


def _show(term) -> str:
    text = format_dbg(term).rstrip("\n") or format_term(term)
    return text.replace("'<", "<").replace(">'", ">")
