"""One optimal-DPOR search shared among processes, with the result the
search run alone gives: the same executions, in the same order, the same
outcomes, counts and first schedules, and none sleep-set blocked.

Runs in the explorer's process, beside its tree (``Explorer.run(share)``).
The tree is explored in its own order.  A branch whose siblings explored
so far had at least ``MIN_TASK`` executions each is a *task*: its subtree
is explored as a tree of its own (``smp.sim.dpor.Task``), and the races
found there whose reversal belongs before the branch come back as plans
(``Tree.above``), made in the whole tree, in order, when the task's turn
comes (``Tree.take_task``).  Any other branch the explorer runs itself,
with everything below it.

Which tasks come next is known: the branches still planned at each
position of the current path, deepest first.  Up to ``window`` of them
are handed to worker processes ahead of their turn.  When its turn comes,
a task handed out early is taken only if nothing it started from has
changed since: the wakeup tree below its branch (an earlier branch's
race can plan more in it) and the events explored before it at its
position (whose next events are its sleep set).  Otherwise it is run again
from what is there now, in this process.  A task handed out with more
executions left than there are at its turn is cut to its first ones
(``TaskResult.upto``: a search is a function of its bound).  A handed-out
task whose result is never taken costs time only.
"""

from __future__ import annotations

from typing import Any, Callable

from .dpor import Task, Tree, portable, shape

__all__ = ["Share", "MIN_TASK"]

#: the executions a branch's siblings must have had, on average, for it to
#: be a task: a task's start (a world for the replay, a worker's message)
#: costs a few executions
MIN_TASK = 16


def _size(b) -> float:
    """The mean leaves of the branches explored at a position so far (none
    explored: unknown, infinite)."""
    return b.grown / b.kids if b.kids else float("inf")


class _Handed:
    """A task handed out ahead of its turn, and what it started from."""

    __slots__ = ("shape", "done", "budget", "handle")

    def __init__(self, shape: tuple, done: dict, budget: int | None, handle: Any):
        self.shape, self.done, self.budget, self.handle = shape, done, budget, handle


class Share:
    """The tasks of one search: ``submit(args)`` hands one to a worker (a
    handle with ``ready()`` and ``get()``, which gives a ``TaskResult`` or
    None); ``args(task, budget, deadline)`` is what it takes.
    Nothing is handed out before ``start`` executions, nor, before
    ``small`` executions, while the search's estimate is ``small`` or less
    (a small search starts no worker)."""

    def __init__(
        self,
        submit: Callable[[tuple], Any],
        args: Callable[[Task, int | None, float | None], tuple],
        window: int = 2,
        start: int = 0,
        small: int = 0,
        min_task: int = MIN_TASK,
    ):
        self.submit, self.args = submit, args
        self.window, self.start, self.small, self.min_task = window, start, small, min_task
        self.handed: dict[tuple, _Handed] = {}
        #: the position whose branch this process explores with everything
        #: below it (a small one), or None
        self.inline_at: int | None = None
        #: tasks taken; those handed out whose result was not taken (what
        #: they started from changed: explored here instead)
        self.tasks = 0
        self.again = 0
        self._got = None

    def takes(self, ex) -> bool:
        """Whether the tree's next branch (the last position's choice, not
        run yet) is taken from a task handed out before: one that started
        from what is there now, whose result is then waited for.  Else this
        process explores the branch, with everything below it."""
        tree = ex.tree
        stack = tree.stack
        k = len(stack) - 1
        if k < 0:
            return False
        if self.inline_at is not None:
            if k > self.inline_at:
                return False  # (below a branch explored here)
            self.inline_at = None  # (that branch is done)
        h = self.handed.pop(_path(stack, k), None)
        if h is not None:
            b = stack[k]
            if h.shape == shape(b.sub) and h.done == b.done:
                got = h.handle.get()
                budget = None if ex.max_executions is None else ex.max_executions - ex.executions
                if got is not None and budget is not None and got.result.executions > budget:
                    # (handed out with more executions left than now: its first ones)
                    got = got.upto(budget)
                if got is not None:
                    self._got = got
                    self.tasks += 1
                    return True
            self.again += 1
        self.inline_at = k
        return False

    def result(self):
        """The result of the task ``takes`` took (``TaskResult``)."""
        got, self._got = self._got, None
        return got

    def hand_out(self, ex, deadline: float | None) -> None:
        """Hand out the next tasks, in the tree's order, while fewer than
        ``window`` run."""
        n = ex.executions
        if n < self.start or (n < self.small and ex.estimate <= self.small):
            return  # (a small search: no worker started for it)
        busy = sum(1 for h in self.handed.values() if not h.handle.ready())
        if busy >= self.window:
            return
        tree = ex.tree
        stack = tree.stack
        budget = None if ex.max_executions is None else ex.max_executions - ex.executions
        last = len(stack) - 1 if self.inline_at is None else self.inline_at
        for k in range(last, -1, -1):
            b = stack[k]
            if not b.wut or _size(b) < self.min_task:
                continue
            head = _path(stack, k - 1) if k else ()
            for n, node in enumerate(b.wut):
                key = (*head, node[0])
                if key in self.handed:
                    continue
                task = _task(tree, k, n)
                handle = self.submit(self.args(task, budget, deadline))
                self.handed[key] = _Handed(shape(node[2]), task.done[-1], budget, handle)
                busy += 1
                if busy >= self.window:
                    return


def _path(stack: list, k: int) -> tuple:
    return tuple(b.chosen for b in stack[: k + 1])


def _task(tree: Tree, k: int, n: int | None = None) -> Task:
    """The task of position ``k``'s current branch, or of the ``n``-th
    branch still planned there (with the current one and those planned
    before it explored first, as they will be)."""
    stack = tree.stack
    path = [b.chosen for b in stack[:k]]
    done = [b.done for b in stack[:k]]
    why = [b.why.get(b.chosen) for b in stack[:k]]
    b = stack[k]
    if n is None:
        path.append(b.chosen)
        done.append(dict(b.done))
        why.append(b.why.get(b.chosen))
        sub = b.sub
    else:
        d = dict(b.done)
        ev = b.event
        if ev is None:  # (the current branch not run yet: its step after the path)
            ev, _fresh = tree._event_after([x.event for x in stack[:k]], b.chosen)
        d[b.chosen] = ev
        for node in b.wut[:n]:
            d[node[0]] = portable([node])[0][1]
        node = b.wut[n]
        path.append(node[0])
        done.append(d)
        why.append(node[3])
        sub = node[2]
    return Task(tuple(path), done, why, portable(sub))
