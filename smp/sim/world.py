"""The SMP build in one OS process: N scheduler ``Node``s, the dispatcher's
queue, table and tracer state, and the transport between them, stepped one
event at a time by whoever picks the next thread.

Runs in the explorer's process; no sockets, no processes, no threads.  The
engine objects are the real ones: ``schedulers.engine.Node`` (with the trace
points of ``erl_trace.c``), ``dispatcher.table.PidTable``,
``smp.core.state.TracerState`` and ``smp.core.dispatch.resolve`` /
``disp_failure``.  Only the transport is simulated, and it is cut where
the real one lets the order vary.  Each place is a *thread* whose next step
the explorer may choose:

* ``S<k>``: scheduler ``k`` runs its next time slice (``run_some(1)``); the
  system messages and process-table events it made leave as one batch
  (``enqueue_sys_msg``), its signals to other schedulers go on their
  channels, its BIF calls to the controller;
* ``I<k>``: the dispatcher takes scheduler ``k``'s next batch into the queue
  (timestamps and the active count, table events, publications), once every
  batch of a peer that caused it is in (``Worker.after``);
* ``D``: the dispatcher decides the next queued message (``resolve``);
* ``A<i>><k>``: the next signal from scheduler ``i`` (``0``: a delivery from
  the dispatcher) arrives at scheduler ``k``;
* ``P<k>``: scheduler ``k``'s replica takes the next publication (a state
  snapshot, dead pids, tracer marks, the registry);
* ``T<pid>`` and ``T#Port<n.n>``: the process's ``receive`` timeout fires, or
  the port's busy spell ends (``Node.fire_timer``).  There is no clock: a
  timer shorter than ``after_timeout`` ms may fire at any point while it is
  armed, a longer one never (``smp.sim.nodes.fires``);
* ``R<pid>``: the controller serves the BIF ``pid`` called; the change is
  made with every replica updated at once, as the seed's BIFs block every
  scheduler while they change the tracer state.  What the emulator's BIF
  waits for happens within the step: the signals of a channel it needs
  (``take_signals``: a spawn on its way) and the stream of a tracer's
  scheduler (``take_batches``: the dispatcher made to know the tracer).

A collector nobody traces or profiles is *passive*: its first slice runs at
the end of setup and a message reaching it only joins its kept list (its
receive is invisible to every tracer), so it takes no turns of its own.
Every channel is FIFO, as a ZeroMQ socket pair is.  Each step returns an
``Event`` with its footprint (``smp.sim.deps``); given the same choices the
world makes the same events, so a schedule is a list of thread names.
"""

from __future__ import annotations

import inspect
import io
from collections import deque

from dispatcher.table import take_table_event
from schedulers.backend import LocalBackend
from schedulers.engine import timer_kind, timer_target
from schedulers.inbound import apply_signal
from schedulers.process import EXITED, SUSPENDED, WAITING, Tokened
from smp.core import messages as M
from smp.core.bifs import call_bif, registrable
from smp.core.clock import us_to_ts
from smp.core.dispatch import DELIVER_PID, DELIVER_PORT, disp_failure, resolve
from smp.core.errors import BadArg, SmpError
from smp.core.placement import owner as owner_of
from smp.core.placement import pid_owner
from smp.core.rwlock import ONE_THREAD
from smp.core.state import NIL, TracerState
from smp.core.stats import Stats
from smp.core.terms import Atom, Fun, ImproperList, Map, Pid, Port
from smp.ports.traceport_mem import MemoryTracePort
from smp.wire.etf import encode
from smp.wire.protocol import Msg, describe_signal

from .backend import SimBackend
from .deps import QUEUE, REGISTRY, STATE_GROUPS, Event, group_of_type
from .nodes import (
    AFTER_TIMEOUT_MS,
    SimClock,
    SimError,
    SimNode,
    SimTable,
    SimTransport,
    collector,
    signal_of,
    timer_ms,
)

__all__ = ["World", "WorldBase", "NonsmpWorld", "SimError", "collector", "thread_order", "mid_text"]

am_active = Atom("active")
#: the snapshot of a new tracer state (a world's first, ``World._snap``)
_FRESH = TracerState(liveness=None, lock=ONE_THREAD).snapshot()
_BASE_US = 1_700_000_000_000_000  # a plausible now() for the first timestamp


def mid_text(mid: tuple) -> str:
    """A message's name in reports: ``m2.3``, the third made on scheduler 2."""
    return "m%d.%d" % mid


# An event's words (``Event.label``), made when first read from what the
# step kept (``World.step``: a step returns the text, "" when its event is
# known, or ``(one of these, *its arguments)``).


def _slice_text(k: int, pid, status) -> str:
    return f"scheduler {k} runs {pid!r}" + (f" ({status})" if status in (EXITED, SUSPENDED) else "")


def _ingest_text(n: int, k: int, items: list) -> str:
    # (a message: its mid first; a table event: its kind)
    what = [mid_text(x[0]) if type(x[0]) is tuple else f"{x[0]} {x[1]!r}" for x in items]
    return f"queue takes batch {n} of scheduler {k}: " + ", ".join(what)


def _dispatch_text(mid, type_, from_, to, fate: str, reason=None) -> str:
    end = f" {reason}" if fate == "dropped" else ""
    sender = "" if from_ is None else f" {from_!r}"  # (a seq_trace message names none)
    return f"dispatch {mid_text(mid)} {M.TYPE_NAMES[type_]}{sender} -> {to!r}: {fate}{end}"


def _reach_text(mid, to, dead: bool) -> str:
    return f"{mid_text(mid)} reaches {to!r}" + (", which is dead" if dead else "")


def _signal_text(sig, i: int) -> str:
    return f"{describe_signal(sig)} from scheduler {i} arrives"


def _replica_text(k: int, what: str, data) -> str:
    return f"scheduler {k}'s replica takes {what} {data!r}"


def _timer_text(text: str, e: tuple) -> str:
    if timer_kind(e) == "busy":
        return f"the busy spell of {text} ends ({timer_ms(e)} ms)"
    return f"the receive timeout of {text} fires (after {timer_ms(e)} ms)"


def _serve_text(name: str, pid) -> str:
    return f"controller serves {name} for {pid!r}"


def thread_order(name: str) -> tuple:
    """The canonical order of threads: schedulers, arrivals, BIFs, replicas,
    ingest, dispatch, timers (the default schedule runs processes first and
    fires a timer only when nothing else can step)."""
    return ("SARPIDT".index(name[0]), len(name), name)


class WorldBase:
    """What the two worlds share: names of processes and the setup facade's
    bookkeeping."""

    smp = True

    def __init__(self, nsched: int):
        self.nsched = nsched
        self.names: dict = {}
        self.children: dict = {}
        self.servers: set = set()  # collectors and kept processes: they may wait forever
        self.collectors: set = set()  # spawned with spawn_collector
        self.top = 0
        self.fp_r: set = set()
        self.fp_w: set = set()
        self.fp_p: set = set()
        self.fp_c: set = set()

    def name_child(self, parent, pid) -> None:
        n = self.children.get(parent, 0) + 1
        self.children[parent] = n
        self.names[pid] = f"{self.names.get(parent, repr(parent))}.{n}"

    def name_port(self, opener, port) -> None:
        """A port by its opener's role and its number among the ports that
        opener opened (``#Port<P1:1>``): port numbers differ between smp
        and nonsmp, which number the ports of every scheduler."""
        key = ("ports", opener)
        n = self.children.get(key, 0) + 1
        self.children[key] = n
        self.names[port] = f"#Port<{self.names.get(opener, repr(opener))}:{n}>"

    def dispose(self) -> None:
        """Close every process body (a world is dropped after its execution;
        a body never started would warn that it was never awaited), then
        break the world's reference cycles (the world and what refers back
        to it: its nodes, transports, table and tracer state; a node and its
        processes) so that it is freed at once: left to the cyclic garbage
        collector, dropped worlds took a sixth of an exploration's time.
        Nothing of the world can be used after."""
        if not self.__dict__:
            return  # (disposed already)
        for p in list(self.all_procs()):
            if p.coro is not None:
                p.coro.close()
        for node in self.all_nodes():
            node.__dict__.clear()
        self.__dict__.clear()

    def name_top(self, pid, name: str | None) -> None:
        self.top += 1
        self.names[pid] = name or f"P{self.top}"

    def name_trace_port(self, port, name: str | None) -> None:
        """A tracer port just opened (in ``trace_ports``): by its name, or
        by its number among them."""
        self.names[port] = name or f"#Port<trace:{len(self.trace_ports())}>"

    def trace_ports(self) -> dict:
        """The tracer ports (port -> its ``MemoryTracePort``), in the order
        they were opened."""
        raise NotImplementedError


def _waits_untraced(p) -> bool:
    return p.status == WAITING and p.tracer is NIL


#: how many terms ``_named_by`` looks at before it takes every one as named
NAMED_LIMIT = 100_000


def _named_by(p, wanted: set) -> set:
    """The pids of ``wanted`` process ``p`` could send to: those among the
    terms it holds (the variables of its body's frames, closures included,
    its mailbox, its links) or registered under a name.  A body names a
    process by a pid it holds or by a registered name; a pid it made from
    integers, or hid in an object that is not a term, is not seen.  Every
    pid of ``wanted`` when there are more than ``NAMED_LIMIT`` terms."""
    found = {pid for pid in p.node.registry.values() if pid in wanted}
    todo: list = [*p.mailbox, *p.links]
    c = p.coro
    while c is not None:
        f = getattr(c, "cr_frame", None) or getattr(c, "gi_frame", None)
        if f is not None:
            todo.extend(f.f_locals.values())
        c = getattr(c, "cr_await", None) or getattr(c, "gi_yieldfrom", None)
    seen = 0
    while todo:
        x = todo.pop()
        seen += 1
        if seen > NAMED_LIMIT:
            return wanted
        t = type(x)
        if t is Pid:
            if x in wanted:
                found.add(x)
        elif t in (tuple, list, set, frozenset, deque):
            todo.extend(x)
        elif t is dict:
            todo.extend(x.items())
        elif t is Map:
            todo.extend(x.items())
        elif t is ImproperList:
            todo.extend(x.elements)
            todo.append(x.tail)
        elif t is Tokened:
            todo.append(x.msg)
        elif t is Fun:
            todo.extend(x.free)
    return found


def _parse_thread(thread: str) -> tuple:
    """``(kind, World method, its arguments)`` of a thread's name, kept in
    ``_THREADS`` (a thread's steps all parse the same)."""
    c, rest = thread[:1], thread[1:]
    try:
        if c == "S":
            out = ("slice", World._slice, (int(rest),))
        elif c == "D" and not rest:
            out = ("dispatch", World._dispatch, ())
        elif c == "I":
            out = ("ingest", World._ingest, (int(rest),))
        elif c == "A":
            i, k = rest.split(">")
            out = ("arrive", World._arrive, (int(i), int(k)))
        elif c == "P":
            out = ("publish", World._publish, (int(rest),))
        elif c == "R":
            out = ("bif", World._serve, (rest,))
        elif c == "T":
            out = ("timer", World._timer, (rest,))
        else:
            raise ValueError
    except ValueError:
        raise SimError(f"no thread {thread!r}") from None
    if len(_THREADS) < 10_000:  # (a pid's text names an R or T thread: bounded)
        _THREADS[thread] = out
    return out


_THREADS: dict = {}


def _by_channel(entry: tuple) -> tuple:
    return _parse_thread(entry[0])[2]  # ((from, to) of "A<from>><to>")


class World(WorldBase):
    """The simulated SMP build.  ``enabled()`` lists the threads that can
    step; ``step(thread)`` runs one and returns its ``Event``."""

    def __init__(
        self, nsched: int = 2, reductions: int = 200, after_timeout: int = AFTER_TIMEOUT_MS
    ):
        if nsched < 1:
            raise BadArg("schedulers must be >= 1")
        super().__init__(nsched)
        self.after_timeout = after_timeout
        self.timed = False  # a timer was armed (SimNode.arm_timer): enabled() looks for them
        self.atomic = True  # setup: every change reaches every replica at once
        self.quiet = False  # a step whose event is known builds no label (step)
        self.taking = False  # a BIF takes signals (take_signals): no cut per arrival
        self.table = SimTable(self)
        self.state = TracerState(
            liveness=self.table, on_change=self._on_state_change, lock=ONE_THREAD
        )
        self._snap = _FRESH  # (the state's snapshot: a new state's)
        self.clock = SimClock()
        self.queue: deque = deque()
        self.stderr: list[str] = []
        self.transports = [None]
        self.nodes: list = [None]
        for k in range(1, nsched + 1):
            stats = Stats()
            t = SimTransport(self, k, stats)
            self.transports.append(t)
            self.nodes.append(
                SimNode(
                    self,
                    k,
                    nsched,
                    smp=True,
                    reductions=reductions,
                    transport=t,
                    stderr=io.StringIO(),
                    stats=stats,
                )
            )
        r = range(nsched + 1)
        n = nsched + 1
        self.ing: list = [deque() for _ in r]  # batches on their way to the queue
        self.ing_sent = [0] * n
        self.ingested = [0] * n
        self.after = [[0] * n for _ in r]
        self.chans: dict = {}  # (from, to) -> deque of (seq, payload, batches sent)
        self._chan_order: list = []  # (thread name, its deque), by (from, to)
        self.bif_sched: int | None = None  # the scheduler of the BIF being served
        self.bif_name: str | None = None  # its name (a request to register: that)
        self.chan_sent: dict = {}
        self.pubs: list = [deque() for _ in r]
        self.pub_sent = [0] * n
        self.rpcs: dict = {}  # the text of a pid with a request -> (pid, seq, request)
        self.rpc_sent: dict = {}
        self.refs = 0
        # the slices each scheduler ran, and whether the next one was made
        # possible by an event that gave its idle run queue a process (a
        # cause: that slice cannot come before it)
        self.slices = [0] * n
        self._collector_procs: list | None = None  # (pid, its scheduler's procs)
        #: the quiet collectors after the last step when it was a new one
        #: and nothing changed the world since (a replayed step, the setup's
        #: spawns and settles), else None: the next new step's before (step)
        self._quiet: set | None = None
        self.woken = [False] * n
        # what happened to the messages
        # mid: (scheduler, n), numbered by its maker (the controller is 0), so
        # events on different schedulers commute with their numbers
        self.msgs: dict = {}  # mid -> (type, from, to, body, scheduler)
        self.made_by = [0] * (nsched + 1)
        self.fates: dict = {}  # mid -> ("delivered"|"arrived_dead", receiver) | ("dropped", reason, receiver)
        self.arrivals: dict = {}  # receiver -> [mid, ...] in arrival order
        self.delivered = 0
        self.dropped = 0
        self.trace: list[Event] = []
        self.started: list = []  # the passive collectors start_collectors ran
        self.marked: set = set()  # tracers a process's BIF marked (SmpBackend._marked)
        self.backend = SimBackend(self)
        self._ks = range(1, nsched + 1)
        # what enabled() looks at, by thread (none of these deques is ever
        # replaced: each is read where it is rather than looked up per call)
        self._runqs = [("S%d" % k, self.nodes[k].runq) for k in self._ks]
        self._pubqs = [("P%d" % k, self.pubs[k]) for k in self._ks]
        self._ingqs = [(k, "I%d" % k, self.ing[k]) for k in self._ks]
        self._scratch: set = set()  # a replayed step's footprint (step)

    # ------------------------------------------------------------ bookkeeping
    def new_message(self, type_, from_, to, msg, k) -> tuple:
        self.made_by[k] += 1
        mid = (k, self.made_by[k])
        self.msgs[mid] = (type_, from_, to, msg, k)
        return mid

    def owner(self, pid) -> int:
        return pid_owner(pid, self.nsched)

    def _takes_quietly(self, p) -> bool:
        """A message reaching ``p`` changes nothing but its mailbox: a
        collector waiting in its receive, traced by no one."""
        return p.pid in self.collectors and _waits_untraced(p)

    def _quiet_collectors(self) -> set:
        """The collectors a message would reach quietly now (``("proc", pid)``
        in ``smp.sim.deps``: an event that changes that writes it)."""
        where = self._collector_procs
        if where is None or len(where) != len(self.collectors):
            where = self._collector_procs = [
                (pid, self.nodes[self.owner(pid)].procs) for pid in self.collectors
            ]
        quiet = set()  # (_waits_untraced, inline, and a loop: a step looks twice)
        for pid, procs in where:
            p = procs.get(pid)
            if p is not None and p.status == WAITING and p.tracer is NIL:
                quiet.add(pid)
        return quiet

    def _on_state_change(self, snap) -> None:
        old, self._snap = self._snap, snap
        for f, g in STATE_GROUPS.items():
            if getattr(old, f) != getattr(snap, f):
                self.fp_w.add(("state", g))
        if self.atomic:
            for k in range(1, self.nsched + 1):
                self.nodes[k].apply_snapshot(snap)
                self.fp_w.add(("node", k))
        else:
            self._pub_all(("snap", snap))

    def _pub_all(self, item) -> None:
        for k in range(1, self.nsched + 1):
            self.pub_sent[k] += 1
            self.pubs[k].append((self.pub_sent[k], item))
            self.fp_w.add(("pub", k))
            self.fp_p.add(("pubitem", k, self.pub_sent[k]))

    def _flush(self, k: int) -> None:
        """What node ``k``'s event made leaves it: the batch, the signals (with
        the count of batches sent before them), the BIF requests."""
        t = self.transports[k]
        if t.out:
            n = self.ing_sent[k] = self.ing_sent[k] + 1
            self.ing[k].append((n, tuple(self.after[k]), t.out))
            for i in range(1, self.nsched + 1):
                if i != k:
                    self.fp_r.add(("after", k, i))  # (what the batch waits for)
            t.out = []
            self.fp_p.add(("batch", k, n))
            self.fp_w.add(("btail", k))  # what a BIF taking the batches sees
        if t.peer_out:
            nb = self.ing_sent[k]
            for owner, sig in t.peer_out:
                key = (k, owner)
                seq = self.chan_sent[key] = self.chan_sent.get(key, 0) + 1
                q = self.chans.get(key)
                if q is None:
                    q = self._new_chan(key)
                q.append((seq, sig, nb))
                self.fp_p.add(("sig", k, owner, seq))
                self.fp_w.add(("tail", k, owner))  # what a BIF taking the channel sees
            t.peer_out = []
        if t.ctl_out:
            for pid, req in t.ctl_out:
                seq = self.rpc_sent[pid] = self.rpc_sent.get(pid, 0) + 1
                self.rpcs[repr(pid)] = (pid, seq, req)
                self.fp_p.add(("rpc", pid, seq))
            t.ctl_out = []

    def _new_chan(self, key: tuple) -> deque:
        """The channel ``key`` (``(from, to)``), made at its first signal and
        kept in ``_chan_order`` (by key: the order ``enabled`` lists them)."""
        q = self.chans[key] = deque()
        self._chan_order.append(("A%d>%d" % key, q))
        self._chan_order.sort(key=_by_channel)
        return q

    # ------------------------------------------------------------ the threads
    def enabled(self) -> list[str]:
        out = []
        for name, runq in self._runqs:
            if runq:
                out.append(name)
        for name, q in self._chan_order:
            if q:
                out.append(name)
        for text in self.rpcs:
            out.append("R" + text)
        for name, q in self._pubqs:
            if q:
                out.append(name)
        for k, name, q in self._ingqs:
            if q and self._after_ok(k):
                out.append(name)
        if self.queue:
            out.append("D")
        if self.timed:
            for k in self._ks:
                if self.nodes[k].timers:
                    out.extend(self._timer_threads(k))
        return out

    def _timer_threads(self, k: int) -> list[str]:
        return ["T%r" % (timer_target(e),) for e in self.nodes[k].armed_timers()]

    def armed_timer(self, text: str) -> tuple:
        """``(scheduler, entry)`` of the armed timer a ``T`` thread names."""
        for k in self._ks:
            if self.nodes[k].timers:
                for e in self.nodes[k].armed_timers():
                    if repr(timer_target(e)) == text:
                        return k, e
        raise KeyError(text)

    def _after_ok(self, k: int) -> bool:
        after = self.ing[k][0][1]
        ingested = self.ingested
        for i in range(1, self.nsched + 1):
            if i != k and ingested[i] < after[i]:
                return False
        return True

    def step(self, thread: str, known: Event | None = None) -> Event:
        """Step ``thread``; its ``Event``.  ``known``: the event this same step
        made in an earlier execution of the same path (the world is
        deterministic), kept rather than built again."""
        parsed = _THREADS.get(thread)
        if parsed is None:
            parsed = _parse_thread(thread)
        kind, method, args = parsed
        self.atomic = False
        nodes = self.nodes
        idle = []  # (a loop: a comprehension is a call)
        for k in self._ks:
            if not nodes[k].runq:
                idle.append(k)
        quiet_ok, self._quiet = self._quiet, None
        if known is not None:
            # a replayed step: its footprint is the known event's, so what the
            # step adds goes to one scratch set, emptied here
            self.quiet = True
            scratch = self._scratch
            scratch.clear()
            self.fp_r = self.fp_w = self.fp_p = self.fp_c = scratch
            quiet_ok = None
        else:
            self.quiet = False
            self.fp_r, self.fp_w, self.fp_p, self.fp_c = set(), set(), set(), set()
            if quiet_ok is None and self.collectors:
                quiet_ok = self._quiet_collectors()  # (else as the last step left them)
        try:
            label = method(self, *args)
        except (IndexError, KeyError, ValueError):
            raise SimError(f"thread {thread} cannot step now") from None
        for k in idle:
            if nodes[k].runq:
                self.woken[k] = True
                self.fp_p.add(("wake", k, self.slices[k] + 1))
        if known is not None:
            self.trace.append(known)
            return known
        if quiet_ok is not None:
            # a collector that starts or stops taking messages unseen (it
            # waits, dies, is traced or untraced) is written: a quiet arrival
            # there commutes with the event on one side of it only
            after = self._quiet = self._quiet_collectors()
            if after != quiet_ok:
                for pid in quiet_ok.symmetric_difference(after):
                    self.fp_w.add(("proc", pid))
        ev = Event(
            thread,
            kind,
            frozenset(self.fp_r),
            frozenset(self.fp_w),
            frozenset(self.fp_p),
            frozenset(self.fp_c),
            label,
        )
        self.trace.append(ev)
        return ev

    def _slice(self, k: int) -> str | tuple:
        node = self.nodes[k]
        if not node.runq:
            raise SimError(f"scheduler {k} has nothing to run")
        self.fp_w.add(("node", k))
        self.slices[k] += 1
        if self.woken[k]:
            self.woken[k] = False
            self.fp_c.add(("wake", k, self.slices[k]))
        p = node.runq[0]
        self.fp_w.add(("proc", p.pid))
        if p.pending_exit is not None and not self.quiet:
            self._cut_short(k, p)  # (a known event has its footprint)
        node.run_some(1)
        self._flush(k)
        if self.quiet:
            return ""
        return (_slice_text, k, p.pid, p.status)

    def _cut_short(self, k: int, p) -> None:
        """The footprint of a slice in which ``p``, which an exit signal
        reached, exits (``Node._terminate``): it stands for the slice the
        signal cut short, so it also touches what that slice could have:
        the whole replica, what a batch waits for, the tail of every channel
        from ``k`` and of its stream, and every collector of ``k`` the
        process could send to (``_named_by``; a collector sends nothing,
        so a killed collector's slice adds only the batch ends).  With its
        own footprint alone, the race of the exit signal with the slice is
        reversed into a slice that reads (a dead pid's replica entry, say)
        or writes what no event of the explored executions was ordered
        against, and those orders went unexplored: random schedules met such
        classes in 2 of 180 small workloads with a process killed."""
        r, w = self.fp_r, self.fp_w
        w.add(("btail", k))
        for i in range(1, self.nsched + 1):
            if i != k:
                r.add(("after", k, i))
                w.add(("tail", k, i))
        if p.pid in self.collectors:
            return
        r.add(("replica", k))
        mine = {c for c in self.collectors if self.owner(c) == k and c != p.pid}
        if mine:
            for c in _named_by(p, mine):
                w.add(("proc", c))

    def _ingest(self, k: int) -> str | tuple:
        n, after, items = self.ing[k].popleft()
        self.fp_c.add(("batch", k, n))
        self.fp_w.add(("bhead", k))  # what a BIF taking the batches sees
        for i in range(1, self.nsched + 1):
            if i != k and after[i]:
                self.fp_c.add(("ingested", i, after[i]))
        self.ingested[k] = n
        self.fp_p.add(("ingested", k, n))
        dead: list = []
        tracers: list = []
        reg_changed = ports_changed = False
        for item in items:
            if type(item[0]) is tuple:  # a message: its mid first
                self._enqueue(item)
                continue
            reg, ports = take_table_event(self.table, self.state, item[0], item[1:], dead, tracers)
            reg_changed |= reg
            ports_changed |= ports
        # (in the order the dispatcher publishes them: SysMsgQueue.ingest's
        # Published, DispatcherServer._publish)
        if dead:
            self._pub_all(("dead", dead))
        if tracers:
            self._pub_all(("tracer", tracers))
        if reg_changed:
            self.fp_r.add(REGISTRY)  # (every name in it)
            self._pub_all(("reg", dict(self.table.registry)))
        if ports_changed:
            self._pub_all(("ports", self.table.open_tracer_ports()))
        if self.quiet:
            return ""
        return (_ingest_text, n, k, items)

    def _enqueue(self, item: tuple) -> None:
        """A message of a batch joins the queue (``enqueue_sys_msg_unlocked``),
        its timestamp and active-scheduler count taken now."""
        mid, type_, from_, to, msg, ts_kind = item
        self.fp_w.add(QUEUE)
        ts = active = 0
        if ts_kind:
            ts = self.clock.now_us()
        if ts_kind == M.TS_SCHED:
            state = self.state
            state.active_sched += 1 if to is am_active else -1
            active = state.active_sched
            to = NIL
            self.fp_w.add(("state", "active"))
        self.queue.append((mid, type_, from_, to, msg, ts_kind, ts, active))
        self.fp_p.add(("msg", mid))

    def _dispatch(self) -> str | tuple:
        mid, type_, from_, to, msg, ts_kind, ts, active = self.queue.popleft()
        self.fp_c.add(("msg", mid))
        g = group_of_type(type_)
        if g is not None:
            self.fp_r.add(("state", g))
        d = resolve(type_, from_, to, self.state, self.table)
        if d.action == DELIVER_PID or d.action == DELIVER_PORT:
            term = M.complete(msg, ts_kind, us_to_ts(ts), active) if ts_kind else msg
            tp = self.table.ports.get(d.receiver) if d.action == DELIVER_PORT else None
            if tp is None:
                # to a process, or to a port a process opened: its scheduler
                # writes the bytes to the driver (erts_raw_port_command)
                owner = owner_of(d.receiver, self.nsched)
                key = (0, owner)
                seq = self.chan_sent[key] = self.chan_sent.get(key, 0) + 1
                q = self.chans.get(key)
                if q is None:
                    q = self._new_chan(key)
                q.append((seq, (mid, d.receiver, term), 0))
                self.fp_p.add(("sig", 0, owner, seq))
                fate = "delivered"
            else:
                # a tracer port the dispatcher writes to itself (io.c), in queue order
                tp.write(encode(term))
                self.arrivals.setdefault(d.receiver, []).append(mid)
                fate = "written"
            self.fates[mid] = ("delivered", d.receiver)
            self.delivered += 1
            if self.quiet:
                return ""
            return (_dispatch_text, mid, type_, from_, d.receiver, fate)
        if d.failure:
            disp_failure(
                M.SysMsg(type_, from_, to, msg, ts_kind), d.receiver, self.state, self.stderr.append
            )
        self.fates[mid] = ("dropped", d.reason, d.receiver)
        self.dropped += 1
        if self.quiet:
            return ""
        return (_dispatch_text, mid, type_, from_, d.receiver, "dropped", d.reason)

    def _arrive(self, i: int, k: int) -> str | tuple:
        seq, payload, nb = self.chans[(i, k)].popleft()
        self.fp_c.add(("sig", i, k, seq))
        if i:
            self.fp_w.add(("head", i, k))  # what a BIF taking the channel sees
        node = self.nodes[k]
        if i == 0:  # a delivery from the dispatcher: (message id, to, term)
            mid, to, term = payload
            quiet = True
        else:
            sig = signal_of(payload, i, k, self.nsched)
            quiet = type(sig) is Msg and sig.token is None
            to = sig.to if type(sig) is Msg else None
        target = node.procs.get(to) if quiet else None
        if not (target is not None and self._takes_quietly(target)):
            self.fp_w.add(("node", k))
        label: str | tuple = ""
        if i == 0:
            dead = not node.takes_delivery(to)
            if dead:
                self.fates[mid] = ("arrived_dead", to)
            else:
                self.arrivals.setdefault(to, []).append(mid)
            if not self.quiet:
                label = (_reach_text, mid, to, dead)
            node.deliver_sys_run(to, [term])
        else:
            if nb > self.after[k][i]:
                # node k's next batches wait for i's first nb: a batch made
                # before this arrival does not (even when it is quiet)
                self.after[k][i] = nb
                self.fp_w.add(("after", k, i))
            if not self.quiet:
                label = (_signal_text, sig, i)
            apply_signal(node, sig)
        t = self.transports[k]
        if t.out or t.peer_out or t.ctl_out:
            self.fp_w.add(("node", k))  # its output joins node k's ordered streams
        if not self.taking:
            # (signals a BIF takes are applied in its step, which cuts node
            # k's batch once at its end, as a stepped scheduler does)
            self._flush(k)
        return label

    def _publish(self, k: int) -> str | tuple:
        seq, (kind, data) = self.pubs[k].popleft()
        self.fp_c.add(("pubitem", k, seq))
        node = self.nodes[k]
        if kind == "snap":
            self.fp_w.add(("node", k))
            node.apply_snapshot(data)
            if self.quiet:
                return ""
            return (_replica_text, k, "state version", data.version)
        if kind in ("dead", "tracer"):
            # read only by is_alive / is_tracer of a pid of another scheduler
            self.fp_w.add(("replica", k))  # (the whole, what _cut_short reads)
            for pid in data:
                self.fp_w.add(("replica", k, pid))
            if kind == "dead":
                node.dead_remote.update(data)
            else:
                node.remote_tracers.update(data)
        elif kind == "reg":
            self.fp_w.add(("node", k))
            node.registry = dict(data)
        elif kind == "ports":
            # the ports a process opened, valid tracers for the replica
            # (which no simulated process reads: a trace to a port is refused)
            self.fp_w.add(("tracer_ports", k))
            node.remote_tracer_ports = set(data)
        if self.quiet:
            return ""
        return (_replica_text, k, kind, data)

    def _timer(self, text: str) -> str | tuple:
        k, e = self.armed_timer(text)
        node = self.nodes[k]
        self.fp_c.add(("timer", k, e[1]))
        self.fp_w.add(("node", k))
        if e[3] != -1:
            self.fp_w.add(("proc", e[2].pid))
        node.fire_timer(e)
        self._flush(k)
        if self.quiet:
            return ""
        return (_timer_text, text, e)

    def take_signals(self, keys) -> None:
        """Within the current event, every signal waiting on the channels
        ``keys`` (``(from, to)``) arrives, in order (a BIF that waits for them)."""
        consumed = set(self.fp_c)
        self.taking = True
        try:
            for key in keys:
                self.fp_r.add(("tail", *key))
                self.fp_w.add(("head", *key))
                while self.chans.get(key):
                    self._arrive(*key)
        finally:
            self.taking = False
        # not a cause: the BIF takes what is there when it runs, and could run
        # before the signal was sent (the conflict on the channel orders them)
        self.fp_c = consumed

    def take_batches(self, k: int) -> None:
        """Within the current event, what scheduler ``k`` has made reaches the
        queue, every batch in order (a BIF that waits until the dispatcher has
        taken that scheduler's stream, ``SmpBackend._ingested_from``).  A
        batch whose causes on other schedulers are not in yet waits for them,
        as the dispatcher parks it until it has taken those schedulers'
        batches: they are taken first (``_take_until``)."""
        consumed, atomic = set(self.fp_c), self.atomic
        self._flush(k)
        self.fp_r.add(("btail", k))
        self.atomic = False  # the ingest publishes what it changes, as the ingest thread does
        self._take_until(k, self.ing_sent[k])
        self.atomic = atomic
        # not a cause: the BIF takes what is there when it runs (the conflict
        # on the stream orders it against the events that add to it)
        self.fp_c = consumed

    def _take_until(self, k: int, n: int) -> None:
        """Scheduler ``k``'s batches reach the queue until its ``n``-th has,
        each after the batches of other schedulers its causes are in (sent
        before it, so there to take; their own causes first)."""
        self.fp_w.add(("bhead", k))  # (a prefix of k's stream fixed by n: its tail is not read)
        ingested = self.ingested
        while ingested[k] < n:
            after = self.ing[k][0][1]
            for i in range(1, self.nsched + 1):
                if i != k and after[i]:
                    # whether i's batches before it are in: an ingest of i
                    # changes that, and so what this event takes
                    self.fp_r.add(("bhead", i))
                    if ingested[i] < after[i]:
                        self._take_until(i, after[i])
            self._ingest(k)

    def _serve(self, pid_text: str) -> str | tuple:
        pid, seq, req = self.rpcs.pop(pid_text)
        self.fp_c.add(("rpc", pid, seq))
        k = self.owner(pid)
        self.fp_w.add(("node", k))
        self.atomic = True
        self.bif_sched = k
        self.bif_name = name = req[1] if req[0] == "bif" else req[0]
        try:
            value = self.serve_request(pid, req)
        except BadArg as e:
            value = e
        self.atomic = False
        self.bif_sched = self.bif_name = None
        node = self.nodes[k]
        p = node.procs.get(pid)
        if p is not None and p.status == SUSPENDED and p.pending_exit is None:
            p.resume = value
            node._make_runnable(p)
        for j in range(1, self.nsched + 1):
            self._flush(j)
        if self.quiet:
            return ""
        return (_serve_text, name, pid)

    def serve_request(self, caller, req):
        """The controller's side of a process's BIF (``Emulator._serve_rpcs``)."""
        kind = req[0]
        if kind == "bif":
            return call_bif(self.backend, caller, req[1], req[2])
        if kind == "register":
            return self._register(req[1], req[2], caller)
        if kind == "unregister":
            ok = self.table.unregister(req[1])
            if ok:
                for k in range(1, self.nsched + 1):
                    self.fp_w.add(("node", k))
                    self.nodes[k].unset_reg(req[1], req[2])
            return ok
        raise BadArg(f"unknown request {kind!r}")

    # ------------------------------------------------------------ setup (SimVM)
    def settle(self) -> None:
        """Between runs: every batch ingested, every publication applied and
        every signal delivered, no process run (the emulator's paused state)."""
        self.atomic = True
        self._quiet = None
        for k in range(1, self.nsched + 1):
            self._flush(k)
        while True:
            busy = False
            for k in range(1, self.nsched + 1):
                while self.ing[k]:
                    self.atomic = False
                    self._ingest(k)
                    busy = True
                while self.pubs[k]:
                    self._publish(k)
                    busy = True
            for key in sorted(self.chans):
                while self.chans[key] and key[0] != 0:
                    self._arrive(*key)
                    busy = True
            if not busy:
                break
        self.atomic = True
        self.fp_r, self.fp_w, self.fp_p, self.fp_c = set(), set(), set(), set()

    def trace_ports(self) -> dict:
        return self.table.ports

    def open_trace_port(self, name: str | None) -> Port:
        """A tracer port of the dispatcher (``Emulator.open_trace_port``),
        numbered as the dispatcher numbers them; every replica learns it
        (its ``ports`` publication)."""
        port = self.table.add_trace_port(MemoryTracePort(), self.nsched)
        self.name_trace_port(port, name)
        self._pub_all(("ports", self.table.open_tracer_ports()))
        return port

    def spawn(self, k: int, fun, args, keep: bool, name: str | None) -> Pid:
        self._quiet = None
        node = self.nodes[k]
        pid = node.new_pid()
        node.spawn_local(pid, fun, args, kept=keep)
        self.name_top(pid, name)
        if keep:
            self.servers.add(pid)
        if fun is collector:
            self.collectors.add(pid)
        return pid  # its spawn event reaches the table at the next settle()

    def setup_print(self) -> tuple:
        """What the setup made, to tell two runs of it apart: each process
        (pid, function, trace flags and tracer, status, name), the registry
        and the tracer state.  A setup that spawns or traces otherwise on
        another run (a random number, the clock) makes another world, and
        every execution is a run of the setup."""
        # (in the order the setup made them: a setup doing the same makes
        # them in the same order; the terms compare by value)
        procs = tuple(
            (p.pid, p.initial, p.flags, p.tracer, p.status, p.reg_name) for p in self.all_procs()
        )
        return (procs, tuple(self.table.registry.items()), self.state.snapshot())

    def start_collectors(self) -> None:
        """End of setup: a collector nobody traces runs its first slice now
        (to its receive: nothing any tracer or replica can see), so it never
        takes a turn in the exploration."""
        for pid in sorted(self.collectors, key=repr):
            if self.nodes[self.owner(pid)].start_passive(pid):
                self.started.append(pid)
        self.settle()

    def bif(self, name: str, *args):
        self.settle()  # the table knows every spawn first (_sync_dispatcher)
        r = call_bif(self.backend, None, name, args)
        self.settle()
        return r

    def register(self, name, pid) -> bool:
        """``register/2`` from the setup (every spawn and signal in first)."""
        self.settle()
        return self._register(name, pid)

    def _register(self, name, pid, caller=None) -> bool:
        """``erts_register_name``: a live process not exiting but the caller
        (asked as a BIF asks it, ``smp.core.bifs.registrable``), a free name."""
        if type(pid) is not Pid or not registrable(self.backend, pid, caller):
            return False
        if not self.table.register(name, pid):
            return False
        for k in range(1, self.nsched + 1):
            self.fp_w.add(("node", k))
            self.nodes[k].set_reg(name, pid)
        return True

    def exit(self, pid, reason) -> None:
        self.nodes[self.owner(pid)].kill_from_outside(pid, reason)
        self.settle()

    def define(self, key: tuple, fn) -> None:
        for k in range(1, self.nsched + 1):
            self.nodes[k].functions[key] = fn

    def proc(self, pid):
        return self.nodes[self.owner(pid)].procs.get(pid)

    def all_procs(self):
        for k in range(1, self.nsched + 1):
            yield from self.nodes[k].procs.values()

    def all_nodes(self) -> list:
        return self.nodes[1:]


class NonsmpWorld(WorldBase):
    """The nonsmp build: one ``Node`` without a dispatcher, run in its one
    order (every message decided when it is made)."""

    smp = False

    def __init__(self, reductions: int = 200, after_timeout: int = AFTER_TIMEOUT_MS):
        super().__init__(1)
        self.after_timeout = after_timeout
        self.node = SimNode(self, 1, 1, smp=False, reductions=reductions, stderr=io.StringIO())

    def trace_ports(self) -> dict:
        return self.node.trace_ports

    def open_trace_port(self, name: str | None) -> Port:
        """A tracer port at the one scheduler, numbered as it numbers them."""
        port = self.node.add_trace_port(MemoryTracePort())
        self.name_trace_port(port, name)
        return port

    def spawn(self, k: int, fun, args, keep: bool, name: str | None) -> Pid:
        pid = self.node.new_pid()
        self.node.spawn_local(pid, fun, args, kept=keep)
        self.name_top(pid, name)
        if keep:
            self.servers.add(pid)
        if fun is collector:
            self.collectors.add(pid)
        return pid

    def bif(self, name: str, *args):
        return call_bif(LocalBackend(self.node), None, name, args)

    def register(self, name, pid) -> bool:
        try:
            self.node.register(name, pid)
        except SmpError:
            return False
        return True

    def exit(self, pid, reason) -> None:
        self.node.kill_from_outside(pid, reason)

    def define(self, key: tuple, fn) -> None:
        self.node.functions[key] = fn

    def proc(self, pid):
        return self.node.procs.get(pid)

    def all_procs(self):
        yield from self.node.procs.values()

    def all_nodes(self) -> list:
        return [self.node]

    def run(self, max_slices: int = 100_000) -> int:
        """Run until no process can and no timer the simulator fires is
        armed (the earliest fires when nothing can run, as time passes only
        while the node is idle); returns the slices run."""
        n = 0
        node = self.node
        while n < max_slices:
            if node.runq:
                node.run_some(1)
                n += 1
                continue
            due = node.armed_timers()  # (only those that fire are armed: SimNode)
            if not due:
                break
            node.fire_timer(due[0])
        return n


def check_body(fun) -> None:
    if not inspect.iscoroutinefunction(fun):
        raise BadArg(f"process body must be an async def function, not {fun!r}")
