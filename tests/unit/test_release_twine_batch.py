"""``twine check --strict`` over many files in one process per worker: each file's verdict is the one twine gives
it alone (real twine), whatever stands beside it in the batch."""

from __future__ import annotations

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
