"""``jaxrel history``: a week of sample nights (tests/history_support.py) ingested, classified, asked and published."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from boundary_cli import run
from history_support import (
    BREAK_NIGHT,
    BROKEN_TEST,
    FLAKY_NIGHT,
    FLAKY_TEST,
    INFRA_NIGHT,
    night_date,
    write_nights,
)

from jaxrel.history import ingest, query, selections
from jaxrel.history.store import SCHEMA, open_store

BROKEN_CELL, FLAKY_CELL, GPU_CELL = "py3.12-jaxlib0.11.0", "py3.12-jaxlib0.11.2", "py3.12-jaxlib0.11.2-cuda13"


@pytest.fixture
def week(tmp_path: Path) -> tuple[Path, list[Path]]:
    """A store with seven nights ingested, one report per night."""
    reports = write_nights(tmp_path / "reports")
    db = tmp_path / "history.sqlite"
    store = open_store(db)
    for night, path in enumerate(reports, start=1):
        ingest.ingest(store, path, night=night_date(night), machine="ci")
    store.close()
    return db, reports


def _verdict(db: Path, night: int, cell: str, test: str) -> str:
    """The meaning kept for ``test``: its verdict row, or ``passed`` when it has none (a plain pass is kept only in
    its run's selection) and the selection says it ran and passed."""
    store = open_store(db)
    try:
        rows = store.rows("SELECT verdicts.verdict FROM verdicts JOIN runs ON runs.id = verdicts.run WHERE runs.night "
                          "= ? AND verdicts.cell = ? AND verdicts.test = ?", (night_date(night), cell, test))
        ran = selections.outcomes(store, "runs.night = ? AND combos.cell = ?", (night_date(night), cell), {test})
    finally:
        store.close()
    assert len(rows) <= 1, rows
    if not rows:
        (found,) = ran.values()
        assert test in found and found[test][0] == "passed", found
        return "passed"
    return str(rows[0][0])


def test_each_night_means_what_happened(week: tuple[Path, list[Path]]) -> None:
    db, _ = week
    assert _verdict(db, BREAK_NIGHT - 1, BROKEN_CELL, BROKEN_TEST) == "passed"
    assert _verdict(db, BREAK_NIGHT, BROKEN_CELL, BROKEN_TEST) == "new-regression"
    assert _verdict(db, BREAK_NIGHT, BROKEN_CELL, "cell") == "new-regression"
    assert _verdict(db, BREAK_NIGHT + 1, BROKEN_CELL, BROKEN_TEST) == "still-failing"
    assert _verdict(db, FLAKY_NIGHT, FLAKY_CELL, FLAKY_TEST) == "flaky"
    assert _verdict(db, FLAKY_NIGHT, FLAKY_CELL, "cell") == "passed"  # a flaky test does not fail its cell
    assert _verdict(db, INFRA_NIGHT, FLAKY_CELL, "cell") == "infra"
    assert _verdict(db, INFRA_NIGHT + 1, FLAKY_CELL, "cell") == "passed"  # infra says nothing of the code


def test_a_cell_that_stops_reporting_is_stale(week: tuple[Path, list[Path]]) -> None:
    store = open_store(week[0])
    try:
        stale = query.stale_cells(store, nights=3)
    finally:
        store.close()
    assert stale == [{"cell": GPU_CELL, "last_night": night_date(2)}]


def test_ingest_twice_is_once_and_a_directory_takes_every_report(tmp_path: Path, week: tuple[Path, list[Path]],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    db, reports = week
    before = sqlite3.connect(db).execute("SELECT COUNT(*) FROM results").fetchone()
    ran = run(["history", "ingest", "--db", str(db), "--night", night_date(1), str(reports[0].parent.parent)], capsys)
    assert ran.code == 0 and ran.out.count("already kept") == len(reports)
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM results").fetchone() == before


@pytest.mark.parametrize(("pins", "verdict", "code"), [
    (["jax==0.12.0.dev0", "jaxlib==0.11.0"], "known bad", 1),
    (["jax==0.12.0.dev0", "jaxlib==0.11.2"], "flaky", 1),
    (["jaxlib==0.11.2", "jax-cuda13-plugin==0.11.2"], "known good", 0),
    (["jax==0.12.0.dev0", "jaxlib==0.10.2"], "untested", 1),
    (["jax==0.12.0.dev0", "jaxlib==0.12.0"], "known bad", 1),  # refused by the guard every night, as expected
])
def test_the_query_answers_all_four_verdicts(week: tuple[Path, list[Path]], pins: list[str], verdict: str, code: int,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    ran = run(["history", "query", "--db", str(week[0]), "--json", *pins], capsys)
    assert ran.code == code, ran.err
    answer = json.loads(ran.out)
    assert answer["verdict"] == verdict
    if verdict == "known bad" and "jaxlib==0.12.0" in pins:
        assert {n["outcome"] for n in answer["nights"]} == {"refused"}
    elif verdict == "known bad":
        failed = [n for n in answer["nights"] if n["outcome"] == "failed"]
        assert failed[0]["night"] == night_date(BREAK_NIGHT) and BROKEN_TEST in failed[0]["failing"]
    if verdict == "untested":
        assert answer["nearest"] and "jax==0.12.0.dev0" in answer["nearest"][0]["pins"]
    text = run(["history", "query", "--db", str(week[0]), *pins], capsys)
    assert text.out.splitlines()[0].endswith(verdict.upper())


def test_publish_writes_the_hud_and_its_api(week: tuple[Path, list[Path]], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site"
    assert run(["history", "publish", "--db", str(week[0]), "--output", str(site)], capsys).code == 0
    matrix = json.loads((site / "api" / "v1" / "matrix.json").read_text())
    assert matrix["api"] == 1 and matrix["nights"][0] == night_date(7)
    assert matrix["grid"][night_date(BREAK_NIGHT)][BROKEN_CELL]["verdict"] == "new-regression"
    assert GPU_CELL not in matrix["grid"][night_date(7)]  # a missing result stays missing, not green
    assert json.loads((site / "api" / "v1" / "stale.json").read_text())["stale"][0]["cell"] == GPU_CELL
    atom = (site / "regressions.atom").read_text()
    assert f"{BROKEN_CELL} regressed on {night_date(BREAK_NIGHT)}" in atom and atom.count("<entry>") == 1
    assert FLAKY_TEST in (site / "flaky.html").read_text()
    page = (site / "cells" / f"{BROKEN_CELL}.html").read_text()
    assert "https://github.com/jax-ml/jax/commit/" in page and BROKEN_TEST in page


BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(BROWSER is None, reason="no chromium on PATH: run scripts/install_build_tools.sh")
def test_the_hud_renders_in_chromium_and_its_filter_hides_cells(week: tuple[Path, list[Path]], tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site"
    run(["history", "publish", "--db", str(week[0]), "--output", str(site)], capsys)
    index = site / "index.html"
    # the filter, typed as a person would: the script runs on load with a value set in the page
    filtered = site / "filtered.html"
    filtered.write_text(index.read_text().replace(
        "</script>", "box.value='cuda13';box.dispatchEvent(new Event('input'));</script>"))
    common = [str(BROWSER), "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]
    dom = subprocess.run([*common, "--dump-dom", filtered.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-500:]
    assert dom.stdout.count("<tr>") == 8  # the header and seven nights
    hidden = re.findall(r'data-cell="py3\.12-jaxlib0\.11\.0"[^>]*display: none', dom.stdout)
    shown = re.findall(r'data-cell="py3\.12-jaxlib0\.11\.2-cuda13"[^>]*>', dom.stdout)
    assert len(hidden) == 8, "the filter left other cells showing"  # its header and seven nights
    assert shown and not any("display: none" in tag for tag in shown)
    shot = tmp_path / "hud.png"
    done = subprocess.run([*common, f"--screenshot={shot}", "--window-size=900,500", index.as_uri()],
                          capture_output=True, timeout=120)
    assert done.returncode == 0 and shot.stat().st_size > 5000


def test_hostile_stores_and_reports_are_one_line_each(tmp_path: Path, week: tuple[Path, list[Path]],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    db, reports = week
    foreign = tmp_path / "foreign.sqlite"
    sqlite3.connect(foreign).execute("CREATE TABLE users (name TEXT)")
    run(["history", "query", "--db", str(foreign), "jax==1"], capsys).one_line_error(2, "something else")
    newer = tmp_path / "newer.sqlite"
    shutil.copy(db, newer)
    sqlite3.connect(newer).execute(f"PRAGMA user_version = {SCHEMA + 1}")
    run(["history", "query", "--db", str(newer), "jax==1"], capsys).one_line_error(2, "newer jaxrel", "upgrade")
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database" * 100)
    run(["history", "query", "--db", str(garbage), "jax==1"], capsys).one_line_error(2, "not a SQLite database")
    counts = sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs").fetchone()
    for text in ("{", "[]", '{"matrix": {}, "cells": []}', json.dumps({"atlas": 1})):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        run(["history", "ingest", "--db", str(db), str(bad)], capsys).one_line_error(2, str(bad))
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs").fetchone() == counts
    pins = [f"p{i}==1.0" for i in range(10_000)]
    run(["history", "query", "--db", str(db), *pins], capsys).one_line_error(2, "at most")


def test_a_locked_store_is_refused_and_a_killed_ingest_leaves_nothing(tmp_path: Path, week: tuple[Path, list[Path]],
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    db, reports = week
    other = write_nights(tmp_path / "more", nights=1)[0]
    other.write_text(other.read_text().replace('"dirty": false', '"dirty": true'))  # another report: a new sha256
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    monkeypatch.setattr("jaxrel.history.store.BUSY_SECONDS", 0.2)
    try:
        run(["history", "ingest", "--db", str(db), str(other)], capsys).one_line_error(3, "another jaxrel is writing")
    finally:
        holder.rollback()
        holder.close()
    before = sqlite3.connect(db).execute("SELECT COUNT(*), (SELECT COUNT(*) FROM results) FROM runs").fetchone()

    def killed(*args: object) -> str:
        raise KeyboardInterrupt  # Ctrl-C (or a kill) half-way through the night's results

    monkeypatch.setattr(ingest, "verdict", killed)
    assert run(["history", "ingest", "--db", str(db), str(other)], capsys).code == 130
    assert sqlite3.connect(db).execute("SELECT COUNT(*), (SELECT COUNT(*) FROM results) FROM runs").fetchone() == before


@pytest.mark.parametrize("source", ["store", "site", "url"])
def test_verdict_adds_one_line_of_evidence_from_the_history(source: str, week: tuple[Path, list[Path]],
                                                            tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """From the store, from a published site's directory, and from its URL (then offline, from the cached copy):
    the rule verdict and its exit code unchanged, one line of evidence under it."""
    import http.server
    import threading

    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site"
    run(["history", "publish", "--db", str(week[0]), "--output", str(site)], capsys)
    pins = ["jax==0.12.0.dev0", "jaxlib==0.11.0"]
    plain = run(["verdict", *pins, "--min-backend", "0.11.0"], capsys)
    if source == "url":  # the site served as GitHub Pages would serve it: static files over HTTP
        handler = type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=str(site)))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{httpd.server_address[1]}/"
        online = run(["verdict", *pins, "--min-backend", "0.11.0", "--history", url], capsys)
        httpd.shutdown()
        httpd.server_close()
        offline = run(["verdict", *pins, "--min-backend", "0.11.0", "--history", url], capsys)
        assert "history: known bad" in offline.out and "cached copy" in offline.out
        ran = online
    else:
        ran = run(["verdict", *pins, "--min-backend", "0.11.0", "--history", str(week[0] if source == "store"
                                                                                 else site)], capsys)
    assert ran.code == plain.code == 0  # the rules say compatible; the history testifies beside them
    extra = [line for line in ran.out.splitlines() if line not in plain.out.splitlines()]
    assert len(extra) == 1 and extra[0].strip().startswith("history: known bad"), ran.out


def test_doctor_adds_one_line_of_evidence_for_the_installed_set(week: tuple[Path, list[Path]], tmp_path: Path,
                                                                 site: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """An environment holding jax 0.12.0.dev0 and jaxlib 0.11.2 on Python 3.12 (an interpreter that answers
    doctor's probe with a site directory built file by file): the history calls that set flaky."""
    import sys as _sys

    site.jax("0.12.0.dev0", "0.11.0")
    site.jaxlib("0.11.2")
    python = tmp_path / "python3.12"
    python.write_text(f"#!{_sys.executable}\nimport json\n"
                      f"print(json.dumps([{str(python)!r}, '3.12.1', [{str(site.root)!r}]]))\n")
    python.chmod(0o755)
    plain = run(["doctor", "--python", str(python)], capsys)
    ran = run(["doctor", "--python", str(python), "--history", str(week[0])], capsys)
    assert ran.code == plain.code
    extra = [line for line in ran.out.splitlines() if line not in plain.out.splitlines()]
    assert len(extra) == 1 and extra[0].startswith("history: flaky"), ran.out


def test_an_annotated_failure_is_explained(week: tuple[Path, list[Path]], capsys: pytest.CaptureFixture[str]) -> None:
    db = str(week[0])
    pins = ["jax==0.12.0.dev0", "jaxlib==0.11.0"]
    assert json.loads(run(["history", "query", "--db", db, "--json", *pins], capsys).out)["verdict"] == "known bad"
    run(["history", "annotate", "--db", db, "no-such-cell", "--kind", "expected", "--reason", "x"],
        capsys).one_line_error(2, "no such cell")
    run(["history", "annotate", "--db", db, BROKEN_CELL, "--kind", "expected", "--reason", "\x1b[2J"],
        capsys).one_line_error(2, "--reason")
    done = run(["history", "annotate", "--db", db, BROKEN_CELL, "--kind", "expected", "--reason",
                "jaxlib 0.11.0 lacks the new pytree API; gated upstream"], capsys)
    assert done.code == 0
    assert json.loads(run(["history", "query", "--db", db, "--json", *pins], capsys).out)["verdict"] == "known good"


def test_a_bisect_report_names_the_culprit_on_the_hud_and_in_the_answer(week: tuple[Path, list[Path]], tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from history_support import bisect_report, commit

    db = str(week[0])
    path = bisect_report(tmp_path / "bisect")
    assert run(["history", "ingest", "--db", db, str(path)], capsys).code == 0
    assert "already kept" in run(["history", "ingest", "--db", db, str(path)], capsys).out
    answer = json.loads(run(["history", "query", "--db", db, "--json", "jaxlib==0.11.0"], capsys).out)
    assert answer["culprits"] == [{"cell": BROKEN_CELL, "last_good": commit(BREAK_NIGHT - 1),
                                   "first_bad": commit(BREAK_NIGHT + 1), "culprit": commit(BREAK_NIGHT)}]
    site = tmp_path / "site"
    run(["history", "publish", "--db", db, "--output", str(site)], capsys)
    page = (site / "cells" / f"{BROKEN_CELL}.html").read_text()
    assert f"https://github.com/jax-ml/jax/commit/{commit(BREAK_NIGHT)}" in page and "jaxrel bisect --good" in page
    culprits = json.loads((site / "api" / "v1" / "culprits.json").read_text())["culprits"]
    assert culprits[0]["culprit"] == commit(BREAK_NIGHT) and culprits[0]["log"].startswith("found")


def test_a_regression_has_its_page_its_range_its_culprit_and_its_commands(
        week: tuple[Path, list[Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from history_support import bisect_report, commit

    db = str(week[0])
    listed = json.loads(run(["history", "regressions", "--db", db, "--json"], capsys).out)["regressions"]
    assert [(r["cell"], r["night"], r["tests"]) for r in listed] == [(BROKEN_CELL, night_date(BREAK_NIGHT),
                                                                      [BROKEN_TEST])]
    found = listed[0]
    assert (found["last_good"], found["first_bad"]) == (commit(BREAK_NIGHT - 1), commit(BREAK_NIGHT))
    assert found["state"] == "open" and not found["bisected"] and found["own_tests"] == []
    assert found["ready"]  # a compat-suite test: nothing for bisect to do, the issue can open at once
    assert "bisect" not in found["commands"] and f"--ref {commit(BREAK_NIGHT)[:12]}" in found["commands"]["reproduce"]
    assert "trees differ at #" == found["signature"].split(": ", 1)[1]  # the address folded

    run(["history", "ingest", "--db", db, str(bisect_report(tmp_path / "bisect"))], capsys)
    site = tmp_path / "site"
    run(["history", "publish", "--db", db, "--output", str(site)], capsys)
    regressions = json.loads((site / "api" / "v1" / "regressions.json").read_text())["regressions"]
    assert regressions[0]["culprit"] == commit(BREAK_NIGHT) and regressions[0]["bisected"]
    page = (site / "regressions" / regressions[0]["page"]).read_text()
    assert f"commit/{commit(BREAK_NIGHT)}" in page and BROKEN_TEST in page and "jaxrel compat --frontend-src" in page
    assert f"regressions/{regressions[0]['page']}" in (site / "index.html").read_text()
    assert f"regressions/{regressions[0]['page']}" in (site / "regressions.atom").read_text()


def test_own_tests_listed_only_when_failing_regress_get_fixed_and_close(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from history_support import OWN_TEST, commit, write_own_nights

    db = tmp_path / "own.sqlite"
    store = open_store(db)
    for night, path in enumerate(write_own_nights(tmp_path / "reports"), start=1):
        ingest.ingest(store, path, night=night_date(night))
    store.close()
    cell = "py3.12-jaxlib0.11.0"
    assert _verdict(db, 3, cell, OWN_TEST) == "new-regression"  # nights 1-2 ran the selection and it did not fail
    assert _verdict(db, 3, cell, "own tests") == "new-regression"
    assert _verdict(db, 4, cell, OWN_TEST) == "still-failing"
    assert _verdict(db, 5, cell, OWN_TEST) == "fixed"  # not listed on a night the selection ran: it passed
    assert _verdict(db, 6, cell, "cell") == "infra"
    with pytest.raises(AssertionError):
        _verdict(db, 7, cell, OWN_TEST)  # only a test that failed before gets a row for passing
    listed = json.loads(run(["history", "regressions", "--db", str(db), "--json", "--close-after", "3"],
                            capsys).out)["regressions"]
    assert len(listed) == 1
    found = listed[0]
    assert found["own_tests"] == [OWN_TEST] and (found["last_good"], found["first_bad"]) == (commit(2), commit(3))
    assert (found["state"], found["last_red"], found["green_nights"]) == ("closed", night_date(4), 4)  # 5, 7, 8, 9
    assert found["commands"]["bisect"].endswith("--frontend-tests tests/api_util_test.py")  # the file: see bisect_files
    still = json.loads(run(["history", "regressions", "--db", str(db), "--json", "--close-after", "5"],
                           capsys).out)["regressions"]
    assert still[0]["state"] == "open"
    assert run(["history", "regressions", "--db", str(db), "--close-after", "0"], capsys).code == 2


def test_serve_answers_live_queries_and_republishes_as_the_store_changes(
        week: tuple[Path, list[Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import threading
    import urllib.error
    import urllib.request

    from history_support import report

    from jaxrel.history.serve import make_server

    db, _ = week
    urls: list[str] = []
    server = make_server(str(db), tmp_path / "site", port=0, on_ready=urls.append)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        def get(path: str) -> tuple[int, bytes]:
            try:
                with urllib.request.urlopen(urls[0] + path, timeout=60) as answer:
                    return answer.status, answer.read()
            except urllib.error.HTTPError as error:
                return error.code, error.read()

        status, page = get("index.html")
        assert status == 200 and b"nights" in page and urls[0].startswith("http://127.0.0.1:")
        pins = ["jaxlib==0.11.2", "jax-cuda13-plugin==0.11.2"]
        status, body = get("api/v1/query?" + "&".join(f"pin={p}" for p in pins))
        assert status == 200
        assert json.loads(body) == json.loads(run(["history", "query", "--db", str(db), "--json", *pins], capsys).out)
        status, body = get("api/v1/query?pin=jaxlib%3D%3Dbanana")
        assert status == 400 and "jaxlib==banana" in json.loads(body)["error"]
        status, body = get("api/v1/query?" + "&".join(f"pin=p{i}==1" for i in range(200)))
        assert status == 400 and "at most" in json.loads(body)["error"]

        eighth = tmp_path / "night-8" / "report.json"
        eighth.parent.mkdir()
        eighth.write_text(json.dumps(report(8)))
        assert run(["history", "ingest", "--db", str(db), "--night", "2026-10-08", str(eighth)], capsys).code == 0
        status, body = get("api/v1/matrix.json")
        assert status == 200 and json.loads(body)["nights"][0] == "2026-10-08"  # republished for the new night
    finally:
        server.shutdown()
        server.server_close()
    assert run(["history", "serve", "--db", str(db), "--host", "0.0.0.0"], capsys).code == 2
    assert run(["history", "serve", "--db", str(tmp_path / "none.sqlite")], capsys).code == 2


def test_one_issue_per_regression_opened_when_ready_edited_then_closed(
        week: tuple[Path, list[Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from history_support import bisect_report, commit

    from jaxrel.history.alerts import MARKER, Issue, plan
    from jaxrel.history.publish import COMMIT_URL

    db = str(week[0])

    def regressions(close_after: int = 3) -> list[dict[str, Any]]:
        ran = run(["history", "regressions", "--db", db, "--json", "--close-after", str(close_after)], capsys)
        return list(json.loads(ran.out)["regressions"])

    found = regressions()
    first = plan(found, [], COMMIT_URL, "https://hud.example.invalid")
    assert [(a.verb, a.number) for a in first] == [("open", None)]
    text = first[0].body
    assert text.startswith(MARKER.format(key=found[0]["key"])) and BROKEN_TEST in text
    assert "https://hud.example.invalid/regressions/" in text and f"commit/{commit(BREAK_NIGHT)}" in text
    opened = Issue(17, "open", text)
    assert plan(found, [opened], COMMIT_URL, "https://hud.example.invalid") == []  # nothing changed: no edit

    run(["history", "ingest", "--db", db, str(bisect_report(tmp_path / "bisect"))], capsys)  # a culprit tonight
    edits = plan(regressions(), [opened], COMMIT_URL, "https://hud.example.invalid")
    assert [(a.verb, a.number) for a in edits] == [("edit", 17)] and commit(BREAK_NIGHT)[:12] in edits[0].title
    closing = [dict(r, state="closed") for r in regressions()]
    assert [(a.verb, a.number) for a in plan(closing, [opened], COMMIT_URL)] == [("close", 17)]
    assert plan(regressions(), [Issue(17, "closed", text)], COMMIT_URL) == []  # a person closed it: it stays closed
    foreign = Issue(3, "open", "a person's own issue, no marker")
    assert [a.verb for a in plan(found, [foreign], COMMIT_URL)] == ["open"]

    listing = tmp_path / "regressions.json"
    listing.write_text(run(["history", "regressions", "--db", db, "--json"], capsys).out)
    script = Path(__file__).resolve().parents[2] / "scripts" / "regression_issues.py"
    dry = subprocess.run([sys.executable, str(script), str(listing), "--repo", "o/n", "--dry-run"],
                         capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0 and dry.stdout.startswith(f"open {found[0]['key']}: compat regression: "), dry.stderr
    listing.write_text('{"regressions": [{"key": 1}]}')
    bad = subprocess.run([sys.executable, str(script), str(listing), "--repo", "o/n", "--dry-run"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
