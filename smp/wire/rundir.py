"""The emulator's run directory (its ``ipc://`` endpoints live in it): who
made it, who holds it, who removes it, and the watchdog that ends a process
of the emulator whose parent is gone.

``make`` creates the directory (owner-only), takes the controller's hold on
it and writes its owner record: the controller's pid and the time that
process was created, so a later look can tell the owner from a process that
got the same pid since.

The controller removes the directory in ``close()``; but when the controller
is killed (SIGKILL gives it no chance), its dispatcher and schedulers notice,
shut down and exit, and one of them must remove it.  Each process of one
emulator (the controller, the dispatcher, every local scheduler) holds a
shared ``flock`` on the directory's lock file from its start to its exit.
On exit a process first drops its lock, then tries an exclusive one without
waiting: the attempt fails only while another process still holds its shared
lock, and that one tries after it, so the last to exit gets the lock and
removes the directory.

When every process of a run is killed at once (SIGKILL to all of them),
nobody is left to remove it: ``make`` first sweeps the directory it makes the
new one in (``sweep``), removing each run directory of this user whose owner
is provably gone (its recorded pid is not running, or is running as a process
created at another time) and that no process holds (the exclusive lock is
free: the kernel drops the locks of a dead process).  A directory without an
owner record (its maker was killed between making it and writing the
record) is removed the same way once it is ``NO_OWNER_S`` old and unheld; a
directory of another user, or held, is left alone.

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
import stat
import tempfile
import threading
import time
from collections.abc import Callable

import psutil

__all__ = [
    "hold",
    "release",
    "make",
    "sweep",
    "watch_parent",
    "LOCK_NAME",
    "OWNER_NAME",
    "PREFIX",
    "ORPHAN_EXIT",
]

LOCK_NAME = "lock"
OWNER_NAME = "owner"
PREFIX = "smp-emu-"
#: a run directory still without an owner record this long after it was
#: last changed: its maker died before it wrote one (``make`` writes it at
#: once, under its hold)
NO_OWNER_S = 60.0

#: The watchdog looks at its parent this often (seconds).
WATCH_EVERY_S = 0.1
#: Once the parent is gone, the process's own loop has this long to notice
#: it and begin its orderly exit; a process that has not is stuck.
ORPHAN_GRACE_S = 0.75
#: An orderly exit that has begun may take this long from the parent's death.
ORPHAN_CAP_S = 10.0
#: A stuck process's last buffers get this long to be written.
ORPHAN_FLUSH_S = 1.0
#: The exit status of a process the watchdog ended.
ORPHAN_EXIT = 75

#: Lock descriptors this process opened (closed in a forked child).
_held: set[int] = set()
_held_lock = threading.Lock()


def _close_inherited() -> None:
    global _held_lock
    _held_lock = threading.Lock()  # a thread of the parent may have held it at the fork
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
    with _held_lock:
        _held.add(fd)
    return fd


def release(path: str | None, fd: int | None) -> bool:
    """Drop this process's hold; when no other process of the emulator holds
    the directory any more, remove it.  True when this call removed it.  A
    second release of the same hold does nothing (the watchdog and the main
    thread may both come here)."""
    if fd is None:
        return False
    with _held_lock:
        if fd not in _held:
            return False
        _held.discard(fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # another process holds it: the last one removes it
        if path is None or not os.path.isdir(path):  # None: no hold was taken on it
            return False
        shutil.rmtree(path, ignore_errors=True)
        return True
    finally:
        os.close(fd)


# ------------------------------------------------------------------ owners
def _create_time(pid: int) -> float:
    created: float = psutil.Process(pid).create_time()
    return created


def make(where: str | None = None) -> tuple[str, int | None]:
    """Make a run directory in ``where`` (the system's temporary directory
    when None), after sweeping ``where`` (``sweep``); returns its path and
    this process's hold on it (for ``release``).  The hold is taken before the
    owner record is written, so a sweep never takes a run being made for
    one whose owner is gone."""
    sweep(where if where is not None else tempfile.gettempdir())
    path = tempfile.mkdtemp(prefix=PREFIX, dir=where)
    os.chmod(path, 0o700)
    fd = hold(path)
    me = os.getpid()
    tmp = os.path.join(path, OWNER_NAME + ".tmp")
    with open(tmp, "w") as f:
        f.write(f"{me} {_create_time(me)!r}\n")
    os.replace(tmp, os.path.join(path, OWNER_NAME))
    return path, fd


def _owner(path: str) -> tuple[int, float] | None:
    """The owner record of run directory ``path`` (None: none, or unreadable)."""
    try:
        fd = os.open(os.path.join(path, OWNER_NAME), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        text = os.read(fd, 100).decode("ascii", "replace").split()
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        pid, created = int(text[0]), float(text[1])
    except (IndexError, ValueError):
        return None
    return (pid, created) if pid > 0 else None


def _owner_gone(path: str) -> bool:
    """Is the owner of run directory ``path`` provably gone?  Not when there
    is no owner record, or when the OS cannot say."""
    owner = _owner(path)
    if owner is None:
        return False
    pid, created = owner
    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return True  # it has exited (its parent has not reaped it yet)
        # a process that has the pid now but was created at another time is
        # another process (create times have 1/100 s resolution: 1 s apart)
        now_created: float = p.create_time()
        return abs(now_created - created) > 1.0
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False  # not allowed to look: cannot tell


def _remove_unheld(path: str) -> bool:
    """Remove ``path`` if no process holds it; True when removed."""
    try:
        fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = None  # its owner died before it took its hold: nobody ever held it
    except OSError:
        return False
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # a process of that run is still there: it removes it
        shutil.rmtree(path, ignore_errors=True)
        return not os.path.exists(path)
    finally:
        if fd is not None:
            os.close(fd)


def sweep(where: str) -> list[str]:
    """Remove the run directories in ``where`` that this user owns, whose
    owner is provably gone (or that have had no owner record for
    ``NO_OWNER_S``) and that no process holds; returns their paths."""
    removed: list[str] = []
    uid = os.getuid()
    try:
        entries = os.scandir(where)
    except OSError:
        return removed
    with entries:
        for e in entries:
            if not e.name.startswith(PREFIX):
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
                continue
            unowned = (
                not os.path.lexists(os.path.join(e.path, OWNER_NAME))
                and time.time() - st.st_mtime > NO_OWNER_S
            )
            if (unowned or _owner_gone(e.path)) and _remove_unheld(e.path):
                removed.append(e.path)
    return removed


# ------------------------------------------------------------------ watchdog
def watch_parent(
    path: str | None,
    fd: int | None,
    noticed: Callable[[], bool],
    flush: Callable[[], object] | None = None,
) -> threading.Thread:
    """Start this process's orphan watchdog: a daemon thread that looks at
    the parent every ``WATCH_EVERY_S``.  Once the parent is gone (the process
    was re-parented), the process's own loop has ``ORPHAN_GRACE_S`` to notice
    it too (``noticed()`` true: its orderly exit has begun), and then until
    ``ORPHAN_CAP_S`` after the death to finish.  A process that did not
    notice is stuck: its main thread runs something that never returns to
    the loop (an emulated process's body that never yields, a blocking
    write).  Then the watchdog runs ``flush`` (best effort, in a thread of
    its own, for at most ``ORPHAN_FLUSH_S``: the main thread's sockets are
    not the watchdog's to touch, so what waits on them is lost with the
    controller that would have read it), releases the run directory (the
    last of the run removes it) and ends the process with ``os._exit``
    (status ``ORPHAN_EXIT``): no exception can reach a main thread that never
    returns, and no exit handler should run in a process left half way.

    The thread runs whatever the main thread does, as long as that thread
    gives the interpreter lock up, as Python code does every few ms; a main
    thread in one long C call that keeps the lock holds the watchdog too."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_EVERY_S)  # polling the OS: nothing to wait on
        gone_at = time.monotonic()
        while not noticed() and time.monotonic() < gone_at + ORPHAN_GRACE_S:
            time.sleep(0.02)
        if noticed():
            time.sleep(max(0.0, gone_at + ORPHAN_CAP_S - time.monotonic()))
        elif flush is not None:
            t = threading.Thread(target=_quietly(flush), name="orphan-flush", daemon=True)
            t.start()
            t.join(ORPHAN_FLUSH_S)
        try:
            try:
                os.write(2, f"smp: process {os.getpid()}: parent gone, exiting\n".encode())
            except OSError:
                pass  # nobody reads stderr any more
            release(path, fd)
        finally:
            os._exit(ORPHAN_EXIT)

    t = threading.Thread(target=watch, name="orphan-watchdog", daemon=True)
    t.start()
    return t


def _quietly(fn: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except BaseException:
            pass

    return run
