"""The scheduler's control commands: what the controller may ask of a
scheduler process, with no socket.

``SchedulerCommands`` holds the command table (``COMMANDS``, one
``_cmd_<name>`` handler a command) and the policy behind it, all on the
scheduler's ``schedulers.engine.Node``: spawning (``Error(system_limit)``
past the process limit), defining functions, pause, resume and stop, a
collector's messages, ``process_info``, registration, the trace BIFs on
this scheduler's share of the processes, the nonsmp trace ports (opened,
called, closed at exit), the reply to a process's BIF call, and a lost
scheduler (its processes gone, links to them fired); status, statistics
and sampling come from its base, ``schedulers.counters.CounterCommands``.  What does
need the sockets (flushing what the transport collected, taking the state
publications until the replica is current, closing a lost peer's socket,
the sockets' counts) it asks of its ``Wire``, the ``schedulers.worker``
loop, whose thread runs every command.  Kept apart so the command table is
unit-tested directly (``tests/test_scheduler_commands.py``).
"""

from __future__ import annotations

import os
from typing import Protocol

from schedulers.backend import LocalBackend
from smp.core.bifs import call_bif
from smp.core.errors import BadArg
from smp.core.sampler import Sampler
from smp.core.terms import Atom, Pid, Port
from smp.ports.traceport import close_at_exit, open_trace_port, port_call
from smp.wire.protocol import is_command_wait

from .counters import CounterCommands
from .engine import Node, pid_owner

__all__ = ["SchedulerCommands", "Wire"]


#: entries of a list a command returns in one reply (the caller asks again
#: from where the reply ended)
FRAME_ITEMS = 2_000


class Wire(Protocol):
    """What the commands ask of the loop that holds the sockets
    (``schedulers.worker.Worker``): its two flags, its counts, and three calls."""

    running: bool  # processes run (between resume and pause)
    stopping: bool  # the loop ends, and the scheduler hands over and exits
    busy: tuple[int, int]  # ns spent running processes, and when the current run began
    bad_frames: int
    unsendable: int
    deliveries: int
    backpressure_waits: int
    peer_sent: list[int]
    peer_recv: list[int]
    pending: dict  # socket -> the frames waiting for it (push-back)
    held: object  # while the controller steps it: a ``schedulers.lockstep.Held``, else None

    def flush(self) -> None:
        """Send what the transport collected."""

    def wait_published(self, seqs, timeout: float = 10.0) -> bool:
        """Take state publications until each PUB socket's ``seqs`` is seen."""

    def wait_peer(self, sender: int, n: int, timeout: float = 10.0) -> bool:
        """Take inbox frames until ``n`` signals from ``sender`` are applied."""

    def wait_deliveries(self, n: int, timeout: float = 10.0) -> bool:
        """Paused: take inbox frames until ``n`` deliveries are in mailboxes."""

    def peer_lost(self, k: int) -> None:
        """Scheduler ``k`` is gone: close its socket and send it nothing more."""

    def flush_peer(self, owner: int) -> int:
        """Send (stepped: release) everything for peer ``owner``; its count sent."""

    def batches_made(self) -> int:
        """Send what was made; how many batches were made in all (stepped: cut)."""

    def order_after(self, after) -> None:
        """The next batch is queued after ``after[i]`` batches of each scheduler ``i``."""

    def step(self, what: str, args: tuple):
        """One step of the controller stepping this scheduler (``schedulers.lockstep``)."""


class SchedulerCommands(CounterCommands):
    """The controller's commands on one scheduler (``command``), run by the
    scheduler's loop between slices of its processes.  ``local``: the
    scheduler runs on the controller's host (its monotonic clock is the
    controller's)."""

    def __init__(self, node: Node, wire: Wire, local: bool = True):
        self.node = node
        self.wire = wire
        self.local = local
        self.sampler: Sampler | None = None

    def command(self, cmd: str, args):
        """Run a command from the controller (the scheduler's loop)."""
        handler = self.COMMANDS.get(cmd) if type(cmd) is str else None
        if handler is None or type(args) is not tuple:
            raise BadArg(f"unknown scheduler command {cmd!r}")
        return handler(self, *args)

    def _cmd_spawn(self, fun, fargs, kept):
        """Past the process limit: ``Error(system_limit)`` to the caller."""
        node = self.node
        node.claim_process()
        try:
            pid = node.new_pid()
            node.spawn_local(pid, fun, fargs, kept=kept)
        except BaseException:
            node.unclaim_process()
            raise
        return pid

    def _cmd_spawn_many(self, fun, arglist):
        """All of them or, past the process limit, none (``Error(system_limit)``)."""
        node = self.node
        claimed = 0
        try:
            for _ in arglist:
                node.claim_process()
                claimed += 1
            out = []
            for fargs in arglist:
                pid = node.new_pid()
                node.spawn_local(pid, fun, fargs)
                out.append(pid)
                claimed -= 1
        finally:
            for _ in range(claimed):  # the places of what was not spawned
                node.unclaim_process()
        return out

    def _cmd_define(self, m, f, arity, fn):
        node = self.node
        node.functions[(m, f, arity)] = fn
        return True

    def _cmd_resume(self, *args):
        if self.node.smp and args:
            self.wire.wait_published(*args[:2])
        self.wire.running = True
        return True

    def _cmd_wait_published(self, *args):
        return self.wire.wait_published(*args)

    def _cmd_wait_peer(self, sender, n, timeout=10.0):
        if (
            type(sender) is not int
            or not 1 <= sender <= self.node.nsched
            or type(n) is not int
            or not is_command_wait(timeout)
        ):
            raise BadArg("wait_peer takes a scheduler id, a count and a timeout of 0..60 s")
        return self.wire.wait_peer(sender, n, float(timeout))

    def _cmd_wait_deliveries(self, n, timeout=10.0):
        """Paused, not stepped: take what the dispatcher delivered here until
        ``n`` messages in all are in their mailboxes (``Emulator.settle``)."""
        if type(n) is not int or n < 0 or not is_command_wait(timeout):
            raise BadArg("wait_deliveries takes a count and a timeout of 0..60 s")
        if self.wire.running or self.wire.held is not None:
            raise BadArg("wait_deliveries: only while paused, not stepped")
        return self.wire.wait_deliveries(n, float(timeout))

    def _cmd_flush_peer(self, owner):
        """Every signal for scheduler ``owner`` sent (a BIF that names a process
        it spawns waits for them); returns how many it has been sent."""
        if type(owner) is not int or not 1 <= owner <= self.node.nsched:
            raise BadArg(f"flush_peer: no scheduler {owner!r}")
        return self.wire.flush_peer(owner)

    def _cmd_batches_made(self):
        return self.wire.batches_made()

    def _cmd_trace_delivered(self, caller, what, ref, after):
        """``trace_delivered`` called by ``caller`` (a process here): its
        ``{trace_delivered, What, Ref}`` is made here, in a batch the
        dispatcher queues after ``after[i]`` batches of each scheduler ``i``,
        every batch they had made when the BIF was called (the seed's
        ``erts_send_sys_msg_proc`` queues it behind every message made before)."""
        n = self.node.nsched
        if type(after) is not list or len(after) != n + 1 or any(type(x) is not int for x in after):
            raise BadArg(f"trace_delivered: after must be {n + 1} batch counts, not {after!r}")
        if type(caller) is not Pid or pid_owner(caller, n) != self.node.sched_id:
            raise BadArg(f"trace_delivered: {caller!r} is not a process of this scheduler")
        self.wire.order_after(after)
        return LocalBackend(self.node).bk_trace_delivered(caller, what, ref)

    def _cmd_step(self, what, *args):
        """The controller steps this paused scheduler one event at a time
        (``smp.stepper``; the loop holds what needs a socket).  Each step's
        arguments are checked first: a peer is another scheduler, a sender
        one of them or 0 (the dispatcher), a wait 0..60 s."""
        n, me = self.node.nsched, self.node.sched_id

        def peer(x):
            return type(x) is int and 1 <= x <= n and x != me

        def pids(x):
            return type(x) is list and all(type(p) is Pid for p in x)

        shape = (
            {
                "begin": (pids,),
                "start": (pids,),
                "slice": (),
                "cut": (),
                "next_after": (),
                "batch": (),
                "signal": (peer,),
                "rpc": (lambda x: type(x) is Pid,),
                "timer": (lambda x: type(x) in (Pid, Port),),
                "arrive": (lambda x: x == 0 or peer(x), is_command_wait),
                "publish": (is_command_wait,),
            }.get(what)
            if type(what) is str
            else None
        )
        if shape is None:
            raise BadArg(f"step: {what!r} is not a step")
        if len(args) != len(shape) or not all(ok(a) for ok, a in zip(shape, args, strict=True)):
            raise BadArg(f"step {what}: bad arguments {args!r}")
        return self.wire.step(what, args)

    def _cmd_pause(self):
        self.wire.running = False
        self.wire.flush()
        return True

    def _cmd_lineage(self, start=0, count=FRAME_ITEMS):
        """``(parent, child)`` of this scheduler's spawns from ``start``."""
        if type(start) is not int or type(count) is not int or start < 0 or count < 1:
            raise BadArg("lineage takes a start and a count")
        return self.node.lineage[start : start + min(count, FRAME_ITEMS)]

    def _cmd_record_fates(self, on):
        """nonsmp: keep every message's fate from now on (``on``), or stop."""
        node = self.node
        if node.smp:
            raise BadArg("the fates of smp's messages are the dispatcher's journal")
        if type(on) is not bool:
            raise BadArg("record_fates takes a boolean")
        node.fates = [] if on else None
        node.fates_cut = 0
        return True

    def _cmd_fates(self, start=0, count=FRAME_ITEMS):
        """``(entries from start, entries not kept)`` of the fate log."""
        node = self.node
        if type(start) is not int or type(count) is not int or start < 0 or count < 1:
            raise BadArg("fates takes a start and a count")
        got = node.fates or []
        return got[start : start + min(count, FRAME_ITEMS)], node.fates_cut

    def _cmd_messages(self, pid, start=0):
        node = self.node
        p = node.procs.get(pid)
        if p is None or p.kept is None:
            raise BadArg(f"{pid!r} is not a collector")
        return p.kept[start:]

    def _cmd_process_info(self, pid):
        node = self.node
        p = node.procs.get(pid)
        if p is None or p.status == "exited":
            return None
        return {
            "status": p.status,
            "links": sorted(p.links, key=repr),
            "trap_exit": p.trap_exit,
            "registered_name": p.reg_name,
            "message_queue_len": len(p.mailbox),
            "current_function": p.current,
            "last_calls": (list(p.saved_calls) if p.saved_calls is not None else Atom("false")),
            "exit_reason": p.exit_reason,
            "heap": p.heap.gc_values(),
            "token": tuple(p.token) if p.token else [],
        }

    def _cmd_alive(self, pid):
        node = self.node
        return node.is_alive(pid)

    def _cmd_exiting(self, pid):
        """Whether ``pid``, of this scheduler, is exiting or was sent an exit
        that will end it (``Node.exiting``)."""
        return self.node.exiting(pid)

    def _cmd_know_dead(self, pid):
        """The controller found ``pid`` dead at its own scheduler: this
        replica knows it from now on (``SmpBackend`` retracing a tracee whose
        tracer died)."""
        if type(pid) is not Pid or pid_owner(pid, self.node.nsched) == self.node.sched_id:
            raise BadArg(f"know_dead: {pid!r} is not a process of another scheduler")
        self.node.dead_remote.add(pid)
        return True

    def _cmd_valid_port(self, port):
        node = self.node
        return node.is_valid_tracer_port(port)

    def _cmd_exit(self, *args):
        node = self.node
        return node.kill_from_outside(*args)

    def _cmd_register(self, *args):
        node = self.node
        node.register(*args)
        return True

    def _cmd_set_reg(self, name, pid):
        node = self.node
        node.set_reg(name, pid)
        return True

    def _cmd_unset_reg(self, name, owner):
        node = self.node
        node.unset_reg(name, owner)
        return True

    def _cmd_whereis(self, name):
        node = self.node
        return node.whereis(name)

    def _cmd_bif(self, *args):
        node = self.node
        return call_bif(LocalBackend(node), None, *args)

    def _cmd_trace_apply(self, *args):
        node = self.node
        return node.set_trace_local(*args)

    def _cmd_mark_tracer(self, pid):
        node = self.node
        return node.mark_tracer(pid)

    def _cmd_trace_info(self, *args):
        node = self.node
        return node.trace_info_local(*args)

    def _cmd_pattern(self, *args):
        node = self.node
        return node.set_pattern_local(*args)

    def _cmd_open_trace_port(self, kind, a, kw):
        return self.node.add_trace_port(open_trace_port(kind, *a, **kw))

    def _cmd_trace_port_call(self, port_id, method, a):
        node = self.node
        tp = node.trace_ports.get(port_id)
        if tp is None:
            raise BadArg(f"no trace port {port_id!r}")

        def close():
            tp.close()
            node.state.trace_check_exiting(port_id, smp=False)

        return port_call(tp, method, a, close)

    def _cmd_reply(self, pid, value):
        node = self.node
        p = node.procs.get(pid)
        if p is not None and p.status == "suspended" and p.pending_exit is None:
            p.resume = value
            node._make_runnable(p)
        return None

    def _cmd_stop(self):
        self.wire.stopping = True
        return True

    def _cmd_scheduler_lost(self, k, pids):
        self.scheduler_lost(k, pids)
        return True

    #: The scheduler commands: each name and its handler (``_cmd_<name>``).
    COMMANDS = {
        "spawn": _cmd_spawn,
        "spawn_many": _cmd_spawn_many,
        "define": _cmd_define,
        "resume": _cmd_resume,
        "wait_published": _cmd_wait_published,
        "wait_peer": _cmd_wait_peer,
        "wait_deliveries": _cmd_wait_deliveries,
        "flush_peer": _cmd_flush_peer,
        "batches_made": _cmd_batches_made,
        "trace_delivered": _cmd_trace_delivered,
        "step": _cmd_step,
        "pause": _cmd_pause,
        "status": CounterCommands._cmd_status,
        "sample": CounterCommands._cmd_sample,
        "series": CounterCommands._cmd_series,
        "stats": CounterCommands._cmd_stats,
        "messages": _cmd_messages,
        "lineage": _cmd_lineage,
        "record_fates": _cmd_record_fates,
        "fates": _cmd_fates,
        "process_info": _cmd_process_info,
        "alive": _cmd_alive,
        "exiting": _cmd_exiting,
        "valid_port": _cmd_valid_port,
        "know_dead": _cmd_know_dead,
        "exit": _cmd_exit,
        "register": _cmd_register,
        "set_reg": _cmd_set_reg,
        "unset_reg": _cmd_unset_reg,
        "whereis": _cmd_whereis,
        "bif": _cmd_bif,
        "trace_apply": _cmd_trace_apply,
        "mark_tracer": _cmd_mark_tracer,
        "trace_info": _cmd_trace_info,
        "pattern": _cmd_pattern,
        "open_trace_port": _cmd_open_trace_port,
        "trace_port_call": _cmd_trace_port_call,
        "reply": _cmd_reply,
        "stop": _cmd_stop,
        "scheduler_lost": _cmd_scheduler_lost,
    }

    def close_trace_ports(self) -> None:
        """nonsmp: close this scheduler's tracer ports, so a file port writes its
        last buffer (as ``trace_file_drv`` does on close) whatever ends the
        scheduler: a stop, the controller gone, SIGTERM or a crash."""

        for port_id, tp in self.node.trace_ports.items():
            if not tp.closed:
                err = close_at_exit(tp)
                if err is not None:
                    os.write(
                        2,
                        f"scheduler {self.node.sched_id}: closing trace port {port_id!r}: "
                        f"{err}\n".encode(),
                    )

    def scheduler_lost(self, k: int, pids) -> None:
        """Scheduler ``k`` died: its processes are gone; links to them fire."""
        self.wire.peer_lost(k)
        node = self.node
        gone = set(pids)
        node.dead_remote.update(gone)
        node.remote_tracers.difference_update(gone)
        for p in list(node.procs.values()):
            # in term order (a lost scheduler is the emulator's own event)
            for pid in sorted(gone.intersection(p.links)):
                node.exit_signal_arrived(p, pid, Atom("killed"), True)
