"""Fixtures of the simulator's tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest


@pytest.fixture
def readme_swap(tmp_path) -> Path:
    """The README's ``swap.toml`` (a ping-pong pair whose tracer is
    killed), written where a test can explore it."""
    text = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    m = re.search(r'```toml title="swap.toml"\n(.*?)```', text, re.S)
    assert m, "the README's swap.toml"
    f = tmp_path / "swap.toml"
    f.write_text(m.group(1))
    return f
