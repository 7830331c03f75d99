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
import tarfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from jaxrel import doctor, policy
from jaxrel.compat import envs
from jaxrel.compat.index import Index, IndexClientError
from jaxrel.compat.matrix import BackendFilter, Cell, FrontendSpec, Matrix, MatrixError, build_matrix
from jaxrel.compat.pythons import find_pythons, python_for
from jaxrel.compat.wheels import ArtifactInfo, inspect
from jaxrel.extension import bazel as build
from jaxrel.family import Family

Progress = Callable[[str], None]
REPO = Path(__file__).resolve().parents[1]
DEFAULT_SUITE = REPO / "tests" / "compat"

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


class CompatError(RuntimeError):
    """The run cannot start: no frontend, no interpreter, no suite."""


@dataclass
class PreparedFrontend:
    """The frontend every cell installs: a wheel built or downloaded once per run."""

    spec: FrontendSpec
    wheel: Path | None  # None until built (an sdist inspected for the matrix only)
    info: ArtifactInfo
    source_tree: Path | None = None


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
    extensions: bool = True  # build this repo's Bazel wheels (the XLA FFI extension) and add them to cells
    progress: Progress = field(default=lambda message: print(message, file=sys.stderr, flush=True))


# -- the frontend ------------------------------------------------------------------------------


def build_wheel(source: Path, out: Path) -> Path:
    """Build a wheel from a source tree (``uv build``, else ``pip wheel``) into ``out``; returns it."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    uv = envs.find_uv()
    command = ([uv, "build", "--wheel", "--quiet", "--out-dir", str(out), str(source)] if uv
               else [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)])
    envs.run_step(command, envs.uv_environment(), f"building a wheel of {source}")
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        raise CompatError(f"building {source} gave {len(wheels)} wheels in {out}; expected one")
    return wheels[0]


def _unpack_sdist(sdist: Path, into: Path) -> Path:
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        archive.extractall(into, filter="data")
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise CompatError(f"{sdist.name}: expected one top-level directory, found {len(tops)}")
    return tops[0]


def frontend_spec(family: Family, info: ArtifactInfo, source: str) -> FrontendSpec:
    """The frontend as its built or released metadata declares it."""
    declared = info.requirements_on(family.backend.distribution)
    minimum = info.minimum_backend
    if minimum is None and declared is not None:
        lower = [s.version for s in declared if s.operator in (">=", "==")]
        minimum = lower[0] if lower else None
    if minimum is None:
        raise CompatError(
            f"{info.filename}: declares no minimum {family.backend.distribution} (no "
            f"{family.frontend.minimum_backend_variable} in {family.frontend.version_file}, no Requires-Dist bound); "
            "set minimum-backend in [tool.jaxrel.frontend]"
        )
    policy.parse_version(minimum, f"minimum {family.backend.distribution} declared by {info.filename}")
    return FrontendSpec(info.name, info.version, minimum, source,
                        str(declared) if declared is not None else None, info.requires_python)


def prepare_frontend(
    family: Family, index: Index, workdir: Path, *, source: Path | None = None, requirement: str | None = None,
    build: bool = True,
) -> PreparedFrontend:
    """Build (source tree, or the newest release's sdist by default) or download (``NAME==V``) the frontend.

    With ``build=False`` a released sdist is only inspected (enough to build the matrix).
    """
    name = family.frontend.distribution
    if source is not None:
        if not (source / family.frontend.version_file).exists():
            raise CompatError(f"{source}: no {family.frontend.version_file}; --frontend-src must be a "
                              f"{name} source tree (a git checkout or an unpacked sdist)")
        wheel = build_wheel(source, workdir / "frontend-dist")
        info = inspect(wheel, family, use_cache=False)
        return PreparedFrontend(frontend_spec(family, info, f"source {source}"), wheel, info, source)
    listing = index.listing(name)
    if requirement is not None:
        wanted_name, _, version = requirement.partition("==")
        if canonicalize_name(wanted_name) != canonicalize_name(name) or not version:
            raise CompatError(f"--frontend {requirement!r}: expected {name}==VERSION")
        policy.parse_version(version, f"--frontend {name} version")
        files = listing.files_for(version)
        if not files:
            raise CompatError(f"{name} {version} is not on the index ({', '.join(index.describe())}); "
                              f"newest: {listing.versions()[-1] if listing.versions() else 'none'}")
        wheel_file = next((f for f in files if f.is_wheel and f.yanked is None and "py3-none-any" in f.filename), None)
        if wheel_file is not None:
            wheel = index.download(wheel_file)
            info = inspect(wheel, family, sha256=wheel_file.sha256)
            return PreparedFrontend(frontend_spec(family, info, f"wheel {wheel.name}"), wheel, info)
        sdist_file = listing.sdist(version)
        if sdist_file is None:
            raise CompatError(f"{name} {version} has neither a pure wheel nor an sdist on the index")
        label = f"sdist {sdist_file.filename}"
    else:
        finals = [v for v in listing.versions() if policy.is_final(v) and listing.sdist(v)]
        if not finals:
            raise CompatError(f"no {name} release with an sdist on {', '.join(index.describe())}")
        sdist_file = listing.sdist(finals[-1])
        assert sdist_file is not None
        label = f"sdist {sdist_file.filename} (newest release, built from source as the HEAD stand-in)"
    sdist = index.download(sdist_file)
    if not build:
        info = inspect(sdist, family, sha256=sdist_file.sha256)
        return PreparedFrontend(frontend_spec(family, info, label), None, info)
    tree = _unpack_sdist(sdist, workdir / "frontend-src")
    wheel = build_wheel(tree, workdir / "frontend-dist")
    info = inspect(wheel, family, use_cache=False)
    return PreparedFrontend(frontend_spec(family, info, label), wheel, info, tree)


# -- the matrix ---------------------------------------------------------------------------------


def matrix_for(
    family: Family, index: Index, spec: FrontendSpec, *, pythons: Sequence[str] = (),
    backends: BackendFilter | None = None, plugin_sets: Sequence[str] = (), plugins_on: str = "newest",
) -> Matrix:
    """The matrix from the index's listings; with no ``pythons``, the oldest interpreter here that works."""
    projects = [family.backend.distribution, *{d for s in plugin_sets for d in family.plugin_sets().get(s, ())}]
    listings = {project: index.listing(project) for project in projects}

    def build(chosen: Sequence[str]) -> Matrix:
        tags = {version: python_for(version).tags() for version in chosen}
        return build_matrix(family, spec, listings, tags, backends=backends, plugin_sets=plugin_sets,
                            plugins_on=plugins_on)

    if pythons:
        return build(pythons)
    required = SpecifierSet(spec.requires_python or "")
    candidates = [v for v in find_pythons() if required.contains(v + ".0", prereleases=True)]
    for version in candidates:
        try:
            return build([version])
        except MatrixError:
            continue
    raise CompatError(
        f"no interpreter here runs {spec.name} {spec.version} with an admitted {family.backend.distribution} "
        f"(Requires-Python {spec.requires_python or 'any'}; found {', '.join(candidates) or 'none'}); "
        "install one (e.g. pyenv install 3.12) or pass --python"
    )


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
    requirements = [f"{backend}=={cell.backend}", *front.info.plain_requirements(excluded), "pytest"]
    assert front.wheel is not None, "prepare_frontend(build=True) first"
    no_deps = [str(front.wheel), str(jaxrel_wheel), *(f"{name}=={version}" for name, version in cell.plugins)]
    if isinstance(extensions, list):
        no_deps += [str(wheel) for wheel in extensions]
    try:
        env = envs.create(root, python=python_for(cell.python).executable, requirements=requirements,
                          no_deps=no_deps, use_uv=options.use_uv)
    except envs.EnvError as error:
        result = CellResult(cell, "install-failed", False, time.perf_counter() - start, problems=[str(error)])
        _write_junit(junit, cell, False, str(error))
        return result

    arguments = family.guard_arguments(front.spec.version, front.spec.minimum_backend)
    arguments["plugins"] = [[p.distribution, p.pinned] for p in arguments["plugins"]]
    done = env.run(str(env.python), "-c", GUARD_PROBE, json.dumps(arguments))
    if done.returncode != 0:
        problem = f"the guard crashed: {((done.stderr or done.stdout).strip().splitlines() or ['no output'])[-1]}"
        result = CellResult(cell, "guard-error", False, time.perf_counter() - start, problems=[problem])
        _write_junit(junit, cell, False, problem)
        return result
    guard = json.loads(done.stdout.strip().splitlines()[-1])
    result = CellResult(cell, "accepted" if guard["accepted"] else "refused", False, 0.0,
                        guard_message=guard.get("message"), guard_fix=guard.get("fix"),
                        extension=(", ".join(w.name for w in extensions) if isinstance(extensions, list)
                                   else extensions))
    seen = doctor.inspect(family, python=str(env.python))
    result.backend_api = {**seen.api_numbers, "xla_ffi_api": seen.xla_ffi_api}

    probe = env.run(str(env.python), "-c", IMPORT_PROBE.format(package=family.frontend.package))
    if probe.returncode == 0:
        result.frontend_import = json.loads(probe.stdout.strip().splitlines()[-1])
    else:
        result.import_error = ((probe.stderr or probe.stdout).strip().splitlines() or ["no output"])[-1]

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
        tail = " | ".join(done.stdout.strip().splitlines()[-3:])
        result.problems.append(f"compat suite: {result.tests.failed} failed, {result.tests.errors} errors ({tail})")
    if front.source_tree is not None and (options.frontend_tests or options.keyword):
        own = junit.with_name(f"{cell.id}-frontend.xml")
        selection = ["-k", options.keyword] if options.keyword else []
        done = env.run(str(env.python), "-m", "pytest", *(options.frontend_tests or ["tests"]), *selection,
                       "-p", "no:cacheprovider", "-q", "--junitxml", str(own), timeout=3600,
                       cwd=str(front.source_tree))
        result.frontend_tests, _ = _counts(own)
        if done.returncode not in (0, 5) or result.frontend_tests.failed or result.frontend_tests.errors:
            tail = " | ".join(done.stdout.strip().splitlines()[-3:])
            result.problems.append(f"{front.spec.name}'s own tests failed ({tail})")


# -- the run ---------------------------------------------------------------------------------------


def jaxrel_wheel(workdir: Path) -> Path:
    """jaxrel itself as a wheel, built once per run, so cells can call its guard and gating."""
    if not (REPO / "pyproject.toml").exists():
        raise CompatError(f"jaxrel's source tree is not at {REPO}; install jaxrel editable (pip install -e .)")
    return build_wheel(REPO, workdir / "jaxrel-dist")


def extension_wheels(pythons: Sequence[str], options: Options) -> dict[str, list[Path] | str]:
    """Python version → the wheels this repository's Bazel workspace builds for it, or why there are none.

    Bazel builds incrementally, so wheels already built cost a no-op build.
    """
    if not options.extensions:
        return {python: "not requested (--no-extension)" for python in pythons}
    if not (REPO / "WORKSPACE").exists():
        return {python: f"no Bazel workspace at {REPO}" for python in pythons}
    found: dict[str, list[Path] | str] = {}
    for python in pythons:
        out = options.workdir / "extensions" / f"py{python}"
        shutil.rmtree(out, ignore_errors=True)
        options.progress(f"extension: building for Python {python} with Bazel …")
        try:
            built = build.build(REPO, python=python_for(python).executable, output=out)
        except build.BuildError as error:
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
