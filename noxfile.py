"""nox sessions: compat (the main job), bisect, atlas, tests, tests_oldest, fuzz, build, device, release,
doctor, bench, lint, docs.

Environments are built with uv when it is installed beside nox (fallback: virtualenv),
with pip's index configuration passed to uv (``jaxrel.distributions.pipconfig``); wheels land in
uv's shared cache, so sessions and the tests download each wheel once per machine.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT))  # jaxrel.distributions.pipconfig is standard library only

from jaxrel.distributions.pipconfig import pip_index_config  # noqa: E402

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests"]
nox.options.error_on_missing_interpreters = False

def _uv_env(session: nox.Session) -> None:
    session.env.update(pip_index_config().uv_environment())


def _build_tools(session: nox.Session, *options: str) -> None:
    """Bazel 4.2.3 (Debian bazel-bootstrap) and bazelisk (npm), idempotently; Chromium and PostgreSQL too unless
    ``--bazel-only``."""
    session.run("bash", str(ROOT / "scripts" / "install_build_tools.sh"), *options, external=True)


def _install_jaxrel(session: nox.Session, extras: str) -> None:
    """``.[extras]`` into a kept session environment, unless it holds exactly these sources already: uv reinstalls a
    named source tree every time (about 3 s here), so a digest of ``pyproject.toml`` and ``jaxrel/`` is kept beside
    the install and compared first. pip's index configuration goes to this install alone: jaxrel asks pip for its
    own."""
    digest = hashlib.sha256()
    sources = [ROOT / "pyproject.toml", *(path for path in (ROOT / "jaxrel").rglob("*")
                                          if path.is_file() and "__pycache__" not in path.parts)]
    for path in sorted(sources):
        digest.update(f"{path.relative_to(ROOT).as_posix()}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    stamp = Path(str(session.virtualenv.location)) / f"jaxrel-{extras}.sha256"
    if stamp.is_file() and stamp.read_text() == digest.hexdigest():
        session.log(f"jaxrel[{extras}]: these sources are installed already")
        return
    stamp.unlink(missing_ok=True)
    session.install(f".[{extras}]", env=pip_index_config().uv_environment())  # asked only here: pip takes 0.45 s
    stamp.write_text(digest.hexdigest())


def _keep_bytecode(session: nox.Session, where: Path) -> None:
    """The suite's processes keep the bytecode they compile, under ``where``, even where PYTHONDONTWRITEBYTECODE is
    set (as on this machine kind): otherwise every ``python -m jaxrel`` a test starts compiles jaxrel and its
    dependencies from source again (the unit tier 152 s, 134 s with this, in turn on this machine). A prefix
    outside the source trees, so no test finds a ``__pycache__`` it did not make; cells and bisect steps set
    their own."""
    session.env["PYTHONPYCACHEPREFIX"] = str(where)
    session.env["PYTHONDONTWRITEBYTECODE"] = None  # nox removes a variable set to None


@nox.session
def tests(session: nox.Session) -> None:
    """Unit, property and integration tests (integration installs real wheels from the index)."""
    _uv_env(session)
    _build_tools(session)
    session.install("-e", ".[test]")
    _keep_bytecode(session, Path(session.virtualenv.location) / "pycache")
    # three workers on this machine kind's two cores, a test module to each at a time (module fixtures stay shared):
    # much of the suite waits on subprocesses (uv, Bazel, pypiserver, git), so a third worker fills the cores (16.3
    # min before the kept Bazel workspaces with two; 12.4 min with three, 13.3 min with four: docs/architecture.md)
    session.run("pytest", "-n", "3", "--dist", "loadfile", "--durations=25", *(session.posargs or ["tests"]))


@nox.session
def fuzz(session: nox.Session) -> None:
    """The generative fuzz tests (``tests/unit/test_fuzz_*.py``) with hypothesis's ``fuzz`` profile: far more
    examples than CI runs (tests/conftest.py); about half an hour. Options after ``--`` go to pytest."""
    _uv_env(session)
    session.install("-e", ".[test]")
    files = sorted(str(path) for path in (ROOT / "tests" / "unit").glob("test_fuzz_*.py"))
    session.run("pytest", "-p", "no:cacheprovider", "--hypothesis-profile", "fuzz", "-q", *files, *session.posargs)


OLDEST_PYTHON = "/usr/bin/python3"  # Debian 12's python3, 3.11.2: the oldest interpreter requires-python admits here


@nox.session(venv_backend="none")
def tests_oldest(session: nox.Session) -> None:
    """The unit tests (two workers) on the oldest Python jaxrel claims (``requires-python >= 3.11``): Debian's
    ``python3`` (3.11.2, without ``tarfile``'s data filter), in an environment uv makes for it under .nox/.
    ``-- PATH`` tests another interpreter; further options go to pytest."""
    options = list(session.posargs)
    python = options.pop(0) if options and not options[0].startswith("-") else OLDEST_PYTHON
    if not Path(python).exists():
        session.skip(f"{python} does not exist here; pass the oldest Python 3.11 as -- PATH")
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    venv = ROOT / ".nox" / "tests_oldest-env"
    environment = pip_index_config().uv_environment()
    session.run(uv, "venv", "--clear", "--python", python, str(venv), external=True, env=environment)
    session.run(uv, "pip", "install", "--python", str(venv / "bin" / "python"), "-e", ".[test]", external=True,
                env=environment)
    session.run(str(venv / "bin" / "python"), "-c", "import sys; print('Python', sys.version)", external=True)
    _keep_bytecode(session, venv / "pycache")
    session.run(str(venv / "bin" / "python"), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", "--dist",
                "loadfile", "tests/unit", *options, external=True)


@nox.session
def build(session: nox.Session) -> None:
    """Install Bazel + bazelisk and build the XLA FFI extension wheel into dist/ (``jaxrel build``).

    Options after ``--`` go to ``jaxrel build``: ``--local-xla PATH``, ``--python 3.12``,
    ``--bazel-options '...'``, ``--output DIR``.
    """
    _uv_env(session)
    _build_tools(session, "--bazel-only")
    session.install("-e", ".")
    session.run("jaxrel", "build", *session.posargs)


@nox.session(venv_backend="none")
def device(session: nox.Session) -> None:
    """The device check on a machine with an NVIDIA GPU (``scripts/device_check.sh``): builds nothing there.

    ``nox -s device -- WHEELS_DIR [--jax V|newest] [--jax-tests DIR] [--report DIR]``. WHEELS_DIR holds the
    extension's wheels built elsewhere (``nox -s build -- --wheels all``); every CUDA wheel in it is checked.
    With ``--jax``, a fresh environment (``.nox/device-env``) gets ``jax[cuda13]==V`` as users install it;
    without, the interpreter in ``$PYTHON`` (default python3) is checked as it is installed.
    """
    args = list(session.posargs)
    if not args or args[0].startswith("-"):
        session.error("give the directory of the extension's wheels first: nox -s device -- WHEELS_DIR")
    env = {}
    if "--jax" in args:
        at = args.index("--jax")
        version = args[at + 1] if at + 1 < len(args) else session.error("--jax needs a version (or newest)")
        del args[at:at + 2]
        uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
        venv = ROOT / ".nox" / "device-env"
        environment = pip_index_config().uv_environment()
        session.run(uv, "venv", "--clear", "--seed", "--python", "3.12", str(venv), external=True, env=environment)
        wanted = "jax[cuda13]" if version == "newest" else f"jax[cuda13]=={version}"
        session.run(uv, "pip", "install", "--python", str(venv / "bin" / "python"), wanted, "pytest", "absl-py",
                    external=True, env=environment)
        env["PYTHON"] = str(venv / "bin" / "python")
    session.run("bash", str(ROOT / "scripts" / "device_check.sh"), *args, external=True, env=env)


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


# a rerun keeps nox's environment, and jaxrel in it unless its files changed (_install_jaxrel)
@nox.session(reuse_venv=True)
def compat(session: nox.Session) -> None:
    """The main job: the frontend at HEAD against every released backend wheel it admits, plugins included.

    Default: the newest jax release's sdist built from source as the HEAD stand-in, on the
    oldest interpreter here it supports. Options after ``--`` go to ``jaxrel compat``:
    ``--frontend-src PATH`` (a checkout, built out of tree; its own tests run in every positive
    cell against the installed wheel, with its test requirements), ``--ref REV``, ``--frontend jax==V``,
    ``--backends SPEC``, ``--python 3.N``, ``--plugins SET|none``, ``--cell ID`` (rerun one cell),
    ``--frontend-tests PATH...``, ``-k EXPR``, ``--shard I/N``, ``--jobs N``, ``--bazel-options OPTS`` (default: the
    extension is built as the release builds it, ``--config=manylinux``), ``--extension-wheels DIR`` (wheels built
    beforehand, e.g. by ``nox -s release -- build``: no Bazel is installed or run). Reports land in
    ``build/compat/`` (report.json, report.md, junit/; see docs/compat.md).
    """
    if not {"--no-extension", "--extension-wheels"} & {arg.split("=")[0] for arg in session.posargs}:
        _build_tools(session, "--bazel-only")  # the cells include the XLA FFI extension, built with Bazel
    _install_jaxrel(session, "envs")  # the compat suite ships inside jaxrel; WORKSPACE is found from the cwd
    session.run("jaxrel", "compat", *session.posargs)


@nox.session
def bisect(session: nox.Session) -> None:
    """The first frontend commit that broke a cell: options after ``--`` go to ``jaxrel bisect``
    (``--frontend-src PATH --good REV --bad REV --cell ID --frontend-tests NODEID...``; the command
    ``jaxrel compat`` prints for a compat regression is ready to paste). Reports land in
    ``build/bisect/`` (bisect.json, bisect.md; see docs/bisect.md).
    """
    _uv_env(session)
    session.install(".[envs]")
    session.run("jaxrel", "bisect", *session.posargs)


@nox.session
def atlas(session: nox.Session) -> None:
    """The API atlas: the compat suite for one jax release per minor series since 0.4.30, each on its oldest and
    newest admitted jaxlib; regenerates docs/atlas.md (and build/atlas/atlas.json, atlas.html). Options after
    ``--`` go to ``jaxrel atlas`` (``--frontends 'jax>=0.9'``, ``--backends newest``, ``--note TEXT``).
    """
    _uv_env(session)
    session.install(".[envs]")  # the compat suite ships inside jaxrel
    session.run("jaxrel", "atlas", "--markdown", str(ROOT / "docs" / "atlas.md"), *session.posargs)


@nox.session
def release(session: nox.Session) -> None:
    """The release steps CI runs (.github/workflows/release.yml), locally: ``-- ACTION [OPTIONS]`` runs
    ``jaxrel release ACTION`` (plan, check, bump, build, verify, publish); with no arguments, a rehearsal:
    plan, check (its failures shown, not fatal: a work tree is rarely release-ready), build into
    ``build/release-dist`` (replaced), verify, and ``publish --dry-run``.
    Credentials for ``publish`` come from TWINE_USERNAME/TWINE_PASSWORD or the keyring, never arguments.
    """
    _uv_env(session)
    _build_tools(session, "--bazel-only")  # compiled components are built with Bazel; nothing else is needed
    session.install("-e", ".[release]")
    if session.posargs:
        session.run("jaxrel", "release", *session.posargs)
        return
    dist = ROOT / "build" / "release-dist"
    if dist.exists():
        shutil.rmtree(dist)
    session.run("jaxrel", "release", "plan")
    session.run("jaxrel", "release", "check", success_codes=[0, 1])
    session.run("jaxrel", "release", "build", "--output", str(dist))
    session.run("jaxrel", "release", "verify", str(dist))
    session.run("jaxrel", "release", "publish", str(dist), "--dry-run")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks under benchmarks/ (measured numbers; see README): all, or ``-- NAME [ARGS]``."""
    _uv_env(session)
    _build_tools(session)
    session.install(".[envs,release]")  # release_collect: twine, isal
    if session.posargs:
        session.run("python", f"benchmarks/{session.posargs[0]}.py", *session.posargs[1:])
        return
    for name in ("guard", "compat_setup", "compat_cells", "atlas_cell", "build", "gates"):
        session.run("python", f"benchmarks/{name}.py")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (with a complexity bound) on everything, ``mypy --strict`` on the jaxrel package, and the
    GitHub configuration through actionlint and zizmor (offline, default persona: no findings)."""
    _uv_env(session)
    session.install("-e", ".[dev]")
    session.run("ruff", "check", "jaxrel", "tests", "benchmarks", "scripts", "bazel", "noxfile.py")
    session.run("mypy", "jaxrel")
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.y*ml"))
    session.run("actionlint", *workflows)
    session.run("zizmor", "--offline", "--no-progress", str(ROOT / ".github"))


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site (Sphinx, MyST, furo) into build/docs; warnings are errors."""
    _uv_env(session)
    session.install("-e", ".[docs]")
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", "build/docs")
