"""Fresh Python environments with real wheels: uv when available (fast), venv + pip otherwise.

uv is given pip's index configuration (:mod:`jaxrel.distributions.pipconfig`) and shares its
download cache between environments, so a wheel is fetched once per machine.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jaxrel._util import procs
from jaxrel._util.text import tail
from jaxrel.distributions.pipconfig import PipIndexConfig, pip_index_config
from jaxrel.errors import EnvironmentFailure

__all__ = ["INHERITED_TEST_STATE", "Env", "EnvError", "create", "existing", "find_uv", "reinstall", "run_step",
           "uv_environment"]


class EnvError(EnvironmentFailure):
    """Creating or filling an environment failed; the message says which step and why."""


def find_uv() -> str | None:
    """The uv executable: the ``uv`` package's binary, else ``uv`` on ``PATH``."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


# A pytest that runs jaxrel (a test suite, or jaxrel under pytest-xdist) leaves these in the environment; a cell's
# own pytest would take them as its own (an xdist worker's name, the current test) and record under the wrong name.
INHERITED_TEST_STATE = ("PYTEST_XDIST_", "PYTEST_CURRENT_TEST")


@dataclass(frozen=True)
class Env:
    """A virtual environment on disk.

    With ``bytecode`` set, the processes it runs keep the bytecode they compile there
    (``PYTHONPYCACHEPREFIX``), whatever ``PYTHONDONTWRITEBYTECODE`` says: without it every
    interpreter compiles jax from source again (about 1.4 s of CPU of its 2.2 s ``import jax``
    here). Python checks each file's recorded size and modification time before using it, and
    uv links the same unpacked files into every environment, so a cache that outlives the
    environment (kept beside it, at the same path each run) still serves only matching sources.
    """

    root: Path
    bytecode: Path | None = None

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 600, cwd: str | None = None,
        unset: Sequence[str] = (),
    ) -> subprocess.CompletedProcess[str]:
        """Run ``args`` with this environment's ``bin`` first on ``PATH`` (without the variables in ``unset``);
        never raises on exit status."""
        full = {key: value for key, value in os.environ.items()
                if not key.startswith(INHERITED_TEST_STATE) and key not in unset}
        full.update({**(env or {}), "VIRTUAL_ENV": str(self.root),
                     "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"})
        full.pop("PYTHONPATH", None)
        if self.bytecode is not None:
            full.pop("PYTHONDONTWRITEBYTECODE", None)
            full["PYTHONPYCACHEPREFIX"] = str(self.bytecode)
        return procs.run(list(args), env=full, timeout=timeout, cwd=cwd)


def existing(root: Path, bytecode: Path | None = None) -> Env:
    """The environment a cell built earlier at ``root`` (to rerun tests in it); :class:`EnvError` when it is gone."""
    env = Env(root.absolute(), bytecode.absolute() if bytecode is not None else None)
    if not env.python.exists():
        raise EnvError(f"the environment {root} is gone (no {env.python}); rerun the cell")
    return env


# uv's own source settings: a named index replaces them all, so nothing else is consulted
_UV_SOURCES = ("UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS", "UV_NO_INDEX")


def uv_environment(index: PipIndexConfig | None = None) -> dict[str, str]:
    """This process's environment plus the index configuration for uv (``index``, e.g. the sources given with
    ``--index-url``/``--wheelhouse``, else pip's own), without ``PYTHONPATH``."""
    env = {**os.environ}
    if index is not None:
        for name in _UV_SOURCES:
            env.pop(name, None)
    env.update((index or pip_index_config()).uv_environment())
    env.pop("PYTHONPATH", None)
    return env


def run_step(command: Sequence[str], env: dict[str, str], what: str, lines: int = 3) -> None:
    """Run one setup step; on failure raise :class:`EnvError` naming ``what`` with the output's last ``lines``."""
    done = procs.run(list(command), env=env)
    if done.returncode != 0:
        raise EnvError(f"{what} failed (exit {done.returncode}): {tail(done.stderr or done.stdout, lines)}")


def create(
    root: Path,
    *,
    python: str = sys.executable,
    requirements: Sequence[str] = (),
    no_deps: Sequence[str] = (),
    use_uv: bool | None = None,
    requirement_files: Sequence[Path] = (),
    exclude_newer: str | None = None,
    bytecode: Path | None = None,
    index: PipIndexConfig | None = None,
    pinned_as_of_now: Sequence[str] = (),
    constraint_files: Sequence[Path] = (),
    only_binary: bool = False,
) -> Env:
    """Create a fresh environment at ``root`` and install ``requirements`` (with ``requirement_files``, pip's
    ``-r``, resolved together, under ``constraint_files``, pip's ``-c``), then ``no_deps`` without dependencies.
    ``root`` is made absolute. ``only_binary``: wheels only, never an sdist built here (pip's and uv's
    ``--only-binary :all:``): the resolver takes the newest release with a wheel for the interpreter (a
    free-threaded one: NumPy's newest releases ship no ``cp313t`` wheel).

    ``no_deps`` lets a test assemble pairs that pip's resolver would refuse
    (``jax==0.6.2`` beside ``jaxlib==0.10.2``), as users end up with them. ``exclude_newer``
    (an RFC 3339 time or a date, uv only) resolves as of then: uv's ``--exclude-newer``; the distributions named in
    ``pinned_as_of_now`` are exempt (their wheels can have been uploaded again later, as jaxlib's old ones were).
    ``bytecode``: where its processes keep compiled bytecode (:class:`Env`). ``index``: where packages come
    from (default: pip's configuration), for uv and for pip alike.
    """
    root = root.absolute()
    uv = find_uv() if use_uv in (None, True) else None
    if use_uv and uv is None:
        raise EnvError("uv is not installed; pip install uv (or pass use_uv=False)")
    if root.exists():
        shutil.rmtree(root)
    base = {**os.environ}
    base.pop("PYTHONPATH", None)
    if uv:
        env = uv_environment(index)
        run_step([uv, "venv", "--quiet", "--python", python, str(root)], env, f"uv venv {root}")
        install = [uv, "pip", "install", "--quiet", "--python", str(root / "bin" / "python")]
        install += ["--exclude-newer", exclude_newer] if exclude_newer else []
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        install += [arg for name in pinned_as_of_now for arg in ("--exclude-newer-package", f"{name}={now}")
                    if exclude_newer]
    else:
        if exclude_newer:
            raise EnvError(f"resolving as of {exclude_newer} needs uv (pip has no --exclude-newer); "
                           "pip install uv, or resolve as of now")
        run_step([python, "-m", "venv", str(root)], base, f"python -m venv {root}")
        env = base
        install = [str(root / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        install += index.pip_arguments() if index is not None else []
    files = [arg for path in requirement_files for arg in ("-r", str(path))]
    if requirements or files:
        files += ["--only-binary", ":all:"] if only_binary else []  # what is resolved; no_deps: the caller's files
        files += [arg for path in constraint_files for arg in ("-c", str(path))]
        what = " ".join([*requirements, *(f"-r {path.name}" for path in requirement_files),
                         *(f"-c {path.name}" for path in constraint_files)])
        run_step([*install, *requirements, *files], env, f"installing {what}", lines=12)  # a resolver's why: lines
    if no_deps:
        run_step([*install, "--no-deps", *no_deps], env, f"installing {' '.join(no_deps)} without dependencies")
    return Env(root, bytecode.absolute() if bytecode is not None else None)


def reinstall(env: Env, wheel: Path, distribution: str, *, use_uv: bool = True, index: PipIndexConfig | None = None
              ) -> str | None:
    """Install ``wheel`` into ``env`` in place of ``distribution`` there (no deps, forced); why not, or ``None``.

    uv keeps a built wheel per file name: every revision of a frontend builds a wheel of the same name, so the
    package is reinstalled and refreshed explicitly, else uv would silently reuse the first.
    """
    uv = find_uv() if use_uv else None
    if uv:
        command = [uv, "pip", "install", "--quiet", "--python", str(env.python), "--no-deps",
                   "--reinstall-package", distribution, "--refresh-package", distribution, str(wheel)]
    else:
        command = [str(env.python), "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", str(wheel)]
    done = procs.run(command, env=uv_environment(index), timeout=600)
    return None if done.returncode == 0 else f"does not install (exit {done.returncode}): {tail(done.stderr)}"
