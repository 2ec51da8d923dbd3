"""One optimal-DPOR search shared among processes, with the result the
search run alone gives: the same executions, in the same order, the same
outcomes, counts and first schedules, and none sleep-set blocked.

Runs in the explorer's process, beside its tree (``Explorer.run(share)``).
The tree is explored in its own order.  Its branches still planned at
each position of the current path are the search's next steps, deepest
first; up to ``window`` of them whose siblings had ``MIN_TASK``
executions or more each (the one under way counted with what it has so
far) are handed to worker processes ahead of their turn, each explored as
a tree of its own (``smp.sim.dpor.Task``).  The races found there whose
reversal belongs before the branch come back as plans (``Tree.above``),
made in the whole tree, in the order they were found, when the branch's
turn comes (``Tree.take_task``): where the tree run alone makes them, for
no branch explored before that turn can be changed by them.  This process
runs every other execution itself.

A branch handed out is taken at its turn only if nothing it started from
has changed: the wakeup tree below it (a race of an earlier branch can
plan more there) and the events explored before it at its position
(whose next events are its sleep set).  Otherwise this process explores
it, and what the worker did is lost.  A task handed out with more
executions left than there are at its turn is cut to its first ones
(``TaskResult.upto``: a search is a function of its bound).

The reduction is the same; the speed is the tree's shape's.  The searches
measured (``docs/performance.md``) are caterpillars: at each step up the
path one more branch, about as large as everything below it, so the last
branch holds half the search and one worker explores it alone, while
branches handed out early are often planned into before their turn.
"""

from __future__ import annotations

from typing import Any, Callable

from .dpor import Task, Tree, portable, shape

__all__ = ["Share", "MIN_TASK"]

#: the executions a branch's siblings must have had, on average, for it to
#: be a task: a task's start (a world for the replay, a worker's message)
#: costs a few executions
MIN_TASK = 16


def _size(b, leaves: int) -> float:
    """The leaves a branch still planned at a position is expected to have:
    the mean of the branches explored there, the one under way included
    (what it has so far, ``leaves`` being the tree's)."""
    return (b.grown + leaves - b.start) / (b.kids + 1)


class _Handed:
    """A task handed out ahead of its turn, and what it started from."""

    __slots__ = ("shape", "done", "handle")

    def __init__(self, shape: tuple, done: dict, handle: Any):
        self.shape, self.done, self.handle = shape, done, handle


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
        min_task: int | None = None,
    ):
        self.submit, self.args = submit, args
        self.window, self.start, self.small = window, start, small
        self.min_task = MIN_TASK if min_task is None else min_task
        self.handed: dict[tuple, _Handed] = {}
        #: tasks taken; those handed out whose result was not taken (what
        #: they started from changed: explored here instead)
        self.tasks = 0
        self.again = 0
        #: tasks whose worker died under way (explored here instead)
        self.lost = 0
        self._got = None

    def takes(self, ex) -> bool:
        """Whether the tree's next branch (the last position's choice, not
        run yet) is taken from a task handed out before: one that started
        from what is there now, whose result is then waited for.  Else this
        process runs the tree's next execution."""
        tree = ex.tree
        stack = tree.stack
        k = len(stack) - 1
        if k < 0:
            return False
        h = self.handed.pop(_path(stack, k), None)
        if h is not None:
            b = stack[k]
            if h.shape == shape(b.sub) and h.done == b.done:
                got = h.handle.get()
                if got is None and getattr(h.handle, "gone", False):
                    self.lost += 1
                budget = None if ex.max_executions is None else ex.max_executions - ex.executions
                if got is not None and budget is not None and got.result.executions > budget:
                    # (handed out with more executions left than now: its first ones)
                    got = got.upto(budget)
                if got is not None:
                    self._got = got
                    self.tasks += 1
                    return True
            self.again += 1
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
        leaves = tree.leaves
        for k in range(len(stack) - 1, -1, -1):
            b = stack[k]
            if not b.wut or _size(b, leaves) < self.min_task:
                continue
            head = _path(stack, k - 1) if k else ()
            for n, node in enumerate(b.wut):
                key = (*head, node[0])
                if key in self.handed:
                    continue
                task = _task(tree, k, n)
                handle = self.submit(self.args(task, budget, deadline))
                self.handed[key] = _Handed(shape(node[2]), task.done[-1], handle)
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
            ev, _fresh = tree._event_after([x.event for x in stack[:k]], b.chosen, k)
        d[b.chosen] = ev
        for node in b.wut[:n]:
            d[node[0]] = portable([node])[0][1]
        node = b.wut[n]
        path.append(node[0])
        done.append(d)
        why.append(node[3])
        sub = node[2]
    return Task(tuple(path), done, why, portable(sub))
