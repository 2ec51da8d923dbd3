"""Trace ports and reading traces back.

``traceport`` opens the tracer ports: OTP's trace file driver
(``traceport_file``), its ip driver (``traceport_ip``), and the memory and
null ports; ``reader`` reads trace files and merges them as ``ttb`` does;
``dbgfmt`` prints messages as ``dbg``'s default handler does, or as JSON;
``order`` checks the per-tracee order of a stream of trace messages.

May import: ``smp.core``, ``smp.wire`` and the standard library.
"""
