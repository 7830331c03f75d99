"""The cell driver in a real interpreter: a frontend that fails to import is the cell's one-line problem, and the
suite is not started against it (before, a plugin cell's CPU-only switch read the missing import and the driver
died with a traceback)."""

from __future__ import annotations

import sys
from pathlib import Path

from jaxrel.cells.driver import run_driver
from jaxrel.distributions import envs


def test_a_frontend_that_fails_to_import_is_one_line_and_no_suite(tmp_path: Path) -> None:
    (tmp_path / "test_never.py").write_text("def test_never():\n    raise AssertionError('the suite ran')\n")
    site = tmp_path / "site"  # a backend in range, where the guard is told to look: it accepts, the import is reached
    (site / "fakeback").mkdir(parents=True)
    (site / "fakeback" / "version.py").write_text('_version = "1.0"\n')
    (site / "fakeback-1.0.dist-info").mkdir()
    (site / "fakeback-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeback\nVersion: 1.0\n")
    guard = {"frontend": "brokenfront", "backend": "fakeback", "minimum_backend": "1.0", "frontend_version": "1.0",
             "plugins": [], "path": [str(site)]}
    result = run_driver(envs.Env(Path(sys.prefix)), guard=guard, package="brokenfront", work=tmp_path / "work",
                        pytest=[str(tmp_path / "test_never.py")], cpu_only_pytest=[str(tmp_path / "test_never.py")],
                        cwd=tmp_path)
    assert result.accepted, result.problem
    assert result.problem == "import failed: ModuleNotFoundError: No module named 'brokenfront'"
    assert "Traceback" not in result.output and result.exit_code == 0, result.output
    assert result.returncode is None and result.outcomes == {}, "the suite must not run"
