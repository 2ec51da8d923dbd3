"""What crosses a socket or a file: the frames and how they are checked.

``frames`` names every frame the processes exchange, each with ``encode``
and a checked ``decode``; ``codec`` is the restricted (allow-list) decoder
every frame and journal record goes through; ``etf`` is the Erlang external
term format; ``curve`` sets up CURVE-authenticated ZeroMQ sockets; ``rundir``
owns the run's private directory of ipc endpoints; ``runtime`` holds the
settings every OS process of the emulator starts with (the collector's).

May import: ``smp.core``, the standard library, pyzmq (``curve`` only).
"""
