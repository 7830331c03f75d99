"""The compat matrix of a frontend from the index's listings and the interpreters on this machine."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

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
from jaxrel.distributions.pythons import find_pythons, python_for
from jaxrel.family import Family

__all__ = ["matrix_for"]


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
            return build([version])
        except MatrixError:
            continue
    raise CompatError(
        f"no interpreter here runs {spec.name} {spec.version} with an admitted {family.backend.distribution} "
        f"(Requires-Python {spec.requires_python or 'any'}; found {', '.join(candidates) or 'none'}); "
        "install one (e.g. pyenv install 3.12) or pass --python"
    )


