"""``release check`` on a frontend whose ``setup.py`` computes its requirements, as jax's does.

The splitfam sample's frontend with ``dynamic = ["dependencies"]`` and a ``setup.py`` writing the
core range from ``splitfam/version.py`` (the way jax's writes ``jaxlib>=minimum,<=version``): the
check reads the METADATA the build backend computes (PEP 517, in an isolated environment whose
setuptools pip installs from the index) instead of saying "not applicable", judges it, and leaves the
checkout exactly as it was (the backend runs in an export: setuptools' ``.egg-info`` lands there).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

TEMPLATE = Path(__file__).resolve().parents[1] / "data" / "splitfam"
SETUP = '''import re
from pathlib import Path

from setuptools import setup

text = Path(__file__).parent.joinpath("splitfam", "version.py").read_text()
version = re.search(r'_version = "([^"]+)"', text).group(1)
minimum = re.search(r'_minimum_core_version = "([^"]+)"', text).group(1)
setup(install_requires=[f"splitfam-core>={minimum},<={UPPER}"])
'''


def _repo(tmp_path: Path, upper: str) -> Path:
    repo = tmp_path / "splitfam"
    shutil.copytree(TEMPLATE, repo)
    pyproject = repo / "frontend" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('dependencies = ["splitfam-core>=0.1.0,<=0.1.0"]',
                                                       'dynamic = ["dependencies"]'))
    (repo / "frontend" / "setup.py").write_text(SETUP.replace("{UPPER}", upper))
    (repo / ".gitignore").write_text("*.egg-info/\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit",
                                                                "-qm", "0.1.0"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    return repo


@pytest.mark.parametrize(("upper", "status"), [("{version}", "ok"), ("0.0.9", "FAIL")])
def test_requirements_computed_at_build_time_are_judged_not_skipped(index_reachable: None, tmp_path: Path,
                                                                    upper: str, status: str) -> None:
    repo = _repo(tmp_path, upper)
    (tmp_path / "empty").mkdir()  # the release's own index: nothing released yet (the build backend's is pip's)
    done = subprocess.run([sys.executable, "-m", "jaxrel", "release", "check", str(repo), "--json",
                           "--index-url", (tmp_path / "empty").as_uri()], capture_output=True, text=True, timeout=600)
    assert done.stdout, done.stderr[-2000:]
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    found = checks["frontend-requires-backend-range"]
    assert "the metadata its build backend computes" in found["detail"], found
    assert found["status"] == ("pass" if status == "ok" else "fail"), found
    status_after = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=repo, capture_output=True,
                                  text=True).stdout
    assert status_after == "", f"the check wrote into the checkout: {status_after}"
