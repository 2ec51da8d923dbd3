"""A scenario's ``[[expect]]`` clauses: checked when the file is read, judged after a run.

Runs in the user's process (and in each ``--jobs`` worker of ``smp-emu
explore``).  ``_check_expect`` checks the clauses when ``parse_scenario``
reads the file: each takes its kind's keys only (``EXPECT_KEYS``), names a
tracer that keeps what it receives and a group whose processes send
numbered messages.  After a run ``check_expect`` judges each clause against
what the run recorded, and ``expect_checks`` makes each a user predicate
that ``smp.sim`` calls on every explored outcome; both first put what they
judge in one shape, ``_View``.
"""

from __future__ import annotations

import re
from collections import Counter

from smp.app.run_setup import role_label
from smp.app.run_summary import port_drops
from smp.app.scenario_checks import _Checker
from smp.app.scenario_schema import EXPECT_KEYS
from smp.app.workload_registry import WORKLOADS
from smp.core.pretty import format_term
from smp.core.terms import Atom, Pid

_TRACE, _TRACE_TS = Atom("trace"), Atom("trace_ts")
_SEND, _RECEIVE = Atom("send"), Atom("receive")

#: the keys each kind of clause must have
_EXPECT_REQUIRED = {
    "receives_every": ("tracer", "group"),
    "order": ("tracer",),
    "count": ("tracer",),
}
#: workloads whose processes send no numbered (Tag, Sender, Seq) messages
_UNNUMBERED = ("calls", "gc")


def _a(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _check_expect(c: _Checker, sc: dict, given: list) -> None:
    """``[[expect]]``: each clause takes its kind's keys only (``EXPECT_KEYS``),
    names a tracer that keeps what it receives and a group whose processes
    send numbered messages; ``min <= max``.  Each clause gets its ``where``
    (``file:line``), which the run's report names."""
    tracers = {t["name"]: t for t in sc["tracers"]}
    groups = {g["name"]: g for g in sc["groups"]}
    for i, e in enumerate(sc["expect"]):
        path = ("expect", i)
        kind = e["kind"]
        mine = EXPECT_KEYS[kind]
        for k in given[i]:
            if k != "kind" and k not in mine:
                c.fail(
                    path + (k,),
                    f"{k!r} is no key of {_a(kind)} {kind} clause "
                    f"(its keys: kind, {', '.join(mine)})",
                )
        for k in _EXPECT_REQUIRED.get(kind, ()):
            if e[k] is None:
                c.fail(path, f"{_a(kind)} {kind} clause needs {k!r}")
        if "tracer" in mine:
            name = e["tracer"]
            if name not in tracers:
                c.fail(
                    path + ("tracer",),
                    f"unknown tracer {name!r} (tracers: {', '.join(tracers) or 'none'})",
                )
            t = tracers[name]
            if t["kind"] == "null" or (t["kind"] == "ip" and not t["print"]):
                what = "a null port" if t["kind"] == "null" else "an ip port with print = false"
                c.fail(
                    path + ("tracer",),
                    f"tracer {name!r} is {what}: the run keeps nothing it receives to check",
                )
        if kind == "receives_every":
            g = groups.get(e["group"])
            if g is None:
                c.fail(
                    path + ("group",),
                    f"unknown group {e['group']!r} (groups: {', '.join(groups)})",
                )
            if g["workload"] in _UNNUMBERED:
                c.fail(
                    path + ("group",),
                    f"group {g['name']!r} runs the {g['workload']} workload, which sends no "
                    "numbered messages: nothing for receives_every to count",
                )
        if kind == "count":
            if "min" not in given[i] and "max" not in given[i]:
                c.fail(path, "a count clause needs 'min', 'max' or both")
            if e["max"] is not None and e["max"] < e["min"]:
                c.fail(path + ("max",), f"must be >= min ({e['min']}), not {e['max']}")
        e["where"] = c.where(path)


# ---------------------------------------------------------------- expect clauses
# A scenario's ``[[expect]]`` clauses, checked against what a run recorded
# (``check_expect``) or against a simulated outcome (``expect_checks``).  Both
# are first put in one shape, ``_View``: per tracer what it received and its
# numbered workload messages, the drop counts, and the groups' processes.

#: a trace message about a numbered workload message, as an explored outcome
#: writes it (pids as roles): tracee, event, the message's tag, sender and number
_NUMBERED_TEXT = re.compile(
    r"\{trace(?:_ts)?,([^,{}]+),(send|'receive'),"
    r"\{(?:[a-z][A-Za-z0-9_@]*|'(?:[^'\\]|\\.)*'),([^,{}]+),(-?\d+)[,}]"
)
_LABEL = re.compile(r"^(?P<group>.*)\[(?P<i>\d+)\]\.(?P<role>\w+)$")


def _last_seq(workload: str, role: str, params: dict, ops: int) -> int | None:
    """The number of the last (Tag, Sender, Seq) message a ``role`` process of
    ``workload`` sends in a run of ``ops`` operations, numbered from 0 (the
    bodies in ``smp.app.workloads``), or None when it sends none."""
    if workload == "ping_pong":
        return {"ping": ops, "pong": ops - 1}.get(role)  # the pings and a stop; a pong each
    if workload in ("ring", "seq_chain") and (role == "head" or role.startswith("member")):
        return ops  # each token passed on, and the stop
    if workload == "fan_in" and role.startswith("sender"):
        return ops  # the casts and a done
    if workload == "churn" and role == "churner":
        return ops * params["burst"]  # burst requests an operation, and a stop
    return None


class _RoleEnv:
    """A workload's set-up environment that spawns nothing: ``_roles`` reads
    the roles the set-up would give its processes."""

    ops = secs = 0
    vm = rng = deadline = None

    def __init__(self):
        self._n = 0

    def spawn(self, *args, **kw):
        self._n += 1
        return self._n

    def counter(self) -> int:
        return self.spawn()

    def place(self, g):
        return None

    def define_calls(self):
        pass


def _roles(g: dict) -> list[str]:
    """The labels (``pp[0].ping``) of group ``g``'s processes, as execute gives them."""
    w = WORKLOADS[g["workload"]]
    env = _RoleEnv()
    return [
        role_label(g, i, role)
        for i in range(g["count"])
        for role, _ in w.setup(env, g, g["params"])
    ]


class _View:
    """What the clauses are checked against.  ``received``: tracer -> the
    number of messages it got; ``numbered``: tracer -> ``(tracee, event,
    sender, seq)`` of each message about a numbered workload message
    (processes as keys: pids of a run, roles of an explored outcome);
    ``seen``: key -> the highest number the key's process is seen to have
    sent anywhere; ``procs``: group -> ``[(key, role)]``; ``drops``: reason ->
    count; ``arrived_dead``: messages delivered to a receiver that was dead
    when they reached it (lost, but no drop); ``stopped``: groups whose
    processes may have stopped early; ``ops``: each workload process's
    operations, when the run counted them."""

    def __init__(
        self, sc, received, numbered, seen, procs, drops, drops_from, stopped, show, arrived_dead
    ):
        self.sc = sc
        self.received, self.numbered, self.seen = received, numbered, seen
        self.procs, self.drops, self.drops_from = procs, drops, drops_from
        self.arrived_dead = arrived_dead
        self.stopped, self.show = stopped, show
        self.ops = sc["duration"]["operations"] if sc["duration"]["seconds"] is None else None


def _see(seen: dict, sender, seq: int) -> None:
    if seq > seen.get(sender, -1):
        seen[sender] = seq


def _run_view(outcome, sc: dict) -> _View:
    """A run's ``_View``: its tracers' messages, its statistics, its labels."""
    labels = outcome.labels
    numbered: dict = {}
    seen: dict = {}
    for name, terms in outcome.messages.items():
        items = numbered[name] = []
        for term in terms:
            if not (
                type(term) is tuple
                and len(term) >= 4
                and term[0] in (_TRACE, _TRACE_TS)
                and term[2] in (_SEND, _RECEIVE)
            ):
                continue
            body = term[3]
            if not (
                type(body) is tuple
                and len(body) >= 3
                and type(body[0]) is Atom
                and type(body[1]) is Pid
                and type(body[2]) is int
            ):
                continue
            if term[2] is _SEND and (len(term) < 5 or body[1] != term[1]):
                continue
            items.append((term[1], term[2].name, body[1], body[2]))
            _see(seen, body[1], body[2])
    groups = {g["name"] for g in sc["groups"]}
    procs: dict = {g: [] for g in groups}
    for ref, label in labels.items():
        m = _LABEL.match(label) if isinstance(label, str) else None
        if m and m["group"] in groups and type(ref) is Pid:
            procs[m["group"]].append((ref, m["role"]))
    st = outcome.summary["stats"]
    drops = {r: sum(by_type.values()) for r, by_type in st["dropped_by_reason"].items()}
    drops["any"] = st["dropped"]
    s = outcome.summary
    stopped = set(groups) if s.get("interrupted") or s.get("error") else set()
    for f in s.get("faults") or []:
        if f["action"] == "kill_processes" and not str(f.get("result", "")).startswith("not"):
            stopped.add(f.get("target"))
    # a trace port's own queue drops what the dispatcher delivered to it
    # (trace_ip_drv, a client too slow): lost too, so no_drop counts them
    at_ports = port_drops(s)
    drops["any"] += sum(at_ports.values())
    return _View(
        sc,
        {name: len(terms) for name, terms in outcome.messages.items()},
        numbered,
        seen,
        procs,
        drops,
        "the run's statistics (dropped_by_reason)"
        + "".join(
            f" and ip port {name}'s queue ({n:,} dropped there)" for name, n in at_ports.items()
        ),
        stopped,
        lambda ref: labels.get(ref, format_term(ref)),
        sum(k.get("sys_arrived_dead", 0) for k in s.get("per_scheduler") or ()),
    )


def _sim_view(oc, sc: dict) -> _View:
    """An explored outcome's ``_View`` (``smp.sim.outcome.Outcome``: text,
    pids as roles); ``sc`` is the scenario as the simulator bounded it."""
    numbered: dict = {}
    seen: dict = {}
    received = {}
    for name, texts in oc.received:
        received[name] = len(texts)
        items = numbered[name] = []
        for text in texts:
            m = _NUMBERED_TEXT.match(text)
            if m is None:
                continue
            tracee, event, sender, seq = m[1], m[2].strip("'"), m[3], int(m[4])
            if event == "send" and sender != tracee:
                continue
            items.append((tracee, event, sender, seq))
            _see(seen, sender, seq)
    drops: dict = {"any": 0}
    arrived_dead = 0
    for label, fate in oc.fates:
        m = _NUMBERED_TEXT.search(label)
        if m is not None:
            _see(seen, m[3], int(m[4]))
        if fate.startswith("dropped "):
            reason = fate.split()[1]
            drops[reason] = drops.get(reason, 0) + 1
            drops["any"] += 1
        elif fate.startswith("arrived_dead "):
            arrived_dead += 1
    procs = {
        g["name"]: [(label, label.rsplit(".", 1)[1]) for label in _roles(g)] for g in sc["groups"]
    }
    stopped = {f["target"] for f in sc["faults"] if f["action"] == "kill_processes"}
    return _View(
        sc,
        received,
        numbered,
        seen,
        procs,
        drops,
        "the outcome's drops",
        stopped,
        str,
        arrived_dead,
    )


def _missing(got: Counter, last: int, mult: int) -> tuple[int, list[tuple[int, int]]]:
    """How many messages ``mult`` processes numbering 0..``last`` sent that
    ``got`` (number -> how many times seen) lacks, and the numbers missing as
    ``(first, last)`` ranges; linear in the numbers seen, not in ``last``."""
    n, ranges = 0, []

    def gap(a: int, b: int) -> None:
        if ranges and ranges[-1][1] == a - 1:
            ranges[-1] = (ranges[-1][0], b)
        else:
            ranges.append((a, b))

    nxt = 0
    for seq in sorted(x for x in got if 0 <= x <= last):
        if seq > nxt:
            n += mult * (seq - nxt)
            gap(nxt, seq - 1)
        if got[seq] < mult:
            n += mult - got[seq]
            gap(seq, seq)
        nxt = seq + 1
    if nxt <= last:
        n += mult * (last + 1 - nxt)
        gap(nxt, last)
    return n, ranges


def _expect_no_drop(e: dict, v: _View) -> dict:
    r = e["reason"]
    n = v.drops.get(r, 0)
    what = ("trace message" if n == 1 else "trace messages") + " dropped"
    what += "" if r == "any" else f" as {r}"
    evidence = f"{n:,} {what}, from {v.drops_from}"
    if v.arrived_dead:
        # lost too, though the dispatcher delivered them: not a drop
        evidence += (
            f"; besides, {v.arrived_dead:,} delivered to a receiver already dead "
            f"(lost, but not dropped: receives_every counts them)"
        )
    return {"held": n == 0, "count": n, "from": v.drops_from, "evidence": evidence}


def _expect_count(e: dict, v: _View) -> dict:
    n = v.received.get(e["tracer"], 0)
    lo, hi = e["min"], e["max"]
    want = f"{lo:,}..{hi:,}" if hi is not None else f">= {lo:,}"
    return {
        "held": lo <= n and (hi is None or n <= hi),
        "count": n,
        "from": f"the messages tracer {e['tracer']} received",
        "evidence": f"tracer {e['tracer']} received {n:,} trace messages (wanted {want})",
    }


def _expect_order(e: dict, v: _View) -> dict:
    t = e["tracer"]
    items = v.numbered.get(t, [])
    last: dict = {}
    broken = []
    for i, (tracee, event, sender, seq) in enumerate(items):
        k = (tracee, event, sender)
        prev = last.get(k)
        if prev is not None and seq <= prev:
            broken.append(
                f"{v.show(tracee)} {event} of {v.show(sender)}'s {seq} after its {prev} "
                f"(numbered message {i + 1})"
            )
        last[k] = seq
    return {
        "held": not broken,
        "count": len(broken),
        "from": f"the {len(items):,} numbered workload messages tracer {t} received",
        "evidence": f"{len(broken):,} out of order among the {len(items):,} send and receive "
        f"messages about numbered workload messages tracer {t} received"
        + (f": {'; '.join(broken[:3])}" + (", ..." if len(broken) > 3 else "") if broken else ""),
    }


def _expect_receives_every(e: dict, v: _View) -> dict:
    t, gname = e["tracer"], e["group"]
    g = next(x for x in v.sc["groups"] if x["name"] == gname)
    ops = None if gname in v.stopped else v.ops
    procs = v.procs.get(gname, [])
    mult = Counter(key for key, _ in procs)  # an explored outcome names two pairs' pings alike
    lasts: dict = {}
    for key, role in procs:
        last = None if ops is None else _last_seq(g["workload"], role, g["params"], ops)
        seen = v.seen.get(key)
        if last is None or (seen is not None and seen > last):
            last = seen
        if last is not None:
            lasts[key] = max(last, lasts.get(key, -1))
    got: dict = {key: Counter() for key in lasts}
    for _tracee, event, sender, seq in v.numbered.get(t, []):
        if event == e["event"] and sender in got:
            got[sender][seq] += 1
    n_exp = n_missing = 0
    parts = []
    for key, last in lasts.items():
        n_exp += mult[key] * (last + 1)
        n, ranges = _missing(got[key], last, mult[key])
        if n:
            n_missing += n
            shown = ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in ranges[:4])
            parts.append(f"{v.show(key)} {shown}" + (", ..." if len(ranges) > 4 else ""))
    n_got = n_exp - n_missing
    if ops is not None:
        source = f"duration.operations = {ops:,}: each process's messages numbered 0 to its last"
    else:
        source = "the highest number each process is seen to send in the run" + (
            " (its processes may have stopped early)" if gname in v.stopped else ""
        )
    text = (
        f"tracer {t} received {n_got:,} of the {n_exp:,} {e['event']} messages of group "
        f"{gname}'s {len(procs)} process(es) (expected from {source})"
    )
    if n_missing:
        parts.sort()
        text += f"; missing {n_missing:,}: " + "; ".join(parts[:4])
        text += ", ..." if len(parts) > 4 else ""
    return {
        "held": not n_missing and n_exp > 0,
        "count": n_got,
        "of": n_exp,
        "from": f"the messages tracer {t} received, against {source}",
        "evidence": text + ("" if n_exp else "; no numbered message of the group was seen"),
    }


_EXPECT_CHECKS = {
    "receives_every": _expect_receives_every,
    "no_drop": _expect_no_drop,
    "order": _expect_order,
    "count": _expect_count,
}


def expect_text(e: dict) -> str:
    """A clause in one line: ``receives_every tracer=t group=pp event=send``."""
    keys = [k for k in EXPECT_KEYS[e["kind"]] if e.get(k) is not None]
    return " ".join([e["kind"]] + [f"{k}={e[k]}" for k in keys])


def _result(i: int, e: dict, v: _View) -> dict:
    return {
        "expect": i,
        "where": e.get("where") or f"expect[{i}]",
        "clause": expect_text(e),
        **_EXPECT_CHECKS[e["kind"]](e, v),
    }


def check_expect(outcome, sc: dict) -> list[dict]:
    """Each of ``sc``'s ``[[expect]]`` clauses checked against a run's
    ``outcome``: ``{"expect": index, "where", "clause", "held", "count",
    "from", "evidence"}`` (``receives_every`` adds ``"of"``, the count
    expected).  ``evidence`` says the count and what it came from."""
    clauses = sc.get("expect") or []
    if not clauses:
        return []
    v = _run_view(outcome, sc)
    return [_result(i, e, v) for i, e in enumerate(clauses)]


def expect_broken(results: list[dict]) -> list[str]:
    """One line per broken clause: ``where: clause: evidence``."""
    return [f"{r['where']}: {r['clause']}: {r['evidence']}" for r in results if not r["held"]]


class ExpectCheck:
    """Clause ``index`` of scenario ``sc`` (as the simulator bounded it) as a
    user predicate of ``smp.sim``: called with an explored outcome, it
    returns True when the clause holds, else its evidence.  Picklable, for
    ``--jobs`` workers."""

    def __init__(self, sc: dict, index: int):
        self.sc, self.index = sc, index
        self.__name__ = f"expect[{index}] {expect_text(sc['expect'][index])}"

    def __call__(self, oc) -> bool | str:
        r = _EXPECT_CHECKS[self.sc["expect"][self.index]["kind"]](
            self.sc["expect"][self.index], _sim_view(oc, self.sc)
        )
        return True if r["held"] else r["evidence"]


def expect_checks(sc: dict) -> list[ExpectCheck]:
    """The user predicates of ``sc``'s ``[[expect]]`` clauses, for ``smp.sim``."""
    return [ExpectCheck(sc, i) for i in range(len(sc.get("expect") or []))]
