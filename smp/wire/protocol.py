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

This module is the protocol's one import: the control and shutdown frames
are :mod:`smp.wire.protocol_ctl`, the signals and their peer frame
:mod:`smp.wire.protocol_peer`, the publications
:mod:`smp.wire.protocol_state`, and the checks they all decode through
:mod:`smp.wire.protocol_check`.
"""

from __future__ import annotations

from smp.wire.protocol_check import frame_kind
from smp.wire.protocol_ctl import (
    MAX_COMMAND_WAIT_S,
    Bye,
    Fin,
    FinAck,
    Heartbeat,
    Hello,
    Ready,
    Refused,
    Reply,
    Request,
    Rpc,
    Welcome,
    is_command_wait,
)
from smp.wire.protocol_peer import (
    SIGNALS,
    Exit,
    Link,
    Msg,
    Peer,
    PortCmd,
    PortReply,
    Signal,
    Spawn,
    TraceFlag,
    Unlink,
    decode_signal,
    describe_signal,
)
from smp.wire.protocol_state import (
    STATE_BODIES,
    Dead,
    PubHeartbeat,
    PubHello,
    Publication,
    Registry,
    Snap,
    StateBody,
    TracerPorts,
    Tracers,
    decode_state_body,
)

__all__ = [
    "MAX_COMMAND_WAIT_S",
    "is_command_wait",
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
    "Signal",
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
    "StateBody",
    "frame_kind",
    "decode_signal",
    "decode_state_body",
    "describe_signal",
]
