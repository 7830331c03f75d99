"""A git history of the splitfam sample family to bisect: 44 commits, a merge, a revision that does not
build, a flaky test, and one commit that calls an API only the newer core has, left ungated.

Every commit after the template's has a fixed author and date. Bisected between ``v0.2.0`` and the
merged ``side`` branch (good) and ``HEAD`` (bad), the range is a chain of 34 commits whose exact
middle, the 17th, is the revision that does not build: ``git bisect`` picks it first whatever the
hashes are (an even range has one best halfway point; an odd one two, and git's choice between
them depends on the hashes, which the template's files change).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from splitfam_support import set_frontend_version

# Fails once, on its Nth run (N = $SPLITFAM_FLAKY_RUN) at a revision without splitfam.mul (a good one),
# counted in the directory $SPLITFAM_FLAKY outside the tree (both set with --env); passes every other
# time. With N one more than the good endpoints checked first, the first bisection step before the
# ungated commit that runs it sees it fail once and pass on the rerun: the flaky step.
FLAKY_TEST = '''"""Fails once: on its Nth run ($SPLITFAM_FLAKY_RUN) before splitfam.mul, counted in $SPLITFAM_FLAKY."""

import os
from pathlib import Path

import splitfam


def test_sometimes():
    counter = Path(os.environ.get("SPLITFAM_FLAKY", "/nonexistent")) / "runs"
    if not counter.parent.is_dir() or hasattr(splitfam, "mul"):
        return
    runs = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(runs))
    assert runs != int(os.environ.get("SPLITFAM_FLAKY_RUN", "0")), "the flaky test fails on this run"
'''
MUL = '''

def mul(a, b):
    """``a * b``: needs splitfam-core 0.2.0 (API number 2), and does not check for it."""
    return splitfam_core.mul(a, b)
'''
TEST_MUL = "\n\ndef test_mul():\n    assert splitfam.mul(6, 7) == 42\n"
CULPRIT_SUBJECT = "Add splitfam.mul, computed by the core"
BROKEN_SUBJECT = "pyproject: reorder the build requirements"


@dataclass
class History:
    """The repository and the commits a test names."""

    repo: Path
    good: str  # the tag of the good endpoint
    culprit: str = ""
    broken: str = ""  # the revision that does not build
    merge: str = ""
    commits: list[str] = field(default_factory=list)  # every commit after the good one, oldest first


def _git(repo: Path, *args: str, when: int = 0) -> str:
    date = f"{1735689600 + when * 3600} +0000"  # 2025-01-01, an hour per commit
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env)
    return done.stdout.strip()


class _Writer:
    def __init__(self, history: History) -> None:
        self.history, self.repo, self.clock = history, history.repo, 0

    def commit(self, message: str, files: dict[str, str]) -> str:
        for relative, text in files.items():
            path = self.repo / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.clock += 1
        _git(self.repo, "add", "-A", when=self.clock)
        _git(self.repo, "commit", "-q", "-m", message, when=self.clock)
        head = _git(self.repo, "rev-parse", "HEAD")
        self.history.commits.append(head)
        return head

    def note(self, number: int, where: str = "notes") -> str:
        """A harmless change to the frontend's package (a new wheel, the same behaviour)."""
        path = self.repo / "frontend" / "splitfam" / f"{where}.py"
        before = path.read_text() if path.exists() else '"""Release notes kept in code (a test fixture)."""\n'
        return self.commit(f"{where}: entry {number}", {str(path.relative_to(self.repo)):
                                                        before + f"ENTRY_{number} = {number}\n"})


def make_history(repo: Path) -> History:
    """On a fresh splitfam repository (:func:`splitfam_support.make_splitfam`): splitfam 0.2.0 (cores 0.1.0 to
    0.2.0) tagged ``v0.2.0`` as the good revision, then 44 commits; HEAD is the bad one."""
    set_frontend_version(repo, "0.2.0", "0.1.0")
    (repo / "frontend" / "tests" / "test_flaky.py").write_text(FLAKY_TEST)
    _git(repo, "add", "-A", when=0)
    _git(repo, "commit", "-q", "-m", "splitfam 0.2.0", when=0)
    _git(repo, "tag", "v0.2.0")
    history = History(repo, "v0.2.0")
    write = _Writer(history)
    for number in range(1, 7):
        write.note(number)
    _git(repo, "checkout", "-q", "-b", "side")
    for number in range(1, 5):
        write.note(number, "side")
    _git(repo, "checkout", "-q", "main")
    for number in range(7, 12):
        write.note(number)
    write.clock += 1
    _git(repo, "merge", "-q", "--no-ff", "-m", "Merge branch 'side'", "side", when=write.clock)
    history.merge = _git(repo, "rev-parse", "HEAD")
    history.commits.append(history.merge)
    for number in range(12, 22):
        write.note(number)
    pyproject = repo / "frontend" / "pyproject.toml"
    good_text = pyproject.read_text()
    history.broken = write.commit(BROKEN_SUBJECT, {"frontend/pyproject.toml": good_text.replace(
        'requires = ["setuptools>=77"]', 'requires = ["setuptools>=77",')})
    write.commit("pyproject: fix the build requirements", {"frontend/pyproject.toml": good_text})
    for number in range(22, 28):
        write.note(number)
    init = repo / "frontend" / "splitfam" / "__init__.py"
    tests = repo / "frontend" / "tests" / "test_add.py"
    history.culprit = write.commit(CULPRIT_SUBJECT, {
        "frontend/splitfam/__init__.py": init.read_text().replace('__all__ = ["__version__", "add"]',
                                                                  '__all__ = ["__version__", "add", "mul"]') + MUL,
        "frontend/tests/test_add.py": tests.read_text() + TEST_MUL})
    for number in range(28, 37):
        write.note(number)
    return history
