"""``jaxrel downstream`` on the sample ecosystem (tests/downstream_family.py), served by a loopback index with upload
times: the planted false minimum found with its fix, a planted HEAD break regressed, grouped and bisected to the
planted commit, a flaky test spurious, a hanging test killed at the budget with nothing left running, a release that
cannot be installed, and a planted token that never reaches the libraries' tests. Bad input: one line, exit 2.

The third-party wheels (pytest and its dependencies, flit_core) come once from the package index through pip's
configuration; without it the module skips with the reason."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from downstream_family import HANG_MARKER, TOKEN, build_index, frontend_history, projects
from simple_index import Behaviour, SimpleIndexServer

from jaxrel.distributions.pipconfig import pip_command
from jaxrel.downstream.sandbox import network_isolation

pytestmark = pytest.mark.integration

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
THIRD_PARTY = ["pytest", "flit_core>=3.4"]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The sample index's URL (served for the module) and the family's pyproject."""
    root = tmp_path_factory.mktemp("downstream")
    third = root / "third-party"
    done = subprocess.run([*pip_command(), "download", "--quiet", "--only-binary=:all:", "--dest", str(third),
                           *THIRD_PARTY], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.skip(f"package index unreachable through pip's configuration: {done.stderr.strip()[-200:]}")
    house = build_index(root / "house", third)
    server = SimpleIndexServer()
    server.__enter__()
    url = server.add("sample", Behaviour(upload_times=True), **projects(house))
    frontend = root / "dfam"
    frontend_history(frontend)
    yield url, frontend
    server.__exit__(None, None, None)


def downstream(*args: str, workdir: Path, url: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "UV_INDEX", "UV_EXTRA"))}
    env.update({"GITHUB_TOKEN": TOKEN, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": url})
    command = [sys.executable, "-m", "jaxrel", "downstream", *args, "--python", PY, "--index-url", url,
               "--workdir", str(workdir)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=workdir.parent)


def family(frontend: Path) -> list[str]:
    return ["--family", str(frontend / "pyproject.toml")]


def test_the_planted_false_minimum_is_found_with_its_fix(index: tuple[str, Path], tmp_path: Path) -> None:
    url, frontend = index
    done = downstream("minimum", "dlib==1.0.0", *family(frontend), "--json", "--budget", "120",
                      workdir=tmp_path / "work", url=url)
    assert done.returncode == 1, done.stderr[-3000:]  # the declared minimum is false
    answer = json.loads(done.stdout)
    assert answer["declared"] == "0.1.0"
    assert answer["true_minimum"] == "0.4.0"
    assert answer["fix"] == "dfam>=0.4.0"
    assert answer["failing"]["jax"] == "0.3.0"  # the highest failing release, and why
    assert answer["failing"]["test"] == "tests/test_dlib.py::test_double_rows"
    assert "axis" in answer["failing"]["error"]
    assert {"jax": "0.1.0", "why": answer["not_installable"][0]["why"]} in answer["not_installable"]
    assert answer["cells_searched"] <= 4  # four installable releases: a search, not a sweep
    by_version = {(c["jax"], c["role"]): c["outcome"] for c in answer["cells"]}
    assert by_version[("0.4.0", "search")] == "passed" and by_version[("0.3.0", "search")] == "failed"
    assert all(c["as_of"] for c in answer["cells"])  # every cell resolved as of its era
    isolated = bool(network_isolation())  # as root where unshare --net works: the tests ran without network
    assert all(c["offline"] == isolated for c in answer["cells"] if c["outcome"] != "not-installable")
    text = (tmp_path / "work" / "minimum.txt").read_text()
    assert "true minimum: 0.4.0" in text and "fix: dfam>=0.4.0" in text
    assert not (tmp_path / "work" / "envs").exists() or not any((tmp_path / "work" / "envs").iterdir())


@pytest.mark.long("a whole Crater of the sample ecosystem: each library's tests on the baseline and on HEAD, a hang "
                  "that waits out its budget, the regression group bisected")
def test_crater_classifies_groups_and_bisects(index: tuple[str, Path], tmp_path: Path) -> None:
    url, frontend = index
    culprit = subprocess.run(["git", "log", "--format=%H", "--grep", "Remove old_alias"], cwd=frontend,
                             capture_output=True, text=True, check=True).stdout.strip()
    # the hanging library's own budget is short (it never ends); the others' is ample however busy the machine is
    libraries = tmp_path / "libraries.txt"
    libraries.write_text("dlib\ndalias\ndalias-two\ndflaky\ndhang budget=10\ndcrash\ndgone\ndsecret\n")
    done = downstream("crater", "--frontend-src", str(frontend), "--ref", "HEAD", "--libraries", f"@{libraries}",
                      *family(frontend), "--budget", "300", "--json", workdir=tmp_path / "crater", url=url,
                      timeout=1500)
    assert done.returncode == 1, done.stderr[-3000:]  # regressions found
    result = json.loads(done.stdout)
    outcomes = {lib["name"]: lib for lib in result["libraries"]}
    assert result["baseline"] == "0.5.0"
    assert result["boxed"] is True and all(lib["candidate"]["boxed"] for lib in outcomes.values()
                                           if lib["candidate"] and lib["outcome"] != "broken")
    assert {name: lib["outcome"] for name, lib in outcomes.items()} == {
        "dlib": "test-pass", "dalias": "regressed", "dalias-two": "regressed", "dflaky": "spurious",
        "dhang": "spurious", "dcrash": "test-fail", "dgone": "broken", "dsecret": "test-pass"}
    assert outcomes["dcrash"]["reason"] == "1 failing on both: <crash>"
    assert outcomes["dcrash"]["candidate"]["first_error"] == "pytest crashed: SIGSEGV (signal 11)"
    assert outcomes["dhang"]["reason"] == "timeout: the tests ran past the 10 s budget"
    assert outcomes["dflaky"]["reason"].startswith("flaky")
    assert outcomes["dalias"]["group"] == outcomes["dalias-two"]["group"] == "G1"
    assert result["groups"] == [{"group": "G1", "signature": outcomes["dalias"]["signature"],
                                 "libraries": ["dalias", "dalias-two"]}]
    assert "old_alias" in outcomes["dalias"]["signature"]
    for name in ("dalias", "dalias-two"):
        assert outcomes[name]["culprit"]["commit"] == culprit, outcomes[name]["culprit"]
        assert culprit in (tmp_path / "crater" / "bisect" / name / "bisect.md").read_text()
    left = subprocess.run(["pgrep", "-f", HANG_MARKER], capture_output=True, text=True)
    assert left.stdout.strip() == ""  # the hanging test's process group was killed at the budget
    markdown = (tmp_path / "crater" / "crater.md").read_text()
    assert "**regressed**" in markdown and culprit[:12] in markdown
    # the history takes the report: one cell a library (the HUD pages libraries × nights), the regressions red
    db = tmp_path / "history.sqlite"
    ingest = subprocess.run([sys.executable, "-m", "jaxrel", "history", "ingest", "--db", str(db), "--json",
                             "--night", "2025-07-10", str(tmp_path / "crater" / "crater.json")],
                            capture_output=True, text=True, timeout=120)
    assert ingest.returncode == 0, ingest.stderr[-2000:]
    with sqlite3.connect(db) as connection:
        kinds = {row[0] for row in connection.execute("SELECT kind FROM runs")}
        cells = {row[0] for row in connection.execute("SELECT DISTINCT cell FROM combos")}
    assert kinds == {"downstream"}
    assert {f"downstream-py{PY}-{name}" for name in outcomes} <= cells
    site = tmp_path / "site"
    published = subprocess.run([sys.executable, "-m", "jaxrel", "history", "publish", "--db", str(db), "--output",
                                str(site)], capture_output=True, text=True, timeout=120)
    assert published.returncode == 0, published.stderr[-2000:]
    page = (site / "downstream.html").read_text()
    assert all(f'data-cell="downstream-py{PY}-{name}"' in page for name in outcomes)  # libraries × nights
    for path in (tmp_path / "crater").rglob("*"):
        if path.is_file() and path.suffix in (".json", ".md", ".txt", ".jsonl"):
            assert TOKEN not in path.read_text(errors="replace"), path


@pytest.mark.parametrize(("args", "expected"), [
    (["minimum", "no-such-library"], "no such project"),
    (["minimum", "dlib==9.9.9"], "does not serve this version"),
    (["minimum", "pytest"], "does not depend on dfam"),
    (["minimum", "dlib==not-a-version"], "not a PEP 440 version"),
    (["minimum", "dlib", "--tests", "tests/missing_test.py"], "not in the library's tests"),
    (["minimum", "dlib", "--tests", "tests/test_dlib.py::test_nothing_by_this_name"], "collects nothing"),
])
def test_bad_input_is_one_line_and_exit_2(index: tuple[str, Path], tmp_path: Path, args: list[str],
                                          expected: str) -> None:
    url, frontend = index
    done = downstream(*args, *family(frontend), "--budget", "60", workdir=tmp_path / "bad", url=url)
    assert done.returncode == 2, (done.stdout[-1000:], done.stderr[-2000:])
    last = done.stderr.strip().splitlines()[-1]
    assert expected in last, last
    envs = tmp_path / "bad" / "envs"
    assert not envs.exists() or not any(envs.iterdir())  # nothing left behind


def test_a_release_candidate_against_the_release_before_it_each_side_with_its_own_backend(
        index: tuple[str, Path], tmp_path: Path) -> None:
    """Rust's Crater moment: the tag dfam-v0.5.0 against the release before it. Every dfam release pins its own
    dfam-core, so no one environment holds both frontends; before, the run was refused ("no dfam-core release
    admitted by the frontend"). Without --baseline, the baseline is the newest release uploaded before the tag's
    commit and below its release (0.4.0), not the newest on the index (0.5.0: the tag's own release)."""
    url, frontend = index
    done = downstream("crater", "--frontend-src", str(frontend), "--ref", "dfam-v0.5.0", "--libraries", "dalias,dlib",
                      *family(frontend), "--budget", "300", "--json", "--no-bisect", workdir=tmp_path / "crater",
                      url=url)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["baseline"] == "0.4.0", result["baseline_why"]
    assert "uploaded before the candidate's commit (2025-08-01)" in result["baseline_why"]
    assert result["backends"] == {"baseline": "0.4.0", "candidate": "0.5.0"}
    outcomes = {lib["name"]: lib for lib in result["libraries"]}
    assert {name: lib["outcome"] for name, lib in outcomes.items()} == {"dalias": "test-pass", "dlib": "test-pass"}
    assert outcomes["dlib"]["baseline"]["jaxlib"] == "0.4.0" and outcomes["dlib"]["candidate"]["jaxlib"] == "0.5.0"
    assert outcomes["dlib"]["candidate"]["resolution"] == "the baseline's, but dfam and dfam-core"
    assert outcomes["dalias"]["version"] == "1.0.0"  # the newest of the candidate's day; 2.0.0 came after it
    text = (tmp_path / "crater" / "crater.txt").read_text()
    assert "libraries: each one named without a version at its newest release uploaded before 2025-08-01" in text
    assert "backends: 0.4.0 with the baseline, 0.5.0 with the candidate (an environment each)" in text
    assert "candidate environments: the baseline's versions of everything but the frontend and its backend\n" in text


def test_a_candidate_that_admits_the_baselines_backend_shares_its_environment(index: tuple[str, Path],
                                                                             tmp_path: Path) -> None:
    """dfam-v0.6.0-range admits dfam-core 0.5.0 and 0.6.0 (as jax 0.4.31 admits jaxlib 0.4.30 and 0.4.31): the
    admitted ranges meet, so the candidate takes the baseline's backend, in one environment, only the frontend
    swapped; the newest it admits (0.6.0) would have made two environments differing in more than the frontend."""
    url, frontend = index
    done = downstream("crater", "--frontend-src", str(frontend), "--ref", "dfam-v0.6.0-range", "--libraries", "dlib",
                      *family(frontend), "--budget", "300", "--json", "--no-bisect", workdir=tmp_path / "crater",
                      url=url)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["backends"] == {"baseline": "0.5.0", "candidate": "0.5.0"}, result["backends"]
    (verdict,) = result["libraries"]
    assert verdict["outcome"] == "test-pass" and verdict["candidate"]["jaxlib"] == "0.5.0"
    assert "(one environment, the frontend swapped)" in (tmp_path / "crater" / "crater.txt").read_text()


def test_a_regression_is_bisected_across_the_release_commit_that_pins_the_next_backend(
        index: tuple[str, Path], tmp_path: Path) -> None:
    """The tag dfam-v0.6.0 (a release commit requiring dfam-core 0.6.0, on a branch) against 0.5.0: dalias regresses
    (the main line removed old_alias). Its bisection runs from 0.5.0 to the tag; every revision but the tag admits
    0.5.0, the tag only 0.6.0. Before, the bisection was refused ("does not admit it"); now each step takes the
    backend its revision admits, the tag in an environment of its own, and the planted commit is named."""
    url, frontend = index
    culprit = subprocess.run(["git", "rev-parse", "main~2"], cwd=frontend, capture_output=True, text=True,
                             check=True).stdout.strip()
    done = downstream("crater", "--frontend-src", str(frontend), "--ref", "dfam-v0.6.0", "--libraries", "dalias",
                      *family(frontend), "--budget", "300", "--json", workdir=tmp_path / "crater", url=url)
    assert done.returncode == 1, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["baseline"] == "0.5.0" and result["backends"] == {"baseline": "0.5.0", "candidate": "0.6.0"}
    (verdict,) = result["libraries"]
    assert verdict["outcome"] == "regressed"
    assert verdict["culprit"]["commit"] == culprit, verdict["culprit"]
    assert any("ran with 0.6.0" in note for note in verdict["culprit"]["notes"])
    bisection = json.loads((tmp_path / "crater" / "bisect" / "dalias" / "bisect.json").read_text())
    tag = subprocess.run(["git", "rev-parse", "dfam-v0.6.0^{commit}"], cwd=frontend, capture_output=True, text=True,
                         check=True).stdout.strip()
    backends = {step["commit"]: step["backend"] for step in bisection["steps"]}
    assert backends.pop(tag) == "0.6.0"
    assert backends and set(backends.values()) == {"0.5.0"}, backends
    text = (tmp_path / "crater" / "crater.txt").read_text()
    assert f"dalias: first bad commit {culprit[:12]} Remove old_alias" in text


def test_tests_that_do_not_import_on_a_release_are_a_failed_cell_not_bad_input(index: tuple[str, Path],
                                                                               tmp_path: Path) -> None:
    """dconf's conftest imports what dfam 0.3.0 added: on 0.2.0 collection fails. Before, that cell read as "the
    selection collects nothing" (exit 2) and the answer found was thrown away; now it is a failed cell with its
    error, and the search goes on to the true minimum."""
    url, frontend = index
    done = downstream("minimum", "dconf==1.0.0", *family(frontend), "--json", "--tests", "tests/test_conf.py",
                      "--sweep", workdir=tmp_path / "work", url=url)
    assert done.returncode == 1, done.stderr[-3000:]  # the declared minimum (0.1.0) is false
    answer = json.loads(done.stdout)
    assert (answer["true_minimum"], answer["fix"]) == ("0.3.0", "dfam>=0.3.0"), answer
    old = next(c for c in answer["cells"] if c["jax"] == "0.2.0")
    assert old["outcome"] == "failed" and old["failing"] == ["<collection>"], old
    assert "cannot import name 'scale'" in old["first_error"], old["first_error"]
    assert answer["boxed"] is True


def test_a_smoke_command_finds_the_same_minimum_and_the_history_takes_it(index: tuple[str, Path],
                                                                       tmp_path: Path) -> None:
    url, frontend = index
    done = downstream("minimum", "dlib==1.0.0", *family(frontend), "--json", "--smoke",
                      "import dlib; assert dlib.double_rows([3]) == [6]", workdir=tmp_path / "work", url=url)
    assert done.returncode == 1, done.stderr[-3000:]
    answer = json.loads(done.stdout)
    assert (answer["true_minimum"], answer["fix"], answer["route"]) == ("0.4.0", "dfam>=0.4.0", "smoke")
    assert answer["failing"]["test"] == "smoke" and "axis" in answer["failing"]["error"]
    db = tmp_path / "history.sqlite"
    ingest = subprocess.run([sys.executable, "-m", "jaxrel", "history", "ingest", "--db", str(db),
                             str(tmp_path / "work" / "minimum.json")], capture_output=True, text=True, timeout=120)
    assert ingest.returncode == 0, ingest.stderr[-2000:]
    with sqlite3.connect(db) as connection:
        cells = {row[0] for row in connection.execute("SELECT DISTINCT cell FROM combos")}
    assert f"downstream-py{PY}-dlib1.0.0-jax0.3.0-jaxlib0.3.0" in cells


def test_a_tag_that_does_not_exist_is_bad_input(index: tuple[str, Path], tmp_path: Path) -> None:
    url, frontend = index
    repo = tmp_path / "dlib-repo"
    repo.mkdir()
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "start"], ["tag", "v0.9.0"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t.invalid"})
    done = downstream("minimum", "dlib==1.0.0", *family(frontend), "--tests", "tests/elsewhere_test.py",
                      "--library-repo", str(repo), workdir=tmp_path / "w", url=url)
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "has no tag v1.0.0, 1.0.0, dlib-v1.0.0, dlib-1.0.0" in last, last


def test_a_checkout_that_is_not_a_python_project(index: tuple[str, Path], tmp_path: Path) -> None:
    url, frontend = index
    (tmp_path / "empty").mkdir()
    done = downstream("minimum", "--library-src", str(tmp_path / "empty"), *family(frontend),
                      workdir=tmp_path / "w", url=url)
    assert done.returncode == 2 and "not a Python project" in done.stderr.strip().splitlines()[-1]


def test_cards_shards_jobs_and_budgets_learned_from_the_history(index: tuple[str, Path], tmp_path: Path) -> None:
    """The cards of the sample ecosystem: shard 2 of 2 (split by the cards' budgets, longest first: dalias alone in
    shard 1, dlib and dalias-two in shard 2) runs its two libraries two at once, each with its card's budget, and
    records the run; the next Crater of dlib learns its budget from that passing run (its time × 3, at least 120 s)."""
    url, frontend = index
    cards = tmp_path / "cards.toml"
    cards.write_text("[cards.dalias]\nlayer = 'a'\nbudget = 300\n[cards.dlib]\nlayer = 'b'\nbudget = 200\n"
                     "[cards.dalias-two]\nlayer = 'c'\nbudget = 100\n"
                     "[cards.dgone]\nlayer = 'd'\nskip = 'the index serves no installable release of it'\n")
    store = tmp_path / "history.db"
    common = ["--frontend-src", str(frontend), "--ref", "dfam-v0.5.0", *family(frontend), "--json", "--no-bisect",
              "--record", str(store), "--night", "2026-11-28"]
    done = downstream("crater", *common, "--cards", str(cards), "--shard", "2/2", "--jobs", "2",
                      workdir=tmp_path / "shard", url=url)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    result = json.loads(done.stdout.split("\nhistory: ")[0])
    assert sorted(lib["name"] for lib in result["libraries"]) == ["dalias-two", "dlib"]
    assert result["jobs"] == 2 and result["memory_capacity"] > 0
    assert "dlib: started (2 running)" in done.stderr or "dalias-two: started (2 running)" in done.stderr
    budgets = {lib["name"]: (lib["budget"], lib["budget_from"]) for lib in result["libraries"]}
    assert budgets == {"dlib": (200.0, "its card"), "dalias-two": (100.0, "its card")}, budgets
    assert result["ecosystem"]["carded"] == 2 and result["ecosystem"]["not_run"] == []
    dlib = next(lib for lib in result["libraries"] if lib["name"] == "dlib")
    assert dlib["outcome"] == "test-pass" and dlib["candidate"]["seconds"]["tests"] > 0

    again = downstream("crater", *common[:-1], "2026-11-29", "--cards", str(cards), "--libraries", "dlib",
                       workdir=tmp_path / "again", url=url)
    assert again.returncode == 0, again.stderr[-3000:]
    (learned,) = json.loads(again.stdout.split("\nhistory: ")[0])["libraries"]
    seconds = dlib["candidate"]["seconds"]["tests"]
    assert learned["budget_from"] == f"learned: {seconds:.0f} s on 2026-11-28 × 3", learned["budget_from"]
    assert learned["budget"] == max(120, round(seconds * 3))
