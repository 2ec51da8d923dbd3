"""A deterministic simulator of the SMP build and an explorer of its orders.

``explore(setup, schedulers=N)`` runs a workload (``setup(vm)`` spawns
processes and sets tracing through ``SimVM``, the emulator's API) on N
logical schedulers and the dispatcher in this one process, with the engine
the real emulator runs, and explores every order the SMP build allows up to
equivalence (optimal DPOR with wakeup trees; Source-DPOR with sleep sets
under a preemption bound or when asked, ``dpor="source"``).  ``replay(setup, schedule)``
runs one order again from its schedule string.  ``sample(setup, runs,
"random" | "pct")`` runs random or PCT schedules instead.

Layers: ``deps`` (the dependency relation), ``world`` (the simulated build),
``vm`` (the setup facade), ``dpor`` (the exploration tree and the brute
force), ``outcome`` (outcomes and invariants), ``explorer`` (the API),
``report`` (text for people), ``catalogue`` (known races as workloads),
``sampling`` (random schedules and PCT), ``graph`` (the explored tree as
DOT); ``explorer.explore_split`` shares one exploration among workers.
"""

from .explorer import (
    Execution,
    Explorer,
    ExploreResult,
    OutcomeGroup,
    brute_force,
    explore,
    replay,
    shrink_failures,
)
from .outcome import Outcome
from .report import format_report
from .sampling import sample
from .vm import SimVM
from .world import SimError

__all__ = [
    "explore",
    "replay",
    "sample",
    "shrink_failures",
    "brute_force",
    "Explorer",
    "ExploreResult",
    "Execution",
    "OutcomeGroup",
    "Outcome",
    "SimVM",
    "SimError",
    "format_report",
]
