"""Sort each test that failed on a cell: compat regression, frontend failure, flaky, or collection error.

Every failed test is first rerun on its own cell: passing then makes it *flaky*. What fails
again is run on the newest admitted backend (the reference cell for the cell's Python, built
when the run did not include it): passing there makes it a *compat regression* (the frontend
needs something only the newest backend has, and admits older ones); failing there too makes
it a *frontend failure* (broken whatever the backend), or, for a test module that could not
even be collected, a *collection error* (nothing in it was tested: a missing test requirement,
a broken conftest). A failure that could not be rerun, or that the newest backend skips, stays
*unclassified*.

Compat regressions, collection errors and unclassified failures fail the run; frontend
failures and flaky tests are reported, apart.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from jaxrel.cells.matrix import Cell
from jaxrel.cells.suites import Suite, SuiteRun

__all__ = ["FATAL", "VERDICTS", "Failure", "Rerun", "classify", "counted", "summary", "write_verdicts"]

VERDICTS = ("compat regression", "collection error", "unclassified", "frontend failure", "flaky")
FATAL = frozenset(VERDICTS[:3])


@dataclass
class Failure:
    """One test that failed (or errored) on one cell, and what the reruns made of it."""

    suite: str  # the Suite's name: "compat suite" | "own tests"
    test: str  # pytest node id (a module's for a collection error)
    outcome: str  # failed | error
    message: str  # the first line of its error
    verdict: str = "unclassified"
    detail: str = ""

    @property
    def fatal(self) -> bool:
        return self.verdict in FATAL


# (cell, suite, node ids) -> the run of those tests in that cell's environment, or why it cannot run.
Rerun = Callable[[Cell, Suite, Sequence[str]], SuiteRun | str]


def _label(cell: Cell, backend: str) -> str:
    return f"{backend} {cell.backend}" + (" with plugins" if cell.plugins else "")


def classify(
    cells: Sequence[tuple[Cell, list[Failure]]], references: dict[str, Cell | None], suites: dict[str, Suite],
    rerun: Rerun, backend: str,
) -> None:
    """Set the verdict of every failure in ``cells`` (cell → its failures); ``references``: cell id → reference."""
    confirmed: dict[str, list[tuple[Cell, Failure]]] = {}  # reference id -> failures seen twice
    for cell, failures in cells:
        for suite_name in sorted({f.suite for f in failures}):
            mine = [f for f in failures if f.suite == suite_name]
            again = rerun(cell, suites[suite_name], [f.test for f in mine])
            for failure in mine:
                if isinstance(again, str):
                    failure.detail = f"could not rerun it: {again}"
                elif again.passed(failure.test):
                    failure.verdict, failure.detail = "flaky", "passed when rerun on the same cell"
                else:
                    reference = references.get(cell.id)
                    if reference is None:
                        failure.detail = "no admitted backend to compare with"
                    else:
                        confirmed.setdefault(reference.id, []).append((cell, failure))
    by_id = {ref.id: ref for ref in references.values() if ref is not None}
    for reference_id, pairs in confirmed.items():
        _against_reference(by_id[reference_id], pairs, suites, rerun, backend)


def _against_reference(reference: Cell, pairs: list[tuple[Cell, Failure]], suites: dict[str, Suite], rerun: Rerun,
                       backend: str) -> None:
    newest = _label(reference, backend)
    for suite_name in sorted({f.suite for _, f in pairs}):
        mine = [(cell, f) for cell, f in pairs if f.suite == suite_name]
        others = [f.test for cell, f in mine if cell.id != reference.id]
        there = rerun(reference, suites[suite_name], sorted(set(others))) if others else None
        for cell, failure in mine:
            if cell.id == reference.id:
                _fails_everywhere(failure, f"fails on the newest admitted backend ({newest}) itself")
            elif isinstance(there, str):
                failure.detail = f"could not run it on {newest}: {there}"
            elif there is not None and there.passed(failure.test):
                failure.verdict = "compat regression"
                failure.detail = f"passes on {newest}, fails on {_label(cell, backend)}"
            else:
                why = there.outcomes.get(failure.test) if there is not None else None
                if why is not None and why.outcome == "skipped":  # nothing to compare with: say so, fail
                    failure.detail = f"skipped on {newest} ({why.message}), so it cannot be compared"
                else:
                    _fails_everywhere(failure, f"fails on {newest} too"
                                      + (f": {why.message}" if why is not None and why.message else ""))


def _fails_everywhere(failure: Failure, detail: str) -> None:
    failure.verdict = "collection error" if failure.message.startswith("collection: ") else "frontend failure"
    failure.detail = detail


_PLURAL = {"compat regression": "compat regressions", "collection error": "collection errors",
           "frontend failure": "frontend failures"}


def counted(count: int, verdict: str) -> str:
    """``1 compat regression``, ``2 frontend failures``, ``3 flaky``."""
    return f"{count} {verdict if count == 1 else _PLURAL.get(verdict, verdict)}"


def summary(failures: Sequence[Failure]) -> str:
    """``1 compat regression (own tests tests/a.py::test_b: AssertionError), 2 frontend failures``: the first
    failure of each verdict that fails the run is named."""
    parts = []
    for verdict in VERDICTS:
        mine = [f for f in failures if f.verdict == verdict]
        if mine:
            first = mine[0]
            named = f" ({first.suite} {first.test}: {first.message.removeprefix('collection: ')})" \
                if verdict in FATAL else ""
            parts.append(counted(len(mine), verdict) + named)
    return ", ".join(parts)


def write_verdicts(path: Path, cell_id: str, failures: Sequence[Failure]) -> None:
    """A junit file with one test suite per verdict: the verdicts that fail the run as junit failures, the
    others as passing cases that say what they are."""
    root = ElementTree.Element("testsuites")
    for verdict in VERDICTS:
        mine = [f for f in failures if f.verdict == verdict]
        if not mine:
            continue
        name = f"compat.{cell_id}.{verdict.replace(' ', '-')}"
        suite = ElementTree.SubElement(root, "testsuite", name=name, tests=str(len(mine)),
                                       failures=str(len(mine) if verdict in FATAL else 0))
        for failure in mine:
            case = ElementTree.SubElement(suite, "testcase", classname=name, name=f"{failure.suite}: {failure.test}")
            text = f"{failure.verdict}: {failure.detail}\n{failure.message}"
            if verdict in FATAL:
                ElementTree.SubElement(case, "failure", type=verdict, message=failure.message).text = text
            else:
                ElementTree.SubElement(case, "system-out").text = text
    path.parent.mkdir(parents=True, exist_ok=True)
    ElementTree.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
