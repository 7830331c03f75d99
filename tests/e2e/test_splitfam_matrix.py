"""The sample family released the way jax is: its compiled core built by a matrix of jobs, one per Python (Bazel,
each for its interpreter), the pure frontend and plugin by another, each job writing its own directory as a CI
artifact; then `release collect` gathers them into one release, `verify` checks it and `publish` uploads it to a
real pypiserver on loopback, core first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from splitfam_support import PypiServer

from jaxrel.distributions.pythons import PythonNotFound, python_for

pytestmark = pytest.mark.integration
PYTHONS = ("3.11", "3.12")


def jaxrel(repo: Path, *args: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-m", "jaxrel", "release", *args], cwd=repo, capture_output=True,
                          text=True, env=env, timeout=900)
    assert done.returncode == 0, f"jaxrel release {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.long("a build matrix: wheels built with Bazel in a new output base, collected, verified, published")
def test_a_build_matrix_is_collected_verified_and_published(splitfam: Path, pypiserver: PypiServer,
                                                           tmp_path: Path) -> None:
    try:
        interpreters = {python: python_for(python).executable for python in PYTHONS}
    except PythonNotFound as error:
        pytest.skip(f"the matrix needs Python {' and '.join(PYTHONS)}: {error}")
    env = pypiserver.twine_env()
    artifacts = tmp_path / "artifacts"
    for python, executable in interpreters.items():  # the compiled job, once per Python
        jaxrel(splitfam, "build", "--component", "splitfam-core", "--python", executable,
               "--output", str(artifacts / f"build-{python}"), env=env)
    jaxrel(splitfam, "build", "--component", "splitfam", "--component", "splitfam-cpu-plugin",
           "--output", str(artifacts / "build-pure"), env=env)
    dist = tmp_path / "dist"
    tags = ",".join(f"cp{p.replace('.', '')}" for p in PYTHONS)
    collected = json.loads(jaxrel(splitfam, "collect", str(artifacts), "--output", str(dist), "--pythons", tags,
                                  "--json", env=env))
    cores = [a["file"] for a in collected["artifacts"] if a["distribution"] == "splitfam-core"]
    assert {f.split("-")[2] for f in cores} == {"cp311", "cp312"}, cores
    assert [a["role"] for a in collected["artifacts"]][0] == "backend" and collected["version"] == "0.1.0"
    jaxrel(splitfam, "verify", str(dist), env=env)
    published = json.loads(jaxrel(splitfam, "publish", str(dist), "--repository-url", pypiserver.url, "--json",
                                  env=env))
    uploaded = [f["file"] for f in published["files"] if f["action"] == "uploaded"]
    assert len(uploaded) == len(collected["artifacts"]) == 6  # 2 cores, plugin sdist + wheel, frontend sdist + wheel
    assert uploaded[0].startswith("splitfam_core-") and uploaded[1].startswith("splitfam_core-")
    assert set(pypiserver.files()) == set(uploaded)
