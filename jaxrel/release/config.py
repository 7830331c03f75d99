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

A version location is ``FILE:KEY``: a dotted key in a ``.toml`` file, else a top-level
string assignment in a Python or Starlark file (``.py``, ``.bzl``). Each component's role
(frontend, backend, plugin, extension) comes from the family. Errors are
:class:`~jaxrel.family.ConfigError`, one line naming the key and the fix.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from packaging.utils import canonicalize_name

from jaxrel._util.shape import Shape, found, is_name, is_relative_path, printable
from jaxrel.family import ConfigError, Family

__all__ = ["BUILDERS", "BUILTIN", "Component", "Location", "ROLES", "ReleaseConfig", "jax_release",
    "release_from_config", "role_of", "tag_template"]

BUILDERS = ("python", "bazel", "external")
ROLES = ("backend", "plugin", "extension", "frontend")  # also the safe upload order
_RELEASE_KEYS = {"changelog", "tag", "components"}
_COMPONENT_KEYS = {"path", "build", "targets", "versions", "minimum-backend"}


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

    def tag_for(self, version: str) -> str:
        return self.tag.format(version=version)

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
        versions = tuple(Location.parse(v, at) for v in shape.strings(row, "versions", at, ()))
        minimum = Location.parse(row["minimum-backend"], at) if "minimum-backend" in row else None
    except ConfigError as error:
        raise ConfigError(printable(f"{shape.source}: {error}")) from None
    if not versions:
        raise shape.error(at, "'versions' is empty; list every FILE:KEY that holds this component's version")
    if minimum is not None and role != "frontend":
        raise shape.error(at, f"'minimum-backend' belongs to the frontend, and {distribution} is the {role}")
    targets = shape.strings(row, "targets", at, ())
    if build == "bazel" and not targets:
        raise shape.error(at, "'targets' is empty; name the py_wheel_file targets, e.g. [\"//core:wheel\"]")
    path = shape.field(row, "path", at, is_relative_path, "a directory relative to the project root", ".")
    return Component(distribution, role, build, path, targets, versions, minimum)


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
    if any(c.role == "backend" for c in components) and not any(c.role == "frontend" for c in components):
        raise fail(f"{where}.components", f"the backend is released from this tree but the frontend "
                   f"{family.frontend.distribution!r} is not; declare it (a backend release needs the frontend)")
    components.sort(key=lambda c: ROLES.index(c.role))
    return ReleaseConfig(tuple(components), changelog, tag)


def jax_release() -> ReleaseConfig:
    """What a jax checkout or sdist declares, for ``jaxrel release check --family jax``.

    jax and jaxlib share ``jax/version.py``'s ``_version``; ``setup.py`` names the jaxlib
    released with it. jaxlib and the plugins are built by jax's own ``build/build.py``.
    """
    return ReleaseConfig(
        components=(
            Component("jaxlib", "backend", "external", versions=(Location("setup.py", "_current_jaxlib_version"),)),
            Component(
                "jax", "frontend", "python",
                versions=(Location("jax/version.py", "_version"), Location("jax/version.py", "_release_version")),
                minimum_backend=Location("jax/version.py", "_minimum_jaxlib_version"),
            ),
        ),
        changelog="CHANGELOG.md",
        tag="jax-v{version}",
    )


BUILTIN = {"jax": jax_release}
