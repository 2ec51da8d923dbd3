"""``python -m smp``: the built-in demo workload, traced, printed as dbg does."""

from .demo import main

main()
