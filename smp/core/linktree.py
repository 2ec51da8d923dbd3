"""A process's links as 17.x keeps them (``erl_monitors.c``): an AVL tree
ordered by Erlang's term order of the linked pid or port, changed by
``erts_add_link`` and ``erts_remove_link`` and walked by
``erts_sweep_links`` when the process exits.

Only the walk is observable: the sweep visits the tree in post-order (left
subtree, right subtree, node), so the order in which an exiting process
signals its links, and the order of the ``getting_unlinked`` trace
messages that follow, is that of the tree's shape, which the whole history
of the process's links decides (the same links added in another order, or
after another one was removed, give another order).  The shape is kept by
17.x's own rules: the insertion's single and double rotations
(``insertion_rotation``), and a deletion that puts the in-order
predecessor in the place of a node with two children (``delsub``) and
rebalances with ``balance_left`` and ``balance_right``, rotating once when
the taller child is balanced (so the height may stay the same).

Membership is a map beside the tree, from each item to its key: ``x in
links`` costs a hash, as it did when the links were a plain set."""

from __future__ import annotations

from collections.abc import Iterator

from smp.core.terms import term_order_key

__all__ = ["LinkTree"]


class _Node:
    __slots__ = ("item", "key", "kids", "balance")

    def __init__(self, item: object, key: tuple[object, ...]) -> None:
        self.item = item
        self.key = key
        self.kids: list[_Node | None] = [None, None]  # left, right
        self.balance = 0  # height of the right subtree less that of the left


# A side: 0 the left, 1 the right; its sign is the balance of a node whose
# subtree on that side is the taller.  17.x writes each rebalancing twice,
# once a side; here one function takes the side.
_SIGN = (-1, 1)


class LinkTree:
    """The linked pids and ports of one process (see the module's text).
    Iterating gives the items in the order ``erts_sweep_links`` visits
    them."""

    __slots__ = ("_root", "_members")

    def __init__(self) -> None:
        self._root: _Node | None = None
        self._members: dict[object, tuple[object, ...]] = {}  # item -> its key

    def __contains__(self, item: object) -> bool:
        return item in self._members

    def __len__(self) -> int:
        return len(self._members)

    def __bool__(self) -> bool:
        return bool(self._members)

    def __iter__(self) -> Iterator[object]:
        return iter(self.sweep())

    def __repr__(self) -> str:
        return f"LinkTree({self.sweep()!r})"

    def add(self, item: object) -> None:
        """``erts_add_link``: nothing when ``item`` is already linked."""
        if item in self._members:
            return
        key = self._members[item] = term_order_key(item)
        self._root, _grew = _insert(self._root, _Node(item, key))

    def discard(self, item: object) -> None:
        """``erts_remove_link``: nothing when ``item`` is not linked."""
        key = self._members.pop(item, None)
        if key is not None:
            self._root, _shrank = _delete(self._root, key)

    def sweep(self) -> list[object]:
        """The items in the order of ``erts_sweep_links``: post-order."""
        out: list[object] = []
        stack: list[tuple[_Node, bool]] = []
        node = self._root
        while True:
            while node is not None:
                stack.append((node, False))
                node = node.kids[0]
            if not stack:
                return out
            top, right_done = stack.pop()
            if right_done:
                out.append(top.item)
            else:
                stack.append((top, True))
                node = top.kids[1]

    def shape(self) -> object:
        """The tree as nested ``(item, balance, left, right)`` tuples (None
        for an empty subtree): for tests and for reading."""

        def walk(n: _Node | None) -> object:
            if n is None:
                return None
            return (n.item, n.balance, walk(n.kids[0]), walk(n.kids[1]))

        return walk(self._root)


def _insert(node: _Node | None, new: _Node) -> tuple[_Node, bool]:
    """Insert ``new`` below ``node``: the subtree's new root and whether it
    grew (``erts_add_link`` then ``insertion_rotation``)."""
    if node is None:
        return new, True
    d = 0 if new.key < node.key else 1
    node.kids[d], grew = _insert(node.kids[d], new)
    return _grew(node, d) if grew else (node, False)


def _grew(p: _Node, d: int) -> tuple[_Node, bool]:
    """``insertion_rotation`` at ``p``, whose side ``d`` grew a level: the
    subtree's root and whether the whole subtree grew."""
    sign, o = _SIGN[d], 1 - d
    if p.balance == -sign:
        p.balance = 0
        return p, False
    if p.balance == 0:
        p.balance = sign
        return p, True
    p1 = p.kids[d]
    assert p1 is not None
    if p1.balance == sign:  # single rotation
        p.kids[d] = p1.kids[o]
        p1.kids[o] = p
        p.balance = 0
        top = p1
    else:  # double rotation
        p2 = p1.kids[o]
        assert p2 is not None
        p1.kids[o] = p2.kids[d]
        p2.kids[d] = p1
        p.kids[d] = p2.kids[o]
        p2.kids[o] = p
        p.balance = -sign if p2.balance == sign else 0
        p1.balance = sign if p2.balance == -sign else 0
        top = p2
    top.balance = 0
    return top, False


def _shrank(p: _Node, d: int) -> tuple[_Node, bool]:
    """``balance_left`` (``d`` 0) or ``balance_right`` (``d`` 1): ``p``'s
    side ``d`` lost a level; the subtree's root and whether the whole
    subtree lost one."""
    sign, o = _SIGN[d], 1 - d
    if p.balance == sign:
        p.balance = 0
        return p, True
    if p.balance == 0:
        p.balance = -sign
        return p, False
    p1 = p.kids[o]
    assert p1 is not None
    b1 = p1.balance
    if b1 != sign:  # single rotation
        p.kids[o] = p1.kids[d]
        p1.kids[d] = p
        if b1 == 0:
            p.balance, p1.balance = -sign, sign
            return p1, False
        p.balance = p1.balance = 0
        return p1, True
    p2 = p1.kids[d]  # double rotation
    assert p2 is not None
    b2 = p2.balance
    p1.kids[d] = p2.kids[o]
    p2.kids[o] = p1
    p.kids[o] = p2.kids[d]
    p2.kids[d] = p
    p.balance = sign if b2 == -sign else 0
    p1.balance = -sign if b2 == sign else 0
    p2.balance = 0
    return p2, True


def _take_max(node: _Node) -> tuple[_Node | None, bool, _Node]:
    """``delsub``'s walk: cut the rightmost node out of ``node``'s subtree
    (its left child takes its place); the subtree's new root, whether it
    lost a level, and the node cut out."""
    right = node.kids[1]
    if right is None:
        return node.kids[0], True, node
    node.kids[1], shrank, top = _take_max(right)
    if shrank:
        node, shrank = _shrank(node, 1)
    return node, shrank, top


def _delete(node: _Node | None, key: tuple[object, ...]) -> tuple[_Node | None, bool]:
    """Remove the node of ``key`` below ``node`` (``erts_remove_link``): the
    subtree's new root and whether it lost a level."""
    if node is None:
        return None, False
    if key != node.key:
        d = 0 if key < node.key else 1
        node.kids[d], shrank = _delete(node.kids[d], key)
        return _shrank(node, d) if shrank else (node, False)
    left, right = node.kids
    if right is None:
        return left, True
    if left is None:
        return right, True
    # two children: the in-order predecessor takes the node's place, with
    # its children and its balance (delsub), and the left side rebalances
    rest, shrank, pred = _take_max(left)
    pred.kids[0], pred.kids[1], pred.balance = rest, right, node.balance
    return _shrank(pred, 0) if shrank else (pred, False)
