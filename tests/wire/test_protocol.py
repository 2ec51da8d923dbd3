"""Every frame of the control, peer and state links round-trips through its
encoding, and a decoder refuses a wrong field naming the frame and the field
(``smp.wire.protocol``)."""

from __future__ import annotations

import pytest

from smp.core.errors import ProtocolError, SmpError
from smp.core.flags import TRACEE_FLAGS
from smp.core.placement import pid_owner, port_owner
from smp.core.state import NIL, Snapshot
from smp.core.terms import A, Pid, Port
from smp.wire import codec
from smp.wire import protocol as W
from smp.wire.frames import DATA_PREFIX, encode_deliveries

NSCHED = 2
HERE, SENDER = 1, 2  # signals: from scheduler 2, for scheduler 1
MINE = next(Pid(n) for n in range(80, 200) if pid_owner(Pid(n), NSCHED) == HERE)
THEIRS = next(Pid(n) for n in range(80, 200) if pid_owner(Pid(n), NSCHED) == SENDER)
MY_PORT = next(Port(n) for n in range(1, 100) if port_owner(Port(n), NSCHED) == HERE)
SNAP = Snapshot(7, NIL, 0, False, NIL, NIL, 0, 0, 0, False, False, NIL, False, False, False, False)
TOKEN = [1, A.label, 3, THEIRS, 4]
OUTSIDE = next(1 << i for i in range(64) if not TRACEE_FLAGS & 1 << i)  # no tracee flag


async def body(proc, *args):
    """A process body that travels by reference."""


#: One of each frame a socket carries, with what its decoder needs to know.
FRAMES = [
    (W.Hello(None, "tcp://127.0.0.1:5", 4242, "host", b"k" * 40), ()),
    (W.Hello(1, None, 1, "h", None), ()),
    (
        W.Welcome(
            2,
            3,
            {1: ("tcp://a:1", None), 2: ("tcp://a:2", b"key")},
            [b"key"],
            77,
            True,
            {"ingest": b"\x01id", "out": {1: b"\x01x"}},
        ),
        (),
    ),
    (W.Welcome(1, 1, {}, [], None, False, {}), ()),
    (W.Refused("no room"), ()),
    (W.Ready(2, 99), ()),
    (W.Request(5, "status", ()), (True,)),
    (W.Request(None, "spawn", (body, (1, 2), False)), ()),
    (W.Reply(5, True, {"idle": True}), ()),
    (W.Reply(6, False, SmpError("it broke")), ()),
    (W.Rpc(MINE, ("bif", "whereis", [A.x])), ()),
    (W.Rpc(MINE, ("register", A.name, MINE)), ()),
    (W.Rpc(MINE, ("unregister", A.name)), ()),
    (W.Bye(2, {"made": 3}), (2,)),
    (W.Heartbeat(3), (3,)),
    (W.Fin(1, 12), (1,)),
    (W.FinAck(), ()),
]

#: One of each signal, from a process of scheduler 2 to one of scheduler 1.
SIGNALS = [
    W.Msg(MINE, (A.ping, 1), None),
    W.Msg(MINE, [1, 2], TOKEN),
    W.Spawn(MINE, body, (1,), THEIRS, ((3, THEIRS, 0), (5, THEIRS, 12))),
    W.Spawn(MINE, body, [], None, ()),
    W.Link(MINE, THEIRS, None),
    W.Link(MINE, THEIRS, (5, MY_PORT, 0)),
    W.Link(MY_PORT, THEIRS, None),
    W.Unlink(MINE, THEIRS),
    W.Unlink(MY_PORT, THEIRS),
    W.Exit(MINE, THEIRS, A.normal, True, None),
    W.Exit(MINE, Port(9), A.kill, False, A.undefined),
    W.Exit(MY_PORT, THEIRS, A.boom, True, None),
    W.PortCmd(MY_PORT, THEIRS, b"data", True),
    W.PortReply(MINE, A.badarg),
    W.PortReply(MINE, A.noproc),
    W.PortReply(MINE, True),
    W.TraceFlag(MINE, 1, False),
    W.TraceFlag(MINE, TRACEE_FLAGS, True),
]

BODIES = [
    W.Snap(SNAP),
    W.Dead([MINE, THEIRS]),
    W.Dead([]),
    W.Tracers([THEIRS]),
    W.Registry({A.a: MINE, A.b: MY_PORT}),
    W.TracerPorts([MY_PORT, Port(3)]),
    W.PubHeartbeat(),
    W.PubHello(),
]


def test_the_prefix_is_the_one_the_codec_writes():
    assert codec.dumps_frame(("x",))[:1] == DATA_PREFIX
    assert encode_deliveries([])[:1] == DATA_PREFIX
    assert all(rec.encode()[:1] == DATA_PREFIX for rec, _ in FRAMES)


@pytest.mark.parametrize("rec,ctx", FRAMES, ids=lambda x: type(x).__name__)
def test_each_frame_round_trips(rec, ctx):
    raw = rec.encode()
    obj = codec.loads_frame(raw, funs="import")
    assert type(obj) is tuple  # plain data on the wire, never the record's class
    got = type(rec).decode(obj, *ctx)
    assert type(got) is type(rec)
    if isinstance(rec, W.Reply) and not rec.ok:  # exceptions compare by identity
        assert got[:2] == rec[:2] and type(got.value) is type(rec.value)
        assert got.value.args == rec.value.args
    else:
        assert got == rec


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: type(s).__name__)
def test_each_signal_round_trips_alone_and_in_a_peer_frame(sig):
    assert type(sig).decode(sig.encode(), SENDER, HERE, NSCHED) == sig
    got = W.decode_signal(sig.encode(), SENDER, HERE, NSCHED)
    assert type(got) is type(sig) and got == sig
    peer = W.Peer(SENDER, [sig, sig.encode()], 4)  # records or their tuples
    back = W.Peer.decode(codec.loads_frame(peer.encode(), funs="loaded"), SENDER, HERE, NSCHED)
    assert back == W.Peer(SENDER, [sig, sig], 4)
    assert [type(s) for s in back.signals] == [type(sig)] * 2


def test_a_peer_frame_without_its_batch_count_still_decodes():
    obj = codec.loads_frame(W.Peer(SENDER, [SIGNALS[0]]).encode())
    assert len(obj) == 3
    assert W.Peer.decode(obj, SENDER, HERE, NSCHED).batches is None


@pytest.mark.parametrize("body", BODIES, ids=lambda b: type(b).__name__)
def test_each_publication_round_trips(body):
    pub = W.Publication(2, 41, body)
    got = W.Publication.loads(pub.encode())
    assert got == pub and type(got.body) is type(body)
    assert type(W.decode_state_body(body.encode())) is type(body)


def test_a_request_with_a_closure_travels_only_on_an_authenticated_channel():
    def make():
        async def closure(proc):
            pass

        return closure

    req = W.Request(1, "spawn", (make(), (), False))
    with pytest.raises(codec.Unencodable):
        req.encode()
    raw = req.encode(code_ok=True)
    with pytest.raises(ProtocolError, match="only the authenticated controller"):
        codec.loads_frame(raw)
    got = W.Request.decode(codec.loads_frame(raw, code_ok=True), need_id=True)
    assert got.id == 1 and got.cmd == "spawn" and callable(got.args[0])


def test_a_reply_that_cannot_travel_says_so_instead():
    raw = W.Reply(3, True, lambda: None).encode()
    got = W.Reply.decode(codec.loads_frame(raw))
    assert got.id == 3 and got.ok is False
    assert isinstance(got.value, SmpError) and "Unencodable" in str(got.value)


@pytest.mark.parametrize(
    "frame,ctx,match",
    [
        (("hello", 1, None, -1, "h", None), (W.Hello,), "Hello frame: os_pid is -1"),
        (("hello", 0, None, 1, "h", None), (W.Hello,), "Hello frame: sched is 0"),
        (("hello", 1, None, 1, b"h", None), (W.Hello,), "Hello frame: host"),
        (("hello", 1, None, 1, "h", "key"), (W.Hello,), "Hello frame: key"),
        (("hello", 1, None, 1, "h"), (W.Hello,), r"Hello frame is not \('hello'"),
        (("welcome", 3, 2, {}, [], None, True, {}), (W.Welcome,), "Welcome frame: sched is 3"),
        (("welcome", 1, 2, {}, [], None, 1, {}), (W.Welcome,), "Welcome frame: local is 1"),
        (("welcome", 1, 2, {5: ("a", None)}, [], None, True, {}), (W.Welcome,), "inbox_map"),
        (("ready", 1, 2), (W.Hello,), "Hello frame"),
        (("ready", True, 2), (W.Ready,), "Ready frame: sched is True"),
        ((1, "status"), (W.Request, True), r"Request frame is not \(id, command, args\)"),
        ((None, "status", ()), (W.Request, True), "Request frame: id is None"),
        ((1, 5, ()), (W.Request,), "Request frame: cmd is 5"),
        ((1, "x", []), (W.Request,), "Request frame: args is a list"),
        (("r", 1, True), (W.Reply,), "Reply frame is not"),
        (("r", "1", True, None), (W.Reply,), "Reply frame: id is '1'"),
        (("r", 1, 1, None), (W.Reply,), "Reply frame: ok is 1"),
        (("r", 1, False, "oops"), (W.Reply,), "Reply frame: value is 'oops'"),
        (("rpc", 7, ("bif", "f", [])), (W.Rpc,), "Rpc frame: pid is 7"),
        (("rpc", MINE, ("register", "x", MINE)), (W.Rpc,), "Rpc frame: request"),
        (("rpc", MINE, ("nosuch",)), (W.Rpc,), "Rpc frame: request"),
        (("bye", 2, {}), (W.Bye, 1), "Bye frame: sched is 2"),
        (("bye", 1, "stats"), (W.Bye, 1), "Bye frame: stats is 'stats'"),
        (("hb", 2), (W.Heartbeat, 1), "Heartbeat frame: sched is 2"),
        (("fin", 2, 0), (W.Fin, 1), "Fin frame: sched is 2"),
        (("fin", 1, -1), (W.Fin, 1), "Fin frame: batches is -1"),
        (("fin-ack", 1), (W.FinAck,), "FinAck frame is not"),
        (("p", 1, []), (W.Peer, SENDER, HERE, NSCHED), r"peer frame is not \('p', 2"),
        (("p", 2, [], -1), (W.Peer, SENDER, HERE, NSCHED), "peer frame is not"),
        (("p", 2, "sigs"), (W.Peer, SENDER, HERE, NSCHED), "no list of signals"),
        (("p", 2, [("nosuch", MINE)]), (W.Peer, SENDER, HERE, NSCHED), "malformed signal"),
        (("p", 2, [([1], MINE)]), (W.Peer, SENDER, HERE, NSCHED), "malformed signal"),
    ],
)
def test_a_wrong_field_is_refused_by_name(frame, ctx, match):
    cls, *rest = ctx
    with pytest.raises(ProtocolError, match=match):
        cls.decode(frame, *rest)


@pytest.mark.parametrize(
    "sig,match",
    [
        (("msg", THEIRS, 1, None), "not a process here"),
        (("msg", MINE, 1, "token"), "Msg frame: token"),
        (("msg", MINE, 1), r"Msg frame is not \('msg'"),
        (("spawn", MINE, 5, (), None, None), "Spawn frame: fun is 5"),
        (("spawn", MINE, body, {}, None, None), "Spawn frame: args"),
        (("spawn", MINE, body, (), MINE, None), "Spawn frame: link_to"),
        (("spawn", MINE, body, (), None, ((1.5, MINE, 0),)), "Spawn frame: inherit"),
        (("spawn", MINE, body, (), None, None), "Spawn frame: inherit is None"),
        (("spawn", MINE, body, (), None, ((1, MINE, 0),) * 3), "Spawn frame: inherit"),
        (("link", MINE, THEIRS, (1, MINE)), "Link frame: inherit"),
        (("link", MINE, MINE, None), "Link frame: from_"),
        (("link", MY_PORT, THEIRS, (1, THEIRS, 0)), "Link frame: inherit"),
        (("exit", MY_PORT, Port(9), A.x, True, None), "Exit frame: from_"),
        (("unlink", MINE, 7), "Unlink frame: from_ is 7"),
        (("exit", MINE, THEIRS, A.x, 1, None), "Exit frame: link is 1"),
        (("exit", MINE, MINE, A.x, True, None), "Exit frame: from_"),
        (("port_cmd", MINE, THEIRS, b"", True), "PortCmd frame: port"),
        (("port_cmd", MY_PORT, THEIRS, b"", None), "PortCmd frame: reply"),
        (("port_reply", MINE, A.maybe), "PortReply frame: value"),
        (("trace_flag", MINE, 0, True), "TraceFlag frame: flags is 0"),
        (("trace_flag", MINE, TRACEE_FLAGS | OUTSIDE, True), "TraceFlag frame: flags"),
    ],
)
def test_a_wrong_signal_field_is_refused_by_name(sig, match):
    with pytest.raises(ProtocolError, match=match):
        W.decode_signal(sig, SENDER, HERE, NSCHED)


@pytest.mark.parametrize(
    "obj,match",
    [
        ((3, 1, ("hb",)), "Publication frame: socket is 3"),
        ((0, -1, ("hb",)), "Publication frame: seq is -1"),
        ((0, 1, ("snap", {})), "Snap frame: snapshot is a dict"),
        ((0, 1, ("dead", [1])), "Dead frame: pids"),
        ((0, 1, ("tracer", (MINE,))), "Tracers frame: pids"),
        ((0, 1, ("reg", {"a": MINE})), "Registry frame: names"),
        ((0, 1, ("ports", [MINE])), "TracerPorts frame: ports"),
        ((0, 1, ("hb", 1)), "PubHeartbeat frame is not"),
        ((0, 1, ("nosuch",)), "unknown kind 'nosuch'"),
        ((0, 1), "state frame is not"),
    ],
)
def test_a_wrong_publication_is_refused_by_name(obj, match):
    with pytest.raises(ProtocolError, match=match):
        W.Publication.decode(obj)


def test_a_publication_carries_no_exception_and_its_codec_byte():
    raw = codec.dumps_frame((0, 1, ("dead", [ValueError("x")])))
    with pytest.raises(ProtocolError, match="no frame may contain"):
        W.Publication.loads(raw)
    with pytest.raises(ProtocolError, match="codec byte"):
        W.Publication.loads(raw[1:])


def test_frame_kind_and_describe_signal():
    assert W.frame_kind(("p", 1)) == "p"
    for bad in [(), [("p",)], (A.p,), "p", None]:
        with pytest.raises(ProtocolError, match="starts with its kind"):
            W.frame_kind(bad)
    assert W.describe_signal(SIGNALS[0]) == f"a msg signal for {MINE!r}"
    assert W.describe_signal(("unlink", MINE, THEIRS)) == f"an unlink signal for {MINE!r}"
    assert W.describe_signal(("exit", MINE, THEIRS)) == f"an exit signal for {MINE!r}"
    assert W.describe_signal(("x",)) == "a malformed signal"
