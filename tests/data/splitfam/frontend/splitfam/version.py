"""splitfam's version and the oldest splitfam-core it supports (one source of truth each)."""

_version = "0.1.0"
_minimum_core_version = "0.1.0"

__version__ = _version
