"""A process's link tree (``smp.core.linktree``): the shapes 17.x's
``erl_monitors.c`` gives, rotation by rotation, and the sweep's post-order;
then, over random histories of links and unlinks, the tree stays an AVL
tree ordered by Erlang's term order and holds exactly what a set would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from smp.core.linktree import LinkTree
from smp.core.terms import Pid, Port, term_order_key


def tree(*ops: int) -> LinkTree:
    """A tree after ``ops``: ``k`` links ``k``, ``-k`` unlinks it."""
    t = LinkTree()
    for k in ops:
        if k < 0:
            t.discard(-k)
        else:
            t.add(k)
    return t


BALANCED_123 = (2, 0, (1, 0, None, None), (3, 0, None, None))


def test_each_insertion_rotation_gives_the_balanced_three():
    # LL, RR, LR and RL: one shape, whose sweep is left, right, root
    for ops in ((3, 2, 1), (1, 2, 3), (3, 1, 2), (1, 3, 2)):
        t = tree(*ops)
        assert t.shape() == BALANCED_123, ops
        assert t.sweep() == [1, 3, 2]


def test_no_rotation_while_the_tree_stays_balanced():
    t = tree(2, 1)
    assert t.shape() == (2, -1, (1, 0, None, None), None)
    assert t.sweep() == [1, 2]
    assert tree(1, 2).sweep() == [2, 1]  # the same links, the other order


def test_a_deletion_that_rotates_once_without_losing_height():
    # 2(1, 4(3,5)): unlinking 1 rotates at 2 around a balanced 4 (b1 == 0)
    t = tree(2, 1, 4, 3, 5, -1)
    assert t.shape() == (4, -1, (2, 1, None, (3, 0, None, None)), (5, 0, None, None))
    assert t.sweep() == [3, 2, 5, 4]


def test_a_deletion_that_rotates_twice():
    # 2(1, 4(3,-)): unlinking 1 makes the double rotation, 3 on top
    t = tree(2, 1, 4, 3, -1)
    assert t.shape() == (3, 0, (2, 0, None, None), (4, 0, None, None))
    assert t.sweep() == [2, 4, 3]


def test_a_node_with_two_children_gives_its_place_to_its_predecessor():
    t = tree(1, 2, 3, 4, 5, 6, 7, -4)
    assert t.sweep() == [1, 2, 5, 7, 6, 3]
    assert t.shape()[0] == 3


def test_ports_sort_before_pids_and_pids_by_serial_then_number():
    a, b, c = Pid(200, 0), Pid(100, 1), Port(5)
    t = LinkTree()
    for x in (a, b, c):
        t.add(x)
    # term order c < a < b: the three balance to a(c, b)
    assert t.shape() == (a, 0, (c, 0, None, None), (b, 0, None, None))
    assert list(t) == [c, b, a]


def test_adding_twice_and_removing_what_is_not_there_change_nothing():
    t = tree(1, 2, 3)
    before = t.shape()
    t.add(2)
    t.discard(9)
    assert t.shape() == before and len(t) == 3 and 2 in t and 9 not in t


def _check(node, lo=None, hi=None) -> int:
    """The subtree's height, asserting the AVL and order invariants."""
    if node is None:
        return 0
    item, balance, left, right = node
    k = term_order_key(item)
    assert lo is None or lo < k
    assert hi is None or k < hi
    hl, hr = _check(left, lo, k), _check(right, k, hi)
    assert balance == hr - hl and abs(balance) <= 1
    return 1 + max(hl, hr)


def _post(node) -> list:
    return [] if node is None else [*_post(node[2]), *_post(node[3]), node[0]]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 40)), max_size=120))
def test_any_history_keeps_an_avl_tree_that_holds_what_a_set_holds(ops):
    t, model = LinkTree(), set()
    for add, k in ops:
        if add:
            t.add(k)
            model.add(k)
        else:
            t.discard(k)
            model.discard(k)
        shape = t.shape()
        _check(shape)
        assert t.sweep() == _post(shape)
        assert set(t.sweep()) == model and len(t) == len(model)
        assert all(x in t for x in model)
