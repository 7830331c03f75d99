"""The Bazel workspaces the tests build in: copies of the repository's sources.

- :func:`fresh_workspace`: a copy in a new directory, so a new output base; expunged after. What a clean build
  (the reproducibility tests) needs.
- :func:`kept_workspace`: a copy kept at a stable path in the machine's cache (``~/.cache/jaxrel-tests``, like
  uv's wheel cache). Bazel keys its output base by the workspace's path, so that output base stays built between
  test runs and between clones: a fixture's build there is Bazel's incremental build of whatever changed. Files
  are synced before each use (changed bytes rewritten, removed files removed), under a lock, so xdist workers and
  concurrent runs take turns.

One kept workspace per configuration: switching ``--config`` in one output base would rebuild each time.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jaxrel-tests"
KEPT = CACHE / "workspaces"


def source_files() -> list[str]:
    """The repository's source files, tracked or not, minus ignored ones (relative paths)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    return [relative for relative in listed if relative and (REPO / relative).is_file()]


def _link_tools(into: Path) -> None:
    """The workspace's ``build/tools`` (bazelisk) is the repository's."""
    tools = into / "build" / "tools"
    tools.parent.mkdir(exist_ok=True)
    if tools.is_symlink() and os.readlink(tools) == str(REPO / "build" / "tools"):
        return
    if tools.is_symlink() or tools.exists():
        tools.unlink()
    tools.symlink_to(REPO / "build" / "tools")


def copy_workspace(into: Path) -> Path:
    """The repository's source files under ``into``."""
    for relative in source_files():
        (into / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / relative, into / relative)
    _link_tools(into)
    return into


def _sync(into: Path) -> None:
    """Make ``into`` hold exactly the repository's source files (plus its ``build/``): rewrite what differs."""
    wanted = set(source_files())
    for relative in wanted:
        source, target = REPO / relative, into / relative
        data = source.read_bytes()
        if target.is_file() and not target.is_symlink() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    for folder, directories, files in os.walk(into):
        here = Path(folder)
        if here == into:
            directories[:] = [d for d in directories if d != "build" and not d.startswith("bazel-")]
            files = [f for f in files if not f.startswith("bazel-")]
        for name in files:
            if str((here / name).relative_to(into)) not in wanted:
                (here / name).unlink()
    _link_tools(into)


@contextmanager
def kept_workspace(name: str) -> Iterator[Path]:
    """The kept workspace ``name``, synced, held exclusively while the caller builds in it."""
    KEPT.mkdir(parents=True, exist_ok=True)
    root = KEPT / name
    root.mkdir(exist_ok=True)
    with open(KEPT / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            _sync(root)
            yield root
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def fresh_workspace(launcher: list[str], into: Path) -> Iterator[Path]:
    """A copy under ``into`` with its own output base, expunged after."""
    copy = copy_workspace(into)
    try:
        yield copy
    finally:
        subprocess.run([*launcher, "clean", "--expunge"], cwd=copy, capture_output=True)


def shut_down_kept(launcher: list[str]) -> None:
    """Stop the Bazel servers of the kept workspaces no one is building in now (no daemon outlives a test run:
    a workspace in use is left to whoever holds it, whose own session end stops it)."""
    if not KEPT.is_dir():
        return
    for root in sorted(p for p in KEPT.iterdir() if p.is_dir() and (p / "WORKSPACE").is_file()):
        with open(KEPT / f"{root.name}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            subprocess.run([*launcher, "shutdown"], cwd=root, capture_output=True, timeout=120)
