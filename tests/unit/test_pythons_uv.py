"""Interpreters as uv finds them (``uv python find`` / ``uv python list``), with today's search as the fallback."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jaxrel.distributions import pythons

RUNNING = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _fake_uv(tmp_path: Path, find: str, listing: str, code: int = 0) -> str:
    """A ``uv`` that answers ``python find`` with ``find`` and ``python list`` with ``listing``."""
    script = tmp_path / "uv"
    script.write_text(f"#!/bin/sh\nif [ \"$2\" = find ]; then printf '%s\\n' {find!r}; exit {code}; fi\n"
                      f"printf '%s\\n' {listing!r}; exit {code}\n")
    script.chmod(0o755)
    return str(script)


@pytest.fixture(autouse=True)
def fresh_answers() -> Iterator[None]:
    """Each test asks anew: python_for and the PATH uv is given keep their answers for the process."""
    pythons.python_for.cache_clear()
    pythons._without_pyenv_shims.cache_clear()
    yield
    pythons.python_for.cache_clear()
    pythons._without_pyenv_shims.cache_clear()


@pytest.fixture
def linked(tmp_path: Path) -> str:
    """This interpreter under another path, as uv might report it."""
    link = tmp_path / "bin" / f"python{RUNNING}"
    link.parent.mkdir()
    link.symlink_to(sys.executable)
    return str(link)


def test_the_interpreter_uv_finds_is_the_one_used(tmp_path: Path, linked: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pythons, "find_uv", lambda: _fake_uv(tmp_path, linked, "[]"))
    assert pythons.python_for(RUNNING) == pythons.Python(RUNNING, linked)


def test_uv_is_asked_once_per_version(tmp_path: Path, linked: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compat run asks for a cell's interpreter several times per cell: uv and the probe run once."""
    asked = tmp_path / "asked"
    script = tmp_path / "uv"
    script.write_text(f"#!/bin/sh\necho \"$*\" >> {asked}\nprintf '%s\\n' {linked!r}\n")
    script.chmod(0o755)
    monkeypatch.setattr(pythons, "find_uv", lambda: str(script))
    assert {pythons.python_for(RUNNING) for _ in range(5)} == {pythons.Python(RUNNING, linked)}
    assert asked.read_text().splitlines() == [f"python find --no-config {RUNNING}"]


def test_uvs_list_is_read_at_its_boundary(tmp_path: Path, linked: str, monkeypatch: pytest.MonkeyPatch) -> None:
    listing = json.dumps([{"implementation": "cpython", "path": linked}, {"implementation": "pypy", "path": "/pypy"},
                          {"path": 5}, "garbage", {"implementation": "cpython"}])
    monkeypatch.setattr(pythons, "find_uv", lambda: _fake_uv(tmp_path, "", listing))
    assert pythons.uv_interpreters() == [linked]


@pytest.mark.parametrize(("find", "listing", "code"), [
    ("", "not json", 2),  # uv fails (a pyenv shim it cannot run, say)
    ("relative/python", "{\"a\": 1}", 0),  # answers that are not what uv promises
    ("/nonexistent/python3.99", "[]", 0),  # a path that does not run
])
def test_uv_failing_leaves_todays_search(find: str, listing: str, code: int, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pythons, "find_uv", lambda: _fake_uv(tmp_path, find, listing, code))
    pythons.all_pythons.cache_clear()
    try:
        assert pythons.python_for(RUNNING).executable == sys.executable
        assert pythons.uv_interpreters() == []
    finally:
        pythons.all_pythons.cache_clear()


def test_no_uv_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pythons, "find_uv", lambda: None)
    assert pythons.uv_find(RUNNING) is None and pythons.uv_interpreters() == []


def test_a_compiled_interpreters_answer_is_kept_while_its_file_is_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))
    asked: list[str] = []
    monkeypatch.setattr(pythons, "_probe", lambda executable: asked.append(executable) or "3.12")
    binary, script = tmp_path / "python3.12", tmp_path / "python3.12-script"
    binary.write_bytes(b"\x7fELF not really")
    script.write_bytes(b"#!/bin/sh\nexec python3.12 \"$@\"\n")
    link = tmp_path / "python3"
    link.symlink_to(binary)

    def run(*executables: Path) -> list[str | None]:
        probe = pythons._Probes()
        answers = [probe(str(e)) for e in executables]
        probe.save()
        return answers

    assert run(binary, script) == ["3.12", "3.12"] and asked == [str(binary), str(script)]
    assert run(binary, link, script) == ["3.12"] * 3
    assert asked[2:] == [str(script)], "the binary (and a link to it) kept; a script is always asked"
    binary.write_bytes(b"\x7fELF rebuilt")
    assert run(binary) == ["3.12"] and asked[3:] == [str(binary)], "a changed file is asked again"
    (tmp_path / "cache" / pythons.PROBES).write_text(json.dumps({str(binary): [1, 2, "3.12"], "x": "y"}))
    assert run(binary) == ["3.12"] and asked[4:] == [str(binary)], "a damaged entry is a miss"
    (tmp_path / "cache" / pythons.PROBES).write_text("not json")
    assert run(binary) == ["3.12"] and asked[5:] == [str(binary)]
    monkeypatch.setattr(pythons, "_probe", lambda executable: None)
    binary.write_bytes(b"\x7fELF broken")
    assert run(binary) == [None] and str(binary) in json.loads((tmp_path / "cache" / pythons.PROBES).read_text())
    assert run(binary) == [None], "a failure is not kept"


def test_the_search_leaves_out_the_shims_of_the_pyenv_it_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    assert pythons._pyenv_shim(str(tmp_path / "pyenv" / "shims" / "python3.12"))
    assert not pythons._pyenv_shim(str(tmp_path / "pyenv" / "versions" / "3.12.1" / "bin" / "python3.12"))
    assert not pythons._pyenv_shim(str(tmp_path / "other" / "shims" / "python3.12"))


@pytest.fixture
def pyenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pyenv root: this interpreter installed as version ``9.9.9``, selected (``pyenv version-name``), and a shim
    of this Python's ``python3.N`` that fails as pyenv's do for a version not selected, noting each run."""
    root = tmp_path / "pyenv"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "pyenv").write_text(f"#!/bin/sh\n[ \"$1\" = version-name ] && cat {root / 'selected'}\n")
    (root / "bin" / "pyenv").chmod(0o755)
    (root / "selected").write_text("9.9.9\n")
    (root / "versions" / "9.9.9" / "bin").mkdir(parents=True)
    (root / "versions" / "9.9.9" / "bin" / f"python{RUNNING}").symlink_to(sys.executable)
    (root / "shims").mkdir()
    shim = root / "shims" / f"python{RUNNING}"
    shim.write_text(f"#!/bin/sh\necho run >> {root / 'shim-runs'}\n"
                    f"echo 'pyenv: python{RUNNING}: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PYENV_ROOT", str(root))
    monkeypatch.setenv("PATH", os.pathsep.join([str(root / "shims"), "/usr/bin", "/bin"]))
    return root


def test_uv_sees_the_versions_pyenv_selected_in_place_of_its_shims(pyenv: Path) -> None:
    environment = pythons._uv_search_environment()
    assert environment["PATH"].split(os.pathsep) == [str(pyenv / "versions" / "9.9.9" / "bin"), "/usr/bin", "/bin"]
    assert environment["UV_PYTHON_DOWNLOADS"] == "never"
    (pyenv / "selected").write_text("system\n")  # shims run the next interpreter on PATH: none in their place
    pythons._without_pyenv_shims.cache_clear()
    assert pythons._uv_search_environment()["PATH"].split(os.pathsep) == ["/usr/bin", "/bin"]
    (pyenv / "selected").write_text("")  # pyenv cannot say (a version missing): the PATH stays as it is
    pythons._without_pyenv_shims.cache_clear()
    assert pythons._uv_search_environment()["PATH"] == os.environ["PATH"]


def test_uv_finds_the_selected_interpreter_without_running_a_failing_shim(
        pyenv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, ``uv python find`` ran the shim first, failed, and gave no answer (0.4 s on this machine kind)."""
    if pythons.find_uv() is None:
        pytest.skip("uv is not installed here: the test runs the real uv")
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX", "UV_PYTHON"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "no-managed-pythons"))
    monkeypatch.chdir(tmp_path)  # no project's .venv around
    found = pythons.uv_find(RUNNING)
    assert found is not None and Path(found).parent == pyenv / "versions" / "9.9.9" / "bin", found
    assert str(pyenv / "versions" / "9.9.9" / "bin" / f"python{RUNNING}") in pythons.uv_interpreters()
    assert not (pyenv / "shim-runs").exists(), "uv ran the failing shim"


def test_a_free_threaded_build_is_never_the_interpreter_of_a_plain_version(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A free-threaded CPython answers the probe with ``3.Nt`` (its wheels are ``cp3Nt``): listed first, as uv lists
    its ``+freethreaded`` builds, it is still passed over for ``3.N``; before, both answered ``3.N``."""
    def interpreter(name: str, answer: str) -> str:
        script = tmp_path / name
        script.write_text(f"#!/bin/sh\necho {answer}\n")  # a script: its answer is never kept
        script.chmod(0o755)
        return str(script)

    free_threaded, plain = interpreter("python3.99t", "3.99t"), interpreter("python3.99", "3.99")
    monkeypatch.setattr(pythons, "uv_interpreters", lambda: [free_threaded, plain])
    monkeypatch.setattr(pythons, "_own_candidates", lambda: [])
    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))
    pythons.all_pythons.cache_clear()
    try:
        found = pythons.find_pythons()
        assert found["3.99"] == pythons.Python("3.99", plain) and "3.99t" not in found
        assert found[RUNNING].executable == sys.executable
    finally:
        pythons.all_pythons.cache_clear()
    assert pythons._probe(sys.executable) == RUNNING, "this interpreter is a GIL build, and says so"
