"""``smp.Emulator``: the public API, and the controller that supervises the
scheduler and dispatcher processes.

Runs in the user's process.  It starts the OS processes with ``multiprocess``
(the schedulers; in smp mode also the dispatcher), talks to them over
ZeroMQ, and between ``run()`` calls keeps them paused, so everything set up
between runs takes effect before any emulated process executes.  ``run()``
resumes the schedulers and returns once the whole system is quiet: every
scheduler idle with no timer pending, every message between schedulers
received, every system message taken by the dispatcher and dispatched (or
parked behind ``hold_dispatcher()``), checked twice with the same counts.
It also serves the BIFs that processes call in smp mode.
"""

from __future__ import annotations

import inspect
import itertools
import shutil
import signal
import sys
import time
import warnings
from typing import Any

import multiprocess
import zmq

from dispatcher.server import dispatcher_main
from schedulers.procs import DEFAULT_MAX_PROCESSES, MAX_MAX_PROCESSES
from schedulers.worker import scheduler_main
from smp.backend import OutOfTime, SmpBackend
from smp.core.bifs import call_bif
from smp.core.errors import (
    BadArg,
    DispatcherLost,
    EmulatorTimeout,
    Error,
    ProtocolError,
    SchedulerLost,
    SmpError,
    StartupError,
)
from smp.core.matchspec import compile_match_spec
from smp.core.placement import owner
from smp.core.state import STATE_READS
from smp.core.terms import Atom, Pid, Port
from smp.wire import rundir
from smp.wire.codec import MAX_FRAME, loads_frame
from smp.wire.curve import (
    Authenticator,
    InsecureWarning,
    curve_client,
    curve_server,
    describe_peer,
    ephemeral_security,
    new_routing_id,
    recv_from,
    server_security,
)
from smp.wire.protocol import Bye, Heartbeat, Hello, Ready, Reply, Request, Rpc, Welcome, frame_kind

__all__ = ["Emulator"]

am_all, am_existing, am_new, am_true = Atom("all"), Atom("existing"), Atom("new"), Atom("true")

# Time bounds.  run(timeout=T) and run_for(T) end within T + 1 s: the run
# loop's own calls end by T + RUN_GRACE_S, a BIF that has begun to change
# something may finish until T + BIF_GRACE_S, the pause after it until
# T + PAUSE_END_S.  close() ends within CLOSE_S, whatever the processes do.
RUN_GRACE_S = 0.25
BIF_GRACE_S = 0.6
PAUSE_END_S = 0.85
CLOSE_S = 5.0
#: A remote scheduler that sends no word for this long is lost (it sends a
#: heartbeat every second; it stops itself when the dispatcher is silent as long).
REMOTE_SILENCE_S = 5.0


def tcp_endpoints(base: str) -> dict:
    """Endpoints of a controller at ``tcp://ADDR:PORT``: the controller on
    PORT, the dispatcher's ingest on PORT+1, its control on PORT+2 and its
    three state publishers on PORT+3..PORT+5 (schedulers elsewhere derive
    them from the one address they are given)."""
    host, port = base[6:].rsplit(":", 1)
    port = int(port)
    ep = lambda n: f"tcp://{host}:{port + n}"  # noqa: E731
    return {"ctl": ep(0), "ingest": ep(1), "disp_ctl": ep(2), "pub": [ep(3), ep(4), ep(5)]}


_STATUS = {
    "idle": bool,
    "timer": bool,
    "backlog": int,
    "runq": int,
    "sys_made": int,
    "sys_items": int,
    "deliveries": int,
    "busy": list,
    "peer_sent": list,
    "peer_recv": list,
}


def _reply_ok(cmd: str, value, nsched: int) -> bool:
    """The replies the controller's loops read field by field have the shape
    they read (a scheduler's status)."""
    if cmd != "status":
        return True
    return (
        type(value) is dict
        and all(type(value.get(f)) is t for f, t in _STATUS.items())
        and type(value.get("timer_in")) in (int, float, type(None))
        and all(
            len(value[f]) == nsched + 1 and all(type(x) is int for x in value[f])
            for f in ("peer_sent", "peer_recv")
        )
    )


class _Abandon(Exception):
    """close() before start-up finished: nothing to ask the processes."""


#: Commands that change something: once a BIF has sent one, it is finished
#: (with BIF_GRACE_S) rather than put back to be served again in the next run().
_CHANGES = frozenset(
    {
        "trace_apply",
        "pattern",
        "set_reg",
        "unset_reg",
        "register",
        "unregister",
        "error_logger",
        "trace_delivered",
        "exit",
        "spawn",
        "spawn_many",
        "define",
        "open_trace_port",
        "trace_port_call",
    }
)


class _RemoteProc:
    """What the supervisor knows of a scheduler on another host: it is alive
    while its heartbeats (or any other frame) keep coming; a link down for
    ``REMOTE_SILENCE_S`` makes it lost, as a local scheduler that died."""

    def __init__(self, emu, k):
        self.pid = emu.scheduler_hosts.get(k, (None, None))[1]
        self.exitcode = None
        self.name = f"remote-scheduler-{k}"
        self._emu, self._k = emu, k

    def silent_for(self) -> float:
        """Seconds since the last frame from this scheduler (frames waiting on
        the controller's socket are taken first)."""
        emu = self._emu
        if not emu._closed:
            emu._pump(0)
        return time.monotonic() - emu._heard.get(self._k, time.monotonic())

    def is_alive(self) -> bool:
        if self._k in self._emu.lost_schedulers:
            return False
        return self.silent_for() <= REMOTE_SILENCE_S

    def join(self, timeout=None) -> None:
        return None


def smp_quiet(sts: dict, d: dict, live: list) -> bool:
    """smp, once every live scheduler is idle: is the whole system quiet?
    ``sts``: each scheduler's status, ``d``: the dispatcher's.  Every signal
    between schedulers arrived; the dispatcher took every item each scheduler
    sent (messages and table events: an exit, a new tracer, so a release or a
    step after ``run()`` sees the table as it is); and, unless it is held, it
    dispatched its queue and each scheduler took what was sent to it."""
    return (
        all(sts[j]["peer_sent"][k] == sts[k]["peer_recv"][j] for j in live for k in live)
        and all(d["ingested_items"][k] == sts[k]["sys_items"] for k in live)
        and (d["held"] or (d["queued"] == 0 and not d["dispatching"]))
        and (d["held"] or all(d["delivered_to"][k] == sts[k]["deliveries"] for k in live))
    )


def _atom(x):
    return Atom(x) if isinstance(x, str) else x


def _flags(flags):
    """Flag lists as Python users write them: strings for atoms.  Anything
    but a list (or a tuple) of flags is a ``BadArg``, as a flag list that is
    not a proper list is ``badarg`` in the VM."""
    if type(flags) not in (list, tuple):
        raise BadArg(f"flags must be a list, not {flags!r}")
    out = []
    for f in flags:
        if isinstance(f, str):
            out.append(Atom(f))
        elif isinstance(f, tuple) and len(f) == 2 and isinstance(f[0], str):
            out.append((Atom(f[0]), f[1]))
        else:
            out.append(f)
    return out


def _spec(x):
    if isinstance(x, str):
        return Atom(x)
    return x


async def collector(proc):
    """A process that receives forever; the emulator keeps what it receives."""
    while True:
        await proc.receive()


class Emulator:
    """An emulated VM: ``mode="nonsmp"`` (one scheduler, no dispatcher) or
    ``mode="smp"`` with ``schedulers=N`` and a dispatcher process.

    Endpoints are ipc in an owner-only directory, or with ``bind="tcp://..."``
    tcp with CURVE (``keys=DIR`` when ``remote_schedulers`` join; a key pair
    made for the run otherwise); ``insecure=True`` runs tcp without CURVE and
    warns (``InsecureWarning``).

    ``max_processes`` is the node's process limit, 17.x's ``+P`` (default
    262144, as 17.x's): a spawn past it raises ``error:system_limit`` in the
    spawning process, and ``spawn`` here raises ``smp.Error`` with the reason
    ``system_limit`` (``spawn_many``: each scheduler spawns its share whole
    or none of it).  The count is node-wide, over every local scheduler
    (``schedulers.procs.ProcessLimit``); with schedulers on other hosts it is
    not enforced."""

    def __init__(
        self,
        mode: str = "nonsmp",
        schedulers: int | None = None,
        *,
        reductions: int = 200,
        placement: str = "round_robin",
        start_timeout: float = 10.0,
        endpoint_dir: str | None = None,
        journal: str | None = None,
        bind: str | None = None,
        remote_schedulers: int = 0,
        curve: bool | None = None,
        keys: str | None = None,
        advertise: str | None = None,
        insecure: bool = False,
        max_processes: int = DEFAULT_MAX_PROCESSES,
    ):
        if mode not in ("smp", "nonsmp"):
            raise BadArg(f"mode must be 'smp' or 'nonsmp', not {mode!r}")
        if schedulers is None:
            schedulers = 1 if mode == "nonsmp" else 2
        if type(schedulers) is not int or schedulers < 1:
            raise BadArg(f"schedulers must be >= 1, not {schedulers!r}")
        if mode == "nonsmp" and schedulers != 1:
            raise BadArg("nonsmp mode has exactly one scheduler")
        if type(reductions) is not int or reductions < 1:
            raise BadArg(f"reductions must be >= 1, not {reductions!r}")
        if type(max_processes) is not int or not 1 <= max_processes <= MAX_MAX_PROCESSES:
            raise BadArg(f"max_processes must be in 1..{MAX_MAX_PROCESSES}, not {max_processes!r}")
        if placement not in ("round_robin", "local"):
            raise BadArg(f"placement must be 'round_robin' or 'local', not {placement!r}")
        if journal is not None and mode != "smp":
            raise BadArg("a journal records the dispatcher's queue: it needs smp mode")
        if type(remote_schedulers) is not int or not 0 <= remote_schedulers <= schedulers:
            raise BadArg(f"remote_schedulers must be in 0..{schedulers}, not {remote_schedulers!r}")
        if remote_schedulers and (bind is None or mode != "smp"):
            raise BadArg("schedulers on other hosts need smp mode and bind='tcp://ADDR:PORT'")
        if bind is not None and not (
            bind.startswith("tcp://") and bind.rsplit(":", 1)[-1].isdigit()
        ):
            raise BadArg(f"bind must be tcp://ADDR:PORT, not {bind!r}")

        if curve is None:  # tcp, loopback included, is CURVE unless insecure=True
            curve = bind is not None and not insecure
        if bind is not None and not curve:
            if not insecure:
                raise BadArg(
                    "tcp without CURVE needs insecure=True: any process that can "
                    "reach the ports could send the emulator frames"
                )
            warnings.warn(
                f"{bind}: tcp without CURVE (insecure=True): any process that can "
                "reach these ports can send the emulator frames",
                InsecureWarning,
                stacklevel=2,
            )
        if curve and keys is None and remote_schedulers:
            raise BadArg(
                "CURVE is on for tcp endpoints: give keys=DIR (smp-emu keygen DIR), "
                "or insecure=True to run unauthenticated"
            )
        self.security = (
            (server_security(keys) if keys is not None else ephemeral_security()) if curve else None
        )
        self.insecure = bool(bind is not None and not curve)
        self.remote_schedulers = remote_schedulers
        self.journal = journal
        self.mode = mode
        self.max_processes = max_processes
        self.smp = mode == "smp"
        self.nsched = schedulers
        self._closed = False
        self._closing = False
        self._started = False
        self._req = itertools.count(1)
        self._replies: dict[int, tuple] = {}
        self._rpcs: list = []
        self._byes: dict[int, dict] = {}
        #: After close(): each scheduler's last statistics, and the dispatcher's.
        self.final_statistics: dict[int, dict] = self._byes
        self.final_dispatcher_statistics: dict | None = None
        self.backend = SmpBackend(self)
        self._running = False  # inside run(), between resume and pause
        self._last_made = 0  # system messages the schedulers had made at the last check
        self._closing_after_loss = False  # close() because a process was lost
        self._rr = 0
        self._procs: list = []
        self._run_count = 0
        #: Schedulers that died, with why: {scheduler id: description}.
        self.lost_schedulers: dict[int, str] = {}
        self._new_losses: list[str] = []
        # owner-only, held by every process of this emulator: the last to exit
        # removes it (and runs whose processes were all killed are swept first)
        self._dir, self._dir_hold = rundir.make(endpoint_dir)
        d = self._dir
        if bind is None:
            self.endpoints = {
                "ctl": f"ipc://{d}/ctl",
                "ingest": f"ipc://{d}/ingest",
                "disp_ctl": f"ipc://{d}/disp",
                "pub": [f"ipc://{d}/pub{i}" for i in range(3)],
                "inbox": f"ipc://{d}/s{{}}",
            }
        else:
            self.endpoints = tcp_endpoints(bind)
            host = bind[6:].rsplit(":", 1)[0]
            self.endpoints["inbox"] = f"tcp://{host}:*"
            self.endpoints["advertise_host"] = advertise or (
                host if host not in ("0.0.0.0", "*") else "127.0.0.1"
            )
        self.endpoints["start_timeout"] = start_timeout
        self.endpoints["dir"] = d
        self.ctx = zmq.Context()
        self.auth = None
        self.ctl = self.ctx.socket(zmq.ROUTER)
        self.ctl.setsockopt(zmq.LINGER, 1000)
        self.ctl.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.ctl.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME)
        if self.security:
            self.auth = Authenticator(self.ctx, self.security["allowed"])
            curve_server(self.ctl, self.security)
        self._ident: dict[int, bytes] = {}
        self._by_ident: dict[bytes, int] = {}
        self._keys: dict[int, str | None] = {}
        self._remote: set[int] = set()
        self._remote_ids: set[bytes] = set()
        self._disp_ident = new_routing_id()
        self._pending: dict[int, tuple[int, str]] = {}  # request id -> (scheduler, command)
        self._abandoned: set[int] = set()  # requests given up on: their late replies are dropped
        self._heard: dict[int, float] = {}  # remote scheduler -> when a frame last came from it
        self._hb_ids: dict[bytes, int] = {}  # routing ids of their heartbeats
        # run(): every wait of the controller ends by this time (None: no bound)
        self._budget: float | None = None
        self._bif_budget: float | None = None
        self._serving = None  # the BIF request being served
        self._rpc_changed = False  # ... has sent a command that changes something
        self._reply_after_resume = False  # ... answers after the next run()'s resume
        self._late_replies: list = []  # (scheduler, pid, value) for the next run()
        self._last_status: dict[int, dict] = {}  # each scheduler's latest status
        # closures travel (dill) only on a channel that authenticates the
        # controller to the scheduler: ipc in the owner-only directory, or CURVE
        self._code_ok = not self.insecure
        #: Frames refused on the controller's sockets (counted, logged, ignored).
        self.bad_frames = 0
        self.last_bad_frame = ""
        self.ctl.bind(self.endpoints["ctl"])
        self.disp = None
        try:
            self._start(start_timeout, {"reductions": reductions, "placement": placement})
        except BaseException:
            self.close()
            raise

    # ================================================================ processes
    def _start(self, timeout: float, options: dict) -> None:
        mp = multiprocess.get_context("fork")
        if not self.remote_schedulers:  # the node's process table: see ProcessLimit
            limit = self.max_processes
            options = {**options, "max_processes": (limit, mp.Semaphore(limit))}
        local_sec = None
        if self.security:
            sec = self.security
            local_sec = {
                "public": sec["public"],
                "secret": sec["secret"],
                "server_public": sec["server_public"],
            }
        if self.smp:
            ready = mp.Event()
            p = mp.Process(
                target=dispatcher_main,
                args=(
                    self.nsched,
                    self.endpoints,
                    ready,
                    self.journal,
                    self.security,
                    self._disp_ident,
                ),
                name="smp-dispatcher",
                daemon=True,
            )
            self._start_process(p)
            if not ready.wait(timeout):
                raise StartupError(f"dispatcher did not start within {timeout:g} s")
            self.dispatcher_pid = p.pid
            self.disp = self.ctx.socket(zmq.DEALER)
            self.disp.setsockopt(zmq.ROUTING_ID, self._disp_ident)
            self.disp.setsockopt(zmq.LINGER, 1000)
            curve_client(self.disp, local_sec)
            self.disp.connect(self.endpoints["disp_ctl"])

        n_local = self.nsched - self.remote_schedulers
        local_ids = {k: new_routing_id() for k in range(1, n_local + 1)}
        for k in range(1, n_local + 1):
            p = mp.Process(
                target=scheduler_main,
                args=(k, self.smp, self.endpoints, options, local_sec, local_ids[k]),
                name=f"smp-scheduler-{k}",
                daemon=True,
            )
            self._start_process(p)
        # hello from every scheduler (local ones know their id; the others get one)
        hellos: dict[int, tuple] = {}
        next_remote = n_local + 1
        deadline = time.monotonic() + timeout
        while len(hellos) < self.nsched:
            left = deadline - time.monotonic()
            if left <= 0 or not self.ctl.poll(int(left * 1000) + 1):
                dead = [p.name for p in self._procs if not p.is_alive()]
                raise StartupError(
                    f"{self.nsched - len(hellos)} scheduler(s) did not start within {timeout:g} s"
                    + (f" (died: {', '.join(dead)})" if dead else "")
                    + (
                        f" ({self.nsched - n_local - max(0, next_remote - n_local - 1)} remote "
                        f"scheduler(s) never connected to {self.endpoints['ctl']})"
                        if self.remote_schedulers
                        else ""
                    )
                )
            ident, parts, user = recv_from(self.ctl, self.security is not None)
            try:
                k, inbox_ep, os_pid, host, key = self._startup_frame(parts, Hello)
                if k is None and next_remote <= self.nsched and ident not in self._remote_ids:
                    if self.smp and not (type(inbox_ep) is str and inbox_ep.startswith("tcp://")):
                        raise ProtocolError("hello without a tcp inbox address")
                    if self.security is not None and (user is None or key != user.encode()):
                        raise ProtocolError("hello with a key that is not the sender's")
                    k = next_remote
                    next_remote += 1
                    self._remote.add(k)
                    self._remote_ids.add(ident)
                elif (
                    type(k) is not int
                    or not 1 <= k <= n_local
                    or ident != local_ids[k]
                    or k in hellos
                ):
                    raise ProtocolError(f"hello as scheduler {k!r}, which the sender is not")
                key = user.encode() if user is not None else None
            except ProtocolError as e:
                self._bad(describe_peer(ident, user), parts, e)
                continue
            hellos[k] = (ident, inbox_ep, os_pid, host, key)
        inbox_map = {k: (h[1], h[4]) for k, h in hellos.items()}
        self.scheduler_hosts = {k: (h[3], h[2]) for k, h in hellos.items()}
        self._keys = {k: (h[4].decode() if h[4] is not None else None) for k, h in hellos.items()}
        ks = sorted(hellos)
        # routing ids: each scheduler's to the dispatcher's ingest, the
        # dispatcher's two threads' to each inbox, each scheduler's to each
        # other's; a receiver takes frames from the ids it is given alone
        ingest_ids = {k: new_routing_id() for k in ks}
        disp_ids = {k: (new_routing_id(), new_routing_id()) for k in ks}
        peer_ids = {(j, k): new_routing_id() for j in ks for k in ks if j != k}
        server_key = self.security["public"] if self.security else None
        if self.smp:
            self._disp_call(
                "set_inboxes",
                inbox_map,
                {
                    "ingest": {ingest_ids[k]: k for k in ks},
                    "out": disp_ids,
                    "keys": {k: hellos[k][4] for k in ks},
                },
            )
        allowed = sorted(self.security["allowed"]) if self.security else []
        # a remote scheduler's heartbeats come on a socket of their own
        self._hb_ids = {new_routing_id(): k for k in sorted(self._remote)}
        hb_ids = {k: ident for ident, k in self._hb_ids.items()}
        for k, h in hellos.items():
            self._ident[k] = h[0]
            dpid = None if (k in self._remote or not self.smp) else self.dispatcher_pid
            ids = {
                "ingest": ingest_ids[k],
                "out": {j: peer_ids[(k, j)] for j in ks if j != k},
                "in": {
                    **{peer_ids[(j, k)]: j for j in ks if j != k},
                    disp_ids[k][0]: 0,
                    disp_ids[k][1]: 0,
                },
                "keys": {0: server_key, **{j: hellos[j][4] for j in ks}},
                **({"hb": hb_ids[k]} if k in hb_ids else {}),
            }
            self.ctl.send_multipart(
                [
                    h[0],
                    Welcome(
                        k,
                        self.nsched,
                        inbox_map,
                        allowed,
                        dpid,
                        k not in self._remote,
                        ids if self.smp else {},
                    ).encode(),
                ]
            )
        self._by_ident = {h[0]: k for k, h in hellos.items()}
        self._heard = {k: time.monotonic() for k in self._remote}
        ready: set[int] = set()
        while len(ready) < self.nsched:
            left = deadline - time.monotonic()
            if left <= 0 or not self.ctl.poll(int(left * 1000) + 1):
                raise StartupError(
                    f"{self.nsched - len(ready)} scheduler(s) did not get ready "
                    f"within {timeout:g} s"
                )
            ident, parts, user = recv_from(self.ctl, self.security is not None)
            try:
                if ident in self._hb_ids:  # heartbeats start before the ready
                    self._take_heartbeat(self._hb_ids[ident], parts, user)
                    continue
                sched = self._startup_frame(parts, Ready).sched
                if sched != self._by_ident.get(ident) or not self._key_ok(sched, user):
                    raise ProtocolError(f"ready as scheduler {sched!r}, which the sender is not")
            except ProtocolError as e:
                self._bad(describe_peer(ident, user), parts, e)
                continue
            ready.add(sched)
        if self.smp:
            # PUB/SUB joins late: publish until every scheduler's SUB has
            # seen something on each of the dispatcher's three PUB sockets,
            # waiting 20 ms for the first publication, then twice as long
            # each time up to 0.5 s (a SUB that joined after a publication
            # never sees it: a short first wait republishes sooner)
            deadline = time.monotonic() + timeout
            wait = 0.02
            while True:
                seqs = self._disp_call("hello")
                try:
                    self._all_scheds("wait_published", seqs, wait)
                    break
                except TimeoutError:
                    wait = min(2 * wait, 0.5)
                    if time.monotonic() > deadline:
                        raise StartupError(
                            "schedulers did not subscribe to the dispatcher's "
                            f"state within {timeout:g} s"
                        ) from None
        self._started = True

    def _startup_frame(self, parts: list, frame):
        """A checked ``frame`` (``Hello`` or ``Ready``) from a one-part message."""
        if len(parts) != 1:
            raise ProtocolError(f"a message of {len(parts)} parts, not 1")
        return frame.decode(loads_frame(parts[0]))

    def _key_ok(self, k, user) -> bool:
        """With CURVE, a frame of scheduler ``k`` comes with its key."""
        return self.security is None or (user is not None and user == self._keys.get(k))

    def _bad(self, sender: str, parts: list, e: BaseException, where: str = "controller") -> None:
        """Count and log a refused frame (the log is bounded under a flood)."""
        self.bad_frames += 1
        self.last_bad_frame = (
            f"rejected {where} frame of {sum(len(p) for p in parts)} bytes "
            f"from {sender}: {type(e).__name__}: {e}"
        )
        if self.bad_frames <= 100 or self.bad_frames % 1000 == 0:
            sys.stderr.write(f"smp: {self.last_bad_frame}\n")

    def _start_process(self, p) -> None:
        """Fork ``p`` and record it with Ctrl-C held back in between, so an
        interrupt can never leave a child that close() does not know of."""
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            p.start()
            self._procs.append(p)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    @property
    def os_pids(self) -> list[int]:
        """The OS pids of the scheduler and dispatcher processes."""
        return [p.pid for p in self._procs if p.pid is not None]

    def close(self) -> None:
        """Stop every OS process of this emulator; safe to call twice.  Ends
        within ``CLOSE_S`` (5 s) whatever the processes do: the schedulers
        hand their last batch over for at most 2.5 s, the dispatcher
        dispatches what is queued for what time is left (at most 2 s, the
        rest is dropped as ``emulator_closed``) and closes its ports, and a
        process that has not exited by then is terminated, then killed (a
        stopped one included)."""
        if self._closed or self._closing:
            return
        self._closing = True
        self._budget = self._bif_budget = None
        started = time.monotonic()
        end = started + CLOSE_S - 0.4  # the rest: sockets, context, run directory
        try:
            if not self._started:
                raise _Abandon()  # start-up never finished: terminate, don't ask
            live = self._live()
            for k in live:
                try:
                    self._send_sched(k, None, "stop", ())
                except Exception:
                    pass
            local = [self._sched_proc(k) for k in live if k not in self._remote]
            # with a dispatcher to stop after them, 2.5 s; without, all but the end
            byes_by = started + (2.5 if self.disp is not None else CLOSE_S - 1.4)
            while (
                any(k not in self._byes for k in live)
                and time.monotonic() < byes_by
                and (any(p.is_alive() for p in local) or len(local) < len(live))
            ):
                self._pump(0.05)
            if self.disp is not None and self._procs[0].is_alive():
                drain = max(0.0, min(2.0, end - time.monotonic() - 1.8))
                try:
                    self.final_dispatcher_statistics = self._disp_call(
                        "stop", drain, timeout=drain + 0.8
                    )
                except Exception:
                    pass
        except _Abandon:
            pass
        finally:
            self._end_processes(end)
            for s in (self.ctl, self.disp):
                if s is not None:
                    s.close(linger=0)
            if self.auth is not None:
                self.auth.stop()
            self.ctx.term()
            rundir.release(self._dir, self._dir_hold)
            shutil.rmtree(self._dir, ignore_errors=True)
            self._closed = True

    def _end_processes(self, end: float) -> None:
        """Give the processes until shortly before ``end`` to exit by
        themselves, then terminate what is left, then kill it (SIGKILL ends a
        stopped process too), and reap every one."""
        procs = [p for p in self._procs if p.pid is not None]
        settle = min(end - 0.8, time.monotonic() + (0.5 if self._started else 0.0))
        for until, end_them in ((settle, None), (end - 0.3, "terminate"), (end, "kill")):
            left = [p for p in procs if p.is_alive()]
            if not left:
                return
            for p in left:
                if end_them is not None:
                    try:
                        getattr(p, end_them)()
                    except OSError:
                        pass
            for p in left:
                p.join(max(0.0, until - time.monotonic()))

    def __enter__(self) -> "Emulator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ================================================================ wire
    def _check_open(self) -> None:
        if self._closed:
            raise SmpError("emulator is closed")

    def _send_sched(self, k: int, req_id, cmd: str, args) -> bool:
        """False when scheduler ``k`` is no longer connected (it exited)."""
        frame = Request(req_id, cmd, args).encode(code_ok=self._code_ok)
        try:
            self.ctl.send_multipart([self._ident.get(k, f"s{k}".encode()), frame])
            if req_id is not None:
                self._pending[req_id] = (k, cmd)
            if cmd in _CHANGES:
                self._bif_changes()
            return True
        except zmq.error.ZMQError as e:
            if e.errno != zmq.EHOSTUNREACH:
                raise
            return False

    def _pump(self, timeout: float) -> None:
        """Take whatever the schedulers sent: replies, process BIF requests, goodbyes."""
        if not self.ctl.poll(int(timeout * 1000)):
            return
        while self.ctl.poll(0):
            ident, parts, user = recv_from(self.ctl, self.security is not None)
            k = self._by_ident.get(ident)
            try:
                if k is None and ident in self._hb_ids:
                    k = self._hb_ids[ident]
                    self._take_heartbeat(k, parts, user)
                    continue
                self._take(k, parts, user)
                if k in self._remote:
                    self._heard[k] = time.monotonic()
            except ProtocolError as e:  # counted, logged with the sender, ignored
                self._bad(
                    f"scheduler {k}" if k is not None else describe_peer(ident, user), parts, e
                )

    def _take(self, k, parts: list, user) -> None:
        """One message on the controller's socket, checked field by field: it
        comes from a scheduler of this emulator (routing id, and with CURVE
        its key), a reply answers a request sent to that scheduler, a BIF
        request is made by one of its processes."""
        if k is None:
            raise ProtocolError("not from a scheduler of this emulator")
        if not self._key_ok(k, user):
            raise ProtocolError(f"scheduler {k}'s routing id with another key")
        if len(parts) != 1:
            raise ProtocolError(f"a message of {len(parts)} parts, not 1")
        msg = loads_frame(parts[0])
        kind = frame_kind(msg)
        if kind == Reply.KIND:
            rid, ok, value = Reply.decode(msg)
            if self._pending.get(rid, (None,))[0] != k:
                raise ProtocolError(f"a reply to {rid!r}, no request to scheduler {k}")
            if ok and not _reply_ok(self._pending[rid][1], value, self.nsched):
                raise ProtocolError(f"a malformed reply to {self._pending[rid][1]!r}")
            cmd = self._pending.pop(rid)[1]
            if ok and cmd == "status":
                self._last_status[k] = value
            if rid in self._abandoned:  # its caller gave up waiting (run()'s time was up)
                self._abandoned.discard(rid)
            else:
                self._replies[rid] = (ok, value)
        elif kind == Rpc.KIND:
            pid, request = Rpc.decode(msg)
            if self._owner(pid) != k:
                raise ProtocolError(f"a BIF request of {pid!r}, not a process of scheduler {k}")
            self._rpcs.append((k, pid, request))
        elif kind == Bye.KIND:
            self._byes[k] = Bye.decode(msg, k).stats
        else:
            raise ProtocolError(f"a {kind!r} frame, which scheduler {k} does not send now")

    def _take_heartbeat(self, k: int, parts: list, user) -> None:
        """A remote scheduler's heartbeat, on the routing id (and, with CURVE,
        from the key) its welcome gave it: it is there."""
        if not self._key_ok(k, user):
            raise ProtocolError(f"scheduler {k}'s heartbeat routing id with another key")
        if len(parts) != 1:
            raise ProtocolError(f"a message of {len(parts)} parts, not 1")
        Heartbeat.decode(loads_frame(parts[0]), k)
        self._heard[k] = time.monotonic()

    def _sched_proc(self, k: int):
        if k in self._remote:
            return _RemoteProc(self, k)
        return self._procs[self.smp + k - 1]

    def _live(self) -> list[int]:
        return [k for k in range(1, self.nsched + 1) if k not in self.lost_schedulers]

    def _until(self, timeout: float) -> tuple[float, bool]:
        """When a call that may wait ``timeout`` s must give up: run()'s time
        bound comes first (then True: giving up raises ``OutOfTime``)."""
        end = time.monotonic() + timeout
        if self._budget is not None and self._budget < end:
            return self._budget, True
        return end, False

    def _no_answer(self, req: int, who: str, cmd: str, timeout: float, capped: bool):
        """Give up waiting for request ``req`` (its reply, if it comes, is dropped)."""
        if req in self._pending:
            self._abandoned.add(req)
        if capped:
            return OutOfTime(
                f"{who} did not answer {cmd!r} in time (stopped, or one of its "
                "processes has not yielded for that long)"
            )
        return SmpError(f"{who} did not answer {cmd!r} within {timeout:g} s")

    def _sched_call(self, k: int, cmd: str, *args, timeout: float = 30.0):
        self._check_open()
        if k in self.lost_schedulers:
            raise SchedulerLost(f"scheduler {k} is lost: {self.lost_schedulers[k]}")
        req = next(self._req)
        if not self._send_sched(k, req, cmd, args):
            self._scheduler_gone(k)
            raise SchedulerLost(
                f"scheduler {k} is lost: {self.lost_schedulers.get(k, 'disconnected')}"
            )
        deadline, capped = self._until(timeout)
        while req not in self._replies:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._no_answer(req, f"scheduler {k}", cmd, timeout, capped)
            self._pump(min(0.5, left))
            if req not in self._replies and not self._sched_proc(k).is_alive():
                self._abandoned.add(req)
                self._scheduler_lost(k)
                raise SchedulerLost(f"scheduler {k} is lost: {self.lost_schedulers[k]}")
        ok, value = self._replies.pop(req)
        if not ok:
            raise value
        return value

    def _all_scheds(self, cmd: str, *args, timeout: float = 30.0) -> dict[int, Any]:
        """Ask every live scheduler; returns {scheduler id: answer}."""
        return self._call_scheds({k: (cmd, args) for k in self._live()}, timeout)

    def _call_scheds(self, calls: dict, timeout: float = 30.0) -> dict[int, Any]:
        """Send ``{scheduler id: (command, args)}`` to every scheduler at
        once, so they work in parallel, then collect the answers; a scheduler
        lost meanwhile has none in the result."""
        reqs = {}
        for k, (cmd, args) in calls.items():
            req = next(self._req)
            if self._send_sched(k, req, cmd, args):
                reqs[k] = req
            else:
                self._scheduler_gone(k)
        out = {}
        deadline, capped = self._until(timeout)
        for k, req in reqs.items():
            while req not in self._replies:
                if not self._sched_proc(k).is_alive():
                    self._abandoned.add(req)
                    self._scheduler_lost(k)
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    for r in reqs.values():
                        if r not in self._replies and r in self._pending:
                            self._abandoned.add(r)
                        self._replies.pop(r, None)
                    raise self._no_answer(req, f"scheduler {k}", calls[k][0], timeout, capped)
                self._pump(min(0.2, left))
            if req not in self._replies:
                continue
            ok, value = self._replies.pop(req)
            if not ok:
                for r in reqs.values():  # the answers still to come are not wanted
                    if r not in self._replies and r in self._pending:
                        self._abandoned.add(r)
                    self._replies.pop(r, None)
                raise value
            out[k] = value
        return out

    def _check_processes(self) -> None:
        """Supervision: notice a dead scheduler or dispatcher (run() calls this
        every few milliseconds, so a death is noticed well within a second)."""
        if self.smp and not self._procs[0].is_alive():
            self._dispatcher_lost()
        for k in self._live():
            if not self._sched_proc(k).is_alive():
                self._scheduler_lost(k)

    def _scheduler_gone(self, k: int) -> None:
        """A scheduler disconnected: wait (briefly) for its process to end."""
        self._sched_proc(k).join(max(0.0, min(2.0, self._until(2.0)[0] - time.monotonic())))
        if not self._sched_proc(k).is_alive():
            self._scheduler_lost(k)

    def _scheduler_lost(self, k: int) -> None:
        if k in self.lost_schedulers:
            return
        proc = self._sched_proc(k)
        code = proc.exitcode
        if k in self._remote:
            host = self.scheduler_hosts.get(k, ("?", None))[0]
            why = (
                f"remote scheduler on {host} (os pid {proc.pid}): no word from it for "
                f"{proc.silent_for():.1f} s, its link is down or it stopped"
            )
        else:
            why = f"os pid {proc.pid} died" + (
                f" by signal {-code}"
                if code is not None and code < 0
                else f" with exit code {code}"
            )
        self.lost_schedulers[k] = why
        pids: list = []
        if self.smp and self._procs[0].is_alive():
            # the loss is bookkept whole: inside run() with a BIF's extra time
            budget = self._budget
            if budget is not None and self._bif_budget is not None:
                self._budget = max(budget, self._bif_budget)
            try:
                pids = self._disp_call("scheduler_lost", k)
                self._all_scheds("scheduler_lost", k, pids)
            finally:
                self._budget = budget
                self._new_losses.append(
                    f"scheduler {k} ({why}): {len(pids)} process(es) on it treated as exited, "
                    "messages for them dropped as scheduler_lost"
                )
        else:
            self._new_losses.append(f"scheduler {k} ({why})")

    def _dispatcher_lost(self) -> None:
        proc = self._procs[0]
        code = proc.exitcode
        # what is known to have arrived: the deliveries the schedulers took.
        # Local ones stop by themselves when their dispatcher is gone and say
        # what they made and took in their goodbye; for the others, what they
        # said last
        live = self._live()
        local = [self._sched_proc(k) for k in live if k not in self._remote]
        until = time.monotonic() + 1.0
        if self._budget is not None:
            until = min(until, self._budget)
        while (
            any(k not in self._byes for k in live)
            and time.monotonic() < until
            and any(p.is_alive() for p in local)
        ):
            self._pump(0.05)
        made = received = 0
        for k in live:
            said = self._byes.get(k, {})
            st = said if "deliveries" in said else self._last_status.get(k, {})
            made += st.get("sys_made", 0)
            received += st.get("deliveries", 0)
        made = max(made, self._last_made)
        for k in self._live():
            try:
                self._send_sched(k, None, "stop", ())
            except Exception:
                pass
        self._closing_after_loss = True
        raise DispatcherLost(
            f"dispatcher (os pid {proc.pid}) died"
            + (
                f" by signal {-code}"
                if code is not None and code < 0
                else f" with exit code {code}"
            )
            + f": {made} system message(s) made by the schedulers, {received} known delivered "
            f"(the schedulers received them), so up to {max(0, made - received)} lost; the "
            "emulator must be closed"
        )

    def _disp_call(self, cmd: str, *args, timeout: float = 30.0):
        self._check_open()
        req = next(self._req)
        self.disp.send(Request(req, cmd, args).encode())
        if cmd in _CHANGES or (cmd == "state" and args[0] not in STATE_READS):
            self._bif_changes()
        deadline, capped = self._until(timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.disp.poll(min(200, int(left * 1000) + 1)):
                if not self._procs[0].is_alive() and not self._closing:
                    self._dispatcher_lost()
                if left <= 0:  # a late reply is dropped: it has another request's id
                    raise self._no_answer(req, "the dispatcher", cmd, timeout, capped)
                continue
            raw = self.disp.recv_multipart()
            try:
                if len(raw) != 1:
                    raise ProtocolError(f"a message of {len(raw)} parts, not 1")
                rid, ok, value = Reply.decode(loads_frame(raw[0], state=True))
            except ProtocolError as e:
                self._bad("the dispatcher", raw, e, "dispatcher reply")
                continue
            if rid == req:
                break
        if not ok:
            raise value
        return value

    def _owner(self, x) -> int:
        try:
            return owner(x, self.nsched)
        except ValueError as e:
            raise BadArg(str(e)) from None

    def _sync_dispatcher(self, limit: float | None = None) -> dict:
        """Wait until the dispatcher has taken every batch the schedulers sent
        (with ``limit``, at most that many seconds); returns each scheduler's
        status as it was asked."""
        if not self.smp:
            return {}
        items = [0] * (self.nsched + 1)
        sts = self._all_scheds("status")
        for k, st in sts.items():
            items[k] = st["sys_items"]
        capped = False
        if self._budget is not None:  # inside run(): at most until its time is up
            left = self._budget - time.monotonic() - 0.05
            if limit is None or left < limit:
                limit, capped = max(0.0, left), True
        if not self._disp_call("wait_ingested", items, limit) and capped:
            raise OutOfTime(
                "the dispatcher had not taken every batch the schedulers sent "
                "(push-back from a receiver that does not keep up)"
            )
        return sts

    def _publish_wait(self, seqs=None) -> None:
        """Every live scheduler has taken in the dispatcher's publications up
        to ``seqs`` (now, when None).  Inside run(), waits at most until its
        time is up."""
        if seqs is None:
            seqs = self._disp_call("pub_seq")
        left = 10.0 if self._budget is None else max(0.0, self._budget - time.monotonic())
        try:
            self._all_scheds("wait_published", seqs, left)
        except TimeoutError as e:  # a scheduler's own wait ran out
            if self._budget is None or isinstance(e, EmulatorTimeout):
                raise
            raise OutOfTime(str(e)) from None

    def _bif(self, name: str, *args, caller=None):
        if self.smp:
            return call_bif(self.backend, caller, name, args)
        return self._sched_call(1, "bif", name, args)

    # ================================================================ public API
    def spawn(self, fun, *args, scheduler: int | None = None, keep: bool = False) -> Pid:
        """Spawn ``fun(proc, *args)``; placed round-robin or on ``scheduler``.
        With ``keep=True`` the emulator keeps every message that reaches its
        mailbox, as for a collector: ``messages(pid)`` lists them."""
        if not inspect.iscoroutinefunction(fun):
            raise BadArg(f"process body must be an async def function, not {fun!r}")
        return self._sched_call(self._place(scheduler), "spawn", fun, args, bool(keep))

    def spawn_many(self, fun, args_list, scheduler: int | None = None) -> list[Pid]:
        """Spawn ``fun(proc, *args)`` for each ``args`` in ``args_list`` with one
        request per scheduler (round-robin, or all on ``scheduler``)."""
        if not inspect.iscoroutinefunction(fun):
            raise BadArg(f"process body must be an async def function, not {fun!r}")
        plan: dict[int, list[int]] = {}
        for i, _ in enumerate(args_list):
            plan.setdefault(self._place(scheduler), []).append(i)
        out: list = [None] * len(args_list)
        # every scheduler spawns its share at the same time
        got = self._call_scheds(
            {
                k: ("spawn_many", (fun, [tuple(args_list[i]) for i in idxs]))
                for k, idxs in plan.items()
            },
            # the usual 30 s, or longer for a big spawn: at least 5,000 a second
            timeout=max(30.0, len(args_list) / 5_000),
        )
        for k, idxs in plan.items():
            if k not in got:
                raise SchedulerLost(f"scheduler {k} is lost: {self.lost_schedulers.get(k)}")
            for i, pid in zip(idxs, got[k], strict=True):
                out[i] = pid
        return out

    def spawn_collector(self, scheduler: int | None = None) -> Pid:
        """A process that receives forever; ``messages(pid)`` lists what it got."""
        return self._sched_call(self._place(scheduler), "spawn", collector, (), True)

    def _place(self, scheduler) -> int:
        if scheduler is not None:
            if type(scheduler) is not int or not 1 <= scheduler <= self.nsched:
                raise BadArg(f"scheduler must be in 1..{self.nsched}, not {scheduler!r}")
            return scheduler
        self._rr = self._rr % self.nsched + 1
        return self._rr

    def messages(self, pid: Pid, start: int = 0) -> list:
        """What the collector ``pid`` received, in arrival order (from index
        ``start`` on, so a stream can fetch only what is new)."""
        return self._sched_call(self._owner(pid), "messages", pid, start)

    def process_info(self, pid: Pid) -> dict | None:
        return self._sched_call(self._owner(pid), "process_info", pid)

    def is_alive(self, pid: Pid) -> bool:
        return self.backend.bk_is_alive(pid)

    def define(self, module, function, fn) -> None:
        """Register ``async def fn(proc, *args)`` as the emulated ``module:function/arity``."""
        if not inspect.iscoroutinefunction(fn):
            raise BadArg(f"{module}:{function} must be an async def function")
        arity = len(inspect.signature(fn).parameters) - 1
        if arity < 0:
            raise BadArg(f"{module}:{function} must take the process handle first")
        self._all_scheds("define", _atom(module), _atom(function), arity, fn)

    def trace(self, pid_spec, how, flags, tracer=None) -> int:
        """``erlang:trace/3``; ``tracer=`` adds ``{tracer, T}`` to the flags."""
        flags = _flags(flags)
        if tracer is not None:
            flags.append((Atom("tracer"), tracer))
        return self._bif("trace", _spec(pid_spec), how, flags)

    def trace_info(self, what, item):
        """``erlang:trace_info/2``: ``What`` is a pid, ``new``, ``on_load`` or
        ``{Module, Function, Arity}`` (strings stand for atoms); ``Item`` is
        ``flags`` or ``tracer`` for a pid or ``new``, and ``traced``,
        ``match_spec``, ``meta``, ``meta_match_spec``, ``call_count``,
        ``call_time`` or ``all`` for a function.  A port is badarg, as in
        17.x (OTP 19 added ports)."""
        if type(what) is tuple:
            what = tuple(_spec(x) for x in what)
        return self._bif("trace_info", _spec(what), _atom(item))

    def trace_pattern(self, mfa, match_spec, flags=()) -> int:
        """``erlang:trace_pattern/3``.  ``match_spec`` may be a term, Erlang
        text (``"[{'_',[],[{return_trace}]}]"``) or dbg's ``"x"``, ``"c"``, ``"cx"``."""
        if type(mfa) in (tuple, list):
            mfa = tuple(_atom(x) for x in mfa)
        else:
            mfa = _atom(mfa)
        if not self.smp and match_spec not in (True, False):
            # checked here before it travels: a part that is no term, or one
            # nested too deep to pickle, is a BadArg naming it, not a
            # scheduler that failed to answer
            compile_match_spec(match_spec)
        return self._bif("trace_pattern", mfa, match_spec, _flags(flags))

    def set_system_seq_tracer(self, tracer):
        return self._bif("set_system_seq_tracer", tracer)

    def get_system_seq_tracer(self):
        return self._bif("get_system_seq_tracer")

    @staticmethod
    def _monitor_args(args) -> list:
        """Atoms may be given as strings: 'undefined', option lists, {Pid, Opts}."""
        out = []
        for a in args:
            if isinstance(a, str):
                a = Atom(a)
            elif isinstance(a, list):
                a = _flags(a)
            elif type(a) is tuple and len(a) == 2 and isinstance(a[1], list):
                a = (a[0], _flags(a[1]))
            out.append(a)
        return out

    def system_monitor(self, *args):
        """``system_monitor()``, ``(undefined | {Pid, Options})``, ``(Pid, Options)``."""
        return self._bif("system_monitor", *self._monitor_args(args))

    def system_profile(self, *args):
        """``system_profile()``, ``(undefined | PidOrPort, Options)``."""
        return self._bif("system_profile", *self._monitor_args(args))

    def trace_delivered(self, what) -> tuple:
        """Returns ``{trace_delivered, What, Ref}`` once everything traced
        before the call is delivered (the API has no mailbox to wait in)."""
        return self._bif("trace_delivered", _spec(what))

    def register(self, name, pid) -> Atom:
        name = _atom(name)
        if type(name) is not Atom:
            raise BadArg(f"registered name must be an atom, not {name!r}")
        if self.smp:
            # erts_register_name (register.c) takes a live process or an open
            # port; the dispatcher's table knows which ports are open
            if type(pid) is not Port and not self.backend.bk_is_alive(pid):
                raise BadArg(f"cannot register {name!r}: {pid!r} is not alive")
            self._sync_dispatcher()
            if not self._disp_call("register", name, pid):
                raise BadArg(
                    f"cannot register {name!r}: the name or {pid!r} is already registered, "
                    "or the port is closed"
                )
            self._sched_call(self._owner(pid), "set_reg", name, pid)
            self._all_scheds("set_reg", name, pid)
        else:
            try:
                self._sched_call(1, "register", name, pid)
            except Error:
                raise BadArg(f"cannot register {name!r} for {pid!r}") from None
        return am_true

    def whereis(self, name):
        name = _atom(name)
        r = self._disp_call("whereis", name) if self.smp else self._sched_call(1, "whereis", name)
        return Atom("undefined") if r is None else r

    def exit(self, pid: Pid, reason) -> Atom:
        """``exit(Pid, Reason)`` sent from outside the emulated processes."""
        if type(pid) is not Pid:
            raise BadArg(f"exit/2 needs a pid, not {pid!r}")
        self._sched_call(self._owner(pid), "exit", pid, _atom(reason))
        return am_true

    def open_trace_port(self, kind: str, *args, **kw) -> Port:
        """A tracer port: ``file`` (path, wrap=...), ``ip`` (port, queue_size=...),
        ``memory`` (heavy_every=N) or ``null``."""
        if self.smp:
            return self._disp_call("open_trace_port", kind, args, kw)
        return self._sched_call(1, "open_trace_port", kind, args, kw)

    def _port_call(self, port: Port, method: str, *args):
        if self.smp:
            return self._disp_call("trace_port_call", port, method, args)
        return self._sched_call(1, "trace_port_call", port, method, args)

    def trace_port_terms(self, port: Port, start: int = 0) -> list:
        """The terms written so far to a ``memory`` trace port (from ``start`` on)."""
        return self._port_call(port, "terms", start)

    def trace_port_info(self, port: Port) -> dict:
        return self._port_call(port, "info")

    def flush_trace_port(self, port: Port, timeout: float = 5.0):
        return self._port_call(port, "flush", timeout)

    def close_trace_port(self, port: Port) -> None:
        """Close a tracer port; a file port writes its last buffer.  smp: the
        close is an event in queue order: every message made before the call
        is written first, later ones are dropped as ``port_closed``."""
        self._sync_dispatcher()
        self._port_call(port, "close")

    # -- races ---------------------------------------------------------------
    def hold_dispatcher(self) -> None:
        """smp: let messages queue up in the dispatcher without dispatching them."""
        if not self.smp:
            raise SmpError("hold_dispatcher needs smp mode (nonsmp has no dispatcher)")
        self._disp_call("hold")

    def release_dispatcher(self) -> None:
        if not self.smp:
            raise SmpError("release_dispatcher needs smp mode (nonsmp has no dispatcher)")
        self._sync_dispatcher()  # what the schedulers sent first is in the table
        self._disp_call("release")

    def step_dispatcher(self, n: int = 1, unit: str = "message", timeout: float = 10.0) -> list:
        """smp, behind ``hold_dispatcher()``: dispatch exactly the next ``n``
        queued messages (``unit="message"``, the seed's granularity: a run is
        split) or runs (``unit="run"``) against the state now, and stay held;
        ``queued_messages()`` lists what is left.  Returns ``(From, Receiver,
        Msg, Outcome)`` for each message dispatched, Outcome ``"delivered"``
        or the reason it was dropped (as ``statistics()`` names it).  Before
        it returns, what was delivered has reached its receivers (the
        emulator runs until their schedulers took it), so ``messages(pid)``
        shows it and a later change cannot overtake it."""
        if not self.smp:
            raise SmpError(
                "step_dispatcher needs smp mode (nonsmp has no dispatcher: "
                "it delivers each message when it is made)"
            )
        if type(n) is not int or n < 1:
            raise BadArg(f"step_dispatcher: n must be an integer >= 1, not {n!r}")
        if unit not in ("message", "run"):
            raise BadArg(f"step_dispatcher: unit must be 'message' or 'run', not {unit!r}")
        self._sync_dispatcher()
        if not self._disp_call("status")["held"]:
            raise SmpError("step_dispatcher needs a held dispatcher: call hold_dispatcher() first")
        done = self._disp_call("step", n, unit)
        deadline = time.monotonic() + timeout
        while True:  # until every scheduler took the deliveries the step sent it
            sent = self._disp_call("status")["delivered_to"]
            if all(sent[k] == st["deliveries"] for k, st in self._all_scheds("status").items()):
                return done
            left = deadline - time.monotonic()
            if left <= 0:
                raise EmulatorTimeout(f"step_dispatcher: deliveries not taken within {timeout:g} s")
            self.run(timeout=left)

    def queued_messages(self) -> list:
        """``erts_foreach_sys_msg_in_q``: ``(From, To, Msg)`` of each queued message."""
        if not self.smp:
            return []
        self._sync_dispatcher()
        return self._disp_call("queue_list")

    def latencies_ns(self) -> list[int]:
        """smp: make-to-dispatch latencies in ns, one sample per run of messages
        (its first message), the dispatcher's most recent 200,000."""
        return self._disp_call("latencies") if self.smp else []

    # -- statistics ----------------------------------------------------------
    def statistics(self) -> dict:
        """made = delivered + dropped (by reason) + queued, per type and in all;
        ``auth_denied`` counts peers refused by CURVE at the dispatcher and here.

        smp: ``made`` counts what entered the dispatcher's queue, ``queued``
        what it has not decided yet (the batch being dispatched included),
        and ``in_transit`` what the schedulers made that is still on its way
        to the queue (push-back from a slow port holds it there).  Returns
        within about a second whatever the dispatcher is doing."""
        scheds = list(self._all_scheds("stats").values())
        if self.smp:
            sts = self._sync_dispatcher(limit=1.0)
            d = self._disp_call("stats")
            ingested = d.pop("ingested", None)
            d["in_transit"] = (
                0
                if ingested is None
                else sum(max(0, st["sys_made"] - ingested[k]) for k, st in sts.items())
            )
        else:
            s = scheds[0]
            d = {
                k: s[k]
                for k in (
                    "made",
                    "made_by_type",
                    "delivered",
                    "delivered_by_type",
                    "dropped",
                    "dropped_by_reason",
                )
            }
            d.update(queued=0, in_transit=0, bad_frames=0, stderr_lines=[])
        suppressed: dict = {}
        for s in scheds:
            for reason, by_type in s["suppressed_by_reason"].items():
                for t, n in by_type.items():
                    suppressed.setdefault(reason, {}).setdefault(t, 0)
                    suppressed[reason][t] += n
        d["suppressed"] = sum(s["suppressed"] for s in scheds)
        d["suppressed_by_reason"] = suppressed
        d["fake_schedule_pairs"] = sum(s["fake_schedule_pairs"] for s in scheds)
        d["tracer_checks_reset"] = sum(s["tracer_checks_reset"] for s in scheds)
        d["messages_sent"] = sum(s["messages_sent"] for s in scheds)
        # what could not travel (a message that is not a term): never queued
        d["unsendable"] = sum(s.get("unsendable", 0) for s in scheds)
        d["processes"] = sum(s["processes"] for s in scheds)
        d["schedulers"] = scheds
        d["mode"] = self.mode
        d["lost_schedulers"] = dict(self.lost_schedulers)
        d["auth_denied"] = d.get("auth_denied", 0) + (self.auth.denied if self.auth else 0)
        # frames refused (counted, logged, ignored): at the dispatcher's ingest
        # and control sockets, at the controller's, at the schedulers'
        at = dict(d.get("bad_frames_at", {}))
        if self.bad_frames:
            at["controller"] = self.bad_frames
        in_scheds = sum(s.get("bad_frames", 0) for s in scheds)
        if in_scheds:
            at["schedulers"] = in_scheds
        d["bad_frames_at"] = at
        d["bad_frames"] = sum(at.values())
        d["last_bad_frame"] = d.get("last_bad_frame") or self.last_bad_frame
        return d

    # ================================================================ run
    def run_for(self, seconds: float) -> bool:
        """Run for at most ``seconds``; True when the system became quiet,
        False when it is still busy (it is paused again either way)."""
        try:
            self.run(timeout=seconds)
            return True
        except EmulatorTimeout:
            return False

    def run(self, timeout: float = 10.0) -> None:
        """Run until quiet; raises ``EmulatorTimeout`` naming what is still busy,
        ``SchedulerLost`` (after the rest became quiet) when a scheduler died,
        ``DispatcherLost`` when the dispatcher died.  Returns or raises within
        ``timeout`` + 1 s whatever the processes do: a scheduler or the
        dispatcher that does not answer in time (stopped, or held by a process
        that does not yield) is named in the ``EmulatorTimeout``."""
        self._check_open()
        deadline = time.monotonic() + timeout
        self._budget = deadline + RUN_GRACE_S
        self._bif_budget = deadline + BIF_GRACE_S
        stable = None
        try:
            self._resume()
            self._running = True
            while True:
                self._check_processes()
                self._serve_rpcs(deadline)
                sts = self._all_scheds("status")
                live = sorted(sts)
                quiet = all(s["idle"] and not s["timer"] and not s["backlog"] for s in sts.values())
                snap = tuple(
                    (k, tuple(s["peer_recv"]), s["sys_made"], s["deliveries"])
                    for k, s in sorted(sts.items())
                )
                self._last_made = sum(s["sys_made"] for s in sts.values())
                if quiet and self.smp:
                    d = self._disp_call("status")
                    self._last_disp_status = d
                    quiet = smp_quiet(sts, d, live)
                    snap = snap + (
                        tuple(d["ingested_items"]),
                        tuple(d["delivered_to"]),
                        d["queued"],
                    )
                if quiet and not self._rpcs and snap == stable:
                    break
                stable = snap if quiet else None
                if time.monotonic() > deadline:
                    busy = [
                        f"scheduler {k}: {s['runq']} runnable ({', '.join(s['busy'])})"
                        + (", timers pending" if s["timer"] else "")
                        + (f", {s['backlog']} frame(s) waiting to be sent" if s["backlog"] else "")
                        for k, s in sorted(sts.items())
                        if not s["idle"] or s["timer"] or s["backlog"]
                    ]
                    raise EmulatorTimeout(
                        f"run() not quiet after {timeout:g} s: "
                        + ("; ".join(busy) or "messages still in flight")
                    )
                if not quiet:
                    waits = [
                        s["timer_in"]
                        for s in sts.values()
                        if s["timer_in"] is not None and s["idle"]
                    ]
                    all_idle = all(s["idle"] for s in sts.values())
                    # idle with a timer: sleep towards it; otherwise messages are
                    # in flight or processes run: look again soon
                    pause = min([0.02] + waits) if (all_idle and waits) else 0.001
                    self._pump(pause)
        except OutOfTime as e:
            raise EmulatorTimeout(f"run() not quiet after {timeout:g} s: {e}") from None
        finally:
            self._running = False
            try:
                if not self._closing_after_loss and not self._closed:
                    # every scheduler is sent its pause; the answers are awaited
                    # at most until timeout + PAUSE_END_S (one that answers later
                    # pauses when it reads it, before anything else it is asked)
                    self._budget = min(
                        max(time.monotonic(), self._budget) + 0.2, deadline + PAUSE_END_S
                    )
                    try:
                        self._all_scheds("pause")
                    except OutOfTime:
                        pass
            finally:
                self._budget = self._bif_budget = None
        self._run_count += 1
        if self._new_losses:
            report, self._new_losses = self._new_losses, []
            raise SchedulerLost("; ".join(report))

    def _resume(self) -> None:
        """Resume every scheduler (smp: once its replica has taken every state
        publication made so far), then answer the BIFs whose answer waited
        for that."""
        try:
            if self.smp:
                left = 10.0 if self._budget is None else max(0.0, self._budget - time.monotonic())
                self._all_scheds("resume", self._disp_call("pub_seq"), left)
            else:
                self._all_scheds("resume")
        except TimeoutError as e:  # a replica did not catch up in time
            if isinstance(e, EmulatorTimeout) or self._budget is None:
                raise
            raise OutOfTime(str(e)) from None
        late, self._late_replies = self._late_replies, []
        for k, pid, value in late:
            if k not in self.lost_schedulers:
                self._send_sched(k, None, "reply", (pid, value))

    def _bif_changes(self) -> None:
        """A command that changes something is on its way: the BIF being
        served is finished (until ``BIF_GRACE_S`` after run()'s timeout)
        rather than put back to be served again."""
        if self._serving is not None and not self._rpc_changed:
            self._rpc_changed = True
            if self._budget is not None and self._bif_budget is not None:
                self._budget = max(self._budget, self._bif_budget)

    def _serve_rpcs(self, deadline: float | None = None) -> None:
        """Serve the BIFs emulated processes called (smp mode).

        A BIF cut short by run()'s time before it changed anything (waiting
        for the dispatcher to take the schedulers' batches, say) is put back
        and served again in the next run(); one that has changed something
        is finished.  Ctrl-C is never an answer: it stops the run, and the
        BIF waits for the next."""
        # only those waiting now, and none once run()'s timeout is up: serving
        # one can bring in more, and processes that call BIFs without pause
        # must not hold run() (and run_for's callers' sampling) past its timeout
        for _ in range(len(self._rpcs)):
            if deadline is not None and time.monotonic() > deadline:
                break
            item = self._rpcs.pop(0)
            k, pid, request = item
            budget = self._budget
            self._serving, self._rpc_changed, self._reply_after_resume = item, False, False
            try:
                kind = request[0]
                if kind == "bif":
                    value = call_bif(self.backend, pid, request[1], request[2])
                elif kind == "register":
                    name, target = request[1], request[2]
                    self._sync_dispatcher()
                    value = bool(self._disp_call("register", name, target))
                    if value:
                        self._all_scheds("set_reg", name, target)
                elif kind == "unregister":
                    self._sync_dispatcher()
                    value = self._disp_call("unregister", request[1])
                    if value:
                        self._all_scheds("unset_reg", request[1], request[2])
                else:
                    value = BadArg(f"unknown request {kind!r}")
            except KeyboardInterrupt:
                if not self._rpc_changed:
                    self._rpcs.insert(0, item)
                raise
            except OutOfTime as e:
                if not self._rpc_changed:
                    self._rpcs.insert(0, item)
                    raise
                # it changed something, and a process still did not answer
                value = EmulatorTimeout(f"{request[1] if request[0] == 'bif' else request[0]}: {e}")
            except Exception as e:
                value = e
            finally:
                late = self._reply_after_resume
                self._serving, self._rpc_changed, self._reply_after_resume = None, False, False
                self._budget = budget
            if late:
                self._late_replies.append((k, pid, value))
            else:
                self._send_sched(k, None, "reply", (pid, value))
