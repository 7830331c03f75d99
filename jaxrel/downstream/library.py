"""A library built on the family, as input: a release on the index (its METADATA) or a checkout (its pyproject).

What jaxrel needs of it is read once here, into a :class:`Library`: its name and version, what it requires of the
family (the frontend, backend and plugins, with their extras and markers, as packaging evaluates them for the cell's
Python), its test extra, when it was uploaded, and where its source lives (``Project-URL``).
"""

from __future__ import annotations

import datetime
import tarfile
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from jaxrel._util import localfiles
from jaxrel.distributions.index import Index, IndexClientError, IndexFile
from jaxrel.distributions.metadata import CoreMetadata, parse_core_metadata
from jaxrel.distributions.pages import parse_time
from jaxrel.distributions.pythons import release_of
from jaxrel.distributions.remote_metadata import MetadataReader, RemoteMetadataError
from jaxrel.errors import BadInput
from jaxrel.family.model import Family

__all__ = ["TEST_EXTRAS", "Library", "LibraryError", "from_checkout", "from_index", "parse_library_spec"]

TEST_EXTRAS = ("test", "tests", "testing", "dev")  # the extras libraries put their test requirements in, in order
LOWER_BOUNDS = (">=", "==", "~=", "===")


class LibraryError(BadInput):
    """The library asked for cannot be used as given (exit 2); the message says why and the fix."""


@dataclass(frozen=True)
class Library:
    """One release of a library built on the family (or a checkout of one)."""

    name: str  # canonical
    version: str
    requires_dist: tuple[str, ...]
    provides_extra: tuple[str, ...] = ()
    requires_python: str | None = None
    uploaded: str | None = None  # "YYYY-MM-DDTHH:MM:SSZ": its first file's upload, when the index says
    project_urls: tuple[tuple[str, str], ...] = ()
    sdist: IndexFile | None = None
    wheel: IndexFile | None = None
    checkout: Path | None = None  # --library-src: installed from this tree

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    def install_requirement(self) -> str:
        """What an environment installs for it: the checkout's path, else ``name==version``."""
        return str(self.checkout) if self.checkout is not None else f"{self.name}=={self.version}"

    def _applying(self, python: str, extra: str = "") -> list[Requirement]:
        environment = {**{k: str(v) for k, v in default_environment().items()}, "python_version": release_of(python),
                       "python_full_version": f"{release_of(python)}.0", "extra": extra}
        found = []
        for text in self.requires_dist:
            requirement = Requirement(text)  # checked by the constructors
            if requirement.marker is None or requirement.marker.evaluate(environment):
                found.append(requirement)
        return found

    def family_requirements(self, family: Family, python: str) -> list[Requirement]:
        """Its requirements on the family that apply on ``python`` (no extra): jax, jaxlib, plugins."""
        names = _family_names(family)
        return [r for r in self._applying(python) if str(canonicalize_name(r.name)) in names]

    def specifier(self, distribution: str, family: Family, python: str) -> SpecifierSet:
        """Everything it says about ``distribution`` (one specifier set; empty when it says nothing)."""
        wanted = canonicalize_name(distribution)
        joined = SpecifierSet()
        for requirement in self.family_requirements(family, python):
            if canonicalize_name(requirement.name) == wanted:
                joined &= requirement.specifier
        return joined

    def declared_minimum(self, family: Family, python: str) -> str | None:
        """The lowest frontend release it admits as written (``jax>=0.4.16`` → ``0.4.16``); ``None``: no bound."""
        bounds = [Version(s.version.removesuffix(".*")) for s in self.specifier(family.frontend.distribution, family,
                                                                                python)
                  if s.operator in LOWER_BOUNDS or s.operator == ">"]
        return str(max(bounds)) if bounds else None

    def test_extra(self) -> str | None:
        """The extra holding its test requirements (``test``, ``tests``, ``testing`` or ``dev``), if it has one."""
        return next((extra for extra in TEST_EXTRAS if extra in self.provides_extra), None)

    def test_requirements(self, python: str, family: Family) -> list[str]:
        """Its test extra's requirements that apply on ``python``, the family's own left out (the cell pins those)."""
        extra = self.test_extra()
        if extra is None:
            return []
        names = _family_names(family)
        plain = {str(r) for r in self._applying(python)}
        return [_without_marker(r) for r in self._applying(python, extra)
                if str(r) not in plain and str(canonicalize_name(r.name)) not in names
                and canonicalize_name(r.name) != canonicalize_name(self.name)]

    def source_url(self) -> str | None:
        """Its source repository, from ``Project-URL`` (Source, Repository, Code, GitHub, Homepage: first found)."""
        urls = {label.strip().lower().replace(" ", ""): url.strip() for label, url in self.project_urls}
        for label in ("source", "sourcecode", "repository", "code", "github", "homepage", "home"):
            url = urls.get(label)
            if url and url.startswith("https://"):
                return url.removesuffix("/").removesuffix(".git")
        return None


def _family_names(family: Family) -> set[str]:
    return {str(canonicalize_name(n)) for n in (family.frontend.distribution, family.backend.distribution,
                                                *(p.distribution for p in family.plugins))}


def _without_marker(requirement: Requirement) -> str:
    """The requirement as an installer takes it once its marker held (``scipy>=1; extra == "test"``: ``scipy>=1``)."""
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    target = f" @ {requirement.url}" if requirement.url else str(requirement.specifier)
    return f"{requirement.name}{extras}{target}"


def parse_library_spec(text: str) -> tuple[str, str | None]:
    """``optax==0.2.3`` → ``("optax", "0.2.3")``; ``optax`` → ``("optax", None)`` (the newest release)."""
    name, sep, version = text.strip().partition("==")
    try:
        canonical = str(canonicalize_name(name, validate=True))
    except Exception:  # packaging raises InvalidName (a ValueError) for a name that is none
        raise LibraryError(f"{text[:80]!r} is not a library: give NAME or NAME==VERSION (e.g. optax==0.2.3)") from None
    if sep:
        try:
            return canonical, str(Version(version.strip()))
        except InvalidVersion:
            raise LibraryError(f"{text[:80]!r}: {version[:40]!r} is not a PEP 440 version (e.g. optax==0.2.3)"
                               ) from None
    return canonical, None


def _checked(meta: CoreMetadata, where: str, family: Family) -> tuple[str, ...]:
    texts = []
    for text in meta.requires_dist:
        try:
            Requirement(text)
        except InvalidRequirement as error:
            raise LibraryError(f"{where}: its Requires-Dist {text[:80]!r} does not parse ({str(error)[:80]}); the "
                               "METADATA is malformed: fix the library's metadata or pick another release") from None
        texts.append(text)
    if meta.requires_python:
        try:
            SpecifierSet(meta.requires_python)
        except InvalidSpecifier:
            raise LibraryError(f"{where}: its Requires-Python {meta.requires_python[:60]!r} does not parse; the "
                               "METADATA is malformed") from None
    return tuple(texts)


def _depends_on_family(library: Library, family: Family, python: str) -> Library:
    if not library.family_requirements(family, python):
        raise LibraryError(f"{library.label} does not depend on {family.frontend.distribution} (no "
                           f"{family.frontend.distribution}, {family.backend.distribution} or plugin in its "
                           f"requirements for Python {python}); pick a library built on {family.name}")
    return library


def _sdist_metadata(index: Index, sdist: IndexFile) -> CoreMetadata:
    path = index.download(sdist)
    try:
        with tarfile.open(path) as archive:
            member = next((m for m in archive.getmembers()
                           if m.isfile() and m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")), None)
            handle = archive.extractfile(member) if member is not None else None
            raw = handle.read(4 << 20) if handle is not None else None
    except (tarfile.TarError, OSError, EOFError) as error:
        raise LibraryError(f"{sdist.filename}: not a readable sdist ({str(error)[:80]}); pick another release"
                           ) from None
    if raw is None:
        raise LibraryError(f"{sdist.filename}: the sdist has no PKG-INFO; pick a release with a wheel")
    return parse_core_metadata(raw, sdist.filename, LibraryError)


def from_index(index: Index, name: str, version: str | None, family: Family, python: str,
               reader: MetadataReader | None = None, released_before: datetime.datetime | None = None,
               assumed: str | None = None) -> Library:
    """The release ``name==version`` (``None``: its newest release that is not yanked or a pre-release, and with
    ``released_before``, first uploaded before then) as the index serves it, its METADATA read from its wheel (else
    its sdist's PKG-INFO). ``assumed`` (a card's ``jax>=0.4.24``) stands in for the family requirement of a
    library that declares none (its users install jax themselves)."""
    listing = index.listing(name)
    if not listing.files:
        raise LibraryError(f"{name}: the index has no such project ({', '.join(index.describe())}); check the name")
    served = sorted({f.version for f in listing.files if f.yanked is None})
    if version is None:
        finals = [v for v in served if not v.is_prerelease and not v.is_devrelease]
        if released_before is not None:
            finals = [v for v in finals
                      if (first := listing.first_upload(v)) is None or parse_time(first) <= released_before]
            if not finals:
                raise LibraryError(f"{name}: no final release was uploaded before {released_before:%Y-%m-%d} (the "
                                   "candidate's commit); give NAME==VERSION")
        if not finals:
            raise LibraryError(f"{name}: the index serves no final release; give NAME==VERSION")
        chosen = finals[-1]
    else:
        chosen = Version(version)
        if chosen not in {f.version for f in listing.files}:
            newest = ", ".join(str(v) for v in served[-3:])
            raise LibraryError(f"{name} {version}: the index does not serve this version (newest: {newest}); "
                               "pick one it has")
    files = listing.files_for(chosen)
    wheels = [f for f in files if f.is_wheel]
    wheel = next((f for f in wheels if f.filename.endswith("-none-any.whl")), wheels[0] if wheels else None)
    sdist = listing.sdist(chosen)
    try:
        meta = (reader or MetadataReader()).metadata(wheel) if wheel is not None else None
    except RemoteMetadataError as error:
        raise IndexClientError(str(error)) from None
    if meta is None:
        if sdist is None:
            raise LibraryError(f"{name} {chosen}: the index serves neither a wheel nor an sdist of it")
        meta = _sdist_metadata(index, sdist)
    where = wheel.filename if wheel is not None else sdist.filename if sdist is not None else name
    texts = _checked(meta, where, family)
    library = Library(str(canonicalize_name(meta.name)), str(chosen), texts, meta.provides_extra,
                      meta.requires_python, listing.first_upload(chosen), meta.project_urls, sdist, wheel)
    if assumed is not None and not library.family_requirements(family, python):
        library = replace(library, requires_dist=(*library.requires_dist, assumed))
    return _depends_on_family(library, family, python)


def from_checkout(path: Path, family: Family, python: str) -> Library:
    """The library in the checkout ``path``, from its ``pyproject.toml``'s ``[project]`` table."""
    if not path.is_dir():
        raise LibraryError(f"--library-src {path}: not a directory; give the library's checkout")
    pyproject = path / "pyproject.toml"
    if not pyproject.is_file():
        raise LibraryError(f"--library-src {path}: no pyproject.toml, so not a Python project jaxrel can read; give "
                           "the library's checkout (its top, where pyproject.toml is)")
    data = localfiles.load_toml(pyproject, what="the library's pyproject.toml")
    project = data.get("project")
    if not isinstance(project, dict) or not isinstance(project.get("name"), str):
        raise LibraryError(f"{pyproject}: no [project] table with a name; give a checkout whose pyproject.toml "
                           "declares its project (PEP 621)")
    dynamic = project.get("dynamic", [])
    if "dependencies" in dynamic or "optional-dependencies" in dynamic:
        raise LibraryError(f"{pyproject}: its dependencies are dynamic (computed at build time), so jaxrel cannot "
                           "read them; give the released version by name instead of --library-src")
    version = project.get("version")
    if not isinstance(version, str):
        version = "0+checkout"  # dynamic version: the checkout's own, whatever its build says
    dependencies = project.get("dependencies", [])
    optional = project.get("optional-dependencies", {})
    if not isinstance(dependencies, list) or not isinstance(optional, dict):
        raise LibraryError(f"{pyproject}: [project] dependencies must be a list and optional-dependencies a table")
    texts = [str(d) for d in dependencies]
    for extra, items in optional.items():
        for item in items if isinstance(items, list) else []:
            requirement, _, marker = str(item).partition(";")
            condition = f"extra == {str(canonicalize_name(extra))!r}"
            texts.append(f"{requirement}; ({marker.strip()}) and {condition}" if marker.strip()
                         else f"{requirement}; {condition}")
    meta = CoreMetadata(str(project["name"]), version, tuple(texts), project.get("requires-python"),
                        tuple(str(canonicalize_name(e)) for e in optional))
    checked = _checked(meta, str(pyproject), family)
    urls = project.get("urls", {})
    library = Library(str(canonicalize_name(meta.name)), version, checked, meta.provides_extra, meta.requires_python,
                      None, tuple((str(k), str(v)) for k, v in urls.items()) if isinstance(urls, dict) else (),
                      checkout=path.resolve())
    return _depends_on_family(library, family, python)
