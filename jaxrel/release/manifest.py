"""The release manifest: ``dist/manifest.json`` names every artifact, its version and sha256.

Written by ``release build`` and ``release collect``. ``verify`` and ``publish`` re-hash every file
against it and refuse a file it does not list. What they take from it beyond the hashes: collect's
count of the members it checked against RECORD in the file with exactly that sha256 (``members_checked``),
so verify need not inflate the same bytes again (``verify --deep`` does).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from jaxrel import policy
from jaxrel._util import localfiles
from jaxrel._util.atomic import write_bytes_atomically
from jaxrel._util.files import sha256_of
from jaxrel._util.shape import Shape, found
from jaxrel.errors import BadInput

__all__ = ["Artifact", "Manifest", "ManifestError", "NAME", "SCHEMA", "parse", "read"]

NAME = "manifest.json"
SCHEMA = 1


class ManifestError(BadInput):
    """A missing or malformed manifest."""


@dataclass(frozen=True)
class Artifact:
    """One built file."""

    file: str
    distribution: str
    version: str
    role: str
    kind: str  # "wheel" | "sdist"
    sha256: str
    size: int
    members_checked: int | None = None  # collect checked this many members of these bytes against RECORD

    def __post_init__(self) -> None:
        texts = {"file": self.file, "distribution": self.distribution, "version": self.version, "role": self.role,
                 "kind": self.kind, "sha256": self.sha256}
        wrong = [key for key, value in texts.items() if not isinstance(value, str) or not value]
        if wrong:
            raise ManifestError(f"artifact {self.file!r}: {wrong[0]} must be a non-empty string")
        if len(self.sha256) != 64 or any(c not in "0123456789abcdef" for c in self.sha256):
            raise ManifestError(f"artifact {self.file!r}: sha256 {self.sha256[:70]!r} is not 64 hex digits")
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 0:
            raise ManifestError(f"artifact {self.file!r}: size must be a non-negative integer")
        if self.members_checked is not None and (not isinstance(self.members_checked, int) or isinstance(
                self.members_checked, bool) or self.members_checked < 0):
            raise ManifestError(f"artifact {self.file!r}: members_checked must be a non-negative integer")
        if "/" in self.file or "\\" in self.file or self.file.startswith("."):
            raise ManifestError(f"artifact {self.file!r}: a file name, not a path, is expected")

    @classmethod
    def of(cls, path: Path, distribution: str, version: str, role: str) -> Artifact:
        kind = "wheel" if path.name.endswith(".whl") else "sdist"
        return cls(path.name, distribution, version, role, kind, sha256_of(path), path.stat().st_size)


@dataclass(frozen=True)
class Manifest:
    """A release's artifacts in upload order (backend first, frontend last)."""

    family: str
    version: str
    tag: str
    commit: str | None
    artifacts: tuple[Artifact, ...]

    def to_json(self) -> dict[str, Any]:
        artifacts = [{k: v for k, v in asdict(a).items() if k != "members_checked" or v is not None}
                     for a in self.artifacts]
        return {"schema": SCHEMA, **asdict(self), "artifacts": artifacts}

    def write(self, directory: Path) -> Path:
        path = directory / NAME
        write_bytes_atomically(path, (json.dumps(self.to_json(), indent=2) + "\n").encode())
        return path


_TOP_KEYS = {"schema", "family", "version", "tag", "commit", "artifacts"}
_ARTIFACT_KEYS = {"file", "distribution", "version", "role", "kind", "sha256", "size", "members_checked"}


def _version(shape: Shape, table: dict[str, Any], where: str) -> str:
    text: str = shape.string(table, "version", where)
    try:
        policy.parse_version(text)
    except BadInput:
        raise shape.error(where, f"'version' must be a PEP 440 version, not {found(text)}") from None
    return text


def _artifact(shape: Shape, value: Any, index: int) -> Artifact:
    where = f"artifacts[{index}]"
    row = shape.table(value, where, _ARTIFACT_KEYS)
    texts = {key: shape.string(row, key, where) for key in ("file", "distribution", "role", "sha256")}
    kind = shape.field(row, "kind", where, lambda v: v in ("wheel", "sdist"), "\"wheel\" or \"sdist\"")
    size = shape.integer(row, "size", where)
    members = shape.integer(row, "members_checked", where, None)
    try:
        return Artifact(version=_version(shape, row, where), kind=kind, size=size, members_checked=members, **texts)
    except ManifestError as error:
        raise shape.error(where, str(error)) from None


def parse(data: Any, source: str) -> Manifest:
    """A :class:`Manifest` from parsed JSON, every field checked; :class:`ManifestError` naming ``source``."""
    shape = Shape(source, ManifestError)
    top = shape.table(data, "manifest", _TOP_KEYS)
    schema = top.get("schema")
    if schema != SCHEMA or isinstance(schema, bool):
        raise shape.error("manifest", f"schema {found(schema)}, expected {SCHEMA}")
    commit = shape.field(top, "commit", "manifest", lambda v: v is None or isinstance(v, str) and v.isalnum(),
                         "a git commit or null", None)
    artifacts = tuple(_artifact(shape, item, index) for index, item in enumerate(shape.array(
        top.get("artifacts"), "manifest.artifacts")))
    return Manifest(shape.string(top, "family", "manifest"), _version(shape, top, "manifest"),
                    shape.string(top, "tag", "manifest"), commit, artifacts)


def read(directory: Path) -> Manifest:
    """The manifest in ``directory``; one-line errors name the file and the fix."""
    path = directory / NAME
    if not path.exists():
        raise ManifestError(f"{path}: no manifest; build the release with `jaxrel release build --output {directory}`")
    rebuild = "rebuild with `jaxrel release build`"
    try:
        return parse(localfiles.load_json(path), str(path))
    except BadInput as error:
        raise ManifestError(f"{error}; {rebuild}") from None
