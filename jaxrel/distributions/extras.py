"""Hardware plugin families as a frontend release declares them: in its extras.

jax 0.12.0.1 declares ``Provides-Extra: cuda12`` with ``jax-cuda12-plugin[with-cuda]==0.12.0.1``,
``rocm7-local`` with ``jax-rocm7-plugin==0.12.0.1.*``, ``tpu`` with ``libtpu==0.0.50.*`` and so
on. Every extra that brings a distribution the family profile knows as a plugin or runtime
makes a plugin family; extras bringing the same distributions (``cuda``, ``cuda12``,
``cuda12-local``) are one family. A plugin ``X-plugin`` pulls ``X-pjrt`` at its own version
(measured: ``jax-cuda13-plugin 0.12.0.1`` requires ``jax-cuda13-pjrt==0.12.0.1``), so the pjrt
joins the family when the profile knows it.

Pure: requirement strings and index listings in, families and unsatisfiable extras out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrel.distributions.index import Listing
from jaxrel.distributions.metadata import extra_requirements
from jaxrel.family import Family

__all__ = ["PluginFamily", "Unsatisfied", "extras_of", "local_flavour", "plugin_families", "unsatisfied_extras"]

_PLUGIN_NAME = re.compile(r"^(?P<stem>.+)-plugin$")


@dataclass(frozen=True)
class PluginFamily:
    """One hardware family: the extras that bring it and the distributions installed together."""

    name: str  # cuda12, cuda13, rocm7, oneapi, tpu
    extras: tuple[str, ...]
    distributions: tuple[str, ...]  # the plugin first, then its pjrt
    specifiers: tuple[tuple[str, str], ...]  # (distribution, specifier) as the first extra pins it
    pinned: bool  # every distribution is held to the backend's release number
    released_separately: bool = False
    runtime: bool = False  # a runtime with its own numbering (libtpu)
    # what the extra asks of a plugin besides itself: jax-cuda13-plugin[with-cuda] brings NVIDIA's CUDA wheels
    with_extras: tuple[tuple[str, str], ...] = ()  # (distribution, "extra[,extra]")
    local_extras: tuple[str, ...] = ()  # the extras bringing the same plugins without them (cuda13-local)
    local: bool = False  # the -local flavour: the plugins alone, relying on system libraries (see local_flavour)

    def specifier(self, distribution: str) -> SpecifierSet | None:
        """The extra's specifier on ``distribution`` (``None`` when the extra does not name it)."""
        text = dict(self.specifiers).get(distribution)
        return SpecifierSet(text) if text is not None else None


@dataclass(frozen=True)
class Unsatisfied:
    """An extra whose requirement no release on the index satisfies."""

    extra: str
    requirement: str  # jax-rocm7-plugin==0.12.0.1.*
    distribution: str
    newest: str | None  # the newest release there is (for this Python)
    released_separately: bool = False
    served_elsewhere: bool = False  # a runtime the index never had (libtpu from its own find-links page): not judged

    def message(self, frontend: str) -> str:
        newest = f"newest on the index: {self.newest}" if self.newest else "no release on the index"
        return (f'{frontend}[{self.extra}] cannot be installed from the index: {self.requirement} has no release '
                f"({newest})" + ("; released separately, expected later" if self.released_separately else ""))


def local_flavour(plugin_family: PluginFamily) -> PluginFamily | None:
    """The ``-local`` flavour of a family whose extras come both ways (``cuda13`` with NVIDIA's CUDA wheels,
    ``cuda13-local`` relying on a system CUDA) as a family of its own, or ``None``."""
    if not plugin_family.with_extras or not plugin_family.local_extras:
        return None
    return replace(plugin_family, name=f"{plugin_family.name}-local", extras=plugin_family.local_extras,
                   with_extras=(), local_extras=(), local=True)


def extras_of(requires_dist: Sequence[str], provides: Sequence[str] = ()) -> dict[str, list[Requirement]]:
    """Extra name → its requirements, each marker evaluated as pip evaluates it
    (:func:`jaxrel.distributions.metadata.extra_requirements`)."""
    return extra_requirements(list(requires_dist), list(provides))


def _family_name(distribution: str, extras: Sequence[str]) -> str:
    match = _PLUGIN_NAME.match(distribution)
    if match:
        return match["stem"].split("-", 1)[-1]
    return min(extras, key=lambda e: (len(e), e))


def plugin_families(family: Family, requires_dist: Sequence[str]) -> dict[str, PluginFamily]:
    """The plugin families the frontend's extras declare, in the order the extras come."""
    groups: dict[tuple[str, ...], list[tuple[str, list[Requirement]]]] = {}
    for extra, requirements in extras_of(requires_dist).items():
        plugins = [r for r in requirements if family.plugin_for(r.name)]
        if not plugins:
            continue
        names = [str(canonicalize_name(r.name)) for r in plugins]
        for name in list(names):
            match = _PLUGIN_NAME.match(name)
            companion = f"{match['stem']}-pjrt" if match else None
            if companion and companion not in names and family.plugin_for(companion):
                names.append(companion)
        groups.setdefault(tuple(names), []).append((extra, plugins))
    families: dict[str, PluginFamily] = {}
    for distributions, members in groups.items():
        extras = tuple(extra for extra, _ in members)
        specs = [family.plugin_for(name) for name in distributions]
        first = {str(canonicalize_name(r.name)): str(r.specifier) for r in members[0][1]}
        name = _family_name(distributions[0], extras)
        asked = {str(canonicalize_name(r.name)): ",".join(sorted(r.extras))
                 for _, requirements in members for r in requirements if r.extras}
        bare = tuple(extra for extra, rs in members if not any(r.extras for r in rs))
        families[name] = PluginFamily(
            name, extras, distributions, tuple(first.items()),
            pinned=all(spec is not None and spec.pinned for spec in specs),
            released_separately=any(spec is not None and spec.released_separately for spec in specs),
            runtime=any(spec is not None and spec.runtime for spec in specs),
            with_extras=tuple(sorted(asked.items())), local_extras=bare if asked else (),
        )
    return families


def unsatisfied_extras(
    family: Family, requires_dist: Sequence[str], listings: Mapping[str, Listing],
    python: str | None = None, tags: Sequence[Tag] = (),
) -> list[Unsatisfied]:
    """Every (extra, requirement) of a plugin family that no release on the index satisfies.

    Only the family's own distributions (backend, plugins, runtimes) are checked, and a
    plugin's pjrt at the plugin's version. Without ``python`` any non-yanked file counts (the
    question is whether the release exists); with it, only releases with a wheel for it.
    """
    backend = str(canonicalize_name(family.backend.distribution))
    found: list[Unsatisfied] = []
    families = plugin_families(family, requires_dist)
    extras = extras_of(requires_dist)
    for plugin_family in families.values():
        for extra in plugin_family.extras:
            for requirement in extras.get(extra, []):
                name = str(canonicalize_name(requirement.name))
                if name != backend and not family.plugin_for(name):
                    continue
                listing = listings.get(name)
                if listing is None:
                    continue
                versions = _installable(listing, python, tags)
                matching = [v for v in versions if requirement.specifier.contains(v, prereleases=True)]
                spec = family.plugin_for(name)
                separate = bool(spec and spec.released_separately)
                if not matching:
                    found.append(Unsatisfied(extra, f"{name}{requirement.specifier}", name,
                                             str(versions[-1]) if versions else None, separate,
                                             bool(spec and spec.runtime and not versions)))
                    continue
                match = _PLUGIN_NAME.match(name)
                companion = f"{match['stem']}-pjrt" if match else None
                if companion and companion in listings:
                    pjrt = _installable(listings[companion], python, tags)
                    if matching[-1] not in pjrt:
                        found.append(Unsatisfied(extra, f"{companion}=={matching[-1]}", companion,
                                                 str(pjrt[-1]) if pjrt else None, separate))
    return found


def _installable(listing: Listing, python: str | None, tags: Sequence[Tag]) -> list[Version]:
    if python is None:
        return sorted({f.version for f in listing.files if f.yanked is None})
    return [v for v in listing.versions() if listing.wheel_for(v, python, tags)]
