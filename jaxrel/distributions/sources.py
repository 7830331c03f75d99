"""The frontend's sources exported out of the user's tree into a fresh directory, so a build never writes there.

A git checkout is cloned with ``git clone --shared --no-checkout`` (objects are borrowed,
not copied; the checkout's sparse patterns are kept, so a partial clone works) and checked
out at the revision asked for; without a revision, at ``HEAD`` with the working tree's
changes laid over it (modified, added and untracked files copied, deleted ones deleted).
The frontend's version logic still sees git (``git show HEAD`` in the copy answers what it
answers in the checkout). A tree outside git is copied. Build outputs (``build/lib``,
``build/bdist.*``, ``*.egg-info``, ``__pycache__``) are never copied: a module deleted from
the tree cannot reach the wheel through setuptools' reused ``build/lib``.
"""

from __future__ import annotations

import datetime
import fnmatch
import os
import shutil
import subprocess
from pathlib import Path, PurePosixPath

from jaxrel._util import procs
from jaxrel._util.text import tail
from jaxrel.errors import BadInput, EnvironmentFailure

__all__ = ["GIT_REPOSITORY_VARIABLES", "SourceError", "commit_of", "commit_time", "export", "git_dir",
           "git_environment", "git_identity", "git_toplevel", "is_build_output"]

# What a build leaves in a source tree; none of it is source.
BUILD_OUTPUTS = ("build/lib", "build/lib.*", "build/bdist.*", "build/temp.*", "*.egg-info", ".eggs", "__pycache__",
                 "*.pyc")


class SourceError(BadInput):
    """The source tree or the revision asked for cannot be exported."""


def is_build_output(relative: str) -> bool:
    """Whether ``relative`` (a POSIX path inside the tree) is, or lies inside, something a build wrote."""
    parts = PurePosixPath(relative).parts
    for depth, name in enumerate(parts):
        directory = depth < len(parts) - 1
        pair = f"{parts[depth - 1]}/{name}" if depth else name  # "build/lib" (a directory) at any depth
        if any(fnmatch.fnmatchcase(pair, p) if "/" in p else fnmatch.fnmatchcase(name, p)
               for p in BUILD_OUTPUTS if directory or "/" not in p):
            return True
    return False


# what the caller's environment may say that would point git elsewhere than the repository jaxrel names
GIT_REPOSITORY_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
                            "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES",
                            "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_PREFIX", "GIT_QUARANTINE_PATH")


def git_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every ``git`` jaxrel runs gets: the caller's, without the variables that would make git
    read or write another repository than the one jaxrel names (``GIT_DIR`` set by a hook, say)."""
    env = {key: value for key, value in os.environ.items() if key not in GIT_REPOSITORY_VARIABLES}
    return {**env, **(extra or {})}


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = procs.run(["git", *args], cwd=cwd, env=git_environment())
    if check and done.returncode != 0:
        raise EnvironmentFailure(f"git {' '.join(args[:3])} in {cwd} failed (exit {done.returncode}): "
                                 f"{tail(done.stderr or done.stdout)}")
    return done


def git_toplevel(path: Path) -> Path | None:
    """The top of the git work tree holding ``path``; ``None`` outside git (or without git)."""
    try:
        done = _git(path, "rev-parse", "--show-toplevel", check=False)
    except FileNotFoundError:
        return None
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 and done.stdout.strip() else None


def git_dir(path: Path) -> Path | None:
    """The git directory of the repository holding ``path`` (``.git``, or a bare repository itself); ``None``
    outside git."""
    try:
        done = _git(path, "rev-parse", "--absolute-git-dir", check=False)
    except FileNotFoundError:
        return None
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 and done.stdout.strip() else None


def _paths(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [p for p in done.stdout.split("\0") if p]


def _clone(top: Path, dest: Path, commit: str) -> None:
    _git(dest.parent, "clone", "--quiet", "--shared", "--no-checkout", str(top), str(dest))
    sparse = _git(top, "config", "--bool", "core.sparseCheckout", check=False).stdout.strip() == "true"
    patterns = Path(_git(top, "rev-parse", "--git-path", "info/sparse-checkout").stdout.strip())
    patterns = patterns if patterns.is_absolute() else top / patterns
    if sparse and patterns.is_file():
        cone = _git(top, "config", "--bool", "core.sparseCheckoutCone", check=False).stdout.strip() or "false"
        _git(dest, "config", "core.sparseCheckout", "true")
        _git(dest, "config", "core.sparseCheckoutCone", cone)
        (dest / ".git" / "info").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(patterns, dest / ".git" / "info" / "sparse-checkout")
    _git(dest, "checkout", "--quiet", "--detach", commit)


def _inside(path: Path, directory: Path | None) -> bool:
    return directory is not None and path.resolve().is_relative_to(directory)


def _overlay_working_tree(top: Path, dest: Path, skip: Path | None) -> None:
    """Lay the checkout's uncommitted state over a copy checked out at its ``HEAD``."""
    changed = _paths(_git(top, "diff", "--no-renames", "--name-only", "-z", "HEAD"))
    untracked = _paths(_git(top, "ls-files", "-z", "--others", "--exclude-standard"))
    for relative in [*changed, *untracked]:
        if is_build_output(relative) or _inside(top / relative, skip):
            continue
        source, target = top / relative, dest / relative
        if source.is_file() or source.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            shutil.copy2(source, target, follow_symlinks=False)
        elif not source.exists() and (target.is_file() or target.is_symlink()):
            target.unlink()


def _copy_plain(source: Path, dest: Path, skip: Path | None) -> None:
    def ignore(directory: str, names: list[str]) -> set[str]:
        relative = Path(directory).relative_to(source)
        return {n for n in names if n == ".git" or is_build_output((relative / n).as_posix())
                or _inside(Path(directory) / n, skip)}

    shutil.copytree(source, dest, symlinks=True, ignore=ignore)


def export(source: Path, dest: Path, ref: str | None = None, *, skip: Path | None = None) -> tuple[Path, str]:
    """Export ``source`` (at ``ref``, a git revision, when given) into a fresh ``dest``.

    Returns the directory in ``dest`` that corresponds to ``source`` (a subdirectory when
    ``source`` lies below its git top level) and a description of what was exported. Nothing
    under ``skip`` (the run's work directory, should it lie inside the tree) is copied.
    """
    source = source.resolve()
    skip = skip.resolve() if skip is not None else None
    if not source.is_dir():
        raise SourceError(f"{source}: not a directory")
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    top = git_toplevel(source)
    if top is None:
        if ref is not None:
            raise SourceError(f"--ref {ref}: {source} is not in a git checkout; pass a checkout or drop --ref")
        _copy_plain(source, dest, skip)
        return dest, f"copy of {source}"
    if ref is not None:
        done = _git(top, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        if done.returncode != 0:
            raise SourceError(f"--ref {ref}: no such revision in {top} (try a branch, tag or commit)")
    else:
        done = _git(top, "rev-parse", "--verify", "HEAD^{commit}", check=False)
        if done.returncode != 0:
            raise SourceError(f"{top}: the git checkout has no commit yet; commit once or pass a tree outside git")
    commit = done.stdout.strip()
    _clone(top, dest, commit)
    if ref is None:
        _overlay_working_tree(top, dest, skip)
    inside = dest / source.relative_to(top)
    what = f"{commit[:12]}" + (f" ({ref})" if ref else " with the working tree's changes")
    return inside, f"git {what}"


def git_identity(tree: Path) -> str:
    """What a build of an exported ``tree`` (or of a directory in it) may read from git, as text: the commit
    checked out, its date, and ``git describe`` (the nearest tag, as setuptools-scm asks); ``""`` outside git."""
    if git_toplevel(tree) is None:
        return ""
    commit = _git(tree, "show", "-s", "--format=%H %ct", "HEAD", check=False).stdout.strip()
    described = _git(tree, "describe", "--tags", "--long", "--always", "--dirty", check=False).stdout.strip()
    return f"{commit} {described}"


def commit_time(source: Path, ref: str | None = None) -> datetime.datetime | None:
    """When ``ref`` (or HEAD) of the checkout ``source`` lies in was committed, in UTC; ``None`` outside git."""
    top = git_toplevel(source)
    if top is None:
        return None
    done = _git(top, "show", "-s", "--format=%cI", f"{ref or 'HEAD'}^{{commit}}", "--", check=False)
    try:
        return datetime.datetime.fromisoformat(done.stdout.strip()).astimezone(datetime.UTC) \
            if done.returncode == 0 else None
    except ValueError:
        return None


def commit_of(source: Path, ref: str | None = None) -> tuple[str | None, bool]:
    """The commit ``source`` (a git checkout) is at, or ``ref`` names, and whether the working tree adds
    changes to it (only without ``ref``); ``(None, False)`` outside git."""
    top = git_toplevel(source)
    if top is None:
        return None, False
    done = _git(top, "rev-parse", "--verify", "--quiet", f"{ref or 'HEAD'}^{{commit}}", check=False)
    if done.returncode != 0:
        return None, False
    dirty = ref is None and _git(top, "diff", "--no-ext-diff", "--quiet", "HEAD", "--", check=False).returncode == 1
    return done.stdout.strip(), dirty
