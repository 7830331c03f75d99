"""One bisection step: a revision exported, built (or taken from the wheel cache), installed into the
cell's environment, and its selected tests run; the verdict good / bad / skip with its reason.

``git bisect run`` calls this module (``python -m jaxrel.bisect.step CONFIG``) at each
revision it picks; the step reads ``BISECT_HEAD`` in the private clone, appends its record to
the run's ``steps.jsonl`` and exits 0 (good), 1 (bad) or 125 (skip). A bug exits 128, which
makes git stop the bisection instead of taking it for a verdict.

- **the backend**: the cell's, when the revision admits it; across a change of the frontend's minimum
  backend (a release commit pinning its own), a revision refusing it takes the newest of the run's other
  backends it admits (:func:`choose_environment`), each in an environment of its own.
- **skip** when the revision does not build or install, when its own version rules refuse
  the backend (jaxrel's guard on its declared minimum, or the frontend's own import
  check), when the frontend is imported from outside the environment, when the selection is
  not in the revision or collects nothing, and when failing tests pass on a rerun (flaky).
- **bad** when selected tests fail on every run, or the frontend fails to import otherwise.
  (The frontend is imported alone only when the tests did not show it imported: a step whose
  tests ran with the frontend imported, passing or failing, costs no extra import.)
- **good** when the selected tests ran and none failed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import Version

from jaxrel._util import localfiles, procs
from jaxrel._util.text import tail
from jaxrel.bisect.git import Commit, Repo
from jaxrel.bisect.records import StepConfig, StepRecord, append
from jaxrel.cells import box, probes, suites
from jaxrel.cells.admitted import built_admits
from jaxrel.cells.environment import foreign_files
from jaxrel.cells.frontend import CompatError, build_requirements, build_wheel, frontend_spec
from jaxrel.cells.matrix import FrontendSpec
from jaxrel.cells.owntests import CONFIG_FILES
from jaxrel.cells.probes import GUARD_PROBE
from jaxrel.cells.suites import DEFAULT_SUITE, Suite
from jaxrel.distributions import envs
from jaxrel.distributions.wheels import ArtifactInfo, inspect
from jaxrel.errors import BadInput
from jaxrel.family import Family, resolve_family

__all__ = ["BAD", "GOOD", "SKIP", "Built", "build", "choose_environment", "main", "run_step"]

GOOD, BAD, SKIP = "good", "bad", "skip"
EXIT = {GOOD: 0, BAD: 1, SKIP: 125}
ABORT = 128  # git bisect run stops on an exit status of 128 or more


@dataclass
class Built:
    """A revision's wheel (or why there is none) and its tests' directory."""

    wheel: Path | None
    reason: str = ""
    cached: bool = False
    spec: FrontendSpec | None = None
    info: ArtifactInfo | None = None
    tests_root: Path | None = None
    export_seconds: float = 0.0
    build_seconds: float = 0.0


def _tops(paths: tuple[str, ...]) -> list[str]:
    return list(dict.fromkeys(p.split("::", 1)[0].strip("/").split("/")[0] for p in paths))


@procs.in_phase("bisect.build")
def build(config: StepConfig, family: Family, repo: Repo, rev: str, into: Path, *,
          with_tests: bool = True) -> Built:
    """Export ``rev``'s build inputs (unless its wheel is cached by tree hash) and tests; build its wheel."""
    start = time.perf_counter()
    source = config.source
    package_top = family.frontend.package.split(".")[0]
    listing = repo.paths(rev, source, [package_top, *_tops(config.tests)])
    test_tops = {source.path(top) for top in _tops(config.tests)} - {source.path(package_top)}
    build_paths = [p for p in listing if p not in test_tops]
    version_file = source.path(family.frontend.version_file)
    if not any(version_file == p or version_file.startswith(p + "/") for p in build_paths):
        return Built(None, f"no {family.frontend.version_file} in this revision")
    key = repo.tree_key(rev, build_paths)
    cache = Path(config.workdir) / "wheels" / f"{key}-{Path(config.python).name}"
    built = Built(None)
    cached = sorted(cache.glob("*.whl")) if cache.is_dir() else []
    if cached:
        built.wheel, built.cached = cached[0], True
    else:
        tree = into / "src"
        repo.export(rev, build_paths, tree)
        built.export_seconds = time.perf_counter() - start
        staging = cache.with_name(f"{cache.name}.partial-{os.getpid()}")  # a multisection round builds side by side
        top = tree / source.subdir if source.subdir else tree
        try:
            wheel = build_wheel(top, staging, python=config.python, index=config.pip_index,
                                build_env=_build_env(config, top))
        except (envs.EnvError, CompatError) as error:
            shutil.rmtree(staging, ignore_errors=True)
            return Built(None, f"does not build: {error}", export_seconds=built.export_seconds,
                         build_seconds=time.perf_counter() - start - built.export_seconds)
        finally:
            shutil.rmtree(tree, ignore_errors=True)
        if cache.exists():  # another step built the same tree meanwhile: theirs serves
            shutil.rmtree(staging, ignore_errors=True)
        else:
            staging.rename(cache)
        built.wheel = cache / wheel.name
        built.build_seconds = time.perf_counter() - start - built.export_seconds
    built.info = inspect(built.wheel, family, use_cache=False)
    try:
        built.spec = frontend_spec(family, built.info, f"{rev[:12]}")
    except CompatError as error:
        built.reason, built.wheel = f"its metadata is unusable: {error}", None
        return built
    if with_tests:
        exporting = time.perf_counter()
        tests = into / "tests"
        top_files = [p for p in listing if p not in test_tops and "/" not in p.removeprefix(source.subdir + "/")]
        config_files = [p for p in top_files if p.rsplit("/", 1)[-1] in CONFIG_FILES]
        repo.export(rev, sorted({*(p for p in listing if p in test_tops), *config_files}), tests)
        built.tests_root = tests / source.subdir if source.subdir else tests
        built.export_seconds += time.perf_counter() - exporting
    return built


def _build_env(config: StepConfig, top: Path) -> envs.Env | None:
    """The run's build environment when this revision declares the build requirements it holds, else ``None``
    (an isolated build, as for any other revision)."""
    pyproject = top / "pyproject.toml"
    if not config.build_env or not localfiles.is_regular(pyproject):
        return None
    try:
        declared = build_requirements(localfiles.read_text(pyproject, what="the revision's"))
    except BadInput:  # unreadable or not UTF-8: this revision builds isolated, and its build says what is wrong
        return None
    return envs.existing(Path(config.build_env)) if declared == list(config.build_requires) else None


def install(config: StepConfig, env: envs.Env, wheel: Path, name: str) -> str | None:
    """Install ``wheel`` into ``env`` in place of the frontend there (no deps, forced); why not, or ``None``."""
    return envs.reinstall(env, wheel, name, use_uv=config.use_uv, index=config.pip_index)


def refused_by_frontend(error: str, family: Family) -> bool:
    """Whether an import error is the frontend's own version check refusing the backend (skip, not bad)."""
    text = error.lower()
    names = (family.backend.distribution.lower(), family.backend.package.lower())
    return any(n in text for n in names) and any(w in text for w in ("version", "requires", "minimum", "older"))


def choose_environment(config: StepConfig, family: Family, built: Built) -> tuple[str, str]:
    """(environment, backend version) for a built revision: the cell's own when the revision admits its backend
    (:func:`~jaxrel.cells.admitted.built_admits`, the rule ``minimum`` and the Crater choose by), else the one of
    ``config.more_envs`` with the newest backend it admits, else the cell's own (its rules then refuse it: a skip,
    as ``jaxrel bisect`` skips any revision that refuses the cell it bisects)."""
    own = (config.env_root, config.backend_version)
    if not config.more_envs or built.wheel is None:
        return own
    admitted = built_admits(built.wheel, family, built.info)
    if admitted.contains(config.backend_version, prereleases=True):
        return own
    for version, root in sorted(config.more_envs, key=lambda pair: Version(pair[0]), reverse=True):
        if admitted.contains(version, prereleases=True):
            return root, version
    return own


def _guard(config: StepConfig, family: Family, env: envs.Env, spec: FrontendSpec, backend: str) -> str | None:
    """Why the revision's own version rules refuse ``backend`` (jaxrel's guard on the minimum it declares), or
    ``None`` when they accept it."""
    arguments = family.guard_arguments(spec.version, spec.minimum_backend)
    arguments["plugins"] = [[p.distribution, p.pinned] for p in arguments["plugins"]]
    done = env.run(str(env.python), "-c", GUARD_PROBE, json.dumps(arguments))
    guard = probes.last_json(done.stdout) if done.returncode == 0 else None
    if guard is None:
        return f"jaxrel's guard crashed here: {tail(done.stderr or done.stdout, 1)}"
    if not guard["accepted"]:
        return (f"its version rules refuse {family.backend.distribution} {backend} (minimum {spec.minimum_backend}): "
                f"{guard['message']}")
    return None


def _import(family: Family, env: envs.Env, backend: str) -> tuple[str, str] | None:
    """Import the frontend alone: a (verdict, reason) when that fails or finds another copy, else ``None``.

    Run only when the tests did not show the frontend imported (no record, or no frontend module at the end): a
    module is left in ``sys.modules`` only by an import that completed, so a run that recorded the frontend's
    file proved the import, passing or failing; where that file lies is checked next (:func:`foreign_files`).
    """
    imported, error, _ = probes.import_frontend(env, family, smoke=False)
    if error is not None:
        if refused_by_frontend(error, family):
            return SKIP, f"its own import check refuses {family.backend.distribution} {backend}: {error}"
        return BAD, f"import {family.frontend.package} fails: {error}"
    if foreign := foreign_files(env, [(imported or {}).get("file")]):
        return SKIP, f"{family.frontend.package} was imported from {foreign[0]}, not from {env.root}"
    return None


def _first_line(message: str) -> str:
    return next((line.strip() for line in message.splitlines() if line.strip()), "")


@procs.in_phase("bisect.step-tests")
def run_tests(config: StepConfig, family: Family, env: envs.Env, root: Path, work: Path, record: StepRecord) -> None:
    """Run the selection from ``root`` (outside any source tree), or the selected tests of jaxrel's compat suite;
    set ``record``'s verdict and reason."""
    if config.suite_tests:  # jaxrel's own tests of the frontend's API: the same at every revision
        found = suites.compat_suite(DEFAULT_SUITE, config.test_env)
        suite = replace(found, paths=tuple(str(DEFAULT_SUITE / t) for t in config.suite_tests),
                        options=(*found.options, *(("-k", config.keyword) if config.keyword else ())))
    else:
        present = [t for t in config.tests if (root / t.split("::", 1)[0]).exists()]
        if not present:
            record.verdict, record.reason = SKIP, f"the selection is not in this revision ({', '.join(config.tests)})"
            return
        suite = Suite("own tests", "own", root, tuple(present),
                      (*config.pytest_options, *(("-k", config.keyword) if config.keyword else ())),
                      env=config.test_env)
    box_spec = box.Spec(writable=(), hidden=tuple(Path(p) for p in config.hidden)) if config.boxed else None
    run = suites.run_suite(env, suite, work / "run", package=family.frontend.package, box_spec=box_spec)
    if not run.recorded or not run.frontend_files:
        ended = _import(family, env, record.backend or config.backend_version)
        if ended is not None:
            record.verdict, record.reason = ended
            return
    if not run.recorded:
        record.verdict, record.reason = SKIP, f"pytest exited {run.returncode} without results: {run.output}"
        return
    if foreign := foreign_files(env, run.frontend_files):
        record.verdict, record.reason = SKIP, f"the tests imported {family.frontend.package} from {foreign[0]}"
        return
    counts = run.counts()
    record.passed = counts.passed
    failing = run.bad()
    if not failing:
        if counts.passed == 0:
            record.verdict = SKIP
            record.reason = ("the selection collects nothing" if not run.outcomes
                             else f"every selected test was skipped ({counts.skipped})")
        else:
            record.verdict, record.reason = GOOD, f"{counts.passed} passed"
        return
    messages = {test: outcome.message for test, outcome in failing.items()}
    still = sorted(failing)
    for attempt in range(config.reruns):
        again = suites.run_suite(env, suite, work / f"rerun{attempt + 1}", package=family.frontend.package,
                                 only=still, box_spec=box_spec)
        if not again.recorded:
            break
        flipped = [t for t in still if again.passed(t)]
        record.flaky += flipped
        still = [t for t in still if t not in flipped]
        messages.update({t: o.message for t, o in again.bad().items() if t in still})
        if not still:
            break
    if not still:
        record.verdict = SKIP
        record.reason = f"flaky: {', '.join(record.flaky)} failed, then passed on a rerun"
        return
    record.verdict, record.failing = BAD, still
    record.first_error = _first_line(messages.get(still[0], ""))
    record.reason = (f"{len(still)} failing: {still[0]}" + (f" and {len(still) - 1} more" if len(still) > 1 else "")
                     + (f" ({record.first_error})" if record.first_error else ""))


PRECOMPILE = """
import compileall, importlib.util, sys
spec = importlib.util.find_spec(sys.argv[1])
ok = spec is not None and spec.submodule_search_locations is not None and compileall.compile_dir(
    list(spec.submodule_search_locations)[0], quiet=1, workers=0,
    invalidation_mode=compileall.py_compile.PycInvalidationMode.CHECKED_HASH)
sys.exit(0 if ok else 1)
"""


def precompile(config: StepConfig, family: Family, slot: int) -> None:
    """Compile the installed frontend in slot ``slot``'s environments once, as *checked-hash* bytecode kept outside
    the environment (:meth:`StepConfig.bytecode_of`).

    Python validates such a file by its source's hash, not by the source's modification time, and when it
    replaces a stale one it writes a checked-hash file again. Each step reinstalls the frontend, which gives
    every file a new modification time: with the usual timestamp bytecode every step compiled all of jax again
    (about 1.7 s of CPU); with checked-hash bytecode a step compiles only the files its revision changed. A file
    is reused only when its bytes are the same, so nothing compiled from one revision's source serves another's.
    """
    for root in config.env_roots:
        env = envs.existing(config.env_of(slot, root), config.bytecode_of(slot))
        env.run(str(env.python), "-c", PRECOMPILE, family.frontend.package.split(".")[0])


@contextmanager
def bytecode_written() -> Iterator[None]:
    """Without ``PYTHONDONTWRITEBYTECODE`` for a while: the processes a step runs in the cell's environment
    keep the bytecode they compile (in the slot's ``PYTHONPYCACHEPREFIX``), so the probe, pytest and its reruns
    do not compile the frontend again each (jax: ~1.7 s of CPU each); :func:`precompile` says why a file
    compiled from one revision's source never serves another's."""
    saved = os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["PYTHONDONTWRITEBYTECODE"] = saved


def run_step(config: StepConfig, family: Family, repo: Repo, commit: Commit, role: str = "step",
             slot: int = 0) -> StepRecord:
    """Test ``commit`` in the cell's environment (probe slot ``slot``'s copy of it, and its own work directory):
    export, build (cached), install, probe, run the selection."""
    with bytecode_written():
        return _run_step(config, family, repo, commit, role, slot)


def _run_step(config: StepConfig, family: Family, repo: Repo, commit: Commit, role: str, slot: int) -> StepRecord:
    record = StepRecord(commit.hash, commit.subject, SKIP, "", role)
    work = config.work_of(slot)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    built = build(config, family, repo, commit.hash, work, with_tests=not config.tests_root)
    if config.tests_root:  # a library's tests, the same at every revision
        built.tests_root = Path(config.tests_root)
    record.cached = built.cached
    record.seconds = {"export": round(built.export_seconds, 2), "build+install": round(built.build_seconds, 2),
                      "tests": 0.0}
    if built.wheel is None or built.spec is None or built.tests_root is None:
        record.reason = built.reason
        return record
    start = time.perf_counter()
    root, record.backend = choose_environment(config, family, built)
    env = envs.existing(config.env_of(slot, root), config.bytecode_of(slot))
    problem = install(config, env, built.wheel, family.frontend.distribution)
    refused = _guard(config, family, env, built.spec, record.backend) if problem is None else problem
    installed = time.perf_counter()
    if refused is None:
        run_tests(config, family, env, built.tests_root, work, record)
    else:
        record.verdict, record.reason = SKIP, refused
    record.seconds["build+install"] = round(built.build_seconds + installed - start, 2)
    record.seconds["tests"] = round(time.perf_counter() - installed, 2)
    shutil.rmtree(work, ignore_errors=True)
    return record


def main(argv: list[str] | None = None) -> int:
    """``git bisect run``'s script: test ``BISECT_HEAD`` (or ``--rev HASH`` in probe slot ``--slot N``, as a
    multisection round runs it, with ``--role``); exit 0 good, 1 bad, 125 skip, 128 on a bug."""
    arguments = sys.argv[1:] if argv is None else argv
    try:
        config = StepConfig.load(Path(arguments[0]))
        options = dict(zip(arguments[1::2], arguments[2::2], strict=True))
        family = resolve_family(config.family)
        repo = Repo(Path(config.git_dir))
        commit = repo.commit(options.get("--rev") or repo.head())
        record = run_step(config, family, repo, commit, role=options.get("--role", "step"),
                          slot=int(options.get("--slot", "0")))
        append(config, record)
        print(f"bisect: {record.line()}", file=sys.stderr, flush=True)
        return EXIT[record.verdict]
    except KeyboardInterrupt:
        return 130
    except Exception:  # a bug or a broken environment: stop the bisection, say why
        print(f"bisect: the step failed: {traceback.format_exc()}", file=sys.stderr, flush=True)
        return ABORT


def _entry() -> None:
    os.environ.pop("PYTHONPATH", None)
    with procs.interrupts_stop_children():  # the step's own children (a build, the tests) go with it
        code = main()
    procs.finish_stopping()
    sys.exit(code)


if __name__ == "__main__":
    _entry()
