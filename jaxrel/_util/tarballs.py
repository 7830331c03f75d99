"""Unpack a tar archive (an sdist) safely on every Python jaxrel supports (standard library only).

Python 3.11.4 added ``extractall(filter="data")``; Debian 12's ``python3`` is 3.11.2, where the
argument does not exist. There, :func:`extract_all` applies the same rules by hand before
extracting: no absolute member names, nothing that lands (or links) outside the destination, no
devices or FIFOs, no setuid/setgid/sticky or group/other-write bits, the extracting user as owner.
A member breaking a rule raises :class:`UnsafeMember` (a ``tarfile.TarError``, as the data filter's
own errors are), so callers handle both Pythons with one ``except tarfile.TarError``.
"""

from __future__ import annotations

import copy
import os
import tarfile
from pathlib import Path

__all__ = ["HAS_DATA_FILTER", "UnsafeMember", "extract_all", "safe_member"]

HAS_DATA_FILTER = hasattr(tarfile, "data_filter")


class UnsafeMember(tarfile.TarError):
    """A member the data filter refuses: outside the destination, a device, an absolute link."""


def _inside(base: str, path: str) -> bool:
    return os.path.commonpath([base, os.path.realpath(path)]) == base


def safe_member(member: tarfile.TarInfo, base: str, links: bool = True) -> tarfile.TarInfo:
    """``member`` as the data filter would extract it into ``base`` (a resolved directory), or :class:`UnsafeMember`;
    ``links=False`` leaves link targets unchecked, as the tar filter does (a repository's own export)."""
    name = member.name
    if name.startswith(("/", os.sep)) or os.path.isabs(name):
        raise UnsafeMember(f"member {name[:100]!r} has an absolute path")
    target = os.path.join(base, name)
    if not _inside(base, target):
        raise UnsafeMember(f"member {name[:100]!r} would be extracted outside the destination")
    if member.ischr() or member.isblk() or member.isfifo() or not (member.isreg() or member.isdir()
                                                                  or member.issym() or member.islnk()):
        raise UnsafeMember(f"member {name[:100]!r} is a special file (device, FIFO)")
    if member.issym() and links:
        if os.path.isabs(member.linkname):
            raise UnsafeMember(f"symlink {name[:100]!r} points to an absolute path")
        if not _inside(base, os.path.join(os.path.dirname(target), member.linkname)):
            raise UnsafeMember(f"symlink {name[:100]!r} points outside the destination")
    if member.islnk() and links and not _inside(base, os.path.join(base, member.linkname)):
        raise UnsafeMember(f"hard link {name[:100]!r} points outside the destination")
    safe = copy.copy(member)
    mode = member.mode & 0o755  # no setuid/setgid/sticky, no group/other write
    if member.isreg() or member.islnk():
        mode |= 0o600
        if not mode & 0o100:  # not executable by its owner: executable by nobody
            mode &= ~0o111
    elif member.isdir():
        mode |= 0o700
    safe.mode = mode
    safe.uid, safe.gid = os.getuid(), os.getgid()
    safe.uname = safe.gname = ""
    return safe


def extract_all(archive: tarfile.TarFile, destination: Path, trusted_links: bool = False) -> None:
    """Extract every member of ``archive`` into ``destination`` under the data filter's rules (``trusted_links``:
    the tar filter's, which leave symlink targets alone: ``git archive`` of the user's own repository)."""
    if HAS_DATA_FILTER:
        archive.extractall(destination, filter="tar" if trusted_links else "data")
        return
    base = os.path.realpath(destination)
    members = [safe_member(member, base, links=not trusted_links) for member in archive.getmembers()]
    archive.extractall(destination, members=members)
