"""``jaxrel downstream``: libraries built on the family, tested against every frontend and backend they admit (their
true minimum), and a Crater of a frontend built from source over many libraries, regressions bisected."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from jaxrel.bisect import inputs as bisect_inputs
from jaxrel.bisect import report as bisect_report
from jaxrel.bisect import search as bisect_search
from jaxrel.bisect.git import git
from jaxrel.cli._common import UsageError, add_common, add_env_option, env_pairs, index_options, say
from jaxrel.cli._record import add_record_options, record
from jaxrel.downstream import report, run
from jaxrel.downstream.cards import DEFAULT_BUDGET, Card, Learned, load_cards, parse_shard
from jaxrel.downstream.cellrun import Settings, test_requirements
from jaxrel.downstream.crater import LibraryVerdict
from jaxrel.downstream.library import Library, parse_library_spec
from jaxrel.downstream.testsource import StagedTests
from jaxrel.errors import EnvironmentFailure, ExitCode, JaxrelError
from jaxrel.family import Family, resolve_family

HELP = "Libraries built on the family: their true minimum frontend, and a Crater of a frontend built from source."


def _library_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--libraries", metavar="A,B==V|@FILE",
                     help="several libraries (comma-separated NAME[==VERSION], or a file of them, one a line)")
    sub.add_argument("--library-src", metavar="PATH", help="a checkout of the library (its pyproject read) instead")
    sub.add_argument("--library-repo", metavar="URL|PATH",
                     help="where its tests are when its sdist has none (default: the Project-URL of its METADATA); "
                          "looked up at the tags vX, X, NAME-vX")
    sub.add_argument("--tests", action="extend", nargs="+", default=[], metavar="PATH|NODEID",
                     help="the library's tests to run, relative to its top (default: tests/ or its test modules)")
    sub.add_argument("-k", metavar="EXPR", help="narrow the tests (pytest -k)")
    sub.add_argument("--test-requirements", metavar="FILE",
                     help="requirements for the tests (default: the library's test extra)")
    sub.add_argument("--smoke", metavar="CODE", help="run this Python code instead of tests (a library without any)")
    sub.add_argument("--python", default="3.12", metavar="3.N", help="the cells' Python (default 3.12)")
    sub.add_argument("--budget", type=float, default=DEFAULT_BUDGET, metavar="SECONDS",
                     help="each test run's time budget where its card gives none and no passing run of it is kept; "
                          f"past it the run is killed (infra: timeout) (default {DEFAULT_BUDGET:g})")
    sub.add_argument("--reruns", type=int, default=1, metavar="N", help="rerun failing tests N times (default 1)")
    sub.add_argument("--network", action="store_true",
                     help="let the tests use the network (default: none, where the machine allows it)")
    sub.add_argument("--unboxed", action="store_true",
                     help="run the libraries' tests outside the box (bubblewrap: own PID and network namespaces, "
                          "read-only root, private home, memory and process limits) where it cannot be made; "
                          "every report says so")
    sub.add_argument("--cards", metavar="FILE",
                     help="the library cards (default: jaxrel's own, jaxrel/data/downstream-cards.toml): a carded "
                          "library takes its card's tests, repository, budget, test requirements and assumed "
                          "frontend requirement where its line and the options do not say")
    add_env_option(sub)
    index_options(sub)


def add(verbs: Any) -> None:
    parser = verbs.add_parser("downstream", help=HELP, description=HELP)
    jobs = parser.add_subparsers(dest="job", required=True)
    sub = add_common(jobs.add_parser("minimum", help="a library release's true minimum frontend",
                                     description="Test a library release against the frontend releases it admits "
                                                 "(a search), each with its oldest and newest admitted backend, in "
                                                 "environments of their era; print declared vs true minimum."))
    sub.add_argument("library", nargs="?", metavar="NAME[==VERSION]",
                     help="a released library (its newest release when no version)")
    _library_options(sub)
    sub.add_argument("--sweep", action="store_true", help="test every admitted release instead of searching")
    sub.add_argument("--frontend-src", metavar="PATH", help="also test the frontend built from this checkout (HEAD)")
    sub.add_argument("--ref", metavar="REV", help="with --frontend-src: this revision (default: the working tree)")
    sub.add_argument("--workdir", default="build/downstream", metavar="DIR",
                     help="environments, staged tests and the reports minimum.{json,txt,md}")
    sub.set_defaults(run=run_minimum)
    sub = add_common(jobs.add_parser("crater", help="libraries against a frontend built from source and the newest "
                                                    "release; regressions grouped and bisected",
                                     description="Each library's newest release tested against the newest frontend "
                                                 "release and the frontend built from --frontend-src at --ref, in one "
                                                 "environment; outcomes regressed, fixed, spurious, broken, test-pass, "
                                                 "test-fail; regressions grouped by error and bisected."))
    _library_options(sub)
    sub.add_argument("--frontend-src", required=True, metavar="PATH", help="the frontend's git checkout")
    sub.add_argument("--ref", metavar="REV", help="the revision to test (default: the working tree)")
    sub.add_argument("--baseline", metavar="VERSION",
                     help="the frontend release to compare against (default: the newest on the index)")
    sub.add_argument("--good", metavar="REV",
                     help="where bisection starts (default: the baseline release's tag, NAME-vX, vX or X)")
    sub.add_argument("--no-bisect", action="store_true", help="do not bisect regressed libraries")
    sub.add_argument("--jobs", type=int, default=1, metavar="N",
                     help="libraries at once (default 1); each started only while the peak memory expected of those "
                          "running (their last passing runs', from --record's store) fits in what the machine has")
    add_record_options(sub)
    sub.add_argument("--history", metavar="DB",
                     help="learn each library's budget and expected memory from this history store (read only; "
                          "default: --record's)")
    sub.add_argument("--shard", metavar="I/N",
                     help="without --libraries: only shard I of N of the carded libraries, split evenly by their "
                          "expected times (learned from --history/--record's store, else their budgets): every job "
                          "of a CI matrix computes the same split")
    sub.add_argument("--workdir", default="build/crater", metavar="DIR",
                     help="environments, staged tests, bisections and the reports crater.{json,txt,md}")
    sub.set_defaults(run=run_crater)


def _request(args: argparse.Namespace, libraries: tuple[str, ...], cards: Mapping[str, Card] | None = None
             ) -> run.Request:
    if args.budget <= 0 or args.reruns < 0:
        raise UsageError("--budget must be positive and --reruns at least 0")
    return run.Request(
        libraries, Path(args.workdir), args.python, Path(args.library_src).absolute() if args.library_src else None,
        args.library_repo, tuple(args.tests), args.k, Path(args.test_requirements) if args.test_requirements else None,
        args.smoke, getattr(args, "sweep", False), args.budget, args.reruns,
        Path(args.frontend_src).absolute() if args.frontend_src else None, args.ref, not args.network,
        env_pairs(args.env), args.index_url, tuple(args.wheelhouse), args.refresh,
        baseline=_version(getattr(args, "baseline", None), "--baseline"), boxed=not args.unboxed,
        cards=load_cards(Path(args.cards) if args.cards else None) if cards is None else cards)


def _version(text: str | None, option: str) -> str | None:
    if text is None:
        return None
    try:
        return str(Version(text))
    except InvalidVersion:
        raise UsageError(f"{option} {text[:60]!r}: not a PEP 440 version (e.g. 0.7.0)") from None


def _libraries(args: argparse.Namespace, named: str | None) -> tuple[str, ...]:
    given = [x for x in (named, args.libraries, args.library_src) if x]
    if len(given) > 1:
        raise UsageError("name one library, or --libraries, or --library-src: not several")
    if named:
        parse_library_spec(named)
        return (named,)
    if args.libraries:
        return run.read_libraries(args.libraries)
    return ()


def run_minimum(args: argparse.Namespace) -> int:
    libraries = _libraries(args, args.library)
    if not libraries and not args.library_src:
        raise UsageError("which library? give NAME[==VERSION], --libraries A,B or --library-src PATH")
    family = resolve_family(args.family)
    request = _request(args, libraries)
    results = run.minimum(request, family, say)
    data: dict[str, Any] = {"results": [r.to_json() for r in results]} if len(results) > 1 else results[0].to_json()
    text = "\n\n".join(report.minimum_text(r) for r in results)
    report.write(request.workdir, "minimum", data, text, report.minimum_markdown(results))
    print(json.dumps(data, indent=2) if args.json else text)
    return ExitCode.REFUSED if any(r.fix for r in results) else ExitCode.OK  # a declared minimum is false


def _good(args: argparse.Namespace, family: Family, baseline: str) -> str:
    if args.good:
        return str(args.good)
    source = Path(args.frontend_src)
    for tag in (f"{family.frontend.distribution}-v{baseline}", f"v{baseline}", baseline):
        done = git("rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}", cwd=source, check=False)
        if done.returncode == 0:  # a release tagged on a branch: where it left the main line
            base = git("merge-base", done.stdout.strip(), args.ref or "HEAD", cwd=source, check=False)
            return base.stdout.strip() if base.returncode == 0 and base.stdout.strip() else tag
    raise UsageError(f"no tag of {family.frontend.distribution} {baseline} in {args.frontend_src} (tried "
                     f"{family.frontend.distribution}-v{baseline}, v{baseline}, {baseline}); fetch the tags or give "
                     "--good REV")


def _learned(args: argparse.Namespace, cards: Mapping[str, Card]) -> dict[str, Learned]:
    """With ``--history DB`` (else ``--record DB``): each carded (or named) library's last passing Crater run kept
    there, on ``--python``."""
    source = args.history or args.record
    if not source:
        return {}
    from jaxrel.history.library_costs import library_costs
    from jaxrel.history.store import open_store

    names = set(cards) | {str(canonicalize_name(parse_library_spec(line.split()[0])[0]))
                          for line in (run.read_libraries(args.libraries) if args.libraries else ())}
    store = open_store(source, create=not args.history)
    try:
        costs = library_costs(store, args.python, sorted(names))
    finally:
        store.close()
    return {name: Learned(cost.seconds, cost.peak_bytes, cost.night) for name, cost in costs.items()}


def _coverage(cards: Mapping[str, Card], ran: set[str], part: tuple[int, int] | None
              ) -> tuple[int, list[tuple[str, str]]]:
    """The cards a run answers for (a shard: its own, and the skipped cards once, in shard 1) and each of those it
    did not run, with why."""
    def why(name: str) -> str:
        return cards[name].skip or ("in another shard" if part else "not named in --libraries")

    mine = [name for name, card in cards.items() if name in ran or (
        part is None or (part[0] == 1 and not card.runnable))]
    return len(mine), [(name, why(name)) for name in mine if name not in ran]


def run_crater(args: argparse.Namespace) -> int:
    part = parse_shard(args.shard) if args.shard else None
    if part is not None and (args.libraries or args.library_src):
        raise UsageError("--shard splits the carded libraries; give it without --libraries and --library-src")
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    cards = load_cards(Path(args.cards) if args.cards else None)
    learned = _learned(args, cards)
    seconds = {name: cost.seconds for name, cost in learned.items()}
    libraries = _libraries(args, None) or (() if args.library_src else run.carded_libraries(cards, part, seconds))
    family = resolve_family(args.family)
    request = replace(_request(args, libraries, cards), learned=learned, jobs=args.jobs)

    def bisect(verdict: LibraryVerdict, library: Library, tests: StagedTests, settings: Settings) -> None:
        baseline = verdict.baseline
        if baseline is None:
            return
        good = _good(args, family, baseline.jax)
        say(f"crater: bisecting {library.label}'s regression between {good} and {args.ref or 'the working tree'} …")
        extra = test_requirements(library, tests, settings)
        bisect_request = bisect_search.Request(
            Path(args.frontend_src), (good,), args.ref or "HEAD", request.workdir / "bisect" / library.name,
            backend=baseline.jaxlib, python=request.python, tests=tuple(verdict.failing[:5]),
            test_env=request.test_env, reruns=request.reruns, deps_as_of=baseline.as_of or "now", family=args.family,
            index_url=request.index_url, wheelhouses=request.wheelhouses, tests_root=tests.root,
            requirements=(library.install_requirement(), *extra), boxed=request.boxed,
            hidden=(Path(args.frontend_src).absolute(),),
            pytest_options=(f"--import-mode={tests.import_mode}",), jobs=bisect_inputs.PROBES_A_ROUND,
            more_backends=tuple({verdict.candidate.jaxlib} - {baseline.jaxlib}) if verdict.candidate else ())
        try:
            found = bisect_search.run(bisect_request, family, say)
        except (JaxrelError, EnvironmentFailure) as error:
            verdict.culprit = {"error": str(error)[:400]}
            return
        bisect_report.write(bisect_request.workdir, found)  # bisect.md and bisect.json beside its clone
        first = found.first_bad
        verdict.culprit = ({"commit": first.hash, "subject": first.subject, "steps": found.bisect_steps,
                            "notes": found.notes}
                           if first is not None else {"status": found.status, "candidates":
                                                      [c.hash for c in found.candidates], "notes": found.notes})

    result = run.crater(request, family, say, None if args.no_bisect else bisect)
    if not args.library_src:  # how much of the carded ecosystem the run covered
        result.carded, result.not_run = _coverage(cards, {v.name for v in result.libraries}, part)
    data = result.to_json()
    report.write(request.workdir, "crater", data, report.crater_text(result), report.crater_markdown(result))
    print(json.dumps(data, indent=2) if args.json else report.crater_text(result))
    record(args, request.workdir / "crater.json")
    return ExitCode.REFUSED if any(v.outcome == "regressed" for v in result.libraries) else ExitCode.OK
