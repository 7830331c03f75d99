"""Where jaxrel caches downloads and inspections, and the sha256 of a file (standard library only)."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from jaxrel.errors import BadInput


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


def sha256_of(path: Path) -> str:
    """The hex sha256 of a regular file, read in 1 MiB blocks; a FIFO or a device is opened without
    waiting and refused (:class:`~jaxrel.errors.BadInput`), as :mod:`jaxrel._util.localfiles` does."""
    digest = hashlib.sha256()
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise BadInput(f"{path}: not a regular file (a FIFO, a device or a directory); pass a regular file")
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
