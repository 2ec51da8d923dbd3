"""Proof on real processes: an execution the simulator found, run again on
the real multiprocess emulator, step by step, with the same fates.

``prove(setup, schedule, schedulers=N)`` runs ``setup`` twice: on a
simulated world (``smp.sim.world.World``) and on a fresh smp ``Emulator``
(real scheduler and dispatcher processes, real ZeroMQ sockets), both through
the same facade (``smp.sim.vm.SimVM``).  Then it takes each thread of the
schedule (and, when the schedule ends early, the first thread enabled, as
``smp.sim.replay`` does) in both: the world steps it, and the emulator's
processes do the same event over their sockets (``smp.stepper.Stepper``).
After every step what the real processes did is held against the event:
which process ran and how its slice ended, how many items a batch brought
to the queue, each message's fate at dispatch (the receiver, or the drop
reason) and at arrival (alive or dead), each signal, each publication's
kind, each BIF served.  At the end every collector's messages are compared
in full.  The first step that differs is reported with both sides.

A catalogue race's setup (``smp.sim.catalogue``), a run scenario compiled
for the simulator (``smp.app.explore.workload``) or any ``setup(vm)`` runs
here; ``smp-emu explore ... --prove`` proves every outcome it prints.  (An
explore scenario of queued messages and changes runs on the real emulator
already, and takes no ``--prove``.)
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from schedulers.engine import timer_kind, timer_target
from smp.core.bifs import call_bif
from smp.core.errors import BadArg, SmpError
from smp.core.messages import DECIDED_BY_RECEIVER, SYS_MSG_TYPE_TRACE
from smp.emulator import Emulator
from smp.sim.explorer import check_schedule, not_steppable, world_factory
from smp.sim.nodes import AFTER_TIMEOUT_MS
from smp.sim.outcome import Namer
from smp.sim.vm import SimVM
from smp.sim.world import SimError, World, WorldBase, mid_text
from smp.stepper import Stepper

__all__ = ["Proof", "prove", "proof_lines"]

#: a publication of the simulated ingest, by the real one's record name
_PUB_KINDS = {
    "snap": "Snap",
    "dead": "Dead",
    "tracer": "Tracers",
    "reg": "Registry",
    "ports": "TracerPorts",
}


@dataclass
class Proof:
    """What one schedule did in the simulator and on the real processes."""

    schedule: str  # every thread stepped, the schedule's and the default tail
    steps: int
    mismatches: list = field(default_factory=list)  # "step N (THREAD): ..." lines
    fates: dict = field(default_factory=dict)  # message -> (simulator's fate, real fate)
    received: dict = field(default_factory=dict)  # collector -> (simulator's, real) messages
    ports: int = 0  # how many of ``received`` are tracer ports

    @property
    def same(self) -> bool:
        return not self.mismatches

    def as_dict(self) -> dict:
        return {
            "schedule": self.schedule,
            "steps": self.steps,
            "same": self.same,
            "mismatches": self.mismatches,
            "fates": {m: list(f) for m, f in self.fates.items()},
        }


class _EmulatorWorld(WorldBase):
    """The part of a simulated world ``SimVM`` uses, over a real emulator:
    the setup reads the same on both (and names its processes alike)."""

    def __init__(self, emu: Emulator):
        super().__init__(emu.nsched)
        self.emu = emu
        self._ports: dict = {}

    def trace_ports(self) -> dict:
        return self._ports

    def open_trace_port(self, name):
        """A memory port, whatever the kind the setup asked: the simulator's
        ports are sinks, and the proof reads back what was written."""
        port = self.emu.open_trace_port("memory")
        self._ports[port] = None
        self.name_trace_port(port, name)
        return port

    def spawn(self, k: int, fun, args, keep: bool, name):
        pid = self.emu.spawn(fun, *args, scheduler=k, keep=keep)
        self.name_top(pid, name)
        return pid

    def bif(self, name: str, *args):
        return call_bif(self.emu.backend, None, name, args)

    def register(self, name, pid) -> bool:
        try:
            self.emu.register(name, pid)
        except BadArg:
            return False
        return True

    def settle(self) -> None:
        pass  # each call of the emulator's API is done when it returns

    def exit(self, pid, reason) -> None:
        self.emu.exit(pid, reason)

    def define(self, key: tuple, fn) -> None:
        self.emu.define(key[0], key[1], fn)

    def proc(self, pid):
        raise SmpError(
            "a setup proved on real processes cannot read a process's state "
            "(vm.messages, vm.is_alive) before the schedule runs"
        )


def proof_lines(proofs: list) -> str:
    """The report's section: one line per ``(what, Proof)``, then each
    mismatch."""
    out = ["Proof on real processes (a fresh smp emulator stepped event by event):"]
    for what, p in proofs:
        if p.same:
            out.append(
                f"  {what}: the same on real processes ({p.steps} steps, "
                f"{len(p.fates)} message fate(s), {len(p.received) - p.ports} collector(s)"
                + (f" and {p.ports} tracer port(s)" if p.ports else "")
                + " alike)"
            )
        else:
            out.append(f"  {what}: DIFFERS on real processes: {p.mismatches[0]}")
            out += [f"    {m}" for m in p.mismatches[1:5]]
    return "\n".join(out) + "\n"


def _fate_text(f) -> str:
    if f is None:
        return "undecided"
    if f[0] == "dropped":
        return f"dropped {f[1]} ({f[2]!r})"
    return f"{f[0]} ({f[1]!r})"


def _check_args(setup, schedule) -> None:
    if not callable(setup) or inspect.iscoroutinefunction(setup):
        raise BadArg("setup must be a function setup(vm)")
    try:
        check_schedule(schedule)
    except SimError as e:
        raise BadArg(str(e)) from None


def prove(
    setup,
    schedule: str = "",
    schedulers: int = 2,
    reductions: int = 200,
    max_steps: int = 10_000,
    after_timeout: int = AFTER_TIMEOUT_MS,
) -> Proof:
    """Run ``schedule`` (thread names, ``smp.sim.replay``'s) in the simulator
    and on a fresh real emulator together; a ``Proof`` of what differed.
    The real schedulers' timers fire where the schedule fires them, never
    by the clock."""
    _check_args(setup, schedule)
    emu = Emulator("smp", schedulers=schedulers, reductions=reductions)
    w = stepper = None
    try:
        w = world_factory(setup, schedulers, reductions, after_timeout)()
        emu._disp_call("hold")  # what the setup makes waits in the queue, as in the world
        real_world = _EmulatorWorld(emu)
        setup(SimVM(real_world))
        emu._sync_dispatcher()
        emu._publish_wait()
        stepper = Stepper(emu, w.collectors)
        proof = Proof("", 0)
        names = Namer(w.names)
        started = stepper.start(w.started)
        if started != w.started:
            proof.mismatches.append(
                f"setup: passive collectors started {started!r}, the simulator {w.started!r}"
            )
        if list(real_world.trace_ports()) != list(w.trace_ports()):
            proof.mismatches.append(
                f"setup: tracer ports {list(real_world.trace_ports())!r} here, "
                f"{list(w.trace_ports())!r} in the simulator"
            )
        real_fates: dict = {}
        threads = schedule.split()
        done: list[str] = []
        while not proof.mismatches:
            en = w.enabled()
            if len(done) < len(threads):
                t = threads[len(done)]
                if t not in en:
                    raise SmpError(not_steppable(len(done), t, en, schedulers, after_timeout))
            elif en:
                t = en[0]
            else:
                break
            if len(done) == max_steps:
                proof.mismatches.append(f"not finished within {max_steps} steps")
                break
            done.append(t)
            why = _step_both(w, stepper, t, real_fates)
            if why:
                proof.mismatches.append(f"step {len(done)} ({t}): {names.text(why)}")
        proof.schedule, proof.steps = " ".join(done), len(done)
        for mid, f in sorted(w.fates.items()):
            real = real_fates.get(mid)
            proof.fates[mid_text(mid)] = (_fate_text(f), _fate_text(real))
            if not proof.mismatches and _fate_text(f) != _fate_text(real):
                proof.mismatches.append(
                    f"{mid_text(mid)}: {_fate_text(f)} in the simulator, {_fate_text(real)} here"
                )
        _compare_received(proof, w, emu, real_world, names)
        if not proof.mismatches:
            _compare_stderr(proof, emu.statistics().stderr_lines, w.stderr, names)
        return proof
    finally:
        try:
            if stepper is not None:
                stepper.close()  # may fail when a step failed: the emulator closes anyway
        finally:
            emu.close()
            if w is not None:
                w.dispose()


def _compare_received(proof: Proof, w: World, emu, real_world, names: Namer) -> None:
    """What each collector got and what was written to each tracer port, in
    the simulator and on the real processes (timestamps as ``Ts``)."""
    for pid in sorted(w.collectors, key=repr):
        sim = list(w.proc(pid).kept)
        real = emu.messages(pid)
        proof.received[names.pid(pid)] = (sim, real)
        if names.term(sim, ts=True) != names.term(real, ts=True):  # timestamps as Ts
            proof.mismatches.append(
                f"{names.pid(pid)} received {len(sim)} message(s) in the simulator, "
                f"{len(real)} here: {names.term(sim)} / {names.term(real)}"
            )
    for port, tp in w.trace_ports().items():
        sim = tp.terms()
        real = emu.trace_port_terms(port) if port in real_world.trace_ports() else []
        proof.received[names.pid(port)] = (sim, real)
        proof.ports += 1
        if names.term(sim, ts=True) != names.term(real, ts=True):
            proof.mismatches.append(
                f"{names.pid(port)} was written {len(sim)} message(s) in the simulator, "
                f"{len(real)} here: {names.term(sim)} / {names.term(real)}"
            )


def _compare_stderr(proof: Proof, real_lines: list, sim_lines: list, names: Namer) -> None:
    """What ``sys_msg_disp_failure`` printed, on the real dispatcher (kept
    while stepped) and in the simulator."""
    if real_lines != sim_lines:
        proof.mismatches.append(
            f"the dispatcher printed {names.text(''.join(real_lines))!r} here, "
            f"{names.text(''.join(sim_lines))!r} in the simulator"
        )


def _step_both(w: World, st: Stepper, t: str, real_fates: dict) -> str | None:
    """Step thread ``t`` in the world and on the real processes; what
    differed (None: the same)."""
    step = _STEPS.get(t[0])
    if step is None:
        raise SmpError(f"no thread {t!r}")
    return step(w, st, t, real_fates)


def _slice(w: World, st: Stepper, t: str, _fates) -> str | None:
    k = int(t[1:])
    pid = w.nodes[k].runq[0].pid
    made, rpcs = w.made_by[k], len(w.rpcs)
    sent = {o: w.chan_sent.get((k, o), 0) for o in range(1, w.nsched + 1)}
    w.step(t)
    p = w.nodes[k].procs.get(pid)
    sim = (
        pid,
        p.status if p is not None else "exited",
        w.made_by[k] - made,
        {
            o: w.chan_sent.get((k, o), 0) - n
            for o, n in sent.items()
            if w.chan_sent.get((k, o), 0) > n
        },
        len(w.rpcs) - rpcs,
    )
    real = tuple(st.slice(k))
    if real != sim:
        return f"ran {_slice_text(sim)} in the simulator, {_slice_text(real)} here"
    return None


def _slice_text(r: tuple) -> str:
    pid, status, made, sigs, rpcs = r
    to = ", ".join(f"{n} to scheduler {o}" for o, n in sorted(sigs.items())) or "none"
    return f"{pid!r} ({status}; {made} message(s) made, signals: {to}, {rpcs} BIF request(s))"


def _ingest(w: World, st: Stepper, t: str, _fates) -> str | None:
    k = int(t[1:])
    n_items = len(w.ing[k][0][2])
    w.step(t)
    queued, items = st.ingest(k)
    if (queued, items) != (1, n_items):
        return (
            f"the batch brought {n_items} item(s) in the simulator; here {queued} "
            f"batch(es) queued with {items} item(s)"
        )
    return None


def _dispatch(w: World, st: Stepper, t: str, real_fates: dict) -> str | None:
    mid, type_, from_, _to, body, *_ = w.queue[0]
    w.step(t)
    sim = w.fates[mid]
    got = st.dispatch()
    if len(got) != 1:
        return f"{mid_text(mid)}: {len(got)} message(s) dispatched here"
    rfrom, rrecv, rbody, outcome = got[0]
    real = ("delivered", rrecv) if str(outcome) == "delivered" else ("dropped", str(outcome), rrecv)
    real_fates[mid] = real
    if type_ in DECIDED_BY_RECEIVER:
        # a run of them travels under its first message's sender: the
        # message is told by its body (a TRACE one by its tracee)
        same = rbody == body if type_ != SYS_MSG_TYPE_TRACE else rbody[1] == body[1]
        rfrom = from_ if same else rfrom
    if rfrom != from_ or _fate_text(real) != _fate_text(sim):
        return (
            f"{mid_text(mid)} from {from_!r}: {_fate_text(sim)} in the simulator, "
            f"{_fate_text(real)} from {rfrom!r} here"
        )
    return None


def _arrive(w: World, st: Stepper, t: str, real_fates: dict) -> str | None:
    i, k = (int(x) for x in t[1:].split(">"))
    if i:
        ev = w.step(t)
        what = st.arrive(i, k)
        if not ev.label.startswith(what):
            return f"{ev.label} in the simulator, {what} here"
        return None
    _seq, (mid, to, _term), _nb = w.chans[(0, k)][0]
    w.step(t)
    rto, alive = st.arrive(0, k)
    sim_alive = w.fates[mid][0] != "arrived_dead"
    if not alive:
        real_fates[mid] = ("arrived_dead", rto)
    if (rto, alive) != (to, sim_alive):
        return (
            f"{mid_text(mid)} reached {to!r} ({_alive(sim_alive)}) in the simulator, "
            f"{rto!r} ({_alive(alive)}) here"
        )
    return None


def _alive(yes: bool) -> str:
    return "alive" if yes else "dead"


def _publish(w: World, st: Stepper, t: str, _fates) -> str | None:
    k = int(t[1:])
    kind = w.pubs[k][0][1][0]
    w.step(t)
    real = st.publish(k)
    if real != _PUB_KINDS[kind]:
        return f"a {kind} publication in the simulator, {real} here"
    return None


def _serve(w: World, st: Stepper, t: str, _fates) -> str | None:
    pid, _seq, req = w.rpcs[t[1:]]
    w.step(t)
    rreq = st.serve(pid)
    if tuple(rreq[:2]) != tuple(req[:2]):
        return f"{req[:2]!r} in the simulator, {rreq[:2]!r} here"
    return None


def _timer(w: World, st: Stepper, t: str, _fates) -> str | None:
    k, e = w.armed_timer(t[1:])
    sim = (timer_target(e), timer_kind(e))
    w.step(t)
    real = tuple(st.timer(k, sim[0]))
    if real != sim:
        return f"the {sim[1]} timer of {sim[0]!r} fired in the simulator, {real!r} here"
    return None


_STEPS = {
    "S": _slice,
    "I": _ingest,
    "D": _dispatch,
    "A": _arrive,
    "P": _publish,
    "R": _serve,
    "T": _timer,
}
