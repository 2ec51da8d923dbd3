"""The dispatcher's control commands: what the controller may ask of the
smp build's ``sys_msg_dispatcher_func`` process, with no socket and no thread.

``DispatcherCommands`` holds the command table (``COMMANDS``, one
``_cmd_<name>`` handler a command) and the policy behind it that needs no
socket: BIFs on the tracer state, register/unregister, hold/release and step
(``SysMsgQueue``), status and statistics, sampling, the queue listing
(``erts_foreach_sys_msg_in_q``), ``erts_queue_error_logger_message``,
``trace_delivered``, and opening, calling and closing trace ports (a close
is an event in queue order: ``dispatcher.events``).  What does need the sockets (publishing to the
schedulers' replicas, the start-up hello, who is who on each socket, the
sockets' refusal counts) it asks of its ``Host``, the ``dispatcher.server``
process, whose control thread runs every command.  Kept apart so the
command table is unit-tested directly (``tests/dispatcher_queue``).
"""

from __future__ import annotations

from typing import Protocol

from smp.core import messages as M
from smp.core.errors import BadArg
from smp.core.sampler import Sampler
from smp.core.state import TracerState, apply_state_op
from smp.core.terms import Atom
from smp.ports.traceport import open_trace_port, port_call
from smp.wire.protocol import MAX_COMMAND_WAIT_S, Dead, Registry, TracerPorts, is_command_wait

from .events import QueueEvents
from .journal import Journal
from .queue import SysMsgQueue
from .table import PidTable

__all__ = ["DispatcherCommands", "Host", "CLOSE_WAIT_S"]

am_error_logger = Atom("error_logger")
CLOSE_WAIT_S = 20.0  # a port close waits this long for its turn in the queue


class Host(Protocol):
    """What the commands ask of the process that holds the sockets."""

    def pub(self, body) -> None:
        """Publish a ``protocol.STATE_BODIES`` record to the schedulers' replicas."""

    def hello(self) -> list:
        """Publish a hello on every PUB socket; each socket's sequence number."""

    def pub_seqs(self) -> list:
        """Each PUB socket's sequence number."""

    def set_inboxes(self, inbox_map: dict, ids: dict) -> None:
        """Where each scheduler's inbox is, and who is who on each socket."""

    def step_begin(self) -> None:
        """Each batch waits for ``step_ingest`` from now on."""

    def step_ingest(self, k: int, timeout: float):
        """Take scheduler ``k``'s next batch: ``(batches queued, items queued)``."""

    def step_end(self, timeout: float) -> bool:
        """Take every batch waiting, and each as it comes from now on."""

    def refusals(self) -> dict:
        """The sockets' refusal counts (``bad_frames`` and the rest)."""


def _wait_s(x) -> float:
    """A wait the controller asks for (``is_command_wait``)."""
    if not is_command_wait(x):
        raise BadArg(f"a wait of 0..{MAX_COMMAND_WAIT_S} s, not {x!r}")
    return float(x)


class DispatcherCommands:
    """The controller's commands on the dispatcher (``command``).  The
    markers and trace-port closes they queue, which the dispatch thread
    reaches in queue order, are ``events`` (``QueueEvents``)."""

    def __init__(
        self,
        host: Host,
        nsched: int,
        q: SysMsgQueue,
        state: TracerState,
        table: PidTable,
        journal: Journal | None = None,
    ):
        self.host = host
        self.nsched = nsched
        self.q = q
        self.state = state
        self.table = table
        self.journal = journal
        self.sampler: Sampler | None = None
        self.events = QueueEvents(host.pub, q, state, table, journal)

    def command(self, cmd: str, args):
        """Run a command from the controller (the control thread)."""
        handler = self.COMMANDS.get(cmd) if type(cmd) is str else None
        if handler is None or type(args) is not tuple:
            raise BadArg(f"unknown dispatcher command {cmd!r}")
        return handler(self, *args)

    def _cmd_state(self, op, a):
        st = self.state
        return apply_state_op(st, op, a)

    def _cmd_set_inboxes(self, *args):
        self.host.set_inboxes(*args)
        return True

    def _cmd_hello(self):
        return self.host.hello()

    def _cmd_pub_seq(self):
        return self.host.pub_seqs()

    def _cmd_is_alive(self, pid):
        return self.table.is_alive(pid)

    def _cmd_valid_port(self, port):
        return self.table.is_valid_tracer_port(port)

    def _cmd_register(self, name, pid):
        ok = self.table.register(name, pid)
        if ok:
            if self.journal is not None:
                self.journal.record("e", "register", name, pid)
            self.host.pub(Registry(dict(self.table.registry)))
        return ok

    def _cmd_unregister(self, name):
        ok = self.table.unregister(name)
        if ok and self.journal is not None:
            self.journal.record("e", "unregister", name, None)
        self.host.pub(Registry(dict(self.table.registry)))
        return ok

    def _cmd_whereis(self, name):
        return self.table.whereis(name)

    def _cmd_hold(self):
        self.q.hold()
        return True

    def _cmd_step(self, n, unit: str) -> list:
        """Step mode (``SysMsgQueue.step``).  Runs in the control thread."""
        return self.q.step(n, unit, CLOSE_WAIT_S)

    def _cmd_batches_taken(self):
        """Each scheduler's batches queued (what a batch's ``after`` counts)."""
        with self.q.smq:
            return list(self.q.batches_taken)

    def _cmd_step_begin(self):
        """The controller steps the dispatcher through a schedule
        (``smp.stepper``): held, and each batch ingested when it says."""
        self.q.hold()
        # what sys_msg_disp_failure prints is kept (stderr_lines), not
        # written: the controller holds it against the simulator's
        self.q.log = _no_log
        self.host.step_begin()
        return True

    def _cmd_step_ingest(self, k, timeout):
        wait = _wait_s(timeout)
        return self.host.step_ingest(k, wait)

    def _cmd_step_end(self, timeout):
        wait = _wait_s(timeout)
        return self.host.step_end(wait)

    def _cmd_release(self):
        self.q.release()
        return True

    def _cmd_wait_ingested(self, *args):
        return self.q.wait_ingested(*args)

    def _cmd_scheduler_lost(self, k):
        pids = self.q.scheduler_lost(k)
        self.host.pub(Dead(pids))
        self.host.pub(Registry(dict(self.table.registry)))
        return pids

    def _cmd_status(self):
        q = self.q
        refused = self.host.refusals()
        with q.smq:
            return {
                "settled": sum(q.delivered.values()) + sum(q.dropped.values()),
                "ingested": list(q.ingested),
                "ingested_items": list(q.ingested_items),
                "delivered_to": list(q.delivered_to),
                "queued": len(q.queue),
                "held": q.held,
                "dispatching": q.dispatching,
                "bad_frames": refused["bad_frames"],
                "parked": len(q.parked),
                "auth_denied": refused["auth_denied"],
            }

    def _cmd_stats(self):
        return self.statistics()

    def _cmd_sample(self, interval, t0=None):
        """Sample the queue's counts every ``interval`` s from ``t0`` (the
        controller's monotonic clock: the dispatcher runs on its host), in a
        thread of its own, so a control request that waits (for the
        schedulers' batches, a port) holds no sample back."""
        if self.sampler is not None:
            self.sampler.stop()
        self.q.reset_level_peak()
        self.sampler = Sampler(
            self.q.sample_counters, interval, t0, ("queued_max", "queue_peak_run")
        ).start()
        return True

    def sample_due(self) -> None:
        """A sample due now is taken by whichever busy thread gets here
        first, the sampler thread being kept waiting (never under ``smq``)."""
        s = self.sampler
        if s is not None:
            s.poll()

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

    def _cmd_queue_list(self):
        return self.q.foreach_sys_msg_in_q()

    def _cmd_open_trace_port(self, kind, a, kw):
        port_id = self.table.add_trace_port(open_trace_port(kind, *a, **kw), self.nsched)
        if self.journal is not None:
            self.journal.record("e", "port_open", port_id)
        self.host.pub(TracerPorts(self.table.open_tracer_ports()))
        return port_id

    def _cmd_trace_port_call(self, port_id, method, a):
        tp = self.table.ports.get(port_id)
        if tp is None:
            raise BadArg(f"no trace port {port_id!r}")
        # a close is an event in queue order
        return port_call(tp, method, a, lambda: self.events.close_in_order([port_id], CLOSE_WAIT_S))

    def _cmd_trace_delivered(self, *args):
        return self.events.trace_delivered(*args)

    def _cmd_error_logger(self, from_, msg) -> bool:
        """``erts_queue_error_logger_message`` for a BIF the controller ran
        (trace/3's ``** can only have one tracer per process``)."""
        self.q.enqueue_sys_msg(M.SYS_MSG_TYPE_ERRLGR, from_, am_error_logger, msg)
        return True

    def _cmd_latencies(self):
        return list(self.q.latencies)

    def _cmd_stop(self, *args):
        self.events.stop_dispatching(*args[:1])
        return self.statistics()

    #: The dispatcher commands: each name and its handler (``_cmd_<name>``).
    COMMANDS = {
        "state": _cmd_state,
        "set_inboxes": _cmd_set_inboxes,
        "hello": _cmd_hello,
        "pub_seq": _cmd_pub_seq,
        "is_alive": _cmd_is_alive,
        "valid_port": _cmd_valid_port,
        "register": _cmd_register,
        "unregister": _cmd_unregister,
        "whereis": _cmd_whereis,
        "hold": _cmd_hold,
        "step": _cmd_step,
        "release": _cmd_release,
        "batches_taken": _cmd_batches_taken,
        "step_begin": _cmd_step_begin,
        "step_ingest": _cmd_step_ingest,
        "step_end": _cmd_step_end,
        "wait_ingested": _cmd_wait_ingested,
        "scheduler_lost": _cmd_scheduler_lost,
        "status": _cmd_status,
        "stats": _cmd_stats,
        "sample": _cmd_sample,
        "series": _cmd_series,
        "queue_list": _cmd_queue_list,
        "open_trace_port": _cmd_open_trace_port,
        "trace_port_call": _cmd_trace_port_call,
        "trace_delivered": _cmd_trace_delivered,
        "error_logger": _cmd_error_logger,
        "latencies": _cmd_latencies,
        "stop": _cmd_stop,
    }

    def statistics(self) -> dict:
        """The queue's counts (``SysMsgQueue.statistics``; ``queue_peak``
        starts a new interval with each call) and the sockets' refusals."""
        st = self.q.statistics()
        lines = st.pop("stderr_lines")
        return {**st, **self.host.refusals(), "stderr_lines": lines}


def _no_log(_line: str) -> None:
    pass
