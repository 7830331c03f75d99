"""Read text files exactly and replace them in one step: never a half-written file, never a
line end changed behind the caller's back (standard library only)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path


def read_exactly(path: Path) -> str:
    """``path`` as UTF-8 text with its line ends as they are (``read_text`` would turn CRLF into LF)."""
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8, line ends as given), keeping its permissions."""
    write_all_atomically({path: text})


def write_all_atomically(contents: Mapping[Path, str]) -> None:
    """Replace several files: every new content is staged beside its target before any rename,
    so a failure while staging (disk full, permissions) changes nothing."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, text in contents.items():
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            staged.append((temporary, path))
            with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
                out.write(text)
            os.chmod(temporary, path.stat().st_mode & 0o777)
        for temporary, path in staged:
            os.replace(temporary, path)
    finally:
        for temporary, _ in staged:
            if os.path.exists(temporary):
                os.unlink(temporary)
