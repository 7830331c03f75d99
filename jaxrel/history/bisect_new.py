"""``jaxrel history bisect-new``: bisect each new regression the store holds and keep the culprit.

For every regression (:mod:`jaxrel.history.regressions`) with failing tests, a known last good commit
and no culprit yet, it runs ``jaxrel bisect`` between the last good and the first bad commit on that
cell with exactly those tests: the frontend's own failing tests when there are any (as the nightly's
bisect jobs do), else the failing tests of jaxrel's compat suite (``--compat-tests``), its dependencies
as of the last good night, and ingests the ``bisect.json`` it writes. Each bisection runs as a child
``jaxrel`` process with its log kept beside its work directory; one that cannot run (its endpoints do not
bound the failure, the environment fails) is said in one line and the others go on.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from jaxrel._util import procs
from jaxrel.history.ingest import ingest
from jaxrel.history.regressions import Regression, regressions
from jaxrel.history.reports import BisectRecord, read_any
from jaxrel.history.store import Store

__all__ = ["MAX_TESTS", "Bisected", "bisect_files", "bisect_new", "last_error", "run_jaxrel"]

MAX_TESTS = 20  # test files one bisection runs (the first ones; the rest fail with them)


@dataclass(frozen=True)
class Bisected:
    key: str
    exit_code: int
    culprit: str | None
    report: str  # bisect.json ("" when bisect wrote none)
    log: str  # where its output went
    said: str  # one line: what came of it


@procs.in_phase("history.bisect-new")
def run_jaxrel(arguments: Sequence[str], log: Path, timeout: float | None = None) -> int:
    """``python -m jaxrel ARGUMENTS`` as a child process (its own process group), its output kept in ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = procs.run([sys.executable, "-m", "jaxrel", *arguments], timeout=timeout)
    except subprocess.TimeoutExpired:
        log.write_text(f"$ jaxrel {' '.join(arguments)}\njaxrel: stopped after {timeout or 0:.0f} s\n")
        return 3
    log.write_text(f"$ jaxrel {' '.join(arguments)}\n{done.stdout}{done.stderr}\n(exit {done.returncode})\n")
    return done.returncode


def bisect_files(tests: Sequence[str]) -> list[str]:
    """The files of the failing tests: what bisect runs. A node id would collect nothing at a commit older than its
    test (a new test is often how a break shows), and bisect skips such a step; the whole file runs at every one
    (every test of it passed on the last good night, whose selection held it)."""
    return list(dict.fromkeys(test.split("::", 1)[0] for test in tests))[:MAX_TESTS]


def last_error(log: Path) -> str:
    """The last error line a child ``jaxrel`` wrote to ``log``."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("jaxrel: ")]
    return lines[-1].removeprefix("jaxrel: ")[:300] if lines else f"see {log}"


def bisect_new(store: Store, source: Path, workdir: Path, *, env: Sequence[str] = (),
               shared_args: Sequence[str] = (), progress: Callable[[str], None] = print,
               only: Callable[[Regression], bool] = lambda r: True) -> list[Bisected]:
    """Bisect every regression that has none yet (those ``only`` admits), oldest first."""
    done: list[Bisected] = []
    for regression in regressions(store):
        if regression.bisected or not regression.bisectable or regression.state == "closed" or not only(regression):
            continue
        where = workdir / regression.page.removesuffix(".html")  # bisect's own work directory (it claims it)
        report, log = where / "bisect.json", workdir / f"{where.name}.log"  # the log beside it, not in it
        report.unlink(missing_ok=True)
        tests = bisect_files(regression.own_tests)
        selection = (["--frontend-tests", *tests] if tests else
                     ["--compat-tests", *regression.suite_tests[:MAX_TESTS]])
        progress(f"history: bisecting {regression.key}: {len(regression.own_tests or regression.suite_tests)} "
                 "failing tests, "
                 f"{regression.last_good[:12]} ({regression.last_good_night}) .. {regression.first_bad[:12]} "
                 f"({regression.night}) …")
        arguments = ["bisect", "--frontend-src", str(source), "--good", regression.last_good,
                     "--bad", regression.first_bad, "--cell", regression.cell, "--workdir", str(where),
                     *(part for pair in env for part in ("--env", pair)), *shared_args, *selection]
        code = run_jaxrel(arguments, log)
        if code in (130, -2):
            raise KeyboardInterrupt
        if report.is_file():
            ingest(store, report, night=regression.night)
            found = read_any(report)  # what bisect named, as the store now keeps it: no second pass over the store
            culprit = found.culprit if isinstance(found, BisectRecord) else None
            said = (f"culprit {culprit[:12]}" if culprit else
                    f"not converged: {found.log.splitlines()[0][:200] if isinstance(found, BisectRecord) else ''}")
            done.append(Bisected(regression.key, code, culprit, str(report), str(log), said))
        else:
            done.append(Bisected(regression.key, code, None, "", str(log), f"bisect failed (exit {code}): "
                                 f"{last_error(log)}"))
        progress(f"history: {regression.key}: {done[-1].said}")
    return done
