"""What ``jaxrel bisect`` is asked (:class:`Request`), checked before anything is built or cloned: the
revisions, the cell, the tests (bad input: exit 2)."""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jaxrel import policy
from jaxrel._util.shape import is_relative_path
from jaxrel._util.text import shorten, tail
from jaxrel.bisect import git
from jaxrel.bisect.git import Source
from jaxrel.cells.frontend import PreparedFrontend
from jaxrel.cells.matrix import Cell, Outcome
from jaxrel.cells.owntests import check_test_paths
from jaxrel.cells.planning import matrix_for
from jaxrel.cells.suites import DEFAULT_SUITE
from jaxrel.distributions.index import Index
from jaxrel.errors import BadInput, EnvironmentFailure
from jaxrel.family import Family

__all__ = ["PROBES_A_ROUND", "Inputs", "Request", "cell_parts", "check_ancestry", "check_inputs", "exclude_newer",
           "resolve", "select_cell"]

CELL = re.compile(r"py(?P<python>3\.\d+t?)-(?P<rest>.+)")


# the probes a round the commands run (``jaxrel bisect --jobs``, the Crater's bisections): two fill this project's
# 2-core machines; docs/bisect.md has the measurement
PROBES_A_ROUND = 2


@dataclass(frozen=True)
class Request:
    """What the command line asked for."""

    source: Path
    goods: tuple[str, ...]
    bad: str
    workdir: Path
    cell: str | None = None  # --cell ID
    backend: str | None = None  # --backend NAME==V (the version)
    python: str | None = None
    plugins: str | None = None  # a plugin set name
    tests: tuple[str, ...] = ()
    keyword: str | None = None
    test_env: tuple[tuple[str, str], ...] = ()
    reruns: int = 1
    suite_tests: tuple[str, ...] = ()  # --compat-tests: node ids of jaxrel's compat suite instead of own tests
    deps_as_of: str | None = None  # None: the newest good commit's date; "now"; a date or time
    family: str | None = None
    index_url: str | None = None
    wheelhouses: tuple[str, ...] = ()
    use_uv: bool | None = None
    refresh: bool = False  # re-read the index's listings
    tests_root: Path | None = None  # a library's staged tests, run at each revision instead of the frontend's own
    requirements: tuple[str, ...] = ()  # what the environment needs for them (the library, its test requirements)
    pytest_options: tuple[str, ...] = ()  # more pytest options for those tests
    jobs: int = 1  # probes a round (multisection: jaxrel.bisect.multisect); 1 is git bisect run's one at a time
    boxed: bool = False  # run the tests in the box (cells.box): another project's tests (downstream's bisections)
    hidden: tuple[Path, ...] = ()  # with ``boxed``: paths the tests must not see (the frontend's checkout)
    more_backends: tuple[str, ...] = ()  # for revisions whose own rules refuse the cell's backend: the newest of
    # these they admit, each in an environment of its own (a Crater's candidate side pins a newer backend)


def resolve(source: Source, rev: str, option: str) -> str:
    """``rev`` as a full commit hash in the user's repository; :class:`BadInput` when it names none."""
    git.check_revision(rev, option)
    done = git.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", git_dir=source.git_dir, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise BadInput(f"{option} {rev}: no such revision in {source.git_dir} (try a branch, tag or commit hash)")
    return done.stdout.strip()


def check_ancestry(source: Source, goods: Sequence[str], bad: str, names: Sequence[str], bad_name: str) -> None:
    for good, name in zip(goods, names, strict=True):
        if good == bad:
            raise BadInput(f"--good {name} and --bad {bad_name} are the same commit; give an older good revision")
        done = git.git("merge-base", "--is-ancestor", good, bad, git_dir=source.git_dir, check=False)
        if done.returncode == 1:
            raise BadInput(f"--good {name} is not an ancestor of --bad {bad_name}; give a good revision that "
                           f"{bad_name} contains (git merge-base --is-ancestor {name} {bad_name})")
        if done.returncode != 0:
            raise EnvironmentFailure(f"git merge-base failed: {tail(done.stderr)}")


def cell_parts(request: Request, family: Family) -> tuple[str, str, str | None]:
    """(python, backend version, plugin set or None) from ``--cell`` or ``--backend/--python/--plugins``."""
    backend = family.backend.distribution
    if request.cell:
        match = CELL.fullmatch(request.cell)
        rest = match.group("rest") if match else ""
        if not match or not rest.startswith(backend):
            raise BadInput(f"--cell {request.cell}: expected py3.N-{backend}VERSION[-PLUGINS] as jaxrel compat "
                           f"names cells (e.g. py3.12-{backend}0.11.0)")
        version, _, plugins = rest.removeprefix(backend).partition("-")
        python, plugin_set = match.group("python"), plugins or None
    else:
        if not request.backend or not request.python:
            raise BadInput(f"which cell? pass --cell ID (e.g. py3.12-{backend}0.11.0) or --backend "
                           f"{backend}==V --python 3.N [--plugins SET]")
        version, python, plugin_set = request.backend, request.python, request.plugins
    where = shorten(request.cell or request.backend or "")
    policy.parse_version(version, f"{where}: {backend} version")  # bounded: a 5,000-digit number is bad input
    if not re.fullmatch(r"3\.\d{1,3}t?", python or ""):
        raise BadInput(f"--python {shorten(python or '')!r}: expected a Python version such as 3.12")
    return python, version, plugin_set


def exclude_newer(request: Request, good_date: str) -> str | None:
    """The time the environment's requirements are resolved as of: ``None`` for now."""
    if request.deps_as_of == "now":
        return None
    if request.deps_as_of is None:
        return datetime.datetime.fromisoformat(good_date).astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        datetime.datetime.fromisoformat(request.deps_as_of)
    except ValueError:
        raise BadInput(f"--deps-as-of {request.deps_as_of!r}: expected a date (2025-06-01), a time "
                       "(2025-06-01T12:00:00Z) or now") from None
    return request.deps_as_of


def select_cell(family: Family, index: Index, bad: PreparedFrontend, python: str, version: str,
                plugin_set: str | None, bad_name: str) -> Cell:
    """The cell asked for, as the matrix of the bad revision forms it; :class:`BadInput` when that revision
    does not admit it (naming the cells it does)."""
    matrix = matrix_for(family, index, bad.spec, pythons=[python], plugin_sets=[plugin_set] if plugin_set else [],
                        plugins_on="all")
    wanted = f"py{python}-{family.backend.distribution}{version}" + (f"-{plugin_set}" if plugin_set else "")
    admitted = [cell for cell in matrix.cells if cell.expected == Outcome.ACCEPTED]
    for cell in admitted:
        if cell.id == wanted:
            return cell
    spec = bad.spec
    raise BadInput(f"cell {wanted}: {spec.name} {spec.version} at --bad {bad_name} does not admit it (minimum "
                   f"{family.backend.distribution} {spec.minimum_backend}); cells it admits here: "
                   + ", ".join(c.id for c in admitted))


@dataclass(frozen=True)
class Inputs:
    source: Source
    bad: str
    goods: list[str]
    python: str
    version: str
    plugin_set: str | None
    tests: tuple[str, ...]


def check_inputs(request: Request, family: Family) -> Inputs:
    """Everything checked before anything is built or cloned (bad input: exit 2)."""
    source = git.locate(request.source.resolve())
    bad = resolve(source, request.bad, "--bad")
    goods = [resolve(source, good, "--good") for good in request.goods]
    if not goods:
        raise BadInput("give at least one --good REV (a revision where the cell passes)")
    check_ancestry(source, goods, bad, request.goods, request.bad)
    python, version, plugin_set = cell_parts(request, family)
    for other in request.more_backends:  # bounded as the cell's own backend is
        policy.parse_version(other, f"--also-backend {shorten(other)}: {family.backend.distribution} version")
    if request.suite_tests:
        if request.tests:
            raise BadInput("pass --frontend-tests or --compat-tests, not both: one selection decides each step")
        if not family.compat_suite:
            raise BadInput(f"--compat-tests: jaxrel's compat suite tests jax's APIs; the {family.name} family has "
                           "none; pass --frontend-tests")
        missing = [t for t in request.suite_tests if not (DEFAULT_SUITE / t.split("::", 1)[0]).is_file()
                   or not is_relative_path(t.split("::", 1)[0])]
        if missing:
            raise BadInput(f"--compat-tests {missing[0][:120]}: not a test of jaxrel's compat suite (e.g. "
                           "test_api.py::test_api[jax.jit]; `jaxrel compat` names them in its report)")
        return Inputs(source, bad, goods, python, version, plugin_set, ())
    if request.tests_root is not None:  # a downstream library's tests: paths relative to their staged directory
        if not request.tests or not all((request.tests_root / t.split("::", 1)[0]).exists() for t in request.tests):
            raise BadInput(f"the library's tests {' '.join(request.tests)} are not all in {request.tests_root}")
        return Inputs(source, bad, goods, python, version, plugin_set, tuple(request.tests))
    tests = request.tests or family.frontend.tests
    if not tests:
        raise BadInput("which tests? pass --frontend-tests PATH|NODEID (the family declares no default selection)")
    check_test_paths(tests, family.frontend.package)
    return Inputs(source, bad, goods, python, version, plugin_set, tuple(tests))
