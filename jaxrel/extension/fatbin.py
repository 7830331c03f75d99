"""The GPU code a CUDA extension carries: the ``.nv_fatbin`` section of its ELF shared object.

nvcc embeds one fat binary per compiled ``.cu`` file: a header (magic ``0xBA55ED50``) and entries, each a
machine-code ELF (SASS) for one ``sm_XY`` or PTX for one ``compute_XY``. :func:`gpu_code` lists them,
which is what ``cuobjdump --list-elf`` / ``--list-ptx`` print, with no CUDA tool installed.

Hostile files are one line each: only a regular file is read (a FIFO is never waited on, ``/dev/zero`` never
read), at most :data:`MAX_OBJECT` bytes of it, and every step of the walk moves forward (a header claiming zero
sizes is damage, not a loop).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from jaxrel._util import localfiles
from jaxrel.errors import BadInput

__all__ = ["MAX_OBJECT", "GpuCode", "fatbin_section", "gpu_code"]

MAX_OBJECT = 4 << 30  # bytes: a CUDA shared object with every architecture's code is far below this

_FATBIN_MAGIC = 0xBA55ED50
_KINDS = {1: "ptx", 2: "sass"}


@dataclass(frozen=True, order=True)
class GpuCode:
    """One entry of a fat binary: ``kind`` "sass" or "ptx", for ``arch`` (90 means sm_90 / compute_90)."""

    kind: str
    arch: int

    def __str__(self) -> str:
        return f"{'sm' if self.kind == 'sass' else 'compute'}_{self.arch}"


def fatbin_section(data: bytes, name: str = "shared object") -> bytes:
    """The bytes of the ``.nv_fatbin`` section of a little-endian ELF64 file (``b""`` if it has none)."""
    try:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise BadInput(f"{name} is not a little-endian ELF64 file. Fix: pass a Linux x86-64/aarch64 .so.")
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names_offset = sections[shstrndx][4]
        for name_index, _, _, _, offset, size in sections:
            end = data.index(b"\0", names_offset + name_index)
            if data[names_offset + name_index:end] == b".nv_fatbin":
                if offset + size > len(data):
                    raise BadInput(f"{name}: .nv_fatbin runs past the end of the file. Fix: rebuild it.")
                return data[offset:offset + size]
    except (struct.error, IndexError, ValueError):
        raise BadInput(f"{name} is a truncated or damaged ELF file. Fix: rebuild or re-download it.") from None
    return b""


def gpu_code(path: Path) -> list[GpuCode]:
    """Every SASS and PTX entry in ``path``'s fat binaries, sorted and without repeats."""
    data = localfiles.read_bytes(path, what="the CUDA shared object", limit=MAX_OBJECT)
    section = fatbin_section(data, path.name)
    found: set[GpuCode] = set()
    at = 0
    try:
        while at + 16 <= len(section):
            magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", section, at)
            if magic != _FATBIN_MAGIC:
                break  # padding after the last fat binary
            if header_size < 16 or at + header_size + fat_size > len(section):
                raise struct.error("a fat binary header smaller than itself, or past the section")
            entry, end = at + header_size, at + header_size + fat_size
            while entry + 32 <= end:
                kind, _, entry_header, payload = struct.unpack_from("<HHIQ", section, entry)
                arch, = struct.unpack_from("<I", section, entry + 28)
                if kind in _KINDS:
                    found.add(GpuCode(_KINDS[kind], arch))
                if entry_header == 0:
                    break
                entry += entry_header + payload
            at = (end + 7) // 8 * 8
    except struct.error:
        raise BadInput(f"{path.name}: its .nv_fatbin is damaged. Fix: rebuild it.") from None
    return sorted(found)
