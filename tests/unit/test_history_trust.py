"""A history people can trust: a red square that only the version string turned red is an expectation, not a
regression, and "is this set known good?" never answers good with failures in the same answer.

Reports are written by compat's own ``to_json`` from real Matrix and CellResult values, the shape of a replay of
jax's main line across the night its version moved from ``0.6.3.dev…`` to ``0.7.0.dev…``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jaxrel.cells.matrix import Cell, FrontendSpec, Matrix, Outcome, Purpose
from jaxrel.cells.suites import TestCounts as Counts
from jaxrel.compat.report import to_json
from jaxrel.compat.result import CellResult
from jaxrel.compat.triage import Failure
from jaxrel.history import alerts, publish
from jaxrel.history.evidence import evidence_line
from jaxrel.history.ingest import ingest
from jaxrel.history.query import EXPECTED, TESTS_FAIL, combo_summaries, query
from jaxrel.history.regressions import EXPECTATION, REGRESSION, regressions
from jaxrel.history.store import open_store

CELL = "py3.12-jaxlib0.6.2"
REMOVAL = "test_api.py::test_api[jax.extend.ffi.ffi_call]"
OWN = "tests/export_test.py::JaxExportTest::test_basic"


def sha(night: int) -> str:
    return f"{night:02d}" + "5eed" * 9 + "ab"


def night_report(night: int, version: str, failures: list[Failure], own_ran: int = 0) -> dict[str, object]:
    cell = Cell(CELL, "3.12", "0.6.2", (), Purpose.ADMITTED, Outcome.ACCEPTED)
    outcomes = {REMOVAL: "failed" if any(f.test == REMOVAL for f in failures) else "passed",
                "test_api.py::test_api[jax.jit]": "passed"}
    result = CellResult(cell, Outcome.ACCEPTED, True, 10.0, tests=Counts(passed=1), outcomes=outcomes,
                        failures=failures, wheels={"jaxlib-0.6.2-cp312-cp312-manylinux2014_x86_64.whl": "a" * 64},
                        frontend_tests=Counts(passed=own_ran) if own_ran else None)
    result.settle()
    matrix = Matrix("jax", FrontendSpec("jax", version, "0.6.2", "source jax"), "jaxlib", [cell])
    return to_json(matrix, [result], frontend={"commit": sha(night), "dirty": False})


def store_of(tmp_path: Path, nights: list[dict[str, object]]):
    store = open_store(tmp_path / "history.sqlite")
    for number, data in enumerate(nights, 1):
        path = tmp_path / f"night-{number}.json"
        path.write_text(json.dumps(data))
        ingest(store, path, night=f"2025-06-{20 + number:02d}")
    return store


def still_works(version: str) -> Failure:
    return Failure("compat suite", REMOVAL, "failed", f"Failed: jax.extend.ffi.ffi_call still works in jax {version}, "
                   "documented as removed in 0.7.0 → use jax.ffi.ffi_call", "compat regression")


def test_a_red_square_only_the_version_string_turned_red_is_an_expectation_without_an_issue(tmp_path):
    moved = "0.7.0.dev20250626+0b0a651c44"
    store = store_of(tmp_path, [night_report(1, "0.6.3.dev20250625+85193bdcb0", []),
                                night_report(2, moved, [still_works(moved)])])
    (found,) = regressions(store)
    assert found.kind == EXPECTATION
    assert "moved from 0.6.3.dev20250625+85193bdcb0 to 0.7.0.dev20250626+0b0a651c44" in found.why
    assert not found.ready
    assert alerts.plan([found.to_json()], [], publish.COMMIT_URL) == []  # no issue opened
    data = publish.site_data(store)
    assert data["grid"]["2025-06-22"][CELL]["verdict"] == EXPECTATION  # its own colour on the HUD
    assert EXPECTATION in publish.COLOURS
    site = tmp_path / "site"
    publish.publish(store, site)
    index = (site / "index.html").read_text()
    assert "<h2>Expectations</h2>" in index and "<h2>Regressions</h2>" not in index
    assert "regressed on" not in (site / "regressions.atom").read_text()


def test_the_same_failure_without_a_version_move_is_a_regression(tmp_path):
    version = "0.7.0.dev20250626+0b0a651c44"
    store = store_of(tmp_path, [night_report(1, version, []), night_report(2, version, [still_works(version)])])
    (found,) = regressions(store)
    assert found.kind == REGRESSION and found.suite_tests == [REMOVAL] and found.bisectable
    assert not found.ready, "bisected first (a compat-suite test is bisected with --compat-tests)"
    assert publish.commands(found)["bisect"].endswith(f"--compat-tests '{REMOVAL}'")
    found.bisected = True
    assert [a.verb for a in alerts.plan([found.to_json()], [], publish.COMMIT_URL)] == ["open"]


def test_a_failure_that_does_not_name_the_version_is_a_regression_though_the_version_moved(tmp_path):
    broke = Failure("compat suite", REMOVAL, "failed", "AssertionError: arrays differ", "compat regression")
    store = store_of(tmp_path, [night_report(1, "0.6.3.dev20250625", []),
                                night_report(2, "0.7.0.dev20250626", [broke])])
    (found,) = regressions(store)
    assert found.kind == REGRESSION


def bisect_json(tmp_path: Path, version_only: bool) -> Path:
    path = tmp_path / "bisect.json"
    path.write_text(json.dumps({"status": "found", "message": "first bad commit", "cell": CELL, "bad": sha(2),
                                "goods": [sha(1)], "first_bad": {"hash": "0b0a651c44" + "0" * 30,
                                                                 "files": ["jax/version.py"]},
                                "version_only": version_only, "steps": [], "tests": [OWN]}))
    return path


@pytest.mark.parametrize("version_only", [True, False])
def test_a_culprit_that_changes_only_version_files_makes_an_expectation(tmp_path, version_only):
    own = Failure("own tests", OWN, "failed", "AssertionError: version 0.7", "frontend failure")
    store = store_of(tmp_path, [night_report(1, "0.7.0.dev20250626", [], own_ran=5),
                                night_report(2, "0.7.0.dev20250627", [own], own_ran=5)])
    ingest(store, bisect_json(tmp_path, version_only), night="2025-06-22")
    (found,) = regressions(store)
    assert found.culprit == "0b0a651c44" + "0" * 30
    assert found.kind == (EXPECTATION if version_only else REGRESSION)
    if version_only:
        assert found.why == "its culprit 0b0a651c4400 changes only the version files"


def test_a_set_whose_own_tests_fail_is_not_known_good_and_every_answer_says_so(tmp_path):
    own = Failure("own tests", OWN, "failed", "AssertionError: shardings differ", "frontend failure")
    store = store_of(tmp_path, [night_report(1, "0.6.3.dev20250625", [], own_ran=5),
                                night_report(2, "0.6.3.dev20250626", [own], own_ran=5)])
    answer = query(store, {"jax": "0.6.3.dev20250626", "jaxlib": "0.6.2"}, "3.12")
    assert answer.verdict == TESTS_FAIL and answer.exit_code == 1
    assert answer.nights[-1]["failing"] == [OWN]
    assert "the frontend's own tests (a frontend failure: the wheels fit together" in answer.why
    line = evidence_line(str(tmp_path / "history.sqlite"), {"jax": "0.6.3.dev20250626", "jaxlib": "0.6.2"}, "3.12")
    assert line.startswith("history: tests fail (") and "frontend's own tests" in line
    feed = {tuple(c["pins"]): c["verdict"] for c in combo_summaries(store)}
    assert feed[("jax==0.6.3.dev20250626", "jaxlib==0.6.2")] == TESTS_FAIL
    assert feed[("jax==0.6.3.dev20250625", "jaxlib==0.6.2")] == "known good"
    good = query(store, {"jax": "0.6.3.dev20250625", "jaxlib": "0.6.2"}, "3.12")
    assert good.verdict == "known good" and not good.why and not any(n["failing"] for n in good.nights)


@pytest.mark.parametrize(("files", "version_only"), [
    (("jax/version.py",), True), (("jax/version.py", "jaxlib/version.py"), True),
    (("jax/version.py", "setup.py"), False), (("jax/_src/api.py",), False), ((), False),
])
def test_bisect_says_whether_its_culprit_changes_only_the_version_files(files, version_only):
    from jaxrel.bisect import report
    from jaxrel.bisect.git import Commit
    from jaxrel.bisect.search import Result

    result = Result("found", CELL, sha(2), [sha(1)], version_files=("jax/version.py", "jaxlib/version.py"),
                    first_bad=Commit("0b0a651c44" + "0" * 30, "Update the next release version to 0.7.0", "a", "d",
                                     files=files))
    assert result.version_only is version_only
    assert report.to_json(result)["version_only"] is version_only
    assert ("it changes only the version files" in report.text(result)) is version_only


SCHEMA3 = Path(__file__).resolve().parents[1] / "data" / "history" / "replay-jax-2025-06-schema3.sqlite.gz"


def test_a_store_of_the_released_schema_migrates_in_place_losing_nothing(tmp_path: Path) -> None:
    """A store written by the released jaxrel (schema 3): 8 real nights of jax's main line (2025-06-22 to 06-29) in
    py3.12-jaxlib0.6.2, the night of the false alarm included. After the migration every result reads as it was
    (rows and selections together), the routine ones are no longer rows, and the false alarm is an expectation."""
    import gzip
    import sqlite3

    from jaxrel.history import selections
    from jaxrel.history.store import SCHEMA

    db = tmp_path / "history.sqlite"
    db.write_bytes(gzip.decompress(SCHEMA3.read_bytes()))
    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA user_version").fetchone() == (3,)
    before = {(int(r), int(c), str(t)): str(o) for r, c, t, o in raw.execute(
        "SELECT run, combo, test, outcome FROM results")}
    verdicts = {(int(r), str(c), str(t)): str(v) for r, c, t, v in raw.execute("SELECT run, cell, test, verdict "
                                                                                   "FROM verdicts")}
    raw.close()
    store = open_store(db)
    try:
        after = {(run, combo, test): outcome for (run, combo), found in selections.outcomes(store, "1 = 1").items()
                 for test, (outcome, _) in found.items()}
        rows = store.rows("SELECT COUNT(*) FROM results")[0][0]
        kept = {(int(r), str(c), str(t)): str(v) for r, c, t, v in store.rows(
            "SELECT run, cell, test, verdict FROM verdicts")}
        (found,) = regressions(store)
    finally:
        store.close()
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone() == (SCHEMA,)
    assert after == before, "every result reads as it was"
    assert rows < len(before) / 10, "the routine results are kept in selections, not rows"
    assert kept == {key: v for key, v in verdicts.items() if v != "passed" or key[2] in ("cell", "own tests")}
    assert found.kind == EXPECTATION and found.tests == ["test_api.py::test_api[jax.extend.ffi.ffi_call]",
                                                         "test_api.py::test_api[jax.extend.sharding]"]


def test_an_expectation_night_is_an_expectation_in_every_answer_with_what_is_due(tmp_path):
    """The HUD showed the night blue while `history query` answered "known bad" (before it, "tests fail"): one
    classification (history.states) now feeds the query, --history's evidence line, the HUD, api/v1 and Atom."""
    moved = "0.7.0.dev20250626+0b0a651c44"
    store = store_of(tmp_path, [night_report(1, "0.6.3.dev20250625+85193bdcb0", []),
                                night_report(2, moved, [still_works(moved)])])
    pins = {"jax": moved, "jaxlib": "0.6.2"}
    answer = query(store, pins, "3.12")
    assert answer.verdict == EXPECTED and answer.exit_code == 0, (answer.verdict, answer.why)
    assert "due in jax 0.7.0" in answer.why and "the set works" in answer.why, answer.why
    assert answer.nights[-1]["state"] == EXPECTATION and answer.nights[-1]["due"] == "jax 0.7.0"
    line = evidence_line(str(tmp_path / "history.sqlite"), pins, "3.12")
    assert line.startswith("history: expectation (") and "due in jax 0.7.0" in line, line
    data = publish.site_data(store)
    square = data["grid"]["2025-06-22"][CELL]
    assert (square["verdict"], square["due"]) == (EXPECTATION, "jax 0.7.0")
    feed = {tuple(c["pins"]): c for c in combo_summaries(store)}
    combo = feed[(f"jax=={moved}", "jaxlib==0.6.2")]
    assert combo["verdict"] == EXPECTED and "due in jax 0.7.0" in combo["why"]
    site = tmp_path / "site"
    publish.publish(store, site)
    matrix = json.loads((site / "api" / "v1" / "matrix.json").read_text())
    assert matrix["grid"]["2025-06-22"][CELL]["verdict"] == EXPECTATION
    (regression,) = json.loads((site / "api" / "v1" / "regressions.json").read_text())["regressions"]
    assert regression["kind"] == EXPECTATION and regression["due"] == "jax 0.7.0"
    assert "<entry>" not in (site / "regressions.atom").read_text()
    served = evidence_line(str(site), pins, "3.12")  # the published feed says what the store says
    assert served.startswith("history: expectation (") and "due in jax 0.7.0" in served, served


def retired_night(night: int, minimum: str) -> dict[str, object]:
    """A night on which the frontend requires ``minimum``: jaxlib 0.6.2's cell has left the matrix."""
    cell = Cell("py3.12-jaxlib0.7.0", "3.12", "0.7.0", (), Purpose.ADMITTED, Outcome.ACCEPTED)
    result = CellResult(cell, Outcome.ACCEPTED, True, 10.0, tests=Counts(passed=1),
                        outcomes={"test_api.py::test_api[jax.jit]": "passed"},
                        wheels={"jaxlib-0.7.0-cp312-cp312-manylinux2014_x86_64.whl": "b" * 64})
    result.settle()
    matrix = Matrix("jax", FrontendSpec("jax", "0.7.1.dev20250701", minimum, "source jax"), "jaxlib", [cell])
    return to_json(matrix, [result], frontend={"commit": sha(night), "dirty": False})


def test_a_regression_whose_cell_left_the_matrix_is_retired_not_open_forever(tmp_path):
    """The Shardy regression of the jaxlib 0.6.0 cell stayed open on the 90-night replay after jax stopped
    admitting jaxlib 0.6.0: three green nights close a regression, and a retired cell has none."""
    broke = Failure("compat suite", REMOVAL, "failed", "AssertionError: arrays differ", "compat regression")
    version = "0.6.3.dev20250625"
    store = store_of(tmp_path, [night_report(1, version, []), night_report(2, version, [broke]),
                                night_report(3, version, [broke]), retired_night(4, "0.6.2"),
                                retired_night(5, "0.7.0"), retired_night(6, "0.7.0")])
    (found,) = regressions(store)
    assert found.kind == REGRESSION and found.backend == "jaxlib==0.6.2"
    assert (found.state, found.retired) == ("retired", "2025-06-25"), found.state
    assert "requires jaxlib >= 0.7.0" in found.retired_why and "no longer admitted" in found.retired_why
    found.bisected = True
    from jaxrel.history.alerts import Issue
    issue = Issue(7, "open", alerts.MARKER.format(key=found.key))
    assert [a.verb for a in alerts.plan([found.to_json()], [issue], publish.COMMIT_URL)] == ["close"]
    site = tmp_path / "site"
    publish.publish(store, site)
    (served,) = json.loads((site / "api" / "v1" / "regressions.json").read_text())["regressions"]
    assert (served["state"], served["retired"]) == ("retired", "2025-06-25")
    assert "retired on 2025-06-25" in (site / "index.html").read_text()
    assert "retired on 2025-06-25" in (site / "regressions" / served["page"]).read_text()


def test_a_regression_whose_backend_is_still_admitted_stays_open(tmp_path):
    broke = Failure("compat suite", REMOVAL, "failed", "AssertionError: arrays differ", "compat regression")
    store = store_of(tmp_path, [night_report(1, "0.6.3.dev1", []), night_report(2, "0.6.3.dev1", [broke]),
                                retired_night(3, "0.6.2"), retired_night(4, "0.6.2")])
    (found,) = regressions(store)
    assert found.state == "open" and not found.retired


def test_a_store_without_the_minimum_retires_a_regression_whose_cell_the_guard_now_refuses(tmp_path):
    """A store written before the runs carried the frontend's minimum (schema 5): the cell that stays in the matrix
    as the release below the minimum, refused by the guard as the rules expect, retires its regression too."""
    broke = Failure("compat suite", REMOVAL, "failed", "AssertionError: arrays differ", "compat regression")
    version = "0.6.3.dev20250625"

    def refused_night(night: int) -> dict[str, object]:
        cell = Cell(CELL, "3.12", "0.6.2", (), Purpose.BELOW_MINIMUM, Outcome.REFUSED)
        result = CellResult(cell, Outcome.REFUSED, True, 3.0, guard_message="jaxlib 0.6.2 is older than 0.7.0",
                            wheels={"jaxlib-0.6.2-cp312-cp312-manylinux2014_x86_64.whl": "a" * 64})
        result.settle()
        data = to_json(Matrix("jax", FrontendSpec("jax", "0.7.1.dev1", "0.7.0", "source jax"), "jaxlib", [cell]),
                       [result], frontend={"commit": sha(night), "dirty": False})
        data["matrix"]["frontend"].pop("minimum_backend")  # as a report the store did not keep it from
        return data

    store = store_of(tmp_path, [night_report(1, version, []), night_report(2, version, [broke]),
                                refused_night(3), refused_night(4)])
    (found,) = regressions(store)
    assert (found.state, found.retired) == ("retired", "2025-06-23"), (found.state, found.retired_why)
    assert "the guard refuses jaxlib==0.6.2" in found.retired_why
