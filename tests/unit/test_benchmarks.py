"""The benchmarks run as scripts (``python benchmarks/NAME.py``), so their directory comes first on ``sys.path``:
a benchmark named after a standard-library module (``bisect.py``) would break every import of it there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MODULES = sorted((Path(__file__).resolve().parents[2] / "benchmarks").glob("*.py"))
BENCHMARKS = [p for p in MODULES if not p.stem.startswith("_")]  # _worktree.py: a helper the scripts import


def test_no_benchmark_shadows_a_standard_library_module() -> None:
    assert BENCHMARKS
    assert [p.name for p in MODULES if p.stem in sys.stdlib_module_names] == []


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.stem)
def test_each_benchmark_starts_and_explains_itself(script: Path) -> None:
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout
