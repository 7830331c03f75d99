"""``twine check --strict`` over many files in one process per worker: each file's verdict is the one twine gives
it alone (real twine), whatever stands beside it in the batch."""

from __future__ import annotations

import random
import zipfile
from pathlib import Path

import archive_kit as kit
import pytest

from jaxrel.release.verify import twine_check, twine_check_many

GOOD = kit.METADATA + b"Description-Content-Type: text/markdown\n\n# jax\n\nA readable description.\n"
LINT = kit.METADATA  # no long description: a lint the index does not enforce
BROKEN = kit.METADATA + b"Description-Content-Type: text/x-rst\n\n`unclosed\n\n.. broken:: directive\n   :x\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    made = {}
    for name, metadata in (("good", GOOD), ("lint", LINT), ("broken", BROKEN)):
        made[name] = kit.write(tmp_path / name, kit.FILENAME, kit.wheel_bytes(metadata))
    made["not-a-zip"] = kit.write(tmp_path / "not-a-zip", kit.FILENAME, b"not a zip at all")
    return made


def test_each_file_gets_the_verdict_twine_gives_it_alone(files: dict[str, Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAXREL_WORKERS", "1")  # one batch holding all four, the unreadable one among them
    together = twine_check_many(list(files.values()))
    alone = {path: twine_check(path) for path in files.values()}
    assert together == alone
    assert together[files["good"]] is None
    assert (together[files["lint"]] or "").startswith("warning: twine check --strict: `long_description")
    assert (together[files["broken"]] or "").startswith("twine check --strict:")
    assert "syntax errors in markup" in (together[files["broken"]] or "")
    assert together[files["not-a-zip"]] is not None and not together[files["not-a-zip"]].startswith("warning")


def test_shares_across_workers_give_the_same_verdicts(files: dict[str, Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAXREL_WORKERS", "3")
    spread = twine_check_many(list(files.values()))
    monkeypatch.setenv("JAXREL_WORKERS", "1")
    assert spread == twine_check_many(list(files.values()))


INVALID = kit.METADATA + b"Not-A-Field: 1\n\nbody\n"  # twine refuses unknown metadata fields
PAYLOAD = {"jax/_big.so": random.Random(0).randbytes(1 << 20),
           "jax/METADATA.py": b"# twine's search looks at this name too\n"}


@pytest.mark.parametrize(("metadata", "verdict"), [(GOOD, None), (LINT, "warning: twine check --strict: `long_"),
                                                   (BROKEN, "twine check --strict: "),
                                                   (INVALID, "twine check --strict: ")],
                         ids=["good", "lint", "broken", "invalid"])
def test_twine_is_given_the_metadata_alone_and_judges_it_as_it_judges_the_wheel(tmp_path: Path, metadata: bytes,
                                                                                verdict: str | None) -> None:
    """The wheel twine is given holds every member of the .dist-info and every name twine's METADATA search looks
    at, byte for byte, and nothing else; twine's verdict on it is its verdict on the whole wheel."""
    from jaxrel.release.verify import _twine_share, metadata_only

    real = kit.write(tmp_path / "real", kit.FILENAME, kit.wheel_bytes(metadata, extra=PAYLOAD))
    given = metadata_only(real, tmp_path / "given")
    assert given.name == real.name and given.stat().st_size < real.stat().st_size // 10
    with zipfile.ZipFile(real) as whole, zipfile.ZipFile(given) as part:
        kept = part.namelist()
        assert kept == [n for n in whole.namelist() if n.startswith(kit.DIST_INFO + "/") or "METADATA" in n]
        assert "jax/_big.so" not in kept and "jax/METADATA.py" in kept
        assert all(part.read(name) == whole.read(name) for name in kept)
    given_verdict = twine_check(real)
    assert given_verdict == _twine_share([real])[real]
    assert given_verdict is None if verdict is None else (given_verdict or "").startswith(verdict)
    if metadata is INVALID:  # named as twine names it, with the file asked about (not the one twine was given)
        assert "unrecognized or malformed field 'not-a-field'" in (given_verdict or "")
        assert f"Checking {real}:" in (given_verdict or "")


def test_what_is_not_a_readable_wheel_goes_to_twine_as_it_is(tmp_path: Path) -> None:
    from jaxrel.release.verify import metadata_only

    broken = kit.write(tmp_path, kit.FILENAME, b"PK\x03\x04 not really a zip")
    sdist = kit.write(tmp_path, "jax-0.9.9.tar.gz", kit.sdist_bytes())
    assert metadata_only(broken, tmp_path / "a") == broken and metadata_only(sdist, tmp_path / "b") == sdist
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
