"""Run the compat matrix: one fresh environment per cell, the guard, the compat suite, the frontend's tests.

Each cell gets ``WORKDIR/envs/<cell>`` (uv when available, pip otherwise; uv's
shared cache means a wheel is downloaded once per machine) holding the frontend
wheel, the backend release, the cell's plugins, pytest and jaxrel, and on positive
cells the frontend's test requirements. In it the runner calls jaxrel's guard as the
frontend would, imports the frontend (recording the file it came from), then (positive
cells) runs the compat suite and the frontend's own tests, staged outside its source
tree (:mod:`jaxrel.compat.owntests`). A cell passes when what it observes is what the
policy expects: accepted and green, or refused by the guard with its fix command.
After the last cell, every failed test is sorted (:mod:`jaxrel.compat.triage`).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

import jaxrel
from jaxrel import doctor
from jaxrel._util.files import sha256_of
from jaxrel._util.parallel import workers
from jaxrel.compat import celldriver, cellrecord, suites
from jaxrel.compat.frontend import CompatError, PreparedFrontend
from jaxrel.compat.matrix import Cell, Matrix, Outcome
from jaxrel.compat.owntests import OwnTests
from jaxrel.compat.suites import Suite, SuiteRun, TestCounts
from jaxrel.compat.triage import Failure, classify, summary, write_verdicts
from jaxrel.dist import bazel, envs
from jaxrel.dist.index import Index, IndexClientError
from jaxrel.dist.pages import IndexFile
from jaxrel.dist.pythons import python_for
from jaxrel.dist.wheels import write_wheel
from jaxrel.family import Family

__all__ = ["DEFAULT_SUITE", "CellResult", "Options", "TestCounts", "run", "run_cell"]

Progress = Callable[[str], None]


def say(message: str) -> None:
    """A progress line on stderr in one write: lines from cells running side by side do not interleave."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()

DEFAULT_SUITE = Path(__file__).resolve().parent / "suite"  # package data: ships in jaxrel's wheel
PLUGIN_TESTS = "test_plugins.py"  # the suite's tests of the hardware plugins themselves


@dataclass
class CellResult:
    """What one cell observed, and whether that is what the policy expected."""

    cell: Cell
    observed: Outcome
    ok: bool
    seconds: float
    guard_message: str | None = None
    guard_fix: str | None = None
    frontend_import: dict[str, Any] | None = None
    import_error: str | None = None
    import_output: str | None = None  # what importing the frontend printed on stderr (a plugin's traceback)
    tests: TestCounts = field(default_factory=TestCounts)
    outcomes: dict[str, str] = field(default_factory=dict)  # compat suite: node id -> passed, failed, skipped: why
    frontend_tests: TestCounts | None = None
    frontend_files: list[str] = field(default_factory=list)  # where the own tests imported the frontend from
    failures: list[Failure] = field(default_factory=list)  # every failed test, sorted by the triage
    extension: str | None = None  # the extension wheels installed in the cell, or why none were
    own_tests_not_run: str | None = None  # why a positive cell did not run the frontend's own tests
    cpu_suite_in: str | None = None  # a plugin cell without its device: the plain cell that ran the CPU suite
    backend_api: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # what failed the cell besides its failed tests
    wheels: dict[str, str] = field(default_factory=dict)  # every family wheel installed (file name -> sha256)
    environment: str | None = None  # the cell's environment directory
    # environment, probes, compat suite, own tests, triage; and parts of probes: interpreter start, guard, import jax
    timings: dict[str, float] = field(default_factory=dict)

    def settle(self) -> None:
        """``ok``: no problem and no failure that fails the run (see :data:`jaxrel.compat.triage.FATAL`)."""
        self.ok = not self.problems and not any(failure.fatal for failure in self.failures)

    def verdicts(self) -> dict[str, int]:
        """How many failures got each verdict."""
        counts: dict[str, int] = {}
        for failure in self.failures:
            counts[failure.verdict] = counts.get(failure.verdict, 0) + 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "cell": asdict(self.cell)}


@dataclass
class Options:
    """How to run the cells. Paths are made absolute: the suites run with other working directories."""

    workdir: Path
    suite: Path | None = DEFAULT_SUITE  # None: no compat suite (a family other than jax, without --suite)
    own: OwnTests | None = None  # the frontend's own tests, staged
    shard: str | None = None  # "I/N": run every N-th test of each suite
    jobs: int | None = None  # pytest-xdist workers for the own tests; None: one per core when the cell has xdist
    use_uv: bool | None = None
    extensions: bool = True  # build the workspace's Bazel wheels (e.g. an XLA FFI extension) and add them to cells
    workspace: Path | None = None  # the user's Bazel workspace (None: none, extensions are skipped with a reason)
    index: Index | None = None  # install the backend and plugins from files verified against it (else by name)
    progress: Progress = field(default=say)
    checkpoint: Callable[[list[CellResult]], None] | None = None  # after each cell: the results so far
    cells_at_once: int | None = None  # cells run side by side; None: see cells_at_once()
    exclude_newer: str | None = None  # resolve the environments' requirements as of this time (uv only)
    test_env: tuple[tuple[str, str], ...] = ()  # --env KEY=VALUE: set for every suite's pytest run
    full_plugin_cells: bool = False  # the whole suite in plugin cells without their device too (see cpu_twins)
    keep_bytecode: bool = True  # False: the cells' interpreters write bytecode as the caller's environment says

    def __post_init__(self) -> None:
        self.workdir = self.workdir.absolute()
        self.suite = self.suite.absolute() if self.suite is not None else None

    @property
    def bytecode(self) -> Path | None:
        """Where the cells' interpreters keep compiled bytecode from run to run (see :class:`envs.Env`)."""
        return self.workdir / "pycache" if self.keep_bytecode else None

    def compat_suite(self) -> Suite | None:
        """The compat suite (run in the cell's driver interpreter, after the guard and the import)."""
        if self.suite is None:
            return None
        return Suite("compat suite", "suite", self.suite, (str(self.suite),),
                     ("--confcutdir", str(self.suite), "-c", str(self.suite / "pytest.ini")),
                     env=(("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1"), *self.test_env))  # it uses no plugin's fixtures

    def suites(self) -> list[Suite]:
        """What a positive cell runs: the compat suite, then the frontend's own tests."""
        found = [suite] if (suite := self.compat_suite()) is not None else []
        if self.own is not None:
            found.append(replace(self.own.suite, env=self.test_env) if self.test_env else self.own.suite)
        return found


# -- one cell -------------------------------------------------------------------------------------


def verified_wheel(index: Index, name: str, version: str, python: str) -> Path:
    """The local file of ``name==version``'s wheel for ``python``, its sha256 verified against ``index``.

    The cell installs this file, not ``name==version`` resolved again: the bytes jaxrel checked are
    the bytes that run. A hash mismatch (a tampered wheelhouse or cache) raises, naming the file.
    """
    return index.download(_wheel_file(index, name, version, python))


def _wheel_file(index: Index, name: str, version: str, python: str) -> IndexFile:
    file = index.listing(name).wheel_for(version, python, python_for(python).tags())
    if file is None:
        raise IndexClientError(f"{name} {version} has no wheel for Python {python} on "
                               f"{', '.join(index.describe())}")
    return file


def _write_junit(path: Path, cell: Cell, ok: bool, message: str) -> None:
    root = ElementTree.Element("testsuites")
    suite = ElementTree.SubElement(root, "testsuite", name=f"compat.{cell.id}", tests="1", failures=str(int(not ok)))
    case = ElementTree.SubElement(suite, "testcase", classname=f"compat.{cell.id}", name=f"guard_{cell.purpose}")
    if not ok:
        ElementTree.SubElement(case, "failure", message=message)
    path.parent.mkdir(parents=True, exist_ok=True)
    ElementTree.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _junit(options: Options, cell: Cell, key: str = "suite") -> Path:
    suffix = {"suite": "", "own": "-frontend"}.get(key, f"-{key}")
    return options.workdir / "junit" / f"{cell.id}{suffix}.xml"


def environment(cell: Cell, family: Family, front: PreparedFrontend, jaxrel_wheel: Path, options: Options,
                extensions: list[Path] | str | None = None) -> tuple[envs.Env, dict[str, str]]:
    """Create the cell's environment (``WORKDIR/envs/<cell>``): backend, frontend, plugins, pytest, jaxrel, and on
    positive cells the frontend's test requirements. Also returns the sha256 of every family wheel installed.

    The backend and plugins are the files verified against ``options.index`` (by name without one).
    """
    backend = family.backend.distribution
    excluded = {str(canonicalize_name(n)) for n in (family.frontend.distribution, backend)}
    assert front.wheel is not None, "prepare_frontend(build=True) first"
    local = [front.wheel, jaxrel_wheel, *(extensions if isinstance(extensions, list) else [])]
    pinned = [(backend, cell.backend), *cell.plugins]
    verified = ({name: verified_wheel(options.index, name, version, cell.python) for name, version in pinned}
                if options.index is not None else {})
    installs = {name: str(verified[name]) if name in verified else f"{name}=={version}" for name, version in pinned}
    requirements = [installs[backend], *front.info.plain_requirements(excluded), "pytest"]
    no_deps = [str(path) for path in local[:2]] + [installs[name] for name, _ in cell.plugins]
    no_deps += [str(path) for path in local[2:]]
    files = ([options.own.requirements] if options.own is not None and options.own.requirements is not None
             and not cell.negative else [])
    env = envs.create(options.workdir / "envs" / cell.id, python=python_for(cell.python).executable,
                      requirements=requirements, no_deps=no_deps, use_uv=options.use_uv, requirement_files=files,
                      exclude_newer=options.exclude_newer, bytecode=options.bytecode)
    return env, {path.name: sha256_of(path) for path in [*verified.values(), *local]}


def foreign_files(env: envs.Env, files: Sequence[str | None]) -> list[str]:
    """The files in ``files`` that do not lie inside ``env``: a frontend imported from somewhere else."""
    root = env.root.resolve()
    return [f for f in files if f and not Path(f).resolve().is_relative_to(root)]


def run_cell(cell: Cell, family: Family, front: PreparedFrontend, jaxrel_wheel: Path, options: Options,
             extensions: list[Path] | str | None = None, cpu_twin: str | None = None) -> CellResult:
    """Build the cell's environment, run the guard, import, and (positive cells) the suites.

    ``extensions`` are extension wheels to install too (``--no-deps``), or why there are none.
    ``cpu_twin``: the plain cell of the run with this plugin cell's Python and backend (see :func:`cpu_twins`).
    Failed tests stay unclassified (and fail the cell) until :func:`run` sorts them.
    """
    start = time.perf_counter()
    junit = _junit(options, cell)
    for stale in (junit, _junit(options, cell, "own"), _junit(options, cell, "verdicts")):
        stale.unlink(missing_ok=True)
    try:
        env, wheels = environment(cell, family, front, jaxrel_wheel, options, extensions)
    except (envs.EnvError, IndexClientError) as error:
        result = CellResult(cell, Outcome.INSTALL_FAILED, False, time.perf_counter() - start, problems=[str(error)])
        result.timings["environment"] = result.seconds
        _write_junit(junit, cell, False, str(error))
        return result
    built = time.perf_counter()

    arguments = family.guard_arguments(front.spec.version, front.spec.minimum_backend)
    arguments["plugins"] = [[p.distribution, p.pinned] for p in arguments["plugins"]]
    compat = options.compat_suite() if not cell.negative else None
    variables = {**dict(compat.env), **({cellrecord.SHARD: options.shard} if options.shard else {})} if compat else {}
    plugin_tests = compat.root / PLUGIN_TESTS if compat else None
    cpu_only = (suites.pytest_arguments(compat, [str(plugin_tests)], junit=junit)
                if compat and plugin_tests and plugin_tests.is_file() and cpu_twin and cell.device else None)
    driven = celldriver.run_driver(env, guard=arguments, package=family.frontend.package,
                                   work=options.workdir / "runs" / cell.id / "cell", smoke=family.frontend.smoke,
                                   pytest=suites.pytest_arguments(compat, junit=junit) if compat else None,
                                   cwd=compat.root if compat else None, variables=variables, cpu_only_pytest=cpu_only)
    ran = time.perf_counter()
    if not driven.answered:
        problem = f"the guard crashed: {driven.guard_error or driven.last_line}"
        result = CellResult(cell, Outcome.GUARD_ERROR, False, time.perf_counter() - start, problems=[problem],
                            environment=str(env.root), timings={"environment": built - start})
        _write_junit(junit, cell, False, problem)
        return result
    result = CellResult(cell, Outcome.ACCEPTED if driven.accepted else Outcome.REFUSED, False, 0.0, wheels=wheels,
                        guard_message=driven.guard_message, guard_fix=driven.guard_fix,
                        extension=(", ".join(w.name for w in extensions) if isinstance(extensions, list)
                                   else extensions), environment=str(env.root))
    result.frontend_import, result.import_error = driven.imported, driven.import_error
    result.cpu_suite_in = cpu_twin if driven.cpu_only else None
    result.import_output = driven.import_output
    seen = doctor.read_environment(family, python=str(env.python))
    result.backend_api = {**seen.api_numbers, "xla_ffi_api": seen.xla_ffi_api}
    suite_seconds = driven.timings.get("suite", 0.0)
    result.timings["environment"] = built - start
    result.timings["probes"] = time.perf_counter() - built - suite_seconds  # guard, import, doctor, interpreter
    for part in ("interpreter start", "guard", "import jax"):
        if part in driven.timings:
            result.timings[part] = driven.timings[part]

    if result.observed != cell.expected:
        result.problems.append(f"expected {cell.expected}, the guard {result.observed} it"
                               + (f": {result.guard_message}" if result.guard_message else ""))
        _write_junit(junit, cell, False, result.problems[0])
    elif cell.negative:
        if not (result.guard_fix and "pip install" in result.guard_fix):
            result.problems.append(f"refused without a pip fix command: {result.guard_message}")
        _write_junit(junit, cell, not result.problems, "; ".join(result.problems))
    else:
        first = None
        if compat is not None:
            outcomes, files, recorded = suites.read_record(options.workdir / "runs" / cell.id / "cell" / "record")
            first = SuiteRun(driven.returncode if driven.returncode is not None else driven.exit_code, outcomes,
                             files, driven.output, suite_seconds if driven.returncode is not None else ran - built,
                             recorded and driven.returncode is not None)
        _run_suites(env, cell, family, front, result, options, first)
    result.settle()
    result.seconds = time.perf_counter() - start
    return result


def _jobs(env: envs.Env, options: Options, suite: Suite) -> int:
    """pytest-xdist workers: ``--jobs``, else one per core (at most 4) when the cell has pytest-xdist and the
    suite spans at least two test modules per worker (each worker imports the frontend and collects anew:
    measured on jax on a shared 2-core machine: two workers cost 50% more on one module and saved 7-17% on
    the twelve of its default selection)."""
    if options.jobs is not None:
        return options.jobs
    workers = min(os.cpu_count() or 1, 4)
    has_xdist = any(env.root.glob("lib/python*/site-packages/xdist/__init__.py"))
    return workers if workers > 1 and has_xdist and suite.test_files >= 2 * workers else 1


def cpu_twins(cells: Sequence[Cell], options: Options) -> dict[str, str]:
    """Plugin cell id → the plain positive cell with its Python and backend, for each plugin cell that has one.

    Where the frontend sees only CPU devices (no GPU or TPU here), a plugin cell runs the suite's
    :data:`PLUGIN_TESTS` alone: every other test would run the same frontend on the same backend's
    CPU client as its twin, which runs them all. The plugin still installs, imports, is discovered
    and must fail cleanly. A plugin cell without a twin in the run, or ``--full-plugin-cells``,
    runs everything.
    """
    if options.full_plugin_cells:
        return {}
    plain = {(c.python, c.backend): c.id for c in cells if not c.plugins and not c.negative}
    return {c.id: plain[(c.python, c.backend)] for c in cells
            if c.plugins and not c.negative and (c.python, c.backend) in plain}


def without_device(cell: Cell, imported: dict[str, Any] | None) -> str | None:
    """Why a plugin cell's own tests would only repeat its plain cell's: its device is not here.

    The import probe lists the platforms of the frontend's devices (jax: ``jax.devices()``); a plugin
    cell that sees only ``cpu`` runs everything on the CPU, as the cell without plugins already did.
    The compat suite still runs there (the plugin installs, imports, is discovered, fails cleanly).
    """
    platforms = (imported or {}).get("platforms")
    if not cell.device or platforms != ["cpu"]:
        return None
    return f"no {cell.device} here (only cpu devices); they run on {cell.device} runners"


def _run_suites(env: envs.Env, cell: Cell, family: Family, front: PreparedFrontend, result: CellResult,
                options: Options, compat: SuiteRun | None) -> None:
    """Record the compat suite's run (``compat``: done by the cell's driver), then run the frontend's own tests."""
    if result.import_error:
        result.problems.append(f"import failed: {result.import_error}")
    elif foreign := foreign_files(env, [(result.frontend_import or {}).get("file")]):
        result.problems.append(f"{front.spec.name} was imported from {foreign[0]}, not from the cell's "
                               f"environment {env.root}")
    for suite in options.suites():
        if suite.key == "suite":
            if compat is not None:
                result.timings[suite.name] = compat.seconds
                _record_run(env, suite, compat, result, front)
            continue
        if suite.key == "own" and (why := without_device(cell, result.frontend_import)):
            result.own_tests_not_run = why
            continue
        run = suites.run_suite(env, suite, options.workdir / "runs" / cell.id / suite.key,
                               package=family.frontend.package,
                               junit=_junit(options, cell, suite.key), shard=options.shard,
                               jobs=_jobs(env, options, suite) if suite.parallel else 1)
        result.timings[suite.name] = run.seconds
        _record_run(env, suite, run, result, front)


def _record_run(env: envs.Env, suite: Suite, run: SuiteRun, result: CellResult, front: PreparedFrontend) -> None:
    counts = run.counts()
    if suite.key == "suite":
        result.tests = counts
        result.outcomes = {test: o.outcome if o.outcome != "skipped" else f"skipped: {o.message}"
                           for test, o in run.outcomes.items()}
    else:
        result.frontend_tests = counts
        result.frontend_files = run.frontend_files
        if foreign := foreign_files(env, run.frontend_files):
            result.problems.append(f"the {suite.name} imported {front.spec.name} from {foreign[0]}, not from the "
                                   f"cell's environment {env.root}: they did not test the installed wheel")
    result.failures += [Failure(suite.name, test, o.outcome, o.message) for test, o in run.bad().items()]
    explained = run.returncode in (0, 1, 5) or (run.returncode == 2 and any(o.collection for o in run.bad().values()))
    if not run.recorded or not explained:
        result.problems.append(f"{suite.name}: pytest exited {run.returncode} without "
                               f"{'results' if not run.recorded else 'explaining why'}: {run.output}")


# -- the run ---------------------------------------------------------------------------------------


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


def extension_wheels(pythons: Sequence[str], options: Options) -> dict[str, list[Path] | str]:
    """Python version → the wheels the user's Bazel workspace builds for it, or why there are none.

    Bazel builds incrementally, so wheels already built cost a no-op build.
    """
    if not options.extensions:
        return {python: "not requested (--no-extension)" for python in pythons}
    if options.workspace is None:
        return {python: "no Bazel workspace (none at or above the working directory; pass --workspace DIR)"
                for python in pythons}
    found: dict[str, list[Path] | str] = {}
    for python in pythons:
        out = options.workdir / "extensions" / f"py{python}"
        shutil.rmtree(out, ignore_errors=True)
        options.progress(f"extension: building for Python {python} with Bazel in {options.workspace} …")
        try:
            built = bazel.build(options.workspace, python=python_for(python).executable, output=out)
        except bazel.BuildError as error:
            found[python] = f"not built: {error}"
            options.progress(f"extension: {found[python]}")
            continue
        found[python] = built.wheels
        options.progress(f"extension: {', '.join(w.name for w in built.wheels)} ({built.seconds:.1f} s)")
    return found


def _cell_line(result: CellResult) -> str:
    tests = result.tests
    own = result.frontend_tests
    line = (f"{result.observed} · {tests.passed} passed, {tests.skipped} skipped, {tests.failed + tests.errors} failed"
            + (f" ({PLUGIN_TESTS} only: no {result.cell.device} here, the CPU suite runs in {result.cpu_suite_in})"
               if result.cpu_suite_in else "")
            + (f" · own tests {own.passed} passed, {own.skipped} skipped, {own.failed + own.errors} failed" if own
               else f" · own tests not run: {result.own_tests_not_run}" if result.own_tests_not_run else "")
            + f" · {result.seconds:.1f} s · ")
    if result.ok:
        return line + "ok" + (f" ({summary(result.failures)})" if result.failures else "")
    return line + "FAILED: " + "; ".join([*result.problems, *([summary(result.failures)] if result.failures else [])])


class _Triage:
    """The environments failed tests are rerun in: each cell's own, and reference cells built on demand."""

    def __init__(self, family: Family, front: PreparedFrontend, wheel: Path, options: Options,
                 extensions: dict[str, list[Path] | str], results: Sequence[CellResult]) -> None:
        self.family, self.front, self.wheel, self.options, self.extensions = family, front, wheel, options, extensions
        self.envs: dict[str, envs.Env | str] = {}
        self.results = {r.cell.id: r for r in results}
        self.reruns = 0

    def env(self, cell: Cell) -> envs.Env | str:
        ran = self.results.get(cell.id)
        if cell.id not in self.envs and ran is not None:
            if ran.environment is None or ran.observed != Outcome.ACCEPTED:
                self.envs[cell.id] = f"the cell was {ran.observed}"
            else:
                try:
                    self.envs[cell.id] = envs.existing(Path(ran.environment), self.options.bytecode)
                except envs.EnvError as error:
                    self.envs[cell.id] = str(error)
        if cell.id not in self.envs:
            self.options.progress(f"triage: building {cell.id}, the newest admitted backend, to rerun failures on …")
            try:
                self.envs[cell.id] = environment(cell, self.family, self.front, self.wheel, self.options,
                                                 self.extensions.get(cell.python))[0]
            except (envs.EnvError, IndexClientError) as error:
                self.envs[cell.id] = str(error)
        return self.envs[cell.id]

    def rerun(self, cell: Cell, suite: Suite, tests: Sequence[str]) -> SuiteRun | str:
        env = self.env(cell)
        if isinstance(env, str):
            return env
        self.reruns += 1
        self.options.progress(f"triage: rerunning {len(tests)} of the {suite.name} on {cell.id} …")
        run = suites.run_suite(env, suite, self.options.workdir / "runs" / cell.id / f"{suite.key}-rerun{self.reruns}",
                               package=self.family.frontend.package, only=tests)
        return run if run.recorded else f"pytest exited {run.returncode} without results: {run.output}"


def triage(matrix: Matrix, family: Family, front: PreparedFrontend, wheel: Path, options: Options,
           extensions: dict[str, list[Path] | str], results: Sequence[CellResult]) -> None:
    """Sort every failed test of ``results`` (rerun here, then on the newest admitted backend); settle the cells."""
    failing = [r for r in results if r.failures]
    if failing:
        where = _Triage(family, front, wheel, options, extensions, results)
        start = time.perf_counter()
        classify([(r.cell, r.failures) for r in failing], {r.cell.id: matrix.reference_for(r.cell) for r in failing},
                 {suite.name: suite for suite in options.suites()}, where.rerun, family.backend.distribution)
        seconds = time.perf_counter() - start
        for result in failing:
            result.timings["triage"] = seconds / len(failing)
            result.settle()
            options.progress(f"triage: {result.cell.id}: {summary(result.failures)} · "
                             f"{'ok' if result.ok else 'FAILED'}")
    for result in results:
        if result.failures:
            write_verdicts(_junit(options, result.cell, "verdicts"), result.cell.id, result.failures)


def cells_at_once(options: Options) -> int:
    """How many cells run side by side: ``options.cells_at_once``, else two on a machine with two or more
    cores when no cell runs the frontend's own tests (those use the cores inside a cell, through
    pytest-xdist), else one. A cell is subprocesses (uv, the probes, pytest), so threads suffice."""
    if options.cells_at_once is not None:
        return options.cells_at_once
    return 2 if options.own is None and workers() >= 2 else 1


def prefetch(matrix: Matrix, family: Family, options: Options) -> None:
    """Download every backend and plugin wheel the cells install and the cache lacks, one at a time, before
    cells run side by side (the index's caches are written by one writer). Files already there are
    verified by the cells that install them, side by side. A file that cannot be had is left for its
    cell to report."""
    if options.index is None:
        return
    wanted = {(name, version, cell.python) for cell in matrix.cells
              for name, version in [(family.backend.distribution, cell.backend), *cell.plugins]}
    for name, version, python in sorted(wanted):
        try:
            file = _wheel_file(options.index, name, version, python)
            if not options.index.has(file):
                options.index.download(file)
        except IndexClientError:
            continue


def run(matrix: Matrix, family: Family, front: PreparedFrontend, options: Options) -> list[CellResult]:
    """Every cell of ``matrix``, with a progress line per cell, then the triage of failed tests.

    Results come back in the matrix's order whatever order the cells finish in.
    """
    if options.suite is not None and not (options.suite / "pytest.ini").exists():
        raise CompatError(f"{options.suite}: no compat suite (pytest.ini) there; pass --suite PATH")
    wheel = jaxrel_wheel(options.workdir)
    extensions = extension_wheels(sorted({cell.python for cell in matrix.cells}), options)
    total = len(matrix.cells)
    order = {cell.id: number for number, cell in enumerate(matrix.cells, 1)}
    done: list[CellResult] = []

    twins = cpu_twins(matrix.cells, options)

    def one(cell: Cell) -> CellResult:
        options.progress(f"[{order[cell.id]}/{total}] {cell.id}: {cell.purpose}, expect {cell.expected} …")
        try:
            return run_cell(cell, family, front, wheel, options, extensions.get(cell.python), twins.get(cell.id))
        except IndexClientError as error:
            return CellResult(cell, Outcome.INSTALL_FAILED, False, 0.0, problems=[str(error)])

    def finished(result: CellResult) -> None:
        options.progress(f"[{order[result.cell.id]}/{total}] {result.cell.id}: {_cell_line(result)}")
        done.append(result)
        done.sort(key=lambda r: order[r.cell.id])
        if options.checkpoint is not None:
            options.checkpoint(list(done))

    width = min(cells_at_once(options), total)
    if width <= 1:
        for cell in matrix.cells:
            finished(one(cell))
    else:
        prefetch(matrix, family, options)
        pool = ThreadPoolExecutor(width, thread_name_prefix="cell")
        try:
            for future in as_completed([pool.submit(one, cell) for cell in matrix.cells]):
                finished(future.result())
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # on Ctrl-C: no cell starts after it
    triage(matrix, family, front, wheel, options, extensions, done)
    return done
