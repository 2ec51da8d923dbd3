"""The controller's supervision of the scheduler and dispatcher processes.

Runs in the user's process, for ``smp.Emulator``.  It starts the OS
processes with ``multiprocess`` (the schedulers; in smp mode also the
dispatcher) and shakes hands with each in named frames (``Hello``,
``Welcome``, ``Ready``), watches that they live (a local process's exit; a
remote scheduler's heartbeats), bookkeeps a loss, and on close flushes,
stops, waits and kills what is left.

It also makes the calls the rest of the controller uses (``sched_call``,
``disp_call``, ``all_scheds``), because a call is where a loss shows first:
the links (``smp.link``) raise ``PeerGone`` or ``Unanswered`` and the calls
here turn them into a bookkept loss (``SchedulerLost``, ``DispatcherLost``)
or run()'s ``OutOfTime``.  Bookkeeping a loss makes calls itself (the
dispatcher and every other scheduler are told), so losses and calls live in
one class and no call-back crosses a module.
"""

from __future__ import annotations

import itertools
import shutil
import signal
import time
from typing import Any, NoReturn

import multiprocess
import zmq

from dispatcher.server import dispatcher_main
from schedulers.worker import scheduler_main
from smp.backend import OutOfTime
from smp.core.errors import (
    DispatcherLost,
    PeerGone,
    ProtocolError,
    SchedulerLost,
    SmpError,
    StartupError,
    Unanswered,
)
from smp.endpoints import Endpoints
from smp.link import DispatcherLink, FrameLog, SchedulerLinks, TimeBounds, startup_frame
from smp.wire import rundir
from smp.wire.curve import Authenticator, describe_peer, new_routing_id, recv_from
from smp.wire.protocol import Hello, Ready, Welcome

__all__ = ["Supervisor", "CLOSE_S", "REMOTE_SILENCE_S"]

#: close() ends within this many seconds, whatever the processes do.
CLOSE_S = 5.0
#: A remote scheduler that sends no word for this long is lost (it sends a
#: heartbeat every second; it stops itself when the dispatcher is silent as long).
REMOTE_SILENCE_S = 5.0


class _Abandon(Exception):
    """close() before start-up finished: nothing to ask the processes."""


def _timed_out(e: Unanswered) -> SmpError:
    """A link's ``Unanswered`` as the caller sees it: inside run()'s bound
    ``OutOfTime`` (run() names the peer in its ``EmulatorTimeout``)."""
    if e.capped:
        return OutOfTime(
            f"{e.who} did not answer {e.cmd!r} in time (stopped, or one of its "
            "processes has not yielded for that long)"
        )
    return e


def _died(pid, code) -> str:
    return f"os pid {pid} died" + (
        f" by signal {-code}" if code is not None and code < 0 else f" with exit code {code}"
    )


class _RemoteProc:
    """What the supervisor knows of a scheduler on another host: it is alive
    while its heartbeats (or any other frame) keep coming; a link down for
    ``REMOTE_SILENCE_S`` makes it lost, as a local scheduler that died."""

    def __init__(self, sup: Supervisor, k: int):
        self.pid = sup.scheduler_hosts.get(k, (None, None))[1]
        self.exitcode = None
        self.name = f"remote-scheduler-{k}"
        self._sup, self._k = sup, k

    def silent_for(self) -> float:
        """Seconds since the last frame from this scheduler (frames waiting on
        the controller's socket are taken first)."""
        sup = self._sup
        if not sup.closed:
            sup.links.pump(0)
        return time.monotonic() - sup.links.heard.get(self._k, time.monotonic())

    def is_alive(self) -> bool:
        if self._k in self._sup.lost_schedulers:
            return False
        return self.silent_for() <= REMOTE_SILENCE_S

    def join(self, timeout=None) -> None:
        return None


class Supervisor:
    """The processes of one emulator, their links and their losses."""

    def __init__(
        self,
        *,
        mode_smp: bool,
        nsched: int,
        remote_schedulers: int,
        layout: Endpoints,
        dir_hold: int | None,
        security: dict | None,
        insecure: bool,
        journal: str | None,
        max_processes: int,
        bounds: TimeBounds,
        log: FrameLog,
    ):
        self.smp, self.nsched, self.remote_schedulers = mode_smp, nsched, remote_schedulers
        self.layout, self.endpoints = layout, layout.as_dict()
        self.dir, self.dir_hold = layout.dir, dir_hold
        self.security, self.journal, self.max_processes = security, journal, max_processes
        self.bounds, self.log = bounds, log
        self.closed = self.closing = self.started = False
        self.closing_after_loss = False  # close() because a process was lost
        self.last_made = 0  # system messages the schedulers had made at the last check
        self.procs: list = []  # the dispatcher first (smp), then the local schedulers
        #: Schedulers that died, with why: {scheduler id: description}.
        self.lost_schedulers: dict[int, str] = {}
        self.new_losses: list[str] = []  # not yet reported by run()
        self.scheduler_hosts: dict[int, tuple] = {}  # scheduler -> (host, os pid)
        self.dispatcher_pid: int | None = None
        self.final_dispatcher_statistics: dict | None = None
        self.ids = itertools.count(1)  # request ids, to the schedulers and the dispatcher
        self.ctx = zmq.Context()
        self.auth = Authenticator(self.ctx, security["allowed"]) if security else None
        self.links = SchedulerLinks(
            self.ctx, security, nsched, self.ids, bounds, log, code_ok=not insecure
        )
        self.dispatcher: DispatcherLink | None = None
        self.disp_ident = new_routing_id()

    # ================================================================ calls
    def check_open(self) -> None:
        if self.closed:
            raise SmpError("emulator is closed")

    def sched_proc(self, k: int):
        if k in self.links.remote:
            return _RemoteProc(self, k)
        return self.procs[self.smp + k - 1]

    def live(self) -> list[int]:
        return [k for k in range(1, self.nsched + 1) if k not in self.lost_schedulers]

    def sched_call(self, k: int, cmd: str, *args, timeout: float = 30.0):
        self.check_open()
        if k in self.lost_schedulers:
            raise SchedulerLost(f"scheduler {k} is lost: {self.lost_schedulers[k]}")
        req = self.links.request(k, cmd, args)
        if req is None:
            self.scheduler_gone(k)
            raise SchedulerLost(
                f"scheduler {k} is lost: {self.lost_schedulers.get(k, 'disconnected')}"
            )
        deadline = self.bounds.until(timeout)
        try:
            ok, value = self.links.wait(req, k, cmd, deadline, self.sched_proc(k).is_alive)
        except PeerGone:
            ok, value = None, None
        except Unanswered as e:
            raise _timed_out(e) from None
        if ok is None:
            self.scheduler_lost(k)
            raise SchedulerLost(f"scheduler {k} is lost: {self.lost_schedulers[k]}")
        if not ok:
            raise value
        return value

    def all_scheds(self, cmd: str, *args, timeout: float = 30.0) -> dict[int, Any]:
        """Ask every live scheduler; returns {scheduler id: answer}."""
        return self.call_scheds({k: (cmd, args) for k in self.live()}, timeout)

    def call_scheds(self, calls: dict, timeout: float = 30.0) -> dict[int, Any]:
        """Send ``{scheduler id: (command, args)}`` to every scheduler at
        once, so they work in parallel, then collect the answers; a scheduler
        lost meanwhile has none in the result.  A command that fails on one
        scheduler raises once every other has answered too: a call returns
        only when each scheduler has done its part (a ``spawn_many`` whose
        share fails on one scheduler must not spawn on another later, during
        the next ``run()``, in a place the processes' exits have freed)."""
        reqs = {}
        for k, (cmd, args) in calls.items():
            req = self.links.request(k, cmd, args)
            if req is not None:
                reqs[k] = req
            else:
                self.scheduler_gone(k)
        out = {}
        error = None
        deadline = self.bounds.until(timeout)
        for k, req in reqs.items():
            alive = self.sched_proc(k).is_alive
            try:
                ok, value = self.links.wait(
                    req, k, calls[k][0], deadline, alive, step=0.2, alive_first=True
                )
            except PeerGone:
                ok, value = None, None
            except Unanswered as e:
                self.links.forget(reqs.values())
                raise _timed_out(e) from None
            if ok is None:
                self.scheduler_lost(k)
                continue
            if not ok:
                error = value if error is None else error
                continue
            out[k] = value
        if error is not None:
            raise error
        return out

    def disp_call(self, cmd: str, *args, timeout: float = 30.0):
        self.check_open()
        try:
            ok, value = self.dispatcher.call(cmd, args, timeout)
        except PeerGone:
            ok, value = None, None
        except Unanswered as e:
            raise _timed_out(e) from None
        if ok is None:
            self.dispatcher_lost()
        if not ok:
            raise value
        return value

    def _dispatcher_alive(self) -> bool:
        """While closing, a dispatcher that exits is no loss."""
        return self.procs[0].is_alive() or self.closing

    # ================================================================ start
    def start(self, timeout: float, options: dict) -> None:
        """Start the processes and shake hands with each (``StartupError``
        naming what did not start within ``timeout``)."""
        self.links.sock.bind(self.endpoints["ctl"])
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
                    self.disp_ident,
                ),
                name="smp-dispatcher",
                daemon=True,
            )
            self._start_process(p)
            if not ready.wait(timeout):
                raise StartupError(f"dispatcher did not start within {timeout:g} s")
            self.dispatcher_pid = p.pid
            self.dispatcher = DispatcherLink(
                self.ctx,
                self.endpoints["disp_ctl"],
                self.disp_ident,
                local_sec,
                self.ids,
                self.bounds,
                self.log,
                self._dispatcher_alive,
            )

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
        deadline = time.monotonic() + timeout
        hellos = self._hellos(deadline, timeout, local_ids)
        self._welcome(hellos)
        self._readies(deadline, timeout)
        if self.smp:
            self._subscribe(timeout)
        self.started = True

    def _hellos(self, deadline: float, timeout: float, local_ids: dict) -> dict[int, tuple]:
        """A hello from every scheduler (local ones know their id; the others
        get one): ``{scheduler: (routing id, inbox, os pid, host, key)}``."""
        links = self.links
        n_local = len(local_ids)
        hellos: dict[int, tuple] = {}
        next_remote = n_local + 1
        while len(hellos) < self.nsched:
            left = deadline - time.monotonic()
            if left <= 0 or not links.sock.poll(int(left * 1000) + 1):
                dead = [p.name for p in self.procs if not p.is_alive()]
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
            ident, parts, user = recv_from(links.sock, self.security is not None)
            try:
                k, inbox_ep, os_pid, host, key = startup_frame(parts, Hello)
                if k is None and next_remote <= self.nsched and ident not in links.remote_ids:
                    if self.smp and not (type(inbox_ep) is str and inbox_ep.startswith("tcp://")):
                        raise ProtocolError("hello without a tcp inbox address")
                    if self.security is not None and (user is None or key != user.encode()):
                        raise ProtocolError("hello with a key that is not the sender's")
                    k = next_remote
                    next_remote += 1
                    links.remote.add(k)
                    links.remote_ids.add(ident)
                elif (
                    type(k) is not int
                    or not 1 <= k <= n_local
                    or ident != local_ids[k]
                    or k in hellos
                ):
                    raise ProtocolError(f"hello as scheduler {k!r}, which the sender is not")
                key = user.encode() if user is not None else None
            except ProtocolError as e:
                self.log.refuse(describe_peer(ident, user), parts, e)
                continue
            hellos[k] = (ident, inbox_ep, os_pid, host, key)
        return hellos

    def _welcome(self, hellos: dict[int, tuple]) -> None:
        """Tell the dispatcher and each scheduler who is where, and the
        routing ids each may take frames from."""
        links = self.links
        inbox_map = {k: (h[1], h[4]) for k, h in hellos.items()}
        self.scheduler_hosts = {k: (h[3], h[2]) for k, h in hellos.items()}
        links.keys = {k: (h[4].decode() if h[4] is not None else None) for k, h in hellos.items()}
        ks = sorted(hellos)
        # routing ids: each scheduler's to the dispatcher's ingest, the
        # dispatcher's two threads' to each inbox, each scheduler's to each
        # other's; a receiver takes frames from the ids it is given alone
        ingest_ids = {k: new_routing_id() for k in ks}
        disp_ids = {k: (new_routing_id(), new_routing_id()) for k in ks}
        peer_ids = {(j, k): new_routing_id() for j in ks for k in ks if j != k}
        server_key = self.security["public"] if self.security else None
        if self.smp:
            self.disp_call(
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
        links.hb_ids = {new_routing_id(): k for k in sorted(links.remote)}
        hb_ids = {k: ident for ident, k in links.hb_ids.items()}
        for k, h in hellos.items():
            links.ident[k] = h[0]
            dpid = None if (k in links.remote or not self.smp) else self.dispatcher_pid
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
            links.sock.send_multipart(
                [
                    h[0],
                    Welcome(
                        k,
                        self.nsched,
                        inbox_map,
                        allowed,
                        dpid,
                        k not in links.remote,
                        ids if self.smp else {},
                    ).encode(),
                ]
            )
        links.by_ident = {h[0]: k for k, h in hellos.items()}
        links.heard = {k: time.monotonic() for k in links.remote}

    def _readies(self, deadline: float, timeout: float) -> None:
        """A ready from every scheduler (a remote one's heartbeats may come first)."""
        links = self.links
        ready: set[int] = set()
        while len(ready) < self.nsched:
            left = deadline - time.monotonic()
            if left <= 0 or not links.sock.poll(int(left * 1000) + 1):
                raise StartupError(
                    f"{self.nsched - len(ready)} scheduler(s) did not get ready "
                    f"within {timeout:g} s"
                )
            ident, parts, user = recv_from(links.sock, self.security is not None)
            try:
                if ident in links.hb_ids:  # heartbeats start before the ready
                    links.take_heartbeat(links.hb_ids[ident], parts, user)
                    continue
                sched = startup_frame(parts, Ready).sched
                if sched != links.by_ident.get(ident) or not links.key_ok(sched, user):
                    raise ProtocolError(f"ready as scheduler {sched!r}, which the sender is not")
            except ProtocolError as e:
                self.log.refuse(describe_peer(ident, user), parts, e)
                continue
            ready.add(sched)

    def _subscribe(self, timeout: float) -> None:
        """PUB/SUB joins late: publish until every scheduler's SUB has seen
        something on each of the dispatcher's three PUB sockets, waiting 20
        ms for the first publication, then twice as long each time up to 0.5
        s (a SUB that joined after a publication never sees it: a short
        first wait republishes sooner)."""
        deadline = time.monotonic() + timeout
        wait = 0.02
        while True:
            seqs = self.disp_call("hello")
            try:
                self.all_scheds("wait_published", seqs, wait)
                return
            except TimeoutError:
                wait = min(2 * wait, 0.5)
                if time.monotonic() > deadline:
                    raise StartupError(
                        "schedulers did not subscribe to the dispatcher's "
                        f"state within {timeout:g} s"
                    ) from None

    def _start_process(self, p) -> None:
        """Fork ``p`` and record it with Ctrl-C held back in between, so an
        interrupt can never leave a child that close() does not know of."""
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            p.start()
            self.procs.append(p)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    # ================================================================ losses
    def check_processes(self) -> None:
        """Notice a dead scheduler or dispatcher (run() calls this every few
        milliseconds, so a death is noticed well within a second)."""
        if self.smp and not self.procs[0].is_alive():
            self.dispatcher_lost()
        for k in self.live():
            if not self.sched_proc(k).is_alive():
                self.scheduler_lost(k)

    def scheduler_gone(self, k: int) -> None:
        """A scheduler disconnected: wait (briefly) for its process to end."""
        self.sched_proc(k).join(max(0.0, min(2.0, self.bounds.until(2.0).at - time.monotonic())))
        if not self.sched_proc(k).is_alive():
            self.scheduler_lost(k)

    def scheduler_lost(self, k: int) -> None:
        """Bookkeep scheduler ``k``'s loss: the dispatcher and the other
        schedulers treat its processes as exited; run() reports it."""
        if k in self.lost_schedulers:
            return
        proc = self.sched_proc(k)
        if k in self.links.remote:
            host = self.scheduler_hosts.get(k, ("?", None))[0]
            why = (
                f"remote scheduler on {host} (os pid {proc.pid}): no word from it for "
                f"{proc.silent_for():.1f} s, its link is down or it stopped"
            )
        else:
            why = _died(proc.pid, proc.exitcode)
        self.lost_schedulers[k] = why
        pids: list = []
        if self.smp and self.procs[0].is_alive():
            # the loss is bookkept whole: inside run() with a BIF's extra time
            b = self.bounds
            budget = b.run
            if budget is not None and b.bif is not None:
                b.run = max(budget, b.bif)
            try:
                pids = self.disp_call("scheduler_lost", k)
                self.all_scheds("scheduler_lost", k, pids)
            finally:
                b.run = budget
                self.new_losses.append(
                    f"scheduler {k} ({why}): {len(pids)} process(es) on it treated as exited, "
                    "messages for them dropped as scheduler_lost"
                )
        else:
            self.new_losses.append(f"scheduler {k} ({why})")

    def dispatcher_lost(self) -> NoReturn:
        """Raise ``DispatcherLost`` counting what may be lost, after telling
        the schedulers to stop: the emulator must be closed."""
        proc = self.procs[0]
        links = self.links
        # what is known to have arrived: the deliveries the schedulers took.
        # Local ones stop by themselves when their dispatcher is gone and say
        # what they made and took in their goodbye; for the others, what they
        # said last
        live = self.live()
        local = [self.sched_proc(k) for k in live if k not in links.remote]
        until = time.monotonic() + 1.0
        if self.bounds.run is not None:
            until = min(until, self.bounds.run)
        links.await_byes(live, until, lambda: any(p.is_alive() for p in local))
        made = received = 0
        for k in live:
            said = links.byes.get(k, {})
            st = said if "deliveries" in said else links.last_status.get(k, {})
            made += st.get("sys_made", 0)
            received += st.get("deliveries", 0)
        made = max(made, self.last_made)
        for k in self.live():
            try:
                links.send(k, None, "stop", ())
            except Exception:
                pass
        self.closing_after_loss = True
        code = proc.exitcode
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

    # ================================================================ close
    def close(self) -> None:
        """Stop every process; safe to call twice; ends within ``CLOSE_S``
        (``smp.Emulator.close`` says how the time is shared)."""
        if self.closed or self.closing:
            return
        self.closing = True
        self.bounds.run = self.bounds.bif = None
        links = self.links
        started = time.monotonic()
        end = started + CLOSE_S - 0.4  # the rest: sockets, context, run directory
        try:
            if not self.started:
                raise _Abandon()  # start-up never finished: terminate, don't ask
            live = self.live()
            for k in live:
                try:
                    links.send(k, None, "stop", ())
                except Exception:
                    pass
            local = [self.sched_proc(k) for k in live if k not in links.remote]
            # with a dispatcher to stop after them, 2.5 s; without, all but the end
            byes_by = started + (2.5 if self.dispatcher is not None else CLOSE_S - 1.4)
            links.await_byes(
                live,
                byes_by,
                lambda: len(local) < len(live) or any(p.is_alive() for p in local),
            )
            if self.dispatcher is not None and self.procs[0].is_alive():
                drain = max(0.0, min(2.0, end - time.monotonic() - 1.8))
                try:
                    self.final_dispatcher_statistics = self.disp_call(
                        "stop", drain, timeout=drain + 0.8
                    )
                except Exception:
                    pass
        except _Abandon:
            pass
        finally:
            self._end_processes(end)
            links.sock.close(linger=0)
            if self.dispatcher is not None:
                self.dispatcher.sock.close(linger=0)
            if self.auth is not None:
                self.auth.stop()
            self.ctx.term()
            rundir.release(self.dir, self.dir_hold)
            shutil.rmtree(self.dir, ignore_errors=True)
            self.closed = True

    def _end_processes(self, end: float) -> None:
        """Give the processes until shortly before ``end`` to exit by
        themselves, then terminate what is left, then kill it (SIGKILL ends a
        stopped process too), and reap every one."""
        procs = [p for p in self.procs if p.pid is not None]
        settle = min(end - 0.8, time.monotonic() + (0.5 if self.started else 0.0))
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
