"""The ``[tool.jaxrel]`` reader: a project's family declaration, checked and built into a :class:`Family`.

A project declares its family in ``pyproject.toml``::

    [tool.jaxrel]
    profile = "jax"                 # the built-in profile of real JAX, or declare your own:

    [tool.jaxrel]
    name = "mylib"
    [tool.jaxrel.frontend]
    distribution = "mylib"                          # required
    package = "mylib"                               # import name (default: from distribution)
    version-file = "mylib/version.py"               # default: <package>/version.py
    minimum-backend-variable = "_minimum_mylib_core_version"
    tests = ["tests/core_test.py"]                 # the own tests `jaxrel compat --frontend-src` runs by default
    test-requirements = "tests/requirements.txt"    # what they need besides the frontend (pip -r), in the tree
    [tool.jaxrel.backend]
    distribution = "mylib-core"
    ffi-header = "mylib_core/include/xla/ffi/api/c_api.h"
    [[tool.jaxrel.api-numbers]]
    name = "core_extension_version"
    file = "mylib_core/client.py"
    variable = "_version"
    [[tool.jaxrel.plugins]]
    distribution = "mylib-cuda12"
    pinned = true                                   # false: exempt from the equal-version rule
    set = "cuda12"                                  # plugins installed together in compat cells
                                                    # (the frontend's extras define sets too)
    released-separately = false                     # true: own release schedule (ROCm); missing = warning
    runtime = false                                 # true: own numbering (libtpu), held to the extra's pin
    [tool.jaxrel.releases."1.2.0"]                 # optional release data: API numbers per backend
    core_extension_version = 42

Every error is one line naming the file, the key and the fix (:class:`ConfigError`).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrel._util import localfiles
from jaxrel._util.shape import REQUIRED, Shape, found, is_relative_path
from jaxrel.errors import BadInput
from jaxrel.family.model import ApiNumber, Backend, ConfigError, Family, Frontend, PluginSpec
from jaxrel.family.profiles import PROFILES

__all__ = ["family_from_config", "jaxrel_table", "load_family", "resolve_family"]


_TOP_KEYS = {"profile", "name", "frontend", "backend", "api-numbers", "plugins", "releases", "release"}
_PACKAGE_KEYS = {"distribution", "package", "version-file"}
_FRONTEND_KEYS = _PACKAGE_KEYS | {"minimum-backend-variable", "minimum-backend", "tests", "test-requirements"}
_BACKEND_KEYS = _PACKAGE_KEYS | {"ffi-header"}
_API_KEYS = {"name", "file", "variable", "aliases", "literal"}
_PLUGIN_KEYS = {"distribution", "package", "pinned", "set", "released-separately", "runtime"}


class _Reader(Shape):
    """Validates one ``[tool.jaxrel]`` table, producing one-line errors."""

    def __init__(self, source: str) -> None:
        super().__init__(source, ConfigError)

    def string(self, table: dict[str, Any], key: str, where: str, default: Any = None,
               required: bool = False) -> Any:
        return super().string(table, key, where, REQUIRED if required else default)

    def version(self, value: Any, where: str, key: str) -> str:
        try:
            Version(value if isinstance(value, str) else "")
        except ValueError:  # InvalidVersion, or a number over Python's 4300-digit limit
            raise self.error(where, f"{key[:80]!r} is not a PEP 440 version: {found(value)} (e.g. \"0.4.30\")") \
                from None
        if "!" in value:
            raise self.error(where, f"{key[:80]!r} has an epoch ({found(value)}); jax's version check cannot "
                             "compare epochs")
        return str(value)

    def package(self, value: Any, where: str, keys: set[str]) -> dict[str, str | None]:
        table = self.table(value, where, keys)
        distribution: str = self.name(table, "distribution", where)
        package: str = self.module(table, "package", where, distribution.replace("-", "_").replace(".", "_"))
        version_file = self.string(table, "version-file", where, default=f"{package.replace('.', '/')}/version.py")
        assert version_file is not None
        if not is_relative_path(version_file) \
                or not PurePosixPath(version_file).is_relative_to(package.replace(".", "/")):
            raise self.error(where, f"'version-file' {found(version_file)} must lie inside package {found(package)}")
        return {"distribution": distribution, "package": package, "version_file": version_file}

    def family(self, config: Any) -> Family:
        top = self.table(config, "tool.jaxrel", _TOP_KEYS)
        if "profile" in top:
            others = sorted(set(top) - {"profile", "release"})  # release: jaxrel.release.config
            if others:
                raise self.error("tool.jaxrel", f"'profile' cannot be combined with {others[0]!r}; "
                                 "declare the family in full or use the profile alone")
            name = self.string(top, "profile", "tool.jaxrel")
            if name not in PROFILES:
                raise self.error("tool.jaxrel", f"unknown profile {found(name)} (known: {', '.join(PROFILES)})")
            return PROFILES[name]()
        for key in ("name", "frontend", "backend"):
            if key not in top:
                raise self.error("tool.jaxrel", f"missing required key {key!r} (or set profile = \"jax\")")
        name = self.string(top, "name", "tool.jaxrel")
        frontend_table = self.table(top["frontend"], "tool.jaxrel.frontend", _FRONTEND_KEYS)
        minimum = frontend_table.get("minimum-backend")
        frontend = Frontend(
            **self.package(frontend_table, "tool.jaxrel.frontend", _FRONTEND_KEYS),  # type: ignore[arg-type]
            minimum_backend_variable=self.field(
                frontend_table, "minimum-backend-variable", "tool.jaxrel.frontend",
                lambda v: isinstance(v, str) and v.isidentifier() and len(v) <= 100,
                "a Python variable name (at most 100 characters)", None),
            minimum_backend=(
                None if minimum is None else self.version(minimum, "tool.jaxrel.frontend", "minimum-backend")
            ),
            tests=self.relative_paths(frontend_table, "tests", "tool.jaxrel.frontend"),
            test_requirements=self.relative_path(frontend_table, "test-requirements", "tool.jaxrel.frontend"),
        )
        backend_table = self.table(top["backend"], "tool.jaxrel.backend", _BACKEND_KEYS)
        backend = Backend(
            **self.package(backend_table, "tool.jaxrel.backend", _BACKEND_KEYS),  # type: ignore[arg-type]
            ffi_header=self.string(backend_table, "ffi-header", "tool.jaxrel.backend"),
        )
        if canonicalize_name(frontend.distribution) == canonicalize_name(backend.distribution):
            raise self.error("tool.jaxrel.backend", f"'distribution' is {backend.distribution!r}, the frontend's "
                             "own name; the backend is a separate distribution (e.g. jaxlib beside jax)")
        api_numbers = tuple(self.api_number(item, i) for i, item in enumerate(self.items(top, "api-numbers")))
        plugins = tuple(self.plugin(item, i) for i, item in enumerate(self.items(top, "plugins")))
        family = Family(name or "", frontend, backend, plugins, api_numbers)
        releases = self.releases(top.get("releases", {}), family)
        return Family(family.name, frontend, backend, plugins, api_numbers, releases)

    def relative_path(self, table: dict[str, Any], key: str, where: str) -> str | None:
        """A path inside the frontend's source tree: relative, not leaving it."""
        value: str | None = self.string(table, key, where)
        if value is not None and not is_relative_path(value):
            raise self.error(where, f"{key!r} must be a path relative to the frontend's source tree, "
                             f"not {found(value)}")
        return value

    def relative_paths(self, table: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
        value = self.strings(table, key, where, (), "a list of paths")
        return tuple(self.relative_path({key: v}, key, where) or "" for v in value)

    def items(self, top: dict[str, Any], key: str) -> list[Any]:
        value = top.get(key, [])
        if not isinstance(value, list):
            raise self.error(f"tool.jaxrel.{key}", f"must be an array of tables ([[tool.jaxrel.{key}]]), "
                             f"not {found(value)}")
        return value

    def api_number(self, value: Any, index: int) -> ApiNumber:
        where = f"tool.jaxrel.api-numbers[{index}]"
        table = self.table(value, where, _API_KEYS)
        aliases = self.field(table, "aliases", where, lambda v: isinstance(v, list) and all(
            isinstance(a, str) and a.isidentifier() for a in v), "a list of identifiers", [])
        name = self.field(table, "name", where, lambda v: isinstance(v, str) and v.isidentifier(),
                          "a Python identifier")
        literal = self.boolean(table, "literal", where, True)
        variable = self.field(table, "variable", where, lambda v: isinstance(v, str) and v.isidentifier(),
                              "a Python identifier", "_version")
        return ApiNumber(
            name=name or "",
            file=self.string(table, "file", where, required=True) or "",
            variable=variable,
            aliases=tuple(aliases),
            literal=literal,
        )

    def plugin(self, value: Any, index: int) -> PluginSpec:
        where = f"tool.jaxrel.plugins[{index}]"
        table = self.table(value, where, _PLUGIN_KEYS)
        pinned = self.boolean(table, "pinned", where, True)
        flags = {key.replace("-", "_"): self.boolean(table, key, where, False)
                 for key in ("released-separately", "runtime")}
        distribution = self.name(table, "distribution", where, wildcard=True)
        return PluginSpec(
            distribution=distribution,
            package=self.module(table, "package", where, None),
            pinned=pinned,
            set=self.label(table, "set", where, None),
            released_separately=flags["released_separately"],
            runtime=flags["runtime"],
        )

    def releases(self, value: Any, family: Family) -> dict[str, dict[str, Any]]:
        releases: dict[str, dict[str, Any]] = {}
        for version, row in self.table(value, "tool.jaxrel.releases").items():
            where = f"tool.jaxrel.releases.{version[:60]!r}"
            self.version(version, "tool.jaxrel.releases", f"backend version {version[:60]!r}")
            names = {n for number in family.api_numbers for n in number.names}
            table = self.table(row, where, names)
            for key in table:
                self.integer(table, key, where)
            releases[version] = {family.api_number(key).name: number for key, number in table.items()}
        return releases


def family_from_config(config: Any, source: str = "pyproject.toml") -> Family:
    """Build and validate a family from a parsed ``[tool.jaxrel]`` table."""
    return _Reader(source).family(config)


def load_family(pyproject: str | Path) -> Family:
    """Load the family declared under ``[tool.jaxrel]`` in ``pyproject``."""
    path = Path(pyproject)
    if not str(pyproject).strip():
        raise ConfigError("--family is empty; pass a profile name (jax) or the path of a pyproject.toml")
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; pass --family {path / 'pyproject.toml'}")
    try:
        data = localfiles.load_toml(path)
    except BadInput as error:
        raise ConfigError(str(error)) from None
    config = jaxrel_table(data, str(path))
    if config is None:
        raise ConfigError(f"{path}: no [tool.jaxrel] table; add one (e.g. profile = \"jax\")")
    return family_from_config(config, str(path))


def jaxrel_table(data: dict[str, Any], source: str) -> Any:
    """``[tool.jaxrel]`` of a parsed ``pyproject.toml`` (``None`` when absent); a ``tool`` that is not a
    table is a :class:`ConfigError`. The table itself is checked by :func:`family_from_config`."""
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{source}: [tool] must be a table, not {found(tool)}; write [tool.jaxrel] as a table")
    return tool.get("jaxrel")


def resolve_family(name_or_path: str | None) -> Family:
    """A built-in profile by name, or the family declared in a ``pyproject.toml`` path."""
    if name_or_path is None or name_or_path in PROFILES:
        return PROFILES[name_or_path or "jax"]()
    return load_family(name_or_path)
