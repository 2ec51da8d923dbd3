"""A check of a running run passes the trace on for ``PULL_BUDGET_S`` at
most (the processes, and the fault controller's BIFs, wait meanwhile: the
dbg text of ``run everything`` took 0.8 s of its 1.5 s so, and its
kill_tracer at 0.3 s was done at 1.6 s); the rest goes at the next check,
and all of it at the end, each term once and in order."""

from __future__ import annotations

from smp.app.workloads import TracePull


class FakeVM:
    def __init__(self, kept: dict):
        self.kept = kept  # pid -> what its collector holds

    def messages(self, pid, start=0):
        return list(self.kept[pid][start:])


class Clock:
    """Time moves only as terms are written: each costs ``cost`` s."""

    def __init__(self, cost: float):
        self.t, self.cost = 0.0, cost

    def __call__(self) -> float:
        return self.t


def test_a_budget_cuts_the_writing_short_and_the_next_pull_goes_on():
    vm = FakeVM({"p1": list(range(10)), "p2": ["a", "b"], "p3": ["quiet"]})
    clock = Clock(0.01)
    out = []

    def emit(name, term):
        out.append((name, term))
        clock.t += clock.cost

    messages = {"one": [], "two": [], "three": []}
    pull = TracePull(
        vm, {"one": "p1", "two": "p2", "three": "p3"}, messages, {"one", "two"}, emit, clock
    )
    pull(0.025)
    # everything was taken from the collectors, three terms written (the
    # budget is looked at before each)
    assert messages == {"one": list(range(10)), "two": ["a", "b"], "three": ["quiet"]}
    assert out == [("one", 0), ("one", 1), ("one", 2)]
    vm.kept["p1"].append(10)
    pull(0.025)
    assert out[3:] == [("one", 3), ("one", 4), ("one", 5)]
    pull()  # the end of the run: all of it
    assert out == [("one", i) for i in range(11)] + [("two", "a"), ("two", "b")]
    pull()
    assert len(out) == 13 and messages["one"] == list(range(11))
