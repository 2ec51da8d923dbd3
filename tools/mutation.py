#!/usr/bin/env python
"""Mutation testing of one module against a selection of tests (opt-in).

    python tools/mutation.py MODULE [TESTS...] [--jobs N] [--timeout S] [--list]

``MODULE`` is a path such as ``smp/core/dispatch.py``.  Each mutant changes
one thing in it:

* ``cmp``: a comparison flipped (``==``/``!=``, ``<``/``<=``, ``>``/``>=``,
  ``is``/``is not``, ``in``/``not in``);
* ``boolop``: ``and`` and ``or`` swapped;
* ``negate``: the condition of an ``if``, ``elif``, ``while`` or conditional
  expression negated;
* ``delete``: a statement inside a function replaced by ``pass``;
* ``int``: an integer constant changed (0 -> 1, 1 -> 0, n -> n + 1);
* ``str``: a string (so an atom's name) changed (``"x"`` -> ``"x_mut"``);
* ``bool``: ``True`` and ``False`` swapped;
* ``swap``: two neighbouring elements of a tuple literal swapped.

Docstrings, annotations, ``__all__`` and f-strings are left alone, as are
tuples whose order cannot matter (the right side of ``in``, an ``except``
clause, ``isinstance``'s second argument, a type expression such as
``tuple[int, ...]``) and swaps of two equal elements.

The working tree is never written: the repository's files (``git ls-files``,
untracked ones included) are copied into a temporary directory per job, the
mutant is written into that copy, and pytest runs there with ``PYTHONPATH``
pointing at it, ``-x -q -p no:cacheprovider`` and a per-mutant timeout.  A
mutant whose tests fail (or time out) is killed; one whose tests pass
survives.  Mutants listed in ``tools/mutation_equivalent.toml`` (module,
operator, and the scope (enclosing def or module-level name), the line
and/or the original and mutated snippets as ``--list`` prints them, with
the reason they change nothing observable) are set aside
and not run; entries that match no mutant any more are reported.

Options: ``--list`` only lists the mutants; ``--only 3,7`` and ``--lines
40-60`` run a part of them; ``--toml`` also prints each survivor as an
entry for the equivalent file; ``--jobs`` (default 1) runs that many mutants
at once, each in its own copy.

The tool asserts nothing: it prints the score and every survivor (file:line,
operator, original and mutated snippet) and exits 0.  Without TESTS, the
module's default selection (``DEFAULT_TESTS``) is used.  Test directories are
expanded to their files, those named after the module first (its
``*_seed.py`` file before the others), so a killed mutant usually stops at
its first failing test.
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT_FILE = ROOT / "tools" / "mutation_equivalent.toml"

#: The test selection per module when none is given.  The schedulers'
#: tracepoints are run against the trace points' own tests and the nonsmp
#: rules only, not the whole suite (which takes minutes per mutant on a
#: small machine); pass more test paths for a wider run.
DEFAULT_TESTS = {
    "smp/core/dispatch.py": ["tests/core"],
    "smp/core/state.py": ["tests/core"],
    "smp/core/messages.py": ["tests/core"],
    "schedulers/tracepoints.py": [
        "tests/test_tracepoints_seed.py",
        "tests/test_nonsmp_rules.py",
    ],
    # the trace points' hand-over to a tracer (process, port, the fake pair)
    "schedulers/delivery.py": [
        "tests/test_tracepoints_seed.py",
        "tests/test_nonsmp_rules.py",
    ],
}

#: Subscripted names that make type expressions: their tuples are not values.
TYPE_NAMES = {"tuple", "dict", "list", "set", "frozenset", "type", "Callable", "Union"}

CMP_FLIP = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


@dataclass
class Mutant:
    index: int
    line: int
    col: int
    operator: str
    original: str
    mutated: str
    source: str  # the whole mutated module
    scope: str = ""  # the enclosing def/class (dotted), or the module-level names assigned
    nth: int = 1  # which of the scope's mutants with this operator and these snippets
    equivalent: str | None = None  # the reason, when set aside

    def where(self, module: str) -> str:
        return f"{module}:{self.line}"


# ---------------------------------------------------------------- finding mutants
def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    out = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            out[id(child)] = node
    return out


def _skipped_subtrees(tree: ast.AST) -> set[int]:
    """Nodes no mutant touches: docstrings, annotations, ``__all__``,
    f-strings, ``__slots__``."""
    skip: set[int] = set()

    def mark(node):
        if node is not None:
            for n in ast.walk(node):
                skip.add(id(n))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                mark(body[0])
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            mark(node)  # a bare string used as a comment
        if isinstance(node, ast.JoinedStr):
            mark(node)
        if isinstance(node, ast.arg):
            mark(node.annotation)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mark(node.returns)
        if isinstance(node, ast.AnnAssign):
            mark(node.annotation)
            if isinstance(node.target, ast.Name) and node.target.id in ("__all__", "__slots__"):
                mark(node.value)
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if "__all__" in names or "__slots__" in names:
                mark(node.value)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mark(node)
    return skip


def _orderless_tuples(tree: ast.AST) -> set[int]:
    """Tuples whose order cannot matter."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, ast.Tuple):
                    out.add(id(right))
        elif isinstance(node, ast.ExceptHandler) and isinstance(node.type, ast.Tuple):
            out.add(id(node.type))
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id in TYPE_NAMES
            and isinstance(node.slice, ast.Tuple)
        ):
            out.add(id(node.slice))  # a type expression (tuple[int, ...]), not a value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
            and isinstance(node.args[1], ast.Tuple)
        ):
            out.add(id(node.args[1]))
    return out


def _in_function(node_id: int, parents: dict[int, ast.AST]) -> bool:
    p = parents.get(node_id)
    while p is not None:
        if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return True
        p = parents.get(id(p))
    return False


def _scope(node: ast.AST, parents: dict[int, ast.AST]) -> str:
    names: list[str] = []
    top = node
    p = parents.get(id(node))
    while p is not None:
        if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(p.name)
        if not isinstance(p, ast.Module):
            top = p
        p = parents.get(id(p))
    if names:
        return ".".join(reversed(names))
    if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return top.name
    targets = []
    if isinstance(top, ast.Assign):
        targets = top.targets
    elif isinstance(top, ast.AnnAssign):
        targets = [top.target]
    out = []
    for t in targets:
        out += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
    return ",".join(out) or "<module>"


def _short(text: str, limit: int = 90) -> str:
    first = text.strip().splitlines()[0] if text.strip() else text
    if len(first) > limit:
        first = first[: limit - 3] + "..."
    elif "\n" in text.strip():
        first += " ..."
    return first


def _sites(tree: ast.AST, source: str):
    """Yield ``(node, operator, make)`` for every mutation site; ``make(node)``
    returns ``(replacement text, mutated snippet)`` for the node's segment."""
    skip = _skipped_subtrees(tree)
    orderless = _orderless_tuples(tree)
    parents = _parents(tree)
    lines = source.splitlines(keepends=True)

    def is_elif(node: ast.If) -> bool:
        text = lines[node.lineno - 1][node.col_offset :]
        return text.startswith("elif")

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                new_op = CMP_FLIP.get(type(op))
                if new_op is None:
                    continue

                def make(n, i=i, new_op=new_op):
                    m = copy.deepcopy(n)
                    m.ops[i] = new_op()
                    return m

                yield node, "cmp", make
        elif isinstance(node, ast.BoolOp):

            def make(n):
                m = copy.deepcopy(n)
                m.op = ast.Or() if isinstance(n.op, ast.And) else ast.And()
                return m

            yield node, "boolop", make
        elif isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                yield node, "bool", lambda n: ast.Constant(not n.value)
            elif isinstance(v, int):
                new = 1 if v == 0 else 0 if v == 1 else v + 1
                yield node, "int", lambda n, new=new: ast.Constant(new)
            elif isinstance(v, str):
                yield node, "str", lambda n: ast.Constant(n.value + "_mut")
        elif isinstance(node, ast.Tuple) and isinstance(node.ctx, ast.Load):
            if id(node) in orderless or len(node.elts) < 2:
                continue
            for i in range(len(node.elts) - 1):
                a, b = node.elts[i], node.elts[i + 1]
                if isinstance(a, ast.Starred) or isinstance(b, ast.Starred):
                    continue
                if ast.dump(a) == ast.dump(b):
                    continue

                def make(n, i=i):
                    m = copy.deepcopy(n)
                    m.elts[i], m.elts[i + 1] = m.elts[i + 1], m.elts[i]
                    return m

                yield node, "swap", make
        if isinstance(node, (ast.If, ast.While, ast.IfExp)) and id(node.test) not in skip:
            yield node.test, "negate", lambda n: ast.UnaryOp(ast.Not(), copy.deepcopy(n))
        if (
            isinstance(node, ast.stmt)
            and not isinstance(
                node,
                (
                    ast.Pass,
                    ast.FunctionDef,
                    ast.AsyncFunctionDef,
                    ast.ClassDef,
                    ast.Global,
                    ast.Nonlocal,
                ),
            )
            and _in_function(id(node), parents)
            and not (isinstance(node, ast.If) and is_elif(node))
        ):
            yield node, "delete", None


def _offsets(source: str) -> list[int]:
    out, pos = [], 0
    for line in source.splitlines(keepends=True):
        out.append(pos)
        pos += len(line)
    out.append(pos)
    return out


def _byte_col_to_char(line: str, col: int) -> int:
    return len(line.encode("utf-8")[:col].decode("utf-8", errors="replace"))


def find_mutants(path: Path) -> list[Mutant]:
    source = path.read_text()
    tree = ast.parse(source)
    parents = _parents(tree)
    lines = source.splitlines(keepends=True)
    offs = _offsets(source)
    out: list[Mutant] = []
    seen: set[str] = set()
    for node, operator, make in _sites(tree, source):
        sl, el = node.lineno - 1, node.end_lineno - 1
        start = offs[sl] + _byte_col_to_char(lines[sl], node.col_offset)
        end = offs[el] + _byte_col_to_char(lines[el], node.end_col_offset)
        original = ast.unparse(node)
        if operator == "delete":
            replacement, mutated = "pass", "pass"
            original = _short(original)
        else:
            mutated = ast.unparse(make(node))
            replacement = f"({mutated})"
        new_source = source[:start] + replacement + source[end:]
        try:
            compile(new_source, str(path), "exec")
        except SyntaxError:
            continue
        if new_source in seen:
            continue
        seen.add(new_source)
        out.append(
            Mutant(
                len(out),
                node.lineno,
                node.col_offset,
                operator,
                original,
                mutated,
                new_source,
                _scope(node, parents),
            )
        )
    out.sort(key=lambda m: (m.line, m.col, m.operator))
    seen_keys: dict[tuple, int] = {}
    for i, m in enumerate(out):
        m.index = i
        key = (m.scope, m.operator, m.original, m.mutated)
        m.nth = seen_keys[key] = seen_keys.get(key, 0) + 1
    return out


# ---------------------------------------------------------------- equivalents
def load_equivalents(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open("rb") as f:
        data = tomllib.load(f)
    return list(data.get("equivalent", []))


def _matches(entry: dict, module: str, m: Mutant) -> bool:
    """An entry names its module and operator, and at least one of the
    scope, the line, the original and the mutated snippet (``nth`` picks one
    of a scope's equal mutants); what it leaves out matches any (so ``scope``
    + ``operator`` alone sets aside every such mutant there).  Prefer the
    scope to the line: it survives edits elsewhere in the module."""
    if entry.get("module") != module or entry.get("operator") != m.operator:
        return False
    if not any(k in entry for k in ("scope", "line", "original", "mutated")):
        return False
    return (
        entry.get("scope", m.scope) == m.scope
        and entry.get("line", m.line) == m.line
        and entry.get("original", m.original) == m.original
        and entry.get("mutated", m.mutated) == m.mutated
        and entry.get("nth", m.nth) == m.nth
    )


def mark_equivalents(mutants: list[Mutant], module: str, entries: list[dict]) -> list[dict]:
    """Set ``equivalent`` on the listed mutants; return the entries of this
    module that matched none (stale: the code changed)."""
    used = set()
    for m in mutants:
        for i, e in enumerate(entries):
            if _matches(e, module, m):
                m.equivalent = e.get("reason", "")
                used.add(i)
                break
    return [e for i, e in enumerate(entries) if e.get("module") == module and i not in used]


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def toml_entry(module: str, m: Mutant) -> str:
    return (
        "[[equivalent]]\n"
        f"module = {_toml_str(module)}\n"
        f"scope = {_toml_str(m.scope)}\n"
        f"nth = {m.nth}\n"
        f"operator = {_toml_str(m.operator)}\n"
        f"original = {_toml_str(m.original)}\n"
        f"mutated = {_toml_str(m.mutated)}\n"
        'reason = ""\n'
    )


# ---------------------------------------------------------------- running
def _repo_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [f for f in out.split("\0") if f]


def make_copy(dest: Path) -> None:
    for rel in _repo_files():
        src = ROOT / rel
        if not src.is_file():
            continue  # deleted in the working tree
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def expand_tests(tests: list[str], module: str) -> list[str]:
    """Directories become their test files, the module's own first."""
    stem = Path(module).stem
    out: list[str] = []
    for t in tests:
        p = ROOT / t
        if p.is_dir():
            files = sorted(str(f.relative_to(ROOT)) for f in p.rglob("test_*.py"))
            files.sort(key=lambda f: (stem not in Path(f).name, not f.endswith("_seed.py")))
            out += [f for f in files if f not in out]
        elif t not in out:
            out.append(t)
    return out


def _pytest_cmd(tests: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    try:
        import xdist  # noqa: F401

        cmd += ["-n", "0"]
    except ImportError:
        pass
    return cmd + tests


def _drop_bytecode(copy_root: Path, module: str) -> None:
    mod = copy_root / module
    for pyc in (mod.parent / "__pycache__").glob(f"{mod.stem}.*.pyc"):
        pyc.unlink(missing_ok=True)


def run_tests(copy_root: Path, tests: list[str], timeout: float) -> tuple[str, float]:
    """``("killed"|"survived"|"timeout"|"error", seconds)``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(copy_root)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    t0 = time.monotonic()
    proc = subprocess.Popen(
        _pytest_cmd(tests),
        cwd=copy_root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "timeout", time.monotonic() - t0
    dt = time.monotonic() - t0
    if rc == 0:
        return "survived", dt
    if rc in (1, 2):  # tests failed, or collection/import broke
        return "killed", dt
    return "error", dt


class Worker:
    """One copy of the repository; runs one mutant at a time."""

    def __init__(self, module: str, tests: list[str]):
        self.dir = Path(tempfile.mkdtemp(prefix="mutation-"))
        make_copy(self.dir)
        self.module, self.tests = module, tests
        self.original = (self.dir / module).read_text()

    def run(self, source: str | None, timeout: float) -> tuple[str, float]:
        target = self.dir / self.module
        target.write_text(self.original if source is None else source)
        _drop_bytecode(self.dir, self.module)
        try:
            return run_tests(self.dir, self.tests, timeout)
        finally:
            target.write_text(self.original)
            _drop_bytecode(self.dir, self.module)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module", help="the module to mutate, e.g. smp/core/dispatch.py")
    ap.add_argument("tests", nargs="*", help="test files or directories (default: per module)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per mutant")
    ap.add_argument("--list", action="store_true", help="only list the mutants")
    ap.add_argument("--lines", default=None, help="only mutants on lines A-B")
    ap.add_argument("--only", default=None, help="only the mutants of these indexes (1,5,9)")
    ap.add_argument(
        "--toml", action="store_true", help="print survivors as equivalent-file entries to edit"
    )
    ap.add_argument("--equivalent", default=str(EQUIVALENT_FILE), help="equivalent-mutant file")
    args = ap.parse_args(argv)

    module = args.module.removeprefix("./")
    path = ROOT / module
    if not path.is_file():
        print(f"no such module: {module}", file=sys.stderr)
        return 2
    mutants = find_mutants(path)
    stale = mark_equivalents(mutants, module, load_equivalents(Path(args.equivalent)))
    if args.lines:
        lo, _, hi = args.lines.partition("-")
        mutants = [m for m in mutants if int(lo) <= m.line <= int(hi or lo)]
    if args.only:
        wanted = {int(i) for i in args.only.split(",") if i.strip()}
        mutants = [m for m in mutants if m.index in wanted]

    if args.list:
        for m in mutants:
            tag = f"  [equivalent: {m.equivalent}]" if m.equivalent is not None else ""
            print(
                f"#{m.index} {m.where(module)} [{m.scope} #{m.nth}] {m.operator}: "
                f"{m.original!r} -> {m.mutated!r}{tag}"
            )
        print(
            f"{len(mutants)} mutants, {sum(m.equivalent is not None for m in mutants)} equivalent"
        )
        for e in stale:
            print(f"stale equivalent entry (matches no mutant): {e}")
        return 0

    tests = expand_tests(args.tests or DEFAULT_TESTS.get(module, ["tests"]), module)
    todo = [m for m in mutants if m.equivalent is None]
    print(f"{module}: {len(mutants)} mutants, {len(mutants) - len(todo)} set aside as equivalent")
    print(f"tests: {' '.join(tests)}")
    jobs = max(1, args.jobs)
    # a terminated run still removes its copies (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    workers = [Worker(module, tests) for _ in range(min(jobs, max(1, len(todo))))]
    try:
        verdict, base = workers[0].run(None, args.timeout or 1800)
        if verdict != "survived":
            print(f"the unmutated module does not pass its tests ({verdict}); nothing run")
            return 0
        timeout = args.timeout or max(30.0, 4 * base + 15)
        print(f"baseline {base:.1f}s, timeout {timeout:.0f}s per mutant, {jobs} job(s)")
        free = list(workers)
        results: dict[int, tuple[str, float]] = {}

        def one(m: Mutant):
            w = free.pop()
            try:
                return m, w.run(m.source, timeout)
            finally:
                free.append(w)

        with ThreadPoolExecutor(max_workers=len(workers)) as pool:
            for m, (verdict, dt) in pool.map(one, todo):
                results[m.index] = (verdict, dt)
                print(
                    f"  #{m.index} {m.where(module)} {m.operator}: {verdict} ({dt:.1f}s)",
                    flush=True,
                )
    finally:
        for w in workers:
            w.close()

    killed = [m for m in todo if results[m.index][0] in ("killed", "timeout")]
    survived = [m for m in todo if results[m.index][0] == "survived"]
    errors = [m for m in todo if results[m.index][0] == "error"]
    n = len(killed) + len(survived)
    score = 100.0 * len(killed) / n if n else 100.0
    print()
    timeouts = [m for m in killed if results[m.index][0] == "timeout"]
    print(
        f"{module}: killed {len(killed)} / {n} non-equivalent mutants ({score:.1f} %), "
        f"{len(mutants) - len(todo)} equivalent set aside"
        + (f", {len(timeouts)} of the killed by timeout" if timeouts else "")
        + (f", {len(errors)} errored (not counted)" if errors else "")
    )
    for m in timeouts:
        print(f"TIMEOUT {m.where(module)} {m.operator}: {m.original!r} -> {m.mutated!r}")
    for m in survived:
        print(f"SURVIVED {m.where(module)} {m.operator}: {m.original!r} -> {m.mutated!r}")
    if args.toml:
        for m in survived:
            print(toml_entry(module, m))
    for m in errors:
        print(f"ERROR {m.where(module)} {m.operator}: {m.original!r} -> {m.mutated!r}")
    for e in stale:
        print(f"stale equivalent entry (matches no mutant): {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
