"""A plugin cell's full install is what pip installs: ``jax-cuda13-plugin[with-cuda]==0.11.2`` resolved by
jaxrel (``uv pip compile``) against ``pip install --dry-run --report`` of the same requirement, from the real
index, for Python 3.12 (jax 0.11 needs it)."""

from __future__ import annotations

import json
import subprocess

import pytest

from jaxrel.cells import plugin_install
from jaxrel.distributions.pipconfig import pip_command
from jaxrel.distributions.pythons import find_pythons

pytestmark = pytest.mark.integration

REQUIREMENT = "jax-cuda13-plugin[with-cuda]==0.11.2"


@pytest.mark.long("jax's CUDA extras resolved by pip and by uv against the real index")
def test_the_resolution_is_pips(index_reachable: None, tmp_path) -> None:
    python = find_pythons().get("3.12")
    if python is None:
        pytest.skip("no Python 3.12 here (jax 0.11 requires it)")
    ours = plugin_install.resolve([REQUIREMENT], python.executable, tmp_path / "resolutions", None)
    done = subprocess.run([*pip_command(python.executable), "install", "--dry-run", "--ignore-installed", "--quiet",
                           "--report", "-", REQUIREMENT], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    pips = sorted((item["metadata"]["name"].lower(), item["metadata"]["version"])
                  for item in json.loads(done.stdout)["install"])
    assert sorted(ours) == pips
    names = {name for name, _ in ours}
    assert {"nvidia-cuda-nvcc", "nvidia-cudnn-cu13", "nvidia-cublas", "nvidia-nccl-cu13"} <= names
