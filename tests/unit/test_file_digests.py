"""sha256_of keeps large files' answers from run to run (``digests.json`` in jaxrel's cache), and never uses one for
a file that changed, for another path, or from a damaged or forged cache."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from jaxrel._util import files
from jaxrel._util.kept import KeptAnswers

LARGE = files.KEEP_FROM_SIZE + 1


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of its own, this process's answers forgotten, and the clock ten seconds on (so every file is old
    enough to be remembered)."""
    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "cache"))
    new_run(monkeypatch)
    later = time.time_ns() + 10 * 10**9
    monkeypatch.setattr(files, "time", SimpleNamespace(time_ns=lambda: later))
    return tmp_path / "cache" / files.DIGESTS


def new_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a new process starts with: no answer in memory, the kept ones read again."""
    monkeypatch.setattr(files, "_HASHED", {})
    monkeypatch.setattr(files, "_KEPT", KeptAnswers(lambda: files.cache_root() / files.DIGESTS))


def no_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> None:
        raise AssertionError("the file was read again")
    monkeypatch.setattr(files, "hashlib", SimpleNamespace(sha256=refuse))


def test_a_large_files_answer_is_kept_and_used_by_the_next_run(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = tmp_path / "big.whl"
    wheel.write_bytes(b"w" * LARGE)
    expected = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert files.sha256_of(wheel) == expected
    kept = json.loads(cache.read_text())
    assert kept[os.path.realpath(wheel)][-1] == expected
    new_run(monkeypatch)
    no_hashing(monkeypatch)
    assert files.sha256_of(wheel) == expected
    link = tmp_path / "link.whl"
    link.symlink_to(wheel)
    assert files.sha256_of(link) == expected, "the same file by another name: answered from this run's memory"


def test_a_changed_file_is_hashed_again_by_the_next_run(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = tmp_path / "big.whl"
    wheel.write_bytes(b"a" * LARGE)
    first = files.sha256_of(wheel)
    before = wheel.stat()
    with open(wheel, "r+b") as handle:  # same size, then the old modification time put back
        handle.write(b"b")
    os.utime(wheel, ns=(before.st_atime_ns, before.st_mtime_ns))
    new_run(monkeypatch)
    changed = files.sha256_of(wheel)
    assert changed != first and changed == hashlib.sha256(wheel.read_bytes()).hexdigest()


def test_a_forged_or_damaged_cache_is_a_miss(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = tmp_path / "big.whl"
    wheel.write_bytes(b"f" * LARGE)
    expected = hashlib.sha256(wheel.read_bytes()).hexdigest()
    status = wheel.stat()
    identity = [status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns]
    real = os.path.realpath(wheel)
    cache.parent.mkdir(parents=True)
    for forged in ({real: [*identity, "0" * 64][1:]},  # a number missing
                   {real: [*identity, "not a digest"]},
                   {real: [*identity[:-1], identity[-1] + 1, "0" * 64]},  # another status change time
                   {str(tmp_path / "other.whl"): [*identity, "0" * 64]},  # another path
                   [[*identity, "0" * 64]]):
        cache.write_text(json.dumps(forged))
        new_run(monkeypatch)
        assert files.sha256_of(wheel) == expected, forged
    cache.write_text("{not json")
    new_run(monkeypatch)
    assert files.sha256_of(wheel) == expected
    assert json.loads(cache.read_text())[real][-1] == expected, "the damaged cache was replaced"


def test_small_files_are_not_kept_and_the_newest_are(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = tmp_path / "small.py"
    small.write_bytes(b"s" * (files.KEEP_FROM_SIZE - 1))
    files.sha256_of(small)
    assert not cache.exists()
    monkeypatch.setattr(files, "KEEP_AT_MOST", 2)
    wheels = [tmp_path / f"{n}.whl" for n in range(3)]
    for n, wheel in enumerate(wheels):
        wheel.write_bytes(bytes([n]) * LARGE)
        files.sha256_of(wheel)
    assert sorted(json.loads(cache.read_text())) == sorted(os.path.realpath(w) for w in wheels[1:])


def test_a_cache_that_cannot_be_written_still_answers(tmp_path: Path, cache: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("JAXREL_CACHE_DIR", str(tmp_path / "a-file"))  # not a directory
    wheel = tmp_path / "big.whl"
    wheel.write_bytes(b"r" * LARGE)
    assert files.sha256_of(wheel) == hashlib.sha256(wheel.read_bytes()).hexdigest()
