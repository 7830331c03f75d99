"""Which sides of each live gate a compat matrix exercises, and which release would cover a missing side.

A cell exercises a gate's side when the cell is expected to run (``accepted``) and its backend
release makes the gate's condition true or false (:func:`jaxrel.gates.judge.evaluate` on that
release's API numbers). Pure: the matrix comes in as its JSON (``jaxrel matrix --format json``,
or the ``matrix`` of a compat ``report.json``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jaxrel import policy
from jaxrel._util.shape import Shape
from jaxrel._util.shape import found as shown
from jaxrel.errors import BadInput
from jaxrel.gates.judge import GateVerdict, Judgement, Releases, evaluate

__all__ = ["Coverage", "cover", "matrix_cells"]


@dataclass(frozen=True)
class Coverage:
    """For one live gate: the cells giving each side, and a release for each side no cell gives."""

    judgement: Judgement
    cells: dict[str, list[str]]  # "true"/"false" -> cell ids
    missing: dict[str, str | None]  # side -> a supported release that gives it (None: none known)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.judgement.gate.file, "line": self.judgement.gate.line, "cells": self.cells,
                "missing": self.missing}

    def describe(self) -> str:
        parts = []
        for side in ("true", "false"):
            if self.cells[side]:
                parts.append(f"{side}: {', '.join(self.cells[side])}")
            else:
                parts.append(f"{side}: not covered; add {self.missing[side] or 'no release gives it'}")
        return "; ".join(parts)


def matrix_cells(matrix: Any, source: str = "the matrix") -> list[tuple[str, str]]:
    """(cell id, backend release) of the cells that run (expected accepted) in a parsed matrix JSON
    (``jaxrel matrix --format json``, or a compat ``report.json`` holding it under ``matrix``); every
    cell's fields are checked (:class:`~jaxrel.errors.BadInput` naming ``source`` and the cell)."""
    shape = Shape(source)
    body = matrix.get("matrix", matrix) if isinstance(matrix, dict) else matrix  # report.json: under "matrix"
    cells = shape.array(shape.table(body, "matrix").get("cells"), "cells")
    if not cells:
        raise BadInput(f"{source}: the matrix has no cells; write one with jaxrel matrix --format json")
    found = []
    for index, cell in enumerate(cells):
        where = f"cells[{index}]"
        row = shape.table(cell, where)
        cell_id, backend = shape.string(row, "id", where), shape.string(row, "backend", where)
        try:
            policy.parse_version(backend, "backend")
        except policy.VersionError:
            raise shape.error(where, f"'backend' must be a backend version (e.g. \"0.12.0\"), not {shown(backend)}") \
                from None
        expected = shape.field(row, "expected", where, lambda v: v is None or isinstance(v, str), "a string", None)
        if expected == "accepted":
            found.append((cell_id, backend))
    return found


def cover(judgements: Sequence[Judgement], releases: Releases, cells: Sequence[tuple[str, str]]) -> list[Coverage]:
    """Coverage of every live gate by ``cells``."""
    found = []
    for judgement in judgements:
        if judgement.verdict != GateVerdict.LIVE:
            continue
        gate = judgement.gate
        by_side: dict[str, list[str]] = {"true": [], "false": []}
        for cell_id, backend in cells:
            values = releases.numbers.get(backend)
            outcome = evaluate(gate.condition, gate.comparisons, values) if values else None
            if outcome is not None:
                by_side["true" if outcome else "false"].append(cell_id)
        missing = {side: (judgement.sides[side][-1] if judgement.sides[side] else None)
                   for side in ("true", "false") if not by_side[side]}
        found.append(Coverage(judgement, by_side, missing))
    return found
