"""What the history store learned of each library's Crater runs: the time and peak memory of its last passing test
run (the cell ``downstream-pyX.Y-NAME``, kept by :mod:`jaxrel.history.downstream_reports`), from which the next
Crater sets its budget and schedules by memory."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from jaxrel.history.store import CELL_TEST, Store

__all__ = ["LibraryCost", "library_costs"]


@dataclass(frozen=True)
class LibraryCost:
    """One library's last passing Crater run."""

    seconds: float
    peak_bytes: int | None
    night: str


def library_costs(store: Store, python: str, names: Iterable[str]) -> dict[str, LibraryCost]:
    """Each of ``names`` (canonical) with a passing Crater run on Python ``python`` in ``store``: its last one's."""
    cells = {f"downstream-py{python}-{name}": name for name in names}
    if not cells:
        return {}
    marks = ", ".join("?" for _ in cells)
    rows = store.rows(
        "SELECT combos.cell, runs.night, results.duration, results.peak_bytes FROM results "
        "JOIN runs ON runs.id = results.run JOIN combos ON combos.id = results.combo "
        f"WHERE combos.cell IN ({marks}) AND results.test = ? AND results.outcome = 'passed' "
        "AND results.duration IS NOT NULL ORDER BY runs.night, runs.id", (*cells, CELL_TEST))
    found: dict[str, LibraryCost] = {}
    for cell, night, seconds, peak in rows:  # the last (newest night, then newest run) wins
        found[cells[cell]] = LibraryCost(float(seconds), int(peak) if peak is not None else None, str(night))
    return found
