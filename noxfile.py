"""nox sessions: tests, doctor (the current main job), bench, lint.

Environments are built with uv when it is installed beside nox (fallback: virtualenv),
with pip's index configuration passed to uv (``jaxrel.pipconfig``); wheels land in
uv's shared cache, so sessions and the tests download each wheel once per machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT))  # jaxrel.pipconfig is standard library only

from jaxrel.pipconfig import pip_index_config  # noqa: E402

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests"]
nox.options.error_on_missing_interpreters = False

def _uv_env(session: nox.Session) -> None:
    session.env.update(pip_index_config().uv_environment())


@nox.session
def tests(session: nox.Session) -> None:
    """Unit, property and integration tests (integration installs real wheels from the index)."""
    _uv_env(session)
    session.install("-e", ".[test]")
    session.run("pytest", *(session.posargs or ["tests"]))


@nox.session
def doctor(session: nox.Session) -> None:
    """A fresh environment holding real jax and jaxlib, inspected by `jaxrel doctor` (table and JSON).

    The resolver picks the newest pair installable on this interpreter (0.10.2 on Python 3.11).
    """
    _uv_env(session)
    session.install("jax", "jaxlib", ".")
    session.run("jaxrel", "doctor")
    session.run("jaxrel", "doctor", "--json")
    session.run("python", "-c", "import jax; print('import jax:', jax.__version__, float(jax.numpy.ones(3).sum()))")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks under benchmarks/ (measured numbers; see README)."""
    _uv_env(session)
    session.install(".[envs]")
    session.run("python", "benchmarks/guard.py", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and mypy."""
    _uv_env(session)
    session.install("ruff", "mypy", "packaging", "pytest", "hypothesis", "nox", "uv")
    session.run("ruff", "check", "jaxrel", "tests", "benchmarks", "scripts", "noxfile.py")
    session.run("mypy", "jaxrel")
