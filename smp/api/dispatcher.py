"""The dispatcher's queue held, stepped and listed (smp mode).

``hold_dispatcher`` lets messages queue up undispatched; ``step_dispatcher``
dispatches the next ones against the state now (``sys_msg_dispatcher_func``
one message or one run at a time); ``queued_messages`` is
``erts_foreach_sys_msg_in_q``.  nonsmp has no dispatcher: these refuse.
"""

from __future__ import annotations

import time

from smp.core.errors import BadArg, EmulatorTimeout, SmpError, check_seconds

__all__ = ["DispatcherControl"]


class DispatcherControl:
    """The dispatcher calls of ``smp.Emulator``."""

    # -- races ---------------------------------------------------------------
    def hold_dispatcher(self) -> None:
        """smp: let messages queue up in the dispatcher without dispatching them."""
        if not self.smp:
            raise SmpError("hold_dispatcher needs smp mode (nonsmp has no dispatcher)")
        self._disp_call("hold")

    def release_dispatcher(self) -> None:
        if not self.smp:
            raise SmpError("release_dispatcher needs smp mode (nonsmp has no dispatcher)")
        self._sync_dispatcher()  # what the schedulers sent first is in the table
        self._disp_call("release")

    def step_dispatcher(self, n: int = 1, unit: str = "message", timeout: float = 10.0) -> list:
        """smp, behind ``hold_dispatcher()``: dispatch exactly the next ``n``
        queued messages (``unit="message"``, the seed's granularity: a run is
        split) or runs (``unit="run"``) against the state now, and stay held;
        ``queued_messages()`` lists what is left.  Returns ``(From, Receiver,
        Msg, Outcome)`` for each message dispatched, Outcome ``"delivered"``
        or the reason it was dropped (as ``statistics()`` names it).  Before
        it returns, what was delivered has reached its receivers (the
        emulator runs until their schedulers took it), so ``messages(pid)``
        shows it and a later change cannot overtake it."""
        if not self.smp:
            raise SmpError(
                "step_dispatcher needs smp mode (nonsmp has no dispatcher: "
                "it delivers each message when it is made)"
            )
        if type(n) is not int or n < 1:
            raise BadArg(f"step_dispatcher: n must be an integer >= 1, not {n!r}")
        check_seconds("step_dispatcher: timeout", timeout)
        if unit not in ("message", "run"):
            raise BadArg(f"step_dispatcher: unit must be 'message' or 'run', not {unit!r}")
        self._sync_dispatcher()
        if not self._disp_call("status")["held"]:
            raise SmpError("step_dispatcher needs a held dispatcher: call hold_dispatcher() first")
        done = self._disp_call("step", n, unit)
        deadline = time.monotonic() + timeout
        while True:  # until every scheduler took the deliveries the step sent it
            sent = self._disp_call("status")["delivered_to"]
            if all(sent[k] == st["deliveries"] for k, st in self._all_scheds("status").items()):
                return done
            left = deadline - time.monotonic()
            if left <= 0:
                raise EmulatorTimeout(f"step_dispatcher: deliveries not taken within {timeout:g} s")
            try:
                self.run(timeout=left)
            except EmulatorTimeout as e:
                # (its processes still run: the deliveries may be taken, but
                # the run is never quiet)
                raise EmulatorTimeout(
                    f"step_dispatcher: deliveries not taken within {timeout:g} s ({e})"
                ) from None

    def queued_messages(self) -> list:
        """``erts_foreach_sys_msg_in_q``: ``(From, To, Msg)`` of each queued
        message.  A scheduler sends consecutive TRACE (or PROC_MSG) messages
        to one receiver as one run, which the dispatcher decides by receiver
        alone as the seed does: ``From`` is that run's first sender (a TRACE
        message names its tracee in ``Msg`` itself)."""
        if not self.smp:
            return []
        self._sync_dispatcher()
        return self._disp_call("queue_list")

    def latencies_ns(self) -> list[int]:
        """smp: make-to-dispatch latencies in ns, one sample per run of messages
        (its first message), the dispatcher's most recent 200,000."""
        return self._disp_call("latencies") if self.smp else []
