"""jaxrel's on-disk cache of index listings: one JSON file per (index page, project).

An entry is outside data too: it is read back through the same checks as an index answer
(:func:`jaxrel.distributions.pages.file_from_record`), and an entry that is truncated, damaged, nested
too deep or not a regular file is a miss (fetched again and rewritten), never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from dataclasses import asdict
from pathlib import Path

from jaxrel._util.atomic import write_bytes_atomically
from jaxrel._util.kept import identity_of
from jaxrel.distributions.pages import IndexFile, file_from_record
from jaxrel.distributions.transport import MIB, IndexClientError

__all__ = ["MAX_ENTRY", "SCHEMA", "TTL", "age", "entry_path", "read", "write"]

SCHEMA = 3  # bump when IndexFile gains fields (2: upload times and served METADATA; 3: its sha256), so old
# entries are misses
TTL = 3600.0  # seconds a cached listing is trusted without refresh
MAX_ENTRY = 64 * MIB


def entry_path(cache: Path, page: str, project: str) -> Path:
    """Where the listing of ``page`` is kept (``project`` is a normalized name, so one path component)."""
    return cache / "listings" / f"v{SCHEMA}" / hashlib.sha256(page.encode()).hexdigest()[:24] / f"{project}.json"


def age(path: Path) -> float | None:
    """Seconds since ``path`` was written; ``None`` when it is not a regular file."""
    try:
        status = path.stat()
    except OSError:
        return None
    return time.time() - status.st_mtime if stat.S_ISREG(status.st_mode) else None


_READ_AT_MOST = 256  # entries whose files a process keeps, parsed (a compat run reads about 30, some 28 times)
_read: dict[str, tuple[list[int], list[IndexFile] | None]] = {}  # path → (the file's identity, its files)


def read(path: Path) -> tuple[bool, list[IndexFile] | None]:
    """``(True, files)`` from an entry (``files`` is ``None`` for "not on this index"), ``(False, None)`` for
    a miss: absent, not a regular file, too large, damaged.

    An entry read before in this process, and unchanged since (the same device, inode, size and times: a
    rewrite is a new file), is not parsed again: a compat run asks for jaxlib's listing in every cell, 25 ms
    of parsing each time."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False, None
    try:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode):
            return False, None
        identity = identity_of(status)
        known = _read.get(str(path))
        if known is not None and known[0] == identity:
            return True, None if known[1] is None else list(known[1])
        os.set_blocking(handle, True)
        with os.fdopen(handle, "rb", closefd=False) as stream:
            raw = stream.read(MAX_ENTRY + 1)
    finally:
        os.close(handle)
    try:
        record = json.loads(raw.decode("utf-8"))
        page = record["page"]
        files = record["files"]
        if not isinstance(page, str) or not (files is None or isinstance(files, list)):
            return False, None
        parsed = None if files is None else [file_from_record(item, str(path)) for item in files]
    except (ValueError, KeyError, TypeError, RecursionError, IndexClientError):
        return False, None
    _read.pop(str(path), None)
    _read[str(path)] = (identity, parsed)
    for oldest in list(_read)[:-_READ_AT_MOST]:
        _read.pop(oldest, None)
    return True, None if parsed is None else list(parsed)


def write(path: Path, page: str, files: list[IndexFile] | None) -> None:
    """Replace the entry in one step."""
    record = None if files is None else [asdict(f) for f in files]
    write_bytes_atomically(path, json.dumps({"page": page, "files": record}).encode())
