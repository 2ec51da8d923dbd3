"""The pure core: what ``erl_trace.c`` and the 17.x files it calls decide.

Terms, trace flags, the message builders, the rwlock-guarded tracer state,
the deliver/drop rules (``dispatch.resolve``), match specs, the trace BIFs'
rules, placement of pids and ports on schedulers, the clock and the counters.

May import: the standard library and other ``smp.core`` modules only.  No
socket, process or supervision library (``tests/core/test_layers.py`` checks
it), so every rule here is unit-tested directly and serves every transport.
"""

# the composite term types' Erlang-syntax reprs (see smp.core.pretty)
from smp.core import pretty as _pretty  # noqa: E402, F401
