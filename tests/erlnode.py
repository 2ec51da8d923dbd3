"""Erlang terms of every kind (hypothesis strategies) and a real node to check
them against, for the interop tests."""

from __future__ import annotations

import shutil
import struct
import subprocess
import warnings

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisWarning

from smp.core.terms import Atom, BitString, ExportFun, Fun, ImproperList, Map, Pid, Port, Ref


def needs_erl(test):
    """Mark ``test`` interop, skipped where ``erl`` is absent."""
    test = pytest.mark.skipif(
        shutil.which("erl") is None, reason="no Erlang node: `erl` not on PATH"
    )(test)
    return pytest.mark.interop(test)


SPLIT = "Split = fun S(<<0, N:32, T:N/binary, R/binary>>) -> [T | S(R)]; S(<<>>) -> [] end,"
REMOTE = [Atom("remote@host"), Atom("n\u00f6de@h\u00f6st"), Atom("w@x")]


def collect(strategy, n: int) -> list:
    """``n`` examples of ``strategy`` drawn by hypothesis (one node run then
    checks them all: a node per example would be far too slow)."""
    out: list = []

    @settings(
        max_examples=n,
        deadline=None,
        phases=[Phase.generate],
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def draw(x):
        out.append(x)

    with warnings.catch_warnings():
        # the strategies' own repr is large; hypothesis warns about it
        warnings.simplefilter("ignore", HypothesisWarning)
        draw()
    return out


def frames(blobs) -> bytes:
    """<<0, Size:32, Blob>> for each blob, as SPLIT splits them in Erlang."""
    return b"".join(b"\0" + struct.pack(">I", len(b)) + b for b in blobs)


def unframe(raw: bytes) -> list:
    blobs, pos = [], 0
    while pos < len(raw):
        size = struct.unpack_from(">I", raw, pos + 1)[0]
        blobs.append(raw[pos + 5 : pos + 5 + size])
        pos += 5 + size
    return blobs


def run_node(code, timeout=120, args=()) -> bytes:
    """Run ``code`` (Erlang expressions ending in halt()) on one fresh node;
    return what it wrote on stdout, as bytes."""
    r = subprocess.run(
        ["erl", "-noshell", "-noinput", *args, "-eval", code], capture_output=True, timeout=timeout
    )
    assert r.returncode == 0, f"erl failed ({r.returncode}):\n{r.stdout!r}\n{r.stderr!r}"
    return r.stdout


def estr(path) -> str:
    """An Erlang string literal of ``path``."""
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def exact(a, b) -> bool:
    """Equality that tells -0.0 from 0.0 and 1 from 1.0, all the way down."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return struct.pack(">d", a) == struct.pack(">d", b)
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(exact(x, y) for x, y in zip(a, b, strict=False))
    if type(a) is ImproperList:
        return exact(a.elements, b.elements) and exact(a.tail, b.tail)
    if type(a) is Map:
        return len(a) == len(b) and all(
            exact(k1, k2) and exact(v1, v2)
            for (k1, v1), (k2, v2) in zip(a.items(), b.items(), strict=False)
        )
    if type(a) is Fun:
        return (
            a.module is b.module
            and (a.arity, a.uniq, a.index, a.old_index, a.old_uniq)
            == (b.arity, b.uniq, b.index, b.old_index, b.old_uniq)
            and exact(a.pid, b.pid)
            and exact(list(a.free), list(b.free))
        )
    return a == b


# What a real node accepts: local pids with number < 2**15 and serial < 2**13,
# local ports < 2**28, local refs of 3 words with the first < 2**18.
u32 = st.integers(0, 2**32 - 1)
node_pids = st.builds(Pid, st.integers(0, 2**15 - 1), st.integers(0, 2**13 - 1)) | st.builds(
    Pid, u32, u32, st.sampled_from(REMOTE), st.integers(1, 2**32 - 1)
)
node_atoms = (
    st.text(max_size=12).map(Atom)
    | st.sampled_from(
        [
            Atom(x)
            for x in (
                "ok",
                "",
                "A",
                "after",
                "caf\u00e9",
                "a b",
                "\u00fc",
                "\U0001f600",
                "else",
                "maybe",
            )
        ]
    )
    | st.tuples(st.sampled_from("x\u00e9"), st.integers(100, 255)).map(lambda a: Atom(a[0] * a[1]))
)
floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [0.0, -0.0, 1000.0, 0.000425929080548906, 1e300, 5e-324, 9007199254740992.0, 0.1]
)
ints = st.integers(-300, 300) | st.integers(-(2**64), 2**64) | st.integers(-(2**3000), 2**3000)
bitstrings = st.builds(
    lambda data, bits: BitString(data + b"\0", 8 * len(data) + bits),
    st.binary(max_size=6),
    st.integers(1, 7),
)
node_leaves = st.one_of(
    node_atoms,
    ints,
    floats,
    st.binary(max_size=12),
    bitstrings,
    node_pids,
    st.builds(Port, st.integers(0, 2**28 - 1)),
    st.builds(Port, st.integers(0, 2**64 - 1), st.sampled_from(REMOTE), st.integers(1, 2**32 - 1)),
    st.builds(lambda a, b, c: Ref((a, b, c)), st.integers(0, 2**18 - 1), u32, u32),
    st.builds(
        Ref,
        st.lists(u32, min_size=1, max_size=5).map(tuple),
        st.sampled_from(REMOTE),
        st.integers(1, 2**32 - 1),
    ),
    st.builds(ExportFun, node_atoms, node_atoms, st.integers(0, 255)),
    st.lists(st.integers(0, 255), max_size=8),
    st.lists(st.integers(0, 0x10FFFF), max_size=4),
)
map_keys = st.recursive(
    st.one_of(
        node_atoms,
        st.integers(-300, 300),
        ints,
        floats,
        st.binary(max_size=4),
        st.lists(st.integers(0, 255), max_size=3),
    ),
    lambda ch: st.lists(ch, max_size=2).map(tuple),
    max_leaves=3,
)


def _fun(args):
    module, arity, uniq, index, old_index, old_uniq, pid, free = args
    return Fun(module, arity, uniq, index, old_index, old_uniq, pid, free)


node_terms = st.recursive(
    node_leaves,
    lambda ch: st.one_of(
        st.lists(ch, max_size=4),
        st.lists(ch, max_size=4).map(tuple),
        st.tuples(
            st.lists(ch, min_size=1, max_size=3),
            ch.filter(lambda t: type(t) not in (list, ImproperList)),
        ).map(lambda a: ImproperList(*a)),
        st.lists(st.tuples(map_keys, ch), max_size=6).map(Map),
        st.tuples(
            node_atoms,
            st.integers(0, 255),
            st.binary(min_size=16, max_size=16),
            u32,
            st.integers(0, 2**27),
            st.integers(0, 2**27),
            node_pids,
            st.lists(ch, max_size=3),
        ).map(_fun),
    ),
    max_leaves=14,
)


def run_erl(code, timeout=60):
    """Run ``code`` (an Erlang expression sequence ending in halt()) on a fresh node."""
    r = subprocess.run(
        ["erl", "-noshell", "-noinput", "-eval", code],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert r.returncode == 0, f"erl failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r.stdout


COLLECT = """
Self = self(),
H = fun(end_of_trace, Acc) -> ok = file:write_file(OUT, term_to_binary(lists:reverse(Acc))),
                              Self ! done, Acc;
       (T, Acc) -> [T | Acc] end,
"""
WAIT = "receive done -> ok after 30000 -> halt(3) end, halt()."
