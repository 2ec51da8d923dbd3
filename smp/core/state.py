"""The global tracer state of ``erl_trace.c`` (the ``sys_trace_rwmtx`` section).

Holds ``default_tracer``/``default_trace_flags``, ``system_seq_tracer``,
``system_monitor`` with its thresholds, ``system_profile`` with its options and
``active_sched``.  Every read takes the read side of a real readers-writer
lock and every change the write side, so no reader sees a tracer without its
flags.  Liveness questions ("is this tracer alive?") are answered by the
``lookup`` given at construction: the scheduler's process table in nonsmp
mode, the dispatcher's pid table in smp mode.  The class is pure: no sockets,
no processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

from smp.core.errors import BadArg
from smp.core.flags import TRACEE_FLAGS
from smp.core.rwlock import RWLock
from smp.core.terms import Atom, Pid, Port

__all__ = [
    "TracerState",
    "Liveness",
    "Snapshot",
    "NIL",
    "FALSE",
    "UNDEFINED",
    "STATE_OPS",
    "STATE_READS",
    "TRACER_ARG",
    "as_seed_sees",
    "apply_state_op",
]

NIL = None  # the seed's NIL: "no tracer"
FALSE = Atom("false")
UNDEFINED = Atom("undefined")


class Liveness(Protocol):
    def is_alive(self, pid: Pid) -> bool: ...
    def is_valid_tracer_port(self, port: Port) -> bool: ...


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A consistent copy of the state, as a replica or a test sees it."""

    version: int
    default_tracer: object
    default_trace_flags: int
    default_cpu_timestamp: bool
    system_seq_tracer: object
    system_monitor: object
    long_gc: int
    long_schedule: int
    large_heap: int
    busy_port: bool
    busy_dist_port: bool
    system_profile: object
    profile_scheduler: bool
    profile_runnable_procs: bool
    profile_runnable_ports: bool
    profile_exclusive: bool

    def __reduce__(self) -> tuple[type[Snapshot], tuple[object, ...]]:
        # by its fields, so a decoder builds it with a plain call (smp.wire.codec)
        return (Snapshot, tuple(getattr(self, f) for f in self.__slots__))


@dataclass
class TracerState:
    """The state itself.  Runs in the scheduler (nonsmp) or the dispatcher (smp)."""

    liveness: Liveness
    lock: RWLock = field(default_factory=RWLock)
    version: int = 0
    default_tracer: object = NIL
    default_trace_flags: int = 0
    default_cpu_timestamp: bool = False
    system_seq_tracer: object = FALSE
    system_monitor: object = NIL
    long_gc: int = 0
    long_schedule: int = 0
    large_heap: int = 0
    busy_port: bool = False
    busy_dist_port: bool = False
    system_profile: object = NIL
    profile_scheduler: bool = False
    profile_runnable_procs: bool = False
    profile_runnable_ports: bool = False
    profile_exclusive: bool = False
    active_sched: int = 0
    on_change: Callable[[Snapshot], None] | None = None

    # -- helpers -----------------------------------------------------------
    def _is_valid_tracer(self, tracer: object) -> bool:
        if type(tracer) is Pid:
            return self.liveness.is_alive(tracer)
        if type(tracer) is Port:
            return self.liveness.is_valid_tracer_port(tracer)
        return False

    def _changed(self) -> None:
        """Bump the version; call with the write lock held."""
        self.version += 1
        if self.on_change is not None:
            self.on_change(self._snapshot())

    def load(self, snap: Snapshot) -> None:
        """Take every field of ``snap``, version included (a scheduler's
        replica catching up with the dispatcher, a replay rewinding); no
        ``on_change``: the state is not changed, it is brought to a known one."""
        with self.lock.write():
            for f in Snapshot.__slots__:
                setattr(self, f, getattr(snap, f))

    def _snapshot(self) -> Snapshot:
        return Snapshot(
            self.version,
            self.default_tracer,
            self.default_trace_flags,
            self.default_cpu_timestamp,
            self.system_seq_tracer,
            self.system_monitor,
            self.long_gc,
            self.long_schedule,
            self.large_heap,
            self.busy_port,
            self.busy_dist_port,
            self.system_profile,
            self.profile_scheduler,
            self.profile_runnable_procs,
            self.profile_runnable_ports,
            self.profile_exclusive,
        )

    def snapshot(self) -> Snapshot:
        with self.lock.read():
            return self._snapshot()

    # -- seq tracer ---------------------------------------------------------
    def set_system_seq_tracer(self, new: object) -> object:
        """``erts_set_system_seq_tracer``: returns the old tracer, or None when
        ``new`` is not a valid tracer (the BIF then raises badarg)."""
        if new is not FALSE and not self._is_valid_tracer(new):
            return None
        with self.lock.write():
            old = self.system_seq_tracer
            self.system_seq_tracer = new
            self._changed()
        return old

    def get_system_seq_tracer(self) -> object:
        with self.lock.read():
            return self.system_seq_tracer

    # -- default tracing ---------------------------------------------------
    def _get_default_tracing(self) -> tuple[int, object]:
        """``get_default_tracing``: resets both when the tracer is gone."""
        if not (self.default_trace_flags & TRACEE_FLAGS):
            self.default_tracer = NIL
        if self.default_tracer is NIL:
            self.default_trace_flags &= ~TRACEE_FLAGS
        elif not self._is_valid_tracer(self.default_tracer):
            self.default_trace_flags &= ~TRACEE_FLAGS
            self.default_tracer = NIL
        return self.default_trace_flags, self.default_tracer

    def change_default_tracing(
        self,
        setflags: bool,
        flags: int | None,
        tracer: object = ...,
        cpu_timestamp: bool | None = None,
    ) -> tuple[int, object]:
        """``erts_change_default_tracing``."""
        with self.lock.write():
            if flags is not None:
                if setflags:
                    self.default_trace_flags |= flags
                else:
                    self.default_trace_flags &= ~flags
            if tracer is not ...:
                self.default_tracer = tracer
            if cpu_timestamp is not None:
                self.default_cpu_timestamp = cpu_timestamp
            result = self._get_default_tracing()
            self._changed()
            return result

    def get_default_tracing(self) -> tuple[int, object]:
        """``erts_get_default_tracing``.  The seed takes only the read lock
        here although ``get_default_tracing`` may reset the pair; we take the
        write lock so a reader never sees the reset half done."""
        with self.lock.write():
            before = (self.default_trace_flags, self.default_tracer)
            result = self._get_default_tracing()
            if result != before:
                self._changed()
            return result

    # -- system monitor ----------------------------------------------------
    def set_system_monitor(
        self,
        monitor: object,
        long_gc: int = 0,
        long_schedule: int = 0,
        large_heap: int = 0,
        busy_port: bool = False,
        busy_dist_port: bool = False,
    ) -> None:
        with self.lock.write():
            self.system_monitor = monitor
            self.long_gc, self.long_schedule, self.large_heap = long_gc, long_schedule, large_heap
            self.busy_port, self.busy_dist_port = busy_port, busy_dist_port
            self._changed()

    def get_system_monitor(self) -> object:
        with self.lock.read():
            return self.system_monitor

    def system_monitor_clear(self) -> None:
        """``erts_system_monitor_clear``."""
        self.set_system_monitor(NIL)

    def system_monitor_get(self) -> Atom | tuple[object, list[Atom | tuple[Atom, int]]]:
        """``system_monitor/0``'s value: ``undefined`` or ``{Pid, Options}``
        with the options in erl_bif_info.c's order (built by CONS, so reversed)."""
        with self.lock.read():
            if self.system_monitor is NIL:
                return UNDEFINED
            res: list[Atom | tuple[Atom, int]] = []
            if self.long_gc:
                res.insert(0, (Atom("long_gc"), self.long_gc))
            if self.long_schedule:
                res.insert(0, (Atom("long_schedule"), self.long_schedule))
            if self.large_heap:
                res.insert(0, (Atom("large_heap"), self.large_heap))
            if self.busy_port:
                res.insert(0, Atom("busy_port"))
            if self.busy_dist_port:
                res.insert(0, Atom("busy_dist_port"))
            return (self.system_monitor, res)

    def monitor_enabled(self) -> bool:
        return bool(
            self.long_gc
            or self.long_schedule
            or self.large_heap
            or self.busy_port
            or self.busy_dist_port
        )

    # -- system profile ----------------------------------------------------
    def set_system_profile(
        self,
        profiler: object,
        scheduler: bool = False,
        runnable_procs: bool = False,
        runnable_ports: bool = False,
        exclusive: bool = False,
        active_schedulers: int | None = None,
    ) -> None:
        with self.lock.write():
            self.system_profile = profiler
            self.profile_scheduler = scheduler
            if scheduler and active_schedulers is not None:
                # erts_system_profile_setup_active_schedulers
                self.active_sched = active_schedulers
            self.profile_runnable_procs = runnable_procs
            self.profile_runnable_ports = runnable_ports
            self.profile_exclusive = exclusive
            self._changed()

    def get_system_profile(self) -> object:
        with self.lock.read():
            return self.system_profile

    def system_profile_clear(self) -> None:
        """``erts_system_profile_clear``."""
        self.set_system_profile(NIL)

    def system_profile_get(self) -> Atom | tuple[object, list[Atom]]:
        """``system_profile/0``'s value, options in erl_bif_trace.c's order."""
        with self.lock.read():
            if self.system_profile is NIL:
                return UNDEFINED
            res: list[Atom] = []
            if self.profile_runnable_ports:
                res.insert(0, Atom("runnable_ports"))
            if self.profile_runnable_procs:
                res.insert(0, Atom("runnable_procs"))
            if self.profile_scheduler:
                res.insert(0, Atom("scheduler"))
            if self.profile_exclusive:
                res.insert(0, Atom("exclusive"))
            return (self.system_profile, res)

    def profile_enabled(self) -> bool:
        return bool(
            self.profile_runnable_procs
            or self.profile_runnable_ports
            or self.profile_exclusive
            or self.profile_scheduler
        )

    # -- exits -------------------------------------------------------------
    def exiting_reset(self, exiting: object, smp: bool) -> None:
        """``exiting_reset``: a process (or port) that is part of the state exits."""
        with self.lock.write():
            if exiting == self.default_tracer:
                self.default_tracer = NIL
                self.default_trace_flags &= TRACEE_FLAGS
            if exiting == self.system_seq_tracer:
                self.system_seq_tracer = FALSE
            if exiting == self.system_monitor:
                if smp:
                    # Let the trace message dispatcher clear flags, etc.
                    self.system_monitor = NIL
                else:
                    self._clear_monitor_locked()
            if exiting == self.system_profile:
                if smp:
                    self.system_profile = NIL
                else:
                    self._clear_profile_locked()
            self._changed()

    def _clear_monitor_locked(self) -> None:
        self.system_monitor = NIL
        self.long_gc = self.long_schedule = self.large_heap = 0
        self.busy_port = self.busy_dist_port = False

    def _clear_profile_locked(self) -> None:
        self.system_profile = NIL
        self.profile_scheduler = self.profile_runnable_procs = False
        self.profile_runnable_ports = self.profile_exclusive = False

    def trace_check_exiting(self, exiting: object, smp: bool) -> bool:
        """``erts_trace_check_exiting``: reset if ``exiting`` is part of the state."""
        with self.lock.read():
            reset = exiting is not NIL and exiting in (
                self.default_tracer,
                self.system_seq_tracer,
                self.system_monitor,
                self.system_profile,
            )
        if reset:
            self.exiting_reset(exiting, smp)
        return reset

    # -- sys_msg_disp_failure side effects -----------------------------------
    def seq_tracer_failed(self, receiver: object) -> None:
        """Reset the seq tracer if it has not changed.  A receiver that is
        ``false`` already (the seq tracer was turned off while the message
        waited) changes nothing, and no new version is published."""
        with self.lock.write():
            if self.system_seq_tracer == receiver and receiver is not FALSE:
                self.system_seq_tracer = FALSE
                self._changed()

    def monitor_failed(self, receiver: object) -> bool:
        """SYSMON branch of ``sys_msg_disp_failure``; True when it cleared."""
        with self.lock.write():
            if receiver is NIL and not self.monitor_enabled():
                return False
            if self.system_monitor == receiver or receiver is NIL:
                self._clear_monitor_locked()
                self._changed()
                return True
            return False

    def profile_failed(self, receiver: object) -> bool:
        """SYSPROF branch of ``sys_msg_disp_failure``; True when it cleared."""
        with self.lock.write():
            if receiver is NIL and not self.profile_enabled():
                return False
            if self.system_profile == receiver or receiver is NIL:
                self._clear_profile_locked()
                self._changed()
                return True
            return False


#: The tracer-state operations the trace BIFs ask for (``bk_state`` in
#: ``smp.core.bifs``), the only ones a frame may name.
STATE_OPS: dict[str, Callable[..., object]] = {
    "change_default_tracing": TracerState.change_default_tracing,
    "get_default_tracing": TracerState.get_default_tracing,
    "set_system_seq_tracer": TracerState.set_system_seq_tracer,
    "get_system_seq_tracer": TracerState.get_system_seq_tracer,
    "set_system_monitor": TracerState.set_system_monitor,
    "system_monitor_get": TracerState.system_monitor_get,
    "system_monitor_clear": TracerState.system_monitor_clear,
    "set_system_profile": TracerState.set_system_profile,
    "system_profile_get": TracerState.system_profile_get,
    "system_profile_clear": TracerState.system_profile_clear,
}
#: Those of them that only read (the others change what every scheduler sees).
STATE_READS = frozenset(
    {"get_default_tracing", "get_system_seq_tracer", "system_monitor_get", "system_profile_get"}
)
#: The operations that name a tracer the state will send to, with its index
#: among their arguments: the dispatcher must know that tracer (alive, as the
#: seed's one process table does) before the state names it.
TRACER_ARG = {"set_system_seq_tracer": 0, "set_system_monitor": 0, "set_system_profile": 0}


def as_seed_sees(op: str, value: object, dead: Callable[[object], bool]) -> object:
    """What a lock-only BIF answers for an old value of the state that names
    a process ``dead`` at its own scheduler whose exit the dispatcher has not
    taken yet: what ``erts_trace_check_exiting`` had left in the seed, which
    runs as the process exits (``false`` for the seq tracer, ``undefined``
    for the monitor and the profiler).  Only for ``STATE_READS`` and
    ``set_system_seq_tracer``, as the BIFs return them."""
    if op in ("set_system_seq_tracer", "get_system_seq_tracer"):
        return FALSE if dead(value) else value
    if op in STATE_READS and type(value) is tuple and value and dead(value[0]):
        return UNDEFINED
    return value


def apply_state_op(state: TracerState, op: object, args: object) -> object:
    """Run the state operation ``op`` a frame names; ``BadArg`` for a name
    not in ``STATE_OPS`` or arguments that do not fit it."""
    fn = STATE_OPS.get(op) if type(op) is str else None
    if fn is None or type(args) is not tuple:
        raise BadArg(f"bad state operation {op!r}")
    try:
        return fn(state, *args)
    except TypeError as e:
        raise BadArg(f"state operation {op}: {e}") from None
