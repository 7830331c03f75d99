"""The history store: one SQLite file (standard library) or a PostgreSQL database, its schema and migrations.

A path is a SQLite file, opened with WAL and foreign keys on; its schema's version is ``PRAGMA
user_version``. ``postgresql://…`` is a shared server (psycopg 3, the ``history`` extra), for several
projects' nightlies; its schema's version is kept in the ``jaxrel_history`` table. Every version has
one migration, applied in one transaction. A file that is not SQLite, a SQLite file
that is not a jaxrel history (tables of its own, no ``jaxrel_history`` marker), a store written by a
newer jaxrel, or one another writer holds locked: each is one line (exit 2 or 3), nothing written.
The SQL is portable (``TEXT``, ``REAL``, ``UNIQUE``, ``REFERENCES``, ``ON CONFLICT``, ``RETURNING``):
the two dialects differ in the identity column (``{ID}``), the placeholder (``?`` / ``%s``, converted
by :class:`Db`), where the schema version lives, and how the one writer is kept (SQLite's
``BEGIN IMMEDIATE``; PostgreSQL's transaction-level advisory lock).

What it keeps: artifacts (name, version, commit, wheel sha256); combos (the set of artifacts, with
Python, platform and device, keyed by a digest of all of them); runs (where from, which night, when,
machine, jaxrel version, the report's sha256: unique, so one report is ingested once); results (run,
combo, test, outcome, duration, failure signature); verdicts (the meaning computed at ingest, per
run, cell and test); culprits (cell, last good and first bad frontend commits, the commit bisect
named, its log); annotations (flaky / infra / expected / fixed-by, with a reason).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jaxrel.errors import BadInput, ExitCode

__all__ = ["ALWAYS", "CELL_TEST", "DEFAULT", "OWN_TESTS", "SCHEMA", "Db", "HistoryError", "Store", "keep_selection",
           "open_store", "selection_text"]

DEFAULT = Path("build") / "history" / "history.sqlite"
MARKER = "jaxrel_history"
BUSY_SECONDS = 10.0  # how long a writer waits for another before giving up

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: the first schema
        f"CREATE TABLE {MARKER} (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE artifacts ({ID}, name TEXT NOT NULL, version TEXT NOT NULL, "
        "commit_sha TEXT NOT NULL DEFAULT '', sha256 TEXT NOT NULL DEFAULT '', "
        "UNIQUE (name, version, commit_sha, sha256))",
        "CREATE TABLE combos ({ID}, digest TEXT NOT NULL UNIQUE, cell TEXT NOT NULL, "
        "python TEXT NOT NULL, platform TEXT NOT NULL, device TEXT NOT NULL)",
        "CREATE TABLE combo_artifacts (combo INTEGER NOT NULL REFERENCES combos (id), "
        "artifact INTEGER NOT NULL REFERENCES artifacts (id), role TEXT NOT NULL, PRIMARY KEY (combo, artifact))",
        "CREATE TABLE runs ({ID}, report_sha256 TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, "
        "source TEXT NOT NULL, night TEXT NOT NULL, recorded TEXT NOT NULL, machine TEXT NOT NULL, "
        "jaxrel_version TEXT NOT NULL, frontend TEXT NOT NULL, frontend_version TEXT NOT NULL, "
        "frontend_commit TEXT NOT NULL DEFAULT '')",
        "CREATE TABLE results ({ID}, run INTEGER NOT NULL REFERENCES runs (id), "
        "combo INTEGER NOT NULL REFERENCES combos (id), test TEXT NOT NULL, outcome TEXT NOT NULL, "
        "duration REAL, signature TEXT NOT NULL DEFAULT '', UNIQUE (run, combo, test))",
        "CREATE TABLE verdicts (run INTEGER NOT NULL REFERENCES runs (id), cell TEXT NOT NULL, test TEXT NOT NULL, "
        "verdict TEXT NOT NULL, PRIMARY KEY (run, cell, test))",
        "CREATE TABLE culprits ({ID}, cell TEXT NOT NULL, last_good TEXT NOT NULL, "
        "first_bad TEXT NOT NULL, culprit TEXT, log TEXT NOT NULL DEFAULT '', UNIQUE (cell, last_good, first_bad))",
        "CREATE TABLE annotations ({ID}, cell TEXT NOT NULL, test TEXT NOT NULL, "
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
    (  # 3: which suite a result came from (the frontend's own tests list only their failures: an own test absent
       # on a night its selection ran passed); a culprit's night and the tests bisected
        "ALTER TABLE results ADD COLUMN suite TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE last_results ADD COLUMN suite TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE culprits ADD COLUMN tests TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE culprits ADD COLUMN night TEXT NOT NULL DEFAULT ''",
    ),
    (  # 4: whether the culprit changes only the family's version files (the regression is an expectation)
        "ALTER TABLE culprits ADD COLUMN version_only INTEGER NOT NULL DEFAULT 0",
    ),
    (  # 5: what changes, not every repetition (jaxrel.history.selections): a run's routine results (passed,
       # skipped) in a selection kept once per distinct text; rows only for the rest (the rows moved by _selections)
        "CREATE TABLE selections ({ID}, digest TEXT NOT NULL UNIQUE, tests TEXT NOT NULL)",
        "CREATE TABLE run_selections (run INTEGER NOT NULL REFERENCES runs (id), combo INTEGER NOT NULL REFERENCES "
        "combos (id), selection INTEGER NOT NULL REFERENCES selections (id), PRIMARY KEY (run, combo))",
        "CREATE INDEX run_selections_by_combo ON run_selections (combo, run)",
    ),
    (  # 6: the frontend's minimum backend on each run: a regression whose backend fell below it is retired
        "ALTER TABLE runs ADD COLUMN minimum_backend TEXT NOT NULL DEFAULT ''",
    ),
    (  # 7: a result's peak memory, where the run measured it (a Crater's library: the box's cgroup), so the next
       # Crater schedules by it
        "ALTER TABLE results ADD COLUMN peak_bytes BIGINT",
    ),
)
CELL_TEST = "cell"  # the test id under which a cell's own outcome is kept
OWN_TESTS = "own tests"  # the test id under which the frontend's own tests are kept as one (passed: none failed)
ALWAYS = (CELL_TEST, OWN_TESTS)  # rows and verdicts kept for every run, routine or not
SCHEMA = len(MIGRATIONS)


IDENTITY = {"sqlite": "id INTEGER PRIMARY KEY", "postgresql": "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"}
LOCK_KEY = 0x6A617872  # "jaxr": the advisory lock every jaxrel writer of a PostgreSQL store takes


class HistoryError(BadInput):
    """The store or a report is not what it must be (exit 2); :attr:`exit_code` 3 where the environment failed."""


class Db:
    """One connection in either dialect: ``execute``/``executemany`` take ``?`` placeholders and return rows."""

    def __init__(self, connection: Any, dialect: str) -> None:
        self.connection = connection
        self.dialect = dialect

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgresql" else sql

    def execute(self, sql: str, parameters: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        cursor = self.connection.execute(self._sql(sql), tuple(parameters))
        return list(cursor.fetchall()) if cursor.description else []

    def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        if not rows:
            return
        if self.dialect == "postgresql":
            with self.connection.cursor() as cursor:
                cursor.executemany(self._sql(sql), rows)
        else:
            self.connection.executemany(sql, rows)


class Store:
    """An open store: :meth:`transaction` for every write, plain queries through :meth:`rows`."""

    def __init__(self, connection: Any, dialect: str, where: str) -> None:
        self.db = Db(connection, dialect)
        self.path = where  # the file, or the server's URL without its password (for messages)

    @property
    def dialect(self) -> str:
        return self.db.dialect

    def rows(self, sql: str, parameters: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        return self.db.execute(sql, parameters)

    @contextmanager
    def transaction(self) -> Iterator[Db]:
        """One write transaction, the only writer (or a clear refusal): all or nothing."""
        connection = self.db.connection
        try:
            if self.dialect == "sqlite":
                connection.execute("BEGIN IMMEDIATE")
            else:
                connection.execute("BEGIN")
                waited = time.monotonic()
                while not connection.execute("SELECT pg_try_advisory_xact_lock(%s)", (LOCK_KEY,)).fetchone()[0]:
                    if time.monotonic() - waited > BUSY_SECONDS:
                        connection.rollback()
                        raise _locked(self.path, "locked")
                    time.sleep(0.1)
        except (sqlite3.OperationalError, _server_errors()) as error:
            raise _locked(self.path, str(error)) from None
        try:
            yield self.db
        except BaseException:
            connection.rollback()
            raise
        connection.commit()

    def close(self) -> None:
        self.db.connection.close()


def _server_errors() -> type[Exception]:
    try:
        import psycopg
    except ImportError:
        return sqlite3.Error
    return psycopg.OperationalError


def _locked(where: str, error: str) -> HistoryError:
    if "locked" in error or "busy" in error:
        return HistoryError(f"{where}: another jaxrel is writing this store (it stayed locked for {BUSY_SECONDS:g} s); "
                            "run one collector at a time, or retry when it is done", exit_code=ExitCode.ENVIRONMENT)
    return HistoryError(f"{where}: the store cannot be written ({error}); check the file and its disk",
                        exit_code=ExitCode.ENVIRONMENT)


def open_store(path: str | Path = DEFAULT, *, create: bool = True) -> Store:
    """The store at ``path`` (a file, or ``postgresql://…``), created and migrated to :data:`SCHEMA` as needed
    (``create=False``: it must exist)."""
    if str(path).startswith(("postgresql://", "postgres://")):
        return _open_server(str(path), create)
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
    store = Store(connection, "sqlite", str(path))
    _check(store, tables, version)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
    except sqlite3.OperationalError:
        pass  # another process holds it; WAL is already on from the store's creation
    return store


def _open_server(url: str, create: bool) -> Store:
    from jaxrel._util.text import redact  # the URL's password never reaches a message
    from jaxrel.distributions.urls import parse_url

    shown = redact(url)
    parse_url(url.replace("postgresql://", "http://", 1).replace("postgres://", "http://", 1), "--db")
    try:
        import psycopg
    except ImportError:
        raise HistoryError("--db postgresql://…: psycopg is not installed; pip install 'jaxrel[history]'",
                           exit_code=ExitCode.ENVIRONMENT) from None
    try:
        connection = psycopg.connect(url, autocommit=True, connect_timeout=int(BUSY_SECONDS))
        tables = {str(name) for (name,) in connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()}
        version = 0
        if MARKER in tables:
            found = connection.execute(f"SELECT value FROM {MARKER} WHERE key = 'schema'").fetchone()
            version = int(found[0]) if found else 0
    except psycopg.Error as error:
        said = " ".join(redact(str(error)).split())[:200]
        raise HistoryError(f"--db {shown}: cannot open the store ({said}); check the server, the database and the "
                           "credentials", exit_code=ExitCode.ENVIRONMENT) from None
    store = Store(connection, "postgresql", shown)
    if not tables and not create:
        store.close()
        raise HistoryError(f"{shown}: no history store in this database; ingest a report first")
    _check(store, tables, version)
    return store


def _check(store: Store, tables: set[str], version: int) -> None:
    """Refuse a foreign or newer store; migrate an older one."""
    if tables and MARKER not in tables:
        store.close()
        raise HistoryError(f"{store.path}: a database of something else (tables: {', '.join(sorted(tables)[:5])}); "
                           "name a jaxrel history store with --db")
    if version > SCHEMA:
        store.close()
        raise HistoryError(f"{store.path}: written by a newer jaxrel (schema {version}; this one reads up to "
                           f"{SCHEMA}); upgrade jaxrel (pip install --upgrade jaxrel) to read it")
    if version < SCHEMA:
        _migrate(store, version)


def selection_text(results: Iterable[tuple[str, str, str]]) -> str:
    """A run's selection as stored, from its (test, outcome, suite) results: every test that ran (not the cell's
    own rows, not infra), a failing one too (its row says how it failed, so a night that fails one test shares the
    selection of the nights that passed it), as ``[[test, skipped (0/1), suite], …]``, sorted, one JSON text."""
    ran = {(test, int(outcome == "skipped"), suite) for test, outcome, suite in results
           if test not in ALWAYS and outcome != "infra"}
    return json.dumps([list(entry) for entry in sorted(ran)], separators=(",", ":"))


def keep_selection(db: Db, run: int, combo: int, text: str) -> None:
    """Keep ``text`` as the selection of ``run`` on ``combo`` (stored once per distinct text)."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    db.execute("INSERT INTO selections (digest, tests) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING", (digest, text))
    (selection,), = db.execute("SELECT id FROM selections WHERE digest = ?", (digest,))
    db.execute("INSERT INTO run_selections (run, combo, selection) VALUES (?, ?, ?) ON CONFLICT (run, combo) DO "
               "NOTHING", (run, combo, int(selection)))


def _selections(db: Db) -> None:
    """Schema 5's move: each run's routine results into its selection, their rows and plain ``passed`` verdicts
    dropped (in the migration's one transaction: all or nothing)."""
    marks = ", ".join("?" for _ in ALWAYS)
    ran: dict[tuple[int, int], list[tuple[str, str, str]]] = {}
    for run, combo, test, outcome, suite in db.execute("SELECT run, combo, test, outcome, suite FROM results"):
        ran.setdefault((int(run), int(combo)), []).append((str(test), str(outcome), str(suite)))
    for (run, combo), results in ran.items():
        keep_selection(db, run, combo, selection_text(results))
    db.execute(f"DELETE FROM results WHERE outcome IN ('passed', 'skipped') AND test NOT IN ({marks})", ALWAYS)
    db.execute(f"DELETE FROM verdicts WHERE verdict = 'passed' AND test NOT IN ({marks})", ALWAYS)


def _migrate(store: Store, version: int) -> None:
    with store.transaction() as db:
        for number in range(version, SCHEMA):
            for statement in MIGRATIONS[number]:
                db.execute(statement.replace("{ID}", IDENTITY[store.dialect]))
            if number == 4:
                _selections(db)
        if version == 0:
            db.execute(f"INSERT INTO {MARKER} (key, value) VALUES ('created-by', ?)", (f"jaxrel (pid {os.getpid()})",))
        if store.dialect == "sqlite":
            db.execute(f"PRAGMA user_version = {SCHEMA}")
        else:
            db.execute(f"INSERT INTO {MARKER} (key, value) VALUES ('schema', ?) ON CONFLICT (key) DO UPDATE SET "
                       "value = excluded.value", (str(SCHEMA),))
