"""``jaxrel history replay``'s nights and main line, and the bad input it refuses before running anything.

The replay itself (compat on each night, ingest, bisect of the new regression) runs end to end in
tests/e2e/test_history_replay.py; the real run on jax's history is in docs/history.md.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

import pytest
from boundary_cli import run

from jaxrel.cli._common import UsageError
from jaxrel.cli._matrix import as_of
from jaxrel.errors import BadInput
from jaxrel.history.bisect_new import bisect_files
from jaxrel.history.replay import main_line, nights

DAY = datetime.date(2026, 7, 1)


def _repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """main: commits at 2026-07-01 10:00, 2026-07-01 23:30 and 2026-07-03 01:00 UTC, a side branch merged on the
    3rd whose commit is dated the 2nd (its date must not count: only the first-parent line does)."""
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str, when: str = "2026-07-01T10:00:00Z") -> str:
        env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                              env=env).stdout.strip()

    git("init", "-q", "-b", "main")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    found = {}
    for name, when in (("first", "2026-07-01T10:00:00Z"), ("late", "2026-07-01T23:30:00Z")):
        (repo / "f").write_text(name)
        git("add", "f", when=when)
        git("commit", "-qm", name, when=when)
        found[name] = git("rev-parse", "HEAD")
    git("checkout", "-qb", "side")
    (repo / "g").write_text("side")
    git("add", "g", when="2026-07-02T12:00:00Z")
    git("commit", "-qm", "side", when="2026-07-02T12:00:00Z")
    found["side"] = git("rev-parse", "HEAD")
    git("checkout", "-q", "main")
    git("merge", "-q", "--no-ff", "-m", "merge side", "side", when="2026-07-03T01:00:00Z")
    found["merge"] = git("rev-parse", "HEAD")
    return repo, found


def test_each_night_takes_the_main_lines_newest_commit_by_its_end(tmp_path: Path) -> None:
    repo, commits = _repo(tmp_path)
    dates = nights(DAY - datetime.timedelta(days=1), DAY + datetime.timedelta(days=3), 1)
    line = main_line(repo, "main", dates)
    assert [line[d] for d in dates] == ["", commits["late"], commits["late"], commits["merge"], commits["merge"]]
    assert nights(DAY, DAY + datetime.timedelta(days=6), 3) == [DAY, DAY + datetime.timedelta(days=3),
                                                               DAY + datetime.timedelta(days=6)]


def test_bad_ranges_and_branches_are_refused(tmp_path: Path) -> None:
    repo, _ = _repo(tmp_path)
    with pytest.raises(BadInput, match="before --since"):
        nights(DAY, DAY - datetime.timedelta(days=1), 1)
    with pytest.raises(BadInput, match="at most"):
        nights(DAY, DAY + datetime.timedelta(days=40000), 1)
    with pytest.raises(BadInput, match="--branch nope: no such revision"):
        main_line(repo, "nope", [DAY])
    with pytest.raises(BadInput, match="--branch"):
        main_line(repo, "--upload-pack=evil", [DAY])


@pytest.mark.parametrize(("args", "words"), [
    (["--since", "2026-13-01"], "--since '2026-13-01': expected a date"),
    (["--since", "2026-07-01", "--every", "weekly"], "--every 'weekly': expected a number of days"),
    (["--since", "2026-07-01", "--every", "0d"], "--every 0d: expected 1d or more"),
    (["--since", "2026-07-01", "--env", "NOEQUALS"], "--env"),
])
def test_replay_options_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                            words: str) -> None:
    repo, _ = _repo(tmp_path)
    done = run(["history", "replay", "--db", str(tmp_path / "h.sqlite"), "--frontend-src", str(repo), *args], capsys)
    assert done.code == 2, done.err
    assert words in done.err and len(done.err.strip().splitlines()) == 1
    assert not (tmp_path / "h.sqlite").exists() or "every" in words  # refused before the store is made


def test_as_of_is_a_utc_moment_and_a_date_means_its_end() -> None:
    assert as_of("2026-07-01") == datetime.datetime(2026, 7, 1, 23, 59, 59, tzinfo=datetime.UTC)
    assert as_of("2026-07-01T12:00:00+02:00") == datetime.datetime(2026, 7, 1, 10, tzinfo=datetime.UTC)
    assert as_of("2026-07-01T12:00:00") == datetime.datetime(2026, 7, 1, 12, tzinfo=datetime.UTC)
    for bad in ("yesterday", "2026-02-30", "99999-01-01", "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"):
        with pytest.raises(UsageError, match="--as-of"):
            as_of(bad)


def test_compat_as_of_needs_uv(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    done = run(["compat", "--as-of", "2026-07-01", "--no-uv", "--workdir", str(tmp_path / "w")], capsys)
    assert done.code == 2 and "needs uv" in done.err


def test_bisect_runs_the_files_of_the_failing_tests() -> None:
    assert bisect_files(["tests/a_test.py::A::test_x", "tests/a_test.py::A::test_y", "tests/b_test.py::test_z"]) == [
        "tests/a_test.py", "tests/b_test.py"]


# -- --jobs: nights' compat runs at once, one writer in night order ------------------------------------------------


def _fake_start(reports: list[Path], log: Path):
    """replay's ``_start`` with a stand-in for ``jaxrel compat``: a child that logs when it runs, sleeps (the later
    nights less, so they finish first) and leaves the night's report in its slot."""
    from jaxrel._util import procs
    from jaxrel.history import replay as module

    def start(request, number, night, commit, slot):
        slot.mkdir(parents=True, exist_ok=True)
        (slot / "report.json").unlink(missing_ok=True)
        night_log = request.workdir / "nights" / night / "compat.log"
        night_log.parent.mkdir(parents=True, exist_ok=True)
        night_log.write_text("$ jaxrel compat\n")
        script = ("import pathlib, shutil, sys, time; path = pathlib.Path(sys.argv[1]); log = path.open('a'); "
                  "log.write(f'start {sys.argv[2]}\\n'); log.flush(); deadline = time.monotonic() + 60\n"
                  "while sys.argv[2] == '1' and 'start 3' not in path.read_text() and time.monotonic() < deadline:\n"
                  "    time.sleep(0.02)\n"
                  "shutil.copyfile(sys.argv[3], sys.argv[4]); log.write(f'end {sys.argv[2]}\\n')")
        process = procs.popen([sys.executable, "-c", script, str(log), str(number), str(reports[number - 1]),
                               str(slot / "report.json")])
        return module._Running(number, night, commit, process, slot, night_log, 0.0)

    return start


def test_jobs_run_nights_at_once_and_ingest_them_in_night_order(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from history_support import write_nights

    from jaxrel.history import replay as module
    from jaxrel.history.store import open_store

    repo, _ = _repo(tmp_path)
    reports = write_nights(tmp_path / "reports", nights=3)
    log = tmp_path / "order.log"
    monkeypatch.setattr(module, "_start", _fake_start(reports, log))
    store = open_store(tmp_path / "history.sqlite")
    request = module.ReplayRequest(repo, DAY, DAY + datetime.timedelta(days=2), workdir=tmp_path / "work",
                                   bisect=False, jobs=3)
    try:
        done = module.replay(store, request, progress=lambda line: None)
        ingested = [str(n) for (n,) in store.rows("SELECT night FROM runs ORDER BY id")]
    finally:
        store.close()
    assert [n.outcome for n in done] == ["ok", "ok", "ok"]
    assert ingested == ["2026-07-01", "2026-07-02", "2026-07-03"], "one writer, in night order"
    events = log.read_text().split("\n")
    # the first night's run waits for the third's to start: with one night at a time it would wait in vain
    assert events.index("start 3") < events.index("end 1"), events


def test_an_interrupt_stops_every_night_in_flight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from history_support import write_nights

    from jaxrel.history import replay as module
    from jaxrel.history.store import open_store

    repo, _ = _repo(tmp_path)
    reports = write_nights(tmp_path / "reports", nights=3)
    started: list[object] = []
    fake = _fake_start(reports, tmp_path / "order.log")

    def slow(request, number, night, commit, slot):
        running = fake(request, number, night, commit, slot)
        started.append(running)
        return running

    def interrupt(line: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "_start", slow)
    store = open_store(tmp_path / "history.sqlite")
    request = module.ReplayRequest(repo, DAY, DAY + datetime.timedelta(days=2), workdir=tmp_path / "work",
                                   bisect=False, jobs=3)
    try:
        with pytest.raises(KeyboardInterrupt):
            module.replay(store, request, progress=interrupt)
    finally:
        store.close()
    assert len(started) == 3 and all(r.process.poll() is not None for r in started), "no compat run outlives it"


def test_a_node_id_goes_from_replay_to_each_nights_compat_as_given(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, compat checked the whole node id as a path and refused every night: "not in the frontend's source
    tree" (the check is tests/unit/test_compat_owntests.py's); here, that replay hands it over whole."""
    from jaxrel.history import replay as module

    repo, _ = _repo(tmp_path)
    node = "tests/export_test.py::JaxExportTest::test_basic_single_device_sharding"
    seen: list[module.ReplayRequest] = []
    monkeypatch.setattr(module, "replay", lambda store, request, progress: seen.append(request) or [])
    done = run(["history", "replay", "--db", str(tmp_path / "h.sqlite"), "--frontend-src", str(repo), "--since",
                "2026-07-01", "--until", "2026-07-02", "--frontend-tests", node, "--jobs", "1"], capsys)
    assert done.code == 0, done.err
    (request,) = seen
    at = request.compat_args.index("--frontend-tests")
    assert request.compat_args[at + 1] == node and request.jobs == 1
