"""A wheel's METADATA read from the index without downloading the wheel.

PEP 658 where the index serves it (``<file URL>.metadata``, checked against its listed hash when
there is one); else HTTP range reads: the wheel's last 512 KiB (its zip central directory, and
usually the ``.dist-info`` files, which wheel builders write last), then the METADATA member itself
if it lies earlier. Every read goes through the transport (deadline, size cap) and the answer is
cached under the wheel's sha256 (a file on an index never changes). A server that ignores ``Range``
answers the whole wheel: refused past the cap, never downloaded silently.
"""

from __future__ import annotations

import hashlib
import io
import struct
import urllib.parse
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from jaxrel._util.atomic import write_bytes_atomically
from jaxrel._util.files import cache_root
from jaxrel.distributions import transport
from jaxrel.distributions.pages import IndexFile
from jaxrel.distributions.transport import IndexClientError

__all__ = ["TAIL", "MetadataReader", "RemoteMetadataError", "metadata_of_local"]

TAIL = 512 * 1024  # bytes of a wheel's end read first: its central directory and, usually, its .dist-info
MAX_METADATA = 4 << 20


class RemoteMetadataError(IndexClientError):
    """The index's answer does not give the wheel's METADATA (exit 3)."""


@dataclass
class MetadataReader:
    """Reads METADATA of index files, counting requests (``requests``) and answering from the cache first."""

    limits: transport.Limits = field(default_factory=transport.Limits)
    cache: Path = field(default_factory=lambda: cache_root() / "remote-metadata")
    requests: int = 0
    cached: int = 0

    def metadata(self, file: IndexFile) -> str:
        """The METADATA text of wheel ``file``."""
        if not file.is_wheel:
            raise RemoteMetadataError(f"{file.filename}: not a wheel; METADATA is read from wheels")
        key = file.sha256 or hashlib.sha256(file.url.encode()).hexdigest()
        entry = self.cache / f"{key}.txt"
        if entry.is_file():
            self.cached += 1
            return entry.read_text(encoding="utf-8", errors="replace")
        if file.url.startswith("file:"):  # a wheelhouse or find-links directory: read the file where it is
            try:
                text = metadata_of_local(Path(urllib.request.url2pathname(urllib.parse.urlsplit(file.url).path)))
            except (OSError, zipfile.BadZipFile, StopIteration, KeyError) as error:
                raise RemoteMetadataError(f"{file.filename}: its METADATA cannot be read ({error})") from None
        else:
            served = self._pep658(file) if file.metadata else None
            text = served if served is not None else self._ranges(file)
        write_bytes_atomically(entry, text.encode("utf-8", "surrogateescape"))
        return text

    def _get(self, url: str, byte_range: str | None = None, cap: int = TAIL + 65536) -> transport.Response:
        request = transport.request_for(url)
        if byte_range:
            request.add_header("Range", f"bytes={byte_range}")
        request.add_header("Accept-Encoding", "identity")
        self.requests += 1
        answer = transport.fetch(request, limits=self.limits, max_bytes=cap)
        if answer.status not in (200, 206):
            raise RemoteMetadataError(f"{transport._shown(url)}: the index answered HTTP {answer.status} to a read of "
                                      "the wheel's metadata")
        return answer

    def _pep658(self, file: IndexFile) -> str | None:
        answer = self._get(file.url + ".metadata", cap=MAX_METADATA)
        return answer.body.decode("utf-8", "replace") if answer.status == 200 else None

    def _ranges(self, file: IndexFile) -> str:
        tail = self._get(file.url, f"-{TAIL}")
        body = tail.body
        if tail.status == 200:  # no Range support: the whole wheel came (within the cap)
            return _metadata_from(body, 0, file.filename)
        size = file.size or _total(tail, file.filename)
        start = max(0, size - len(body))
        try:
            return _metadata_from(body, start, file.filename)
        except _Outside as outside:
            member = self._get(file.url, f"{outside.offset}-{outside.offset + outside.length - 1}",
                               cap=outside.length + 1024)
            return _local_member(member.body, file.filename)


class _Outside(Exception):
    """The METADATA member lies before the bytes read: its offset and a length that holds it."""

    def __init__(self, offset: int, length: int) -> None:
        super().__init__(offset, length)
        self.offset, self.length = offset, length


def _total(answer: transport.Response, name: str) -> int:
    raise RemoteMetadataError(f"{name}: the index neither listed the file's size nor answered a range read with it; "
                              "pass --index-url of an index that serves PEP 691 JSON")


def _metadata_from(data: bytes, start: int, name: str) -> str:
    """METADATA from the last bytes of a zip (``data`` begins at file offset ``start``)."""
    end = data.rfind(b"PK\x05\x06")
    if end < 0 or len(data) - end < 22:
        raise RemoteMetadataError(f"{name}: no zip end record in its last {len(data)} bytes: not a wheel")
    entries, cd_size, cd_offset = struct.unpack("<HII", data[end + 10:end + 20])
    if cd_offset == 0xFFFFFFFF or entries == 0xFFFF:
        cd_offset, cd_size = _zip64(data, end, name)
    if cd_offset < start:
        raise RemoteMetadataError(f"{name}: its central directory ({cd_size} bytes) is larger than the {TAIL} bytes "
                                  "read; jaxrel reads wheels whose directory fits")
    directory = data[cd_offset - start:cd_offset - start + cd_size]
    at = 0
    while at + 46 <= len(directory) and directory[at:at + 4] == b"PK\x01\x02":
        method, = struct.unpack("<H", directory[at + 10:at + 12])
        compressed, _, name_length, extra_length, comment_length = struct.unpack("<IIHHH", directory[at + 20:at + 34])
        offset, = struct.unpack("<I", directory[at + 42:at + 46])
        member = directory[at + 46:at + 46 + name_length].decode("utf-8", "replace")
        at += 46 + name_length + extra_length + comment_length
        parts = member.split("/")
        if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA":
            if compressed > MAX_METADATA or method not in (0, 8):
                raise RemoteMetadataError(f"{name}: its METADATA is {compressed} bytes or stored with method "
                                          f"{method}; not a wheel jaxrel reads")
            length = 30 + name_length + 1024 + compressed
            if offset < start:
                raise _Outside(offset, length)
            return _local_member(data[offset - start:offset - start + length], name)
    raise RemoteMetadataError(f"{name}: no .dist-info/METADATA in its central directory: not a wheel")


def _zip64(data: bytes, end: int, name: str) -> tuple[int, int]:
    locator = data.rfind(b"PK\x06\x07", 0, end)
    record = data.rfind(b"PK\x06\x06", 0, locator if locator >= 0 else end)
    if record < 0:
        raise RemoteMetadataError(f"{name}: a zip64 wheel whose end record is not in the bytes read")
    cd_size, cd_offset = struct.unpack("<QQ", data[record + 40:record + 56])
    return cd_offset, cd_size


def _local_member(data: bytes, name: str) -> str:
    """The member at the start of ``data`` (a local file header, then its bytes), decompressed."""
    if data[:4] != b"PK\x03\x04" or len(data) < 30:
        raise RemoteMetadataError(f"{name}: no zip entry where its directory says METADATA is")
    method, = struct.unpack("<H", data[8:10])
    compressed, = struct.unpack("<I", data[18:22])
    name_length, extra_length = struct.unpack("<HH", data[26:30])
    body = data[30 + name_length + extra_length:30 + name_length + extra_length + compressed]
    try:
        raw = zlib.decompress(body, -15) if method == 8 else body
    except zlib.error:
        raise RemoteMetadataError(f"{name}: its METADATA does not inflate") from None
    return raw.decode("utf-8", "replace")


def metadata_of_local(path: Path) -> str:
    """METADATA of a wheel on disk (the same answer :class:`MetadataReader` gives for it on an index)."""
    with zipfile.ZipFile(path) as archive:
        member = next(n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
        return io.TextIOWrapper(archive.open(member), encoding="utf-8", errors="replace").read()
