"""Checks the behaviour tests share."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from contextlib import contextmanager

from smp.core.terms import Atom

#: A ping-pong pair traced for send to the collector ``t``: the body of a
#: small scenario, after its top-level keys and ``[duration]``.
PING_PONG_T = """\
[[tracers]]
name = "t"
[[groups]]
name = "pp"
workload = "ping_pong"
trace = ["send"]
tracer = "t"
"""

#: The head of the small scenarios the simulator tests found by random
#: generation: two schedulers, two operations, four tracers (t1, t2, sq,
#: mon); each scenario adds its groups and faults.
FUZZ_HEAD = """\
name = "fz"
schedulers = 2
[duration]
operations = 2
[[tracers]]
name = "t1"
[[tracers]]
name = "t2"
[[tracers]]
name = "sq"
[[tracers]]
name = "mon"
"""


def check_counts(vm):
    """Every message accounted for: made = delivered + dropped + queued."""
    s = vm.statistics()
    assert s.made == s.delivered + s.dropped + s.queued, s
    return s


def mfa(fun, arity: int = 0) -> tuple:
    """The {M, F, A} the emulator reports for a process body."""
    return (Atom(fun.__module__), Atom(fun.__name__), arity)


def assert_increasing(stamps: list) -> None:
    """{MegaSecs, Secs, MicroSecs} timestamps, strictly increasing."""
    for ts in stamps:
        assert type(ts) is tuple and len(ts) == 3 and all(type(x) is int for x in ts)
    assert all(a < b for a, b in zip(stamps, stamps[1:], strict=False)), stamps


def free_base() -> int:
    """A loopback port with the next five free too (an emulator bound at
    tcp://127.0.0.1:PORT uses PORT..PORT+5)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + 6 > 65535:
            continue
        ok = True
        for off in range(6):
            with socket.socket() as t:
                try:
                    t.bind(("127.0.0.1", base + off))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port range")


def ctrl_c_timer(seconds: float) -> threading.Timer:
    """A timer, not yet started, that delivers SIGINT to the main thread after
    ``seconds``, as Ctrl-C would.  Start it inside the ``try`` that expects the
    KeyboardInterrupt: a short delay can fire before the next line runs."""
    main = threading.main_thread().ident
    return threading.Timer(seconds, lambda: signal.pthread_kill(main, signal.SIGINT))


@contextmanager
def own_group(argv: list, **popen):
    """``subprocess.Popen(argv, **popen)`` in a session of its own, so that a
    test can Ctrl-C its process group as a terminal does; the group is
    killed if it is still running when the block ends."""
    p = subprocess.Popen(argv, start_new_session=True, **popen)
    try:
        yield p
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()


def until(ready, p: subprocess.Popen, seconds: float = 120, what: str = "not under way"):
    """Wait for ``ready()`` (a file grown, a line printed) while ``p`` runs:
    it must not end first, and ``ready`` must come within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not ready():
        assert time.monotonic() < deadline, what
        try:
            p.wait(timeout=0.02)
        except subprocess.TimeoutExpired:
            continue
        out = p.communicate()
        raise AssertionError(f"it ended first: {str(out[-1])[-2000:]}")
