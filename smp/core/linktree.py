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
the seed's own rules: the insertion's single and double rotations
(``insertion_rotation``), and a deletion that puts the in-order
predecessor in the place of a node with two children (``delsub``) and
rebalances with ``balance_left`` and ``balance_right``, rotating once when
the taller child is balanced (so the height may stay the same).

Membership is a set beside the tree: ``x in links`` costs a hash, as it
did when the links were a plain set."""

from __future__ import annotations

from collections.abc import Iterator

from smp.core.terms import term_order_key

__all__ = ["LinkTree"]


class _Node:
    __slots__ = ("item", "key", "left", "right", "balance")

    def __init__(self, item: object, key: tuple[object, ...]) -> None:
        self.item = item
        self.key = key
        self.left: _Node | None = None
        self.right: _Node | None = None
        self.balance = 0  # height of the right subtree less that of the left


class LinkTree:
    """The linked pids and ports of one process (see the module's text).
    Iterating gives the items in the order ``erts_sweep_links`` visits
    them."""

    __slots__ = ("_root", "_members")

    def __init__(self) -> None:
        self._root: _Node | None = None
        self._members: set[object] = set()

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
        self._members.add(item)
        self._root, _grew = _insert(self._root, _Node(item, term_order_key(item)))

    def discard(self, item: object) -> None:
        """``erts_remove_link``: nothing when ``item`` is not linked."""
        if item not in self._members:
            return
        self._members.discard(item)
        self._root, _shrank = _delete(self._root, term_order_key(item))

    def sweep(self) -> list[object]:
        """The items in the order of ``erts_sweep_links``: post-order."""
        out: list[object] = []
        stack: list[tuple[_Node, bool]] = []
        node = self._root
        while True:
            while node is not None:
                stack.append((node, False))
                node = node.left
            if not stack:
                return out
            top, right_done = stack.pop()
            if right_done:
                out.append(top.item)
            else:
                stack.append((top, True))
                node = top.right

    def shape(self) -> object:
        """The tree as nested ``(item, balance, left, right)`` tuples (None
        for an empty subtree): for tests and for reading."""

        def walk(n: _Node | None) -> object:
            if n is None:
                return None
            return (n.item, n.balance, walk(n.left), walk(n.right))

        return walk(self._root)


def _insert(node: _Node | None, new: _Node) -> tuple[_Node, bool]:
    """Insert ``new`` below ``node``: the subtree's new root and whether it
    grew (``erts_add_link`` then ``insertion_rotation``)."""
    if node is None:
        return new, True
    if new.key < node.key:
        node.left, grew = _insert(node.left, new)
        if not grew:
            return node, False
        if node.balance == 1:
            node.balance = 0
            return node, False
        if node.balance == 0:
            node.balance = -1
            return node, True
        p1 = node.left
        assert p1 is not None
        if p1.balance == -1:  # single LL rotation
            node.left = p1.right
            p1.right = node
            node.balance = 0
            top = p1
        else:  # double rotation
            p2 = p1.right
            assert p2 is not None
            p1.right = p2.left
            p2.left = p1
            node.left = p2.right
            p2.right = node
            node.balance = 1 if p2.balance == -1 else 0
            p1.balance = -1 if p2.balance == 1 else 0
            top = p2
        top.balance = 0
        return top, False
    node.right, grew = _insert(node.right, new)
    if not grew:
        return node, False
    if node.balance == -1:
        node.balance = 0
        return node, False
    if node.balance == 0:
        node.balance = 1
        return node, True
    p1 = node.right
    assert p1 is not None
    if p1.balance == 1:  # single RR rotation
        node.right = p1.left
        p1.left = node
        node.balance = 0
        top = p1
    else:  # double rotation
        p2 = p1.left
        assert p2 is not None
        p1.left = p2.right
        p2.right = p1
        node.right = p2.left
        p2.left = node
        node.balance = -1 if p2.balance == 1 else 0
        p1.balance = 1 if p2.balance == -1 else 0
        top = p2
    top.balance = 0
    return top, False


def _left_shrank(p: _Node) -> tuple[_Node, bool]:
    """``balance_left``: ``p``'s left subtree lost a level; the subtree's
    root and whether the whole subtree lost one."""
    if p.balance == -1:
        p.balance = 0
        return p, True
    if p.balance == 0:
        p.balance = 1
        return p, False
    p1 = p.right
    assert p1 is not None
    b1 = p1.balance
    if b1 >= 0:  # single RR rotation
        p.right = p1.left
        p1.left = p
        if b1 == 0:
            p.balance, p1.balance = 1, -1
            return p1, False
        p.balance = p1.balance = 0
        return p1, True
    p2 = p1.left  # double RL rotation
    assert p2 is not None
    b2 = p2.balance
    p1.left = p2.right
    p2.right = p1
    p.right = p2.left
    p2.left = p
    p.balance = -1 if b2 == 1 else 0
    p1.balance = 1 if b2 == -1 else 0
    p2.balance = 0
    return p2, True


def _right_shrank(p: _Node) -> tuple[_Node, bool]:
    """``balance_right``: the mirror of :func:`_left_shrank`."""
    if p.balance == 1:
        p.balance = 0
        return p, True
    if p.balance == 0:
        p.balance = -1
        return p, False
    p1 = p.left
    assert p1 is not None
    b1 = p1.balance
    if b1 <= 0:  # single LL rotation
        p.left = p1.right
        p1.right = p
        if b1 == 0:
            p.balance, p1.balance = -1, 1
            return p1, False
        p.balance = p1.balance = 0
        return p1, True
    p2 = p1.right  # double LR rotation
    assert p2 is not None
    b2 = p2.balance
    p1.right = p2.left
    p2.left = p1
    p.left = p2.right
    p2.right = p
    p.balance = 1 if b2 == -1 else 0
    p1.balance = -1 if b2 == 1 else 0
    p2.balance = 0
    return p2, True


def _take_max(node: _Node) -> tuple[_Node | None, bool, _Node]:
    """``delsub``'s walk: cut the rightmost node out of ``node``'s subtree
    (its left child takes its place); the subtree's new root, whether it
    lost a level, and the node cut out."""
    if node.right is None:
        return node.left, True, node
    node.right, shrank, top = _take_max(node.right)
    if shrank:
        node, shrank = _right_shrank(node)
    return node, shrank, top


def _delete(node: _Node | None, key: tuple[object, ...]) -> tuple[_Node | None, bool]:
    """Remove the node of ``key`` below ``node`` (``erts_remove_link``): the
    subtree's new root and whether it lost a level."""
    if node is None:
        return None, False
    if key < node.key:
        node.left, shrank = _delete(node.left, key)
        return _left_shrank(node) if shrank else (node, False)
    if key > node.key:
        node.right, shrank = _delete(node.right, key)
        return _right_shrank(node) if shrank else (node, False)
    if node.right is None:
        return node.left, True
    if node.left is None:
        return node.right, True
    # two children: the in-order predecessor takes the node's place, with
    # its children and its balance (delsub), and the left side rebalances
    rest, shrank, pred = _take_max(node.left)
    pred.left, pred.right, pred.balance = rest, node.right, node.balance
    return _left_shrank(pred) if shrank else (pred, False)
