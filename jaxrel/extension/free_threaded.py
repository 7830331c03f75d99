"""The free-threaded slots of the extension's release grid: which free-threaded ABIs the pinned backend ships for a
machine (jaxlib 0.10.2: ``cp313t`` and ``cp314t``), and for each whether an interpreter here builds it, or why not.

The GIL builds are one stable-ABI wheel per machine (bazel/stable_abi.bzl); a free-threaded CPython has no stable
ABI, so each free-threaded Python the backend ships for is a slot of its own, built with that interpreter's headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jaxrel.distributions.pages import Listing
from jaxrel.distributions.pythons import Python

__all__ = ["FreeThreadedSlot", "plan_slots", "shipped_abis"]


@dataclass(frozen=True)
class FreeThreadedSlot:
    """One free-threaded ABI of the grid: the interpreter that builds it here, or why it is not built."""

    abi: str  # "cp313t"
    python: Python | None
    reason: str = ""  # why not built; empty when built

    @property
    def version(self) -> str:
        """The interpreter's version as ``--python`` takes it: ``3.13t``."""
        return _version_of(self.abi)


def _version_of(abi: str) -> str:
    """``cp313t`` → ``3.13t``."""
    return f"{abi[2]}.{abi[3:-1]}t"


def shipped_abis(listing: Listing, version: str, machine: str) -> list[str]:
    """The free-threaded ABIs (``cp313t``) of the backend's Linux wheels of ``version`` for ``machine``, oldest
    first."""
    abis = {tag.abi for file in listing.files_for(version) for tag in file.tags
            if tag.abi.startswith("cp") and tag.abi.endswith("t") and tag.platform.startswith("manylinux")
            and tag.platform.endswith(f"_{machine}")}
    return sorted(abis, key=lambda abi: int(abi[3:-1]))


def plan_slots(abis: list[str], pythons: Mapping[str, Python], backend: str) -> list[FreeThreadedSlot]:
    """Each of ``abis`` with the free-threaded interpreter here that builds it (``pythons``: version → interpreter,
    as :func:`~jaxrel.distributions.pythons.all_pythons` gives), or why it is not built."""
    slots = []
    for abi in abis:
        version = _version_of(abi)
        python = pythons.get(version)
        reason = "" if python else (
            f"no {version} interpreter here ({backend} ships {abi} wheels); scripts/free_threaded_python.sh "
            f"{version[:-1]} SUITE builds one from the source of a Debian suite that carries python{version[:-1]}")
        slots.append(FreeThreadedSlot(abi, python, reason))
    return slots
