"""Ingest: one report into the store, in one transaction, with the meaning of every result computed and kept.

A report whose sha256 the store already holds changes nothing (ingest twice = once). A report that
cannot be read changes nothing either (it is read whole before the transaction starts), and a run
killed mid-ingest leaves the store as it was (SQLite's transaction, not jaxrel's care).

The meaning of each (cell, test), night over night (:func:`verdict`): against the newest result of
the same cell and test from an earlier night, and every result of the same combo (the same wheels,
byte for byte) at the same frontend commit:

| now | the same combo and commit also | the night before | verdict |
|---|---|---|---|
| infra (no result: environment, install, timeout) | | | ``infra`` |
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
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import jaxrel
from jaxrel.history.reports import Artifact, CellRecord, ReportRecord, read_report
from jaxrel.history.store import HistoryError, Store

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
    if now in ("infra", "flaky"):
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
           machine: str | None = None, kind: str = "compat") -> Ingested:
    """Ingest the report at ``path`` (read whole first), as of ``night`` (``YYYY-MM-DD``, default today, UTC)."""
    report = read_report(path)
    night = _night(night)
    with store.transaction() as db:
        if db.execute("SELECT id FROM runs WHERE report_sha256 = ?", (report.sha256,)).fetchone():
            return Ingested(str(path), None, 0, 0, [])
        run = _run(db, report, path, night, source, machine, kind)
        count, regressions = 0, []
        for cell in report.cells:
            combo = _combo(db, cell)
            for test in cell.tests:
                db.execute("INSERT INTO results (run, combo, test, outcome, duration, signature) VALUES (?, ?, ?, ?, "
                           "?, ?) ON CONFLICT (run, combo, test) DO NOTHING",
                           (run, combo, test.test, test.outcome, test.duration, test.signature))
                meaning = verdict(test.outcome, _before(db, cell.cell, test.test, night),
                                  _same(db, combo, test.test, report.frontend.commit, run))
                db.execute("INSERT INTO verdicts (run, cell, test, verdict) VALUES (?, ?, ?, ?) "
                           "ON CONFLICT (run, cell, test) DO UPDATE SET verdict = excluded.verdict",
                           (run, cell.cell, test.test, meaning))
                if meaning == "new-regression":
                    regressions.append((cell.cell, test.test))
                count += 1
    return Ingested(str(path), run, len(report.cells), count, regressions)


def _night(night: str | None) -> str:
    if night is None:
        return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    try:
        return datetime.date.fromisoformat(night).isoformat()
    except ValueError:
        raise HistoryError(f"--night {night[:40]!r}: not a date; expected YYYY-MM-DD") from None


def _run(db: sqlite3.Connection, report: ReportRecord, path: Path, night: str, source: str | None,
         machine: str | None, kind: str) -> int:
    recorded = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cursor = db.execute(
        "INSERT INTO runs (report_sha256, kind, source, night, recorded, machine, jaxrel_version, frontend, "
        "frontend_version, frontend_commit) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (report.sha256, kind, source or f"local:{path.resolve()}", night, recorded, machine or platform.node(),
         jaxrel.__version__, report.frontend.name, report.frontend.version, report.frontend.commit))
    return int(cursor.lastrowid or 0)


def _artifact(db: sqlite3.Connection, artifact: Artifact) -> int:
    key = (artifact.name, artifact.version, artifact.commit, artifact.sha256)
    db.execute("INSERT INTO artifacts (name, version, commit_sha, sha256) VALUES (?, ?, ?, ?) "
               "ON CONFLICT (name, version, commit_sha, sha256) DO NOTHING", key)
    return int(db.execute("SELECT id FROM artifacts WHERE name = ? AND version = ? AND commit_sha = ? AND sha256 = ?",
                          key).fetchone()[0])


def _combo(db: sqlite3.Connection, cell: CellRecord) -> int:
    digest = cell.digest()
    found = db.execute("SELECT id FROM combos WHERE digest = ?", (digest,)).fetchone()
    if found:
        return int(found[0])
    cursor = db.execute("INSERT INTO combos (digest, cell, python, platform, device) VALUES (?, ?, ?, ?, ?)",
                        (digest, cell.cell, cell.python, cell.platform, cell.device))
    combo = int(cursor.lastrowid or 0)
    for role, artifact in cell.artifacts:
        db.execute("INSERT INTO combo_artifacts (combo, artifact, role) VALUES (?, ?, ?) "
                   "ON CONFLICT (combo, artifact) DO NOTHING", (combo, _artifact(db, artifact), role))
    return combo


def _before(db: sqlite3.Connection, cell: str, test: str, night: str) -> str | None:
    """The newest outcome of (cell, test) from an earlier night, infra left out (it says nothing of the code)."""
    found = db.execute(
        "SELECT results.outcome FROM results JOIN runs ON runs.id = results.run JOIN combos ON combos.id = "
        "results.combo WHERE combos.cell = ? AND results.test = ? AND runs.night < ? AND results.outcome <> 'infra' "
        "ORDER BY runs.night DESC, runs.id DESC LIMIT 1", (cell, test, night)).fetchone()
    return str(found[0]) if found else None


def _same(db: sqlite3.Connection, combo: int, test: str, commit: str, run: int) -> set[str]:
    """Outcomes of the same combo and test at the same frontend commit in other runs (a rerun, another job)."""
    if not commit:
        return set()
    return {str(outcome) for (outcome,) in db.execute(
        "SELECT results.outcome FROM results JOIN runs ON runs.id = results.run WHERE results.combo = ? AND "
        "results.test = ? AND runs.frontend_commit = ? AND runs.id <> ?", (combo, test, commit, run))}
