"""``jaxrel downstream``'s two jobs, end to end: the true minimum of library releases, and a Crater of a frontend
built from source against the newest release over many libraries."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrel import policy
from jaxrel._util import localfiles, procs, workdirs
from jaxrel.cells import box
from jaxrel.cells.admitted import admitted_backends, built_admits
from jaxrel.cells.environment import jaxrel_wheel
from jaxrel.cells.frontend import CompatError, build_wheel
from jaxrel.distributions import envs
from jaxrel.distributions.index import Index
from jaxrel.distributions.metadata import parse_core_metadata
from jaxrel.distributions.pages import parse_time
from jaxrel.distributions.pythons import python_for
from jaxrel.distributions.remote_metadata import MetadataReader, metadata_of_local
from jaxrel.distributions.sources import SourceError, commit_time, export
from jaxrel.downstream import crater as crater_module
from jaxrel.downstream import library as libraries
from jaxrel.downstream import minimum as minimum_module
from jaxrel.downstream import testsource
from jaxrel.downstream.cards import DEFAULT_BUDGET, Card, Learned, budget_for, shard
from jaxrel.downstream.cellrun import CellResult, CellSpec, Settings, run_cell
from jaxrel.downstream.library import Library, LibraryError
from jaxrel.downstream.lines import LibraryLine, library_line, read_libraries
from jaxrel.downstream.schedule import DEFAULT_PEAK, Job, available_memory, run_jobs
from jaxrel.errors import BadInput, EnvironmentFailure
from jaxrel.family.model import Family

__all__ = ["LibraryLine", "Request", "build_frontend", "card_of", "carded_libraries", "crater", "library_line",
           "minimum", "read_libraries", "where_tests"]

Progress = Callable[[str], None]


def carded_libraries(cards: Mapping[str, Card], part: tuple[int, int] | None = None,
                     seconds: Mapping[str, float] | None = None) -> tuple[str, ...]:
    """The Crater's default: every runnable card's library (``part``: shard I of N, split by ``seconds``, each
    library's expected time, else its card's budget)."""
    runnable = [name for name, card in cards.items() if card.runnable]
    if part is not None:
        expected = {name: (seconds or {}).get(name, cards[name].budget or DEFAULT_BUDGET) for name in runnable}
        runnable = shard(runnable, expected, *part)
    return tuple(runnable)


@dataclass(frozen=True)
class Request:
    """What the command line asked for."""

    libraries: tuple[str, ...]  # NAME or NAME==VERSION, each maybe with repo=URL|PATH and test paths (library_line)
    workdir: Path
    python: str = "3.12"
    library_src: Path | None = None
    library_repo: str | None = None
    tests: tuple[str, ...] = ()
    keyword: str | None = None
    test_requirements: Path | None = None
    smoke: str | None = None
    sweep: bool = False
    budget: float = DEFAULT_BUDGET
    reruns: int = 1
    frontend_src: Path | None = None
    ref: str | None = None
    offline: bool = True
    test_env: tuple[tuple[str, str], ...] = ()
    index_url: str | None = None
    wheelhouses: tuple[str, ...] = ()
    refresh: bool = False
    use_uv: bool = True
    baseline: str | None = None  # crater: the frontend release to compare against (default: the newest)
    boxed: bool = True  # the libraries' tests in the box (cells.box); False only when the user said --unboxed
    cards: Mapping[str, Card] = field(default_factory=dict)  # a line's library takes its card (its own options first)
    learned: Mapping[str, Learned] = field(default_factory=dict)  # each library's last passing run (history store)
    jobs: int = 1  # crater: libraries at once (memory-aware: jaxrel.downstream.schedule)


def _settings(request: Request, family: Family, workdir: Path, index: Index) -> Settings:
    if request.boxed and (why := box.unavailable()) is not None:
        raise EnvironmentFailure(f"other people's tests run in a box, which cannot be made here: {why}")
    interpreter = python_for(request.python)
    requirements: tuple[str, ...] = ()
    if request.test_requirements is not None:
        requirements = testsource.requirement_lines(localfiles.read_text(request.test_requirements,
                                                                         what="--test-requirements"))
    use_uv = request.use_uv and envs.find_uv() is not None
    return Settings(family, workdir, interpreter.executable, request.python, jaxrel_wheel(workdir),
                    index.pip_config(), request.budget, request.reruns, use_uv, request.offline, request.keyword,
                    request.test_env, requirements, boxed=request.boxed,
                    hidden=(request.frontend_src,) if request.frontend_src is not None else ())


def card_of(request: Request, line: str | None) -> Card | None:
    """The card of a line's library (``optax``, ``optax==0.2.8 repo=… TESTS``), when it has one."""
    return request.cards.get(_name(line)) if line else None


def _library(request: Request, spec: str | None, family: Family, index: Index, reader: MetadataReader,
             released_before: datetime.datetime | None = None) -> Library:
    if request.library_src is not None:
        return libraries.from_checkout(request.library_src, family, request.python)
    assert spec is not None
    name, version = libraries.parse_library_spec(library_line(spec).spec)
    card = card_of(request, spec)
    return libraries.from_index(index, name, version, family, request.python, reader, released_before,
                                assumed=card.assume if card else None)


def where_tests(request: Request, line: str | None) -> tuple[tuple[str, ...], bool, str | None]:
    """A library's selection, whether it is only a preference (its card's, chosen at its newest release), and its
    repository: the line's own, else the command line's (``--tests``, ``--library-repo``), else its card's."""
    own, card = library_line(line) if line else LibraryLine(""), card_of(request, line)
    selection = own.tests or request.tests or (card.tests if card else ())
    repository = own.repository or request.library_repo or (card.repository if card else None)
    return selection, not (own.tests or request.tests) and bool(selection), repository


def _stage(request: Request, line: str | None, library: Library, workdir: Path, index: Index, progress: Progress
           ) -> testsource.StagedTests:
    selection, preferred, repository = where_tests(request, line)
    card = card_of(request, line)
    return testsource.stage(library, workdir / "stage" / library.name, index=index, selection=selection,
                            preferred=preferred, repository=repository,
                            smoke=request.smoke or (card.smoke if card and card.route == "smoke" else None),
                            progress=progress, files=card.files if card else (), tag=card.tag if card else None,
                            from_repository=bool(card and card.route == "repository"))


def _name(line: str | None) -> str:
    """The canonical name of a line's library ("" for none: the checkout)."""
    return str(canonicalize_name(libraries.parse_library_spec(library_line(line).spec)[0])) if line else ""


def _job(request: Request, line: str | None) -> Job[str | None]:
    """A library's run as the scheduler sees it: its expected time and peak memory (learned, else its budget and a
    flat guess)."""
    learned = request.learned.get(_name(line))
    if learned is not None:
        return Job(line, learned.seconds, learned.peak_bytes or DEFAULT_PEAK)
    card = card_of(request, line)
    return Job(line, (card.budget if card and card.budget else None) or request.budget, DEFAULT_PEAK)


def _budgeted(settings: Settings, request: Request, line: str | None) -> tuple[Settings, str]:
    """``settings`` with the library's budget (the line's own, else learned from its last passing run, else its
    card's, else the default) and where it came from, and its card's test requirements and ``-k``."""
    card = card_of(request, line)
    own = library_line(line).budget if line else None
    budget, why = (own, "its line") if own is not None else budget_for(card, request.learned.get(_name(line)),
                                                                       settings.budget)
    settings = replace(settings, budget=budget)
    if card is not None and card.test_requirements and not settings.test_requirements:
        settings = replace(settings, test_requirements=card.test_requirements)
    if card is not None and card.keyword and not settings.keyword:
        settings = replace(settings, keyword=card.keyword)
    return settings, why


def build_frontend(source: Path, ref: str | None, workdir: Path, python: str, index: Index) -> tuple[Path, str]:
    """The frontend built from ``source`` at ``ref`` (the working tree when ``None``): its wheel and a label."""
    try:
        tree, what = export(source, workdir / "frontend-src", ref)
        wheel = build_wheel(tree, workdir / "frontend-wheel", python=python, index=index.pip_config())
    except (SourceError, CompatError) as error:
        raise BadInput(f"--frontend-src {source}: {error}") from None
    except envs.EnvError as error:
        raise EnvironmentFailure(f"building the frontend from {source}: {error}") from None
    return wheel, what


def _newest_backend(family: Family, index: Index, python: str, admitted: str) -> str:
    listing = index.listing(family.backend.distribution)
    tags = python_for(python).tags()
    specifier = SpecifierSet(admitted)
    found = [v for v in listing.versions() if specifier.contains(v, prereleases=True)
             and listing.wheel_for(v, python, tags) is not None]
    if not found:
        raise EnvironmentFailure(f"no {family.backend.distribution} release admitted by the frontend "
                                 f"({admitted or 'any'}) has a wheel for Python {python} on "
                                 f"{', '.join(index.describe())}")
    return str(found[-1])


def _head_cell(request: Request, family: Family, index: Index, settings: Settings, library: Library,
               tests: testsource.StagedTests, workdir: Path, progress: Progress) -> CellResult:
    assert request.frontend_src is not None
    progress(f"downstream: building {family.frontend.distribution} from {request.frontend_src} …")
    wheel, what = build_frontend(request.frontend_src, request.ref, workdir, settings.python, index)
    backend = _newest_backend(family, index, request.python, str(built_admits(wheel, family)))
    spec = CellSpec(f"HEAD {what}", backend, None, wheel)
    return run_cell(library, tests, spec, settings, role="edge")


def minimum(request: Request, family: Family, progress: Progress) -> list[minimum_module.MinimumResult]:
    """The true minimum of each library release asked for."""
    workdir = workdirs.claim(request.workdir)
    index = Index.from_pip(request.index_url, list(request.wheelhouses), refresh=request.refresh, progress=progress)
    reader = MetadataReader(cafile=index.cafile)
    settings = _settings(request, family, workdir, index)
    specs: tuple[str | None, ...] = request.libraries or (None,)
    results = []
    for spec in specs:
        start = time.perf_counter()
        library = _library(request, spec, family, index, reader)
        tests = _stage(request, spec, library, workdir, index, progress)
        progress(f"downstream: {library.label}: tests from its {tests.route}: {' '.join(tests.paths) or tests.smoke}")
        result = minimum_module.MinimumResult(library.name, library.version, request.python,
                                              family.frontend.distribution,
                                              library.declared_minimum(family, request.python), tests.route,
                                              uploaded=library.uploaded, boxed=request.boxed)
        found = minimum_module.candidates(library, family, index, request.python, reader)
        progress(f"downstream: {library.label} admits {len(found)} {family.frontend.distribution} releases "
                 f"({sum(1 for c in found if not c.problem)} installable here)")

        own, _ = _budgeted(settings, request, spec)

        def run(cell_spec: CellSpec, role: str, library: Library = library, tests: testsource.StagedTests = tests,
                own: Settings = own, result: minimum_module.MinimumResult = result) -> CellResult:
            cell = run_cell(library, tests, cell_spec, own, role)
            collected = any(c.outcome in ("passed", "failed") for c in result.cells)
            if cell.outcome == "infra" and cell.reason.startswith("collected nothing") and tests.selected \
                    and not collected:  # bad input only before any cell collected it: no measured cell is lost
                raise LibraryError(f"--tests {' '.join(tests.paths)}: the selection collects nothing in "
                                   f"{library.label}'s tests ({tests.route}); give tests that exist "
                                   f"({cell.reason.removeprefix('collected nothing: ')[:200]})")
            return cell

        minimum_module.search(result, found, run, sweep=request.sweep, progress=progress)
        installable = [c for c in found if not c.problem]
        if installable:
            newest = installable[-1]
            tested = {(c.jax, c.jaxlib) for c in result.cells}
            if (str(newest.version), str(newest.backends[-1])) not in tested:
                result.cells.append(run(newest.spec(newest.backends[-1]), "edge"))
        if request.frontend_src is not None:
            result.cells.append(_head_cell(request, family, index, own, library, tests, workdir, progress))
        result.seconds = time.perf_counter() - start
        results.append(result)
    return results


@dataclass(frozen=True)
class Sides:
    """The Crater's two sides, each with the backend its own frontend admits (one environment when it is the same
    backend, two otherwise), and how the baseline was chosen."""

    baseline: CellSpec
    candidate_backend: str
    uploaded: str  # when the baseline release reached the index
    why: str  # how the baseline was chosen, in words


def _sides(family: Family, index: Index, python: str, reader: MetadataReader, candidate_wheel: Path,
           wanted: str | None, committed: datetime.datetime | None) -> Sides:
    """The baseline release: ``wanted``; else the newest final release uploaded before the candidate's commit
    (``committed``) whose release numbers are below the candidate's (a release tag's own release is
    never its baseline). The baseline takes the newest backend it admits; the candidate the same one when it admits
    it too (one environment, only the frontend swapped), else the newest it admits (every jax release since 0.4.32
    pins its own jaxlib)."""
    listing = index.listing(family.frontend.distribution)
    finals = [v for v in listing.versions() if not v.is_prerelease and not v.is_devrelease]
    candidate = Version(parse_core_metadata(metadata_of_local(candidate_wheel), candidate_wheel.name,
                                            BadInput).version)
    name = family.frontend.distribution
    if wanted is not None:
        if Version(wanted) not in listing.versions():
            raise BadInput(f"--baseline {wanted}: the index serves no {name} {wanted}; give a release it has")
        finals, why = [Version(wanted)], f"{name} {wanted}, as --baseline asked"
    else:
        below = [v for v in finals if policy.release_key(v) < policy.release_key(candidate)]
        dated = [v for v in below if committed is None or not (up := listing.first_upload(v))
                 or parse_time(up) <= committed]
        finals = dated or below
        when = (f"uploaded before the candidate's commit ({committed:%Y-%m-%d})" if committed and dated
                else "on the index")
        why = (f"the newest {name} release {when} below the candidate's {policy.release_text(candidate)}"
               if finals else "")
    if not finals:
        raise EnvironmentFailure(f"the index lists no {name} release before the candidate "
                                 f"{policy.release_text(candidate)} to compare against; pass --baseline VERSION")
    newest = finals[-1]
    file = next((f for f in listing.files_for(newest) if f.is_wheel), None)
    requires = reader.metadata(file).requires_dist if file is not None else ()
    own = admitted_backends(family, newest, requires)
    uploaded = minimum_module.uploaded_at(listing, newest, file) if file is not None else ""
    baseline = CellSpec(str(newest), _newest_backend(family, index, python, str(own)))
    candidate_admits = built_admits(candidate_wheel, family)
    candidate_backend = (baseline.backend if candidate_admits.contains(baseline.backend, prereleases=True)
                         else _newest_backend(family, index, python, str(candidate_admits)))
    return Sides(baseline, candidate_backend, uploaded, f"{newest}: {why}")


Bisector = Callable[[crater_module.LibraryVerdict, Library, testsource.StagedTests, Settings], None]


def crater(request: Request, family: Family, progress: Progress, bisect: Bisector | None = None
           ) -> crater_module.CraterResult:
    """Each library's newest release (or the checkout) against the newest frontend release and the one built from
    ``request.frontend_src`` at ``request.ref``; ``bisect`` is called for each regressed library."""
    if request.frontend_src is None:
        raise BadInput("crater needs the frontend's source: --frontend-src PATH [--ref REV]")
    workdir = workdirs.claim(request.workdir)
    start = time.perf_counter()
    index = Index.from_pip(request.index_url, list(request.wheelhouses), refresh=request.refresh, progress=progress)
    reader = MetadataReader(cafile=index.cafile)
    settings = _settings(request, family, workdir, index)
    progress(f"crater: building {family.frontend.distribution} from {request.frontend_src} at "
             f"{request.ref or 'the working tree'} …")
    wheel, what = build_frontend(request.frontend_src, request.ref, workdir, settings.python, index)
    commit = what.split()[1] if what.startswith("git ") else ""
    committed = commit_time(request.frontend_src, request.ref)
    sides = _sides(family, index, request.python, reader, wheel, request.baseline, committed)
    baseline = sides.baseline
    progress(f"crater: baseline {family.frontend.distribution} {sides.why}; backends: {baseline.backend} (baseline), "
             f"{sides.candidate_backend} (candidate)")
    result = crater_module.CraterResult(f"{family.frontend.distribution} {what}", commit, baseline.frontend,
                                        request.python, boxed=request.boxed, baseline_why=sides.why,
                                        backends=(baseline.backend, sides.candidate_backend),
                                        libraries_as_of=f"{committed:%Y-%m-%d}" if committed else "")
    specs: tuple[str | None, ...] = request.libraries or (None,)

    Prepared = tuple[Library, testsource.StagedTests, Settings]  # what a regressed library's bisection takes

    def one(spec: str | None) -> tuple[crater_module.LibraryVerdict, Prepared | None]:
        try:
            library = _library(request, spec, family, index, reader, committed)
            tests = _stage(request, spec, library, workdir, index, progress)
        except (LibraryError, EnvironmentFailure) as error:
            if len(specs) == 1:
                raise
            name = library_line(spec).spec if spec else str(request.library_src)
            progress(f"crater: {name}: broken: {error}")
            return crater_module.LibraryVerdict(name, "", "broken", f"cannot be prepared: {error}"), None
        era = replace(baseline, as_of=minimum_module.era(library.uploaded, sides.uploaded))
        own, budget_from = _budgeted(settings, request, spec)
        verdict = crater_module.run_library(library, tests, era, wheel, f"HEAD {what}", own, progress,
                                            candidate_backend=sides.candidate_backend)
        verdict.budget, verdict.budget_from = own.budget, budget_from
        progress(f"crater: {library.label}: {verdict.outcome}: {verdict.reason[:160]}")
        return verdict, (library, tests, own)

    capacity = available_memory() if request.jobs > 1 else None
    done = run_jobs([_job(request, spec) for spec in specs], one, request.jobs, capacity,
                    started=lambda spec, running: progress(
                        f"crater: {_name(spec) or 'the checkout'}: started ({running} running)")
                    if request.jobs > 1 else None)
    staged = {verdict.name: prepared for verdict, prepared in done if prepared is not None}
    result.libraries = [verdict for verdict, _ in done]
    result.jobs, result.memory_capacity = request.jobs, capacity
    crater_module.group(result.libraries)
    if bisect is not None:
        for verdict in result.libraries:
            if verdict.outcome == "regressed" and verdict.name in staged:
                library, tests, own = staged[verdict.name]  # its own settings: its card's test requirements
                with procs.phase("downstream.bisection"):
                    bisect(verdict, library, tests, own)
    result.seconds = time.perf_counter() - start
    return result

