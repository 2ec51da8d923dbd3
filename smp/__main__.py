"""``python -m smp``: the built-in demo workload, traced, printed as dbg does
(the trace on stdout, a summary line per mode on stderr)."""

import sys

from smp.app.demo import main

sys.exit(main())
