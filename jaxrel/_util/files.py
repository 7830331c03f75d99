"""Where jaxrel caches downloads and inspections, the sha256 of a file and of a tree (standard library only)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import threading
import time
from collections.abc import Collection
from pathlib import Path

from jaxrel._util import localfiles
from jaxrel._util.atomic import write_atomically
from jaxrel.errors import BadInput, JaxrelError

__all__ = ["cache_root", "sha256_of", "tree_digest"]


def cache_root() -> Path:
    """jaxrel's download/inspection cache: ``$JAXREL_CACHE_DIR``, else ``$XDG_CACHE_HOME/jaxrel``.

    A path that exists but is not a directory is bad input (:class:`~jaxrel.errors.BadInput`).
    """
    if os.environ.get("JAXREL_CACHE_DIR"):
        root, variable = Path(os.environ["JAXREL_CACHE_DIR"]), "JAXREL_CACHE_DIR"
    else:
        root, variable = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jaxrel", "XDG_CACHE_HOME"
    if root.exists() and not root.is_dir():
        raise BadInput(f"{variable}: the cache {root} is not a directory; point {variable} at a directory")
    return root


_HASHED: dict[tuple[int, ...], str] = {}  # this process's answers, by the file's identity and last change
DIGESTS = "digests.json"  # under cache_root(): large files' answers from run to run, by real path and identity
KEEP_FROM_SIZE = 1 << 20  # bytes: a smaller file is hashed again sooner than its answer is looked up and kept
KEEP_AT_MOST = 2048  # files whose answers are kept from run to run: the most recently hashed
_kept: dict[str, object] | None = None  # DIGESTS as loaded, then as kept
_KEEPING = threading.Lock()
_SHA256 = re.compile(r"[0-9a-f]{64}")


def sha256_of(path: Path) -> str:
    """The hex sha256 of a regular file, read in 1 MiB blocks; a FIFO or a device is opened without
    waiting and refused (:class:`~jaxrel.errors.BadInput`), as :mod:`jaxrel._util.localfiles` does.

    A file hashed before, with the same device, inode, size, modification and status change times, is
    not read again: in this process, and for files of 1 MiB or more from run to run too (``DIGESTS``
    in :func:`cache_root`; a warm compat run otherwise reads 1.5 GB of wheels again). Any write changes
    the status change time, which no one can set back; as git does for its index, a file changed in
    the last two seconds is never remembered, since a write within one tick of the kernel's coarse
    clock would leave the times as they were. A kept answer is used only for the same real path with
    every one of those numbers equal; anything else in the file is a miss.
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise BadInput(f"{path}: not a regular file (a FIFO, a device or a directory); pass a regular file")
        identity = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
        if identity in _HASHED:
            return _HASHED[identity]
        real = os.path.realpath(path) if status.st_size >= KEEP_FROM_SIZE else None
        kept = _kept_answer(real, identity) if real is not None else None
        if kept is not None:
            _HASHED[identity] = kept
            return kept
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if time.time_ns() - max(status.st_mtime_ns, status.st_ctime_ns) > 2_000_000_000:
        _HASHED[identity] = digest.hexdigest()
        if real is not None:
            _keep(real, identity, digest.hexdigest())
    return digest.hexdigest()


def _kept_digests() -> dict[str, object]:
    """The answers kept from earlier runs, loaded once (call under ``_KEEPING``); damaged or absent: none."""
    global _kept
    if _kept is None:
        try:
            loaded = localfiles.load_cached_json(cache_root() / DIGESTS)
        except JaxrelError:  # the cache's path is not a directory: nothing kept
            loaded = None
        _kept = loaded if isinstance(loaded, dict) else {}
    return _kept


def _kept_answer(real: str, identity: tuple[int, ...]) -> str | None:
    with _KEEPING:
        entry = _kept_digests().get(real)
    if isinstance(entry, list) and entry[:-1] == list(identity) and isinstance(entry[-1], str) \
            and _SHA256.fullmatch(entry[-1]):
        return entry[-1]
    return None


def _keep(real: str, identity: tuple[int, ...], digest: str) -> None:
    with _KEEPING:
        kept = _kept_digests()
        kept.pop(real, None)
        kept[real] = [*identity, digest]
        for stale in list(kept)[:-KEEP_AT_MOST]:
            del kept[stale]
        try:
            write_atomically(cache_root() / DIGESTS, json.dumps(kept))
        except (OSError, JaxrelError):
            pass  # a read-only cache: the next run hashes again


def tree_digest(root: Path, skip: Collection[str] = ()) -> str:
    """The hex sha256 of the files under ``root``: each file's path, executable bit and bytes, each symlink's
    path and target, in a fixed order; the top-level entries named in ``skip`` left out (``.git``)."""
    digest = hashlib.sha256()
    for directory, subdirectories, names in os.walk(root):
        base = Path(directory)
        if base == root:
            subdirectories[:] = [d for d in subdirectories if d not in skip]
            names = [n for n in names if n not in skip]
        subdirectories.sort()
        for name in sorted([*names, *(d for d in subdirectories if (base / d).is_symlink())]):
            path = base / name
            relative = path.relative_to(root).as_posix().encode()
            if path.is_symlink():
                digest.update(b"L" + relative + b"\0" + os.readlink(path).encode() + b"\0")
            elif path.is_file():
                executable = b"x" if path.stat().st_mode & stat.S_IXUSR else b"-"
                digest.update(b"F" + executable + relative + b"\0" + bytes.fromhex(sha256_of(path)))
    return digest.hexdigest()
