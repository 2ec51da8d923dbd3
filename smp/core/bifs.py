"""The trace BIFs: argument checking and results as in OTP 17's
``erl_bif_trace.c`` and ``erl_bif_info.c``, over a backend that knows where
processes and the tracer state live.

The backend is the scheduler itself in nonsmp mode, and the emulator's
controller in smp mode (which asks the schedulers and the dispatcher).  Every
bad argument raises ``BadArg`` with a message naming the bad part.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Callable, Protocol

from smp.core.errors import BadArg
from smp.core.flags import flags_to_list, parse_trace_flags
from smp.core.matchspec import MatchSpec, compile_match_spec
from smp.core.pretty import format_term
from smp.core.state import FALSE, NIL, UNDEFINED
from smp.core.terms import Atom, Pid, Port, Ref, Term

__all__ = ["Backend", "call_bif", "registrable", "BIF_NAMES", "ALREADY_TRACED"]

am_true, am_false, am_all, am_new, am_existing, am_on_load = (
    Atom("true"),
    Atom("false"),
    Atom("all"),
    Atom("new"),
    Atom("existing"),
    Atom("on_load"),
)
_WILD = Atom("_")


class Backend(Protocol):
    def bk_is_alive(self, pid: Pid) -> bool: ...
    # a live process its scheduler still has, exiting or sent a kill it has
    # not acted on (erts_pid2proc without ERTS_P2P_FLG_ALLOW_OTHER_X misses it)
    def bk_exiting(self, pid: Pid) -> bool: ...
    def bk_valid_tracer_port(self, port: Port) -> bool: ...
    def bk_trace_apply(self, spec: Term, how: bool, bits: int, tracer: object) -> int: ...
    def bk_mark_tracer(self, tracer: Pid) -> None: ...
    # what the state operation ``op`` (smp.core.state.STATE_OPS) returns
    def bk_state(self, op: str, *args: object) -> Any: ...
    def bk_trace_info(self, what: Term, item: str) -> Term: ...
    def bk_trace_info_func(self, mfa: tuple[Term, ...], key: Term) -> Term: ...
    def bk_pattern(
        self, mfa: Term, ms: MatchSpec | None, kind: str, meta_tracer: object, enable: bool
    ) -> int: ...
    def bk_active_schedulers(self) -> int: ...
    def bk_trace_delivered(self, caller: Pid | None, what: Term, ref: Ref) -> Term: ...
    def bk_make_ref(self) -> Ref: ...
    def bk_error_logger(self, caller: Pid | None, text: str) -> None: ...


def registrable(bk: Backend, target: Term, caller: Pid | None) -> bool:
    """Whether ``register(Name, target)`` from ``caller`` finds its target
    (register.c ``erts_register_name``): a port (its own checks follow), or a
    live process, which, unless it is the caller, ``erts_pid2proc`` without
    ``ERTS_P2P_FLG_ALLOW_OTHER_X`` must find: not one exiting or sent a kill
    it has not acted on yet (badarg, nothing traced)."""
    if type(target) is Port:
        return True
    if type(target) is not Pid or not bk.bk_is_alive(target):
        return False
    return target == caller or not bk.bk_exiting(target)


def _bool(v: Term, what: str) -> bool:
    if v is True or v is am_true:
        return True
    if v is False or v is am_false:
        return False
    raise BadArg(f"{what} must be true or false, not {_show(v)}")


def _show(v: object) -> str:
    try:
        return format_term(v)
    except TypeError:
        return repr(v)


def _check_tracer(bk: Backend, tracer: object) -> None:
    if type(tracer) is Pid:
        if not bk.bk_is_alive(tracer):
            raise BadArg(f"tracer {tracer!r} is not alive")
    elif type(tracer) is Port:
        if not bk.bk_valid_tracer_port(tracer):
            raise BadArg(f"tracer {tracer!r} is not an open trace port")
    else:
        raise BadArg(f"tracer must be a pid or a trace port, not {_show(tracer)}")


#: The BIFs a process calls that take locks only, never every thread
#: (17.x erl_bif_trace.c / erl_bif_info.c); ``trace`` only with a pid or a
#: port spec (``all``/``existing`` block thread progress, ``new`` changes
#: the default tracing).  The smp backends serve them so (``smp.backend``,
#: ``smp.sim.backend``).
LOCK_ONLY_BIFS = frozenset({"trace", "set_system_seq_tracer", "system_monitor", "system_profile"})

#: What a backend's ``bk_trace_apply`` returns for a pid or port that another
#: live tracer holds (erl_bif_trace.c ``already_traced``).
ALREADY_TRACED = -1
_ONE_TRACER = "** can only have one tracer per process\n"


def bif_trace(bk: Backend, caller: Pid | None, pid_spec: Term, how: Term, flags: Term) -> int:
    """``erlang:trace(PidSpec, How, FlagList)`` as 17.x ``trace_3``.

    The tracer (``{tracer, T}``, else the caller) must be a live process or a
    valid trace port, for ``true`` and ``false`` alike, and a process tracer
    gets the tracer mark either way.  Without ``{tracer, T}``, ``false``
    clears flags whoever traces.  A pid or port spec may not be the tracer
    itself.  A tracee held by another live tracer is ``badarg`` after
    ``** can only have one tracer per process`` goes to the error logger
    (``erts_send_error_to_logger_str``)."""
    bits, cpu_ts, tracer = parse_trace_flags(flags)
    if tracer is None and caller is None:
        raise BadArg(
            "trace/3 called from the emulator API needs a {tracer, T} flag (or tracer=...)"
        )
    checked = caller if tracer is None else tracer
    _check_tracer(bk, checked)
    if type(checked) is Pid:
        bk.bk_mark_tracer(checked)
    on = _bool(how, "how")
    if on and tracer is None:
        tracer = caller
    if type(pid_spec) in (Pid, Port):
        if cpu_ts:
            raise BadArg("cpu_timestamp can only be set with pid spec 'all'")
        if pid_spec == tracer:
            raise BadArg(f"{pid_spec!r} cannot be its own tracer")
        if type(pid_spec) is Pid and not bk.bk_is_alive(pid_spec):
            raise BadArg(f"process {pid_spec!r} is not alive")
    elif pid_spec not in (am_all, am_new, am_existing):
        raise BadArg(f"pid spec must be a pid, a port, all, existing or new, not {_show(pid_spec)}")
    elif cpu_ts and pid_spec is not am_all:
        raise BadArg("cpu_timestamp can only be set with pid spec 'all'")
    count = 0
    if pid_spec is not am_new:
        count = bk.bk_trace_apply(pid_spec, on, bits, tracer)
        if count == ALREADY_TRACED:
            bk.bk_error_logger(caller, _ONE_TRACER)
            raise BadArg(
                f"{pid_spec!r} already has another tracer (can only have one tracer per process)"
            )
    if pid_spec in (am_all, am_new):
        bk.bk_state(
            "change_default_tracing",
            on,
            bits,
            tracer if on else ...,
            True if (cpu_ts and on) else (False if cpu_ts else None),
        )
    elif cpu_ts:
        bk.bk_state("change_default_tracing", on, None, ..., on)
    return count


#: the largest small integer of a 64-bit emulator (``is_small``: 60 bits, signed)
MAX_SMALL = (1 << 59) - 1
MIN_SMALL = -(1 << 59)


def is_small(v: Term) -> bool:
    """``is_small``: an integer that fits a 64-bit emulator's immediate."""
    return type(v) is int and MIN_SMALL <= v <= MAX_SMALL


def bif_trace_info(bk: Backend, caller: Pid | None, what: Term, item: Term) -> Term:
    """``erlang:trace_info(What, Item)`` as 17.x ``trace_info_2``.

    ``What`` is ``on_load`` (``trace_info_on_load``), an atom or a pid
    (``trace_info_pid``: ``new``, else badarg) or a tuple
    (``trace_info_func``: ``{Module, Function, Arity}``); anything else,
    ports included, is badarg (OTP 19 added ports).  A process that is not
    alive answers ``undefined`` before the item is looked at; for a process
    or ``new`` the item is ``flags`` or ``tracer``."""
    if what is am_on_load:
        # erts_default_trace_pattern_is_on is never set: this emulator has no
        # trace_pattern(on_load, ...), so every key answers false
        return (item, am_false)
    if type(what) is tuple:
        if not (
            len(what) == 3 and type(what[0]) is Atom and type(what[1]) is Atom and is_small(what[2])
        ):
            raise BadArg(f"trace_info needs {{Module, Function, Arity}}, not {_show(what)}")
        return bk.bk_trace_info_func(what, item)
    if what is not am_new and type(what) is not Pid:
        raise BadArg(f"trace_info needs a pid, new, on_load or {{M, F, A}}, not {_show(what)}")
    name = item.name if type(item) is Atom else None
    if what is am_new:
        if name not in ("flags", "tracer"):
            raise BadArg(f"trace_info item must be flags or tracer, not {_show(item)}")
        flags, tracer = bk.bk_state("get_default_tracing")
        if name == "flags":
            return (Atom("flags"), flags_to_list(flags))
        return (Atom("tracer"), [] if tracer is NIL else tracer)
    r = bk.bk_trace_info(what, name if name in ("flags", "tracer") else "flags")
    if r is UNDEFINED or name not in ("flags", "tracer"):
        if r is UNDEFINED:
            return r
        raise BadArg(f"trace_info item must be flags or tracer, not {_show(item)}")
    return r


def bif_trace_pattern(
    bk: Backend, caller: Pid | None, mfa: Term, match_spec: Term, flags: Term = ()
) -> int:
    """``erlang:trace_pattern(MFA, MatchSpec, FlagList)``."""
    if type(mfa) is not tuple or len(mfa) != 3:
        raise BadArg(f"trace_pattern needs {{Module, Function, Arity}}, not {_show(mfa)}")
    m, f, a = mfa
    if not (type(m) is Atom and type(f) is Atom and (type(a) is int or a is _WILD)):
        raise BadArg(f"bad {{Module, Function, Arity}}: {_show(mfa)}")
    if m is _WILD and (f is not _WILD or a is not _WILD):
        raise BadArg("with module '_' the function and arity must be '_' too")
    if f is _WILD and a is not _WILD:
        raise BadArg("with function '_' the arity must be '_' too")
    if type(flags) not in (list, tuple):
        raise BadArg(f"trace_pattern flags must be a list, not {_show(flags)}")
    kind = "global"
    meta_tracer = None
    for fl in flags:
        if fl in (Atom("global"), "global"):
            kind = "global"
        elif fl in (Atom("local"), "local"):
            kind = "local"
        elif fl in (Atom("meta"), "meta"):
            kind = "meta"
            meta_tracer = caller
        elif type(fl) is tuple and len(fl) == 2 and fl[0] in (Atom("meta"), "meta"):
            kind = "meta"
            meta_tracer = fl[1]
        else:
            raise BadArg(f"unknown trace_pattern flag {_show(fl)}")
    enable = not (match_spec is False or match_spec is am_false)
    ms = compile_match_spec(match_spec)
    if kind == "meta" and enable:
        if meta_tracer is None:
            raise BadArg("meta trace from the emulator API needs {meta, Tracer}")
        _check_tracer(bk, meta_tracer)
        if type(meta_tracer) is Pid:
            bk.bk_mark_tracer(meta_tracer)
    return bk.bk_pattern(mfa, ms, kind, meta_tracer, enable)


def bif_set_system_seq_tracer(bk: Backend, caller: Pid | None, tracer: Term) -> Term:
    """``seq_trace:set_system_tracer/1`` (``erts_set_system_seq_tracer``)."""
    if tracer is False:
        tracer = FALSE
    if tracer is not FALSE and type(tracer) not in (Pid, Port):
        raise BadArg(f"seq tracer must be a pid, a port or false, not {_show(tracer)}")
    # erts_set_system_seq_tracer looks the process up in the process table
    if type(tracer) is Pid and not bk.bk_is_alive(tracer):
        raise BadArg(f"seq tracer {tracer!r} is not a valid tracer")
    old = bk.bk_state("set_system_seq_tracer", tracer)
    if old is None:
        raise BadArg(f"seq tracer {tracer!r} is not a valid tracer")
    return old


def bif_get_system_seq_tracer(bk: Backend, caller: Pid | None) -> Term:
    return bk.bk_state("get_system_seq_tracer")


def bif_system_monitor(bk: Backend, caller: Pid | None, *args: Term) -> Term:
    """``erlang:system_monitor/0,1,2`` with erl_bif_info.c's clamping."""
    if not args:
        return bk.bk_state("system_monitor_get")
    if len(args) == 1:
        spec = args[0]
        if spec is UNDEFINED:
            return _system_monitor(bk, UNDEFINED, [])
        if type(spec) is tuple and len(spec) == 2:
            return _system_monitor(bk, spec[0], spec[1])
        raise BadArg(f"system_monitor/1 needs undefined or {{Pid, Options}}, not {_show(spec)}")
    if len(args) == 2:
        return _system_monitor(bk, args[0], args[1])
    raise BadArg("system_monitor takes 0, 1 or 2 arguments")


def _system_monitor(bk: Backend, monitor: Term, options: Term) -> Term:
    if monitor is UNDEFINED or options == []:
        prev = bk.bk_state("system_monitor_get")
        bk.bk_state("system_monitor_clear")
        return prev
    if type(options) is not list:
        raise BadArg(f"system_monitor options must be a list, not {_show(options)}")
    if type(monitor) is not Pid or not bk.bk_is_alive(monitor):
        raise BadArg(f"system monitor must be a live process, not {_show(monitor)}")
    long_gc = long_schedule = large_heap = 0
    busy_port = busy_dist_port = False
    for o in options:
        if type(o) is tuple:
            if len(o) != 2 or type(o[0]) is not Atom:
                raise BadArg(f"bad system_monitor option {_show(o)}")
            key, v = o[0].name, o[1]
            if type(v) is not int or v < 0:
                raise BadArg(
                    f"system_monitor option {key} needs a non-negative integer, not {_show(v)}"
                )
            if key == "long_gc":
                long_gc = max(v, 1)
            elif key == "long_schedule":
                long_schedule = max(v, 1)
            elif key == "large_heap":
                large_heap = max(v, 16384)  # 16 Kword is not an unnatural heap size
            else:
                raise BadArg(f"unknown system_monitor option {key}")
        elif o is Atom("busy_port"):
            busy_port = True
        elif o is Atom("busy_dist_port"):
            busy_dist_port = True
        else:
            raise BadArg(f"unknown system_monitor option {_show(o)}")
    prev = bk.bk_state("system_monitor_get")
    bk.bk_state(
        "set_system_monitor", monitor, long_gc, long_schedule, large_heap, busy_port, busy_dist_port
    )
    return prev


def bif_system_profile(bk: Backend, caller: Pid | None, *args: Term) -> Term:
    """``erlang:system_profile/0,2``."""
    if not args:
        return bk.bk_state("system_profile_get")
    if len(args) != 2:
        raise BadArg("system_profile takes 0 or 2 arguments")
    profiler, options = args
    if profiler is UNDEFINED or options == []:
        prev = bk.bk_state("system_profile_get")
        bk.bk_state("system_profile_clear")
        return prev
    if type(options) is not list:
        raise BadArg(f"system_profile options must be a list, not {_show(options)}")
    if type(profiler) is Pid:
        if not bk.bk_is_alive(profiler):
            raise BadArg(f"profiler {profiler!r} is not alive")
    elif type(profiler) is Port:
        if not bk.bk_valid_tracer_port(profiler):
            raise BadArg(f"profiler {profiler!r} is not an open trace port")
    else:
        raise BadArg(f"profiler must be a pid or a port, not {_show(profiler)}")
    opts = {
        "scheduler": False,
        "runnable_procs": False,
        "runnable_ports": False,
        "exclusive": False,
    }
    for o in options:
        if type(o) is not Atom or o.name not in opts:
            raise BadArg(f"unknown system_profile option {_show(o)}")
        opts[o.name] = True
    prev = bk.bk_state("system_profile_get")
    active = bk.bk_active_schedulers() if opts["scheduler"] else None
    bk.bk_state(
        "set_system_profile",
        profiler,
        opts["scheduler"],
        opts["runnable_procs"],
        opts["runnable_ports"],
        opts["exclusive"],
        active,
    )
    return prev


def bif_trace_delivered(bk: Backend, caller: Pid | None, what: Term) -> Term:
    """``erlang:trace_delivered(Tracee)``: returns a ref; ``{trace_delivered,
    Tracee, Ref}`` reaches the caller once everything traced before is delivered."""
    if what is not am_all and type(what) is not Pid:
        raise BadArg(f"trace_delivered needs a pid or all, not {_show(what)}")
    ref = bk.bk_make_ref()
    return bk.bk_trace_delivered(caller, what, ref)


BIF_NAMES: dict[str, Callable[..., Term]] = {
    "trace": bif_trace,
    "trace_info": bif_trace_info,
    "trace_pattern": bif_trace_pattern,
    "set_system_seq_tracer": bif_set_system_seq_tracer,
    "get_system_seq_tracer": bif_get_system_seq_tracer,
    "system_monitor": bif_system_monitor,
    "system_profile": bif_system_profile,
    "trace_delivered": bif_trace_delivered,
}


def call_bif(bk: Backend, caller: Pid | None, name: str, args: Iterable[Term]) -> Term:
    fn = BIF_NAMES.get(name)
    if fn is None:
        raise BadArg(f"unknown BIF {name!r} (known: {', '.join(sorted(BIF_NAMES))})")
    return fn(bk, caller, *args)
