"""Run a command or a piece of Python in a child process under a memory cap
and a time limit, as a hostile input would be met by a user's shell.

Every hostile-input test goes through :func:`run_capped`: the child gets
``RLIMIT_AS`` (address space) and a wall-clock limit, and the result carries
its exit code, its output and its peak RSS, so a test can assert one line, the
documented exit code, bounded memory and no traceback.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["Capped", "run_capped", "run_cli", "assert_one_line"]

#: the default address-space cap: far above what a bounded reader needs, far
#: below what an unbounded one reaches on the inputs of this suite
DEFAULT_CAP = 512 * 1024 * 1024


@dataclass(frozen=True)
class Capped:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_kib: int


#: a Python exception class name (``KeyError``, ``RecursionError``, ...)
_PY_EXC = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception|Iteration)\b")


def _limit(cap: int):
    def pre() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return pre


def run_capped(
    argv: list[str],
    *,
    cap: int = DEFAULT_CAP,
    timeout: float = 60.0,
    stdin: bytes | None = None,
    env: dict | None = None,
    cwd: str | None = None,
) -> Capped:
    """Run ``argv`` under ``cap`` bytes of address space; raise on timeout.

    The peak RSS is this child's own (``os.wait4``), not the largest of
    every child the test process has waited for."""
    import threading
    import time

    t0 = time.monotonic()
    p = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_limit(cap),
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    got: dict = {}

    def drain(name: str, stream) -> None:
        got[name] = stream.read()
        stream.close()

    def feed() -> None:
        try:
            p.stdin.write(stdin)
            p.stdin.close()
        except BrokenPipeError:
            pass

    def reap() -> None:
        _pid, status, usage = os.wait4(p.pid, 0)
        got["status"], got["usage"] = status, usage

    threads = [
        threading.Thread(target=drain, args=("out", p.stdout)),
        threading.Thread(target=drain, args=("err", p.stderr)),
        threading.Thread(target=reap),
    ]
    if stdin is not None:
        threads.append(threading.Thread(target=feed))
    for t in threads:
        t.start()
    threads[2].join(timeout)
    if threads[2].is_alive():
        p.kill()
        for t in threads:
            t.join()
        raise subprocess.TimeoutExpired(argv, timeout)
    for t in threads:
        t.join()
    p.returncode = os.waitstatus_to_exitcode(got["status"])
    return Capped(
        p.returncode,
        got["out"].decode("utf-8", "replace"),
        got["err"].decode("utf-8", "replace"),
        time.monotonic() - t0,
        got["usage"].ru_maxrss,
    )


def run_cli(*args: str, **kw) -> Capped:
    """``smp-emu ARGS`` in a capped child (``python -m smp.app.cli``)."""
    return run_capped([sys.executable, "-c", "from smp.app.cli import main; main()", *args], **kw)


def assert_one_line(r: Capped, code: int, *, contains: str | None = None) -> str:
    """Assert exit ``code`` and exactly one line on stderr with no traceback
    or Python exception name in it; return that line."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1, r.stderr[-2000:]
    line = lines[0]
    assert "Traceback" not in r.stderr and "[Errno" not in line, line
    assert not _PY_EXC.search(line), line
    if contains is not None:
        assert contains in line, line
    return line
