"""Integration fixtures: skip (never pass) when the package index cannot be reached."""

from __future__ import annotations

import subprocess

import pytest

from jaxrel.pipconfig import pip_command


@pytest.fixture(scope="session")
def index_reachable() -> None:
    """Skip with the reason when pip cannot list jaxlib through its configuration."""
    done = subprocess.run([*pip_command(), "index", "versions", "jaxlib"],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or "0.10.2" not in done.stdout:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"package index unreachable through pip's configuration: {last}")
