"""scripts/install_build_tools.sh refuses an argument it does not know before it installs anything."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_build_tools.sh"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The script from a copy of the repository holding nothing else, so whatever it would install lands there."""
    (tmp_path / "scripts").mkdir(exist_ok=True)
    shutil.copy(SCRIPT, tmp_path / "scripts" / SCRIPT.name)
    return subprocess.run(["bash", str(tmp_path / "scripts" / SCRIPT.name), *args], capture_output=True, text=True,
                          timeout=60, check=False)


def test_misspelt_option_is_refused_with_exit_2(tmp_path: Path) -> None:
    done = _run(tmp_path, "--bazel-onyl")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == ["install_build_tools.sh: error: unknown argument '--bazel-onyl'; usage: "
                                        "scripts/install_build_tools.sh [--bazel-only]"]
    assert not (tmp_path / "build").exists(), "nothing installed"


def test_help_prints_usage(tmp_path: Path) -> None:
    done = _run(tmp_path, "--help")
    assert (done.returncode, done.stdout.strip()) == (0, "usage: scripts/install_build_tools.sh [--bazel-only]")
    assert not (tmp_path / "build").exists()
