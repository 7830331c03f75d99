"""`jaxrel compat` on the splitfam sample family: its own tests against the installed wheel, in every cell.

No jax checkout and nothing beyond the package index: splitfam's frontend is built from a git
repository of the template (out of tree), its core and plugin releases sit in a local wheelhouse
that pip's configuration names (``PIP_FIND_LINKS``, which jaxrel reads from pip at run time), and
its own tests (``frontend/tests``) need ``absl-py``, a declared test requirement. The frontend is at
0.2.0 supporting cores 0.1.0 to 0.2.0; core 0.2.0 adds ``mul`` (API number 2), core 0.3.0 is newer
than the frontend (a negative cell).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from splitfam_support import core_release, make_splitfam, plugin_release, set_frontend_version

from jaxrel.distributions.pipconfig import pip_index_config

pytestmark = pytest.mark.integration

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
OLD, NEW = f"py{PY}-splitfam-core0.1.0", f"py{PY}-splitfam-core0.2.0"
PLUGINS, NEWER, MISMATCHED = f"{NEW}-cpu", f"py{PY}-splitfam-core0.3.0", f"{NEW}-cpu@0.1.0"
OWN_TESTS = 4  # frontend/tests/test_add.py: three parameters of test_add, and test_add_is_computed_by_the_core
MUL = '''

def mul(a, b):
    """``a * b``: needs splitfam-core 0.2.0 (API number 2), and does not check for it."""
    return splitfam_core.mul(a, b)
'''
TEST_MUL = "\n\ndef test_mul():\n    assert splitfam.mul(6, 7) == 42\n"


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheelhouse: splitfam-core 0.1.0, 0.2.0 (adds mul), 0.3.0 and splitfam-cpu-plugin 0.1.0, 0.2.0."""
    template = make_splitfam(tmp_path_factory, "splitfam-releases")
    wheelhouse = tmp_path_factory.mktemp("wheelhouse") / "wheels"
    core_release(template, "0.1.0", 1, wheelhouse)
    core_release(template, "0.2.0", 2, wheelhouse, extra="def mul(a, b):\n    return a * b\n")
    core_release(template, "0.3.0", 3, wheelhouse, extra="def mul(a, b):\n    return a * b\n")
    for version in ("0.1.0", "0.2.0"):
        plugin_release(template, version, wheelhouse)
    return wheelhouse


@pytest.fixture
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A splitfam git repository whose frontend is 0.2.0 (cores 0.1.0 to 0.2.0), committed."""
    repo = make_splitfam(tmp_path_factory)
    set_frontend_version(repo, "0.2.0", "0.1.0")
    subprocess.run(["git", "commit", "-qam", "splitfam 0.2.0"], cwd=repo, check=True)
    return repo


def environment(wheelhouse: Path) -> dict[str, str]:
    links = " ".join([str(wheelhouse), *pip_index_config().find_links])
    return {**os.environ, "PIP_FIND_LINKS": links}


def command(repo: Path, workdir: str | Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "jaxrel", "compat", "--family", str(repo / "pyproject.toml"), "--frontend-src",
            str(repo / "frontend"), "--python", PY, "--workdir", str(workdir), "--no-extension", *extra]


def compat(repo: Path, releases: Path, cwd: Path, workdir: str | Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(repo, workdir, *extra), capture_output=True, text=True, timeout=1200,
                          env=environment(releases), cwd=cwd)


def cells(workdir: Path) -> dict[str, dict[str, Any]]:
    return {c["cell"]["id"]: c for c in json.loads((workdir / "report.json").read_text())["cells"]}


def user_tree_untouched(repo: Path) -> None:
    status = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=repo, capture_output=True, text=True)
    leftovers = [line for line in status.stdout.splitlines() if "frontend/" in line]
    assert leftovers == [], "the build wrote into the user's tree"


def test_own_tests_run_against_each_cells_wheel_from_a_relative_workdir(
        index_reachable: None, releases: Path, repo: Path, tmp_path: Path) -> None:
    done = compat(repo, releases, tmp_path, "relative/work", "--record", str(tmp_path / "history.sqlite"),
                  "--night", "2026-10-01")
    workdir = tmp_path / "relative" / "work"
    assert done.returncode == 0, done.stderr[-3000:]
    found = cells(workdir)
    # --record: the real report ingested as the run finished; the set the guard accepted is known good, the set
    # it refused (as the rules expect) known bad: refused is never good
    assert "recorded in" in done.stdout and "new regressions: 0" in done.stdout

    def ask(*pins: str) -> dict[str, Any]:
        asked = subprocess.run([sys.executable, "-m", "jaxrel", "history", "query", "--db",
                                str(tmp_path / "history.sqlite"), "--json", *pins],
                               capture_output=True, text=True, timeout=120)
        return {**json.loads(asked.stdout), "exit": asked.returncode}

    good = ask("splitfam==0.2.0", "splitfam-core==0.2.0")
    assert good["verdict"] == "known good" and good["exit"] == 0, good
    assert {n["cell"] for n in good["nights"]} == {NEW, PLUGINS, MISMATCHED}
    # the mismatched plugin's cell holds this pair too; its refusal is the plugin's, not the pair's
    assert [n["exact"] for n in good["nights"] if n["outcome"] == "refused"] == [False]
    refused = ask("splitfam==0.2.0", "splitfam-core==0.3.0")
    assert refused["verdict"] == "known bad" and [n["outcome"] for n in refused["nights"]] == ["refused"]
    assert set(found) == {OLD, NEW, PLUGINS, NEWER, MISMATCHED}
    for cell_id in (OLD, NEW, PLUGINS):
        cell = found[cell_id]
        env = workdir / "envs" / cell_id
        assert cell["ok"] and cell["observed"] == "accepted"
        assert cell["frontend_tests"] == {"passed": OWN_TESTS, "failed": 0, "skipped": 0, "errors": 0}, cell_id
        assert cell["tests"] == {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}, "no jax suite for splitfam"
        # imported from the cell's own site-packages, by the probe and by the own tests
        for file in [cell["frontend_import"]["file"], *cell["frontend_files"]]:
            assert Path(file).is_relative_to(env) and "site-packages/splitfam/" in file, file
        assert cell["frontend_import"]["version"] == "0.2.0" and cell["failures"] == []
        assert (workdir / "junit" / f"{cell_id}-frontend.xml").is_file()
    for cell_id in (NEWER, MISMATCHED):
        assert found[cell_id]["observed"] == "refused" and found[cell_id]["ok"], cell_id
        assert found[cell_id]["frontend_tests"] is None
    assert found[OLD]["backend_api"]["core_api_version"] == 1
    assert f"{OWN_TESTS} passed, 0 failed, 0 skipped" in done.stdout
    assert "5 cells (3 positive, 2 negative): 5 as expected" in done.stdout
    assert "INCOMPLETE" not in (workdir / "report.md").read_text()
    user_tree_untouched(repo)


def test_an_ungated_call_into_the_newest_core_is_a_compat_regression_on_older_cells_only(
        index_reachable: None, releases: Path, repo: Path, tmp_path: Path) -> None:
    frontend = repo / "frontend"
    (frontend / "splitfam" / "__init__.py").write_text((frontend / "splitfam" / "__init__.py").read_text() + MUL)
    (frontend / "tests" / "test_add.py").write_text((frontend / "tests" / "test_add.py").read_text() + TEST_MUL)
    done = compat(repo, releases, tmp_path, tmp_path / "work", "--plugins", "none")
    assert done.returncode == 1, done.stderr[-3000:]
    found = cells(tmp_path / "work")
    assert set(found) == {OLD, NEW, NEWER}
    (failure,) = found[OLD]["failures"]
    assert failure["test"] == "tests/test_add.py::test_mul" and failure["verdict"] == "compat regression"
    assert "AttributeError" in failure["message"] and "splitfam_core" in failure["message"]
    assert failure["detail"] == "passes on splitfam-core 0.2.0, fails on splitfam-core 0.1.0"
    assert not found[OLD]["ok"] and found[NEW]["ok"] and found[NEW]["failures"] == []
    assert found[NEW]["frontend_tests"]["passed"] == OWN_TESTS + 1
    assert "failed tests: 1 compat regression (fails the run)" in done.stdout
    markdown = (tmp_path / "work" / "report.md").read_text()
    assert f"| `{OLD}` | own tests | `tests/test_add.py::test_mul` | compat regression |" in markdown
    verdicts = (tmp_path / "work" / "junit" / f"{OLD}-verdicts.xml").read_text()
    assert 'name="compat.' + OLD + '.compat-regression"' in verdicts and "<failure" in verdicts
    # the next question, which commit: the ready jaxrel bisect command (no release tag here: a placeholder)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    command = (f"jaxrel bisect --frontend-src {frontend} --good GOOD_REVISION --bad {head} --cell {OLD} "
               "--frontend-tests tests/test_add.py::test_mul")
    assert f"bisect: {command}" in done.stdout and f"    {command}" in markdown
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    assert report["frontend"]["commit"] == head and report["frontend"]["dirty"] is True
    assert report["bisect"] == [command]


def test_a_module_removed_from_the_tree_is_not_in_the_wheel(
        index_reachable: None, releases: Path, repo: Path, tmp_path: Path) -> None:
    frontend = repo / "frontend"
    (frontend / "splitfam" / "extra.py").write_text("EXTRA = 1\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "extra"], cwd=repo, check=True)
    # what an in-tree build (pip wheel ., setuptools) would have left behind
    (frontend / "build" / "lib" / "splitfam").mkdir(parents=True)
    (frontend / "build" / "lib" / "splitfam" / "extra.py").write_text("EXTRA = 1\n")

    def wheel_members(*extra: str) -> list[str]:
        matrix = [sys.executable, "-m", "jaxrel", "matrix", "--family", str(repo / "pyproject.toml"),
                  "--frontend-src", str(frontend), "--python", PY, "--workdir", str(tmp_path / "w"), "--json", *extra]
        done = subprocess.run(matrix, capture_output=True, text=True, timeout=600, cwd=tmp_path,
                              env=environment(releases))
        assert done.returncode == 0, done.stderr
        # the wheel this run used: built now, or reused (and touched) when the exported files were the same
        wheel = max((tmp_path / "w" / "frontend" / "wheels").glob("*/*.whl"), key=lambda p: p.parent.stat().st_mtime_ns)
        with zipfile.ZipFile(wheel) as archive:
            return archive.namelist()

    assert "splitfam/extra.py" in wheel_members()
    (frontend / "splitfam" / "extra.py").unlink()  # removed in the working tree, not yet committed
    members = wheel_members()
    assert "splitfam/extra.py" not in members and "splitfam/__init__.py" in members
    assert not (frontend / "splitfam.egg-info").exists(), "nothing written into the user's tree"
    assert "splitfam/extra.py" in wheel_members("--ref", "HEAD"), "--ref: the commit, not the working tree"
    assert "splitfam/extra.py" not in wheel_members("--ref", "HEAD~1")
    # HEAD is the first tree again (build/ is never exported): reused. HEAD~1 has the second tree's files but
    # another commit, which a build may write into its version: built.
    assert len(list((tmp_path / "w" / "frontend" / "wheels").glob("*/*.whl"))) == 3


def test_a_missing_test_requirement_is_a_collection_error_with_its_cause(
        index_reachable: None, releases: Path, repo: Path, tmp_path: Path) -> None:
    nothing = tmp_path / "no-requirements.txt"
    nothing.write_text("# absl-py forgotten\n")
    done = compat(repo, releases, tmp_path, tmp_path / "work", "--plugins", "none", "--cell", OLD,
                  "--test-requirements", str(nothing))
    assert done.returncode == 1
    (cell,) = cells(tmp_path / "work").values()
    (failure,) = cell["failures"]
    assert failure["test"] == "tests/test_add.py" and failure["verdict"] == "collection error"
    assert failure["message"] == "collection: ModuleNotFoundError: No module named 'absl'"
    assert failure["detail"].startswith("fails on splitfam-core 0.2.0 too"), "rerun on the newest core, built for it"
    assert f"triage: building {NEW}, the newest admitted backend" in done.stderr
    assert "collection error (own tests tests/test_add.py: ModuleNotFoundError: No module named 'absl')" in \
        done.stderr, "the cause, not pytest's last lines"


def test_a_run_killed_midway_leaves_no_green_report(
        index_reachable: None, releases: Path, repo: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    first = compat(repo, releases, tmp_path, workdir, "--plugins", "none", "--cell", OLD)
    assert first.returncode == 0 and json.loads((workdir / "report.json").read_text())["ok"] is True
    assert ", 1 cell, " in first.stderr, "one cell, not '1 cells'"
    (workdir / "junit" / "stale.xml").write_text("<testsuites/>")
    process = subprocess.Popen(command(repo, workdir, "--plugins", "none"), stderr=subprocess.PIPE, text=True,
                               env=environment(releases), cwd=tmp_path)
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith("[1/3]") and "passed" in line:  # the first cell finished; the run goes on
            process.send_signal(signal.SIGKILL)
            break
    process.wait(timeout=600)
    assert process.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    report = workdir / "report.json"
    if report.exists():  # the checkpoint after the first cell: marked incomplete, never ok
        data = json.loads(report.read_text())
        assert data["complete"] is False and data["ok"] is False and len(data["cells"]) <= 1
        assert "INCOMPLETE" in (workdir / "report.md").read_text()
    assert not (workdir / "junit" / "stale.xml").exists(), "the earlier run's junit files are gone"
