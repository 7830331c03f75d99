"""The compat matrix of a frontend from the index's listings and the interpreters on this machine."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence

from packaging.specifiers import SpecifierSet

from jaxrel.cells.frontend import CompatError
from jaxrel.cells.matrix import (
    BackendFilter,
    FrontendSpec,
    Matrix,
    MatrixError,
    build_matrix,
    known_plugin_sets,
)
from jaxrel.distributions.index import Index
from jaxrel.distributions.pages import Listing
from jaxrel.distributions.pythons import all_pythons, find_pythons, free_threaded, python_for, release_of
from jaxrel.family import Family

__all__ = ["matrix_for"]


def _with_free_threaded(matrix: Matrix, build: Callable[[Sequence[str]], Matrix], chosen: list[str], family: Family,
                        backend: Listing, spec: FrontendSpec, required: SpecifierSet) -> Matrix:
    """The default matrix with the free-threaded cells the frontend admits, on each free-threaded interpreter here
    whose ABI the backend ships wheels for (``cp313t``); where none it admits has one, a note says so. A backend of
    pure wheels needs no such axis."""
    for version in (v for v in all_pythons() if free_threaded(v)
                    and required.contains(release_of(v) + ".0", prereleases=True)):
        abi = f"cp{release_of(version).replace('.', '')}t"
        shipped = sorted({f.version for f in backend.files if any(tag.abi == abi for tag in f.tags)})
        if not shipped:
            continue
        try:
            build([version])
        except MatrixError:
            matrix.notes.append(
                f"Python {version}: skipped: no {family.backend.distribution} release {spec.name} {spec.version} "
                f"admits (minimum {spec.minimum_backend}) ships a {abi} wheel ({family.backend.distribution} ships "
                f"them for {shipped[0]} to {shipped[-1]}); its free-threaded cells need another free-threaded "
                "Python (scripts/free_threaded_python.sh 3.N SUITE builds one)")
            continue
        chosen.append(version)
        matrix = build(chosen)
    return matrix


def matrix_for(
    family: Family, index: Index, spec: FrontendSpec, *, pythons: Sequence[str] = (),
    backends: BackendFilter | None = None, plugin_sets: Sequence[str] = (), plugins_on: str = "newest",
    as_of: datetime.datetime | None = None,
) -> Matrix:
    """The matrix from the index's listings (as they stood at ``as_of``: later uploads left out); with no
    ``pythons``, the oldest interpreter here that works."""
    known = known_plugin_sets(family, spec)
    # every family's listings: the cells need the chosen ones, the satisfiability check all of them
    projects = [family.backend.distribution, *dict.fromkeys(d for f in known.values() for d in f.distributions)]
    listings = {project: index.listing(project).as_of(as_of) for project in projects}

    def build(chosen: Sequence[str]) -> Matrix:
        tags = {version: python_for(version).tags() for version in chosen}
        return build_matrix(family, spec, listings, tags, backends=backends, plugin_sets=plugin_sets,
                            plugins_on=plugins_on)

    if pythons:
        return build(pythons)
    required = SpecifierSet(spec.requires_python or "")
    candidates = [v for v in find_pythons() if required.contains(v + ".0", prereleases=True)]
    for version in candidates:
        try:
            matrix = build([version])
        except MatrixError:
            continue
        return _with_free_threaded(matrix, build, [version], family, listings[family.backend.distribution], spec,
                                   required)
    raise CompatError(
        f"no interpreter here runs {spec.name} {spec.version} with an admitted {family.backend.distribution} "
        f"(Requires-Python {spec.requires_python or 'any'}; found {', '.join(candidates) or 'none'}); "
        "install one (e.g. pyenv install 3.12) or pass --python"
    )


