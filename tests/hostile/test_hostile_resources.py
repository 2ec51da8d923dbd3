"""Resources and leftovers: the process limit, a controller killed while an
emulated process never yields, run directories of runs killed whole, the
intern tables of a long trace read, and a heap past its size table."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import smp
from hostile.capped import run_capped
from schedulers.heap import MAX_HEAP_WORDS, Heap
from smp import Atom as A
from smp.core import terms
from smp.core.terms import Pid
from smp.wire import etf, rundir

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
am_system_limit = A("system_limit")

MODES = [pytest.param(("nonsmp", 1), id="nonsmp"), pytest.param(("smp", 2), id="smp2")]
LIMIT = 10


def _env() -> dict:
    return {
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
    }


def _running(p: psutil.Process) -> bool:
    """An orphan is reaped by whoever adopts it, maybe late: a zombie has exited."""
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _poll(cond, seconds: float) -> float | None:
    """Seconds until ``cond()`` held, or None when it did not within ``seconds``."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > seconds:
            return None
        time.sleep(0.02)
    return time.monotonic() - t0


# ---------------------------------------------------------------- process limit
async def idle(proc):
    await proc.receive()


async def fill(proc, out):
    """Spawn linked processes until spawn fails; report; let them go (they
    exit when told) and wait for every exit; spawn as many again."""
    await proc.process_flag(A("trap_exit"), A("true"))
    rounds = []
    for _ in range(2):
        kids = []
        try:
            while True:
                kids.append(await proc.spawn_link(idle))
        except smp.Error as e:
            rounds.append((len(kids), e.reason))
        if len(rounds) == 2:
            break
        for k in kids:
            await proc.send(k, A("go"))
        for _ in kids:
            await proc.receive(match=lambda m: type(m) is tuple and m[0] is A("EXIT"))
    await proc.send(out, rounds)


@pytest.fixture(params=MODES)
def small_vm(request):
    mode, n = request.param
    with smp.Emulator(mode=mode, schedulers=n, max_processes=LIMIT) as emulator:
        yield emulator


def test_spawn_past_the_limit_is_system_limit(small_vm):
    vm = small_vm
    c = vm.spawn_collector()
    el = vm.spawn_collector()
    vm.register("error_logger", el)
    vm.spawn(fill, c)
    vm.run(timeout=30)
    # the collectors and the spawner hold 3 places; the exits give theirs
    # back (in smp on whichever scheduler each ran), so the second round
    # gets as many as the first
    (rounds,) = vm.messages(c)
    assert rounds == [(LIMIT - 3, am_system_limit), (LIMIT - 3, am_system_limit)]
    # 17.x erl_create_process: erts_send_error_to_logger_str(gl, "Too many processes\n")
    text = smp.charlist("Too many processes\n")
    report = (A("notify"), (A("error"), Pid(0), (A("emulator"), smp.charlist("~s~n"), [text])))
    assert vm.messages(el) == [report, report]


def test_api_spawn_past_the_limit_raises_error_system_limit(small_vm):
    vm = small_vm
    pids = [vm.spawn(idle) for _ in range(LIMIT)]
    assert len(set(pids)) == LIMIT
    for spawn in (
        lambda: vm.spawn(idle),
        vm.spawn_collector,
        lambda: vm.spawn(idle, scheduler=vm.nsched),
        lambda: vm.spawn_many(idle, [()] * vm.nsched),
    ):
        with pytest.raises(smp.Error) as e:
            spawn()
        assert e.value.reason is am_system_limit
    vm.exit(pids[0], A("kill"))
    vm.run(timeout=10)
    assert vm.spawn(idle) not in pids  # the killed one's place is free again
    with pytest.raises(smp.Error):
        vm.spawn(idle)


def test_default_limit_and_bad_limits():
    with smp.Emulator() as vm:
        assert vm.max_processes == 262144
    for bad in (0, -1, 2**27, 1.5, "10", None):
        with pytest.raises(smp.BadArg, match="max_processes"):
            smp.Emulator(max_processes=bad)


# ---------------------------------------------------------------- heap
async def hog(proc, words):
    await proc.allocate(1000, keep=True)  # within the table: fine
    await proc.allocate(words, keep=True)


async def watch_hog(proc, out, words):
    await proc.process_flag(A("trap_exit"), A("true"))
    child = await proc.spawn_link(hog, words)
    msg = await proc.receive()
    await proc.send(out, (child, msg))


def test_allocate_past_the_heap_table_exits_with_system_limit(vm):
    c = vm.spawn_collector()
    vm.spawn(watch_hog, c, MAX_HEAP_WORDS)
    vm.run(timeout=10)
    [(child, (tag, from_, reason))] = vm.messages(c)
    assert (tag, from_) == (A("EXIT"), child)
    # an error exit: {system_limit, Stack}, never a Python exception's name
    assert type(reason) is tuple and reason[0] is am_system_limit, reason
    assert "StopIteration" not in repr(reason) and "python_exception" not in repr(reason)


def test_heap_refuses_before_it_changes():
    h = Heap()
    h.allocate(500, keep=True)
    before = h.gc_values()
    with pytest.raises(smp.Error) as e:
        h.allocate(MAX_HEAP_WORDS, keep=True)
    assert e.value.reason is am_system_limit
    assert h.gc_values() == before
    h.allocate(MAX_HEAP_WORDS // 2, keep=False)  # garbage needs no room
    h.collect()
    h.allocate((MAX_HEAP_WORDS * 3) // 4 - 500, keep=True)  # the largest that fits
    h.collect()
    assert h.heap_block == MAX_HEAP_WORDS and h.old_block == MAX_HEAP_WORDS


# ---------------------------------------------------------------- a stuck body, its owner killed
STUCK_OWNER = r"""
import json, sys
import smp

async def spin(proc, started):
    open(started, "w").close()
    n = 0
    while True:  # never awaits: the scheduler never gets its loop back
        n += 1

mode, n, where, started = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
vm = smp.Emulator(mode=mode, schedulers=n, endpoint_dir=where)
vm.spawn(spin, started, scheduler=1)
print(json.dumps(vm.os_pids), flush=True)
vm.run(timeout=600)
"""


@pytest.mark.parametrize("mode,n", [("nonsmp", 1), ("smp", 2)])
def test_owner_killed_while_a_body_never_yields(tmp_path, mode, n):
    where, started = tmp_path / "run", tmp_path / "started"
    where.mkdir()
    owner = subprocess.Popen(
        [sys.executable, "-c", STUCK_OWNER, mode, str(n), str(where), str(started)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **_env()},
    )
    try:
        pids = json.loads(owner.stdout.readline())
        assert len(pids) == n + (mode == "smp")
        procs = [psutil.Process(pid) for pid in pids]
        [run_dir] = list(where.iterdir())
        assert _poll(started.exists, 30) is not None  # scheduler 1 is in the body
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        owner.stdout.close()
        owner.stderr.close()
    try:
        took = _poll(lambda: not any(map(_running, procs)), 3.0)
        assert took is not None, "the emulator's processes outlived their owner by 3 s"
    finally:
        for p in filter(_running, procs):
            p.kill()
    assert _poll(lambda: not run_dir.exists(), 2.0) is not None, f"{run_dir} was left behind"


# ---------------------------------------------------------------- run directories
async def say(proc, to, what):
    await proc.send(to, what)


KILLED_WHOLE = r"""
import json, sys
import smp
vm = smp.Emulator(mode=sys.argv[1], schedulers=int(sys.argv[2]), endpoint_dir=sys.argv[3])
print(json.dumps([vm._sup.dir, vm.os_pids]), flush=True)
sys.stdin.read()
"""


def _killed_whole_run(where: Path, mode: str, n: int) -> Path:
    """A run whose every process got SIGKILL at once: its directory stays."""
    owner = subprocess.Popen(
        [sys.executable, "-c", KILLED_WHOLE, mode, str(n), str(where)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, **_env()},
    )
    try:
        run_dir, pids = json.loads(owner.stdout.readline())
        procs = [psutil.Process(pid) for pid in pids]
        for p in [psutil.Process(owner.pid)] + procs:
            p.send_signal(signal.SIGKILL)
    finally:
        owner.wait(10)
        owner.stdin.close()
        owner.stdout.close()
    assert _poll(lambda: not any(map(_running, procs)), 10) is not None
    # and no process of the run holds its directory any more: one the run
    # started that was not listed (it inherited the hold) ends on its own
    # once its parent is gone (the watchdog), within a bounded time
    assert _poll(lambda: not _held(run_dir), 10) is not None
    return Path(run_dir)


def _held(run_dir: str) -> bool:
    """Some process holds the run directory's lock (as rundir.sweep tests it);
    a directory gone (its run's last process took it) is held by no one."""
    try:
        fd = os.open(os.path.join(run_dir, rundir.LOCK_NAME), os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


@pytest.mark.parametrize("mode,n", [("nonsmp", 1), ("smp", 2)])
def test_a_run_killed_whole_is_swept_by_the_next(tmp_path, mode, n):
    # (a process of the run that outlived the kill may take the directory
    # itself on its way out; then no stale one is left to sweep, and the run
    # is killed again, at most three times, until one is)
    for _ in range(3):
        stale = _killed_whole_run(tmp_path, mode, n)
        if stale.is_dir():
            break
    assert stale.is_dir() and (stale / rundir.OWNER_NAME).is_file()
    with smp.Emulator(mode=mode, schedulers=n, endpoint_dir=str(tmp_path)) as live:
        assert not stale.exists()
        live_dir = Path(live._sup.dir)
        # a second emulator next to a live one leaves the live one's directory
        with smp.Emulator(endpoint_dir=str(tmp_path)) as other:
            assert live_dir.is_dir() and Path(other._sup.dir).is_dir()
        c = live.spawn_collector()
        live.spawn(say, c, A("still_works"))
        live.run(timeout=10)
        assert live.messages(c) == [A("still_works")]
    assert list(tmp_path.iterdir()) == []


def _fake_run(where: Path, name: str, pid: int, created: float) -> Path:
    d = where / (rundir.PREFIX + name)
    d.mkdir(mode=0o700)
    (d / rundir.OWNER_NAME).write_text(f"{pid} {created!r}\n")
    return d


def test_sweep_takes_only_runs_provably_gone(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = gone.pid  # reaped: no process has this pid (until one is given it again)
    assert not psutil.pid_exists(dead)
    me = psutil.Process()
    gone_dir = _fake_run(tmp_path, "gone", dead, 1.0)
    reused = _fake_run(tmp_path, "reused", me.pid, me.create_time() - 3600)  # pid reused
    mine = _fake_run(tmp_path, "mine", me.pid, me.create_time())  # the owner is alive
    anon = tmp_path / (rundir.PREFIX + "anon")  # no owner record: not provably gone
    anon.mkdir()
    held = _fake_run(tmp_path, "held", dead, 1.0)
    fd = rundir.hold(str(held))  # the owner is gone, one of its processes is not
    other = tmp_path / "not-a-run"
    other.mkdir()
    try:
        removed = sorted(rundir.sweep(str(tmp_path)))
        assert removed == sorted([str(gone_dir), str(reused)])
        assert mine.is_dir() and anon.is_dir() and held.is_dir() and other.is_dir()
    finally:
        rundir.release(str(held), fd)  # the last holder removes it
    assert not held.exists()
    assert rundir.sweep(str(tmp_path)) == []


def test_sweep_takes_a_run_whose_maker_died_before_it_wrote_its_owner(tmp_path):
    """Killed between making its directory and writing its owner record (an
    empty owner.tmp, a lock nobody holds), a run left a directory no later
    run removed.  Once ``NO_OWNER_S`` old and unheld, it is swept; a younger
    one, or one a process holds, is not (its maker may be writing)."""

    def unowned(name: str, age: float) -> Path:
        d = tmp_path / (rundir.PREFIX + name)
        d.mkdir(mode=0o700)
        (d / rundir.LOCK_NAME).touch()
        (d / (rundir.OWNER_NAME + ".tmp")).touch()
        then = time.time() - age
        os.utime(d, (then, then))
        return d

    old = unowned("old", rundir.NO_OWNER_S + 5)
    young = unowned("young", rundir.NO_OWNER_S - 30)
    held = unowned("held", rundir.NO_OWNER_S + 5)
    fd = rundir.hold(str(held))
    try:
        assert rundir.sweep(str(tmp_path)) == [str(old)]
        assert young.is_dir() and held.is_dir()
    finally:
        rundir.release(str(held), fd)  # (not os.close: rundir closes its holds in a fork)


# ---------------------------------------------------------------- intern tables
def _pid_bytes(i: int, node: bytes = b"w\x0bfoo@barhost") -> bytes:
    """A NEW_PID_EXT term of another node, as a trace from it holds pids."""
    return (
        b"\x83X"
        + node
        + (i & 0x7FFF).to_bytes(4, "big")
        + (i >> 15).to_bytes(4, "big")
        + (b"\x00\x00\x00\x01")
    )


def test_decoded_pids_are_not_interned_forever():
    terms.sweep_interned()
    before = len(terms.PIDS)
    kept = etf.decode(_pid_bytes(7))
    chunk, n = 20_000, 200_000
    peak = 0
    for base in range(0, n, chunk):
        got = [etf.decode(_pid_bytes(i)) for i in range(base + 100, base + 100 + chunk)]
        peak = max(peak, len(terms.PIDS))
        assert len(set(got)) == chunk
        del got
    # swept as the table grew: never the 200,000
    bound = 2 * max(terms._SWEEP_MIN, before) + chunk
    assert peak <= bound, (peak, bound)
    assert terms.sweep_interned() > 0
    assert len(terms.PIDS) <= before + 1
    # what is still referred to stays the one object
    assert etf.decode(_pid_bytes(7)) is kept
    assert terms.Pid(7, 0, A("foo@barhost"), 1) is kept


def test_atoms_are_not_interned_forever():
    terms.sweep_interned()
    before = len(terms.ATOMS)
    kept = A("kept_atom_of_this_test")
    peak = 0
    for base in range(0, 150_000, 10_000):
        got = [terms.Atom(f"a{i}") for i in range(base, base + 10_000)]
        peak = max(peak, len(terms.ATOMS))
        del got
    assert peak <= 2 * max(terms._SWEEP_MIN, before) + 10_000, peak
    terms.sweep_interned()
    assert len(terms.ATOMS) <= before + 1
    assert A("kept_atom_of_this_test") is kept and A("ok") is smp.Atom("ok")


MEASURE = r"""
import gc, json, sys
import psutil
from smp.core import terms
from smp.wire import etf
node = b"w\x0bfoo@barhost"
n, chunk = int(sys.argv[1]), 50_000
me = psutil.Process()
gc.collect()
rss0 = me.memory_info().rss
for base in range(0, n, chunk):
    got = [etf.decode(b"\x83X" + node + (i & 0x7FFF).to_bytes(4, "big")
                      + (i >> 15).to_bytes(4, "big") + b"\x00\x00\x00\x01")
           for i in range(base, min(n, base + chunk))]
    del got
gc.collect()
print(json.dumps({"grew": me.memory_info().rss - rss0, "pids": len(terms.PIDS)}))
"""


def test_reading_many_distinct_pids_stays_bounded_in_memory():
    # 600,000 distinct pids kept ~135 MB when they were interned for ever
    r = run_capped([sys.executable, "-c", MEASURE, "600000"], timeout=110, env=_env())
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["pids"] < 2 * terms._SWEEP_MIN + 50_000, got
    assert got["grew"] < 60 * 2**20, got
