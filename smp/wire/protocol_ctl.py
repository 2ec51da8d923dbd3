"""The control frames of :mod:`smp.wire.protocol`: what the controller and
a scheduler say on the ``ctl`` link (:class:`Hello`, :class:`Welcome`,
:class:`Refused`, :class:`Ready`, :class:`Request`, :class:`Reply`,
:class:`Rpc`, :class:`Bye`, :class:`Heartbeat`; :class:`Request` and
:class:`Reply` also between the controller and the dispatcher), and the
shutdown hand-over between a scheduler and the dispatcher (:class:`Fin`,
:class:`FinAck`).  Each has ``encode`` and a checked ``decode``.
"""

from __future__ import annotations

from typing import NamedTuple

from smp.core.errors import ProtocolError
from smp.core.stats import StatsDict
from smp.core.terms import Atom, Pid
from smp.wire import codec
from smp.wire.codec import Decoded
from smp.wire.frames import FIN, FIN_ACK
from smp.wire.protocol_check import (
    _U32,
    _fields,
    _frame,
    _int_in,
    _need,
)

#: the longest wait a controller's command may ask a scheduler or the
#: dispatcher for (a step, a peer's signals), in seconds
MAX_COMMAND_WAIT_S = 60


def is_command_wait(x: object) -> bool:
    """A wait a command may ask for: a number of 0..``MAX_COMMAND_WAIT_S`` s."""
    return (type(x) is int or type(x) is float) and 0 <= x <= MAX_COMMAND_WAIT_S


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
