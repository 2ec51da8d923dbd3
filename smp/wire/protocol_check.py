"""The checks every frame of :mod:`smp.wire.protocol` is decoded through:
a frame ``(KIND, field, ...)``'s kind and arity (``_fields``), one field's
test with the ``ProtocolError`` naming the frame and the field (``_need``,
``_what``), and the one way a control frame is written (``_frame``, through
``codec.dumps_frame``), and the kind of a loaded frame (:func:`frame_kind`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from smp.core.errors import ProtocolError
from smp.core.terms import Atom, Pid, Port
from smp.wire import codec
from smp.wire.codec import Decoded

#: 2**32 - 1, the largest unsigned 32-bit number a field may hold
_U32 = (1 << 32) - 1

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
