"""jaxrel installed from its own wheel into a fresh environment works from any directory.

The wheel is built from this checkout, installed (with the ``envs`` extra only) into a new
virtual environment, and every verb runs from an empty directory outside the checkout:
nothing may read jaxrel's source tree at run time. The main job (`jaxrel compat`) runs one
real positive cell of jax 0.10.2, so the compat suite must come from the installed package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxrel.distributions.envs import find_uv

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CELL = "py3.11-jaxlib0.10.2"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh environment's bin directory, an empty working directory outside the checkout)."""
    uv = find_uv()
    if uv is None:
        pytest.skip("uv is not installed beside this Python (pip install uv)")
    root = tmp_path_factory.mktemp("wheel-install")
    dist = root / "dist"
    subprocess.run([uv, "build", "--wheel", "--quiet", "--out-dir", str(dist), str(REPO)], check=True,
                   capture_output=True, text=True, timeout=600)
    (wheel,) = dist.glob("jaxrel-*.whl")
    env = root / "env"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(env)], check=True, timeout=300)
    done = subprocess.run([uv, "pip", "install", "--quiet", "--python", str(env / "bin" / "python"),
                           f"{wheel}[envs]"], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.skip(f"cannot install jaxrel's dependencies from the index: {done.stderr.strip()[-300:]}")
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    return env / "bin", elsewhere


def jaxrel(installed: tuple[Path, Path], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    bin_dir, cwd = installed
    environment = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    environment.pop("PYTHONPATH", None)
    return subprocess.run([str(bin_dir / "jaxrel"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=environment)


def test_the_package_comes_from_the_environment_not_the_checkout(installed: tuple[Path, Path]) -> None:
    bin_dir, cwd = installed
    done = subprocess.run([str(bin_dir / "python"), "-c", "import jaxrel, jaxrel.cells.suites as r; "
                           "print(jaxrel.__file__); print(r.DEFAULT_SUITE)"],
                          cwd=cwd, capture_output=True, text=True, timeout=60, check=True)
    package, suite = done.stdout.split()
    assert "site-packages" in package and not package.startswith(str(REPO))
    assert (Path(suite) / "pytest.ini").is_file() and (Path(suite) / "conftest.py").is_file()


def test_verdict_gates_doctor_and_xla_from_another_directory(installed: tuple[Path, Path]) -> None:
    done = jaxrel(installed, "verdict", "jax==0.12.0.1", "jaxlib==0.12.0", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["compatible"] is True
    done = jaxrel(installed, "gates", str(REPO / "tests" / "data" / "gates_tree"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gates"], "the sample tree's gates are found"
    done = jaxrel(installed, "doctor", "--json")  # this environment has no jax: exit 1, backend missing
    assert done.returncode == 1 and json.loads(done.stdout)["compatible"] is False
    done = jaxrel(installed, "xla", "show", "--workspace", str(REPO / "WORKSPACE"), "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["backend"] == "jaxlib"
    done = jaxrel(installed, "release", "verify", "missing-dist")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_the_main_job_runs_from_the_installed_wheel(installed: tuple[Path, Path], index_reachable: None) -> None:
    _, cwd = installed
    workdir = cwd / "compat"
    done = jaxrel(installed, "compat", "--frontend", "jax==0.10.2", "--python", "3.11", "--plugins", "none",
                  "--cell", CELL, "--workdir", str(workdir), timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    report = json.loads((workdir / "report.json").read_text())
    (cell,) = report["cells"]
    assert cell["cell"]["id"] == CELL and cell["observed"] == "accepted"
    assert cell["tests"]["passed"] >= 5 and cell["tests"]["failed"] == 0, "the shipped compat suite ran"
    assert "no Bazel workspace" in (cell["extension"] or ""), "no workspace at or above the working directory"
