"""Why each message differs between an smp and a nonsmp run, from what both
runs recorded: the causes, not the counters.

Runs in the user's process.  nonsmp's record is its scheduler's fate log
(``Emulator.fates()``: every message made or not made, with its receiver
and fate, and every tracer's death, in order); smp's is the dispatcher's
journal (``journal_events``: every message queued, with the seq of its
queue record and of its decision, and every process's exit).  Both runs'
processes are named by their role, and processes nobody named by their
parent's name and spawn order (``full_labels``: ``churn[0].churner.2`` is
the churner's second child), so the churn workload's own short-lived
tracers are compared like the others.

The messages are lined up per (tracer, tracee) with timestamps left out;
every message made at one tracer by one mode only, or with another fate in
each, is put in the first class whose test its records pass (``CLASSES``,
each with the seed's reason).  "timing" holds what no class explains, and
says which tracer deaths the journals place at different points of the
work (a fault at a wall-clock time).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter, deque

from smp.app.compare_messages import _show, normalise
from smp.core import messages as M
from smp.core.pretty import format_term
from smp.core.terms import Atom

__all__ = [
    "CLASSES",
    "RACES",
    "full_labels",
    "nonsmp_events",
    "message_causes",
    "death_text",
]

_TRACE = Atom("trace")
_OUT, _IN = Atom("out"), Atom("in")
_SCHED = {_OUT, _IN, Atom("out_exiting"), Atom("out_exited"), Atom("in_exiting")}
_COMPARED = {
    M.SYS_MSG_TYPE_TRACE: "TRACE",
    M.SYS_MSG_TYPE_SEQTRACE: "SEQTRACE",
    M.SYS_MSG_TYPE_SYSMON: "SYSMON",
    M.SYS_MSG_TYPE_SYSPROF: "SYSPROF",
}
_DEAD = ("dropped receiver_dead", "dropped not_tracer", "dropped port_closed")

#: The classes, in the order they are tried: (name, title, seed's reason).
CLASSES = (
    (
        "dead_at_dispatch",
        "made while its tracer lived, dropped at dispatch after it died (smp)",
        "erl_trace.c sys_msg_dispatcher_func: smp queues a trace message without "
        "looking at the tracer (enqueue_sys_msg) and the dispatcher, taking it after the "
        "tracer's exit, finds the receiver dead and drops it; nonsmp delivers such a "
        "message at once (it made none where its tracer died earlier in its run)",
    ),
    (
        "made_after_death",
        "made after its tracer died, before the tracee noticed (smp only)",
        "#ifdef ERTS_SMP erts_check_my_tracer_proc: in smp a tracee keeps its flags until "
        "it is next scheduled in, so it makes messages the dispatcher drops; nonsmp looks "
        "the tracer up when it makes one (ERTS_GET_TRACER_REF), resets the tracee and "
        "makes nothing (where its tracer died later in its run, it delivered the message)",
    ),
    (
        "resolved_at_dispatch",
        "seq tracer, monitor or profiler read at dispatch, not when made (smp)",
        "sys_msg_dispatcher_func reads system_seq_tracer, system_monitor and "
        "system_profile under sys_trace_rwmtx when it takes the message; nonsmp sends to "
        "whoever holds the role when the message is made",
    ),
    (
        "serial_order",
        "the same seq_trace message with another serial in each build",
        "seq_trace_update_send numbers a traced process's sends in the order it makes "
        "them; exit signals to its links go in the order of its link tree, which depends on "
        "the pids, numbered differently in the two builds",
    ),
    (
        "fake_schedule_pair",
        "a fake out/in pair after a heavy port write (nonsmp only)",
        "#ifndef ERTS_SMP do_send_schedfix_to_port: a heavy write to a trace port sends "
        "the running process a fake out/in pair; smp never fakes schedules",
    ),
    (
        "profile_scheduler",
        "profile messages of a scheduler the other build does not have",
        "profile_scheduler: each smp scheduler reports its own active/inactive changes "
        "with the count of active schedulers; nonsmp has one scheduler",
    ),
    (
        "scheduling",
        "scheduled in or out in one build only",
        "trace_sched: whether a process is scheduled out while it waits depends on when "
        "its message arrives, which differs between one scheduler (nonsmp) and several "
        "running at once (smp)",
    ),
    (
        "timing",
        "its tracer died at another point of the work in each run",
        "not the seed: the records place the tracer's death (or the death of the tracer "
        "it replaced) after a different number of messages made for it in each run, as a "
        "fault at a wall-clock time does",
    ),
    (
        "unexplained",
        "no class fits",
        "none: neither a rule of the seed nor a tracer's death at another point of the "
        "work explains it",
    ),
)
#: the race of the simulator's catalogue (``smp-emu explore NAME``) that
#: shows a class, every order of it
RACES = {
    "dead_at_dispatch": "tracer_killed_with_messages_queued",
    "made_after_death": "tracer_killed_with_messages_queued",
    "resolved_at_dispatch": "seq_tracer_replaced",
    "scheduling": "running_pairs_at_one_tracer",
    "profile_scheduler": "profiler_active_count",
}
_TITLE = {c[0]: c[1] for c in CLASSES}
_SEED = {c[0]: c[2] for c in CLASSES}


def full_labels(labels: dict, lineage: list | None) -> dict:
    """``labels`` with every process spawned by a named one named after it:
    ``PARENT.N`` for its N-th child (its spawns are in order), recursively."""
    out = dict(labels)
    children: dict = {}
    for parent, child in lineage or ():
        children.setdefault(parent, []).append(child)
    todo = deque(p for p in out if p in children)
    while todo:
        p = todo.popleft()
        for i, c in enumerate(children.get(p, ()), 1):
            if c not in out:
                out[c] = f"{out[p]}.{i}"
                if c in children:
                    todo.append(c)
    return out


def nonsmp_events(fates: list) -> tuple[list, dict]:
    """From nonsmp's fate log: ``[(type, to, term, fate, index)]`` of the
    compared types, and ``{tracer: messages made for it before it died}``."""
    items, deaths = [], {}
    made: Counter = Counter()
    for i, e in enumerate(fates):
        if e[0] == "x":
            deaths[e[1]] = made[e[1]]
        elif e[0] == "m" and e[1] in _COMPARED:
            _, type_, to, term, fate = e
            items.append((_COMPARED[type_], to, term, fate, i))
            if not fate.startswith("suppressed"):
                made[to] += 1
    return items, deaths


def _name(labels: dict, x) -> str:
    if x in labels:
        return labels[x]
    if x is None or type(x) is Atom:
        return "(no receiver)"
    return format_term(x)


def _by_stream(items: list, labels: dict) -> dict:
    """(tracer, tracee) -> [(normalised text, item)] in order."""
    out: dict = {}
    for it in items:
        n = normalise(it[2], labels)
        who = n[1] if type(n) is tuple and len(n) > 1 and n[0] is _TRACE else Atom("*")
        key = (_name(labels, it[1]), format_term(who).strip("'"))
        out.setdefault(key, []).append((format_term(n), it))
    return out


def _align(xa: list, xb: list):
    """Pairs of the same message in both, and the indexes in one only."""
    ta, tb = [x[0] for x in xa], [x[0] for x in xb]
    pairs, oa, ob = [], [], []
    if len(ta) * len(tb) > 4_000_000:  # too long to align: as multisets, in order
        left: dict = {}
        for j, t in enumerate(tb):
            left.setdefault(t, deque()).append(j)
        used = set()
        for i, t in enumerate(ta):
            q = left.get(t)
            if q:
                j = q.popleft()
                pairs.append((i, j))
                used.add(j)
            else:
                oa.append(i)
        ob = [j for j in range(len(tb)) if j not in used]
        return pairs, oa, ob
    sm = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            pairs += zip(range(i1, i2), range(j1, j2), strict=True)
        else:
            oa += range(i1, i2)
            ob += range(j1, j2)
    return pairs, oa, ob


_SERIAL = re.compile(r"^(\{seq_trace,[^,]+,\{(?:send|'receive'),)\{\d+,\d+\}")


def _serial_free(text: str) -> str:
    """A seq_trace message's text with its serial left out."""
    return _SERIAL.sub(r"\1{_,_}", text)


def _reordered(xa: list, xb: list, oa: list, ob: list, key=None) -> tuple[list, list, list]:
    """Pair what only one side's alignment left over by text (or by
    ``key(text)``), in order: ``(pairs, left in a, left in b)``."""
    if not oa or not ob:
        return [], oa, ob
    key = key or (lambda t: t)
    waiting: dict = {}
    for j in ob:
        waiting.setdefault(key(xb[j][0]), deque()).append(j)
    pairs, left_a = [], []
    for i in oa:
        q = waiting.get(key(xa[i][0]))
        if q:
            pairs.append((i, q.popleft()))
        else:
            left_a.append(i)
    used = {j for _, j in pairs}
    return pairs, left_a, [j for j in ob if j not in used]


def _is_sched(term) -> bool:
    return (
        type(term) is tuple
        and len(term) >= 4
        and term[0] in (_TRACE, Atom("trace_ts"))
        and (term[2] in _SCHED)
    )


def _classify(d: dict, ctx: dict) -> str:
    """The class of one difference: ``d`` has ``a`` (nonsmp's item or None)
    and ``b`` (smp's item or None)."""
    a, b = d["a"], d["b"]
    if d.get("serial"):
        return "serial_order"
    fa, fb = a[3] if a else None, b[3] if b else None
    moved = d["key"][0].split("~")[0] in ctx["moved_deaths"]
    if b is not None and fb in _DEAD:
        # smp's drop is the race its records show when nonsmp's fate fits
        # too: the one the race's order gives, or, the tracer having died at
        # another point of nonsmp's run, any (it made nothing, or delivered
        # what smp made after the death)
        died = ctx["smp_exits"].get(b[1])
        q_seq = b[4][0]
        if died is not None and q_seq < died[0] and (fa == "delivered" or moved):
            return "dead_at_dispatch"
        if (
            died is not None
            and q_seq > died[0]
            and (fa is None or fa.startswith("suppressed") or moved)
        ):
            return "made_after_death"
    if (a or b)[0] in ("SEQTRACE", "SYSMON", "SYSPROF") and (
        d.get("moved") or fb == "dropped no_receiver"
    ):
        return "resolved_at_dispatch"
    term = (a or b)[2]
    if a is not None and b is None and ctx["fake"] and _is_sched(term) and term[3] == 0:
        return "fake_schedule_pair"
    if type(term) is tuple and len(term) >= 3 and term[1] == Atom("scheduler"):
        return "profile_scheduler"
    if _is_sched(term) and (a is None or b is None):
        return "scheduling"
    if moved:
        return "timing"
    return "unexplained"


def _made(item) -> bool:
    """A record of a message its build made (nonsmp's log also holds the
    ones it suppressed: never made)."""
    return item is not None and not item[3].startswith("suppressed")


def _class_list(classes: dict) -> list[dict]:
    """One entry per class found, in ``CLASSES`` order, with its first message."""
    out = []
    for name, title, seed in CLASSES:
        e = classes.get(name)
        if e is None:
            continue
        d = e["first"]
        ex = d["b"] or d["a"]
        fates = ", ".join(
            f"{m} {it[3]}" for m, it in (("nonsmp", d["a"]), ("smp", d["b"])) if it is not None
        ) + "".join(
            f"; {m} did not make it"
            for m, it in (("nonsmp", d["a"]), ("smp", d["b"]))
            if it is None
        )
        out.append(
            {
                "class": name,
                "title": title,
                "count": e["count"],
                "nonsmp": e["nonsmp"],
                "smp": e["smp"],
                "seed": seed,
                "explore": f"smp-emu explore {RACES[name]}" if name in RACES else None,
                "example": {
                    "tracer": d["key"][0],
                    "tracee": d["key"][1],
                    "message": one_line(_show(ex[2])),
                    "fates": fates,
                    "queue_seq": d["b"][4][0] if d["b"] is not None else None,
                },
            }
        )
    return out


def _death_points(exits_b: dict, deaths_a: dict, la: dict, lb: dict) -> list[dict]:
    """The tracers whose death the two runs' records place after a different
    number of messages made for them."""
    deaths = []
    smp_deaths = {lb[p]: (seq, n) for p, (seq, n) in exits_b.items() if p in lb}
    nonsmp_deaths = {la[p]: n for p, n in deaths_a.items() if p in la}
    for name in sorted(set(smp_deaths) | set(nonsmp_deaths)):
        seq, n_smp = smp_deaths.get(name, (None, None))
        n_nonsmp = nonsmp_deaths.get(name)
        if n_smp != n_nonsmp:  # also: it died in one run only
            deaths.append({"tracer": name, "nonsmp": n_nonsmp, "smp": n_smp, "exit_seq": seq})
    return deaths


def _natural(name: str) -> list:
    """``churn[0].churner.10`` after ``churn[0].churner.9``."""
    return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"(\d+)", name)]


def one_line(text: str) -> str:
    """A message as dbg prints it, its wrapped lines joined."""
    return "".join(line.strip() for line in text.splitlines())


def _first_of_each_class(diffs: list, limit: int) -> list:
    """The differing messages in order, at most ``limit`` of each class."""
    seen: Counter = Counter()
    out = []
    for d in diffs:
        seen[d["class"]] += 1
        if seen[d["class"]] <= limit:
            out.append(d)
    return out


def death_text(d: dict) -> str:
    """One line on a tracer the two runs saw die at different points."""

    def when(n):
        return "did not die" if n is None else f"died after {n:,} messages made for it"

    return f"{d['tracer']}: in nonsmp it {when(d['nonsmp'])}, in smp it {when(d['smp'])}"


def message_causes(a, b, journal: tuple | None, limit: int = 20) -> dict | None:
    """Every message that differs between nonsmp run ``a`` (recorded with
    ``record_fates``) and smp run ``b``, whose journal ``journal_events``
    read, in its class; None when a run has no record to line up.  The
    first ``limit`` messages of each class are listed."""
    if a.fates is None or journal is None:
        return None
    la = full_labels(a.labels, a.lineage)
    lb = full_labels(b.labels, b.lineage)
    items_a, deaths_a = nonsmp_events(a.fates[0])
    items_b, exits_b = journal
    ga, gb = _by_stream(items_a, la), _by_stream(items_b, lb)
    diffs: list[dict] = []
    per_tracer: dict = {}
    reordered = 0
    for key in sorted(set(ga) | set(gb)):
        xa, xb = ga.get(key, []), gb.get(key, [])
        t = per_tracer.setdefault(key[0], {"nonsmp": 0, "smp": 0, "differ": 0})
        t["nonsmp"] += sum(1 for _, it in xa if not it[3].startswith("suppressed"))
        t["smp"] += len(xb)
        pairs, oa, ob = _align(xa, xb)
        # the same message in both, in another order among the others: not a
        # difference of what was made or of its fate (order across senders,
        # or exit signals sent to linked processes in pid order, pids
        # differing between the builds, is promised by neither)
        moved, oa, ob = _reordered(xa, xb, oa, ob)
        pairs += moved
        reordered += len(moved)
        renumbered, oa, ob = _reordered(xa, xb, oa, ob, _serial_free)
        for i, j in renumbered:
            diffs.append(
                {"key": key, "norm": xa[i][0], "a": xa[i][1], "b": xb[j][1], "serial": True}
            )
        for i, j in pairs:
            if xa[i][1][3] != xb[j][1][3]:
                diffs.append({"key": key, "norm": xa[i][0], "a": xa[i][1], "b": xb[j][1]})
        diffs += [{"key": key, "norm": xa[i][0], "a": xa[i][1], "b": None} for i in oa]
        diffs += [{"key": key, "norm": xb[j][0], "a": None, "b": xb[j][1]} for j in ob]
    # a SEQTRACE/SYSMON/SYSPROF message each build sent to another receiver
    where: dict = {}
    for d in diffs:
        side = "a" if d["a"] is not None else "b"
        where.setdefault((side, d["norm"]), set()).add(d["key"][0])
    for d in diffs:
        side, other = ("a", "b") if d["a"] is not None else ("b", "a")
        if where.get((other, d["norm"]), set()) - {d["key"][0]}:
            d["moved"] = True
    tracers = {k[0] for k in ga} | {k[0] for k in gb}
    deaths = [d for d in _death_points(exits_b, deaths_a, la, lb) if d["tracer"] in tracers]
    ctx = {
        "smp_exits": exits_b,
        "fake": a.summary["stats"].get("fake_schedule_pairs", 0),
        "moved_deaths": {x["tracer"].split("~")[0] for x in deaths},
    }
    classes: dict = {}
    # the messages one build made and the other did not (a message nonsmp
    # suppressed it never made), by type and by class
    made_only: dict = {"nonsmp": Counter(), "smp": Counter(), "by_class": {}}
    for d in diffs:
        c = _classify(d, ctx)
        d["class"] = c
        per_tracer[d["key"][0]]["differ"] += 1
        entry = classes.setdefault(c, {"count": 0, "nonsmp": 0, "smp": 0, "first": d})
        entry["count"] += 1
        if d["a"] is not None:
            entry["nonsmp"] += 1
        if d["b"] is not None:
            entry["smp"] += 1
        made_a, made_b = _made(d["a"]), _made(d["b"])
        if made_a != made_b:
            side, it = ("nonsmp", d["a"]) if made_a else ("smp", d["b"])
            made_only[side][it[0]] += 1
            by = made_only["by_class"].setdefault(c, {"nonsmp": 0, "smp": 0})
            by[side] += 1
    out = _class_list(classes)
    total = len(diffs)
    return {
        "classes": out,
        "total": total,
        "made_only": {
            "nonsmp": dict(made_only["nonsmp"]),
            "smp": dict(made_only["smp"]),
            "by_class": {
                name: made_only["by_class"][name]
                for name, _t, _s in CLASSES
                if name in made_only["by_class"]
            },
        },
        "timing_deaths": deaths,
        "tracers": [
            {"tracer": k, **v} for k, v in sorted(per_tracer.items(), key=lambda x: _natural(x[0]))
        ],
        "not_kept": a.fates[1],
        "reordered": reordered,
        "diffs": [
            {
                "class": d["class"],
                "tracer": d["key"][0],
                "tracee": d["key"][1],
                "message": one_line(_show((d["b"] or d["a"])[2])),
                "nonsmp": d["a"][3] if d["a"] is not None else None,
                "smp": d["b"][3] if d["b"] is not None else None,
                "queue_seq": d["b"][4][0] if d["b"] is not None else None,
            }
            for d in _first_of_each_class(diffs, limit)
        ],
    }
