"""``jaxrel release build``: every component of the release into one ``dist/`` with a manifest.

Pure packages: ``python -m build`` (sdist + wheel; uv installs the build requirements when
present). Compiled wheels: :func:`jaxrel.distributions.bazel.build` (Bazel through bazelisk). Everything is
built into a staging directory beside ``dist/`` and moved there only when every component
built and every artifact names the right distribution and version: a failed build leaves
``dist/`` untouched.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrel._util import procs
from jaxrel._util.progress import Progress, silent
from jaxrel._util.text import tail
from jaxrel.distributions import bazel
from jaxrel.distributions.filenames import name_and_version
from jaxrel.errors import EnvironmentFailure
from jaxrel.release.config import Component
from jaxrel.release.manifest import Artifact, Manifest
from jaxrel.release.plan import Plan
from jaxrel.release.project import Project

__all__ = ["Progress", "ReleaseBuildError", "build_release"]



class ReleaseBuildError(EnvironmentFailure):
    """A component failed to build, or built the wrong thing; ``dist/`` was not touched."""


@procs.in_phase("release.build")
def _python_build(project: Project, component: Component, into: Path, progress: Progress) -> None:
    command = [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(into)]
    if shutil.which("uv"):
        command.append("--installer=uv")
    command.append(str(project.root / component.path))
    progress(f"building {component.distribution}: python -m build {component.path}")
    done = procs.run(command, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if done.returncode != 0:
        output = done.stderr + done.stdout
        last = next((line for line in reversed(output.splitlines()) if "error" in line.lower()),
                    tail(output, 1, empty=""))
        if "No module named build" in done.stderr:
            last = "the `build` package is missing; pip install 'jaxrel[release]'"
        raise ReleaseBuildError(f"{component.distribution}: python -m build failed: {last.strip()}")


@procs.in_phase("release.build")
def _bazel_build(project: Project, component: Component, into: Path, python: str | None, progress: Progress) -> None:
    command = " ".join([*component.bazel_options, *component.targets])
    progress(f"building {component.distribution}: bazel build {command}")
    try:
        bazel.build(project.root, wheels=component.targets, python=python, output=into, progress=progress,
                    bazel_options=component.bazel_options)
    except bazel.BuildError as error:
        raise ReleaseBuildError(f"{component.distribution}: {error}") from None


def build_release(project: Project, plan: Plan, output: Path, *, python: str | None = None,
                  progress: Progress = silent, only: list[str] | None = None) -> Manifest:
    """Build the plan's components into ``output`` (which must be empty or absent); ``only``: just these (a
    build-matrix job building one compiled component for its Python, gathered later by ``release collect``)."""
    if output.exists() and any(output.iterdir()):
        raise ReleaseBuildError(f"{output} is not empty; remove it or pass --output to a new directory")
    components = [project.release.component(name) for name in plan.upload_order]
    if only:
        wanted = [project.release.component(name) for name in only]
        outside = [c.distribution for c in wanted if c not in components]
        if outside:
            raise ReleaseBuildError(f"{', '.join(outside)} is not in the release {plan.version}; check its version")
        components = [c for c in components if c in wanted]
    external = [c.distribution for c in components if c.build == "external"]
    if external:
        raise ReleaseBuildError(f"{', '.join(external)} is built outside jaxrel (build = \"external\"); build it "
                                "with its own tooling, or release without it")
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        artifacts: list[Artifact] = []
        for component in components:
            into = staging / canonicalize_name(component.distribution)
            into.mkdir()
            if component.build == "python":
                _python_build(project, component, into, progress)
            else:
                _bazel_build(project, component, into, python, progress)
            for path in sorted(into.iterdir()):
                name, version = name_and_version(path.name)
                if name != canonicalize_name(component.distribution) or version != Version(plan.version):
                    raise ReleaseBuildError(f"{component.distribution}: built {path.name}, expected "
                                            f"{component.distribution} {plan.version}; check its declared versions "
                                            "(jaxrel release check)")
                artifacts.append(Artifact.of(path, component.distribution, plan.version, component.role))
        commit = project.git("rev-parse", "HEAD").stdout.strip() or None if project.is_git else None
        manifest = Manifest(plan.family, plan.version, plan.tag, commit, tuple(artifacts))
        final = staging / "final"
        final.mkdir()
        for artifact in artifacts:
            component_dir = staging / canonicalize_name(artifact.distribution)
            os.replace(component_dir / artifact.file, final / artifact.file)
        manifest.write(final)
        if output.exists():
            output.rmdir()
        os.replace(final, output)
        return manifest
    finally:
        shutil.rmtree(staging, ignore_errors=True)
