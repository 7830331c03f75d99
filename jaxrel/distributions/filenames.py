"""The project name and version that a wheel's or an sdist's file name carries (PEP 427, PEP 625)."""

from __future__ import annotations

from packaging.utils import parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

__all__ = ["name_and_version"]


def name_and_version(filename: str) -> tuple[str, Version]:
    """The project name and version a wheel or sdist filename carries."""
    if filename.endswith(".whl"):
        name, version, _, _ = parse_wheel_filename(filename)
    else:
        name, version = parse_sdist_filename(filename)
    return str(name), version
