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

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from packaging.utils import canonicalize_name

from jaxrel.family import ConfigError, Family

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
        path = PurePosixPath(file)
        if not sep or not file or not key or path.is_absolute() or ".." in path.parts:
            raise ConfigError(f"[{where}] {text!r} is not FILE:KEY with FILE relative to the project root "
                              "(e.g. \"mylib/version.py:_version\" or \"pyproject.toml:project.version\")")
        if not file.endswith(".toml") and not key.isidentifier():
            raise ConfigError(f"[{where}] {text!r}: {key!r} is not a variable name")
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


def _strings(value: Any, where: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"[{where}] {key!r} must be a list of non-empty strings, not {value!r}")
    return value


def release_from_config(table: Any, family: Family, source: str = "pyproject.toml") -> ReleaseConfig:
    """Validate a parsed ``[tool.jaxrel.release]`` table against ``family``."""
    where = "tool.jaxrel.release"

    def fail(at: str, problem: str) -> ConfigError:
        return ConfigError(f"{source}: [{at}] {problem}")

    def checked(value: Any, at: str, keys: set[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise fail(at, f"must be a table, not {type(value).__name__}")
        unknown = sorted(set(value) - keys)
        if unknown:
            raise fail(at, f"unknown key {unknown[0]!r} (allowed: {', '.join(sorted(keys))})")
        return value

    top = checked(table, where, _RELEASE_KEYS)
    tag = top.get("tag", "v{version}")
    if not isinstance(tag, str) or "{version}" not in tag:
        raise fail(where, f"'tag' must be a string containing {{version}}, not {tag!r}")
    changelog = top.get("changelog", "CHANGELOG.md")
    if changelog is not None and not (isinstance(changelog, str) and changelog):
        raise fail(where, f"'changelog' must be a file path, not {changelog!r}")
    declared = top.get("components", {})
    if not isinstance(declared, dict):
        raise fail(f"{where}.components", "must be a table of components keyed by distribution name")
    components = []
    for distribution, value in declared.items():
        at = f"{where}.components.{distribution}"
        row = checked(value, at, _COMPONENT_KEYS)
        build = row.get("build", "python")
        if build not in BUILDERS:
            raise fail(at, f"'build' must be one of {', '.join(BUILDERS)}, not {build!r}")
        role = role_of(family, distribution)
        try:
            versions = tuple(Location.parse(v, at) for v in _strings(row.get("versions", []), at, "versions"))
            minimum = Location.parse(row["minimum-backend"], at) if "minimum-backend" in row else None
        except ConfigError as error:
            raise ConfigError(f"{source}: {error}") from None
        if not versions:
            raise fail(at, "'versions' is empty; list every FILE:KEY that holds this component's version")
        if minimum is not None and role != "frontend":
            raise fail(at, f"'minimum-backend' belongs to the frontend, and {distribution} is the {role}")
        targets = tuple(_strings(row.get("targets", []), at, "targets"))
        if build == "bazel" and not targets:
            raise fail(at, "'targets' is empty; name the py_wheel_file targets, e.g. [\"//core:wheel\"]")
        path = row.get("path", ".")
        if not isinstance(path, str) or PurePosixPath(path).is_absolute() or ".." in PurePosixPath(path).parts:
            raise fail(at, f"'path' must be a directory relative to the project root, not {path!r}")
        components.append(Component(distribution, role, build, path, targets, versions, minimum))
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
