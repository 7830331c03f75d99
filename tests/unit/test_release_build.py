"""``release build`` offline: fake ``python -m build`` and Bazel runs on the splitfam sample, so the
staging, the checks on what was built, the move into ``dist/`` and the manifest are covered."""

from __future__ import annotations

import shutil
import subprocess
import types
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from jaxrel.distributions import bazel
from jaxrel.release import builder, manifest
from jaxrel.release.plan import Plan, make_plan
from jaxrel.release.project import Project, open_project

TEMPLATE = Path(__file__).resolve().parents[1] / "data" / "splitfam"
PYTHON_BUILT = {"frontend": "splitfam", "plugin": "splitfam_cpu_plugin"}


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    root = tmp_path / "splitfam"
    shutil.copytree(TEMPLATE, root)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "0.1.0"], cwd=root,
                   check=True)
    with open_project(root) as opened:
        yield opened


@pytest.fixture
def plan(project: Project) -> Plan:
    return make_plan(project)


class FakeBuilds:
    """``python -m build`` and ``bazel.build`` stand-ins writing artifacts named ``version``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, version: str = "0.1.0") -> None:
        self.version = version
        self.commands: list[list[str]] = []
        self.bazel: list[dict[str, Any]] = []
        self.python_result: Callable[[list[str]], subprocess.CompletedProcess[str]] | None = None
        monkeypatch.setattr(builder, "procs", types.SimpleNamespace(run=self.run))
        monkeypatch.setattr(bazel, "build", self.build)

    def run(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.commands.append(command)
        if self.python_result is not None:
            return self.python_result(command)
        out, name = Path(command[command.index("--outdir") + 1]), PYTHON_BUILT[Path(command[-1]).name]
        (out / f"{name}-{self.version}.tar.gz").write_bytes(b"sdist")
        (out / f"{name}-{self.version}-py3-none-any.whl").write_bytes(b"wheel")
        return subprocess.CompletedProcess(command, 0, "", "")

    def build(self, workspace: Path, **kwargs: Any) -> bazel.BuildResult:
        self.bazel.append(kwargs)
        wheel = kwargs["output"] / f"splitfam_core-{self.version}-cp311-cp311-linux_x86_64.whl"
        wheel.write_bytes(b"compiled")
        return bazel.BuildResult(wheels=[wheel], seconds=0.1, command=["bazel", "build"])


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_every_component_lands_in_dist_with_a_manifest(project: Project, plan: Plan, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeBuilds(monkeypatch)
    lines: list[str] = []
    output = tmp_path / "out" / "dist"
    made = builder.build_release(project, plan, output, python="/usr/bin/python3.11", progress=lines.append)
    assert [a.distribution for a in made.artifacts] == ["splitfam-core", "splitfam-cpu-plugin",
                                                        "splitfam-cpu-plugin", "splitfam", "splitfam"]
    assert sorted(p.name for p in output.iterdir()) == sorted([*(a.file for a in made.artifacts), manifest.NAME])
    assert manifest.read(output) == made
    assert made.commit == project.git("rev-parse", "HEAD").stdout.strip() and made.tag == "v0.1.0"
    assert {a.role for a in made.artifacts} == {"backend", "plugin", "frontend"}
    assert leftovers(output.parent) == [], "the staging directory is gone"
    (call,) = fake.bazel
    assert call["wheels"] == ("//core:wheel",) and call["python"] == "/usr/bin/python3.11"
    assert call["output"].parent.name.startswith(".dist."), "built into the staging directory beside dist/"
    assert [Path(c[-1]).name for c in fake.commands] == ["plugin", "frontend"]
    assert lines[0] == "building splitfam-core: bazel build //core:wheel"
    assert "building splitfam: python -m build frontend" in lines


def test_an_empty_output_directory_is_used(project: Project, plan: Plan, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    FakeBuilds(monkeypatch)
    (tmp_path / "dist").mkdir()
    builder.build_release(project, plan, tmp_path / "dist")
    assert (tmp_path / "dist" / manifest.NAME).is_file()


def test_a_non_empty_output_is_refused_before_building(project: Project, plan: Plan, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeBuilds(monkeypatch)
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "old.whl").write_text("old")
    with pytest.raises(builder.ReleaseBuildError, match="is not empty; remove it or pass --output"):
        builder.build_release(project, plan, tmp_path / "dist")
    assert fake.commands == [] and fake.bazel == []
    assert sorted(p.name for p in (tmp_path / "dist").iterdir()) == ["old.whl"]


def test_an_artifact_of_the_wrong_version_leaves_no_dist(project: Project, plan: Plan, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    FakeBuilds(monkeypatch, version="0.0.9")
    with pytest.raises(builder.ReleaseBuildError, match=r"splitfam-core: built splitfam_core-0\.0\.9-.*expected "
                                                        r"splitfam-core 0\.1\.0; check its declared versions"):
        builder.build_release(project, plan, tmp_path / "dist")
    assert not (tmp_path / "dist").exists() and leftovers(tmp_path) == []


def test_a_failed_python_build_names_its_error_line(project: Project, plan: Plan, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeBuilds(monkeypatch)
    fake.python_result = lambda command: subprocess.CompletedProcess(
        command, 1, "* Building wheel...\n", "ERROR Backend subprocess exited when trying to invoke build_wheel\n\n"
                                             "Traceback: the last line\n")
    with pytest.raises(builder.ReleaseBuildError, match=r"^splitfam-cpu-plugin: python -m build failed: ERROR Backend "
                                                        r"subprocess exited when trying to invoke build_wheel$"):
        builder.build_release(project, plan, tmp_path / "dist")
    assert not (tmp_path / "dist").exists() and leftovers(tmp_path) == []
    fake.python_result = lambda command: subprocess.CompletedProcess(command, 1, "", "  something odd  \n\n")
    with pytest.raises(builder.ReleaseBuildError, match="python -m build failed: something odd$"):
        builder.build_release(project, plan, tmp_path / "dist")
    fake.python_result = lambda command: subprocess.CompletedProcess(command, 1, "", "/usr/bin/python: No module "
                                                                                     "named build\n")
    with pytest.raises(builder.ReleaseBuildError, match=r"the `build` package is missing; pip install 'jaxrel\["):
        builder.build_release(project, plan, tmp_path / "dist")


def test_a_failed_bazel_build_names_the_component(project: Project, plan: Plan, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    FakeBuilds(monkeypatch)

    def fail(workspace: Path, **kwargs: Any) -> bazel.BuildResult:
        raise bazel.BuildError("bazel build failed: no toolchain")

    monkeypatch.setattr(bazel, "build", fail)
    with pytest.raises(builder.ReleaseBuildError, match="^splitfam-core: bazel build failed: no toolchain$"):
        builder.build_release(project, plan, tmp_path / "dist")
    assert leftovers(tmp_path) == []


def test_an_external_component_is_refused(project: Project, plan: Plan, tmp_path: Path) -> None:
    release = replace(project.release, components=tuple(replace(c, build="external") if c.role == "backend" else c
                                                        for c in project.release.components))
    with pytest.raises(builder.ReleaseBuildError, match=r'^splitfam-core is built outside jaxrel \(build = "ex'):
        builder.build_release(replace(project, release=release), plan, tmp_path / "dist")
    assert not (tmp_path / "dist").exists()


def test_the_cli_names_the_distributions_built_not_only_the_family(project: Project, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``release build --component`` says what it built (``splitfam-core``), not the family's name alone (this
    tree's own release is family jax: "built jax 0.1.0.dev0" read as if jax had been built)."""
    from jaxrel.cli import main

    FakeBuilds(monkeypatch)
    assert main(["release", "build", "--project", str(project.root), "--component", "splitfam-core",
                 "--output", str(tmp_path / "dist")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"built splitfam-core 0.1.0 (family splitfam) into {tmp_path / 'dist'}/ (1 file, manifest.json):"
