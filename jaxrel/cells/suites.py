"""One pytest run inside a cell: the command, and what :mod:`jaxrel.cells.pytest_plugin` recorded of it.

A :class:`Suite` is a directory of tests run with that directory as the working directory
and pytest's rootdir, never the frontend's source tree: ``import frontend`` must find the
wheel installed in the cell. Every run loads the cell plugin, which records each test's
outcome by node id, collection errors with their cause, and the file the frontend was
imported from in every pytest process.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from jaxrel._util import localfiles
from jaxrel._util.text import tail
from jaxrel.cells import box, records
from jaxrel.distributions import envs
from jaxrel.errors import JaxrelError

__all__ = ["DEFAULT_SUITE", "PLUGIN_TESTS", "Outcome", "Suite", "SuiteRun", "TestCounts", "compat_suite",
           "pytest_arguments", "read_record", "recorded", "run_suite", "suite_command"]

DEFAULT_SUITE = Path(__file__).resolve().parent / "suite"  # jaxrel's compat suite; package data in jaxrel's wheel
PLUGIN_TESTS = "test_plugins.py"  # the suite's tests of the hardware plugins themselves


@dataclass
class TestCounts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0


@dataclass(frozen=True)
class Outcome:
    """One test's (or one collection's) outcome: passed, failed, error or skipped, and why."""

    outcome: str
    message: str = ""

    @property
    def bad(self) -> bool:
        return self.outcome in ("failed", "error")

    @property
    def collection(self) -> bool:
        return self.message.startswith("collection: ")


@dataclass(frozen=True)
class Suite:
    """Tests to run in a cell: ``paths`` under ``root`` (the working directory), plus pytest ``options``."""

    name: str  # "compat suite" | "own tests", as reports say it
    key: str  # "suite" | "own": file names
    root: Path
    paths: tuple[str, ...]
    options: tuple[str, ...] = ()
    parallel: bool = False  # may use pytest-xdist when the cell has it
    test_files: int = 0  # how many test modules the paths hold (pytest-xdist pays only across several)
    env: tuple[tuple[str, str], ...] = ()  # environment variables for the run (--env KEY=VALUE)


@dataclass
class SuiteRun:
    """What one run of a suite recorded."""

    returncode: int
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    frontend_files: list[str] = field(default_factory=list)
    output: str = ""  # the last lines of pytest's output
    seconds: float = 0.0
    recorded: bool = True  # False: pytest ended without the plugin's record (it crashed or never started)

    def counts(self) -> TestCounts:
        counts = TestCounts()
        for outcome in self.outcomes.values():
            if outcome.outcome == "passed":
                counts.passed += 1
            elif outcome.outcome == "skipped":
                counts.skipped += 1
            elif outcome.outcome == "failed":
                counts.failed += 1
            else:
                counts.errors += 1
        return counts

    def bad(self) -> dict[str, Outcome]:
        return {test: outcome for test, outcome in self.outcomes.items() if outcome.bad}

    def passed(self, test: str) -> bool:
        """Whether ``test`` (a node id, or a module's: every test in it) ran and nothing in it failed."""
        inside = [o for t, o in self.outcomes.items() if t == test or t.startswith(test + "::")]
        return bool(inside) and not any(o.bad for o in inside) and any(o.outcome == "passed" for o in inside)


def read_record(directory: Path) -> tuple[dict[str, Outcome], list[str], bool]:
    """Outcomes (main process), frontend files (every process) and whether the main record exists."""
    outcomes: dict[str, Outcome] = {}
    files: list[str] = []
    main = False
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            data = localfiles.load_json(path)
        except JaxrelError:
            continue  # a damaged record is not trusted: the cell reads as having recorded nothing
        if not isinstance(data, dict):
            continue
        frontend_file = data.get("frontend_file")
        if isinstance(frontend_file, str) and frontend_file and frontend_file not in files:
            files.append(frontend_file)
        recorded = data.get("outcomes")
        if isinstance(recorded, dict) and all(isinstance(o, dict) and isinstance(o.get("outcome"), str)
                                              and isinstance(o.get("message", ""), str) for o in recorded.values()):
            main = True
            outcomes = {test: Outcome(o["outcome"], o.get("message", "")) for test, o in recorded.items()}
    return outcomes, files, main


def pytest_arguments(suite: Suite, paths: Sequence[str] | None = None, *, junit: Path | None = None,
                     jobs: int = 1) -> list[str]:
    """pytest's arguments for a run of ``suite`` (``paths``: default its own), with the cell plugin loaded;
    ``junit`` (replaced) gets pytest's junit XML."""
    arguments = [*(suite.paths if paths is None else paths), "-p", "no:cacheprovider",
                 "-p", "jaxrel.cells.pytest_plugin", "--rootdir", str(suite.root),
                 "--continue-on-collection-errors", *suite.options, "-q"]
    if jobs > 1 and suite.parallel:
        arguments += ["-n", str(jobs)]
    if junit is not None:
        junit.parent.mkdir(parents=True, exist_ok=True)
        junit.unlink(missing_ok=True)
        arguments += ["--junitxml", str(junit)]
    return arguments


def suite_command(
    env: envs.Env, suite: Suite, work: Path, *, package: str, junit: Path | None = None,
    only: Sequence[str] | None = None, shard: str | None = None, jobs: int = 1,
) -> tuple[list[str], dict[str, str]]:
    """The command and environment variables of one run of ``suite`` in ``env`` (from ``suite.root``); ``work``
    (replaced) will hold the plugin's records (:func:`recorded`); ``only`` reruns those node ids."""
    if work.exists():
        shutil.rmtree(work)
    record = work / "record"
    record.mkdir(parents=True)
    variables = {**dict(suite.env), records.RECORD: str(record), records.PACKAGE: package,
                 "PYTHONSAFEPATH": "1"}
    paths = list(suite.paths)
    if only is not None:
        selection = work / "only.txt"
        selection.write_text("".join(f"{test}\n" for test in only), encoding="utf-8")
        variables[records.ONLY] = str(selection)
        paths = sorted({test.split("::", 1)[0] for test in only})
    elif shard:
        variables[records.SHARD] = shard
    return [str(env.python), "-m", "pytest", *pytest_arguments(suite, paths, junit=junit, jobs=jobs)], variables


def recorded(work: Path, returncode: int, output: str, seconds: float) -> SuiteRun:
    """What the run whose records :func:`suite_command` put under ``work`` recorded, with how it ended."""
    outcomes, files, main = read_record(work / "record")
    return SuiteRun(returncode, outcomes, files, tail(output), seconds, main)


def run_suite(
    env: envs.Env, suite: Suite, work: Path, *, package: str, junit: Path | None = None,
    only: Sequence[str] | None = None, shard: str | None = None, jobs: int = 1, timeout: float = 3600,
    box_spec: box.Spec | None = None,
) -> SuiteRun:
    """Run ``suite`` in ``env``; ``work`` (replaced) holds the plugin's records; ``only`` reruns those node ids.
    ``box_spec``: another project's tests, run in the box (:mod:`jaxrel.cells.box`) with a scrubbed environment,
    ``work`` its only writable directory, ``env`` and the tests bound read-only."""
    source, tests = suite.root, work / "tests"
    if box_spec is not None:  # the tests run from a copy of their own, where the box lets them write beside themselves
        suite = replace(suite, root=tests)
    command, variables = suite_command(env, suite, work, package=package, junit=junit, only=only, shard=shard,
                                       jobs=jobs)
    start = time.perf_counter()
    if box_spec is not None:
        shutil.copytree(source, tests, symlinks=True)
        variables.update({"VIRTUAL_ENV": str(env.root), "PATH": f"{env.bin}{os.pathsep}{os.environ.get('PATH', '')}"})
        ran = box.run_at_home(work / "home", command, cwd=tests, env=variables, budget=timeout,
                              spec=replace(box_spec, readable=(*box_spec.readable, env.root)))
        shutil.rmtree(tests, ignore_errors=True)
        returncode = ran.returncode if ran.returncode is not None else -signal.SIGKILL
        return recorded(work, returncode, ran.output, ran.seconds)
    done = env.run(*command, env=variables, timeout=timeout, cwd=str(suite.root))
    return recorded(work, done.returncode, done.stdout + "\n" + done.stderr, time.perf_counter() - start)


def compat_suite(root: Path, env: tuple[tuple[str, str], ...] = ()) -> Suite:
    """The compat suite at ``root`` (run in the cell's driver interpreter, after the guard and the import),
    with ``env`` set for its pytest run besides the suite's own settings (it uses no plugin's fixtures)."""
    return Suite("compat suite", "suite", root, (str(root),),
                 ("--confcutdir", str(root), "-c", str(root / "pytest.ini")),
                 env=(("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1"), *env))
