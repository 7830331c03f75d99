"""The release manifest: ``dist/manifest.json`` names every artifact, its version and sha256.

Written by ``release build``, trusted by nothing: ``verify`` and ``publish`` re-hash every
file against it, and refuse a file it does not list.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from jaxrel._util.atomic import write_bytes_atomically
from jaxrel._util.files import sha256_of
from jaxrel.errors import BadInput

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
        return {"schema": SCHEMA, **asdict(self), "artifacts": [asdict(a) for a in self.artifacts]}

    def write(self, directory: Path) -> Path:
        path = directory / NAME
        write_bytes_atomically(path, (json.dumps(self.to_json(), indent=2) + "\n").encode())
        return path


def read(directory: Path) -> Manifest:
    """The manifest in ``directory``; one-line errors name the file and the fix."""
    path = directory / NAME
    if not path.is_file():
        raise ManifestError(f"{path}: no manifest; build the release with `jaxrel release build --output {directory}`")
    rebuild = "rebuild with `jaxrel release build`"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ManifestError(f"{path}: not JSON ({error}); {rebuild}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ManifestError(f"{path}: manifest schema {found!r}, expected {SCHEMA}; {rebuild}")
    try:
        artifacts = tuple(Artifact(**item) for item in data["artifacts"])
        return Manifest(data["family"], data["version"], data["tag"], data.get("commit"), artifacts)
    except ManifestError as error:
        raise ManifestError(f"{path}: {error}; {rebuild}") from None
    except (KeyError, TypeError) as error:
        raise ManifestError(f"{path}: malformed manifest ({type(error).__name__}: {error}); {rebuild}") from None
