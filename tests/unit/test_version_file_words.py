"""A word where a version belongs, in a version file: every reader refuses it in one line (exit 2) naming the
file, the field and the value. Readers: gates and doctor on a tree of the built-in jax profile, the frontend
probe compat runs on a built sdist, and the release verbs (tests/unit/test_fuzz_release.py fuzzes those)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from jaxrel import policy
from jaxrel.cells.frontend import frontend_spec
from jaxrel.cli import main
from jaxrel.distributions.wheels import inspect
from jaxrel.family import resolve_family

VERSION_PY = '_version = "0.4.30"\n_minimum_jaxlib_version = "latest"\n'


def jax_tree(root: Path) -> Path:
    (root / "jax").mkdir(parents=True)
    (root / "jax" / "version.py").write_text(VERSION_PY)
    (root / "jax" / "__init__.py").write_text("from jax._src.lib import jaxlib_extension_version\n"
                                              "if jaxlib_extension_version >= 5:\n    pass\n")
    (root / "jaxlib").mkdir()
    (root / "jaxlib" / "__init__.py").write_text("")
    (root / "jaxlib" / "version.py").write_text('_version = "0.4.30"\n')
    return root


def refused(err: str, file: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert file in lines[0] and "_minimum_jaxlib_version = 'latest'" in lines[0], lines[0]
    assert "is not a PEP 440 version" in lines[0] and "correct it in" in lines[0], lines[0]


def test_gates_names_the_file_the_field_and_the_word(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = jax_tree(tmp_path / "src")
    assert main(["gates", str(tree / "jax")]) == 2
    refused(capsys.readouterr().err, str(tree / "jax" / "version.py"))


def test_doctor_names_the_file_the_field_and_the_word(tmp_path: Path) -> None:
    tree = jax_tree(tmp_path / "src")  # importable from PYTHONPATH: a source install of the jax profile
    done = subprocess.run([sys.executable, "-m", "jaxrel", "doctor", "--python", sys.executable], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(tree)})
    assert done.returncode == 2, done.stderr
    refused(done.stderr, str(tree / "jax" / "version.py"))


def test_the_frontend_probe_of_a_built_sdist_names_the_file_the_field_and_the_word(tmp_path: Path) -> None:
    sdist = tmp_path / "jax-0.4.30.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name, text in (("PKG-INFO", "Metadata-Version: 2.1\nName: jax\nVersion: 0.4.30\n"),
                           ("jax/version.py", VERSION_PY)):
            data = text.encode()
            member = tarfile.TarInfo(f"jax-0.4.30/{name}")
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    family = resolve_family("jax")
    with pytest.raises(policy.VersionError) as error:
        frontend_spec(family, inspect(sdist, family, use_cache=False), "source jax")
    refused(str(error.value), "jax-0.4.30.tar.gz: jax/version.py")
