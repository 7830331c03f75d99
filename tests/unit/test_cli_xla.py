"""`jaxrel xla show` on the command line: the pin, what it means for extensions, JSON and errors."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from jaxrel.cli import main
from jaxrel.extension import xla

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    copy = tmp_path / "WORKSPACE"
    shutil.copyfile(REPO / "WORKSPACE", copy)
    return copy


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_show_prints_the_commit_and_the_backend_extensions_need(workspace: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    pin = xla.read_pin(workspace)
    code, out, err = run(capsys, "xla", "show", "--workspace", str(workspace))
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == f"XLA pin in {workspace}:"
    assert pin.commit in out and pin.wheel in out and pin.sha256 in out
    assert "jaxlib>=0.9.1" in out
    assert any(line.split() == ["XLA", "FFI", "API", "0.3"] for line in out.splitlines())


def test_show_json(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "xla", "show", "--workspace", str(workspace), "--json")
    data = json.loads(out)
    assert code == 0
    assert data["minimum_backend"] == "0.9.1"
    assert data["xla_ffi_api"] == "0.3"
    assert data["workspace"] == str(workspace)
    assert {key: data[key] for key in xla.FIELDS} == xla.read_pin(workspace).to_json()


def test_show_follows_the_pin(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    moved = dataclasses.replace(xla.read_pin(workspace), backend_version="0.12.0",
                                wheel="jaxlib-0.12.0-cp311-cp311-manylinux_2_27_x86_64.whl")
    assert xla.write_pin(workspace, moved)
    code, out, _ = run(capsys, "xla", "show", "--workspace", str(workspace), "--json")
    data = json.loads(out)
    assert code == 0
    assert (data["backend_version"], data["xla_ffi_api"], data["minimum_backend"]) == ("0.12.0", "0.5", "0.12.0")


def test_show_a_release_missing_from_the_data_says_unknown(workspace: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert xla.write_pin(workspace, dataclasses.replace(xla.read_pin(workspace), backend_version="0.0.1"))
    code, out, _ = run(capsys, "xla", "show", "--workspace", str(workspace))
    assert code == 0
    assert "unknown (not in the release data)" in out and "jaxlib>=" not in out


def test_show_without_the_workspace_file_exits_2_with_one_line(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere" / "WORKSPACE"
    code, out, err = run(capsys, "xla", "show", "--workspace", str(missing))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith("jaxrel xla: error: cannot read ") and str(missing) in err and "--workspace" in err


def test_show_of_a_workspace_without_pin_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = tmp_path / "WORKSPACE"
    workspace.write_text('workspace(name = "empty")\n')
    code, _, err = run(capsys, "xla", "show", "--workspace", str(workspace))
    assert code == 2
    assert err.count("\n") == 1 and "no xla_ffi(name = 'xla', ...) call" in err
