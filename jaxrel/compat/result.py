"""What one compat cell observed (:class:`CellResult`): the value the cell runner fills in and the report, the
checkpoints and the history read."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from jaxrel.cells.matrix import Cell, Outcome
from jaxrel.cells.suites import TestCounts
from jaxrel.compat.triage import Failure

__all__ = ["CellResult"]


@dataclass
class CellResult:
    """What one cell observed, and whether that is what the policy expected."""

    cell: Cell
    observed: Outcome
    ok: bool
    seconds: float
    guard_message: str | None = None
    guard_fix: str | None = None
    frontend_import: dict[str, Any] | None = None
    import_error: str | None = None
    import_output: str | None = None  # what importing the frontend printed on stderr (a plugin's traceback)
    tests: TestCounts = field(default_factory=TestCounts)
    outcomes: dict[str, str] = field(default_factory=dict)  # compat suite: node id -> passed, failed, skipped: why
    frontend_tests: TestCounts | None = None
    frontend_files: list[str] = field(default_factory=list)  # where the own tests imported the frontend from
    failures: list[Failure] = field(default_factory=list)  # every failed test, sorted by the triage
    extension: str | None = None  # the extension wheels installed in the cell, or why none were
    own_tests_not_run: str | None = None  # why a positive cell did not run the frontend's own tests
    cpu_suite_in: str | None = None  # a plugin cell without its device: the plain cell that ran the CPU suite
    plugin_install: str | None = None  # how a plugin cell installed its plugins (full, light or local), and why
    backend_api: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # what failed the cell besides its failed tests
    notes: list[str] = field(default_factory=list)  # what the compat suite noted without failing (a due removal)
    wheels: dict[str, str] = field(default_factory=dict)  # every family wheel installed (file name -> sha256)
    environment: str | None = None  # the cell's environment directory
    # environment, probes, compat suite, own tests, triage; and parts of probes: interpreter start, guard, import jax
    timings: dict[str, float] = field(default_factory=dict)

    def settle(self) -> None:
        """``ok``: no problem and no failure that fails the run (see :data:`jaxrel.compat.triage.FATAL`)."""
        self.ok = not self.problems and not any(failure.fatal for failure in self.failures)

    def verdicts(self) -> dict[str, int]:
        """How many failures got each verdict."""
        counts: dict[str, int] = {}
        for failure in self.failures:
            counts[failure.verdict] = counts.get(failure.verdict, 0) + 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "cell": asdict(self.cell)}
