"""The family model: frontend + backend + plugins + the API numbers the backend exports.

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

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrel import policy, releasedata
from jaxrel._util import localfiles
from jaxrel._util.shape import REQUIRED, Shape, found, is_relative_path
from jaxrel.errors import BadInput
from jaxrel.gating import ApiGate
from jaxrel.guard import Plugin as GuardPlugin

__all__ = [
    "PROFILES", "ApiNumber", "Backend", "ConfigError", "Family", "Frontend", "Package", "PinSet", "PluginSpec",
    "family_from_config", "jax_profile", "load_family", "resolve_family",
]


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


# Every spelling of jaxlib's release tuple in jax's history (`git log -S` over jax/ and tests/):
# `from jax._src.lib import version as jaxlib_version`, `jaxlib.version` after
# `from jax._src import lib as jaxlib`, `jax._src.lib.version`, `jaxlib.version.__version_info__`,
# `jtu.jaxlib_version()` and `jaxlib_version = jtu.parse_version(jax.lib.__version__)` in tests.
JAX_RELEASE_SPELLINGS = (
    "jax._src.lib.version",
    "jaxlib.version.__version_info__",
    "jax._src.test_util.jaxlib_version()",
    "jax._src.test_util.parse_version(jax.lib.__version__)",
    "jax._src.test_util.parse_version(jaxlib.__version__)",
    "jax._src.test_util.parse_version(jaxlib.version.__version__)",
    "jax._src.test_util.parse_version(jax._src.lib.version_str)",
)
# jax's own tests a compat cell runs by default: fast, meaningful on CPU, touching what jaxlib
# provides (pytrees, dtypes, arrays, FFI, export/serialization, x64); measured in docs/compat.md.
JAX_DEFAULT_TESTS = (
    "tests/tree_util_test.py", "tests/api_util_test.py", "tests/util_test.py", "tests/config_test.py",
    "tests/errors_test.py", "tests/extend_test.py", "tests/ffi_test.py", "tests/x64_context_test.py",
    "tests/jaxpr_util_test.py", "tests/array_test.py", "tests/export_test.py", "tests/dtypes_test.py",
)
JAX_SMOKE = """
import jax.numpy as jnp
facts["sum"] = float(jnp.ones(3).sum())
facts["devices"] = [str(d) for d in frontend.devices()]
facts["platforms"] = sorted({d.platform for d in frontend.devices()})
"""


def jax_profile() -> Family:
    """The built-in profile of real JAX."""
    return Family(
        name="jax",
        frontend=Frontend(
            distribution="jax",
            package="jax",
            version_file="jax/version.py",
            minimum_backend_variable="_minimum_jaxlib_version",
            tests=JAX_DEFAULT_TESTS,
            test_requirements="build/test-requirements.txt",
            smoke=JAX_SMOKE,
        ),
        backend=Backend(
            distribution="jaxlib",
            package="jaxlib",
            version_file="jaxlib/version.py",
            ffi_header="jaxlib/include/xla/ffi/api/c_api.h",
            release_spellings=JAX_RELEASE_SPELLINGS,
        ),
        # Which plugins exist and how they pin is read from each release's extras
        # (jaxrel.dist.extras); the profile keeps what the extras cannot say: the import
        # names, which distributions jax/jaxlib hold to jaxlib's release number, and which
        # are exempt (measured from jaxlib/plugin_support.py and jax/_src/xla_bridge.py).
        plugins=(
            PluginSpec("jax-cuda12-plugin", "jax_cuda12_plugin"),
            PluginSpec("jax-cuda12-pjrt", "jax_plugins.xla_cuda12"),
            PluginSpec("jax-cuda13-plugin", "jax_cuda13_plugin"),
            PluginSpec("jax-cuda13-pjrt", "jax_plugins.xla_cuda13"),
            PluginSpec("jax-oneapi-plugin", "jax_oneapi_plugin"),
            PluginSpec("jax-oneapi-pjrt", "jax_plugins.xla_oneapi"),
            # ROCm plugins are released on their own schedule; jaxlib skips their check.
            PluginSpec("jax-rocm*", None, pinned=False, released_separately=True),
            # libtpu has its own numbering; jax loads it without a version check; the tpu
            # extra pins it (libtpu==0.0.N.*): a mismatch is a warning, not a refusal.
            PluginSpec("libtpu", "libtpu", pinned=False, runtime=True),
            PluginSpec("libtpu-nightly", "libtpu", pinned=False, runtime=True),  # the tpu extra before libtpu
        ),
        api_numbers=(
            ApiNumber(
                "jaxlib_extension_version",
                "jaxlib/xla_client.py",
                "_version",
                aliases=("xla_extension_version",),
            ),
            ApiNumber("ifrt_version", "jaxlib/xla_client.py", "_ifrt_version", literal=False),
        ),
        backend_releases=dict(releasedata.builtin("jax")["jaxlib"]),
        frontend_minimums={
            version: row["minimum_jaxlib"]
            for version, row in releasedata.builtin("jax")["jax"].items()
            if row.get("minimum_jaxlib")
        },
        frontend_runtime_pins={
            version: {name: (pin["extra"], pin["pin"]) for name, pin in row["runtime_pins"].items()}
            for version, row in releasedata.builtin("jax")["jax"].items() if row.get("runtime_pins")
        },
        compat_suite=True,
    )


PROFILES = {"jax": jax_profile}

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
            minimum_backend_variable=self.string(frontend_table, "minimum-backend-variable", "tool.jaxrel.frontend"),
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
