"""Stateless exploration of the simulated SMP build: Source-DPOR with sleep
sets (Abdulla, Aronis, Jonsson, Sagonas, POPL 2014, Algorithm 1), and the
brute force it is checked against.

Runs in the explorer's process.  An execution is re-run from a fresh world
for every schedule (coroutines cannot be copied), replaying the prefix the
exploration tree holds and extending it with the first thread, in
``thread_order``, that is enabled and not asleep.  After each execution the
races between its new events and everything before them are found with a
happens-before relation built from the footprints (``smp.sim.deps``): for
each race ``e ⋖ e'`` the initials of ``notdep(e, E).e'`` are checked
against the backtrack set before ``e``, and one is added when none is there.
Sleep sets keep two complete executions from being equivalent; an
execution whose every enabled thread is asleep is *sleep-set blocked* and
counted apart (optimal DPOR's wakeup trees would avoid them; not done).

A happens-before edge comes from an event's own thread, from a conflict on
an object (the last writer and the readers since, per object, suffice: any
earlier access is ordered before them), and from a cause (an item's
producer).  Only conflicts make races: a cause has one order.
"""

from __future__ import annotations

import time
from typing import Callable

from .deps import Event, dependent, explain
from .world import World, thread_order

__all__ = [
    "Tree",
    "happens_before",
    "races",
    "all_executions",
    "mazurkiewicz_key",
    "split",
]


class Branch:
    """One position of the exploration tree (the state before an event)."""

    __slots__ = (
        "enabled",
        "sleep",
        "backtrack",
        "done",
        "chosen",
        "event",
        "why",
        "pre",
    )

    def __init__(self, enabled: list, sleep: dict, chosen: str):
        self.enabled = enabled
        self.sleep = sleep  # thread -> the event it would do (asleep on entry)
        self.backtrack = [chosen]
        self.done: dict = {}  # threads explored here -> their event
        self.chosen = chosen
        self.event: Event | None = None
        self.why: dict = {}  # thread -> (event index, race event index, labels) that added it
        self.pre = 0  # preemptions on the path up to and including this choice


def happens_before(events: list[Event]) -> tuple[list[int], list[list[int]], list[list[int]]]:
    """For each event: the bitmask of the events that happen before it, its
    direct predecessors (its thread's last event, the frontier of each
    object it touches, the producers of what it consumes), and among them
    the conflicting ones of other threads (race candidates)."""
    hb: list[int] = []
    preds: list[list[int]] = []
    cands: list[list[int]] = []
    last_w: dict = {}
    reads: dict = {}
    producer: dict = {}
    last_of: dict = {}
    for j, e in enumerate(events):
        direct = set()
        conflict = set()
        t = last_of.get(e.thread)
        if t is not None:
            direct.add(t)
        for o in e.reads:
            i = last_w.get(o)
            if i is not None:
                conflict.add(i)
        for o in e.writes:
            i = last_w.get(o)
            if i is not None:
                conflict.add(i)
            rs = reads.get(o)
            if rs:
                conflict.update(rs)
        cause = set()
        for item in e.consumes:
            i = producer.get(item)
            if i is not None:
                cause.add(i)
        direct |= conflict
        direct |= cause
        m = 0
        for i in direct:
            m |= hb[i] | (1 << i)
        hb.append(m)
        preds.append(direct)  # (only ever or-ed together: any order)
        c = [i for i in conflict if i not in cause and events[i].thread != e.thread]
        cands.append(sorted(c) if len(c) > 1 else c)
        # the frontier after e
        last_of[e.thread] = j
        for o in e.writes:
            last_w[o] = j
            reads.pop(o, None)
        for o in e.reads:
            if o not in e.writes:
                reads.setdefault(o, []).append(j)
        for item in e.produces:
            producer[item] = j
    return hb, preds, cands


def races(events: list[Event], start: int = 0):
    """Yield ``(i, j, initials)`` for each race ``events[i] ⋖ events[j]`` with
    ``j >= start``: the threads that can start ``notdep(e_i).e_j`` from the
    state before ``e_i``."""
    hb, preds, cands = happens_before(events)
    for j in range(start, len(events)):
        if not cands[j]:
            continue
        covered = 0
        for k in preds[j]:
            covered |= hb[k]
        for i in cands[j]:
            if (covered >> i) & 1:
                continue
            # v = notdep(e_i, E).e_j: the events after e_i not after it, then e_j
            v = [k for k in range(i + 1, j) if not (hb[k] >> i) & 1]
            v.append(j)
            vmask = 0
            initials = []
            for k in v:
                if not hb[k] & vmask:
                    th = events[k].thread
                    if th not in initials:
                        initials.append(th)
                vmask |= 1 << k
            yield i, j, initials


class Tree:
    """The exploration state: the branches of the current execution's path."""

    def __init__(
        self,
        new_world: Callable[[], World],
        max_events: int = 5000,
        prefix: tuple = (),
        preemptions: int | None = None,
    ):
        self.new_world = new_world
        self.max_events = max_events
        self.stack: list[Branch] = _prefix_stack(new_world, prefix) if prefix else []
        # the prefix's branches are fixed (``split`` expanded them in full)
        self.floor = len(self.stack)
        self.first_new = 0
        self.finished = False
        #: at most this many preemptions per execution (None: no bound): a
        #: thread other than the last one chosen while the last one could go
        self.preemptions = preemptions
        #: branches the bound kept the search from (the bound cut it)
        self.bound_cut = 0
        for k, b in enumerate(self.stack):
            b.pre = self._pre_at(k, b.chosen)
        if preemptions is not None and self.stack and self.stack[-1].pre > preemptions:
            self.finished = True  # a split's prefix already past the bound
            self.bound_cut += 1

    def _pre_at(self, k: int, thread: str) -> int:
        """Preemptions of the path to branch ``k`` with ``thread`` chosen there."""
        if k == 0:
            return 0
        prev = self.stack[k - 1]
        switch = thread != prev.chosen and prev.chosen in self.stack[k].enabled
        return prev.pre + (1 if switch else 0)

    def execute(self) -> tuple[World, str]:
        """Run the next execution: replay the path, extend it.  Returns the
        world and how it ended: ``complete``, ``blocked`` (sleep set) or
        ``cut`` (``max_events``)."""
        w = self.new_world()
        stack = self.stack
        for b in stack[self.first_new :]:
            b.event = None
        for b in stack:
            # the path up to first_new is the last execution's: its events stand
            b.event = w.step(b.chosen, b.event)
        while True:
            en = w.enabled()
            if not en:
                return w, "complete"
            if stack:
                parent = stack[-1]
                pe = parent.event
                sleep = {
                    t: e
                    for src in (parent.sleep, parent.done)
                    for t, e in src.items()
                    if t != parent.chosen and not dependent(e, pe)
                }
            else:
                sleep = {}
            avail = [t for t in en if t not in sleep]
            if not avail:
                return w, "blocked"
            if len(stack) >= self.max_events:
                return w, "cut"
            b = Branch(en, sleep, self._choose(avail))
            stack.append(b)
            b.pre = self._pre_at(len(stack) - 1, b.chosen)
            b.event = w.step(b.chosen)

    def _choose(self, avail: list) -> str:
        """The thread a new branch takes first."""
        stack = self.stack
        if self.preemptions is not None and stack and stack[-1].chosen in avail:
            return stack[-1].chosen  # bounded: the last thread goes on
        return avail[0]

    def add_races(self) -> int:
        """Plan the reversal of every race the new events are in; returns how
        many branches were added."""
        stack = self.stack
        events = [b.event for b in stack]
        added = 0
        for i, j, initials in races(events, self.first_new):
            if i < self.floor:
                continue  # a fixed branch: every thread is tried there
            b = stack[i]
            if any(t in b.backtrack for t in initials):
                continue
            q = events[j].thread if events[j].thread in initials else initials[0]
            if q not in b.enabled:
                q = next((t for t in initials if t in b.enabled), None)
                if q is None:
                    continue
            if self.preemptions is not None and self._pre_at(i, q) > self.preemptions:
                self.bound_cut += 1
                continue
            b.backtrack.append(q)
            b.why[q] = (i, j, events[i].label, events[j].label, explain(events[i], events[j]))
            added += 1
        return added

    def branching(self) -> float:
        """The product of the branches known along the path (Knuth's estimator
        of the tree's leaves, taken along the path explored last)."""
        p = 1.0
        for b in self.stack:
            p *= max(1, len([t for t in b.backtrack if t not in b.sleep]))
        return p

    def advance(self) -> bool:
        """Move to the next branch to explore; False when none is left."""
        stack = self.stack
        while len(stack) > self.floor:
            b = stack[-1]
            b.done[b.chosen] = b.event
            nxt = next((t for t in b.backtrack if t not in b.done and t not in b.sleep), None)
            if nxt is not None:
                b.chosen = nxt
                b.pre = self._pre_at(len(stack) - 1, nxt)
                self.first_new = len(stack) - 1
                return True
            stack.pop()
        self.finished = True
        return False

    def schedule(self) -> str:
        return " ".join(b.chosen for b in self.stack)

    def why(self) -> list[tuple]:
        """The races that made this execution's branches, root first."""
        return [b.why[b.chosen] for b in self.stack if b.chosen in b.why]


def _replayed(new_world, path) -> World:
    w = new_world()
    for t in path:
        w.step(t)
    return w


def _events_after(new_world, path, threads) -> dict:
    """The event each of ``threads`` does after ``path`` (a fresh world each)."""
    out = {}
    for t in threads:
        w = _replayed(new_world, path)
        out[t] = w.step(t)
        w.dispose()
    return out


def _child_sleep(sleep: dict, done: dict, chosen: str, event: Event) -> dict:
    return {
        t: e
        for src in (sleep, done)
        for t, e in src.items()
        if t != chosen and not dependent(e, event)
    }


def _prefix_stack(new_world, prefix) -> list[Branch]:
    """The branches of a fixed prefix ``split`` made: at each step every
    thread before the chosen one (enabled, not asleep, in enabled order) is
    done, and the sleep sets follow as ``Tree.execute`` makes them."""
    stack: list[Branch] = []
    sleep: dict = {}
    for depth, chosen in enumerate(prefix):
        w = _replayed(new_world, prefix[:depth])
        en = w.enabled()
        w.dispose()
        avail = [t for t in en if t not in sleep]
        if chosen not in avail:
            raise ValueError(f"step {depth + 1}: {chosen} is not a branch of the split")
        before = avail[: avail.index(chosen) + 1]
        evs = _events_after(new_world, prefix[:depth], before)
        b = Branch(en, sleep, chosen)
        b.done = {t: evs[t] for t in before[:-1]}
        b.event = evs[chosen]
        stack.append(b)
        sleep = _child_sleep(b.sleep, b.done, chosen, b.event)
    return stack


def split(new_world: Callable[[], World], min_tasks: int = 8, max_depth: int = 4) -> list[tuple]:
    """Cut the exploration into subtrees: expand the first steps in full
    (every enabled thread not asleep, the sleep sets kept) level by level
    until there are at least ``min_tasks`` prefixes or ``max_depth`` steps,
    and return the prefixes in the order one explorer would meet them.  A
    ``Tree(prefix=p)`` explores below each with Source-DPOR; together they
    explore one execution per equivalence class, as one tree does (sleep
    sets keep the subtrees apart).  The split depends on the workload only,
    not on how many workers share it."""
    level: list[tuple[tuple, tuple, dict]] = [((), (), {})]  # (path, rank, sleep)
    leaves: list[tuple[tuple, tuple]] = []
    for _depth in range(max_depth):
        if len(level) + len(leaves) >= min_tasks:
            break
        nxt = []
        for path, rank, sleep in level:
            w = _replayed(new_world, path)
            en = w.enabled()
            w.dispose()
            avail = [t for t in en if t not in sleep]
            if not avail:
                leaves.append((path, rank))  # complete, or blocked by the sleep set
                continue
            evs = _events_after(new_world, path, avail)
            done: dict = {}
            for i, t in enumerate(avail):
                nxt.append((path + (t,), rank + (i,), _child_sleep(sleep, done, t, evs[t])))
                done[t] = evs[t]
        level = nxt
        if not level:
            break
    tasks = leaves + [(p, r) for p, r, _s in level]
    tasks.sort(key=lambda x: x[1])  # depth first, as one tree is explored
    return [p for p, _r in tasks]


def mazurkiewicz_key(events: list[Event]) -> frozenset:
    """The execution's Mazurkiewicz trace: its events (by thread and index in
    the thread) and the order of every dependent pair."""
    ids = []
    count: dict = {}
    for e in events:
        n = count.get(e.thread, 0)
        count[e.thread] = n + 1
        ids.append((e.thread, n))
    pairs = set(ids)
    for j, b in enumerate(events):
        for i in range(j):
            a = events[i]
            if a.thread != b.thread and dependent(a, b):
                pairs.add((ids[i], ids[j]))
    return frozenset(pairs)


def all_executions(
    new_world: Callable[[], World], limit: int = 200_000, deadline: float | None = None
):
    """Every interleaving, by brute force (each re-run from a fresh world):
    yields ``(schedule, world)`` for each complete execution; stops after
    ``limit`` of them or at ``deadline`` (``time.monotonic()``)."""
    choices: list[int] = []  # index into the enabled list at each step
    widths: list[int] = []
    n = 0
    while True:
        w = new_world()
        path = []
        depth = 0
        while True:
            en = w.enabled()
            if not en:
                break
            if depth == len(choices):
                choices.append(0)
                widths.append(len(en))
            en.sort(key=thread_order)
            t = en[choices[depth]]
            path.append(t)
            w.step(t)
            depth += 1
        yield " ".join(path), w
        n += 1
        if n >= limit or (deadline is not None and time.monotonic() > deadline):
            return
        del choices[depth:], widths[depth:]
        while choices and choices[-1] + 1 >= widths[-1]:
            choices.pop()
            widths.pop()
        if not choices:
            return
        choices[-1] += 1
