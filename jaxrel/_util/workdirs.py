"""Work directories: jaxrel writes, replaces and deletes only inside directories it made.

A directory jaxrel makes for a run (``build/compat``, ``build/bisect``, ``build/atlas`` or a
``--workdir``) carries a marker file, :data:`MARKER`. :func:`claim` accepts a work directory that
is missing (it is made and marked), empty (it is marked) or marked by an earlier run; anything else
is refused as one line (exit 2) before a byte is written: a directory holding files jaxrel did not
make (a user's own bare repository, say), a file or a symbolic link where the directory should
be, a directory inside the frontend's checkout or its git directory, or one holding them.
Below a claimed directory jaxrel replaces what it made on earlier runs (environments, clones,
reports); nothing outside it is touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from jaxrel.errors import BadInput

__all__ = ["MARKER", "ForeignFiles", "claim", "discard_unused", "is_ours"]

MARKER = ".made-by-jaxrel"
_made: list[Path] = []  # directories claim() made in this process, deepest first
_NOTE = "This directory was made by jaxrel; jaxrel may replace or delete anything in it.\n"


class ForeignFiles(BadInput):
    """A work directory jaxrel would write into holds what jaxrel did not make, or lies where it must not."""


def is_ours(path: Path) -> bool:
    """Whether ``path`` is a directory jaxrel made (it holds the marker)."""
    return path.is_dir() and not path.is_symlink() and (path / MARKER).is_file()


def _inside(path: Path, other: Path) -> bool:
    return path == other or path.is_relative_to(other)


def claim(workdir: Path, option: str = "--workdir", *, keep_out: Sequence[tuple[str, Path]] = ()) -> Path:
    """``workdir`` (absolute) made or taken as jaxrel's, or :class:`ForeignFiles` naming why not and the fix.

    ``keep_out``: ``(what, path)`` pairs the work directory may neither lie inside nor hold (the
    frontend's checkout and its git directory): jaxrel writes nothing into a user's source tree.
    """
    workdir = workdir.absolute()
    resolved = workdir.resolve()
    for what, path in keep_out:
        other = path.resolve()
        if _inside(resolved, other):
            raise ForeignFiles(f"{option} {workdir} lies inside {what} {path}; jaxrel writes nothing there: pass a "
                               f"{option} outside it (e.g. {option} build/…)")
        if _inside(other, resolved):
            raise ForeignFiles(f"{option} {workdir} holds {what} {path}; jaxrel would write beside it: pass a new "
                               f"{option} that does not contain it")
    if workdir.is_symlink() or (workdir.exists() and not workdir.is_dir()):
        raise ForeignFiles(f"{option} {workdir} is not a directory; pass a new or empty directory")
    if workdir.is_dir() and not is_ours(workdir):
        held = sorted(entry.name for entry in workdir.iterdir())
        if held:
            raise ForeignFiles(f"{option} {workdir} already holds files jaxrel did not make ({', '.join(held[:3])}"
                               f"{', …' if len(held) > 3 else ''}); jaxrel only replaces what it made: pass a new or "
                               f"empty {option}, or move those files away")
    missing = [path for path in (workdir, *workdir.parents) if not path.exists()]
    workdir.mkdir(parents=True, exist_ok=True)
    if not is_ours(workdir):
        (workdir / MARKER).write_text(_NOTE, encoding="utf-8")
    _made.extend(missing)
    return workdir


def discard_unused() -> None:
    """Remove the work directories :func:`claim` made in this process that hold nothing but the marker (a run
    that failed before writing anything leaves no trace), and the parents it made that are empty."""
    while _made:
        path = _made.pop(0)
        try:
            if path.is_dir() and not path.is_symlink() and {p.name for p in path.iterdir()} <= {MARKER}:
                (path / MARKER).unlink(missing_ok=True)
                path.rmdir()
        except OSError:
            continue
