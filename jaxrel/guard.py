"""Import-time compatibility guard for split wheels (standard library only).

A frontend, plugin or extension calls :func:`check` first thing in its
``__init__``, before any compiled backend module or plugin is loaded::

    from jaxrel import guard
    guard.check(
        frontend="jax", frontend_version=_version,
        backend="jaxlib", minimum_backend=_minimum_jaxlib_version,
        plugins=(guard.Plugin("jax-cuda12-plugin"), guard.Plugin("jax-cuda12-pjrt"),
                 guard.Plugin("jax-rocm*", pinned=False)),
    )

Versions are compared exactly as :mod:`jaxrel.policy` compares them (the two are
property-tested to agree): on the PEP 440 release segment, trailing zeros
insignificant, pre/dev/post/local suffixes ignored, an epoch refused.

The backend version is read from the backend's version module *source* (or from
the module if it is already imported); installed plugins are found from their
``.dist-info`` directory names on ``sys.path``. Nothing is imported: not the
backend, not a plugin, not ``packaging``, not ``importlib.metadata``, not the
rest of jaxrel. Set ``JAXREL_SKIP_GUARD=1`` to skip the check.

Start-up cost matters here: on the common path (release versions such as
``0.12.0.1``) this module uses only ``os`` and ``sys``, which every interpreter has
loaded already; ``re`` is imported only to parse a version with a suffix.
"""

import os
import sys

SKIP_ENV = "JAXREL_SKIP_GUARD"

# PEP 440's canonical form, from the specification's appendix (compiled on first use).
_PEP440 = r"""^\s*v?
    (?:(?P<epoch>[0-9]+)!)?
    (?P<release>[0-9]+(?:\.[0-9]+)*)
    (?P<pre>[-_.]?(?:alpha|a|beta|b|preview|pre|c|rc)[-_.]?[0-9]*)?
    (?P<post>-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?
    (?P<dev>[-_.]?dev[-_.]?[0-9]*)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    \s*$"""
_VERSION_VARIABLES = ("_release_version", "_version", "__version__")


class Plugin:
    """A plugin distribution (``*`` wildcards allowed) and whether it is pinned to the backend."""

    __slots__ = ("distribution", "pinned")

    def __init__(self, distribution: str, pinned: bool = True) -> None:
        self.distribution = distribution
        self.pinned = pinned

    def __repr__(self) -> str:
        return f"Plugin({self.distribution!r}, pinned={self.pinned})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Plugin) and (self.distribution, self.pinned) == (other.distribution, other.pinned)

    def __hash__(self) -> int:
        return hash((self.distribution, self.pinned))


class GuardError(ImportError):
    """The installed split wheels do not fit together (or a version cannot be read).

    ``installed`` maps distribution to version, ``allowed`` states the allowed
    range, ``fix`` is the command that repairs the environment.
    """

    def __init__(self, message: str, *, installed: dict[str, str], allowed: str, fix: str) -> None:
        super().__init__(message)
        self.installed = installed
        self.allowed = allowed
        self.fix = fix


class Release:
    """A version's release segment: ``text`` as written, ``key`` comparable (no trailing zeros)."""

    __slots__ = ("text", "key")

    def __init__(self, text: str) -> None:
        key = [int(part) for part in text.split(".")]
        while len(key) > 1 and key[-1] == 0:
            key.pop()
        self.text = text
        self.key = tuple(key)


def release_of(version: str, *, what: str = "version") -> Release:
    """The release segment of a PEP 440 ``version``; ``ValueError`` if malformed or with an epoch.

    The key drops trailing zeros, so ``0.4.30`` and ``0.4.30.0`` compare equal.
    """
    plain = version.strip()
    if plain[:1] in ("v", "V"):
        plain = plain[1:]
    if plain and all(part.isdigit() and part.isascii() for part in plain.split(".")):
        return Release(plain)  # the common case, without importing re
    import re

    match = re.match(_PEP440, version, re.IGNORECASE | re.VERBOSE)
    if match is None:
        raise ValueError(f"{what} {version!r} is not a PEP 440 version (expected e.g. 0.4.30)")
    if match["epoch"] is not None:
        raise ValueError(
            f"{what} {version!r} has an epoch, which jax's version check cannot compare; "
            "publish it without the epoch"
        )
    return Release(match["release"])


def canonical_name(name: str) -> str:
    """PEP 503 normalisation of a distribution name (runs of ``-_.`` become one ``-``)."""
    name = name.lower().replace("_", "-").replace(".", "-")
    while "--" in name:
        name = name.replace("--", "-")
    return name


def glob_match(name: str, pattern: str) -> bool:
    """``*``-only wildcard match (enough for ``jax-rocm*``), without importing fnmatch."""
    parts = pattern.split("*")
    if len(parts) == 1:
        return name == pattern
    if not (name.startswith(parts[0]) and name.endswith(parts[-1])):
        return False
    position, end = len(parts[0]), len(name) - len(parts[-1])
    for part in parts[1:-1]:
        position = name.find(part, position, end)
        if position < 0:
            return False
        position += len(part)
    return position <= end


def requirement(distribution: str, minimum: str | None, maximum: str | None) -> str:
    """A quoted pip requirement bounding ``distribution`` to ``[minimum, maximum]``."""
    bounds = [f">={minimum}" if minimum else "", f"<={maximum}" if maximum else ""]
    return f'"{distribution}{",".join(b for b in bounds if b)}"'


def allowed_range(backend: str, minimum: str | None, maximum: str | None) -> str:
    """Human text for the allowed backend range (release numbers only)."""
    low = f"{minimum} <= " if minimum else ""
    high = f" <= {maximum}" if maximum else ""
    return f"{low}{backend}{high} (release numbers; rc/dev/post/local suffixes ignored)"


def read_assignment(path: str, variables: tuple[str, ...]) -> str | None:
    """:func:`assigned_string` of the source at ``path``; ``None`` when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return assigned_string(handle.read(), variables)
    except OSError:
        return None


def assigned_string(source: str, variables: tuple[str, ...]) -> str | None:
    """The string literal assigned (``name = "..."`` or ``name: T = "..."``) to the first of ``variables``."""
    lines = source.splitlines()
    for variable in variables:
        for line in lines:
            if not line.startswith(variable):
                continue
            rest = line[len(variable):].lstrip()
            if rest[:1] == ":":
                rest = rest[rest.find("="):] if "=" in rest else ""
            value = rest[1:].strip() if rest[:1] == "=" else ""
            if value[:1] in ("'", '"') and value.find(value[0], 1) > 1:
                return value[1:value.find(value[0], 1)]
    return None


def read_version_file(path: str) -> str | None:
    """Read ``_release_version``, else ``_version`` or ``__version__``, from a version module's source.

    JAX's version modules hold ``_version = "X.Y.Z"`` and a build-stamped
    ``_release_version`` (left ``None`` in unstamped builds); others use ``__version__``.
    """
    return read_assignment(path, _VERSION_VARIABLES)


def backend_version(package: str, version_module: str = "version", path: list[str] | None = None) -> str | None:
    """The installed backend's version, without importing the backend.

    Uses the already-imported module's ``__version__`` if there is one; otherwise
    reads ``<package>/<version_module>.py`` from the first ``sys.path`` entry
    holding ``package``. ``None`` when the backend is not installed.
    """
    module = sys.modules.get(package) if path is None else None
    version = getattr(module, "__version__", None) if module is not None else None
    if isinstance(version, str):
        return version
    relative = os.path.join(package.replace(".", os.sep), *version_module.split(".")) + ".py"
    for entry in sys.path if path is None else path:
        found = read_version_file(os.path.join(entry or ".", relative))
        if found is not None:
            return found
    return None


def installed_distributions(path: list[str] | None = None) -> dict[str, str]:
    """Map canonical distribution name to version from ``*.dist-info`` names on ``path``.

    The first entry on the path wins, as it does for imports. The standard library's
    own directories hold no distributions and are skipped (they are most of the cost).
    """
    found: dict[str, str] = {}
    stdlib = os.path.dirname(os.__file__)
    for entry in sys.path if path is None else path:
        if entry in (stdlib, os.path.join(stdlib, "lib-dynload")) or entry.endswith(".zip"):
            continue
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info"):
                distribution, _, version = name[: -len(".dist-info")].rpartition("-")
                if distribution and version:
                    found.setdefault(canonical_name(distribution), version)
    return found


def ffi_api_in(header_text: str) -> str | None:
    """``MAJOR.MINOR`` of the XLA FFI API that the text of a ``c_api.h`` defines; ``None`` if absent."""
    found = {}
    for line in header_text.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "#define" and words[2].isdigit():
            if words[1] in ("XLA_FFI_API_MAJOR", "XLA_FFI_API_MINOR"):
                found[words[1]] = words[2]
    if len(found) != 2:
        return None
    return f"{int(found['XLA_FFI_API_MAJOR'])}.{int(found['XLA_FFI_API_MINOR'])}"


def read_ffi_api(header: str) -> str | None:
    """:func:`ffi_api_in` of the ``c_api.h`` at ``header``; ``None`` when it cannot be read."""
    try:
        with open(header, encoding="utf-8") as handle:
            return ffi_api_in(handle.read())
    except OSError:
        return None


def backend_ffi_api(package: str, header: str, path: list[str] | None = None) -> str | None:
    """The XLA FFI API of the installed backend: ``header`` (relative to ``package``) on ``path``."""
    relative = os.path.join(package.replace(".", os.sep), *header.split("/"))
    for entry in sys.path if path is None else path:
        full = os.path.join(entry or ".", relative)
        if os.path.isfile(full):
            return read_ffi_api(full)
    return None


def _api_key(api: str) -> tuple[int, ...]:
    return tuple(int(part) for part in api.split("."))


def _release_key(version: str) -> tuple[int, ...] | None:
    try:
        return release_of(version).key
    except ValueError:
        return None


def _fail(problems: list[str], fixes: list[str], installed: dict[str, str], allowed: str) -> GuardError:
    lines = problems + [f"Fix: {fixes[0]}"] + [f"  or: {other}" for other in fixes[1:]]
    lines.append(f"(Set {SKIP_ENV}=1 to skip this check at your own risk.)")
    return GuardError("\n".join(lines), installed=installed, allowed=allowed, fix=fixes[0])


def check(
    *,
    backend: str,
    minimum_backend: str | None = None,
    frontend: str | None = None,
    frontend_version: str | None = None,
    plugins: tuple[Plugin, ...] = (),
    backend_package: str | None = None,
    version_module: str = "version",
    consumer: str | None = None,
    minimum_ffi_api: str | None = None,
    ffi_header: str = "include/xla/ffi/api/c_api.h",
    install_with: tuple[str, ...] = (),
    path: list[str] | None = None,
) -> str | None:
    """Refuse to import when the installed backend or plugins do not fit.

    ``backend`` is the backend's distribution name (``jaxlib``), ``backend_package``
    its import name (default: the distribution name with ``_``). The backend must
    satisfy ``minimum_backend <= backend <= frontend_version``; each pinned plugin
    must have the backend's release number. An XLA FFI extension passes
    ``minimum_ffi_api`` (the API of the headers it was compiled against): the
    backend's ``ffi_header`` must define at least that. ``consumer`` names the
    caller in messages; ``install_with`` lists distributions the fix moves to the
    same bounds as the backend (an extension names the frontend, ``jax``). Returns
    the backend version (``None`` when skipped through ``JAXREL_SKIP_GUARD``);
    raises :class:`GuardError`.
    """
    if os.environ.get(SKIP_ENV, "") not in ("", "0"):
        return None
    package = backend_package or backend.replace("-", "_")
    if consumer is None:
        consumer = f"{frontend} {frontend_version}" if frontend and frontend_version else "this package"
    found = backend_version(package, version_module, path)
    installed = {name: version for name, version in ((frontend, frontend_version), (backend, found))
                 if name and version}
    try:
        top = release_of(frontend_version, what=f"{frontend} version") if frontend_version else None
        low = release_of(minimum_backend, what=f"minimum {backend} version") if minimum_backend else None
        allowed = allowed_range(backend, minimum_backend, top.text if top else None)
        bounded = [requirement(name, minimum_backend, top.text if top else None) for name in (*install_with, backend)]
        in_range = f"pip install {' '.join(bounded)}"
        if found is None:
            raise _fail([f"{backend} is not installed; {consumer} needs {allowed}."],
                        [in_range], installed, allowed)
        current = release_of(found, what=f"{backend} version")
    except ValueError as error:
        raise GuardError(f"{error}\n(Set {SKIP_ENV}=1 to skip this check at your own risk.)",
                         installed=installed, allowed="unknown", fix="") from None

    if minimum_ffi_api is not None:
        provided = backend_ffi_api(package, ffi_header, path)
        if provided is None or _api_key(provided) < _api_key(minimum_ffi_api):
            api = f"XLA FFI API {provided}" if provided else f"no readable XLA FFI API ({package}/{ffi_header})"
            raise _fail([f"{backend} {found} provides {api}, older than the {minimum_ffi_api} that {consumer} was "
                         f"built against: it requires {allowed}."], [in_range], installed, allowed)
    if low is not None and current.key < low.key:
        raise _fail([f"{backend} is version {found}, but {consumer} requires {allowed}."],
                    [in_range], installed, allowed)
    if top is not None and current.key > top.key:
        raise _fail([f"{backend} version {found} is newer than {consumer} allows: it requires {allowed}."],
                    [in_range, f"pip install --upgrade {frontend} {backend}"], installed, allowed)

    mismatched = []
    if plugins:
        distributions = installed_distributions(path)
        for plugin in plugins:
            pattern = canonical_name(plugin.distribution)
            for name, version in sorted(distributions.items()):
                if not glob_match(name, pattern):
                    continue
                installed[name] = version
                if plugin.pinned and _release_key(version) != current.key:
                    mismatched.append((name, version))
    if mismatched:
        listing = ", ".join(f"{name} {version}" for name, version in mismatched)
        aligned = " ".join(f'"{name}=={current.text}"' for name, _ in mismatched)
        raise _fail(
            [f"{listing} installed, but plugins must have the same release number as {backend} {found}; "
             "a mismatched plugin is skipped with a warning, fails later or crashes."],
            [f"pip install {aligned}", f"pip uninstall -y {' '.join(name for name, _ in mismatched)}"],
            installed, f"{current.text} (equal to {backend})",
        )
    return found
