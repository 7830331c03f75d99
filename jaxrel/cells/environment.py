"""A cell's environment: the frontend wheel, the backend release, the cell's plugins, pytest and jaxrel.

Every feature that runs cells (compat, the atlas, bisect) builds them here, in
``WORKDIR/envs/<cell>`` (uv's shared cache: a wheel is downloaded once per machine). The
backend and plugins are installed from files verified against the index, so the bytes
jaxrel checked are the bytes that run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

import jaxrel
from jaxrel._util.files import sha256_of
from jaxrel.cells import plugin_install
from jaxrel.cells.frontend import PreparedFrontend
from jaxrel.cells.matrix import Cell
from jaxrel.cells.plugin_install import PluginInstall
from jaxrel.cells.settings import EnvSettings
from jaxrel.distributions import envs
from jaxrel.distributions.index import Index, IndexClientError
from jaxrel.distributions.pages import IndexFile
from jaxrel.distributions.pythons import free_threaded, python_for
from jaxrel.distributions.wheels import write_wheel
from jaxrel.family import Family

__all__ = ["EnvSettings", "environment", "foreign_files", "jaxrel_wheel", "verified_wheel", "wheel_file"]


def verified_wheel(index: Index, name: str, version: str, python: str) -> Path:
    """The local file of ``name==version``'s wheel for ``python``, its sha256 verified against ``index``.

    The cell installs this file, not ``name==version`` resolved again: the bytes jaxrel checked are
    the bytes that run. A hash mismatch (a tampered wheelhouse or cache) raises, naming the file.
    """
    return index.download(wheel_file(index, name, version, python))


def wheel_file(index: Index, name: str, version: str, python: str) -> IndexFile:
    file = index.listing(name).wheel_for(version, python, python_for(python).tags())
    if file is None:
        raise IndexClientError(f"{name} {version} has no wheel for Python {python} on "
                               f"{', '.join(index.describe())}")
    return file



def environment(cell: Cell, family: Family, front: PreparedFrontend, jaxrel_wheel: Path, settings: EnvSettings,
                extensions: list[Path] | str | None = None,
                install: PluginInstall | None = None) -> tuple[envs.Env, dict[str, str]]:
    """Create the cell's environment (``WORKDIR/envs/<cell>``): backend, frontend, plugins, pytest, jaxrel, and on
    positive cells the frontend's test requirements. Also returns the sha256 of every family wheel installed.

    The backend and plugins are the files verified against ``settings.index`` (by name without one); so are
    the wheels a full plugin install brings (``install``, default :func:`plugin_install.plan`).
    """
    install = install if install is not None else plugin_install.plan(cell, settings)
    backend = family.backend.distribution
    excluded = {str(canonicalize_name(n)) for n in (family.frontend.distribution, backend)}
    assert front.wheel is not None, "prepare_frontend(build=True) first"
    local = [front.wheel, jaxrel_wheel, *(extensions if isinstance(extensions, list) else [])]
    brought = list(install.resolution) if install.mode == "full" else []
    pinned = [(backend, cell.backend), *cell.plugins, *brought]
    verified = ({name: verified_wheel(settings.index, name, version, cell.python) for name, version in pinned}
                if settings.index is not None else {})
    installs = {name: str(verified[name]) if name in verified else f"{name}=={version}" for name, version in pinned}
    requirements = [installs[backend], *front.info.plain_requirements(excluded), "pytest"]
    no_deps = [str(path) for path in local[:2]] + [installs[name] for name, _ in [*cell.plugins, *brought]]
    no_deps += [str(path) for path in local[2:]]
    files = [settings.test_requirements] if settings.test_requirements is not None and not cell.negative else []
    env = envs.create(settings.workdir / "envs" / cell.id, python=python_for(cell.python).executable,
                      requirements=requirements, no_deps=no_deps, use_uv=settings.use_uv, requirement_files=files,
                      exclude_newer=settings.exclude_newer, bytecode=settings.bytecode,
                      index=settings.index.pip_config() if settings.index is not None else None,
                      only_binary=free_threaded(cell.python))  # a cp313t cell never falls back to an sdist
    return env, {path.name: sha256_of(path) for path in [*verified.values(), *local]}



def foreign_files(env: envs.Env, files: Sequence[str | None]) -> list[str]:
    """The files in ``files`` that do not lie inside ``env``: a frontend imported from somewhere else."""
    root = env.root.resolve()
    return [f for f in files if f and not Path(f).resolve().is_relative_to(root)]



def jaxrel_wheel(workdir: Path) -> Path:
    """The running jaxrel packed as a wheel (built once per run), so cells can call its guard and gating.

    Packed from the installed package's files, not from a source tree: jaxrel installed from
    its wheel runs the main job as well as a checkout does.
    """
    package = Path(jaxrel.__file__).resolve().parent
    files = {path.relative_to(package.parent).as_posix(): path.read_bytes()
             for path in sorted(package.rglob("*"))
             if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}
    return write_wheel(workdir / "jaxrel-dist", "jaxrel", jaxrel.__version__, files)
