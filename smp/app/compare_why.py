"""Why a row of ``compare``'s side by side differs between the two runs.

Runs in the user's process.  ``WHY`` gives, per row, the seed's ``#ifdef
ERTS_SMP`` branch that makes nonsmp and smp differ there; ``explain_row``
puts a differing row's "why" together from the counters that differ (a
cause whose counter is zero is not named); ``_rest`` says what explains a
difference no counter does in this scenario: faults at wall-clock times, a
time-bounded workload, or the schedulers' interleaving.
"""

from __future__ import annotations

# Why the two builds differ, per row of the comparison (matched by prefix,
# most specific first), from the seed's #ifdef ERTS_SMP branches.
WHY = [
    (
        "suppressed receiver_dead",
        "nonsmp looks the tracer up when a message is made "
        "(ERTS_GET_TRACER_REF): a dead tracer resets the tracee and nothing is made",
    ),
    (
        "suppressed not_tracer",
        "nonsmp: a tracer without the tracer mark resets the tracee "
        "when a message is made (ERTS_GET_TRACER_REF)",
    ),
    (
        "suppressed port_closed",
        "nonsmp: send_to_port finds the trace port closed, resets the tracee and makes nothing",
    ),
    (
        "suppressed sender_is_receiver",
        "nonsmp: monitor_*/profile_send never make a message about the monitor or profiler itself",
    ),
    (
        "dropped receiver_dead",
        "smp makes the message without looking at the tracer; the "
        "dispatcher finds the receiver dead (sys_msg_dispatcher_func) and the tracee keeps its "
        "flags until it is next scheduled in (erts_check_my_tracer_proc)",
    ),
    (
        "dropped not_tracer",
        "smp: the dispatcher drops a TRACE message whose receiver lost the tracer mark",
    ),
    ("dropped port_closed", "smp: the dispatcher finds the port receiver closed"),
    (
        "dropped sender_is_receiver",
        "smp: the dispatcher drops SYSMON/SYSPROF messages from "
        "the monitor or profiler itself (from == receiver)",
    ),
    (
        "dropped nil_sender_nil_receiver",
        "smp: exiting_reset sets the profiler to NIL and "
        "profile_scheduler messages (from NIL) then meet from == receiver: dropped quietly",
    ),
    (
        "dropped no_receiver",
        "smp resolves the seq tracer, monitor and profiler at dispatch "
        "time; when it is gone, sys_msg_disp_failure resets it (nonsmp resets at make time)",
    ),
    ("dropped scheduler_lost", "smp: the receiver lived on a scheduler that died"),
    (
        "tracer_checks_reset",
        "erts_check_my_tracer_proc exists only in smp: a tracee whose "
        "tracer died is reset at its next schedule-in",
    ),
    (
        "fake_schedule_pairs",
        "do_send_schedfix_to_port exists only #ifndef ERTS_SMP: a heavy "
        "port write gives a fake out/in pair; smp never fakes schedules",
    ),
    (
        "dropped no_error_logger",
        "no process is registered as error_logger: the error report "
        "is printed on stderr and dropped (sys_msg_disp_failure)",
    ),
    (
        "latency",
        "only smp has a queue between making and delivering (make-to-dispatch "
        "latency); nonsmp delivers at once",
    ),
    (
        "throughput",
        "the builds deliver differently: synchronously in one process (nonsmp) or "
        "through the dispatcher process (smp)",
    ),
    (
        "elapsed",
        "the builds deliver differently: synchronously in one process (nonsmp) or "
        "through the dispatcher process (smp)",
    ),
]
ORDER_NOTE = (
    "per-tracee order holds at every tracer in both builds; the global order differs "
    "in smp, where the dispatcher interleaves the schedulers' batches, and timestamps "
    "are taken when the dispatcher queues a message (under smq_mtx), not when it is made"
)


def why(what: str) -> str | None:
    """Why the seed makes row ``what`` differ between nonsmp and smp."""
    for prefix, text in WHY:
        if what.startswith(prefix):
            return text
    return None


# ---------------------------------------------------------------- why, from the counters
def _drops(t: dict, kind: str, typ: str | None) -> dict:
    """``{reason: n}`` of ``dropped_by_reason``/``suppressed_by_reason``, for one type or all."""
    out = {}
    for r, by_type in (t.get(kind) or {}).items():
        n = sum(by_type.values()) if typ is None else by_type.get(typ, 0)
        if n:
            out[r] = n
    return out


def _count(t: dict, key: str, typ: str | None) -> int:
    if typ is None:
        return t.get(key, 0)
    return (t.get(f"{key}_by_type") or {}).get(typ, 0)


def _fake_part(ta, tb, ma, mb, typ) -> tuple[int, str | None]:
    """How much of a made/delivered difference nonsmp's fake schedule pairs make."""
    if typ not in (None, "TRACE"):
        return 0, None
    fa, fb = ta.get("fake_schedule_pairs", 0), tb.get("fake_schedule_pairs", 0)
    if fa == fb:
        return 0, None
    n = 2 * (fa - fb)
    who = ma if n > 0 else mb
    return n, (
        f"{abs(n):,} are the fake out/in pairs {who} sent after heavy port writes "
        f"(fake_schedule_pairs {fa:,} vs {fb:,})"
    )


def _sysprof_part(ta, tb, ma, mb, typ, schedulers) -> tuple[int, str | None]:
    """How much of a delivered difference is profile messages of a different
    number of schedulers."""
    if typ not in (None, "SYSPROF") or not schedulers or schedulers[0] == schedulers[1]:
        return 0, None
    n = _count(ta, "delivered", "SYSPROF") - _count(tb, "delivered", "SYSPROF")
    if not n:
        return 0, None
    return n, (
        f"{abs(n):,} {'more' if n > 0 else 'fewer'} SYSPROF messages delivered by {ma}: "
        f"profile_scheduler sends one whenever a scheduler goes active or inactive, and "
        f"{ma} has {schedulers[0]} scheduler(s), {mb} {schedulers[1]}"
    )


def _made_from_records(xa: int, xb: int, ma: str, mb: str, typ, made_only: dict) -> str:
    """Why run a (nonsmp) made ``xa`` messages and run b (smp) ``xb``: the
    messages only one of them made, lined up from both runs' records
    (``compare_causes.message_causes``), by class."""
    na, nb = (
        sum(made_only[m].values()) if typ is None else made_only[m].get(typ, 0)
        for m in ("nonsmp", "smp")
    )
    more = ma if xa > xb else mb
    text = (
        f"{more} made {abs(xa - xb):,} more: {na:,} made by {ma} only and {nb:,} by {mb} "
        f"only, lined up from both runs' records"
    )
    by = made_only.get("by_class") or {}
    if by and (typ is None or set(made_only["nonsmp"]) | set(made_only["smp"]) <= {typ}):
        text += (
            " (by class, below: "
            + "; ".join(f"{c} {ma} {v['nonsmp']:,}, {mb} {v['smp']:,}" for c, v in by.items())
            + ")"
        )
    off = (xa - xb) - (na - nb)
    if off:
        text += (
            f"; {abs(off):,} {'more' if off > 0 else 'fewer'} made by {ma} than the records "
            f"hold (nonsmp keeps the fates of its first million messages)"
        )
    return text


def _delivered_parts(ta: dict, tb: dict, ma: str, mb: str, typ, parts: list) -> int:
    """delivered = made - dropped - queued in each mode: the difference in
    delivered is those three's (the made row says why made differs), each
    added to ``parts``; returns what they leave unexplained (0 when the
    counters balance).  201 more delivered, with 196 more dropped in the
    other mode and 5 fewer made, was said to have "no counter for it"."""
    made_a, made_b = _count(ta, "made", typ), _count(tb, "made", typ)
    if made_a != made_b:
        parts.append(f"made: {ma} {made_a:,}, {mb} {made_b:,} (the made row says why)")
    da, db = _drops(ta, "dropped_by_reason", typ), _drops(tb, "dropped_by_reason", typ)
    for r in sorted(set(da) | set(db)):
        if da.get(r, 0) != db.get(r, 0):
            parts.append(f"dropped {r}: {ma} {da.get(r, 0):,}, {mb} {db.get(r, 0):,}")
    qa, qb = _count(ta, "queued", None), _count(tb, "queued", None)
    if typ is None and qa != qb:
        parts.append(f"still queued at the end: {ma} {qa:,}, {mb} {qb:,}")
    dq = qa - qb if typ is None else 0
    dd = _count(ta, "delivered", typ) - _count(tb, "delivered", typ)
    return dd - (made_a - made_b) + (sum(da.values()) - sum(db.values())) + dq


def explain_row(
    what: str,
    ta: dict,
    tb: dict,
    ma: str,
    mb: str,
    rest: str,
    schedulers: tuple | None = None,
    made_only: dict | None = None,
) -> str | None:
    """Why row ``what`` differs, from the counters of run a (``ta``) and b
    (``tb``); ``rest`` says what explains a difference no counter does;
    ``schedulers`` the two runs' scheduler counts; ``made_only`` (run a
    nonsmp, b smp, both recorded): the messages only one made, from the
    records, which then explain a difference in what was made (the fates
    of the messages both made do not)."""
    words = what.split()
    head = words[0]
    if head == "made" and len(words) <= 2 and made_only is not None:
        typ = words[1] if len(words) == 2 else None
        return _made_from_records(
            _count(ta, head, typ), _count(tb, head, typ), ma, mb, typ, made_only
        )
    if head in ("made", "delivered") and len(words) <= 2:
        typ = words[1] if len(words) == 2 else None
        xa, xb = _count(ta, head, typ), _count(tb, head, typ)
        more = ma if xa > xb else mb
        parts = []
        fake, fake_text = _fake_part(ta, tb, ma, mb, typ)
        if head == "made":
            da, db = _drops(ta, "dropped_by_reason", typ), _drops(tb, "dropped_by_reason", typ)
            for r in sorted(set(da) | set(db)):
                if da.get(r, 0) != db.get(r, 0):
                    parts.append(f"dropped {r}: {ma} {da.get(r, 0):,}, {mb} {db.get(r, 0):,}")
            sa, sb = (
                _drops(ta, "suppressed_by_reason", typ),
                _drops(tb, "suppressed_by_reason", typ),
            )
            for r in sorted(set(sa) | set(sb)):
                parts.append(
                    f"suppressed {r} (never made): {ma} {sa.get(r, 0):,}, {mb} {sb.get(r, 0):,}"
                )
            qa, qb = _count(ta, "queued", None), _count(tb, "queued", None)
            if typ is None and qa != qb:
                parts.append(f"still queued at the end: {ma} {qa:,}, {mb} {qb:,}")
            dd = _count(ta, "delivered", typ) - _count(tb, "delivered", typ)
        else:
            dd = _delivered_parts(ta, tb, ma, mb, typ, parts)
            fake, fake_text = 0, ""  # (in the made row)
        if fake_text:
            parts.append(fake_text)
        prof, prof_text = (
            _sysprof_part(ta, tb, ma, mb, typ, schedulers) if head == "made" else (0, "")
        )
        if prof_text:
            parts.append(prof_text)
        left = dd - fake - prof
        if left:
            parts.append(
                f"{abs(left):,} {'more' if left > 0 else 'fewer'} delivered by {ma} "
                f"than {mb} with no counter for it: {rest}"
            )  # (for delivered: what made, dropped and queued leave over)
        return f"{more} {head} {abs(xa - xb):,} more" + (": " + "; ".join(parts) if parts else "")
    if what in ("dropped", "suppressed"):
        kind = f"{what}_by_reason"
        da, db = _drops(ta, kind, None), _drops(tb, kind, None)
        parts = [
            f"{r}: {ma} {da.get(r, 0):,}, {mb} {db.get(r, 0):,}"
            for r in sorted(set(da) | set(db))
            if da.get(r, 0) != db.get(r, 0)
        ]
        return "; ".join(parts) or None
    if what == "queued":
        return (
            "messages still in the dispatcher's queue when the run ended (interrupted or timed out)"
        )
    if what == "messages_sent":
        return f"the processes sent a different number of messages: {rest}"
    return why(what)


def _rest(scenario: dict | None, sa: dict, sb: dict) -> str:
    """What explains the differences no counter does, for this scenario."""
    faults = (scenario or {}).get("faults") or []
    if faults:
        times = ", ".join(f"{f['action']} at {f['at']:g} s" for f in faults[:3])
        return (
            f"the scenario's faults fire at wall-clock times ({times}"
            + (", ..." if len(faults) > 3 else "")
            + f") and the runs took "
            f"{sa['elapsed_s']:.2f} s ({sa['mode']}) and {sb['elapsed_s']:.2f} s "
            f"({sb['mode']}), so they hit different points of the work"
        )
    d = (scenario or {}).get("duration") or {}
    if d.get("seconds"):
        return (
            f"the workload is time-bounded ({d['seconds']:g} s): each mode did as much work "
            f"as it managed in that time"
        )
    return (
        "the schedulers' interleaving differs between the modes (see the messages only one "
        "mode made)"
    )
