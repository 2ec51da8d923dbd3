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

__all__ = ["loads", "MAX_FRAME"]

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
