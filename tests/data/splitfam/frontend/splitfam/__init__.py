"""splitfam: the frontend. Refuses to import against a core or plugin that does not fit."""

from splitfam import _guard  # jaxrel's import guard, vendored (standard library only)
from splitfam.version import __version__, _minimum_core_version, _version

_guard.check(
    frontend="splitfam",
    frontend_version=_version,
    backend="splitfam-core",
    backend_package="splitfam_core",
    version_module="version",
    minimum_backend=_minimum_core_version,
    plugins=(_guard.Plugin("splitfam-cpu-plugin", True),),
)

import splitfam_core  # noqa: E402  (only after the guard accepted it)

__all__ = ["__version__", "add"]


def add(a, b):
    """``a + b``, computed by the compiled core (ints or floats)."""
    return splitfam_core.add(a, b)
