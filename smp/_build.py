"""Which build runs: the modules compiled with Cython, or the pure-Python reference.

``pip install .`` compiles the modules named in ``COMPILED`` with Cython when
a C compiler is present (``setup.py``), and installs them beside their
``.py`` sources; without a compiler it installs the sources alone.  The
Python sources are the reference: the compiled modules are the same code,
unchanged, and the suite runs on both builds.

``SMP_PURE=1`` in the environment makes every process of the emulator import
the ``.py`` of each of those modules even where its compiled twin is
installed: ``install()``, run when this module is imported, puts a finder
first on ``sys.meta_path`` that takes these names from their source files.
The three packages (``smp``, ``schedulers``, ``dispatcher``) import this
module before anything else; a forked process inherits the finder, and any
other process of the emulator makes its own from the same environment.
``tools/profile.py`` sets it, since a sampling profiler sees no Python frame
inside compiled code.

Imports the standard library only; it is layer 0 (``tests/core/test_layers.py``).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

#: The modules the optional build compiles, each chosen by measurement (the
#: README's speed section has the figures): the external term format (every
#: message a file or ip trace port writes), the restricted decoder and the
#: frames (every batch the dispatcher takes in, every delivery a scheduler
#: decodes), the message builders, the counters and the scheduler's shared
#: helpers (``are_trace_flags_on``, called at every trace point).  The
#: process loop, the send and receive paths and the trace points are left
#: out: compiled unchanged, each on its own executes 3-6 % more instructions
#: a message and all of them together about 1 % more
#: (``tools/instructions.py``): CPython 3.11's adaptive interpreter
#: specialises their attribute accesses and calls, which Cython does through
#: the generic lookup on untyped code.  ``setup.py`` reads this tuple.
COMPILED = (
    "smp.wire.etf",
    "smp.wire.codec",
    "smp.wire.frames",
    "smp.core.messages",
    "smp.core.stats",
    "schedulers.common",
)

#: The environment variable that asks for the pure-Python build.
ENV = "SMP_PURE"

_NAMES = frozenset(COMPILED)
_SOURCE = [(importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES)]


def pure_requested() -> bool:
    """Whether the environment asks for the pure-Python build."""
    return os.environ.get(ENV, "") not in ("", "0")


class PureFinder:
    """A meta path finder that finds each module of ``COMPILED`` from its
    ``.py`` source, so a compiled twin beside it is never loaded."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in _NAMES or not path:
            return None
        for entry in path:
            spec = importlib.machinery.FileFinder(entry, *_SOURCE).find_spec(name, target)
            if spec is not None:
                return spec
        return None


def install() -> None:
    """Put the finder in place when ``SMP_PURE`` asks for it (idempotent)."""
    if pure_requested() and PureFinder not in sys.meta_path:
        sys.meta_path.insert(0, PureFinder)


def is_compiled(name: str) -> bool:
    """Whether the module ``name`` loads compiled (an extension module) in
    this process; imports only its parent package."""
    spec = importlib.util.find_spec(name)
    origin = (spec.origin if spec else None) or ""
    return origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def build() -> str:
    """``"compiled"`` when every module of ``COMPILED`` loads compiled,
    ``"pure"`` when none does, ``"mixed"`` otherwise (a partial install)."""
    compiled = [is_compiled(m) for m in COMPILED]
    if all(compiled):
        return "compiled"
    return "pure" if not any(compiled) else "mixed"


install()
