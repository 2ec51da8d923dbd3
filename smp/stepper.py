"""A paused smp emulator stepped one event at a time: each event of the
simulated build (``smp.sim.world``) done by the real processes.

``Stepper(emu, passive)`` holds the dispatcher and has every scheduler hold
what it makes and buffer what reaches it (``schedulers.lockstep``,
``Dispatcher.step_ingest``); then each method is one thread of the
simulator taking one step, over the real sockets:

* ``slice(k)``      scheduler ``k`` runs its next time slice (``S<k>``);
* ``ingest(k)``     scheduler ``k`` sends its next batch and the dispatcher
  queues it (``I<k>``);
* ``dispatch()``    the dispatcher decides the next queued message (``D``);
* ``arrive(i, k)``  the next signal from scheduler ``i`` (0: a delivery of
  the dispatcher) is sent and taken at scheduler ``k`` (``A<i>><k>``);
* ``publish(k)``    scheduler ``k``'s replica takes the ingest thread's next
  publication (``P<k>``);
* ``timer(k, target)`` scheduler ``k`` fires the armed timer of ``target``
  (a pid: its ``receive`` timeout; a port: its busy spell), which no clock
  fires while stepped (``T<pid>``, ``T#Port<n.n>``);
* ``serve(pid)``    the BIF ``pid`` called is sent to the controller, served
  as ``run()`` serves it, and every replica takes its change before the step
  ends, as the simulator applies it to every replica at once (``R<pid>``).

Each returns what the real processes did, for ``smp.app.explore.proof`` to
hold against the simulator's event.  ``close()`` ends stepping (everything
held is sent, the dispatcher released); the emulator is then closed.
"""

from __future__ import annotations

import time

from smp.core.errors import BadArg, EmulatorTimeout

__all__ = ["Stepper"]

#: seconds a step waits for what an earlier step sent to arrive
STEP_WAIT_S = 10.0


class Stepper:
    """Steps ``emu`` (smp, paused, open) until ``close()``; ``passive``: the
    pids of the collectors the simulator keeps passive (``Node.passive``)."""

    def __init__(self, emu, passive=(), timeout: float = STEP_WAIT_S):
        if not emu.smp:
            raise BadArg("only an smp emulator is stepped (nonsmp has one order)")
        emu._sup.check_open()
        self.emu, self.timeout = emu, timeout
        emu._disp_call("step_begin")
        emu._all_scheds("step", "begin", sorted(passive, key=repr))
        emu._running = True  # as inside run(): the BIFs see running schedulers
        emu._stepper = self

    def _s(self, k: int, what: str, *args):
        return self.emu._sched_call(k, "step", what, *args)

    def start(self, pids) -> list:
        """The passive collectors' first slices (``World.start_collectors``),
        in the given order; the pids that started."""
        out = []
        for pid in pids:
            out += self._s(self.emu._owner(pid), "start", [pid])
        return out

    def slice(self, k: int):
        """``(pid, status after, messages made, {peer: signals sent}, BIF
        requests)`` of the slice scheduler ``k`` ran."""
        return self._s(k, "slice")

    def ingest(self, k: int):
        """``(batches queued, items queued)``."""
        self._s(k, "batch")
        return self.emu._disp_call("step_ingest", k, self.timeout)

    def dispatch(self) -> list:
        """``[(from, receiver, message, outcome)]`` of the message decided."""
        return self.emu._disp_call("step", 1, "message")

    def arrive(self, i: int, k: int):
        """A delivery: ``(to, alive)``; a signal: its description."""
        if i:
            self._s(i, "signal", k)
        return self._s(k, "arrive", i, self.timeout)

    def publish(self, k: int) -> str:
        """The kind of publication taken (``Snap``, ``Dead``, ``Tracers``...)."""
        return self._s(k, "publish", self.timeout)

    def timer(self, k: int, target) -> tuple:
        """``(target, "receive" | "busy")`` of the timer fired."""
        return self._s(k, "timer", target)

    def serve(self, pid):
        """Serve the BIF ``pid`` called; returns the request served."""
        emu = self.emu
        k = emu._owner(pid)
        self._s(k, "rpc", pid)
        links = emu._sup.links
        deadline = time.monotonic() + self.timeout
        while True:
            item = next((r for r in links.rpcs if r[1] == pid), None)
            if item is not None:
                break
            if time.monotonic() > deadline:
                raise EmulatorTimeout(f"the BIF request of {pid!r} did not come")
            links.pump(0.01)
        links.rpcs.remove(item)
        emu._serve_one(item)
        emu._all_scheds("step", "cut")
        seqs = emu._disp_call("pub_seq")
        emu._all_scheds("wait_published", [0, seqs[1], seqs[2]], self.timeout)
        return item[2]

    def take_stream(self, k: int) -> None:
        """Within a BIF's step: scheduler ``k``'s batches reach the queue, in
        order, each after the batches of other schedulers its causes are in
        (the simulator's ``World.take_batches``; ``SmpBackend._ingested_from``
        of a stepped emulator)."""
        self._s(k, "cut")
        self._take_until(k, None)

    def _take_until(self, k: int, n: int | None) -> None:
        """Scheduler ``k``'s held batches reach the queue until ``n`` of them
        have (None: every one), each after the batches of other schedulers
        its causes are in, as a running dispatcher parks it until then."""
        emu = self.emu
        while True:
            taken = emu._disp_call("batches_taken")
            if n is not None and taken[k] >= n:
                return
            after = self._s(k, "next_after")
            if after is None:
                return
            for i in range(1, emu.nsched + 1):
                if i != k and taken[i] < after[i]:
                    self._take_until(i, after[i])
            self.ingest(k)

    def close(self) -> None:
        emu = self.emu
        emu._running = False
        emu._stepper = None
        if emu._sup.closed:
            return
        emu._disp_call("step_end", self.timeout)
        emu._disp_call("release")
