"""The classes an exhaustive search explores, for the simulator's tests."""

from __future__ import annotations

from smp.sim.dpor import Tree, mazurkiewicz_key


def classes(new_world, optimal: bool, prefix=()) -> tuple[list, int, int]:
    """Every complete execution's Mazurkiewicz trace (in the order explored),
    the blocked ones, and the planned steps that could not be taken."""
    t = Tree(new_world, prefix=prefix, optimal=optimal)
    keys, blocked = [], 0
    while not t.finished:
        w, how = t.execute()
        t.add_races()
        if how == "blocked":
            blocked += 1
        else:
            keys.append(mazurkiewicz_key(w.trace))
        w.dispose()
        if not t.advance():
            break
    return keys, blocked, t.misses
