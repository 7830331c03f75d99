"""``jaxrel downstream``'s reports read once into the history's records: a Crater (``crater.json``) is one cell a
library (``downstream-py3.12-optax``: the HUD pages libraries × nights), its outcome the cell's, each new failure a
test; a minimum (``minimum.json``) is one cell a (frontend, backend) pair the library was tested with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jaxrel.cells.records import signature
from jaxrel.history.records import Artifact, CellRecord, ReportRecord, TestRecord, need, short_text
from jaxrel.history.store import CELL_TEST, OWN_TESTS

__all__ = ["CRATER_STATES", "read_downstream"]

# a library's Crater outcome as a cell's: a regression is the red the HUD shows; spurious is infra, not a failure
CRATER_STATES = {"test-pass": "passed", "fixed": "passed", "regressed": "failed", "test-fail": "failed",
                 "broken": "failed", "spurious": "infra"}
MINIMUM_STATES = {"passed": "passed", "failed": "failed", "not-installable": "skipped", "infra": "infra"}


def _list(value: object, path: Path, where: str) -> list[Any]:
    need(isinstance(value, list), path, where, "a list")
    assert isinstance(value, list)
    return value


def _cost(side: object) -> tuple[float | None, int | None]:
    """A Crater side's test run: its seconds and peak memory in bytes (``None`` where not measured or malformed)."""
    if not isinstance(side, dict):
        return None, None
    timings = side.get("seconds")
    seconds = timings.get("tests") if isinstance(timings, dict) else None
    peak = side.get("peak_memory_bytes")
    return (float(seconds) if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds >= 0
            else None,
            int(peak) if isinstance(peak, int) and not isinstance(peak, bool) and peak >= 0 else None)


def read_downstream(data: dict[str, Any], path: Path, sha256: str) -> ReportRecord:
    """The report as a :class:`~jaxrel.history.reports.ReportRecord` of kind ``downstream``."""
    python = short_text(data.get("python"), path, "python")
    cells: list[CellRecord] = []
    if data.get("kind") == "downstream-crater":
        frontend = Artifact("jax" if "jax" in str(data.get("frontend", "")) else "frontend",
                            short_text(data.get("baseline"), path, "baseline"),
                            str(data.get("frontend_commit", ""))[:64])
        for i, item in enumerate(_list(data.get("libraries"), path, "libraries")):
            where = f"libraries[{i}]"
            need(isinstance(item, dict), path, where, "an object")
            name, outcome = short_text(item.get("name"), path, f"{where}.name"), item.get("outcome")
            need(outcome in CRATER_STATES, path, f"{where}.outcome", f"one of {', '.join(CRATER_STATES)}")
            record = CellRecord(f"downstream-py{python}-{name}", python, "any", "cpu",
                                [("frontend", frontend), ("library", Artifact(name, str(item.get("version", ""))))])
            reason = str(item.get("reason", ""))
            seconds, peak = _cost(item.get("candidate"))
            tests = [TestRecord(CELL_TEST, CRATER_STATES[outcome], seconds,
                                signature(reason) if CRATER_STATES[outcome] != "passed" else "", peak_bytes=peak)]
            if outcome == "regressed":
                tests += [TestRecord(str(test)[:500], "failed", None, str(item.get("signature", ""))[:200], OWN_TESTS)
                          for test in _list(item.get("failing", []), path, f"{where}.failing")]
            record.tests = tests
            cells.append(record)
        return ReportRecord(sha256, frontend, cells, "downstream")
    library = short_text(data.get("library"), path, "library")
    version = short_text(data.get("version"), path, "version")
    for i, item in enumerate(_list(data.get("cells"), path, "cells")):
        where = f"cells[{i}]"
        need(isinstance(item, dict) and item.get("outcome") in MINIMUM_STATES, path, where,
             f"a cell with an outcome ({', '.join(MINIMUM_STATES)})")
        jax, jaxlib = (short_text(item.get(k), path, f"{where}.{k}") for k in ("jax", "jaxlib"))
        record = CellRecord(f"downstream-py{python}-{library}{version}-jax{jax.split()[0]}-jaxlib{jaxlib}", python,
                            "any", "cpu", [("frontend", Artifact("jax", jax.split()[0])),
                                           ("backend", Artifact("jaxlib", jaxlib)),
                                           ("library", Artifact(library, version))])
        record.tests = [TestRecord(CELL_TEST, MINIMUM_STATES[item["outcome"]], None,
                                   signature(str(item.get("first_error", ""))))]
        cells.append(record)
    return ReportRecord(sha256, Artifact(library, version), cells, "downstream")
