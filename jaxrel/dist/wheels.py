"""What a wheel (or sdist) declares, read from the archive without installing it.

From a wheel: METADATA (name, version, ``Requires-Dist``, ``Requires-Python``), the
WHEEL tags, and — for the family's packages — the backend's API numbers, the XLA FFI
API version of its ``c_api.h`` and the frontend's declared minimum backend. A wheel's
RECORD is checked against every member read (a tampered member is refused, named).
Results are cached by the file's sha256, so each release is inspected once.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import shutil
import tarfile
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.metadata import Metadata
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from jaxrel._util.atomic import write_bytes_atomically
from jaxrel._util.files import cache_root, sha256_of
from jaxrel._util.literals import assigned_int, assigned_string, ffi_api_in
from jaxrel.errors import BadInput
from jaxrel.family import Family

SCHEMA = 1  # bump when ArtifactInfo gains fields, so stale cache entries are re-read


class WheelError(BadInput):
    """An archive that is not a valid wheel/sdist, or whose contents do not match its RECORD."""


@dataclass(frozen=True)
class ArtifactInfo:
    """What one wheel or sdist declares."""

    filename: str
    sha256: str
    name: str
    version: str
    kind: str  # "wheel" | "sdist"
    tags: list[str] = field(default_factory=list)
    requires_dist: list[str] = field(default_factory=list)
    requires_python: str | None = None
    api_numbers: dict[str, int | None] = field(default_factory=dict)
    xla_ffi_api: str | None = None
    minimum_backend: str | None = None

    def requirements_on(self, distribution: str) -> SpecifierSet | None:
        """The combined specifier of unconditional ``Requires-Dist`` entries on ``distribution``."""
        wanted = canonicalize_name(distribution)
        found = None
        for text in self.requires_dist:
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) == wanted and not _conditional(requirement):
                found = (found or SpecifierSet()) & requirement.specifier
        return found

    def plain_requirements(self, excluding: set[str]) -> list[str]:
        """Unconditional requirements (markers allowed, extras not) on distributions outside ``excluding``."""
        out = []
        for text in self.requires_dist:
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) not in excluding and not _conditional(requirement):
                out.append(text)
        return out


def _conditional(requirement: Requirement) -> bool:
    return requirement.marker is not None and "extra" in str(requirement.marker)


class _Archive:
    """Uniform member access to a wheel (zip) or an sdist (tar.gz, one top-level directory)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.is_wheel = path.name.endswith(".whl")
        try:
            if self.is_wheel:
                self.zip = zipfile.ZipFile(path)
                self.names = self.zip.namelist()
            else:
                self.tar = tarfile.open(path)
                self.members = {m.name.split("/", 1)[-1]: m for m in self.tar.getmembers() if m.isfile()}
                self.names = list(self.members)
        except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError, zlib.error, ValueError) as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise WheelError(f"{path}: not a readable {'wheel' if self.is_wheel else 'sdist'} ({first}); "
                             "delete it and download again") from None
        self.record = self._record() if self.is_wheel else {}

    def _record(self) -> dict[str, str]:
        record_name = next((n for n in self.names if n.endswith(".dist-info/RECORD") and n.count("/") == 1), None)
        if record_name is None:
            raise WheelError(f"{self.path}: no .dist-info/RECORD; not a valid wheel")
        rows = csv.reader(io.StringIO(self.zip.read(record_name).decode("utf-8")))
        return {row[0]: row[1] for row in rows if len(row) >= 2 and row[1]}

    def read(self, name: str) -> bytes:
        if not self.is_wheel:
            handle = self.tar.extractfile(self.members[name])
            return handle.read() if handle else b""
        data = self.zip.read(name)
        expected = self.record.get(name)
        if expected is None and not name.endswith("/RECORD"):
            raise WheelError(f"{self.path}: member {name} is not listed in RECORD; the wheel was altered")
        if expected:
            algorithm, _, digest = expected.partition("=")
            actual = base64.urlsafe_b64encode(hashlib.new(algorithm, data).digest()).rstrip(b"=").decode()
            if actual != digest:
                raise WheelError(f"{self.path}: member {name} does not match its RECORD hash; the wheel was "
                                 "altered or is corrupt: delete it and download again")
        return data

    def text(self, name: str) -> str | None:
        return self.read(name).decode("utf-8", "replace") if name in self.names else None

    def find(self, suffix: str) -> str | None:
        return next((n for n in self.names if n == suffix or n.endswith("/" + suffix)), None)

    def close(self) -> None:
        (self.zip if self.is_wheel else self.tar).close()


def verify_record(path: Path) -> int:
    """Check every member of a wheel against its RECORD; returns the number of members checked."""
    archive = _Archive(path)
    try:
        for name in archive.names:
            if not name.endswith("/"):
                archive.read(name)
        return len(archive.names)
    finally:
        archive.close()


def _metadata(archive: _Archive) -> Metadata:
    name = (next((n for n in archive.names if n.endswith(".dist-info/METADATA") and n.count("/") == 1), None)
            if archive.is_wheel else ("PKG-INFO" if "PKG-INFO" in archive.names else None))
    if name is None:
        raise WheelError(f"{archive.path}: no {'METADATA' if archive.is_wheel else 'PKG-INFO'}; not a valid archive")
    try:
        return Metadata.from_email(archive.read(name), validate=False)
    except Exception as error:  # packaging raises ExceptionGroup/ValueError subclasses
        raise WheelError(f"{archive.path}: unreadable {name} ({error})") from None


def _tags(archive: _Archive) -> list[str]:
    name = next((n for n in archive.names if n.endswith(".dist-info/WHEEL") and n.count("/") == 1), None)
    text = archive.read(name).decode("utf-8") if name else ""
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")]


def inspect(path: Path, family: Family, *, sha256: str | None = None, use_cache: bool = True) -> ArtifactInfo:
    """Read what ``path`` declares; cached under the file's sha256 (computed when not given)."""
    digest = sha256 or sha256_of(path)
    cached = cache_root() / "inspect" / f"{digest}-{family.name}-{SCHEMA}.json"
    if use_cache and cached.is_file():
        try:
            return ArtifactInfo(**json.loads(cached.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            pass  # a cache is never trusted: a corrupt entry is a miss, rewritten below
    archive = _Archive(path)
    try:
        info = _read(archive, family, digest)
    finally:
        archive.close()
    cached.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomically(cached, json.dumps(asdict(info)).encode())
    return info


def _read(archive: _Archive, family: Family, digest: str) -> ArtifactInfo:
    metadata = _metadata(archive)
    if not metadata.name or metadata.version is None:
        missing = "Name" if not metadata.name else "Version"
        raise WheelError(f"{archive.path}: its metadata has no {missing}; not a valid distribution")
    name = canonicalize_name(metadata.name)
    requires = []
    for requirement in metadata.requires_dist or []:
        try:
            requires.append(str(Requirement(str(requirement))))
        except InvalidRequirement as error:
            raise WheelError(f"{archive.path}: invalid Requires-Dist {requirement!r} ({error})") from None

    def member_text(path: str | None) -> str | None:
        member = archive.find(path) if path else None
        return archive.text(member) if member else None

    api_numbers: dict[str, int | None] = {}
    ffi_api = minimum = None
    if name == canonicalize_name(family.backend.distribution):
        for number in family.api_numbers:
            text = member_text(number.file)
            api_numbers[number.name] = assigned_int(text, number.variable) if text else None
        header = member_text(family.backend.ffi_header)
        ffi_api = ffi_api_in(header) if header else None
    variable = family.frontend.minimum_backend_variable
    if name == canonicalize_name(family.frontend.distribution):
        text = member_text(family.frontend.version_file) if variable else None
        minimum = (assigned_string(text, (variable,)) if text and variable else None) or family.frontend.minimum_backend
    return ArtifactInfo(
        filename=archive.path.name, sha256=digest, name=str(name), version=str(metadata.version),
        kind="wheel" if archive.is_wheel else "sdist", tags=_tags(archive) if archive.is_wheel else [],
        requires_dist=requires,
        requires_python=str(metadata.requires_python) if metadata.requires_python else None,
        api_numbers=api_numbers, xla_ffi_api=ffi_api, minimum_backend=minimum,
    )


def write_wheel(out: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """Write a pure-Python wheel (``py3-none-any``) of ``files`` (archive path → bytes) into a fresh ``out``.

    METADATA, WHEEL and RECORD are generated; entries are sorted and dated 1980 so equal
    inputs give equal bytes.
    """
    stem = f"{name.replace('-', '_')}-{version}"
    dist_info = f"{stem}.dist-info"
    members = dict(files)
    members[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    members[f"{dist_info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: jaxrel\nRoot-Is-Purelib: true\n"
                                     b"Tag: py3-none-any\n")

    def digest(data: bytes) -> str:
        raw = hashlib.sha256(data).digest()
        return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    record = [f"{path},{digest(data)},{len(data)}" for path, data in sorted(members.items())]
    members[f"{dist_info}/RECORD"] = ("\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n").encode()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    wheel = out / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in sorted(members.items()):
            info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            archive.writestr(info, data, zipfile.ZIP_DEFLATED)
    return wheel
