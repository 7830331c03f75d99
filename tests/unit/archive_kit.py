"""Small wheels and sdists with any member damaged, for the archive boundary tests.

A wheel's RECORD is recomputed over whatever the members hold (so a mutated METADATA is read,
not refused for its hash) unless the test hands its own RECORD.
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

VERSION_PY = b'_minimum_jaxlib_version = "0.9.1"\n'
METADATA = (b"Metadata-Version: 2.1\nName: jax\nVersion: 0.9.9\nRequires-Dist: numpy>=2\n"
            b"Requires-Dist: jaxlib<=0.9.9,>=0.9.1\nRequires-Python: >=3.11\n")
WHEEL = b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
DIST_INFO = "jax-0.9.9.dist-info"
FILENAME = "jax-0.9.9-py3-none-any.whl"


def record_of(members: dict[str, bytes]) -> bytes:
    rows = []
    for name, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{name},sha256={digest},{len(data)}")
    rows.append(f"{DIST_INFO}/RECORD,,")
    return ("\n".join(rows) + "\n").encode()


def wheel_bytes(metadata: bytes = METADATA, wheel: bytes = WHEEL, record: bytes | None = None,
                extra: dict[str, bytes] | None = None, flags: dict[str, int] | None = None,
                method: dict[str, int] | None = None) -> bytes:
    """A jax 0.9.9 wheel; ``flags`` sets a member's general-purpose bits (1: encrypted), ``method`` patches a
    member's compression method number after writing (99: one no reader knows)."""
    members = {"jax/__init__.py": b"x = 1\n", "jax/version.py": VERSION_PY, f"{DIST_INFO}/METADATA": metadata,
               f"{DIST_INFO}/WHEEL": wheel, **(extra or {})}
    members[f"{DIST_INFO}/RECORD"] = record if record is not None else record_of(members)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    data = bytearray(buffer.getvalue())
    for name, number in (method or {}).items():
        _patch(data, name.encode(), (8, 10), number)
    for name, bits in (flags or {}).items():  # zipfile clears flag bits when writing: set them in the bytes
        _patch(data, name.encode(), (6, 8), bits)
    return bytes(data)


def _patch(data: bytearray, name: bytes, offsets: tuple[int, int], value: int) -> None:
    """Set a 2-byte field of member ``name`` in its local header and its central directory entry
    (``offsets``: the field's offset in each; method: 8, 10; general-purpose flags: 6, 8)."""
    for signature, field_at, name_at in ((b"PK\x03\x04", offsets[0], 30), (b"PK\x01\x02", offsets[1], 46)):
        start = 0
        while (at := data.find(signature, start)) != -1:
            if data[at + name_at: at + name_at + len(name)] == name:
                data[at + field_at: at + field_at + 2] = value.to_bytes(2, "little")
            start = at + 4


def sdist_bytes(pkg_info: bytes = METADATA, version_py: bytes = VERSION_PY) -> bytes:
    """A jax 0.9.9 sdist (tar.gz, one top-level directory)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in (("PKG-INFO", pkg_info), ("jax/version.py", version_py), ("setup.py", b"")):
            info = tarfile.TarInfo(f"jax-0.9.9/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def write(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return path
