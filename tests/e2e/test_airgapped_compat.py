"""The index you name reaches every cell: `jaxrel compat` on the splitfam sample family with nothing reachable
but the index or wheelhouse given on the command line.

One wheelhouse holds everything the run installs: splitfam's core and plugin releases and the third-party
wheels (pytest and its dependencies, absl-py for splitfam's own tests, setuptools for building the frontend),
downloaded once through pip's configuration. Then pip's configuration is pointed at a dead port, and

- a pypiserver on loopback serves the wheelhouse: ``--index-url`` of it must carry every cell (uv's
  environments, the frontend's build, jaxrel's own listings);
- ``--wheelhouse`` of it with ``PIP_NO_INDEX=1`` and ``UV_OFFLINE=1``: the air-gapped run.

The plugin 0.2.0 has an extra of its own (``with-x``, bringing ``splitfam-extra-dep``), as
``jax-cuda13-plugin[with-cuda]`` brings NVIDIA's wheels: a frontend whose ``cpu`` extra asks for it gets
plugin cells that install it in full, light or as the ``cpu-local`` flavour.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from splitfam_support import PypiServer, core_release, make_splitfam, plugin_release, set_frontend_version

from jaxrel.distributions.pipconfig import pip_command
from jaxrel.distributions.wheels import write_wheel

pytestmark = pytest.mark.integration

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
NOWHERE = "http://127.0.0.1:9/nowhere/simple/"  # the discard port: nothing answers
THIRD_PARTY = ["pytest", "absl-py", "setuptools>=77"]


@pytest.fixture(scope="module")
def wheelhouse(index_reachable: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """splitfam-core 0.1.0/0.2.0, splitfam-cpu-plugin 0.2.0, and every third-party wheel the run needs."""
    template = make_splitfam(tmp_path_factory, "airgapped-releases")
    house = tmp_path_factory.mktemp("airgapped") / "wheels"
    core_release(template, "0.1.0", 1, house)
    core_release(template, "0.2.0", 2, house)
    plugin_release(template, "0.2.0", house, requires=['splitfam-extra-dep==1.0; extra == "with-x"'])
    dep = write_wheel(house.parent / "build-dep", "splitfam-extra-dep", "1.0", {"splitfam_extra_dep/__init__.py": b""})
    shutil.move(dep, house / dep.name)
    done = subprocess.run([*pip_command(), "download", "--quiet", "--only-binary=:all:", "--dest", str(house),
                           *THIRD_PARTY], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return house


@pytest.fixture
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = make_splitfam(tmp_path_factory, "airgapped")
    set_frontend_version(repo, "0.2.0", "0.1.0")
    subprocess.run(["git", "commit", "-qam", "splitfam 0.2.0"], cwd=repo, check=True)
    return repo


def nothing_else_reachable(**extra: str) -> dict[str, str]:
    """This environment with pip's and uv's own sources pointed nowhere (or switched off)."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PIP_", "UV_INDEX", "UV_EXTRA_INDEX", "UV_FIND_LINKS", "UV_DEFAULT_INDEX"))}
    return {**env, "PIP_INDEX_URL": NOWHERE, "PIP_CONFIG_FILE": os.devnull, **extra}


def compat(repo: Path, workdir: Path, env: dict[str, str], *sources: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "jaxrel", "compat", "--family", str(repo / "pyproject.toml"), "--frontend-src",
               str(repo / "frontend"), "--python", PY, "--workdir", str(workdir), "--no-extension", "--refresh",
               *sources]
    return subprocess.run(command, capture_output=True, text=True, timeout=1200, env=env, cwd=workdir.parent)


def assert_every_cell_passed(done: subprocess.CompletedProcess[str], workdir: Path) -> None:
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    cells = {c["cell"]["id"]: c for c in json.loads((workdir / "report.json").read_text())["cells"]}
    positive = [c for c in cells.values() if c["cell"]["expected"] == "accepted"]
    assert len(positive) >= 2 and all(c["ok"] for c in cells.values()), cells.keys()
    for cell in positive:
        assert cell["frontend_tests"]["passed"] > 0 and cell["frontend_tests"]["failed"] == 0, cell["cell"]["id"]


def test_pip_pointing_nowhere_fails_without_a_named_index(repo: Path, wheelhouse: Path, tmp_path: Path) -> None:
    done = compat(repo, tmp_path / "work", nothing_else_reachable())
    assert done.returncode == 3, done.stderr[-2000:]
    assert "Connection refused" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_index_url_of_a_loopback_index_carries_every_cell(repo: Path, wheelhouse: Path, tmp_path: Path) -> None:
    server = PypiServer(tmp_path / "pypi")
    for wheel in wheelhouse.iterdir():
        shutil.copy2(wheel, server.packages / wheel.name)
    server.start()
    try:
        workdir = tmp_path / "work"
        done = compat(repo, workdir, nothing_else_reachable(), "--index-url", server.simple_url)
    finally:
        server.stop()
    # the same run without --index-url fails (test_pip_pointing_nowhere_…): the named index carried it
    assert_every_cell_passed(done, workdir)


def test_wheelhouse_with_no_index_and_uv_offline_carries_every_cell(repo: Path, wheelhouse: Path,
                                                                      tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    done = compat(repo, workdir, nothing_else_reachable(PIP_NO_INDEX="1", UV_OFFLINE="1"),
                  "--wheelhouse", str(wheelhouse))
    assert_every_cell_passed(done, workdir)


EXTRAS = """
[project.optional-dependencies]
cpu = ["splitfam-cpu-plugin[with-x]>=0.2.0,<=0.2.0"]
cpu-local = ["splitfam-cpu-plugin>=0.2.0,<=0.2.0"]
"""
PLUGIN_CELL = f"py{PY}-splitfam-core0.2.0-cpu"


def _installed(workdir: Path, cell: str) -> set[str]:
    return {path.name.split("-")[0] for path in (workdir / "envs" / cell).rglob("*.dist-info")}


def test_plugin_cells_install_the_plugins_extra_in_full_light_or_local(repo: Path, wheelhouse: Path,
                                                                        tmp_path: Path) -> None:
    with open(repo / "frontend" / "pyproject.toml", "a") as pyproject:
        pyproject.write(EXTRAS)
    offline = nothing_else_reachable(PIP_NO_INDEX="1", UV_OFFLINE="1")
    full = tmp_path / "full"
    done = compat(repo, full, offline, "--wheelhouse", str(wheelhouse), "--plugin-install", "full",
                  "--plugins", "cpu,cpu-local")
    assert_every_cell_passed(done, full)
    cells = {c["cell"]["id"]: c for c in json.loads((full / "report.json").read_text())["cells"]}
    assert cells[PLUGIN_CELL]["plugin_install"].startswith(
        "full: splitfam-cpu-plugin[with-x]==0.2.0 as pip resolves it, 1 wheel verified and installed "
        "(splitfam-extra-dep 1.0)")
    assert "splitfam_extra_dep" in _installed(full, PLUGIN_CELL)
    assert "splitfam_extra_dep-1.0-py3-none-any.whl" in cells[PLUGIN_CELL]["wheels"], "verified like the backend"
    local = cells[f"{PLUGIN_CELL}-local"]
    assert local["plugin_install"].startswith("local: the plugins only") and local["cell"]["local"]
    assert "splitfam_extra_dep" not in _installed(full, f"{PLUGIN_CELL}-local")
    assert f"plugins in {PLUGIN_CELL}: full:" in done.stdout

    light = tmp_path / "light"
    done = compat(repo, light, offline, "--wheelhouse", str(wheelhouse), "--plugin-install", "light")
    assert_every_cell_passed(done, light)
    cells = {c["cell"]["id"]: c for c in json.loads((light / "report.json").read_text())["cells"]}
    assert cells[PLUGIN_CELL]["plugin_install"] == (
        "light: the plugins only (--plugin-install light); splitfam-cpu-plugin[with-x]==0.2.0 resolves to "
        "1 wheel more, not installed (splitfam-extra-dep 1.0)")
    assert "splitfam_extra_dep" not in _installed(light, PLUGIN_CELL)
    assert f"{PLUGIN_CELL}-local" not in cells, "no -local cell by default without its device"
    assert "plugin set cpu-local: not run by default" in done.stdout
