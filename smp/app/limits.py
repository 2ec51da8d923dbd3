"""A cap on how much a run traces, as ``recon_trace`` caps a trace session.

Runs in the user's process (``smp.app.workloads.execute``).  ``recon_trace:calls``
takes a maximum that is either a count ``N`` or a rate ``{N, Ms}``: its tracer
process forwards trace messages to the formatter and exits after the Nth
(``count_tracer``), or when a message arrives with N already counted in a
window that started less than Ms ago (``rate_tracer``: that message is still
forwarded; one arriving after the window restarts it and is not counted);
the formatter then prints ``Recon tracer rate limit tripped.``, and
``recon_trace:clear()`` switches tracing off: ``erlang:trace(all, false,
[all])`` and ``erlang:trace_pattern({'_','_','_'}, false, ...)`` for local,
meta and global patterns.

Here the count is the run's own ``delivered`` counter (every system message
a tracer got), read after every ``CHECK_S`` seconds of running (later when
``run_for`` overruns, serving the BIFs processes call): what is delivered
between two checks may go past the cap, and is counted but not printed.  At
the cap tracing is switched off as ``recon_trace:clear()`` does and the run
goes on (seq_trace, system_monitor and system_profile, which ``clear()``
leaves alone, go on too).
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable

from smp.core.errors import BadArg, SmpError

__all__ = ["TraceLimit", "parse_limit", "CHECK_S"]

CHECK_S = 0.01
_LIMIT = re.compile(r"\A\s*([0-9]+)\s*(?:/\s*([0-9]+)\s*(?:ms)?)?\s*\Z")


def parse_limit(text: str) -> tuple[int | None, list | None]:
    """``"N"`` -> ``(N, None)`` (max_messages); ``"N/MS"`` -> ``(None, [N, MS])``
    (rate).  Raises ValueError saying what is expected."""
    m = _LIMIT.match(text or "")
    if not m or int(m.group(1)) < 1 or (m.group(2) is not None and int(m.group(2)) < 1):
        raise ValueError(
            f"{text!r}: expected N (at most N trace messages) or N/MS (at most "
            f"N per MS milliseconds), with N and MS >= 1"
        )
    if m.group(2) is None:
        return int(m.group(1)), None
    return None, [int(m.group(1)), int(m.group(2))]


class TraceLimit:
    """``max_messages`` and/or ``rate = [N, ms]`` of one run."""

    def __init__(self, max_messages: int | None = None, rate=None):
        self.max_messages = max_messages
        self.rate = list(rate) if rate else None
        self.seen = 0  # delivered messages counted so far
        self.count = 0  # rate_tracer's Count in the current window
        self.start = 0.0  # and the window's Start (s since the run began)
        self.tripped: dict | None = None
        self.printed = 0
        self.not_printed = 0

    @classmethod
    def from_scenario(cls, sc: dict) -> "TraceLimit | None":
        if sc.get("max_messages") is None and not sc.get("rate"):
            return None
        return cls(sc.get("max_messages"), sc.get("rate"))

    def describe(self) -> str:
        parts = []
        if self.max_messages is not None:
            parts.append(f"max_messages = {self.max_messages}")
        if self.rate:
            parts.append(f"rate = [{self.rate[0]}, {self.rate[1]}]")
        return ", ".join(parts)

    # -- counting --------------------------------------------------------------
    def _rate_trip(self, new: int, t: float) -> int | None:
        """recon's rate_tracer over ``new`` messages that all arrive at ``t``:
        the 1-based index of the one that trips, or None."""
        n, ms = self.rate
        k = 0
        while k < new:
            if int((t - self.start) * 1000) > ms:  # Delay > Time: a new window
                self.count, self.start = 0, t
                k += 1
                continue
            take = min(n - self.count, new - k)  # Max > Count: counted
            self.count += take
            k += take
            if k < new:  # Max =:= Count: tripped
                return k + 1
        return None

    def update(self, delivered: int, t: float) -> bool:
        """Count up to ``delivered`` at ``t`` s into the run; True when this trips."""
        if self.tripped is not None or delivered <= self.seen:
            return False
        new, before = delivered - self.seen, self.seen
        self.seen = delivered
        allowed = None
        if self.max_messages is not None and delivered >= self.max_messages:
            allowed, why = self.max_messages, f"{self.max_messages} trace messages delivered"
        if self.rate:
            k = self._rate_trip(new, t)
            if k is not None and (allowed is None or before + k < allowed):
                allowed = before + k
                why = f"more than {self.rate[0]} trace messages within {self.rate[1]} ms"
        if allowed is None:
            return False
        self.tripped = {
            "at_s": round(t, 6),
            "allowed": allowed,
            "why": why,
            "delivered_at_trip": delivered,
        }
        return True

    def check(self, vm, t: float, tracers=()) -> bool:
        """Read the run's counters; switch tracing off when the cap is reached."""
        if self.tripped is not None:
            return False
        try:
            delivered = vm.statistics().delivered
        except SmpError:
            return False
        if not self.update(delivered, t):
            return False
        self.tripped["switched_off"] = self.switch_off(vm, tracers)
        return True

    @staticmethod
    def switch_off(vm, tracers) -> dict:
        """What ``recon_trace:clear()`` does: ``trace(all, false, [all])``,
        then every call pattern off (local, meta, then global).  The shell
        that calls ``clear()`` clears every tracee whoever traces it; the
        emulator's API has no calling process, so it clears the tracees of
        each of the run's ``tracers`` in turn (a dead one has none left)."""
        out: dict = {"trace": 0}
        try:
            for t in dict.fromkeys(tracers):
                try:
                    out["trace"] += vm.trace("all", False, ["all"], tracer=t)
                except BadArg:
                    pass  # a tracer killed by a fault: its tracees are reset
            out["patterns"] = sum(
                vm.trace_pattern(("_", "_", "_"), False, [f]) for f in ("local", "meta")
            )
            out["patterns"] += vm.trace_pattern(("_", "_", "_"), False, [])
        except SmpError as e:
            out["error"] = str(e)
        return out

    # -- wrapping the run --------------------------------------------------------
    def runner(self, vm, t0: float, tracers=()) -> Callable[[float], bool]:
        """``vm.run_for`` that checks the cap every ``CHECK_S`` seconds;
        ``tracers`` are the run's tracers (pids and ports)."""

        def run_for(seconds: float) -> bool:
            end = time.perf_counter() + seconds
            while True:
                if self.tripped is not None:
                    return vm.run_for(max(0.001, end - time.perf_counter()))
                done = vm.run_for(max(0.001, min(CHECK_S, end - time.perf_counter())))
                self.check(vm, time.perf_counter() - t0, tracers)
                if done or time.perf_counter() >= end:
                    return done

        return run_for

    def printer(self, emit: Callable[[str, Any], None]) -> Callable[[str, Any], None]:
        """``emit`` that prints no more than the cap let through."""

        def limited(name: str, term) -> None:
            if self.tripped is not None and self.printed >= self.tripped["allowed"]:
                self.not_printed += 1
                return
            self.printed += 1
            emit(name, term)

        return limited

    def to_json(self) -> dict:
        return {
            "max_messages": self.max_messages,
            "rate": self.rate,
            "tripped": self.tripped is not None,
            **(self.tripped or {}),
            "printed": self.printed,
            "not_printed": self.not_printed,
        }

    def note(self) -> str | None:
        """The stderr line when the cap was reached."""
        if self.tripped is None:
            return None
        return trip_note(self.to_json())


def trip_note(lim: dict | None) -> str | None:
    """The stderr line for a summary's ``limit`` (None when it did not trip)."""
    if not lim or not lim.get("tripped"):
        return None
    cap = ", ".join(
        x
        for x in (
            f"max_messages = {lim['max_messages']}" if lim.get("max_messages") is not None else "",
            f"rate = [{lim['rate'][0]}, {lim['rate'][1]}]" if lim.get("rate") else "",
        )
        if x
    )
    off = lim.get("switched_off") or {}
    how = (
        (
            "tracing switched off as recon_trace:clear() does (trace(all, false, [all]) on "
            f"{off.get('trace', 0)} processes, trace_pattern({{'_','_','_'}}, false) on "
            f"{off.get('patterns', 0)} functions)"
        )
        if "error" not in off
        else f"switching tracing off failed: {off['error']}"
    )
    more = (
        f"; {lim['not_printed']} messages delivered before it took effect were not printed"
        if lim.get("not_printed")
        else ""
    )
    return f"trace limit reached ({cap}) at {lim['at_s']:.2f} s: {lim['why']}; {how}{more}"
