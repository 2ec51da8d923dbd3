"""A scheduler stepped one event at a time by the controller, with no socket:
what it made and has not been told to send, and what reached it and has
not been told to take.

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
        raise LookupError(f"no BIF request of {pid!r} is held")

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
