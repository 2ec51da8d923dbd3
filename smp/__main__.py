"""``python -m smp``: the built-in demo workload, traced, printed as dbg does."""

from smp.app.demo import main

main()
