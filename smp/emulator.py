"""``smp.Emulator``: the public API, and ``run()``.

Runs in the user's process.  The emulator's processes are started,
watched and stopped by ``smp.supervision`` (the schedulers; in smp mode also
the dispatcher), which reaches them over the request/reply links of
``smp.link``, laid out by ``smp.endpoints``; this module is what a user
calls.  Between ``run()`` calls the schedulers are paused, so everything set
up between runs takes effect before any emulated process executes.
``run()`` resumes the schedulers and returns once the whole system is
quiet: every scheduler idle with no timer pending, every message between
schedulers received, every system message taken by the dispatcher and
dispatched (or parked behind ``hold_dispatcher()``), checked twice with the
same counts.  It also serves the BIFs that processes call in smp mode.
"""

from __future__ import annotations

import inspect
import time

from schedulers.procs import DEFAULT_MAX_PROCESSES, MAX_MAX_PROCESSES
from smp.api.bifs import TraceBifs
from smp.api.dispatcher import DispatcherControl
from smp.api.ports import TracePorts
from smp.api.statistics import StatisticsCalls
from smp.backend import OutOfTime, SmpBackend
from smp.core.bifs import call_bif, registrable
from smp.core.errors import BadArg, EmulatorTimeout, SchedulerLost, SmpError, check_seconds
from smp.core.placement import owner
from smp.core.terms import Pid, atom_of
from smp.endpoints import plan_endpoints, plan_security, tcp_endpoints
from smp.link import FrameLog, TimeBounds
from smp.supervision import Supervisor
from smp.wire import rundir

# tcp_endpoints: here too for the scheduler launcher (smp.app.cluster)
__all__ = ["Emulator", "tcp_endpoints"]

# Time bounds.  run(timeout=T) and run_for(T) end within T + 1 s: the run
# loop's own calls end by T + RUN_GRACE_S (so do those of the BIFs served
# once every scheduler has paused, none begun after PAUSE_SERVE_S), a BIF
# that has begun to change something may finish until T + BIF_GRACE_S, the
# pause after it until T + PAUSE_END_S.  close() ends within
# supervision.CLOSE_S, whatever the processes do.
RUN_GRACE_S = 0.25
BIF_GRACE_S = 0.6
PAUSE_END_S = 0.85
PAUSE_SERVE_S = 0.05


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


_atom = atom_of


async def collector(proc):
    """A process that receives forever; the emulator keeps what it receives."""
    while True:
        await proc.receive()


class Emulator(TraceBifs, TracePorts, DispatcherControl, StatisticsCalls):
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

        self.security, self.insecure = plan_security(bind, curve, keys, insecure, remote_schedulers)
        self.remote_schedulers = remote_schedulers
        self.journal = journal
        self.mode = mode
        self.max_processes = max_processes
        self.smp = mode == "smp"
        self.nsched = schedulers
        self.backend = SmpBackend(self)
        self._running = False  # inside run(), between resume and pause
        self._stepper = None  # a smp.stepper.Stepper stepping this paused emulator
        self._rr = 0
        self._run_count = 0
        # run()'s time bounds and the BIF being served, shared with the links
        self._bounds = TimeBounds()
        self._reply_after_resume = False  # the BIF answers after the next run()'s resume
        self._late_replies: list = []  # (scheduler, pid, value) for the next run()
        self._frames = FrameLog()  # frames refused on the controller's sockets
        # owner-only, held by every process of this emulator: the last to exit
        # removes it (and runs whose processes were all killed are swept first)
        run_dir, hold = rundir.make(endpoint_dir)
        self._sup = sup = Supervisor(
            mode_smp=self.smp,
            nsched=schedulers,
            remote_schedulers=remote_schedulers,
            layout=plan_endpoints(run_dir, bind, advertise, start_timeout),
            dir_hold=hold,
            security=self.security,
            insecure=self.insecure,
            journal=journal,
            max_processes=max_processes,
            bounds=self._bounds,
            log=self._frames,
        )
        # the supervisor's calls, under the names the backend and the tools use
        self._sched_call, self._disp_call = sup.sched_call, sup.disp_call
        self._all_scheds, self._call_scheds = sup.all_scheds, sup.call_scheds
        self.endpoints = sup.endpoints
        self.ctx, self.auth, self.ctl = sup.ctx, sup.auth, sup.links.sock
        #: Schedulers that died, with why: {scheduler id: description}.
        self.lost_schedulers: dict[int, str] = sup.lost_schedulers
        #: After close(): each scheduler's last statistics, and the dispatcher's.
        self.final_statistics: dict[int, dict] = sup.links.byes
        self.final_dispatcher_statistics: dict | None = None
        #: what ``run_for`` last found still busy when its time was up (or None)
        self.last_busy: str | None = None
        self.disp = None
        try:
            sup.start(start_timeout, {"reductions": reductions, "placement": placement})
        except BaseException:
            self.close()
            raise
        if self.smp:
            self.dispatcher_pid = sup.dispatcher_pid
            self.disp = sup.dispatcher.sock
        self.scheduler_hosts = sup.scheduler_hosts

    @property
    def bad_frames(self) -> int:
        """Frames refused on the controller's sockets (counted, logged, ignored)."""
        return self._frames.count

    @property
    def last_bad_frame(self) -> str:
        return self._frames.last

    @property
    def os_pids(self) -> list[int]:
        """The OS pids of the scheduler and dispatcher processes."""
        return [p.pid for p in self._sup.procs if p.pid is not None]

    def close(self) -> None:
        """Stop every OS process of this emulator; safe to call twice.  Ends
        within ``CLOSE_S`` (5 s) whatever the processes do: the schedulers
        hand their last batch over for at most 2.5 s, the dispatcher
        dispatches what is queued for what time is left (at most 2 s, the
        rest is dropped as ``emulator_closed``) and closes its ports, and a
        process that has not exited by then is terminated, then killed (a
        stopped one included)."""
        try:
            self._sup.close()
        finally:
            self.final_dispatcher_statistics = self._sup.final_dispatcher_statistics

    def __enter__(self) -> "Emulator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ================================================================ calls
    def _owner(self, x) -> int:
        try:
            return owner(x, self.nsched)
        except ValueError as e:
            raise BadArg(str(e)) from None

    def _sync_dispatcher(self, limit: float | None = None, answer: float = 30.0) -> dict:
        """Wait until the dispatcher has taken every batch the schedulers sent
        (with ``limit``, at most that many seconds); returns each scheduler's
        status as it was asked.  ``answer``: the seconds a peer has to answer
        beyond that (``Unanswered`` naming it)."""
        if not self.smp:
            return {}
        items = [0] * (self.nsched + 1)
        sts = self._all_scheds("status", timeout=answer)
        for k, st in sts.items():
            items[k] = st["sys_items"]
        capped = False
        if self._bounds.run is not None:  # inside run(): at most until its time is up
            left = self._bounds.run - time.monotonic() - 0.05
            if limit is None or left < limit:
                limit, capped = max(0.0, left), True
        wait = answer if limit is None else limit + answer
        if not self._disp_call("wait_ingested", items, limit, timeout=wait) and capped:
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
        left = 10.0 if self._bounds.run is None else max(0.0, self._bounds.run - time.monotonic())
        try:
            self._all_scheds("wait_published", seqs, left)
        except TimeoutError as e:  # a scheduler's own wait ran out
            if self._bounds.run is None or isinstance(e, EmulatorTimeout):
                raise
            raise OutOfTime(str(e)) from None

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

    def run_for(self, seconds: float) -> bool:
        """Run for at most ``seconds``; True when the system became quiet,
        False when it is still busy (it is paused again either way; what
        was busy is in ``last_busy``)."""
        check_seconds("run_for: seconds", seconds)
        try:
            self.run(timeout=seconds)
            self.last_busy = None
            return True
        except EmulatorTimeout as e:
            self.last_busy = str(e).split(": ", 1)[-1]
            return False

    def run(self, timeout: float = 10.0) -> None:
        """Run until quiet; raises ``EmulatorTimeout`` naming what is still busy,
        ``SchedulerLost`` (after the rest became quiet) when a scheduler died,
        ``DispatcherLost`` when the dispatcher died.  Returns or raises within
        ``timeout`` + 1 s whatever the processes do: a scheduler or the
        dispatcher that does not answer in time (stopped, or held by a process
        that does not yield) is named in the ``EmulatorTimeout``."""
        check_seconds("run: timeout", timeout)
        self._sup.check_open()
        deadline = time.monotonic() + timeout
        self._bounds.run = deadline + RUN_GRACE_S
        self._bounds.bif = deadline + BIF_GRACE_S
        stable = None
        time_up = False
        try:
            self._resume()
            self._running = True
            while True:
                self._sup.check_processes()
                self._serve_rpcs(deadline)
                sts = self._all_scheds("status")
                live = sorted(sts)
                quiet = all(s["idle"] and not s["timer"] and not s["backlog"] for s in sts.values())
                snap = tuple(
                    (k, tuple(s["peer_recv"]), s["sys_made"], s["deliveries"])
                    for k, s in sorted(sts.items())
                )
                self._sup.last_made = sum(s["sys_made"] for s in sts.values())
                if quiet and self.smp:
                    d = self._disp_call("status")
                    self._last_disp_status = d
                    quiet = smp_quiet(sts, d, live)
                    snap = snap + (
                        tuple(d["ingested_items"]),
                        tuple(d["delivered_to"]),
                        d["queued"],
                    )
                if quiet and not self._sup.links.rpcs and snap == stable:
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
                    time_up = True
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
                    self._sup.links.pump(pause)
        except OutOfTime as e:
            raise EmulatorTimeout(f"run() not quiet after {timeout:g} s: {e}") from None
        finally:
            self._running = False
            try:
                if not self._sup.closing_after_loss and not self._sup.closed:
                    # every scheduler is sent its pause; the answers are awaited
                    # at most until timeout + PAUSE_END_S (one that answers later
                    # pauses when it reads it, before anything else it is asked)
                    self._bounds.run = min(
                        max(time.monotonic(), self._bounds.run) + 0.2, deadline + PAUSE_END_S
                    )
                    try:
                        self._all_scheds("pause")
                    except OutOfTime:
                        time_up = False  # not every scheduler is known paused
                    if time_up and self._sup.links.rpcs and self._stepper is None:
                        self._serve_paused(deadline)
            finally:
                self._bounds.run = self._bounds.bif = None
        self._run_count += 1
        if self._sup.new_losses:
            report, self._sup.new_losses = self._sup.new_losses, []
            raise SchedulerLost("; ".join(report))

    def settle(self, timeout: float = 1.0) -> bool:
        """After a run cut short (Ctrl-C), every process still paused: let the
        dispatcher take every batch the schedulers sent and dispatch its
        queue, and each scheduler take what was delivered to it, so that the
        collectors hold every message ``statistics()`` counts as delivered.
        True when that was reached within ``timeout`` (nonsmp, which has no
        dispatcher and nothing in flight: at once); False otherwise, or when
        a scheduler or the dispatcher is gone."""
        if not self.smp:
            return True
        self._sup.check_open()
        deadline = time.monotonic() + timeout
        self._bounds.run = deadline
        try:
            while True:
                sts = self._all_scheds("status")
                d = self._disp_call("status")
                live = sorted(sts)
                short = [k for k in live if d["delivered_to"][k] > sts[k]["deliveries"]]
                if (
                    not short
                    and all(d["ingested_items"][k] == sts[k]["sys_items"] for k in live)
                    and (d["held"] or (d["queued"] == 0 and not d["dispatching"]))
                ):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                for k in short:
                    self._sched_call(k, "wait_deliveries", d["delivered_to"][k], left)
                if not short:  # the dispatcher still takes batches or dispatches
                    self._sup.links.pump(0.001)
        except SmpError:  # out of time, or a process gone
            return False
        finally:
            self._bounds.run = None

    def _resume(self) -> None:
        """Resume every scheduler (smp: once its replica has taken every state
        publication made so far), then answer the BIFs whose answer waited
        for that."""
        try:
            if self.smp:
                end = self._bounds.run
                left = 10.0 if end is None else max(0.0, end - time.monotonic())
                self._all_scheds("resume", self._disp_call("pub_seq"), left)
            else:
                self._all_scheds("resume")
        except TimeoutError as e:  # a replica did not catch up in time
            if isinstance(e, EmulatorTimeout) or self._bounds.run is None:
                raise
            raise OutOfTime(str(e)) from None
        late, self._late_replies = self._late_replies, []
        for k, pid, value in late:
            if k not in self.lost_schedulers:
                self._sup.links.send(k, None, "reply", (pid, value))

    def _serve_rpcs(self, deadline: float | None = None) -> None:
        """Serve the BIFs emulated processes called (smp mode).

        A BIF cut short by run()'s time before it changed anything (waiting
        for the dispatcher to take the schedulers' batches, say) is put back
        behind the others waiting and served again in the next run(); one
        that has changed something is finished.  Ctrl-C is never an answer:
        it stops the run, and the BIF waits for the next."""
        # only those waiting now, and none once ``deadline`` is past: serving
        # one can bring in more, and processes that call BIFs without pause
        # must not hold run() (and run_for's callers' sampling) past its
        # timeout (those still waiting then: _serve_paused)
        rpcs = self._sup.links.rpcs
        for _ in range(len(rpcs)):
            if deadline is not None and time.monotonic() > deadline:
                break
            self._serve_one(rpcs.pop(0))

    def _serve_paused(self, deadline: float) -> None:
        """run()'s time is up and every scheduler has paused: the BIFs
        processes called that still wait (they came after the loop's last
        pass, or in the slices before the pause) are served now, for
        ``PAUSE_SERVE_S`` at most.  Paused schedulers answer the calls a BIF
        makes at once, where running ones answer between slices, and each
        caller has its answer when it runs again, rather than after the next
        run()'s resume and a BIF served under load (a kill_tracer retraces
        its tracees one BIF after the other).  No process runs meanwhile, so
        serving brings in no more.  A BIF's waits end as in the run (by
        ``RUN_GRACE_S`` after its time: one that outlasts that goes back to
        be served in the next run()), none is begun after ``PAUSE_SERVE_S``,
        and Ctrl-C stops it, as it stops the run."""
        now = time.monotonic()
        if now >= deadline + RUN_GRACE_S:  # the pause took that long
            return
        self._bounds.run = deadline + RUN_GRACE_S
        self._running = True  # as inside run(): the BIFs see the schedulers as they were
        try:
            self._serve_rpcs(now + PAUSE_SERVE_S)
        except OutOfTime:
            pass
        finally:
            self._running = False

    def _serve_one(self, item) -> None:
        """Serve one BIF request ``(scheduler, pid, request)`` and answer it
        (a request cut short before it changed anything goes back to be
        served again: first after a Ctrl-C, last when its wait used up
        run()'s time, so that a BIF held by the dispatcher's push-back
        (register/2 waits for every batch, say) does not hold the BIFs of
        other processes, the fault controller's among them, for as many
        run()s as the push-back lasts: each process waits for one BIF at
        most, and in the seed BIFs of different processes do not wait for
        each other)."""
        rpcs, b = self._sup.links.rpcs, self._bounds
        k, pid, request = item
        budget = b.run
        b.serving, b.changed, self._reply_after_resume = item, False, False
        try:
            kind = request[0]
            # a lock-only BIF waits for no queue (smp.backend)
            self.backend.begin_process_bif(k, request[1] if kind == "bif" else kind)
            if kind == "bif":
                value = call_bif(self.backend, pid, request[1], request[2])
            elif kind == "register":
                name, target = request[1], request[2]
                # erts_register_name: a port, or a live process not exiting (but
                # the caller), asked as the API asks it (smp.core.bifs.registrable)
                value = registrable(self.backend, target, pid)
                if value:
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
            if not b.changed:
                rpcs.insert(0, item)
            raise
        except OutOfTime as e:
            if not b.changed:
                rpcs.append(item)
                raise
            # it changed something, and a process still did not answer
            value = EmulatorTimeout(f"{request[1] if request[0] == 'bif' else request[0]}: {e}")
        except Exception as e:
            value = e
        finally:
            self.backend.end_process_bif()
            late = self._reply_after_resume
            b.serving, b.changed, self._reply_after_resume = None, False, False
            b.run = budget
        if late:
            self._late_replies.append((k, pid, value))
        else:
            self._sup.links.send(k, None, "reply", (pid, value))
