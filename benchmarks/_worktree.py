"""Another revision of this repository beside the checkout, for benchmarks that time both in turn."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def worktree(revision: str, where: Path) -> Iterator[Path]:
    """``revision`` checked out with ``git worktree`` at ``where`` (one left there by a run that was killed is
    replaced), removed again afterwards."""
    if where.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], capture_output=True)
    where.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), revision],
                   check=True, capture_output=True)
    try:
        yield where
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], capture_output=True)
