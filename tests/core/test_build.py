"""The two builds: the modules compiled with Cython, and the pure-Python reference.

``tools/test.sh`` runs the whole suite twice: once on the build that ``pip
install`` made (compiled where a C compiler works) and once with
``SMP_PURE=1``; it says which build each run expects in ``SMP_EXPECT_BUILD``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smp import _build
from smp.core.terms import A, BitString, ImproperList, Map, Pid, Port, Ref, charlist

ROOT = Path(__file__).resolve().parents[2]

#: Terms of every kind the external format and the wire codec carry.
SAMPLES = [
    (A.trace_ts, Pid(83), A.send, (A.ping, Pid(84), 12345), Pid(85), (1, 2, 3)),
    [1, -1, 2**70, -(2**70), 1.5, b"bin", charlist("text"), []],
    ImproperList([1, 2], A.tail),
    Map({A.a: 1, (1, 2): [3]}),
    BitString(b"\x01\x40", 11),
    Port(7),
    Ref((1, 2, 3)),
    (A.seq_trace, A.label, (A.send, (0, 1), Pid(1), Pid(2), A.hello)),
]


def _run(code: str, **env) -> str:
    full = {k: v for k, v in os.environ.items() if k not in ("SMP_PURE", "SMP_EXPECT_BUILD")}
    full.update(env)
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=60
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_pure_is_asked_by_any_value_but_empty_or_0(monkeypatch):
    for value, pure in (("", False), ("0", False), ("1", True), ("yes", True)):
        monkeypatch.setenv(_build.ENV, value)
        assert _build.pure_requested() is pure
    monkeypatch.delenv(_build.ENV)
    assert _build.pure_requested() is False


def test_smp_pure_loads_every_listed_module_from_its_source():
    out = _run(
        "import smp, schedulers.engine, dispatcher.server, importlib\n"
        "from smp import _build\n"
        "for m in _build.COMPILED:\n"
        "    print(importlib.import_module(m).__file__)\n"
        "print(_build.build())\n",
        SMP_PURE="1",
    ).split()
    assert out[-1] == "pure"
    assert len(out) == len(_build.COMPILED) + 1
    assert all(f.endswith(".py") for f in out[:-1]), out


def test_the_build_is_the_one_this_run_expects():
    """``SMP_EXPECT_BUILD`` (set by tools/test.sh) names the build; a partial
    one ("mixed") is never right."""
    got = _build.build()
    assert got in ("compiled", "pure")
    expected = os.environ.get("SMP_EXPECT_BUILD")
    if expected:
        assert got == expected
    if _build.pure_requested():
        assert got == "pure"


def test_both_builds_encode_and_decode_alike():
    """The compiled modules are the same code: the external format and the
    wire codec give the same bytes and the same terms in both builds.  Each
    side runs in its own process (the installed build, and ``SMP_PURE=1``),
    so both runs of the suite compare the compiled build with the pure one
    where a compiled build is installed."""
    code = (
        "import sys\n"
        "sys.path.insert(0, %r)\n"
        "from test_build import SAMPLES\n"
        "from smp import _build\n"
        "from smp.wire import codec, etf\n"
        "print(_build.build())\n"
        "for t in SAMPLES: print(etf.encode(t).hex())\n"
        "for t in SAMPLES: print(codec.dumps(t).hex())\n"
        "for t in SAMPLES: assert etf.decode(etf.encode(t)) == t, t\n"
        "for t in SAMPLES: assert codec.loads(codec.dumps(t)) == t, t\n"
    ) % str(Path(__file__).parent)
    installed = _run(code).split()
    pure = _run(code, SMP_PURE="1").split()
    assert pure[0] == "pure" and installed[0] in ("compiled", "pure")
    if os.environ.get("SMP_EXPECT_BUILD") == "compiled":
        assert installed[0] == "compiled"
    assert len(installed) == 1 + 2 * len(SAMPLES)
    assert installed[1:] == pure[1:]


def test_without_a_working_compiler_the_install_is_pure(tmp_path):
    """setup.py with a C compiler that fails installs the sources alone,
    and says so."""
    pytest.importorskip("Cython")
    for rel in ["setup.py", "smp/_build.py"] + [
        m.replace(".", "/") + ".py" for m in _build.COMPILED
    ]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    env = {k: v for k, v in os.environ.items() if k != "SMP_PURE"}
    env["CC"] = "false"
    r = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "no working C compiler; installing the pure-Python build" in r.stderr
    assert list(tmp_path.rglob("*.so")) == []
