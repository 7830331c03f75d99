"""Run the compat matrix: the cells (side by side where they can be), then the triage of failed tests.

Before the cells: jaxrel packed as a wheel for them, and the extension wheels the user's Bazel
workspace builds. After the last cell, every failed test is rerun here and on the newest
admitted backend and sorted (:mod:`jaxrel.compat.triage`).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from jaxrel._util.parallel import workers
from jaxrel.cells import compile_cache, suites
from jaxrel.cells.environment import environment, jaxrel_wheel, wheel_file
from jaxrel.cells.frontend import CompatError, PreparedFrontend
from jaxrel.cells.matrix import Cell, Matrix, Outcome
from jaxrel.cells.suites import Suite, SuiteRun
from jaxrel.compat.cell import CellResult, cell_line, cpu_twins, junit_path, run_cell
from jaxrel.compat.options import Options
from jaxrel.compat.triage import classify, summary, write_verdicts
from jaxrel.distributions import bazel, envs
from jaxrel.distributions.filenames import wheel_tags
from jaxrel.distributions.index import IndexClientError
from jaxrel.distributions.pythons import python_for, supported_tags, version_key
from jaxrel.family import Family

__all__ = ["cells_at_once", "extension_wheels", "prefetch", "run", "triage"]


def _installable(wheels: Sequence[Path], python: str) -> list[Path]:
    """Those of ``wheels`` pip installs on CPython ``python`` (``3.12``) on this machine: a wheel of its own ABI,
    a stable-ABI wheel built for it or an older CPython (``cp311-abi3``), a pure one."""
    accepted = set(supported_tags(python))
    return [wheel for wheel in wheels if wheel_tags(wheel.name) & accepted]


def _given(pythons: Sequence[str], folder: Path, options: Options) -> dict[str, list[Path] | str]:
    """``--extension-wheels DIR``: for each Python, the wheels in ``folder`` that install on it."""
    wheels = sorted(folder.glob("*.whl"))
    options.progress(f"extension: {', '.join(w.name for w in wheels)} from {folder}, built beforehand")
    return {python: _installable(wheels, python)
            or f"none of the {len(wheels)} wheels in {folder} installs on Python {python} here" for python in pythons}


def extension_wheels(pythons: Sequence[str], options: Options) -> dict[str, list[Path] | str]:
    """Python version → the wheels the user's Bazel workspace builds for it (or ``--extension-wheels`` gives),
    or why there are none.

    The oldest Python builds first; a newer one that every wheel already built installs on (stable-ABI wheels)
    uses those, as pip would install them on it, instead of a build of its own. Bazel builds incrementally, so
    wheels already built cost a no-op build.
    """
    if not options.extensions:
        return {python: "not requested (--no-extension)" for python in pythons}
    if options.extension_dir is not None:
        return _given(pythons, options.extension_dir, options)
    if options.workspace is None:
        return {python: "no Bazel workspace (none at or above the working directory; pass --workspace DIR)"
                for python in pythons}
    found: dict[str, list[Path] | str] = {}
    for python in sorted(pythons, key=version_key):  # 3.13 before 3.13t: a build for each
        out = options.workdir / "extensions" / f"py{python}"
        shutil.rmtree(out, ignore_errors=True)
        earlier = next((built for built in found.values()
                        if isinstance(built, list) and _installable(built, python) == built), None)
        if earlier is not None:
            found[python] = earlier
            options.progress(f"extension: {', '.join(w.name for w in earlier)} serves Python {python} too "
                             "(stable ABI): installed as pip would, not rebuilt")
            continue
        how = f" ({' '.join(options.bazel_options)})" if options.bazel_options else ""
        options.progress(f"extension: building for Python {python} with Bazel in {options.workspace}{how} …")
        try:
            built = bazel.build(options.workspace, python=python_for(python).executable, output=out,
                                bazel_options=options.bazel_options)
        except bazel.BuildError as error:
            found[python] = f"not built: {error}"
            options.progress(f"extension: {found[python]}")
            continue
        found[python] = built.wheels
        options.progress(f"extension: {', '.join(w.name for w in built.wheels)} ({built.seconds:.1f} s)")
    return found


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
                self.envs[cell.id] = environment(cell, self.family, self.front, self.wheel,
                                                 self.options.environment_settings(),
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
            write_verdicts(junit_path(options, result.cell, "verdicts"), result.cell.id, result.failures)


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
            file = wheel_file(options.index, name, version, python)
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
        options.progress(f"[{order[result.cell.id]}/{total}] {result.cell.id}: {cell_line(result)}")
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
    if options.compile_cache:
        compile_cache.prune(options.workdir)
    return done
