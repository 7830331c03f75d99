"""compat-head.yml: jax HEAD on a schedule, a bisect per regressed cell, the last green run kept.

actionlint, expressions in scripts and nox session names are checked for every workflow in
tests/unit/test_workflows.py; here: the wiring, least privilege, and the step that turns the
cells' report.json files into the bisect matrix, run with bash and jq on reports jaxrel writes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxrel.cells.matrix import Cell, FrontendSpec, Matrix, Outcome, Purpose
from jaxrel.compat import report
from jaxrel.compat.cell import CellResult
from jaxrel.compat.triage import Failure

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"


def _load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    assert isinstance(data, dict)
    return data


def _steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def _step(job: dict[str, Any], text: str) -> dict[str, Any]:
    found = [s for s in job["steps"] if text in s.get("run", "") or text in s.get("uses", "")]
    assert len(found) == 1, f"expected one step with {text!r}, found {len(found)}"
    return found[0]


HEAD = _load("compat-head.yml")
JOBS = HEAD["jobs"]


def test_scheduled_and_dispatchable() -> None:
    triggers = HEAD.get("on", HEAD.get(True))
    assert triggers["schedule"][0]["cron"]
    assert "jax-ref" in triggers["workflow_dispatch"]["inputs"]
    assert set(triggers) == {"schedule", "workflow_dispatch"}, "no push or pull_request: nothing untrusted runs here"


def test_least_privilege() -> None:
    """Every job reads the repository only; the one that deploys the HUD to Pages gets what deploying takes, the one
    that keeps the regressions' issues what that takes."""
    assert HEAD["permissions"] == {}
    for name, job in JOBS.items():
        if name == "pages":
            assert job["permissions"] == {"pages": "write", "id-token": "write"} and "steps" in job
            assert [s.get("uses", "").split("@")[0] for s in job["steps"]] == ["actions/deploy-pages"]
            continue
        if name == "issues":
            assert job["permissions"] == {"contents": "read", "issues": "write"}
            assert "scripts/regression_issues.py" in _step(job, "regression_issues.py")["run"]
            assert _step(job, "regression_issues.py")["env"]["GH_TOKEN"] == "${{ github.token }}"
            continue
        assert job["permissions"] == {"contents": "read"}, name


def test_the_regressions_issues_follow_the_history() -> None:
    assert JOBS["issues"]["needs"] == "history"
    assert "jaxrel history regressions" in _step(JOBS["history"], "history regressions")["run"]


def test_the_history_is_collected_by_one_job_and_published() -> None:
    job = JOBS["history"]
    assert set(job["needs"]) == {"matrix", "cell", "report", "bisect"}
    assert "build/bisect-all/*/bisect.json" in _step(job, "history ingest")["run"]
    ingest = _step(job, "history ingest")["run"]
    assert "--db build/history/history.sqlite" in ingest and '--source "$RUN_URL"' in ingest
    assert "jaxrel history publish" in _step(job, "history publish")["run"]
    restore = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/cache/restore@"))
    save = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/cache/save@"))
    assert restore["with"]["path"] == save["with"]["path"] == "build/history"
    assert restore["with"]["restore-keys"] == "compat-head-history-"
    assert JOBS["pages"]["needs"] == "history"


def test_checkouts_keep_no_credentials() -> None:
    """Each job that checks out checks out this repository and jax-ml/jax, neither keeping the token."""
    for name, job in JOBS.items():
        checkouts = [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]
        if not checkouts:
            continue
        repositories = [s.get("with", {}).get("repository") for s in checkouts]
        assert repositories in ([None, "jax-ml/jax"], [None]), name
        assert all(s["with"]["persist-credentials"] is False for s in checkouts), name


def test_actions_pinned_as_in_compat_yml() -> None:
    """An action both workflows use is pinned to the same ref (re-pinning compat.yml re-pins this one)."""
    def refs(workflow: dict[str, Any]) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for step in _steps(workflow):
            if "@" in step.get("uses", ""):
                action, ref = step["uses"].split("@", 1)
                found.setdefault(action, set()).add(ref)
        return found

    ours, theirs = refs(HEAD), refs(_load("compat.yml"))
    shared = set(ours) & set(theirs)
    assert {"actions/checkout", "actions/setup-python", "actions/upload-artifact"} <= shared
    for action in shared:
        assert ours[action] == theirs[action], action


def test_every_job_tests_one_jax_commit() -> None:
    assert JOBS["matrix"]["outputs"]["jax-commit"] == "${{ steps.jax.outputs.commit }}"
    assert "git -C jax rev-parse HEAD" in _step(JOBS["matrix"], "rev-parse")["run"]
    for name in ("cell", "bisect"):
        jax = next(s for s in JOBS[name]["steps"] if s.get("with", {}).get("repository") == "jax-ml/jax")
        assert jax["with"]["ref"] == "${{ needs.matrix.outputs.jax-commit }}", name
        assert jax["with"]["path"] == "jax"
    bisect_checkout = next(s for s in JOBS["bisect"]["steps"] if s.get("with", {}).get("repository") == "jax-ml/jax")
    assert bisect_checkout["with"]["fetch-depth"] == 0, "git bisect needs the history"


def test_cells_run_compat_on_the_checkout() -> None:
    assert "jaxrel matrix --format github --frontend-src jax" in _step(JOBS["matrix"], "jaxrel matrix")["run"]
    run = _step(JOBS["cell"], "nox -s compat")
    assert "--frontend-src jax" in run["run"] and '--cell "$CELL"' in run["run"]
    upload = _step(JOBS["cell"], "upload-artifact")
    assert upload["with"]["name"] == "compat-head-${{ matrix.name }}"
    download = _step(JOBS["report"], "download-artifact")
    assert download["with"]["pattern"] == "compat-head-*"


def test_bisect_job_per_regressed_cell() -> None:
    job = JOBS["bisect"]
    assert set(job["needs"]) == {"matrix", "report"}
    assert "needs.report.outputs.regressions != '[]'" in job["if"]
    assert job["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.report.outputs.regressions) }}"
    assert JOBS["report"]["outputs"]["regressions"] == "${{ steps.regressions.outputs.regressions }}"
    run = _step(job, "nox -s bisect")
    assert run["env"] == {"CELL": "${{ matrix.cell }}", "TESTS": "${{ toJSON(matrix.tests) }}",
                          "BAD": "${{ needs.matrix.outputs.jax-commit }}"}
    for option in ('--good-report "$LAST_GREEN/report.json"', '--bad "$BAD"', '--cell "$CELL"',
                   '--frontend-tests "${tests[@]}"', "--workdir build/bisect"):
        assert option in run["run"], option
    summary = _step(job, "GITHUB_STEP_SUMMARY")
    assert summary["if"] == "always()" and "build/bisect/bisect.md" in summary["run"]
    upload = _step(job, "upload-artifact")
    assert upload["if"] == "always()" and "build/bisect/bisect.md" in upload["with"]["path"]


def test_last_green_kept_only_when_green() -> None:
    green = _step(JOBS["report"], "cp ")
    assert green["if"] == "needs.cell.result == 'success'"
    save = _step(JOBS["report"], "actions/cache/save@")
    assert save["if"] == "steps.green.outcome == 'success'"
    restore = _step(JOBS["bisect"], "actions/cache/restore@")
    assert save["with"]["path"] == restore["with"]["path"] == HEAD["env"]["LAST_GREEN"]
    prefix = restore["with"]["restore-keys"]
    assert save["with"]["key"].startswith(prefix), "the restore finds the newest saved green report"


# -- the regressions step, run for real on reports jaxrel writes -----------------------------------------

FRONT = FrontendSpec("jax", "0.11.1.dev20260808", "0.11.0", "source jax (git cec06d116c05)")


def _cell(backend: str) -> Cell:
    return Cell(f"py3.12-jaxlib{backend}", "3.12", backend, (), Purpose.ADMITTED, Outcome.ACCEPTED)


def _result(cell: Cell, failures: list[Failure]) -> CellResult:
    result = CellResult(cell, Outcome.ACCEPTED, True, 1.0, failures=failures)
    result.settle()
    return result


def _write(directory: Path, results: list[CellResult]) -> None:
    matrix = Matrix("jax", FRONT, "jaxlib", [r.cell for r in results])
    report.write(directory, matrix, results, frontend={"commit": "c" * 40, "dirty": False, "source": "jax"})


def _regressions(tmp_path: Path) -> list[dict[str, Any]]:
    if shutil.which("jq") is None or shutil.which("bash") is None:
        pytest.skip("needs bash and jq (the GitHub runner has both)")
    script = _step(JOBS["report"], "jq -cs")["run"]
    output = tmp_path / "github_output"
    output.write_text("")
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, env={"GITHUB_OUTPUT": str(output), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == 0, done.stderr
    line = output.read_text().strip()
    assert line.startswith("regressions=")
    found = json.loads(line.removeprefix("regressions="))
    assert isinstance(found, list)
    return found


def test_regressions_from_reports(tmp_path: Path) -> None:
    old, new = _cell("0.11.0"), _cell("0.11.1")
    regression = Failure("own tests", "tests/api_util_test.py::ApiUtilTest::test_resolve_kwargs", "failed",
                         "AttributeError: module 'jaxlib._jax' has no attribute 'RawBuffer'", "compat regression")
    other_shard = Failure("own tests", "tests/tree_util_test.py::TreeTest::test_roundtrip[a b]", "failed",
                          "AssertionError", "compat regression")
    frontend = Failure("own tests", "tests/api_util_test.py::ApiUtilTest::test_broken", "failed", "boom",
                       "frontend failure")
    suite = Failure("compat suite", "test_shard_map.py::test_mesh", "failed", "boom", "compat regression")
    all_dir = tmp_path / "build" / "compat-all"
    _write(all_dir / "compat-head-py3.12-jaxlib0.11.0-1", [_result(old, [regression, frontend, suite])])
    _write(all_dir / "compat-head-py3.12-jaxlib0.11.0-2", [_result(old, [other_shard, regression])])
    _write(all_dir / "compat-head-py3.12-jaxlib0.11.1", [_result(new, [])])
    assert _regressions(tmp_path) == [{"cell": "py3.12-jaxlib0.11.0", "python": "3.12",
                                       "tests": [regression.test, other_shard.test]}]


def test_no_reports_no_regressions(tmp_path: Path) -> None:
    (tmp_path / "build" / "compat-all").mkdir(parents=True)
    assert _regressions(tmp_path) == []
    _write(tmp_path / "build" / "compat-all" / "compat-head-x", [_result(_cell("0.11.1"), [])])
    assert _regressions(tmp_path) == []
