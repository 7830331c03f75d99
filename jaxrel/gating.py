"""API-version gating: the supported way to write ``if jaxlib_extension_version >= N:``.

The backend exports an integer API number (``_version = N`` in ``jaxlib/xla_client.py``)
that grows with every backend change the frontend may depend on. Frontend code gates on
it::

    from jaxrel.gating import jaxlib_extension_version as api

    if api.at_least(503):                      # a plain gate, as jax writes it today
        ...
    impl = api.choose(503, new_impl, old_impl)  # pick a code path once

    @api.requires(505)                         # refuse clearly when the backend is too old
    def new_feature(): ...

When the family's release data is available the error names the first backend release
known to provide N and the pip command that installs it. Standard library only: like the
guard, this module runs inside the frontend's process at import time, so it reads installed
versions with the guard's own standard-library readers (the only module that borrows from it).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from jaxrel.errors import Refused
from jaxrel.guard import _PEP440, _read_text, backend_version, canonical_name, installed_distributions, release_of

__all__ = ["API_GATES", "ApiGate", "ApiVersionError", "installed_version", "pre_release_of", "read_api_number",
           "unmet"]

T = TypeVar("T")
Releases = Mapping[str, int]


class ApiVersionError(Refused):
    """The installed backend's API number is below what a code path needs."""


def read_api_number(file: str, variable: str, path: list[str] | None = None) -> int | None:
    """Read the integer literal ``variable = N`` from ``file`` (relative to a ``sys.path`` entry).

    ``None`` when the file is not installed or the value is not a readable literal (a file that is
    not UTF-8, a number longer than Python converts): the gate then says it cannot tell.
    """
    for entry in sys.path if path is None else path:
        if not isinstance(entry, str):
            continue  # Python's import system skips non-str sys.path entries too
        try:
            return assigned_int(_read_text(os.path.join(entry or ".", file), "replace"), variable)
        except OSError:  # missing, or not a regular file (never waited on)
            continue
    return None


def assigned_int(source: str, variable: str) -> int | None:
    """The integer literal of ``variable = N`` (a trailing comment allowed) in ``source``."""
    found = re.search(rf"^{re.escape(variable)}\s*(?::[^=\n]*)?=\s*([0-9]{{1,4300}})\s*(?:#.*)?$", source,
                      re.MULTILINE)
    return int(found[1]) if found else None


def first_release_providing(number: int, releases: Releases) -> str | None:
    """The oldest backend release whose API number is at least ``number``."""
    providing = [version for version, value in releases.items() if value >= number]
    return min(providing, key=lambda version: release_of(version).key, default=None)


class ApiGate:
    """One API number of one backend, read once, with gate helpers.

    ``module`` is the backend module that defines ``variable`` (used when it is already
    imported, or when the value is not a literal in ``file``). ``releases`` maps backend
    versions to their API number, or is a callable returning that mapping (loaded only
    when an error needs it).
    """

    def __init__(
        self,
        name: str,
        *,
        backend: str,
        module: str,
        variable: str = "_version",
        releases: Releases | Callable[[], Releases] | None = None,
    ) -> None:
        self.name = name
        self.backend = backend
        self.module = module
        self.variable = variable
        self._releases = releases
        self._value: int | None = None

    @property
    def value(self) -> int:
        """The installed backend's number (0 when the backend predates it, as jax does)."""
        if self._value is None:
            self._value = self._read()
        return self._value

    def _read(self) -> int:
        loaded = sys.modules.get(self.module)
        if loaded is None:
            found = read_api_number(self.module.replace(".", "/") + ".py", self.variable)
            if found is not None:
                return found
            import importlib

            try:
                loaded = importlib.import_module(self.module)
            except ImportError as error:
                raise ApiVersionError(
                    f"cannot read {self.name}: {self.module} is not importable ({error}); "
                    f"install {self.backend}"
                ) from None
        value = getattr(loaded, self.variable, 0)
        return value if isinstance(value, int) else 0

    def releases(self) -> Releases:
        """Known backend release → API number (empty when no release data is available)."""
        data = self._releases() if callable(self._releases) else self._releases
        return data or {}

    def at_least(self, number: int) -> bool:
        """The gate ``value >= number``."""
        return self.value >= number

    def require(self, number: int, feature: str = "this feature") -> None:
        """Raise :class:`ApiVersionError` unless the backend provides ``number``."""
        if self.at_least(number):
            return
        first = first_release_providing(number, self.releases())
        if first is not None:
            where = f"the first {self.backend} release known to provide it is {first}"
            fix = f'pip install "{self.backend}>={first}" (with a matching frontend)'
        else:
            where = f"no released {self.backend} is known to provide it; build {self.backend} at HEAD"
            fix = f"build and install {self.backend} from source at HEAD"
        raise ApiVersionError(
            f"{feature} needs {self.name} >= {number}, but the installed {self.backend} "
            f"provides {self.value}; {where}. Fix: {fix}"
        )

    def requires(self, number: int) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator: calling the function raises :class:`ApiVersionError` on an older backend."""

        def decorate(function: Callable[..., T]) -> Callable[..., T]:
            @functools.wraps(function)
            def gated(*args: Any, **kwargs: Any) -> T:
                self.require(number, f"{function.__module__}.{function.__qualname__}")
                return function(*args, **kwargs)

            gated.__jaxrel_api__ = (self.name, number)  # type: ignore[attr-defined]
            return gated

        return decorate

    def choose(self, number: int, new: T, old: T) -> T:
        """``new`` when the backend provides ``number``, else ``old``."""
        return new if self.at_least(number) else old


def _jax_releases(name: str) -> Callable[[], Releases]:
    def load() -> Releases:
        from jaxrel import releasedata

        return releasedata.api_numbers("jax", "jaxlib", name)

    return load


jaxlib_extension_version = ApiGate(
    "jaxlib_extension_version",
    backend="jaxlib",
    module="jaxlib.xla_client",
    releases=_jax_releases("jaxlib_extension_version"),
)
xla_extension_version = jaxlib_extension_version  # the name jax used up to 0.5.x
ifrt_version = ApiGate(
    "ifrt_version",
    backend="jaxlib",
    module="jaxlib.xla_client",
    variable="_ifrt_version",
    releases=_jax_releases("ifrt_version"),
)


API_GATES: dict[str, ApiGate] = {
    "jaxlib_extension_version": jaxlib_extension_version,
    "xla_extension_version": xla_extension_version,
    "ifrt_version": ifrt_version,
}


def installed_version(distribution: str) -> str | None:
    """``distribution``'s installed version, without importing it (``None`` when not installed).

    Read from ``<name with _>/version.py`` as the guard reads a backend's, else from the
    ``.dist-info`` name (for distributions without such a module, e.g. ``jax-cuda12-pjrt``).
    """
    found = backend_version(distribution.replace("-", "_"), "version")
    return found if found is not None else installed_distributions().get(canonical_name(distribution))


def pre_release_of(version: str, release: str) -> bool:
    """Whether ``version`` is a pre-release or development build of ``release``: the same release number, ordered
    before it by PEP 440 (``0.7.0.dev20250625+g85193bd``, ``0.7.0rc1`` of ``0.7.0``; not ``0.7.0.post1.dev2``, which
    follows it). A release declared "from X on" (an API added or removed in X) is due there, not yet required:
    the frontend changes during X's cycle, not at its start. A malformed version is a ``ValueError``."""
    match = re.match(_PEP440, version, re.IGNORECASE | re.VERBOSE)
    if match is None:
        raise ValueError(f"version {version!r} is not a PEP 440 version (expected e.g. 0.7.0.dev20250625)")
    if release_of(version).key != release_of(release, what="release").key:
        return False
    return match["pre"] is not None or (match["dev"] is not None and match["post"] is None)


def unmet(releases: Mapping[str, str] | None = None, api: Mapping[str, int] | None = None) -> str | None:
    """One-line reason the installed environment falls short of ``releases`` and ``api``; ``None`` when all are met.

    ``releases`` maps a distribution to its minimum release (``{"jax": "0.4.36"}``; ``"0"``: installed
    at any release), compared on release numbers (suffixes ignored, as the guard compares); a
    distribution that is not installed falls short. ``api`` maps an API number name of
    :data:`API_GATES` to its minimum (``{"jaxlib_extension_version": 300}``); an unknown name is a
    ``ValueError``. Nothing is imported but what an :class:`ApiGate` needs to read its number.
    """
    reasons = []
    for distribution, minimum in (releases or {}).items():
        version, least = installed_version(distribution), release_of(minimum, what=f"minimum {distribution}").key
        if version is None:
            wanted = f"{distribution} >= {minimum}" if least > (0,) else distribution  # "0": any release
            reasons.append(f"needs {wanted}, which is not installed")
        elif release_of(version, what=f"{distribution} version").key < least:
            reasons.append(f"needs {distribution} >= {minimum}, installed {distribution} {version}")
    for name, number in (api or {}).items():
        gate = API_GATES.get(name)
        if gate is None:
            raise ValueError(f"unknown API number {name!r}; known: {', '.join(API_GATES)}")
        try:
            value = gate.value
        except ApiVersionError as error:
            reasons.append(f"needs {name} >= {number}: {error}")
            continue
        if value < number:
            first = first_release_providing(number, gate.releases())
            since = f"first {gate.backend} release providing it: {first}" if first else f"no {gate.backend} release yet"
            reasons.append(f"needs {name} >= {number}, installed {gate.backend} "
                           f"{installed_version(gate.backend)} provides {value} ({since})")
    return "; ".join(reasons) or None
