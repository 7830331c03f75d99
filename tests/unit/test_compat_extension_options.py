"""How `jaxrel compat` builds the workspace's wheels: as the workspace's release builds them, unless told.

The cells should test the wheels users install: this tree releases its extension with
``--config=manylinux`` (Zig's clang for glibc 2.27), so that is what compat builds by default.
"""

from __future__ import annotations

import argparse
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from jaxrel.cli import main
from jaxrel.cli.compat import _extension_options
from jaxrel.cli.compat import add as add_compat
from jaxrel.distributions.wheels import write_wheel
from jaxrel.release.project import open_project

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = Path(__file__).resolve().parents[1] / "data" / "splitfam" / "pyproject.toml"


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_compat(parser.add_subparsers())
    return parser.parse_args(["compat", *argv])


def workspace(tmp_path: Path, pyproject: str | None) -> Path:
    (tmp_path / "WORKSPACE").write_text("")
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    return tmp_path


def with_core_options(options: str) -> str:
    """The splitfam template with its Bazel component released with ``options`` (a TOML array)."""
    text = TEMPLATE.read_text()
    anchor = 'targets = ["//core:wheel"]\n'
    assert anchor in text
    return text.replace(anchor, f"{anchor}bazel-options = {options}\n")


def test_this_trees_cells_get_the_wheels_its_release_builds() -> None:
    with open_project(REPO) as project:
        released = project.release.shared_bazel_options()
    assert released == ("--config=manylinux",)
    assert _extension_options(parsed(), REPO) == released


def test_bazel_options_given_win_and_an_empty_one_means_bazels_defaults() -> None:
    assert _extension_options(parsed("--bazel-options", "--config=x --jobs=2", "--bazel-options=--copt=-O2"),
                              REPO) == ("--config=x", "--jobs=2", "--copt=-O2")
    assert _extension_options(parsed("--bazel-options="), REPO) == ()


def test_an_unbalanced_quote_is_one_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compat", "--bazel-options=--copt='-O2"]) == 2
    err = capsys.readouterr().err
    assert "--bazel-options: No closing quotation" in err and "Traceback" not in err


def test_no_workspace_or_no_release_there_means_bazels_defaults(tmp_path: Path) -> None:
    assert _extension_options(parsed(), None) == ()
    assert _extension_options(parsed(), workspace(tmp_path, None)) == ()


def test_a_release_without_options_builds_with_bazels_defaults(tmp_path: Path) -> None:
    assert _extension_options(parsed(), workspace(tmp_path, TEMPLATE.read_text())) == ()


def test_the_options_of_a_workspace_release_are_used(tmp_path: Path) -> None:
    tree = workspace(tmp_path, with_core_options('["--config=portable", "--copt=-O3"]'))
    assert _extension_options(parsed(), tree) == ("--config=portable", "--copt=-O3")


def test_components_built_differently_leave_the_choice_to_the_user(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    text = with_core_options('["--config=portable"]') + (
        '[tool.jaxrel.release.components.splitfam-gpu]\npath = "gpu"\nbuild = "bazel"\ntargets = ["//gpu:wheel"]\n'
        'versions = ["gpu/version.bzl:VERSION"]\n')
    tree = workspace(tmp_path, text)
    with open_project(tree) as project:
        assert project.release.shared_bazel_options() is None
    assert _extension_options(parsed(), tree) == ()
    assert "different bazel-options; pass --bazel-options to choose" in capsys.readouterr().err


def test_a_broken_release_config_is_named_and_the_build_goes_on(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    tree = workspace(tmp_path, with_core_options('"--config=portable"'))  # a string, not a list
    assert _extension_options(parsed(), tree) == ()
    err = capsys.readouterr().err
    assert "extension: built with Bazel's defaults, not as released:" in err and "bazel-options" in err


# -- --extension-wheels DIR: wheels built beforehand (compat.yml's cells take the release's build) --------------


def test_extension_wheels_given_are_a_folder_of_wheel_files(tmp_path: Path) -> None:
    from jaxrel.cli.compat import _extension_dir

    folder = write_wheel(tmp_path / "w", "jaxrel-rmsnorm", "0.1", {"jaxrel_rmsnorm/__init__.py": b""}).parent
    assert _extension_dir(parsed("--extension-wheels", str(folder))) == folder
    assert _extension_dir(parsed()) is None


def _tampered(folder: Path) -> None:
    """A wheel whose module no longer matches its RECORD."""
    wheel = write_wheel(folder / "built", "r", "0.1", {"r/__init__.py": b"x = 1\n"})
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(folder / wheel.name, "w") as out:
        for member in source.infolist():
            out.writestr(member, b"x = 2\n" if member.filename == "r/__init__.py" else source.read(member))
    shutil.rmtree(folder / "built")


@pytest.mark.parametrize(("files", "extra", "says"), [
    ([], [], "no wheel files (*.whl) there; pass the folder a build wrote them to"),
    (["notes.txt"], [], "no wheel files (*.whl) there"),
    (["rmsnorm.whl"], [], "'rmsnorm.whl' is not a valid wheel or sdist file name"),
    (["r-0.1-cp311-abi3-linux_x86_64.whl"], [], "not a readable wheel (File is not a zip file)"),
    ([_tampered], [], "member r/__init__.py does not match its RECORD hash"),
    (["r-0.1-cp311-abi3-linux_x86_64.whl"], ["--no-extension"], "the wheels are built already; drop --no-extension"),
    (["r-0.1-cp311-abi3-linux_x86_64.whl"], ["--workspace", ".", "--bazel-options="],
     "drop --workspace and --bazel-options"),
])
def test_extension_wheels_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], files: list[Any],
                                              extra: list[str], says: str) -> None:
    for file in files:
        if callable(file):
            file(tmp_path)
        else:
            (tmp_path / file).write_bytes(b"")
    assert main(["compat", "--workdir", str(tmp_path / "work"), "--extension-wheels", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "work").exists(), "refused before anything is written"


def test_a_missing_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compat", "--workdir", str(tmp_path / "work"), "--extension-wheels", str(tmp_path / "absent")]) == 2
    assert "no wheel files (*.whl) there" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()
