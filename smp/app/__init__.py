"""The application: what a user runs on top of ``smp.Emulator``.

The command line (``cli``), scenario files and workloads, smp/nonsmp
comparison, state-space exploration, run caps, time series, the HTML report
and its charts, remote scheduler clusters and the demo.

May import: everything below it (``smp.emulator``, ``schedulers``,
``dispatcher``, ``smp.ports``, ``smp.wire``, ``smp.core``); nothing below
imports it.
"""
