"""The dispatcher: the smp build's ``sys_msg_dispatcher_func`` in its own OS process.

``server.Dispatcher`` takes the schedulers' batches in queue order (ingest
thread), decides every queued run with ``smp.core.dispatch.resolve`` under
the rwlock-guarded tracer state and delivers or drops it (dispatch thread),
and serves the controller (control thread); ``table`` is its view of the
process table; ``journal`` records every queued run, table event and
decision, and ``replay`` decides a journal's runs again with the same rule.

May import: ``smp.core``, ``smp.wire``, ``smp.ports`` and the libraries of
the process (pyzmq); never the schedulers, the controller or the app.
"""
