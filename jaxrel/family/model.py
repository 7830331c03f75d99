"""The family model: frontend + backend + plugins + the API numbers the backend exports, and its release data.

Built by :mod:`jaxrel.family.config` from a project's ``[tool.jaxrel]`` table or by a built-in
profile (:mod:`jaxrel.family.profiles`); everything else in jaxrel takes a :class:`Family`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrel import policy, releasedata
from jaxrel.errors import BadInput
from jaxrel.gating import ApiGate
from jaxrel.guard import Plugin as GuardPlugin

__all__ = ["ApiNumber", "Backend", "ConfigError", "Family", "Frontend", "Package", "PinSet", "PluginSpec"]


class ConfigError(BadInput):
    """A family declaration is missing, malformed or names an unknown key."""


@dataclass(frozen=True)
class Package:
    """One distribution of the family and where its version lives."""

    distribution: str
    package: str
    version_file: str

    @property
    def version_module(self) -> str:
        """The version module's dotted path relative to the package (``version``)."""
        relative = Path(self.version_file).relative_to(self.package.replace(".", "/"))
        return ".".join(relative.with_suffix("").parts)


@dataclass(frozen=True)
class Frontend(Package):
    """The pure-Python frontend; it declares the minimum backend it supports.

    ``tests`` (paths in its source tree) are the own tests a compat cell runs by default,
    ``test_requirements`` the requirements file (in the tree) they need; ``smoke`` is code the
    import probe runs with ``frontend`` (the imported package) bound, adding to ``facts``.
    """

    minimum_backend_variable: str | None = None
    minimum_backend: str | None = None
    tests: tuple[str, ...] = ()
    test_requirements: str | None = None
    smoke: str | None = None


@dataclass(frozen=True)
class Backend(Package):
    """The compiled backend; ``ffi_header`` is the installed XLA FFI ``c_api.h``."""

    ffi_header: str | None = None
    # How the frontend's code spells the backend's release tuple, for gates such as
    # `jaxlib_version < (0, 10)` (jaxrel.gates.find.Release): dotted paths holding it,
    # `path()` for a function returning it, `parser(path)` for a parser of its version string.
    release_spellings: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApiNumber:
    """An integer API number the backend exports (``_version = N`` in ``file``)."""

    name: str
    file: str
    variable: str
    aliases: tuple[str, ...] = ()
    literal: bool = True  # False: set by a compiled module, not readable from source

    @property
    def names(self) -> tuple[str, ...]:
        """Every name the frontend uses for this number."""
        return (self.name, *self.aliases)


@dataclass(frozen=True)
class PluginSpec:
    """A plugin distribution (``*`` wildcards allowed); ``pinned`` = must equal the backend."""

    distribution: str
    package: str | None = None
    pinned: bool = True
    set: str | None = None  # the hardware plugin set it belongs to ("cuda12"); installed together
    released_separately: bool = False  # released on its own schedule: a missing release is a warning
    runtime: bool = False  # a runtime with its own numbering (libtpu), held to the frontend's extra pin

    def for_guard(self) -> GuardPlugin:
        """The guard's view of this plugin."""
        return GuardPlugin(self.distribution, self.pinned)


@dataclass(frozen=True)
class PinSet:
    """Pins sorted by role: the frontend (if given), the backend, the plugins."""

    frontend: policy.Pin | None
    backend: policy.Pin
    plugins: tuple[policy.Pin, ...]


@dataclass(frozen=True)
class Family:
    """A split-wheel family and its known release data.

    ``backend_releases`` maps a backend version to its measured API numbers;
    ``frontend_minimums`` maps a frontend release to the minimum backend it declares.
    """

    name: str
    frontend: Frontend
    backend: Backend
    plugins: tuple[PluginSpec, ...] = ()
    api_numbers: tuple[ApiNumber, ...] = ()
    backend_releases: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)
    frontend_minimums: dict[str, str] = field(default_factory=dict, compare=False)
    # frontend release -> runtime -> (the extra, its specifier) (jax 0.12.0.1: {"libtpu": ("tpu", "==0.0.50.*")})
    frontend_runtime_pins: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict, compare=False)
    compat_suite: bool = False  # jaxrel's compat suite (jax APIs) applies to this family

    def api_number(self, name: str) -> ApiNumber:
        """The API number called ``name`` or one of its aliases."""
        for number in self.api_numbers:
            if name in number.names:
                return number
        known = ", ".join(n for number in self.api_numbers for n in number.names)
        raise ConfigError(f"family {self.name!r} has no API number {name!r} (known: {known})")

    def plugin_for(self, distribution: str) -> PluginSpec | None:
        """The plugin spec whose pattern matches ``distribution``."""
        name = canonicalize_name(distribution)
        for plugin in self.plugins:
            if fnmatch.fnmatchcase(name, canonicalize_name(plugin.distribution)):
                return plugin
        return None

    def sort_pins(self, pins: Sequence[tuple[str, str]]) -> PinSet:
        """Sort ``(name, version)`` pairs into this family's frontend, backend and plugins.

        A name outside the family, a missing backend, or a distribution given twice is bad input.
        """
        frontend: policy.Pin | None = None
        backend: policy.Pin | None = None
        plugins: list[policy.Pin] = []
        seen: dict[str, str] = {}
        for name, version in pins:
            pin = policy.Pin(canonicalize_name(name), policy.parse_version(version, name))
            if pin.name in seen:
                raise BadInput(f"{pin.name} is pinned twice ({seen[pin.name]} and {version}); give one version")
            seen[pin.name] = version
            if pin.name == canonicalize_name(self.frontend.distribution):
                frontend = pin
            elif pin.name == canonicalize_name(self.backend.distribution):
                backend = pin
            elif self.plugin_for(pin.name):
                plugins.append(pin)
            else:
                known = [self.frontend.distribution, self.backend.distribution, *(p.distribution for p in self.plugins)]
                raise BadInput(f"{name!r} is not part of family {self.name!r} (known: {', '.join(known)})")
        if backend is None:
            raise BadInput(f"give the backend version: {self.backend.distribution}==VERSION")
        return PinSet(frontend, backend, tuple(plugins))

    def declared_minimum(self, frontend: policy.Pin | None) -> Version | None:
        """The minimum backend the release data says ``frontend`` declares; ``None`` when unknown."""
        if frontend is None:
            return None
        for version, minimum in self.frontend_minimums.items():
            if policy.parse_version(version) == frontend.version:
                return policy.parse_version(minimum)
        return None

    def runtime_pins(self, frontend: policy.Pin | None) -> dict[str, tuple[str, str]]:
        """Runtime → (the extra pinning it, its specifier) as ``frontend``'s release declares them, from the
        release data (measured from each release's METADATA); empty when unknown."""
        if frontend is None:
            return {}
        for version, pins in self.frontend_runtime_pins.items():
            if policy.parse_version(version) == frontend.version:
                return dict(pins)
        return {}

    def plugin_sets(self) -> dict[str, tuple[str, ...]]:
        """Plugin set name → its distributions (in declaration order)."""
        sets: dict[str, tuple[str, ...]] = {}
        for plugin in self.plugins:
            if plugin.set:
                sets[plugin.set] = (*sets.get(plugin.set, ()), plugin.distribution)
        return sets

    def unpinned(self, distributions: Iterable[str]) -> list[str]:
        """The given plugin distributions that are exempt from the equal-version rule (or unknown)."""
        return [name for name in distributions if not (spec := self.plugin_for(name)) or not spec.pinned]

    def released_backends(self) -> list[Version] | None:
        """The backend releases in the family's release data; ``None`` when it has none."""
        return [Version(version) for version in self.backend_releases] or None

    def gate(self, name: str) -> ApiGate:
        """An :class:`~jaxrel.gating.ApiGate` for API number ``name``, with this family's release data."""
        number = self.api_number(name)
        return ApiGate(
            number.name,
            backend=self.backend.distribution,
            module=number.file.removesuffix(".py").replace("/", "."),
            variable=number.variable,
            releases=releasedata.numbers(self.backend_releases, number.name),
        )

    def guard_arguments(self, frontend_version: str, minimum_backend: str) -> dict[str, Any]:
        """Keyword arguments for :func:`jaxrel.guard.check` for this family."""
        return {
            "frontend": self.frontend.distribution,
            "frontend_version": frontend_version,
            "backend": self.backend.distribution,
            "backend_package": self.backend.package,
            "version_module": self.backend.version_module,
            "minimum_backend": minimum_backend,
            "plugins": tuple(plugin.for_guard() for plugin in self.plugins),
        }
