"""Every frame of the system-message path round-trips through its encoding,
and a decoder refuses each wrong field whole (``smp.wire.frames``)."""

from __future__ import annotations

import pickle

import pytest

from smp.core import messages as M
from smp.core.clock import us_to_ts
from smp.core.errors import ProtocolError
from smp.core.placement import pid_owner, port_owner
from smp.core.terms import A, Pid, Port
from smp.wire import codec
from smp.wire.frames import (
    Batch,
    Delivery,
    QueueEntry,
    Run,
    TableEvent,
    decode_deliveries,
    encode_deliveries,
    run_terms,
)

NSCHED = 2
P = next(Pid(n) for n in range(80, 200) if pid_owner(Pid(n), NSCHED) == 1)
OTHER = next(Pid(n) for n in range(80, 200) if pid_owner(Pid(n), NSCHED) == 2)
PORT = next(Port(n) for n in range(1, 100) if port_owner(Port(n), NSCHED) == 1)
BODIES = [(A.trace, P, A.send, (A.ping, i), OTHER) for i in range(3)]


def run(**kw) -> Run:
    fields = dict(
        type=M.SYS_MSG_TYPE_TRACE,
        from_=P,
        to=OTHER,
        ts_kind=M.TS_PATCH,
        n=3,
        blob=pickle.dumps(BODIES),
        made_ns=12,
    )
    fields.update(kw)
    return Run(**fields)


def wire(batch: Batch):
    """What the dispatcher's ingest socket loads from the bytes."""
    return codec.loads_terms(batch.encode())


def test_a_batch_round_trips_with_its_runs_events_and_after_vector():
    b = Batch(
        1, [run(), TableEvent("spawn", (P,)), TableEvent("unregister", (A.reg, P))], [0, 0, 4]
    )
    assert Batch.decode(wire(b), 1, NSCHED) == b
    # plain tuples on the wire: nothing the restricted decoder would refuse
    assert all(type(it) is tuple for it in wire(b)[3])


@pytest.mark.parametrize(
    "bad",
    [
        {"type": 0},
        {"type": 7},
        {"type": True},
        {"from_": 1.5},
        {"to": "x"},
        {"ts_kind": 4},
        {"n": 0},
        {"n": codec.MAX_RUN + 1},
        {"n": 2},  # says 2 bodies, holds 3
        {"made_ns": -1},
        {"blob": b"junk"},
        {"blob": pickle.dumps([1, 2, 3])},  # a timestamp needs tuple bodies
        {"ts_kind": M.TS_SCHED},  # profile_scheduler runs only
    ],
)
def test_each_wrong_run_field_refuses_the_whole_batch(bad):
    b = Batch(1, [TableEvent("spawn", (P,)), run(**bad)])
    with pytest.raises(ProtocolError, match="item 1"):
        Batch.decode(wire(b), 1, NSCHED)


@pytest.mark.parametrize(
    "event",
    [
        TableEvent("spawn", (OTHER,)),  # another scheduler's process
        TableEvent("port_open", (P,)),  # a pid where a port belongs
        TableEvent("exit", (P, P)),  # wrong arity
        TableEvent("unregister", ("reg", P)),  # a name that is not an atom
        TableEvent("explode", (P,)),
    ],
)
def test_wrong_table_events_are_refused(event):
    with pytest.raises(ProtocolError):
        Batch.decode(wire(Batch(1, [event])), 1, NSCHED)


def test_a_batch_must_come_from_its_sender_in_this_wire_version():
    obj = wire(Batch(1, []))
    with pytest.raises(ProtocolError, match="its sender is scheduler 2"):
        Batch.decode(obj, 2, NSCHED)
    with pytest.raises(ProtocolError, match="wire version"):
        Batch.decode(obj[:1] + (codec.WIRE_VERSION + 1,) + obj[2:], 1, NSCHED)
    with pytest.raises(ProtocolError, match="'after'"):
        Batch.decode(wire(Batch(1, [], [0, 1])), 1, NSCHED)


def test_a_queued_run_gets_consecutive_timestamps_and_splits_keeping_them():
    e = QueueEntry(
        M.SYS_MSG_TYPE_TRACE, P, OTHER, M.TS_PATCH, pickle.dumps(BODIES), 3, 5_000_000, 0, 1
    )
    terms = e.terms()
    assert [t[-1] for t in terms] == [us_to_ts(5_000_000 + i) for i in range(3)]
    assert all(t[0] is A.trace_ts for t in terms)
    head, tail = e.split(1)
    assert (head.n, tail.n) == (1, 2)
    assert head.terms() + tail.terms() == terms
    assert QueueEntry(*e.journal(), 0) == e._replace(made_ns=0)


def test_deliveries_round_trip_and_each_run_is_checked():
    e = QueueEntry(M.SYS_MSG_TYPE_TRACE, P, OTHER, M.TS_PATCH, pickle.dumps(BODIES), 3, 7, 0, 1)
    raw = encode_deliveries([Delivery.of(e, P)])
    assert raw[:1] == b"P"
    obj = codec.loads_frame(raw)
    assert decode_deliveries(obj, lambda pid: pid == P) == [(P, e.terms())]
    with pytest.raises(ProtocolError):  # a receiver that is not this scheduler's
        decode_deliveries(obj, lambda pid: False)
    bad = ("d", [(P, pickle.dumps(BODIES), 3, 9, 7, 0)])  # ts kind out of range
    with pytest.raises(ProtocolError):
        decode_deliveries(bad, lambda pid: True)


def test_run_terms_without_timestamp_is_the_bodies_unchanged():
    assert run_terms(BODIES, M.TS_NONE, 99, 0) is BODIES
    sched = [(A.profile, A.scheduler, 1, A.active)]
    assert run_terms(sched, M.TS_SCHED, 1, 2) == [sched[0] + (2, us_to_ts(1))]
