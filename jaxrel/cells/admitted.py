"""The backends a frontend release or revision admits: the one answer wherever a backend is chosen for it
(``minimum``'s cells, the Crater's two sides, and each step of a bisection across a change of the minimum)."""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrel import policy
from jaxrel.distributions.metadata import parse_core_metadata
from jaxrel.distributions.remote_metadata import metadata_of_local
from jaxrel.distributions.wheels import ArtifactInfo, inspect
from jaxrel.errors import BadInput
from jaxrel.family.model import Family

__all__ = ["admitted_backends", "backend_specifier", "built_admits"]


def backend_specifier(requires_dist: tuple[str, ...], backend: str) -> SpecifierSet:
    """What a frontend release's ``Requires-Dist`` (no extra) says of the backend."""
    joined = SpecifierSet()
    for text in requires_dist:
        requirement = Requirement(text)
        if canonicalize_name(requirement.name) != canonicalize_name(backend):
            continue
        if requirement.marker is not None and "extra" in str(requirement.marker):
            continue
        joined &= requirement.specifier
    return joined


def admitted_backends(family: Family, version: Version, requires_dist: tuple[str, ...],
                      declared_minimum: str | None = None) -> SpecifierSet:
    """The backends a frontend release or revision admits: its ``Requires-Dist`` on the backend; the minimum its
    version file declares (``declared_minimum``, read from a built wheel) or the family's release data says it
    declares (jax before 0.4.31 named jaxlib only in extras, its minimum in ``version.py``); never newer than itself
    by release numbers (the policy's rule: jaxlib 0.4.36 for jax 0.4.36.dev…, never 0.4.37); with no lower bound
    from those, the lowest its extras pin."""
    backend = family.backend.distribution
    admitted = backend_specifier(requires_dist, backend) & SpecifierSet(f"<={policy.release_text(version)}")
    known = declared_minimum or family.frontend_minimums.get(str(version))
    if known:
        admitted &= SpecifierSet(f">={known}")
    if not any(s.operator in (">=", "==", "~=", ">") for s in admitted):
        lows = [Version(s.version) for text in requires_dist for s in Requirement(text).specifier
                if canonicalize_name(Requirement(text).name) == canonicalize_name(backend)
                and s.operator in (">=", "==") and "*" not in s.version]
        if lows:
            admitted &= SpecifierSet(f">={min(lows)}")
    return admitted


def built_admits(wheel: Path, family: Family, info: ArtifactInfo | None = None) -> SpecifierSet:
    """The backends a frontend wheel built here (from a release tag or any revision) admits: its METADATA, the
    minimum its version file declares (``info``, else read from the wheel), never newer than itself."""
    built = parse_core_metadata(metadata_of_local(wheel), wheel.name, BadInput)
    declared = (info or inspect(wheel, family)).minimum_backend
    return admitted_backends(family, Version(built.version), built.requires_dist,
                             declared if declared != family.frontend.minimum_backend else None)
