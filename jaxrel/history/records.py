"""What the history keeps of a report, as typed values: the artifacts of a cell, its tests, the cells of a run, and
what bisect named (read by :mod:`jaxrel.history.reports` and :mod:`jaxrel.history.downstream_reports`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

__all__ = ["Artifact", "BisectRecord", "CellRecord", "ReportRecord", "TestRecord"]


@dataclass(frozen=True)
class Artifact:
    name: str
    version: str
    commit: str = ""
    sha256: str = ""


@dataclass(frozen=True)
class TestRecord:
    test: str
    outcome: str  # passed | failed | skipped | infra | flaky | refused (the guard refused the set, as expected)
    duration: float | None = None
    signature: str = ""
    suite: str = ""  # one of SUITES


@dataclass
class CellRecord:
    cell: str
    python: str
    platform: str
    device: str
    artifacts: list[tuple[str, Artifact]]  # (role, artifact): frontend, backend, plugin
    tests: list[TestRecord] = field(default_factory=list)

    def digest(self) -> str:
        """The combo's key: every artifact (with its wheel's sha256), the Python, platform and device."""
        parts = sorted(f"{role}:{a.name}=={a.version}@{a.commit}#{a.sha256}" for role, a in self.artifacts)
        text = "\n".join([*parts, self.python, self.platform, self.device])
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class ReportRecord:
    sha256: str
    frontend: Artifact
    cells: list[CellRecord]
    kind: str = "compat"  # compat | atlas | device: what wrote it


@dataclass(frozen=True)
class BisectRecord:
    """What ``jaxrel bisect`` named for a cell: the range it searched and the first bad commit, if it converged."""

    sha256: str
    cell: str
    last_good: str
    first_bad: str
    culprit: str | None
    log: str
    tests: tuple[str, ...] = ()  # the selection bisected
    version_only: bool = False  # the culprit changes only the family's version files
