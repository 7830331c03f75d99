"""Where a library's tests come from, staged outside any source tree: its sdist when that carries them, else its
source repository at the release's tag, else a checkout given with ``--library-src``; or a smoke command.

Routes, in order: ``--library-src PATH`` (a checkout: its tests as they are there); the sdist, when it holds the
selection (or, unselected, a ``tests/``/``test/`` directory or test modules); the repository at the release's tag
(``--library-repo`` or the ``Project-URL`` of its METADATA; tags ``vX``, ``X``, ``NAME-vX``, the first that exists).
The selected paths are copied with every ``conftest.py`` above them and the top's pytest configuration. Tests
inside the library's package (optax's ``optax/_src/alias_test.py``) are copied without the package's
``__init__.py`` files and run with ``--import-mode=importlib``: the library they import is the one installed in the
cell, never the copy.
"""

from __future__ import annotations

import shutil
import tarfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import dependency_groups
from packaging.requirements import InvalidRequirement

from jaxrel._util import localfiles, procs
from jaxrel._util.tarballs import extract_all
from jaxrel._util.text import tail
from jaxrel.cells.owntests import CONFIG_FILES, check_test_paths, test_path
from jaxrel.distributions.index import Index
from jaxrel.distributions.sources import git_environment
from jaxrel.downstream.library import Library, LibraryError
from jaxrel.errors import BadInput, EnvironmentFailure

__all__ = ["GIT_DEADLINE", "StagedTests", "dependency_group", "find_tests", "requirement_lines", "stage",
           "staged_path", "tag_candidates"]

GIT_DEADLINE = 300.0  # seconds for one clone of a library's repository at a tag
TEST_DIRS = ("tests", "test")
SKIPPED_DIRS = {".git", "build", "dist", "docs", "examples", "benchmarks", "__pycache__", ".github"}


@dataclass(frozen=True)
class StagedTests:
    """The library's tests ready to run: ``paths`` under ``root``; how they were found; pytest's import mode."""

    root: Path
    paths: tuple[str, ...]
    route: str  # "sdist" | "tag vX.Y.Z of URL" | "checkout PATH" | "smoke"
    import_mode: str = "prepend"  # "importlib" when a path lies inside the library's package
    smoke: str | None = None  # --smoke CODE: run instead of tests
    requirements: tuple[str, ...] = ()  # the tests' own requirements file (tests/requirements.txt), when it has one
    selected: bool = False  # the paths were chosen (--tests), not found


def tag_candidates(library: Library, tag: str | None = None) -> list[str]:
    """The tag names a release is looked for under, in order: ``tag`` (a card's ``v.{version}``) when given, then
    ``vX``, ``X``, ``NAME-vX``, ``NAME-X``."""
    version = library.version
    usual = [f"v{version}", version, f"{library.name}-v{version}", f"{library.name}-{version}"]
    return list(dict.fromkeys([*([tag.format(version=version)] if tag else []), *usual]))


def _is_test_module(path: Path) -> bool:
    return path.suffix == ".py" and (path.name.startswith("test_") or path.name.endswith("_test.py"))


def find_tests(tree: Path) -> list[str]:
    """The default selection in ``tree``: its ``tests/`` (or ``test/``) directory, else every test module in it."""
    for name in TEST_DIRS:
        if (tree / name).is_dir() and any(_is_test_module(p) for p in (tree / name).rglob("*.py")):
            return [name]
    found = []
    for path in sorted(tree.rglob("*.py")):
        relative = path.relative_to(tree)
        if _is_test_module(path) and not SKIPPED_DIRS & set(relative.parts[:-1]):
            found.append(relative.as_posix())
    return found


def _package_dirs(tree: Path) -> set[str]:
    return {p.name for p in tree.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
            and p.name not in TEST_DIRS} if tree.is_dir() else set()


def _selection(tree: Path, selection: Sequence[str], where: str, preferred: bool = False) -> list[str]:
    """The paths to run: ``selection`` (each must exist; ``preferred``, a card's: those that exist, else the
    default), or the default (:func:`find_tests`)."""
    if selection:
        check_test_paths(selection, option="--tests")
        missing = [t for t in selection if not (tree / test_path(t)).exists()]
        if preferred and missing:
            return [t for t in selection if t not in missing] or find_tests(tree)
        if missing:
            raise LibraryError(f"--tests {missing[0]}: not in the library's tests ({where}); give paths or node ids "
                               "relative to the library's top")
        return list(selection)
    return find_tests(tree)


IN_PACKAGE = "_tests_in_"  # the staged name of a package's directory that holds tests (``_tests_in_optax/``)


def staged_path(test: str, packages: set[str]) -> str:
    """Where a selected test lies once staged: inside a package, under ``_tests_in_PACKAGE/`` (never ``PACKAGE/``:
    pytest would take the copy for the installed package)."""
    head, sep, rest = test.partition("/")
    return f"{IN_PACKAGE}{head}{sep}{rest}" if head in packages and sep else test


def _copy(tree: Path, paths: Sequence[str], dest: Path, packages: set[str], files: Sequence[str] = ()) -> str:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    ignore_in_package = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "__init__.py")
    inside = False
    for path in dict.fromkeys(test_path(p).rstrip("/") for p in paths):
        parts = PurePosixPath(path).parts
        in_package = parts[0] in packages
        inside = inside or in_package
        if not in_package and len(parts) > 1:  # a tests/ directory goes whole: its helpers and __init__.py with it
            path, parts = parts[0], parts[:1]
        source, target = tree / path, dest / staged_path(path, packages)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=False, ignore=ignore_in_package if in_package else ignore,
                            dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)
        for depth in range(len(parts)):  # every conftest.py on the way down
            conftest = tree.joinpath(*parts[:depth], "conftest.py")
            if conftest.is_file():
                where = dest / staged_path("/".join([*parts[:depth], "conftest.py"]), packages)
                where.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(conftest, where)
    for name in CONFIG_FILES:
        if (tree / name).is_file() and not (dest / name).exists():
            shutil.copy2(tree / name, dest / name)
    for name in files:  # what the suite reads by its repository's paths (a card's ``files``: data, fixtures)
        source = tree / name
        if source.is_dir():
            shutil.copytree(source, dest / name, symlinks=False, ignore=ignore, dirs_exist_ok=True)
        elif source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
        else:
            raise LibraryError(f"{name}: not in the tests' tree; fix the card's files")
    return "importlib" if inside else "prepend"


def _unpacked_sdist(index: Index, library: Library, into: Path) -> Path | None:
    if library.sdist is None:
        return None
    path = index.download(library.sdist)
    target = into / "sdist"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    try:
        with tarfile.open(path) as archive:
            extract_all(archive, target)
    except (tarfile.TarError, OSError, EOFError) as error:
        raise LibraryError(f"{library.sdist.filename}: the sdist cannot be unpacked ({str(error)[:80]})") from None
    tops = [p for p in target.iterdir() if p.is_dir()]
    return tops[0] if len(tops) == 1 else None


def _git(args: list[str], cwd: Path | None = None) -> tuple[int, str]:
    try:
        done = procs.run(["git", *args], cwd=cwd, env=git_environment({"GIT_TERMINAL_PROMPT": "0"}),
                         timeout=GIT_DEADLINE)
    except Exception as error:  # TimeoutExpired: the deadline passed
        return 124, str(error)
    return done.returncode, done.stderr or done.stdout


def _cloned_at_tag(library: Library, repository: str, into: Path, tag_format: str | None) -> tuple[Path, str]:
    target = into / "repo"
    code, answer = _git(["ls-remote", "--tags", "--", repository])
    if code != 0:
        raise EnvironmentFailure(f"{library.label}: cannot list the tags of {repository} ({tail(answer, 1)}); give "
                                 "its checkout with --library-src PATH (at the release's tag)")
    tags = {line.split("refs/tags/", 1)[1].removesuffix("^{}") for line in answer.splitlines()
            if "refs/tags/" in line}
    candidates = tag_candidates(library, tag_format)
    tag = next((t for t in candidates if t in tags), None)
    if tag is None:
        raise LibraryError(f"{library.label}: {repository} has no tag {', '.join(candidates)}; give "
                           "the release's checkout with --library-src PATH, or --library-repo with its tags")
    if target.exists():
        shutil.rmtree(target)
    local = Path(repository.removeprefix("file://"))
    if "://" not in repository.removeprefix("file://") and local.is_dir():  # a clone on this machine: its tag's tree
        target.mkdir(parents=True)
        archive = into / "tag.tar"
        code, answer = _git(["-C", str(local), "ls-tree", "--name-only", f"refs/tags/{tag}"])
        tops = [name for name in answer.splitlines() if name and name not in SKIPPED_DIRS] if code == 0 else []
        if code == 0:  # the tree without docs, examples and benchmarks (large files no test reads)
            code, answer = _git(["-C", str(local), "archive", "--format=tar", "-o", str(archive), f"refs/tags/{tag}",
                                 "--", *tops])
        if code == 0:
            with tarfile.open(archive) as tar:
                extract_all(tar, target)
            archive.unlink()
    else:
        code, answer = _git(["clone", "--quiet", "--depth", "1", "--branch", tag, "--", repository, str(target)])
    if code != 0:
        shutil.rmtree(target, ignore_errors=True)
        raise EnvironmentFailure(f"{library.label}: reading {repository} at {tag} failed ({tail(answer, 1)}); give "
                                 "the release's checkout with --library-repo PATH")
    return target, f"tag {tag} of {repository}"


def stage(library: Library, into: Path, *, index: Index, selection: Sequence[str] = (), repository: str | None = None,
          smoke: str | None = None, progress: Callable[[str], None] = lambda line: None, files: Sequence[str] = (),
          tag: str | None = None, preferred: bool = False, from_repository: bool = False) -> StagedTests:
    """The library's tests (or smoke command) staged under ``into``; :class:`LibraryError` when none can be found.
    ``files``: more paths of its tree the suite reads (data); ``tag``: the tag format its releases use
    (``v.{version}``), tried first; ``preferred``: the selection is a card's, chosen at the library's newest
    release: in an older one, those of its paths that exist run, else the release's default tests;
    ``from_repository``: never the sdist (a card's route: its sdist lacks what the tests need)."""
    staged = into / "tests"
    if smoke is not None:
        staged.mkdir(parents=True, exist_ok=True)
        return StagedTests(staged, (), "smoke", smoke=smoke)
    if library.checkout is not None:
        tree, route = library.checkout, f"checkout {library.checkout}"
    else:
        sdist = None if from_repository else _unpacked_sdist(index, library, into)
        wanted = [test_path(t) for t in selection]
        present = [t for t in wanted if (sdist / t).exists()] if sdist is not None else []
        if sdist is not None and ((present == wanted) if wanted else bool(find_tests(sdist))
                                  or (preferred and present)):
            tree, route = sdist, f"sdist {library.sdist.filename if library.sdist else ''}"
        elif sdist is not None and wanted and find_tests(sdist) and repository is None and library.source_url() is None:
            tree, route = sdist, f"sdist {library.sdist.filename if library.sdist else ''}"  # says what is missing
        elif repository is not None and Path(repository).is_dir() and not (Path(repository) / "HEAD").is_file() \
                and not (Path(repository) / ".git").exists():
            tree, route = Path(repository), f"checkout {repository}"  # a plain tree of the release, given
        else:
            url = repository or library.source_url()
            if url is None:
                raise LibraryError(f"{library.label}: its sdist carries no tests and its METADATA names no source "
                                   "repository; give --library-src PATH, --library-repo URL, or --smoke CODE")
            progress(f"downstream: {library.label}: tests from {url} at the release's tag …")
            tree, route = _cloned_at_tag(library, url, into, tag)
    paths = _selection(tree, selection, route, preferred)
    if preferred and selection and list(paths) != list(selection):
        route += (f" (of the card's tests, only {' '.join(paths)} exist in this release)"
                  if set(paths) <= set(selection) else " (the card's tests are not in this release: its default tests)")
    if not paths:
        raise LibraryError(f"{library.label}: no tests found in its {route}; give --tests PATHS, or --smoke CODE")
    packages = _package_dirs(tree)
    mode = _copy(tree, paths, staged, packages, files)
    shown = tuple(staged_path(p, packages) for p in paths)
    return StagedTests(staged, shown, route, mode, requirements=_requirements_file(tree, paths),
                       selected=bool(selection))


REQUIREMENTS_FILES = ("requirements-test.txt", "requirements_test.txt", "test-requirements.txt",
                      "requirements/requirements-test.txt", "requirements/test.txt")


TEST_GROUPS = ("tests", "test", "testing")  # PEP 735 dependency groups holding test requirements, in this order


def dependency_group(tree: Path) -> tuple[str, ...]:
    """The requirements of the tree's test dependency group (``[dependency-groups] tests = [...]`` in its
    ``pyproject.toml``, PEP 735, resolved by pypa's ``dependency-groups``: includes followed); none when it has
    none or the table is not valid."""
    path = tree / "pyproject.toml"
    if not path.is_file():
        return ()
    try:
        groups = localfiles.loads_toml(localfiles.read_text(path, what="its pyproject.toml"), str(path)).get(
            "dependency-groups")
    except BadInput:
        return ()
    if not isinstance(groups, dict):
        return ()
    name = next((g for g in TEST_GROUPS if g in groups), None)
    if name is None:
        return ()
    try:
        return tuple(dependency_groups.resolve(groups, name))
    except (TypeError, ValueError, LookupError, InvalidRequirement):
        return ()


def _requirements_file(tree: Path, paths: Sequence[str]) -> tuple[str, ...]:
    """The tests' own requirements: ``requirements.txt`` in their top directory (a ``tests/requirements.txt``), else
    a test requirements file at the tree's top (chex's ``requirements/requirements-test.txt``), else its test
    dependency group (equinox's ``[dependency-groups] tests``), if any."""
    top = PurePosixPath(test_path(paths[0])).parts[0] if paths else ""
    places = [f"{top}/requirements.txt"] if top and (tree / top).is_dir() else []
    found = next((tree / p for p in [*places, *REQUIREMENTS_FILES] if (tree / p).is_file()), None)
    if found is None:
        return dependency_group(tree)
    return tuple(line for line in requirement_lines(found.read_text(encoding="utf-8", errors="replace"))
                 if not line.startswith("-"))  # its options (-r, -e) name files of its own tree


def requirement_lines(text: str) -> tuple[str, ...]:
    """The lines of a requirements file's text, without comments and blank lines."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return tuple(line for line in lines if line)
