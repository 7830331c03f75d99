"""The frontend's own tests, staged outside its source tree, and the requirements they need.

Run from the source tree, ``import jax`` finds the tree, not the wheel a cell installed; so
the selected test paths are copied, with the tree's top-level ``conftest.py`` and pytest
configuration (``pytest.ini``, ``pyproject.toml`` — jax's options live there —, ``tox.ini``,
``setup.cfg``), into a directory of their own, and run there. Paths inside the frontend's
package cannot be separated from it and are refused.

What runs: ``--frontend-tests`` paths, else the family's declared default selection
(``tests`` in ``[tool.jaxrel.frontend]``; for jax a few minutes of fast CPU tests), else the
tree's ``tests/``; ``-k`` narrows either. What they need: ``--test-requirements``, else the
family's ``test-requirements`` file in the tree (jax: ``build/test-requirements.txt``).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from jaxrel._util.shape import is_relative_path
from jaxrel._util.text import shorten
from jaxrel.cells.suites import Suite
from jaxrel.errors import BadInput
from jaxrel.family import Family

__all__ = ["CONFIG_FILES", "OwnTests", "Request", "check_test_paths", "plan", "stage", "test_path"]

CONFIG_FILES = ("conftest.py", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


@dataclass(frozen=True)
class Request:
    """What the command line asked for."""

    paths: tuple[str, ...] = ()  # --frontend-tests, relative to the source tree
    keyword: str | None = None  # -k
    requirements: Path | None = None  # --test-requirements (absolute)
    enabled: bool = True  # False: --no-frontend-tests

    @property
    def explicit(self) -> bool:
        return bool(self.paths or self.keyword or self.requirements)


@dataclass(frozen=True)
class OwnTests:
    """The staged own tests (a :class:`Suite`) and the requirements file the positive cells install."""

    suite: Suite
    requirements: Path | None


def check_test_paths(paths: Sequence[str], package: str | None = None,
                     option: str = "--frontend-tests") -> tuple[str, ...]:
    """``paths`` (files, directories or pytest node ids) if each stays inside the frontend's source tree (and
    outside ``package`` when given), else one :class:`BadInput` line: an absolute path, ``..``, a control
    character or a path into the package (its tests would import it from the tree) is refused before anything
    runs."""
    top = package.split(".")[0] if package else ""
    for test in paths:
        path = test_path(test).rstrip("/")
        if not is_relative_path(path) or (top and path.split("/")[0] == top):
            outside = f" and outside the {package} package (tests there import it from the tree)" if package else ""
            raise BadInput(f"{option} {shorten(test)!r}: give a path or node id inside the frontend's source tree "
                           f"(relative, without ..){outside}")
    return tuple(paths)


def test_path(test: str) -> str:
    """The file or directory part of a test selection: a pytest node id (``tests/a_test.py::Case::test_x``) names
    its file; the rest of it goes to pytest as it is."""
    return test.split("::", 1)[0]


def _selection(family: Family, tree: Path, request: Request, notes: list[str]) -> list[str]:
    if request.paths:
        check_test_paths(request.paths)
        missing = [p for p in request.paths if not (tree / test_path(p)).exists()]
        if missing:
            raise BadInput(f"--frontend-tests {missing[0]}: {test_path(missing[0])} is not in the frontend's source "
                           f"tree {tree}")
        return list(request.paths)
    declared = list(family.frontend.tests) or (["tests"] if (tree / "tests").is_dir() else [])
    present = [p for p in declared if (tree / p).exists()]
    missing = [p for p in declared if p not in present]
    if not missing:
        return present
    named = ", ".join(missing) if len(missing) <= 3 else f"{', '.join(missing[:3])} and {len(missing) - 3} more"
    notes.append(f"own tests: {named} of the default selection not in the source"
                 + ("; running the rest" if present else " (an sdist without tests?); none run"))
    return present


def _requirements(family: Family, tree: Path, request: Request, notes: list[str]) -> Path | None:
    if request.requirements is not None:
        if not request.requirements.is_file():
            raise BadInput(f"--test-requirements {request.requirements}: no such file")
        return request.requirements
    declared = family.frontend.test_requirements
    if declared is None:
        return None
    if not (tree / declared).is_file():
        notes.append(f"own tests: the declared test requirements {declared} are not in the source; none installed")
        return None
    return tree / declared


def _test_files(path: Path) -> int:
    path = Path(test_path(str(path)))
    if path.is_file():
        return 1
    return sum(1 for p in path.rglob("*.py") if p.name.startswith("test_") or p.name.endswith("_test.py"))


def stage(tree: Path, paths: Sequence[str], dest: Path, package: str) -> Path:
    """Copy ``paths`` (their top-level directories, whole) and the tree's pytest configuration into a fresh ``dest``."""
    top_package = package.split(".")[0]
    tops = []
    for path in paths:
        parts = PurePosixPath(test_path(path)).parts
        if not parts or parts[0] in ("..", "/") or Path(path).is_absolute():
            raise BadInput(f"--frontend-tests {path}: give a path inside the frontend's source tree")
        if parts[0] == top_package:
            raise BadInput(f"--frontend-tests {path}: tests inside the {package} package would be imported with it "
                           "from the source tree, not from the cell's wheel; choose tests outside the package")
        if parts[0] not in tops:
            tops.append(parts[0])
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for top in tops:
        source = tree / top
        if source.is_dir():
            shutil.copytree(source, dest / top, symlinks=True, ignore=ignore)
        else:
            shutil.copy2(source, dest / top)
    for name in CONFIG_FILES:
        if (tree / name).is_file() and not (dest / name).exists():
            shutil.copy2(tree / name, dest / name)
    return dest


def plan(family: Family, tree: Path | None, request: Request, dest: Path) -> tuple[OwnTests | None, list[str]]:
    """The own tests to run in every positive cell, staged in ``dest`` (``None``: none to run), and notes.

    A request for tests without a source tree (a downloaded wheel) is bad input.
    """
    if dest.exists():
        shutil.rmtree(dest)
    if not request.enabled:
        return None, []
    if tree is None:
        if request.explicit:
            raise BadInput("the frontend's own tests need its source: pass --frontend-src PATH (or the default "
                           "sdist stand-in), not a released wheel")
        return None, []
    notes: list[str] = []
    paths = _selection(family, tree, request, notes)
    if not paths:
        return None, notes
    requirements = _requirements(family, tree, request, notes)
    root = stage(tree, paths, dest, family.frontend.package)
    options = ("-k", request.keyword) if request.keyword else ()
    suite = Suite("own tests", "own", root, tuple(paths), options, parallel=True,
                  test_files=sum(_test_files(root / path) for path in paths))
    return OwnTests(suite, requirements), notes
