"""``jaxrel release bump``: move a version in every declared file at once.

The new version is given (``0.5.0``), or derived from the current one: ``rc`` gives the next
release candidate (``0.5.0rc1``, then ``rc2``), ``nightly`` gives ``X.Y.Z.devYYYYMMDD`` from
the last commit's date, as jax's ``version.py`` does (jax uses the machine's local date; this
uses UTC, so every machine agrees). Moving the frontend or its minimum backend rewrites the
frontend's backend range ``>=minimum,<=version``; moving the backend re-pins the pinned
plugins released with it (``==version``). All files change together or none does.

A family whose tree holds the *next* release's version (``versioning = "next"``, jax) bumps as
its maintainers' commits do, measured on jax's history:

* ``bump NEXT`` after releasing the declared version R ("Update version numbers after …",
  "Postrelease …"): the version moves to NEXT; where the tree names the backend released with
  this frontend, and the newest backend on the index (``setup.py``'s ``_current_jaxlib_version``,
  ``_latest_jaxlib_version_on_pypi``), it now says R; the changelog's notes under "Unreleased" get
  R's dated heading and a fresh "Unreleased" above them.
* ``bump R --minimum-backend M`` with R the declared version ("Prepare for JAX release R"): the
  minimum moves to M and the backend released with it is R.
* ``--rc``/``--nightly`` stamp the build's version (``_release_version``) as jax's build does:
  the committed version stays the release's.
"""

from __future__ import annotations

import datetime
import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from jaxrel import policy
from jaxrel._util.atomic import read_exactly, write_all_atomically
from jaxrel.distributions.index import Index
from jaxrel.errors import BadInput
from jaxrel.release import locations
from jaxrel.release.changelog import date_heading, precedent_heading
from jaxrel.release.config import Component, Location
from jaxrel.release.pins import frontend_range
from jaxrel.release.project import Project
from jaxrel.release.released import NOT_RELEASED, Released, was_released

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
        _bare(requested, "version")
        return requested
    if base.pre or base.dev or base.post or base.local:
        raise BumpError(f"give a plain X.Y.Z for --{kind}, not {requested!r}")
    if kind == "rc":
        same = Version(policy.release_text(now)) == base and now.pre and now.pre[0] == "rc"
        return f"{base}rc{now.pre[1] + 1 if same and now.pre else 1}"
    assert date is not None
    return f"{base}.dev{date:%Y%m%d}"


def _pin(bump: Bump, project: Project, pins: dict[str, str]) -> None:
    """``--pin NAME=V``: a component released on its own numbering (libtpu, pinned by jax's tpu extra as
    ``_libtpu_version = '0.0.44.*'``) moved to the value given: it cannot be derived from the release."""
    for name, value in pins.items():
        try:
            component = project.release.component(name)
        except (BadInput, KeyError, ValueError):
            raise BumpError(f"--pin {name}: not a component of the {project.family.name} release; name one of "
                            f"{', '.join(c.distribution for c in project.release.components if c.versions)}") from None
        if not component.released_separately or not component.versions:
            raise BumpError(f"--pin {name}: {name} is not released on its own numbering with a version in the tree; "
                            "its version moves with the release")
        text = value.removesuffix(".*")
        policy.parse_version(text, f"--pin {name}")
        for location in component.versions:
            _set(bump, project, location, value)


def _bare(text: str | None, option: str) -> None:
    """A version given on the command line is written into files as given: packaging's parser strips spaces and
    line breaks that the files would keep, so they are refused here."""
    if text is not None and (text != text.strip() or not text.isprintable()):
        raise BumpError(f"{option} {text[:40]!r}: spaces or control characters around it; give it bare (0.5.0)")


def _set(bump: Bump, project: Project, location: Location, version: str, stamped: bool = False) -> None:
    text = bump.text(project.root, location.file)
    old = locations.read_text(text, location)
    if old is None and not stamped:  # jax's _release_version: stamped at build time, never bumped
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
              minimum_backend: str | None = None, allow_older: bool = False,
              released_on: datetime.date | None = None, pins: dict[str, str] | None = None,
              index: Index | None = None, released_given: str | None = None,
              as_of: datetime.datetime | None = None) -> Bump:
    """Compute every file change of a bump (nothing is written). ``released_on``: the release date a
    post-release bump writes into the changelog heading (default: the release's first upload on the index, UTC).
    Whether the declared version was released (a family that keeps the next release's version) is asked of
    ``index`` and the tags, or said by ``released_given`` (:mod:`jaxrel.release.released`)."""
    release = project.release
    for given, option in ((version, "version"), (minimum_backend, "--minimum-backend"),
                          *((value, f"--pin {name}") for name, value in (pins or {}).items())):
        _bare(given, option)
    for given, option in ((minimum_backend, "--minimum-backend"),
                          (None if released_given == NOT_RELEASED else released_given, "--released")):
        if given is not None:  # a word (latest, head) is refused whichever path the bump takes
            policy.parse_version(given, option)
    if pins and version is None and minimum_backend is None and kind == "release":  # only the pins move
        bump = Bump()
        _pin(bump, project, pins)
        return bump
    if release.versioning == "next" and not components:
        bump = _bump_next(project, version, kind, minimum_backend, released_on,
                          lambda current: was_released(project, current, index, given=released_given, as_of=as_of))
        _pin(bump, project, pins or {})
        return bump
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
    _pin(bump, project, pins or {})
    return bump


def _bump_next(project: Project, version: str | None, kind: str, minimum_backend: str | None,
               released_on: datetime.date | None, ask: Callable[[str], Released]) -> Bump:
    """A bump of a family whose tree holds the next release's version (see the module doc)."""
    release = project.release
    lead = release.lead()
    current = project.version_of(lead)
    bump = Bump()
    if kind in ("rc", "nightly"):
        if minimum_backend is not None:
            raise BumpError(f"--{kind} stamps the build's version; --minimum-backend moves with a release bump: "
                            f"run `jaxrel release bump {current} --minimum-backend {minimum_backend}` first")
        if not release.stamped:
            raise BumpError(f"--{kind}: this family declares no build-stamped version location ('stamped')")
        stamp = next_version(current, version, kind, commit_date(project) if kind == "nightly" else None)
        for location in release.stamped:
            _set(bump, project, location, stamp, stamped=True)
        return bump
    if version is None:
        raise BumpError(f"give the version: the next release after {current} (post-release), or {current} itself "
                        "with --minimum-backend (preparing it)")
    new = policy.parse_version(version, "version")
    now = policy.parse_version(current, f"{lead.distribution} version")
    if new < now:
        raise BumpError(f"{version} is older than the declared {current}; give the next release, or {current}")
    released = current if new > now else None  # None: preparing the declared release
    if released is not None and released_on is None:  # a release date says it was released; else ask
        answer = ask(current)
        if not answer.released:
            released = None  # the declared version was never released: it is renumbered
        elif answer.first_upload is not None:
            released_on = answer.first_upload.date()  # the first upload's UTC date
    for location in lead.versions:
        _set(bump, project, location, version)
    for component in release.released_with():
        for location in component.current:
            _set(bump, project, location, released or version)
        for location in component.latest:
            if released is not None:
                _set(bump, project, location, released)
    if minimum_backend is not None:
        _move_frontend_range(bump, project, {lead.distribution: version}, minimum_backend)
    if released is not None:
        _date_changelog(bump, project, released, released_on or datetime.datetime.now(datetime.UTC).date())
    return bump



def _date_changelog(bump: Bump, project: Project, released: str, day: datetime.date) -> None:
    """The released version's dated heading under a fresh "Unreleased" (the family's changelog convention)."""
    release = project.release
    if release.changelog_style != "unreleased" or release.changelog is None:
        return
    path = project.root / release.changelog
    if not path.exists() and not path.is_symlink():
        return  # no changelog kept yet: nothing to date
    if not path.is_file():  # a FIFO would block, a directory fail half-way: neither is written
        raise BumpError(f"{release.changelog}: not a regular file (a directory, a FIFO or a dangling link); the "
                        "post-release bump dates the release's heading there: make it the changelog file")
    write_target(project.root, release.changelog)  # a link out of the tree is refused before anything is read
    text = bump.text(project.root, release.changelog)
    lines = text.split("\n")
    named_any = re.compile(rf"#{{1,3}} (Unreleased\s*$|.*(?<![\w.]){re.escape(released)}(?![\w]|\.\d))")
    start = next((i for i, line in enumerate(lines) if named_any.match(line)), None)
    if start is None:
        raise BumpError(f"{release.changelog} has no 'Unreleased' heading and none naming {released}; add "
                        "'## Unreleased' above the release notes")
    profile_heading = release.changelog_heading.format(version=released, date=f"{day:%B} {day.day}, {day.year}")
    heading = precedent_heading(profile_heading, lines, start + 1, released, day)
    date = heading[heading.rindex("(") + 1:-1] if heading.endswith(")") else f"{day:%B} {day.day}, {day.year}"
    level = lines[start].split(" ", 1)[0]  # the release headings' level ("##" under jax's "# Change log")
    headings = [i for i, line in enumerate(lines) if i >= start and line.startswith(level + " ")]
    first = headings[0]
    named = re.compile(rf"{re.escape(level)} .*(?<![\w.]){re.escape(released)}(?![\w]|\.\d)")
    if named.match(lines[first]):  # "## jax R" or "## JAX R (TODO)": dated in place, under a new "Unreleased"
        lines[first:first + 1] = [f"{level} Unreleased", "", date_heading(lines[first], date)]
    elif re.fullmatch(rf"{re.escape(level)} Unreleased\s*", lines[first]):
        following = headings[1] if len(headings) > 1 else None
        if following is not None and named.match(lines[following]):
            lines[following] = date_heading(lines[following], date)  # "## Unreleased" then "## JAX R (TODO)"
        else:  # the notes under "Unreleased" are R's
            lines[first + 1:first + 1] = ["", f"{level} {heading}"]
    else:
        raise BumpError(f"{release.changelog}: its first heading {lines[first][:60]!r} is neither 'Unreleased' nor "
                        f"the release {released}; the post-release bump dates the release's heading")
    new = "\n".join(lines)
    if new != text:
        bump.texts[release.changelog] = new
        bump.changes.append(Change(release.changelog, "heading", None, heading))


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


def write_target(root: Path, file: str) -> Path:
    """Where a bump writes ``file``: the file itself, or, for a symbolic link, its target when that lies inside the
    tree (the link stays a link); a link out of the tree is a :class:`BumpError` (a bump edits this tree only)."""
    path = root / file
    if not path.is_symlink():
        return path
    target = path.resolve()
    if not target.is_relative_to(root.resolve()):
        raise BumpError(f"{file}: a symbolic link to {target}, outside the tree; a bump writes this tree only: "
                        "make it a regular file, or point it inside the tree")
    return target


def apply(project: Project, bump: Bump) -> None:
    """Write every changed file at once (through an in-tree symbolic link; one leading out is refused before
    anything is written)."""
    changed = {write_target(project.root, f): t for f, t in bump.texts.items() if t != bump.originals[f]}
    write_all_atomically(changed)
