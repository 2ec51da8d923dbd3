"""The state frames of :mod:`smp.wire.protocol`: what the dispatcher
publishes to the schedulers on its PUB sockets, a :class:`Publication` of
one body (:class:`Snap`, :class:`Dead`, :class:`Tracers`,
:class:`Registry`, :class:`TracerPorts`, :class:`PubHeartbeat`,
:class:`PubHello`), decoded through :func:`decode_state_body`, the one
decode entry of a body.
"""

from __future__ import annotations

from typing import NamedTuple

from smp.core.errors import ProtocolError
from smp.core.state import Snapshot
from smp.core.terms import Atom, Pid, Port
from smp.wire import codec
from smp.wire.codec import Decoded
from smp.wire.frames import DATA_PREFIX
from smp.wire.protocol_check import (
    _fields,
    _int_in,
    _need,
    _what,
    frame_kind,
)

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
