"""The history store on a real PostgreSQL server (Debian's package, started on loopback for this module):
the same nights, verdicts and answers as on SQLite, and the server's own failures in one line each."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from boundary_cli import run
from history_support import BREAK_NIGHT, BROKEN_TEST, night_date, write_nights
from postgres_support import PASSWORD, Postgres, binaries

from jaxrel.history import ingest
from jaxrel.history.store import open_store

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed: pip install -e '.[test]'")
pytestmark = pytest.mark.skipif(binaries() is None, reason="no PostgreSQL server binaries: apt-get install postgresql "
                                                           "(.ci/run installs it)")


@pytest.fixture(scope="module")
def server() -> Iterator[Postgres]:
    started = Postgres()
    yield started
    started.stop()


@pytest.fixture
def week(server: Postgres, tmp_path: Path) -> tuple[str, list[Path]]:
    url = server.database()
    reports = write_nights(tmp_path / "reports")
    store = open_store(url)
    try:
        for night, path in enumerate(reports, start=1):
            ingest.ingest(store, path, night=night_date(night), machine="ci")
    finally:
        store.close()
    return url, reports


def test_the_same_nights_mean_the_same_on_a_server(week: tuple[str, list[Path]], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    url, reports = week
    store = open_store(url)
    try:
        (meaning,), = store.rows(
            "SELECT verdicts.verdict FROM verdicts JOIN runs ON runs.id = verdicts.run WHERE runs.night = ? AND "
            "verdicts.cell = ? AND verdicts.test = ?", (night_date(BREAK_NIGHT), "py3.12-jaxlib0.11.0", BROKEN_TEST))
        results = store.rows("SELECT COUNT(*) FROM results")[0][0]
    finally:
        store.close()
    assert meaning == "new-regression"
    again = run(["history", "ingest", "--db", url, str(reports[0])], capsys)
    assert again.code == 0 and "already kept" in again.out
    answers = {}
    for pins in (["jaxlib==0.11.0"], ["jaxlib==0.11.2"], ["jax-cuda13-plugin==0.11.2"], ["jaxlib==0.10.2"]):
        answers[pins[0]] = json.loads(run(["history", "query", "--db", url, "--json", *pins], capsys).out)["verdict"]
    assert answers == {"jaxlib==0.11.0": "known bad", "jaxlib==0.11.2": "flaky",
                       "jax-cuda13-plugin==0.11.2": "known good", "jaxlib==0.10.2": "untested"}
    site = tmp_path / "site"
    assert run(["history", "publish", "--db", url, "--output", str(site)], capsys).code == 0
    assert json.loads((site / "api" / "v1" / "matrix.json").read_text())["nights"][0] == night_date(7)
    store = open_store(url)
    try:
        assert store.rows("SELECT COUNT(*) FROM results")[0][0] == results
    finally:
        store.close()


def test_one_writer_at_a_time_on_the_server(week: tuple[str, list[Path]], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    url, _ = week
    other = write_nights(tmp_path / "more", nights=1)[0]
    other.write_text(other.read_text().replace('"dirty": false', '"dirty": true'))
    monkeypatch.setattr("jaxrel.history.store.BUSY_SECONDS", 0.5)
    holder = psycopg.connect(url, autocommit=True)
    holder.execute("BEGIN")
    holder.execute("SELECT pg_advisory_xact_lock(%s)", (0x6A617872,))
    try:
        run(["history", "ingest", "--db", url, str(other)], capsys).one_line_error(3, "another jaxrel is writing")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert run(["history", "ingest", "--db", url, str(other)], capsys).code == 0


def test_the_servers_failures_are_one_line_without_the_password(server: Postgres,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    wrong = f"postgresql://releaser:not-{PASSWORD}@127.0.0.1:{server.port}/postgres"
    ran = run(["history", "query", "--db", wrong, "jax==1"], capsys)
    line = ran.one_line_error(3, "cannot open the store")
    assert f"not-{PASSWORD}" not in ran.out + ran.err and "password" in line.lower()
    foreign = server.database()
    with psycopg.connect(foreign, autocommit=True) as connection:
        connection.execute("CREATE TABLE users (name TEXT)")
    run(["history", "query", "--db", foreign, "jax==1"], capsys).one_line_error(2, "something else")
    gone = f"postgresql://postgres@127.0.0.1:{server.port}/no_such_database"
    run(["history", "ingest", "--db", gone, "x.json"], capsys).one_line_error(2, "x.json")


def test_concurrent_collectors_never_double_a_report(week: tuple[str, list[Path]], tmp_path: Path) -> None:
    """Two collectors ingesting the same new report at once: one run kept (the report's sha256 is unique)."""
    url, _ = week
    report = write_nights(tmp_path / "same", nights=1)[0]
    report.write_text(report.read_text().replace('"dirty": false', '"dirty": true'))
    outcomes: list[object] = []

    def collect() -> None:
        store = open_store(url)
        try:
            outcomes.append(ingest.ingest(store, report, night=night_date(8)).run)
        except Exception as error:  # noqa: BLE001 - the test counts what each collector met
            outcomes.append(error)
        finally:
            store.close()

    workers = [threading.Thread(target=collect) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    store = open_store(url)
    try:
        assert store.rows("SELECT COUNT(*) FROM runs WHERE night = ?", (night_date(8),))[0][0] == 1
    finally:
        store.close()
    assert sorted(o is None for o in outcomes) == [False, True]
