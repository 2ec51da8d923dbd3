"""The explored tree, as Graphviz DOT text (no Graphviz needed to write it).

Runs in the explorer's process.  ``Trie`` keeps every execution an
exploration ran as a path of steps from the initial state: a node per
distinct schedule prefix, an edge per step (its thread, and the event in
words as the tooltip), a leaf per execution saying how it ended (the outcome
it reached, ``blocked`` by the sleep set, or ``cut`` by ``max_events``).
Executions share their common prefix, so the tree is what DPOR walked (or
what a sample of random schedules covered).  ``paths()`` and ``add`` move a
trie between processes (``--jobs``) as plain data; ``to_dot`` numbers the
outcomes as the report does.
"""

from __future__ import annotations

__all__ = ["Trie"]


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class Trie:
    """Schedule prefixes as a tree; node 0 is the initial state."""

    def __init__(self) -> None:
        self.children: list[dict] = [{}]  # node -> {thread: child node}
        self.labels: list[str] = [""]  # node -> the event that led to it
        self.leaves: dict[int, list] = {}  # node -> [how each execution ending here ended]

    def __len__(self) -> int:
        return len(self.children)

    def add(self, steps, leaf, label_of=None) -> int:
        """Add one execution: ``steps`` its threads (or ``(thread, label)``
        pairs), ``leaf`` how it ended (an ``Outcome``, ``"blocked"``,
        ``"cut"``); ``label_of(i)`` gives step ``i``'s event in words, asked
        only for steps not in the tree yet.  Returns the leaf's node."""
        node = 0
        for i, s in enumerate(steps):
            t, label = (s, None) if isinstance(s, str) else s
            nxt = self.children[node].get(t)
            if nxt is None:
                nxt = len(self.children)
                self.children.append({})
                if label is None and label_of is not None:
                    label = label_of(i)
                self.labels.append(label or "")
                self.children[node][t] = nxt
            node = nxt
        self.leaves.setdefault(node, []).append(leaf)
        return node

    def paths(self) -> list:
        """Every execution as ``([(thread, label), ...], leaf)``: what ``add``
        takes (plain data, to send from a worker process)."""
        out = []
        stack = [(0, [])]
        while stack:
            node, path = stack.pop()
            for leaf in self.leaves.get(node, ()):
                out.append((list(path), leaf))
            for t, c in reversed(list(self.children[node].items())):
                stack.append((c, path + [(t, self.labels[c])]))
        return out

    def merge(self, other: Trie) -> None:
        for steps, leaf in other.paths():
            self.add(steps, leaf)

    def to_dot(self, outcome_number=None, title: str = "explore", search: str = "") -> str:
        """The tree as DOT.  ``outcome_number(leaf)`` names a leaf's outcome
        (``Outcome 3``); leaves that are not outcomes say how they ended.
        ``search``: how the search ended, in words (complete, or what cut
        it), kept as the graph's ``comment``."""
        lines = [
            f"digraph {_quote(title)} {{",
            *([f"  comment={_quote(search)};"] if search else []),
            "  rankdir=TB;",
            '  node [shape=point, width=0.08, label=""];',
            "  edge [fontsize=9];",
            '  n0 [shape=circle, width=0.2, label="", tooltip="initial state"];',
        ]
        leaf_ids = 0
        for node in range(len(self.children)):
            for t, c in self.children[node].items():
                lines.append(
                    f"  n{node} -> n{c} [label={_quote(t)}, tooltip={_quote(self.labels[c])}];"
                )
            for leaf in self.leaves.get(node, ()):
                leaf_ids += 1
                if isinstance(leaf, str):
                    text, style = leaf, "dashed"
                else:
                    n = outcome_number(leaf) if outcome_number else None
                    text = f"outcome {n}" if n is not None else "outcome"
                    style = "filled" if getattr(leaf, "violations", ()) else "solid"
                lines.append(
                    f"  l{leaf_ids} [shape=box, style={style}, width=0.5, label={_quote(text)}];"
                )
                lines.append(f"  n{node} -> l{leaf_ids} [style=dotted, arrowhead=none];")
        lines.append("}")
        return "\n".join(lines) + "\n"
