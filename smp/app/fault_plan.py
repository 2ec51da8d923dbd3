"""A run's fault plan: the scenario's faults as timed events for the controller.

Runs in the user's process, before the run.  ``_plan`` expands each fault
into its firings and names the replacement tracers they need;
``_resolve_plan`` follows which tracer is current at each event and gives
the controller (``smp.app.fault_steps.controller``) its plan and ``execute``
one record per event; ``_lanes`` splits the plan among controllers, one per
tracer or group the faults act on; ``_not_fired`` lists the faults a
finished workload left unfired.
"""

from __future__ import annotations

import random

from smp.app.run_setup import _atoms, _monitor_opts, _profile_opts
from smp.core.terms import Atom, atom_of

A = Atom


def _not_fired(events: list, now: float) -> list[dict]:
    """The faults (one entry each) with a planned time after ``now``."""
    out: dict = {}
    for at, f, _k, _ in events:
        if at > now:
            key = id(f)
            if key not in out:
                out[key] = {
                    "where": f.get("where"),
                    "action": f["action"],
                    "at": f["at"],
                    "first_missed_s": round(at, 6),
                    "missed": 0,
                    "why": f"the workload was over at {now:.2f} s",
                }
            out[key]["missed"] += 1
    return list(out.values())


def _lanes(plan: list, events: list, sc: dict) -> list[list]:
    """``plan`` (``_resolve_plan``'s) split into lanes, each in time order, one
    controller each: the events on one tracer's line (a kill_tracer of its
    name, a replace_* of the role it holds, each acting on whichever tracer
    of that line is current then: the plan follows them in time order) or
    on one group's processes (kill_processes, set_sensitive).  An event
    acts on one line or group alone (the roles a kill_tracer moves are held
    by its victim's line), so lanes do not wait for each other: a fault
    that waits (for its victim's ``'EXIT'``, or for BIFs served late) holds
    the faults after it in its own lane alone, where it must, the later
    ones acting on the tracer it put in place."""
    role = {
        "replace_seq_tracer": (sc.get("seq_trace") or {}).get("tracer"),
        "replace_monitor": (sc.get("system_monitor") or {}).get("monitor"),
        "replace_profiler": (sc.get("system_profile") or {}).get("profiler"),
    }
    lanes: dict = {}
    for entry in plan:
        f = events[entry[1]][1]
        a = f["action"]
        if a in ("kill_processes", "set_sensitive"):
            key = ("group", f["target"])
        else:
            key = ("tracer", role[a] if a in role else f["target"])
        lanes.setdefault(key, []).append(entry)
    return list(lanes.values())


def _plan(sc: dict, faults: list, rng: random.Random, tracers: dict):
    """Expand the faults into timed events; name the replacement collectors needed.

    Runs in the user's process.  Returns ``(events, new_tracers)`` where each
    event is ``(at, fault, k, replacement_name_or_None)``, in time order (the
    replacements of one tracer are numbered in that order: ``t~1`` takes over
    first), and ``new_tracers`` lists ``(name, kind)``: a collector, or for
    replace_profiler a memory port, since a profiler process would wake its
    own scheduler with every message it got and a run profiling schedulers
    would never become quiet.
    """
    timed = []
    for f in faults:
        for k in range(f["times"]):
            timed.append((f["at"] + k * f["every"], f, k))
    timed.sort(key=lambda e: e[0])
    events = []
    new: list[tuple[str, str]] = []
    serial: dict[str, int] = {}
    for at, f, k in timed:
        repl = None
        if f["action"] in ("replace_seq_tracer", "replace_monitor", "replace_profiler") or (
            f["action"] == "kill_tracer" and f["replace"]
        ):
            base = f["target"] or {
                "replace_seq_tracer": "seq",
                "replace_monitor": "monitor",
                "replace_profiler": "profiler",
            }.get(f["action"], "tracer")
            serial[base] = serial.get(base, 0) + 1
            repl = f"{base}~{serial[base]}"
            new.append((repl, "memory" if f["action"] == "replace_profiler" else "collector"))
        events.append((at, f, k, repl))
    return events, new


def _resolve_plan(events, tracers: dict, group_pids: dict, sc: dict) -> tuple[list, list]:
    """Turn timed events into the controller's plan, following which tracer
    is current, and one record per event (what ``execute`` reports).

    Returns ``(plan, records)``: ``plan`` is ``[(at, index, op, args), ...]``
    for ``controller``; ``records[index]`` names the event (``where``,
    ``action``, ``target``, ``victim``: the tracer a kill_tracer kills, which
    is the last replacement of its target, ``replacement``, ``planned_at``,
    ``may_fail``).  The tracees a kill_tracer moves are the processes of the
    groups whose tracer the victim is, or every group's when the victim
    traces ``new``, ``all`` or ``existing`` processes, each with the flags the
    set-up gave it.  Processes a workload spawns itself are not among them: a
    victim's tracee outside the groups keeps its dead tracer (a ``new`` or
    ``all`` role moves the default tracing, for processes spawned later)."""
    rng = random.Random(sc["seed"] + 1)
    # who each role's tracer is, by tracer name; replaced as the plan goes
    cur = {name: name for name in tracers}
    seq = sc["seq_trace"]["tracer"] if sc["seq_trace"] else None
    mon = sc["system_monitor"]["monitor"] if sc["system_monitor"] else None
    prof = sc["system_profile"]["profiler"] if sc["system_profile"] else None
    every_pid = [p for pids in group_pids.values() for p in pids]
    plan, records = [], []
    for idx, (at, f, _k, repl) in enumerate(events):
        a = f["action"]
        rec = {
            "where": f.get("where"),
            "action": a,
            "target": f.get("target"),
            "victim": None,
            "replacement": repl,
            "planned_at": round(at, 6),
            "may_fail": bool(f.get("may_fail", False)),
        }
        if a == "kill_tracer":
            victim = cur.get(f["target"], f["target"])
            rec["victim"] = victim
            held: dict = {}  # pid -> its flags, as the set-up traced it
            roles: list = []
            for t in sc["trace"]:
                if cur.get(t["tracer"]) == victim:
                    for pid in every_pid:
                        held.setdefault(pid, []).extend(t["flags"])
                    if t["pids"] in ("new", "all"):
                        roles.append(("new", (_atoms(t["flags"]),)))
            for g in sc["groups"]:
                if g["tracer"] is not None and cur.get(g["tracer"]) == victim and g["trace"]:
                    for pid in group_pids[g["name"]]:
                        held.setdefault(pid, []).extend(g["trace"])
            for p in sc["patterns"]:
                if "meta" in p["flags"] and cur.get(p["meta_tracer"]) == victim:
                    mfa = tuple(_atom_or(x) for x in p["mfa"])
                    roles.append(("pattern", (mfa, p["match_spec"])))
            if seq and cur.get(seq) == victim:
                roles.append(("seq_tracer", ()))
            if mon and cur.get(mon) == victim:
                roles.append(("system_monitor", (_monitor_opts(sc["system_monitor"]),)))
            if prof and cur.get(prof) == victim:
                roles.append(("system_profile", (_profile_opts(sc["system_profile"]),)))
            replace = None
            if repl:
                replace = (tracers[repl], roles)
                for name, c in list(cur.items()):
                    if c == victim:
                        cur[name] = repl
            moves = [(pid, _atoms(dict.fromkeys(fl))) for pid, fl in held.items()]
            plan.append((at, idx, "kill_tracer", (tracers[victim], moves, replace)))
        elif a == "replace_seq_tracer":
            plan.append((at, idx, "replace", ("seq_tracer", tracers[repl], ())))
            rec["victim"], cur[seq] = cur[seq], repl
        elif a == "replace_monitor":
            opts = (_monitor_opts(sc["system_monitor"]),)
            plan.append((at, idx, "replace", ("system_monitor", tracers[repl], opts)))
            rec["victim"], cur[mon] = cur[mon], repl
        elif a == "replace_profiler":
            opts = (_profile_opts(sc["system_profile"]),)
            plan.append((at, idx, "replace", ("system_profile", tracers[repl], opts)))
            rec["victim"], cur[prof] = cur[prof], repl
        elif a in ("kill_processes", "set_sensitive"):
            rec["count"] = f["count"]  # (asked: the group may have fewer alive)
            pids = list(group_pids[f["target"]])
            rng.shuffle(pids)  # the order the controller tries them in
            if a == "kill_processes":
                plan.append((at, idx, a, (pids, f["count"], A(f["reason"]))))
            else:
                # an atom: a Python bool is no Erlang term (a traced receive journals it)
                value = A("true") if f["value"] else A("false")
                plan.append((at, idx, a, (pids, f["count"], value)))
        records.append(rec)
    return plan, records


_atom_or = atom_of
