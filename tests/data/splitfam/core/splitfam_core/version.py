"""splitfam-core's version and the API number it exports (read by the frontend's guard and gates)."""

_version = "0.1.0"
# Raised whenever the core's Python-visible API changes; frontends gate new calls on it.
_api_version = 1

__version__ = _version
