"""One downstream cell: a library release beside one frontend and one backend, in an era environment, its tests run
sandboxed, and the outcome: ``passed``, ``failed``, ``not-installable`` or ``infra``.

The environment holds the library, its test requirements, pytest, the frontend and the backend pinned, resolved by
uv as of the cell's era (``as_of``: the later of the library's and the frontend's upload, the pins exempt), and
jaxrel's wheel (without dependencies: its pytest plugin records each test's outcome). A resolver that finds no
solution makes the cell ``not-installable``; any other failure to build it, a run past the budget or a run that
recorded nothing is ``infra``; a run that crashed (a segfault: a backend built against another NumPy, say) is
``failed``: that set does not work. Failing tests are rerun; one that then passes is ``flaky`` and does not fail
the cell.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from jaxrel._util import procs
from jaxrel._util.text import tail
from jaxrel.cells import probes
from jaxrel.cells.records import signature
from jaxrel.cells.suites import Suite, SuiteRun, recorded, suite_command
from jaxrel.distributions import envs
from jaxrel.distributions.pipconfig import PipIndexConfig
from jaxrel.distributions.pythons import free_threaded
from jaxrel.downstream import sandbox
from jaxrel.downstream.library import Library
from jaxrel.downstream.testsource import StagedTests
from jaxrel.family.model import Family

__all__ = ["COLLECTION", "DISK_FULL", "OUTCOMES", "CellResult", "CellSpec", "Settings", "collection_error",
           "environment_failure", "installed_pins", "prepare", "resolver_cause", "run_cell", "test",
           "test_requirements", "unsatisfiable"]

OUTCOMES = ("passed", "failed", "not-installable", "infra")
UNSATISFIABLE = ("no solution found", "resolutionimpossible", "unsatisfiable", "no matching distribution",
                 "cannot be used", "requirements are unsatisfiable", "has no wheels with a matching")
NOTHING_COLLECTED = (4, 5)  # pytest's exit statuses for a selection that names nothing (4) or collects nothing (5)
COLLECTION = "<collection>"  # the failing "test" of a run whose tests do not import
_COLLECTING = ("ImportError while loading conftest", "ERROR collecting", "ImportError while importing test module")


def collection_error(output: str) -> str | None:
    """The error of a test run that stopped while collecting (a conftest or a test module that no longer imports
    on this frontend: ``import jax.config``), as its first ``E   `` line; ``None`` for any other end."""
    lines = output.splitlines()
    start = next((n for n, line in enumerate(lines) if any(mark in line for mark in _COLLECTING)), None)
    if start is None:
        return None
    found = next((line[1:].strip() for line in lines[start:] if line.startswith("E ") and line[1:].strip()), None)
    return (found or lines[start].strip())[:500]


DISK_FULL = "No space left on device"  # strerror(ENOSPC), as uv and pip end their message with it


def environment_failure(message: str) -> tuple[str, str]:
    """An environment that could not be made: ``not-installable`` with the resolver's reason when the requirements
    cannot be met together, else ``infra`` (a full disk said first: the installer's words end in it, past what a
    report's table shows)."""
    if unsatisfiable(message):
        return "not-installable", resolver_cause(message)
    if DISK_FULL in message:
        return "infra", (f"disk full: {DISK_FULL} while installing; free space (uv cache prune) and rerun "
                         f"({resolver_cause(message)})")
    return "infra", resolver_cause(message)


def resolver_cause(message: str) -> str:
    """The resolver's own reason in an environment's failure (uv's ``cause:``, without its hints), else its end."""
    _, found, cause = message.partition("cause: ")
    if not found:
        return message[-600:]
    return " ".join(cause.split(" | hint:")[0].replace(" | ", " ").split())[:600]


def unsatisfiable(message: str) -> bool:
    """Whether an environment's failure is the resolver finding no solution (not the network, not a crash)."""
    lowered = message.lower()
    return any(text in lowered for text in UNSATISFIABLE)


@dataclass(frozen=True)
class Settings:
    """What every cell of a run shares."""

    family: Family
    workdir: Path
    python: str  # the interpreter's path
    python_version: str  # "3.12"
    jaxrel_wheel: Path
    index: PipIndexConfig | None = None
    budget: float = 900.0  # seconds of tests per cell run
    reruns: int = 1
    use_uv: bool = True
    offline: bool = True  # run the tests without network where the machine allows it
    keyword: str | None = None
    test_env: tuple[tuple[str, str], ...] = ()
    test_requirements: tuple[str, ...] = ()  # --test-requirements (lines), else the library's test extra
    boxed: bool = True  # the tests run in the box (cells.box); False only with --unboxed
    hidden: tuple[Path, ...] = ()  # paths the tests must not see besides the box's own (the frontend's checkout)


@dataclass(frozen=True)
class CellSpec:
    """Which frontend and backend, as of when."""

    frontend: str  # a release's version, or a label ("HEAD abc123") with ``frontend_wheel``
    backend: str
    as_of: str | None = None  # RFC 3339: resolve the rest as of then (None: now)
    frontend_wheel: Path | None = None

    @property
    def key(self) -> str:
        return f"{self.frontend.split()[0].lower()}-{self.backend}"


@dataclass
class CellResult:
    """What one cell showed."""

    jax: str
    jaxlib: str
    outcome: str  # one of OUTCOMES
    reason: str = ""
    failing: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # each failing test's first error line
    first_error: str = ""
    signature: str = ""
    flaky: list[str] = field(default_factory=list)
    passed: int = 0
    role: str = ""  # search | confirm | edge | sweep | baseline | candidate
    as_of: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    offline: bool = False  # the tests ran without network
    boxed: bool = False  # the tests ran in the box (cells.box)
    peak_memory_bytes: int | None = None  # the test run's peak memory, where the box measured it
    resolution: str = ""  # how its environment was resolved, when not as of its era alone (the Crater's candidate)
    gil: str = ""  # free-threaded: "off", or what turned the GIL on as jax, jaxlib and the library loaded; else ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def test_requirements(library: Library, tests: StagedTests, settings: Settings) -> list[str]:
    """What the library's tests need besides it: ``--test-requirements``, else its test extra, else the tests' own
    requirements file."""
    return (list(settings.test_requirements) or library.test_requirements(settings.python_version, settings.family)
            or list(tests.requirements))


def _requirements(library: Library, tests: StagedTests, spec: CellSpec, settings: Settings) -> list[str]:
    family = settings.family
    extra = test_requirements(library, tests, settings)
    frontend = str(spec.frontend_wheel) if spec.frontend_wheel is not None else \
        f"{family.frontend.distribution}=={spec.frontend}"
    return [library.install_requirement(), *extra, "pytest", frontend, f"{family.backend.distribution}=={spec.backend}"]


@procs.in_phase("downstream.environment")
def _environment(library: Library, tests: StagedTests, spec: CellSpec, settings: Settings, result: CellResult,
                 constraints: Path | None = None) -> envs.Env | None:
    start = time.perf_counter()
    root = settings.workdir / "envs" / f"{library.name}-{spec.key}"
    try:
        env = envs.create(root, python=settings.python, requirements=_requirements(library, tests, spec, settings),
                          no_deps=[str(settings.jaxrel_wheel)], use_uv=settings.use_uv, exclude_newer=spec.as_of,
                          index=settings.index, pinned_as_of_now=(settings.family.frontend.distribution,
                                                                  settings.family.backend.distribution),
                          constraint_files=[constraints] if constraints is not None else [],
                          only_binary=free_threaded(settings.python_version))
    except envs.EnvError as error:
        shutil.rmtree(root, ignore_errors=True)
        result.outcome, result.reason = environment_failure(str(error))
        return None
    finally:
        result.seconds["environment"] = round(time.perf_counter() - start, 2)
    return env


@procs.in_phase("downstream.tests")
def _pytest(env: envs.Env, tests: StagedTests, settings: Settings, work: Path, only: Sequence[str] | None
            ) -> tuple[sandbox.Sandboxed, SuiteRun]:
    """One sandboxed pytest run of the library's tests (``only``: those node ids), and what the cell plugin recorded."""
    options = (f"--import-mode={tests.import_mode}", *(("-k", settings.keyword) if settings.keyword else ()))
    suite = Suite("library tests", "library", tests.root, tests.paths, options, env=settings.test_env)
    command, variables = suite_command(env, suite, work, package=settings.family.frontend.package, only=only)
    variables.update({"VIRTUAL_ENV": str(env.root), "PATH": f"{env.bin}{os.pathsep}{os.environ.get('PATH', '')}"})
    if free_threaded(settings.python_version):
        variables["PYTHON_GIL"] = "0"  # a free-threaded cell's tests run without the GIL, as compat's do
    ran = sandbox.run(command, cwd=tests.root, home=work.parent / "home", env=variables, budget=settings.budget,
                      offline=settings.offline, readable=(env.root,), hidden=settings.hidden, boxed=settings.boxed)
    killed = -signal.SIGKILL  # at the budget (procs kills the group)
    return ran, recorded(work, ran.returncode if ran.returncode is not None else killed, ran.output, ran.seconds)


@procs.in_phase("downstream.tests")
def _smoke(env: envs.Env, tests: StagedTests, settings: Settings, work: Path, result: CellResult) -> None:
    assert tests.smoke is not None
    ran = sandbox.run([str(env.python), "-c", tests.smoke], cwd=tests.root, home=work / "home",
                      env={"PATH": f"{env.bin}{os.pathsep}{os.environ.get('PATH', '')}", **dict(settings.test_env)},
                      budget=settings.budget, offline=settings.offline, readable=(env.root,),
                      hidden=settings.hidden, boxed=settings.boxed)
    _boxed(result, ran)
    if ran.out_of_memory:
        result.outcome, result.reason = "infra", "memory: the smoke command ran past the box's memory limit"
    elif ran.timed_out:
        result.outcome = "infra"
        result.reason = f"timeout: the smoke command ran past the {settings.budget:.0f} s budget"
    elif ran.returncode == 0:
        result.outcome, result.passed = "passed", 1
    else:
        result.outcome, result.failing = "failed", ["smoke"]
        result.first_error = tail(ran.output, 1).strip()
        result.errors = {"smoke": result.first_error}
        result.signature = signature(result.first_error)
        result.reason = f"the smoke command failed (exit {ran.returncode}): {result.first_error}"


def _boxed(result: CellResult, ran: sandbox.Sandboxed) -> None:
    result.offline, result.boxed, result.peak_memory_bytes = ran.network_isolated, ran.boxed, ran.peak_bytes


def _tests(env: envs.Env, tests: StagedTests, settings: Settings, work: Path, result: CellResult) -> None:
    ran, run = _pytest(env, tests, settings, work / "run", None)
    _boxed(result, ran)
    if ran.out_of_memory:
        result.outcome, result.reason = "infra", "memory: the tests ran past the box's memory limit (killed)"
        return
    if ran.timed_out:
        result.outcome, result.reason = "infra", f"timeout: the tests ran past the {settings.budget:.0f} s budget"
        return
    if ran.returncode is not None and ran.returncode < 0 and not run.outcomes:  # killed by a signal it raised itself
        crash = f"pytest crashed: {procs.signal_name(-ran.returncode)}"
        result.outcome, result.failing, result.errors = "failed", ["<crash>"], {"<crash>": crash}
        result.first_error, result.signature = crash, signature(crash)
        result.reason = f"{crash} ({tail(ran.output, 2)})"
        return
    if not run.recorded or not run.outcomes:
        if (error := collection_error(ran.output)) is not None:  # the library failing on this frontend, not bad input
            result.outcome, result.failing = "failed", [COLLECTION]
            result.errors, result.first_error, result.signature = {COLLECTION: error}, error, signature(error)
            result.reason = f"the tests do not import: {error}"
            return
        why = ("collected nothing" if ran.returncode in NOTHING_COLLECTED or run.recorded
               else f"pytest exited {ran.returncode} without results")
        result.outcome, result.reason = "infra", f"{why}: {tail(ran.output, 2)}"
        return
    if foreign := [f for f in run.frontend_files if not Path(f).resolve().is_relative_to(env.root.resolve())]:
        result.outcome = "infra"
        result.reason = f"the tests imported {settings.family.frontend.package} from {foreign[0]}, not the cell's"
        return
    bad = run.bad()
    result.passed = run.counts().passed
    still, messages = sorted(bad), {test: o.message for test, o in bad.items()}
    for attempt in range(settings.reruns if bad else 0):
        again_ran, again = _pytest(env, tests, settings, work / f"rerun{attempt + 1}", still)
        if again_ran.timed_out or not again.recorded:
            break
        flipped = [t for t in still if again.passed(t)]
        result.flaky += flipped
        still = [t for t in still if t not in flipped]
        if not still:
            break
    if not still:
        if result.passed == 0 and not result.flaky:
            result.outcome, result.reason = "infra", "every selected test was skipped: nothing was tested"
        else:
            result.outcome = "passed"
            result.reason = f"{result.passed} passed" + (f", flaky: {', '.join(result.flaky)}" if result.flaky else "")
        return
    result.outcome, result.failing = "failed", still
    result.errors = {t: messages.get(t, "").removeprefix("collection: ") for t in still}
    result.first_error = result.errors[still[0]]
    result.signature = signature(result.first_error)
    result.reason = (f"{len(still)} failing: {still[0]}" + (f" and {len(still) - 1} more" if len(still) > 1 else "")
                     + (f" ({result.first_error})" if result.first_error else ""))


def prepare(library: Library, tests: StagedTests, spec: CellSpec, settings: Settings, role: str = "",
            constraints: Path | None = None) -> tuple[envs.Env | None, CellResult]:
    """The cell's environment (``None`` when it cannot be built: the result says why), its resolution held to
    ``constraints`` (pip's ``-c``) when given."""
    result = CellResult(spec.frontend, spec.backend, "infra", role=role, as_of=spec.as_of)
    return _environment(library, tests, spec, settings, result, constraints), result


INSTALLED = "import importlib.metadata as m, json; print(json.dumps({'installed': [[d.metadata['Name'], d.version] " \
            "for d in m.distributions()]}))"


def installed_pins(env: envs.Env, leave_out: Sequence[str]) -> list[str]:
    """``name==version`` of every distribution in ``env`` but those named in ``leave_out``: what another
    environment is held to so that only those differ."""
    done = env.run(str(env.python), "-c", INSTALLED)
    found = probes.last_json(done.stdout) if done.returncode == 0 else None
    pairs = found.get("installed") if isinstance(found, dict) else None
    skip = {canonicalize_name(name) for name in leave_out}
    return sorted(f"{pair[0]}=={pair[1]}" for pair in (pairs if isinstance(pairs, list) else [])
                  if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
                  and canonicalize_name(pair[0]) not in skip)


@procs.in_phase("downstream.tests")
def _gil(env: envs.Env, library: Library, tests: StagedTests, settings: Settings, work: Path) -> str:
    """On a free-threaded interpreter, boxed as the tests are: ``off`` when the GIL stayed off as the frontend, the
    backend, the plugins and the library's packages loaded (without ``PYTHON_GIL``), else CPython's words on what
    turned it on. The library's tests run with ``PYTHON_GIL=0`` either way: this is a finding, not a failure."""
    command = probes.gil_command(str(env.python), settings.family, distributions=[library.name])
    ran = sandbox.run(command, cwd=tests.root, home=work / "gil-home",
                      env={"PATH": f"{env.bin}{os.pathsep}{os.environ.get('PATH', '')}", **dict(settings.test_env)},
                      budget=settings.budget, offline=settings.offline, readable=(env.root,), hidden=settings.hidden,
                      boxed=settings.boxed)
    return probes.gil_answer(ran.returncode, ran.output) or "off"


def test(env: envs.Env, library: Library, tests: StagedTests, settings: Settings, result: CellResult) -> CellResult:
    """Run the library's tests (or its smoke command) in ``env``; ``result`` filled in. On a free-threaded
    interpreter, whether the GIL stays off as the library loads is asked first (``result.gil``)."""
    work = settings.workdir / "runs" / f"{library.name}-{result.jax.split()[0].lower()}-{result.jaxlib}"
    start = time.perf_counter()
    try:
        if free_threaded(settings.python_version):
            result.gil = _gil(env, library, tests, settings, work)
        if settings.boxed and tests.smoke is None:  # the cell's own copy, in the one directory the box lets it write
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(tests.root, work / "tests", symlinks=True)
            tests = replace(tests, root=work / "tests")
        (_smoke if tests.smoke is not None else _tests)(env, tests, settings, work, result)
    finally:
        result.seconds["tests"] = round(time.perf_counter() - start, 2)
        shutil.rmtree(work, ignore_errors=True)
    return result


def run_cell(library: Library, tests: StagedTests, spec: CellSpec, settings: Settings, role: str = "") -> CellResult:
    """Build the cell's environment and run the library's tests (or smoke command) in it; the environment is removed
    after (a cell is one answer, not a place to keep)."""
    env, result = prepare(library, tests, spec, settings, role)
    if env is None:
        return result
    try:
        return test(env, library, tests, settings, result)
    finally:
        shutil.rmtree(env.root, ignore_errors=True)
