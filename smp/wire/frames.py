"""The frames of the system-message path, named, each with ``encode`` and a
checked ``decode``.

A run of system messages travels this way::

    scheduler                dispatcher                       receiver's scheduler
    Run ----(in a Batch)---> QueueEntry --decided--> Delivery ----(Deliveries)---->
                             (journal "q")

* :class:`Run`: consecutive messages one scheduler made of one kind to one
  receiver, their bodies pickled together once (``blob``);
* :class:`TableEvent`: a process-table change (spawn, exit, tracer mark,
  unregister, port open/close), in the same stream so the queue order holds;
* :class:`Batch`: a scheduler's runs and events, in order, with the causal
  ``after`` vector (the batches of other schedulers it follows);
* :class:`QueueEntry`: a run in the dispatcher's queue, with the timestamps
  and active-scheduler count the queue gave it; :class:`QueueEvent`: a port
  close or a ``trace_delivered`` marker waiting for its turn in the queue;
* :class:`Delivery`: a decided run on its way to the receiver's scheduler,
  bytes unopened; :func:`encode_deliveries` / :func:`decode_deliveries`.

``encode`` gives plain tuples (or bytes), never these classes, so what
crosses a socket decodes with the restricted decoder (``smp.wire.codec``);
``decode`` checks every field of a frame a peer sent and raises
``ProtocolError`` naming what is wrong.  :func:`run_terms` is the one way to
turn a queued run into the terms a receiver gets.
"""

from __future__ import annotations

import pickle
from typing import Callable, NamedTuple

from smp.core import messages as M
from smp.core.clock import us_to_ts
from smp.core.errors import ProtocolError
from smp.core.placement import pid_owner, port_owner
from smp.core.terms import Atom, Pid, Port, Term
from smp.wire.codec import (
    MAX_RUN,
    WIRE_VERSION,
    Decoded,
    dumps_frame,
    loads_terms,
    run_bodies,
)

__all__ = [
    "DATA_PREFIX",
    "RUN",
    "EVENT",
    "BATCH",
    "FIN",
    "FIN_ACK",
    "DELIVERIES",
    "EVENT_ARITY",
    "Run",
    "TableEvent",
    "Batch",
    "QueueEntry",
    "QueueEvent",
    "Delivery",
    "run_terms",
    "encode_deliveries",
    "decode_deliveries",
]

#: The codec byte of a data frame, as ``codec.dumps_frame`` writes it: the
#: frames that skip its encoder for speed (deliveries) write this one.
DATA_PREFIX = dumps_frame(None)[:1]
# batch item kinds
RUN, EVENT = "r", "e"
# frame kinds on the ingest socket and a scheduler's inbox
BATCH, FIN, FIN_ACK, DELIVERIES = "b", "fin", "fin-ack", "d"

#: Each table event and how many arguments it carries (the last is the pid
#: or port it is about, which must belong to the sending scheduler).
EVENT_ARITY = {
    "spawn": 1,
    "exit": 1,
    "tracer": 1,
    "unregister": 2,
    "port_open": 1,
    "port_close": 1,
}
_PORT_EVENTS = ("port_open", "port_close")
_HEADER_TYPES = (Pid, Port, Atom, type(None))
#: every message type a run may carry (SYS_MSG_TYPE_UNDEFINED is never made)
_TYPES = frozenset(
    (
        M.SYS_MSG_TYPE_TRACE,
        M.SYS_MSG_TYPE_SEQTRACE,
        M.SYS_MSG_TYPE_SYSMON,
        M.SYS_MSG_TYPE_ERRLGR,
        M.SYS_MSG_TYPE_PROC_MSG,
        M.SYS_MSG_TYPE_SYSPROF,
    )
)
_MAX_NS = 1 << 64
_PICKLE = pickle.HIGHEST_PROTOCOL
am_active, am_inactive = Atom("active"), Atom("inactive")


def run_terms(bodies: list[Term], ts_kind: int, base_us: int, active: int) -> list[Term]:
    """The terms of a queued run: each body completed with its timestamp
    (``base_us + i``: the queue gave the run consecutive microseconds) and
    the active-scheduler count, as ``sys_msg_dispatcher_func`` completes a
    message before it sends it."""
    if not ts_kind:
        return bodies
    complete = M.complete
    return [complete(body, ts_kind, us_to_ts(base_us + i), active) for i, body in enumerate(bodies)]


def _int_in(x: object, lo: int, hi: int) -> bool:
    return type(x) is int and lo <= x <= hi


class Run(NamedTuple):
    """Consecutive system messages of one kind to one receiver."""

    type: int
    from_: object
    to: object
    ts_kind: int
    n: int
    blob: bytes
    made_ns: int

    def encode(self) -> tuple[object, ...]:
        return (RUN, *self)

    @classmethod
    def decode(cls, item: tuple[Decoded, ...]) -> Run:
        """A checked run from a batch item: header fields in range, and the
        bodies (``codec.run_bodies``, as the receiving scheduler checks them)."""
        if len(item) != 8:
            raise ProtocolError("not a run of system messages")
        _, type_, from_, to, ts_kind, n, blob, made_ns = item
        if (
            type(type_) is not int
            or type_ not in _TYPES
            or type(from_) not in _HEADER_TYPES
            or type(to) not in _HEADER_TYPES
            or not _int_in(ts_kind, M.TS_NONE, M.TS_SCHED)
            or not _int_in(n, 1, MAX_RUN)
            or not _int_in(made_ns, 0, _MAX_NS - 1)
        ):
            raise ProtocolError("not a well-formed run of system messages")
        if ts_kind == M.TS_SCHED and (
            type_ != M.SYS_MSG_TYPE_SYSPROF or n != 1 or to not in (am_active, am_inactive)
        ):
            raise ProtocolError("not a well-formed profile_scheduler run")
        run_bodies(blob, n, ts_kind)
        return cls(type_, from_, to, ts_kind, n, blob, made_ns)


class TableEvent(NamedTuple):
    """A process-table change, about a process or port of the sender."""

    kind: str
    args: tuple[Term, ...]

    @property
    def subject(self) -> Term:
        return self.args[-1]

    def encode(self) -> tuple[object, ...]:
        return (EVENT, self.kind, *self.args)

    @classmethod
    def decode(cls, item: tuple[Decoded, ...], sender: int, nsched: int) -> TableEvent:
        if len(item) < 2 or EVENT_ARITY.get(item[1]) != len(item) - 2:
            raise ProtocolError("not a well-formed table event")
        kind, args = item[1], tuple(item[2:])
        subject = args[-1]
        if kind in _PORT_EVENTS:
            if type(subject) is not Port or port_owner(subject, nsched) != sender:
                raise ProtocolError(f"event about {subject!r}, not a port of scheduler {sender}")
        elif type(subject) is not Pid or pid_owner(subject, nsched) != sender:
            raise ProtocolError(f"event about {subject!r}, not a process of scheduler {sender}")
        if kind == "unregister" and type(args[0]) is not Atom:
            raise ProtocolError(f"registered name {args[0]!r} is not an atom")
        return cls(kind, args)


class Batch(NamedTuple):
    """A scheduler's runs and table events, in the order they happened."""

    sched: int
    items: list[Run | TableEvent]
    after: list[int] | None = None  # batches taken from each scheduler before this one

    def encode(self) -> bytes:
        items = [it.encode() for it in self.items]
        return pickle.dumps((BATCH, WIRE_VERSION, self.sched, items, self.after), _PICKLE)

    @classmethod
    def decode(cls, obj: Decoded, sender: int, nsched: int) -> Batch:
        """Check a whole batch from scheduler ``sender`` field by field
        before any of it counts (all or nothing)."""
        if type(obj) is not tuple or len(obj) not in (4, 5) or obj[0] != BATCH:
            raise ProtocolError("batch frame is not ('b', version, scheduler, items[, after])")
        after = obj[4] if len(obj) == 5 else None
        if after is not None and (
            type(after) is not list
            or len(after) != nsched + 1
            or not all(type(n) is int and n >= 0 for n in after)
        ):
            raise ProtocolError(f"batch's 'after' is not {nsched + 1} batch counts")
        if obj[1] != WIRE_VERSION:
            raise ProtocolError(f"wire version {obj[1]!r}, expected {WIRE_VERSION}")
        if type(obj[2]) is not int or obj[2] != sender:
            raise ProtocolError(
                f"batch says it is from scheduler {obj[2]!r}, its sender is scheduler {sender}"
            )
        if type(obj[3]) is not list:
            raise ProtocolError("batch items are not a list")
        items: list[Run | TableEvent] = []
        for i, it in enumerate(obj[3]):
            if type(it) is not tuple or not it:
                raise ProtocolError(f"item {i} is not a tuple")
            try:
                if it[0] == RUN:
                    items.append(Run.decode(it))
                elif it[0] == EVENT:
                    items.append(TableEvent.decode(it, sender, nsched))
                else:
                    raise ProtocolError(f"unknown kind {it[0]!r}")
            except ProtocolError as e:
                raise ProtocolError(f"item {i}: {e}") from None
        return cls(sender, items, after)


class QueueEntry(NamedTuple):
    """A run in the dispatcher's queue: its n messages got the consecutive
    timestamps ``base..base+n-1`` µs (when ``ts_kind``) and, for
    ``profile_scheduler``, the active count, when the queue took them."""

    type: int
    from_: object
    to: object
    ts_kind: int
    blob: bytes
    n: int
    base: int
    active: int
    made_ns: int

    def terms(self) -> list[Term]:
        return run_terms(loads_terms(self.blob), self.ts_kind, self.base, self.active)

    def split(self, k: int) -> tuple[QueueEntry, QueueEntry]:
        """The first ``k`` messages as an entry of their own, and the rest
        (step mode decides message by message, as the seed does)."""
        bodies = loads_terms(self.blob)
        head = self._replace(blob=pickle.dumps(bodies[:k], _PICKLE), n=k)
        tail = self._replace(
            blob=pickle.dumps(bodies[k:], _PICKLE),
            n=self.n - k,
            base=self.base + k if self.ts_kind else 0,
        )
        return head, tail

    def journal(self) -> tuple[object, ...]:
        """The journal's ``q`` record (what the replay needs to decide again)."""
        return self[:8]


class _QueueEventFields(NamedTuple):
    kind: str
    payload: object
    done: object = None


class QueueEvent(_QueueEventFields):
    """Not a message: a port close (``"close"``, port ids or None for all,
    a ``threading.Event`` set when done) or a ``trace_delivered`` marker
    (``"marker"``, its ref), taking its turn in the queue."""

    # a subclass of its fields, so that mypy takes n for a class attribute
    # (in a NamedTuple's body it would be a field)
    __slots__ = ()
    n = 0  # holds no message


class Delivery(NamedTuple):
    """A decided run for the receiver's scheduler, its bytes unopened."""

    receiver: object
    blob: bytes
    n: int
    ts_kind: int
    base: int
    active: int

    @classmethod
    def of(cls, entry: QueueEntry, receiver: object) -> Delivery:
        return cls(receiver, entry.blob, entry.n, entry.ts_kind, entry.base, entry.active)


def encode_deliveries(deliveries: list[Delivery]) -> bytes:
    """The dispatcher's frame to one scheduler: ``("d", [delivery, ...])``."""
    return DATA_PREFIX + pickle.dumps((DELIVERIES, [tuple(d) for d in deliveries]), _PICKLE)


def decode_deliveries(
    obj: Decoded, mine: Callable[[object], bool]
) -> list[tuple[object, list[Term]]]:
    """``(receiver, terms)`` for each run of a loaded deliveries frame, the
    whole frame checked first: each receiver ``mine`` (a process or port of
    this scheduler), every field in range, the bodies terms."""
    if type(obj) is not tuple or len(obj) != 2 or obj[0] != DELIVERIES or type(obj[1]) is not list:
        raise ProtocolError("delivery frame is not ('d', runs)")
    out: list[tuple[object, list[Term]]] = []
    for item in obj[1]:
        if type(item) is not tuple or len(item) != 6:
            raise ProtocolError("delivery frame has a malformed run")
        to, blob, n, ts_kind, base, active = item
        if (
            not mine(to)
            or not _int_in(n, 1, MAX_RUN)
            or not _int_in(ts_kind, M.TS_NONE, M.TS_SCHED)
            or type(base) is not int
            or base < 0
            or type(active) is not int
            or active < 0
        ):
            raise ProtocolError("delivery frame has a malformed run")
        out.append((to, run_terms(run_bodies(blob, n, ts_kind), ts_kind, base, active)))
    return out
