"""What a wheel (or sdist) declares, read from the archive without installing it.

From a wheel: METADATA (name, version, ``Requires-Dist``, ``Requires-Python``), the
WHEEL tags, and — for the family's packages — the backend's API numbers, the XLA FFI
API version of its ``c_api.h`` and the frontend's declared minimum backend. A wheel's
RECORD is checked against every member read (a tampered member is refused, named).
Results are cached by the file's sha256, so each release is inspected once.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import zipfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.metadata import Metadata
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from jaxrel._util.atomic import write_bytes_atomically
from jaxrel._util.files import cache_root, sha256_of
from jaxrel._util.literals import assigned_int, assigned_string, checked_version, ffi_api_in
from jaxrel.distributions.archives import MIB, Archive, WheelError, first_line, verify_record
from jaxrel.family import Family

__all__ = ["SCHEMA", "ArtifactInfo", "WheelError", "inspect", "verify_record", "write_wheel"]

_TAG_PART = re.compile(r"[A-Za-z0-9_.]+")
SCHEMA = 2  # bump when ArtifactInfo gains fields or the checks change, so stale cache entries are re-read


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


@dataclass(frozen=True)
class _Declared:
    """The METADATA / PKG-INFO fields jaxrel uses, each checked by packaging."""

    name: str
    version: str
    requires_dist: list[str]
    requires_python: str | None


def _metadata(archive: Archive) -> _Declared:
    if archive.is_wheel:
        infos = sorted({n.split("/", 1)[0] for n in archive.names if n.split("/", 1)[0].endswith(".dist-info")})
        if len(infos) > 1:  # installers pick one of them, each its own way
            raise WheelError(f"{archive.path}: {len(infos)} .dist-info directories ({', '.join(infos[:3])}); a wheel "
                             "has one: rebuild it")
    member = (next((n for n in archive.names if n.endswith(".dist-info/METADATA") and n.count("/") == 1), None)
              if archive.is_wheel else ("PKG-INFO" if "PKG-INFO" in archive.names else None))
    if member is None:
        raise WheelError(f"{archive.path}: no {'METADATA' if archive.is_wheel else 'PKG-INFO'}; not a valid archive")
    raw = archive.read(member)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise WheelError(f"{archive.path}: {member} is not UTF-8 (byte {error.start}); core metadata is UTF-8: "
                         "rebuild the archive") from None
    try:  # not validate=True: that refuses fields newer than the file's Metadata-Version, which real wheels carry
        metadata = Metadata.from_email(raw, validate=False)
    except (ExceptionGroup, ValueError, TypeError) as error:
        raise WheelError(f"{archive.path}: {member} cannot be read ({_metadata_problem(error)}); rebuild the "
                         "archive") from None

    def field(name: str) -> Any:
        try:
            return getattr(metadata, name)
        except (ExceptionGroup, ValueError, TypeError) as error:  # InvalidMetadata is a ValueError
            raise WheelError(f"{archive.path}: {member} field {name.replace('_', '-').title()}: "
                             f"{_metadata_problem(error)}; fix the project's metadata and rebuild") from None

    name, version = field("name"), field("version")
    requires = [str(r) for r in field("requires_dist") or []]
    python = field("requires_python")
    return _Declared(str(name), str(version), requires, str(python) if python else None)


def _metadata_problem(error: BaseException) -> str:
    """packaging's InvalidMetadata, ValueError or ExceptionGroup of them as one short clause."""
    if isinstance(error, BaseExceptionGroup):
        inner = list(error.exceptions)
        first = _metadata_problem(inner[0]) if inner else first_line(error)
        return first + (f" (and {len(inner) - 1} more)" if len(inner) > 1 else "")
    return first_line(error)


def _tags(archive: Archive) -> list[str]:
    name = next((n for n in archive.names if n.endswith(".dist-info/WHEEL") and n.count("/") == 1), None)
    if name is None:
        raise WheelError(f"{archive.path}: no .dist-info/WHEEL; not a valid wheel")
    tags = [line.split(":", 1)[1].strip() for line in archive.decoded(name).splitlines() if line.startswith("Tag:")]
    for tag in tags:
        parts = tag.split("-")
        if len(parts) != 3 or not all(_TAG_PART.fullmatch(p) for part in parts for p in part.split(".")):
            raise WheelError(f"{archive.path}: WHEEL Tag {tag[:60]!r} should be <python>-<abi>-<platform> "
                             "(letters, digits, _ and .); the wheel is damaged: rebuild it")
    return tags


def inspect(path: Path, family: Family, *, sha256: str | None = None, use_cache: bool = True) -> ArtifactInfo:
    """Read what ``path`` declares; cached under the file's sha256 (computed when not given)."""
    digest = sha256 or sha256_of(path)
    cached = cache_root() / "inspect" / f"{digest}-{family.name}-{SCHEMA}.json"
    if use_cache and cached.is_file():
        try:
            known = _cached_info(json.loads(cached.read_bytes()[: 64 * MIB]))
            if known is not None and known.sha256 == digest:
                return known
        except (OSError, ValueError, TypeError, RecursionError):
            pass  # a cache is never trusted: a corrupt entry is a miss, rewritten below
    archive = Archive(path)
    try:
        info = _read(archive, family, digest)
    finally:
        archive.close()
    cached.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomically(cached, json.dumps(asdict(info)).encode())
    return info


_INFO_TYPES: dict[str, Any] = {
    "filename": str, "sha256": str, "name": str, "version": str, "kind": str, "tags": list, "requires_dist": list,
    "requires_python": (str, type(None)), "api_numbers": dict, "xla_ffi_api": (str, type(None)),
    "minimum_backend": (str, type(None)),
}


def _cached_info(record: object) -> ArtifactInfo | None:
    """An :class:`ArtifactInfo` from jaxrel's cache when every field has its type (else ``None``: a miss)."""
    if not isinstance(record, dict) or set(record) != set(_INFO_TYPES):
        return None
    if not all(isinstance(record[key], kind) for key, kind in _INFO_TYPES.items()):
        return None
    if not all(isinstance(x, str) for x in [*record["tags"], *record["requires_dist"]]) or not all(
            isinstance(k, str) and (v is None or (isinstance(v, int) and not isinstance(v, bool)))
            for k, v in record["api_numbers"].items()):
        return None
    try:
        for text in record["requires_dist"]:
            Requirement(text)
    except ValueError:
        return None
    return ArtifactInfo(**record)


def _read(archive: Archive, family: Family, digest: str) -> ArtifactInfo:
    metadata = _metadata(archive)
    if not metadata.name or not metadata.version:
        missing = "Name" if not metadata.name else "Version"
        raise WheelError(f"{archive.path}: its metadata has no {missing}; not a valid distribution")
    name = canonicalize_name(metadata.name)
    requires = metadata.requires_dist

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
        declared = assigned_string(text, (variable,)) if text and variable else None
        minimum = checked_version(declared, f"{archive.path.name}: {family.frontend.version_file}",
                                  str(variable)) or family.frontend.minimum_backend
    return ArtifactInfo(
        filename=archive.path.name, sha256=digest, name=str(name), version=str(metadata.version),
        kind="wheel" if archive.is_wheel else "sdist", tags=_tags(archive) if archive.is_wheel else [],
        requires_dist=requires,
        requires_python=metadata.requires_python,
        api_numbers=api_numbers, xla_ffi_api=ffi_api, minimum_backend=minimum,
    )


def write_wheel(out: Path, name: str, version: str, files: dict[str, bytes], requires: Sequence[str] = ()) -> Path:
    """Write a pure-Python wheel (``py3-none-any``) of ``files`` (archive path → bytes) into a fresh ``out``.

    METADATA (with ``requires`` as ``Requires-Dist``, and the extras their markers name), WHEEL and
    RECORD are generated; entries are sorted and dated 1980 so equal inputs give equal bytes.
    """
    stem = f"{name.replace('-', '_')}-{version}"
    dist_info = f"{stem}.dist-info"
    members = dict(files)
    extras = sorted({extra for text in requires for extra in re.findall(r'extra\s*==\s*"([^"]+)"', text)})
    members[f"{dist_info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                        + "".join(f"Requires-Dist: {text}\n" for text in requires)
                                        + "".join(f"Provides-Extra: {extra}\n" for extra in extras)).encode()
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
