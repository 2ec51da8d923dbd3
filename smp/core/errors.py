"""The emulator's exceptions.

``SmpError`` is the root of everything the emulator raises on its own account.
``Error``, ``Throw`` and ``Exit`` are different: they are the three Erlang
exception classes, raised by emulated code (``raise smp.Error(badarith)``) and
turned into ``exception_from`` trace messages and exit reasons.
"""

from __future__ import annotations

from smp.core.pretty import format_term
from smp.core.terms import Term

__all__ = [
    "check_seconds",
    "SmpError",
    "BadArg",
    "EmulatorTimeout",
    "StartupError",
    "DecodeError",
    "SchedulerLost",
    "DispatcherLost",
    "PeerGone",
    "Unanswered",
    "TracePortError",
    "ProtocolError",
    "ScenarioError",
    "ErlangException",
    "Error",
    "Throw",
    "Exit",
]


class SmpError(Exception):
    """Root of the emulator's own errors."""


class BadArg(SmpError, ValueError):
    """A BIF was called with a bad argument; the message names the bad part."""


def check_seconds(what: str, v: object) -> None:
    """Refuse (``BadArg``) a time that is not a finite number of seconds >=
    0: a NaN never comes, and a wait for it lasts for ever."""
    if not (isinstance(v, (int, float)) and type(v) is not bool and 0 <= v < float("inf")):
        raise BadArg(f"{what} must be a finite number of seconds >= 0, not {v!r}")


class EmulatorTimeout(SmpError, TimeoutError):
    """``run()`` did not become quiet in time; the message names what is busy."""


class SchedulerLost(SmpError):
    """A scheduler process died; the message says which, and what it cost."""


class DispatcherLost(SmpError):
    """The dispatcher process died; the message counts what may be lost."""


class StartupError(SmpError):
    """A scheduler or the dispatcher did not start (or died at start-up)."""


class PeerGone(SmpError):
    """A peer process (a scheduler, the dispatcher) was gone while a request
    to it waited; the controller's supervision makes it ``SchedulerLost`` or
    ``DispatcherLost``."""


class Unanswered(SmpError):
    """A peer did not answer a request by its deadline; ``capped`` when that
    deadline was ``run()``'s time bound rather than the request's own."""

    def __init__(self, who: str, cmd: str, timeout: float, capped: bool = False):
        super().__init__(f"{who} did not answer {cmd!r} within {timeout:g} s")
        self.who, self.cmd, self.timeout, self.capped = who, cmd, timeout, capped


class DecodeError(SmpError, ValueError):
    """Bytes that are not a valid external-term-format term or trace frame.

    ``offset`` is the byte offset where decoding failed.
    """

    def __init__(self, message: str, offset: int | None = None):
        super().__init__(message if offset is None else f"{message} at byte offset {offset}")
        self.offset = offset


class TracePortError(SmpError):
    """A trace port could not be opened or used."""


class ProtocolError(SmpError):
    """A malformed frame arrived on one of the emulator's sockets."""


class ScenarioError(SmpError):
    """A scenario file is invalid; the message names the bad key."""


class ErlangException(Exception):
    """Base of the three Erlang exception classes raised by emulated code."""

    erlang_class: str = ""

    def __init__(self, reason: Term) -> None:
        super().__init__(reason)
        self.reason = reason

    def __repr__(self) -> str:
        try:
            return f"{type(self).__name__}({format_term(self.reason)})"
        except TypeError:
            return f"{type(self).__name__}({self.reason!r})"


class Error(ErlangException):
    """``erlang:error(Reason)`` in emulated code."""

    erlang_class = "error"


class Throw(ErlangException):
    """``throw(Value)`` in emulated code."""

    erlang_class = "throw"


class Exit(ErlangException):
    """``exit(Reason)`` in emulated code."""

    erlang_class = "exit"
