"""Where jaxrel caches downloads and inspections, the sha256 of a file and of a tree (standard library only)."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
from collections.abc import Collection
from pathlib import Path

from jaxrel._util.kept import KeptAnswers, identity_of
from jaxrel.errors import BadInput

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
_KEPT = KeptAnswers(lambda: cache_root() / DIGESTS)
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
        identity = tuple(identity_of(status))
        if identity in _HASHED:
            return _HASHED[identity]
        real = os.path.realpath(path) if status.st_size >= KEEP_FROM_SIZE else None
        kept = _KEPT.get(real, identity) if real is not None else None
        if kept is not None and _SHA256.fullmatch(kept):
            _HASHED[identity] = kept
            return kept
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if time.time_ns() - max(status.st_mtime_ns, status.st_ctime_ns) > 2_000_000_000:
        _HASHED[identity] = digest.hexdigest()
        if real is not None:
            _KEPT.put(real, identity, digest.hexdigest(), at_most=KEEP_AT_MOST)
            _KEPT.save()
    return digest.hexdigest()


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
