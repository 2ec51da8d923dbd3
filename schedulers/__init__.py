"""A scheduler: one OS process that runs many emulated Erlang processes.

``engine.Node`` is the scheduler itself (run queue, processes, ports and
every trace point of ``erl_trace.c``, named after the seed), assembled from
``procs`` (sends, links, exits, registration), ``calls`` (call tracing),
``seqtrace``, ``tracepoints`` (the builders), ``delivery`` (per mode, where
a message goes), ``resources`` (ports and drivers) and ``localbifs``;
``process`` is the emulated process, ``heap`` its GC cost model, ``backend``
the trace BIFs' backend in nonsmp mode.  ``worker`` is the OS process around
a ``Node``: its ZeroMQ loop, with ``membership`` (the handshake and the
heartbeat), ``commands`` and ``counters`` (the controller's commands, no
socket), ``inbound`` (what a peer's signal or a publication does to the
Node) and, in smp mode, ``transport``'s ``SmpTransport`` that batches what
the Node hands on (``engine.Transport``).

May import: ``smp.core``, ``smp.wire``, ``smp.ports`` and the libraries of
the process (pyzmq); never the dispatcher, the controller or the app.
"""
