"""`jaxrel bisect` on a 44-commit history of the splitfam sample family, offline but for the package index.

The history (:mod:`bisect_support`) has a merge, a revision that does not build, a flaky test and
one commit that calls ``splitfam_core.mul`` (core 0.2.0 only) without a gate; bisecting the cell of
the older core 0.1.0 must name that commit, skip the broken build, report the flaky step, and
leave the user's checkout exactly as it was. Then the bad inputs: each one line, its exit code,
the checkout unchanged.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from bisect_support import BROKEN_SUBJECT, CULPRIT_SUBJECT, MUL, TEST_MUL, History, make_history
from splitfam_support import core_release, make_splitfam, plugin_release, set_frontend_version

from jaxrel.distributions.pipconfig import pip_index_config

pytestmark = pytest.mark.integration

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
OLD = f"py{PY}-splitfam-core0.1.0"


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """splitfam-core 0.1.0, 0.2.0 (adds mul), 0.3.0 and splitfam-cpu-plugin 0.1.0, 0.2.0."""
    template = make_splitfam(tmp_path_factory, "bisect-releases")
    wheels = tmp_path_factory.mktemp("bisect-wheelhouse") / "wheels"
    core_release(template, "0.1.0", 1, wheels)
    for version, api in (("0.2.0", 2), ("0.3.0", 3)):
        core_release(template, version, api, wheels, extra="def mul(a, b):\n    return a * b\n")
    for version in ("0.1.0", "0.2.0"):
        plugin_release(template, version, wheels)
    return wheels


BLOCKER = """
import os, pathlib, time

def pytest_sessionstart(session):
    if not os.environ.get("BLOCKER_DIR"):
        return
    here = pathlib.Path(os.environ["BLOCKER_DIR"])
    with open(here / "sessions", "a") as log:
        log.write(f"{os.getpid()}\\n")
    if len((here / "sessions").read_text().split()) == 3:  # the first bisection step, after the two endpoints
        (here / "blocked").write_text(str(os.getpid()))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # until Ctrl-C reaches it (the test never releases it)
            time.sleep(0.05)
"""


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """The bisect history, its frontend tests with a conftest that holds one test run when ``BLOCKER_DIR`` is set
    (the Ctrl-C test's way to be inside a step when it interrupts)."""
    repo = make_splitfam(tmp_path_factory, "bisect-splitfam")
    (repo / "frontend" / "tests" / "conftest.py").write_text(BLOCKER)
    return make_history(repo)


def environment(wheelhouse: Path) -> dict[str, str]:
    links = " ".join([str(wheelhouse), *pip_index_config().find_links])
    return {**os.environ, "PIP_FIND_LINKS": links}


def command(history: History, workdir: Path, *extra: str, good: tuple[str, ...] | None = None,
            bad: str = "HEAD", cell: str = OLD) -> list[str]:
    goods = [arg for rev in (good if good is not None else (history.good,)) for arg in ("--good", rev)]
    return [sys.executable, "-m", "jaxrel", "bisect", "--family", str(history.repo / "pyproject.toml"),
            "--frontend-src", str(history.repo / "frontend"), *goods, "--bad", bad, "--cell", cell,
            "--workdir", str(workdir), *extra]


def bisect(history: History, wheelhouse: Path, workdir: Path, *extra: str, **options: Any
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(history, workdir, *extra, **options), capture_output=True, text=True,
                          timeout=1800, env=environment(wheelhouse), cwd=workdir.parent)


def snapshot(repo: Path) -> dict[str, Any]:
    """Everything of the user's checkout a bisection could disturb."""
    def git(*args: str) -> tuple[int, str]:  # GIT_OPTIONAL_LOCKS=0: git status itself does not refresh the index
        done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                              env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
        return done.returncode, done.stdout

    index = repo / ".git" / "index"
    return {"index": (index.stat().st_mtime_ns, index.read_bytes()),
            "status": git("status", "--porcelain", "--ignored"), "head": git("rev-parse", "HEAD"),
            "symbolic": git("symbolic-ref", "HEAD"), "refs": git("for-each-ref"),
            "bisect": git("bisect", "log"), "worktrees": git("worktree", "list", "--porcelain"),
            "config": (repo / ".git" / "config").read_text()}


def one_line_error(done: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    lines = [line for line in done.stderr.splitlines() if line.startswith("jaxrel bisect: ")]
    assert done.returncode == code, done.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.mark.long("two bisections of one history compared: one probe at a time, then two probes a round from the "
                  "wheel cache")
def test_bisect_names_the_ungated_commit_skips_the_broken_build_and_the_flaky_step(
        index_reachable: None, wheelhouse: Path, history: History, tmp_path: Path) -> None:
    before = snapshot(history.repo)
    flaky = tmp_path / "flaky"
    flaky.mkdir()
    # two goods (the release tag and the merged side branch): the flaky test fails on the next good revision;
    # one probe at a time (git bisect run), whose picks this test follows step by step
    extra = ("--env", f"SPLITFAM_FLAKY={flaky}", "--env", "SPLITFAM_FLAKY_RUN=3", "--json", "--jobs", "1")
    workdir = tmp_path / "work"
    done = bisect(history, wheelhouse, workdir, *extra, good=(history.good, "side"))
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout)
    assert result["status"] == "found"
    culprit = result["first_bad"]
    assert culprit["hash"] == history.culprit and culprit["subject"] == CULPRIT_SUBJECT
    assert culprit["files"] == ["frontend/splitfam/__init__.py", "frontend/tests/test_add.py"]
    assert culprit["author"] == "splitfam releaser <releaser@splitfam.invalid>" and not culprit["merge"]
    at_culprit, at_parent = result["at_first_bad"], result["at_parent"]
    assert at_culprit["verdict"] == "bad" and at_culprit["failing"] == ["tests/test_add.py::test_mul"]
    assert at_culprit["first_error"] == "AttributeError: module 'splitfam_core' has no attribute 'mul'"
    assert at_parent["verdict"] == "good" and at_parent["failing"] == []
    steps = result["steps"]
    by_commit = {step["commit"]: step for step in steps}
    broken = by_commit[history.broken]
    assert broken["verdict"] == "skip" and broken["reason"].startswith("does not build: ")
    (flaky_step,) = [step for step in steps if step["flaky"]]
    assert flaky_step["flaky"] == ["tests/test_flaky.py::test_sometimes"] and flaky_step["verdict"] == "skip"
    assert flaky_step["reason"].startswith("flaky: ")
    assert [s["role"] for s in steps[:3]] == ["endpoint"] * 3 and steps[0]["verdict"] == "bad"
    in_range = int(subprocess.run(["git", "rev-list", "--count", "HEAD", "^v0.2.0", "^side"], cwd=history.repo,
                                  capture_output=True, text=True, check=True).stdout)
    assert len(history.commits) >= 40 and result["commits_in_range"] == in_range == 34
    assert steps[3]["commit"] == history.broken, "the middle of the range, git's first pick"
    skipped = sum(1 for s in steps if s["role"] == "step" and s["verdict"] == "skip")
    endpoints = sum(1 for s in steps if s["role"] == "endpoint")  # --bad and each --good: 3 here
    assert endpoints == 3
    assert result["steps_taken"] <= math.ceil(math.log2(in_range)) + endpoints + skipped
    for step in steps:
        assert set(step["seconds"]) == {"export", "build+install", "tests"}
    assert json.loads((workdir / "bisect.json").read_text())["first_bad"]["hash"] == history.culprit
    markdown = (workdir / "bisect.md").read_text()
    assert f"## First bad commit `{history.culprit[:12]}`" in markdown and BROKEN_SUBJECT[:30] in markdown
    assert "Bisecting:" in done.stderr and "bisect: endpoint --bad HEAD" in done.stderr, "progress lines"
    assert snapshot(history.repo) == before, "the user's checkout changed"

    # the same range again, two probes a round (the default --jobs 2, each probe in its own copy of the
    # environment), in the same work directory: the same culprit and the same verdict on every commit both tested,
    # in fewer rounds than git's one at a time, and every revision built before comes from the wheel cache
    multi = bisect(history, wheelhouse, workdir, "--json", good=(history.good, "side"))
    assert multi.returncode == 0, multi.stderr[-4000:]
    second = json.loads(multi.stdout)
    assert second["status"] == "found" and second["first_bad"]["hash"] == history.culprit
    one_at_a_time = {s["commit"]: s["verdict"] for s in steps if not s["flaky"]}
    assert all(one_at_a_time[s["commit"]] == s["verdict"] for s in second["steps"] if s["commit"] in one_at_a_time)
    assert all(s["cached"] for s in second["steps"] if s["commit"] in by_commit and s["commit"] != history.broken)
    rounds = [line for line in multi.stderr.splitlines() if line.startswith("bisect: round ")]
    assert 0 < len(rounds) < result["steps_taken"], multi.stderr[-3000:]
    assert (workdir / "envs" / f"{result['cell']}-1" / "bin" / "python").exists()
    assert snapshot(history.repo) == before


def test_endpoints_that_bound_no_regression_are_refused_before_bisecting(
        index_reachable: None, wheelhouse: Path, history: History, tmp_path: Path) -> None:
    before = snapshot(history.repo)
    passes = bisect(history, wheelhouse, tmp_path / "a", bad=history.merge)  # before the ungated commit
    one_line_error(passes, 1, "--bad", "passes in cell", "no regression to bisect")
    data = json.loads((tmp_path / "a" / "bisect.json").read_text())
    assert data["status"] == "no-regression" and [s["verdict"] for s in data["steps"]] == ["good"]
    fails = bisect(history, wheelhouse, tmp_path / "b", good=(history.culprit,))
    one_line_error(fails, 1, f"--good {history.culprit}", "fails in cell", "tests/test_add.py::test_mul",
                   "give an older --good")
    data = json.loads((tmp_path / "b" / "bisect.json").read_text())
    assert data["status"] == "good-fails" and data["steps_taken"] == 0
    assert snapshot(history.repo) == before


@pytest.mark.parametrize(("case", "arguments", "code", "words"), [
    ("unknown revision", {"bad": "no-such-branch"}, 2, ("--bad no-such-branch", "no such revision")),
    ("good after bad", {"good": ("HEAD",), "bad": "v0.2.0"}, 2, ("--good HEAD", "not an ancestor of --bad v0.2.0")),
    ("malformed cell", {"cell": "core0.1.0"}, 2, ("--cell core0.1.0", "py3.N-splitfam-core")),
])
def test_bad_input_is_one_line_and_leaves_the_checkout_alone(
        history: History, tmp_path: Path, case: str, arguments: dict[str, Any], code: int,
        words: tuple[str, ...]) -> None:
    before = snapshot(history.repo)
    done = subprocess.run(command(history, tmp_path / "work", **arguments), capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    one_line_error(done, code, *words)
    assert snapshot(history.repo) == before, case


def test_a_tree_outside_git_is_refused(history: History, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    subprocess.run(["git", "archive", "--format=tar", "-o", str(tmp_path / "t.tar"), "HEAD"], cwd=history.repo,
                   check=True)
    plain.mkdir()
    subprocess.run(["tar", "-xf", str(tmp_path / "t.tar"), "-C", str(plain)], check=True)
    argv = command(history, tmp_path / "work")
    argv[argv.index("--frontend-src") + 1] = str(plain / "frontend")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    one_line_error(done, 2, "not a git checkout")


def test_a_cell_the_frontend_never_admits_is_refused(
        index_reachable: None, wheelhouse: Path, history: History, tmp_path: Path) -> None:
    before = snapshot(history.repo)
    done = bisect(history, wheelhouse, tmp_path / "work", cell=f"py{PY}-splitfam-core0.3.0")
    one_line_error(done, 2, f"py{PY}-splitfam-core0.3.0", "does not admit it", "minimum splitfam-core 0.1.0",
                   f"cells it admits here: {OLD}, py{PY}-splitfam-core0.2.0")
    assert snapshot(history.repo) == before


def test_ctrl_c_in_the_middle_exits_130_and_stops_every_step(
        index_reachable: None, wheelhouse: Path, history: History, tmp_path: Path) -> None:
    """Ctrl-C while a bisection step's tests run, every time: the tests' conftest holds the first step's test run
    until it is interrupted (it tells the test when it is there), so the signal cannot come between steps or after
    the last one. Before, every child started with SIGINT blocked: the step and its tests outlived the run."""
    before = snapshot(history.repo)
    workdir, blocker = tmp_path / "work", tmp_path / "blocker"
    blocker.mkdir()
    process = subprocess.Popen(command(history, workdir, "--env", f"BLOCKER_DIR={blocker}"), stderr=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=environment(wheelhouse), cwd=tmp_path)
    deadline = time.monotonic() + 600
    while not (blocker / "blocked").exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (blocker / "blocked").exists(), process.communicate()[1][-3000:]
    held = int((blocker / "blocked").read_text())
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1] == "jaxrel bisect: interrupted", err[-3000:]
    assert "Traceback" not in err
    config = str(workdir / "step.json")
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p).count(config)]
    assert left == [], "a step outlived the interrupted run"
    assert not Path(f"/proc/{held}").exists() or _cmdline(Path(f"/proc/{held}")) == "", \
        "the step's test run outlived the interrupted run"
    assert snapshot(history.repo) == before


def _cmdline(process: Path) -> str:
    try:
        return (process / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_a_revision_whose_own_rules_refuse_the_backend_is_a_skip_not_a_failure(
        index_reachable: None, wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """A good endpoint that raised its minimum core past the cell's is a skip with its reason, so the
    endpoints bound nothing (exit 1); the checkout stays as it was."""
    repo = make_splitfam(tmp_path_factory, "bisect-raised")
    set_frontend_version(repo, "0.2.0", "0.2.0")
    subprocess.run(["git", "commit", "-qam", "require core 0.2.0"], cwd=repo, check=True)
    subprocess.run(["git", "checkout", "-q", "HEAD~1", "--", "frontend"], cwd=repo, check=True)
    set_frontend_version(repo, "0.2.0", "0.1.0")
    for path, added in (("splitfam/__init__.py", MUL), ("tests/test_add.py", TEST_MUL)):
        (repo / "frontend" / path).write_text((repo / "frontend" / path).read_text() + added)
    subprocess.run(["git", "commit", "-qam", "support core 0.1.0 again, and call mul ungated"], cwd=repo, check=True)
    history = History(repo, "HEAD~1")
    before = snapshot(repo)
    done = bisect(history, wheelhouse, tmp_path / "work")
    one_line_error(done, 1, "--good HEAD~1", "cannot be tested in cell", "its version rules refuse splitfam-core 0.1.0",
                   "minimum 0.2.0")
    data = json.loads((tmp_path / "work" / "bisect.json").read_text())
    assert data["status"] == "endpoint-skipped" and [s["verdict"] for s in data["steps"]] == ["bad", "skip"]
    assert snapshot(repo) == before
