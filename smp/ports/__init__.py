"""Trace ports and reading traces back.

``traceport`` is OTP's trace file and ip drivers (plus the memory and null
ports); ``reader`` reads trace files and merges them as ``ttb`` does;
``dbgfmt`` prints messages as ``dbg``'s default handler does, or as JSON;
``order`` checks the per-tracee order of a stream of trace messages.

May import: ``smp.core``, ``smp.wire`` and the standard library.
"""
