"""The run scenario's schema: every key, its kind and default, and every number's range.

``SCHEMA`` describes each table of a run or stress scenario; ``BOUNDS`` is
the one place each numeric key's type, range and meaning are written (the
workloads' parameters have theirs in
``smp.app.workload_registry.WORKLOADS``).  The schema mirrors what
``smp.app.workloads.execute`` sets up, in the order ``erl_trace.c``'s users
do it: tracers, default tracing, processes, per-process tracing, call
patterns, seq_trace, system_monitor, system_profile, then faults while it
runs; ``[[expect]]`` says what the run must guarantee (``smp.app.expect``).
"""

from __future__ import annotations

from smp.app.workload_registry import Bound
from smp.core.bifs import MAX_SMALL
from smp.core.dispatch import DROP_REASONS
from smp.core.flags import TRACE_FLAG_NAMES

TRACER_KINDS = ("collector", "file", "ip", "memory", "null")
# one rule for a scenario file and the command line alike
NONSMP_RULE = (
    "nonsmp always runs exactly 1 scheduler; the scheduler count (schedulers, "
    "--schedulers) is the smp one, used when the scenario runs in smp mode "
    "(--mode smp, compare), and not used in nonsmp mode"
)
FAULT_ACTIONS = (
    "kill_tracer",
    "replace_seq_tracer",
    "replace_monitor",
    "replace_profiler",
    "kill_processes",
    "set_sensitive",
)

#: the kinds of an ``[[expect]]`` clause (checked by ``smp.app.expect.check_expect``)
EXPECT_KINDS = ("receives_every", "no_drop", "order", "count")
#: the events ``receives_every`` counts
EXPECT_EVENTS = ("send",)
#: the reasons ``no_drop`` names: the dispatcher's, or any
EXPECT_REASONS = ("any",) + DROP_REASONS
#: the keys each kind of clause takes (``kind`` besides), the required ones first
EXPECT_KEYS = {
    "receives_every": ("tracer", "group", "event"),
    "no_drop": ("reason",),
    "order": ("tracer",),
    "count": ("tracer", "min", "max"),
}

# ---------------------------------------------------------------- schema
# A field is (kind, default, extra); kind is one of
#   "str", "bool", "num" (an integer or a float: its type and range are its
#   entry in BOUNDS, under the key's path), "enum" (extra: choices),
#   "strlist" (extra: choices or None),
#   "table" (extra: schema dict), "tables" (array of tables; extra: schema dict),
#   "any" (checked elsewhere).
# default REQUIRED means the key must be present.
REQUIRED = object()

_TRACER = {
    "name": ("str", REQUIRED, None),
    "kind": ("enum", "collector", TRACER_KINDS),
    "path": ("str", None, None),
    "wrap_suffix": ("str", None, None),
    "wrap_size": ("num", 1 << 20, None),
    "wrap_count": ("num", 8, None),
    "port": ("num", 0, None),
    "queue_size": ("num", 1000, None),
    "heavy_every": ("num", 0, None),
    "print": ("bool", True, None),
}
_GROUP = {
    "name": ("str", REQUIRED, None),
    "workload": ("enum", REQUIRED, None),  # choices filled in from WORKLOADS
    "count": ("num", 1, None),
    "scheduler": ("num", None, None),
    "trace": ("strlist", [], TRACE_FLAG_NAMES),
    "tracer": ("str", None, None),
    "sensitive": ("bool", False, None),
    "params": ("any", {}, None),
}
_TRACE = {
    "pids": ("enum", REQUIRED, ("new", "all", "existing")),
    "flags": ("strlist", REQUIRED, TRACE_FLAG_NAMES),
    "tracer": ("str", REQUIRED, None),
}
_PATTERN = {
    "mfa": ("any", REQUIRED, None),
    "match_spec": ("any", True, None),
    "flags": ("strlist", ["local"], ("global", "local", "meta")),
    "meta_tracer": ("str", None, None),
}
_SEQ = {
    "tracer": ("str", REQUIRED, None),
}
_MONITOR = {
    "monitor": ("str", REQUIRED, None),
    "long_gc": ("num", 0, None),
    "long_schedule": ("num", 0, None),
    "large_heap": ("num", 0, None),
    "busy_port": ("bool", False, None),
    "busy_dist_port": ("bool", False, None),
}
_PROFILE = {
    "profiler": ("str", REQUIRED, None),
    "scheduler": ("bool", False, None),
    "runnable_procs": ("bool", False, None),
    "runnable_ports": ("bool", False, None),
    "exclusive": ("bool", False, None),
}
_FAULT = {
    "action": ("enum", REQUIRED, FAULT_ACTIONS),
    "target": ("str", None, None),
    "at": ("num", 0.0, None),
    "every": ("num", None, None),
    "times": ("num", None, None),
    "count": ("num", 1, None),
    "reason": ("str", "kill", None),
    "value": ("bool", True, None),
    "replace": ("bool", True, None),
    "may_fail": ("bool", False, None),
}
_EXPECT = {
    "kind": ("enum", REQUIRED, EXPECT_KINDS),
    "tracer": ("str", None, None),
    "group": ("str", None, None),
    "event": ("enum", "send", EXPECT_EVENTS),
    "reason": ("enum", "any", EXPECT_REASONS),
    "min": ("num", 0, None),
    "max": ("num", None, None),
}
_DURATION = {
    "seconds": ("num", None, None),
    "operations": ("num", None, None),
}
SCHEMA = {
    "name": ("str", "scenario", None),
    "description": ("str", "", None),
    "mode": ("enum", "smp", ("smp", "nonsmp")),
    "schedulers": ("num", 2, None),
    "seed": ("num", 0, None),
    "timeout": ("num", 120.0, None),
    "duration": ("table", {}, _DURATION),
    "tracers": ("tables", [], _TRACER),
    "groups": ("tables", REQUIRED, _GROUP),
    "trace": ("tables", [], _TRACE),
    "patterns": ("tables", [], _PATTERN),
    "seq_trace": ("table", None, _SEQ),
    "system_monitor": ("table", None, _MONITOR),
    "system_profile": ("table", None, _PROFILE),
    "faults": ("tables", [], _FAULT),
    # recon_trace's caps: at most N trace messages, or N per window of ms
    "max_messages": ("num", None, None),
    "rate": ("any", None, None),
    # what the run must guarantee, checked after it (and on every explored outcome)
    "expect": ("tables", [], _EXPECT),
}

# ---------------------------------------------------------------- bounds
#: an upper bound for counters that only have to fit a long run
_MANY = 1_000_000_000
_DAY = 86_400.0
#: Every numeric key of a run scenario, by path (``[]``: each element of an
#: array of tables; ``rate[0]``: an element of a list), with its type, range
#: and meaning: the one place they are written.  The checker looks each
#: number up here (a numeric key missing from the table is a KeyError in the
#: tests, not a silent pass); the workloads' parameters have theirs in
#: ``smp.app.workloads.WORKLOADS``.  A number must be finite and within its
#: range; the ranges are what a run on a small machine can honour.
BOUNDS: dict[str, Bound] = {
    "schedulers": Bound(int, 1, 64, "scheduler OS processes of an smp run"),
    "seed": Bound(int, -(1 << 63), (1 << 63) - 1, "seed of the run's random choices"),
    "timeout": Bound(
        float, 0, _DAY, "seconds the whole run may take, its set-up included", lo_open=True
    ),
    "duration.seconds": Bound(
        float, 0, _DAY, "seconds the workload runs", lo_open=True, optional=True
    ),
    "duration.operations": Bound(
        int, 1, _MANY, "operations each workload process does", optional=True
    ),
    # (dbg:trace_port takes 0 =< WrapSize < 1 bsl 32; 0: every message ends its file)
    "tracers[].wrap_size": Bound(int, 0, (1 << 32) - 1, "bytes of a wrap file before the next"),
    "tracers[].wrap_count": Bound(int, 1, 1000, "wrap files kept"),
    "tracers[].port": Bound(int, 0, 65535, "TCP port of an ip tracer (0: any free one)"),
    "tracers[].queue_size": Bound(
        int, 1, 1_000_000, "messages an ip tracer queues before it drops"
    ),
    "tracers[].heavy_every": Bound(
        int, 0, _MANY, "a memory port turns heavy every this many messages (0: never)"
    ),
    "groups[].count": Bound(int, 1, 10_000, "instances of the group's workload"),
    "groups[].scheduler": Bound(
        int, 1, 64, "the scheduler the group's processes run on", optional=True
    ),
    "patterns[].mfa[2]": Bound(int, 0, 255, 'the arity of a call pattern (or "_")'),
    "system_monitor.long_gc": Bound(
        int, 0, (1 << 32) - 1, "ms a collection may take before a long_gc message (0: off)"
    ),
    "system_monitor.long_schedule": Bound(
        int, 0, (1 << 32) - 1, "ms a process may run before a long_schedule message (0: off)"
    ),
    "system_monitor.large_heap": Bound(
        int, 0, MAX_SMALL, "heap words before a large_heap message (0: off)"
    ),
    "faults[].at": Bound(float, 0, _DAY, "seconds into the run of the first firing"),
    "faults[].every": Bound(
        float, 0, _DAY, "seconds between two firings", lo_open=True, optional=True
    ),
    "faults[].times": Bound(int, 1, 100_000, "how many times the fault fires", optional=True),
    "faults[].count": Bound(int, 1, 100_000, "processes a fault kills or marks at each firing"),
    "max_messages": Bound(
        int, 1, _MANY, "stop tracing after this many trace messages", optional=True
    ),
    "rate[0]": Bound(int, 1, _MANY, "rate = [N, ms]: at most N trace messages ..."),
    "rate[1]": Bound(int, 1, 86_400_000, "... per window of ms milliseconds"),
    "expect[].min": Bound(int, 0, _MANY, "a count clause: at least this many trace messages"),
    "expect[].max": Bound(
        int, 0, _MANY, "a count clause: at most this many trace messages", optional=True
    ),
}
#: an Erlang atom has at most 255 characters (longer is a system_limit)
MAX_ATOM = 255
