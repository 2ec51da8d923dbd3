"""Safe decoding of frames that arrive from other processes.

The dispatcher's ingest socket takes pickled batches from schedulers.  A
frame from anywhere else must not be able to run code, so ``loads`` only
resolves the classes a batch may contain (the term types and builtin
containers); anything else is a malformed frame.
"""
from __future__ import annotations

import io
import pickle

from .errors import ProtocolError

__all__ = ["loads", "MAX_FRAME", "dumps_any", "loads_any", "WIRE_VERSION"]

#: Version of the batch frames schedulers send the dispatcher:
#: ``("b", WIRE_VERSION, scheduler_id, items)``.
WIRE_VERSION = 2

MAX_FRAME = 256 * 1024 * 1024   # larger frames are refused before decoding

_ALLOWED = {
    ("smp.terms", "Atom"), ("smp.terms", "Pid"), ("smp.terms", "Port"), ("smp.terms", "Ref"),
    ("smp.terms", "ImproperList"), ("smp.messages", "SysMsg"), ("smp.state", "Snapshot"),
    ("builtins", "Ellipsis"), ("builtins", "set"), ("builtins", "frozenset"),
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise ProtocolError(f"frame refers to {module}.{name}, which no frame may contain")


def loads(raw: bytes):
    """Decode a frame; raises ``ProtocolError`` for anything but a plain batch."""
    if len(raw) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(raw)} bytes is larger than {MAX_FRAME}")
    try:
        return _Unpickler(io.BytesIO(raw)).load()
    except ProtocolError:
        raise
    except Exception as e:
        raise ProtocolError(f"undecodable frame: {type(e).__name__}: {e}") from None


def dumps_any(obj) -> bytes:
    """Frames between the emulator's own processes: plain pickle (C speed),
    or dill when the frame carries a function that pickle cannot name (a
    closure to spawn); one leading byte says which."""
    try:
        return b"P" + pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError):
        import dill
        return b"D" + dill.dumps(obj)


def loads_any(raw: bytes):
    """The inverse of ``dumps_any`` (trusted frames only: dill runs code)."""
    if raw[:1] == b"P":
        return pickle.loads(raw[1:])
    if raw[:1] == b"D":
        import dill
        return dill.loads(raw[1:])
    raise ProtocolError(f"frame with unknown codec byte {raw[:1]!r}")
