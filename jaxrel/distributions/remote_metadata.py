"""A wheel's METADATA read from the index without downloading the wheel, as pip reads it.

First PEP 658/714 (``<file URL>.metadata``) where the index announces it: its sha256, when the index
gives one, must match (a mismatch is refused naming both hashes). Otherwise the wheel is opened
the way pip's "lazy wheel" does: :class:`RangeFile` is a seekable file whose bytes come from HTTP
range reads as :mod:`zipfile` asks for them, starting with the last :data:`TAIL` bytes (the zip
directory and, as wheel builders write them last, usually the ``.dist-info`` files). The total
size is the index's (PEP 700) or the ``Content-Range`` of that first answer (every PEP 503 HTML
index gives no size). A server that ignores ``Range`` answers 200 with the whole wheel: it is
spooled to a temporary file within the download cap, checked against the listed sha256 and read
there. Every read goes through the transport (deadline, size cap, retries).

The METADATA is parsed once (:func:`jaxrel.distributions.metadata.parse_core_metadata`) and must
name the file's project and version (pip's "metadata inconsistent" check). The cache keeps the
METADATA bytes under the wheel's sha256, behind a header naming that key and the METADATA's own
sha256 (and checked against the index's PEP 658 digest when there is one): an entry is a hint read
back through the same checks, and one that is not a regular file (a directory, a FIFO, a symlink:
never followed), too large, damaged, of another wheel or whose bytes do not match its digest is a
miss, fetched again and replaced; a cache that cannot be written is skipped, never half-written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import re
import stat
import struct
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from jaxrel._util.atomic import write_bytes_atomically
from jaxrel._util.files import cache_root
from jaxrel.distributions import transport
from jaxrel.distributions.filenames import name_and_version
from jaxrel.distributions.metadata import MAX_METADATA, CoreMetadata, parse_core_metadata
from jaxrel.distributions.pages import IndexFile
from jaxrel.distributions.transport import IndexClientError
from jaxrel.distributions.urls import file_url_path
from jaxrel.errors import JaxrelError

__all__ = ["MAX_READS", "TAIL", "MetadataReader", "RangeFile", "RemoteMetadataError", "metadata_of_local",
           "read_wheel_metadata"]

TAIL = 512 * 1024  # bytes of a wheel's end read first: its central directory and, usually, its .dist-info
MIN_READ = 64 * 1024  # the least a later range read asks for
MAX_READS = 16  # range reads of one wheel at most (a scattered or hostile zip is refused, not chased)
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")


class RemoteMetadataError(IndexClientError):
    """The index's answer does not give the wheel's METADATA (exit 3)."""


class _CacheMiss(JaxrelError):
    """A cache entry that does not hold usable METADATA."""


class RangeFile(io.RawIOBase):
    """A remote file of ``size`` bytes as a seekable, read-only file; missing bytes come from ``fetch(start, end)``
    (inclusive), at least :data:`MIN_READ` at a time, and are kept."""

    def __init__(self, size: int, fetch: Callable[[int, int], bytes], known: dict[int, bytes] | None = None,
                 name: str = "") -> None:
        super().__init__()
        self.size = size
        self._fetch = fetch
        self._segments: dict[int, bytes] = dict(known or {})  # start → bytes
        self._position = 0
        self.name = name
        self.reads = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise OSError(f"{self.name}: a seek before the start of the file")
        self._position = base + offset
        return self._position

    def _covered(self, start: int, end: int) -> bytes | None:
        for at, data in self._segments.items():
            if at <= start and end <= at + len(data):
                return data[start - at:end - at]
        return None

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        start = self._position
        end = min(self.size, start + len(buffer))
        if start >= end:
            return 0
        data = self._covered(start, end)
        if data is None:
            if self.reads >= MAX_READS:
                raise RemoteMetadataError(f"{self.name}: its zip directory and METADATA take more than {MAX_READS} "
                                          "range reads; not a wheel jaxrel reads remotely")
            first = start
            last = min(self.size, max(end, start + MIN_READ)) - 1
            fetched = self._fetch(first, last)
            self.reads += 1
            self._segments[first] = fetched
            data = fetched[: end - start]
        buffer[: len(data)] = data
        self._position = start + len(data)
        return len(data)


def read_wheel_metadata(archive_file: IO[bytes] | io.RawIOBase, where: str) -> bytes:
    """The raw METADATA of the wheel in ``archive_file`` (any seekable file): the one ``*.dist-info/METADATA`` at
    the top, at most :data:`MAX_METADATA` bytes inflated. Every way a zip can be broken is
    :class:`RemoteMetadataError`: truncated records (zip64 included), a bomb, an unknown method."""
    try:
        with zipfile.ZipFile(archive_file) as archive:
            members = [info for info in archive.infolist()
                       if info.filename.count("/") == 1 and info.filename.endswith(".dist-info/METADATA")]
            if len(members) != 1:
                found = "none" if not members else f"{len(members)} of them"
                raise RemoteMetadataError(f"{where}: expected one .dist-info/METADATA in the wheel, found {found}: "
                                          "not a valid wheel")
            member = members[0]
            if member.file_size > MAX_METADATA or member.compress_size > MAX_METADATA:
                raise RemoteMetadataError(f"{where}: its METADATA claims {member.file_size} bytes, more than the "
                                          f"{MAX_METADATA // transport.MIB} MiB jaxrel reads; not a wheel jaxrel reads")
            with archive.open(member) as stream:
                data = stream.read(MAX_METADATA + 1)
    except RemoteMetadataError:
        raise
    except IndexClientError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, struct.error, EOFError, OSError, ValueError, KeyError,
            NotImplementedError, RuntimeError, zlib.error, MemoryError, OverflowError) as error:
        raise RemoteMetadataError(f"{where}: not a readable wheel ({type(error).__name__}: "
                                  f"{str(error)[:100]})") from None
    if len(data) > MAX_METADATA:
        raise RemoteMetadataError(f"{where}: its METADATA inflates past {MAX_METADATA // transport.MIB} MiB (a zip "
                                  "bomb?); not a wheel jaxrel reads")
    return data


def metadata_of_local(path: Path) -> str:
    """METADATA of a wheel on disk (the same answer :class:`MetadataReader` gives for it on an index)."""
    with path.open("rb") as stream:
        return read_wheel_metadata(stream, str(path)).decode("utf-8", "replace")


@dataclass
class MetadataReader:
    """Reads METADATA of index files, counting requests (``requests``) and answering from the cache first."""

    limits: transport.Limits = field(default_factory=transport.Limits)
    cache: Path = field(default_factory=lambda: cache_root() / "remote-metadata" / "v2")
    cafile: str | None = None
    requests: int = 0
    cached: int = 0
    _started: float = field(default=0.0, repr=False)  # when the current file's first read began

    def metadata(self, file: IndexFile) -> CoreMetadata:
        """The core metadata of wheel ``file``, parsed and checked against its file name. All the reads of one file
        share one deadline (``limits.deadline``): a server that trickles range after range cannot add them up."""
        self._started = time.monotonic()
        if not file.is_wheel:
            raise RemoteMetadataError(f"{file.filename}: not a wheel; METADATA is read from wheels")
        key = file.sha256 or hashlib.sha256(file.url.encode()).hexdigest()
        entry = self.cache / f"{key}.metadata"
        try:
            found = _checked(_unwrapped(_read_entry(entry), key, file), file, _CacheMiss)
            self.cached += 1
            return found
        except _CacheMiss:
            pass
        raw = self._fetch(file)
        parsed = _checked(raw, file, RemoteMetadataError)
        try:
            if entry.is_dir() and not entry.is_symlink():
                os.rmdir(entry)  # an empty directory in an entry's place; a full one makes the write fail below
            write_bytes_atomically(entry, _wrapped(raw, key))
        except OSError:
            pass  # a cache that cannot be written is skipped: the answer stands
        return parsed

    def _fetch(self, file: IndexFile) -> bytes:
        if file.url.startswith("file:"):  # a wheelhouse or find-links directory: read the file where it is
            path = file_url_path(file.url)
            try:
                with path.open("rb") as stream:
                    return read_wheel_metadata(stream, file.filename)
            except OSError as error:
                raise RemoteMetadataError(f"{file.filename}: its METADATA cannot be read ({error.strerror})") from None
        if file.metadata:
            served = self._pep658(file)
            if served is not None:
                return served
        return self._ranges(file)

    def _get(self, url: str, byte_range: str | None, cap: int, sink: IO[bytes] | None = None) -> transport.Response:
        left = self.limits.deadline - (time.monotonic() - self._started)
        if left <= 0:
            raise transport.TooSlow(f"{transport.shown_url(url)}: the wheel's METADATA took more than "
                                    f"{self.limits.deadline:g} s to read (range after range); check the index, or "
                                    "raise JAXREL_NET_DEADLINE")
        request = transport.request_for(url)
        if byte_range:
            request.add_header("Range", f"bytes={byte_range}")
        request.add_header("Accept-Encoding", "identity")
        self.requests += 1
        limits = dataclasses.replace(self.limits, deadline=left)
        return transport.fetch(request, limits=limits, cafile=self.cafile, max_bytes=cap, sink=sink)

    def _pep658(self, file: IndexFile) -> bytes | None:
        answer = self._get(file.url + ".metadata", None, MAX_METADATA)
        if answer.status == 404:
            return None  # announced but absent: read the wheel itself, as a client without PEP 658 would
        if answer.status != 200:
            raise RemoteMetadataError(f"{transport.shown_url(file.url)}.metadata: the index answered HTTP "
                                      f"{answer.status}; check the index")
        if file.metadata_sha256 is not None:
            actual = hashlib.sha256(answer.body).hexdigest()
            if actual != file.metadata_sha256:
                raise RemoteMetadataError(
                    f"{file.filename}: the METADATA the index serves has sha256 {actual}, but the index lists "
                    f"{file.metadata_sha256}; refused: the index is broken or its files were altered (report it "
                    "to the index, or pass --index-url of another)")
        return answer.body

    def _ranges(self, file: IndexFile) -> bytes:
        with tempfile.SpooledTemporaryFile(max_size=TAIL + MIN_READ) as spool:
            tail = self._get(file.url, f"-{TAIL}", self.limits.max_download, sink=spool)
            spool.seek(0)
            if tail.status == 200:  # no Range support: the whole wheel came, within the download cap
                return self._whole(spool, file)
            if tail.status != 206:
                raise RemoteMetadataError(f"{transport.shown_url(file.url)}: the index answered HTTP {tail.status} "
                                          "to a range read of the wheel; check the index")
            body = spool.read()
        first, last, total = _content_range(tail, file, len(body))
        if file.size is not None and total != file.size:
            raise RemoteMetadataError(f"{file.filename}: the index lists {file.size} bytes but serves {total}; the "
                                      "listing and the file disagree: refresh the listing (--refresh)")

        def fetch(start: int, end: int) -> bytes:
            with tempfile.SpooledTemporaryFile(max_size=MIN_READ * 4) as part:
                answer = self._get(file.url, f"{start}-{end}", end - start + 1, sink=part)
                part.seek(0)
                data = part.read()
            got = _content_range(answer, file, len(data)) if answer.status == 206 else None
            if got is None or got[:2] != (start, end) or got[2] != total:
                raise RemoteMetadataError(f"{transport.shown_url(file.url)}: a range read of bytes {start}-{end} "
                                          "was answered with other bytes; the index's range support is broken")
            return data

        return read_wheel_metadata(RangeFile(total, fetch, {first: body}, file.filename), file.filename)

    def _whole(self, spool: IO[bytes], file: IndexFile) -> bytes:
        if file.sha256 is not None:
            digest = hashlib.sha256()
            for chunk in iter(lambda: spool.read(transport.CHUNK), b""):
                digest.update(chunk)
            if digest.hexdigest() != file.sha256:
                raise RemoteMetadataError(f"{file.filename}: the wheel the index sent has sha256 "
                                          f"{digest.hexdigest()}, not {file.sha256} as listed; the file is corrupt or "
                                          "was altered")
            spool.seek(0)
        return read_wheel_metadata(spool, file.filename)


def _content_range(answer: transport.Response, file: IndexFile, length: int) -> tuple[int, int, int]:
    """``(first, last, total)`` of a 206 answer, checked against the bytes that came."""
    header = (answer.headers or {}).get("Content-Range", "")
    match = _CONTENT_RANGE.fullmatch(header.strip())
    if match is None:
        raise RemoteMetadataError(f"{transport.shown_url(file.url)}: a range read was answered without a usable "
                                  f"Content-Range ({header[:60]!r}); the index's range support is broken")
    first, last, total = (int(part) for part in match.groups())
    if last < first or last >= total or last - first + 1 != length:
        raise RemoteMetadataError(f"{transport.shown_url(file.url)}: Content-Range {header[:60]!r} does not describe "
                                  f"the {length} bytes sent; the index's range support is broken")
    return first, last, total


def _checked(raw: bytes, file: IndexFile, error: type[JaxrelError]) -> CoreMetadata:
    """``raw`` parsed, and naming the project and version of ``file`` (pip refuses inconsistent metadata too)."""
    parsed = parse_core_metadata(raw, file.filename, error)
    name, version = name_and_version(file.filename)
    try:
        consistent = canonicalize_name(parsed.name) == name and Version(parsed.version) == version
    except InvalidVersion:
        consistent = False
    if not consistent:
        raise error(f"{file.filename}: its METADATA names {parsed.name[:60]!r} {parsed.version[:40]!r}, not the "
                    f"file's project and version; the index serves inconsistent metadata")
    return parsed


_ENTRY = b"jaxrel-metadata 2 "


def _wrapped(raw: bytes, key: str) -> bytes:
    """A cache entry: ``jaxrel-metadata 2 <key> <sha256 of the METADATA>`` on one line, then the METADATA."""
    return _ENTRY + f"{key} {hashlib.sha256(raw).hexdigest()}\n".encode() + raw


def _unwrapped(entry: bytes, key: str, file: IndexFile) -> bytes:
    """The METADATA of a cache entry made by :func:`_wrapped` for ``key``; a :class:`_CacheMiss` for anything else
    (another key, bytes that do not match the digest, or a PEP 658 file that does not match the index's)."""
    header, _, raw = entry.partition(b"\n")
    fields = header.removeprefix(_ENTRY).split(b" ") if header.startswith(_ENTRY) else []
    digest = hashlib.sha256(raw).hexdigest()
    if len(fields) != 2 or fields[0] != key.encode() or fields[1] != digest.encode():
        raise _CacheMiss(file.filename)
    if file.metadata and file.metadata_sha256 is not None and digest != file.metadata_sha256:
        raise _CacheMiss(file.filename)
    return raw


def _read_entry(path: Path) -> bytes:
    """A cache entry's bytes: a regular file of at most :data:`MAX_METADATA` bytes, opened without following a
    symlink or waiting on a FIFO; anything else is a :class:`_CacheMiss`."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        raise _CacheMiss(str(path)) from None
    try:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_METADATA + 256:
            raise _CacheMiss(str(path))
        os.set_blocking(handle, True)
        with os.fdopen(handle, "rb", closefd=False) as stream:
            return stream.read(MAX_METADATA + 257)
    finally:
        os.close(handle)
