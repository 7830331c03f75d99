"""One compat cell: its environment, the guard, the import, and (positive cells) the suites it runs.

A cell passes when what it observes is what the policy expects: accepted and green, or
refused by the guard with its fix command. Its failed tests stay unclassified until the
run's triage (:mod:`jaxrel.compat.run`) sorts them.
"""

from __future__ import annotations

import os
import time
import xml.etree.ElementTree as ElementTree
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jaxrel._util import procs
from jaxrel.cells import compile_cache, driver, plugin_install, probes, records, suites
from jaxrel.cells.environment import environment, foreign_files
from jaxrel.cells.frontend import PreparedFrontend
from jaxrel.cells.matrix import Cell, Outcome
from jaxrel.cells.plugin_install import PluginInstall
from jaxrel.cells.suites import PLUGIN_TESTS, Suite, SuiteRun
from jaxrel.compat.options import Options
from jaxrel.compat.result import CellResult
from jaxrel.compat.triage import Failure, summary
from jaxrel.distributions import envs, installed
from jaxrel.distributions.index import IndexClientError
from jaxrel.distributions.pythons import free_threaded
from jaxrel.family import Family

__all__ = ["CellResult", "cell_line", "cpu_twins", "extension_packages", "junit_path", "run_cell", "without_device",
           "write_junit"]


def write_junit(path: Path, cell: Cell, ok: bool, message: str) -> None:
    root = ElementTree.Element("testsuites")
    suite = ElementTree.SubElement(root, "testsuite", name=f"compat.{cell.id}", tests="1", failures=str(int(not ok)))
    case = ElementTree.SubElement(suite, "testcase", classname=f"compat.{cell.id}", name=f"guard_{cell.purpose}")
    if not ok:
        ElementTree.SubElement(case, "failure", message=message)
    path.parent.mkdir(parents=True, exist_ok=True)
    ElementTree.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def junit_path(options: Options, cell: Cell, key: str = "suite") -> Path:
    suffix = {"suite": "", "own": "-frontend"}.get(key, f"-{key}")
    return options.workdir / "junit" / f"{cell.id}{suffix}.xml"



def run_cell(cell: Cell, family: Family, front: PreparedFrontend, jaxrel_wheel: Path, options: Options,
             extensions: list[Path] | str | None = None, cpu_twin: str | None = None) -> CellResult:
    """Build the cell's environment, run the guard, import, and (positive cells) the suites.

    ``extensions`` are extension wheels to install too (``--no-deps``), or why there are none.
    ``cpu_twin``: the plain cell of the run with this plugin cell's Python and backend (see :func:`cpu_twins`).
    Failed tests stay unclassified (and fail the cell) until :func:`run` sorts them.
    """
    start = time.perf_counter()
    junit = junit_path(options, cell)
    for stale in (junit, junit_path(options, cell, "own"), junit_path(options, cell, "verdicts")):
        stale.unlink(missing_ok=True)
    settings = options.environment_settings()
    install: PluginInstall | None = None
    try:
        with procs.phase("compat.environment"):
            install = plugin_install.plan(cell, settings)
            env, wheels = environment(cell, family, front, jaxrel_wheel, settings, extensions, install)
    except (envs.EnvError, IndexClientError) as error:
        result = CellResult(cell, Outcome.INSTALL_FAILED, False, time.perf_counter() - start, problems=[str(error)],
                            plugin_install=install.describe() or None if install else None)
        result.timings["environment"] = result.seconds
        write_junit(junit, cell, False, str(error))
        return result
    built = time.perf_counter()
    with procs.phase("compat.cell"):
        return _run(cell, family, front, jaxrel_wheel, options, extensions, cpu_twin, env, wheels, install, junit,
                    start, built)


def _run(cell: Cell, family: Family, front: PreparedFrontend, jaxrel_wheel: Path, options: Options,
         extensions: list[Path] | str | None, cpu_twin: str | None, env: envs.Env, wheels: dict[str, str],
         install: PluginInstall, junit: Path, start: float, built: float) -> CellResult:
    """The cell in its environment: the guard, the import, the suites."""
    arguments = family.guard_arguments(front.spec.version, front.spec.minimum_backend)
    arguments["plugins"] = [[p.distribution, p.pinned] for p in arguments["plugins"]]
    compat = options.compat_suite() if not cell.negative else None
    variables = {**dict(compat.env), **({records.SHARD: options.shard} if options.shard else {})} if compat else {}
    if compat and options.compile_cache:
        leave_out = {front.wheel.name if front.wheel else "", jaxrel_wheel.name}
        variables = {**compile_cache.variables(compile_cache.cache_dir(options.workdir, cell.id, wheels, leave_out)),
                     **variables}  # a cache the user sets with --env wins
    checks_gil = free_threaded(cell.python) and not cell.negative
    also = extension_packages(extensions) if checks_gil else []
    gil = probes.gil_turned_on(env, family, also) if checks_gil else None
    loaded = "the frontend, backend, " + (f"extension ({', '.join(also)}) " if also else "") + "and plugins"
    if free_threaded(cell.python):
        variables["PYTHON_GIL"] = "0"  # the tests run without the GIL, whatever a module declares
    plugin_tests = compat.root / PLUGIN_TESTS if compat else None
    cpu_only = (suites.pytest_arguments(compat, [str(plugin_tests)], junit=junit)
                if compat and plugin_tests and plugin_tests.is_file() and cpu_twin and cell.device else None)
    driven = driver.run_driver(env, guard=arguments, package=family.frontend.package,
                                   work=options.workdir / "runs" / cell.id / "cell", smoke=family.frontend.smoke,
                                   pytest=suites.pytest_arguments(compat, junit=junit) if compat else None,
                                   cwd=compat.root if compat else None, variables=variables, cpu_only_pytest=cpu_only)
    ran = time.perf_counter()
    if not driven.answered:
        problem = f"the guard crashed: {driven.guard_error or driven.last_line}"
        result = CellResult(cell, Outcome.GUARD_ERROR, False, time.perf_counter() - start, problems=[problem],
                            environment=str(env.root), timings={"environment": built - start})
        write_junit(junit, cell, False, problem)
        return result
    result = CellResult(cell, Outcome.ACCEPTED if driven.accepted else Outcome.REFUSED, False, 0.0, wheels=wheels,
                        guard_message=driven.guard_message, guard_fix=driven.guard_fix,
                        extension=(", ".join(w.name for w in extensions) if isinstance(extensions, list)
                                   else extensions), environment=str(env.root))
    result.frontend_import, result.import_error = driven.imported, driven.import_error
    result.cpu_suite_in = cpu_twin if driven.cpu_only else None
    result.plugin_install = install.describe() or None
    result.import_output = driven.import_output
    result.problems += [driven.exit_problem] if driven.exit_problem else []
    if gil is not None:  # a free-threaded cell whose frontend, backend or plugins turn the GIL on
        result.problems.append(f"free-threaded: the GIL came on as {loaded} loaded: {gil}")
    elif checks_gil:
        result.notes.append(f"free-threaded: the GIL stayed off as {loaded} loaded; the tests ran with PYTHON_GIL=0")
    seen = installed.read_environment(family, python=str(env.python))
    result.backend_api = {**seen.api_numbers, "xla_ffi_api": seen.xla_ffi_api}
    suite_seconds = driven.timings.get("suite", 0.0)
    result.timings["environment"] = built - start
    result.timings["probes"] = time.perf_counter() - built - suite_seconds  # guard, import, doctor, interpreter
    for part in ("interpreter start", "guard", "import jax"):
        if part in driven.timings:
            result.timings[part] = driven.timings[part]

    if result.observed != cell.expected:
        result.problems.insert(0, f"expected {cell.expected}, the guard {result.observed} it"
                               + (f": {result.guard_message}" if result.guard_message else ""))
        write_junit(junit, cell, False, "; ".join(result.problems))
    elif cell.negative:
        if not (result.guard_fix and "pip install" in result.guard_fix):
            result.problems.append(f"refused without a pip fix command: {result.guard_message}")
        write_junit(junit, cell, not result.problems, "; ".join(result.problems))
    else:
        first = None
        if compat is not None:
            outcomes, files, recorded = suites.read_record(options.workdir / "runs" / cell.id / "cell" / "record")
            first = SuiteRun(driven.returncode if driven.returncode is not None else driven.exit_code, outcomes,
                             files, driven.output, suite_seconds if driven.returncode is not None else ran - built,
                             recorded and driven.returncode is not None)
            result.notes += sorted({str(p["note"]) for p in driven.properties.values()
                                   if isinstance(p, dict) and p.get("note")})
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


def extension_packages(extensions: list[Path] | str | None) -> list[str]:
    """The packages the extension wheels install (a top-level directory with an ``__init__.py``), for the GIL
    probe; none when there are no wheels."""
    if not isinstance(extensions, list):
        return []
    packages: list[str] = []
    for wheel in extensions:
        with zipfile.ZipFile(wheel) as archive:
            packages += sorted({name.split("/")[0] for name in archive.namelist()
                                if name.count("/") == 1 and name.endswith("/__init__.py")} - set(packages))
    return packages


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
                               junit=junit_path(options, cell, suite.key), shard=options.shard,
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


def cell_line(result: CellResult) -> str:
    tests = result.tests
    own = result.frontend_tests
    line = (f"{result.observed} · {tests.passed} passed, {tests.skipped} skipped, {tests.failed + tests.errors} failed"
            + (f" ({PLUGIN_TESTS} only: no {result.cell.device} here, the CPU suite runs in {result.cpu_suite_in})"
               if result.cpu_suite_in else "")
            + (f" · own tests {own.passed} passed, {own.skipped} skipped, {own.failed + own.errors} failed" if own
               else f" · own tests not run: {result.own_tests_not_run}" if result.own_tests_not_run else "")
            + f" · {result.seconds:.1f} s · ")
    noted = f" · {len(result.notes)} note{'s' if len(result.notes) != 1 else ''}" if result.notes else ""
    if result.ok:
        return line + "ok" + (f" ({summary(result.failures)})" if result.failures else "") + noted
    return line + "FAILED: " + "; ".join([*result.problems, *([summary(result.failures)] if result.failures else [])])
