"""The layers point one way, and nothing hides a cycle.

Reads every module of the project (``smp``, ``schedulers``, ``dispatcher``)
with ``ast``, imports at any depth of the code included, and checks:

* each import goes to the importer's layer or one below it
  (core <- wire <- ports <- schedulers, dispatcher <- emulator <- app);
* the import graph has no cycle;
* no function-level import of a project module (one would hide a cycle);
* the core imports no socket, process or supervision library.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("smp", "schedulers", "dispatcher")

#: (module prefix, layer): the longest prefix that matches names the layer.
LAYERS = (
    # which build runs (compiled or pure); every package imports it first
    ("smp.core", 0),
    ("smp.wire", 1),
    ("smp.wire.protocol", 1),  # the named control, peer and state frames: codec and frames below
    ("smp.ports", 2),
    ("schedulers", 3),
    ("dispatcher", 3),
    ("dispatcher.queue", 3),  # the queue's policy: no socket, no process (tests/dispatcher_queue)
    ("smp.emulator", 4),
    ("smp.backend", 4),
    ("smp.api", 4),  # the emulator's API by concern: BIFs, ports, the dispatcher, statistics
    ("smp.endpoints", 4),  # the controller's endpoint layout and security plan
    ("smp.link", 4),  # the controller's request/reply links to its peers
    ("smp.supervision", 4),  # the controller's start, liveness, losses and close
    ("smp.stepper", 4),  # a paused emulator stepped one simulated event at a time
    ("smp.sim", 4),  # the simulator: schedulers' and dispatcher's engine in one process
    ("smp.app", 5),
    ("smp.__main__", 5),
    ("smp", 5),  # the package's own __init__: the public names
)
FORBIDDEN_IN_CORE = {"zmq", "multiprocess", "multiprocessing", "psutil", "socket", "subprocess"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imports(name: str, path: Path, known) -> list[tuple[str, bool]]:
    """``(imported module, at module level)`` for each import in a file;
    ``from pkg import sub`` counts as an import of ``pkg.sub`` when that is a
    module."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                mod = ".".join(base + ([mod] if mod else []))
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.append((sub if sub in known else mod, id(node) in top))
    return out


def _layer(mod: str) -> int | None:
    for prefix, layer in LAYERS:
        if mod == prefix or mod.startswith(prefix + "."):
            return layer
    return None


def _graph():
    mods = _modules()
    return mods, {
        m: [(i, top) for i, top in _imports(m, p, mods) if i.split(".")[0] in PACKAGES]
        for m, p in mods.items()
    }


def test_every_project_module_has_a_layer():
    mods, _ = _graph()
    assert [m for m in mods if _layer(m) is None] == []


def test_imports_point_down_the_layers():
    _, graph = _graph()
    wrong = [
        f"{m} (layer {_layer(m)}) imports {i} (layer {_layer(i)})"
        for m, edges in graph.items()
        for i, _top in edges
        if _layer(i) > _layer(m)
        # the two layer-3 packages are peers: neither imports the other
        or (_layer(m) == _layer(i) == 3 and m.split(".")[0] != i.split(".")[0])
    ]
    assert wrong == []


def test_no_function_level_import_of_a_project_module():
    _, graph = _graph()
    hidden = [
        f"{m} imports {i} inside a function"
        for m, edges in graph.items()
        for i, top in edges
        if not top
    ]
    assert hidden == []


def test_the_import_graph_has_no_cycle():
    mods, graph = _graph()
    state: dict[str, int] = {}  # 1 on the path, 2 done
    cycles = []

    def visit(m, path):
        state[m] = 1
        for i, _top in graph.get(m, ()):
            if i not in mods or i == m:
                continue
            if state.get(i) == 1:
                cycles.append(" -> ".join(path[path.index(i) :] + [i]))
            elif i not in state:
                visit(i, path + [i])
        state[m] = 2

    for m in sorted(mods):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_the_core_imports_no_socket_or_process_library():
    mods = _modules()
    core = [m for m in mods if _layer(m) == 0]
    assert "smp.core.dispatch" in core and "smp.core.state" in core
    bad = [
        f"{m} imports {i}"
        for m in core
        for i, _top in _imports(m, mods[m], mods)
        if i.split(".")[0] in FORBIDDEN_IN_CORE
    ]
    assert bad == []
