"""The API atlas run: the compat suite for many frontend releases, each on its oldest and newest admitted backend.

Reuses compat's parts: the frontend as the index ships it (:func:`~jaxrel.cells.frontend.prepare_frontend`),
the policy's admitted backends (:func:`~jaxrel.cells.planning.matrix_for`), verified backend wheels and
each cell's environment (:func:`~jaxrel.cells.environment.environment`, uv's shared cache). A cell runs in one
interpreter (:mod:`jaxrel.cells.driver`, as compat's cells); cells run two at a time;
:mod:`jaxrel.atlas.table` turns what they recorded into the table.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from jaxrel import policy
from jaxrel._util import procs
from jaxrel._util.progress import Progress, say
from jaxrel.atlas.table import CellRun
from jaxrel.cells import driver, suites
from jaxrel.cells.environment import EnvSettings, environment, jaxrel_wheel, verified_wheel
from jaxrel.cells.frontend import CompatError, PreparedFrontend, prepare_frontend
from jaxrel.cells.matrix import Cell, MatrixError, Purpose
from jaxrel.cells.planning import matrix_for
from jaxrel.distributions import envs
from jaxrel.distributions.index import Index, IndexClientError
from jaxrel.family import Family

__all__ = ["OLDEST", "AtlasCell", "choose_frontends", "plan", "run"]

OLDEST = "0.4.30"  # the oldest jax the compat suite's API tests are written for (the atlas's default start)





@dataclass
class AtlasCell:
    """One frontend release with one of its admitted backends."""

    front: PreparedFrontend
    cell: Cell
    settings: EnvSettings  # the frontend's own work directory (environments, runs, bytecode)

    @property
    def label(self) -> str:
        return f"jax {self.front.spec.version} / jaxlib {self.cell.backend}"


@dataclass
class Plan:
    cells: list[AtlasCell] = field(default_factory=list)
    problems: list[CellRun] = field(default_factory=list)  # frontends that got no cell, and why


def parse_frontends(wanted: str) -> list[str] | SpecifierSet:
    """``--frontends``: versions (``0.4.30,0.12.0.1``) or a specifier (``jax>=0.4.30``, ``>=0.9``)."""
    found = policy.versions_or_specifier(wanted, "--frontends", "jax>=0.4.30", name="jax")
    return [str(version) for version in found] if isinstance(found, list) else found


def choose_frontends(versions: Sequence[str], wanted: str | None, oldest: str = OLDEST) -> list[str]:
    """The frontend releases to measure, oldest first.

    ``wanted`` (see :func:`parse_frontends`): a specifier selects every final release it contains,
    versions must be released. Default: ``oldest``, then the newest release of each minor series
    from there on, so every change between two series is bracketed.
    """
    finals = sorted({v for v in versions if policy.is_final(Version(v))}, key=Version)
    if wanted:
        chosen = parse_frontends(wanted)
        if isinstance(chosen, SpecifierSet):
            return [v for v in finals if chosen.contains(v)]
        missing = [v for v in chosen if v not in finals]
        if missing:
            raise CompatError(f"--frontends: {', '.join(missing)} not released on the index (newest: "
                              f"{finals[-1] if finals else 'none'})")
        return sorted(chosen, key=Version)
    start = Version(oldest)
    newest_of: dict[tuple[int, ...], str] = {}
    for version in finals:
        if Version(version) >= start:
            newest_of[Version(version).release[:2]] = version
    return sorted(({oldest} if oldest in finals else set()) | set(newest_of.values()), key=Version)


def plan(family: Family, index: Index, frontends: Sequence[str], workdir: Path, *, python: str,
         backends: str = "ends", progress: Progress = say) -> Plan:
    """Each frontend's cells: its oldest and newest admitted backend (``backends="newest"``: the newest only)."""
    found = Plan()
    for version in frontends:
        where = workdir / f"jax{version}"
        try:
            front = prepare_frontend(family, index, where, requirement=f"{family.frontend.distribution}=={version}")
            matrix = matrix_for(family, index, front.spec, pythons=[python], plugin_sets=[])
        except (CompatError, MatrixError, IndexClientError) as error:
            progress(f"atlas: jax {version}: no cell: {error}")
            found.problems.append(CellRun(version, "-", python, problem=str(error)))
            continue
        admitted = [c for c in matrix.cells if c.purpose == Purpose.ADMITTED and not c.plugins]
        admitted.sort(key=lambda c: policy.parse_version(c.backend))
        ends = [admitted[-1]] if backends == "newest" else list(dict.fromkeys([admitted[0], admitted[-1]]))
        settings = EnvSettings(workdir=where, index=index, bytecode=where / "pycache")
        found.cells += [AtlasCell(front, cell, settings) for cell in ends]
    return found


def prefetch(cells: Sequence[AtlasCell], family: Family, index: Index) -> None:
    """Download and verify every backend wheel once, one at a time, before cells run side by side."""
    for python, version in sorted({(c.cell.python, c.cell.backend) for c in cells}):
        try:
            verified_wheel(index, family.backend.distribution, version, python)
        except IndexClientError:
            continue  # its cell reports it


def run_cell(item: AtlasCell, family: Family, jaxrel_wheel: Path) -> CellRun:
    """Build the cell's environment (compat's), then guard + import + suite in one interpreter."""
    start = time.perf_counter()
    spec = item.front.spec
    measured = CellRun(spec.version, item.cell.backend, item.cell.python)
    try:
        with procs.phase("atlas.environment"):
            env, _ = environment(item.cell, family, item.front, jaxrel_wheel, item.settings)
    except (envs.EnvError, IndexClientError) as error:
        measured.problem = f"environment: {error}"
        measured.timings = {"environment": time.perf_counter() - start, "cell": time.perf_counter() - start}
        return measured
    built = time.perf_counter()
    arguments = family.guard_arguments(spec.version, spec.minimum_backend)
    arguments["plugins"] = [[p.distribution, p.pinned] for p in arguments["plugins"]]
    suite = suites.compat_suite(suites.DEFAULT_SUITE)
    with procs.phase("atlas.cell"):
        result = driver.run_driver(env, guard=arguments, package=family.frontend.package,
                                   work=item.settings.workdir / "runs" / item.cell.id, smoke=family.frontend.smoke,
                                   pytest=suites.pytest_arguments(suite), cwd=suite.root, variables=dict(suite.env))
    measured.outcomes, measured.properties, measured.problem = result.outcomes, result.properties, result.problem
    measured.timings = {"environment": built - start, **result.timings, "cell": time.perf_counter() - start}
    return measured


def _line(run: CellRun) -> str:
    counts: dict[str, int] = {}
    for outcome in run.outcomes.values():
        counts[outcome["outcome"]] = counts.get(outcome["outcome"], 0) + 1
    split = ", ".join(f"{name} {run.timings[name]:.1f} s" for name in ("environment", "import jax", "suite", "cell")
                      if name in run.timings)
    tests = ", ".join(f"{n} {name}" for name, n in sorted(counts.items())) or "no tests"
    return f"{tests} · {split}" + (f" · PROBLEM: {run.problem}" if run.problem else "")


def run(cells: Sequence[AtlasCell], family: Family, index: Index, workdir: Path, *, at_once: int = 2,
        progress: Progress = say) -> list[CellRun]:
    """Every cell, ``at_once`` side by side, with a progress line each; results in plan order."""
    wheel = jaxrel_wheel(workdir)
    prefetch(cells, family, index)
    order = {id(c): n for n, c in enumerate(cells, 1)}
    done: dict[int, CellRun] = {}

    def one(item: AtlasCell) -> CellRun:
        progress(f"[{order[id(item)]}/{len(cells)}] {item.label} …")
        return run_cell(item, family, wheel)

    pool = ThreadPoolExecutor(max(1, at_once), thread_name_prefix="atlas")
    try:
        futures = {pool.submit(one, item): item for item in cells}
        for future in as_completed(futures):
            item = futures[future]
            result = future.result()
            done[order[id(item)]] = result
            progress(f"[{order[id(item)]}/{len(cells)}] {item.label}: {_line(result)}")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # on Ctrl-C: no cell starts after it
    return [done[n] for n in sorted(done)]
