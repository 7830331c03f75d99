"""Integration fixtures: skip (never pass) when the package index cannot be reached."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazel_workspace import shut_down_kept

from jaxrel.distributions.bazel import BuildError, find_launcher
from jaxrel.distributions.pipconfig import pip_command

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def index_reachable() -> None:
    """Skip with the reason when pip cannot list jaxlib through its configuration."""
    done = subprocess.run([*pip_command(), "index", "versions", "jaxlib"],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or "0.10.2" not in done.stdout:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"package index unreachable through pip's configuration: {last}")


@pytest.fixture(scope="session")
def launcher() -> list[str]:
    """bazelisk (or bazel) for the repository's workspace; skip with the reason when neither is installed."""
    try:
        return find_launcher(REPO)
    except BuildError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session", autouse=True)
def stop_bazel_server() -> Iterator[None]:
    """After the session, stop the Bazel servers the repository's workspace and the kept workspaces
    (tests/bazel_workspace.py) may have started, so no daemon outlives the test run."""
    yield
    try:
        launcher = find_launcher(REPO)
    except BuildError:
        return
    subprocess.run([*launcher, "shutdown"], cwd=REPO, capture_output=True, timeout=120)
    shut_down_kept(launcher)
