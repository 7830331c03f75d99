"""The history store: one SQLite file (standard library), its schema and its migrations.

Opened with WAL and foreign keys on; the schema's version is ``PRAGMA user_version`` and every
version has one migration, applied in one transaction. A file that is not SQLite, a SQLite file
that is not a jaxrel history (tables of its own, no ``jaxrel_history`` marker), a store written by a
newer jaxrel, or one another writer holds locked: each is one line (exit 2 or 3), nothing written.
The SQL is portable (``INTEGER``, ``TEXT``, ``REAL``, ``UNIQUE``, ``REFERENCES``; no SQLite-only
syntax in the queries) so the same schema can live on a shared server.

What it keeps: artifacts (name, version, commit, wheel sha256); combos (the set of artifacts, with
Python, platform and device, keyed by a digest of all of them); runs (where from, which night, when,
machine, jaxrel version, the report's sha256: unique, so one report is ingested once); results (run,
combo, test, outcome, duration, failure signature); verdicts (the meaning computed at ingest, per
run, cell and test); culprits (cell, last good and first bad frontend commits, the commit bisect
named, its log); annotations (flaky / infra / expected / fixed-by, with a reason).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from jaxrel.errors import BadInput, ExitCode

__all__ = ["DEFAULT", "SCHEMA", "HistoryError", "Store", "open_store"]

DEFAULT = Path("build") / "history" / "history.sqlite"
MARKER = "jaxrel_history"
BUSY_SECONDS = 10.0  # how long a writer waits for another before giving up

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: the first schema
        f"CREATE TABLE {MARKER} (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE artifacts (id INTEGER PRIMARY KEY, name TEXT NOT NULL, version TEXT NOT NULL, "
        "commit_sha TEXT NOT NULL DEFAULT '', sha256 TEXT NOT NULL DEFAULT '', "
        "UNIQUE (name, version, commit_sha, sha256))",
        "CREATE TABLE combos (id INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, cell TEXT NOT NULL, "
        "python TEXT NOT NULL, platform TEXT NOT NULL, device TEXT NOT NULL)",
        "CREATE TABLE combo_artifacts (combo INTEGER NOT NULL REFERENCES combos (id), "
        "artifact INTEGER NOT NULL REFERENCES artifacts (id), role TEXT NOT NULL, PRIMARY KEY (combo, artifact))",
        "CREATE TABLE runs (id INTEGER PRIMARY KEY, report_sha256 TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, "
        "source TEXT NOT NULL, night TEXT NOT NULL, recorded TEXT NOT NULL, machine TEXT NOT NULL, "
        "jaxrel_version TEXT NOT NULL, frontend TEXT NOT NULL, frontend_version TEXT NOT NULL, "
        "frontend_commit TEXT NOT NULL DEFAULT '')",
        "CREATE TABLE results (id INTEGER PRIMARY KEY, run INTEGER NOT NULL REFERENCES runs (id), "
        "combo INTEGER NOT NULL REFERENCES combos (id), test TEXT NOT NULL, outcome TEXT NOT NULL, "
        "duration REAL, signature TEXT NOT NULL DEFAULT '', UNIQUE (run, combo, test))",
        "CREATE TABLE verdicts (run INTEGER NOT NULL REFERENCES runs (id), cell TEXT NOT NULL, test TEXT NOT NULL, "
        "verdict TEXT NOT NULL, PRIMARY KEY (run, cell, test))",
        "CREATE TABLE culprits (id INTEGER PRIMARY KEY, cell TEXT NOT NULL, last_good TEXT NOT NULL, "
        "first_bad TEXT NOT NULL, culprit TEXT, log TEXT NOT NULL DEFAULT '', UNIQUE (cell, last_good, first_bad))",
        "CREATE TABLE annotations (id INTEGER PRIMARY KEY, cell TEXT NOT NULL, test TEXT NOT NULL, "
        "kind TEXT NOT NULL, reason TEXT NOT NULL, created TEXT NOT NULL)",
        "CREATE INDEX results_by_combo ON results (combo, test)",
        "CREATE INDEX runs_by_night ON runs (night)",
        "CREATE INDEX verdicts_by_cell ON verdicts (cell, verdict)",
    ),
    (  # 2: the newest result of each (cell, test) and the one before it, kept at ingest: "the night before" in one
       # lookup instead of a scan of every combo the cell ever had
        "CREATE TABLE last_results (cell TEXT NOT NULL, test TEXT NOT NULL, night TEXT NOT NULL, "
        "outcome TEXT NOT NULL, prev_night TEXT NOT NULL DEFAULT '', prev_outcome TEXT NOT NULL DEFAULT '', "
        "PRIMARY KEY (cell, test))",
        "CREATE INDEX verdicts_by_meaning ON verdicts (verdict, run, cell)",
        "CREATE INDEX combos_by_artifact ON combo_artifacts (artifact, combo)",
        "INSERT INTO last_results (cell, test, night, outcome) SELECT combos.cell, results.test, MAX(runs.night), "
        "'failed' FROM results JOIN runs ON runs.id = results.run JOIN combos ON combos.id = results.combo "
        "WHERE results.outcome <> 'infra' GROUP BY combos.cell, results.test",
        "UPDATE last_results SET outcome = (SELECT results.outcome FROM results JOIN runs ON runs.id = results.run "
        "JOIN combos ON combos.id = results.combo WHERE combos.cell = last_results.cell AND results.test = "
        "last_results.test AND runs.night = last_results.night AND results.outcome <> 'infra' ORDER BY runs.id DESC "
        "LIMIT 1)",
    ),
)
SCHEMA = len(MIGRATIONS)


class HistoryError(BadInput):
    """The store or a report is not what it must be (exit 2); :attr:`exit_code` 3 where the environment failed."""


class Store:
    """An open store: :meth:`transaction` for every write, plain queries through :meth:`rows`."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self.db = connection
        self.path = path

    def rows(self, sql: str, parameters: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        return list(self.db.execute(sql, parameters))

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``: the one writer, or a clear refusal): all or nothing."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as error:
            raise _locked(self.path, error) from None
        try:
            yield self.db
        except BaseException:
            self.db.rollback()
            raise
        self.db.commit()

    def close(self) -> None:
        self.db.close()


def _locked(path: Path, error: sqlite3.Error) -> HistoryError:
    if "locked" in str(error) or "busy" in str(error):
        return HistoryError(f"{path}: another jaxrel is writing this store (it stayed locked for {BUSY_SECONDS:g} s); "
                            "run one collector at a time, or retry when it is done", exit_code=ExitCode.ENVIRONMENT)
    return HistoryError(f"{path}: the store cannot be written ({error}); check the file and its disk",
                        exit_code=ExitCode.ENVIRONMENT)


def open_store(path: str | Path = DEFAULT, *, create: bool = True) -> Store:
    """The store at ``path``, created and migrated to :data:`SCHEMA` as needed (``create=False``: it must exist)."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise HistoryError(f"{path}: not a file (a directory or a device); name a history store file with --db")
    if not path.exists():
        if not create:
            raise HistoryError(f"{path}: no history store there; ingest a report first (jaxrel history ingest), "
                               "or name the store with --db")
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        connection = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
        connection.execute("PRAGMA foreign_keys = ON")
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as error:
        raise HistoryError(f"{path}: not a SQLite database ({error}); name a jaxrel history store with --db, or "
                           "move this file away") from None
    if tables and MARKER not in tables:
        connection.close()
        raise HistoryError(f"{path}: a SQLite database of something else (tables: {', '.join(sorted(tables)[:5])}); "
                           "name a jaxrel history store with --db")
    if version > SCHEMA:
        connection.close()
        raise HistoryError(f"{path}: written by a newer jaxrel (schema {version}; this one reads up to {SCHEMA}); "
                           "upgrade jaxrel (pip install --upgrade jaxrel) to read it")
    store = Store(connection, path)
    if version < SCHEMA:
        _migrate(store, version)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
    except sqlite3.OperationalError:
        pass  # another process holds it; WAL is already on from the store's creation
    return store


def _migrate(store: Store, version: int) -> None:
    with store.transaction() as db:
        for number in range(version, SCHEMA):
            for statement in MIGRATIONS[number]:
                db.execute(statement)
        if version == 0:
            db.execute(f"INSERT INTO {MARKER} (key, value) VALUES ('created-by', ?)",
                       (f"jaxrel (pid {os.getpid()})",))
        db.execute(f"PRAGMA user_version = {SCHEMA}")
