"""Run the compat matrix: one fresh environment per cell, the guard, the compat suite, the frontend's tests.

Each cell gets ``WORKDIR/envs/<cell>`` (uv when available, pip otherwise; uv's
shared cache means a wheel is downloaded once per machine) holding the frontend
wheel, the backend release, the cell's plugins, pytest and jaxrel. In it the
runner calls jaxrel's guard as the frontend would, imports the frontend and
computes, then (positive cells) runs the compat suite and, with a frontend source
tree, the frontend's own tests. A cell passes when what it observes is what the
policy expects: accepted and green, or refused by the guard with its fix command.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

import jaxrel
from jaxrel import doctor
from jaxrel._util.files import sha256_of
from jaxrel._util.text import tail
from jaxrel.compat import envs
from jaxrel.compat.frontend import CompatError, PreparedFrontend
from jaxrel.compat.index import Index, IndexClientError
from jaxrel.compat.matrix import Cell, Matrix
from jaxrel.compat.pythons import python_for
from jaxrel.compat.wheels import write_wheel
from jaxrel.extension import bazel
from jaxrel.family import Family

Progress = Callable[[str], None]
DEFAULT_SUITE = Path(__file__).resolve().parent / "suite"  # package data: ships in jaxrel's wheel

GUARD_PROBE = """
import json, sys
from jaxrel.guard import GuardError, Plugin, check
arguments = json.loads(sys.argv[1])
arguments["plugins"] = tuple(Plugin(name, pinned) for name, pinned in arguments["plugins"])
try:
    check(**arguments)
    print(json.dumps({"accepted": True}))
except GuardError as error:
    print(json.dumps({"accepted": False, "message": str(error), "fix": error.fix}))
"""

IMPORT_PROBE = """
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import {package} as frontend
    import {package}.numpy as jnp
    value = float(jnp.ones(3).sum())
    devices = [str(d) for d in frontend.devices()]
print(json.dumps({{"version": frontend.__version__, "sum": value, "devices": devices,
                  "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]}}))
"""


@dataclass
class TestCounts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0


@dataclass
class CellResult:
    """What one cell observed, and whether that is what the policy expected."""

    cell: Cell
    observed: str  # accepted | refused | install-failed | guard-error
    ok: bool
    seconds: float
    guard_message: str | None = None
    guard_fix: str | None = None
    frontend_import: dict[str, Any] | None = None
    import_error: str | None = None
    tests: TestCounts = field(default_factory=TestCounts)
    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> passed | failed | skipped: reason
    frontend_tests: TestCounts | None = None
    extension: str | None = None  # the extension wheels installed in the cell, or why none were
    backend_api: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    wheels: dict[str, str] = field(default_factory=dict)  # every family wheel installed (file name -> sha256)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "cell": asdict(self.cell)}


@dataclass
class Options:
    """How to run the cells."""

    workdir: Path
    suite: Path = DEFAULT_SUITE
    keyword: str | None = None
    frontend_tests: Sequence[str] = ()
    use_uv: bool | None = None
    extensions: bool = True  # build the workspace's Bazel wheels (e.g. an XLA FFI extension) and add them to cells
    workspace: Path | None = None  # the user's Bazel workspace (None: none, extensions are skipped with a reason)
    index: Index | None = None  # install the backend and plugins from files verified against it (else by name)
    progress: Progress = field(default=lambda message: print(message, file=sys.stderr, flush=True))


# -- one cell -------------------------------------------------------------------------------------


def _counts(junit: Path) -> tuple[TestCounts, dict[str, str]]:
    counts, outcomes = TestCounts(), dict[str, str]()
    if not junit.exists():
        return counts, outcomes
    for case in ElementTree.parse(junit).iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}".strip(":")
        skipped, failure, error = case.find("skipped"), case.find("failure"), case.find("error")
        if error is not None:
            counts.errors += 1
            outcomes[name] = "error"
        elif failure is not None:
            counts.failed += 1
            outcomes[name] = "failed"
        elif skipped is not None:
            counts.skipped += 1
            outcomes[name] = f"skipped: {skipped.get('message', '')}"
        else:
            counts.passed += 1
            outcomes[name] = "passed"
    return counts, outcomes


def verified_wheel(index: Index, name: str, version: str, python: str) -> Path:
    """The local file of ``name==version``'s wheel for ``python``, its sha256 verified against ``index``.

    The cell installs this file, not ``name==version`` resolved again: the bytes jaxrel checked are
    the bytes that run. A hash mismatch (a tampered wheelhouse or cache) raises, naming the file.
    """
    file = index.listing(name).wheel_for(version, python, python_for(python).tags())
    if file is None:
        raise IndexClientError(f"{name} {version} has no wheel for Python {python} on "
                               f"{', '.join(index.describe())}")
    return index.download(file)


def _last_json(output: str) -> dict[str, Any] | None:
    """The JSON object a probe printed on its last line; ``None`` when there is none."""
    lines = output.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _write_junit(path: Path, cell: Cell, ok: bool, message: str) -> None:
    root = ElementTree.Element("testsuites")
    suite = ElementTree.SubElement(root, "testsuite", name=f"compat.{cell.id}", tests="1", failures=str(int(not ok)))
    case = ElementTree.SubElement(suite, "testcase", classname=f"compat.{cell.id}", name=f"guard_{cell.purpose}")
    if not ok:
        ElementTree.SubElement(case, "failure", message=message)
    path.parent.mkdir(parents=True, exist_ok=True)
    ElementTree.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def run_cell(cell: Cell, family: Family, front: PreparedFrontend, jaxrel_wheel: Path, options: Options,
             extensions: list[Path] | str | None = None) -> CellResult:
    """Build the cell's environment, run the guard, import, and (positive cells) the suites.

    ``extensions`` are extension wheels to install too (``--no-deps``), or why there are none.
    """
    start = time.perf_counter()
    root = options.workdir / "envs" / cell.id
    junit = options.workdir / "junit" / f"{cell.id}.xml"
    junit.unlink(missing_ok=True)
    backend = family.backend.distribution
    excluded = {str(canonicalize_name(n)) for n in (family.frontend.distribution, backend)}
    assert front.wheel is not None, "prepare_frontend(build=True) first"
    local = [front.wheel, jaxrel_wheel, *(extensions if isinstance(extensions, list) else [])]
    try:
        pinned = [(backend, cell.backend), *cell.plugins]
        verified = ({name: verified_wheel(options.index, name, version, cell.python) for name, version in pinned}
                    if options.index is not None else {})
        installs = {name: str(verified[name]) if name in verified else f"{name}=={version}"
                    for name, version in pinned}
        requirements = [installs[backend], *front.info.plain_requirements(excluded), "pytest"]
        no_deps = [str(front.wheel), str(jaxrel_wheel), *(installs[name] for name, _ in cell.plugins),
                   *(str(path) for path in local[2:])]
        env = envs.create(root, python=python_for(cell.python).executable, requirements=requirements,
                          no_deps=no_deps, use_uv=options.use_uv)
    except (envs.EnvError, IndexClientError) as error:
        result = CellResult(cell, "install-failed", False, time.perf_counter() - start, problems=[str(error)])
        _write_junit(junit, cell, False, str(error))
        return result
    wheels = {path.name: sha256_of(path) for path in [*verified.values(), *local]}

    arguments = family.guard_arguments(front.spec.version, front.spec.minimum_backend)
    arguments["plugins"] = [[p.distribution, p.pinned] for p in arguments["plugins"]]
    done = env.run(str(env.python), "-c", GUARD_PROBE, json.dumps(arguments))
    guard = _last_json(done.stdout) if done.returncode == 0 else None
    if guard is None:
        problem = f"the guard crashed: {tail(done.stderr or done.stdout, 1)}"
        result = CellResult(cell, "guard-error", False, time.perf_counter() - start, problems=[problem])
        _write_junit(junit, cell, False, problem)
        return result
    result = CellResult(cell, "accepted" if guard["accepted"] else "refused", False, 0.0, wheels=wheels,
                        guard_message=guard.get("message"), guard_fix=guard.get("fix"),
                        extension=(", ".join(w.name for w in extensions) if isinstance(extensions, list)
                                   else extensions))
    seen = doctor.read_environment(family, python=str(env.python))
    result.backend_api = {**seen.api_numbers, "xla_ffi_api": seen.xla_ffi_api}

    probe = env.run(str(env.python), "-c", IMPORT_PROBE.format(package=family.frontend.package))
    result.frontend_import = _last_json(probe.stdout) if probe.returncode == 0 else None
    if result.frontend_import is None:
        result.import_error = tail(probe.stderr or probe.stdout, 1)

    if result.observed != cell.expected:
        result.problems.append(f"expected {cell.expected}, the guard {result.observed} it"
                               + (f": {result.guard_message}" if result.guard_message else ""))
        _write_junit(junit, cell, False, result.problems[0])
    elif cell.negative:
        if not (result.guard_fix and "pip install" in result.guard_fix):
            result.problems.append(f"refused without a pip fix command: {result.guard_message}")
        _write_junit(junit, cell, not result.problems, "; ".join(result.problems))
    else:
        _run_suites(env, cell, front, result, junit, options)
    result.ok = not result.problems
    result.seconds = time.perf_counter() - start
    return result


def _run_suites(env: envs.Env, cell: Cell, front: PreparedFrontend, result: CellResult, junit: Path,
                options: Options) -> None:
    if result.import_error:
        result.problems.append(f"import failed: {result.import_error}")
    suite = options.suite
    pytest_args = ["-p", "no:cacheprovider", "--rootdir", str(suite), "--confcutdir", str(suite),
                   "-c", str(suite / "pytest.ini"), "-q", "--junitxml", str(junit)]
    done = env.run(str(env.python), "-m", "pytest", str(suite), *pytest_args, timeout=1800)
    result.tests, result.outcomes = _counts(junit)
    if done.returncode not in (0, 5) or result.tests.failed or result.tests.errors:
        result.problems.append(f"compat suite: {result.tests.failed} failed, {result.tests.errors} errors "
                               f"({tail(done.stdout)})")
    if front.source_tree is not None and (options.frontend_tests or options.keyword):
        own = junit.with_name(f"{cell.id}-frontend.xml")
        selection = ["-k", options.keyword] if options.keyword else []
        done = env.run(str(env.python), "-m", "pytest", *(options.frontend_tests or ["tests"]), *selection,
                       "-p", "no:cacheprovider", "-q", "--junitxml", str(own), timeout=3600,
                       cwd=str(front.source_tree))
        result.frontend_tests, _ = _counts(own)
        if done.returncode not in (0, 5) or result.frontend_tests.failed or result.frontend_tests.errors:
            result.problems.append(f"{front.spec.name}'s own tests failed ({tail(done.stdout)})")


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


def run(matrix: Matrix, family: Family, front: PreparedFrontend, options: Options) -> list[CellResult]:
    """Every cell of ``matrix``, with a progress line per cell."""
    if not (options.suite / "pytest.ini").exists():
        raise CompatError(f"{options.suite}: no compat suite (pytest.ini) there; pass --suite PATH")
    wheel = jaxrel_wheel(options.workdir)
    extensions = extension_wheels(sorted({cell.python for cell in matrix.cells}), options)
    results = []
    total = len(matrix.cells)
    for number, cell in enumerate(matrix.cells, 1):
        options.progress(f"[{number}/{total}] {cell.id}: {cell.purpose}, expect {cell.expected} …")
        try:
            result = run_cell(cell, family, front, wheel, options, extensions.get(cell.python))
        except IndexClientError as error:
            result = CellResult(cell, "install-failed", False, 0.0, problems=[str(error)])
        tests = result.tests
        verdict = "ok" if result.ok else "FAILED: " + "; ".join(result.problems)
        options.progress(f"[{number}/{total}] {cell.id}: {result.observed} · {tests.passed} passed, "
                         f"{tests.skipped} skipped, {tests.failed + tests.errors} failed · "
                         f"{result.seconds:.1f} s · {verdict}")
        results.append(result)
    return results
