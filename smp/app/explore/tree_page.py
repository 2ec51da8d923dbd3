"""``smp-emu report TREE.dot``: the explored tree that ``smp-emu explore
--graph`` writes (``smp.sim.graph.Trie.to_dot``), read back and drawn as a
self-contained HTML page.

Runs in the user's process.  The file is a stranger's: it is read whole
once (at most ``MAX_TREE_BYTES``), each line must be one that ``to_dot``
writes (the header, how the search ended as the graph's ``comment``, an
edge from a node already in the tree to a new one, a leaf and its edge,
the closing brace), and anything else is refused in
one line naming the file and the line (``ResultFileError``).

The drawing is a dendrogram: one row per execution in the order the search
ran them, the steps from left to right.  A run of steps with no branch is
one line, so what is drawn is where the search branched, each branch's
first step in its tooltip; each execution ends in how it ended (its
outcome, numbered as the report numbers them, with a broken invariant in
red, or ``blocked``, or ``cut``).  At most ``MAX_ROWS`` executions are
drawn, the first ones, and the page says how many there were.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from html import escape

from smp.app.result_file import ResultFileError, read_text

__all__ = ["MAX_ROWS", "MAX_TREE_BYTES", "ExploredTree", "is_dot", "load_tree", "tree_page"]

#: a tree file larger than this is refused (about 60 times the tree of
#: ``smp-emu explore churn``'s 500 executions; read back, a few hundred MB)
MAX_TREE_BYTES = 64 * 1024 * 1024
#: executions drawn at most (the first ones; the counts cover them all)
MAX_ROWS = 2000

_Q = r'"((?:[^"\\\n]|\\.)*)"'  # a quoted string as to_dot writes it
_HEAD = re.compile(r"digraph " + _Q + r" \{")
_FIXED = {
    "rankdir=TB;",
    'node [shape=point, width=0.08, label=""];',
    "edge [fontsize=9];",
    'n0 [shape=circle, width=0.2, label="", tooltip="initial state"];',
}
_SEARCH = re.compile(r"comment=" + _Q + ";")
_EDGE = re.compile(r"n(\d{1,9}) -> n(\d{1,9}) \[label=" + _Q + ", tooltip=" + _Q + r"\];")
_LEAF = re.compile(
    r"l(\d{1,9}) \[shape=box, style=(solid|filled|dashed), width=0\.5, label=" + _Q + r"\];"
)
_LEAF_EDGE = re.compile(r"n(\d{1,9}) -> l(\d{1,9}) \[style=dotted, arrowhead=none\];")
_ESC = re.compile(r"\\(.)")


def _unquote(s: str) -> str:
    return _ESC.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), s)


@dataclass
class ExploredTree:
    """The tree read back: node 0 the initial state; per node its children
    in the order the search met them, ``(thread, event, child)``, and the
    leaves that end there, ``(text, style)``."""

    title: str
    kids: dict[int, list[tuple[str, str, int]]] = field(default_factory=lambda: {0: []})
    #: how the search ended, as the file says it ("" when it does not)
    search: str = ""
    leaves: dict[int, list[tuple[str, str]]] = field(default_factory=dict)

    def executions(self) -> int:
        return sum(len(v) for v in self.leaves.values())


def is_dot(text: str) -> bool:
    """Whether a file's text begins as a DOT graph (after blanks), not JSON."""
    return text[:256].lstrip().startswith("digraph")


def load_tree(path: str, text: str | None = None) -> ExploredTree:
    """The explored tree of ``path`` (see the module's text), or a
    ``ResultFileError`` in one line.  ``text``: the file's text, read
    already."""
    if text is not None and len(text) > MAX_TREE_BYTES:
        raise ResultFileError(f"{path}: larger than {MAX_TREE_BYTES:,} bytes: not an explored tree")
    lines = _read_lines(path, text)

    def bad(n: int, what: str) -> ResultFileError:
        return ResultFileError(f"{path}:{n}: {what} (not a tree smp-emu explore --graph wrote)")

    if not lines or not (m := _HEAD.fullmatch(lines[0].strip())):
        raise bad(1, "no 'digraph \"...\" {' header")
    tree = ExploredTree(_unquote(m.group(1)))
    defined: dict[int, tuple[str, str]] = {}  # leaf id -> (text, style), not yet placed
    for n, raw in enumerate(lines[1:], start=2):
        line = raw.strip()
        if line == "}":
            if n != len(lines):
                raise bad(n + 1, "text after the closing brace")
            if defined:
                raise bad(n, f"leaf l{min(defined)} under no node")
            return tree
        what = _take_line(tree, defined, line)
        if what is not None:
            raise bad(n, what)
    raise bad(len(lines), "no closing brace")


def _read_lines(path: str, text: str | None = None) -> list[str]:
    if text is None:
        text = read_text(path, MAX_TREE_BYTES, "an explored tree")
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _take_line(tree: ExploredTree, defined: dict, line: str) -> str | None:
    """Add one line of the body to ``tree``; what is wrong with it, if anything."""
    if line in _FIXED:
        return None
    if m := _SEARCH.fullmatch(line):
        if tree.search or len(tree.kids) > 1:
            return "a second comment, or one after the tree's edges"
        tree.search = _unquote(m.group(1))
        return None
    if m := _EDGE.fullmatch(line):
        a, b = int(m.group(1)), int(m.group(2))
        if a not in tree.kids:
            return f"an edge from n{a}, which no earlier edge reaches"
        if b in tree.kids:
            return f"a second edge into n{b}"
        tree.kids[a].append((_unquote(m.group(3)), _unquote(m.group(4)), b))
        tree.kids[b] = []
        return None
    if m := _LEAF.fullmatch(line):
        k = int(m.group(1))
        if k in defined:
            return f"leaf l{k} defined twice"
        defined[k] = (_unquote(m.group(3)), m.group(2))
        return None
    if m := _LEAF_EDGE.fullmatch(line):
        a, k = int(m.group(1)), int(m.group(2))
        if a not in tree.kids:
            return f"a leaf under n{a}, which no earlier edge reaches"
        if k not in defined:
            return f"an edge to leaf l{k}, not defined before it"
        tree.leaves.setdefault(a, []).append(defined.pop(k))
        return None
    return f"an unexpected line: {line[:60]!r}"


_COLOURS = {"solid": "#1a5fb4", "filled": "#b42318", "dashed": "#777"}


def tree_page(tree: ExploredTree) -> tuple[str, str]:
    """(title, body) of the page that draws ``tree`` (see the module's text)."""
    ends = Counter(text for v in tree.leaves.values() for text, _ in v)
    broken = {text for v in tree.leaves.values() for text, style in v if style == "filled"}
    total = tree.executions()
    rows, segs, marks, depth_max = _layout(tree)
    dx = max(2.0, min(12.0, 900.0 / max(1, depth_max)))
    row_h, pad, label_w = 14, 12, 110
    width = int(pad * 2 + dx * depth_max + label_w)
    height = int(pad * 2 + row_h * max(1, rows) + 24)

    def xy(depth: int, row: float) -> tuple[float, float]:
        return pad + dx * depth, pad + row_h * row + row_h / 2

    branches, ends_drawn = [], []
    for d0, r0, d1, r1, tip in segs:
        x0, y0 = xy(d0, r0)
        x1, y1 = xy(d1, r1)
        branches.append(
            f"<path d='M{x0:.1f},{y0:.1f} V{y1:.1f} H{x1:.1f}' fill='none' stroke='#888'>"
            f"<title>{escape(tip)}</title></path>"
        )
    for d, r, text, style in marks:
        x, y = xy(d, r)
        colour = _COLOURS[style]
        ends_drawn.append(
            f"<g class='leaf'><circle cx='{x:.1f}' cy='{y:.1f}' r='3' fill='{colour}'/>"
            f"<text x='{x + 6:.1f}' y='{y + 4:.1f}' font-size='11' fill='{colour}'>"
            f"{escape(text)}</text></g>"
        )
    x_end = pad + dx * depth_max
    axis = (
        f"<text id='tree-xlabel' x='{pad}' y='{height - 6}' font-size='11' fill='#444'>"
        f"steps from the initial state (0 to {depth_max}) &#8594;</text>"
        f"<text id='tree-ylabel' x='{x_end:.0f}' y='{height - 6}' font-size='11' fill='#444' "
        f"text-anchor='end'>one row per execution</text>"
    )
    drawn = (
        f"all {total:,} executions are drawn"
        if rows >= total
        else f"the first {rows:,} of {total:,} executions are drawn"
    )
    outcomes = sorted((t for t in ends if t.startswith("outcome")), key=_outcome_order)
    table = "".join(
        f"<tr><td style='color:{_COLOURS['filled' if t in broken else 'solid']}'>{escape(t)}"
        f"{' (breaks an invariant)' if t in broken else ''}</td><td>{ends[t]:,}</td></tr>"
        for t in outcomes + [t for t in ("blocked", "cut") if t in ends]
    )
    name = tree.title.removeprefix("explore ")
    title = f"smp-emu explore: the explored tree of {name}"
    body = (
        f"<p>{total:,} executions over {len(tree.kids):,} states; "
        f"{len(outcomes)} distinct outcomes, {ends.get('blocked', 0):,} sleep-set blocked, "
        f"{ends.get('cut', 0):,} cut; the longest is {depth_max:,} steps; {drawn}. "
        + (
            f"The search: {escape(tree.search)}. "
            if tree.search
            else "The file does not say whether the search was complete (an older smp-emu "
            "wrote it). "
        )
        + "A line is a run of steps with no branch; its tooltip names its first step. "
        "Blue: an outcome; red: an outcome that breaks an invariant; grey: an execution "
        "that ended blocked or cut.</p>"
        f"<figure class='plot' id='explore-tree'><figcaption>the executions of "
        f"{escape(name)}, step by step</figcaption><svg class='chart' xmlns='http://www.w3.org/2000/svg' "
        f"width='{width}' height='{height}' viewBox='0 0 {width} {height}' role='img'>"
        f"<g id='tree-series-branches'>{''.join(branches)}</g>"
        f"<g id='tree-series-leaves'>{''.join(ends_drawn)}</g>"
        f"{axis}</svg></figure>"
        "<h2>How the executions ended</h2><table><tr><th>end</th><th>executions</th></tr>"
        f"{table}</table>"
    )
    return title, body


def _outcome_order(text: str) -> tuple[int, str]:
    tail = text.removeprefix("outcome").strip()
    return (int(tail), text) if tail.isdigit() else (1 << 30, text)


def _layout(tree: ExploredTree):
    """Rows and the things to draw: ``(rows, segments, marks, depth_max)``;
    a segment ``(depth0, row0, depth1, row1, tooltip)`` goes from a branch
    point down to its child's row and on to the child's next branch point;
    a mark ``(depth, row, text, style)`` is one execution's end."""
    kids, leaves = tree.kids, tree.leaves
    # depth first, iteratively, in the order the search met the children:
    # the row span of each node whose subtree has a drawn execution
    depth = {0: 0}
    span: dict[int, list[int]] = {}
    marks: list[tuple[int, int, str, str]] = []
    order: list[int] = []
    rows = 0
    stack = [0]
    while stack:
        node = stack.pop()
        order.append(node)
        for text, style in leaves.get(node, ()):
            if rows < MAX_ROWS:
                marks.append((depth[node], rows, text, style))
                span.setdefault(node, [rows, rows])[1] = rows
                rows += 1
        for _thread, _event, child in reversed(kids.get(node, ())):
            depth[child] = depth[node] + 1
            stack.append(child)
    # a node's span covers its children's (children come after their parent)
    parent = {c: a for a, v in kids.items() for _t, _e, c in v}
    for node in reversed(order):
        s = span.get(node)
        p = parent.get(node)
        if s is not None and p is not None:
            ps = span.setdefault(p, [s[0], s[1]])
            ps[0], ps[1] = min(ps[0], s[0]), max(ps[1], s[1])

    def mid(node: int) -> float:
        s = span[node]
        return (s[0] + s[1]) / 2

    segs = []
    for node in order:
        if node not in span or (node != 0 and len(kids.get(node, ())) == 1 and node not in leaves):
            continue  # not drawn, or inside a run of steps with no branch
        for thread, event, child in kids.get(node, ()):
            if child not in span:
                continue
            end, steps = child, 1
            while len(kids.get(end, ())) == 1 and end not in leaves:
                end = kids[end][0][2]
                steps += 1
            tip = f"{thread}: {event}" + (f" (and {steps - 1} more steps)" if steps > 1 else "")
            segs.append((depth[node], mid(node), depth[end], mid(end), tip))
    depth_max = max((depth[n] for n in span), default=0)
    return rows, segs, marks, depth_max
