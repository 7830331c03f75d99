"""Generative fuzz of the local boundaries: mutated project configuration, ``~/.pypirc``,
``manifest.json``, ``WORKSPACE`` and ``--matrix`` JSON through the CLI verbs that read them, in process.

The property for every example: the exit code is 0, 1, 2 or 3 (never 70), no traceback on stderr,
the run ends within the deadline (:data:`fuzzing.DEADLINE`), and no file changes outside the
declared output (every verb here is read-only or a dry run). CI runs a bounded count; ``nox -s fuzz``
runs the ``fuzz`` profile.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
import tomlkit
from fuzzing import (
    SCALARS_JSON,
    SCALARS_TOML,
    assert_handled,
    damaged_bytes,
    digests,
    fuzz_settings,
    json_texts,
    mutated,
    run_cli,
    values,
)
from hypothesis import given, reject
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
SPLITFAM = REPO / "tests" / "data" / "splitfam"
GATES_TREE = REPO / "tests" / "data" / "gates_tree"
DEAD_INDEX = "http://127.0.0.1:9/simple/"  # the discard port: refused at once, nothing leaves the machine
BASE = tomllib.loads((SPLITFAM / "pyproject.toml").read_text())


def _toml(data: object) -> bytes:
    try:
        return tomlkit.dumps(data).encode("utf-8", "surrogatepass")  # type: ignore[arg-type]
    except Exception:  # a value TOML cannot hold (tomlkit says so in its own ways)
        reject()
        raise


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz") / "splitfam"
    shutil.copytree(SPLITFAM, root)
    return root


def _project_runs(capsys: pytest.CaptureFixture[str], project: Path, text: bytes) -> None:
    pyproject = project / "pyproject.toml"
    pyproject.write_bytes(text)
    before = digests(project, GATES_TREE, skip=[pyproject])
    for argv in (["verdict", "splitfam-core==0.1.0", "--family", str(pyproject)],
                 ["gates", str(GATES_TREE), "--family", str(pyproject)],
                 ["release", "plan", "--project", str(project), "--index-url", DEAD_INDEX],
                 ["release", "check", str(project), "--index-url", DEAD_INDEX],
                 ["release", "bump", "0.2.0", "--project", str(project), "--dry-run"]):
        code, _, err = run_cli(capsys, argv)
        assert_handled(argv, code, err)
    assert digests(project, GATES_TREE, skip=[pyproject]) == before


@fuzz_settings(25)
@given(data=mutated({"tool": {"jaxrel": {k: v for k, v in BASE["tool"]["jaxrel"].items() if k != "release"}}},
                    SCALARS_TOML))
def test_fuzz_family_tables(data: object, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[tool] / [tool.jaxrel] and its tables of the wrong types and shapes."""
    _project_runs(capsys, project, _toml(data))


@fuzz_settings(25)
@given(data=mutated(BASE["tool"]["jaxrel"]["release"], SCALARS_TOML))
def test_fuzz_release_tables(data: object, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[tool.jaxrel.release]: tag templates, components, paths, version locations of any shape."""
    document = {"tool": {"jaxrel": {**{k: v for k, v in BASE["tool"]["jaxrel"].items() if k != "release"},
                                    "release": data}}}
    _project_runs(capsys, project, _toml(document))


@fuzz_settings(15)
@given(text=damaged_bytes((SPLITFAM / "pyproject.toml").read_bytes()))
def test_fuzz_pyproject_bytes(text: bytes, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The project's pyproject.toml damaged byte by byte: not UTF-8, not TOML, nested deep."""
    _project_runs(capsys, project, text)


FRONTEND = tomllib.loads((SPLITFAM / "frontend" / "pyproject.toml").read_text())


@fuzz_settings(20)
@given(data=mutated(FRONTEND["project"], SCALARS_TOML))
def test_fuzz_component_project_table(data: object, project: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A component's [project] table (dependencies, extras) through release check and bump."""
    component = project / "frontend" / "pyproject.toml"
    original = component.read_bytes()
    (project / "pyproject.toml").write_bytes((SPLITFAM / "pyproject.toml").read_bytes())
    component.write_bytes(_toml({**FRONTEND, "project": data}))
    before = digests(project, skip=[component])
    try:
        for argv in (["release", "check", str(project), "--index-url", DEAD_INDEX],
                     ["release", "bump", "0.2.0", "--project", str(project), "--dry-run"]):
            code, _, err = run_cli(capsys, argv)
            assert_handled(argv, code, err)
        assert digests(project, skip=[component]) == before
    finally:
        component.write_bytes(original)


PYPIRC = b"[distutils]\nindex-servers = private\n[private]\nrepository = http://127.0.0.1:9/legacy/\nusername = u\n"


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory without a manifest: publish reads ~/.pypirc first, then refuses the directory."""
    found = tmp_path_factory.mktemp("dist")
    (found / "x-0.1.0-py3-none-any.whl").write_bytes(b"x")
    return found


@fuzz_settings(25)
@given(text=st.one_of(damaged_bytes(PYPIRC), st.binary(max_size=64),
                      st.lists(st.sampled_from([b"[private]", b"[private", b"repository = http://x/", b"= x",
                                                b"repository: ftp://x", b"\xe9", b"[distutils]", b"  continued",
                                                b"password = p", b"%(x)s"]), max_size=8).map(b"\n".join)))
def test_fuzz_pypirc(text: bytes, dist: Path, tmp_path_factory: pytest.TempPathFactory,
                     capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    (home / ".pypirc").write_bytes(text)
    monkeypatch.setenv("HOME", str(home))
    before = digests(home, dist)
    argv = ["release", "publish", str(dist), "--project", str(SPLITFAM), "--repository", "private", "--dry-run"]
    code, _, err = run_cli(capsys, argv)
    assert_handled(argv, code, err)
    assert digests(home, dist) == before


MANIFEST = {"schema": 1, "family": "splitfam", "version": "0.1.0", "tag": "v0.1.0", "commit": None, "artifacts": [
    {"file": "x-0.1.0-py3-none-any.whl", "distribution": "x", "version": "0.1.0", "role": "frontend",
     "kind": "wheel", "sha256": "0" * 64, "size": 1}]}


@fuzz_settings(30)
@given(text=st.one_of(json_texts(mutated(MANIFEST, SCALARS_JSON)), damaged_bytes(json.dumps(MANIFEST).encode())))
def test_fuzz_manifest(text: bytes, dist: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (dist / "manifest.json").write_bytes(text)
    before = digests(dist)
    argv = ["release", "verify", str(dist), "--project", str(SPLITFAM)]
    code, _, err = run_cli(capsys, argv)
    assert_handled(argv, code, err)
    assert digests(dist) == before


WORKSPACE = (REPO / "WORKSPACE").read_bytes()
FIELDS = [b"commit", b"backend", b"backend_version", b"wheel", b"sha256", b"name"]


@st.composite
def workspaces(draw: st.DrawFn) -> bytes:
    """The real WORKSPACE with a field's value replaced, a field set twice, or bytes damaged."""
    text = WORKSPACE
    kind = draw(st.sampled_from(["value", "twice", "bytes"]))
    if kind == "bytes":
        return draw(damaged_bytes(text))
    field = draw(st.sampled_from(FIELDS))
    start = text.index(b"xla_ffi(\n")
    at = text.index(field + b" = ", start)
    end = text.index(b"\n", at)
    value = draw(st.one_of(st.sampled_from([s.encode("utf-8", "surrogatepass") for s in
                                            ["'x'", '"' + "A" * 64 + '"', '"../../x.whl"', "None", "1", '"a" + "b"',
                                             '"""x"""', "f'x'", '"\\n"', '"' + "9" * 5000 + '"']]),
                           st.binary(max_size=12)))
    line = field + b" = " + value + b","
    if kind == "twice":
        return text[:end + 1] + b"    " + line + b"\n" + text[end + 1:]
    return text[:at] + line + text[end:]


@fuzz_settings(30)
@given(text=workspaces())
def test_fuzz_workspace(text: bytes, tmp_path_factory: pytest.TempPathFactory,
                        capsys: pytest.CaptureFixture[str]) -> None:
    workspace = tmp_path_factory.mktemp("ws") / "WORKSPACE"
    workspace.write_bytes(text)
    for argv in (["xla", "show", "--workspace", str(workspace)],
                 ["xla", "pin", "--jaxlib", "0.10.2", "--workspace", str(workspace), "--index-url", DEAD_INDEX]):
        code, _, err = run_cli(capsys, argv)
        assert_handled(argv, code, err)
        assert workspace.read_bytes() == text  # the index is not reached: nothing is written


MATRIX = {"cells": [{"id": "py3.11-jaxlib0.10.2", "backend": "0.10.2", "expected": "accepted"},
                    {"id": "py3.11-jaxlib0.4.30", "backend": "0.4.30", "expected": "refused"}]}


@fuzz_settings(25)
@given(text=st.one_of(json_texts(mutated(MATRIX, SCALARS_JSON)), json_texts(mutated({"matrix": MATRIX}, SCALARS_JSON)),
                      damaged_bytes(json.dumps(MATRIX).encode()), json_texts(values(SCALARS_JSON))))
def test_fuzz_matrix_json(text: bytes, tmp_path_factory: pytest.TempPathFactory,
                          capsys: pytest.CaptureFixture[str]) -> None:
    matrix = tmp_path_factory.mktemp("m") / "matrix.json"
    matrix.write_bytes(text)
    before = digests(GATES_TREE)
    argv = ["gates", str(GATES_TREE), "--matrix", str(matrix)]
    code, _, err = run_cli(capsys, argv)
    assert_handled(argv, code, err)
    assert digests(GATES_TREE) == before
