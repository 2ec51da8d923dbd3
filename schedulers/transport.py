"""The scheduler side of the smp wiring: ``SmpTransport``, what a ``Node``
hands on (``schedulers.engine.Transport``) while it runs, collected for the
scheduler's loop (``schedulers.worker``) to send.  System messages are
gathered into runs and batches in the order they were made (the seed's
``enqueue_sys_msg`` at make time), each run's bodies encoded once
(``smp.wire.codec``, a body that is not a term dropped and counted); process
table events close the open run; signals for peer schedulers wait per
receiver; a process's BIF call waits as an ``Rpc`` request for the
controller.  No socket: the loop takes what is collected."""

from __future__ import annotations

import os
import time

from smp.core import messages as M
from smp.core.messages import DECIDED_BY_RECEIVER
from smp.core.stats import Stats
from smp.wire import codec
from smp.wire.frames import Run, TableEvent
from smp.wire.protocol import Rpc

from .process import RPC, Op

__all__ = ["SmpTransport", "BATCH"]

BATCH = 256  # messages: a batch this full is sent now (``batch_full``)


class SmpTransport:
    """The scheduler side of the smp wiring.  Runs in the scheduler process.

    System messages go to the dispatcher in batches.  Consecutive messages of
    the same kind to the same receiver form a *run* whose bodies are pickled
    together once; the dispatcher decides a run at once and forwards its
    bytes to the receiver's scheduler without opening them.  A run never
    crosses a process-table event, so the queue order is kept exactly.

    It only collects (``schedulers.engine.Transport``): the scheduler's loop
    sends the batch, the peer frames and the controller requests it holds."""

    def __init__(self, sched_id: int, stats: Stats):
        self.sched_id = sched_id
        # the node's statistics: messages made are counted here a run at a
        # time (a call per message cost more than the rest of sys())
        self.stats = stats
        self.run_counted = 0  # bodies of the open run already counted as made
        self.sys_out: list = []  # closed runs and events, in order
        self.run_key = None
        self.run_bodies: list = []
        self.run_made_ns = 0
        self.peer_out: dict[int, list] = {}
        self.ctl_out: list = []  # requests for the controller (a process's BIF call)
        self.unsendable = 0  # bodies that are not terms, never queued
        self.sys_made = 0
        self.sys_items = 0
        self.pending_msgs = 0
        self.first_ns = 0

    def sys(self, type_: int, from_, to, msg, ts_kind: int) -> None:
        t = type_
        # the dispatcher decides TRACE and PROC_MSG by receiver alone, so a
        # run of them may hold several senders; the others need the sender
        key = (t, to, ts_kind) if t in DECIDED_BY_RECEIVER else (t, from_, to, ts_kind)
        if key != self.run_key or ts_kind == M.TS_SCHED:  # one active count each
            self._close_run()
            self.run_key = key
            self.run_hdr = (t, from_, to, ts_kind)
            self.run_made_ns = time.monotonic_ns()
            if not self.pending_msgs and not self.sys_out:
                self.first_ns = self.run_made_ns
        self.run_bodies.append(msg)
        self.sys_made += 1
        self.sys_items += 1
        self.pending_msgs += 1

    def count_made(self) -> None:
        """Count the open run's messages as made (before the statistics are read)."""
        if self.run_bodies:
            self.stats.made(self.run_hdr[0], len(self.run_bodies) - self.run_counted)
            self.run_counted = len(self.run_bodies)

    def _close_run(self) -> None:
        if self.run_bodies:
            self.count_made()
            self.run_counted = 0
            t, from_, to, ts_kind = self.run_hdr
            try:
                # the encoder refuses what no decoder would build, so a body
                # that is not a term never makes the dispatcher refuse a batch
                blob = codec.dumps(self.run_bodies)
            except codec.Unencodable:
                blob = self._drop_unencodable()
            if blob is not None:
                self.sys_out.append(
                    Run(t, from_, to, ts_kind, len(self.run_bodies), blob, self.run_made_ns)
                )
            self.run_bodies = []
        self.run_key = None

    def _drop_unencodable(self) -> bytes | None:
        """Keep the bodies that are terms; the others never enter the queue
        (counted as ``unsendable``, logged once per run)."""
        keep = []
        why = None
        for body in self.run_bodies:
            try:
                codec.dumps(body)
                keep.append(body)
            except codec.Unencodable as e:
                why = e
        n = len(self.run_bodies) - len(keep)
        self.sys_made -= n
        self.sys_items -= n
        self.unsendable += n
        os.write(2, f"scheduler {self.sched_id}: {n} trace message(s) dropped: {why}\n".encode())
        self.run_bodies = keep
        return codec.dumps(keep) if keep else None

    def take_batch(self) -> list:
        self._close_run()
        out, self.sys_out = self.sys_out, []
        self.pending_msgs = 0
        return out

    def has_output(self) -> bool:
        return bool(self.sys_out or self.run_bodies)

    def batch_full(self) -> bool:
        """Enough messages for a batch: the scheduler sends it now."""
        return self.pending_msgs >= BATCH

    def table_event(self, ev: tuple) -> None:
        """``ev``: the event's kind and its arguments (``frames.EVENT_ARITY``)."""
        self._close_run()
        if not self.pending_msgs and not self.sys_out:
            self.first_ns = time.monotonic_ns()
        self.sys_out.append(TableEvent(ev[0], ev[1:]))
        self.sys_items += 1

    def peer(self, owner: int, signal_) -> None:
        self.peer_out.setdefault(owner, []).append(signal_)

    async def rpc(self, p, *request):
        """A BIF process ``p`` asks of the controller: the request waits in
        ``ctl_out`` for the scheduler's loop, and ``p`` until the reply."""
        self.ctl_out.append(Rpc(p.pid, request))
        result = await Op(RPC)
        if isinstance(result, BaseException):
            raise result
        return result
