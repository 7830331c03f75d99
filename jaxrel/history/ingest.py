"""Ingest: one report into the store, in one transaction, with the meaning of every result computed and kept.

A compat ``report.json`` brings a night's results; a ``bisect.json`` brings the culprit ``jaxrel bisect``
named for a cell (the range it searched, the first bad commit when it converged, a short log); an
``atlas.json`` brings one cell per measured (jax, jaxlib) pair with each API a test; the device check's
``device.json`` one cell for the set installed on a GPU, its steps as tests.

A report whose sha256 the store already holds changes nothing (ingest twice = once). A report that
cannot be read changes nothing either (it is read whole before the transaction starts), and a run
killed mid-ingest leaves the store as it was (SQLite's transaction, not jaxrel's care).

The meaning of each (cell, test), night over night (:func:`verdict`): against the newest result of
the same cell and test from an earlier night, and every result of the same combo (the same wheels,
byte for byte) at the same frontend commit:

| now | the same combo and commit also | the night before | verdict |
|---|---|---|---|
| infra (no result: environment, install, timeout) | | | ``infra`` |
| refused by the guard, as the rules expect | | | ``refused`` |
| passed only on rerun | | | ``flaky`` |
| passed | failed | | ``flaky`` |
| passed | | failed | ``fixed`` |
| passed | | anything else | ``passed`` |
| failed | passed | | ``flaky`` |
| failed | | passed (or flaky) | ``new-regression`` |
| failed | | failed | ``still-failing`` |
| failed | | nothing | ``failing`` |

Stale cells and known-good sets are judged when read (:mod:`jaxrel.history.query`), from the nights kept.
"""

from __future__ import annotations

import datetime
import platform
from dataclasses import dataclass
from pathlib import Path

import jaxrel
from jaxrel.history import selections
from jaxrel.history.reports import Artifact, BisectRecord, CellRecord, ReportRecord, TestRecord, read_any
from jaxrel.history.store import OWN_TESTS, Db, HistoryError, Store

__all__ = ["Ingested", "ingest", "verdict"]

GOOD = frozenset({"passed", "skipped"})


@dataclass(frozen=True)
class Ingested:
    path: str
    run: int | None  # None: the store already held this report
    cells: int
    results: int
    regressions: list[tuple[str, str]]  # (cell, test) that turned red this night


def verdict(now: str, before: str | None, same_combo_and_commit: set[str]) -> str:
    """The meaning of one result (see the module doc)."""
    if now in ("infra", "flaky", "refused"):
        return now
    if now in GOOD:
        if "failed" in same_combo_and_commit:
            return "flaky"
        return "fixed" if before == "failed" else "passed"
    if same_combo_and_commit & (GOOD | {"flaky"}):
        return "flaky"
    if before is None:
        return "failing"
    return "still-failing" if before == "failed" else "new-regression"


def ingest(store: Store, path: Path, *, night: str | None = None, source: str | None = None,
           machine: str | None = None) -> Ingested:
    """Ingest the report at ``path`` (read whole first), as of ``night`` (``YYYY-MM-DD``, default today, UTC)."""
    found = read_any(path)
    night = _night(night)
    if isinstance(found, BisectRecord):
        return _culprit(store, found, path, night, source, machine)
    report = found
    with store.transaction() as db:
        if db.execute("SELECT id FROM runs WHERE report_sha256 = ?", (report.sha256,)):
            return Ingested(str(path), None, 0, 0, [])
        run = _run(db, report, path, night, source, machine)
        count, regressions = 0, []
        for cell in report.cells:
            combo = _combo(db, cell)
            before = _before(db, cell.cell, night)
            tests = cell.tests + _implicit_passes(cell, before)
            same = _same(db, combo, run) if report.frontend.commit else {}  # no commit: no rerun to know
            results, verdicts, latest = [], [], []
            for test in tests:
                meaning = verdict(test.outcome, _outcome_before(test, before), same.get(test.test, set()))
                if not selections.routine(test):  # a routine result is kept in the run's selection
                    results.append((run, combo, test.test, test.outcome, test.duration, test.signature, test.suite,
                                    test.peak_bytes))
                if selections.kept(test.test, meaning):
                    verdicts.append((run, cell.cell, test.test, meaning))
                if test.outcome != "infra":
                    latest.append((cell.cell, test.test, night, test.outcome, test.suite))
                if meaning == "new-regression":
                    regressions.append((cell.cell, test.test))
            db.executemany("INSERT INTO results (run, combo, test, outcome, duration, signature, suite, peak_bytes) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run, combo, test) DO NOTHING", results)
            db.executemany("INSERT INTO verdicts (run, cell, test, verdict) VALUES (?, ?, ?, ?) ON CONFLICT (run, "
                           "cell, test) DO UPDATE SET verdict = excluded.verdict", verdicts)
            selections.record(db, run, combo, tests)
            _remember(db, latest)
            count += len(tests)
    return Ingested(str(path), run, len(report.cells), count, regressions)


def _culprit(store: Store, found: BisectRecord, path: Path, night: str, source: str | None,
             machine: str | None) -> Ingested:
    """A bisect report: the cell's culprit for its range (a later report of the same range replaces it)."""
    with store.transaction() as db:
        if db.execute("SELECT id FROM runs WHERE report_sha256 = ?", (found.sha256,)):
            return Ingested(str(path), None, 0, 0, [])
        recorded = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        (run,), = db.execute(
            "INSERT INTO runs (report_sha256, kind, source, night, recorded, machine, jaxrel_version, frontend, "
            "frontend_version, frontend_commit) VALUES (?, 'bisect', ?, ?, ?, ?, ?, '', '', ?) RETURNING id",
            (found.sha256, source or f"local:{path.resolve()}", night, recorded, machine or platform.node(),
             jaxrel.__version__, found.first_bad))
        db.execute("INSERT INTO culprits (cell, last_good, first_bad, culprit, log, tests, night, version_only) VALUES "
                   "(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (cell, last_good, first_bad) DO UPDATE SET culprit = "
                   "excluded.culprit, log = excluded.log, tests = excluded.tests, night = excluded.night, "
                   "version_only = excluded.version_only",
                   (found.cell, found.last_good, found.first_bad, found.culprit, found.log, "\n".join(found.tests),
                    night, int(found.version_only)))
    return Ingested(str(path), int(run), 1, 0, [])


def _night(night: str | None) -> str:
    if night is None:
        return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    try:
        return datetime.date.fromisoformat(night).isoformat()
    except ValueError:
        raise HistoryError(f"--night {night[:40]!r}: not a date; expected YYYY-MM-DD") from None


def _run(db: Db, report: ReportRecord, path: Path, night: str, source: str | None, machine: str | None) -> int:
    recorded = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    (run,), = db.execute(
        "INSERT INTO runs (report_sha256, kind, source, night, recorded, machine, jaxrel_version, frontend, "
        "frontend_version, frontend_commit, minimum_backend) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (report.sha256, report.kind, source or f"local:{path.resolve()}", night, recorded, machine or platform.node(),
         jaxrel.__version__, report.frontend.name, report.frontend.version, report.frontend.commit,
         report.minimum_backend))
    return int(run)


def _artifact(db: Db, artifact: Artifact) -> int:
    key = (artifact.name, artifact.version, artifact.commit, artifact.sha256)
    db.execute("INSERT INTO artifacts (name, version, commit_sha, sha256) VALUES (?, ?, ?, ?) "
               "ON CONFLICT (name, version, commit_sha, sha256) DO NOTHING", key)
    (found,), = db.execute("SELECT id FROM artifacts WHERE name = ? AND version = ? AND commit_sha = ? AND "
                           "sha256 = ?", key)
    return int(found)


def _combo(db: Db, cell: CellRecord) -> int:
    digest = cell.digest()
    found = db.execute("SELECT id FROM combos WHERE digest = ?", (digest,))
    if found:
        return int(found[0][0])
    (made,), = db.execute("INSERT INTO combos (digest, cell, python, platform, device) VALUES (?, ?, ?, ?, ?) "
                          "RETURNING id", (digest, cell.cell, cell.python, cell.platform, cell.device))
    combo = int(made)
    for role, artifact in cell.artifacts:
        db.execute("INSERT INTO combo_artifacts (combo, artifact, role) VALUES (?, ?, ?) "
                   "ON CONFLICT (combo, artifact) DO NOTHING", (combo, _artifact(db, artifact), role))
    return combo


Before = dict[str, tuple[str, str, str]]  # test → (night, outcome, suite) of its newest earlier result


def _before(db: Db, cell: str, night: str) -> Before:
    """Test → its newest result in ``cell`` from an earlier night, infra left out (it says nothing of the code).
    From ``last_results`` (the newest night and the one before it); a night ingested out of order, older than
    what is kept, is answered by a scan of the cell's results."""
    found: Before = {}
    stale = False
    for test, last, outcome, prev_night, prev_outcome, suite in db.execute(
            "SELECT test, night, outcome, prev_night, prev_outcome, suite FROM last_results WHERE cell = ?", (cell,)):
        if last < night:
            found[test] = (last, outcome, suite)
        elif last == night and prev_night:
            found[test] = (prev_night, prev_outcome, suite)
        elif last > night:
            stale = True
    if not stale:
        return found
    nights = {int(run): str(when) for run, when in db.execute("SELECT id, night FROM runs WHERE night < ?", (night,))}
    earlier: Before = {}
    for (run, _), tests in sorted(selections.outcomes(db, "combos.cell = ? AND runs.night < ?", (cell, night)).items(),
                                  key=lambda item: (nights.get(item[0][0], ""), item[0][0])):
        for test, (outcome, suite) in tests.items():
            if outcome != "infra":
                earlier[test] = (nights.get(run, ""), outcome, suite)
    return earlier


def _outcome_before(test: TestRecord, before: Before) -> str | None:
    """The test's outcome the night before. The frontend's own tests list only their failures: an own test whose
    selection ran on a later night than its last listed failure (or that was never listed) passed then."""
    mine = before.get(test.test)
    if test.suite != "own" or test.test == OWN_TESTS:
        return mine[1] if mine else None
    selection = before.get(OWN_TESTS)
    if selection is not None and (mine is None or mine[0] < selection[0]):
        return "passed"
    return mine[1] if mine else None


def _implicit_passes(cell: CellRecord, before: Before) -> list[TestRecord]:
    """An own test that failed before and is not listed tonight, when tonight's selection ran: it passed."""
    tonight = {t.test: t for t in cell.tests}
    ran = tonight.get(OWN_TESTS)
    if ran is None or ran.outcome == "infra":
        return []
    return [TestRecord(test, "passed", None, "", "own") for test, (_, outcome, suite) in sorted(before.items())
            if suite == "own" and test != OWN_TESTS and outcome != "passed" and test not in tonight]


def _remember(db: Db, latest: list[tuple[str, str, str, str, str]]) -> None:
    """Keep each (cell, test)'s newest night and outcome, and the previous night's, as ``last_results``."""
    db.executemany(
        "INSERT INTO last_results (cell, test, night, outcome, suite) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (cell, test) DO UPDATE SET suite = excluded.suite, "
        "prev_night = CASE WHEN excluded.night > last_results.night THEN last_results.night "
        "ELSE last_results.prev_night END, "
        "prev_outcome = CASE WHEN excluded.night > last_results.night THEN last_results.outcome "
        "ELSE last_results.prev_outcome END, "
        "night = CASE WHEN excluded.night >= last_results.night THEN excluded.night ELSE last_results.night END, "
        "outcome = CASE WHEN excluded.night >= last_results.night THEN excluded.outcome "
        "ELSE last_results.outcome END", latest)


def _same(db: Db, combo: int, run: int) -> dict[str, set[str]]:
    """Test → outcomes of the same combo in other runs: the same wheels and the same frontend commit (a combo's
    digest holds the commit), a rerun or another job of the same night."""
    found: dict[str, set[str]] = {}
    for tests in selections.outcomes(db, "combos.id = ? AND runs.id <> ?", (combo, run)).values():
        for test, (outcome, _) in tests.items():
            found.setdefault(test, set()).add(outcome)
    return found
