"""Uniform, bounded, RECORD-checked access to the members of a wheel (zip) or an sdist (tar.gz).

The size limits here are what jaxrel reads from any archive: a zip bomb or an oversized member
is refused before it is read, and every wheel member read is checked against its RECORD.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import lzma
import re
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import IO

from jaxrel.errors import BadInput

try:  # ISA-L (the release extra) inflates about twice as fast as zlib; verifying a release is mostly inflating
    from isal import isal_zlib as _inflater_module
    INFLATE: ModuleType = _inflater_module
except ImportError:  # pragma: no cover - the core needs only packaging
    INFLATE = zlib

__all__ = ["MAX_MEMBERS", "MAX_SDIST", "MAX_TEXT", "MAX_UNPACKED", "MEMBER_ERRORS", "MIB", "RECORD_HASHES", "Archive",
           "WheelError", "first_line", "verify_record"]


class WheelError(BadInput):
    """An archive that is not a valid wheel/sdist, or whose contents do not match its RECORD."""


MIB = 1 << 20
MAX_TEXT = 16 * MIB  # METADATA, PKG-INFO, WHEEL, RECORD and the files read for API numbers
MAX_UNPACKED = 32 * 1024 * MIB  # all members of one archive, decompressed (a zip bomb is refused before reading)
MAX_SDIST = 2048 * MIB  # an sdist is source: a tar.gz inflating past this is refused while it is listed
MAX_MEMBERS = 500_000
RECORD_HASHES = frozenset({"sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s"})
_B64 = re.compile(r"[A-Za-z0-9_-]+")
# what reading a damaged, encrypted or exotic member raises (zipfile: RuntimeError for a password,
# NotImplementedError for an unknown compression method, BadZipFile for a bad CRC or overlapping members)
MEMBER_ERRORS = (zipfile.BadZipFile, tarfile.TarError, zlib.error, INFLATE.error, lzma.LZMAError, OSError, EOFError,
                 RuntimeError, NotImplementedError, ValueError, KeyError)


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:160] if text else type(error).__name__


class Archive:
    """Uniform member access to a wheel (zip) or an sdist (tar.gz, one top-level directory).

    Sizes are checked from the archive's directory before any member is decompressed: one
    text member over :data:`MAX_TEXT`, all members over :data:`MAX_UNPACKED` or more than
    :data:`MAX_MEMBERS` of them is refused (a zip bomb is never inflated).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.is_wheel = path.name.endswith(".whl")
        self.sizes: dict[str, int] = {}
        kind = "wheel" if self.is_wheel else "sdist"
        try:
            if self.is_wheel:
                self.zip = zipfile.ZipFile(path)
                infos = self.zip.infolist()
                self.sizes = {info.filename: info.file_size for info in infos}
                self.names = [info.filename for info in infos]
            else:
                self.tar = tarfile.open(path)
                self.members: dict[str, tarfile.TarInfo] = {}
                unpacked = 0
                for member in self.tar:  # each step inflates the member before it: stop at the caps
                    unpacked += max(member.size, 0)
                    if len(self.members) > MAX_MEMBERS or unpacked > MAX_SDIST:
                        raise WheelError(f"{path}: more than {MAX_MEMBERS} members or {MAX_SDIST // MIB} MiB "
                                         "unpacked, more than an sdist has; this is not a real sdist: delete it")
                    if member.isfile():
                        self.members[member.name.split("/", 1)[-1]] = member
                self.sizes = {name: m.size for name, m in self.members.items()}
                self.names = list(self.members)
        except MEMBER_ERRORS as error:
            raise WheelError(f"{path}: not a readable {kind} ({first_line(error)}); "
                             "delete it and download again") from None
        if len(self.names) > MAX_MEMBERS or sum(self.sizes.values()) > MAX_UNPACKED:
            raise WheelError(f"{path}: {len(self.names)} members unpacking to {sum(self.sizes.values()) // MIB} MiB, "
                             f"more than a {kind} has (at most {MAX_MEMBERS} members, {MAX_UNPACKED // MIB} MiB); "
                             "this archive is not a real distribution: delete it")
        self.record: dict[str, str] = {}
        self.record = self._record() if self.is_wheel else {}

    def _record(self) -> dict[str, str]:
        record_name = next((n for n in self.names if n.endswith(".dist-info/RECORD") and n.count("/") == 1), None)
        if record_name is None:
            raise WheelError(f"{self.path}: no .dist-info/RECORD; not a valid wheel")
        text = self.decoded(record_name)
        found: dict[str, str] = {}
        try:
            for number, row in enumerate(csv.reader(io.StringIO(text)), 1):
                if len(row) < 2 or not row[1]:
                    continue
                algorithm, _, digest = row[1].partition("=")
                if algorithm not in RECORD_HASHES or not _B64.fullmatch(digest):
                    raise WheelError(f"{self.path}: RECORD line {number} ({row[0][:60]!r}) has the hash "
                                     f"{row[1][:40]!r}; expected <algorithm>=<urlsafe base64> with one of "
                                     f"{', '.join(sorted(RECORD_HASHES))}: the wheel is damaged, rebuild it")
                found[row[0]] = row[1]
        except csv.Error as error:
            raise WheelError(f"{self.path}: RECORD is not CSV ({first_line(error)}); the wheel is damaged, "
                             "rebuild it") from None
        return found

    def _open(self, name: str) -> IO[bytes]:
        if self.is_wheel:
            return self.zip.open(name)
        handle = self.tar.extractfile(self.members[name])
        return handle if handle is not None else io.BytesIO(b"")

    def _blocks(self, name: str, hashed: bool) -> Iterator[bytes]:
        """A member's bytes in blocks: a hashed wheel member that is stored or deflated, straight from the file
        (:meth:`_inflated`); anything else through zipfile/tarfile, which also check the CRC."""
        if hashed and self.is_wheel:
            info = self.zip.getinfo(name)
            if info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) and not info.flag_bits & 1:
                yield from self._inflated(info)
                return
        with self._open(name) as handle:
            while block := handle.read(MIB):
                yield block

    def _inflated(self, info: zipfile.ZipInfo) -> Iterator[bytes]:
        """A stored or deflated member read from its local header on, as zipfile reads it (its declared size of
        output, then stop; a stream ending before that is an error) but with no CRC (its RECORD hash is checked,
        which is stronger), inflated by :data:`INFLATE` at most 4 MiB at a time whatever the input."""
        with open(self.path, "rb") as handle:
            handle.seek(info.header_offset)
            header = handle.read(30)
            if len(header) != 30 or header[:4] != b"PK\x03\x04":
                raise zipfile.BadZipFile(f"bad local header for {info.filename}")
            name_length, extra_length = struct.unpack("<HH", header[26:30])
            if handle.read(name_length) != info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437"):
                raise zipfile.BadZipFile(f"the local header of {info.filename} names another file")
            handle.seek(extra_length, io.SEEK_CUR)
            inflater = INFLATE.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED else None
            wanted, left = info.file_size, info.compress_size
            while wanted:
                data = handle.read(min(MIB, left))
                left -= len(data)
                if not data:
                    raise EOFError(f"{info.filename}: the stream ends before its {info.file_size} bytes")
                while data and wanted:
                    block = inflater.decompress(data, min(4 * MIB, wanted)) if inflater else data[:wanted]
                    data = inflater.unconsumed_tail if inflater else b""
                    wanted -= len(block)
                    yield block

    def _chunks(self, name: str, cap: int, hashed: bool = False) -> Iterator[bytes]:
        if self.sizes.get(name, 0) > cap:
            raise WheelError(f"{self.path}: member {name} unpacks to {self.sizes[name] // MIB} MiB, more than "
                             f"{cap // MIB} MiB; this is not a real distribution: delete it")
        try:
            total = 0
            for block in self._blocks(name, hashed):
                total += len(block)
                if total > cap:
                    raise WheelError(f"{self.path}: member {name} unpacks to more than its declared size")
                yield block
        except MEMBER_ERRORS as error:
            what = "encrypted" if isinstance(error, RuntimeError) and "password" in str(error) else "unreadable"
            raise WheelError(f"{self.path}: member {name} is {what} ({first_line(error)}); the archive is "
                             "damaged or not a plain zip/tar.gz: delete it and rebuild or download it") from None

    def _check(self, name: str, digest: hashlib._Hash | None) -> None:
        expected = self.record.get(name)
        if expected is None and not name.endswith("/RECORD"):
            raise WheelError(f"{self.path}: member {name} is not listed in RECORD; the wheel was altered")
        if expected and digest is not None:
            actual = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
            if actual != expected.partition("=")[2]:
                raise WheelError(f"{self.path}: member {name} does not match its RECORD hash; the wheel was "
                                 "altered or is corrupt: delete it and download again")

    def _hasher(self, name: str) -> hashlib._Hash | None:
        expected = self.record.get(name) if self.is_wheel else None
        return hashlib.new(expected.partition("=")[0]) if expected else None

    def read(self, name: str, cap: int = MAX_TEXT) -> bytes:
        """A member's bytes (checked against RECORD in a wheel)."""
        digest = self._hasher(name)
        data = b"".join(self._chunks(name, cap))
        if digest is not None:
            digest.update(data)
        if self.is_wheel:
            self._check(name, digest)
        return data

    def verify(self, name: str) -> None:
        """Hash a member of any size in blocks against RECORD."""
        digest = self._hasher(name)
        for block in self._chunks(name, min(MAX_UNPACKED, self.sizes.get(name, 0)), hashed=digest is not None):
            if digest is not None:
                digest.update(block)
        self._check(name, digest)

    def decoded(self, name: str) -> str:
        """A text member as UTF-8, else :class:`WheelError` naming it."""
        try:
            return self.read(name).decode("utf-8")
        except UnicodeDecodeError as error:
            raise WheelError(f"{self.path}: {name} is not UTF-8 (byte {error.start}); the archive is damaged: "
                             "rebuild it") from None

    def text(self, name: str) -> str | None:
        return self.read(name).decode("utf-8", "replace") if name in self.names else None

    def find(self, suffix: str) -> str | None:
        return next((n for n in self.names if n == suffix or n.endswith("/" + suffix)), None)

    def close(self) -> None:
        (self.zip if self.is_wheel else self.tar).close()


def verify_record(path: Path) -> int:
    """Check every member of a wheel against its RECORD; returns the number of members checked."""
    archive = Archive(path)
    try:
        for name in archive.names:
            if not name.endswith("/"):
                archive.verify(name)
        return len(archive.names)
    finally:
        archive.close()


