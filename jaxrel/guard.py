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

Start-up cost matters here (``benchmarks/guard.py`` measures it). The accepting path uses
only ``os`` and ``sys``, which every interpreter has loaded already (``re`` only parses a
version with a suffix; not even ``__future__`` or ``typing`` is imported: composite
annotations are strings, which cost nothing at import). It reads the version module with
``os.open`` (no file object), never from the standard library's directories; lists
directories for ``.dist-info`` names only when plugins are named, canonicalising only names
that can match; and builds messages only when it refuses. Every code object is unmarshalled
on each import, so the module stays small.
"""

import errno
import os
import stat
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = [
    "SKIP_ENV", "GuardError", "Plugin", "Release", "allowed_range", "assigned_string", "backend_ffi_api",
    "backend_version", "canonical_name", "check", "check_cuda", "cuda_driver_version",
    "ffi_api_in", "glob_match", "installed_distributions",
    "read_assignment", "read_ffi_api", "read_version_file", "release_of", "requirement",
]

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
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # where str.splitlines() splits
_NO_VERSION_VARIABLE = "no string assigned to _release_version, _version, __version__"
_SKIP_NOTE = f"(Set {SKIP_ENV}=1 to skip this check at your own risk.)"


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

    def __init__(self, message: str, *, installed: "dict[str, str]", allowed: str, fix: str) -> None:
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
    # The common case, without importing re: digits and dots only (ASCII, no empty part).
    if plain.isascii() and plain.replace(".", "").isdigit() and ".." not in plain \
            and plain[0] != "." and plain[-1] != ".":
        release = plain
    else:
        import re

        match = re.match(_PEP440, version, re.IGNORECASE | re.VERBOSE)
        if match is None:
            raise ValueError(f"{what} {version!r} is not a PEP 440 version (expected e.g. 0.4.30)")
        if match["epoch"] is not None:
            raise ValueError(
                f"{what} {version!r} has an epoch, which jax's version check cannot compare; "
                "publish it without the epoch"
            )
        release = match["release"]
    try:
        return Release(release)
    except ValueError:  # a number longer than int() converts (sys.get_int_max_str_digits())
        shown = version if len(version) <= 40 else f"{version[:20]}...{version[-10:]}"
        raise ValueError(f"{what} {shown!r} ({len(version)} characters) has a number too long to compare; "
                         "expected e.g. 0.4.30") from None


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


def requirement(distribution: str, minimum: "str | None", maximum: "str | None") -> str:
    """A quoted pip requirement bounding ``distribution`` to ``[minimum, maximum]``."""
    bounds = [f">={minimum}" if minimum else "", f"<={maximum}" if maximum else ""]
    return f'"{distribution}{",".join([b for b in bounds if b])}"'


def allowed_range(backend: str, minimum: "str | None", maximum: "str | None") -> str:
    """Human text for the allowed backend range (release numbers only)."""
    low = f"{minimum} <= " if minimum else ""
    high = f" <= {maximum}" if maximum else ""
    return f"{low}{backend}{high} (release numbers; rc/dev/post/local suffixes ignored)"


def _read_text(path: str, errors: str = "strict") -> str:
    """The UTF-8 text of the regular file at ``path``: ``OSError`` if unreadable or not a regular file
    (a FIFO or a device is opened without waiting for a writer, then refused), ``UnicodeDecodeError``
    if not UTF-8. The guard's own copy of :mod:`jaxrel._util.localfiles`'s check (it imports nothing
    of jaxrel).

    ``os.open``/``os.read`` with a buffer of the file's size: a file object costs more system
    calls (isatty, seeks), and a large buffer costs fresh memory.
    """
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        status = os.fstat(descriptor)
        if stat.S_ISDIR(status.st_mode):
            raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        size = status.st_size + 1
        chunks = [os.read(descriptor, size)]
        while chunks[-1]:
            chunks.append(os.read(descriptor, size))
    finally:
        os.close(descriptor)
    return b"".join(chunks).decode("utf-8", errors)


def read_assignment(path: str, variables: "tuple[str, ...]") -> "str | None":
    """:func:`assigned_string` of the source at ``path``; ``None`` when it cannot be read or is not UTF-8."""
    try:
        return assigned_string(_read_text(path), variables)
    except (OSError, UnicodeDecodeError):
        return None


def assigned_string(source: str, variables: "tuple[str, ...]") -> "str | None":
    """The string literal assigned (``name = "..."`` or ``name: T = "..."``) to the first of ``variables``.

    Only lines starting with a variable are split off (``str.find``, not ``splitlines``: a
    version module can be long, and this runs at import).
    """
    for variable in variables:
        start = source.find(variable)
        while start >= 0:
            if start == 0 or source[start - 1] in _LINE_BREAKS:
                end = source.find("\n", start)
                line = source[start:] if end < 0 else source[start:end]
                rest = line.splitlines()[0][len(variable):].lstrip()
                if rest[:1] == ":":
                    rest = rest[rest.find("="):] if "=" in rest else ""
                value = rest[1:].strip() if rest[:1] == "=" else ""
                if value[:1] in ("'", '"') and value.find(value[0], 1) > 1:
                    return value[1:value.find(value[0], 1)]
            start = source.find(variable, start + 1)
    return None


def read_version_file(path: str) -> "str | None":
    """Read ``_release_version``, else ``_version`` or ``__version__``, from a version module's source.

    JAX's version modules hold ``_version = "X.Y.Z"`` and a build-stamped
    ``_release_version`` (left ``None`` in unstamped builds); others use ``__version__``.
    """
    return read_assignment(path, _VERSION_VARIABLES)


def _entries(path: "list[str] | None") -> "list[str]":
    """The entries of ``path`` (default ``sys.path``) that can hold distributions.

    Non-``str`` entries are skipped, as the import system skips them; so are zip files and the
    standard library's own directories (they hold no distributions and are the largest).
    """
    stdlib = os.path.dirname(os.__file__)
    skipped = (stdlib, stdlib + os.sep + "lib-dynload")
    return [entry for entry in (sys.path if path is None else path)
            if isinstance(entry, str) and entry not in skipped and not entry.endswith(".zip")]


def backend_version(package: str, version_module: str = "version", path: "list[str] | None" = None) -> "str | None":
    """The installed backend's version, without importing the backend.

    Uses the already-imported module's ``__version__`` if there is one; otherwise
    reads ``<package>/<version_module>.py`` from the first ``sys.path`` entry
    holding it. ``None`` when the backend is not installed or its version cannot be read.
    """
    return _find_backend_version(package, version_module, path)[1]


def _find_backend_version(
    package: str, version_module: str, path: "list[str] | None"
) -> "tuple[str, str | None, str]":
    """``(file, version, why unreadable)``: ``file`` is ``""`` when no ``sys.path`` entry holds the
    version module, ``version`` is ``None`` when it is there but cannot be read."""
    module = sys.modules.get(package) if path is None else None
    imported: object = getattr(module, "__version__", None) if module is not None else None
    if isinstance(imported, str):
        return getattr(module, "__file__", None) or package, imported, ""
    relative = os.path.join(package.replace(".", os.sep), *version_module.split(".")) + ".py"
    for entry in _entries(path):
        full = os.path.join(entry or ".", relative)
        try:
            source = _read_text(full)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as error:
            return full, None, error.strerror or type(error).__name__
        except UnicodeDecodeError:
            return full, None, "not UTF-8 text"
        found = assigned_string(source, _VERSION_VARIABLES)
        return full, found, "" if found is not None else _NO_VERSION_VARIABLE
    return "", None, ""


def installed_distributions(path: "list[str] | None" = None) -> "dict[str, str]":
    """Map canonical distribution name to version from ``*.dist-info`` names on ``path``.

    The first entry on the path wins, as it does for imports. The standard library's
    own directories hold no distributions and are skipped (they are most of the cost).
    """
    return _distributions(path, ())


def _distributions(path: "list[str] | None", heads: "tuple[str, ...]") -> "dict[str, str]":
    """:func:`installed_distributions`, limited to names starting (lower-cased) with one of ``heads``.

    A head holds no ``-_.``, so a name starts with it exactly when its canonical name does:
    only those few names are canonicalised.
    """
    found: dict[str, str] = {}
    for entry in _entries(path):
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info") and (not heads or name.lower().startswith(heads)):
                distribution, _, version = name[: -len(".dist-info")].rpartition("-")
                if distribution and version:
                    found.setdefault(canonical_name(distribution), version)
    return found


def _head(pattern: str) -> str:
    """The start of a canonical ``pattern`` up to its first ``-`` or ``*`` (``""``: matches anything)."""
    for index, character in enumerate(pattern):
        if character in "-*":
            return pattern[:index]
    return pattern


def ffi_api_in(header_text: str) -> "str | None":
    """``MAJOR.MINOR`` of the XLA FFI API that the text of a ``c_api.h`` defines; ``None`` if absent."""
    found: dict[str, str] = {}
    for line in header_text.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "#define" and words[2].isdigit() and words[2].isascii():
            if words[1] in ("XLA_FFI_API_MAJOR", "XLA_FFI_API_MINOR"):
                found[words[1]] = words[2]
    if len(found) != 2:
        return None
    try:
        return f"{int(found['XLA_FFI_API_MAJOR'])}.{int(found['XLA_FFI_API_MINOR'])}"
    except ValueError:  # longer than int() converts
        return None


def read_ffi_api(header: str) -> "str | None":
    """:func:`ffi_api_in` of the ``c_api.h`` at ``header``; ``None`` when it cannot be read or is not UTF-8."""
    try:
        return ffi_api_in(_read_text(header))
    except (OSError, UnicodeDecodeError):
        return None


def backend_ffi_api(package: str, header: str, path: "list[str] | None" = None) -> "str | None":
    """The XLA FFI API of the installed backend: ``header`` (relative to ``package``) on ``path``."""
    relative = os.path.join(package.replace(".", os.sep), *header.split("/"))
    for entry in sys.path if path is None else path:
        if not isinstance(entry, str):
            continue
        full = os.path.join(entry or ".", relative)
        if os.path.isfile(full):
            return read_ffi_api(full)
    return None


def _api_key(api: str, what: str = "XLA FFI API") -> "tuple[int, ...]":
    """``MAJOR.MINOR`` as integers; ``ValueError`` naming ``what`` if malformed or too long to convert."""
    parts = api.split(".")
    if not all([part.isdigit() and part.isascii() for part in parts]):
        raise ValueError(f"{what} {api!r} is not MAJOR.MINOR (expected e.g. 0.3)")
    try:
        return tuple([int(part) for part in parts])
    except ValueError:
        raise ValueError(f"{what} of {len(api)} characters has a number too long to compare") from None


def _release_key(version: str) -> "tuple[int, ...] | None":
    try:
        return release_of(version).key
    except ValueError:
        return None


def check(
    *,
    backend: str,
    minimum_backend: "str | None" = None,
    frontend: "str | None" = None,
    frontend_version: "str | None" = None,
    plugins: "tuple[Plugin, ...]" = (),
    backend_package: "str | None" = None,
    version_module: str = "version",
    consumer: "str | None" = None,
    minimum_ffi_api: "str | None" = None,
    ffi_header: str = "include/xla/ffi/api/c_api.h",
    install_with: "tuple[str, ...]" = (),
    path: "list[str] | None" = None,
) -> "str | None":
    """Refuse to import when the installed backend or plugins do not fit.

    ``backend`` is the backend's distribution name (``jaxlib``), ``backend_package``
    its import name (default: the distribution name with ``_``). The backend must
    satisfy ``minimum_backend <= backend <= frontend_version``; each pinned plugin
    must have the backend's release number. An XLA FFI extension passes
    ``minimum_ffi_api`` (the API of the headers it was compiled against): the
    backend's ``ffi_header`` must define at least that. ``consumer`` names the
    caller in messages; ``install_with`` lists distributions the fix moves to the
    same bounds as the backend (an extension names the frontend, ``jax``). Returns
    the backend version (``None`` when skipped through ``JAXREL_SKIP_GUARD=1``);
    raises :class:`GuardError`.
    """
    if os.environ.get(SKIP_ENV) == "1":
        return None
    package = backend_package or backend.replace("-", "_")
    file, found, unreadable = _find_backend_version(package, version_module, path)
    installed = {name: version for name, version in ((frontend, frontend_version), (backend, found))
                 if name and version}
    try:
        top = release_of(frontend_version, what=f"{frontend} version") if frontend_version else None
        low = release_of(minimum_backend, what=f"minimum {backend} version") if minimum_backend else None
        if found is None:
            raise _refuse(_UNREADABLE if file else _NOT_INSTALLED, _REINSTALL if file else _IN_RANGE, locals())
        current = release_of(found, what=f"{backend} version")
        needed_api = _api_key(minimum_ffi_api, "minimum XLA FFI API") if minimum_ffi_api is not None else None
    except ValueError as error:
        raise GuardError(f"{error}\n{_SKIP_NOTE}", installed=installed, allowed="unknown", fix="") from None

    if needed_api is not None:
        provided = backend_ffi_api(package, ffi_header, path)
        if provided is None or _api_key(provided) < needed_api:
            raise _refuse(_OLD_API, _IN_RANGE, locals())
    if low is not None and current.key < low.key:
        raise _refuse(_TOO_OLD, _IN_RANGE, locals())
    if top is not None and current.key > top.key:
        raise _refuse(_TOO_NEW, _IN_RANGE_OR_UPGRADE, locals())
    if plugins:
        _check_plugins(plugins, path, backend, found, current, installed)
    return found


# Refusals of the backend, formatted (only when refusing) with check()'s variables plus ``consumer``
# (defaulted), ``allowed`` (the range's text), ``requirements`` (of the fix) and ``api``.
_NOT_INSTALLED = "{backend} is not installed; {consumer} needs {allowed}."
_UNREADABLE = ("{backend} is installed, but its version cannot be read from {file} ({unreadable}); "
               "{consumer} needs {allowed}.")
_OLD_API = ("{backend} {found} provides {api}, older than the {minimum_ffi_api} that {consumer} was built "
            "against: it requires {allowed}.")
_TOO_OLD = "{backend} is version {found}, but {consumer} requires {allowed}."
_TOO_NEW = "{backend} version {found} is newer than {consumer} allows: it requires {allowed}."
_IN_RANGE = ("pip install {requirements}",)
_REINSTALL = ("pip install --force-reinstall {requirements}",)
_IN_RANGE_OR_UPGRADE = ("pip install {requirements}", "pip install --upgrade {frontend} {backend}")


def _refuse(problem: str, fixes: "tuple[str, ...]", facts: "dict[str, Any]") -> GuardError:
    """The :class:`GuardError` stating ``problem`` with ``fixes``, both formatted with ``facts`` (see above)."""
    maximum = facts["top"].text if facts["top"] else None
    minimum, backend = facts["minimum_backend"], facts["backend"]
    allowed = allowed_range(backend, minimum, maximum)
    requirements = " ".join([requirement(name, minimum, maximum) for name in (*facts["install_with"], backend)])
    consumer = facts["consumer"]
    if consumer is None:
        frontend, frontend_version = facts["frontend"], facts["frontend_version"]
        consumer = f"{frontend} {frontend_version}" if frontend and frontend_version else "this package"
    provided, package, header = facts.get("provided"), facts["package"], facts["ffi_header"]
    api = f"XLA FFI API {provided}" if provided else f"no readable XLA FFI API ({package}/{header})"
    fields = {**facts, "consumer": consumer, "allowed": allowed, "requirements": requirements, "api": api}
    return _fail([problem.format(**fields)], [fix.format(**fields) for fix in fixes], facts["installed"], allowed)


def _fail(problems: "list[str]", fixes: "list[str]", installed: "dict[str, str]", allowed: str) -> GuardError:
    lines = problems + [f"Fix: {fixes[0]}"] + [f"  or: {other}" for other in fixes[1:]]
    lines.append(_SKIP_NOTE)
    return GuardError("\n".join(lines), installed=installed, allowed=allowed, fix=fixes[0])


def _check_plugins(plugins: "tuple[Plugin, ...]", path: "list[str] | None", backend: str, found: str,
                   current: Release, installed: "dict[str, str]") -> None:
    """Refuse when an installed plugin that is pinned has another release number than the backend."""
    patterns = [canonical_name(plugin.distribution) for plugin in plugins]
    heads = tuple([_head(pattern) for pattern in patterns])
    distributions = sorted(_distributions(path, () if "" in heads else heads).items())
    mismatched = []
    for plugin, pattern in zip(plugins, patterns, strict=True):
        for name, version in distributions:
            if not glob_match(name, pattern):
                continue
            installed[name] = version
            if plugin.pinned and _release_key(version) != current.key:
                mismatched.append((name, version))
    if mismatched:
        listing = ", ".join([f"{name} {version}" for name, version in mismatched])
        aligned = " ".join([f'"{name}=={current.text}"' for name, _ in mismatched])
        raise _fail(
            [f"{listing} installed, but plugins must have the same release number as {backend} {found}; "
             "a mismatched plugin is skipped with a warning, fails later or crashes."],
            [f"pip install {aligned}", f"pip uninstall -y {' '.join([name for name, _ in mismatched])}"],
            installed, f"{current.text} (equal to {backend})",
        )


# --- the device side: a CUDA build of an extension (one wheel per CUDA major, as jax's plugins) -------------


def cuda_driver_version() -> "int | None":
    """The CUDA version the NVIDIA driver supports (``cuDriverGetVersion``: 13000 is 13.0); ``None`` without one.

    Reads ``libcuda.so.1`` through ctypes without initialising CUDA, so it costs no GPU context. A ``libcuda``
    without that function (a stub, a stand-in) is no usable driver: ``None``.
    """
    import ctypes

    try:
        library = ctypes.CDLL("libcuda.so.1")
        function = library.cuDriverGetVersion
    except (OSError, AttributeError):
        return None
    version = ctypes.c_int(0)
    if function(ctypes.byref(version)) != 0:
        return None
    return version.value


def _cuda_text(number: int) -> str:
    return f"{number // 1000}.{number % 1000 // 10}"


def check_cuda(
    *,
    cuda_major: str,
    cuda_version: str,
    distribution: str,
    version: str,
    load: "Callable[[], int]",
    driver_version: "Callable[[], int | None]" = cuda_driver_version,
    path: "list[str] | None" = None,
) -> "str | None":
    """Refuse a CUDA build that cannot run here; else load it and say why its kernels would sit idle, if so.

    ``cuda_major``/``cuda_version`` are what it was compiled with ("13", "13.0"), ``distribution`` its wheel
    (``jaxrel-rmsnorm-cuda13``, named ``-cuda<MAJOR>`` as jax's plugins are); ``load`` imports the
    compiled module and returns the CUDA runtime version it loaded (13000 = 13.0; the runtime comes from the
    ``nvidia-cuda-runtime`` wheel through the module's rpath, else from a system CUDA). Refused
    (:class:`GuardError`): jax CUDA plugins installed for another CUDA major only; a CUDA runtime missing, of
    another major or older than ``cuda_version``; an NVIDIA driver older than ``cuda_version``. Not refused:
    no jax CUDA plugin at all, or no NVIDIA driver (a machine without a GPU): jax computes on the CPU, and
    the returned reason says so. ``None``: the kernels can run. ``JAXREL_SKIP_GUARD=1`` only loads.
    """
    if os.environ.get(SKIP_ENV) == "1":
        load()
        return None
    consumer = f"{distribution} {version}"
    parts = cuda_version.split(".")
    if not (cuda_major.isascii() and cuda_major.isdigit() and len(parts) == 2 and parts[0] == cuda_major
            and parts[1].isascii() and parts[1].isdigit()):
        raise _fail([f"{consumer}: its build facts are damaged (CUDA major {cuda_major[:20]!r}, version "
                     f"{cuda_version[:20]!r}); the installed wheel is not what its build wrote."],
                    [f"pip install --force-reinstall --no-deps {distribution}=={version}"], {}, "an intact wheel")
    major = int(cuda_major)
    runtime = "nvidia-cuda-runtime" if major >= 13 else f"nvidia-cuda-runtime-cu{major}"  # NVIDIA's names
    wanted = f"jax-cuda{major}-plugin"
    plugins = {name: found for name, found in _distributions(path, ("jax_cuda", "jax-cuda")).items()
               if name.startswith("jax-cuda") and name.endswith("-plugin")}
    if plugins and wanted not in plugins:
        major_of = {name: name[len("jax-cuda"): -len("-plugin")] for name in plugins}
        majors = sorted(set(major_of.values()))
        listing = ", ".join([f"{name} {found} (CUDA {major_of[name]})" for name, found in sorted(plugins.items())])
        stem = (distribution[: -len(cuda_major)] if distribution.endswith(f"cuda{cuda_major}")
                else distribution + "-cuda")
        raise _fail([f"{consumer} was built for CUDA {major}, but the installed jax CUDA plugin is {listing}; "
                     "its kernels cannot run on that plugin's CUDA."],
                    [f'pip install "jax[cuda{major}]"',
                     f"pip uninstall -y {distribution} && pip install {' '.join(stem + m for m in majors)}"],
                    {**plugins, distribution: version}, f"{wanted} (CUDA {major})")
    try:
        loaded = load()
    except ImportError as error:
        raise _fail([f"{consumer} cannot load its CUDA {major} runtime: {(str(error).splitlines() or [''])[0]}"],
                    [f'pip install "{runtime}>={cuda_version},<{major + 1}"',
                     f'pip install "jax[cuda{major}]"'], {},
                    f"CUDA runtime {cuda_version} or newer {major}.x") from None
    except Exception as error:  # the compiled module's own initialisation failed: a damaged install
        raise _fail([f"{consumer} cannot load its compiled module: {type(error).__name__}: "
                     f"{(str(error).splitlines() or [''])[0]}"],
                    [f"pip install --force-reinstall --no-deps {distribution}=={version}"], {},
                    "an intact wheel") from None
    built = release_of(cuda_version, what="CUDA version").key
    if loaded and (loaded // 1000 != major or (loaded // 1000, loaded % 1000 // 10) < built):
        raise _fail([f"{consumer} was built with CUDA {cuda_version}, but the CUDA runtime loaded is "
                     f"{_cuda_text(loaded)}."],
                    [f'pip install --upgrade "{runtime}>={cuda_version},<{major + 1}"'], {},
                    f"CUDA runtime {cuda_version} or newer {major}.x")
    driver = driver_version()
    if driver is None:
        return "no NVIDIA driver (libcuda.so.1) is installed: jax computes on the CPU"
    if (driver // 1000, driver % 1000 // 10) < built:
        raise _fail([f"the NVIDIA driver supports CUDA {_cuda_text(driver)}, older than the CUDA {cuda_version} "
                     f"{consumer} was built with; its kernels would fail to launch."],
                    [f"upgrade the NVIDIA driver to one for CUDA {cuda_version} or newer",
                     f"pip uninstall -y {distribution} (jax then runs without its CUDA kernels)"], {},
                    f"a driver for CUDA {cuda_version} or newer")
    if not plugins:
        return f"no jax CUDA plugin is installed (pip install \"jax[cuda{major}]\"): jax computes on the CPU"
    return None
