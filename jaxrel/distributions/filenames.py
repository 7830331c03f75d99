"""The project name, version and tags that a wheel's or an sdist's file name carries (PEP 427, PEP 625).

The one parser of distribution file names: a name packaging cannot read (not a wheel or sdist
name, a version it refuses, numbers past Python's conversion limit) is one :class:`FilenameError`
line naming the file, never an exception from inside packaging.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from packaging.tags import Tag
from packaging.utils import parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

from jaxrel._util.text import shorten
from jaxrel.errors import BadInput

__all__ = ["FilenameError", "Slot", "covers", "grid_holes", "name_and_version", "platform_family", "serves",
           "slot_text", "wheel_slots", "wheel_tags"]

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


Slot = tuple[str, str, str]  # (interpreter, ABI, platform): where one wheel installs


def _slots(filename: str) -> set[Slot]:
    """A wheel's slots: each interpreter and ABI it is tagged for, with its platforms as one key (a wheel tagged
    ``manylinux_2_17_x86_64.manylinux2014_x86_64`` fills one column, not two)."""
    tags = wheel_tags(filename)
    platform = ".".join(sorted({tag.platform for tag in tags}))
    return {(tag.interpreter, tag.abi, platform) for tag in tags}


def wheel_slots(filenames: Iterable[str]) -> set[Slot]:
    """The slots the wheels among ``filenames`` fill: (interpreter, ABI, platform). The ABI tells a free-threaded
    ``cp313t`` wheel from a ``cp313`` one (``py3``/``none`` for a pure or Python-independent wheel)."""
    return {slot for name in filenames if name.endswith(".whl") for slot in _slots(name)}


def slot_text(slot: Slot) -> str:
    """A slot as a wheel's tag triple: ``cp313-cp313t-manylinux_2_27_x86_64``."""
    return "-".join(slot)


def _free_threaded(slot: Slot) -> bool:
    return slot[1].endswith("t") and slot[1].startswith("cp")


def _kind(slot: Slot) -> str:
    """The kind of CPython build a slot holds: the stable ABI (``abi3``), free-threaded, or with the GIL."""
    if slot[1] == "abi3":
        return "abi3"
    return "free-threaded" if _free_threaded(slot) else "gil"


def grid_holes(slots: set[Slot]) -> list[Slot]:
    """The slots missing from a CPython wheel grid against itself: within each kind of build (with the GIL,
    free-threaded, stable ABI), every interpreter present on one platform is expected on every platform that kind
    has. A kind absent from a platform altogether (no free-threaded build for Windows) is the grid's shape, not a
    hole."""
    holes: list[Slot] = []
    cpython = {slot for slot in slots if slot[0].startswith("cp")}
    for kind in ("gil", "free-threaded", "abi3"):
        mine = {slot for slot in cpython if _kind(slot) == kind}
        rows = {(interpreter, abi) for interpreter, abi, _ in mine}
        platforms = {platform for _, _, platform in mine}
        holes += sorted((i, a, p) for i, a in rows for p in platforms if (i, a, p) not in mine)
    return holes


_CPYTHON = re.compile(r"cp(\d)(\d+)")


def serves(slot: Slot, interpreter: str) -> bool:
    """Whether a wheel in ``slot`` installs on the CPython that ``interpreter`` names (``cp312``): a wheel of that
    interpreter, or a stable-ABI wheel (``cp311-abi3``) of it or an older CPython of the same major, which pip
    installs on every newer one (not on a free-threaded build, whose interpreter tags end in ``t``)."""
    if slot[0] == interpreter:
        return True
    built, wanted = _CPYTHON.fullmatch(slot[0]), _CPYTHON.fullmatch(interpreter)
    return (slot[1] == "abi3" and built is not None and wanted is not None and built[1] == wanted[1]
            and int(built[2]) <= int(wanted[2]))


_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
_PLATFORM = re.compile(r"(?P<kind>manylinux|musllinux|macosx)_(?P<major>\d+)_(?P<minor>\d+)_(?P<arch>.+)")


def _floor(platform: str) -> tuple[str, tuple[int, int], str] | None:
    """(kind, the oldest system it installs on, arch) of a platform tag with a floor; ``None`` for the others."""
    for legacy, floor in _LEGACY.items():
        if platform.startswith(legacy + "_"):
            return "manylinux", floor, platform[len(legacy) + 1:]
    found = _PLATFORM.fullmatch(platform)
    if found is None:
        return None
    return found["kind"], (int(found["major"]), int(found["minor"])), found["arch"]


def covers(have: Slot, wanted: Slot) -> bool:
    """Whether a wheel in slot ``have`` installs wherever one in ``wanted`` does: the same interpreter and ABI, and a
    platform whose floor (glibc, macOS) is no newer on the same architecture (``manylinux_2_27_x86_64`` covers
    ``manylinux_2_28_x86_64``, not the other way round)."""
    if have[:2] != wanted[:2]:
        return False
    if have[2] == wanted[2]:
        return True
    theirs = [_floor(p) for p in wanted[2].split(".")]
    mine = [_floor(p) for p in have[2].split(".")]
    return any(t is not None and m is not None and t[0] == m[0] and t[2] == m[2] and m[1] <= t[1]
               for t in theirs for m in mine)



def platform_family(platform: str) -> str:
    """A platform tag without its floor: ``manylinux2014_x86_64`` and ``manylinux_2_27_x86_64`` are both
    ``manylinux_x86_64`` (a release that raised its glibc floor dropped no platform), ``macosx_11_0_arm64`` is
    ``macosx_arm64``; a compressed tag set (``a.b``) is its first tag's."""
    first = platform.split(".")[0]
    floor = _floor(first)
    return f"{floor[0]}_{floor[2]}" if floor is not None else first
