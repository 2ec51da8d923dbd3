"""``smp-emu explore``: every interleaving of the dispatcher's queue with the
state changes, each one run on the real emulator.

The SMP build decides a system message when the dispatcher thread takes it
off the queue, not when it is made: a state change (a new seq tracer, a new
monitor, a killed tracer, a cleared profiler) made while messages wait lands
between two of them, wherever the ``sys_trace_rwmtx`` lets the writer in.
An explore scenario (TOML, ``smp/app/examples/explore/``) names the messages to
queue (processes that each do one thing under a held dispatcher) and the
changes to make, in order.  A *schedule* says after how many queued
messages each change is made (``replace@1 kill@3``); the explorer runs
schedules on a fresh smp emulator each (``Emulator.step_dispatcher``
dispatches the queue message by message between the changes) and groups
them by outcome: the receiver or drop reason of every queued message, what
each process received, the tracer state once the queue is dispatched and
the changes' return values.

Partial-order reduction: a change and a message commute when the message's
deliver/drop decision reads nothing the change writes and vice versa (a
TRACE message reads its tracer's liveness, not the seq tracer; a SYSMON
message reads and, on failure, clears the monitor, never the profiler).
Two schedules that order every dependent (change, message) pair alike are
equivalent; the explorer runs one of each class, the one with the earliest
positions (the shortest).  The number of classes is counted exactly; up to
``max_messages`` x ``max_changes`` every class is run, beyond that a seeded
random sample of them.

The same scenario runs once in nonsmp mode, which has one outcome (no
dispatcher: every message is delivered when it is made, before any
change); the report names the smp outcomes nonsmp cannot produce and the
``#ifdef ERTS_SMP`` of the seed that makes the difference.

The package, by job: ``scenario`` (loading and checking a scenario, its
``BOUNDS``), ``schedules`` (the schedule algebra and the reduction),
``bodies`` (what runs inside the emulator: the queue processes, the
changes), ``runner`` (one schedule on the real emulator, and ``explore``),
``text`` and ``html`` (the reports), ``command`` (``smp-emu explore``) and,
for a run scenario in the simulator, ``workload``, ``simulate``, ``proof``
and ``tree_page`` (the explored tree ``--graph`` writes, drawn by
``smp-emu report``).
Every name is importable from ``smp.app.explore`` itself.
"""

# ruff: noqa: F401
# (re-exports: beyond __all__, every name the package's modules made public
# when they were one module; the tests and the schema's checks import them)
from __future__ import annotations

from smp.app.explore.bodies import explore_actor
from smp.app.explore.command import explore_command
from smp.app.explore.html import explore_html, explore_replay_html, explore_sim_html
from smp.app.explore.runner import ExploreError, ExploreResult, explore, run_schedule
from smp.app.explore.scenario import (
    BOUNDS,
    CHANGE_ACTIONS,
    MAX_CHANGES,
    MAX_MESSAGES,
    MONITOR_OPTIONS,
    PROFILE_OPTIONS,
    QUEUE_ACTIONS,
    SAMPLES,
    describe_change,
    explore_example_names,
    load_explore_scenario,
)
from smp.app.explore.schedules import (
    canonical_classes,
    canonicalize,
    change_footprint,
    count_classes,
    dependent,
    format_schedule,
    message_footprint,
    parse_schedule,
)
from smp.app.explore.text import WHY, format_text

__all__ = [
    "explore",
    "load_explore_scenario",
    "explore_example_names",
    "parse_schedule",
    "format_schedule",
    "ExploreResult",
    "ExploreError",
    "explore_command",
    "explore_html",
    "explore_replay_html",
    "explore_sim_html",
    "count_classes",
    "canonical_classes",
    "canonicalize",
]
