"""Running one ``jaxrel`` command in process for the boundary tests: exit code, stdout, stderr, and a
guard that fails the test (instead of hanging the suite) when a command runs past a deadline."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_deadline import run_main

HANG = 60  # seconds after which a command counts as hung (every network deadline in these tests is 2 s)
NOISE = ("warning:", "listing ", "downloading ")




@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if not line.startswith(NOISE) and ": warning: " not in line]

    def one_line_error(self, code: int, *names: str) -> str:
        """Assert exit ``code``, exactly one stderr line naming each of ``names``, no traceback; the line."""
        assert self.code == code, f"exit {self.code}, expected {code}; stderr: {self.err[-800:]}"
        assert "Traceback" not in self.err and "internal error" not in self.err, self.err[-800:]
        lines = self.error_lines
        assert len(lines) == 1, f"stderr is not one line: {self.err[-800:]}"
        assert len(lines[0]) < 800, f"an unreadably long message ({len(lines[0])} characters)"
        for name in names:
            assert name in lines[0], f"{name!r} not named in: {lines[0]}"
        return lines[0]


def run(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> Ran:
    """``jaxrel argv`` in process, under the hang guard."""
    capsys.readouterr()
    code = run_main(argv, HANG)
    out, err = capsys.readouterr()
    return Ran(code, out, err)


def tree_digests(root: Path, skip: Path | None = None) -> dict[str, str]:
    """Every file under ``root`` (except under ``skip``) and its sha256; directories as ``dir``."""
    found = {}
    for path in sorted(root.rglob("*")):
        if skip is not None and (path == skip or skip in path.parents):
            continue
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            found[str(path)] = "other"
        elif path.is_dir():
            found[str(path)] = "dir"
        else:
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found
