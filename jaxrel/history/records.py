"""What the history keeps of a report, as typed values: the artifacts of a cell, its tests, the cells of a run, and
what bisect named (read by :mod:`jaxrel.history.reports` and :mod:`jaxrel.history.downstream_reports`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from jaxrel.history.store import HistoryError

__all__ = ["Artifact", "BisectRecord", "CellRecord", "ReportRecord", "TestRecord", "need", "short_text"]


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
    peak_bytes: int | None = None  # the run's peak memory, where it was measured (a Crater's library)


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
    minimum_backend: str = ""  # the frontend's minimum backend that night ("" unknown)


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


def need(condition: bool, path: Path, where: str, expected: str) -> None:
    """A field of a report as expected, else one :class:`HistoryError` line naming the file and the field."""
    if not condition:
        raise HistoryError(f"{path}: {where} should be {expected}; not a report jaxrel wrote, or a damaged one: "
                           "ingest compat's report.json, bisect's bisect.json, atlas.json, device.json or downstream's "
                           "crater.json and minimum.json as written")


def short_text(value: object, path: Path, where: str) -> str:
    need(isinstance(value, str) and 0 < len(value) <= 500 and value.isprintable(), path, where, "a short string")
    return str(value)
