"""End-to-end fixtures: a fresh git monorepo of the splitfam family, and a real package index.

``splitfam_factory()`` makes a committed copy of ``tests/data/splitfam`` (frontend, Bazel-built
core, plugin) with jaxrel's Bazel rules (``bazel/``) and import guard (``_guard.py``) copied in,
as a project adopting jaxrel would have them; ``splitfam`` is one such repository.
``pypiserver_factory()`` starts a real pypiserver on 127.0.0.1 that takes authenticated
uploads (twine) and serves a PEP 503 simple index with ``#sha256=`` fragments; ``pypiserver``
is one such server. Everything made here is torn down after the test: servers are stopped,
and each repository's Bazel server is shut down.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from splitfam_support import PypiServer, bazel_shutdown, make_splitfam

from jaxrel.distributions.bazel import BuildError, find_launcher
from jaxrel.distributions.pipconfig import pip_command


@pytest.fixture
def splitfam_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Path]]:
    """``make(name="splitfam") -> Path``: :func:`make_splitfam`; each Bazel server is shut down at teardown."""
    made: list[Path] = []

    def make(name: str = "splitfam") -> Path:
        made.append(make_splitfam(tmp_path_factory, name))
        return made[-1]

    yield make
    for repo in made:
        bazel_shutdown(repo)


@pytest.fixture
def splitfam(splitfam_factory: Callable[..., Path]) -> Path:
    """A new git repository holding splitfam 0.1.0 (see :func:`splitfam_factory`)."""
    return splitfam_factory()


@pytest.fixture
def pypiserver_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., PypiServer]]:
    """``make(name="pypi", username="releaser", password=None) -> PypiServer``, started; all stopped at teardown."""
    pytest.importorskip("pypiserver", reason="pypiserver is not installed: pip install -e '.[test]'")
    pytest.importorskip("passlib.apache", reason="passlib is not installed: pip install 'pypiserver[passlib]'")
    servers: list[PypiServer] = []

    def make(name: str = "pypi", username: str = "releaser", password: str | None = None) -> PypiServer:
        server = PypiServer(tmp_path_factory.mktemp(name), username=username, password=password)
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def pypiserver(pypiserver_factory: Callable[..., PypiServer]) -> PypiServer:
    """A running pypiserver with an empty index (see :class:`PypiServer`)."""
    return pypiserver_factory()


@pytest.fixture(scope="session")
def index_reachable() -> None:
    """Skip with the reason when pip cannot list what splitfam's builds and tests need (setuptools, absl-py)."""
    for project in ("setuptools", "absl-py"):
        done = subprocess.run([*pip_command(), "index", "versions", project], capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"package index unreachable through pip's configuration: {last}")


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(repository, dist) of splitfam 0.1.0 built by ``jaxrel release build``, once per test session (the
    tests that use it publish copies of the dist from the repository, and change neither)."""
    try:
        find_launcher(Path.cwd())
    except BuildError as error:
        pytest.skip(f"Bazel is not installed: {error}")
    repo = make_splitfam(tmp_path_factory, "splitfam-built")
    dist = tmp_path_factory.mktemp("built") / "dist"
    done = subprocess.run([sys.executable, "-m", "jaxrel", "release", "build", "--output", str(dist)], cwd=repo,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    yield repo, dist
    bazel_shutdown(repo)


@pytest.fixture
def dist(built: tuple[Path, Path], tmp_path: Path) -> Path:
    """A copy of the built dist directory that the test may change."""
    copy = tmp_path / "dist"
    shutil.copytree(built[1], copy)
    return copy
