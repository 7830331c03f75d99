"""Real jax/jaxlib (and plugin) wheels from the package index, in fresh environments.

For each pair: real jax's own import result, the guard's verdict, the fix the guard
prints (applied, then checked again), and `jaxrel doctor`'s report. Wheels come
through pip's index configuration into uv's shared cache, so a rerun downloads nothing.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from jaxrel.distributions import envs

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

GUARD_SCRIPT = """
import importlib.util, json, os
from jaxrel import guard
from jaxrel.family import jax_profile
root = os.path.dirname(importlib.util.find_spec("jax").origin)  # locates jax without importing it
version = guard.read_version_file(os.path.join(root, "version.py"))
minimum = guard.read_assignment(os.path.join(root, "version.py"), ("_minimum_jaxlib_version",))
try:
    guard.check(**jax_profile().guard_arguments(version, minimum))
    print(json.dumps({"accepted": True}))
except guard.GuardError as error:
    print(json.dumps({"accepted": False, "message": str(error), "fix": error.fix}))
"""

REAL_JAX_SCRIPT = "import jax; print(float(jax.numpy.ones(3).sum()))"

DOCTOR_SCRIPT = """
import sys
from jaxrel.cli import main
code = main(["doctor", "--json"])
assert "jaxlib" not in sys.modules and "jax" not in sys.modules, "doctor imported the backend"
sys.exit(code)
"""


@dataclass(frozen=True)
class Case:
    name: str
    requirements: tuple[str, ...]
    no_deps: tuple[str, ...]
    jax_accepts: bool  # real jax imports and computes without refusing anything
    refusal: str  # what the guard's message must say when it refuses ("" if it accepts)


CASES = [
    Case("released-pair", ("jax==0.10.2", "jaxlib==0.10.2"), (), True, ""),
    Case("older-backend-in-range", ("jax==0.10.2", "jaxlib==0.10.2"), ("jaxlib==0.10.1",), True, ""),
    Case("backend-newer-than-frontend", ("jax==0.10.2", "jaxlib==0.10.2"), ("jax==0.6.2",), False,
         "jaxlib version 0.10.2 is newer than jax 0.6.2"),
    Case("backend-below-minimum", ("jax==0.10.2", "jaxlib==0.10.2"), ("jaxlib==0.9.2",), False,
         "jaxlib is version 0.9.2, but jax 0.10.2 requires 0.10.1 <= jaxlib <= 0.10.2"),
    Case("mismatched-cuda-plugin", ("jax==0.10.2", "jaxlib==0.10.2"),
         ("jax-cuda12-plugin==0.10.1", "jax-cuda12-pjrt==0.10.1"), False,
         "jax-cuda12-plugin 0.10.1, jax-cuda12-pjrt 0.10.1 installed"),
]


@pytest.fixture(scope="module", params=CASES, ids=lambda case: case.name)
def case_env(request, index_reachable, tmp_path_factory) -> tuple[Case, envs.Env]:
    case: Case = request.param
    root = tmp_path_factory.mktemp("envs") / case.name
    env = envs.create(root, python=sys.executable, requirements=[*case.requirements, str(REPO)],
                      no_deps=list(case.no_deps), use_uv=True)
    return case, env


def guard_verdict(env: envs.Env) -> dict:
    done = env.run("python", "-c", GUARD_SCRIPT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def real_jax(env: envs.Env) -> subprocess.CompletedProcess[str]:
    return env.run("python", "-W", "always", "-c", REAL_JAX_SCRIPT)


def test_guard_agrees_with_real_jax(case_env):
    case, env = case_env
    jax = real_jax(env)
    verdict = guard_verdict(env)
    if case.jax_accepts:
        assert jax.returncode == 0 and jax.stdout.strip() == "3.0", jax.stderr[-2000:]
        assert "not compatible" not in jax.stderr
        assert verdict == {"accepted": True}
        return
    # Real jax refuses: an error at import for jaxlib, a "will not be used" warning for a plugin.
    refused_by_jax = jax.returncode != 0 or "is not compatible with the installed jaxlib" in jax.stderr
    assert refused_by_jax, jax.stderr[-2000:]
    assert verdict["accepted"] is False
    assert case.refusal in verdict["message"]
    assert "Fix: pip install" in verdict["message"] and "JAXREL_SKIP_GUARD=1" in verdict["message"]


def test_doctor_reports_the_environment(case_env):
    case, env = case_env
    done = env.run("python", "-c", DOCTOR_SCRIPT)
    assert done.returncode == (0 if case.refusal == "" else 1), done.stderr
    report = json.loads(done.stdout)
    installed = {**dict(r.split("==") for r in case.requirements), **dict(r.split("==") for r in case.no_deps)}
    assert report["environment"]["frontend"]["version"] == installed["jax"]
    assert report["environment"]["backend"]["version"] == installed["jaxlib"]
    assert {p["name"]: p["version"] for p in report["environment"]["plugins"]} == {
        name: version for name, version in installed.items() if name.startswith("jax-cuda")
    }
    assert report["environment"]["api_numbers"]["jaxlib_extension_version"] == {
        "0.10.2": 467, "0.10.1": 452, "0.9.2": 420}[installed["jaxlib"]]
    assert report["environment"]["xla_ffi_api"] == "0.3"
    assert report["compatible"] is (case.refusal == "")
    if case.refusal:
        assert report["fix"] and report["reasons"]


def test_guard_fix_command_repairs_the_environment(case_env):
    """Apply the exact command the guard prints; afterwards the guard and real jax both accept."""
    case, env = case_env
    verdict = guard_verdict(env)
    if verdict["accepted"]:
        pytest.skip("nothing to fix: the guard accepts this environment")
    command = shlex.split(verdict["fix"])
    assert command[:2] == ["pip", "install"]
    uv = envs.find_uv()
    assert uv is not None
    done = env.run(uv, "pip", "install", "--quiet", "--python", str(env.python), *command[2:],
                   env=envs.uv_environment())
    assert done.returncode == 0, done.stderr
    assert guard_verdict(env) == {"accepted": True}
    jax = real_jax(env)
    assert jax.returncode == 0 and "not compatible" not in jax.stderr, jax.stderr[-2000:]
