"""``jaxrel bisect``: the first frontend commit that broke a cell, found by git's own bisection.

1. The revisions are resolved in the user's checkout (read only); each ``--good`` must be an
   ancestor of ``--bad``. A private bare clone in the work directory borrows its objects
   (:mod:`jaxrel.bisect.git`).
2. The bad revision is built with the cell's interpreter; the cell must be one it admits.
3. The cell's environment is built once, from the newest good revision: its wheel's
   requirements, the verified backend and plugin wheels, its test requirements, resolved as
   of that commit's date (``--deps-as-of`` to change it; uv's ``--exclude-newer``).
4. The endpoints are checked (``--bad`` must fail, every ``--good`` pass), then ``git bisect run``
   calls :mod:`jaxrel.bisect.step` at each revision it picks, or, with ``jobs`` above 1, rounds of
   that many probes side by side tell git their verdicts (:mod:`jaxrel.bisect.multisect`).
5. The answer (:class:`Result`): the first bad commit, or the candidates skips left, with the
   failures there and at its parent, and every step.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from packaging.version import Version

from jaxrel._util import procs, workdirs
from jaxrel._util.progress import Progress
from jaxrel._util.text import tail
from jaxrel.bisect import git, multisect, step
from jaxrel.bisect.git import Commit, Repo, Source
from jaxrel.bisect.inputs import Request, check_inputs, exclude_newer, select_cell
from jaxrel.bisect.records import StepConfig, StepRecord, append, read_records, rewrite
from jaxrel.bisect.step import BAD, GOOD, SKIP
from jaxrel.cells.environment import EnvSettings, environment, jaxrel_wheel
from jaxrel.cells.frontend import PreparedFrontend, build_requirements
from jaxrel.cells.matrix import Cell
from jaxrel.distributions import envs
from jaxrel.distributions.index import Index, IndexClientError
from jaxrel.distributions.pythons import free_threaded, python_for
from jaxrel.distributions.sources import git_environment, git_toplevel
from jaxrel.errors import BadInput, EnvironmentFailure, Refused
from jaxrel.family import Family

__all__ = ["BisectRefused", "Request", "Result", "run"]


class BisectRefused(Refused):
    """The endpoints do not bound a regression in this cell (exit 1); the partial result is kept."""

    def __init__(self, message: str, result: Result) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class Result:
    """The answer, and how it was reached."""

    status: str  # found | candidates | no-regression | good-fails | endpoint-skipped
    cell: str
    bad: str
    goods: list[str]
    commits_in_range: int = 0
    first_bad: Commit | None = None
    merge_brings: list[Commit] = field(default_factory=list)  # a merge culprit: the commits it brought in
    candidates: list[Commit] = field(default_factory=list)  # several commits skips left apart
    at_culprit: StepRecord | None = None
    at_parent: StepRecord | None = None
    steps: list[StepRecord] = field(default_factory=list)
    environment_seconds: float = 0.0
    seconds: float = 0.0
    deps_as_of: str | None = None
    notes: list[str] = field(default_factory=list)
    version_files: tuple[str, ...] = ()  # the family's version files, from the repository's top
    tests: list[str] = field(default_factory=list)  # the selection bisected (paths and node ids)
    keyword: str | None = None  # -k
    message: str = ""

    @property
    def bisect_steps(self) -> int:
        return sum(1 for step in self.steps if step.role == "step")

    @property
    def version_only(self) -> bool:
        """The first bad commit changes nothing but the family's version files: what turned red judged the version
        string, not a change of the code (the history files it as an ``expectation``, not a regression)."""
        files = self.first_bad.files if self.first_bad is not None else ()
        return bool(files) and bool(self.version_files) and set(files) <= set(self.version_files)


COMPAT_PREFIX = "compat suite: "  # how a test of jaxrel's compat suite is named among a bisection's tests


# -- the run -----------------------------------------------------------------------------------------


def _prepared(built: step.Built) -> PreparedFrontend:
    assert built.wheel is not None and built.spec is not None and built.info is not None
    return PreparedFrontend(built.spec, built.wheel, built.info)


def _endpoint_records(request: Request, family: Family, repo: Repo, config: StepConfig, config_path: Path,
                      revs: Sequence[str], prebuilt: dict[str, step.Built], progress: Progress) -> list[StepRecord]:
    """Each endpoint tested, its record charged with the build done before the environment (see
    :func:`_charge_prebuild`) and kept in ``steps.jsonl``: one at a time in this process, or ``jobs`` at a time as
    step processes, each in its own copy of the environment."""
    if request.jobs == 1:
        records = []
        for rev in revs:
            record = step.run_step(config, family, repo, repo.commit(rev), role="endpoint")
            _charge_prebuild(record, prebuilt.get(rev))
            append(config, record)
            records.append(record)
        return records
    for start in range(0, len(revs), request.jobs):
        multisect.run_probes(config_path, [(rev, "endpoint") for rev in revs[start:start + request.jobs]], progress)
    kept = read_records(config.records)
    for record in kept:
        _charge_prebuild(record, prebuilt.get(record.commit))
    rewrite(config, kept)
    by_commit = {record.commit: record for record in kept}
    return [by_commit[rev] for rev in revs]


@procs.in_phase("bisect.step")
def _endpoints(request: Request, family: Family, repo: Repo, config: StepConfig, config_path: Path, result: Result,
               prebuilt: dict[str, step.Built], progress: Progress) -> None:
    """``--bad`` must fail and every ``--good`` pass in the cell; :class:`BisectRefused` otherwise."""
    checks = [(request.bad, result.bad, BAD), *((n, g, GOOD) for n, g in zip(request.goods, result.goods,
                                                                             strict=True))]
    records = _endpoint_records(request, family, repo, config, config_path, [rev for _, rev, _ in checks], prebuilt,
                                progress)
    for (name, rev, wanted), record in zip(checks, records, strict=True):
        result.steps.append(record)
        option = "--bad" if wanted == BAD else "--good"
        progress(f"bisect: endpoint {option} {name}: {record.line()}")
        if record.verdict == wanted:
            continue
        result.status = ("endpoint-skipped" if record.verdict == SKIP
                         else "no-regression" if wanted == BAD else "good-fails")
        why = {"no-regression": f"passes in cell {result.cell} ({record.reason}): no regression to bisect",
               "good-fails": f"fails in cell {result.cell} too ({record.reason}); give an older --good",
               "endpoint-skipped": f"cannot be tested in cell {result.cell}: {record.reason}"}[result.status]
        result.message = f"{option} {name} ({rev[:12]}) {why}"
        raise BisectRefused(result.message, result)


def run(request: Request, family: Family, progress: Progress) -> Result:
    """Bisect; the :class:`Result` (``found`` or ``candidates``). :class:`BisectRefused` when the endpoints
    do not bound a regression; :class:`BadInput` for revisions, cells or tests that cannot be."""
    started = time.perf_counter()
    found = check_inputs(request, family)
    source, bad, goods, python = found.source, found.bad, found.goods, found.python
    interpreter = python_for(python)
    checkout = git_toplevel(request.source) or request.source
    workdir = workdirs.claim(request.workdir, keep_out=[("the frontend checkout", checkout),
                                                         ("its git directory", source.git_dir)])
    repo = Repo.clone(source, workdir / "repo.git")
    repo.fetch_commits([bad, *goods])
    use_uv = (request.use_uv is not False) and envs.find_uv() is not None
    if not use_uv and request.deps_as_of not in (None, "now"):
        raise BadInput("--deps-as-of needs uv (pip has no --exclude-newer): pip install uv, or drop it")
    # a free-threaded cell's tests run without the GIL, as compat's and downstream's do (unless --env says otherwise)
    without_gil = free_threaded(python) and "PYTHON_GIL" not in dict(request.test_env)
    test_env = (*request.test_env, *((("PYTHON_GIL", "0"),) if without_gil else ()))
    config = StepConfig(str(repo.git_dir), source.subdir, request.family, str(workdir),
                        str(workdir / "envs" / "cell"), interpreter.executable, "", "",
                        found.tests, request.keyword, test_env, request.reruns, use_uv)
    index = Index.from_pip(request.index_url, list(request.wheelhouses), refresh=request.refresh, progress=progress)
    config = replace(config, index=asdict(index.pip_config()), suite_tests=tuple(request.suite_tests),
                     tests_root=str(request.tests_root.resolve()) if request.tests_root is not None else "",
                     boxed=request.boxed, hidden=tuple(str(path.resolve()) for path in request.hidden),
                     pytest_options=request.pytest_options)

    # the bad revision decides the cell; the newest good one the environment
    progress(f"bisect: building --bad {request.bad} ({bad[:12]}) with Python {python} …")
    config = _with_build_env(config, repo, source, bad, workdir, interpreter.executable, index, use_uv)
    newest_good = sorted((repo.commit(good) for good in goods), key=lambda c: c.date)[-1]
    with ThreadPoolExecutor(2) as builders:  # the good revision builds beside the bad one (both cores)
        good_building = builders.submit(step.build, config, family, repo, newest_good.hash, workdir / "step-good",
                                        with_tests=False)
        bad_built = step.build(config, family, repo, bad, workdir / "step", with_tests=False)
        good_built = good_building.result()
    if bad_built.wheel is None:
        raise Refused(f"--bad {request.bad} ({bad[:12]}) cannot be tested: it {bad_built.reason}")
    if good_built.wheel is None:
        raise Refused(f"--good {newest_good.short} cannot be tested: it {good_built.reason}")
    cell, more_cells = _cells(request, family, index, found.version, found.plugin_set, python,
                              bad_built, good_built, newest_good)
    config = replace(config, env_root=str(workdir / "envs" / cell.id), cell=cell.id,
                     backend=f"{family.backend.distribution} {cell.backend}",
                     more_envs=tuple((other.backend, str(workdir / "envs" / other.id)) for other in more_cells))
    selection = list(found.tests) or [f"{COMPAT_PREFIX}{t}" for t in request.suite_tests]
    result = Result("", cell.id, bad, goods, repo.count(bad, goods), tests=selection, keyword=request.keyword)
    progress(f"bisect: {result.commits_in_range} commits between {len(goods)} good and the bad revision; "
             f"cell {cell.id}; tests {' '.join(selection)}" + (f" -k {request.keyword}" if request.keyword else ""))
    if without_gil:
        result.notes.append(f"free-threaded: each step's tests ran with PYTHON_GIL=0 (Python {python})")
    for other in more_cells:
        result.notes.append(f"the revisions whose own rules refuse {family.backend.distribution} {cell.backend} "
                            f"(--bad {request.bad} among them) ran with {other.backend}, in an environment of its own")
    as_of = exclude_newer(request, newest_good.date) if use_uv else None
    if not use_uv:
        result.notes.append("uv is not installed: the test requirements were resolved as of now")
    result.deps_as_of = as_of or "now"
    progress(f"bisect: building the environment of {cell.id} once (requirements of {newest_good.short}, "
             f"resolved as of {result.deps_as_of}) …")
    env_start = time.perf_counter()
    requirements = _test_requirements(request, family, repo, source, newest_good.hash, workdir)
    settings = EnvSettings(workdir=workdir, index=index, use_uv=use_uv, exclude_newer=as_of,
                           bytecode=workdir / "pycache", test_requirements=requirements)
    try:
        with procs.phase("bisect.environment"):
            environment(cell, family, _prepared(good_built), jaxrel_wheel(workdir),
                        _resolving(request, settings, good_built, cell))
            for other in more_cells:  # the same requirements, as of the same time: only the backend differs
                environment(other, family, _prepared(bad_built), jaxrel_wheel(workdir),
                            _resolving(request, settings, bad_built, other))
    except (envs.EnvError, IndexClientError) as error:
        raise EnvironmentFailure(f"the environment of {cell.id} could not be built: {error}") from None
    result.environment_seconds = time.perf_counter() - env_start
    config.records.unlink(missing_ok=True)
    config_path = workdir / "step.json"
    config.save(config_path)
    if request.jobs > 1:
        progress(f"bisect: {request.jobs} probes a round, each in its own copy of the environment")
    with ThreadPoolExecutor(request.jobs) as slots:  # each slot's copy made and its bytecode compiled side by side
        list(slots.map(lambda slot: multisect.prepare_slot(config, family, slot), range(request.jobs)))

    try:  # the endpoints, then git's bisection
        _endpoints(request, family, repo, config, config_path, result, {bad: bad_built, newest_good.hash: good_built},
                   progress)
        outcome = _bisect(repo, bad, goods, config_path, request.jobs, progress)
        result.steps = read_records(config.records)
        result.version_files = tuple(source.path(part.version_file) for part in (family.frontend, family.backend))
        _conclude(result, outcome, config, family, repo)
        repo.reset()
    finally:
        result.seconds = time.perf_counter() - started
    return result


def _cells(request: Request, family: Family, index: Index, version: str, plugin_set: str | None, python: str,
           bad_built: step.Built, good_built: step.Built, newest_good: Commit) -> tuple[Cell, list[Cell]]:
    """The cell (the bad revision's, as the matrix forms it), and the cells of the other backends the steps may
    need: when the bad revision refuses the cell's backend and ``request.more_backends`` are given, the cell is
    the newest good revision's and the bad one takes the newest of those it admits (a release commit pinning
    its own backend, as every jax release since 0.4.32 does)."""
    try:
        return select_cell(family, index, _prepared(bad_built), python, version, plugin_set, request.bad), []
    except BadInput:
        if not request.more_backends:
            raise
    cell = select_cell(family, index, _prepared(good_built), python, version, plugin_set, newest_good.short)
    refusal = None
    for other in sorted(request.more_backends, key=Version, reverse=True):
        try:
            return cell, [select_cell(family, index, _prepared(bad_built), python, other, plugin_set, request.bad)]
        except BadInput as error:
            refusal = refusal or error
    assert refusal is not None
    raise refusal


@procs.in_phase("bisect.build")
def _with_build_env(config: StepConfig, repo: Repo, source: Source, bad: str, workdir: Path, python: str,
                    index: Index, use_uv: bool) -> StepConfig:
    """``config`` with a build environment made once from the bad revision's ``[build-system] requires``: each
    revision declaring the same builds in it, not in a fresh isolated one (about a second of a step's build).
    Unchanged when the revision declares none, or without uv."""
    shown = repo.run("show", f"{bad}:{source.path('pyproject.toml')}", check=False)
    requires = build_requirements(shown.stdout) if shown.returncode == 0 else None
    if not requires or not use_uv:
        return config
    try:
        env = envs.create(workdir / "build-env", python=python, requirements=requires, index=index.pip_config())
    except envs.EnvError:
        return config  # every revision builds isolated, as without it
    return replace(config, build_env=str(env.root), build_requires=tuple(requires))


def _charge_prebuild(record: StepRecord, built: step.Built | None) -> None:
    """An endpoint built before the environment (to choose the cell, to fill the environment) is
    charged that build: its step found the wheel in the cache only because this run put it there."""
    if built is None or built.cached:
        return
    record.cached = False
    record.seconds["export"] = round(record.seconds.get("export", 0.0) + built.export_seconds, 2)
    record.seconds["build+install"] = round(record.seconds.get("build+install", 0.0) + built.build_seconds, 2)


def _resolving(request: Request, settings: EnvSettings, built: step.Built, cell: Cell) -> EnvSettings:
    """``settings`` for ``cell``'s environment. For a library's tests (downstream), its requirements name the
    revision's wheel as well, so that the library's own requirement on the frontend resolves to that wheel (as the
    Crater's environments do), not to a release from the index whose pin may refuse the cell's backend."""
    if request.tests_root is None or settings.test_requirements is None or built.wheel is None:
        return settings
    path = settings.test_requirements.with_name(f"test-requirements-{cell.id}.txt")
    path.write_text(settings.test_requirements.read_text(encoding="utf-8") + f"{built.wheel}\n", encoding="utf-8")
    return replace(settings, test_requirements=path)


def _test_requirements(request: Request, family: Family, repo: Repo, source: Source, rev: str, workdir: Path
                       ) -> Path | None:
    """The tests' requirements file: a library's (downstream), else the family's declared one at ``rev``."""
    path, declared = workdir / "test-requirements.txt", family.frontend.test_requirements
    if request.tests_root is not None:
        path.write_text("".join(f"{line}\n" for line in request.requirements), encoding="utf-8")
        return path
    done = repo.run("show", f"{rev}:{source.path(declared)}", check=False) if declared else None
    if done is None or done.returncode != 0:
        return None
    path.write_text(done.stdout, encoding="utf-8")
    return path


@procs.in_phase("bisect.step")
def _bisect(repo: Repo, bad: str, goods: Sequence[str], config_path: Path, jobs: int,
            progress: Progress) -> git.Outcome:
    """``git bisect start``, then ``git bisect run`` of the step module in the private clone, or rounds of ``jobs``
    probes whose verdicts git is told (:func:`jaxrel.bisect.multisect.search`)."""
    for line in repo.start(bad, goods).splitlines():
        if line.startswith("Bisecting:"):
            progress(f"bisect: {line}")
    if jobs > 1:
        try:
            outcome = multisect.search(repo, config_path, jobs, progress)
        except BaseException:
            repo.reset()
            raise
        if not outcome.candidates:
            raise EnvironmentFailure(f"git bisect ended without an answer: {tail(outcome.output, 4)}")
        return outcome
    env = git_environment()
    env.pop("PYTHONPATH", None)
    outcome = repo.bisect_run([sys.executable, "-m", "jaxrel.bisect.step", str(config_path)], env, progress)
    if not outcome.candidates:
        raise EnvironmentFailure(f"git bisect run ended without an answer: {tail(outcome.output, 4)}")
    return outcome


def _conclude(result: Result, outcome: git.Outcome, config: StepConfig, family: Family, repo: Repo) -> None:
    records = {step.commit: step for step in result.steps}
    if outcome.first_bad is None:
        result.status = "candidates"
        result.candidates = [repo.commit(c, files=True) for c in outcome.candidates]
        result.message = (f"skipped commits leave {len(outcome.candidates)} candidates for the first bad commit: "
                          + ", ".join(c.short for c in result.candidates))
        return
    result.status = "found"
    culprit = result.first_bad = repo.commit(outcome.first_bad, files=True)
    result.at_culprit = records.get(culprit.hash)
    if culprit.merge:
        listing = repo.run("rev-list", "--no-merges", "--max-count=50", f"{culprit.parents[0]}..{culprit.hash}")
        result.merge_brings = [repo.commit(h) for h in listing.stdout.split()]
    parent = culprit.parents[0] if culprit.parents else None
    if parent is not None:
        result.at_parent = records.get(parent)
        if result.at_parent is None:  # git knew it good without testing it (an ancestor of a good one)
            record = step.run_step(config, family, repo, repo.commit(parent), role="parent")
            append(config, record)
            result.steps.append(record)
            result.at_parent = record
    before = result.at_parent.backend if result.at_parent else ""
    at = result.at_culprit.backend if result.at_culprit else ""
    if before and at and before != at:
        result.notes.append(f"the backend changed at the first bad commit ({family.backend.distribution} {before} at "
                            f"its parent, {at} there): the failure may come with the backend, not the commit")
    result.message = (f"first bad commit {culprit.short} {culprit.subject}"
                      + (" (a merge)" if culprit.merge else ""))
