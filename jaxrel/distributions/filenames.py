"""The project name, version and tags that a wheel's or an sdist's file name carries (PEP 427, PEP 625).

The one parser of distribution file names: a name packaging cannot read (not a wheel or sdist
name, a version it refuses, numbers past Python's conversion limit) is one :class:`FilenameError`
line naming the file, never an exception from inside packaging.
"""

from __future__ import annotations

from collections.abc import Iterable

from packaging.tags import Tag
from packaging.utils import parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

from jaxrel._util.text import shorten
from jaxrel.errors import BadInput

__all__ = ["FilenameError", "name_and_version", "wheel_pairs", "wheel_tags"]

MAX_NAME = 255  # bytes a file name can have on the file systems jaxrel writes to


class FilenameError(BadInput, ValueError):
    """A file name that is not a valid wheel or sdist name (bad input, exit 2; a ``ValueError`` too)."""


def _refused(filename: str, why: object) -> FilenameError:
    return FilenameError(f"{shorten(filename, 80)!r} is not a valid wheel or sdist file name ({why}); only files "
                         "built for the release belong in it: remove or rebuild it")


def name_and_version(filename: str) -> tuple[str, Version]:
    """The project name and version a wheel or sdist filename carries."""
    if len(filename) > MAX_NAME or not filename.isprintable():
        raise _refused(filename, "too long, or control characters")
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        else:
            name, version = parse_sdist_filename(filename)
    except ValueError as error:  # Invalid…Filename, InvalidVersion, or numbers Python will not convert
        raise _refused(filename, str(error).split("\n")[0][:120]) from None
    return str(name), version


def wheel_tags(filename: str) -> frozenset[Tag]:
    """The tags a wheel's filename carries."""
    name_and_version(filename)
    return parse_wheel_filename(filename)[3]


def wheel_pairs(filenames: Iterable[str]) -> set[tuple[str, str]]:
    """The (Python tag, platform) pairs the wheels among ``filenames`` are for (``py3`` for every Python)."""
    return {(tag.interpreter, tag.platform) for name in filenames if name.endswith(".whl")
            for tag in wheel_tags(name)}
