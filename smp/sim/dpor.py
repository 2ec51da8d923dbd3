"""Stateless exploration of the simulated SMP build: Source-DPOR with sleep
sets and optimal DPOR with wakeup trees (Abdulla, Aronis, Jonsson,
Sagonas, POPL 2014, Algorithms 1 and 2), and the brute force they are
checked against.

Runs in the explorer's process.  An execution is re-run from a fresh world
for every schedule (coroutines cannot be copied), replaying the prefix the
exploration tree holds and extending it with the first thread, in
``thread_order``, that is enabled and not asleep.  A world run to plan a
race's reversal (``Tree._event_after``) is kept, and an execution whose
path starts with the steps it ran goes on from it (``Tree._spare_for``).  After each execution the
races between its new events and everything before them are found with a
happens-before relation built from the footprints (``smp.sim.deps``): for
each race ``e ⋖ e'`` the initials of ``notdep(e, E).e'`` are checked
against the backtrack set before ``e``, and one is added when none is there.
Sleep sets keep two complete executions from being equivalent; an
execution whose every enabled thread is asleep is *sleep-set blocked* and
counted apart.  A BIF can take the work of a thread enabled before it (an
ingest's batch, an arrival's signal), which then never steps: no race
with it is seen, so that thread is planned first at the BIF's branch, as
DPOR plans a step another disables (``Tree._taken``).

Optimal-DPOR (the same paper, Algorithm 2; ``optimal=True``) avoids
blocked executions: a race is reversed by planning the whole
sequence ``notdep(e, E).e'`` in the *wakeup tree* of the branch before
``e`` (unless a thread asleep or done there is a weak initial of it, or
the tree already holds an equivalent sequence), and an execution below
that branch follows the tree before it chooses freely.  Every complete
execution is then of a new Mazurkiewicz trace and none is blocked, as long
as the dependency relation says every way one event enables or changes
another (a planned step that is not enabled, or asleep, when it comes is
counted in ``Tree.misses``; the catalogue's races have none).  Both
algorithms rest on the footprints saying what each event touches, and a
slice's footprint changes with the order: a slice run before an exit
signal arrives may read a replica the slice run after it does not (the
process exits).  The exiting slice therefore stands for the slice the
signal cut short (``World._cut_short``); before it did, random small
workloads showed optimal DPOR missing classes that random schedules met
in 3 of 46 and Source-DPOR in 2 of 180, all with a process killed;
since, neither missed one in 174.  A race's last event can also do
another thing when its reversal runs it first (a BIF takes the signals
and batches there when it runs, an ingest numbers its publications after
the one before it); planned as it ran, the wakeup trees lost classes on
churn beside a killed process and blocked executions where a slice
exits, so it is planned as it runs there (``_Replanned``).  Optimal DPOR
blocks no execution on the catalogue, on the parts of churn and stress,
or on 240 generated programs, many with a process killed (Source-DPOR
blocks 531 of 1,955 executions of a tracer killed under a ring).
Optimal DPOR is the default; Source-DPOR runs under a preemption bound
(which optimal DPOR does not take) or when asked.  Two departures from
the paper's setting are handled apart: a step that can be taken away (a
BIF takes an ingest's batches or an arrival's signals, a message cancels
a timer), which is still a weak initial of what it is independent of
(``weak_initial``), and the prefix of a split search, whose steps try
every thread (Source-DPOR only: its races there are not reversed).
Optimal DPOR is shared among processes by branches instead (``Task``,
``smp.sim.share``): a branch's tree checks the races it reverses before
its branch as the whole tree would and hands the plans back, so the
search is the one tree's.

A happens-before edge comes from an event's own thread, from a conflict on
an object (the last writer and the readers since, per object, suffice: any
earlier access is ordered before them), and from a cause (an item's
producer).  Only conflicts make races: a cause has one order.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from .deps import TAKEN_REASON, TIMER_TAKEN_REASON, Event, dependent, explain
from .nodes import SimError
from .world import World, thread_order

__all__ = [
    "Tree",
    "Task",
    "HappensBefore",
    "races",
    "all_executions",
    "mazurkiewicz_key",
    "split",
]


_NONE = object()  # (HappensBefore's undo log: the key was not there)


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
        "wut",
        "sub",
        "start",
        "kids",
        "grown",
    )

    def __init__(self, enabled: list, sleep: dict, chosen: str, start: int = 0):
        self.enabled = enabled
        self.sleep = sleep  # thread -> the event it would do (asleep on entry)
        self.backtrack = [chosen]
        self.done: dict = {}  # threads explored here -> their event
        self.chosen = chosen
        self.event: Event | None = None
        #: thread -> (event index, race event index, the two events or the
        #: event and the thread whose work it took (i == j), the reasons or
        #: None) that added it; ``Tree.why`` gives their words
        self.why: dict = {}
        self.pre = 0  # preemptions on the path up to and including this choice
        #: optimal: the wakeup tree's branches here still to explore, each a
        #: node ``[thread, event, children, why]``; ``sub``: the children of
        #: the node being explored (the tree the next branch starts from)
        self.wut: list = []
        self.sub: list = []
        #: the leaves (executions, blocked ones included) before the branch
        #: being explored here began, and the branches explored here before
        #: it and their leaves in all (``Tree.estimate``)
        self.start = start
        self.kids = 0
        self.grown = 0


def weak_initial(e: Event, v: list[Event]):
    """Whether ``e``'s thread is a weak initial of ``v`` after the state ``e``
    is the next event of that thread in: its first event in ``v`` has no
    dependent event before it, or it has none in ``v`` and ``e`` is
    independent of all of ``v``.  Returns what is left of ``v`` once that
    event is taken out (``v`` itself for the second case), or None.

    The theory's threads are never disabled, and here a BIF can take an
    ingest's batches or an arrival's signals, and a message can cancel a
    timer.  The second case holds for those too: what would take ``e``'s
    work away writes what ``e`` reads (the head of the stream or of the
    channel, the process), so an ``e`` independent of all of ``v`` is still
    enabled after ``v``, and ``e.v`` and ``v.e`` are one trace.  The relation
    must be the same wherever it is asked (of a branch's thread, asleep or
    explored, and of a wakeup tree's node).  It once also asked whether the
    race's execution ran ``e`` later: a sequence was then planned beside the
    branch of an arrival independent of it (breaking the wakeup tree's
    invariant, ``tests/sim/test_dpor.py``), and that arrival, asleep below
    the sequence, was taken to cover the reversal the sequence needed;
    optimal DPOR lost 12 of 52 classes where a process is killed while a
    message from another scheduler is on its way."""
    t = e.thread
    for k, x in enumerate(v):
        if x.thread == t:
            return v[:k] + v[k + 1 :]
        if dependent(e, x):
            return None
    return v


def insert_wakeup(forest: list, v: list[Event], why) -> bool:
    """Plan ``v`` in a wakeup tree's ``forest`` (its branches after one
    state): follow the first branch whose thread is a weak initial of what
    is left of ``v``; a leaf reached that way already stands for ``v``
    (False); else ``v``'s rest becomes a new last branch (True)."""
    while True:
        for node in forest:
            rest = weak_initial(node[1], v)
            if rest is not None:
                if not node[2]:
                    return False
                forest, v = node[2], rest
                break
        else:
            if not v:
                return False
            chain: list = []
            for x in reversed(v[1:]):
                chain = [[x.thread, x, chain, None]]
            forest.append([v[0].thread, v[0], chain, why])
            return True


def plan(b: Branch, v: list, why) -> bool:
    """Plan ``v`` in branch ``b``'s wakeup tree (``insert_wakeup``); a new
    first step there is also a thread to backtrack to.  Whether it added."""
    n = len(b.wut)
    if not insert_wakeup(b.wut, v, why):
        return False
    if len(b.wut) > n:
        b.backtrack.append(b.wut[-1][0])
    return True


class HappensBefore:
    """The happens-before relation of a growing and shrinking event list
    (``push`` one event, ``truncate`` back to a prefix): for each event the
    bitmask of the events before it, its direct predecessors (its thread's
    last event, the frontier of each object it touches, the producers of
    what it consumes), and among them the conflicting ones of other threads
    (race candidates).  The frontier after each event is kept as an undo
    log, so that an execution sharing a prefix with the last one computes
    only its new events."""

    __slots__ = (
        "events",
        "hb",
        "preds",
        "cands",
        "_last_w",
        "_reads",
        "_producer",
        "_last_of",
        "_undo",
    )

    def __init__(self, events=()):
        self.events: list[Event] = []
        self.hb: list[int] = []
        self.preds: list[set] = []
        self.cands: list[list[int]] = []
        self._last_w: dict = {}  # object -> its last writer
        self._reads: dict = {}  # object -> the readers since (a tuple)
        self._producer: dict = {}  # item -> the event that produced it
        self._last_of: dict = {}  # thread -> its last event
        self._undo: list[list] = []  # per event: (dict, key, old value or _NONE)
        for e in events:
            self.push(e)

    def push(self, e: Event) -> None:  # noqa: C901 - inline: it runs for every new event
        j = len(self.events)
        last_w, reads, producer, last_of = self._last_w, self._reads, self._producer, self._last_of
        hb = self.hb
        th = e.thread
        writes = e.writes
        t = last_of.get(th, _NONE)
        undo = [(last_of, th, t)]
        if t is _NONE:
            direct = set()
            m = 0
        else:
            direct = {t}
            m = hb[t] | (1 << t)
        conflict = set()
        for o in e.reads:
            i = last_w.get(o)
            if i is not None:
                conflict.add(i)
        for o in writes:  # (its conflicts, and the frontier it moves)
            i = last_w.get(o, _NONE)
            undo.append((last_w, o, i))
            if i is not _NONE:
                conflict.add(i)
            rs = reads.pop(o, None)
            if rs is not None:
                conflict.update(rs)
                undo.append((reads, o, rs))
            last_w[o] = j
        cause = None
        for item in e.consumes:
            i = producer.get(item)
            if i is not None:
                if cause is None:
                    cause = {i}
                else:
                    cause.add(i)
        c = []  # (a loop: a comprehension is a call, and most events conflict with none)
        if conflict:
            direct |= conflict
            events = self.events
            for i in conflict:
                if (cause is None or i not in cause) and events[i].thread != th:
                    c.append(i)
            if len(c) > 1:
                c.sort()
        if cause is not None:
            direct |= cause
        for i in direct:
            if i != t:
                m |= hb[i] | (1 << i)
        self.events.append(e)
        hb.append(m)
        self.preds.append(direct)  # (only ever or-ed together: any order)
        self.cands.append(c)
        # the frontier after e, and how to go back (the writes' part is done)
        last_of[th] = j
        for o in e.reads:
            if o not in writes:
                old = reads.get(o, _NONE)
                undo.append((reads, o, old))
                reads[o] = (j,) if old is _NONE else old + (j,)
        for item in e.produces:
            undo.append((producer, item, producer.get(item, _NONE)))
            producer[item] = j
        self._undo.append(undo)

    def __reduce__(self):
        # rebuilt from its events: the undo log's marker is this process's own
        return (HappensBefore, (list(self.events),))

    def truncate(self, n: int) -> None:
        """Back to the first ``n`` events."""
        events = self.events
        if len(events) <= n:
            return
        if n < len(events) - n:
            # fewer events kept than undone: the frontier built again from them
            last_w, reads, producer = self._last_w, self._reads, self._producer
            last_of = self._last_of
            last_w.clear()
            reads.clear()
            producer.clear()
            last_of.clear()
            for j in range(n):
                e = events[j]
                last_of[e.thread] = j
                writes = e.writes
                for o in writes:
                    last_w[o] = j
                    reads.pop(o, None)
                for o in e.reads:
                    if o not in writes:
                        reads[o] = reads.get(o, ()) + (j,)
                for item in e.produces:
                    producer[item] = j
        else:
            undo = self._undo
            for _ in range(len(events) - n):
                for d, k, old in reversed(undo.pop()):
                    if old is _NONE:
                        del d[k]
                    else:
                        d[k] = old
        del events[n:], self.hb[n:], self.preds[n:], self.cands[n:], self._undo[n:]


def races(
    events: list[Event], start: int = 0, with_v: bool = False, rel: HappensBefore | None = None
):
    """Yield ``(i, j, initials)`` for each race ``events[i] ⋖ events[j]`` with
    ``j >= start``: the threads that can start ``notdep(e_i).e_j`` from the
    state before ``e_i``; ``with_v``: ``(i, j, initials, v)`` with the indices
    of ``notdep(e_i).e_j`` in order.  ``rel``: the relation of ``events``,
    already built."""
    h = HappensBefore(events) if rel is None else rel
    hb, preds, cands = h.hb, h.preds, h.cands
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
            if with_v:
                yield i, j, initials, v
            else:
                yield i, j, initials


#: steps an execution may take before it is cut (a process that never stops)
MAX_EVENTS = 5000


class Tree:
    """The exploration state: the branches of the current execution's path."""

    def __init__(
        self,
        new_world: Callable[[], World],
        max_events: int = MAX_EVENTS,
        prefix: tuple = (),
        preemptions: int | None = None,
        optimal: bool | None = None,
        task: Task | None = None,
    ):
        if optimal and preemptions is not None:
            raise ValueError("optimal DPOR takes no preemption bound (use source DPOR)")
        #: wakeup trees (optimal DPOR, the default) rather than backtrack sets
        #: (source DPOR, the default under a preemption bound): see the
        #: module's docstring
        self.optimal = preemptions is None if optimal is None else bool(optimal)
        #: planned wakeup-tree steps that were not enabled or were asleep when
        #: they came (none on the catalogue nor on the tests' workloads: one
        #: would mean the dependency relation missed an enabling)
        self.misses = 0
        #: races' last events run again where their reversal puts them
        #: (``_Replanned``), and how many of them differed
        self.replanned = 0
        self.replanned_other = 0
        #: the events planned after a path (``_event_after``: a race's last
        #: event replanned, a thread a BIF took work from), by the threads of
        #: the path and their own (the world is deterministic: the same
        #: threads from the start make the same events); about half of a
        #: search's replans were of a path replanned before.  Emptied at
        #: ``REPLAN_MEMO``.
        self._replans: dict = {}
        #: worlds ``_event_after`` ran, kept for an execution whose path
        #: starts with theirs (``_spare_for``): (threads, world, the threads
        #: enabled before each step past the branch, the branch's position),
        #: oldest first, at most ``SPARES`` of them and ``SPARE_STEPS`` steps
        self._spares: list = []
        self._spare_steps = 0  # (the steps their paths hold: at most SPARE_STEPS)
        #: executions that started from a spare world
        self.spared = 0
        self._rel = HappensBefore()  # of the last execution's events
        self.new_world = new_world
        self.max_events = max_events
        #: a task's tree (one branch of an optimal tree, ``Task``): the plans
        #: its races make before its branch, ``(position, sequence, why)`` in
        #: the order they were made, for the tree that handed it out
        self.above: list | None = None
        if prefix and self.optimal:
            # (its steps try every thread, outside the wakeup trees)
            raise ValueError("a split's prefix is Source-DPOR's: optimal DPOR is shared by tasks")
        if task is not None:
            if prefix or not self.optimal:
                raise ValueError("a task is a branch of an optimal tree, with no prefix")
            self.stack = task.stack(new_world)
            self.above = []
        else:
            self.stack = _prefix_stack(new_world, prefix) if prefix else []
        # the prefix's branches are fixed (``split`` expanded them in full; a
        # task's are the tree's that handed it out)
        self.floor = len(self.stack)
        # (a task's first execution: the races of its branch's step too)
        self.first_new = self.floor - 1 if task is not None else 0
        self.finished = False
        #: executions run to their end, blocked ones included (the leaves)
        self.leaves = 0
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
        stack = self.stack
        for b in stack[self.first_new :]:
            b.event = None
        w, path, ens = self._spare_for(stack)
        m = len(path)  # (the steps the spare world ran: its events are this path's)
        trace = w.trace
        for k, b in enumerate(stack):
            if k < m:
                if b.event is None:
                    b.event = trace[k]
                else:
                    trace[k] = b.event  # (the same event: the one the relation holds)
                continue
            # the path up to first_new is the last execution's: its events stand
            try:
                b.event = w.step(b.chosen, b.event)
            except SimError as e:
                w.dispose()
                raise SimError(
                    f"step {k + 1} of a path run before, run again: {e} (a setup or a "
                    "body that does not do the same on every run: a random number, a "
                    "clock?)"
                ) from None
        self.leaves += 1  # (this execution's leaf: its new branches start with it)
        while True:
            k = len(stack)
            en = ens[k] if k < m else w.enabled()
            if not en:
                return w, "complete"
            parent = stack[-1] if stack else None
            if parent is not None and (parent.sleep or parent.done):
                sleep = _child_sleep(parent.sleep, parent.done, parent.chosen, parent.event)
            else:
                sleep = {}  # (most branches: nothing asleep, nothing explored yet)
            avail = [t for t in en if t not in sleep] if sleep else en
            if not avail or k >= self.max_events:
                if k < m:
                    w, m = self._rerun(w), 0  # (the spare ran past where this ends)
                return w, "blocked" if not avail else "cut"
            if self.optimal and stack and stack[-1].sub:
                b = self._follow(en, sleep, avail, stack[-1].sub)
            else:
                b = Branch(en, sleep, self._choose(avail))
            stack.append(b)
            b.start = self.leaves - 1
            b.pre = self._pre_at(k, b.chosen)
            if k < m:
                if b.chosen == path[k]:
                    b.event = trace[k]
                    continue
                w, m = self._rerun(w), 0  # (the spare went another way from here)
            b.event = w.step(b.chosen)

    def _rerun(self, w: World) -> World:
        """A fresh world in place of ``w``, the path so far replayed (its
        events known, all but the last branch's)."""
        w.dispose()
        w = self.new_world()
        for b in self.stack:
            if b.event is None:
                break
            w.step(b.chosen, b.event)
        return w

    def _spare_for(self, stack: list) -> tuple[World, tuple, list]:
        """The world the next execution starts from: the spare (a world
        ``_event_after`` ran, kept) whose path is the longest that agrees with
        the branches' threads, with that path and the threads enabled before
        each of its steps past them; else a new world (no steps)."""
        spares = self._spares
        best = None
        if spares:
            n = len(stack)
            mine = tuple(b.chosen for b in stack)
            for s in spares:
                p = s[0]
                if n <= s[3] or (best is not None and len(p) <= len(best[0])):
                    continue  # (its branch not reached: what it enabled there unknown)
                m = min(len(p), n)
                if p[:m] == mine[:m]:
                    best = s
        if best is None:
            return self.new_world(), (), []
        spares.remove(best)
        self._spare_steps -= len(best[0])
        self.spared += 1
        return best[1], best[0], best[2]

    def close(self) -> None:
        """Drop the spare worlds (their process bodies closed)."""
        for s in self._spares:
            s[1].dispose()
        self._spares.clear()
        self._spare_steps = 0

    def _follow(self, en: list, sleep: dict, avail: list, forest: list) -> Branch:
        """A new branch that starts from the wakeup tree ``forest``: its
        first branch is taken now, the others wait in ``wut``."""
        nodes = list(forest)
        while nodes and nodes[0][0] not in avail:
            self.misses += 1  # (the dependency relation missed an enabling)
            nodes.pop(0)
        if not nodes:
            return Branch(en, sleep, self._choose(avail))
        node = nodes.pop(0)
        b = Branch(en, sleep, node[0])
        b.sub = node[2]
        b.wut = nodes
        b.backtrack.extend(n[0] for n in nodes)
        if node[3] is not None:
            b.why[node[0]] = node[3]
        return b

    def _choose(self, avail: list) -> str:
        """The thread a new branch takes first."""
        stack = self.stack
        if self.preemptions is not None and stack and stack[-1].chosen in avail:
            return stack[-1].chosen  # bounded: the last thread goes on
        return avail[0]

    def add_races(self) -> int:
        """Plan the reversal of every race the new events are in; returns how
        many branches (source) or wakeup sequences (optimal) were added."""
        if self.optimal:
            return self._add_wakeups()
        stack = self.stack
        events = [b.event for b in stack]
        added = 0
        for i, j, initials in races(events, self.first_new, rel=self._relation(events)):
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
            b.why[q] = (i, j, events[i], events[j], None)
            added += 1
        for j, t in self._taken(events):
            b = stack[j]
            if t in b.backtrack:
                continue
            if self.preemptions is not None and self._pre_at(j, t) > self.preemptions:
                self.bound_cut += 1
                continue
            b.backtrack.append(t)
            b.why[t] = self._taken_why(events, j, t)
            added += 1
        return added

    def _taken(self, events: list[Event]):
        """``(j, thread)`` for each new event ``j`` that took work another
        thread enabled before it would have done: a BIF an ingest's batches
        or an arrival's signals, any event a timer (a message or signal that
        woke or killed the process first).  That thread never steps in this
        execution, so no race with it is seen, and the order where it goes
        first is planned here (as DPOR plans a step a transition disables)."""
        stack = self.stack
        n = len(events)
        # (a task's own branch is new in its first execution; the fixed
        # branches of a split were expanded in full)
        start = self.first_new if self.above is not None else max(self.first_new, self.floor)
        for j in range(start, n):
            e = events[j]
            b = stack[j]
            en = b.enabled
            timed = en and en[-1][0] == "T"  # (timers come last: World.enabled)
            if not timed and e.kind != "bif":
                continue
            took = []
            if timed:
                after = stack[j + 1].enabled if j + 1 < n else ()
                took.extend(t for t in en if t[0] == "T" and t not in after)
            if e.kind == "bif":
                for obj in e.writes:
                    if obj[0] == "bhead":
                        took.append("I%d" % obj[1])
                    elif obj[0] == "head":
                        took.append("A%d>%d" % (obj[1], obj[2]))
            # (in thread order: a footprint is a set, whose order is the
            # process's string hashing, and the plan must not depend on it)
            for t in sorted(took, key=thread_order):
                if t in b.enabled and t != b.chosen and t not in b.sleep and t not in b.done:
                    yield j, t

    @staticmethod
    def _taken_why(events: list[Event], j: int, t: str) -> tuple:
        # (i == j: a step and the thread whose work it took, which never ran)
        why = TIMER_TAKEN_REASON if t[0] == "T" else TAKEN_REASON
        return (j, j, events[j], t, [f"{t}: " + why])

    def relation_of(self, events: list[Event]) -> HappensBefore | None:
        """The relation ``add_races`` built, if it is that of ``events`` (the
        last execution's trace), else None."""
        old = self._rel.events
        if len(old) == len(events) and all(a is b for a, b in zip(old, events, strict=True)):
            return self._rel
        return None

    def _relation(self, events: list[Event]) -> HappensBefore:
        """The happens-before relation of ``events``: the last execution's,
        cut back to the prefix the two share and extended."""
        rel = self._rel
        old = rel.events
        n = min(self.first_new, len(old), len(events))
        k = 0
        while k < n and old[k] is events[k]:
            k += 1
        rel.truncate(k)
        for e in events[k:]:
            rel.push(e)
        return rel

    def _add_wakeups(self) -> int:
        stack = self.stack
        events = [b.event for b in stack]
        added = 0
        rel = self._relation(events)
        above = self.above
        for i, j, _initials, vi in races(events, self.first_new, with_v=True, rel=rel):
            b = stack[i]
            v = [events[k] for k in vi]
            ran = v[-1]
            ei = events[i]
            if ei.writes & (ran.reads | ran.writes):
                # e_j as it runs before e_i, where the reversal puts it
                v[-1] = _Replanned(self, (*events[:i], *v[:-1]), ran, i)
            # a thread asleep or explored here that is a weak initial of v
            # has explored (or will) an execution equivalent to one starting v
            # (e_i itself: the race says it and e_j are dependent, whatever
            # e_j's footprint where the reversal puts it)
            if weak_initial(ei, [*v[:-1], ran]) is not None:
                continue
            if v[0].thread in b.sleep:
                # (its thread is v's first: a weak initial whatever it slept
                # for, so no replanned event is run to tell)
                continue
            if any(weak_initial(e, v) is not None for e in b.sleep.values()):
                continue
            if any(weak_initial(e, v) is not None for e in b.done.values()):
                continue
            why = (i, j, events[i], events[j], None)
            if i < self.floor:
                above.append((i, _resolved(v), why))  # (the tree that handed it out plans it)
            elif plan(b, v, why):
                added += 1
        return added + self._plan_taken(events)

    def _event_after(self, before, thread: str, branch: int) -> tuple[Any, bool]:
        """The event ``thread`` makes after the known events ``before``
        (``_NOT_ENABLED`` when it cannot step there), and whether it was run
        now (a fresh world) rather than found in ``_replans``.  ``branch``:
        the position of the branch whose plan this is (the first step of
        ``before`` that differs from the path it was taken from).  The world
        run is kept as a spare (``_spare_for``): the sequence it ran is often
        the start of an execution soon after."""
        key = (*(e.thread for e in before), thread)
        ev = self._replans.get(key)
        if ev is not None:
            return ev, False
        w = self.new_world()
        # the threads enabled before each step after the branch: what an
        # execution that starts from this world lists at its new branches
        ens: list = [None] * min(branch + 1, len(key))
        try:
            for k, e in enumerate(before):
                if k > branch:
                    ens.append(w.enabled())
                w.step(e.thread, e)
            if len(ens) < len(key):
                ens.append(w.enabled())
            ev = w.step(thread)
        except SimError:
            ev = _NOT_ENABLED
            w.dispose()
        except BaseException:
            w.dispose()
            raise
        else:
            spares = self._spares
            if len(key) > SPARE_STEPS or not SPARES:
                w.dispose()
            else:
                while spares and (
                    len(spares) >= SPARES or self._spare_steps + len(key) > SPARE_STEPS
                ):
                    self._spare_steps -= len(spares[0][0])
                    spares.pop(0)[1].dispose()
                spares.append((key, w, ens, branch))
                self._spare_steps += len(key)
        memo = self._replans
        if len(memo) >= REPLAN_MEMO:
            memo.clear()
        memo[key] = ev
        return ev, True

    def _plan_taken(self, events: list[Event]) -> int:
        """Optimal: the step of each thread whose work a new BIF event took
        (``_taken``), planned first at that event's branch (its event is
        made by replaying the path up to there)."""
        stack = self.stack
        added = 0
        for j, t in list(self._taken(events)):
            b = stack[j]
            ev, _fresh = self._event_after(events[:j], t, j)
            if ev is _NOT_ENABLED:
                raise SimError(f"step {j + 1}: {t} cannot step now")
            v = [ev]
            if any(weak_initial(e, v) is not None for e in (*b.sleep.values(), *b.done.values())):
                continue
            why = self._taken_why(events, j, t)
            if j < self.floor:
                self.above.append((j, v, why))  # (a task's branch took it: see _taken)
            elif plan(b, v, why):
                added += 1
        return added

    def take_task(self, above: list, event: Event, leaves: int) -> None:
        """The current branch explored as a task (``Task``, ``Tree(task=)``):
        its step's event, its leaves, and the plans its races made before
        it, made here in the order it made them (where the whole tree, run
        alone, would have made them while exploring the branch; no branch
        explored before the task's end is changed by them)."""
        stack = self.stack
        stack[-1].event = event
        self.leaves += leaves
        for i, v, why in above:
            plan(stack[i], v, why)

    def estimate(self, current: float = 1.0) -> float:
        """The leaves (executions, blocked ones included) of the whole tree,
        estimated after an execution: bottom-up along its path, the branch
        being explored at each position counts what is known of it, each
        branch explored there before counts its leaves, and each still to
        explore there counts the mean of those and the one being explored
        (the recursive estimator of Kilby, Slaney, Thiébaux and Walsh,
        "Estimating search tree size", AAAI 2006).  Exact once the search is
        over; low while races found later still add branches."""
        size = current  # (this execution, or the task just taken: its leaves)
        for b in reversed(self.stack[self.floor :]):
            if self.optimal:
                pending = len(b.wut)
            else:
                pending = sum(
                    1 for t in b.backtrack if t not in b.done and t not in b.sleep and t != b.chosen
                )
            mean = (b.grown + size) / (b.kids + 1)
            size += b.grown + pending * mean
        return size

    def advance(self) -> bool:
        """Move to the next branch to explore; False when none is left."""
        stack = self.stack
        while len(stack) > self.floor:
            b = stack[-1]
            b.done[b.chosen] = b.event
            b.kids += 1  # (the branch just explored here is complete)
            b.grown += self.leaves - b.start
            b.start = self.leaves
            if self.optimal:
                if self._next_wakeup(b):
                    self.first_new = len(stack) - 1
                    return True
                stack.pop()
                continue
            nxt = next((t for t in b.backtrack if t not in b.done and t not in b.sleep), None)
            if nxt is not None:
                b.chosen = nxt
                b.pre = self._pre_at(len(stack) - 1, nxt)
                self.first_new = len(stack) - 1
                return True
            stack.pop()
        self.finished = True
        self.close()
        return False

    def _next_wakeup(self, b: Branch) -> bool:
        """Take the next branch of ``b``'s wakeup tree, if any."""
        while b.wut:
            node = b.wut.pop(0)
            if node[0] in b.done or node[0] in b.sleep or node[0] not in b.enabled:
                self.misses += 1
                continue
            b.chosen = node[0]
            b.sub = node[2]
            b.event = None
            if node[3] is not None:
                b.why[node[0]] = node[3]
            return True
        return False

    def schedule(self) -> str:
        return " ".join(b.chosen for b in self.stack)

    def why(self) -> list[tuple]:
        """The races that made this execution's branches, root first."""
        out = []
        for b in self.stack:
            w = b.why.get(b.chosen)
            if w is not None:
                i, j, a, c, reasons = w
                if type(a) is not str:  # (the events: put in words when asked, once)
                    w = b.why[b.chosen] = (
                        i,
                        j,
                        a.label,
                        c if i == j else c.label,
                        explain(a, c) if reasons is None else reasons,
                    )
                out.append(w)
        return out


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


#: the most worlds a tree keeps from its replans (``Tree._spares``; 0:
#: none, each execution starts from a new world): a world of the shipped
#: examples holds 90-170 KB.  Kept at most: 8, 64, 1,024 (and none), the
#: worlds and steps of ``seqtrace --operations 1`` cut at 300 executions
#: were 556 and 25,725, 499 and 23,719, 472 and 22,880 (672 and 30,058);
#: ``tracer_replaced_on_down`` made 793 worlds from 8 on (1,082).
SPARES = 64

#: the most steps the spare worlds' paths hold in all: a world's memory
#: grows about 1.6 KB a step (a churn world of 316 steps: 507 KB), so
#: spares hold some 80 MB at most however large the workload
SPARE_STEPS = 50_000

#: the most replanned events a tree keeps (``Tree._replans``): a few tens of MB
REPLAN_MEMO = 50_000
_NOT_ENABLED: Any = object()  # a replanned thread not enabled after its path


class _Replanned:
    """The last event ``e'`` of a race's reversal ``notdep(e, E).e'``, as it
    runs there: after the events of ``notdep(e, E)``, before ``e``.

    The race's execution ran ``e'`` after ``e``, which it depends on, and a
    footprint can change with that order: a BIF takes the signals and the
    batches that are there when it runs, an ingest numbers the publications
    it makes after those of the ingest before it, a killed process's slice
    stands for the one the signal cut short (``World._cut_short``).  The
    wakeup tree compares its events with those of the threads explored and
    asleep at the branch (``weak_initial``), and with ``e'`` as it ran
    after ``e`` it took sequences for planned that were not and the other
    way round: optimal DPOR missed classes that random schedules met (11
    of 623 on churn beside a killed process), where Source-DPOR, which
    plans a thread alone, missed none.  The event is run again, in a fresh
    world, only when the wakeup tree asks for more than its thread."""

    __slots__ = ("thread", "kind", "ran", "_tree", "_path", "_branch", "_ev")

    def __init__(self, tree: Tree, before: tuple, ran: Event, branch: int):
        self.thread, self.kind, self.ran = ran.thread, ran.kind, ran
        self._tree, self._path = tree, before  # the events that run before it
        self._branch = branch  # (the race's first event's position: its reversal's branch)
        self._ev: Event | None = None

    def event(self) -> Event:
        ev = self._ev
        if ev is None:
            tree = self._tree
            # (the events before it are the race's execution's: those of
            # notdep(e, E) commute with e, so they are known)
            ev, fresh = tree._event_after(self._path, self.thread, self._branch)
            if fresh:
                tree.replanned += 1
                if ev is not _NOT_ENABLED and ev != self.ran:
                    tree.replanned_other += 1
            if ev is _NOT_ENABLED:  # (the reversal is not one: as it ran)
                ev = self.ran
            self._ev = ev
        return ev

    def __getattr__(self, name: str):
        # (its footprint and label: those of the event as it runs there; a
        # slot of its own is never looked up here, but on a copy not yet
        # filled, which must not recurse)
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.event(), name)


def _resolved(v: list) -> list:
    """``v`` with each replanned event run (``_Replanned.event``): events
    another process can take."""
    return [e.event() if type(e) is _Replanned else e for e in v]


def portable(forest: list) -> list:
    """A copy of a wakeup tree's branches whose events are all run
    (``_resolved``): what a task is handed."""
    return [[t, _resolved([e])[0], portable(kids), why] for t, e, kids, why in forest]


def shape(forest: list) -> tuple:
    """A wakeup tree's branches by their threads, nested: two that are equal
    plan the same steps (a branch's event never changes once planned)."""
    return tuple((node[0], shape(node[2])) for node in forest)


class Task:
    """One branch of an optimal tree, to be explored as a tree of its own
    (``Tree(task=...)``), maybe in another process: the threads chosen up
    to it and its own (``path``), at each of those positions the threads
    explored there before with their events (``done``) and the race that
    planned the choice (``why``), and the wakeup tree below the branch
    (``sub``).  The positions' sleep sets follow from these, as
    ``Tree.execute`` makes them, so the task's tree checks a race it
    reverses before its branch as the whole tree would, and hands the plan
    back (``Tree.above``) rather than making it: later branches there are
    other tasks'."""

    __slots__ = ("path", "done", "why", "sub")

    def __init__(self, path: tuple, done: list, why: list, sub: list):
        self.path, self.done, self.why, self.sub = path, done, why, sub

    def stack(self, new_world) -> list[Branch]:
        """The tree's branches up to this one, with the events a replay makes."""
        w = new_world()
        stack: list[Branch] = []
        sleep: dict = {}
        try:
            for k, chosen in enumerate(self.path):
                b = Branch(w.enabled(), sleep, chosen)
                b.done = dict(self.done[k])
                if self.why[k] is not None:
                    b.why[chosen] = self.why[k]
                b.event = w.step(chosen)
                stack.append(b)
                sleep = _child_sleep(b.sleep, b.done, chosen, b.event)
        finally:
            w.dispose()
        stack[-1].sub = self.sub
        return stack


def _child_sleep(sleep: dict, done: dict, chosen: str, event: Event) -> dict:
    """The sleep set after ``chosen`` did ``event``: the threads asleep or
    explored before it whose next event is independent of it."""
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
    and return the prefixes in the order one explorer would meet them,
    leaving out those where every enabled thread is asleep (their whole
    subtree is explored under another).  A ``Tree(prefix=p)`` explores
    below each; together they
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
                if not en:
                    leaves.append((path, rank))  # complete
                continue  # (blocked by the sleep set: explored elsewhere)
            evs = _events_after(new_world, path, avail)
            done: dict = {}
            for i, t in enumerate(avail):
                nxt.append((path + (t,), rank + (i,), _child_sleep(sleep, done, t, evs[t])))
                done[t] = evs[t]
        level = nxt
        if not level:
            break
    for path, rank, sleep in level:
        w = _replayed(new_world, path)
        en = w.enabled()
        w.dispose()
        if not en or any(t not in sleep for t in en):
            leaves.append((path, rank))
        # (else every thread is asleep there: a subtree with nothing to explore)
    tasks = leaves
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
