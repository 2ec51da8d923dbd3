"""The emulated process heap and its deterministic garbage-collection cost.

Sizes are in words, as ``trace_gc`` reports them.  The model:

* a new process has a young heap block of 233 words (BEAM's minimum), no old
  heap, a stack of 10 words, no heap fragments (``mbuf``) and no binaries;
* ``allocate(words, keep=False)`` puts ``words`` on the young heap; ``keep``
  marks them live, the rest is garbage.  When the block is full the excess goes
  to a heap fragment (``mbuf``) and a collection is due;
* a collection (``gc_cost_ms`` below) copies the live young words to the old
  heap (BEAM's generational promotion), frees the garbage and the fragments,
  and grows the young block along BEAM's Fibonacci-like size table until the
  live data fills at most 75% of it;
* its cost is ``1 ms per 10,000 words`` scanned (young heap + fragments + old
  heap): deterministic, so ``long_gc`` fires exactly when the thresholds say.
"""

from __future__ import annotations

__all__ = ["Heap", "HEAP_SIZES", "WORDS_PER_MS"]

WORDS_PER_MS = 10_000


def _heap_sizes(limit: int = 1 << 40) -> list[int]:
    sizes = [233, 377]
    while sizes[-1] < limit:
        sizes.append(sizes[-1] + sizes[-2])
    return sizes


HEAP_SIZES = _heap_sizes()


class Heap:
    __slots__ = (
        "heap_block",
        "heap_used",
        "heap_live",
        "old_block",
        "old_used",
        "mbuf",
        "stack",
        "recent",
        "bin_vheap",
        "bin_vheap_block",
        "bin_old_vheap",
        "bin_old_vheap_block",
        "mbuf_live",
    )

    def __init__(self) -> None:
        self.heap_block = HEAP_SIZES[0]
        self.heap_used = 0
        self.heap_live = 0
        self.old_block = 0
        self.old_used = 0
        self.mbuf = 0
        self.mbuf_live = 0
        self.stack = 10
        self.recent = 0
        self.bin_vheap = 0
        self.bin_vheap_block = 46422
        self.bin_old_vheap = 0
        self.bin_old_vheap_block = 46422

    def allocate(self, words: int, keep: bool = False, binary: int = 0) -> bool:
        """Allocate; returns True when a collection is now due."""
        free = self.heap_block - self.heap_used
        on_heap = min(words, free)
        self.heap_used += on_heap
        rest = words - on_heap
        self.mbuf += rest
        if keep:
            self.heap_live += on_heap
            self.mbuf_live += rest
        self.bin_vheap += binary
        return rest > 0 or self.bin_vheap > self.bin_vheap_block

    def gc_values(self) -> tuple:
        """The 11 values of ``trace_gc``, in the seed's order."""
        return (
            self.old_block,
            self.heap_block,
            self.mbuf,
            self.recent,
            self.stack,
            self.old_used,
            self.heap_used,
            self.bin_vheap,
            self.bin_vheap_block,
            self.bin_old_vheap,
            self.bin_old_vheap_block,
        )

    def monitor_sizes(self) -> tuple:
        """(old_heap_block_size, heap_block_size, mbuf_size, stack_size,
        old_heap_size, heap_size) for ``monitor_long_gc`` / ``monitor_large_heap``."""
        return (
            self.old_block,
            self.heap_block,
            self.mbuf,
            self.stack,
            self.old_used,
            self.heap_used,
        )

    def gc_cost_ms(self) -> int:
        return (self.heap_used + self.mbuf + self.old_used) // WORDS_PER_MS

    def collect(self) -> int:
        """Collect; returns the time it took in ms (the cost model)."""
        cost = self.gc_cost_ms()
        live = self.heap_live + self.mbuf_live
        self.old_used += live
        if self.old_used > self.old_block:
            self.old_block = next(s for s in HEAP_SIZES if s >= self.old_used)
        need = (live * 4) // 3
        self.heap_block = next(s for s in HEAP_SIZES if s >= max(need, HEAP_SIZES[0]))
        self.heap_used = self.heap_live = 0
        self.mbuf = self.mbuf_live = 0
        self.recent = live
        self.bin_old_vheap += self.bin_vheap
        self.bin_vheap = 0
        return cost

    def total_block_size(self) -> int:
        return self.heap_block + self.old_block
