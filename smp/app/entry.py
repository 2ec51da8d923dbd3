"""The ``smp-emu`` command's entry point.

Loading the command line takes a second or so (the emulator, the reports,
the charts).  A Ctrl-C in that second ends the command as one later does:
one line and ``EXIT_INTERRUPTED``, not a traceback.  The command line is
loaded by name, as the package loads its lazy names: nothing imports this
module, so it can hide no cycle.
"""

from __future__ import annotations

import importlib
import sys

from smp.app.exitcodes import EXIT_INTERRUPTED

__all__ = ["main"]


def main() -> None:
    try:
        cli_main = importlib.import_module("smp.app.cli").main
    except KeyboardInterrupt:
        sys.stderr.write("smp-emu: interrupted\n")
        raise SystemExit(EXIT_INTERRUPTED) from None
    cli_main()
