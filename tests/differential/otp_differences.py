"""Where the real node (OTP 25) differs from OTP 17 on purpose, as rules.

The emulator follows the 17.x seed (``/work/shared/seed/erl_trace.c``); the
node the differential tests run is OTP 25.  Every difference between the two
that OTP made on purpose is one entry here: the release that changed it, the
seed line that builds the 17.x form, and a rule that rewrites the node's term
into the 17.x shape or removes an event 17.x never makes.  The rules run on
the node's messages only, before the noise rules of ``normalise.py``; a
message a rule changed or removed counts as a line that "differs only through
the table".  Any other difference fails the test: it is either an emulator
defect or a difference missing from this table.

Each entry was observed on the OTP 25 node in the scenario it names
(``observed_in``) and checked against the seed; ``verified`` says how the
17.x side was checked where the seed alone does not show it.  ``seed_line``
is None where the seed builds nothing of it (a BIF result).

A rule gets the node's messages of one scenario, in arrival order, and
returns them rewritten, one for each (``DROP`` for one 17.x never sends,
``Also((m, ...))`` for one 17.x follows with more); rules that need context
(the next event of the same tracee) look at the whole list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from smp.core.pretty import format_term
from smp.core.terms import Atom, Pid, Port, charlist, term_order_key

__all__ = ["Also", "BY_NAME", "DIFFERENCES", "DROP", "Difference", "apply_differences"]

_a = Atom
am_trace, am_trace_ts = _a("trace"), _a("trace_ts")
_TRACE_TAGS = (am_trace, am_trace_ts)

#: Marker a rule returns for a message that 17.x never sends.
DROP = object()


class Also(tuple):
    """What a rule returns for a node message that 17.x sends more beside:
    the messages 17.x sends in its place, in 17.x's order (the message
    itself among them)."""


@dataclass(frozen=True)
class Difference:
    name: str
    otp: str  # the OTP release that changed it
    seed_line: int | None  # the line of seed/erl_trace.c that builds the 17.x form
    observed_in: str  # the differential scenario where the node shows it
    summary: str
    verified: str  # how the 17.x side was checked beyond the seed line
    rule: Callable[[list], list]


def _per_message(fn: Callable) -> Callable[[list], list]:
    """A rule that rewrites (or drops, returning DROP) each message alone;
    ``fn`` returns None for a message it does not apply to."""

    def rule(msgs: list) -> list:
        out = []
        for m in msgs:
            r = fn(m)
            out.append(m if r is None else r)
        return out

    return rule


def _is_trace(m, what=None, size=None) -> bool:
    return (
        type(m) is tuple
        and len(m) >= 4
        and m[0] in _TRACE_TAGS
        and (what is None or m[2] == _a(what))
        and (size is None or len(m) - (m[0] is am_trace_ts) == size)
    )


# -- OTP 19: the spawned event ---------------------------------------------------------
def _spawned(m):
    # {trace, Child, spawned, Parent, {M, F, Args}}: the child's side of a spawn.
    if _is_trace(m, "spawned"):
        return DROP
    return None


def _getting_linked_at_spawn_link(msgs: list) -> list:
    # OTP 19 also tells a traced spawn_link child {trace, Child, getting_linked, Parent}
    # right after its spawned event; 17.x links the child silently.
    out, spawned_by = [], {}
    for m in msgs:
        if _is_trace(m, "spawned"):
            spawned_by[m[1]] = m[3]
        elif _is_trace(m, "getting_linked") and spawned_by.pop(m[1], None) == m[3]:
            out.append(DROP)
            continue
        elif type(m) is tuple and len(m) > 1:
            spawned_by.pop(m[1], None)
        out.append(m)
    return out


# -- OTP 19: garbage collection event names and the wordsize item -----------------------
_GC_NAMES = {
    _a("gc_major_start"): _a("gc_start"),
    _a("gc_minor_start"): _a("gc_start"),
    _a("gc_major_end"): _a("gc_end"),
    _a("gc_minor_end"): _a("gc_end"),
}


def _gc_names(m):
    if type(m) is tuple and len(m) >= 4 and m[0] in _TRACE_TAGS and m[2] in _GC_NAMES:
        info = [kv for kv in m[3] if not (type(kv) is tuple and kv[0] == _a("wordsize"))]
        return (m[0], m[1], _GC_NAMES[m[2]], info) + m[4:]
    return None


# -- OTP 19: the scheduler id after the MFA ------------------------------------------------
_SCHED = {_a(w) for w in ("in", "out", "in_exiting", "out_exiting", "out_exited")}


def _sched_id_last(m):
    # 25: {trace, P, in, MFA, SchedId}; 17: {trace, P, in, SchedId, MFA}.
    if type(m) is tuple and m and m[0] in _TRACE_TAGS and len(m) > 2 and m[2] in _SCHED:
        n = len(m) - (m[0] is am_trace_ts)
        if n == 5 and type(m[4]) is int and type(m[1]) is Pid:
            return m[:3] + (m[4], m[3]) + m[5:]
    return None


# -- OTP 19: port open and its link -----------------------------------------------------------
def _port_open_order(m):
    # 25: {trace, Port, open, Pid, Driver}; 17: {trace, Pid, open, Port, Driver}.
    if _is_trace(m, "open") and type(m[1]) is Port and type(m[3]) is Pid:
        return (m[0], m[3], m[2], m[1]) + m[4:]
    return None


def _link_at_open(what: str, port_first: bool) -> Callable[[list], list]:
    """A rule that drops the first ``what`` event about the link open_port
    made between a port and its opener, after the port's ``open`` (25's
    shape, ``{trace, Port, open, Pid, Driver}``): ``{trace, Port, what, Pid}``
    when ``port_first``, else ``{trace, Pid, what, Port}``."""

    def rule(msgs: list) -> list:
        out, opened = [], set()
        for m in msgs:
            if _is_trace(m, "open") and type(m[1]) is Port:
                opened.add((m[1], m[3]))
            elif _is_trace(m, what):
                link = (m[1], m[3]) if port_first else (m[3], m[1])
                if type(link[0]) is Port and link in opened:
                    opened.discard(link)
                    out.append(DROP)
                    continue
            out.append(m)
        return out

    return rule


# OTP 19 traces the opener's link to a port it opens on the port's side,
# {trace, Port, getting_linked, Owner}, and, for an opener traced with procs,
# on its own, {trace, Pid, link, Port} (erl_bif_port.c open_port); 17.x
# open_port_2 adds both links with erts_add_link and no trace (link/1 does
# trace {trace, Pid, link, Port}).
_port_getting_linked_at_open = _link_at_open("getting_linked", port_first=True)
_open_port_link = _link_at_open("link", port_first=False)


def _port_getting_unlinked(m):
    # {trace, Port, getting_unlinked, Pid}: 25 traces a port's side of unlink/1;
    # 17.x io.c port_unlink removes the link with no trace_port call.
    if _is_trace(m, "getting_unlinked") and type(m[1]) is Port:
        return DROP
    return None


# -- OTP 21: exit signals are handled by the receiver ----------------------------------------
def _killed_scheduled_in(msgs: list) -> list:
    # 25 schedules a process killed while it waits in normally ({trace, P, in, MFA})
    # and it takes the signal itself; 17.x marks it exiting first (erl_process.c
    # schedule(): erts_handle_pending_exit before the trace), so it comes in as
    # {trace, P, in_exiting, 0} (trace_sched_aux: exiting => 0).
    out = list(msgs)
    for i, m in enumerate(msgs):
        if not (_is_trace(m, "in") and type(m[1]) is Pid):
            continue
        nxt = next(
            (x for x in msgs[i + 1 :] if type(x) is tuple and len(x) > 1 and x[1] == m[1]), None
        )
        if nxt is not None and _is_trace(nxt, "exit") and nxt[3] == _a("killed"):
            out[i] = (m[0], m[1], _a("in_exiting"), 0) + m[4:]
    return out


def _getting_unlinked_first(msgs: list) -> list:
    # 25 handles a link's exit signal in the survivor: {trace, S, getting_unlinked, D}
    # and then the 'EXIT' message ({trace, S, 'receive', {'EXIT', D, R}}); 17.x
    # doit_exit_link queues the message first (send_exit_signal, whose
    # erts_queue_message traces the receive) and then traces getting_unlinked.
    out = list(msgs)
    for i, m in enumerate(msgs):
        if not (_is_trace(m, "getting_unlinked") and type(m[1]) is Pid):
            continue
        for j in range(i + 1, len(msgs)):
            x = msgs[j]
            if type(x) is tuple and len(x) > 1 and x[1] == m[1]:
                if (
                    _is_trace(x, "receive")
                    and type(x[3]) is tuple
                    and len(x[3]) == 3
                    and x[3][0] == _a("EXIT")
                    and x[3][1] == m[3]
                ):
                    out[i], out[j] = x, m
                break
    return out


# -- OTP 18: trace_info flag order ---------------------------------------------------------------
# 17.x erl_bif_trace.c builds the list with FLAG() calls that prepend, timestamp
# between garbage_collection and arity; OTP 18 moved the timestamp FLAG()s first
# (F_NOW_TS, F_STRICT_MON_TS, F_MON_TS), so 25 lists timestamp last.
_FLAG_ORDER_17 = [
    _a(n)
    for n in reversed(
        [
            "send",
            "receive",
            "set_on_spawn",
            "call",
            "procs",
            "set_on_first_spawn",
            "set_on_link",
            "set_on_first_link",
            "running",
            "exiting",
            "garbage_collection",
            "timestamp",
            "arity",
            "return_to",
            "silent",
            "scheduler_id",
            "ports",
            "running_ports",
            "running_procs",
        ]
    )
]


def _trace_info_order(m):
    # The scenarios report BIF results as {bif, trace_info, Result}.
    if (
        type(m) is tuple
        and len(m) == 3
        and m[0] == _a("bif")
        and m[1] == _a("trace_info")
        and type(m[2]) is tuple
        and len(m[2]) == 2
        and m[2][0] == _a("flags")
    ):
        flags = m[2][1]
        ordered = sorted(
            flags,
            key=lambda f: _FLAG_ORDER_17.index(f) if f in _FLAG_ORDER_17 else len(_FLAG_ORDER_17),
        )
        if ordered != flags:
            return (m[0], m[1], (m[2][0], ordered))
    return None


# -- OTP 21: the emulator's error reports go to the logger -----------------------------------------
def _logger_report(m):
    # 25: {log, error, "Error in process ~p with exit value:~n~p~n", [Pid, Reason],
    #      #{error_logger => #{emulator => true, tag => error}, gl => GL, pid => Pid, ...}}
    # to logger_proxy; 17.x utils.c do_send_to_logger: error_logger !
    # {notify, {error, GL, {emulator, "~s~n", [Text]}}} with Text formatted by
    # beam_emu.c terminate_proc: "Error in process ~w with exit value: ~w\n".
    if not (type(m) is tuple and len(m) == 5 and m[0] == _a("log") and m[1] == _a("error")):
        return None
    meta = dict(m[4])
    if dict(meta.get(_a("error_logger"), [])).get(_a("emulator")) != _a("true"):
        return None
    pid, reason = m[3]
    text = charlist(f"Error in process {format_term(pid)} with exit value: {format_term(reason)}\n")
    return (_a("notify"), (_a("error"), meta[_a("gl")], (_a("emulator"), charlist("~s~n"), [text])))


# -- OTP 19: the port's start callback is traced as 'open' -----------------------------------
def _port_start_where(m):
    # 25: {trace, Port, in|out, open} around the driver's start callback;
    # 17.x io.c erts_open_driver: trace_sched_ports_where(port, am_in|am_out, am_start).
    if (
        type(m) is tuple
        and len(m) == 4
        and m[0] in _TRACE_TAGS
        and type(m[1]) is Port
        and m[2] in (_a("in"), _a("out"))
        and m[3] == _a("open")
    ):
        return (m[0], m[1], m[2], _a("start"))
    return None


# -- OTP 21: seq_trace:print/2 takes any label ------------------------------------------
_BAD_LABEL_RESULT = (_a("error"), _a("badarg"))


def _print_any_label(msgs):
    # seq_print_bad_label prints with [{a, 1}, 1.0, 1, other] under label 1:
    # the first two are neither atom nor small integer, badarg in 17.x
    out, n = [], 0
    for m in msgs:
        if type(m) is tuple and len(m) == 3 and m[:2] == (_a("bif"), _a("seq_trace_print")):
            if n < 2 and m[2] == _a("false"):
                m = (m[0], m[1], _BAD_LABEL_RESULT)
            n += 1
        out.append(m)
    return out


# -- OTP 19: trace_info/2 of a port ------------------------------------------------------
def _trace_info_port(m):
    # {bif, trace_info_port, {flags | tracer, _}}: 17.x trace_info_2 is badarg
    if (
        type(m) is tuple
        and len(m) == 3
        and m[:2] == (_a("bif"), _a("trace_info_port"))
        and type(m[2]) is tuple
        and m[2][0] in (_a("flags"), _a("tracer"))
    ):
        return (m[0], m[1], _BAD_LABEL_RESULT)
    return None


DIFFERENCES: list[Difference] = [
    Difference(
        "getting_linked_at_spawn_link",
        "19.0",
        2023,
        "set_on_spawn_child",
        "a traced spawn_link child gets {trace, Child, getting_linked, Parent} after its "
        "spawned event; 17.x erl_create_process traces only the parent's link",
        "17.x erl_process.c erl_create_process calls trace_proc(parent, parent, am_link, ...) only",
        _getting_linked_at_spawn_link,
    ),
    Difference(
        "spawned_event",
        "19.0",
        2086,
        "set_on_spawn_child",
        "a traced child also gets {trace, Child, spawned, Parent, MFA}; 17.x traces only "
        "the parent's {trace, Parent, spawn, Child, MFA} (trace_proc_spawn)",
        "the seed has no spawned atom; trace_proc_spawn is 17.x's only spawn event",
        _per_message(_spawned),
    ),
    Difference(
        "gc_event_names",
        "19.0",
        2195,
        "garbage_collection",
        "gc_start/gc_end became gc_major_start/gc_minor_start and gc_major_end/gc_minor_end, "
        "and the info list gained {wordsize, N} in front of 17.x's 11 items",
        "seed trace_gc (line 2177) is called with am_gc_start/am_gc_end and builds these 11 tags",
        _per_message(_gc_names),
    ),
    Difference(
        "scheduler_id_after_mfa",
        "19.0",
        886,
        "running_scheduler_id",
        "with scheduler_id, 25 puts the scheduler id after the MFA "
        "({trace, P, in, MFA, SchedId}); 17.x puts it before ({trace, P, in, SchedId, MFA})",
        "seed trace_sched_aux TUPLE5(am_trace, pid, what, sched_id, mfa)",
        _per_message(_sched_id_last),
    ),
    Difference(
        "port_getting_linked_at_open",
        "19.0",
        2772,
        "port_open_closed",
        "25 traces the opener's link to a new port as {trace, Port, getting_linked, Pid}; "
        "17.x open_port links without a trace_port call",
        "the 17.x-era sources searched have no trace_port(..., am_getting_linked, ...) in "
        "open_port; it appears with the 19 tracer rework (trace_port with a flag argument)",
        _port_getting_linked_at_open,
    ),
    Difference(
        "open_port_link_trace",
        "19.0",
        None,
        "port_owner_exits",
        "25 traces the link open_port makes as {trace, Pid, link, Port} when the opener is "
        "traced with procs; 17.x makes that link without a trace",
        "17.x erl_bif_port.c open_port_2: erts_add_link on the port and on the process, no "
        "trace_proc(..., am_link, ...) (bif.c link_1 has one, under F_TRACE_PROCS)",
        _open_port_link,
    ),
    Difference(
        "port_getting_unlinked",
        "19.0",
        2772,
        "port_owner_exits",
        "25 traces a port's side of unlink/1 as {trace, Port, getting_unlinked, Pid}; 17.x "
        "unlinks a port without a trace_port call",
        "17.x io.c port_unlink (erts_port_unlink, port_sig_unlink) only removes the link; "
        "the 17.x trace_port calls are closed (io.c), register and unregister (register.c)",
        _per_message(_port_getting_unlinked),
    ),
    Difference(
        "port_open_subject",
        "19.0",
        2722,
        "port_open_closed",
        "the open event is about the port in 25 ({trace, Port, open, Pid, Driver}); 17.x "
        "sends {trace, Pid, open, Port, Driver}",
        "seed trace_port_open TUPLE5(am_trace, calling_pid, am_open, port, drv_name)",
        _per_message(_port_open_order),
    ),
    Difference(
        "killed_scheduled_in",
        "21.0",
        847,
        "killed_while_waiting",
        "a process killed while waiting is scheduled in normally in 25 and handles the exit "
        "signal itself ({trace, P, in, MFA}, then exit); 17.x handles the pending exit "
        "before the in trace, so it comes in as {trace, P, in_exiting, 0}",
        "17.x erl_process.c schedule(): erts_handle_pending_exit, then "
        "in_exiting if ERTS_PSFLG_EXITING; trace_sched_aux gives 0 for an exiting process",
        _killed_scheduled_in,
    ),
    Difference(
        "getting_unlinked_before_exit_message",
        "21.0",
        2023,
        "exit_unlinks_survivor",
        "a survivor trapping exits is traced getting_unlinked before the receive of the "
        "link's 'EXIT' message in 25; 17.x traces the receive first",
        "17.x erl_process.c doit_exit_link: send_exit_signal (erts_queue_message traces "
        "the receive), then trace_proc(p, rp, am_getting_unlinked, ...)",
        _getting_unlinked_first,
    ),
    Difference(
        "port_start_callback_where",
        "19.0",
        2840,
        "running_ports",
        "the in/out pair around a driver's start callback names it open in 25; 17.x names it start",
        "17.x io.c erts_open_driver: trace_sched_ports_where(port, am_in, am_start) before "
        "driver->start and am_out after; the seed's trace_sched_ports_where passes Where "
        "through as given",
        _per_message(_port_start_where),
    ),
    Difference(
        "trace_info_flag_order",
        "18.0",
        None,
        "trace_info_flags",
        "trace_info(P, flags) lists timestamp last in 25; 17.x lists it between arity and "
        "garbage_collection (erl_bif_trace.c FLAG() order)",
        "the seed does not build trace_info; 17.x erl_bif_trace.c trace_info_pid calls "
        "FLAG(F_TIMESTAMP) after FLAG(F_TRACE_GC), 18's calls FLAG(F_NOW_TS) first",
        _per_message(_trace_info_order),
    ),
    Difference(
        "emulator_error_report",
        "21.0",
        3102,
        "crash_report",
        "the emulator's crash report goes to the logger (on 25 through logger_proxy) as "
        "{log, error, Format, [Pid, Reason], Meta}; 17.x queues error_logger "
        '{notify, {error, GL, {emulator, "~s~n", [Text]}}} '
        "(erts_queue_error_logger_message)",
        '17.x utils.c do_send_to_logger builds {notify,{error,GL,{emulator,"~s~n",[Text]}}}; '
        'Text is beam_emu.c terminate_proc\'s "Error in process ~w with exit value: ~w\\n" '
        "(its format string is not in the sources searched; the shape decides the "
        "comparison)",
        _per_message(_logger_report),
    ),
]

DIFFERENCES += [
    Difference(
        "seq_trace_print_any_label",
        "21.0",
        None,
        "seq_print_bad_label",
        "seq_trace:print/2 with a label that is neither an atom nor a small integer "
        "answers false (or true) in 25; 17.x raises badarg",
        "17.x erl_bif_trace.c seq_trace_print_2: if (!(is_atom(BIF_ARG_1) || "
        "is_small(BIF_ARG_1))) BIF_ERROR(BIF_P, BADARG), before the token",
        _print_any_label,
    ),
    Difference(
        "trace_info_ports",
        "19.0",
        None,
        "trace_info_port",
        "trace_info(Port, flags | tracer) answers in 25; 17.x trace_info_2 takes on_load, "
        "an atom or a pid, or a tuple, and raises badarg for anything else",
        "17.x erl_bif_trace.c trace_info_2: is_atom(What) || is_pid(What) -> "
        "trace_info_pid, is_tuple(What) -> trace_info_func, else BIF_ERROR(p, BADARG)",
        _per_message(_trace_info_port),
    ),
]


# -- OTP 21: a process's links in a red-black tree ------------------------------------
# An exiting process signals its links in the order its link tree is swept,
# post-order.  17.x keeps the links in an AVL tree (erl_monitors.c
# erts_add_link, erts_sweep_links); OTP 21 moved them to a red-black tree
# (erl_monitor_link.c), so the same links are signalled in another order.  The
# shape depends on the whole history of the links; this rule covers the history
# of its scenario, seven links made in pid order (1 the least):
#   17.x AVL:            4(2(1,3), 6(5,7))             post-order 1,3,2,5,7,6,4
#   OTP 25 red-black:    2(1, 4(3, 6(5,7)))            post-order 1,3,5,7,6,4,2
#   (black 2 and 1; red 4; black 3 and 6; red 5 and 7: each ascending insert
#   goes right and recolours or rotates at the grandparent)
# A run the node sends in another order, or of another length, is left as it
# came, so any other history fails the comparison rather than pass unchecked.
_RB_SEVEN = (1, 3, 5, 7, 6, 4, 2)
_AVL_SEVEN = (1, 3, 2, 5, 7, 6, 4)


def _exit_send(m):
    """(sender, receiver) of a seq_trace send of a link's exit signal, or None."""
    if not (type(m) is tuple and len(m) >= 3 and m[0] == _a("seq_trace")):
        return None
    info = m[2]
    if not (type(info) is tuple and len(info) == 5 and info[0] == _a("send")):
        return None
    body = info[4]
    if type(body) is tuple and len(body) == 3 and body[0] == _a("EXIT") and body[1] == info[2]:
        return info[2], info[3]
    return None


def _link_sweep_order(msgs: list) -> list:
    out = list(msgs)
    i = 0
    while i < len(msgs):
        first = _exit_send(msgs[i])
        j = i
        while j < len(msgs) and (e := _exit_send(msgs[j])) is not None and e[0] == first[0]:
            j += 1
        run = msgs[i:j]
        if len(run) == len(_RB_SEVEN):
            tos = [m[2][3] for m in run]
            ranked = sorted(tos, key=term_order_key)
            if tuple(ranked.index(t) + 1 for t in tos) == _RB_SEVEN:
                for k, (m, rank) in enumerate(zip(run, _AVL_SEVEN, strict=True)):
                    info = m[2]
                    out[i + k] = (m[0], m[1], (*info[:3], ranked[rank - 1], info[4]), *m[3:])
        i = max(j, i + 1)
    return out


DIFFERENCES += [
    Difference(
        "link_sweep_order",
        "21.0",
        1135,
        "seq_exit_link_order",
        "an exiting process signals its links in the post-order of a red-black tree in 25, "
        "of an AVL tree in 17.x: seven links made in pid order get their exit signals "
        "(and their seq_trace sends, serials in that order) as 1,3,5,7,6,4,2 in 25 and "
        "1,3,2,5,7,6,4 in 17.x",
        "17.x erl_monitors.c erts_add_link (AVL insertion) and erts_sweep_links "
        "(post-order), called by erl_process.c erts_continue_exit_process with "
        "doit_exit_link; smp.core.linktree follows those functions, and "
        "tests/core/test_linktree.py pins the shape of each rotation",
        _link_sweep_order,
    ),
]


# -- OTP 21: link/1 of itself or of a process it is linked to ----------------------------
def _getting_linked_self(msgs: list) -> list:
    # 25's link_1 returns true at once for link(self()) after tracing the call;
    # 17.x goes on into insert_internal_link, whose rp is the caller itself:
    # no link, but {trace, P, getting_linked, P} after {trace, P, link, P}.
    out = []
    for i, m in enumerate(msgs):
        if _is_trace(m, "link") and m[1] == m[3] and type(m[1]) is Pid:
            made = (m[0], m[1], _a("getting_linked"), m[1]) + m[4:]
            nxt = next((x for x in msgs[i + 1 :] if _is_trace(x) and x[1] == m[1]), None)
            if nxt is None or nxt[:4] != made[:4]:
                out.append(Also((m, made)))
                continue
        out.append(m)
    return out


def _getting_linked_again(msgs: list) -> list:
    # 25 links a process it is linked to already with no signal (link_1:
    # erts_link_tree_lookup_create found the link); 17.x insert_internal_link
    # adds it again (erts_add_link changes nothing) and traces getting_linked
    # on the other process each time. The other's getting_linked in 25 (its
    # first link) gets one copy per later link/1 of the same process.
    # (P, O) -> the link/1 calls of each period between P's unlink/1 calls
    periods: dict = {}
    for m in msgs:
        if _is_trace(m, "link") and type(m[3]) is Pid and m[1] != m[3]:
            runs = periods.setdefault((m[1], m[3]), [0])
            runs[-1] += 1
        elif _is_trace(m, "unlink") and (m[1], m[3]) in periods:
            periods[(m[1], m[3])].append(0)
    got: dict = {}
    for m in msgs:
        if _is_trace(m, "getting_linked") and type(m[3]) is Pid:
            got[(m[3], m[1])] = got.get((m[3], m[1]), 0) + 1
    # 25's k-th getting_linked stands for the k-th period with a link/1 in it
    # (it may come after the unlink/1 that ends it: 25 signals links); a list
    # of 17.x's, one for each call already, is left alone
    todo = {
        pair: [n for n in runs if n]
        for pair, runs in periods.items()
        if got.get(pair, 0) != sum(runs)
    }
    out = []
    for m in msgs:
        if _is_trace(m, "getting_linked") and (m[3], m[1]) in todo and todo[(m[3], m[1])]:
            n = todo[(m[3], m[1])].pop(0)
            out.append(Also((m,) * n) if n > 1 else m)
            continue
        out.append(m)
    return out


# -- OTP 21: register/2 of a process that was sent kill --------------------------------
def _register_killed(msgs: list) -> list:
    # 25 registers a process another sent kill (it is still there, the kill a
    # signal it has not handled): {trace, V, register, N}, then at its exit
    # {trace, V, exit, killed} and {trace, V, unregister, N}. 17.x
    # erts_register_name finds no exiting process (erts_pid2proc without
    # ERTS_P2P_FLG_ALLOW_OTHER_X): badarg, nothing traced. A register whose
    # process's next event is exit killed, and that name's unregister, go.
    out, gone = [], set()
    for i, m in enumerate(msgs):
        if _is_trace(m, "register") and type(m[1]) is Pid:
            nxt = next((x for x in msgs[i + 1 :] if _is_trace(x) and x[1] == m[1]), None)
            if nxt is not None and _is_trace(nxt, "exit") and nxt[3] == _a("killed"):
                gone.add((m[1], m[3]))
                out.append(DROP)
                continue
        if _is_trace(m, "unregister") and (m[1], m[3]) in gone:
            gone.discard((m[1], m[3]))
            out.append(DROP)
            continue
        out.append(m)
    return out


DIFFERENCES += [
    Difference(
        "register_killed",
        "21.0",
        2023,
        "register_killed",
        "register/2 of a process another process sent kill: 25 registers it and traces "
        "register, then unregister at its exit; 17.x refuses it (badarg), nothing traced",
        "17.x register.c erts_register_name looks the process up with erts_pid2proc, which "
        "(erl_process_lock.h, no ERTS_P2P_FLG_ALLOW_OTHER_X) returns NULL for an exiting "
        "process: goto done, badarg",
        _register_killed,
    ),
    Difference(
        "getting_linked_self",
        "21.0",
        2023,
        "link_failures",
        "link(self()) of a process traced with procs: 25 traces {trace, P, link, P} alone; "
        "17.x also traces {trace, P, getting_linked, P}",
        "17.x bif.c link_1 calls insert_internal_link, which finds rp == p, makes no link "
        "and still calls trace_proc(p, rp, am_getting_linked, p->common.id) "
        "(vinoski/otp's OTP 17 snapshot, read through search)",
        _getting_linked_self,
    ),
    Difference(
        "getting_linked_again",
        "21.0",
        2023,
        "link_failures",
        "link/1 of a process linked already: 25 traces the caller's link alone; 17.x also "
        "traces {trace, Other, getting_linked, P} again on a traced Other",
        "17.x bif.c insert_internal_link: erts_add_link (a no-op for a link there) and then "
        "trace_proc(p, rp, am_getting_linked, ...) under IS_TRACED_FL(rp, F_TRACE_PROCS), "
        "with no check that the link was new",
        _getting_linked_again,
    ),
]


# -- OTP 21 (the signal rework): a link's kill ------------------------------------------
def _link_kill(msgs: list) -> list:
    # 17.x send_exit_signal ends a process that does not trap exits with
    # rsn = reason == am_kill ? am_killed : reason, so a link's kill (the
    # linked process exited kill) ends it killed, and its own links carry
    # killed on: a trapping one gets {'EXIT', X, killed}.  25 passes kill
    # along the links: X exits kill, and {'EXIT', X, kill} goes on.  In a
    # scenario one process at most calls exit(kill): every process that
    # exits kill after another did was ended by a link.
    out, first, relinked = [], None, set()
    for m in msgs:
        if _is_trace(m, "exit") and m[3] == _a("kill"):
            if first is None:
                first = m[1]
            elif m[1] != first:
                relinked.add(m[1])
                out.append(m[:3] + (_a("killed"),) + m[4:])
                continue
        if (
            _is_trace(m, "receive")
            and type(m[3]) is tuple
            and len(m[3]) == 3
            and m[3][0] == _a("EXIT")
            and m[3][1] in relinked
            and m[3][2] == _a("kill")
        ):
            out.append(m[:3] + ((m[3][0], m[3][1], _a("killed")),) + m[4:])
            continue
        out.append(m)
    return out


# -- OTP 21: link/1 to a process that was sent kill -----------------------------------
def _link_exiting(msgs: list) -> list:
    # 17.x insert_internal_link looks the process up with
    # ERTS_P2P_FLG_ALLOW_OTHER_X: one sent kill that has not exited yet is
    # linked ({trace, V, getting_linked, L} on a V traced for procs), and its
    # exit sends L killed.  25 answers the link with noproc.  A V the trace
    # shows exiting killed is such a process, and L's first 'EXIT' of V (or
    # its own exit) after link/1 says killed.
    killed = {m[1] for m in msgs if _is_trace(m, "exit") and m[3] == _a("killed")}
    linkers: dict = {}  # V -> the processes whose noproc from V is 17.x's killed
    waiting: dict = {}  # L -> V, from L's link/1 until L hears of V
    out = list(msgs)
    for i, m in enumerate(msgs):
        if _is_trace(m, "link") and m[3] in killed and m[1] != m[3]:
            waiting[m[1]] = m[3]
            continue
        v = waiting.get(m[1]) if _is_trace(m) else None
        if v is None:
            continue
        what = m[3] if len(m) > 3 else None
        if _is_trace(m, "receive") and what == (_a("EXIT"), v, _a("noproc")):
            out[i] = m[:3] + ((what[0], v, _a("killed")),) + m[4:]
        elif _is_trace(m, "exit") and what == _a("noproc"):
            out[i] = m[:3] + (_a("killed"),) + m[4:]
        else:
            continue
        del waiting[m[1]]
        linkers.setdefault(v, []).append(m)
    for i, m in enumerate(msgs):
        if _is_trace(m, "exit") and m[3] == _a("killed") and m[1] in linkers:
            made = [m[:2] + (_a("getting_linked"), x[1]) + m[4:] for x in linkers.pop(m[1])]
            out[i] = Also((*made, m))
    return out


DIFFERENCES += [
    Difference(
        "link_exiting",
        "21.0",
        None,
        "link_killed",
        "link/1 to a process another sent kill, before it exited: 25 answers noproc "
        "({'EXIT', V, noproc} to a trapping caller); 17.x links it, traces "
        "{trace, V, getting_linked, L}, and V's exit sends L killed",
        "17.x bif.c insert_internal_link: erts_pid2proc_opt(..., "
        "ERTS_P2P_FLG_ALLOW_OTHER_X) finds a process with a pending exit; erts_add_link "
        "on both and trace_proc(p, rp, am_getting_linked, ...); erl_process.c "
        "erts_continue_exit_process then sweeps the new link (doit_exit_link)",
        _link_exiting,
    ),
    Difference(
        "link_kill",
        "21.0",
        None,
        "link_kill_chain",
        "a process that does not trap exits, ended by a link's kill (the linked process "
        "exited kill): 25 ends it with kill and passes kill on to its links; 17.x ends it "
        "with killed ({trace, V, exit, killed}) and a trapping link gets {'EXIT', V, killed}",
        "17.x erl_process.c send_exit_signal: rsn = reason == am_kill ? am_killed : reason, "
        "used for the exit of a receiver that does not trap exits (a link's signal carries "
        "ERTS_XSIG_FLG_IGN_KILL, so a trapping one gets the kill as a message); "
        "doit_exit_link sends each link the exiting process's reason",
        _link_kill,
    ),
]

BY_NAME = {d.name: d for d in DIFFERENCES}


def apply_differences(msgs: list) -> tuple[list, int, dict]:
    """Rewrite the node's messages into the 17.x shape.

    Returns the rewritten messages, how many of the node's messages a rule
    changed or removed, and per rule the number of messages it touched."""
    cur = [[m, False] for m in msgs]
    used: dict[str, int] = {}
    for d in DIFFERENCES:
        live = [c for c in cur if c[0] is not DROP]
        new = d.rule([c[0] for c in live])
        n = 0
        for c, m in zip(live, new, strict=True):
            if m is DROP or m != c[0]:
                n += 1
                c[0], c[1] = m, True
        if n:
            used[d.name] = n
        # (a message 17.x follows with more becomes those messages, each changed)
        cur = [[x, c[1]] for c in cur for x in (c[0] if type(c[0]) is Also else (c[0],))]
    changed = sum(1 for c in cur if c[1])
    return [c[0] for c in cur if c[0] is not DROP], changed, used
