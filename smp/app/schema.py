"""Every key of a scenario file, written down once: type, default, allowed
values and a one-line meaning.

Runs in the user's process.  ``RUN_KEYS`` describes a run/stress scenario
(what ``smp.app.scenario`` checks; ``smp-emu run``, ``compare``, ``stress``
and ``dispatcher`` take one), ``WORKLOAD_PARAMS`` the ``params`` table of
each built-in workload, and ``EXPLORE_KEYS`` an explore scenario (what
``smp.app.explore`` checks).  The documentation's reference pages are
rendered from these tables (``render_schema``), and so is the command
line's, so the reference and the validators cannot drift apart without
``tests/app/test_schema.py`` failing.  A key's path names an array of
tables with ``[]`` (``tracers[].wrap_size``); ``when`` says which sibling
value makes the key mean something (``kind = file``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from smp.core.flags import TRACE_FLAG_NAMES

__all__ = [
    "REQUIRED",
    "Key",
    "RUN_KEYS",
    "WORKLOAD_PARAMS",
    "EXPLORE_KEYS",
    "SCHEMA_KINDS",
    "keys_of",
    "render_schema",
    "list_examples",
]


class _Required:
    """The default of a key that must be given."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

#: The kinds ``render_schema`` and ``list_examples`` know.
SCHEMA_KINDS = ("run", "explore")


@dataclass(frozen=True, slots=True)
class Key:
    """One key of a scenario file.

    ``type`` is one of ``string``, ``integer``, ``number`` (an integer or a
    float), ``boolean``, ``string list``, ``table``, ``array of tables`` or
    ``[N, ms]``; ``choices`` lists the allowed values of a string (or of the
    elements of a string list); ``low``/``high`` bound a number (``None``:
    unbounded), ``low_open`` makes the lower bound exclusive.
    """

    path: str
    type: str
    default: Any
    meaning: str
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    when: str = ""

    @property
    def name(self) -> str:
        """The key's own name, the last part of its path."""
        return self.path.rsplit(".", 1)[-1].removesuffix("[]")

    def allowed(self) -> str:
        """The allowed values as text: ``1..64``, ``> 0``, ``smp, nonsmp``."""
        if self.choices:
            return ", ".join(str(c) for c in self.choices)
        lo = None if self.low is None else f"{self.low:g}"
        hi = None if self.high is None else f"{self.high:g}"
        if lo is not None and hi is not None and not self.low_open:
            return f"{lo}..{hi}"
        if lo is not None:
            return (f"> {lo}" if self.low_open else f">= {lo}") + (f", <= {hi}" if hi else "")
        if hi is not None:
            return f"<= {hi}"
        return ""

    def default_text(self) -> str:
        """The default as it would be written in TOML (``required``, ``none``)."""
        d = self.default
        if d is REQUIRED:
            return "required"
        if d is None:
            return "none"
        if isinstance(d, bool):
            return str(d).lower()
        if isinstance(d, str):
            return f'"{d}"'
        if isinstance(d, list):
            return "[" + ", ".join(f'"{x}"' if isinstance(x, str) else str(x) for x in d) + "]"
        if isinstance(d, dict):
            return "{}"
        return f"{d:g}" if isinstance(d, float) else str(d)


_FLAGS = tuple(TRACE_FLAG_NAMES)
_TRACER_KINDS = ("collector", "file", "ip", "memory", "null")
_FAULT_ACTIONS = (
    "kill_tracer",
    "replace_seq_tracer",
    "replace_monitor",
    "replace_profiler",
    "kill_processes",
    "set_sensitive",
)
_EXPECT_KINDS = ("receives_every", "no_drop", "order", "count")
_EXPECT_REASONS = (
    "any",
    "sender_is_receiver",
    "nil_sender_nil_receiver",
    "error_logger_self",
    "no_receiver",
    "receiver_dead",
    "not_tracer",
    "no_error_logger",
    "port_closed",
    "scheduler_lost",
    "emulator_closed",
    "not_a_term",
)
_WORKLOADS = ("ping_pong", "ring", "fan_in", "calls", "gc", "ports", "seq_chain", "churn")

# ------------------------------------------------------------ run/stress scenario
RUN_KEYS: tuple[Key, ...] = (
    Key("name", "string", "scenario", "the scenario's name, printed in summaries and reports"),
    Key("description", "string", "", "one line on what the scenario shows"),
    Key("mode", "string", "smp", "smp (dispatcher, N schedulers) or nonsmp (one scheduler, synchronous delivery)", ("smp", "nonsmp")),
    Key("schedulers", "integer", 2, "the smp scheduler count; nonsmp always runs 1 and only notes a larger value", low=1, high=64),
    Key("seed", "integer", 0, "the random seed: which processes a fault picks, and stress's random faults (stress --seed overrides it)"),
    Key("timeout", "number", 120.0, "seconds after which an unfinished run gives up (exit 1)", low=0, low_open=True),
    Key("max_messages", "integer", None, "stop tracing after this many trace messages, as recon_trace's count limit (--limit N)", low=1),
    Key("rate", "[N, ms]", None, "stop tracing when more than N trace messages come within ms milliseconds (--limit N/MS); two integers >= 1"),
    Key("duration", "table", {}, "how long each workload process loops: give seconds or operations"),
    Key("duration.seconds", "number", None, "loop for this many seconds from the process's start", low=0, low_open=True),
    Key("duration.operations", "integer", None, "loop this many iterations (100 when neither key is given)", low=1),
    Key("tracers", "array of tables", [], "the tracers: collector processes and tracer ports"),
    Key("tracers[].name", "string", REQUIRED, "the name groups, trace, patterns and faults refer to"),
    Key("tracers[].kind", "string", "collector", "a collector process or a tracer port (trace_file_drv, trace_ip_drv, memory, null)", _TRACER_KINDS),
    Key("tracers[].path", "string", None, "the trace file (or, for a wrap log, the name before the counter); required for a file", when="kind = file"),
    Key("tracers[].wrap_suffix", "string", None, "write a wrap log: files PATH0SUFFIX, PATH1SUFFIX, ...", when="kind = file"),
    Key("tracers[].wrap_size", "integer", 1 << 20, "bytes after which a wrap log moves on to its next file (0, as dbg takes it: after every message)", low=0, high=(1 << 32) - 1, when="kind = file"),
    Key("tracers[].wrap_count", "integer", 8, "how many files a wrap log cycles through", low=1, high=1000, when="kind = file"),
    Key("tracers[].port", "integer", 0, "the TCP port an ip tracer listens on (0: any free port)", low=0, high=65535, when="kind = ip"),
    Key("tracers[].queue_size", "integer", 1000, "messages an ip tracer queues before it drops (and writes a drop record)", low=1, when="kind = ip"),
    Key("tracers[].heavy_every", "integer", 0, "report every Nth write as heavy, so nonsmp sends fake schedule out/in pairs (0: never)", low=0, when="kind = memory"),
    Key("tracers[].print", "boolean", True, "print what this tracer received in the run's trace output (an ip tracer: what was dispatched to its port, kept at the port, so its client slot stays free for dbg:trace_client)"),
    Key("groups", "array of tables", REQUIRED, "process groups, each running a built-in workload (at least one)"),
    Key("groups[].name", "string", REQUIRED, "the name faults refer to"),
    Key("groups[].workload", "string", REQUIRED, "the built-in workload the group runs", _WORKLOADS),
    Key("groups[].count", "integer", 1, "how many instances of the workload", low=1, high=10000),
    Key("groups[].scheduler", "integer", None, "place the group's processes on this scheduler (none: round robin); <= schedulers", low=1, high=1024),
    Key("groups[].trace", "string list", [], "trace flags set on every process of the group (needs tracer)", _FLAGS),
    Key("groups[].tracer", "string", None, "the tracer the group's trace flags send to"),
    Key("groups[].sensitive", "boolean", False, "start the processes with process_flag(sensitive, true)"),
    Key("groups[].params", "table", {}, "the workload's parameters (see the workload parameters)"),
    Key("trace", "array of tables", [], "erlang:trace/3 calls on pid specs"),
    Key("trace[].pids", "string", REQUIRED, "new: default tracing for processes spawned later; all/existing: those running at set-up", ("new", "all", "existing")),
    Key("trace[].flags", "string list", REQUIRED, "the trace flags", _FLAGS),
    Key("trace[].tracer", "string", REQUIRED, "the tracer they send to"),
    Key("patterns", "array of tables", [], "erlang:trace_pattern/3 calls"),
    Key("patterns[].mfa", "[Module, Function, Arity]", REQUIRED, 'the functions, "_" for any function or arity: ["wl_calls", "_", "_"]'),
    Key("patterns[].match_spec", "boolean or string", True, "true, false, return_trace, exception_trace, silent, dbg's x, c, cx, or a match spec as Erlang text"),
    Key("patterns[].flags", "string list", ["local"], "the pattern's kind", ("global", "local", "meta")),
    Key("patterns[].meta_tracer", "string", None, "the meta tracer; required with meta", when="flags has meta"),
    Key("seq_trace", "table", None, "set the system seq tracer (none: no seq tracer)"),
    Key("seq_trace.tracer", "string", REQUIRED, "the tracer that gets every seq_trace message"),
    Key("system_monitor", "table", None, "erlang:system_monitor/2 (none: no monitor)"),
    Key("system_monitor.monitor", "string", REQUIRED, "the monitor: a collector tracer"),
    Key("system_monitor.long_gc", "integer", 0, "long_gc threshold in ms (0: off)", low=0),
    Key("system_monitor.long_schedule", "integer", 0, "long_schedule threshold in ms (0: off)", low=0),
    Key("system_monitor.large_heap", "integer", 0, "large_heap threshold in words (0: off; raised to 16384 as 17.x does)", low=0),
    Key("system_monitor.busy_port", "boolean", False, "monitor busy_port events"),
    Key("system_monitor.busy_dist_port", "boolean", False, "monitor busy_dist_port events"),
    Key("system_profile", "table", None, "erlang:system_profile/2 (none: no profiler)"),
    Key("system_profile.profiler", "string", REQUIRED, "the profiler: a collector or a tracer port"),
    Key("system_profile.scheduler", "boolean", False, "profile schedulers going active and inactive (the report's timeline)"),
    Key("system_profile.runnable_procs", "boolean", False, "profile processes becoming runnable and not"),
    Key("system_profile.runnable_ports", "boolean", False, "profile ports becoming runnable and not"),
    Key("system_profile.exclusive", "boolean", False, "the exclusive option"),
    Key("faults", "array of tables", [], "faults made while the run goes on"),
    Key("faults[].action", "string", REQUIRED, "what the fault does", _FAULT_ACTIONS),
    Key("faults[].target", "string", None, "the tracer (kill_tracer: a collector) or the group (kill_processes, set_sensitive)", when="action = kill_tracer, kill_processes, set_sensitive"),
    Key("faults[].at", "number", 0.0, "seconds from the start of the run; must be before its end", low=0),
    Key("faults[].every", "number", None, "repeat every this many seconds (needs times when the duration is in operations)", low=0, low_open=True),
    Key("faults[].times", "integer", None, "how many times (default: 1, or as many as fit in duration.seconds with every)", low=1, high=100000),
    Key("faults[].count", "integer", 1, "how many of the group's processes, picked at random", low=1, high=100000, when="action = kill_processes, set_sensitive"),
    Key("faults[].reason", "string", "kill", "the exit reason (an atom)", when="action = kill_processes"),
    Key("faults[].value", "boolean", True, "the value of the sensitive flag", when="action = set_sensitive"),
    Key("faults[].replace", "boolean", True, "a fresh collector takes over the killed tracer's tracees and roles", when="action = kill_tracer"),
    Key("faults[].may_fail", "boolean", False, "the fault may fail to take (its target gone, say): listed, not an invariant failure"),
    Key("expect", "array of tables", [], "what the run must guarantee: run and stress check each clause after the run (a broken one exits 1), explore on every outcome"),
    Key("expect[].kind", "string", REQUIRED, "receives_every: the tracer got a send message for every numbered message the group's processes sent; no_drop: no trace message dropped for reason; order: per-tracee order holds at the tracer; count: the tracer got between min and max messages", _EXPECT_KINDS),
    Key("expect[].tracer", "string", REQUIRED, "the tracer whose messages are checked (not a null port, nor an ip port with print = false)", when="kind = receives_every, order, count"),
    Key("expect[].group", "string", REQUIRED, "the group whose processes' sends are counted (not a calls or gc group: they send no numbered messages)", when="kind = receives_every"),
    Key("expect[].event", "string", "send", "the trace event counted: each (Tag, Sender, Seq) message a process sent, sequence numbers 0 to its last", ("send",), when="kind = receives_every"),
    Key("expect[].reason", "string", "any", "the drop reason whose count (the run's statistics) must be 0; any: every reason", _EXPECT_REASONS, when="kind = no_drop"),
    Key("expect[].min", "integer", 0, "at least this many trace messages at the tracer (an integer >= 0; give min, max or both)", when="kind = count"),
    Key("expect[].max", "integer", None, "at most this many trace messages at the tracer (an integer >= min; none: no upper bound)", when="kind = count"),
)  # fmt: skip

#: Each built-in workload's ``params``: (one-line meaning, keys).
WORKLOAD_PARAMS: dict[str, tuple[str, tuple[Key, ...]]] = {
    "ping_pong": ("pairs of processes bouncing a message", (
        Key("pairs", "integer", 1, "how many ping/pong pairs", low=1),
        Key("payload", "integer", 0, "extra elements in each message", low=0),
        Key("same_scheduler", "boolean", False, "put both processes of a pair on one scheduler"),
    )),
    "ring": ("a token passed round a ring of linked processes", (
        Key("size", "integer", 4, "processes in the ring", low=1),
    )),
    "fan_in": ("many senders casting to one hot process", (
        Key("senders", "integer", 4, "how many senders", low=1),
        Key("payload", "integer", 0, "extra elements in each message", low=0),
    )),
    "calls": ("recursive calls (wl_calls:fib/1) with returns, errors and throws", (
        Key("depth", "integer", 4, "recursion depth of each call", low=0),
        Key("exception_every", "integer", 3, "every Nth call ends in an exception (0: never)", low=0),
    )),
    "gc": ("an allocator that keeps some data and collects garbage", (
        Key("words", "integer", 2000, "words allocated per iteration", low=1),
        Key("keep_every", "integer", 4, "keep every Nth allocation live (0: keep none)", low=0),
        Key("gc_every", "integer", 0, "call garbage_collect() every Nth iteration (0: never)", low=0),
    )),
    "ports": ("a driver user: commands to an echo, busy or slow port", (
        Key("driver", "string", "echo", "the port driver", ("echo", "busy", "slow", "dist")),
        Key("busy_ms", "integer", None, "how long the port stays busy after a command (busy, dist)", low=0),
        Key("cost_ms", "integer", None, "how long a command takes synchronously (slow)", low=0),
    )),
    "seq_chain": ("a seq_trace token carried round a chain of processes", (
        Key("length", "integer", 4, "processes in the chain", low=1),
        Key("label", "integer", 7, "the seq_trace label", low=0),
        Key("flags", "string list", ["send", "receive", "print"], "the seq_trace flags set on the token", ("send", "receive", "print", "timestamp")),
        Key("print_every", "integer", 1, "seq_trace:print every Nth round (0: never)", low=0),
    )),
    "churn": ("a process that traces its worker to short-lived tracers, each killed after "
              "a burst and replaced once it is dead", (
        Key("burst", "integer", 5, "requests sent while one tracer lives", low=1),
        Key("flags", "string list", ["send", "receive"], "the trace flags set on the worker", _FLAGS),
    )),
}  # fmt: skip

# ------------------------------------------------------------ explore scenario
_QUEUE_DO = ("send", "seq_send", "gc", "spin", "crash")
_CHANGES = ("seq_tracer", "system_monitor", "system_profile", "trace", "kill")
_MONITOR_OPTS = (
    ("long_gc", "integer", "long_gc threshold in ms"),
    ("long_schedule", "integer", "long_schedule threshold in ms"),
    ("large_heap", "integer", "large_heap threshold in words"),
    ("busy_port", "boolean", "monitor busy_port events"),
    ("busy_dist_port", "boolean", "monitor busy_dist_port events"),
)
_PROFILE_OPTS = (
    ("scheduler", "boolean", "profile schedulers going active and inactive"),
    ("runnable_procs", "boolean", "profile processes becoming runnable and not"),
    ("runnable_ports", "boolean", "profile ports becoming runnable and not"),
    ("exclusive", "boolean", "the exclusive option"),
)


def _options(prefix: str, options, when: str = "") -> tuple[Key, ...]:
    """The monitor's or the profiler's options: one left out is not passed."""
    return tuple(
        Key(f"{prefix}.{name}", typ, None, f"{meaning} (none: not passed)", low=0 if typ == "integer" else None, when=when)
        for name, typ, meaning in options
    )  # fmt: skip


EXPLORE_KEYS: tuple[Key, ...] = (
    Key("name", "string", None, "the scenario's name (default: the file name without .toml)"),
    Key("description", "string", "", "one line on the race the scenario shows"),
    Key("schedulers", "integer", 1, "schedulers of each schedule's smp emulator", low=1, high=2),
    Key("processes", "array of tables", [], "collector processes spawned first; each keeps what it receives"),
    Key("processes[].name", "string", REQUIRED, "the process's name: a lower-case letter, then letters, digits, _ or -"),
    Key("processes[].register", "string", None, "register the process under this name"),
    Key("setup", "table", {}, "the tracer state set before the queue, in smp and nonsmp alike"),
    Key("setup.seq_tracer", "string", None, "the system seq tracer: a process name"),
    Key("setup.system_monitor", "table", None, 'the system monitor: { monitor = NAME or "undefined", options }'),
    Key("setup.system_monitor.monitor", "string", REQUIRED, 'the monitor process, or "undefined"'),
    *_options("setup.system_monitor", _MONITOR_OPTS),
    Key("setup.system_profile", "table", None, 'the system profiler: { profiler = NAME or "undefined", options }'),
    Key("setup.system_profile.profiler", "string", REQUIRED, 'the profiler process, or "undefined"'),
    *_options("setup.system_profile", _PROFILE_OPTS),
    Key("setup.trace", "array of tables", [], "erlang:trace/3 calls made at set-up"),
    Key("setup.trace[].tracee", "string", REQUIRED, "the traced process"),
    Key("setup.trace[].flags", "string list", [], "the trace flags", _FLAGS),
    Key("setup.trace[].tracer", "string", REQUIRED, "the tracer process"),
    Key("queue", "array of tables", REQUIRED, "the processes that make the queued messages, run one by one behind a held dispatcher (at least one)"),
    Key("queue[].name", "string", REQUIRED, "the process's name (a new one)"),
    Key("queue[].do", "string", REQUIRED, "what the process does: send count messages, seq_send them with a seq_trace token, gc (a long_gc), spin count reductions, crash (an error report)", _QUEUE_DO),
    Key("queue[].to", "string", REQUIRED, "the receiver of the sends", when="do = send, seq_send"),
    Key("queue[].count", "integer", 1, "how many sends (or spins)", low=1, when="do = send, seq_send, spin"),
    Key("queue[].label", "integer", 0, "the seq_trace label", low=0, when="do = seq_send"),
    Key("queue[].words", "integer", 30000, "words allocated before the collection (1 ms per 10,000 words)", low=1, when="do = gc"),
    Key("queue[].trace", "string list", [], "trace/3 on this process before it runs, with these flags (needs tracer)", _FLAGS),
    Key("queue[].tracer", "string", None, "the tracer of those flags", when="trace given"),
    Key("changes", "array of tables", REQUIRED, "the state changes, made in this order, each after some of the queued messages (at least one)"),
    Key("changes[].action", "string", REQUIRED, "the change", _CHANGES),
    Key("changes[].name", "string", None, "the change's name in schedules (replace@1), used once among the changes (none: the action)"),
    Key("changes[].tracer", "string or false", None, "seq_tracer: the new seq tracer, required (false clears it); trace: the tracer of the flags (none: trace/3 answers badarg, which the outcome shows)", when="action = seq_tracer, trace"),
    Key("changes[].monitor", "string", REQUIRED, 'the new monitor, or "undefined" to clear it', when="action = system_monitor"),
    *_options("changes[]", _MONITOR_OPTS, when="action = system_monitor"),
    Key("changes[].profiler", "string", REQUIRED, 'the new profiler, or "undefined" to clear it', when="action = system_profile"),
    *_options("changes[]", _PROFILE_OPTS, when="action = system_profile"),
    Key("changes[].tracee", "string", REQUIRED, "the process whose flags change", when="action = trace"),
    Key("changes[].flags", "string list", [], "the trace flags", _FLAGS, when="action = trace"),
    Key("changes[].how", "boolean", True, "true sets the flags, false clears them (trace/3's How)", when="action = trace"),
    Key("changes[].target", "string", REQUIRED, "the process to kill", when="action = kill"),
    Key("changes[].reason", "string", "kill", "the exit reason (an atom name)", when="action = kill"),
    Key("explore", "table", {}, "bounds of the search (the command line's options override them)"),
    Key("explore.max_messages", "integer", 12, "every class is run up to this many queued messages (--max-messages)", low=0),
    Key("explore.max_changes", "integer", 4, "... and this many changes (--max-changes); beyond, a random sample", low=0),
    Key("explore.samples", "integer", 40, "classes a random sample runs (--samples)", low=0),
    Key("explore.seed", "integer", None, "the random seed of the sample (none: a fresh one, printed)"),
)  # fmt: skip


def keys_of(kind: str) -> tuple[Key, ...]:
    """Every key of a scenario of ``kind`` (``run`` or ``explore``); for
    ``run`` the workload parameters come as ``groups[].params.NAME`` with
    ``when`` naming the workload."""
    if kind == "explore":
        return EXPLORE_KEYS
    if kind != "run":
        raise ValueError(f"schema kind must be one of {', '.join(SCHEMA_KINDS)}, not {kind!r}")
    params = tuple(
        Key(
            f"groups[].params.{k.path}",
            k.type,
            k.default,
            k.meaning,
            k.choices,
            k.low,
            k.high,
            k.low_open,
            f"workload = {w}",
        )
        for w, (_doc, keys) in WORKLOAD_PARAMS.items()
        for k in keys
    )
    return RUN_KEYS + params


# ------------------------------------------------------------ rendering
_TITLES = {"run": "a run/stress scenario", "explore": "an explore scenario"}


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def _markdown(keys: tuple[Key, ...]) -> str:
    lines = ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
    for k in keys:
        meaning = k.meaning + (f" (when {k.when})" if k.when else "")
        allowed = k.allowed()
        if k.type == "string list" and k.choices == _FLAGS:
            allowed = "trace flag names"
        lines.append(
            f"| `{k.path}` | {k.type} | `{k.default_text()}` | "
            f"{_md_cell(allowed)} | {_md_cell(meaning)} |"
        )
    return "\n".join(lines)


def _text(kind: str, keys: tuple[Key, ...]) -> str:
    width = max(len(k.path) for k in keys)
    out = [f"Keys of {_TITLES[kind]} (TOML):", ""]
    for k in keys:
        allowed = k.allowed()
        if k.type == "string list" and k.choices == _FLAGS:
            allowed = "trace flag names"
        facts = [k.type, f"default {k.default_text()}"] + ([allowed] if allowed else [])
        out.append(f"  {k.path:<{width}}  {'; '.join(facts)}")
        out.append(f"  {'':<{width}}  {k.meaning}" + (f" (when {k.when})" if k.when else ""))
    if kind == "run":
        out += ["", "Trace flags: " + ", ".join(_FLAGS)]
    return "\n".join(out) + "\n"


def render_schema(kind: str, fmt: str = "text") -> str:
    """The reference of every key of a ``kind`` scenario (``run`` or
    ``explore``) as plain text (``fmt="text"``, for the command line) or as
    Markdown tables (``fmt="markdown"``, for the documentation)."""
    keys = keys_of(kind)
    if fmt == "text":
        return _text(kind, keys)
    if fmt != "markdown":
        raise ValueError(f"fmt must be text or markdown, not {fmt!r}")
    if kind == "explore":
        return _markdown(keys) + "\n"
    parts = [_markdown(RUN_KEYS), "", "Workload parameters (`[groups.params]`):", ""]
    for w, (doc, wkeys) in WORKLOAD_PARAMS.items():
        parts += [f"**`{w}`**: {doc}.", "", _markdown(wkeys), ""]
    parts += ["Trace flag names: " + ", ".join(f"`{f}`" for f in _FLAGS) + "."]
    return "\n".join(parts) + "\n"


# ------------------------------------------------------------ examples
_COMMENT = re.compile(r"^\s*#\s?(.*)$")
_DESCRIPTION = re.compile(r'^description\s*=\s*"([^"]*)"', re.MULTILINE)


def _one_line(text: str) -> str:
    """An example's ``description``, else the first sentence of its opening
    comment (the part before a colon when the sentence is long)."""
    m = _DESCRIPTION.search(text)
    if m:
        return m.group(1)
    lead = []
    for line in text.splitlines():
        c = _COMMENT.match(line)
        if not c:
            break
        lead.append(c.group(1).strip())
    words = " ".join(lead)
    sentence = re.split(r"(?<=[.!?])\s", words, maxsplit=1)[0].rstrip(".")
    if len(sentence) > 100 and ":" in sentence:
        sentence = sentence.split(":", 1)[0]
    return sentence


def list_examples(kind: str = "run") -> list[tuple[str, str]]:
    """The shipped example scenarios of ``kind`` (``run``: for run, compare,
    stress; ``explore``) as ``(name, one line)``, sorted by name."""
    if kind not in SCHEMA_KINDS:
        raise ValueError(f"example kind must be one of {', '.join(SCHEMA_KINDS)}, not {kind!r}")
    d = resources.files("smp.app") / "examples"
    if kind == "explore":
        d = d / "explore"
    out = []
    for f in sorted(d.iterdir(), key=lambda x: x.name):
        if f.name.endswith(".toml"):
            out.append((f.name[:-5], _one_line(f.read_text("utf-8"))))
    return out
