"""``jaxrel downstream``'s reports read once into the history's records: a Crater (``crater.json``) is one cell a
library (``downstream-py3.12-optax``: the HUD pages libraries × nights), its outcome the cell's, each new failure a
test; a minimum (``minimum.json``) is one cell a (frontend, backend) pair the library was tested with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jaxrel.cells.records import signature
from jaxrel.history.records import Artifact, CellRecord, ReportRecord, TestRecord
from jaxrel.history.store import CELL_TEST, OWN_TESTS, HistoryError

__all__ = ["CRATER_STATES", "read_downstream"]

# a library's Crater outcome as a cell's: a regression is the red the HUD shows; spurious is infra, not a failure
CRATER_STATES = {"test-pass": "passed", "fixed": "passed", "regressed": "failed", "test-fail": "failed",
                 "broken": "failed", "spurious": "infra"}
MINIMUM_STATES = {"passed": "passed", "failed": "failed", "not-installable": "skipped", "infra": "infra"}


def _text(value: object, path: Path, where: str) -> str:
    if not (isinstance(value, str) and 0 < len(value) <= 500 and value.isprintable()):
        raise HistoryError(f"{path}: {where} should be a short string; not a report jaxrel downstream wrote, or a "
                           "damaged one")
    return value


def _list(value: object, path: Path, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise HistoryError(f"{path}: {where} should be a list; not a report jaxrel downstream wrote, or a damaged one")
    return value


def read_downstream(data: dict[str, Any], path: Path, sha256: str) -> ReportRecord:
    """The report as a :class:`~jaxrel.history.reports.ReportRecord` of kind ``downstream``."""
    python = _text(data.get("python"), path, "python")
    cells: list[CellRecord] = []
    if data.get("kind") == "downstream-crater":
        frontend = Artifact("jax" if "jax" in str(data.get("frontend", "")) else "frontend",
                            _text(data.get("baseline"), path, "baseline"), str(data.get("frontend_commit", ""))[:64])
        for i, item in enumerate(_list(data.get("libraries"), path, "libraries")):
            where = f"libraries[{i}]"
            if not isinstance(item, dict):
                raise HistoryError(f"{path}: {where} should be an object")
            name, outcome = _text(item.get("name"), path, f"{where}.name"), item.get("outcome")
            if outcome not in CRATER_STATES:
                raise HistoryError(f"{path}: {where}.outcome should be one of {', '.join(CRATER_STATES)}")
            record = CellRecord(f"downstream-py{python}-{name}", python, "any", "cpu",
                                [("frontend", frontend), ("library", Artifact(name, str(item.get("version", ""))))])
            reason = str(item.get("reason", ""))
            tests = [TestRecord(CELL_TEST, CRATER_STATES[outcome], None,
                                signature(reason) if CRATER_STATES[outcome] != "passed" else "")]
            if outcome == "regressed":
                tests += [TestRecord(str(test)[:500], "failed", None, str(item.get("signature", ""))[:200], OWN_TESTS)
                          for test in _list(item.get("failing", []), path, f"{where}.failing")]
            record.tests = tests
            cells.append(record)
        return ReportRecord(sha256, frontend, cells, "downstream")
    library = _text(data.get("library"), path, "library")
    version = _text(data.get("version"), path, "version")
    for i, item in enumerate(_list(data.get("cells"), path, "cells")):
        where = f"cells[{i}]"
        if not isinstance(item, dict) or item.get("outcome") not in MINIMUM_STATES:
            raise HistoryError(f"{path}: {where} should be a cell with an outcome ({', '.join(MINIMUM_STATES)})")
        jax, jaxlib = _text(item.get("jax"), path, f"{where}.jax"), _text(item.get("jaxlib"), path, f"{where}.jaxlib")
        record = CellRecord(f"downstream-py{python}-{library}{version}-jax{jax.split()[0]}-jaxlib{jaxlib}", python,
                            "any", "cpu", [("frontend", Artifact("jax", jax.split()[0])),
                                           ("backend", Artifact("jaxlib", jaxlib)),
                                           ("library", Artifact(library, version))])
        record.tests = [TestRecord(CELL_TEST, MINIMUM_STATES[item["outcome"]], None,
                                   signature(str(item.get("first_error", ""))))]
        cells.append(record)
    return ReportRecord(sha256, Artifact(library, version), cells, "downstream")
