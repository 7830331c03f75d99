"""The compat run's report: a readable table, ``report.json`` and ``report.md``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jaxrel._util import text
from jaxrel._util.atomic import write_all_atomically
from jaxrel.compat.matrix import Matrix
from jaxrel.compat.runner import CellResult

HEADERS = ("cell", "expected", "observed", "passed", "failed", "skipped", "extension", "time", "result")
EXTENSION_TESTS = "test_extension"  # the compat suite's module that exercises the built extension wheel


def headers(results: Sequence[CellResult]) -> tuple[str, ...]:
    """:data:`HEADERS`, plus a column for the frontend's own tests when any cell ran them."""
    own = any(r.frontend_tests for r in results)
    return HEADERS[:-3] + ("own tests",) + HEADERS[-3:] if own else HEADERS


def extension_outcome(result: CellResult) -> str:
    """The extension's tests in one cell: ``4/4 passed``, or ``–`` when the cell did not run them."""
    outcomes = [o for name, o in result.outcomes.items() if EXTENSION_TESTS in name]
    ran = [o for o in outcomes if not o.startswith("skipped")]
    if not result.extension or not ran:
        return "–"
    return f"{sum(o == 'passed' for o in ran)}/{len(ran)} passed"


def rows(results: Sequence[CellResult]) -> list[tuple[str, ...]]:
    """One row per cell, in :func:`headers` order."""
    own = any(r.frontend_tests for r in results)
    out: list[tuple[str, ...]] = []
    for r in results:
        expected = r.cell.expected + (f" ({', '.join(r.cell.rules)})" if r.cell.rules else "")
        row = [r.cell.id, expected, r.observed, str(r.tests.passed), str(r.tests.failed + r.tests.errors),
               str(r.tests.skipped)]
        if own:
            t = r.frontend_tests
            row.append(f"{t.passed} passed, {t.failed + t.errors} failed, {t.skipped} skipped" if t else "–")
        out.append((*row, extension_outcome(r), f"{r.seconds:.1f} s", "ok" if r.ok else "FAILED"))
    return out


def table(results: Sequence[CellResult]) -> str:
    """A plain-text table with aligned columns."""
    return text.table(headers(results), rows(results))


def summary(results: Sequence[CellResult]) -> str:
    failed = [r.cell.id for r in results if not r.ok]
    positive = sum(1 for r in results if not r.cell.negative)
    cells = f"{len(results)} cell{'s' if len(results) != 1 else ''}"
    head = (f"{cells} ({positive} positive, {len(results) - positive} negative): "
            f"{len(results) - len(failed)} as expected")
    head += f", {len(failed)} FAILED: {', '.join(failed)}" if failed else ""
    wheels = sorted({r.extension for r in results if r.extension})
    return head + "".join(f"\nextension: {wheel}" for wheel in wheels)


def to_json(matrix: Matrix, results: Sequence[CellResult]) -> dict[str, Any]:
    return {
        "matrix": matrix.to_json(),
        "ok": all(r.ok for r in results),
        "summary": summary(results),
        "cells": [r.to_json() for r in results],
    }


def markdown(matrix: Matrix, results: Sequence[CellResult]) -> str:
    """The table, the notes, each refusal's message, and which test passed on which cell."""
    lines = [f"# compat: {matrix.frontend.name} {matrix.frontend.version}", "",
             f"Frontend: {matrix.frontend.source}; minimum {matrix.backend} {matrix.frontend.minimum_backend}; "
             f"declared range {matrix.frontend.backend_range or 'none'}.", "", summary(results), "",
             text.markdown_table(headers(results), [(f"`{row[0]}`", *row[1:]) for row in rows(results)])]
    if matrix.notes:
        lines += ["", "Notes:", *(f"- {note}" for note in matrix.notes)]
    refused = [r for r in results if r.guard_message]
    if refused:
        lines += ["", "## Refusals", ""]
        for r in refused:
            real = r.import_error or "; ".join((r.frontend_import or {}).get("warnings", [])) or "imports and computes"
            lines.append(f"- `{r.cell.id}`: {' '.join(str(r.guard_message).split())} — real "
                         f"{matrix.frontend.name} without the guard: {' '.join(real.split())}")
    numbers = [r for r in results if r.backend_api]
    if numbers:
        lines += ["", f"## {matrix.backend} API numbers per cell", ""]
        names = sorted({name for r in numbers for name in r.backend_api})
        lines.append(text.markdown_table(
            ("cell", *names),
            [(f"`{r.cell.id}`", *("–" if r.backend_api.get(n) is None else r.backend_api[n] for n in names))
             for r in numbers]))
    tested = [r for r in results if r.outcomes]
    if tested:
        tests = sorted({name for r in tested for name in r.outcomes})
        lines += ["", "## Which API works on which release", "", text.markdown_table(
            ("test", *(f"`{r.cell.id}`" for r in tested)),
            [(f"`{test.split('::', 1)[-1]}`", *(_mark(r.outcomes.get(test)) for r in tested)) for test in tests])]
    problems = [r for r in results if r.problems]
    if problems:
        lines += ["", "## Problems", "", *(f"- `{r.cell.id}`: {'; '.join(r.problems)}" for r in problems)]
    return "\n".join(lines) + "\n"


def _mark(outcome: str | None) -> str:
    if outcome is None:
        return "–"
    if outcome.startswith("skipped"):
        reason = outcome.split(":", 1)[1].strip().replace("|", "/")
        return "skip: " + (reason if len(reason) <= 60 else reason[:57] + "…")
    return {"passed": "✓", "failed": "✗ failed", "error": "✗ error"}.get(outcome, outcome)


def write(directory: Path, matrix: Matrix, results: Sequence[CellResult]) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.md`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path, md_path = directory / "report.json", directory / "report.md"
    write_all_atomically({json_path: json.dumps(to_json(matrix, results), indent=1) + "\n",
                          md_path: markdown(matrix, results)})
    return json_path, md_path
