"""Smoke test of the splitfam template: the three wheels build, install together and pass the guard.

The core is built by Bazel through :func:`jaxrel.distributions.bazel.build`, the frontend and plugin by
``python -m build`` (setuptools from the package index, through pip's configuration). A
fresh environment installs all three from the built files only; ``import splitfam`` runs the
vendored guard, which accepts them, and refuses a plugin whose version differs from the core's.
"""

from __future__ import annotations

import email.parser
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from jaxrel.distributions.bazel import BuildError, build, find_launcher, host_python
from jaxrel.distributions.pipconfig import pip_index_config

pytestmark = pytest.mark.integration

PYTHON_TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def uv() -> str | None:
    """The uv executable, if installed (the ``uv`` package or on ``PATH``)."""
    if importlib.util.find_spec("uv") is not None:
        from uv import find_uv_bin

        return find_uv_bin()
    return shutil.which("uv")


def run(command: list[str | Path], **options) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True, **options)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, command))} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def python_build(project: Path, outdir: Path, *, sdist: bool = True) -> list[str]:
    """``python -m build`` (sdist and wheel, or the wheel only) into ``outdir``; the new file names."""
    if importlib.util.find_spec("build") is None:
        pytest.skip("python -m build is not installed: pip install -e '.[release]'")
    command: list[str | Path] = [sys.executable, "-m", "build", "--outdir", outdir]
    env = dict(os.environ)
    if uv():
        command += ["--installer", "uv"]
        env.update(pip_index_config().uv_environment())  # uv does not read pip's configuration
    if not sdist:
        command.append("--wheel")
    before = set(os.listdir(outdir)) if outdir.exists() else set()
    run([*command, project], env=env)
    return sorted(set(os.listdir(outdir)) - before)


def fresh_environment(path: Path) -> Path:
    """A new virtual environment of the host Python; its interpreter."""
    if uv():
        run([uv(), "venv", "--quiet", "--python", host_python(), path],
            env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"})
    else:
        run([host_python(), "-m", "venv", path])
    return path / "bin" / "python"


def install(python: Path, links: list[Path], *requirements: str) -> None:
    """Install ``requirements`` into ``python``'s environment from ``links`` only (no index)."""
    sources = [option for link in links for option in ("--find-links", str(link))]
    if uv():
        run([uv(), "pip", "install", "--quiet", "--python", python, "--no-index", *sources, *requirements])
    else:
        run([python, "-m", "pip", "install", "--quiet", "--no-index", *sources, *requirements])


def metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


@pytest.mark.long("the template's compiled core built with Bazel in a new output base, then installed and guarded")
def test_template_builds_installs_and_guards(splitfam: Path, tmp_path: Path) -> None:
    try:
        find_launcher(splitfam)
    except BuildError as error:
        pytest.skip(f"Bazel is not available: {error}")
    dist = tmp_path / "dist"

    # The core: Bazel, through jaxrel's build driver.
    result = build(splitfam, wheels=["//core:wheel"], python=host_python(), output=dist)
    (core,) = result.wheels
    assert re.fullmatch(rf"splitfam_core-0\.1\.0-{PYTHON_TAG}-{PYTHON_TAG}-manylinux_\d+_\d+_\w+\.whl", core.name)
    assert core.parent == dist
    core_metadata = metadata(core)
    assert (core_metadata["Name"], core_metadata["Version"]) == ("splitfam-core", "0.1.0")
    with zipfile.ZipFile(core) as archive:
        assert f"splitfam_core/_core{sysconfig.get_config_var('EXT_SUFFIX')}" in archive.namelist()
        assert "splitfam_core/version.py" in archive.namelist()

    # The frontend (with the vendored guard) and the plugin: python -m build.
    assert python_build(splitfam / "frontend", dist) == ["splitfam-0.1.0-py3-none-any.whl", "splitfam-0.1.0.tar.gz"]
    assert python_build(splitfam / "plugin", dist) == [
        "splitfam_cpu_plugin-0.1.0-py3-none-any.whl",
        "splitfam_cpu_plugin-0.1.0.tar.gz",
    ]
    with zipfile.ZipFile(dist / "splitfam-0.1.0-py3-none-any.whl") as archive:
        assert "splitfam/_guard.py" in archive.namelist()
    frontend_metadata = metadata(dist / "splitfam-0.1.0-py3-none-any.whl")
    assert frontend_metadata.get_all("Requires-Dist") == ["splitfam-core<=0.1.0,>=0.1.0"]
    # Building leaves the repository clean (outputs are ignored): a release can check that.
    assert run(["git", "status", "--porcelain"], cwd=splitfam).stdout == ""

    # All three, from the built files only, into a fresh environment: the guard accepts them.
    python = fresh_environment(tmp_path / "env")
    install(python, [dist], "splitfam==0.1.0", "splitfam-cpu-plugin==0.1.0")
    probe = ("import splitfam, splitfam_core, splitfam_cpu_plugin; "
             "print(splitfam.add(2, 3), splitfam.add(0.5, 0.25), splitfam_core.__version__, "
             "splitfam_cpu_plugin.__version__, splitfam_cpu_plugin.platform())")
    assert run([python, "-c", probe]).stdout.split() == ["5", "0.75", "0.1.0", "0.1.0", "cpu"]

    # A plugin at another version than the core: import splitfam refuses, naming the plugin.
    patched = tmp_path / "plugin-0.1.1"
    shutil.copytree(splitfam / "plugin", patched, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    for relative in ("pyproject.toml", "splitfam_cpu_plugin/version.py"):
        path = patched / relative
        text = path.read_text()
        assert text.count('"0.1.0"') == 1, relative  # the version, not the pinned core
        path.write_text(text.replace('"0.1.0"', '"0.1.1"'))
    assert python_build(patched, tmp_path / "dist-0.1.1", sdist=False) == ["splitfam_cpu_plugin-0.1.1-py3-none-any.whl"]
    install(python, [tmp_path / "dist-0.1.1", dist], "splitfam-cpu-plugin==0.1.1")
    refused = subprocess.run([python, "-c", "import splitfam"], capture_output=True, text=True)
    assert refused.returncode == 1
    assert "GuardError: splitfam-cpu-plugin 0.1.1 installed, but plugins must have the same release number as " \
           "splitfam-core 0.1.0" in refused.stderr
    assert 'Fix: pip install "splitfam-cpu-plugin==0.1.0"' in refused.stderr
    skipped = subprocess.run([python, "-c", "import splitfam; print(splitfam.add(1, 1))"], capture_output=True,
                             text=True, env={**os.environ, "JAXREL_SKIP_GUARD": "1"})
    assert skipped.stdout.strip() == "2", skipped.stderr
