"""What one simulated execution came to, as plain data, and the invariants
every execution must keep.

Runs in the explorer's process, after an execution ends.  An ``Outcome``
names processes by role (``P1``, ``P1.2``, ``T``...) rather than pid, ports
by their opener's role (``#Port<P1:1>``), and
leaves timestamps out, so two executions that differ only in pid numbers
or in the microseconds the queue gave are one outcome.  It holds the fate
of every system message (``delivered`` to its receiver, ``arrived_dead``,
or ``dropped`` with the reason ``sys_msg_dispatcher_func`` gives), what
each collector and tracer port received in order, and the invariants broken:

* counts balance: made == delivered + dropped, nothing left queued, every
  message with a fate and every drop reason one of ``DROP_REASONS``;
* per-tracee order at each receiver: the messages about one sender arrive
  in the order they were made (only per-sender order is promised); those
  without a sender (NIL) in the order their scheduler made them;
* no process blocked forever (a collector or a ``keep=True`` process is a
  server and may wait);
* the user's predicates over the outcome.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from schedulers.process import EXITED
from smp.core.dispatch import DROP_REASONS
from smp.core.messages import TYPE_NAMES
from smp.core.pretty import format_term
from smp.core.state import NIL
from smp.core.terms import Atom, ImproperList, Pid, Port, Ref
from smp.wire.etf import decode

from .world import mid_text

__all__ = ["Outcome", "outcome_of", "nonsmp_outcome_of", "Namer"]

_PID = re.compile(r"<\d+\.\d+\.\d+>")
_PID_OR_PORT = re.compile(r"<\d+\.\d+\.\d+>|#Port<\d+\.\d+>")
_TS = re.compile(r"\{\d+,\d+,\d+\}")


def _etf(b: bytes):
    """The term a binary holds when it is one whole external-format term (what
    a port a process opened gets from the dispatcher), else None."""
    if b[:1] != b"\x83":
        return None
    try:
        return decode(b)
    except ValueError:
        return None


#: how deep in a term a binary is looked at as a whole term (a deeper one
#: is shown as bytes): the search and the text stay bounded for any term
_ETF_DEPTH = 64


def _has_etf(t) -> bool:
    """Whether ``t`` holds, within ``_ETF_DEPTH`` levels, a binary that is one
    whole term (a loop, not a recursion: a term may nest deeper than Python
    recurses)."""
    todo = [(t, 0)]
    while todo:
        x, depth = todo.pop()
        tx = type(x)
        if tx is bytes:
            if _etf(x) is not None:
                return True
        elif (tx is tuple or tx is list) and depth < _ETF_DEPTH:
            todo.extend((y, depth + 1) for y in x)
    return False


def _readable(t, depth: int = 0) -> str:
    """``format_term``, but a binary that is one whole external-format term
    is shown as ``term_to_binary(Term)``: a tracer port's driver echoes
    such bytes, whose pids are numbers that differ between smp and nonsmp
    (and between runs), where the term's pids are named by role."""
    if depth < _ETF_DEPTH:
        if type(t) is bytes:
            inner = _etf(t)
            if inner is not None:
                return f"term_to_binary({_readable(inner, depth + 1)})"
        elif type(t) in (tuple, list) and _has_etf(t):
            inside = ",".join(_readable(x, depth + 1) for x in t)
            return "{" + inside + "}" if type(t) is tuple else "[" + inside + "]"
    return format_term(t)


def _format(t, ts: bool) -> str:
    s = _readable(t) if _has_etf(t) else format_term(t)
    return _TS.sub("Ts", s) if ts else s


@lru_cache(maxsize=4096)
def _formatted(t, ts: bool) -> str:
    """``_format``, remembered: executions repeat the same terms."""
    return _format(t, ts)


class Namer:
    """Terms as text with pids and ports as roles and timestamps as ``Ts``."""

    def __init__(self, names: dict):
        self.by_text = {repr(p): n for p, n in names.items()}

    def pid(self, pid) -> str:
        return self.by_text.get(repr(pid), repr(pid))

    def term(self, t, ts: bool = False) -> str:
        try:
            s = _formatted(t, ts)
        except TypeError:  # a term with a list in it is no dict key
            s = _format(t, ts)
        pat = _PID_OR_PORT if "#Port<" in s else _PID  # (the one pattern is slower)
        return pat.sub(lambda m: self.by_text.get(m.group(0), m.group(0)), s)

    def text(self, s: str) -> str:
        """Event text: each pid as role and pid (``T<0.83.0>``), but in the
        name of a thread (``R<0.83.0>``, ``T<0.83.0>``: a process's BIF
        request or timer), which a schedule spells that way."""
        by_text = self.by_text

        def role(m) -> str:
            pid, at = m.group(0), m.start()
            if at and s[at - 1] in "RT":  # (a thread's name)
                return pid
            return by_text.get(pid, "") + pid

        return _PID.sub(role, s)


@dataclass(frozen=True)
class Outcome:
    """One class of executions: the fate of each message, what each
    collector got, the invariants broken (all text, sorted where order is
    not part of the outcome)."""

    fates: tuple  # ((message, fate), ...) sorted
    received: tuple  # ((role, (message, ...)), ...) sorted by role
    violations: tuple  # (text, ...)

    def as_dict(self) -> dict:
        return {
            "fates": [list(f) for f in self.fates],
            "received": {r: list(ms) for r, ms in self.received},
            "violations": list(self.violations),
        }


def _message_label(namer: Namer, info) -> str:
    type_, from_, to, body, _k = info
    from_text = "" if from_ is None else f" {namer.pid(from_)}"
    to_text = "" if to is None else f" -> {namer.pid(to)}"
    return f"{TYPE_NAMES[type_]}{from_text}{to_text} {namer.term(body)}"


def _fate_text(namer: Namer, fate) -> str:
    if fate is None:
        return "no fate"
    if fate[0] == "dropped":
        return f"dropped {fate[1]} ({namer.pid(fate[2])})"
    return f"{fate[0]} {namer.pid(fate[1])}"


def _received(world, namer: Namer) -> tuple:
    """What each collector and each tracer port got, in order, by role."""
    out = []
    for p in world.all_procs():
        if p.kept is not None:
            out.append((namer.pid(p.pid), tuple(namer.term(m, ts=True) for m in p.kept)))
    for port, tp in world.trace_ports().items():
        out.append((namer.pid(port), tuple(namer.term(m, ts=True) for m in tp.terms())))
    out.sort()
    return tuple(out)


def _blocked(world, namer: Namer) -> list[str]:
    return [
        f"{namer.pid(p.pid)} ({p.pid!r}) blocked forever ({p.status})"
        for p in world.all_procs()
        if p.status != EXITED and p.pid not in world.servers
    ]


def _user_checks(outcome: Outcome, checks) -> list[str]:
    out = []
    for check in checks:
        try:
            r = check(outcome)
        except Exception as e:  # a predicate that fails is a broken check
            r = f"raised {type(e).__name__}: {e}"
        if r is True or r is None:
            continue
        name = getattr(check, "__name__", repr(check))
        out.append(f"check {name} failed" + (f": {r}" if isinstance(r, str) else ""))
    return out


def _order_key(info):
    """Whose order a message keeps: its sender's; for a message without one
    (NIL: ``profile_scheduler``'s ``{profile, scheduler, ...}``, an error
    report of the controller) the thread that made it, scheduler ``k`` (0:
    the controller).  The seed promises order per sender, and NIL is no
    sender: each scheduler makes its own ``profile_scheduler`` messages, so
    only one scheduler's are ordered (message ids are numbered per maker,
    and the ids of two makers say nothing of the order they were made in).
    ``smp.ports.order.OrderChecker``, the real emulator's check, never
    orders them (it checks only the trace messages of a tracee's
    ``send``/``'receive'``, by their workload sequence numbers; a profile
    message has no tracee); here they keep their maker's order, which the
    build keeps (one scheduler's batches are queued in order, and the
    dispatcher delivers in queue order)."""
    sender = info[1]
    return (sender, info[4]) if sender is NIL else sender


def _sender_text(namer: Namer, key) -> str:
    if type(key) is tuple:
        return f"scheduler {key[1]} (no sender)" if key[1] else "the controller (no sender)"
    return namer.pid(key)


_LIST, _IMPROPER, _FLOAT = object(), object(), object()  # (``_frozen``'s tags: no term is one)
#: terms equal only to themselves as Python compares them (not 1 and 1.0)
_PLAIN = frozenset((int, str, bytes, Atom, Pid, Port, Ref, type(None)))


def _frozen(t):
    """``t`` as a dict key equal for equal terms only: its lists as tagged
    tuples, and its floats tagged (Python takes 1 == 1.0, Erlang not)."""
    ty = type(t)
    if ty in _PLAIN:
        return t
    if ty is tuple:
        for x in t:
            tx = type(x)
            if tx in _PLAIN:
                continue
            if tx is tuple:  # (one level down without a call: a message's body, a timestamp)
                for y in x:
                    if type(y) not in _PLAIN:
                        break
                else:
                    continue
            return tuple(map(_frozen, t))
        return t  # (of plain terms and flat tuples: as it is)
    if ty is list:
        return (_LIST, *map(_frozen, t))
    if ty is float:
        return (_FLOAT, t)
    if ty is ImproperList:
        return (_IMPROPER, _frozen(t.tail), *map(_frozen, t.elements))
    return (ty, t)  # a map, binary, fun...: equal as its class compares it


def _raw_key(world, blocked_ok: bool):
    """Everything ``outcome_of`` reads from ``world``, as it is (pids, not
    roles): two worlds with one key have one outcome.  None when a term in
    it is no dict key (a list)."""
    procs = list(world.all_procs())
    try:
        return (  # (sets where an order is not part of the outcome)
            blocked_ok,
            len(world.queue),
            world.delivered,
            world.dropped,
            frozenset(zip(world.msgs, map(_frozen, world.msgs.values()), strict=True)),
            frozenset(world.fates.items()),
            frozenset((r, tuple(mids)) for r, mids in world.arrivals.items()),
            frozenset(world.names.items()),
            frozenset((p.pid, p.status, p.pid in world.servers) for p in procs),
            frozenset((p.pid, _frozen(p.kept)) for p in procs if p.kept is not None),
            tuple((port, tuple(tp.payloads)) for port, tp in world.trace_ports().items()),
        )
    except TypeError:
        return None


def outcome_of(world, checks=(), blocked_ok: bool = False, memo: dict | None = None) -> Outcome:
    """The outcome of a finished smp execution.  ``memo``: outcomes already
    built, by what they were built from (``_raw_key``), kept for the next
    call (the user's ``checks`` run every time)."""
    if memo is None:
        return _checked(_outcome_of(world, blocked_ok), checks)
    key = _raw_key(world, blocked_ok)
    if key is None:
        return _checked(_outcome_of(world, blocked_ok), checks)
    out = memo.get(key)
    if out is None:
        if len(memo) >= _MEMO_SIZE:
            memo.clear()
        out = memo[key] = _outcome_of(world, blocked_ok)
    return _checked(out, checks)


#: at most this many outcomes remembered (``outcome_of``'s memo)
_MEMO_SIZE = 20_000


def _checked(out: Outcome, checks) -> Outcome:
    user = _user_checks(out, checks)
    if user:
        out = Outcome(out.fates, out.received, out.violations + tuple(user))
    return out


def _outcome_of(world, blocked_ok: bool) -> Outcome:
    namer = Namer(world.names)
    violations: list[str] = []
    made = len(world.msgs)
    if world.queue:
        violations.append(f"{len(world.queue)} message(s) still queued")
    if made != world.delivered + world.dropped + len(world.queue):
        violations.append(
            f"counts do not balance: made {made} != delivered {world.delivered} "
            f"+ dropped {world.dropped}"
        )
    labels: dict = {}
    fates = []
    for mid in sorted(world.msgs):
        info = world.msgs[mid]
        fate = world.fates.get(mid)
        label = _message_label(namer, info)
        n = labels[label] = labels.get(label, 0) + 1
        if n > 1:
            label = f"{label} #{n}"
        if fate is None:
            violations.append(f"{mid_text(mid)} {label} has no fate")
        elif fate[0] == "dropped" and fate[1] not in DROP_REASONS:
            violations.append(f"{mid_text(mid)} dropped for an unnamed reason {fate[1]!r}")
        fates.append((label, _fate_text(namer, fate)))
    fates.sort()
    msgs = world.msgs
    for receiver, mids in world.arrivals.items():
        last: dict = {}
        for mid in mids:
            key = _order_key(msgs[mid])
            if key in last and last[key] > mid:
                violations.append(
                    f"{namer.pid(receiver)} got {mid_text(mid)} from {_sender_text(namer, key)} "
                    f"after {mid_text(last[key])}, made later"
                )
            last[key] = mid
    if not blocked_ok:
        violations += _blocked(world, namer)
    return Outcome(tuple(fates), _received(world, namer), tuple(violations))


def nonsmp_outcome_of(world, checks=(), blocked_ok: bool = False) -> Outcome:
    """The outcome of the nonsmp run: what each collector got; its messages
    are decided when made (``suppressed`` ones were never made)."""
    namer = Namer(world.names)
    st = world.node.stats.as_dict()
    violations = [] if blocked_ok else _blocked(world, namer)
    fates = tuple(sorted((f"{k}", f"{v}") for k, v in st.items() if k in ("made", "suppressed")))
    out = Outcome(fates, _received(world, namer), tuple(violations))
    user = _user_checks(out, checks)
    if user:
        out = Outcome(out.fates, out.received, out.violations + tuple(user))
    return out
