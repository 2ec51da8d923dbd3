"""The parts of the simulated SMP build a world is made of: a scheduler's
``Node`` (``SimNode``) with its transport cut where the real one lets the
order vary (``SimTransport``), the dispatcher's process table as the simulator
keeps it (``SimTable``), the clocks, the timers the simulator fires, and
the check of a signal between schedulers.  ``smp.sim.world`` steps them."""

from __future__ import annotations

from dispatcher.table import PidTable
from schedulers.engine import Node
from schedulers.process import RPC, Op
from smp.core.clock import Clock
from smp.core.errors import SmpError
from smp.core.placement import pid_owner, port_owner
from smp.core.rwlock import ONE_THREAD
from smp.core.state import TracerState
from smp.core.stats import Stats
from smp.core.terms import Pid, Port
from smp.wire.protocol import decode_signal

from .deps import REGISTRY

__all__ = [
    "AFTER_TIMEOUT_MS",
    "MAX_AFTER_TIMEOUT_MS",
    "SimError",
    "SimClock",
    "SimTable",
    "SimTransport",
    "SimNode",
    "signal_of",
    "collector",
    "check_after_timeout",
    "fires",
    "timer_ms",
]

_BASE_US = 1_700_000_000_000_000  # a plausible now() for the first timestamp


class SimError(SmpError):
    """A workload or schedule the simulator cannot run as given."""


async def collector(proc):
    """A process that receives forever; the simulator keeps what it receives."""
    while True:
        await proc.receive()


class SimClock(Clock):
    """``GET_NOW`` as a counter: the same choices give the same timestamps."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__()
        self.last = _BASE_US

    def now_us(self) -> int:
        self.last += 1
        return self.last


class SimTable(PidTable):
    """The dispatcher's process table, recording what each event reads and writes."""

    def __init__(self, world):
        super().__init__()
        self.world = world

    def is_alive(self, pid) -> bool:
        self.world.fp_r.add(("alive", pid))
        return pid in self.alive

    def is_tracer(self, pid) -> bool:
        self.world.fp_r.add(("alive", pid))
        return pid in self.tracers and pid in self.alive

    def whereis(self, name):
        self.world.fp_r.add(("reg", name))
        pid = self.registry.get(name)
        if type(pid) is Pid:
            self.world.fp_r.add(("alive", pid))
        return super().whereis(name)

    def is_valid_tracer_port(self, port) -> bool:
        """A tracer port of the dispatcher: open for the whole execution (the
        simulator opens them in the setup and closes none), so no event
        changes the answer.  A port a process opened: from its open to its
        close as the dispatcher takes them from its scheduler's stream
        (``("alive", port)``)."""
        tp = self.ports.get(port)
        if tp is not None:
            return not tp.closed
        self.world.fp_r.add(("alive", port))
        return port in self.proc_ports

    def port_opened(self, port) -> None:
        self.world.fp_w.add(("alive", port))
        super().port_opened(port)

    def spawned(self, pid) -> None:
        self.world.fp_w.add(("alive", pid))
        super().spawned(pid)

    def exited(self, pid) -> list:
        self.world.fp_w.add(("alive", pid))
        names = super().exited(pid)
        for n in names:
            self.world.fp_w.add(("reg", n))
        if names:
            self.world.fp_w.add(REGISTRY)
        return names

    def port_closed(self, port) -> list:
        self.world.fp_w.add(("alive", port))
        names = super().port_closed(port)
        for n in names:
            self.world.fp_w.add(("reg", n))
        if names:
            self.world.fp_w.add(REGISTRY)
        return names

    def mark_tracer(self, pid) -> None:
        self.world.fp_w.add(("alive", pid))
        super().mark_tracer(pid)

    def register(self, name, pid) -> bool:
        self.world.fp_w.add(("reg", name))
        self.world.fp_r.add(("alive", pid))
        ok = super().register(name, pid)
        if ok:
            self.world.fp_w.add(REGISTRY)
        return ok

    def unregister(self, name) -> bool:
        self.world.fp_w.add(("reg", name))
        ok = super().unregister(name)
        if ok:
            self.world.fp_w.add(REGISTRY)
        return ok


class SimTransport:
    """``schedulers.engine.Transport`` of a simulated scheduler: collects what
    the node hands on; the world moves it after each of the node's events."""

    def __init__(self, world, k: int, stats: Stats):
        self.world, self.k, self.stats = world, k, stats
        self.sys_made = self.sys_items = 0
        self.out: list = []  # messages (mid first, a tuple) and table events (kind first)
        self.peer_out: list = []
        self.ctl_out: list = []

    def sys(self, type_: int, from_, to, msg, ts_kind: int) -> None:
        mid = self.world.new_message(type_, from_, to, msg, self.k)
        self.out.append((mid, type_, from_, to, msg, ts_kind))
        self.stats.made(type_)
        self.sys_made += 1
        self.sys_items += 1

    def count_made(self) -> None:
        pass  # counted in sys()

    def table_event(self, ev: tuple) -> None:
        self.out.append(ev)
        self.sys_items += 1

    def peer(self, owner: int, signal_) -> None:
        self.peer_out.append((owner, signal_))

    def has_output(self) -> bool:
        return bool(self.out)

    def take_batch(self) -> list:
        out, self.out = self.out, []
        return out

    async def rpc(self, p, *request):
        self.ctl_out.append((p.pid, request))
        result = await Op(RPC)
        if isinstance(result, BaseException):
            raise result
        return result


#: the default of ``after_timeout``: a timeout of this many ms or more never
#: fires in the simulator (the backstops of the built-in workloads, 5,000 ms,
#: stay quiet); a shorter one may fire whenever its process waits
AFTER_TIMEOUT_MS = 1000


#: the largest ``after_timeout`` (ms): a day
MAX_AFTER_TIMEOUT_MS = 86_400_000


def check_after_timeout(v) -> None:
    if type(v) is not int or not 0 <= v <= MAX_AFTER_TIMEOUT_MS:
        raise SimError(
            f"after_timeout must be an int of ms from 0 to {MAX_AFTER_TIMEOUT_MS}, not {v!r}"
        )


def timer_ms(entry: tuple) -> int:
    """The timeout, in ms, of an armed timer of a ``SimNode`` (``Node.timers``):
    its clock stands at 0, so the deadline is the timeout."""
    return _ms(entry[0])


def _ms(deadline: float) -> int:
    return round(deadline * 1000)


def fires(deadline: float, after_timeout: int) -> bool:
    """Whether the simulator lets a timer armed with ``deadline`` fire: a
    ``receive`` timeout or a busy spell shorter than ``after_timeout`` ms (a
    ``SimNode``'s clock stands at 0, so the deadline is the timeout).  There
    is no clock: such a timer may fire at any point while it is armed (every
    order a slow enough machine could give), a longer one never (the system
    is taken to finish what it does within that time), and is not kept."""
    return _ms(deadline) < after_timeout


def _clock_at_zero() -> float:
    return 0.0


class SimNode(Node):
    """A scheduler whose clock stands still (its timers fire when a world
    says, ``Node.fire_timer``) and whose spawns and ports are named."""

    def __init__(self, world, *a, **kw):
        super().__init__(*a, **kw)
        self.world = world
        self.clock = SimClock()
        self.monotonic = _clock_at_zero
        # a collector nobody traces is passive (``Node._make_runnable``)
        self.passive = world.collectors

    def _new_state(self) -> TracerState:
        return TracerState(liveness=self, lock=ONE_THREAD)  # (a world runs in one thread)

    def fire_timers(self) -> None:
        pass

    def arm_timer(self, deadline: float, target, gen: int) -> None:
        if fires(deadline, self.world.after_timeout):
            super().arm_timer(deadline, target, gen)
            # (a cause: the timer fires after the event that armed it)
            self.world.fp_p.add(("timer", self.sched_id, self._timer_seq))
            self.world.timed = True

    # the replica of dead pids and tracer marks, read per pid (smp.sim.deps "replica")
    def is_alive(self, pid) -> bool:
        if type(pid) is Pid and pid_owner(pid, self.nsched) != self.sched_id:
            self.world.fp_r.add(("replica", self.sched_id, pid))
        return super().is_alive(pid)

    def is_valid_tracer_port(self, port) -> bool:
        if type(port) is Port and port_owner(port, self.nsched) != self.sched_id:
            self.world.fp_r.add(("tracer_ports", self.sched_id))
        return super().is_valid_tracer_port(port)

    def is_tracer(self, pid) -> bool:
        if type(pid) is Pid and pid_owner(pid, self.nsched) != self.sched_id:
            self.world.fp_r.add(("replica", self.sched_id, pid))
        return super().is_tracer(pid)

    def _queue_message(self, t, msg, token, trace_recv=False) -> None:
        self.world.fp_w.add(("proc", t.pid))
        super()._queue_message(t, msg, token, trace_recv)

    def deliver_sys_run(self, to, bodies: list) -> None:
        self.world.fp_w.add(("proc", to))
        super().deliver_sys_run(to, bodies)

    def op_open_port(self, p, driver: str, options: dict):
        port_id = super().op_open_port(p, driver, options)
        self.world.name_port(p.pid, port_id)
        return port_id

    def op_spawn(self, parent, fun, args, link=False, scheduler=None):
        pid = super().op_spawn(parent, fun, args, link=link, scheduler=scheduler)
        self.world.name_child(parent.pid, pid)
        return pid


def signal_of(payload, sender: int, here: int, nsched: int):
    """A signal on a scheduler-to-scheduler channel, decoded and checked as
    ``schedulers.worker`` decodes a peer frame's (``protocol.decode_signal``):
    every kind is carried, a command to a port of another scheduler and the
    port's answer included (a busy port answers once its spell ends, at the
    point the explorer fires its timer)."""
    return decode_signal(payload, sender, here, nsched)
