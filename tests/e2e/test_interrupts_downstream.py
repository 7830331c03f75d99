"""Ctrl-C in downstream's phases (tests/e2e/test_interrupts.py says how): a Crater of the sample ecosystem's
frontend at HEAD over ``dalias``, which HEAD breaks, interrupted while its environment is built, while its tests
run, and while its regression is bisected. Each phase twice: SIGINT to the group with a child that honours it,
SIGINT to jaxrel alone with a child that ignores it, each child with a grandchild in a session of its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from downstream_family import TOKEN
from test_downstream_sample import PY, index  # noqa: F401 (index: the sample ecosystem's module fixture)
from test_interrupts import DOWNSTREAM, RUNS, interrupted

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("kind", "route"), RUNS, ids=["honours-group", "ignores-alone"])
@pytest.mark.parametrize("phase", DOWNSTREAM)
def test_ctrl_c_in_each_downstream_phase(phase: str, kind: str, route: str, index: tuple[str, Path],  # noqa: F811
                                         tmp_path: Path) -> None:
    url, frontend = index
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "UV_INDEX", "UV_EXTRA"))}
    env.update({"GITHUB_TOKEN": TOKEN, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": url})
    command = ["downstream", "crater", "--frontend-src", str(frontend), "--ref", "HEAD", "--libraries", "dalias",
               "--family", str(frontend / "pyproject.toml"), "--budget", "300", "--python", PY, "--index-url", url,
               "--workdir", str(tmp_path / "work")]
    interrupted(phase, kind, route, command, tmp_path, env)
