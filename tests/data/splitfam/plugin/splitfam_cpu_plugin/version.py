"""splitfam-cpu-plugin's version: always the version of the splitfam-core it is built for."""

_version = "0.1.0"

__version__ = _version
