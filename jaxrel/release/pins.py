"""What the policy asks of declared requirements (no I/O): the frontend requires exactly
``>=minimum,<=release`` of the backend (as jax's ``setup.py`` writes it), and a pinned plugin
admits exactly the backend's version, however the pin is spelled."""

from __future__ import annotations

from packaging.specifiers import Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from jaxrel import policy

__all__ = ["bound", "first_refused_python", "frontend_range", "is_frontend_range", "pins_exactly"]


def frontend_range(minimum: str, frontend_version: str) -> str:
    """The specifier a frontend at ``frontend_version`` puts on the backend: ``>=minimum,<=X.Y.Z``."""
    return f">={minimum},<={policy.release_text(Version(frontend_version))}"


def bound(specifier: Specifier) -> Version | str:
    """A specifier's version as a version, or its text where it is not one (a wildcard, ``==0.12.*``: valid PEP 440,
    what jax writes for its ``-local`` extras)."""
    try:
        return Version(specifier.version)
    except InvalidVersion:
        return specifier.version


def is_frontend_range(specifier: SpecifierSet | None, minimum: str, frontend_version: str) -> bool:
    """``specifier`` is exactly :func:`frontend_range` (in any order, versions compared as versions)."""
    bounds = {(s.operator, bound(s)) for s in specifier or []}
    return bounds == {(s.operator, bound(s)) for s in SpecifierSet(frontend_range(minimum, frontend_version))}


def pins_exactly(specifier: SpecifierSet, version: Version) -> bool:
    """``specifier`` admits ``version`` and none of its neighbours (an exact pin, however spelled)."""
    release = list(version.release)
    neighbours = [Version(".".join(map(str, [*release[:-1], release[-1] + 1]))),
                  Version(".".join(map(str, [*release, 1])))]
    if release[-1] > 0:
        neighbours.append(Version(".".join(map(str, [*release[:-1], release[-1] - 1]))))
    return specifier.contains(version, prereleases=True) and not any(
        specifier.contains(n, prereleases=True) for n in neighbours)


def first_refused_python(admitted: SpecifierSet, theirs: SpecifierSet) -> int | None:
    """The oldest Python 3 minor (3.6 to 3.19) that ``admitted`` allows and ``theirs`` refuses, or ``None``: where
    pip installs a frontend and finds no release of a distribution its Requires-Python says it needs."""
    return next((minor for minor in range(6, 20)
                 if admitted.contains(f"3.{minor}.0") and not theirs.contains(f"3.{minor}.0")), None)
