"""Running one ``jaxrel`` command in process for the boundary tests: exit code, stdout, stderr, and a
guard that fails the test (instead of hanging the suite) when a command runs past a deadline."""

from __future__ import annotations

import hashlib
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from jaxrel.cli import main

HANG = 60  # seconds after which a command counts as hung (every network deadline in these tests is 2 s)
NOISE = ("warning:", "listing ", "downloading ")


class Hung(BaseException):
    """A command ran past :data:`HANG` (not an ``Exception``: the command line must not catch it)."""


def _hung(signum: int, frame: object) -> None:
    raise Hung(f"no answer within {HANG} s")


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
    previous = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(HANG)
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse
        code = int(exit_.code or 0)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
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
