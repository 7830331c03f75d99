"""All-or-nothing writes (jaxrel._util.atomic): a failure or an interruption between renames puts
every original back, and a file that did not exist is removed again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxrel._util import atomic


def test_writes_every_file_and_keeps_permissions(tmp_path: Path) -> None:
    first, second = tmp_path / "a.py", tmp_path / "new" / "b.py"
    first.write_text("old\r\n")
    first.chmod(0o640)
    atomic.write_all_atomically({first: "new\r\n", second: "made"})
    assert atomic.read_exactly(first) == "new\r\n" and second.read_text() == "made"
    assert first.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "new"], "no staging or backup file left"


@pytest.mark.parametrize("failure", [OSError("disk full"), KeyboardInterrupt()])
def test_a_failure_between_renames_restores_every_original(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            failure: BaseException) -> None:
    files = {tmp_path / f"{name}.py": f"{name} old\n" for name in "abc"}
    for path, text in files.items():
        path.write_text(text)
    created = tmp_path / "d.py"
    real_replace, calls = os.replace, []

    def replace_then_fail(source: str, target: str | Path) -> None:
        calls.append(target)
        if len(calls) == 3:
            raise failure
        real_replace(source, target)

    monkeypatch.setattr(atomic.os, "replace", replace_then_fail)
    with pytest.raises(type(failure)):
        atomic.write_all_atomically({**{p: "new\n" for p in files}, created: "new\n"})
    monkeypatch.setattr(atomic.os, "replace", real_replace)
    assert {p: p.read_text() for p in files} == files
    assert not created.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py", "c.py"]


def test_a_failure_while_staging_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {tmp_path / "ok.py": "old", tmp_path / "locked.py": "old"}
    for path, text in files.items():
        path.write_text(text)
    real_stage = atomic._stage

    def stage(path: Path, data: bytes) -> str:
        if path.name == "locked.py":
            raise PermissionError(13, "Permission denied", str(path))
        return real_stage(path, data)

    monkeypatch.setattr(atomic, "_stage", stage)
    with pytest.raises(PermissionError):
        atomic.write_all_atomically({path: "new" for path in files})
    assert {p: p.read_text() for p in files} == files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locked.py", "ok.py"], "the staged file is removed"


def test_new_files_get_the_permissions_open_gives_them(tmp_path: Path) -> None:
    """Not mkstemp's 0600: a wheel or a report that only its writer could read would not serve anyone else."""
    reference = tmp_path / "plain"
    reference.write_text("x")
    wanted = reference.stat().st_mode & 0o777
    source = tmp_path / "source.whl"
    source.write_bytes(b"wheel")
    source.chmod(0o600)
    (tmp_path / "out").mkdir()
    made = [atomic.copy_atomically(source, tmp_path / "out"), tmp_path / "t.txt", tmp_path / "b.bin"]
    atomic.write_all_atomically({made[1]: "text"})
    atomic.write_bytes_atomically(made[2], b"bytes")
    assert {path.name: path.stat().st_mode & 0o777 for path in made} == {path.name: wanted for path in made}


def test_new_file_mode_follows_the_umask(tmp_path: Path) -> None:
    script = ("import os, sys; os.umask(0o027); from pathlib import Path; from jaxrel._util import atomic; "
              "atomic.write_bytes_atomically(Path(sys.argv[1]), b'x')")
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "f")], check=True, timeout=60)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o640
