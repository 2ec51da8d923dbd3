"""The dependency relation of the simulated SMP build, written down once.

Runs in the explorer's process.  The simulator (``smp.sim.world``) records
for every event it executes a *footprint*: the shared objects the event read
and wrote, and the items it produced for, or consumed from, another thread
(a batch, a queued message, a signal, a publication, a BIF request).  Two
events are dependent when one writes an object the other reads or writes
(a *conflict*: the two orders may differ in outcome, so the explorer may
have to try both) or when one consumes what the other produced (a *cause*:
only one order exists).  Everything the explorer (``smp.sim.dpor``), the
brute-force check of the tests and the reports know about dependency comes
from ``dependent``, ``conflicting`` and ``explain`` below.

The objects, named after the seed's shared data:

* ``("node", k)``: scheduler ``k``'s run queue, processes, mailboxes and
  replica of the tracer state.  One loop runs it (one scheduler thread in
  the seed), so every event on it is ordered against every other.
* ``("proc", pid)``: a process's mailbox and liveness as its scheduler sees
  them.  Every event on a scheduler also writes ``("node", k)``, except a
  message reaching a collector nobody traces: its receive is invisible, so
  that arrival touches the collector alone; an event after which the
  collector starts or stops taking messages that way (it waits, dies, is
  traced or untraced) writes it too, so the two orders are told apart.
* ``("queue",)``: the tail of ``sys_message_queue`` with the clock and the
  active-scheduler count taken under ``smq_mtx`` when a message is queued.
* ``("alive", pid)``: the dispatcher's process-table entry of ``pid`` (alive,
  carries ``F_TRACER``); for a port a process opened, whether the table
  holds it open (a valid tracer: its open and close reach the dispatcher
  in its scheduler's stream).
* ``("reg", name)``: a registered name (``error_logger`` for ERRLGR).
* ``("registry",)``: the registry whole, as the dispatcher publishes it to
  every replica when an exit or an unregister changes it: every change of a
  name writes it, that publication reads it.
* ``("state", group)``: a group of the ``sys_trace_rwmtx`` state: ``seq``
  (``system_seq_tracer``), ``monitor``, ``profile`` (with
  ``active_sched``), ``default`` (default tracer and flags).
* ``("replica", k, pid)``: whether scheduler ``k``'s replica holds ``pid``
  as dead or as a tracer (``Node.is_alive`` / ``is_tracer`` for a pid of
  another scheduler read it; the dead and tracer publications write it).
  ``("replica", k)``: that replica whole, which every change of it also
  writes and the slice in which a killed process exits reads: it stands
  for the slice the exit signal cut short (``World._cut_short``), which
  could have read any entry.
* ``("tracer_ports", k)``: the ports scheduler ``k``'s replica takes as
  valid tracers (``remote_tracer_ports``), which a port's open and close
  publish; a trace point there whose tracer is a port of another scheduler
  reads it.
* ``("pub", k)``: the order of the publications scheduler ``k``'s replica
  takes.
* ``("tail", i, k)`` and ``("head", i, k)``: the two ends of the channel of
  signals from scheduler ``i`` to ``k``: a scheduler's event that sends
  writes the tail, an arrival writes the head, and a BIF that takes the
  channel's signals at once reads the tail and writes the head.
* ``("after", k, i)``: how many of scheduler ``i``'s batches scheduler
  ``k``'s next batch waits for (the dispatcher takes it after them): a
  signal from ``i`` arriving at ``k`` raises it (a quiet one included), an
  event that makes a batch on ``k`` reads it.
* ``("btail", k)`` and ``("bhead", k)``: the two ends of scheduler ``k``'s
  stream of batches to the dispatcher, the same way: an event that makes a
  batch writes the tail, an ingest the head, and a BIF that waits until the
  dispatcher has taken the stream (a tracer it names made known) reads the
  tail and writes the head; it reads the head of each other scheduler's
  stream a batch it would take needs taken first (whether it stops there
  depends on that scheduler's ingests).

The items produced and consumed (causes) are batches, queued messages,
signals, publications, BIF requests and armed timers (``("timer", k, n)``:
the ``n``-th timer scheduler ``k`` armed fires after the event that armed
it), and ``("wake", k, n)``: the event
that gave scheduler ``k``'s idle run queue a process made its ``n``-th slice
possible, which cannot come before it.

``RULES`` names every pair of event kinds that can conflict on an object,
with the seed's reason; ``explain`` gives that reason for a race, and the
tests check that every conflict an exploration meets is one of them.
"""

from __future__ import annotations

from typing import NamedTuple

from smp.core.messages import SYS_MSG_TYPE_SEQTRACE, SYS_MSG_TYPE_SYSMON, SYS_MSG_TYPE_SYSPROF

__all__ = [
    "Event",
    "Rule",
    "TIMER_TAKEN_REASON",
    "RULES",
    "KINDS",
    "dependent",
    "conflicting",
    "causal",
    "explain",
    "STATE_GROUPS",
    "group_of_type",
    "group_of_state_op",
    "QUEUE",
    "REGISTRY",
]

#: The footprint item of the dispatcher's queue (what ingests and dispatches
#: write, and what a BIF that reads the queue reads).
QUEUE = ("queue",)

#: The footprint item of the whole registry: what a change of any name
#: writes, and what the ingest that publishes the registry whole reads.
REGISTRY = ("registry",)

#: The kinds of events, each one step of one thread of the simulated build.
KINDS = ("slice", "arrive", "publish", "bif", "ingest", "dispatch", "timer")


class Event:
    """One executed step: its thread (``S1``, ``I2``, ``D``, ``A0>2``, ``P1``,
    ``R<0.81.0>``, ``T<0.81.0>``), its kind, its footprint and what it did,
    in words (``label``).

    The words are read only for reports (an outcome's first execution, the
    races that made it, a shrunk schedule), so a step gives them as the
    text or as ``(function, *arguments)`` that make it, with arguments that
    do not change after the step; they are made when first read.  Two
    events are equal when their threads, kinds, footprints and words are."""

    __slots__ = ("thread", "kind", "reads", "writes", "produces", "consumes", "_label")

    def __init__(
        self,
        thread: str,
        kind: str,
        reads: frozenset,
        writes: frozenset,
        produces: frozenset,
        consumes: frozenset,
        label: str | tuple,
    ):
        self.thread = thread
        self.kind = kind
        self.reads = reads
        self.writes = writes
        self.produces = produces
        self.consumes = consumes
        self._label = label

    @property
    def label(self) -> str:
        text = self._label
        if type(text) is not str:
            text = self._label = text[0](*text[1:])
        return text

    def _fields(self) -> tuple:
        return (self.thread, self.kind, self.reads, self.writes, self.produces, self.consumes)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if type(other) is not Event:
            return NotImplemented
        # (the footprints first: most unequal events differ there, unformatted)
        return self._fields() == other._fields() and self.label == other.label

    def __hash__(self) -> int:
        return hash((*self._fields(), self.label))

    def __reduce__(self):
        # (to another process: the words made here, not what makes them)
        return (Event, (*self._fields(), self.label))

    def __repr__(self) -> str:
        return (
            "Event(thread=%r, kind=%r, reads=%r, writes=%r, produces=%r, consumes=%r, label=%r)"
            % (
                *self._fields(),
                self.label,
            )
        )


#: why a thread whose work a BIF took is tried before that BIF
TAKEN_REASON = (
    "the BIF took what this thread would have taken (a batch into the queue, a "
    "signal into its scheduler), so it never stepped here; the order where it "
    "steps first is tried"
)


#: why a timer a message or signal cancelled is tried before it
TIMER_TAKEN_REASON = (
    "a message or signal woke the process (or killed it) before its receive timed "
    "out, so the timeout never fired here; the order where it fires first is tried"
)


class Rule(NamedTuple):
    kinds: frozenset  # one or two event kinds
    obj: str  # the first element of the object
    reason: str


def _r(a: str, b: str, obj: str, reason: str) -> Rule:
    return Rule(frozenset((a, b)), obj, reason)


_NODE_KINDS = ("slice", "arrive", "publish", "bif")

#: Every pair of event kinds that conflict, on which object, and why (the seed).
RULES: tuple[Rule, ...] = (
    *(
        _r(
            a,
            b,
            "node",
            "one scheduler thread runs its processes, takes signals and deliveries into "
            "their mailboxes and applies replica updates one at a time: two sends to one "
            "mailbox, a message and the slice that receives it, a dead-tracer notice and "
            "erts_check_my_tracer_proc at schedule-in all depend on the order",
        )
        for i, a in enumerate(_NODE_KINDS)
        for b in _NODE_KINDS[i:]
    ),
    *(
        _r(
            a,
            b,
            "proc",
            "two messages into one mailbox (erts_queue_message): a collector's received "
            "list is in arrival order; and its exit against a message reaching it",
        )
        for i, a in enumerate(_NODE_KINDS)
        for b in _NODE_KINDS[i:]
    ),
    _r(
        "ingest",
        "ingest",
        "queue",
        "enqueue_sys_msg takes smq_mtx: the queue order, each message's timestamp and "
        "the active-scheduler count profile_scheduler reports are fixed in that order",
    ),
    _r(
        "ingest",
        "bif",
        "queue",
        "erts_queue_error_logger_message from a BIF is queued under smq_mtx among the "
        "schedulers' messages",
    ),
    _r(
        "ingest",
        "dispatch",
        "alive",
        "a tracer's death (or its tracer mark, or a tracer port's close) and every "
        "message addressed to it: sys_msg_dispatcher_func checks the receiver alive and "
        "ERTS_TRACE_FLG_TRACER (a port: erts_is_valid_tracer_port) when it takes the "
        "message, not when the message was made",
    ),
    _r(
        "ingest",
        "dispatch",
        "reg",
        "ERRLGR messages go to whatever is registered as error_logger when dispatched; "
        "an exiting process unregisters its name",
    ),
    _r(
        "ingest",
        "dispatch",
        "state",
        "erts_trace_check_exiting resets the seq tracer, monitor or profiler that exits, "
        "which SEQTRACE/SYSMON/SYSPROF messages read at dispatch",
    ),
    _r(
        "ingest",
        "bif",
        "state",
        "a process exiting while it is the seq tracer, monitor or profiler resets it "
        "(exiting_reset) against a BIF setting or reading it; profile_scheduler's "
        "active count against erts_system_profile_setup_active_schedulers",
    ),
    _r(
        "ingest",
        "bif",
        "alive",
        "a BIF checks its tracer against the process table (erts_set_system_seq_tracer "
        "refuses a dead one) while the tracer's exit is being recorded",
    ),
    _r(
        "dispatch",
        "bif",
        "state",
        "the seq tracer and SEQTRACE messages (the monitor and SYSMON, the profiler and "
        "SYSPROF): a BIF takes sys_trace_rwmtx for writing between two dispatches, and "
        "sys_msg_disp_failure resets the receiver a BIF may have just replaced",
    ),
    _r(
        "dispatch",
        "bif",
        "alive",
        "a BIF marks a tracer (F_TRACER) that a queued TRACE message is checked against",
    ),
    _r(
        "dispatch",
        "dispatch",
        "state",
        "one dispatcher thread: its decisions are in queue order",
    ),
    _r(
        "ingest",
        "ingest",
        "alive",
        "process-table events of two schedulers on one pid (its spawn and its exit)",
    ),
    _r(
        "ingest",
        "ingest",
        "reg",
        "two schedulers' unregister events on one name",
    ),
    _r(
        "ingest",
        "ingest",
        "state",
        "two exiting processes reset one group of the tracer state",
    ),
    _r(
        "bif",
        "bif",
        "state",
        "two BIFs take sys_trace_rwmtx for writing: the last one wins",
    ),
    _r(
        "bif",
        "bif",
        "alive",
        "two BIFs on one process-table entry",
    ),
    _r(
        "bif",
        "bif",
        "reg",
        "two BIFs on one registered name",
    ),
    *(
        _r(
            a,
            b,
            "registry",
            "the dispatcher publishes the whole registry to the replicas when an exit or an "
            "unregister changes it: a name registered or removed before it is in what every "
            "replica takes, one after it is not",
        )
        for a, b in (("ingest", "ingest"), ("ingest", "bif"), ("bif", "bif"))
    ),
    _r(
        "bif",
        "dispatch",
        "reg",
        "register/unregister of error_logger between ERRLGR dispatches",
    ),
    _r(
        "bif",
        "ingest",
        "reg",
        "a BIF's register against an exiting process's unregister",
    ),
    *(
        _r(
            "publish",
            b,
            "replica",
            "a dead-pid notice or tracer mark reaches scheduler k's replica, which a send "
            "(is_alive on a remote pid) or erts_check_my_tracer_proc at schedule-in reads",
        )
        for b in ("slice", "arrive", "bif")
    ),
    *(
        _r(
            a,
            b,
            "pub",
            "the dispatcher publishes state changes, dead pids and tracer marks in the "
            "order it makes them; a replica applies them in that order",
        )
        for a, b in (
            ("ingest", "ingest"),
            ("ingest", "dispatch"),
            ("dispatch", "dispatch"),
            ("bif", "ingest"),
            ("bif", "dispatch"),
            ("bif", "bif"),
        )
    ),
    *(
        _r(
            a,
            b,
            "after",
            "one sys_message_queue: what scheduler i enqueued before it sent a signal is "
            "ahead of what the receiving scheduler enqueues after taking it, not of what "
            "it enqueued before (a batch made after the arrival, or after a BIF took the "
            "signal, waits for i's batches)",
        )
        for a, b in (
            ("arrive", "slice"),
            ("arrive", "arrive"),
            ("arrive", "bif"),
            ("bif", "slice"),
            ("bif", "bif"),
        )
    ),
    _r(
        "slice",
        "arrive",
        "btail",
        "the events of one scheduler add their batches to its stream in the order they "
        "run (one scheduler thread enqueues its trace messages one after the other)",
    ),
    _r(
        "arrive",
        "arrive",
        "btail",
        "the events of one scheduler add their batches to its stream in the order they "
        "run (one scheduler thread enqueues its trace messages one after the other)",
    ),
    *(
        _r(
            "bif",
            b,
            "replica",
            "a trace BIF that finds its tracee held by a tracer its replica still thinks "
            "alive takes that tracer as dead at that scheduler (17.x looks it up in the one "
            "process table), which a send or erts_check_my_tracer_proc there reads",
        )
        for b in ("slice", "arrive", "bif")
    ),
    _r(
        "bif",
        "bif",
        "queue",
        "two BIFs queue a message each under smq_mtx (erts_queue_error_logger_message, "
        "trace_delivered's message): the queue order",
    ),
    *(
        _r(
            a,
            "bif",
            "btail",
            "a BIF that makes the dispatcher know a tracer (its spawn, its tracer mark) "
            "waits until the dispatcher has taken its scheduler's stream: what was made "
            "before it, not what is made after",
        )
        for a in ("slice", "arrive", "bif")
    ),
    *(
        _r(
            a,
            "bif",
            "bhead",
            "a batch is taken into the queue by its ingest or by a BIF that waits for it, not "
            "both; and a BIF takes another scheduler's batches first only if their ingest "
            "has not",
        )
        for a in ("ingest", "bif")
    ),
    *(
        _r(
            a,
            "bif",
            "tail",
            "a BIF that waits for the signals between schedulers (trace(all | existing): "
            "17.x blocks thread progress, so a spawn is done or not begun; a pid the "
            "caller just spawned elsewhere: 17.x creates it before spawn returns) takes "
            "what was sent before it, not what is sent after",
        )
        for a in ("slice", "arrive", "bif")
    ),
    *(
        _r(
            a,
            "bif",
            "head",
            "a signal arrives on its own or is taken by a BIF that waits for it, not both",
        )
        for a in ("arrive", "bif")
    ),
)

_TIMER_NODE = (
    "a timer fires on its scheduler's thread between two of that scheduler's events: a "
    "receive's timeout (set by wait_timeout) makes its process runnable and it times out, "
    "unless a message or signal reached it first and woke it (the timeout is then "
    "cancelled); a port's busy spell ends (set_busy_port off) and resumes the processes "
    "a command to it suspended; where it joins the run queue decides who runs next"
)

RULES += (
    *(_r("timer", b, "node", _TIMER_NODE) for b in (*_NODE_KINDS, "timer")),
    *(_r("timer", b, "proc", _TIMER_NODE) for b in (*_NODE_KINDS, "timer")),
    *(
        _r(
            "timer",
            b,
            "btail",
            "the events of one scheduler add their batches to its stream in the order they "
            "run: a process made runnable by its timer is profiled active "
            "(profile_runnable_procs) after what ran before it",
        )
        for b in ("slice", "arrive", "bif", "timer")
    ),
    *(
        _r(
            "timer",
            b,
            "after",
            "one sys_message_queue: what a timer's event enqueues after a signal from "
            "scheduler i arrived waits for what i enqueued before sending it",
        )
        for b in ("arrive", "bif")
    ),
    *(
        _r(
            a,
            b,
            "tail",
            "the events of one scheduler send their signals to a peer in the order they run "
            "(one scheduler thread; the channel between two schedulers is FIFO): a port's "
            "answer to a command or a link from another scheduler among the signals its "
            "processes send",
        )
        for a, b in (
            ("slice", "arrive"),
            ("arrive", "arrive"),
            ("timer", "slice"),
            ("timer", "arrive"),
            ("timer", "timer"),
        )
    ),
    _r(
        "timer",
        "bif",
        "tail",
        "a port's busy spell ending tells the callers on other schedulers to try again: a "
        "BIF that takes the channel's signals takes what was sent before it",
    ),
)

_BY_KEY = {(r.kinds, r.obj): r for r in RULES}

#: The groups of ``smp.core.state.Snapshot`` fields, as the dispatcher reads them.
STATE_GROUPS = {
    "default_tracer": "default",
    "default_trace_flags": "default",
    "default_cpu_timestamp": "default",
    "system_seq_tracer": "seq",
    "system_monitor": "monitor",
    "long_gc": "monitor",
    "long_schedule": "monitor",
    "large_heap": "monitor",
    "busy_port": "monitor",
    "busy_dist_port": "monitor",
    "system_profile": "profile",
    "profile_scheduler": "profile",
    "profile_runnable_procs": "profile",
    "profile_runnable_ports": "profile",
    "profile_exclusive": "profile",
}

_TYPE_GROUP = {
    SYS_MSG_TYPE_SEQTRACE: "seq",
    SYS_MSG_TYPE_SYSMON: "monitor",
    SYS_MSG_TYPE_SYSPROF: "profile",
}


def group_of_type(type_: int) -> str | None:
    """The state group a dispatch of a message of ``type_`` reads (its receiver
    is looked up now: the seq tracer, the monitor, the profiler), or None."""
    return _TYPE_GROUP.get(type_)


def group_of_state_op(op: str) -> str:
    """The state group a BIF's ``bk_state`` operation touches."""
    if "seq_tracer" in op:
        return "seq"
    if "monitor" in op:
        return "monitor"
    if "profile" in op:
        return "profile"
    return "default"


def causal(a: Event, b: Event) -> bool:
    """One consumed what the other produced: only one order exists."""
    return not (a.produces.isdisjoint(b.consumes) and b.produces.isdisjoint(a.consumes))


def conflicting(a: Event, b: Event) -> bool:
    """One writes what the other reads or writes: both orders exist and may differ."""
    aw, bw = a.writes, b.writes
    return not (aw.isdisjoint(bw) and aw.isdisjoint(b.reads) and bw.isdisjoint(a.reads))


def dependent(a: Event, b: Event) -> bool:
    """Events of one thread, or with a conflict or a cause between them."""
    return a.thread == b.thread or conflicting(a, b) or causal(a, b)


def explain(a: Event, b: Event) -> list[str]:
    """The seed's reasons for the conflicts between ``a`` and ``b``, one per
    object they share; an object no rule covers says so (the tests fail on it)."""
    shared = (a.writes & (b.writes | b.reads)) | (b.writes & a.reads)
    out = []
    for obj in sorted(shared, key=repr):
        rule = _BY_KEY.get((frozenset((a.kind, b.kind)), obj[0]))
        what = " ".join(str(x) for x in obj)
        out.append(f"{what}: {rule.reason}" if rule else f"{what}: no rule for {a.kind}/{b.kind}")
    return out
