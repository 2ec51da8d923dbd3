"""The exit codes of ``smp-emu``, written down once.

Every command exits with one of these (or 0); ``smp.app.cli`` and
``smp.app.explore`` import them from here.

====  =====================  ==============================================
code  name                   meaning
====  =====================  ==============================================
0                            success
1     ``EXIT_FAILED``        a run failed, an invariant was violated, or a
                             schedule could not be run
2     ``EXIT_USAGE``         a usage error: click's own, a bad option or
                             argument, a bad scenario or result file
130   ``EXIT_INTERRUPTED``   interrupted (Ctrl-C, 128 + SIGINT): the run
                             stops cleanly and what was measured is printed
141   ``EXIT_BROKEN_PIPE``   the reader of standard output went away
                             (``smp-emu read F | head``; 128 + SIGPIPE):
                             nothing more is printed, no message
====  =====================  ==============================================
"""

from __future__ import annotations

__all__ = ["EXIT_FAILED", "EXIT_USAGE", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE"]

EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 1, 2, 130, 141
