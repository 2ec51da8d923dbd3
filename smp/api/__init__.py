"""The parts of ``smp.Emulator``'s public API, one concern each.

``smp.emulator.Emulator`` is the API a user calls; its methods are grouped
here by what they reach: the trace BIFs (``bifs``), the tracer ports
(``ports``), the dispatcher's queue held and stepped (``dispatcher``) and
the counters (``statistics``, and the ``Statistics`` snapshot it
returns).  Each is a mixin over the controller's calls (``_sched_call``,
``_disp_call``, ``_all_scheds``, ``_sync_dispatcher``, ``smp``), which
``Emulator`` sets up from ``smp.supervision``.
"""
