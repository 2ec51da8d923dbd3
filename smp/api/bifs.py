"""The trace BIFs called from outside the emulated processes.

``erlang:trace/3``, ``trace_info/2``, ``trace_pattern/3``,
``seq_trace:set_system_tracer/1``, ``system_monitor``, ``system_profile``,
``trace_delivered/1``, ``register/2``, ``whereis/1`` and ``exit/2``, with the
API's conveniences (strings for atoms, flag lists, ``tracer=``).  In smp
mode ``smp.core.bifs.call_bif`` decides each against the controller's
backend (``smp.backend``); in nonsmp the one scheduler answers.
"""

from __future__ import annotations

from smp.core.bifs import call_bif
from smp.core.errors import BadArg, Error
from smp.core.flags import flags_of, monitor_args_of
from smp.core.matchspec import compile_match_spec
from smp.core.terms import Atom, Pid, Port, atom_of

__all__ = ["TraceBifs"]

am_true = Atom("true")

_atom = atom_of
_flags = flags_of
_monitor_args = monitor_args_of


def _spec(x):
    if isinstance(x, str):
        return Atom(x)
    return x


class TraceBifs:
    """The trace BIFs of ``smp.Emulator``."""

    def _bif(self, name: str, *args, caller=None):
        if self.smp:
            return call_bif(self.backend, caller, name, args)
        return self._sched_call(1, "bif", name, args)

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

    def system_monitor(self, *args):
        """``system_monitor()``, ``(undefined | {Pid, Options})``, ``(Pid, Options)``."""
        return self._bif("system_monitor", *_monitor_args(args))

    def system_profile(self, *args):
        """``system_profile()``, ``(undefined | PidOrPort, Options)``."""
        return self._bif("system_profile", *_monitor_args(args))

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
