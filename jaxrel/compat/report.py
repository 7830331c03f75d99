"""The compat run's report: a readable table, ``report.json`` and ``report.md``.

A run clears the reports of the one before it (:func:`clear`) when it starts, writes them
marked incomplete after each cell, and complete once at the end: a run that crashes or
is killed never leaves an earlier run's green report behind.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxrel._util import localfiles, text
from jaxrel._util.atomic import write_reports
from jaxrel._util.shape import Shape
from jaxrel.cells.matrix import Matrix
from jaxrel.compat.cell import CellResult
from jaxrel.compat.triage import FATAL, VERDICTS, counted

__all__ = ["EXTENSION_TESTS", "HEADERS", "REPORTS", "TestedCommit", "clear", "extension_outcome", "headers",
           "markdown", "read_tested_commit", "rows", "summary", "table", "to_json", "verdict_counts", "write"]

HEADERS = ("cell", "expected", "observed", "passed", "failed", "skipped", "extension", "time", "result")
EXTENSION_TESTS = "test_extension"  # the compat suite's module that exercises the built extension wheel
REPORTS = ("report.json", "report.md", "junit")


def _any_own(results: Sequence[CellResult]) -> bool:
    """Whether any cell ran the frontend's own tests or says why it did not."""
    return any(r.frontend_tests or r.own_tests_not_run for r in results)


def headers(results: Sequence[CellResult]) -> tuple[str, ...]:
    """:data:`HEADERS`, plus columns for the frontend's own tests and the failed tests' verdicts when any cell
    has them."""
    extra = (("own tests",) if _any_own(results) else ()) + \
        (("failed tests",) if any(r.failures for r in results) else ())
    return HEADERS[:-3] + extra + HEADERS[-3:]


def verdict_counts(result: CellResult) -> str:
    """``1 compat regression, 2 frontend failures``, or ``–``."""
    counts = result.verdicts()
    return ", ".join(counted(counts[v], v) for v in VERDICTS if v in counts) or "–"


def extension_outcome(result: CellResult) -> str:
    """The extension's tests in one cell: ``4/4 passed``, or ``–`` when the cell did not run them."""
    outcomes = [o for name, o in result.outcomes.items() if EXTENSION_TESTS in name]
    ran = [o for o in outcomes if not o.startswith("skipped")]
    if not result.extension or not ran:
        return "–"
    return f"{sum(o == 'passed' for o in ran)}/{len(ran)} passed"


def rows(results: Sequence[CellResult]) -> list[tuple[str, ...]]:
    """One row per cell, in :func:`headers` order."""
    own = _any_own(results)
    failed = any(r.failures for r in results)
    out: list[tuple[str, ...]] = []
    for r in results:
        expected = r.cell.expected + (f" ({', '.join(r.cell.rules)})" if r.cell.rules else "")
        row = [r.cell.id, expected, r.observed, str(r.tests.passed), str(r.tests.failed + r.tests.errors),
               str(r.tests.skipped)]
        if own:
            t = r.frontend_tests
            row.append(f"{t.passed} passed, {t.failed + t.errors} failed, {t.skipped} skipped" if t
                       else f"not run: no {r.cell.device} here" if r.own_tests_not_run else "–")
        if failed:
            row.append(verdict_counts(r))
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
    totals = {v: sum(r.verdicts().get(v, 0) for r in results) for v in VERDICTS}
    if any(totals.values()):
        head += "\nfailed tests: " + ", ".join(
            counted(n, v) + (" (fails the run)" if v in FATAL else "") for v, n in totals.items() if n)
    narrowed = [r.cell.id for r in results if r.cpu_suite_in]
    if narrowed:
        head += (f"\nplugin tests only (the frontend saw no device but the CPU; the whole suite ran on that backend's "
                 f"CPU in its plain cell; --full-plugin-cells runs it here too): {', '.join(narrowed)}")
    wheels = sorted({r.extension for r in results if r.extension})
    installs = [f"\nplugins in {r.cell.id}: {r.plugin_install}" for r in results if r.plugin_install]
    return head + "".join(f"\nextension: {wheel}" for wheel in wheels) + "".join(installs)


def to_json(matrix: Matrix, results: Sequence[CellResult], *, complete: bool = True,
            frontend_build_seconds: float | None = None, frontend: Mapping[str, Any] | None = None,
            bisect: Sequence[str] = ()) -> dict[str, Any]:
    """The whole run; ``ok`` is false while ``complete`` is (a run that stopped early proves nothing).

    ``frontend`` says which commit was tested (``jaxrel bisect --good-report`` reads it), ``bisect``
    holds a ready ``jaxrel bisect`` command per regressed cell.
    """
    return {
        "matrix": matrix.to_json(),
        "complete": complete,
        "ok": complete and all(r.ok for r in results),
        "summary": summary(results) if complete else _incomplete(matrix, results),
        "frontend_build_seconds": frontend_build_seconds,
        "frontend": dict(frontend or {}),
        "bisect": list(bisect),
        "cells": [r.to_json() for r in results],
    }


def _incomplete(matrix: Matrix, results: Sequence[CellResult]) -> str:
    return (f"INCOMPLETE: the run stopped after {len(results)} of {len(matrix.cells)} cells (or before sorting "
            "failed tests); nothing here says the frontend is compatible")


def markdown(matrix: Matrix, results: Sequence[CellResult], *, complete: bool = True,
             bisect: Sequence[str] = ()) -> str:
    """The table, the notes, each refusal's message, the failed tests, and which test passed on which cell."""
    lines = [f"# compat: {matrix.frontend.name} {matrix.frontend.version}", "",
             *([] if complete else [f"**{_incomplete(matrix, results)}.**", ""]),
             f"Frontend: {matrix.frontend.source}; minimum {matrix.backend} {matrix.frontend.minimum_backend}; "
             f"declared range {matrix.frontend.backend_range or 'none'}.", "", summary(results), "",
             text.markdown_table(headers(results), [(f"`{row[0]}`", *row[1:]) for row in rows(results)])]
    if matrix.notes:
        lines += ["", "Notes:", *(f"- {note}" for note in matrix.notes)]
    refused = [r for r in results if r.guard_message]
    if refused:
        lines += ["", "## Refusals", ""]
        for r in refused:
            real = r.import_error or "; ".join((r.frontend_import or {}).get("warnings", [])) or "imports"
            printed = f"; it printed: {r.import_output}" if r.import_output and not r.import_error else ""
            lines.append(f"- `{r.cell.id}`: {' '.join(str(r.guard_message).split())} — real "
                         f"{matrix.frontend.name} without the guard: {' '.join((real + printed).split())}")
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
            [(f"`{test}`", *(_mark(r.outcomes.get(test)) for r in tested)) for test in tests])]
        narrowed = [r for r in tested if r.cpu_suite_in]
        if narrowed:
            lines += ["", "– in " + ", ".join(f"`{r.cell.id}`" for r in narrowed) + ": not run there; the frontend "
                      "saw only CPU devices, so only the plugin tests ran (the rest ran in "
                      + ", ".join(sorted({f"`{r.cpu_suite_in}`" for r in narrowed})) + ")."]
    failed = [(r, f) for r in results for f in r.failures]
    if failed:
        lines += ["", "## Failed tests", "", text.markdown_table(
            ("cell", "suite", "test", "verdict", "why", "error"),
            [(f"`{r.cell.id}`", f.suite, f"`{f.test}`", f.verdict, f.detail, _short(f.message))
             for verdict in VERDICTS for r, f in failed if f.verdict == verdict])]
    problems = [r for r in results if r.problems]
    if problems:
        lines += ["", "## Problems", "", *(f"- `{r.cell.id}`: {'; '.join(r.problems)}" for r in problems)]
    noted = [(r, note) for r in results for note in r.notes]
    if noted:
        lines += ["", "## Notes on cells", "", "What the compat suite found due but not required (a pre-release of the "
                  "release that documents it): not a failure.", "", *(f"- `{r.cell.id}`: {note}" for r, note in noted)]
    if bisect:
        lines += ["", "## Bisect", "", "The first commit that broke each regressed cell:", "",
                  *(f"    {command}" for command in bisect)]
    return "\n".join(lines) + "\n"


def _mark(outcome: str | None) -> str:
    if outcome is None:
        return "–"
    if outcome.startswith("skipped"):
        reason = outcome.split(":", 1)[1].strip().replace("|", "/")
        return "skip: " + (reason if len(reason) <= 60 else reason[:57] + "…")
    return {"passed": "✓", "failed": "✗ failed", "error": "✗ error"}.get(outcome, outcome)


def _short(message: str, limit: int = 160) -> str:
    return text.clip(" ".join(message.removeprefix("collection: ").split()), limit)


def clear(directory: Path) -> None:
    """Delete the reports (and junit files) an earlier run left in ``directory``."""
    for name in REPORTS:
        path = directory / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def write(directory: Path, matrix: Matrix, results: Sequence[CellResult], *, complete: bool = True,
          frontend_build_seconds: float | None = None, frontend: Mapping[str, Any] | None = None,
          bisect: Sequence[str] = ()) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.md`` into ``directory``, both or neither."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path, md_path = directory / "report.json", directory / "report.md"
    data = to_json(matrix, results, complete=complete, frontend_build_seconds=frontend_build_seconds,
                   frontend=frontend, bisect=bisect)
    write_reports({json_path: json.dumps(data, indent=1) + "\n",
                          md_path: markdown(matrix, results, complete=complete, bisect=bisect)})
    return json_path, md_path


@dataclass(frozen=True)
class TestedCommit:
    """What a compat ``report.json`` says of the frontend it tested (``jaxrel bisect --good-report``)."""

    commit: str
    ok: bool
    dirty: bool


_COMMIT = re.compile(r"[0-9a-f]{4,64}")  # a full or abbreviated git commit hash


def read_tested_commit(path: str | Path) -> TestedCommit:
    """The commit a compat ``report.json`` tested, checked at the boundary: one :class:`BadInput` line for a
    missing or damaged file, a field of the wrong type, or a commit that is not a hex hash."""
    data = localfiles.load_json(path, what="--good-report")
    shape = Shape(f"--good-report {path}")
    top = shape.table(data, "report")
    ok = shape.field(top, "ok", "report", lambda v: isinstance(v, bool), "true or false", False)
    frontend = shape.table(top.get("frontend", {}), "frontend")
    commit = shape.field(frontend, "commit", "frontend", lambda v: isinstance(v, str) and bool(_COMMIT.fullmatch(v)),
                         "a commit hash (a report of jaxrel compat --frontend-src from a git checkout records it)")
    dirty = shape.field(frontend, "dirty", "frontend", lambda v: isinstance(v, bool), "true or false", False)
    return TestedCommit(commit, ok, dirty)
