"""The emulator's run directory (its ``ipc://`` endpoints live in it): the
last of the emulator's processes to exit removes it.

The controller that makes the directory removes it in ``close()``; but when
the controller is killed (SIGKILL gives it no chance), its dispatcher and
schedulers notice, shut down and exit, and one of them must remove it.  Each
process of one emulator (the controller, the dispatcher, every local
scheduler) holds a shared ``flock`` on the directory's lock file from its
start to its exit.  On exit a process first drops its lock, then tries an
exclusive one without waiting: the attempt fails only while another process
still holds its shared lock, and that one tries after it, so the last to exit
gets the lock and removes the directory.

A lock belongs to an open file description, which ``fork`` shares with the
child; a child that kept the controller's descriptor would keep the
controller's lock alive after the controller died.  So every forked child
closes the descriptors this module opened in its parent at once
(``os.register_at_fork``), and opens its own.

Runs in every process of an emulator.
"""

from __future__ import annotations

import fcntl
import os
import shutil

__all__ = ["hold", "release", "LOCK_NAME"]

LOCK_NAME = "lock"

#: Lock descriptors this process opened (closed in a forked child).
_held: set[int] = set()


def _close_inherited() -> None:
    for fd in _held:
        try:
            os.close(fd)
        except OSError:
            pass
    _held.clear()


os.register_at_fork(after_in_child=_close_inherited)


def hold(path: str | None) -> int | None:
    """Take this process's shared hold on run directory ``path``; returns the
    descriptor for ``release`` (None: no directory, or it is already gone)."""
    if not path:
        return None
    try:
        fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        os.close(fd)
        return None
    _held.add(fd)
    return fd


def release(path: str | None, fd: int | None) -> bool:
    """Drop this process's hold; when no other process of the emulator holds
    the directory any more, remove it.  True when this call removed it."""
    if fd is None:
        return False
    _held.discard(fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # another process holds it: the last one removes it
        if not os.path.isdir(path):
            return False
        shutil.rmtree(path, ignore_errors=True)
        return True
    finally:
        os.close(fd)
