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

from collections.abc import Iterator
from typing import Any, NamedTuple, Protocol

from smp.core.errors import ProtocolError
from smp.core.flags import TRACEE_FLAGS
from smp.core.placement import pid_owner, port_owner
from smp.core.state import Snapshot
from smp.core.stats import StatsDict
from smp.core.terms import Atom, Pid, Port, Term
from smp.wire import codec
from smp.wire.codec import Decoded
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

# Each record is a NamedTuple of its fields (``_HelloFields``) subclassed to
# add its ``KIND``: mypy takes every name in a NamedTuple's body for a field,
# so a class attribute lives in a subclass (``__slots__ = ()``: a tuple still).


class _Record(Protocol):
    """A frame's record: its fields, in order, and its kind."""

    @property
    def KIND(self) -> str | None: ...

    def __iter__(self) -> Iterator[object]: ...


# ---------------------------------------------------------------- checking helpers


def _what(x: object) -> str:
    """``x`` for an error message, bounded: a scalar's repr, else its type."""
    if type(x) in (int, bool, float, type(None), Atom, Pid, Port):
        return repr(x)
    if type(x) in (str, bytes):
        r = repr(x)
        return r if len(r) <= 40 else r[:37] + "..."
    return f"a {type(x).__name__}"


def _int_in(x: object, lo: int, hi: int) -> bool:
    return type(x) is int and lo <= x <= hi


def _need(cls: type, field: str, value: object, ok: bool) -> None:
    if not ok:
        raise ProtocolError(f"{cls.__name__} frame: {field} is {_what(value)}")


# ``cls``: a record class (a NamedTuple with a KIND), which mypy cannot
# describe (its ``_fields`` is a tuple of a different length in each): type[Any]
def _fields(obj: Decoded, cls: type[Any]) -> tuple[Decoded, ...]:
    """The fields of a frame ``(KIND, field, ...)`` of ``cls``, checked for
    its kind and arity."""
    n = len(cls._fields)
    if type(obj) is not tuple or len(obj) != n + 1 or type(obj[0]) is not str:
        raise ProtocolError(f"{cls.__name__} frame is not ({cls.KIND!r}{', ...' * (n > 0)})")
    if obj[0] != cls.KIND:
        raise ProtocolError(f"{cls.__name__} frame has kind {_what(obj[0])}")
    return obj[1:]


def _frame(rec: _Record) -> bytes:
    return codec.dumps_frame((rec.KIND, *rec))


def frame_kind(obj: Decoded) -> str:
    """The kind of a loaded frame ``(kind, ...)``, a string."""
    if type(obj) is not tuple or not obj or type(obj[0]) is not str:
        raise ProtocolError("frame is not a tuple that starts with its kind")
    return obj[0]


def _inherit_ok(x: object) -> bool:
    """What a spawn or link signal carries of the tracing it inherits."""
    return x is None or (
        type(x) is tuple and len(x) == 2 and type(x[0]) is int and type(x[1]) in (Pid, Port)
    )


def _token_ok(token: Decoded) -> bool:
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


def _request_ok(request: object) -> bool:
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


class _HelloFields(NamedTuple):
    sched: int | None
    inbox: str | None  # its inbox's endpoint (smp)
    os_pid: int
    host: str
    key: bytes | None  # its CURVE public key


class Hello(_HelloFields):
    """A scheduler's first frame to the controller; ``sched`` None for one
    that joins from another host and is given its id."""

    __slots__ = ()
    KIND = "hello"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj: Decoded) -> Hello:
        sched, inbox, os_pid, host, key = _fields(obj, cls)
        _need(cls, "sched", sched, sched is None or _int_in(sched, 1, _U32))
        _need(cls, "inbox", inbox, inbox is None or type(inbox) is str)
        _need(cls, "os_pid", os_pid, _int_in(os_pid, 0, _U32))
        _need(cls, "host", host, type(host) is str)
        _need(cls, "key", key, key is None or type(key) is bytes)
        return cls(sched, inbox, os_pid, host, key)


class _WelcomeFields(NamedTuple):
    sched: int
    nsched: int
    inbox_map: dict[int, tuple[str | None, bytes | None]]  # scheduler -> (inbox, CURVE key)
    allowed: list[bytes]  # CURVE keys its inbox lets in
    dispatcher_pid: int | None  # a local scheduler watches it
    local: bool  # on the controller's host
    ids: dict[str, object]  # routing ids: "ingest", "out", "in", "keys", "hb"


class Welcome(_WelcomeFields):
    """The controller's answer to a hello: the scheduler's id and wiring."""

    __slots__ = ()
    KIND = "welcome"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj: Decoded) -> Welcome:
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


class _RefusedFields(NamedTuple):
    reason: str


class Refused(_RefusedFields):
    """The controller will not have this scheduler."""

    __slots__ = ()
    KIND = "refused"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj: Decoded) -> Refused:
        (reason,) = _fields(obj, cls)
        _need(cls, "reason", reason, type(reason) is str)
        return cls(reason)


class _ReadyFields(NamedTuple):
    sched: int
    os_pid: int


class Ready(_ReadyFields):
    """A welcomed scheduler has its sockets up."""

    __slots__ = ()
    KIND = "ready"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj: Decoded) -> Ready:
        sched, os_pid = _fields(obj, cls)
        _need(cls, "sched", sched, _int_in(sched, 1, _U32))
        _need(cls, "os_pid", os_pid, _int_in(os_pid, 0, _U32))
        return cls(sched, os_pid)


class _RequestFields(NamedTuple):
    id: int | None
    cmd: str
    args: tuple[object, ...]


class Request(_RequestFields):
    """A command of the controller to a scheduler or the dispatcher:
    ``(id, command, args)``, no kind tag; ``id`` None wants no reply."""

    __slots__ = ()
    KIND = None

    def encode(self, code_ok: bool = False) -> bytes:
        """``code_ok``: the channel is authenticated, a closure may travel (dill)."""
        return codec.dumps_frame(tuple(self), code_ok=code_ok)

    @classmethod
    def decode(cls, obj: Decoded, need_id: bool = False) -> Request:
        if type(obj) is not tuple or len(obj) != 3:
            raise ProtocolError("Request frame is not (id, command, args)")
        id_, cmd, args = obj
        _need(cls, "id", id_, type(id_) is int or (id_ is None and not need_id))
        _need(cls, "cmd", cmd, type(cmd) is str)
        _need(cls, "args", args, type(args) is tuple)
        return cls(id_, cmd, args)


class _ReplyFields(NamedTuple):
    id: int
    ok: bool
    value: object


class Reply(_ReplyFields):
    """The answer to a request: a value, or (``ok`` False) the exception."""

    __slots__ = ()
    KIND = "r"

    def encode(self) -> bytes:
        """A value that cannot travel is replaced by the error saying so."""
        try:
            return _frame(self)
        except codec.Unencodable as e:
            return _frame(self._replace(ok=False, value=e))

    @classmethod
    def decode(cls, obj: Decoded) -> Reply:
        id_, ok, value = _fields(obj, cls)
        _need(cls, "id", id_, type(id_) is int)
        _need(cls, "ok", ok, type(ok) is bool)
        _need(cls, "value", value, ok or isinstance(value, Exception))
        return cls(id_, ok, value)


class _RpcFields(NamedTuple):
    pid: Pid
    request: tuple[object, ...]  # (bif, name, args), (register, name, pid), (unregister, name, ...)


class Rpc(_RpcFields):
    """A BIF a process of the sending scheduler asks of the controller."""

    __slots__ = ()
    KIND = "rpc"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj: Decoded) -> Rpc:
        pid, request = _fields(obj, cls)
        _need(cls, "pid", pid, type(pid) is Pid)
        _need(cls, "request", request, _request_ok(request))
        return cls(pid, request)


class _ByeFields(NamedTuple):
    sched: int
    stats: StatsDict


class Bye(_ByeFields):
    """A scheduler's last frame to the controller, with its counts."""

    __slots__ = ()
    KIND = "bye"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj: Decoded, sender: int | None = None) -> Bye:
        sched, stats = _fields(obj, cls)
        _need(cls, "sched", sched, _int_in(sched, 1, _U32) and sender in (None, sched))
        _need(cls, "stats", stats, type(stats) is dict)
        return cls(sched, stats)


class _HeartbeatFields(NamedTuple):
    sched: int


class Heartbeat(_HeartbeatFields):
    """A scheduler on another host is there (every second)."""

    __slots__ = ()
    KIND = "hb"

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj: Decoded, sender: int | None = None) -> Heartbeat:
        (sched,) = _fields(obj, cls)
        _need(cls, "sched", sched, _int_in(sched, 1, _U32) and sender in (None, sched))
        return cls(sched)


# ---------------------------------------------------------------- scheduler -> scheduler
#
# A signal is for a process (or port) of the receiving scheduler (``here``),
# and what it says comes from one of the sender's.  ``decode(g, sender,
# here, nsched)``; the schedulers' node builds the tuples ``encode`` gives.


def _mine(x: object, here: int, nsched: int) -> bool:
    if type(x) is Port:  # a port a process of this scheduler opened
        return port_owner(x, nsched) == here
    return type(x) is Pid and pid_owner(x, nsched) == here


def _from(pid: object, sender: int, nsched: int) -> bool:
    return type(pid) is Pid and pid_owner(pid, nsched) == sender


def _signal(g: Decoded, cls: type[Any], here: int, nsched: int) -> tuple[Decoded, ...]:
    fields = _fields(g, cls)
    if not _mine(fields[0], here, nsched):
        raise ProtocolError(
            f"a {cls.KIND} signal for {_what(fields[0])}, which is not a process here"
        )
    return fields


class _MsgFields(NamedTuple):
    to: Pid
    msg: object
    token: object  # seq_trace token


class Msg(_MsgFields):
    """A message to a process."""

    __slots__ = ()
    KIND = "msg"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g: Decoded, sender: int, here: int, nsched: int) -> Msg:
        to, msg, token = _signal(g, cls, here, nsched)
        _need(cls, "token", token, _token_ok(token))
        return cls(to, msg, token)


class _SpawnFields(NamedTuple):
    pid: Pid
    fun: object  # an async def function (by reference)
    args: tuple[Term, ...] | list[Term]
    link_to: Pid | None
    inherit: tuple[int, Pid | Port] | None


class Spawn(_SpawnFields):
    """Start a process here whose pid the sender chose."""

    __slots__ = ()
    KIND = "spawn"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g: Decoded, sender: int, here: int, nsched: int) -> Spawn:
        pid, fun, args, link_to, inherit = _signal(g, cls, here, nsched)
        _need(cls, "fun", fun, callable(fun))
        _need(cls, "args", args, type(args) in (tuple, list))
        _need(cls, "link_to", link_to, link_to is None or _from(link_to, sender, nsched))
        _need(cls, "inherit", inherit, _inherit_ok(inherit))
        return cls(pid, fun, args, link_to, inherit)


class _LinkFields(NamedTuple):
    to: Pid
    from_: Pid
    inherit: tuple[int, Pid | Port] | None


class Link(_LinkFields):
    """``from_`` links to ``to``."""

    __slots__ = ()
    KIND = "link"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g: Decoded, sender: int, here: int, nsched: int) -> Link:
        to, from_, inherit = _signal(g, cls, here, nsched)
        _need(cls, "from_", from_, _from(from_, sender, nsched))
        _need(cls, "inherit", inherit, _inherit_ok(inherit))
        return cls(to, from_, inherit)


class _UnlinkFields(NamedTuple):
    to: Pid
    from_: Pid


class Unlink(_UnlinkFields):
    """``from_`` unlinks from ``to``."""

    __slots__ = ()
    KIND = "unlink"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g: Decoded, sender: int, here: int, nsched: int) -> Unlink:
        to, from_ = _signal(g, cls, here, nsched)
        _need(cls, "from_", from_, _from(from_, sender, nsched))
        return cls(to, from_)


class _ExitFields(NamedTuple):
    to: Pid
    from_: Pid | Port
    reason: object
    link: bool
    token: object


class Exit(_ExitFields):
    """An exit signal (``link``: through a link)."""

    __slots__ = ()
    KIND = "exit"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g: Decoded, sender: int, here: int, nsched: int) -> Exit:
        to, from_, reason, link, token = _signal(g, cls, here, nsched)
        _need(cls, "from_", from_, type(from_) is Port or _from(from_, sender, nsched))
        _need(cls, "link", link, type(link) is bool)
        _need(cls, "token", token, _token_ok(token))
        return cls(to, from_, reason, link, token)


class _PortCmdFields(NamedTuple):
    port: Port
    caller: Pid
    data: object
    reply: bool


class PortCmd(_PortCmdFields):
    """A command to a port here, from a process of the sender."""

    __slots__ = ()
    KIND = "port_cmd"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g: Decoded, sender: int, here: int, nsched: int) -> PortCmd:
        port, caller, data, reply = _signal(g, cls, here, nsched)
        _need(cls, "port", port, type(port) is Port)
        _need(cls, "caller", caller, _from(caller, sender, nsched))
        _need(cls, "reply", reply, type(reply) is bool)
        return cls(port, caller, data, reply)


class _PortReplyFields(NamedTuple):
    caller: Pid
    value: object  # true, false or badarg


class PortReply(_PortReplyFields):
    """A port's answer to a command of a process here."""

    __slots__ = ()
    KIND = "port_reply"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g: Decoded, sender: int, here: int, nsched: int) -> PortReply:
        caller, value = _signal(g, cls, here, nsched)
        _need(cls, "caller", caller, type(caller) is Pid)
        _need(cls, "value", value, value is True or value is False or value is am_badarg)
        return cls(caller, value)


class _TraceFlagFields(NamedTuple):
    pid: Pid
    flags: int
    on: bool


class TraceFlag(_TraceFlagFields):
    """Set or clear trace flags of a process here."""

    __slots__ = ()
    KIND = "trace_flag"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g: Decoded, sender: int, here: int, nsched: int) -> TraceFlag:
        pid, flags, on = _signal(g, cls, here, nsched)
        _need(cls, "flags", flags, type(flags) is int and flags > 0 and not flags & ~TRACEE_FLAGS)
        _need(cls, "on", on, type(on) is bool)
        return cls(pid, flags, on)


#: Each signal kind and its record.
Signal = Msg | Spawn | Link | Unlink | Exit | PortCmd | PortReply | TraceFlag
_SIGNAL_TYPES = (Msg, Spawn, Link, Unlink, Exit, PortCmd, PortReply, TraceFlag)
SIGNALS: dict[str, type[Signal]] = {c.KIND: c for c in _SIGNAL_TYPES}


def decode_signal(g: Decoded, sender: int, here: int, nsched: int) -> Signal:
    """The checked record of one signal of a peer frame."""
    if type(g) is not tuple or not g or type(g[0]) is not str or g[0] not in SIGNALS:
        raise ProtocolError("peer frame has a malformed signal")
    return SIGNALS[g[0]].decode(g, sender, here, nsched)


def describe_signal(sig: object) -> str:
    """``a KIND signal for TARGET`` of a signal record or its tuple, for a log line."""
    # isinstance, not type() in SIGNALS.values() (the same: no record is
    # subclassed), so that mypy narrows sig to a record
    if isinstance(sig, _SIGNAL_TYPES):
        sig = sig.encode()
    if type(sig) is not tuple or len(sig) < 2:
        return "a malformed signal"
    return f"a {sig[0]} signal for {_what(sig[1])}"


class _PeerFields(NamedTuple):
    sender: int
    signals: list[Signal | tuple[object, ...]]  # records (or their tuples, to encode)
    batches: int | None = None


class Peer(_PeerFields):
    """Signals from scheduler ``sender``; ``batches``: how many batches it
    had sent the dispatcher by then (the causal order, ``Worker.after``)."""

    __slots__ = ()
    KIND = "p"

    def encode(self) -> bytes:
        sigs = [s.encode() if isinstance(s, _SIGNAL_TYPES) else s for s in self.signals]
        if self.batches is None:
            return codec.dumps_frame((self.KIND, self.sender, sigs))
        return codec.dumps_frame((self.KIND, self.sender, sigs, self.batches))

    @classmethod
    def decode(cls, obj: Decoded, sender: int, here: int, nsched: int) -> Peer:
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
        sigs: list[Signal | tuple[object, ...]] = [
            decode_signal(g, sender, here, nsched) for g in obj[2]
        ]
        return cls(sender, sigs, obj[3] if len(obj) == 4 else None)


# ---------------------------------------------------------------- shutdown hand-over


class _FinFields(NamedTuple):
    sched: int
    batches: int


class Fin(_FinFields):
    """A stopping scheduler's last frame on the ingest socket, after its
    ``batches`` batches; the dispatcher answers with :class:`FinAck`."""

    __slots__ = ()
    KIND = FIN

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj: Decoded, sender: int) -> Fin:
        sched, batches = _fields(obj, cls)
        _need(cls, "sched", sched, type(sched) is int and sched == sender)
        _need(cls, "batches", batches, _int_in(batches, 0, 1 << 63))
        return cls(sched, batches)


class _FinAckFields(NamedTuple):
    pass


class FinAck(_FinAckFields):
    """The dispatcher has every batch before a scheduler's fin."""

    __slots__ = ()
    KIND = FIN_ACK

    def encode(self) -> bytes:
        return _frame(self)

    @classmethod
    def decode(cls, obj: Decoded) -> FinAck:
        _fields(obj, cls)
        return cls()


# ---------------------------------------------------------------- dispatcher -> schedulers (PUB)


def _all(xs: object, t: type) -> bool:
    return type(xs) is list and all(type(x) is t for x in xs)


class _SnapFields(NamedTuple):
    snapshot: Snapshot


class Snap(_SnapFields):
    """The tracer state's new version."""

    __slots__ = ()
    KIND = "snap"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, obj: Decoded) -> Snap:
        (snap,) = _fields(obj, cls)
        _need(cls, "snapshot", snap, type(snap) is Snapshot)
        return cls(snap)


class _DeadFields(NamedTuple):
    pids: list[Pid]


class Dead(_DeadFields):
    """Processes that exited (or whose scheduler was lost)."""

    __slots__ = ()
    KIND = "dead"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, obj: Decoded) -> Dead:
        (pids,) = _fields(obj, cls)
        _need(cls, "pids", pids, _all(pids, Pid))
        return cls(pids)


class _TracersFields(NamedTuple):
    pids: list[Pid]


class Tracers(_TracersFields):
    """Processes that became tracers."""

    __slots__ = ()
    KIND = "tracer"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, obj: Decoded) -> Tracers:
        (pids,) = _fields(obj, cls)
        _need(cls, "pids", pids, _all(pids, Pid))
        return cls(pids)


class _RegistryFields(NamedTuple):
    names: dict[Atom, Pid | Port]


class Registry(_RegistryFields):
    """The registered names, all of them."""

    __slots__ = ()
    KIND = "reg"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, obj: Decoded) -> Registry:
        (names,) = _fields(obj, cls)
        _need(
            cls,
            "names",
            names,
            type(names) is dict
            and all(type(k) is Atom and type(v) in (Pid, Port) for k, v in names.items()),
        )
        return cls(names)


class _TracerPortsFields(NamedTuple):
    ports: list[Port]


class TracerPorts(_TracerPortsFields):
    """The ports that are valid tracers now, all of them."""

    __slots__ = ()
    KIND = "ports"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, obj: Decoded) -> TracerPorts:
        (ports,) = _fields(obj, cls)
        _need(cls, "ports", ports, _all(ports, Port))
        return cls(ports)


class _PubHeartbeatFields(NamedTuple):
    pass


class PubHeartbeat(_PubHeartbeatFields):
    """The dispatcher is there (every second, for schedulers on other hosts)."""

    __slots__ = ()
    KIND = "hb"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND,)

    @classmethod
    def decode(cls, obj: Decoded) -> PubHeartbeat:
        _fields(obj, cls)
        return cls()


class _PubHelloFields(NamedTuple):
    pass


class PubHello(_PubHelloFields):
    """Something to see at start-up, until every subscriber has seen one."""

    __slots__ = ()
    KIND = "hello"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND,)

    @classmethod
    def decode(cls, obj: Decoded) -> PubHello:
        _fields(obj, cls)
        return cls()


#: Each publication kind and its record.
StateBody = Snap | Dead | Tracers | Registry | TracerPorts | PubHeartbeat | PubHello
STATE_BODIES: dict[str, type[StateBody]] = {
    c.KIND: c for c in (Snap, Dead, Tracers, Registry, TracerPorts, PubHeartbeat, PubHello)
}


def decode_state_body(obj: Decoded) -> StateBody:
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
    body: StateBody

    def encode(self) -> bytes:
        return codec.dumps_frame((self.socket, self.seq, self.body.encode()))

    @classmethod
    def decode(cls, obj: Decoded) -> Publication:
        if type(obj) is not tuple or len(obj) != 3:
            raise ProtocolError("state frame is not (socket, seq, (kind, ...))")
        socket, seq, body = obj
        _need(cls, "socket", socket, _int_in(socket, 0, 2))
        _need(cls, "seq", seq, _int_in(seq, 0, 1 << 63))
        return cls(socket, seq, decode_state_body(body))

    @classmethod
    def loads(cls, raw: object) -> Publication:
        """Decode and check a publication's bytes: data and snapshots, no
        exception and no function (a subscriber takes what anyone publishes)."""
        if type(raw) is not bytes or raw[:1] != DATA_PREFIX:
            raise ProtocolError("state frame without the data codec byte")
        return cls.decode(codec.loads(raw[1:], exceptions=False, state=True))
