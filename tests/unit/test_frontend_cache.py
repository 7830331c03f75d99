"""What a run may reuse, and only when nothing changed: the frontend's wheel (:func:`files.tree_digest`,
:func:`frontend.cached_build`, a real build of a tiny project), a file's sha256 (:func:`files.sha256_of`) and
the bytecode of a cell's interpreters (:class:`envs.Env`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from jaxrel._util import files
from jaxrel.cells import frontend
from jaxrel.distributions import sources


def make_tree(root: Path, body: str = "X = 1\n") -> Path:
    (root / "tiny").mkdir(parents=True)
    (root / "tiny" / "__init__.py").write_text(body)
    (root / "pyproject.toml").write_text('[project]\nname = "tiny"\nversion = "1.0"\n'
                                         '[build-system]\nrequires = ["setuptools"]\n'
                                         'build-backend = "setuptools.build_meta"\n')
    return root


def test_the_digest_sees_every_byte_name_mode_and_link(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "a")
    first = files.tree_digest(tree)
    assert files.tree_digest(make_tree(tmp_path / "b")) == first, "the same files elsewhere: the same digest"
    changes = []
    (tree / "tiny" / "__init__.py").write_text("X = 2\n")
    changes.append(files.tree_digest(tree))
    (tree / "tiny" / "__init__.py").write_text("X = 1\n")
    assert files.tree_digest(tree) == first
    os.chmod(tree / "tiny" / "__init__.py", 0o755)
    changes.append(files.tree_digest(tree))
    os.chmod(tree / "tiny" / "__init__.py", 0o644)
    (tree / "tiny" / "__init__.py").rename(tree / "tiny" / "other.py")
    changes.append(files.tree_digest(tree))
    (tree / "tiny" / "other.py").rename(tree / "tiny" / "__init__.py")
    (tree / "link").symlink_to("tiny")
    changes.append(files.tree_digest(tree))
    (tree / "link").unlink()
    (tree / "link").symlink_to("pyproject.toml")
    changes.append(files.tree_digest(tree))
    (tree / "link").unlink()
    assert files.tree_digest(tree) == first
    assert len({first, *changes}) == len(changes) + 1, "each change gives a digest of its own"
    (tree / ".git").mkdir()
    (tree / ".git" / "index").write_bytes(os.urandom(8))
    assert files.tree_digest(tree, skip={".git"}) == first != files.tree_digest(tree)


def members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist() if name.startswith("tiny/")}


def test_a_wheel_is_reused_for_the_same_files_and_rebuilt_for_others(tmp_path: Path) -> None:
    work = tmp_path / "work"
    tree = make_tree(tmp_path / "src")
    wheel, reused = frontend.cached_build(tree, work)
    assert not reused and members(wheel) == {"tiny/__init__.py": b"X = 1\n"}
    stamp = wheel.stat().st_mtime_ns
    again, reused = frontend.cached_build(make_tree(tmp_path / "copy"), work)
    assert reused and again == wheel and again.stat().st_mtime_ns == stamp, "the very file, untouched"
    (tree / "tiny" / "__init__.py").write_text("X = 2\n")
    changed, reused = frontend.cached_build(tree, work)
    assert not reused and changed != wheel and members(changed) == {"tiny/__init__.py": b"X = 2\n"}
    assert not list((work / "frontend" / "wheels").glob("*.partial"))


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_an_export_of_the_same_commit_is_reused_and_another_commit_is_built(tmp_path: Path) -> None:
    """Each export is a fresh clone, whose .git differs in every run; what a build can read from it (the
    commit, its date, the nearest tag) is part of the key instead."""
    repo = make_tree(tmp_path / "repo")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    work = tmp_path / "work"
    first, _ = sources.export(repo, tmp_path / "export")
    wheel, reused = frontend.cached_build(first, work)
    assert not reused
    again, _ = sources.export(repo, tmp_path / "export")  # a new clone of the same commit
    assert frontend.cached_build(again, work) == (wheel, True)
    git(repo, "commit", "-q", "--allow-empty", "-m", "two")  # the same files, another commit
    other, _ = sources.export(repo, tmp_path / "export")
    assert frontend.cached_build(other, work)[1] is False
    git(repo, "tag", "v1.0")  # the same commit, tagged since: setuptools-scm would version it anew
    tagged, _ = sources.export(repo, tmp_path / "export")
    assert frontend.cached_build(tagged, work)[1] is False
    assert frontend.cached_build(sources.export(repo, tmp_path / "export")[0], work)[1] is True


def test_a_project_below_the_top_of_its_checkout_is_keyed_by_the_commit_too(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_tree(repo / "frontend")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    work = tmp_path / "work"
    first, _ = sources.export(repo / "frontend", tmp_path / "export")
    assert first.name == "frontend" and not (first / ".git").exists()
    wheel, _ = frontend.cached_build(first, work)
    assert frontend.cached_build(sources.export(repo / "frontend", tmp_path / "export")[0], work) == (wheel, True)
    git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    assert frontend.cached_build(sources.export(repo / "frontend", tmp_path / "export")[0], work)[1] is False


SETUP_READING_GIT = """import subprocess
from setuptools import setup
done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
setup(name="tiny", version="1.0" + (f"+g{done.stdout.strip()}" if done.returncode == 0 else ""), packages=["tiny"])
"""


def test_an_unpacked_sdist_inside_another_checkout_neither_sees_it_nor_is_keyed_by_it(tmp_path: Path) -> None:
    """As in the default compat run, whose work directory lies in jaxrel's own checkout: a build that asks git
    (here for its version) sees no repository, and a commit there rebuilds nothing."""
    outer = tmp_path / "outer"
    tree = make_tree(outer / "build" / "src")
    (tree / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\n'
                                         'build-backend = "setuptools.build_meta"\n')
    (tree / "setup.py").write_text(SETUP_READING_GIT)
    git(outer, "init", "-q")
    git(outer, "commit", "-q", "--allow-empty", "-m", "one")
    digest = files.tree_digest(tree)  # as unpacked: compat keys the tree by it, not by what builds leave there
    seen, _ = frontend.cached_build(tree, tmp_path / "work-seeing", digest=digest)
    assert seen.name.startswith("tiny-1.0+g"), "a build in the checkout sees its commit (what the option prevents)"
    wheel, reused = frontend.cached_build(tree, tmp_path / "work", digest=digest, git=False)
    assert (wheel.name, reused) == ("tiny-1.0-py3-none-any.whl", False)
    git(outer, "commit", "-q", "--allow-empty", "-m", "two")
    assert frontend.cached_build(tree, tmp_path / "work", digest=digest, git=False) == (wheel, True)
    assert frontend.cached_build(tree, tmp_path / "work-seeing", digest=digest)[1] is False, "keyed by the commit"


def test_only_the_newest_wheels_are_kept_and_a_failed_build_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frontend, "KEEP_BUILT", 2)  # two builds fewer than the default's four: each is a real build
    work = tmp_path / "work"
    tree = make_tree(tmp_path / "src")
    for n in range(frontend.KEEP_BUILT + 2):
        (tree / "tiny" / "__init__.py").write_text(f"X = {n}\n")
        frontend.cached_build(tree, work)
    kept = list((work / "frontend" / "wheels").iterdir())
    assert len(kept) == frontend.KEEP_BUILT
    assert {members(w)["tiny/__init__.py"] for w in (work / "frontend" / "wheels").glob("*/*.whl")} == {
        f"X = {n}\n".encode() for n in range(2, frontend.KEEP_BUILT + 2)}
    (tree / "pyproject.toml").write_text("[project\n")
    with pytest.raises(Exception, match="building a wheel of"):
        frontend.cached_build(tree, work)
    assert sorted((work / "frontend" / "wheels").iterdir()) == sorted(kept)


def test_a_file_is_hashed_again_after_any_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = tmp_path / "x.whl"
    wheel.write_bytes(b"a" * 1000)
    first = files.sha256_of(wheel)
    wheel.write_bytes(b"b" * 1000)  # at once, same size: within a tick of the clock the times stay as they were
    assert files.sha256_of(wheel) != first, "a file changed in the last two seconds is not remembered"
    later = time.time_ns() + 10 * 10**9
    monkeypatch.setattr(files, "time", SimpleNamespace(time_ns=lambda: later))  # as if hashed ten seconds on
    seen = files.sha256_of(wheel)
    assert seen in files._HASHED.values(), "an old file's hash is remembered"
    before = wheel.stat()
    time.sleep(0.05)
    with open(wheel, "r+b") as handle:  # same size, then the old modification time put back
        handle.write(b"c")
    os.utime(wheel, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert files.sha256_of(wheel) != seen, "the status change time moved"


def test_an_environment_with_a_bytecode_cache_keeps_what_its_interpreters_compile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even where PYTHONDONTWRITEBYTECODE is set (as on the machines this runs on), and only in the cache."""
    from jaxrel.distributions import envs

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "mod.py").write_text("X = 1\n")
    code = "import sys; sys.path.insert(0, sys.argv[1]); import mod; print(mod.X)"
    plain = envs.Env(tmp_path / "env")
    assert plain.run(sys.executable, "-c", code, str(tmp_path / "site")).stdout.strip() == "1"
    assert not list(tmp_path.rglob("*.pyc")), "without a cache: as the environment says"
    cached = envs.Env(tmp_path / "env", tmp_path / "pycache")
    assert cached.run(sys.executable, "-c", code, str(tmp_path / "site")).stdout.strip() == "1"
    assert [p.name for p in (tmp_path / "pycache").rglob("mod.*.pyc")] == [f"mod.{sys.implementation.cache_tag}.pyc"]
    assert not (tmp_path / "site" / "__pycache__").exists(), "nothing written beside the sources"


def _sdist(path: Path, body: str) -> Path:
    import tarfile

    tree = make_tree(path.parent / f"staging-{path.name}" / "tiny-1.0", body)
    with tarfile.open(path, "w:gz") as archive:
        archive.add(tree, arcname="tiny-1.0")
    return path


def test_an_unpacked_sdist_is_kept_only_while_its_file_and_its_files_are_the_same(tmp_path: Path) -> None:
    first, second = _sdist(tmp_path / "one.tar.gz", "X = 1\n"), _sdist(tmp_path / "two.tar.gz", "X = 2\n")
    into = tmp_path / "work" / "src"
    module = frontend._unpack_sdist(first, into)[0] / "tiny" / "__init__.py"
    inode = module.stat().st_ino
    assert frontend._unpack_sdist(first, into)[0] / "tiny" / "__init__.py" == module
    assert module.stat().st_ino == inode, "the same sdist, its files untouched: the tree is kept, not unpacked again"
    module.write_text("X = 'edited'\n")
    frontend._unpack_sdist(first, into)
    assert module.read_text() == "X = 1\n", "an edited tree is unpacked again"
    (module.parent / "stray.py").write_text("")
    frontend._unpack_sdist(first, into)
    assert not (module.parent / "stray.py").exists(), "a file added to the tree: unpacked again"
    assert frontend._unpack_sdist(second, into)[0] / "tiny" / "__init__.py" == module
    assert module.read_text() == "X = 2\n", "another sdist: its own files"
    (into.with_name("src.unpacked")).write_text("garbage")
    tree, digest = frontend._unpack_sdist(second, into)
    assert tree == module.parents[1] and module.read_text() == "X = 2\n"
    assert digest == files.tree_digest(tree, skip={".git"}), "the digest cached_build keys the wheel by"
