"""Answers about files, kept from run to run in one JSON file of jaxrel's cache (standard library only).

Each answer is kept under the file's real path with the file's identity: device, inode, size, modification and
status change times. It is used only while all of those are the same; any write moves the status change time,
which no one can set back. The interpreters' probes (``distributions.pythons``) and large files' sha256
(``_util.files``) keep theirs here.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from jaxrel._util import localfiles
from jaxrel._util.atomic import write_atomically
from jaxrel.errors import JaxrelError

__all__ = ["KeptAnswers", "identity_of"]


def identity_of(status: os.stat_result) -> list[int]:
    """What must stay the same for a kept answer about a file to hold."""
    return [status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns]


class KeptAnswers:
    """The answers kept in the JSON file ``path()`` names, read at the first question. Never trusted: an entry of
    any other shape is a miss, a damaged file holds none (and is removed), and a cache that cannot be read or
    written keeps nothing. Safe to share between threads."""

    def __init__(self, path: Callable[[], Path]) -> None:
        self._path = path
        self._known: dict[str, object] | None = None
        self._changed = False
        self._lock = threading.Lock()

    def _entries(self) -> dict[str, object]:
        if self._known is None:
            try:
                loaded = localfiles.load_cached_json(self._path())
            except JaxrelError:  # the cache's path is not a directory: nothing kept
                loaded = None
            self._known = loaded if isinstance(loaded, dict) else {}
        return self._known

    def get(self, real: str, identity: Sequence[int]) -> str | None:
        """The answer kept for the file at ``real`` while it has ``identity``; ``None`` otherwise."""
        with self._lock:
            entry = self._entries().get(real)
        if isinstance(entry, list) and entry[:-1] == list(identity) and isinstance(entry[-1], str):
            return entry[-1]
        return None

    def put(self, real: str, identity: Sequence[int], answer: str, *, at_most: int | None = None) -> None:
        """Keep ``answer`` (until :meth:`save`); with ``at_most``, only that many of the most recently put."""
        with self._lock:
            known = self._entries()
            known.pop(real, None)
            known[real] = [*identity, answer]
            for stale in list(known)[:-at_most] if at_most is not None else []:
                del known[stale]
            self._changed = True

    def save(self) -> None:
        """Write what was put, in one step; a read-only cache keeps nothing (the next run asks again)."""
        with self._lock:
            if not self._changed:
                return
            try:
                write_atomically(self._path(), json.dumps(self._entries()))
            except (OSError, JaxrelError):
                pass
            self._changed = False
