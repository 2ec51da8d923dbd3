"""What runs inside the emulator during one schedule.

``explore_actor`` is the body of a queue process (it makes its messages
under the held dispatcher, then receives forever); ``_setup`` spawns the
scenario's processes and gives them their roles, ``_apply`` makes one state
change as the BIF call it is, and ``_state`` reads the tracer state back.
``_Names`` turns the pids of one run into the scenario's names (and
timestamps into ``ts``), so that runs on different emulators compare equal
when they did the same thing; ``_msg_type`` classifies a queued message as
the dispatcher does (``SYS_MSG_TYPE_*``).
"""

from __future__ import annotations

from smp.app.explore.scenario import MONITOR_OPTIONS, PROFILE_OPTIONS
from smp.core.errors import BadArg, Error
from smp.core.pretty import format_term
from smp.core.terms import Atom, Pid

__all__ = ["explore_actor"]

_SYS_TAGS = {"trace", "trace_ts", "seq_trace", "monitor", "profile", "notify", "trace_delivered"}
_TS_TAGS = {"trace_ts", "profile"}


async def explore_actor(proc, do, to, count, label, words):
    """A queue process: makes its messages, then receives forever (the
    emulator keeps what it gets: it is spawned with ``keep=True``)."""
    if do == "send":
        for i in range(count):
            await proc.send(to, (Atom("explore"), i))
    elif do == "seq_send":
        await proc.seq_trace("label", label)
        await proc.seq_trace("send", True)
        for i in range(count):
            await proc.send(to, (Atom("explore"), i))
        await proc.set_token([])
    elif do == "gc":
        await proc.allocate(words)
        await proc.garbage_collect()
    elif do == "spin":
        for _ in range(count):
            await proc.sleep(0)
    elif do == "crash":
        raise Error(Atom("explore_crash"))
    while True:
        await proc.receive()


def _msg_type(to, msg) -> str:
    if to == Atom("error_logger"):
        return "ERRLGR"
    tag = msg[0] if type(msg) is tuple and msg else None
    return {
        "trace": "TRACE",
        "trace_ts": "TRACE",
        "seq_trace": "SEQTRACE",
        "monitor": "SYSMON",
        "profile": "SYSPROF",
        "notify": "ERRLGR",
    }.get(str(tag) if type(tag) is Atom else "", "PROC_MSG")


class _Names:
    """Pids by role name in one run (and back), to compare runs."""

    def __init__(self):
        self.pid: dict[str, Pid] = {}
        self.name: dict[Pid, str] = {}
        self.others: dict[Pid, str] = {}  # pids no process of the scenario has

    def add(self, name: str, pid: Pid) -> None:
        self.pid[name], self.name[pid] = pid, name

    def norm(self, t):
        """The term with pids as their names and timestamps as ``ts``."""
        if type(t) is Pid:
            if t in self.name:
                return Atom(self.name[t])
            if t not in self.others:
                self.others[t] = f"pid{len(self.others) + 1}"
            return Atom(self.others[t])
        if type(t) is tuple:
            if (
                len(t) >= 4
                and type(t[0]) is Atom
                and (str(t[0]) in _TS_TAGS or (str(t[0]) == "seq_trace" and len(t) == 4))
            ):
                t = t[:-1] + (Atom("ts"),)
            return tuple(self.norm(x) for x in t)
        if type(t) is list:
            return [self.norm(x) for x in t]
        return t

    def text(self, t) -> str:
        if t is None:
            return "nil"
        out = format_term(self.norm(t))
        if "<" in out:  # pids printed inside strings (an error report's text)
            for pid, name in self.name.items():
                out = out.replace(repr(pid), name)
        return out


def _is_sys(msg) -> bool:
    return type(msg) is tuple and bool(msg) and type(msg[0]) is Atom and str(msg[0]) in _SYS_TAGS


def _atoms(flags) -> list:
    return [Atom(f) for f in flags]


def _opts(d: dict, options: dict) -> list:
    out = []
    for k in options:
        if k in d:
            v = d[k]
            if options[k] is bool:
                if v:
                    out.append(Atom(k))
            else:
                out.append((Atom(k), v))
    return out


def _apply(vm, names: _Names, ch: dict):
    """Make one change; its return value (or the error) as text."""
    a = ch["action"]
    try:
        if a == "seq_tracer":
            r = vm.set_system_seq_tracer(
                Atom("false") if ch["tracer"] is False else names.pid[ch["tracer"]]
            )
        elif a == "system_monitor":
            r = (
                vm.system_monitor(Atom("undefined"))
                if ch["monitor"] == "undefined"
                else vm.system_monitor(names.pid[ch["monitor"]], _opts(ch, MONITOR_OPTIONS))
            )
        elif a == "system_profile":
            r = (
                vm.system_profile(Atom("undefined"), [])
                if ch["profiler"] == "undefined"
                else vm.system_profile(names.pid[ch["profiler"]], _opts(ch, PROFILE_OPTIONS))
            )
        elif a == "trace":
            r = vm.trace(
                names.pid[ch["tracee"]],
                ch["how"],
                _atoms(ch["flags"]),
                tracer=names.pid[ch["tracer"]] if ch["tracer"] else None,
            )
        else:
            r = vm.exit(names.pid[ch["target"]], Atom(ch["reason"]))
        text = names.text(r)
    except BadArg as e:
        text = f"badarg ({e})"
    vm.run()
    return text


def _setup(vm, sc: dict, names: _Names) -> None:
    for p in sc["processes"]:
        names.add(p["name"], vm.spawn_collector())
    for p in sc["processes"]:
        if p["register"]:
            vm.register(p["register"], names.pid[p["name"]])
    st = sc["setup"]
    for t in st["trace"]:
        vm.trace(names.pid[t["tracee"]], True, _atoms(t["flags"]), tracer=names.pid[t["tracer"]])
    if st["seq_tracer"]:
        vm.set_system_seq_tracer(names.pid[st["seq_tracer"]])
    if st["system_monitor"]:
        m = st["system_monitor"]
        vm.system_monitor(names.pid[m["monitor"]], _opts(m, MONITOR_OPTIONS))
    if st["system_profile"]:
        p = st["system_profile"]
        vm.system_profile(names.pid[p["profiler"]], _opts(p, PROFILE_OPTIONS))
    vm.run()


def _state(vm, names: _Names) -> dict:
    return {
        "seq_tracer": names.text(vm.get_system_seq_tracer()),
        "system_monitor": names.text(vm.system_monitor()),
        "system_profile": names.text(vm.system_profile()),
        "dead": sorted(n for n, p in names.pid.items() if not vm.is_alive(p)),
    }
