"""``~/.pypirc``, typed: the repositories it names and a copy of it without passwords.

Read once by :func:`read_pypirc` through :func:`jaxrel._util.localfiles.load_ini`: a file without
sections, a duplicate section or option, text that is not UTF-8, a FIFO: each is
:class:`~jaxrel.errors.BadInput` (exit 2) naming the file; configparser's errors never leak. A
``repository`` value is kept as the string written there; the URL parser validates it where it is
used.
"""

from __future__ import annotations

import configparser
import io
from dataclasses import dataclass, field
from pathlib import Path

from jaxrel._util import localfiles

__all__ = ["Pypirc", "PypircRepository", "read_pypirc"]


@dataclass(frozen=True)
class PypircRepository:
    """One ``[section]``: where it uploads (``repository``), as written; other options are kept for twine."""

    name: str
    repository: str | None
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Pypirc:
    """The sections of a ``~/.pypirc`` (empty when it does not exist)."""

    path: Path
    sections: dict[str, PypircRepository] = field(default_factory=dict)

    def repository(self, name: str) -> str | None:
        """The ``repository`` URL string of section ``name``; ``None`` when absent."""
        section = self.sections.get(name)
        return section.repository if section else None

    def without_passwords(self) -> str:
        """The file's text with every ``password`` option removed (for twine's ``--config-file``)."""
        parser = configparser.RawConfigParser()
        for name, section in self.sections.items():
            parser.add_section(name)
            for key, value in section.options:
                if key != "password":
                    parser.set(name, key, value)
        out = io.StringIO()
        parser.write(out)
        return out.getvalue()


def read_pypirc(path: Path) -> Pypirc:
    """``path`` read strictly (see the module docstring); a missing file is an empty :class:`Pypirc`."""
    if not path.exists() and not path.is_symlink():
        return Pypirc(path)
    parser = localfiles.load_ini(path)
    sections = {name: PypircRepository(name, parser.get(name, "repository", fallback=None),
                                       tuple(parser.items(name))) for name in parser.sections()}
    return Pypirc(path, sections)
