"""The scheduler's counters for the controller, with no socket: its
``status`` (idle, timers, what went to and came from each peer, the
push-back backlog), its statistics (``smp.core.stats`` of its ``Node``, with
the frames refused and the bodies that could not travel), and the sampler
that reads them every interval (``smp.core.sampler``) for a run's series.
``CounterCommands`` is the part of ``schedulers.commands.SchedulerCommands``
that serves them (``status``, ``stats``, ``sample``, ``series``)."""

from __future__ import annotations

import time

from smp.core.sampler import Sampler

__all__ = ["CounterCommands"]


class CounterCommands:
    """Mixed into ``schedulers.commands.SchedulerCommands``: reads its
    ``node``, the counts of its ``wire``, and keeps its ``sampler``."""

    def _cmd_status(self):
        return self.status()

    def _cmd_sample(self, interval, t0=None):
        """Sample this scheduler's counters every ``interval`` s from ``t0``
        (the controller's monotonic clock, the same on its host; a scheduler
        on another host counts from now), in a thread of its own."""
        if self.sampler is not None:
            self.sampler.stop()
        if not self.local or t0 is None:
            t0 = time.monotonic()
        self.sampler = Sampler(self.read_counters, interval, t0, ("queued_max",)).start()
        return True

    def _cmd_series(self, final=True):
        """The samples taken (``final``: a last one now, and sampling stops);
        not final: only the latest sample, ``(t_s, counters)``."""
        s = self.sampler
        if s is None:
            return None
        if not final:
            return s.latest()
        s.stop()
        return s.to_json()

    def read_counters(self) -> dict:
        """This scheduler's counters now (the sampler thread): made, messages
        sent, and the seconds spent running processes; nonsmp, where the
        scheduler delivers what it makes, delivered and dropped (by reason)
        too.  Each read is of one int or one C-level pass over a Counter, so
        the running loop never leaves it half-updated."""
        st = self.node.stats
        busy, since = self.wire.busy
        if since:
            busy += time.monotonic_ns() - since
        t = self.node.transport
        d = {
            "made": t.sys_made if t is not None else sum(st._made.values()),
            "messages": st.messages_sent,
            "busy_s": busy / 1e9,
        }
        if t is None:
            d["delivered"] = sum(st._delivered.values())
            dropped = list(st._dropped.items())
            d["dropped"] = sum(n for _, n in dropped)
            for (_, reason), n in dropped:
                key = "dropped_by_reason." + reason
                d[key] = d.get(key, 0) + n
            d["queued"] = d["queued_max"] = 0
        return d

    def _cmd_stats(self):
        node = self.node
        t = node.transport
        if t is not None:
            t.count_made()
        d = node.stats.as_dict()
        d["processes"] = sum(1 for p in node.procs.values() if p.status != "exited")
        d["bad_frames"] = self.wire.bad_frames
        d["unsendable"] = self.wire.unsendable + (t.unsendable if t else 0)
        return d

    def status(self) -> dict:
        node, wire, t = self.node, self.wire, self.node.transport
        nd = node.next_deadline()
        return {
            "idle": not node.runq,
            "active": node.active,  # as its last profile_scheduler message says
            "timer": nd is not None,
            "timer_in": None if nd is None else max(0.0, nd - time.monotonic()),
            "peer_sent": list(wire.peer_sent),
            "peer_recv": wire.peer_recv,
            "sys_made": t.sys_made if t else 0,
            # stepped (``schedulers.lockstep``): the items sent, not those held
            "sys_items": (t.sys_items if wire.held is None else wire.held.sent_items) if t else 0,
            "deliveries": wire.deliveries,
            "procs": len(node.procs),
            "runq": len(node.runq),
            "busy": [repr(p.pid) for p in list(node.runq)[:5]],
            "backlog": sum(len(q) for q in wire.pending.values()),
            "backpressure_waits": wire.backpressure_waits,
            "bad_frames": wire.bad_frames,
        }

    def sample_due(self) -> None:
        """Take a sample that fell due while the loop kept the sampler thread waiting."""
        if self.sampler is not None:
            self.sampler.poll()
