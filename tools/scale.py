"""How start-up time and memory grow with the number of schedulers and of
processes per scheduler.  Prints a table; asserts nothing.

    python tools/scale.py [--schedulers 1,2,4,8,16,32,64] [--procs 1000]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import psutil

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import smp  # noqa: E402
from smp import Atom as A  # noqa: E402


async def hello(proc, peer):
    await proc.send(peer, A("hi"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schedulers", default="1,2,4,8,16,32,64")
    ap.add_argument("--procs", type=int, default=1000, help="processes per scheduler")
    a = ap.parse_args()
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}"
    )
    print(
        f"{'N':>4} {'start s':>8} {'spawn s':>8} {'run s':>7} {'stop s':>7} "
        f"{'RSS MiB':>8} {'MiB/sched':>9} {'procs':>7}"
    )
    for n in [int(x) for x in a.schedulers.split(",")]:
        t0 = time.perf_counter()
        vm = smp.Emulator(mode="smp", schedulers=n, start_timeout=120)
        t1 = time.perf_counter()
        try:
            sink = vm.spawn(_drain)
            vm.spawn_many(hello, [(sink,)] * (n * a.procs))
            t2 = time.perf_counter()
            vm.run(timeout=600)
            t3 = time.perf_counter()
            rss = [psutil.Process(p).memory_info().rss / 2**20 for p in vm.os_pids]
        finally:
            vm.close()
        t4 = time.perf_counter()
        print(
            f"{n:>4} {t1 - t0:>8.2f} {t2 - t1:>8.2f} {t3 - t2:>7.2f} {t4 - t3:>7.2f} "
            f"{sum(rss):>8.0f} {sum(rss[1:]) / n:>9.1f} {n * a.procs:>7}",
            flush=True,
        )


async def _drain(proc):
    while True:
        await proc.receive()


if __name__ == "__main__":
    main()
