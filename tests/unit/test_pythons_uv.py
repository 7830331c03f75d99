"""Interpreters as uv finds them (``uv python find`` / ``uv python list``), with today's search as the fallback."""

from __future__ import annotations

import json
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
    """Each test asks anew: python_for keeps its answers for the process."""
    pythons.python_for.cache_clear()
    yield
    pythons.python_for.cache_clear()


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
    pythons.find_pythons.cache_clear()
    try:
        assert pythons.python_for(RUNNING).executable == sys.executable
        assert pythons.uv_interpreters() == []
    finally:
        pythons.find_pythons.cache_clear()


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
