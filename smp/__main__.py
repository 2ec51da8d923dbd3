"""``python -m smp``: the built-in demo workload, traced, printed as dbg does
(the trace on stdout, a summary line per mode on stderr)."""

from smp.app.demo import main

main()
