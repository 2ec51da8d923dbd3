"""A scheduler: one OS process that runs many emulated Erlang processes.

``engine.Node`` is the scheduler itself (run queue, processes, ports and
every trace point of ``erl_trace.c``, named after the seed), assembled from
``procs`` (sends, links, exits, registration), ``calls`` (call tracing),
``seqtrace``, ``tracepoints`` (the builders and, per mode, where a message
goes), ``resources`` (ports and drivers) and ``localbifs``; ``process`` is
the emulated process, ``heap`` its GC cost model, ``backend`` the trace BIFs'
backend in nonsmp mode.  ``worker`` is the OS process around a ``Node``: its
ZeroMQ loop, and in smp mode the ``SmpTransport`` that batches what the Node
hands on (``engine.Transport``).

May import: ``smp.core``, ``smp.wire``, ``smp.ports`` and the libraries of
the process (pyzmq); never the dispatcher, the controller or the app.
"""
