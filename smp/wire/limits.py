"""The bounds on what a trace file or an ip trace port may make the reader do.

A trace file or an ip trace port may come from a node nobody here controls,
so every cost that grows with its contents is bounded, and each bound is here,
in one table.  Every default is far above anything a real trace holds (a
trace message is a few hundred bytes; a big one, the message of a traced
``send`` of a large binary, a few MiB) and each can be raised: pass a
``Limits`` to ``read_trace`` / ``merge_traces`` / ``decode``, or the options
of ``smp-emu read`` (``--max-depth``, ``--max-frame``, ``--max-inflate``,
``--max-print``).

What is over a bound is refused, not truncated, with one exception: printing.
A term deeper than ``max_depth`` or a frame larger than ``max_frame`` is a
:class:`smp.core.errors.DecodeError` naming the limit and the byte offset;
``encode`` refuses to write a term deeper than ``max_depth`` (a ``ValueError``
naming the limit), so what the emulator writes its own reader reads.  A term
whose text would be longer than ``max_print`` characters is printed cut short
with ``...`` where the rest would be, as Erlang's ``~P`` marks what its depth
limit cut (``[1,2|...]``, ``{a,...}``, ``<<1,2,...>>``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits", "DEFAULT", "MAX_DEPTH", "MAX_FRAME", "MAX_INFLATE", "MAX_PRINT"]

MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """One reader's bounds (all in bytes but ``max_depth`` and ``max_print``)."""

    #: the deepest nesting of compound terms (tuples, lists, maps, funs; a
    #: term of none is depth 0) that is decoded or encoded: real trace
    #: messages nest a few dozen levels, and the decoder, the encoder and the
    #: printers all work without Python recursion below it
    max_depth: int = 10_000
    #: the largest trace frame (op 0, its 4-byte size) read from a file or a
    #: socket: the frame is buffered whole before it is decoded
    max_frame: int = 64 * MiB
    #: the largest size a compressed term (tag 80) may inflate to; its header
    #: announces the size, and the inflation stops there.  A trace port never
    #: writes a compressed term: only a hand-made or hostile frame holds one
    max_inflate: int = 32 * MiB
    #: the longest text printed for one term (``~p``, ``~w``, dbg text, the
    #: ``text`` of JSON output), in characters; beyond it the term is cut with
    #: ``...`` (the JSON ``term`` is cut at the same places)
    max_print: int = 1 * MiB

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_frame", "max_inflate", "max_print"):
            v = getattr(self, name)
            if type(v) is not int or v < 1:
                raise ValueError(f"limit {name} must be a positive int, not {v!r}")


#: the defaults, used wherever no ``Limits`` is given
DEFAULT = Limits()
MAX_DEPTH = DEFAULT.max_depth
MAX_FRAME = DEFAULT.max_frame
MAX_INFLATE = DEFAULT.max_inflate
MAX_PRINT = DEFAULT.max_print
