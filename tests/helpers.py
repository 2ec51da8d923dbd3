"""Checks the behaviour tests share."""
from __future__ import annotations

from smp.terms import Atom


def check_counts(vm) -> dict:
    """Every message accounted for: made = delivered + dropped + queued."""
    s = vm.statistics()
    assert s["made"] == s["delivered"] + s["dropped"] + s["queued"], s
    return s


def mfa(fun, arity: int = 0) -> tuple:
    """The {M, F, A} the emulator reports for a process body."""
    return (Atom(fun.__module__), Atom(fun.__name__), arity)


def assert_increasing(stamps: list) -> None:
    """{MegaSecs, Secs, MicroSecs} timestamps, strictly increasing."""
    for ts in stamps:
        assert type(ts) is tuple and len(ts) == 3 and all(type(x) is int for x in ts)
    assert all(a < b for a, b in zip(stamps, stamps[1:])), stamps
