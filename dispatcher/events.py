"""The dispatcher's events in queue order: what the control thread queues
behind every message queued now and the dispatch thread reaches at its
place in the queue, with no socket.

``QueueEvents`` holds ``trace_delivered``'s marker (``{trace_delivered,
What, Ref}`` once everything queued before has been dispatched), the close
of trace ports in queue order (what was queued before is written first, what
comes after finds the port closed), and the stop's drain, which dispatches
what is queued for a bounded time and then closes every port after it.
The control thread (``dispatcher.commands``) queues the events and waits;
the dispatch thread (``dispatcher.server``) calls ``marker_reached`` and
``close_ports`` when it reaches them.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable

from smp.core import messages as M
from smp.core.state import TracerState
from smp.core.terms import Atom
from smp.ports.traceport import close_at_exit
from smp.wire.frames import QueueEvent
from smp.wire.protocol import TracerPorts

from .journal import Journal
from .queue import SysMsgQueue
from .table import PidTable

__all__ = ["QueueEvents", "STOP_DRAIN_S"]

STOP_DRAIN_S = 2.0  # on stop, dispatch what is queued this long, then drop it


class QueueEvents:
    """Markers and trace-port closes in queue order, and the stop's drain.
    ``pub`` publishes a record to the schedulers' replicas."""

    def __init__(
        self,
        pub: Callable[[object], None],
        q: SysMsgQueue,
        state: TracerState,
        table: PidTable,
        journal: Journal | None = None,
    ):
        self.pub = pub
        self.q = q
        self.state = state
        self.table = table
        self.journal = journal
        self._markers: dict = {}

    def trace_delivered(self, caller, what, ref):
        """Queue ``{trace_delivered, What, Ref}`` behind everything queued now."""
        msg = (Atom("trace_delivered"), what, ref)
        if caller is not None:
            self.q.enqueue_sys_msg(M.SYS_MSG_TYPE_PROC_MSG, caller, caller, msg)
            return ref
        ev = threading.Event()
        self._markers[ref] = ev
        self.q.enqueue_event(QueueEvent("marker", ref))
        if not ev.wait(30):
            raise TimeoutError("trace_delivered: dispatcher is held or stuck")
        del self._markers[ref]
        return msg

    def marker_reached(self, ref) -> None:
        """The dispatch thread reached a ``trace_delivered`` marker."""
        self._markers[ref].set()

    def close_ports(self, port_ids) -> None:
        """Close tracer ports (``None``: every open one, as the emulator stops)
        and tell the schedulers' replicas, the journal and the tracer state,
        which resets whatever had the port as its tracer.  Runs in the
        dispatch thread at the close's place in the queue; in the control
        thread only while the dispatch thread is held or gone."""
        ports = self.table.ports
        closed = []
        for port_id in list(ports) if port_ids is None else port_ids:
            tp = ports.get(port_id)
            if tp is None or tp.closed:
                continue
            if port_ids is None:
                err = close_at_exit(tp)
            else:
                try:
                    tp.close()
                    err = None
                except Exception as e:
                    err = f"{type(e).__name__}: {e}"
            if err is not None:
                os.write(2, f"dispatcher: closing trace port {port_id!r}: {err}\n".encode())
            closed.append(port_id)
            if self.journal is not None:
                self.journal.record("e", "port_close", port_id)
        if closed:
            self.pub(TracerPorts(self.table.open_tracer_ports()))
            for port_id in closed:
                self.state.trace_check_exiting(port_id, smp=True)

    def close_in_order(self, port_ids, wait: float) -> bool:
        """Queue the close of ``port_ids`` (``None``: every port) behind every
        message queued now and wait, at most ``wait`` s, for the dispatch
        thread to reach it: what was queued before is written first, what
        comes after finds the port closed (``port_closed``).  While the
        dispatcher is held the close waits in the queue for the release.
        True when the ports are closed.  Runs in the control thread."""
        done = threading.Event()
        if self.q.enqueue_event(QueueEvent("close", port_ids, done)):
            return False  # held
        return done.wait(wait)

    def stop_dispatching(self, drain: float = STOP_DRAIN_S) -> None:
        """The emulator stops: dispatch what is queued for at most ``drain``
        seconds more (``STOP_DRAIN_S``; the controller gives less when its
        close() has less time left), then drop the rest as
        ``emulator_closed``, and close every port after it, so each file ends
        with whole frames and holds what was counted as delivered to it.  A
        held queue stays queued.  Runs in the control thread."""
        with self.q.smq:
            held = self.q.held
        if held:  # the dispatch thread is parked: no write is under way
            self.close_ports(None)
            return
        if type(drain) not in (int, float) or not 0 <= drain <= STOP_DRAIN_S:
            drain = STOP_DRAIN_S
        self.q.drain_by = time.monotonic() + drain
        if not self.close_in_order(None, drain + 0.5):
            self.close_ports(None)  # stuck or gone: close anyway (frames stay whole)
