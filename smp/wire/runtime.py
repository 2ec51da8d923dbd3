"""How every OS process of the emulator runs: the garbage collector's settings.

A scheduler or the dispatcher allocates a tuple or two for every trace
message (the builders, the unpickled run bodies) and frees them soon after,
and holds many long-lived objects (processes, their coroutines, mailboxes).
With CPython's default thresholds (700, 10, 10) the young generation is
collected every 700 allocations, and the older ones, which walk those
long-lived objects, often; measured with ``tools/bench_node.py`` (2 cores,
400,000 trace messages, medians of 3), raising the first threshold gave
smp with 2 schedulers 311-321 k -> 371-411 k msg/s and nonsmp 216 k ->
258-260 k.  Nothing is left uncollected: cycles are still found, in batches
of at most ``GC_THRESHOLDS[0]`` new objects.
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLDS", "tune_gc"]

#: gen0 collected every 50,000 allocations; gen1 every 20 of those; gen2 every 20 gen1
GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
    """Set the thresholds in this process (a scheduler's or the dispatcher's
    entry point calls it first)."""
    gc.set_threshold(*GC_THRESHOLDS)
