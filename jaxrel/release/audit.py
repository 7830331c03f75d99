"""``jaxrel release audit``: what the index actually serves for each release of a family, and its defects.

For every frontend release (``--version V``, or every final release ``--since V``), from the index's
PEP 691 listings (upload times, yanks, Requires-Python) and the METADATA of one wheel per
component (PEP 658, else HTTP range reads, cached: never whole wheels):

* **present**: which components of the release (the backend, each released-with plugin and pjrt)
  have files at V; a frontend release without its backend is a frontend-only release, not a defect;
* **extra**: an extra of the frontend that cannot be installed from the index, as pip would resolve it
  (a requirement no release satisfies);
* **wheel sets**: a released-with plugin whose wheels do not cover the backend's (Python, platform)
  set on its platforms, or cover one the backend lacks;
* **late**: a file uploaded more than :data:`LATE_AFTER` after the family's first file at V;
* **yanked**: a yanked file;
* **requires-python**: the frontend admits a Python that the backend at V has no wheel for;
* **pins**: the frontend's requirement on the backend is not ``>=minimum,<=V``; a hardware extra does
  not pin the backend and its plugin to V; a plugin does not pin its pjrt ``==V``;
* **order**: the frontend reached the index before any backend it requires (the window in which
  ``pip install frontend==V`` failed);
* the plugin families released separately (ROCm, oneAPI), every release of theirs filed under its base
  version: :mod:`jaxrel.release.audit_separate`.

Each finding is one line; the table and ``--json`` list them per release; any finding exits 1.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrel import policy
from jaxrel._util.progress import Progress, silent
from jaxrel._util.text import table
from jaxrel.distributions.extras import extras_of, unsatisfied_extras
from jaxrel.distributions.filenames import Slot, grid_holes, slot_text, wheel_slots
from jaxrel.distributions.index import Index
from jaxrel.distributions.metadata import CoreMetadata
from jaxrel.distributions.netlimits import IndexClientError
from jaxrel.distributions.pages import IndexFile, Listing, parse_time
from jaxrel.distributions.remote_metadata import MetadataReader
from jaxrel.family import Family
from jaxrel.release.audit_separate import separate_findings
from jaxrel.release.config import Component, ReleaseConfig
from jaxrel.release.pins import bound, first_refused_python, is_frontend_range, pins_exactly

__all__ = ["LATE_AFTER", "Finding", "ReleaseAudit", "audit", "render", "to_json"]

LATE_AFTER = datetime.timedelta(days=2)


@dataclass(frozen=True)
class Finding:
    kind: str  # extra | wheel-set | late | yanked | requires-python | pins | order | respin
    detail: str  # one line: a long list of files is cut short here, and given whole in ``files``
    files: tuple[str, ...] = ()  # every file the finding is about, where it names files (late)


@dataclass
class ReleaseAudit:
    version: str
    first_upload: str | None
    present: dict[str, int] = field(default_factory=dict)  # component → files at this version
    findings: list[Finding] = field(default_factory=list)


def _slots(files: list[IndexFile]) -> set[Slot]:
    return wheel_slots(f.filename for f in files)


def _shown(slots: list[Slot]) -> str:
    return ", ".join(slot_text(slot) for slot in slots[:4]) + (" …" if len(slots) > 4 else "")


def _wheel_sets(files: dict[str, list[IndexFile]], backend: Component, plugins: list[Component]) -> list[Finding]:
    """The backend's grid against itself, and each plugin's against the backend's (the ABI included: a plugin's
    free-threaded wheel beside no free-threaded backend wheel installs without its backend)."""
    have = _slots(files.get(backend.distribution, []))
    found = []
    if holes := grid_holes(have):
        found.append(Finding("wheel-grid", f"{backend.distribution} has a hole in its wheel grid: no "
                             f"{_shown(holes)}, while the same interpreters have wheels for other platforms"))
    for plugin in plugins:
        own = _slots(files.get(plugin.distribution, []))
        if not own:
            continue
        wanted = plugin.expected_slots(have)
        missing, extra = sorted(wanted - own), sorted(own - wanted)
        if missing:
            found.append(Finding("wheel-set", f"{plugin.distribution} lacks {len(missing)} wheel(s) that "
                                 f"{backend.distribution} has: {_shown(missing)}"))
        if extra:
            found.append(Finding("wheel-set", f"{plugin.distribution} has {len(extra)} wheel(s) "
                                 f"{backend.distribution} lacks: {_shown(extra)}"))
    return found


def _yanked(files: dict[str, list[IndexFile]]) -> list[Finding]:
    """One line per component with yanked files (all of them: the release was withdrawn)."""
    found = []
    for name, listed in files.items():
        yanked = [f for f in listed if f.yanked is not None]
        if yanked:
            reason = next((f.yanked for f in yanked if f.yanked), "")
            which = "every file" if len(yanked) == len(listed) else f"{len(yanked)} of {len(listed)} files"
            found.append(Finding("yanked", f"{name}: {which} yanked" + (f" ({reason})" if reason else "")))
    return found


def _extras(family: Family, version: str, requires: list[str], listing: Callable[[str], Listing]) -> list[Finding]:
    """Extras that cannot be installed from the index. A runtime the index never had (libtpu-nightly) is served
    from its own find-links page: not judged here."""
    names = {str(canonicalize_name(Requirement(r).name)) for r in requires if _parses(r)}
    backend = str(canonicalize_name(family.backend.distribution))
    listings = {name: listing(name) for name in names if family.plugin_for(name) or name == backend}
    found = []
    for missing in unsatisfied_extras(family, requires, listings):
        if missing.served_elsewhere:
            continue
        found.append(Finding("extra", missing.message(f"{family.frontend.distribution}=={version}")))
    return found


def _timing(version: str, files: dict[str, list[IndexFile]]) -> tuple[str | None, list[Finding]]:
    """The family's first upload, and every file uploaded more than :data:`LATE_AFTER` after it: one finding per
    distribution naming all of its late files and the days they came."""
    times = [(parse_time(f.upload_time), name, f.filename) for name, listed in files.items() for f in listed
             if f.upload_time is not None]
    if not times:
        return None, []
    first = min(t for t, _, _ in times)
    late: dict[str, list[tuple[datetime.datetime, str]]] = {}
    for when, name, filename in sorted(times):
        if when - first > LATE_AFTER:
            late.setdefault(name, []).append((when, filename))
    findings = []
    for name, items in sorted(late.items()):
        days = sorted({(when - first).days for when, _ in items})
        span = f"{days[0]}" if len(days) == 1 else f"{days[0]}–{days[-1]}"
        names = ", ".join(filename for _, filename in items[:3]) + (f" and {len(items) - 3} more"
                                                                   if len(items) > 3 else "")
        findings.append(Finding("late", f"{name}: {len(items)} file{'s' if len(items) > 1 else ''} uploaded {span} "
                                f"days after the family's first file of {version} ({first:%Y-%m-%d} → "
                                f"{items[-1][0]:%Y-%m-%d}): {names}", tuple(f for _, f in items)))
    return first.strftime("%Y-%m-%dT%H:%M:%SZ"), findings


def _upload_order(version: str, frontend: str, metadata: CoreMetadata | None, files: list[IndexFile],
                  backend: str, backend_listing: Listing) -> list[Finding]:
    """The frontend on the index before any backend it requires: ``pip install frontend==V`` failed in between."""
    uploads = [parse_time(f.upload_time) for f in files if f.upload_time is not None and f.yanked is None]
    if metadata is None or not uploads:
        return []
    requirements, _ = metadata.requirements()
    plain = [r for r in requirements if canonicalize_name(r.name) == canonicalize_name(backend) and r.marker is None]
    if not plain:
        return []
    satisfying = [parse_time(f.upload_time) for f in backend_listing.files if f.upload_time is not None
                  and f.yanked is None and plain[0].specifier.contains(f.version, prereleases=True)]
    start = min(uploads)
    ready = min(satisfying) if satisfying else None
    if ready is not None and ready <= start:
        return []
    until = f"for {_duration(ready - start)}, until {ready:%Y-%m-%d %H:%M:%S} UTC" if ready else "to this day"
    return [Finding("order", f"{frontend} {version} reached the index before any {backend}{plain[0].specifier} it "
                    f"requires: `pip install {frontend}=={version}` failed from {start:%Y-%m-%d %H:%M:%S} UTC {until} "
                    f"(upload {backend} first)")]


def _duration(span: datetime.timedelta) -> str:
    seconds = int(span.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes} min"
    hours = minutes // 60
    return f"{hours} h" if hours < 48 else f"{hours // 24} days"


def _requires_python(version: str, frontend: str, metadata: CoreMetadata | None,
                     files: dict[str, list[IndexFile]], frontend_name: str) -> list[Finding]:
    """A Python the frontend admits and a distribution released with it refuses (its Requires-Python, as the index
    lists it): pip on that Python finds no such file of the release."""
    declared = metadata.requires_python if metadata is not None else None
    try:
        admitted = SpecifierSet(declared or "")
    except InvalidSpecifier:
        return []
    found = []
    for name, listed in sorted(files.items()):
        if name == frontend_name:
            continue
        stated = {f.requires_python for f in listed if f.requires_python}
        for text in sorted(stated):
            try:
                theirs = SpecifierSet(text)
            except InvalidSpecifier:
                found.append(Finding("requires-python", f"{name} {version}: Requires-Python {text!r} does not parse"))
                continue
            refused = first_refused_python(admitted, theirs)
            if refused is not None and declared:
                found.append(Finding("requires-python", f"{frontend} {version} admits Python 3.{refused} "
                                     f"({declared}) but {name} {version} requires {text}: on 3.{refused} pip "
                                     f"finds no {name} {version}"))
                break
    return found


def _pins(version: str, frontend: str, backend: str, metadata: CoreMetadata, plugins: dict[str, CoreMetadata],
          release: ReleaseConfig, present: set[str]) -> list[Finding]:
    """The frontend's backend range and hardware extras, and each plugin's pjrt pin (``plugins``: METADATA)."""
    found = []
    wanted = Version(version)
    requirements, broken = metadata.requirements()
    for text in broken:
        found.append(Finding("pins", f"{frontend} {version}: Requires-Dist {text[:80]!r} does not parse"))
    plain = [r for r in requirements if canonicalize_name(r.name) == canonicalize_name(backend) and r.marker is None]
    if plain:
        specifier = plain[0].specifier
        lower = [v for s in specifier if s.operator in (">=", "==") and isinstance(v := bound(s), Version)]
        minimum = str(min(lower)) if lower else None
        if minimum is None or not (is_frontend_range(specifier, minimum, version) or pins_exactly(specifier, wanted)):
            found.append(Finding("pins", f"{frontend} {version} requires {backend}{specifier}, "
                                 f"not >=minimum,<={version}"))
    names = {str(canonicalize_name(c.distribution)): c for c in release.components}
    for extra, items in extras_of(metadata.requires_dist, metadata.provides_extra).items():
        for requirement in items:
            component = names.get(str(canonicalize_name(requirement.name)))
            if component is None or component.released_separately or component.role != "plugin" \
                    or str(canonicalize_name(requirement.name)) not in present:  # a frontend-only release pins older
                continue
            if not requirement.specifier.contains(wanted, prereleases=True):
                found.append(Finding("pins", f"{frontend}[{extra}] {version} requires {requirement}, which excludes "
                                     f"{requirement.name} {version} released with it"))
    for plugin, declared in plugins.items():
        component = names[plugin]
        for pinned in component.pins:
            parsed = declared.requirements()[0]
            on = [r for r in parsed if canonicalize_name(r.name) == canonicalize_name(pinned) and r.marker is None]
            if not on or not pins_exactly(on[0].specifier, wanted):
                found.append(Finding("pins", f"{component.distribution} {version} requires "
                                     f"{on[0] if on else f'no {pinned}'}, not {pinned}=={version}"))
    return found


def _python_gap(version: str, frontend: str, metadata: CoreMetadata | None, backend: str,
                files: list[IndexFile]) -> list[Finding]:
    """The frontend admits a CPython the backend at V has no wheel for (pip would pick an older backend or fail)."""
    declared = metadata.requires_python if metadata is not None else None
    built = {python for python, _, _ in _slots(files)}
    cpythons = sorted({int(p[3:]) for p in built if p.startswith("cp3") and p[3:].isdigit()})
    if not declared or not cpythons:
        return []
    try:
        admitted = SpecifierSet(declared)
    except InvalidSpecifier:
        return [Finding("requires-python", f"{frontend} {version}: Requires-Python {declared!r} does not parse")]
    below = [minor for minor in range(cpythons[0] - 3, cpythons[0]) if admitted.contains(f"3.{minor}.0")]
    if below:
        return [Finding("requires-python", f"{frontend} {version} admits Python 3.{below[0]} ({declared}) but "
                        f"{backend} {version} has no wheel before cp3{cpythons[0]}")]
    return []


def audit(family: Family, release: ReleaseConfig, index: Index, versions: list[str], *,
          reader: MetadataReader | None = None, progress: Progress = silent) -> list[ReleaseAudit]:
    """Audit each frontend release in ``versions`` (see the module doc)."""
    reader = reader or MetadataReader()
    frontend_name, backend_name = family.frontend.distribution, family.backend.distribution
    backend = release.backend()
    together = [c for c in release.released_with() if c.role == "plugin"]
    listings: dict[str, Listing] = {}

    def listing(name: str) -> Listing:
        key = str(canonicalize_name(name))
        if key not in listings:
            listings[key] = index.listing(name)
        return listings[key]

    for name in [frontend_name, backend_name, *(c.distribution for c in release.components)]:
        listing(name)
    results = []
    for number, version in enumerate(versions, 1):
        progress(f"audit: [{number}/{len(versions)}] {frontend_name} {version}")
        files = {c.distribution: listing(c.distribution).files_for(version)
                 for c in release.released_with() if listing(c.distribution).files_for(version)}
        files.setdefault(frontend_name, listing(frontend_name).files_for(version))
        result = ReleaseAudit(version, None, {name: len(listed) for name, listed in files.items()})
        result.first_upload, late = _timing(version, files)
        result.findings += late
        result.findings += _yanked(files)
        wheel = next((f for f in files[frontend_name] if f.is_wheel), None)
        metadata = reader.metadata(wheel) if wheel is not None else None
        requires = list(metadata.requires_dist) if metadata is not None else []
        withdrawn = all(f.yanked is not None for f in files[frontend_name])  # the yank is the finding
        if not withdrawn:
            result.findings += _extras(family, version, requires, listing)
        plugin_metadata = {}
        present = {str(canonicalize_name(name)) for name in files}
        for component in together:
            found = [f for f in files.get(component.distribution, []) if f.is_wheel]
            if component.pins and found:
                plugin_metadata[str(canonicalize_name(component.distribution))] = reader.metadata(
                    min(found, key=lambda f: (not f.metadata, f.size or 0)))
        if not withdrawn:
            result.findings += _upload_order(version, frontend_name, metadata, files[frontend_name], backend_name,
                                             listing(backend_name))
            result.findings += _requires_python(version, frontend_name, metadata, files, frontend_name)
        if backend is not None and backend.distribution in files:
            result.findings += _wheel_sets(files, backend, together)
            result.findings += _python_gap(version, frontend_name, metadata, backend_name, files[backend.distribution])
        if metadata is not None:
            result.findings += _pins(version, frontend_name, backend_name, metadata, plugin_metadata, release, present)
        results.append(result)
    by_version = {r.version: r for r in results}

    def frontend_python(base: str) -> str | None:
        return next((f.requires_python for f in listing(frontend_name).files_for(base) if f.requires_python), None)

    for base, kind, detail in separate_findings(release, frontend_python, listing, reader.metadata, set(by_version)):
        by_version[base].findings.append(Finding(kind, detail))
    return results


def _parses(text: str) -> bool:
    try:
        Requirement(text)
    except InvalidRequirement:
        return False
    return True


def releases(index: Index, family: Family, version: str | None, since: str | None) -> list[str]:
    """The frontend releases to audit: ``version``, or every final one from ``since`` on (default: the newest)."""
    known = [v for v in index.listing(family.frontend.distribution).versions() if policy.is_final(v)]
    if not known:  # a package index that lists no final release of the frontend lists nothing worth an "ok"
        raise IndexClientError(f"the index lists no release of {family.frontend.distribution}: its listing is empty "
                               "or cut short; check the index (pip config list, --index-url) and retry")
    if version is not None:
        wanted = policy.parse_version(version, "--version")
        if wanted not in known:
            raise policy.VersionError(f"--version {version}: {family.frontend.distribution} has no such release on "
                                      "the index")
        return [str(wanted)]
    if since is None:
        return [str(known[-1])] if known else []
    start = policy.parse_version(since, "--since")
    found = [str(v) for v in known if v >= start]
    if not found:
        raise policy.VersionError(f"--since {since}: {family.frontend.distribution}'s newest release on the index is "
                                  f"{known[-1]}; give an older one")
    return found


def to_json(results: list[ReleaseAudit]) -> dict[str, Any]:
    return {"ok": not any(r.findings for r in results), "releases": [asdict(r) for r in results]}


def render(results: list[ReleaseAudit], release: ReleaseConfig, requests: int) -> str:
    columns = [c.distribution for c in release.released_with() if c.role != "frontend"]
    rows = [(r.version, (r.first_upload or "")[:10], *("✓" if r.present.get(c) else "·" for c in columns),
             str(len(r.findings)) if r.findings else "") for r in results]
    lines = [table(("release", "uploaded", *columns, "findings"), rows), ""]
    for r in results:
        lines += [f"{r.version}: {f.kind}: {f.detail}" for f in r.findings]
    bad = sum(bool(r.findings) for r in results)
    total = sum(len(r.findings) for r in results)
    lines.append(f"{len(results)} releases audited, {bad} with findings ({total} in all); "
                 f"{requests} requests to the index")
    return "\n".join(lines)
