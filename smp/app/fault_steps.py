"""The fault controller: the process that carries out a lane of a run's
fault plan (``smp.app.fault_plan._lanes``: the faults on one tracer's line
or one group, so that one that waits holds no other lane's).

Runs in a scheduler OS process, inside ``vm.run()``: ``controller`` sleeps
until each planned moment and then calls ``exit(Pid, kill)`` or a trace BIF,
as a process racing the dispatcher in a real VM would, and sends the fault
log one ``FAULT_REC`` record per event.  The plan is computed in full before
the run (``smp.app.fault_plan``: which replacement tracer takes over when),
so the controller holds no state.  Its steps (``_FAULT_OPS``) serve the
simulator's controller too (``smp.app.explore.workload.sim_controller``).
"""

from __future__ import annotations

import math
import time

from smp.app.workload_bodies import CTL, am_kill, am_sensitive
from smp.core.errors import ErlangException, SmpError
from smp.core.pretty import format_term
from smp.core.terms import Atom

A = Atom
#: the tag of the record the controller sends the fault log for each fault event
FAULT_REC = A("$smp_fault")
#: how long the controller waits for a killed process's ``{'EXIT', Pid, Reason}``
EXIT_WAIT_MS = 5000
am_EXIT, am_noproc, am_undefined, am_tracer = A("EXIT"), A("noproc"), A("undefined"), A("tracer")


def _why(e: BaseException) -> bytes:
    """What a BIF or signal raised, as a binary (a Python str is no term)."""
    text = format_term(e.reason) if isinstance(e, ErlangException) else type(e).__name__
    cause = e.__cause__
    if cause is not None and str(cause):
        text += f" ({cause})"
    elif not isinstance(e, ErlangException) and str(e):
        text += f": {e}"
    return text.encode("utf-8", "replace")


async def controller(proc, plan, log):
    """Carry out ``plan``: ``[(at_seconds, index, op, args), ...]`` in time order
    (a lane: ``smp.app.fault_plan._lanes``; each lane's clock starts with
    its controller, all spawned together before the run).

    Trapping exits, it kills as an Erlang program that must know a process is
    dead does: link, ``exit(Pid, Reason)``, then wait (at most
    ``EXIT_WAIT_MS``) for ``{'EXIT', Pid, _}``.  After each event it sends
    ``log`` one record, ``{FAULT_REC, Index, StartedUs, DoneUs, Result,
    Effect}``: the times in microseconds from the controller's start (the
    plan's clock), ``Result`` ``ok`` or a binary saying why the fault did not
    take, ``Effect`` a list of ``{Key, Value}``."""
    start = time.monotonic()
    await proc.process_flag("trap_exit", True)

    def now_us() -> int:
        return int((time.monotonic() - start) * 1e6)

    for at, idx, op, args in plan:
        wait = start + at - time.monotonic()
        if wait > 0:
            await proc.sleep(max(1, math.ceil(wait * 1000)))  # never before its moment
        began = now_us()
        try:
            result, effect = await _FAULT_OPS[op](proc, now_us, *args)
        except (ErlangException, SmpError) as e:
            result, effect = b"raised " + _why(e), []
        await proc.send(log, (FAULT_REC, idx, began, now_us(), result, effect))


async def _reap(proc, pids: list, reason) -> tuple[list, list, list]:
    """Kill ``pids`` with ``reason`` and wait for their deaths.

    Returns ``(died, gone, alive)``: ``died`` the pids whose ``'EXIT'`` came
    with another reason than ``noproc`` (with it), ``gone`` the pids that were
    not alive when linked, ``alive`` those still alive after ``EXIT_WAIT_MS``
    (unlinked again)."""
    for p in pids:
        await proc.link(p)
    for p in pids:
        await proc.exit(p, reason)
    waiting = set(pids)

    def match(x):
        return type(x) is tuple and len(x) == 3 and x[0] is am_EXIT and x[1] in waiting

    died, gone = [], []
    deadline = time.monotonic() + EXIT_WAIT_MS / 1000
    while waiting:
        left = int((deadline - time.monotonic()) * 1000)
        m = await proc.receive(timeout=left, match=match) if left > 0 else None
        if m is None:
            break
        waiting.discard(m[1])
        (gone if m[2] is am_noproc else died).append((m[1], m[2]))
    alive = [p for p in pids if p in waiting]
    for p in alive:
        await proc.unlink(p)
    return died, gone, alive


async def _alive(proc, pid) -> bool:
    return await proc.trace_info(pid, "flags") is not am_undefined


async def _pick_alive(proc, candidates: list, count: int) -> list:
    """The first ``count`` of ``candidates`` (shuffled by the plan) alive now."""
    out = []
    for p in candidates:
        if len(out) >= count:
            break
        if await _alive(proc, p):
            out.append(p)
    return out


async def _op_kill_tracer(proc, now_us, victim, held, replace):
    """``exit(Victim, kill)``; with ``replace = (New, Roles)``, once the
    victim is dead, every tracee in ``held`` (``[(Pid, Flags), ...]``: the
    processes the plan has the victim trace, with their flags) is traced
    again with its flags and ``{tracer, New}``, and every role in ``Roles``
    moves to ``New``.  A tracee that is itself gone by then is counted, not a
    failure."""
    died, gone, _alive_still = await _reap(proc, [victim], am_kill)
    death = now_us()
    problems: list[bytes] = []
    if gone:
        problems.append(b"the tracer was not alive (noproc)")
    elif not died:
        problems.append(f"the tracer was still alive after {EXIT_WAIT_MS} ms".encode())
    effect: list = [(A("held"), len(held)), (A("death_us"), death if died else am_undefined)]
    if replace is not None:
        new, roles = replace
        moved = lost = 0
        for p, flags in held:
            try:
                await proc.trace(p, True, flags + [(am_tracer, new)])
                moved += 1
            except (ErlangException, SmpError) as e:
                if await _alive(proc, p):
                    problems.append(b"retrace " + format_term(p).encode() + b": " + _why(e))
                else:
                    lost += 1  # it died meanwhile: nothing to move
        done_roles = []
        for role, args in roles:
            try:
                await _ROLE_OPS[role](proc, new, *args)
                done_roles.append(A(role))
            except (ErlangException, SmpError) as e:
                problems.append(role.encode() + b": " + _why(e))
        effect += [
            (A("moved"), moved),
            (A("tracees_gone"), lost),
            (A("roles"), done_roles),
            (A("retraced_us"), now_us()),
        ]
    return (A("ok") if not problems else b"; ".join(problems)), effect


async def _role_new(proc, new, flags):
    await proc.trace(A("new"), True, flags + [(am_tracer, new)])


async def _role_pattern(proc, new, mfa, ms):
    await proc.bif("trace_pattern", mfa, ms, [(A("meta"), new)])


async def _role_seq(proc, new):
    await proc.set_system_seq_tracer(new)


async def _role_monitor(proc, new, opts):
    await proc.system_monitor(new, opts)


async def _role_profile(proc, new, opts):
    await proc.system_profile(new, opts)


_ROLE_OPS = {
    "new": _role_new,
    "pattern": _role_pattern,
    "seq_tracer": _role_seq,
    "system_monitor": _role_monitor,
    "system_profile": _role_profile,
}


async def _op_replace(proc, now_us, role, new, args):
    """``set_system_seq_tracer``, ``system_monitor`` or ``system_profile``
    with ``new``; the effect names the one it replaced."""
    old = {
        "seq_tracer": lambda: proc.set_system_seq_tracer(new),
        "system_monitor": lambda: proc.system_monitor(new, *args),
        "system_profile": lambda: proc.system_profile(new, *args),
    }[role]
    prev = await old()
    return A("ok"), [(A("previous"), prev)]


async def _op_kill_processes(proc, now_us, candidates, count, reason):
    """Kill ``count`` live processes of ``candidates`` (in the plan's order):
    one found dead when linked is passed over for the next."""
    died, gone, alive = [], [], []
    rest = list(candidates)
    while rest and len(died) + len(alive) < count:
        batch, rest = rest[: count - len(died) - len(alive)], rest[count - len(died) - len(alive) :]
        d, g, a = await _reap(proc, batch, reason)
        died, gone, alive = died + d, gone + g, alive + a
    effect = [(A("killed"), len(died)), (A("gone"), len(gone)), (A("survived"), len(alive))]
    if alive:
        return f"{len(alive)} still alive after {EXIT_WAIT_MS} ms".encode(), effect
    if not died:
        return b"no process of the group was alive", effect
    return A("ok"), effect


async def _op_set_sensitive(proc, now_us, candidates, count, value):
    chosen = await _pick_alive(proc, candidates, count)
    for p in chosen:
        await proc.send(p, (CTL, am_sensitive, value))
    if not chosen:
        return b"no process of the group was alive", [(A("marked"), 0)]
    return A("ok"), [(A("marked"), len(chosen))]


_FAULT_OPS = {
    "kill_tracer": _op_kill_tracer,
    "replace": _op_replace,
    "kill_processes": _op_kill_processes,
    "set_sensitive": _op_set_sensitive,
}
