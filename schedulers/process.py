"""The emulated Erlang process: its record and the operations its body awaits.

A process body is ``async def body(proc, *args)``.  Every operation is awaited:
it does its work in the scheduler that runs the process (``proc.node``) and
then yields an ``_Op`` to that scheduler, which counts reductions and may
schedule the process out (a preemption point), or parks it (``receive``).
The scheduler drives the coroutine with ``send``; no asyncio loop.
"""

from __future__ import annotations

from collections import deque
from itertools import islice

from schedulers.heap import Heap
from smp.core.errors import BadArg, Error, Exit
from smp.core.linktree import LinkTree
from smp.core.terms import Atom, atom_of

__all__ = [
    "Proc",
    "Op",
    "REDS",
    "WAIT",
    "SUSPEND",
    "RPC",
    "RUNNABLE",
    "WAITING",
    "EXITING",
    "EXITED",
    "SUSPENDED",
]

REDS, WAIT, SUSPEND, RPC = 0, 1, 2, 3
RUNNABLE, WAITING, EXITING, EXITED, SUSPENDED = (
    "runnable",
    "waiting",
    "exiting",
    "exited",
    "suspended",
)
am_true, am_false = Atom("true"), Atom("false")


class Op:
    __slots__ = ("kind", "arg")

    def __init__(self, kind: int, arg=None):
        self.kind = kind
        self.arg = arg

    def __await__(self):
        return (yield self)


_ONE_RED = Op(REDS, 1)


class _NoYield(tuple):
    """An awaitable that finishes at once: a reduction inside the budget.
    An empty tuple whose ``__await__`` is the tuple's own iterator, so the
    await runs no Python frame (a method returning ``iter(())`` would)."""

    __slots__ = ()
    __await__ = tuple.__iter__


_NO_YIELD = _NoYield()


class Tokened:
    """A mailbox entry that carries a seq_trace token (or ``undefined``: a
    port's message).  Any other entry is the message itself: most messages
    carry no token, and an entry that is the message costs no allocation
    (a run of trace messages enters a mailbox as it was decoded)."""

    __slots__ = ("msg", "token")

    def __init__(self, msg, token):
        self.msg = msg
        self.token = token


def message_of(entry):
    """The message of a mailbox entry."""
    return entry.msg if type(entry) is Tokened else entry


#: The empty mailbox and the empty link and port sets every process starts with.
NO_MESSAGES: tuple = ()
NOTHING: frozenset = frozenset()


class Proc:
    """An emulated process.  Runs in its scheduler's OS process.

    Also the facade a process body awaits on (``proc.send``,
    ``proc.receive``, ``proc.spawn``, ``proc.trace``, ...): one method per
    Erlang BIF or primitive a body can call, so over the project's 30
    methods a class; splitting it would split the one object a body holds.
    Most are short forwards to the node's operations (``node.op_send``, ...)."""

    __slots__ = (
        "pid",
        "node",
        "coro",
        "mailbox",
        "reds_left",
        "status",
        "links",
        "trap_exit",
        "flags",
        "tracer",
        "token",
        "seq_clock",
        "seq_lastcnt",
        "current",
        "initial",
        "reg_name",
        "heap",
        "exit_reason",
        "stack",
        "timed_out",
        "timer_gen",
        "in_runq",
        "resume",
        "pending_exit",
        "saved_calls",
        "saved_calls_n",
        "slice_start",
        "busy_ms",
        "in_mfa",
        "rpc_result",
        "group_leader",
        "ports",
        "kept",
    )

    def __init__(self, node, pid, initial):

        self.pid = pid
        self.node = node
        self.coro = None
        # the mailbox, links and ports are shared empties until first used
        # (a million idle processes: about 1.2 KB each saved)
        self.mailbox: deque | tuple = NO_MESSAGES
        self.reds_left = 0  # of this time slice (the scheduler sets it)
        self.status = RUNNABLE
        self.links: LinkTree | frozenset = NOTHING  # (its order: smp.core.linktree)
        self.trap_exit = False
        self.flags = 0
        self.tracer = None
        self.token = None
        self.seq_clock = 0
        self.seq_lastcnt = 0
        self.current = initial
        self.initial = initial
        self.reg_name = None
        self.heap = Heap()
        self.exit_reason = None
        self.stack: list = []
        self.timed_out = False  # its receive's timer fired (Node.fire_timer)
        self.timer_gen = 0
        self.in_runq = False
        self.resume = None
        self.pending_exit = None
        self.saved_calls = None
        self.saved_calls_n = 0
        self.slice_start = 0.0
        self.busy_ms = 0
        self.in_mfa = None
        self.rpc_result = None
        self.group_leader = None
        self.ports: set | frozenset = NOTHING
        self.kept: list | None = None

    def __repr__(self) -> str:
        return f"<Proc {self.pid!r} {self.status}>"

    def _reduction(self):
        """One reduction: the process goes on while its slice has some left
        (no switch to the scheduler), and yields to it when the slice is used
        up or an exit signal is pending, where the scheduler decides."""
        self.reds_left -= 1
        if self.reds_left > 0 and self.pending_exit is None:
            return _NO_YIELD
        return _ONE_RED

    def deliver(self, msg, token=None) -> None:
        """Put ``msg`` (with its seq_trace ``token``, if any) at the end of the mailbox."""
        if self.mailbox is NO_MESSAGES:
            self.mailbox = deque()
        self.mailbox.append(msg if token is None else Tokened(msg, token))

    def deliver_many(self, msgs: list) -> None:
        """Put ``msgs``, which carry no token, at the end of the mailbox."""
        if self.mailbox is NO_MESSAGES:
            self.mailbox = deque()
        self.mailbox.extend(msgs)

    def link_add(self, x) -> None:
        if self.links is NOTHING:
            self.links = LinkTree()
        self.links.add(x)

    def link_discard(self, x) -> None:
        if x in self.links:
            self.links.discard(x)

    def port_add(self, port) -> None:
        if self.ports is NOTHING:
            self.ports = set()
        self.ports.add(port)

    def port_discard(self, port) -> None:
        if port in self.ports:
            self.ports.discard(port)

    # -- identity ------------------------------------------------------------
    def self(self):
        """``self()``."""
        return self.pid

    # -- messages ----------------------------------------------------------------
    def send(self, to, msg):
        """``To ! Msg``: to a pid, a registered name, or ``{Name, Node}`` locally.

        Sent at the call; ``await`` it to count the reduction (and give way
        when the slice is used up).  A plain method returning that awaitable,
        not a coroutine: a send is the commonest call of a workload, and a
        coroutine per send cost about 0.1 us.  The await gives None (Erlang's
        ``!`` gives Msg, which the caller holds already)."""
        self.node.op_send(self, to, msg)
        return self._reduction()

    async def receive(self, timeout=None, match=None):
        """Selective receive.  Returns the first message for which ``match``
        (a predicate) is true, or ``None`` when ``timeout`` ms pass first (the
        VM's ``after`` clause, traced as ``{trace, Pid, 'receive', timeout}``)."""
        if timeout is not None and (not isinstance(timeout, int) or timeout < 0):
            raise Error(Atom("timeout_value"))
        node = self.node
        if timeout is None:
            deadline = None
        else:
            deadline = node.monotonic() + timeout / 1000
            self.timed_out = False
        idx = 0
        while True:
            mb = self.mailbox
            if match is None and mb:  # the first message: no scan
                entry = mb.popleft()
                if type(entry) is Tokened or self.saved_calls is not None:
                    node.on_message_removed(self, entry)
                    await self._reduction()
                    return message_of(entry)
                # on_message_removed's case of a message with no token, when
                # no last_calls are saved: the process has no token after it
                self.token = None
                await self._reduction()
                return entry
            if idx < len(mb):
                # one pass from where the last look stopped (indexing a deque
                # in the middle is linear: a long mailbox would be quadratic)
                for entry in islice(mb, idx, None):
                    msg = message_of(entry)
                    if match is None or match(msg):
                        del mb[idx]
                        node.on_message_removed(self, entry)
                        await self._reduction()
                        return msg
                    idx += 1
            if deadline is not None and (self.timed_out or node.monotonic() >= deadline):
                node.on_receive_timeout(self)
                await self._reduction()
                return None
            await Op(WAIT, deadline)

    async def sleep(self, ms: int):
        """``timer:sleep(Ms)``: a receive that matches nothing, with ``after``."""
        await self.receive(timeout=ms, match=_nothing)

    # -- processes ----------------------------------------------------------------
    async def spawn(self, fun, *args, scheduler=None, link=False):
        """``spawn``: the new process's pid; ``error:system_limit`` when the
        node has as many processes as its limit (``Emulator(max_processes=)``)."""
        node = self.node
        node.claim_process(self)
        try:
            pid = node.op_spawn(self, fun, args, link=link, scheduler=scheduler)
        except BaseException:
            node.unclaim_process()  # no process was made: its place is free again
            raise
        await self._reduction()
        return pid

    async def spawn_link(self, fun, *args, scheduler=None):
        return await self.spawn(fun, *args, scheduler=scheduler, link=True)

    async def link(self, pid):
        if self.node.op_link(self, pid) is not None:
            # a port of another scheduler: wait for its answer (True linked,
            # noproc)
            if await Op(RPC) is not True:
                self.node.port_link_refused(self, pid)
        await self._reduction()
        return am_true

    async def unlink(self, pid):
        self.node.op_unlink(self, pid)
        await self._reduction()
        return am_true

    async def exit(self, *args):
        """``exit(Reason)`` (one argument) or ``exit(Pid, Reason)`` (two)."""

        if len(args) == 1:
            raise Exit(args[0])
        if len(args) != 2:
            raise BadArg("exit takes (reason) or (pid, reason)")
        self.node.op_exit_signal(self, args[0], args[1])
        await self._reduction()
        return am_true

    async def register(self, name, pid=None):
        await self.node.op_register(self, name, self.pid if pid is None else pid)
        await self._reduction()
        return am_true

    async def unregister(self, name):
        await self.node.op_unregister(self, name)
        await self._reduction()
        return am_true

    async def whereis(self, name):
        r = self.node.whereis(name)
        await self._reduction()
        return Atom("undefined") if r is None else r

    async def process_flag(self, flag, value):
        old = self.node.op_process_flag(self, flag, value)
        await self._reduction()
        return old

    async def make_ref(self):
        await self._reduction()
        return self.node.make_ref()

    # -- calls -------------------------------------------------------------------
    async def call(self, module, function, args=(), local=False):
        """Call an emulated function registered with ``Emulator.define``."""
        return await self.node.op_call(self, module, function, list(args), local)

    # -- memory and time -------------------------------------------------------------
    async def allocate(self, words: int, keep: bool = False, binary: int = 0):
        """Allocate ``words`` on the heap (``keep`` = live data); GC when full.
        Live data past the largest heap the size table has raises
        ``error:system_limit`` (``schedulers.heap``: 17.x halts the node)."""
        self.node.op_allocate(self, words, keep, binary)
        await self._reduction()

    async def garbage_collect(self):
        self.node.op_gc(self)
        await self._reduction()
        return am_true

    async def busy(self, ms: int):
        """Run for ``ms`` without yielding: counted as scheduled time."""
        self.busy_ms += ms
        await self._reduction()

    async def yield_(self):
        """``erlang:yield()``: give up the rest of the time slice."""
        await Op(REDS, 1 << 30)

    # -- ports -------------------------------------------------------------------
    async def open_port(self, driver: str, **options):
        port = self.node.op_open_port(self, driver, options)
        await self._reduction()
        return port

    async def port_command(self, port, data):
        while True:
            r = self.node.op_port_command(self, port, data)
            if r is True:
                break
            if r is False:  # busy: suspended until it is not
                await Op(SUSPEND, port)
                continue
            # on another scheduler: wait for its answer (True done, False busy
            # then free again: try again, or an error)
            r = await Op(RPC)
            if isinstance(r, BaseException):
                raise r
            if r is True:
                break
        await self._reduction()
        return am_true

    async def port_close(self, port):
        self.node.op_port_close(self, port)
        await self._reduction()
        return am_true

    # -- seq_trace ---------------------------------------------------------------
    async def seq_trace(self, flag, value):
        old = self.node.op_seq_trace(self, flag, value)
        await self._reduction()
        return old

    async def seq_trace_print(self, *args):
        """``seq_trace:print(Msg)`` or ``seq_trace:print(Label, Msg)``."""
        r = self.node.op_seq_trace_print(self, *args)
        await self._reduction()
        return r

    async def get_token(self):
        await self._reduction()
        return [] if self.token is None else tuple(self.token)

    async def set_token(self, token):
        old = self.node.op_set_token(self, token)
        await self._reduction()
        return old

    # -- BIFs where the caller matters ------------------------------------------------
    async def bif(self, name: str, *args):
        """Call a trace BIF as this process (the caller is the default tracer etc.)."""
        result = await self.node.op_bif(self, name, args)
        await self._reduction()
        return result

    async def trace(self, pid_spec, how, flags):
        return await self.bif("trace", pid_spec, how, flags)

    async def trace_info(self, what, item):
        """``erlang:trace_info/2`` as this process; strings stand for atoms,
        in an ``{M, F, A}`` too."""
        return await self.bif("trace_info", _mfa_or_atom(what), _atom_of_str(item))

    async def trace_delivered(self, what):
        return await self.bif("trace_delivered", what)

    async def trace_pattern(self, mfa, match_spec, flags=()):
        """``erlang:trace_pattern/3`` as this process (``meta`` makes it the
        meta tracer); ``match_spec`` may be Erlang text or ``"x"``/``"c"``/``"cx"``."""
        if type(mfa) in (tuple, list):
            mfa = tuple(atom_of(x) for x in mfa)
        flags = [atom_of(f) for f in flags] if type(flags) in (list, tuple) else flags
        return await self.bif("trace_pattern", mfa, match_spec, flags)

    async def set_system_seq_tracer(self, tracer):
        return await self.bif("set_system_seq_tracer", tracer)

    async def system_monitor(self, *args):
        return await self.bif("system_monitor", *args)

    async def system_profile(self, *args):
        return await self.bif("system_profile", *args)


_atom_of_str = atom_of


def _mfa_or_atom(x):
    if type(x) is tuple:
        return tuple(_atom_of_str(e) for e in x)
    return _atom_of_str(x)


def _nothing(_msg) -> bool:
    return False
