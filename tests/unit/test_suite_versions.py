"""The compat suite judges a version as PEP 440 orders it: on a pre-release of X, what X documents is due, not required.

Replaying jax's main line, the night its version moved from ``0.6.3.dev…`` to ``0.7.0.dev…`` two tests turned red:
"jax.extend.ffi.ffi_call still works in jax 0.7.0.dev…, documented as removed in 0.7.0". No commit changed that API;
the version string moved. Here the suite's own conftest runs against a stand-in ``jax`` that is only a version file
(what the suite's markers read), once as a dev build of the removing release and once as the release itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jaxrel import gating
from jaxrel.cells.suites import DEFAULT_SUITE

MODULE = '''
import pytest

OLD_NAME_WORKS = {old_works}


@pytest.mark.needs("jax.old_api", until="0.7.0", replaced_by="jax.new_api")
def test_removal(removed, request):
    assert removed is not None, "the installed jax is at or past 0.7.0's release number"
    if OLD_NAME_WORKS:
        removed.still_works(request.node)
    else:
        removed.gone(request.node)


@pytest.mark.needs("jax.new_api", jax="0.7.0")
def test_added_in_0_7_0():
    raise AttributeError("module 'jax' has no attribute 'new_api'")
'''


def run_suite(tmp_path: Path, jax_version: str, *, old_works: bool) -> tuple[subprocess.CompletedProcess[str], dict]:
    site = tmp_path / "site"
    (site / "jax").mkdir(parents=True)
    (site / "jax" / "__init__.py").write_text("")
    (site / "jax" / "version.py").write_text(f'_version = "{jax_version}"\n')
    for name in ("conftest.py", "pytest.ini"):
        shutil.copy(DEFAULT_SUITE / name, tmp_path / name)
    (tmp_path / "test_versions.py").write_text(MODULE.format(old_works=old_works), encoding="utf-8")
    record = tmp_path / "record"
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not an xdist worker's
    env = {**inherited, "PYTHONPATH": os.pathsep.join([str(site), *sys.path]), "JAXREL_CELL_RECORD": str(record)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "jaxrel.cells.pytest_plugin",
                           "-rA", "-c", str(tmp_path / "pytest.ini"), str(tmp_path / "test_versions.py")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    return done, json.loads((record / "main.json").read_text())


@pytest.mark.parametrize(("version", "release", "before"), [
    ("0.7.0.dev20250625+g85193bdcb0", "0.7.0", True), ("0.7.0rc1", "0.7", True), ("0.7.0a1.post1", "0.7.0", True),
    ("0.7.0", "0.7.0", False), ("0.7.0.post1.dev2", "0.7.0", False), ("0.7.0+local", "0.7.0", False),
    ("0.6.3.dev1", "0.7.0", False), ("0.7.0.1.dev1", "0.7.0", False),
])
def test_pre_release_of_orders_as_packaging_does(version, release, before):
    from packaging.version import Version

    assert gating.pre_release_of(version, release) is before
    assert before == (Version(version) < Version(release) == Version(Version(version).base_version))


def test_pre_release_of_refuses_a_word():
    with pytest.raises(ValueError, match="not a PEP 440 version"):
        gating.pre_release_of("latest", "0.7.0")


def test_a_due_removal_still_present_on_a_dev_build_is_a_note_not_a_failure(tmp_path):
    done, record = run_suite(tmp_path, "0.7.0.dev20250625+g85193bdcb0", old_works=True)
    assert done.returncode == 0, done.stdout[-3000:]
    removal = "test_versions.py::test_removal"
    assert record["outcomes"][removal]["outcome"] == "passed"
    note = record["properties"][removal]["note"]
    assert note.startswith("jax.old_api removed in 0.7.0: still present in 0.7.0.dev20250625+g85193bdcb0"), note
    assert "api_state" not in record["properties"][removal]  # the atlas reads it as working there
    # a need met only by the dev build: a failure there is a skip with the note, not a failure
    added = record["outcomes"]["test_versions.py::test_added_in_0_7_0"]
    assert added["outcome"] == "skipped", added
    assert "documented from jax 0.7.0; 0.7.0.dev20250625+g85193bdcb0 is a pre-release of it" in added["message"]
    assert "has no attribute 'new_api'" in added["message"]
    assert record["properties"]["test_versions.py::test_added_in_0_7_0"]["note"] == added["message"]


def test_a_due_removal_that_landed_is_recorded_as_removed(tmp_path):
    done, record = run_suite(tmp_path, "0.7.0rc1", old_works=False)
    assert done.returncode == 0, done.stdout[-3000:]
    assert record["properties"]["test_versions.py::test_removal"]["api_state"] == "removed in 0.7.0 → use jax.new_api"


def test_on_the_release_itself_both_are_required(tmp_path):
    done, record = run_suite(tmp_path, "0.7.0", old_works=True)
    assert done.returncode == 1, done.stdout[-3000:]
    removal = record["outcomes"]["test_versions.py::test_removal"]
    assert removal["outcome"] == "failed"
    assert ("jax.old_api still works in jax 0.7.0, documented as removed in 0.7.0 → use jax.new_api"
            in removal["message"])
    assert record["outcomes"]["test_versions.py::test_added_in_0_7_0"]["outcome"] == "failed"
