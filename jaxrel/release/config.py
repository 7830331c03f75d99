"""The release configuration: which components a family releases from this tree, and how.

Declared under ``[tool.jaxrel.release]`` beside the family::

    [tool.jaxrel.release]
    changelog = "CHANGELOG.md"          # needs a heading naming each released version
    tag = "v{version}"                  # the git tag of a release
    [tool.jaxrel.release.components.mylib]           # keyed by distribution name
    path = "frontend"                   # the directory holding its pyproject.toml
    build = "python"                    # python -m build (sdist + wheel) | "bazel" | "external"
    versions = ["frontend/mylib/version.py:_version", "frontend/pyproject.toml:project.version"]
    minimum-backend = "frontend/mylib/version.py:_minimum_core_version"   # frontend only
    [tool.jaxrel.release.components.mylib-core]
    build = "bazel"
    targets = ["//core:wheel"]          # py_wheel_file targets, built by ``jaxrel build``
    bazel-options = ["--config=manylinux"]   # options for its release build (a .bazelrc config, say)

A family that releases the way jax does declares more (the built-in jax profile is such a table,
``jaxrel/data/jax-release.toml``)::

    versioning = "next"                 # the tree holds the next release's version; bump after releasing
    changelog-style = "unreleased"      # "## Unreleased" on top; the release's dated heading after it ships
    changelog-heading = "JAX {version} ({date})"
    stamped = ["jax/version.py:_release_version"]   # written by the build (nightly, rc), never committed
    [tool.jaxrel.release.components.jaxlib]
    build = "external"                  # built elsewhere (a CI matrix), gathered by `jaxrel release collect`
    shares-version-with = "jax"
    current = ["setup.py:_current_jaxlib_version"]        # its version in the release being made
    latest = ["setup.py:_latest_jaxlib_version_on_pypi"]  # its newest release on the index
    [tool.jaxrel.release.components.jax-cuda12-plugin]
    pins = ["jax-cuda12-pjrt"]          # it requires these ==V (and need not pin the backend)
    platforms = ["manylinux", "linux"]  # the platforms its wheels are built for (CUDA: Linux only)
    python-tag = "py3"                  # one py3 wheel per platform instead of one per CPython (pjrt)
    present-if-named-in = "setup.py"    # in a release only when that file names it (or what pins it)
    released-separately = true          # its own schedule (the family's flag: say it there, not here)
    sdist = true                        # it publishes an sdist beside its wheels (default: the frontend, or
                                        # a component built by `python -m build`); collect asks for it

A version location is ``FILE:KEY``: a dotted key in a ``.toml`` file, else a top-level
string assignment in a Python or Starlark file (``.py``, ``.bzl``). Each component's role
(frontend, backend, plugin, extension) comes from the family. Errors are
:class:`~jaxrel.family.ConfigError`, one line naming the key and the fix.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.utils import canonicalize_name

from jaxrel._util import localfiles
from jaxrel._util.shape import Shape, found, is_name, is_relative_path, printable
from jaxrel.distributions.filenames import Slot
from jaxrel.family import ConfigError, Family

__all__ = ["BUILDERS", "BUILTIN", "CHANGELOG_STYLES", "ROLES", "VERSIONING", "Component", "Location", "ReleaseConfig",
           "changelog_heading", "jax_release", "release_from_config", "role_of", "tag_template", "upload_order"]

BUILDERS = ("python", "bazel", "external")
ROLES = ("backend", "plugin", "extension", "frontend")  # also the safe upload order
_RELEASE_KEYS = {"changelog", "tag", "components", "versioning", "changelog-style", "changelog-heading", "stamped"}
_COMPONENT_KEYS = {"path", "build", "targets", "bazel-options", "versions", "minimum-backend", "shares-version-with",
                   "current", "latest", "pins", "platforms", "python-tag", "present-if-named-in", "released-separately",
                   "sdist"}
VERSIONING = ("release", "next")
CHANGELOG_STYLES = ("headings", "unreleased")


@dataclass(frozen=True)
class Location:
    """Where a version string lives: ``file`` (relative to the project root) and ``key``."""

    file: str
    key: str

    @property
    def kind(self) -> str:
        """``toml`` (dotted key) or ``assignment`` (Python/Starlark ``NAME = "..."``)."""
        return "toml" if self.file.endswith(".toml") else "assignment"

    def __str__(self) -> str:
        return f"{self.file}:{self.key}"

    @classmethod
    def parse(cls, text: Any, where: str) -> Location:
        file, sep, key = text.rpartition(":") if isinstance(text, str) else ("", "", "")
        if not sep or not key or len(key) > 200 or not is_relative_path(file):
            raise ConfigError(f"[{where}] {found(text)} is not FILE:KEY with FILE relative to the project root "
                              "(e.g. \"mylib/version.py:_version\" or \"pyproject.toml:project.version\")")
        if not file.endswith(".toml") and not key.isidentifier():
            raise ConfigError(f"[{where}] {found(text)}: {key[:60]!r} is not a variable name")
        if file.endswith(".toml") and not (key.isprintable() and all(part.strip() for part in key.split("."))):
            raise ConfigError(f"[{where}] {found(text)}: {key[:60]!r} is not a dotted TOML key")
        return cls(file, key)


@dataclass(frozen=True)
class Component:
    """One distribution this tree releases."""

    distribution: str
    role: str  # one of ROLES
    build: str  # one of BUILDERS
    path: str = "."
    targets: tuple[str, ...] = ()
    versions: tuple[Location, ...] = ()
    minimum_backend: Location | None = None
    shares_version_with: str | None = None  # the component whose version locations it shares (jaxlib: jax)
    current: tuple[Location, ...] = ()  # its version in the release being made (set by a bump)
    latest: tuple[Location, ...] = ()  # its newest release on the index (set by the post-release bump)
    pins: tuple[str, ...] = ()  # distributions it requires ==V (a plugin and its pjrt)
    platforms: tuple[str, ...] = ()  # platform tag prefixes its wheels are built for (empty: any)
    python_tag: str | None = None  # "py3": one wheel per platform for every Python (else one per CPython)
    present_if_named_in: str | None = None  # in a release only when this file names it (or what pins it)
    released_separately: bool = False  # its own schedule: listed, never in this release
    sdist: bool = False  # it publishes an sdist beside its wheels (collect asks for it)
    bazel_options: tuple[str, ...] = ()  # options for its release build (``--config=manylinux``: portable wheels)

    def expected_slots(self, backend: set[Slot]) -> set[Slot]:
        """The slots this plugin's wheels fill when the backend's wheels fill ``backend``: the backend's on this
        component's platforms (the ABI included: a free-threaded backend wheel wants a free-threaded plugin
        wheel), one ``py3-none`` slot per platform for a ``python-tag = "py3"``."""
        slots = {slot for slot in backend
                 if not self.platforms or any(slot[2].startswith(prefix) for prefix in self.platforms)}
        return {("py3", "none", platform) for _, _, platform in slots} if self.python_tag == "py3" else slots

    @property
    def pyproject(self) -> str:
        """The component's ``pyproject.toml``, relative to the project root."""
        return str(PurePosixPath(self.path) / "pyproject.toml")


@dataclass(frozen=True)
class ReleaseConfig:
    """The components (in safe upload order), the changelog and the tag format."""

    components: tuple[Component, ...]
    changelog: str | None = "CHANGELOG.md"
    tag: str = "v{version}"
    versioning: str = "release"  # one of VERSIONING
    changelog_style: str = "headings"  # one of CHANGELOG_STYLES
    changelog_heading: str = "{version}"  # the heading of a released version ({version}, {date})
    stamped: tuple[Location, ...] = ()  # written by the build, never committed

    def tag_for(self, version: str) -> str:
        return self.tag.format(version=version)

    def shared_bazel_options(self) -> tuple[str, ...] | None:
        """The ``bazel-options`` every component built with Bazel is released with (``()`` when none is built
        with Bazel); ``None`` when they differ, so that no one set builds all of them as released."""
        found = {c.bazel_options for c in self.components if c.build == "bazel"}
        return () if not found else (found.pop() if len(found) == 1 else None)

    def by_role(self, role: str) -> list[Component]:
        return [c for c in self.components if c.role == role]

    def component(self, name: str) -> Component:
        """A component by distribution name or role (``frontend``, ``backend``)."""
        wanted = canonicalize_name(name)
        found = [c for c in self.components if canonicalize_name(c.distribution) == wanted or c.role == name]
        if not found:
            known = ", ".join(c.distribution for c in self.components)
            raise ConfigError(f"no release component {name!r} (known: {known}, or a role: {', '.join(ROLES)})")
        return found[0]

    def frontend(self) -> Component | None:
        return next(iter(self.by_role("frontend")), None)

    def lead(self) -> Component:
        """The component whose version names the release: the frontend, else the first one
        (a tree that releases only extensions or plugins of a family)."""
        return self.frontend() or self.components[0]

    def backend(self) -> Component | None:
        return next(iter(self.by_role("backend")), None)

    def version_locations(self, component: Component) -> tuple[Location, ...]:
        """Where ``component``'s version is written: its own locations, or the ones it shares."""
        if component.shares_version_with and not component.versions:
            return self.component(component.shares_version_with).versions
        return component.versions

    def released_with(self) -> list[Component]:
        """The components released together (not those released separately)."""
        return [c for c in self.components if not c.released_separately]


def role_of(family: Family, distribution: str) -> str:
    """The family role of ``distribution``; anything else released beside it is an extension."""
    name = canonicalize_name(distribution)
    if name == canonicalize_name(family.frontend.distribution):
        return "frontend"
    if name == canonicalize_name(family.backend.distribution):
        return "backend"
    return "plugin" if family.plugin_for(name) else "extension"


def tag_template(tag: Any) -> bool:
    """A tag template names ``{version}`` once and no other field (other braces doubled); the tag it
    makes is a valid git ref name part (no spaces, no ``~^:?*[\\``)."""
    if not isinstance(tag, str) or len(tag) > 200:
        return False
    try:
        fields = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(tag)
                  if name is not None]
    except ValueError:  # a single '{' or '}'
        return False
    rendered = tag.format(version="1.0") if fields == [("version", "", None)] else ""
    return bool(rendered) and all(c.isprintable() and c not in " ~^:?*[\\" for c in rendered)


def _component(shape: Shape, distribution: str, value: Any, family: Family) -> Component:
    at = f"tool.jaxrel.release.components.{distribution[:60]}"
    if not is_name(distribution):
        raise shape.error("tool.jaxrel.release.components", f"{found(distribution)} is not a project name "
                          "(letters, digits, '.', '_', '-', at most 100 characters); key each component by its "
                          "distribution name")
    row = shape.table(value, at, _COMPONENT_KEYS)
    build = shape.field(row, "build", at, lambda v: v in BUILDERS, f"one of {', '.join(BUILDERS)}", "python")
    role = role_of(family, distribution)
    try:
        versions, current, latest = (tuple(Location.parse(v, at) for v in shape.strings(row, key, at, ()))
                                     for key in ("versions", "current", "latest"))
        minimum = Location.parse(row["minimum-backend"], at) if "minimum-backend" in row else None
    except ConfigError as error:
        raise ConfigError(printable(f"{shape.source}: {error}")) from None
    shares = shape.field(row, "shares-version-with", at, is_name, "a component's distribution name", None)
    spec = family.plugin_for(distribution)
    family_says = bool(spec is not None and (spec.released_separately or spec.runtime))  # one flag: the family's
    separately = shape.boolean(row, "released-separately", at, family_says)
    if spec is not None and separately != family_says:
        raise shape.error(at, f"'released-separately = {str(separately).lower()}', but the family's plugin "
                          f"{spec.distribution} says {str(family_says).lower()} (released-separately in "
                          "[[tool.jaxrel.plugins]], or a runtime's own numbering); say it once, in the family")
    if not versions and not shares and not separately:
        raise shape.error(at, "'versions' is empty; list every FILE:KEY that holds this component's version "
                          "(or name the component it shares its version with: shares-version-with)")
    pins = tuple(shape.field(row, "pins", at, lambda v: isinstance(v, list) and all(is_name(n) for n in v),
                             "a list of distribution names", []))
    platforms = tuple(shape.field(row, "platforms", at, lambda v: isinstance(v, list) and all(
        isinstance(p, str) and p.isidentifier() for p in v), "a list of platform tag prefixes (\"manylinux\")", []))
    python_tag = shape.field(row, "python-tag", at, lambda v: v == "py3", "\"py3\"", None)
    named_in = shape.field(row, "present-if-named-in", at, is_relative_path, "a file relative to the project root",
                           None)
    if minimum is not None and role != "frontend":
        raise shape.error(at, f"'minimum-backend' belongs to the frontend, and {distribution} is the {role}")
    targets = shape.strings(row, "targets", at, ())
    if build == "bazel" and not targets:
        raise shape.error(at, "'targets' is empty; name the py_wheel_file targets, e.g. [\"//core:wheel\"]")
    options = tuple(shape.field(row, "bazel-options", at, lambda v: isinstance(v, list) and all(
        isinstance(o, str) and o.startswith("--") and o.isprintable() and " " not in o and len(o) <= 200 for o in v),
        "a list of Bazel options, each one word starting with -- (\"--config=manylinux\")", []))
    if options and build != "bazel":
        raise shape.error(at, f"'bazel-options' is for a component built by Bazel, and {distribution} is built "
                          f"by {build}; remove it")
    path = shape.field(row, "path", at, is_relative_path, "a directory relative to the project root", ".")
    return Component(distribution, role, build, path, targets, versions, minimum, shares, current, latest, pins,
                     platforms, python_tag, named_in, separately,
                     shape.boolean(row, "sdist", at, build == "python" or role == "frontend"), options)


def release_from_config(table: Any, family: Family, source: str = "pyproject.toml") -> ReleaseConfig:
    """Validate a parsed ``[tool.jaxrel.release]`` table against ``family``."""
    where = "tool.jaxrel.release"
    shape = Shape(source, ConfigError)

    def fail(at: str, problem: str) -> ConfigError:
        return ConfigError(printable(f"{source}: [{at}] {problem}"))

    top = shape.table(table, where, _RELEASE_KEYS)
    tag = shape.field(top, "tag", where, tag_template, "a string containing {version} once and no other "
                      "field, other braces doubled, no spaces (e.g. \"v{version}\")", "v{version}")
    changelog = shape.field(top, "changelog", where, is_relative_path, "a file path relative to the project root",
                            "CHANGELOG.md")
    declared = top.get("components", {})
    if not isinstance(declared, dict):
        raise fail(f"{where}.components", f"must be a table of components keyed by distribution name, not "
                   f"{found(declared)}")
    components = [_component(shape, distribution, value, family) for distribution, value in declared.items()]
    if not components:
        raise fail(f"{where}.components", "no components; declare at least one to release")
    names = {canonicalize_name(c.distribution) for c in components}
    for component in components:
        for other in (component.shares_version_with, *component.pins):
            if other is not None and canonicalize_name(other) not in names:
                raise fail(f"{where}.components.{component.distribution[:60]}", f"names {other!r}, which is not a "
                           f"component (known: {', '.join(sorted(names))})")
    versioning = shape.field(top, "versioning", where, lambda v: v in VERSIONING, f"one of {', '.join(VERSIONING)}",
                             "release")
    style = shape.field(top, "changelog-style", where, lambda v: v in CHANGELOG_STYLES,
                        f"one of {', '.join(CHANGELOG_STYLES)}", "headings")
    heading = shape.field(top, "changelog-heading", where, changelog_heading,
                          "a heading naming {version} (and optionally {date}), e.g. \"JAX {version} ({date})\"",
                          "{version}")
    try:
        stamped = tuple(Location.parse(v, where) for v in shape.strings(top, "stamped", where, ()))
    except ConfigError as error:
        raise ConfigError(printable(f"{source}: {error}")) from None
    if any(c.role == "backend" for c in components) and not any(c.role == "frontend" for c in components):
        raise fail(f"{where}.components", f"the backend is released from this tree but the frontend "
                   f"{family.frontend.distribution!r} is not; declare it (a backend release needs the frontend)")
    return ReleaseConfig(tuple(upload_order(components)), changelog, tag, versioning, style, heading, stamped)


def upload_order(components: list[Component]) -> list[Component]:
    """Backend, plugins, extensions, frontend (the index never holds a frontend without its backend), and a
    component after what it pins (a pjrt before its plugin); declaration order otherwise."""
    ordered = sorted(components, key=lambda c: ROLES.index(c.role))
    placed: list[Component] = []
    names = {canonicalize_name(c.distribution): c for c in ordered}

    def place(component: Component, seen: frozenset[str]) -> None:
        if component in placed or component.distribution in seen:
            return
        for pinned in component.pins:
            if (dependency := names.get(canonicalize_name(pinned))) is not None:
                place(dependency, seen | {component.distribution})
        placed.append(component)

    for component in ordered:
        place(component, frozenset())
    return placed


def changelog_heading(value: Any) -> bool:
    """A changelog heading template: ``{version}`` once, ``{date}`` at most once, no other field."""
    if not isinstance(value, str) or not value.isprintable() or len(value) > 200:
        return False
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(value) if name is not None]
    except ValueError:
        return False
    return fields.count("version") == 1 and fields.count("date") <= 1 and set(fields) <= {"version", "date"}


def jax_release() -> ReleaseConfig:
    """The jax family as jax releases it (``jaxrel/data/jax-release.toml``): jax, jaxlib and the CUDA plugins
    with their pjrt at one version; ROCm, oneAPI and libtpu released separately; the versions in
    ``jax/version.py`` and ``setup.py``, the CHANGELOG's Unreleased convention."""
    from jaxrel.family import jax_profile

    data = localfiles.loads_toml((Path(__file__).resolve().parents[1] / "data" / "jax-release.toml").read_text(
        encoding="utf-8"), "jaxrel/data/jax-release.toml")
    return release_from_config(data, jax_profile(), "jaxrel/data/jax-release.toml")


BUILTIN = {"jax": jax_release}
