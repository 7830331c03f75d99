"""``jaxrel release bump``: move a version in every declared file at once.

The new version is given (``0.5.0``), or derived from the current one: ``rc`` gives the next
release candidate (``0.5.0rc1``, then ``rc2``), ``nightly`` gives ``X.Y.Z.devYYYYMMDD`` from
the last commit's date, as jax's ``version.py`` does (jax uses the machine's local date; this
uses UTC, so every machine agrees). Moving the frontend or its minimum backend rewrites the
frontend's backend range ``>=minimum,<=version``; moving the backend re-pins the pinned
plugins released with it (``==version``). All files change together or none does.
"""

from __future__ import annotations

import datetime
import difflib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from jaxrel import policy
from jaxrel._util.atomic import read_exactly, write_all_atomically
from jaxrel.errors import BadInput
from jaxrel.release import locations
from jaxrel.release.config import Component, Location
from jaxrel.release.pins import frontend_range
from jaxrel.release.project import Project

__all__ = ["Bump", "BumpError", "Change", "apply", "commit_date", "next_version", "plan_bump"]


class BumpError(BadInput):
    """A bump that cannot be made; nothing was written."""


@dataclass(frozen=True)
class Change:
    """One rewritten value."""

    file: str
    key: str
    old: str | None
    new: str


@dataclass
class Bump:
    """The new texts of every touched file, and what changed in them."""

    changes: list[Change] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    originals: dict[str, str] = field(default_factory=dict)

    def text(self, root: Path, file: str) -> str:
        if file not in self.texts:
            self.originals[file] = self.texts[file] = read_exactly(root / file)
        return self.texts[file]

    def diff(self) -> str:
        return "".join(
            "".join(difflib.unified_diff(self.originals[f].splitlines(True), self.texts[f].splitlines(True),
                                         f"a/{f}", f"b/{f}"))
            for f in self.texts if self.texts[f] != self.originals[f])


def commit_date(project: Project) -> datetime.date:
    """The UTC date of the last commit (``git show -s --format=%ct HEAD``)."""
    done = project.git("show", "-s", "--format=%ct", "HEAD")
    if done.returncode != 0 or not done.stdout.strip().isdigit():
        raise BumpError(f"{project.root}: cannot read the last commit's date (a nightly needs a git checkout "
                        "with a commit); commit first")
    return datetime.datetime.fromtimestamp(int(done.stdout.strip()), datetime.UTC).date()


def next_version(current: str, requested: str | None, kind: str, date: datetime.date | None = None) -> str:
    """The version a bump moves to. ``kind``: ``release`` | ``rc`` | ``nightly``."""
    now = policy.parse_version(current, "current version")
    base = policy.parse_version(requested, "version") if requested else Version(policy.release_text(now))
    if kind == "release":
        if requested is None:
            return str(base)
        return requested
    if base.pre or base.dev or base.post or base.local:
        raise BumpError(f"give a plain X.Y.Z for --{kind}, not {requested!r}")
    if kind == "rc":
        same = Version(policy.release_text(now)) == base and now.pre and now.pre[0] == "rc"
        return f"{base}rc{now.pre[1] + 1 if same and now.pre else 1}"
    assert date is not None
    return f"{base}.dev{date:%Y%m%d}"


def _set(bump: Bump, project: Project, location: Location, version: str) -> None:
    text = bump.text(project.root, location.file)
    old = locations.read_text(text, location)
    if old is None:  # jax's _release_version: stamped at build time, never bumped
        return
    if old != version:
        bump.texts[location.file] = locations.rewrite(text, location, version)
        bump.changes.append(Change(location.file, location.key, old, version))


def _set_requirement(bump: Bump, project: Project, component: Component, backend: str, specifier: str) -> None:
    file = component.pyproject
    if not (project.root / file).exists():
        return
    text = bump.text(project.root, file)
    found = locations.requirement_on(text, backend, file)
    if found is None:  # nothing declared to move (dynamic dependencies: `release verify` checks the built ones)
        return
    old = str(found[1].specifier)
    if {str(s) for s in found[1].specifier} != set(specifier.split(",")):
        bump.texts[file] = locations.rewrite_requirement(text, backend, specifier, file)
        bump.changes.append(Change(file, f"project.dependencies[{backend}]", old or "(any)", specifier))


def plan_bump(project: Project, version: str | None, *, kind: str = "release", components: list[str] | None = None,
              minimum_backend: str | None = None, allow_older: bool = False) -> Bump:
    """Compute every file change of a bump (nothing is written)."""
    release = project.release
    chosen = [release.component(name) for name in components] if components else [
        c for c in release.components if c.build != "external"]
    date = commit_date(project) if kind == "nightly" else None
    bump = Bump()
    moved: dict[str, str] = {}
    for component in chosen:
        current = project.version_of(component)
        new = next_version(current, version, kind, date)
        if policy.parse_version(new, "new version") < Version(current) and not allow_older:
            raise BumpError(f"{component.distribution}: {new} is older than the current {current}; "
                            "give a newer version, or pass --allow-older")
        moved[component.distribution] = new
        for location in component.versions:
            _set(bump, project, location, new)
    _move_frontend_range(bump, project, moved, minimum_backend)
    _repin_plugins(bump, project, moved)
    return bump


def _move_frontend_range(bump: Bump, project: Project, moved: dict[str, str], minimum_backend: str | None) -> None:
    """The frontend's minimum (when given) and its backend range ``>=minimum,<=frontend``."""
    frontend = project.release.frontend()
    backend = project.family.backend.distribution
    if frontend is None:
        if minimum_backend is not None:
            raise BumpError("this tree releases no frontend, so it has no minimum backend to move")
        return
    minimum = project.minimum_backend()
    if minimum_backend is not None:
        policy.parse_version(minimum_backend, "--minimum-backend")
        if frontend.minimum_backend is None:
            raise BumpError("the frontend component declares no 'minimum-backend' location to move")
        _set(bump, project, frontend.minimum_backend, minimum_backend)
        minimum = minimum_backend
    if minimum is None or (frontend.distribution not in moved and minimum_backend is None):
        return
    frontend_version = moved.get(frontend.distribution) or project.version_of(frontend)
    if policy.release_key(Version(minimum)) > policy.release_key(Version(frontend_version)):
        raise BumpError(f"the minimum {backend} {minimum} would be newer than the frontend {frontend_version}; "
                        "lower --minimum-backend")
    _set_requirement(bump, project, frontend, backend, frontend_range(minimum, frontend_version))


def _repin_plugins(bump: Bump, project: Project, moved: dict[str, str]) -> None:
    """Pinned plugins moved with the backend require exactly its new version."""
    backend = project.release.backend()
    if backend is None or backend.distribution not in moved:
        return
    for plugin in project.release.by_role("plugin"):
        spec = project.family.plugin_for(plugin.distribution)
        if plugin.distribution in moved and spec is not None and spec.pinned:
            _set_requirement(bump, project, plugin, project.family.backend.distribution,
                             f"=={moved[backend.distribution]}")


def apply(project: Project, bump: Bump) -> None:
    """Write every changed file at once."""
    write_all_atomically({project.root / f: t for f, t in bump.texts.items() if t != bump.originals[f]})
