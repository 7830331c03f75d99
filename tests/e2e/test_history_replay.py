"""`jaxrel history replay` on a splitfam main line of seven nights with a break planted on the fourth.

The frontend (splitfam 0.2.0, cores 0.1.0 to 0.2.0) gets commits on five different days; on the fourth
one of three commits calls ``splitfam_core.mul`` (core 0.2.0 only) without a gate and adds its test.
The replay runs ``jaxrel compat`` on each night's main-line commit with the wheelhouse as the index,
ingests each night, bisects the new regression between the third night's commit and the fourth's,
and must name the planted commit; the nights after stay still failing, the night with no new commit
reruns the same commit (nothing flaky), and a second replay resumes with nothing to do. Then the
HUD: the regression's page names the culprit and the commands, and ``history query`` answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from splitfam_support import core_release, make_splitfam, set_frontend_version

from jaxrel.distributions.pipconfig import pip_index_config

pytestmark = pytest.mark.integration

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
OLD, NEW = f"py{PY}-splitfam-core0.1.0", f"py{PY}-splitfam-core0.2.0"
MUL = '''

def mul(a, b):
    """``a * b``: needs splitfam-core 0.2.0 (API number 2), and does not check for it."""
    return splitfam_core.mul(a, b)
'''
TEST_MUL = "\n\ndef test_mul():\n    assert splitfam.mul(6, 7) == 42\n"
DAY = 86400
START = 1735732800  # 2025-01-01T12:00:00Z


def _git(repo: Path, *args: str, day: int = 0, minute: int = 0) -> str:
    date = f"{START + day * DAY + minute * 60} +0000"
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _note(repo: Path, number: int, day: int, minute: int = 0) -> str:
    notes = repo / "frontend" / "splitfam" / "notes.py"
    notes.write_text((notes.read_text() if notes.exists() else '"""Notes."""\n') + f"ENTRY_{number} = {number}\n")
    _git(repo, "add", "-A", day=day, minute=minute)
    _git(repo, "commit", "-q", "-m", f"notes: entry {number}", day=day, minute=minute)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def line(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The repository, its wheelhouse and the commits the test names."""
    repo = make_splitfam(tmp_path_factory, "replay-splitfam")
    set_frontend_version(repo, "0.2.0", "0.1.0")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "splitfam 0.2.0")
    commits = {1: _note(repo, 1, 0), 2: _note(repo, 2, 1), 3: _note(repo, 3, 2)}
    _note(repo, 4, 3, 0)
    init, tests = repo / "frontend" / "splitfam" / "__init__.py", repo / "frontend" / "tests" / "test_add.py"
    init.write_text(init.read_text().replace('__all__ = ["__version__", "add"]',
                                             '__all__ = ["__version__", "add", "mul"]') + MUL)
    tests.write_text(tests.read_text() + TEST_MUL)
    _git(repo, "add", "-A", day=3, minute=10)
    _git(repo, "commit", "-q", "-m", "Add splitfam.mul, computed by the core", day=3, minute=10)
    culprit = _git(repo, "rev-parse", "HEAD")
    commits[4] = _note(repo, 5, 3, 20)
    commits[5] = _note(repo, 6, 4)
    wheels = tmp_path_factory.mktemp("replay-wheelhouse") / "wheels"
    template = make_splitfam(tmp_path_factory, "replay-releases")
    core_release(template, "0.1.0", 1, wheels)
    core_release(template, "0.2.0", 2, wheels, extra="def mul(a, b):\n    return a * b\n")
    return {"repo": repo, "wheels": wheels, "commits": commits, "culprit": culprit}


def jaxrel(line: dict[str, Any], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    links = " ".join([str(line["wheels"]), *pip_index_config().find_links])
    return subprocess.run([sys.executable, "-m", "jaxrel", *args], capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "PIP_FIND_LINKS": links}, cwd=cwd)


@pytest.mark.long("a replay: compat on each night's commit, each report ingested, then a bisection of the regression")
def test_replay_ingests_each_night_and_bisect_names_the_planted_commit(
        index_reachable: None, line: dict[str, Any], tmp_path: Path) -> None:
    repo, db = line["repo"], tmp_path / "history.sqlite"
    replay = ["history", "replay", "--db", str(db), "--family", str(repo / "pyproject.toml"), "--frontend-src",
              str(repo / "frontend"), "--branch", "main", "--since", "2025-01-01", "--until", "2025-01-07",
              "--python", PY, "--workdir", str(tmp_path / "work"), "--frontend-tests", "tests/test_add.py"]
    done = jaxrel(line, *replay, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    nights = {n["night"]: n for n in json.loads(done.stdout)["nights"]}
    assert [n["outcome"] for n in nights.values()] == ["ok", "ok", "ok", "failed", "failed", "failed", "failed"]
    assert nights["2025-01-04"]["commit"] == line["commits"][4] and nights["2025-01-07"]["commit"] == line["commits"][5]
    assert "[4/7] 2025-01-04" in done.stderr  # progress, night by night
    assert f"culprit {line['culprit'][:12]}" in nights["2025-01-04"]["said"]

    found = jaxrel(line, "history", "regressions", "--db", str(db), "--json", cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    regressions = json.loads(found.stdout)["regressions"]
    assert len(regressions) == 1, regressions
    regression = regressions[0]
    assert regression["cell"] == OLD and regression["night"] == "2025-01-04"
    assert regression["tests"] == ["tests/test_add.py::test_mul"] == regression["own_tests"]
    assert (regression["last_good"], regression["first_bad"]) == (line["commits"][3], line["commits"][4])
    assert regression["culprit"] == line["culprit"] and regression["state"] == "open"
    assert "AttributeError" in regression["signature"]
    assert f"--good {line['commits'][3][:12]}" in regression["commands"]["bisect"]
    assert regression["commands"]["bisect"].endswith("--frontend-tests tests/test_add.py")

    again = jaxrel(line, *replay, "--json", cwd=tmp_path)  # resumes: every night is kept already
    assert again.returncode == 0, again.stderr[-3000:]
    assert {n["outcome"] for n in json.loads(again.stdout)["nights"]} == {"skipped"}

    site = tmp_path / "site"
    published = jaxrel(line, "history", "publish", "--db", str(db), "--output", str(site), cwd=tmp_path)
    assert published.returncode == 0, published.stderr
    page = (site / "regressions" / regression["page"]).read_text()
    assert line["culprit"][:12] in page and f"commit/{line['culprit']}" in page and "jaxrel bisect" in page
    assert regression["page"] in (site / "regressions.atom").read_text()
    matrix = json.loads((site / "api" / "v1" / "matrix.json").read_text())
    assert matrix["grid"]["2025-01-04"][OLD]["verdict"] == "new-regression"
    assert matrix["grid"]["2025-01-05"][OLD]["verdict"] == "still-failing"
    assert matrix["grid"]["2025-01-04"][NEW]["verdict"] == "passed"  # mul works on core 0.2.0
