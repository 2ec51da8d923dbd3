"""The peer frames of :mod:`smp.wire.protocol`: a scheduler's signals to
another's processes (:class:`Msg`, :class:`Spawn`, :class:`Link`,
:class:`Unlink`, :class:`Exit`, :class:`PortCmd`, :class:`PortReply`,
:class:`TraceFlag`) and the :class:`Peer` frame that carries them, each
checked against the sender and the receiving scheduler
(:func:`decode_signal`, the one decode entry of a signal).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from smp.core.errors import ProtocolError
from smp.core.flags import TRACEE_FLAGS
from smp.core.placement import pid_owner, port_owner
from smp.core.terms import Atom, Pid, Port, Term
from smp.wire import codec
from smp.wire.codec import Decoded
from smp.wire.protocol_check import (
    _fields,
    _int_in,
    _need,
    _what,
)

am_undefined, am_badarg, am_noproc = Atom("undefined"), Atom("badarg"), Atom("noproc")


def _inherit_ok(x: object) -> bool:
    """What a link signal carries of the tracing it inherits: none, or
    ``(flags, tracer, flags to clear)`` (``inherited_tracing``)."""
    return x is None or (
        type(x) is tuple
        and len(x) == 3
        and type(x[0]) is int
        and type(x[1]) in (Pid, Port)
        and type(x[2]) is int
    )


def _inherits_ok(x: object) -> bool:
    """What a spawn signal carries: what set_on_spawn, then set_on_link,
    gave the child (at most one of each)."""
    return type(x) is tuple and len(x) <= 2 and all(i is not None and _inherit_ok(i) for i in x)


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
    inherit: tuple[tuple[int, Pid | Port, int], ...]  # set_on_spawn's, then set_on_link's


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
        _need(cls, "inherit", inherit, _inherits_ok(inherit))
        return cls(pid, fun, args, link_to, inherit)


class _LinkFields(NamedTuple):
    to: Pid | Port
    from_: Pid
    inherit: tuple[int, Pid | Port, int] | None


class Link(_LinkFields):
    """``from_`` links to ``to`` (a port answers with a :class:`PortReply`)."""

    __slots__ = ()
    KIND = "link"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g: Decoded, sender: int, here: int, nsched: int) -> Link:
        to, from_, inherit = _signal(g, cls, here, nsched)
        _need(cls, "from_", from_, _from(from_, sender, nsched))
        # (a port inherits no tracing through a link)
        _need(
            cls, "inherit", inherit, _inherit_ok(inherit) and (inherit is None or type(to) is Pid)
        )
        return cls(to, from_, inherit)


class _UnlinkFields(NamedTuple):
    to: Pid | Port
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
    to: Pid | Port
    from_: Pid | Port
    reason: object
    link: bool
    token: object


class Exit(_ExitFields):
    """An exit signal (``link``: through a link), to a process from a
    process or a port, or to a port from a process."""

    __slots__ = ()
    KIND = "exit"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g: Decoded, sender: int, here: int, nsched: int) -> Exit:
        to, from_, reason, link, token = _signal(g, cls, here, nsched)
        _need(
            cls,
            "from_",
            from_,
            (type(from_) is Port and type(to) is Pid) or _from(from_, sender, nsched),
        )
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
    value: object  # true, false or badarg (a command); true or noproc (a link)


class PortReply(_PortReplyFields):
    """A port's answer to a command or a link of a process here."""

    __slots__ = ()
    KIND = "port_reply"

    def encode(self) -> tuple[object, ...]:
        return (self.KIND, *self)

    @classmethod
    def decode(cls, g: Decoded, sender: int, here: int, nsched: int) -> PortReply:
        caller, value = _signal(g, cls, here, nsched)
        _need(cls, "caller", caller, type(caller) is Pid)
        _need(
            cls,
            "value",
            value,
            value is True or value is False or value is am_badarg or value is am_noproc,
        )
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
    article = "an" if str(sig[0])[:1] in ("a", "e", "i", "o", "u") else "a"
    return f"{article} {sig[0]} signal for {_what(sig[1])}"


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
