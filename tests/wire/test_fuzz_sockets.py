"""Fuzzing every socket a scheduler or an outside peer can write to: the
dispatcher's ingest and control sockets, a scheduler's inbox, and the
controller's socket.

Each socket gets frames from two kinds of sender: a peer that is not who it
says it is (a socket of its own, with its own routing id or one it made
up), and the real sender's own socket (a scheduler's, reached from a
process running on it, or the controller's) sending what that sender never
sends: random bytes, truncated and oversized frames, wrong versions,
well-formed frames with a wrong type or value in one field, frames claiming
another sender, and pickles that would run code (a shell command that makes
a marker file).  While a traced workload runs: no code runs (the marker
never appears), every accepted message arrives, every bad frame is counted
once, and ``run()`` becomes quiet.
"""

from __future__ import annotations

import gc
import itertools
import os
import pickle
import tempfile
import time

import pytest
import zmq
from helpers import free_base
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import smp
from schedulers.worker import Worker
from smp import Atom as A
from smp.core.errors import ProtocolError
from smp.core.state import NIL, Snapshot
from smp.core.terms import Pid, Port
from smp.wire import codec
from smp.wire import protocol as W
from smp.wire.codec import WIRE_VERSION
from smp.wire.curve import InsecureWarning

pytestmark = pytest.mark.timeout(120)

#: The file a frame's code would make (nothing makes it otherwise).
MARKER = os.path.join(tempfile.gettempdir(), f"smp-fuzz-code-ran-{os.getpid()}")
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))


class Evil:
    """Unpickling this runs a shell command that makes the marker file."""

    def __reduce__(self):
        return (os.system, (f"touch {MARKER}",))


class EvalEvil:
    """The same, through ``eval``."""

    def __reduce__(self):
        return (eval, (f"open({MARKER!r}, 'w')",))


class _Ref:
    """Pickles as a function reference, to any name."""

    def __init__(self, module, qualname):
        self.ref = (module, qualname)

    def __reduce__(self):
        return (codec._fun, self.ref)


async def pinger(proc, peer, n):
    for i in range(n):
        await proc.send(peer, (A("ping"), i))


async def send_raw(proc, where, frames):
    """Send ``frames`` as this process's scheduler, on one of its own
    sockets: its ingest socket, its controller socket, or its socket to
    scheduler ``where``'s inbox.  A list is a message of several parts."""
    # the scheduler this process runs on (nothing in the scheduler points
    # from its Node back to the Worker that owns the sockets)
    w = next(o for o in gc.get_objects() if isinstance(o, Worker) and o.node is proc.node)
    if where == "ingest":
        sock = w.sys_sock
    elif where == "controller":
        sock = w.ctl
    else:
        sock = w.peer_socket(where)
    for f in frames:
        if type(f) is list:
            sock.send_multipart(f)
        else:
            sock.send(f)


# pids of no process: P1 belongs to scheduler 1, P2 to scheduler 2 (of 2)
P1, P2 = Pid(1000, 0), Pid(1001, 0)


class _FloatPid:
    """Pickled as ``Pid(1.5, 0)``: a pid whose number is a float, which a
    peer can send though ``Pid`` refuses to make one."""

    def __reduce__(self):
        return (Pid, (1.5, 0))


FLOAT_PID = _FloatPid()


def P(obj) -> bytes:
    return b"P" + pickle.dumps(obj, 5)


def D(obj) -> bytes:
    """A frame that claims to carry code (dill's codec byte)."""
    return b"D" + pickle.dumps(obj, 5)


def body_blob() -> bytes:
    """The bodies of a run of one message."""
    return pickle.dumps([(A("trace"), P1, A("send"), A("x"), P2)], 5)


def run_item(**kw) -> tuple:
    f = {"type_": 1, "from_": P1, "to": P2, "ts_kind": 0, "n": 1, "blob": None, "made_ns": 0}
    f.update(kw)
    if f["blob"] is None:
        f["blob"] = body_blob()
    return ("r", f["type_"], f["from_"], f["to"], f["ts_kind"], f["n"], f["blob"], f["made_ns"])


def batch(items, version=WIRE_VERSION, sched=1) -> bytes:
    return pickle.dumps(("b", version, sched, items), 5)


def huge_bytes_pickle() -> bytes:
    """A pickle that says it holds 2**62 bytes (BINBYTES8)."""
    return b"\x80\x05\x8e" + (1 << 62).to_bytes(8, "little") + b"x" * 16


def huge_frame_pickle() -> bytes:
    """A pickle whose FRAME opcode claims 2**62 bytes."""
    return b"\x80\x05\x95" + (1 << 62).to_bytes(8, "little") + b"N."


junk = st.one_of(
    st.binary(max_size=64),
    st.binary(min_size=1, max_size=48).map(lambda b: batch([run_item()])[: len(b)]),  # truncated
    st.sampled_from(
        [
            b"",
            b"\x80\x05" + b"\x00" * (1 << 20),
            huge_bytes_pickle(),
            huge_frame_pickle(),
            pickle.dumps(Evil()),
            pickle.dumps(EvalEvil()),
            b"P" + pickle.dumps(Evil()),
            D(Evil()),
            b"Zjunk",
            b"P\x80\x05junk",
            pickle.dumps(Evil(), 0),
            pickle.dumps([Evil()], 2),
        ]
    ),
)


def multipart(frames):
    return st.lists(frames, min_size=2, max_size=3)


# ---------------------------------------------------------------- ingest frames
#: Wrong in one field (from scheduler 1's point of view): never accepted.
BAD_RUNS = (
    [
        run_item(**{field: v})
        for field, values in {
            "type_": [0, 7, 1.0, "1", None, True],
            "from_": [1.5, "x", [1], b"p"],
            "to": [FLOAT_PID, "x", 3, (P2,)],
            "ts_kind": [-1, 4, 1.0, 3],  # 3: profile_scheduler on a TRACE run
            "n": [0, -1, 10**9, 2, 1.0],  # 2: the blob holds 1 body
            "blob": [
                b"junk",
                "str",
                pickle.dumps((1,)),
                pickle.dumps([]),
                pickle.dumps(Evil()),
                pickle.dumps([Evil()]),
                pickle.dumps([FLOAT_PID]),
                huge_bytes_pickle(),
            ],
            "made_ns": [-1, 1.5, None, 1 << 64],
        }.items()
        for v in values
    ]
    + [
        run_item(ts_kind=1, blob=pickle.dumps([A("not_a_tuple")])),
        run_item()[:7],
        run_item() + (0,),
    ]
)
BAD_EVENTS = [
    ("e", "spawn", P2),
    ("e", "spawn", FLOAT_PID),
    ("e", "spawn", 80),
    ("e", "nosuch", P1),
    ("e", "unregister", "name", P1),
    ("e", "exit"),
    ("e", "tracer", P1, P1),
    ("z", P1),
    (),
    "r",
]
BAD_INGEST = st.one_of(
    junk,
    multipart(st.just(batch([run_item()]))),
    st.sampled_from(BAD_RUNS + BAD_EVENTS).map(lambda it: batch([run_item(), it])),
    st.sampled_from(
        [
            batch([run_item()], version=2),
            batch([run_item()], version=None),
            batch([run_item()], sched=2),  # claims another sender
            batch([run_item()], sched=99),
            batch([run_item()], sched="1"),
            pickle.dumps(("b", WIRE_VERSION, 1, "items")),
            pickle.dumps(("b", WIRE_VERSION, 1)),
            pickle.dumps(("fin", 1, 0)),  # a fin carries its codec byte
            P(("fin", 2, 0)),
            P(("fin", 1)),
            P(("fin", 1, -1)),
            P(("fin", True, 0)),
            P(("b", WIRE_VERSION, 1, [])),  # a batch does not
            pickle.dumps(("z", 1, [])),
            pickle.dumps([1, 2, 3]),
            pickle.dumps(("b", WIRE_VERSION, 1, [Evil()])),
            batch([("e", "spawn", P1), run_item(n=0)]),  # a good item, then a bad one
        ]
    ),
)
#: Well-formed frames only a real scheduler 1 or 2 may send (from a peer
#: that is not one, they are refused too).
GOOD_INGEST = st.sampled_from(
    [
        batch([run_item()]),
        batch([("e", "spawn", P1)]),
        batch([run_item()], sched=2),
        P(("fin", 1, 0)),
    ]
)


# ---------------------------------------------------------------- inbox frames
def bad_peer_frames(sink):
    """From scheduler 2 to scheduler 1's inbox, wrong in one field."""
    good = ("msg", sink, (A("ping"), -1), None)
    return [
        P(("p", 1, [good])),  # claims to be scheduler 1
        P(("p", 2, [("msg", P2, 1, None)])),  # for a process not on scheduler 1
        P(("p", 2, [("msg", FLOAT_PID, 1, None)])),
        P(("p", 2, [good[:3]])),
        P(("p", 2, [good + (1,)])),
        P(("p", 2, [("nosuch", sink)])),
        P(("p", 2, [("msg", sink, 1, "token")])),
        P(("p", 2, [("msg", sink, 1, (1, 2))])),
        P(("p", 2, [good, ("link", sink, P1, None)])),  # the link's sender is scheduler 1's
        P(("p", 2, [("unlink", sink, 7)])),
        P(("p", 2, [("exit", sink, P2, A("x"), 1, None)])),
        P(("p", 2, [("spawn", P1, os.system, (), None, ())])),
        P(("p", 2, [("spawn", P1, pinger, (), None, ((1.5, P2, 0),))])),
        P(("p", 2, "sigs")),
        P(("p", 2)),
        P(("p", 2, [good], -1)),
        P(("p", 2, [good], 1.5)),
        P(("p", 2, [good], 0, 0)),
        P(("d", [(sink, body_blob(), 1, 0, 0, 0)])),  # deliveries come from the dispatcher
        P(("fin-ack",)),
        P(("zz",)),
        P(("p", 2, [Evil()])),
        D(("p", 2, [good])),
        b"P" + pickle.dumps(("p", 2, [("spawn", P1, _Ref("os", "system"), (), None, ())])),
    ]


def good_inbox_frames(sink, tracer):
    """Well-formed frames only the dispatcher or scheduler 2 may send."""
    return [
        P(("p", 2, [("msg", sink, (A("ping"), -1), None)])),
        P(("d", [(tracer, body_blob(), 1, 0, 0, 0)])),
        P(("fin-ack",)),
    ]


# ---------------------------------------------------------------- control frames
BAD_CONTROL = st.one_of(
    junk,
    multipart(st.just(P((10**9, "status", ())))),
    st.sampled_from(
        [
            P((1, "status")),
            P(("1", "status", ())),
            P((1, 5, ())),
            P((1, "x", [])),
            P([1, "status", ()]),
            P((1, "status", (Evil(),))),
            D((1, "stop", ())),
            P((1, "open_trace_port", ("file", (Evil(),), {}))),
        ]
    ),
)
GOOD_CONTROL = st.sampled_from(
    [
        P((1, "stop", ())),
        P((2, "hold", ())),
        P((3, "status", ())),
        P((4, "state", ("set_system_seq_tracer", (P1,)))),
    ]
)


# ---------------------------------------------------------------- controller frames
def bad_controller_frames(mine, other):
    """From scheduler 1 (whose process is ``mine``) to the controller."""
    return [
        P(("r", -5, True, None)),
        P(("r", 10**12, True, None)),
        P(("r", "x", True, None)),
        P(("r", 1)),
        P(("rpc", other, ("bif", "whereis", [A("x")]))),
        P(("rpc", FLOAT_PID, ("bif", "whereis", [A("x")]))),
        P(("rpc", mine, ("nosuch",))),
        P(("rpc", mine, ("bif", 5, []))),
        P(("rpc", mine, ("register", "x", mine))),
        P(("bye", 2, {})),
        P(("bye", 1, "stats")),
        P(("ready", 1, 0)),
        P(("hello", 1, None, 0, "h", None)),
        P(("r", -5, False, Evil())),
        D(("bye", 1, {})),
        P(("r", -5, False, SystemExit(0))),
    ]


GOOD_CONTROLLER = [
    P(("bye", 1, {})),
    P(("r", 1, True, None)),
    P(("ready", 1, 0)),
    P(("hello", None, "tcp://127.0.0.1:1", 1, "h", None)),
]


# ---------------------------------------------------------------- the workload
@pytest.fixture(scope="module")
def fuzz_vm():
    with smp.Emulator(mode="smp", schedulers=2) as vm:
        tracer = vm.spawn_collector(scheduler=1)
        yield vm, tracer
    assert not os.path.exists(MARKER), "a frame ran code"


def bad_count(st, where) -> int:
    return st.bad_frames_at.get(where, 0)


def fuzz_round(vm, tracer, send, where, n=6):
    """A traced workload (pinger on scheduler 2, sink on 1) while
    ``send(sink, pinger)`` throws bad frames at a socket and returns how many
    messages it sent: each is counted once at ``where``, nothing else changes."""
    before = vm.statistics()
    sink = vm.spawn_collector(scheduler=1)
    p = vm.spawn(pinger, sink, n, scheduler=2)
    vm.trace(p, True, ["send"], tracer=tracer)
    seen = len(vm.messages(tracer))
    expected = send(sink, p)
    after = before
    # a forged peer's frames arrive when they arrive: wait for the count (the
    # condition), bounded in time rather than in rounds (a loaded machine)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        vm.run(timeout=10)  # quiet, or EmulatorTimeout
        after = vm.statistics()
        if bad_count(after, where) - bad_count(before, where) >= expected:
            break
    assert not os.path.exists(MARKER), "a frame ran code"
    assert bad_count(after, where) - bad_count(before, where) == expected
    assert after.bad_frames - before.bad_frames == expected  # nowhere else
    assert vm.messages(sink) == [(A("ping"), i) for i in range(n)]
    traced = vm.messages(tracer, seen)
    assert [m[3] for m in traced] == [(A("ping"), i) for i in range(n)]
    assert after.made - before.made == n
    assert after.delivered - before.delivered == n
    assert after.made == after.delivered + after.dropped + after.queued
    assert all(q.is_alive() for q in vm._sup.procs)  # no process died of a frame


def forged_socket(endpoint: str, ident: bytes | None):
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 2000)
    if ident is not None:
        s.setsockopt(zmq.ROUTING_ID, ident)
    s.connect(endpoint)
    return s


def send_all(sock, frames) -> None:
    for f in frames:
        if type(f) is list:
            sock.send_multipart(f)
        else:
            sock.send(f)


_fresh = itertools.count()
#: Routing ids a forger connects with (made unique: ZeroMQ refuses a second
#: connection with an id still in use): its own, or ones it makes up.
idents = st.sampled_from([None, b"s1-", b"\x01", b"\x01" * 15]).map(
    lambda b: None if b is None else b + str(next(_fresh)).encode()
)


# ---------------------------------------------------------------- the tests
def from_forged(endpoint, ident, frames) -> int:
    s = forged_socket(endpoint, ident)
    send_all(s, frames)
    s.close()
    return len(frames)


def from_scheduler(vm, k, where, frames) -> int:
    vm.spawn(send_raw, where, frames, scheduler=k)
    return len(frames)


@SETTINGS
@given(frames=st.lists(st.one_of(BAD_INGEST, GOOD_INGEST), min_size=1, max_size=4), ident=idents)
def test_ingest_from_a_peer_that_is_no_scheduler(fuzz_vm, frames, ident):
    vm, tracer = fuzz_vm
    fuzz_round(
        vm, tracer, lambda sink, p: from_forged(vm.endpoints["ingest"], ident, frames), "ingest"
    )
    assert "not from a scheduler" in vm.statistics().last_bad_frame


@SETTINGS
@given(frames=st.lists(BAD_INGEST, min_size=1, max_size=4))
def test_ingest_from_a_scheduler_sending_wrong_frames(fuzz_vm, frames):
    vm, tracer = fuzz_vm
    fuzz_round(vm, tracer, lambda sink, p: from_scheduler(vm, 1, "ingest", frames), "ingest")


def pick(frames_of):
    """One of the frames ``frames_of(sink, pinger, tracer)`` makes, chosen
    before the workload exists (its pids fill the frame in later)."""
    size = len(frames_of(P1, P2, P1))
    return st.integers(0, size - 1).map(lambda i: lambda *ctx: frames_of(*ctx)[i])


def made(frames, *ctx) -> list:
    return [f(*ctx) if callable(f) else f for f in frames]


@SETTINGS
@given(
    frames=st.lists(
        st.one_of(
            junk,
            pick(lambda sink, p, tracer: good_inbox_frames(sink, tracer) + bad_peer_frames(sink)),
        ),
        min_size=1,
        max_size=4,
    ),
    ident=idents,
)
def test_inbox_from_a_peer_that_is_no_scheduler(fuzz_vm, frames, ident):
    vm, tracer = fuzz_vm
    fuzz_round(
        vm,
        tracer,
        lambda sink, p: from_forged(
            vm.endpoints["inbox"].format(1), ident, made(frames, sink, p, tracer)
        ),
        "schedulers",
    )


@SETTINGS
@given(
    frames=st.lists(
        st.one_of(
            junk,
            multipart(st.just(P(("p", 2, [])))),
            pick(lambda sink, p, tracer: bad_peer_frames(sink)),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_inbox_from_a_scheduler_sending_wrong_frames(fuzz_vm, frames):
    vm, tracer = fuzz_vm
    fuzz_round(
        vm,
        tracer,
        lambda sink, p: from_scheduler(vm, 2, 1, made(frames, sink, p, tracer)),
        "schedulers",
    )


@SETTINGS
@given(frames=st.lists(st.one_of(BAD_CONTROL, GOOD_CONTROL), min_size=1, max_size=4), ident=idents)
def test_dispatcher_control_from_a_peer_that_is_not_the_controller(fuzz_vm, frames, ident):
    vm, tracer = fuzz_vm
    fuzz_round(
        vm, tracer, lambda sink, p: from_forged(vm.endpoints["disp_ctl"], ident, frames), "control"
    )


@SETTINGS
@given(frames=st.lists(BAD_CONTROL, min_size=1, max_size=4))
def test_dispatcher_control_from_the_controller_with_wrong_frames(fuzz_vm, frames):
    vm, tracer = fuzz_vm

    def send(sink, p):
        send_all(vm.disp, frames)
        return len(frames)

    fuzz_round(vm, tracer, send, "control")
    assert not vm.disp.poll(0)  # a refused request gets no reply


@SETTINGS
@given(
    frames=st.lists(
        st.one_of(
            junk,
            multipart(st.just(P(("bye", 1, {})))),
            pick(lambda sink, p, tracer: GOOD_CONTROLLER + bad_controller_frames(sink, p)),
        ),
        min_size=1,
        max_size=4,
    ),
    ident=idents,
)
def test_controller_from_a_peer_that_is_no_scheduler(fuzz_vm, frames, ident):
    vm, tracer = fuzz_vm
    fuzz_round(
        vm,
        tracer,
        lambda sink, p: from_forged(vm.endpoints["ctl"], ident, made(frames, sink, p, tracer)),
        "controller",
    )


@SETTINGS
@given(
    frames=st.lists(
        st.one_of(
            junk,
            multipart(st.just(P(("bye", 1, {})))),
            pick(lambda sink, p, tracer: bad_controller_frames(sink, p)),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_controller_from_a_scheduler_sending_wrong_frames(fuzz_vm, frames):
    vm, tracer = fuzz_vm
    fuzz_round(
        vm,
        tracer,
        lambda sink, p: from_scheduler(vm, 1, "controller", made(frames, sink, p, tracer)),
        "controller",
    )


# ---------------------------------------------------------------- decoding itself
@settings(max_examples=200, deadline=None)
@given(
    raw=st.one_of(
        st.binary(max_size=200),
        st.sampled_from(
            [
                pickle.dumps(Evil()),
                pickle.dumps(EvalEvil()),
                pickle.dumps([Evil()], 2),
                pickle.dumps(Evil(), 0),
                huge_bytes_pickle(),
                huge_frame_pickle(),
            ]
        ),
    )
)
def test_decoders_refuse_or_return_data(raw):
    for decode in (
        codec.loads_terms,
        codec.loads,
        lambda r: codec.loads_frame(b"P" + r),
        lambda r: codec.loads(r, funs="loaded"),
        lambda r: codec.loads(r, funs="import"),
    ):
        try:
            decode(raw)
        except ProtocolError:
            pass
    with pytest.raises(ProtocolError, match="only the authenticated controller"):
        codec.loads_frame(b"D" + raw)
    assert not os.path.exists(MARKER)


#: Terms a frame field may hold: right and wrong types, pids and ports of
#: scheduler 1 and 2 (of 2), the atoms some fields take, a snapshot, a body.
SNAP = Snapshot(1, NIL, 0, False, NIL, NIL, 0, 0, 0, False, False, NIL, False, False, False, False)
field = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 2**33),
        st.floats(allow_nan=True),
        st.text(max_size=8),
        st.binary(max_size=8),
        st.sampled_from(
            [P1, P2, FLOAT_PID, Port(1), Port(2), Port(3), A("badarg"), A("undefined"), SNAP]
        ),
        st.just(pinger),
        st.just(ValueError("x")),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.one_of(st.integers(0, 3), st.just(A("a"))), inner, max_size=3),
    ),
    max_leaves=6,
)


def _loaded(rec):
    """A record's frame as a receiver loads it."""
    enc = rec.encode()
    return codec.loads_frame(enc, funs="loaded", state=True) if type(enc) is bytes else enc


#: Each decoder, the context it is given where its frames arrive (scheduler
#: 1 receiving from scheduler 2, the controller from scheduler 1), and a
#: frame it accepts, which the fuzzer changes.
SIGS = [
    W.Msg(P1, (A("ping"), 1), [1, A("l"), 2, P2, 3]),
    W.Spawn(P1, pinger, (P1, 2), P2, ((1, P2, 0),)),
    W.Link(P1, P2, (1, Port(1), 0)),
    W.Unlink(P1, P2),
    W.Exit(P1, P2, A("x"), True, None),
    W.PortCmd(Port(1), P2, b"d", False),
    W.PortReply(P1, A("badarg")),
    W.TraceFlag(P1, 1, True),
]
BODIES = [
    W.Snap(SNAP),
    W.Dead([P1]),
    W.Tracers([P2]),
    W.Registry({A("a"): P1}),
    W.TracerPorts([Port(1)]),
    W.PubHeartbeat(),
    W.PubHello(),
]
VALID = [
    (W.Hello, (), W.Hello(None, "tcp://h:1", 10, "h", b"k")),
    (W.Welcome, (), W.Welcome(1, 2, {1: ("e", None)}, [b"k"], 5, True, {"in": {}})),
    (W.Refused, (), W.Refused("no")),
    (W.Ready, (), W.Ready(1, 10)),
    (W.Request, (True,), W.Request(1, "status", (P1, [1]))),
    (W.Request, (False,), W.Request(None, "spawn", (pinger, (), False))),
    (W.Reply, (), W.Reply(1, True, [P1])),
    (W.Reply, (), W.Reply(1, False, ValueError("x"))),
    (W.Rpc, (), W.Rpc(P1, ("bif", "whereis", [A("a")]))),
    (W.Bye, (1,), W.Bye(1, {"made": 1})),
    (W.Heartbeat, (1,), W.Heartbeat(1)),
    (W.Fin, (1,), W.Fin(1, 3)),
    (W.FinAck, (), W.FinAck()),
    (W.Peer, (2, 1, 2), W.Peer(2, SIGS, 4)),
    *((type(g), (2, 1, 2), g) for g in SIGS),
    *((type(b), (), b) for b in BODIES),
    *((W.Publication, (), W.Publication(1, 2, b)) for b in BODIES),
]
VALID = [(cls, ctx, _loaded(rec)) for cls, ctx, rec in VALID]
DECODERS = sorted({(cls, ctx) for cls, ctx, _ in VALID}, key=repr)


def _changed(obj, path: list, value, how: str):
    """``obj`` with one change at ``path`` (indexes, taken modulo the length,
    into nested tuples and lists): a field replaced, dropped or added."""
    if type(obj) not in (tuple, list) or not obj:
        return value
    i = path[0] % len(obj)
    inner = obj[i]
    if len(path) > 1 and type(inner) in (tuple, list) and inner:
        new = [*obj[:i], _changed(inner, path[1:], value, how), *obj[i + 1 :]]
    elif how == "set":
        new = [*obj[:i], value, *obj[i + 1 :]]
    elif how == "drop":
        new = [*obj[:i], *obj[i + 1 :]]
    else:
        new = [*obj[:i], value, *obj[i:]]
    return type(obj)(new)


#: A frame a peer could send: one a decoder accepts with a change, or any term.
near_valid = st.builds(
    lambda v, path, value, how: (v[0], v[1], _changed(v[2], path, value, how)),
    st.sampled_from(VALID),
    st.lists(st.integers(0, 9), min_size=1, max_size=3),
    field,
    st.sampled_from(["set", "drop", "add"]),
)


def _holds_float_pid(obj) -> bool:
    if obj is FLOAT_PID:
        return True
    if type(obj) in (tuple, list):
        return any(_holds_float_pid(x) for x in obj)
    if type(obj) is dict:
        return any(_holds_float_pid(k) or _holds_float_pid(v) for k, v in obj.items())
    return False


def _decode_or_refuse(cls, ctx, obj):
    """``cls.decode``: a record of ``cls`` that decodes again from its own
    encoding, or ``ProtocolError``; never another exception.  True: a record."""
    try:
        rec = cls.decode(obj, *ctx)
    except ProtocolError:
        return False
    assert type(rec) is cls
    try:
        loaded = _loaded(rec)
    except ProtocolError:
        # a field no decoder checks deeply (a request's arguments) holds what
        # the restricted decoder refuses on the way in: such a frame never
        # reaches a decoder
        assert _holds_float_pid(obj)
        return True
    again = cls.decode(loaded, *ctx)
    assert type(again) is cls and repr(again) == repr(rec)
    return True


@pytest.mark.parametrize("cls,ctx,obj", VALID, ids=lambda x: getattr(x, "__name__", ""))
def test_every_protocol_decoder_takes_its_frame(cls, ctx, obj):
    assert _decode_or_refuse(cls, ctx, obj)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=st.one_of(near_valid, field.map(lambda f: (None, (), f))))
def test_every_protocol_decoder_returns_a_record_or_refuses(case):
    _cls, _ctx, obj = case
    for cls, ctx in DECODERS:
        _decode_or_refuse(cls, ctx, obj)
    for decode in (W.frame_kind, W.decode_state_body, lambda o: W.decode_signal(o, 2, 1, 2)):
        try:
            decode(obj)
        except ProtocolError:
            pass
    W.describe_signal(obj)  # a log line for anything


def test_frames_larger_than_the_limit_are_refused(monkeypatch):
    monkeypatch.setattr(codec, "MAX_FRAME", 100)
    with pytest.raises(ProtocolError, match="larger than 100"):
        codec.loads_terms(pickle.dumps(b"x" * 200))


def test_references_resolve_only_to_async_functions():
    assert codec.loads(codec.dumps(pinger), funs="loaded") is pinger
    with pytest.raises(ProtocolError, match="not an async def"):
        codec.loads(pickle.dumps(_Ref("os", "system")), funs="import")
    with pytest.raises(ProtocolError, match="no frame may contain"):
        codec.loads(codec.dumps(pinger))  # where no function may be
    missing = codec.loads(pickle.dumps(_Ref("no_such_module_here", "f")), funs="loaded")
    assert type(missing) is codec.Unresolved  # never imported from a peer's frame
    with pytest.raises(codec.Unencodable):
        codec.dumps(lambda: None)


# ---------------------------------------------------------------- closures
def make_greeter(tag: str):
    async def greet(proc, to):
        await proc.send(to, (A(tag), proc.pid))

    return greet


async def spawns_a_closure(proc, to, where):
    """Spawns a closure made here, on ``where`` (None: let placement pick)."""
    try:
        child = await proc.spawn(make_greeter("child"), to, scheduler=where)
    except smp.BadArg:
        await proc.send(to, A("refused"))
        return
    await proc.send(to, (A("spawned"), child))


def test_closures_travel_from_an_authenticated_controller_only():
    with smp.Emulator(mode="smp", schedulers=2) as vm:  # ipc, owner-only directory
        sink = vm.spawn_collector(scheduler=1)
        p = vm.spawn(make_greeter("hi"), sink, scheduler=2)  # dill, to a scheduler
        vm.run()
        assert vm.messages(sink) == [(A("hi"), p)]
        # a process's closure never travels to another scheduler: it runs on
        # the spawner's own, or the spawn is refused when another is named
        vm.spawn(spawns_a_closure, sink, None, scheduler=2)
        vm.spawn(spawns_a_closure, sink, 1, scheduler=2)
        vm.run()
        got = vm.messages(sink, 1)
        assert A("refused") in got
        (child,) = [m[1] for m in got if type(m) is tuple and m[0] == A("spawned")]
        assert (A("child"), child) in got and len(got) == 3
        assert vm._owner(child) == 2


def test_no_closure_on_an_insecure_channel():
    with pytest.warns(InsecureWarning, match="tcp without CURVE"):
        vm = smp.Emulator(
            mode="smp", schedulers=1, bind=f"tcp://127.0.0.1:{free_base()}", insecure=True
        )
    with vm:
        sink = vm.spawn_collector()
        with pytest.raises(codec.Unencodable, match="cannot travel by reference"):
            vm.spawn(make_greeter("hi"), sink)
        vm.spawn(pinger, sink, 2)  # by reference: fine
        vm.run()
        assert vm.messages(sink) == [(A("ping"), 0), (A("ping"), 1)]


def test_a_dispatcher_whose_thread_dies_exits(tmp_path, monkeypatch):
    """Whatever kills one of its threads, the dispatcher does not live on
    without it: it stops and exits with an error, which the controller
    reports as ``DispatcherLost``."""
    from dispatcher.server import Dispatcher

    d = tempfile.mkdtemp(prefix="smp-fuzz-", dir=tmp_path)
    disp = Dispatcher(
        1,
        {
            "ingest": f"ipc://{d}/i",
            "disp_ctl": f"ipc://{d}/c",
            "pub": [f"ipc://{d}/p{i}" for i in range(3)],
        },
    )

    def dies():
        raise RuntimeError("a bug")

    monkeypatch.setattr(disp, "dispatch_loop", dies)
    with pytest.raises(SystemExit) as e:
        disp.serve()
    assert e.value.code == 70 and disp.thread_died == "dispatch"


def test_every_term_type_travels_and_is_checked():
    """Maps, funs and bit strings travel in message bodies and between
    schedulers like every other term, built by checking constructors."""
    import pickle as _pickle

    from smp.core.terms import A as _A
    from smp.core.terms import BitString, ExportFun, Fun, Map
    from smp.core.terms import Pid as _Pid

    terms = [
        Map({_A.a: 1, 2.0: [Map()]}),
        BitString(b"\x01\x40", 11),
        ExportFun(_A.m, _A.f, 2),
        Fun(_A.m, 1, bytes(16), 0, 0, 5, _Pid(81), (1, _A.x)),
    ]
    assert codec.loads_terms(_pickle.dumps(terms, 5)) == terms
    assert codec.loads(codec.dumps(terms)) == terms
    bad = _pickle.dumps(BitString(b"\x01\x40", 11), 5).replace(b"\x0b", b"\x08", 1)
    with pytest.raises(ProtocolError):
        codec.loads_terms(bad)
