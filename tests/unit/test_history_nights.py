"""``jaxrel history replay``'s nights and main line, and the bad input it refuses before running anything.

The replay itself (compat on each night, ingest, bisect of the new regression) runs end to end in
tests/e2e/test_history_replay.py; the real run on jax's history is in docs/history.md.
"""

from __future__ import annotations

import datetime
import os
import subprocess
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
