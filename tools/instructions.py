#!/usr/bin/env python
"""Which modules to compile: machine instructions per trace message, counted.

    python tools/instructions.py [--messages N] [SET ...]

Each SET is ``pure`` (nothing compiled), ``chosen`` (``smp._build.COMPILED``,
what ``pip install`` compiles), ``all`` (every module of the scheduler, the
core, the wire codecs and the dispatcher) or a comma-separated list of module
names (``smp.core.messages,schedulers.process``); default: ``pure chosen``.
For each set the tool copies the sources to a temporary folder, compiles
that set there with Cython (``SMP_COMPILE=... setup.py build_ext --inplace``)
and runs the nonsmp trace path in one process under valgrind's callgrind: a
Node with 4 senders traced ``[send]`` to one tracer, as in
``tools/bench_node.py``, run to the end.  It prints the instructions per
message (two runs, of N and N/2 messages, subtracted, so start-up cancels
out) and the ratio to the first set.

Instruction counts do not depend on what else the machine runs, unlike
times (``PYTHONHASHSEED`` is fixed too), so a difference of 1 % is real; they are not times (a cache miss costs
more than an add), so a choice this tool makes is checked with
``tools/bench_node.py --builds compiled,pure`` too.  Needs valgrind (Debian's
``valgrind``) and Cython.  It asserts nothing: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from smp import _build  # noqa: E402

#: every module a set named "all" compiles: the scheduler, the core's rules,
#: the wire codecs and the dispatcher's loop
ALL = tuple(
    f"{pkg}.{name[:-3]}"
    for pkg, folder in (
        ("schedulers", "schedulers"),
        ("smp.core", "smp/core"),
        ("smp.wire", "smp/wire"),
        ("dispatcher", "dispatcher"),
    )
    for name in sorted(os.listdir(os.path.join(ROOT, folder)))
    if name.endswith(".py") and name != "__init__.py"
)

WORKLOAD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import bench_workers as W
from schedulers.engine import Node
from smp.core.flags import F_TRACE_SEND, F_TRACER

n = int(sys.argv[2])
node = Node(sched_id=1, nsched=1, smp=False)
tracer = node.spawn_local(node.new_pid(), W.tracer_loop, ())
tracer.flags |= F_TRACER
for _ in range(4):
    sink = node.spawn_local(node.new_pid(), W.sink, ())
    p = node.spawn_local(node.new_pid(), W.sender, (sink.pid, n // 4))
    p.flags |= F_TRACE_SEND
    p.tracer = tracer.pid
while node.run_some():
    pass
made = node.stats.as_dict()["made"]
if made != n // 4 * 4:
    raise SystemExit(f"made {made} trace messages, not {n // 4 * 4}")
"""


def modules_of(spec: str) -> tuple[str, ...]:
    if spec == "pure":
        return ()
    if spec == "chosen":
        return _build.COMPILED
    if spec == "all":
        return ALL
    mods = tuple(m for m in spec.split(",") if m)
    unknown = [m for m in mods if m not in ALL]
    if unknown:
        raise SystemExit(f"instructions: unknown module(s) {', '.join(unknown)}")
    return mods


def build_tree(tmp: str, mods: tuple[str, ...]) -> str:
    """A copy of the sources with ``mods`` compiled in place."""
    tree = os.path.join(tmp, "tree")
    for pkg in ("smp", "schedulers", "dispatcher"):
        shutil.copytree(
            os.path.join(ROOT, pkg),
            os.path.join(tree, pkg),
            ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.c"),
        )
    shutil.copy(os.path.join(ROOT, "setup.py"), tree)
    shutil.copy(os.path.join(HERE, "bench_workers.py"), tree)
    if mods:
        env = {**os.environ, "SMP_COMPILE": ",".join(mods)}
        env.pop(_build.ENV, None)
        r = subprocess.run(
            [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise SystemExit(f"instructions: the build failed:\n{r.stderr[-2000:]}")
    return tree


def count(tree: str, n: int) -> int:
    """Instructions of one run of the workload with ``n`` messages."""
    script = os.path.join(tree, "workload.py")
    with open(script, "w") as f:
        f.write(WORKLOAD)
    env = {k: v for k, v in os.environ.items() if k not in (_build.ENV, "PYTHONPATH")}
    env["PYTHONPATH"] = tree
    env["PYTHONHASHSEED"] = "0"  # the same dict and set layouts in every run
    r = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            os.path.realpath(sys.executable),
            script,
            tree,
            str(n),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    m = re.search(r"Collected : (\d+)", r.stderr)
    if r.returncode != 0 or m is None:
        raise SystemExit(f"instructions: the run failed:\n{r.stderr[-2000:]}")
    return int(m.group(1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--messages",
        type=int,
        default=40_000,
        help="trace messages of the long run (default 40000)",
    )
    ap.add_argument(
        "sets", nargs="*", default=["pure", "chosen"], help="pure, chosen, all or a,b,c"
    )
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("instructions: needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    if args.messages < 8:
        print("instructions: --messages must be at least 8", file=sys.stderr)
        return 2
    sets = [(s, modules_of(s)) for s in args.sets]
    n, half = args.messages // 4 * 4, args.messages // 8 * 4
    print(f"# nonsmp trace path, {n:,} and {half:,} messages, instructions per message")
    first = None
    for name, mods in sets:
        with tempfile.TemporaryDirectory(prefix="smp-instr-") as tmp:
            tree = build_tree(tmp, mods)
            per = (count(tree, n) - count(tree, half)) / (n - half)
        first = first or per
        print(f"{name:60} {per:10,.0f}  {per / first:6.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
