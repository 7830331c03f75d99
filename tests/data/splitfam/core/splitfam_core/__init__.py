"""splitfam-core: the compiled backend of splitfam."""

from splitfam_core._core import add
from splitfam_core.version import __version__, _api_version

__all__ = ["__version__", "_api_version", "add"]
