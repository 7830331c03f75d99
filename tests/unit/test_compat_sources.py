"""The frontend's sources exported out of the user's tree (jaxrel.distributions.sources): git and plain trees."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from jaxrel.distributions.sources import SourceError, export, is_build_output


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t.invalid"})
    return done.stdout.strip()


def files(root: Path) -> dict[str, str]:
    """Every file under ``root`` (outside .git) and its text."""
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout of a frontend with two commits, then uncommitted changes and a former build's leftovers."""
    repo = tmp_path / "front"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("v = 1\n")
    (repo / "pkg" / "gone.py").write_text("gone = True\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "index.md").write_text("docs\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    (repo / "pkg" / "__init__.py").write_text("v = 2\n")
    git(repo, "commit", "-qam", "two")
    # uncommitted: a modified file, a staged new file, an untracked file, a deleted module
    (repo / "pkg" / "__init__.py").write_text("v = 3\n")
    (repo / "pkg" / "staged.py").write_text("staged = True\n")
    git(repo, "add", "pkg/staged.py")
    (repo / "pkg" / "untracked.py").write_text("untracked = True\n")
    (repo / "pkg" / "gone.py").unlink()
    # what a build in the tree left behind (nothing ignores it: no .gitignore)
    (repo / "build" / "lib" / "pkg").mkdir(parents=True)
    (repo / "build" / "lib" / "pkg" / "gone.py").write_text("stale\n")
    (repo / "pkg.egg-info").mkdir()
    (repo / "pkg.egg-info" / "PKG-INFO").write_text("stale\n")
    (repo / "pkg" / "__pycache__").mkdir()
    (repo / "pkg" / "__pycache__" / "x.pyc").write_text("stale\n")
    (repo / "build" / "test-requirements.txt").write_text("pytest\n")  # build/ also holds source
    return repo


def test_build_outputs() -> None:
    outputs = ["build/lib/pkg/a.py", "frontend/build/lib/x.py", "build/bdist.linux-x86_64/x", "pkg.egg-info/PKG-INFO",
               "a/__pycache__/b.pyc", "x.pyc", "build/temp.linux/x.o"]
    sources = ["build/test-requirements.txt", "pkg/lib.py", "lib/build.py", "tests/build/lib.py"]
    assert [is_build_output(p) for p in outputs] == [True] * len(outputs)
    assert [is_build_output(p) for p in sources] == [False] * len(sources)


def test_a_checkout_is_exported_with_its_working_tree_changes(checkout: Path, tmp_path: Path) -> None:
    before = files(checkout), git(checkout, "status", "--porcelain")
    tree, what = export(checkout, tmp_path / "work" / "src")
    assert tree == tmp_path / "work" / "src"
    assert files(tree) == {"build/test-requirements.txt": "pytest\n", "docs/index.md": "docs\n",
                           "pkg/__init__.py": "v = 3\n", "pkg/staged.py": "staged = True\n",
                           "pkg/untracked.py": "untracked = True\n"}
    head = git(checkout, "rev-parse", "HEAD")
    assert what == f"git {head[:12]} with the working tree's changes"
    assert git(tree, "rev-parse", "HEAD") == head, "the frontend's version logic still sees git"
    assert (files(checkout), git(checkout, "status", "--porcelain")) == before, "the user's tree is untouched"
    (checkout / "pkg" / "__init__.py").write_text("v = 4\n")
    again, _ = export(checkout, tmp_path / "work" / "src")
    assert (again / "pkg" / "__init__.py").read_text() == "v = 4\n", "fresh every time"


def test_a_revision_is_exported_as_committed(checkout: Path, tmp_path: Path) -> None:
    tree, what = export(checkout, tmp_path / "src", ref="HEAD~1")
    first = git(checkout, "rev-parse", "HEAD~1")
    assert what == f"git {first[:12]} (HEAD~1)" and git(tree, "rev-parse", "HEAD") == first
    assert files(tree) == {"docs/index.md": "docs\n", "pkg/__init__.py": "v = 1\n", "pkg/gone.py": "gone = True\n"}


def test_a_bad_revision_or_a_revision_outside_git_is_bad_input(checkout: Path, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"^--ref nosuch: no such revision in "):
        export(checkout, tmp_path / "src", ref="nosuch")
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(SourceError, match="is not in a git checkout"):
        export(plain, tmp_path / "src", ref="HEAD")
    with pytest.raises(SourceError, match="not a directory"):
        export(tmp_path / "missing", tmp_path / "src")


def test_a_subdirectory_of_a_checkout(checkout: Path, tmp_path: Path) -> None:
    tree, _ = export(checkout / "pkg", tmp_path / "src")
    assert tree == tmp_path / "src" / "pkg" and (tree / "untracked.py").is_file()
    assert git(tree, "rev-parse", "--show-toplevel") == str(tmp_path / "src")


def test_a_sparse_checkout_stays_sparse(checkout: Path, tmp_path: Path) -> None:
    git(checkout, "sparse-checkout", "set", "--no-cone", "/pkg/", "/build/")
    assert not (checkout / "docs").exists()
    tree, _ = export(checkout, tmp_path / "src")
    assert not (tree / "docs").exists() and (tree / "pkg" / "__init__.py").read_text() == "v = 3\n"


def test_a_tree_outside_git_is_copied_without_build_outputs(checkout: Path, tmp_path: Path) -> None:
    plain = tmp_path / "unpacked-sdist"
    subprocess.run(["cp", "-r", str(checkout), str(plain)], check=True)
    subprocess.run(["rm", "-rf", str(plain / ".git")], check=True)
    tree, what = export(plain, tmp_path / "src")
    assert what == f"copy of {plain}"
    assert files(tree) == {"build/test-requirements.txt": "pytest\n", "docs/index.md": "docs\n",
                           "pkg/__init__.py": "v = 3\n", "pkg/staged.py": "staged = True\n",
                           "pkg/untracked.py": "untracked = True\n"}


def test_a_workdir_inside_the_tree_is_not_exported(checkout: Path, tmp_path: Path) -> None:
    """`jaxrel compat --frontend-src .` with the default workdir: an earlier run's environments are not source."""
    workdir = checkout / "work"
    (workdir / "envs" / "cell").mkdir(parents=True)
    (workdir / "envs" / "cell" / "big.py").write_text("an environment\n")
    tree, _ = export(checkout, workdir / "frontend" / "src", skip=workdir)
    assert not (tree / "work").exists() and (tree / "pkg" / "untracked.py").is_file()
    plain = tmp_path / "plain"
    subprocess.run(["cp", "-r", str(checkout), str(plain)], check=True)
    subprocess.run(["rm", "-rf", str(plain / ".git")], check=True)
    tree, _ = export(plain, plain / "work" / "frontend" / "src", skip=plain / "work")
    assert not (tree / "work").exists() and (tree / "pkg" / "untracked.py").is_file()
