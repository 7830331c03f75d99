"""The project a release is made from: a source tree (a git checkout or an unpacked sdist),
its family and its release components, and the versions its files declare."""

from __future__ import annotations

import datetime
import subprocess
import tarfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from jaxrel._util import localfiles, procs, tarballs
from jaxrel._util.literals import checked_version
from jaxrel._util.shape import found
from jaxrel.distributions.pages import parse_time
from jaxrel.distributions.sources import git_environment
from jaxrel.distributions.wheels import ArtifactInfo, inspect
from jaxrel.errors import BadInput
from jaxrel.family import PROFILES, ConfigError, Family, family_from_config, jaxrel_table, resolve_family
from jaxrel.release import locations
from jaxrel.release.config import BUILTIN, Component, Location, ReleaseConfig, release_from_config

__all__ = ["Project", "Reading", "open_project"]


@dataclass(frozen=True)
class Reading:
    """The value found at one declared location (``None``: assigned ``None``, i.e. unset)."""

    location: Location
    value: str | None


@dataclass(frozen=True)
class Project:
    """A source tree with its family and release configuration."""

    root: Path
    family: Family
    release: ReleaseConfig
    sdist: Path | None = None  # set when the tree is an unpacked source distribution

    def readings(self, component: Component) -> list[Reading]:
        """Every declared version location of ``component`` and its value (each a PEP 440 version)."""
        readings = self.read(self.release.version_locations(component))
        for reading in readings:
            checked_version(reading.value, reading.location.file, reading.location.key)
        return readings

    def read(self, where: Sequence[Location]) -> list[Reading]:
        """The value at each location (``None``: assigned ``None``)."""
        return [Reading(location, locations.read(self.root, location)) for location in where]

    def version_of(self, component: Component) -> str:
        """The component's version: its first set location (consistency is a check of its own)."""
        for reading in self.readings(component):
            if reading.value is not None:
                return reading.value
        raise locations.LocationError(
            f"{component.distribution}: every version location is unset "
            f"({', '.join(map(str, self.release.version_locations(component)))})"
        )

    @cached_property
    def sdist_metadata(self) -> ArtifactInfo | None:
        """What the sdist's PKG-INFO declares (read once); ``None`` for a checkout."""
        return None if self.sdist is None else inspect(self.sdist, self.family)

    def minimum_backend(self) -> str | None:
        """The frontend's declared minimum backend."""
        frontend = self.release.frontend()
        if frontend is None or frontend.minimum_backend is None:
            return self.family.frontend.minimum_backend
        where = frontend.minimum_backend
        return checked_version(locations.read(self.root, where), where.file, where.key)

    def git(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        return procs.run(["git", *arguments], cwd=self.root, env=git_environment())

    def tag_time(self, tag: str) -> datetime.datetime | None:
        """The moment a release at ``tag`` is judged as of, if HEAD is that tag's commit: the earlier of the tag's
        date and its commit's (a tag made after the upload would find the release already on the index); else
        ``None`` (an unpacked sdist, a tree past its tag, or no such tag)."""
        if self.sdist is not None or not self.is_git:
            return None
        head = self.git("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        tagged = self.git("rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}")
        if head.returncode or tagged.returncode or head.stdout.strip() != tagged.stdout.strip():
            return None
        made = self.git("for-each-ref", f"refs/tags/{tag}", "--format=%(creatordate:iso-strict)").stdout.strip()
        committed = self.git("show", "-s", "--format=%cI", f"refs/tags/{tag}^{{commit}}").stdout.strip()
        try:  # a tag made after the upload (minutes later, or a backfilled one) is judged as of its commit
            return min(parse_time(made), parse_time(committed))
        except ValueError:
            return None

    @property
    def is_git(self) -> bool:
        return self.sdist is None and self.git("rev-parse", "--show-toplevel").returncode == 0


def _jaxrel_table(pyproject: Path) -> dict[str, Any] | None:
    """``[tool.jaxrel]`` of ``pyproject`` (``None`` when the file or the table is absent), a table."""
    if not pyproject.exists():
        return None
    try:
        table = jaxrel_table(localfiles.load_toml(pyproject), str(pyproject))
    except ConfigError:
        raise
    except BadInput as error:
        raise ConfigError(str(error)) from None
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.jaxrel] must be a table, not {found(table)}")
    return table


def _config(root: Path, family_name: str | None, source: str) -> tuple[Family, ReleaseConfig]:
    pyproject = root / "pyproject.toml"
    table = _jaxrel_table(pyproject)
    if family_name is not None:
        family = resolve_family(family_name)
        profile = family_name if family_name in PROFILES else None
        if profile is None:
            pyproject = Path(family_name)
            table = _jaxrel_table(pyproject)
        else:
            table = None  # --family NAME means that family: the tree's own [tool.jaxrel] does not leak in
    elif table is None:
        raise ConfigError(f"{source}: no [tool.jaxrel] table in {pyproject}; add one, or pass --family jax")
    else:
        family = family_from_config(table, str(pyproject))
        profile = table.get("profile")
    release_table = (table or {}).get("release")
    if release_table is not None:
        return family, release_from_config(release_table, family, str(pyproject))
    if profile in BUILTIN:
        return family, BUILTIN[profile]()
    raise ConfigError(f"{pyproject}: no [tool.jaxrel.release] table; declare the components to release "
                      "(see `jaxrel release --help`)")


@contextmanager
def open_project(source: Path, family: str | None = None) -> Iterator[Project]:
    """The project in directory ``source``, or in the sdist ``source`` unpacked to a temporary directory."""
    if source.is_dir():
        root = source.resolve()
        found, release = _config(root, family, str(source))
        yield Project(root, found, release)
        return
    if not source.is_file():
        raise ConfigError(f"{source}: no such directory or sdist; pass a project directory or a .tar.gz sdist")
    if not source.name.endswith((".tar.gz", ".tgz")):
        raise ConfigError(f"{source}: not a directory or a .tar.gz source distribution")
    with TemporaryDirectory(prefix="jaxrel-sdist-") as scratch:
        try:
            with tarfile.open(source) as archive:
                tarballs.extract_all(archive, Path(scratch))
        except (tarfile.TarError, OSError, EOFError) as error:
            raise ConfigError(f"{source}: unreadable sdist ({error}); download it again") from None
        tops = [p for p in Path(scratch).iterdir() if p.is_dir()]
        if len(tops) != 1 or not (tops[0] / "PKG-INFO").is_file():
            raise ConfigError(f"{source}: not an sdist (expected one top directory holding PKG-INFO)")
        found, release = _config(tops[0], family, str(source))
        yield Project(tops[0], found, release, sdist=source.resolve())
