"""The compat suite's ``@pytest.mark.isolated``: a test that aborts its interpreter fails alone.

Before it, one GSPMD callback raising inside jax (which aborts the process with SIGABRT) ended the
whole suite run: no outcome for that test or any after it. Here the suite's own conftest runs a
module whose first test calls ``os.abort()``; the test after it must still run and pass.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from jaxrel.cells.suites import DEFAULT_SUITE

MODULE = '''
import os
import pytest


@pytest.mark.isolated
def test_aborts():
    print("ValueError: what the callback raised", flush=True)
    os.abort()


@pytest.mark.isolated
def test_isolated_and_fine():
    assert os.environ.get("JAXREL_SUITE_ISOLATED_CHILD") == "1"


def test_after():
    assert True
'''


def run_suite_copy(tmp_path: Path, module: str) -> subprocess.CompletedProcess[str]:
    for name in ("conftest.py", "pytest.ini"):
        shutil.copy(DEFAULT_SUITE / name, tmp_path / name)
    (tmp_path / "test_isolation.py").write_text(module, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-c",
                           str(tmp_path / "pytest.ini"), str(tmp_path / "test_isolation.py")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)


def test_an_aborting_test_fails_alone_naming_the_signal_and_what_was_raised(tmp_path):
    done = run_suite_copy(tmp_path, MODULE)
    out = done.stdout
    assert done.returncode == 1, out[-3000:]
    assert "FAILED test_isolation.py::test_aborts" in out, out[-3000:]
    assert "AssertionError: the interpreter aborted (SIGABRT) after ValueError: what the callback raised" in out
    assert "PASSED test_isolation.py::test_isolated_and_fine" in out
    assert "PASSED test_isolation.py::test_after" in out


def test_without_the_marker_the_abort_ends_the_run(tmp_path):
    # the behaviour the marker exists for: no outcome for the test after the abort
    done = run_suite_copy(tmp_path, MODULE.replace("@pytest.mark.isolated\n", ""))
    assert done.returncode < 0 or "Fatal Python error: Aborted" in done.stderr
    assert "PASSED test_isolation.py::test_after" not in done.stdout


EARLY = '''
import pathlib
import time

import pytest

MARK = pathlib.Path(__file__).with_name("child-started")


def test_first_waits_for_the_child():
    for _ in range(1200):
        if MARK.exists():
            return
        time.sleep(0.05)
    pytest.fail("the isolated test's child had not started by the time the tests ahead of it ran")


@pytest.mark.isolated
def test_isolated_writes_the_mark():
    MARK.write_text("started")
'''


def test_the_child_starts_when_collection_ends_not_when_its_turn_comes(tmp_path):
    # its interpreter start and import overlap the tests ahead of it; the first test waits for its mark
    done = run_suite_copy(tmp_path, EARLY)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "PASSED test_isolation.py::test_first_waits_for_the_child" in done.stdout
    assert "PASSED test_isolation.py::test_isolated_writes_the_mark" in done.stdout
