"""The compat matrix: frontend × backend releases × plugin sets × Python → cells with expected verdicts.

Pure: it reads index listings and the frontend's declared metadata handed to it and
does no I/O. Positive cells are every backend release the policy admits for the
frontend (minimum ≤ backend ≤ frontend) that has a wheel for the cell's Python;
negative cells are chosen on purpose — the release just below the minimum, the first
one newer than the frontend, a plugin set at another version than the backend —
and are expected to be refused at import by the guard with its fix command.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.version import Version

from jaxrel import policy
from jaxrel._util.text import markdown_table
from jaxrel.distributions.extras import PluginFamily, local_flavour, plugin_families, unsatisfied_extras
from jaxrel.distributions.index import Listing
from jaxrel.errors import BadInput
from jaxrel.family import Family

__all__ = ["BackendFilter", "Cell", "FrontendSpec", "Matrix", "MatrixError", "Outcome", "PIN_RULE", "Purpose",
    "build_matrix", "expectation", "installable_versions", "known_plugin_sets"]

BackendFilter = Container[Version] | SpecifierSet  # a set of versions or a specifier


class MatrixError(BadInput):
    """The matrix cannot be built (no backend admitted, unknown plugin set, …)."""


@dataclass(frozen=True)
class FrontendSpec:
    """The frontend every cell tests, as its metadata declares it."""

    name: str
    version: str
    minimum_backend: str
    source: str  # how it is installed: "sdist FILE (HEAD stand-in)", "wheel FILE", "source PATH"
    backend_range: str | None = None  # its Requires-Dist specifier on the backend
    requires_python: str | None = None
    requires_dist: tuple[str, ...] = ()  # every Requires-Dist line, extras included (plugin families)


class Purpose(StrEnum):
    """Why a cell is in the matrix."""

    ADMITTED = "admitted"  # a backend release the policy admits
    PLUGINS = "plugins"  # a plugin family on an admitted backend
    BELOW_MINIMUM = "below-minimum"  # the release just below the frontend's minimum
    NEWER_THAN_FRONTEND = "newer-than-frontend"  # the first release newer than the frontend
    MISMATCHED_PLUGIN = "mismatched-plugin"  # a pinned plugin family at another version than the backend


class Outcome(StrEnum):
    """What the guard does with a cell's environment: expected (the first two) or observed (any)."""

    ACCEPTED = "accepted"
    REFUSED = "refused"
    INSTALL_FAILED = "install-failed"  # the environment could not be built
    GUARD_ERROR = "guard-error"  # the guard crashed instead of answering


@dataclass(frozen=True)
class Cell:
    """One environment to build and test, and the verdict the policy expects for it."""

    id: str
    python: str
    backend: str
    plugins: tuple[tuple[str, str], ...]
    purpose: Purpose
    expected: Outcome  # accepted or refused
    rules: tuple[str, ...] = ()  # the rules the policy says are broken
    fix: str | None = None
    with_extras: tuple[tuple[str, str], ...] = ()  # plugin extras its family's extra asks for (with-cuda)
    local: bool = False  # a -local flavour: the plugins alone, relying on the system's CUDA (or ROCm …)

    @property
    def negative(self) -> bool:
        return self.expected == Outcome.REFUSED

    @property
    def device(self) -> str:
        """The runner label a cell's device tests need: ``tpu`` (libtpu), ``gpu`` (other plugins), or none.

        Only accepted plugin cells have device tests; refused cells stop at the guard.
        """
        if self.negative or not self.plugins:
            return ""
        return "tpu" if any(name.startswith("libtpu") for name, _ in self.plugins) else "gpu"


@dataclass
class Matrix:
    """All cells for one frontend, with notes on cells that could not be formed."""

    family: str
    frontend: FrontendSpec
    backend: str
    cells: list[Cell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unsatisfiable: list[dict[str, Any]] = field(default_factory=list)  # extras the index cannot satisfy
    pool: list[Cell] = field(default_factory=list)  # every cell before select(); empty: the cells themselves

    def select(self, patterns: Sequence[str]) -> Matrix:
        """Only the cells whose id matches one of ``patterns`` (``*`` wildcards)."""
        from fnmatch import fnmatchcase

        chosen = [c for c in self.cells if any(fnmatchcase(c.id, p) for p in patterns)]
        if not chosen:
            raise MatrixError(f"no cell matches {', '.join(patterns)}; cells: {', '.join(c.id for c in self.cells)}")
        return Matrix(self.family, self.frontend, self.backend, chosen, self.notes,
                      unsatisfiable=self.unsatisfiable, pool=self.pool or self.cells)

    def reference_for(self, cell: Cell) -> Cell | None:
        """The newest admitted backend's cell (no plugins) on ``cell``'s Python, selected or not.

        A test failing on a cell is rerun there: passing on it makes the failure a compat regression.
        """
        admitted = [c for c in self.pool or self.cells if c.python == cell.python and c.purpose == Purpose.ADMITTED]
        return max(admitted, key=lambda c: _key(c.backend), default=None)

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "frontend": asdict(self.frontend), "backend": self.backend,
                "cells": [asdict(cell) for cell in self.cells], "notes": self.notes,
                "unsatisfiable": self.unsatisfiable}

    def to_markdown(self) -> str:
        front = self.frontend
        rows = [(f"`{cell.id}`", cell.python, cell.backend,
                 ", ".join(f"{name} {version}" for name, version in cell.plugins) or "–", cell.purpose,
                 cell.expected + (f" ({', '.join(cell.rules)})" if cell.rules else "")) for cell in self.cells]
        lines = [f"**{front.name} {front.version}** ({front.source}); minimum {self.backend} {front.minimum_backend}",
                 "", markdown_table(("cell", "Python", self.backend, "plugins", "purpose", "expected"), rows)]
        lines += [f"\n- {note}" for note in self.notes]
        return "\n".join(lines)

    def to_github(self, shards: int = 1) -> str:
        """A GitHub Actions ``strategy.matrix`` object (``include`` list): one job per cell and shard.

        A positive cell is split into ``shards`` jobs (``"shard": "I/N"``, for ``jaxrel compat --shard``);
        a negative cell runs no tests and stays one job (``"1/1"``). ``name`` tells the jobs apart in
        names that cannot hold a slash (artifacts): the cell id, and ``-IofN`` when split.
        """
        if shards < 1:
            raise MatrixError(f"shards must be at least 1, not {shards}")
        include = [{"cell": c.id, "python": c.python, "backend": c.backend, "expected": c.expected,
                    "plugins": " ".join(f"{n}=={v}" for n, v in c.plugins), "device": c.device,
                    "shard": f"{i}/{count}", "name": c.id if count == 1 else f"{c.id}-{i}of{count}"}
                   for c in self.cells for count in [1 if c.negative else shards] for i in range(1, count + 1)]
        return json.dumps({"include": include}, separators=(",", ":"))


def _key(version: Version | str) -> tuple[int, ...]:
    """:func:`jaxrel.policy.release_key` of a version or its text."""
    return policy.release_key(version if isinstance(version, Version) else policy.parse_version(version))


def installable_versions(listing: Listing, python: str, tags: Sequence[Tag]) -> list[Version]:
    """Final releases of ``listing`` with a non-yanked wheel for ``python``, oldest first."""
    return [v for v in listing.versions() if policy.is_final(v) and listing.wheel_for(v, python, tags)]


def expectation(
    family: Family, frontend: FrontendSpec, backend: str, plugins: Sequence[tuple[str, str]],
    released_backends: Sequence[Version],
) -> policy.Verdict:
    """The policy's verdict for one cell."""
    return policy.verdict(
        backend=policy.Pin(family.backend.distribution, Version(backend)),
        backend_name=family.backend.distribution,
        frontend=policy.Pin(frontend.name, Version(frontend.version)),
        minimum_backend=Version(frontend.minimum_backend),
        plugins=[policy.Pin(name, Version(version)) for name, version in plugins],
        exempt_plugins=family.unpinned(name for name, _ in plugins),
        released_backends=released_backends,
    )


def known_plugin_sets(family: Family, frontend: FrontendSpec) -> dict[str, PluginFamily]:
    """The frontend's plugin families: from its extras (each ``-local`` flavour right after its family), then
    any set the family declares that they lack."""
    sets: dict[str, PluginFamily] = {}
    for name, found in plugin_families(family, frontend.requires_dist).items():
        sets[name] = found
        if (flavour := local_flavour(found)) is not None:
            sets[flavour.name] = flavour
    for name, distributions in family.plugin_sets().items():
        if name not in sets:
            specs = [family.plugin_for(d) for d in distributions]
            sets[name] = PluginFamily(name, (), distributions, (), all(s is not None and s.pinned for s in specs),
                                      any(s is not None and s.released_separately for s in specs),
                                      any(s is not None and s.runtime for s in specs))
    return sets


def build_matrix(
    family: Family,
    frontend: FrontendSpec,
    listings: Mapping[str, Listing],
    pythons: Mapping[str, Sequence[Tag]],
    *,
    backends: BackendFilter | None = None,
    plugin_sets: Sequence[str] = (),
    plugins_on: str = "newest",
    negatives: bool = True,
) -> Matrix:
    """Cells for ``frontend`` on each Python in ``pythons`` (version → accepted wheel tags).

    ``listings`` holds the backend's and the plugins' index listings; ``backends``
    (a specifier set or a set of versions) narrows the positive cells; ``plugin_sets``
    are added at the backend's version to the newest admitted backend
    (``plugins_on="newest"``) or to every one (``"all"``).
    """
    if plugins_on not in ("newest", "all"):
        raise MatrixError(f"plugins_on must be 'newest' or 'all', not {plugins_on!r}")
    known_sets = known_plugin_sets(family, frontend)
    for name in plugin_sets:
        if name not in known_sets:
            known = ", ".join(known_sets) or "none"
            raise MatrixError(f"unknown plugin set {name!r}; family {family.name} has: {known}")
    backend_name = family.backend.distribution
    backend_listing = listings[backend_name]
    released = [v for v in backend_listing.versions() if policy.is_final(v)]
    matrix = Matrix(family.name, frontend, backend_name)
    for python, tags in pythons.items():
        _cells_for_python(matrix, family, frontend, listings, python, tags, released,
                          backends, plugin_sets, plugins_on, negatives, known_sets)
    for missing in unsatisfied_extras(family, frontend.requires_dist, listings):
        matrix.unsatisfiable.append({"extra": missing.extra, "requirement": missing.requirement,
                                     "distribution": missing.distribution, "newest": missing.newest,
                                     "released_separately": missing.released_separately})
        matrix.notes.append(missing.message(f"{frontend.name}=={frontend.version}"))
    if not any(cell.expected == Outcome.ACCEPTED for cell in matrix.cells):
        raise MatrixError(
            f"no {backend_name} release admitted by {frontend.name} {frontend.version} "
            f"(minimum {frontend.minimum_backend}) has a wheel for Python {', '.join(pythons)}"
            f"{' within ' + str(backends) if backends else ''}; choose another --python or --backends"
        )
    return matrix


def _cells_for_python(
    matrix: Matrix, family: Family, frontend: FrontendSpec, listings: Mapping[str, Listing], python: str,
    tags: Sequence[Tag], released: Sequence[Version], backends: BackendFilter | None,
    plugin_sets: Sequence[str], plugins_on: str, negatives: bool, known_sets: Mapping[str, PluginFamily],
) -> None:
    backend_name = family.backend.distribution
    available = installable_versions(listings[backend_name], python, tags)

    def add(backend: Version, purpose: Purpose, plugins: Sequence[tuple[str, str]] = (), suffix: str = "",
            flavour: PluginFamily | None = None) -> None:
        result = expectation(family, frontend, str(backend), plugins, released)
        cell_id = f"py{python}-{backend_name}{backend}{suffix}"
        matrix.cells.append(Cell(cell_id, python, str(backend), tuple(plugins), purpose,
                                 Outcome.ACCEPTED if result.compatible else Outcome.REFUSED,
                                 tuple(v.rule for v in result.violations), result.fix,
                                 flavour.with_extras if flavour else (), flavour.local if flavour else False))

    admitted = [v for v in available if expectation(family, frontend, str(v), (), released).compatible]
    declared = SpecifierSet(frontend.backend_range) if frontend.backend_range else None
    for version in admitted:
        if declared is not None and not declared.contains(version, prereleases=True):
            matrix.notes.append(f"{backend_name} {version}: the policy admits it but {frontend.name}'s "
                                f"Requires-Dist ({frontend.backend_range}) does not")
    chosen = [v for v in admitted if backends is None or v in backends]
    for version in chosen:
        add(version, Purpose.ADMITTED)
    newest = chosen[-1] if chosen else None
    placed = _plugin_cells(matrix, known_sets, plugin_sets, chosen, plugins_on, listings, python, tags, add)
    if not negatives:
        return
    minimum_key = _key(frontend.minimum_backend)
    below = [v for v in available if _key(v) < minimum_key]
    if below:
        add(below[-1], Purpose.BELOW_MINIMUM)
    else:
        matrix.notes.append(f"Python {python}: no {backend_name} release below the minimum "
                            f"{frontend.minimum_backend} is installable; no below-minimum cell")
    newer = [v for v in available if _key(v) > _key(frontend.version)]
    if newer:
        add(newer[0], Purpose.NEWER_THAN_FRONTEND)
    else:
        matrix.notes.append(f"Python {python}: no {backend_name} release newer than {frontend.name} "
                            f"{frontend.version} is installable; no newer-than-frontend cell")
    for set_name in plugin_sets:
        plugin_family = known_sets[set_name]
        if plugin_family.local:
            continue  # the same distributions as its family, whose mismatched cell tests the pin
        if not plugin_family.pinned:
            matrix.notes.append(f"Python {python}: plugin set {set_name} is exempt from {PIN_RULE} "
                                f"({'own numbering' if plugin_family.runtime else 'released separately'}); "
                                "no mismatched-plugin cell")
            continue
        base = placed.get(set_name, newest)
        if base is None:
            continue
        other = _mismatched_version(plugin_family.distributions, base, listings, python, tags)
        plugins = _plugin_pins(plugin_family, other, listings, python, tags) if other else None
        if plugins:
            add(base, Purpose.MISMATCHED_PLUGIN, plugins, f"-{set_name}@{other}")
        else:
            matrix.notes.append(f"Python {python}: plugin set {set_name} has no other installable release; "
                                "no mismatched-plugin cell")


PIN_RULE = policy.Rule.PLUGIN_MATCHES_BACKEND.value


def _plugin_cells(
    matrix: Matrix, known_sets: Mapping[str, PluginFamily], plugin_sets: Sequence[str], chosen: Sequence[Version],
    plugins_on: str, listings: Mapping[str, Listing], python: str, tags: Sequence[Tag],
    add: Callable[[Version, Purpose, Sequence[tuple[str, str]], str, PluginFamily], None],
) -> dict[str, Version]:
    """A positive cell per family on the newest admitted backend it installs with (or on each); where placed."""
    placed: dict[str, Version] = {}
    backend_name = matrix.backend
    for set_name in plugin_sets:
        plugin_family = known_sets[set_name]
        candidates = list(reversed(chosen)) if plugins_on == "newest" else chosen
        added = False
        for version in candidates:
            plugins = _plugin_pins(plugin_family, version, listings, python, tags)
            if plugins is None:
                if plugins_on == "all":
                    matrix.notes.append(f"Python {python}: plugin set {set_name} has no installable release "
                                        f"for {backend_name} {version}; no plugin cell for it")
                continue
            add(version, Purpose.PLUGINS, plugins, f"-{set_name}", plugin_family)
            placed.setdefault(set_name, version)
            added = True
            if plugins_on == "newest":
                break
        if not added and plugins_on == "newest":
            matrix.notes.append(f"Python {python}: plugin set {set_name} ({', '.join(plugin_family.distributions)}) "
                                f"has no installable release for any admitted {backend_name} "
                                f"({', '.join(str(v) for v in chosen) or 'none'}); no plugin cell")
    return placed


def _plugin_pins(
    plugin_family: PluginFamily, version: Version, listings: Mapping[str, Listing], python: str,
    tags: Sequence[Tag],
) -> list[tuple[str, str]] | None:
    """Every distribution of a family for backend ``version``, or ``None`` when one has no installable wheel.

    A pinned distribution is at the backend's version; an exempt one (ROCm) at its newest release
    with the backend's release number (``0.12.0.post1`` for 0.12.0); a runtime with its own
    numbering (libtpu) at the newest release the frontend's extra admits.
    """
    pins = []
    for name in plugin_family.distributions:
        listing = listings.get(name)
        if listing is None:
            return None
        chosen: Version | None
        if plugin_family.pinned:
            chosen = version if listing.wheel_for(version, python, tags) else None
        else:
            available = installable_versions(listing, python, tags)
            same = [v for v in available if _key(v) == _key(version)]
            specifier = plugin_family.specifier(name)
            admitted = [v for v in available if specifier is not None and specifier.contains(v)]
            chosen = same[-1] if same else (admitted[-1] if admitted and plugin_family.runtime else None)
        if chosen is None:
            return None
        pins.append((name, str(chosen)))
    return pins


def _mismatched_version(
    distributions: Sequence[str], backend: Version, listings: Mapping[str, Listing], python: str,
    tags: Sequence[Tag],
) -> Version | None:
    """The plugin set's closest other release: the newest older one, else the oldest newer one."""
    common = None
    for name in distributions:
        listing = listings.get(name)
        versions = set(installable_versions(listing, python, tags)) if listing else set()
        common = versions if common is None else common & versions
    others = sorted(v for v in common or () if _key(v) != _key(backend))
    older = [v for v in others if _key(v) < _key(backend)]
    return older[-1] if older else (others[0] if others else None)
