"""Read text files exactly and replace files in one step: never a half-written file, never a
line end changed behind the caller's back, and several files all or none (standard library only)."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from jaxrel._util import localfiles
from jaxrel._util.text import redact

__all__ = ["copy_atomically", "new_file_mode", "read_exactly", "unwritable", "write_all_atomically",
           "write_atomically", "write_bytes_atomically", "write_reports"]


def read_exactly(path: Path) -> str:
    """``path`` as UTF-8 text with its line ends as they are (``read_text`` would turn CRLF into LF),
    read by :func:`jaxrel._util.localfiles.read_text` (a regular file only; errors are ``BadInput``)."""
    return localfiles.read_text(path)


@functools.cache
def new_file_mode() -> int:
    """The permissions ``open()`` gives a new file under this process's umask (``0o644`` under ``022``), which
    jaxrel's files get too: ``mkstemp`` makes them ``0o600``, a wheel or report no other user could read."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _stage(path: Path, data: bytes) -> str:
    """Write ``data`` to a new file beside ``path`` (with ``path``'s permissions if it exists, else a new file's);
    its name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, path.stat().st_mode & 0o777 if path.exists() else new_file_mode())
    except BaseException:
        os.unlink(temporary)
        raise
    return temporary


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """Replace (or create) ``path`` with ``data`` in one rename; when the rename fails (a directory in the way),
    the staged copy is removed and the error raised: nothing is left half-written."""
    staged = _stage(path, data)
    try:
        os.replace(staged, path)
    except BaseException:
        os.unlink(staged)
        raise


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8, line ends as given), keeping its permissions."""
    write_all_atomically({path: text})


def copy_atomically(source: Path, directory: Path) -> Path:
    """Copy ``source`` into ``directory`` under its own name in one rename; the new path."""
    target = directory / source.name
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{source.name}.")
    os.close(handle)
    try:
        shutil.copyfile(source, temporary)
        os.chmod(temporary, new_file_mode())
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return target


def unwritable(paths: Iterable[Path]) -> dict[Path, str]:
    """The existing ``paths`` this process cannot replace (path → why): a read-only file system, an
    immutable file, no permission. Opened for writing without truncating: nothing changes."""
    blocked: dict[Path, str] = {}
    for path in paths:
        try:
            handle = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            continue
        except OSError as error:
            blocked[path] = error.strerror or str(error)
            continue
        os.close(handle)
    return blocked


def write_all_atomically(contents: Mapping[Path, str]) -> None:
    """Replace several text files, all or none.

    Every new content is staged beside its target first, so a failure while staging (disk
    full, permissions, a read-only directory) changes nothing. Each original is kept as a
    hard link until every rename is done; a failure or an interruption (Ctrl-C) between
    renames puts the originals back before the error propagates.
    """
    staged: list[tuple[str, Path]] = []
    backups: list[tuple[str, Path]] = []
    done: list[Path] = []
    try:
        for path, text in contents.items():
            staged.append((_stage(path, text.encode("utf-8")), path))
        for _, path in staged:
            if path.exists():
                handle, backup = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.orig.")
                os.close(handle)
                os.unlink(backup)
                os.link(path, backup)
                backups.append((backup, path))
        for temporary, path in staged:
            os.replace(temporary, path)
            done.append(path)
    except BaseException:
        originals = {path: backup for backup, path in backups}
        for path in done:
            if path in originals:
                os.replace(originals[path], path)
            else:
                path.unlink()  # it did not exist before
        raise
    finally:
        for name, _ in (*staged, *backups):
            if os.path.exists(name):
                os.unlink(name)


def write_reports(contents: Mapping[Path, str]) -> None:
    """:func:`write_all_atomically` for what jaxrel reports (JSON, Markdown, HTML, JUnit): every secret jaxrel
    knows of (:func:`jaxrel._util.text.redact`) is replaced before a byte is written."""
    write_all_atomically({path: redact(text) for path, text in contents.items()})
