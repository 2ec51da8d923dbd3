"""The frames of the control, peer and state links, named, each with
``encode`` and a checked ``decode`` (the system-message path has its own
in ``smp.wire.frames``).

* controller and scheduler (``ctl``): :class:`Hello`, :class:`Welcome`,
  :class:`Refused`, :class:`Ready`, :class:`Request`, :class:`Reply`,
  :class:`Rpc` (a process's BIF call), :class:`Bye`, :class:`Heartbeat`;
  controller and dispatcher: :class:`Request`, :class:`Reply`;
* scheduler to scheduler (inbox): :class:`Peer`, carrying the signals
  :class:`Msg`, :class:`Spawn`, :class:`Link`, :class:`Unlink`,
  :class:`Exit`, :class:`PortCmd`, :class:`PortReply`, :class:`TraceFlag`;
* scheduler and dispatcher at shutdown: :class:`Fin` (ingest),
  :class:`FinAck` (inbox);
* dispatcher to schedulers (PUB): :class:`Publication` of :class:`Snap`,
  :class:`Dead`, :class:`Tracers`, :class:`Registry`, :class:`TracerPorts`,
  :class:`PubHeartbeat`, :class:`PubHello`.

A frame's ``encode`` gives its bytes through ``codec.dumps_frame``, the one
codec entry, which writes the codec byte; a signal's or a publication
body's gives the tuple its frame carries.  ``decode`` takes what the
restricted decoder loaded, checks every field (types, arity, ranges and,
where it is given, the sender) and raises ``ProtocolError`` naming the frame
and the field; it never raises anything else, whatever it is given.
"""

from __future__ import annotations

from typing import NamedTuple

from smp.core.errors import ProtocolError
from smp.core.flags import TRACEE_FLAGS
from smp.core.placement import pid_owner, port_owner
from smp.core.state import Snapshot
from smp.core.terms import Atom, Pid, Port
from smp.wire import codec
from smp.wire.frames import DATA_PREFIX, FIN, FIN_ACK

__all__ = [
    "Hello",
    "Welcome",
    "Refused",
    "Ready",
    "Request",
    "Reply",
    "Rpc",
    "Bye",
    "Heartbeat",
    "Peer",
    "Msg",
    "Spawn",
    "Link",
    "Unlink",
    "Exit",
    "PortCmd",
    "PortReply",
    "TraceFlag",
    "SIGNALS",
    "Fin",
    "FinAck",
    "Publication",
    "Snap",
    "Dead",
    "Tracers",
    "Registry",
    "TracerPorts",
    "PubHeartbeat",
    "PubHello",
    "STATE_BODIES",
    "frame_kind",
    "decode_signal",
    "decode_state_body",
    "describe_signal",
]

_U32 = (1 << 32) - 1
am_undefined, am_badarg = Atom("undefined"), Atom("badarg")


# ---------------------------------------------------------------- checking helpers


def _what(x) -> str:
    """``x`` for an error message, bounded: a scalar's repr, else its type."""
    if type(x) in (int, bool, float, type(None), Atom, Pid, Port):
        return repr(x)
    if type(x) in (str, bytes):
        r = repr(x)
        return r if len(r) <= 40 else r[:37] + "..."
    return f"a {type(x).__name__}"


def _int_in(x, lo: int, hi: int) -> bool:
    return type(x) is int and lo <= x <= hi


def _need(cls, field: str, value, ok: bool) -> None:
    if not ok:
        raise ProtocolError(f"{cls.__name__} frame: {field} is {_what(value)}")


def _fields(obj, cls) -> tuple:
    """The fields of a frame ``(KIND, field, ...)`` of ``cls``, checked for
    its kind and arity."""
    n = len(cls._fields)
    if type(obj) is not tuple or len(obj) != n + 1 or type(obj[0]) is not str:
        raise ProtocolError(f"{cls.__name__} frame is not ({cls.KIND!r}{', ...' * (n > 0)})")
    if obj[0] != cls.KIND:
        raise ProtocolError(f"{cls.__name__} frame has kind {_what(obj[0])}")
    return obj[1:]


def _frame(rec) -> bytes:
    return codec.dumps_frame((rec.KIND, *rec))


def frame_kind(obj) -> str:
    """The kind of a loaded frame ``(kind, ...)``, a string."""
    if type(obj) is not tuple or not obj or type(obj[0]) is not str:
        raise ProtocolError("frame is not a tuple that starts with its kind")
    return obj[0]


def _inherit_ok(x) -> bool:
    """What a spawn or link signal carries of the tracing it inherits."""
    return x is None or (
        type(x) is tuple and len(x) == 2 and type(x[0]) is int and type(x[1]) in (Pid, Port)
    )


def _token_ok(token) -> bool:
    """A seq_trace token as signals carry it: none, a port's, or
    ``[Flags, Label, Serial, From, LastCnt]``."""
    return (
        token is None
        or token is am_undefined
        or (
            type(token) in (list, tuple)
            and len(token) == 5
            and type(token[0]) is int
            and type(token[2]) is int
            and type(token[4]) is int
        )
    )


def _request_ok(request) -> bool:
    """A BIF request of a process: ``(bif, name, args)``, ``(register, name,
    pid)`` or ``(unregister, name, ...)``."""
    if type(request) is not tuple or not request or type(request[0]) is not str:
        return False
    kind = request[0]
    if kind == "bif":
        return len(request) == 3 and type(request[1]) is str and type(request[2]) in (tuple, list)
    if kind == "register":
        return len(request) == 3 and type(request[1]) is Atom
    if kind == "unregister":
        return len(request) >= 2 and type(request[1]) is Atom
    return False


# ---------------------------------------------------------------- controller <-> scheduler


class Hello(NamedTuple):
    """A scheduler's first frame to the controller; ``sched`` None for one
    that joins from another host and is given its id."""

    sched: int | None
    inbox: str | None  # its inbox's endpoint (smp)
    os_pid: int
    host: str
    key: bytes | None  # its CURVE public key

    KIND = "hello"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj) -> Hello:
        sched, inbox, os_pid, host, key = _fields(obj, cls)
        _need(cls, "sched", sched, sched is None or _int_in(sched, 1, _U32))
        _need(cls, "inbox", inbox, inbox is None or type(inbox) is str)
        _need(cls, "os_pid", os_pid, _int_in(os_pid, 0, _U32))
        _need(cls, "host", host, type(host) is str)
        _need(cls, "key", key, key is None or type(key) is bytes)
        return cls(sched, inbox, os_pid, host, key)


class Welcome(NamedTuple):
    """The controller's answer to a hello: the scheduler's id and wiring."""

    sched: int
    nsched: int
    inbox_map: dict  # scheduler -> (inbox endpoint, CURVE key)
    allowed: list  # CURVE keys its inbox lets in
    dispatcher_pid: int | None  # a local scheduler watches it
    local: bool  # on the controller's host
    ids: dict  # routing ids: "ingest", "out", "in", "keys", "hb"

    KIND = "welcome"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj) -> Welcome:
        sched, nsched, inbox_map, allowed, dpid, local, ids = _fields(obj, cls)
        _need(cls, "nsched", nsched, _int_in(nsched, 1, _U32))
        _need(cls, "sched", sched, _int_in(sched, 1, nsched if type(nsched) is int else 0))
        _need(
            cls,
            "inbox_map",
            inbox_map,
            type(inbox_map) is dict
            and all(
                _int_in(k, 1, nsched) and type(v) is tuple and len(v) == 2
                for k, v in inbox_map.items()
            ),
        )
        _need(cls, "allowed", allowed, type(allowed) is list)
        _need(cls, "dispatcher_pid", dpid, dpid is None or _int_in(dpid, 0, _U32))
        _need(cls, "local", local, type(local) is bool)
        _need(cls, "ids", ids, type(ids) is dict and all(type(k) is str for k in ids))
        return cls(sched, nsched, inbox_map, allowed, dpid, local, ids)


class Refused(NamedTuple):
    """The controller will not have this scheduler."""

    reason: str

    KIND = "refused"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj) -> Refused:
        (reason,) = _fields(obj, cls)
        _need(cls, "reason", reason, type(reason) is str)
        return cls(reason)


class Ready(NamedTuple):
    """A welcomed scheduler has its sockets up."""

    sched: int
    os_pid: int

    KIND = "ready"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj) -> Ready:
        sched, os_pid = _fields(obj, cls)
        _need(cls, "sched", sched, _int_in(sched, 1, _U32))
        _need(cls, "os_pid", os_pid, _int_in(os_pid, 0, _U32))
        return cls(sched, os_pid)


class Request(NamedTuple):
    """A command of the controller to a scheduler or the dispatcher:
    ``(id, command, args)``, no kind tag; ``id`` None wants no reply."""

    id: int | None
    cmd: str
    args: tuple

    KIND = None

    def encode(self, code_ok: bool = False) -> bytes:
        """``code_ok``: the channel is authenticated, a closure may travel (dill)."""
        return codec.dumps_frame(tuple(self), code_ok=code_ok)

    @classmethod
    def decode(cls, obj, need_id: bool = False) -> Request:
        if type(obj) is not tuple or len(obj) != 3:
            raise ProtocolError("Request frame is not (id, command, args)")
        id_, cmd, args = obj
        _need(cls, "id", id_, type(id_) is int or (id_ is None and not need_id))
        _need(cls, "cmd", cmd, type(cmd) is str)
        _need(cls, "args", args, type(args) is tuple)
        return cls(id_, cmd, args)


class Reply(NamedTuple):
    """The answer to a request: a value, or (``ok`` False) the exception."""

    id: int
    ok: bool
    value: object

    KIND = "r"

    def encode(self) -> bytes:
        """A value that cannot travel is replaced by the error saying so."""
        try:
            return _frame(self)
        except codec.Unencodable as e:
            return _frame(self._replace(ok=False, value=e))

    @classmethod
    def decode(cls, obj) -> Reply:
        id_, ok, value = _fields(obj, cls)
        _need(cls, "id", id_, type(id_) is int)
        _need(cls, "ok", ok, type(ok) is bool)
        _need(cls, "value", value, ok or isinstance(value, Exception))
        return cls(id_, ok, value)


class Rpc(NamedTuple):
    """A BIF a process of the sending scheduler asks of the controller."""

    pid: Pid
    request: tuple  # (bif, name, args), (register, name, pid), (unregister, name, ...)

    KIND = "rpc"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj) -> Rpc:
        pid, request = _fields(obj, cls)
        _need(cls, "pid", pid, type(pid) is Pid)
        _need(cls, "request", request, _request_ok(request))
        return cls(pid, request)


class Bye(NamedTuple):
    """A scheduler's last frame to the controller, with its counts."""

    sched: int
    stats: dict

    KIND = "bye"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj, sender: int | None = None) -> Bye:
        sched, stats = _fields(obj, cls)
        _need(cls, "sched", sched, _int_in(sched, 1, _U32) and sender in (None, sched))
        _need(cls, "stats", stats, type(stats) is dict)
        return cls(sched, stats)


class Heartbeat(NamedTuple):
    """A scheduler on another host is there (every second)."""

    sched: int

    KIND = "hb"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj, sender: int | None = None) -> Heartbeat:
        (sched,) = _fields(obj, cls)
        _need(cls, "sched", sched, _int_in(sched, 1, _U32) and sender in (None, sched))
        return cls(sched)


# ---------------------------------------------------------------- scheduler -> scheduler
#
# A signal is for a process (or port) of the receiving scheduler (``here``),
# and what it says comes from one of the sender's.  ``decode(g, sender,
# here, nsched)``; the schedulers' node builds the tuples ``encode`` gives.


def _mine(x, here: int, nsched: int) -> bool:
    if type(x) is Port:  # a port a process of this scheduler opened
        return port_owner(x, nsched) == here
    return type(x) is Pid and pid_owner(x, nsched) == here


def _from(pid, sender: int, nsched: int) -> bool:
    return type(pid) is Pid and pid_owner(pid, nsched) == sender


def _signal(g, cls, here: int, nsched: int) -> tuple:
    fields = _fields(g, cls)
    if not _mine(fields[0], here, nsched):
        raise ProtocolError(
            f"a {cls.KIND} signal for {_what(fields[0])}, which is not a process here"
        )
    return fields


class Msg(NamedTuple):
    """A message to a process."""

    to: Pid
    msg: object
    token: object  # seq_trace token

    KIND = "msg"

    def encode(self) -> tuple:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g, sender: int, here: int, nsched: int) -> Msg:
        to, msg, token = _signal(g, cls, here, nsched)
        _need(cls, "token", token, _token_ok(token))
        return cls(to, msg, token)


class Spawn(NamedTuple):
    """Start a process here whose pid the sender chose."""

    pid: Pid
    fun: object  # an async def function (by reference)
    args: tuple | list
    link_to: Pid | None
    inherit: tuple | None

    KIND = "spawn"

    def encode(self) -> tuple:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g, sender: int, here: int, nsched: int) -> Spawn:
        pid, fun, args, link_to, inherit = _signal(g, cls, here, nsched)
        _need(cls, "fun", fun, callable(fun))
        _need(cls, "args", args, type(args) in (tuple, list))
        _need(cls, "link_to", link_to, link_to is None or _from(link_to, sender, nsched))
        _need(cls, "inherit", inherit, _inherit_ok(inherit))
        return cls(pid, fun, args, link_to, inherit)


class Link(NamedTuple):
    """``from_`` links to ``to``."""

    to: Pid
    from_: Pid
    inherit: tuple | None

    KIND = "link"

    def encode(self) -> tuple:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g, sender: int, here: int, nsched: int) -> Link:
        to, from_, inherit = _signal(g, cls, here, nsched)
        _need(cls, "from_", from_, _from(from_, sender, nsched))
        _need(cls, "inherit", inherit, _inherit_ok(inherit))
        return cls(to, from_, inherit)


class Unlink(NamedTuple):
    """``from_`` unlinks from ``to``."""

    to: Pid
    from_: Pid

    KIND = "unlink"

    def encode(self) -> tuple:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g, sender: int, here: int, nsched: int) -> Unlink:
        to, from_ = _signal(g, cls, here, nsched)
        _need(cls, "from_", from_, _from(from_, sender, nsched))
        return cls(to, from_)


class Exit(NamedTuple):
    """An exit signal (``link``: through a link)."""

    to: Pid
    from_: Pid | Port
    reason: object
    link: bool
    token: object

    KIND = "exit"

    def encode(self) -> tuple:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g, sender: int, here: int, nsched: int) -> Exit:
        to, from_, reason, link, token = _signal(g, cls, here, nsched)
        _need(cls, "from_", from_, type(from_) is Port or _from(from_, sender, nsched))
        _need(cls, "link", link, type(link) is bool)
        _need(cls, "token", token, _token_ok(token))
        return cls(to, from_, reason, link, token)


class PortCmd(NamedTuple):
    """A command to a port here, from a process of the sender."""

    port: Port
    caller: Pid
    data: object
    reply: bool

    KIND = "port_cmd"

    def encode(self) -> tuple:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g, sender: int, here: int, nsched: int) -> PortCmd:
        port, caller, data, reply = _signal(g, cls, here, nsched)
        _need(cls, "port", port, type(port) is Port)
        _need(cls, "caller", caller, _from(caller, sender, nsched))
        _need(cls, "reply", reply, type(reply) is bool)
        return cls(port, caller, data, reply)


class PortReply(NamedTuple):
    """A port's answer to a command of a process here."""

    caller: Pid
    value: object  # true, false or badarg

    KIND = "port_reply"

    def encode(self) -> tuple:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g, sender: int, here: int, nsched: int) -> PortReply:
        caller, value = _signal(g, cls, here, nsched)
        _need(cls, "caller", caller, type(caller) is Pid)
        _need(cls, "value", value, value is True or value is False or value is am_badarg)
        return cls(caller, value)


class TraceFlag(NamedTuple):
    """Set or clear trace flags of a process here."""

    pid: Pid
    flags: int
    on: bool

    KIND = "trace_flag"

    def encode(self) -> tuple:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g, sender: int, here: int, nsched: int) -> TraceFlag:
        pid, flags, on = _signal(g, cls, here, nsched)
        _need(cls, "flags", flags, type(flags) is int and flags > 0 and not flags & ~TRACEE_FLAGS)
        _need(cls, "on", on, type(on) is bool)
        return cls(pid, flags, on)


#: Each signal kind and its record.
SIGNALS = {c.KIND: c for c in (Msg, Spawn, Link, Unlink, Exit, PortCmd, PortReply, TraceFlag)}


def decode_signal(g, sender: int, here: int, nsched: int):
    """The checked record of one signal of a peer frame."""
    if type(g) is not tuple or not g or type(g[0]) is not str or g[0] not in SIGNALS:
        raise ProtocolError("peer frame has a malformed signal")
    return SIGNALS[g[0]].decode(g, sender, here, nsched)


def describe_signal(sig) -> str:
    """``a KIND signal for TARGET`` of a signal record or its tuple, for a log line."""
    if type(sig) in SIGNALS.values():
        sig = sig.encode()
    if type(sig) is not tuple or len(sig) < 2:
        return "a malformed signal"
    return f"a {sig[0]} signal for {_what(sig[1])}"


class Peer(NamedTuple):
    """Signals from scheduler ``sender``; ``batches``: how many batches it
    had sent the dispatcher by then (the causal order, ``Worker.after``)."""

    sender: int
    signals: list  # of signal records (or their tuples, to encode)
    batches: int | None = None

    KIND = "p"

    def encode(self) -> bytes:
        sigs = [s.encode() if type(s) in SIGNALS.values() else s for s in self.signals]
        if self.batches is None:
            return codec.dumps_frame((self.KIND, self.sender, sigs))
        return codec.dumps_frame((self.KIND, self.sender, sigs, self.batches))

    @classmethod
    def decode(cls, obj, sender: int, here: int, nsched: int) -> Peer:
        """The whole frame checked, every signal included, before any of it counts."""
        if (
            type(obj) is not tuple
            or len(obj) not in (3, 4)
            or obj[0] != cls.KIND
            or type(obj[1]) is not int
            or obj[1] != sender
            or (len(obj) == 4 and not _int_in(obj[3], 0, 1 << 63))
        ):
            raise ProtocolError(f"peer frame is not ('p', {sender}, signals[, batches])")
        if type(obj[2]) is not list:
            raise ProtocolError("peer frame has no list of signals")
        sigs = [decode_signal(g, sender, here, nsched) for g in obj[2]]
        return cls(sender, sigs, obj[3] if len(obj) == 4 else None)


# ---------------------------------------------------------------- shutdown hand-over


class Fin(NamedTuple):
    """A stopping scheduler's last frame on the ingest socket, after its
    ``batches`` batches; the dispatcher answers with :class:`FinAck`."""

    sched: int
    batches: int

    KIND = FIN

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj, sender: int) -> Fin:
        sched, batches = _fields(obj, cls)
        _need(cls, "sched", sched, type(sched) is int and sched == sender)
        _need(cls, "batches", batches, _int_in(batches, 0, 1 << 63))
        return cls(sched, batches)


class FinAck(NamedTuple):
    """The dispatcher has every batch before a scheduler's fin."""

    KIND = FIN_ACK

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj) -> FinAck:
        _fields(obj, cls)
        return cls()


# ---------------------------------------------------------------- dispatcher -> schedulers (PUB)


def _all(xs, t) -> bool:
    return type(xs) is list and all(type(x) is t for x in xs)


class Snap(NamedTuple):
    """The tracer state's new version."""

    snapshot: Snapshot

    KIND = "snap"

    def encode(self) -> tuple:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, obj) -> Snap:
        (snap,) = _fields(obj, cls)
        _need(cls, "snapshot", snap, type(snap) is Snapshot)
        return cls(snap)


class Dead(NamedTuple):
    """Processes that exited (or whose scheduler was lost)."""

    pids: list

    KIND = "dead"

    def encode(self) -> tuple:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, obj) -> Dead:
        (pids,) = _fields(obj, cls)
        _need(cls, "pids", pids, _all(pids, Pid))
        return cls(pids)


class Tracers(NamedTuple):
    """Processes that became tracers."""

    pids: list

    KIND = "tracer"

    def encode(self) -> tuple:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, obj) -> Tracers:
        (pids,) = _fields(obj, cls)
        _need(cls, "pids", pids, _all(pids, Pid))
        return cls(pids)


class Registry(NamedTuple):
    """The registered names, all of them."""

    names: dict  # Atom -> Pid or Port

    KIND = "reg"

    def encode(self) -> tuple:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, obj) -> Registry:
        (names,) = _fields(obj, cls)
        _need(
            cls,
            "names",
            names,
            type(names) is dict
            and all(type(k) is Atom and type(v) in (Pid, Port) for k, v in names.items()),
        )
        return cls(names)


class TracerPorts(NamedTuple):
    """The ports that are valid tracers now, all of them."""

    ports: list

    KIND = "ports"

    def encode(self) -> tuple:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, obj) -> TracerPorts:
        (ports,) = _fields(obj, cls)
        _need(cls, "ports", ports, _all(ports, Port))
        return cls(ports)


class PubHeartbeat(NamedTuple):
    """The dispatcher is there (every second, for schedulers on other hosts)."""

    KIND = "hb"

    def encode(self) -> tuple:
        return (self.KIND,)

    @classmethod
    def decode(cls, obj) -> PubHeartbeat:
        _fields(obj, cls)
        return cls()


class PubHello(NamedTuple):
    """Something to see at start-up, until every subscriber has seen one."""

    KIND = "hello"

    def encode(self) -> tuple:
        return (self.KIND,)

    @classmethod
    def decode(cls, obj) -> PubHello:
        _fields(obj, cls)
        return cls()


#: Each publication kind and its record.
STATE_BODIES = {
    c.KIND: c for c in (Snap, Dead, Tracers, Registry, TracerPorts, PubHeartbeat, PubHello)
}


def decode_state_body(obj):
    """The checked record of a publication's body ``(kind, ...)``."""
    kind = frame_kind(obj)
    cls = STATE_BODIES.get(kind)
    if cls is None:
        raise ProtocolError(f"state frame of unknown kind {_what(kind)}")
    return cls.decode(obj)


class Publication(NamedTuple):
    """What one of the dispatcher's three PUB sockets (``socket`` 0 ingest,
    1 dispatch, 2 control) sends, numbered per socket (``seq``), so a
    scheduler can tell it has seen everything up to a point."""

    socket: int
    seq: int
    body: tuple  # one of STATE_BODIES

    def encode(self) -> bytes:
        return codec.dumps_frame((self.socket, self.seq, self.body.encode()))

    @classmethod
    def decode(cls, obj) -> Publication:
        if type(obj) is not tuple or len(obj) != 3:
            raise ProtocolError("state frame is not (socket, seq, (kind, ...))")
        socket, seq, body = obj
        _need(cls, "socket", socket, _int_in(socket, 0, 2))
        _need(cls, "seq", seq, _int_in(seq, 0, 1 << 63))
        return cls(socket, seq, decode_state_body(body))

    @classmethod
    def loads(cls, raw) -> Publication:
        """Decode and check a publication's bytes: data and snapshots, no
        exception and no function (a subscriber takes what anyone publishes)."""
        if type(raw) is not bytes or raw[:1] != DATA_PREFIX:
            raise ProtocolError("state frame without the data codec byte")
        return cls.decode(codec.loads(raw[1:], exceptions=False, state=True))
