"""A scheduler stepped one event at a time by the controller, with no socket:
what it made and has not been told to send, what reached it and has not
been told to take, and the steps that run its node (a slice, the passive
collectors' first slices, a delivery taken, a timer fired).

The controller steps a stopped emulator through a schedule the simulator
found (``smp.stepper``, ``smp.app.explore.proof``): each event of the
simulated build (``smp.sim.world``) becomes one step of the real processes.
A paused scheduler runs no process of its own accord; while stepped it also
sends nothing and applies nothing until told:

* ``cut`` (the end of every step, the simulator's ``World._flush``): what
  the node collected becomes a batch for the dispatcher, signals for each
  peer (each with the count of batches cut before it, which orders the
  dispatcher's ingest as ``Peer.batches`` does) and BIF requests, all held;
* ``release_*`` sends one of them on its real socket;
* what arrives (a peer's signal, a delivery from the dispatcher, a
  publication of the dispatcher's ingest thread) waits here until the
  controller has the scheduler take it (``arrive``, ``publish``).

Publications of the dispatcher's control thread (a BIF's change of the
tracer state) are taken as they come: the controller waits for every
replica to have them before the BIF's step ends, as the simulator applies
them to every replica at once.  The loop that holds the sockets is
``schedulers.worker.Worker``.
"""

from __future__ import annotations

from collections import deque

from smp.core.errors import BadArg
from smp.wire.frames import Batch

from .engine import timer_kind, timer_target

__all__ = ["Held"]


class Held:
    """The stepped scheduler's held output and buffered input."""

    def __init__(self) -> None:
        self.batches: deque = deque()  # (encoded Batch frame, items in it, its after)
        self.cut = 0  # batches cut so far (with those sent before stepping)
        self.base_items = 0  # items sent before stepping began
        self.released_items = 0  # items of the batches sent since
        self.sigs: dict[int, deque] = {}  # peer -> (signal, batches cut before it)
        self.rpcs: deque = deque()  # Rpc records, in the order they were made
        self.in_sigs: dict[int, deque] = {}  # peer -> (signal, Peer.batches)
        self.in_deliv: deque = deque()  # (to, term) from the dispatcher
        self.in_pubs: deque = deque()  # publication bodies of the ingest thread

    # ------------------------------------------------------------ the node's steps
    def cut_from(self, t, after: list) -> None:
        """What the transport ``t`` collected is held (the simulator's
        ``World._flush``): one batch (with the scheduler's ``after`` now),
        the signals for each peer, the BIF requests."""
        if t.has_output():
            items = t.sys_items - self.base_items - self.released_items
            items -= sum(b[1] for b in self.batches)
            self.cut += 1
            after = list(after)
            self.batches.append((Batch(t.sched_id, t.take_batch(), after).encode(), items, after))
        if t.peer_out:
            self.hold_signals(t.peer_out)
            t.peer_out = {}
        if t.ctl_out:
            self.rpcs.extend(t.ctl_out)
            t.ctl_out = []

    def start(self, node, t, after: list, pids) -> list:
        """The passive collectors' first slices (``Node.start_passive``); the
        pids that started."""
        started = [pid for pid in pids if node.start_passive(pid)]
        self.cut_from(t, after)
        return started

    def slice(self, node, t, after: list) -> tuple:
        """Run the next time slice; ``(pid, status after, messages made,
        {peer: signals}, BIF requests)``."""
        if not node.runq:
            raise BadArg(f"scheduler {node.sched_id} has nothing to run")
        p = node.runq[0]
        made, rpcs = t.sys_made, len(self.rpcs)
        sigs = {o: len(q) for o, q in self.sigs.items()}
        node.run_some(1)
        self.cut_from(t, after)
        sent = {o: len(q) - sigs.get(o, 0) for o, q in self.sigs.items()}
        return (
            p.pid,
            p.status,
            t.sys_made - made,
            {o: n for o, n in sent.items() if n},
            len(self.rpcs) - rpcs,
        )

    def fire_timer(self, node, target) -> tuple:
        """Fire the armed timer of ``target`` (a pid: its ``receive``
        timeout; a port: its busy spell) now (``Node.fire_timer``):
        ``(target, "receive" | "busy")``."""
        for e in node.armed_timers():
            if timer_target(e) == target:
                node.fire_timer(e)
                return target, timer_kind(e)
        raise BadArg(f"scheduler {node.sched_id} has no armed timer of {target!r}")

    def deliver_one(self, node) -> tuple:
        """Take the next delivery from the dispatcher: ``(to, alive)``."""
        to, term = self.in_deliv.popleft()
        alive = node.takes_delivery(to)
        node.deliver_sys_run(to, [term])
        return to, alive

    @property
    def sent_items(self) -> int:
        """Items sent to the dispatcher (what ``status`` calls ``sys_items``)."""
        return self.base_items + self.released_items

    def hold_signals(self, peer_out: dict) -> None:
        for owner, sigs in peer_out.items():
            q = self.sigs.get(owner)
            if q is None:
                q = self.sigs[owner] = deque()
            q.extend((s, self.cut) for s in sigs)

    def take_rpc(self, pid):
        """The held request of process ``pid`` (a process waits on one at most)."""
        for i, r in enumerate(self.rpcs):
            if r.pid == pid:
                del self.rpcs[i]
                return r
        raise BadArg(f"no BIF request of {pid!r} is held")

    def buffer_signals(self, sender: int, signals, batches) -> None:
        q = self.in_sigs.get(sender)
        if q is None:
            q = self.in_sigs[sender] = deque()
        q.extend((s, batches) for s in signals)

    def buffer_deliveries(self, runs) -> None:
        for to, terms in runs:
            self.in_deliv.extend((to, t) for t in terms)

    def waiting_from(self, sender: int) -> bool:
        if sender == 0:
            return bool(self.in_deliv)
        return bool(self.in_sigs.get(sender))
