"""``jaxrel release verify``: the built artifacts are exactly what the release says.

For every file in ``dist/``: the manifest lists it and its sha256 matches; a wheel's members
match its RECORD (checked here unless collect checked exactly these bytes: the manifest says how many
members it read; ``deep`` checks them again); ``twine check --strict`` passes; the filename's name, version (and wheel
tags) match the METADATA/PKG-INFO inside; the metadata pins follow the policy (the frontend
requires exactly [minimum, release] of the backend, pinned plugins exactly the backend,
extensions admit it); a backend comes with the frontend at the same version.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.tags import parse_tag
from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrel._util import localfiles, procs
from jaxrel._util.files import sha256_of
from jaxrel._util.parallel import workers
from jaxrel._util.text import tail
from jaxrel.distributions.archives import MAX_TEXT, MEMBER_ERRORS
from jaxrel.distributions.filenames import FilenameError, name_and_version, wheel_tags
from jaxrel.distributions.wheels import ArtifactInfo, WheelError, inspect, verify_record
from jaxrel.family import Family
from jaxrel.release import attest
from jaxrel.release.config import Component, ReleaseConfig
from jaxrel.release.manifest import Artifact, Manifest, ManifestError, read
from jaxrel.release.pins import frontend_range, is_frontend_range, pins_exactly

__all__ = ["ARTIFACT_SUFFIXES", "LINT_ONLY", "FileReport", "Verification", "filename_problems", "metadata_only",
           "render", "twine_check", "twine_check_many", "verify_dist", "verify_file"]

ARTIFACT_SUFFIXES = (".whl", ".tar.gz", ".zip")


@dataclass
class FileReport:
    """What verify found about one file."""

    file: str
    problems: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # lints the index does not enforce (no long description)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class Verification:
    """Every file's report, and problems of the release as a whole."""

    manifest: Manifest
    files: list[FileReport]
    release_problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.release_problems and all(f.ok for f in self.files)

    def problems(self) -> list[str]:
        return [*self.release_problems, *(f"{f.file}: {p}" for f in self.files for p in f.problems)]

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "version": self.manifest.version,
                "files": [asdict(f) | {"ok": f.ok} for f in self.files], "release_problems": self.release_problems}


LINT_ONLY = re.compile(r"`long_description(_content_type)?` missing|long_description.*missing", re.I)


def twine_check(path: Path) -> str | None:
    """``twine check --strict``: ``None`` when it passes, else its first complaint; a complaint that is only a lint
    the index does not enforce (no long description: the index accepted jax's plugin and pjrt wheels without
    one) starts with ``warning:``."""
    return twine_check_many([path])[path]


def twine_check_many(paths: Sequence[Path]) -> dict[Path, str | None]:
    """:func:`twine_check` of many files: one ``twine check`` per worker over a share of them (one process per
    file would spend more on starting Python than on checking). A wheel is given to twine as
    :func:`metadata_only` makes it: twine judges the metadata and only hashes the rest, 2.5 GB for jax."""
    if not paths:
        return {}
    with tempfile.TemporaryDirectory(prefix="jaxrel-twine-") as scratch:
        given = {path: metadata_only(path, Path(scratch) / str(number)) for number, path in enumerate(paths)}
        shares: list[list[Path]] = [[] for _ in range(min(workers(), len(paths)))]
        for path in sorted(given.values(), key=lambda p: p.stat().st_size, reverse=True):  # the biggest first,
            min(shares, key=lambda share: sum(p.stat().st_size for p in share)).append(path)  # to the lightest
        with ThreadPoolExecutor(len(shares)) as pool:
            verdicts = {path: complaint for share in pool.map(_twine_share, shares)
                        for path, complaint in share.items()}
    results: dict[Path, str | None] = {}
    for path in paths:  # a complaint that names the file twine was given names the file asked about
        verdict = verdicts[given[path]]
        results[path] = verdict.replace(str(given[path]), str(path)) if verdict else None
    return results


def metadata_only(path: Path, folder: Path) -> Path:
    """What ``twine check`` reads of a wheel, in a wheel of the same name under ``folder``: every member of its
    ``.dist-info`` and every member twine's search for METADATA looks at (a name containing ``METADATA``), byte
    for byte. ``path`` itself for an sdist, or a wheel that zipfile cannot read or whose metadata is outsized
    (twine's verdict on such a file is what is asked)."""
    if not path.name.endswith(".whl"):
        return path
    try:
        with zipfile.ZipFile(path) as source:
            kept = [info for info in source.infolist()
                    if info.filename.split("/", 1)[0].endswith(".dist-info") or "METADATA" in info.filename]
            if sum(info.file_size for info in kept) > MAX_TEXT:
                return path
            folder.mkdir(parents=True)
            with zipfile.ZipFile(folder / path.name, "w") as target:
                for info in kept:
                    target.writestr(info, source.read(info))
        return folder / path.name
    except MEMBER_ERRORS:
        return path


def _twine_share(paths: list[Path]) -> dict[Path, str | None]:
    done = procs.run([sys.executable, "-m", "twine", "--no-color", "check", "--strict", *map(str, paths)],
                     env={**os.environ, "NO_COLOR": "1", "COLUMNS": "100000"})  # no wrapped lines to parse
    output = done.stdout + done.stderr
    if "No module named twine" in output:
        return dict.fromkeys(paths, "twine is not installed; pip install 'jaxrel[release]'")
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line in output.splitlines():
        if line.startswith("Checking ") and ": " in line:
            current = sections.setdefault(line.removeprefix("Checking ").rpartition(": ")[0], [])
        current.append(line.strip())
    results: dict[Path, str | None] = {}
    for path in paths:
        lines = [line for line in sections.get(str(path), []) if line]
        if not lines and len(paths) > 1:  # twine stopped at a file before it: this one is checked on its own
            results |= _twine_share([path])
        elif not lines:
            results[path] = _complaint([line.strip() for line in output.splitlines() if line.strip()], output)
        else:
            results[path] = None if lines == [f"Checking {path}: PASSED"] else _complaint(lines, output)
    return results


def _complaint(lines: list[str], output: str) -> str:
    details = [line for line in lines if not line.startswith("Checking")]
    complaints = [line for line in details if line.startswith(("WARNING", "ERROR"))]
    if complaints and all(line.startswith("WARNING") and LINT_ONLY.search(line) for line in complaints):
        shown = "; ".join(" ".join(line.removeprefix("WARNING").split()) for line in complaints[:2])
        return f"warning: twine check --strict: {shown} (the index accepts it)"
    return "twine check --strict: " + ("; ".join(details[:2]) or tail(output, 1, empty=""))


def filename_problems(path: Path, info: ArtifactInfo) -> list[str]:
    """Where the file's name (project, version, wheel tags) and what its metadata declares disagree."""
    problems = []
    if path.name.endswith(".whl"):
        tags = {str(t) for t in wheel_tags(path.name)}
        declared = {tag for text in info.tags for tag in _expand(text)}
        if tags != declared:
            problems.append(f"filename tags {sorted(tags)} differ from WHEEL's {sorted(declared)}")
    name, version = name_and_version(path.name)
    if name != canonicalize_name(info.name):
        problems.append(f"filename names {name}, METADATA names {info.name}")
    if version != Version(info.version):
        problems.append(f"filename says version {version}, METADATA says {info.version}")
    return problems


def _expand(tag: str) -> list[str]:
    return [str(t) for t in parse_tag(tag)]


def _released_with_pins(info: ArtifactInfo, artifact: Artifact, component: Component, backend: str,
                        backend_version: Version | None) -> list[str]:
    """A component of a family that declares its pins (jax's plugins): it requires each pinned distribution
    ==V, and it need not name the backend; where it does, it must admit the backend released with it."""
    problems = []
    for pinned in component.pins:
        on = info.requirements_on(pinned)
        if on is None or not pins_exactly(on, Version(artifact.version)):
            problems.append(f"Requires-Dist {pinned}{on or ' (none)'} does not pin {pinned}=={artifact.version}, "
                            "released with it")
    on_backend = info.requirements_on(backend)
    if on_backend is not None and backend_version is not None and not on_backend.contains(backend_version, True):
        problems.append(f"Requires-Dist {backend}{on_backend} excludes the backend {backend_version}")
    return problems


def _frontend_extras(info: ArtifactInfo, artifact: Artifact, released: dict[str, str]) -> list[str]:
    """The frontend's extras that install a plugin of this release admit its version (extras on the backend alone
    may pin an older one on purpose: jax's ``minimum-jaxlib`` and ``ci``)."""
    problems = []
    for text in info.requires_dist:
        requirement = Requirement(text)
        version = released.get(canonicalize_name(requirement.name))
        if version is None or requirement.marker is None or "extra" not in str(requirement.marker):
            continue
        if not requirement.specifier.contains(Version(version), prereleases=True):
            problems.append(f"its extra requirement {requirement} excludes {requirement.name} {version}, released "
                            "with it: that extra cannot be installed")
    return problems


def _pins(info: ArtifactInfo, artifact: Artifact, family: Family, backend_version: Version | None,
          release: ReleaseConfig | None = None) -> list[str]:
    backend = family.backend.distribution
    component = _component(release, artifact.distribution)
    if component is not None and (component.pins or _pinned_by_another(release, component)):
        return _released_with_pins(info, artifact, component, backend, backend_version)
    on_backend = info.requirements_on(backend)
    if artifact.role == "frontend":
        if info.minimum_backend is None:
            return [f"cannot read the minimum {backend} from {family.frontend.version_file} in the archive"]
        if not is_frontend_range(on_backend, info.minimum_backend, info.version):
            return [f"Requires-Dist {backend}{on_backend or ' (none)'} is not exactly "
                    f"{frontend_range(info.minimum_backend, info.version)}"]
    if artifact.role == "plugin" and backend_version is not None:
        spec = family.plugin_for(info.name)
        pinned = spec is not None and spec.pinned
        if on_backend is None:
            return [f"Requires-Dist has no {backend}"]
        if pinned and not pins_exactly(on_backend, backend_version):
            return [f"Requires-Dist {backend}{on_backend} does not pin the backend {backend_version}"]
    if artifact.role in ("plugin", "extension") and backend_version is not None and on_backend is not None:
        if not on_backend.contains(backend_version, prereleases=True):
            return [f"Requires-Dist {backend}{on_backend} excludes the backend {backend_version}"]
    return []


def _component(release: ReleaseConfig | None, distribution: str) -> Component | None:
    if release is None:
        return None
    wanted = canonicalize_name(distribution)
    return next((c for c in release.components if canonicalize_name(c.distribution) == wanted), None)


def _pinned_by_another(release: ReleaseConfig | None, component: Component) -> bool:
    """A component another one pins ==V (jax's pjrt, pinned by its plugin)."""
    return release is not None and any(component.distribution in c.pins for c in release.components)


def verify_file(path: Path, artifact: Artifact | None, family: Family, backend_version: Version | None,
                run_twine: bool = True, release: ReleaseConfig | None = None,
                released: dict[str, str] | None = None, deep: bool = False) -> FileReport:
    """Every check on one file (each failure is one line). The members are checked against RECORD unless the
    manifest says collect checked them in these very bytes (the sha256 just matched), or always with ``deep``."""
    report = FileReport(path.name)
    if artifact is None:
        report.problems.append("not listed in the manifest; remove it or rebuild with `jaxrel release build`")
        return report
    digest = sha256_of(path)
    if digest != artifact.sha256:
        report.problems.append(f"sha256 {digest[:16]}… differs from the manifest's {artifact.sha256[:16]}…; "
                               "the file changed after the build: rebuild the release")
        return report
    report.checked.append("sha256")
    try:
        if path.name.endswith(".whl") and (deep or artifact.members_checked is None):
            report.checked.append(f"RECORD ({verify_record(path)} members)")
        elif path.name.endswith(".whl"):
            with zipfile.ZipFile(path) as archive:
                members = len(archive.infolist())
            if members != artifact.members_checked:
                report.problems.append(f"the manifest says collect checked {artifact.members_checked} members, the "
                                       f"wheel has {members}: the manifest was not written for this file; collect "
                                       "the release again")
                return report
            report.checked.append(f"RECORD ({members} members, by collect)")
        info = inspect(path, family, sha256=digest, use_cache=False)
    except (WheelError, zipfile.BadZipFile, OSError, EOFError) as error:
        report.problems.append(str(error).removeprefix(f"{path}: "))
        return report
    try:
        problems = filename_problems(path, info)
    except FilenameError as error:
        report.problems.append(str(error))
        return report
    if canonicalize_name(info.name) != canonicalize_name(artifact.distribution) or Version(
            info.version) != Version(artifact.version):
        problems.append(f"METADATA says {info.name} {info.version}, the manifest {artifact.distribution} "
                        f"{artifact.version}")
    report.checked.append("filename")
    problems += _pins(info, artifact, family, backend_version, release)
    if artifact.role == "frontend" and released:
        problems += _frontend_extras(info, artifact, released)
    report.checked.append("pins")
    report.problems += problems
    if run_twine:
        _add_twine(report, twine_check(path))
    return report


def _add_twine(report: FileReport, complaint: str | None) -> None:
    if complaint and complaint.startswith("warning: "):
        report.warnings.append(complaint.removeprefix("warning: "))
    elif complaint:
        report.problems.append(complaint)
    report.checked.append("twine check --strict")


def verify_dist(directory: Path, family: Family, run_twine: bool = True,
                release: ReleaseConfig | None = None, deep: bool = False) -> Verification:
    """Verify every artifact in ``directory`` against its manifest and the policy (``deep``: every wheel's
    members against RECORD, also where collect checked them).

    A manifest that is missing or cannot be read raises
    :class:`~jaxrel.release.manifest.ManifestError` (bad input, exit 2): nothing to check the files against.
    """
    manifest = read(directory)
    listed = {a.file: a for a in manifest.artifacts}
    present = sorted(p for p in directory.iterdir() if p.name.endswith(ARTIFACT_SUFFIXES))
    for path in present:  # a FIFO would block the first read, a directory fail half-way: nothing is read first
        if (kind := localfiles.not_regular(path)) is not None:
            raise ManifestError(f"{path}: {kind}, not a release file; remove it (a release folder holds what "
                                "`jaxrel release build` wrote)")
    backend = next((a for a in manifest.artifacts if a.role == "backend"), None)
    backend_version = Version(backend.version) if backend else None
    released = {str(canonicalize_name(a.distribution)): a.version for a in manifest.artifacts if a.role == "plugin"}
    with ThreadPoolExecutor(1) as background:  # twine's share of the work beside the files' own checks
        twine = background.submit(twine_check_many, present if run_twine else [])
        with ThreadPoolExecutor(workers()) as pool:  # inflating and hashing leave the GIL
            files = list(pool.map(lambda path: verify_file(path, listed.get(path.name), family, backend_version,
                                                           False, release, released, deep), present))
        for path, report in zip(present, files, strict=True):
            if run_twine and "pins" in report.checked:  # the file reached the end of its own checks
                _add_twine(report, twine.result()[path])
    problems = [f"{name}: listed in the manifest but missing from {directory}; rebuild the release"
                for name in sorted(set(listed) - {p.name for p in present})]
    attested, orphans = attest.check(directory, {p.name: listed[p.name].sha256 if p.name in listed else None
                                                 for p in present})
    for report in files:
        report.problems += attested.get(report.file, [])
        if report.file in attested or not attest.path_for(directory / report.file).exists():
            continue
        report.checked.append("attestation")
    problems += orphans
    if backend is not None:
        frontends = [a for a in manifest.artifacts if a.role == "frontend"]
        if not any(Version(a.version) == Version(backend.version) for a in frontends):
            problems.append(f"{backend.distribution} {backend.version} is released without "
                            f"{family.frontend.distribution} {backend.version}; a backend release needs the "
                            "frontend at the same version")
    return Verification(manifest, files, problems)


def render(result: Verification, directory: Path) -> str:
    lines = [f"release verify {directory} ({result.manifest.family} {result.manifest.version})"]
    for report in result.files:
        status = "ok  " if report.ok else "FAIL"
        lines.append(f"  {status}  {report.file}" + (f"  ({', '.join(report.checked)})" if report.ok else ""))
        lines += [f"        {problem}" for problem in report.problems]
        lines += [f"        warning: {warning}" for warning in report.warnings]
    lines += [f"  FAIL  {problem}" for problem in result.release_problems]
    bad = len(result.problems())
    lines.append(f"{len(result.files)} files: " + ("all verified" if result.ok else f"{bad} problem(s)"))
    return "\n".join(lines)
