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
  heap): deterministic, so ``long_gc`` fires exactly when the thresholds say;
* the size table ends at the first size of at least 2**40 words
  (``MAX_HEAP_WORDS``).  An ``allocate`` whose live data would need a young
  or an old block past the end of the table raises ``error:system_limit``
  in the process before anything changes (no collection, no ``gc_start``).
  17.x has no such error: its ``erts_next_heap_size`` (erl_gc.c) finds no
  next size and halts the whole node (``erl_exit(1, "no next heap size
  found: ...")``), and a heap the allocator cannot give ends the node too
  (``eheap_alloc: Cannot allocate ...``).  The emulator confines it to the
  process, with the reason the VM gives when a process meets a system limit
  (``spawn`` past the process limit, an atom past the atom table).
"""

from __future__ import annotations

from smp.core.errors import Error
from smp.core.terms import Atom

__all__ = ["Heap", "HEAP_SIZES", "MAX_HEAP_WORDS", "WORDS_PER_MS"]

WORDS_PER_MS = 10_000


def _heap_sizes(limit: int = 1 << 40) -> list[int]:
    sizes = [233, 377]
    while sizes[-1] < limit:
        sizes.append(sizes[-1] + sizes[-2])
    return sizes


HEAP_SIZES = _heap_sizes()
#: The largest heap block (young or old) the table has, in words.
MAX_HEAP_WORDS = HEAP_SIZES[-1]

am_system_limit = Atom("system_limit")


def _block_for(words: int) -> int:
    """The smallest size of the table that holds ``words``."""
    for s in HEAP_SIZES:
        if s >= words:
            return s
    raise Error(am_system_limit)


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
        """Allocate; returns True when a collection is now due.  Raises
        ``Error(system_limit)``, changing nothing, when the live data would
        not fit the largest young or old block a collection can make."""
        if keep:
            live = self.heap_live + self.mbuf_live + words
            if max(self.old_used + live, (live * 4) // 3) > MAX_HEAP_WORDS:
                raise Error(am_system_limit)
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
        # allocate() refused what would not fit, so both sizes are in the table
        old_used = self.old_used + live
        old_block = _block_for(old_used) if old_used > self.old_block else self.old_block
        heap_block = _block_for(max((live * 4) // 3, HEAP_SIZES[0]))
        self.old_used, self.old_block, self.heap_block = old_used, old_block, heap_block
        self.heap_used = self.heap_live = 0
        self.mbuf = self.mbuf_live = 0
        self.recent = live
        self.bin_old_vheap += self.bin_vheap
        self.bin_vheap = 0
        return cost

    def total_block_size(self) -> int:
        return self.heap_block + self.old_block
