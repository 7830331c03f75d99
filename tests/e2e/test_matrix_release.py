"""A release built by a CI matrix, end to end: the build jobs' files (backend per Python x platform, a plugin
pinning its pjrt, the pjrt per platform, the frontend) are collected, verified, and published to a real
pypiserver on loopback, backend first, as the release workflow's jobs do (tests/matrix_family.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from matrix_family import build_matrix, project
from splitfam_support import PypiServer

pytestmark = pytest.mark.integration


def jaxrel(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jaxrel", "release", *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=300)


def test_collect_verify_publish(tmp_path: Path, pypiserver: PypiServer) -> None:
    tree = project(tmp_path / "mfam")
    artifacts = build_matrix(tmp_path / "artifacts")
    out = tmp_path / "release"
    collected = jaxrel(tree, "collect", str(artifacts), "--output", str(out), "--pythons", "cp312,cp313",
                       "--platforms", "manylinux_2_27_x86_64,macosx_11_0_arm64", env=pypiserver.twine_env())
    assert collected.returncode == 0, collected.stderr
    verified = jaxrel(tree, "verify", str(out), env=pypiserver.twine_env())
    assert verified.returncode == 0, verified.stdout + verified.stderr
    published = jaxrel(tree, "publish", str(out), "--repository-url", pypiserver.url, "--json",
                       env=pypiserver.twine_env())
    assert published.returncode == 0, published.stdout + published.stderr
    assert pypiserver.password not in published.stdout + published.stderr
    report = json.loads(published.stdout)
    uploaded = [item["file"] for item in report["files"] if item["action"] == "uploaded"]
    assert len(uploaded) == 9, report
    order = [name.split("-")[0] for name in uploaded]
    assert order.index("mfam_core") < order.index("mfam_gpu_pjrt") < order.index("mfam_gpu_plugin") \
        < order.index("mfam"), uploaded
    assert {path.name for path in out.iterdir() if path.name != "manifest.json"} <= set(pypiserver.files())
    again = jaxrel(tree, "publish", str(out), "--repository-url", pypiserver.url, env=pypiserver.twine_env())
    assert again.returncode == 0 and again.stdout.count("already on the index") == 9, again.stdout
