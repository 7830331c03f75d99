"""What a store keeps of a night's results: what changes, not every repetition (schema 5).

A night of 20 cells × 500 tests is 10,000 results, nearly all of them the same as the night before: passed,
or skipped for the same reason. Kept row by row, a year of them was 1.4 GB. Now each run of a combo keeps:

* a **selection**: the tests that ran and whether each was skipped, as one JSON text, stored once per distinct
  text (by its sha256) and referenced by ``run_selections`` (run, combo): a year of stable nights shares a
  handful of them, as TestGrid's run-length encoding shares a stable test's results;
* a **row** in ``results`` for every result that is not routine: failed, flaky, infra, the cell's own outcome
  (:data:`~jaxrel.history.reports.CELL_TEST`) and the frontend's own tests' marker (``OWN_TESTS``);
* a **verdict** in ``verdicts`` for every meaning other than a plain ``passed`` (and always for the two above).

A test's outcome in a run is its row's, else ``skipped`` or ``passed`` as the run's selection says, else it
did not run (:func:`outcomes`). Readers that need the routine results (the regressions' nights, the runs of a
combo at the same commit, a night ingested out of order) ask here; the rest read the rows as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from jaxrel._util import localfiles
from jaxrel.errors import BadInput
from jaxrel.history.reports import TestRecord
from jaxrel.history.store import ALWAYS, Db, Store, keep_selection, selection_text

__all__ = ["ROUTINE", "kept", "outcomes", "record", "routine"]

ROUTINE = frozenset({"passed", "skipped"})  # outcomes a selection holds instead of a row


def routine(test: TestRecord) -> bool:
    """Whether ``test``'s result is kept in its run's selection rather than as a row of its own."""
    return test.outcome in ROUTINE and test.test not in ALWAYS


def kept(test: str, meaning: str) -> bool:
    """Whether a verdict is kept as a row: every meaning but a plain ``passed`` of a test (the cell's own always)."""
    return meaning != "passed" or test in ALWAYS


def record(db: Db, run: int, combo: int, tests: Iterable[TestRecord]) -> None:
    """Keep the selection of ``run`` on ``combo`` (what goes in it: :func:`~jaxrel.history.store.selection_text`)."""
    keep_selection(db, run, combo, selection_text((t.test, t.outcome, t.suite) for t in tests))


def _parse(text: str) -> dict[str, tuple[str, str]]:
    """A selection's text → test → (passed | skipped, suite); a damaged one is empty (never trusted, never a
    crash: the rows still say what failed)."""
    try:
        data: Any = localfiles.loads_json(text, "a history selection")
    except BadInput:  # jaxrel's own text, read back; damage reads as nothing routine
        return {}
    found = {}
    for entry in data if isinstance(data, list) else []:
        if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and isinstance(entry[2], str):
            found[entry[0]] = ("skipped" if entry[1] else "passed", entry[2])
    return found


def outcomes(store: Store | Db, where: str, parameters: Sequence[object] = (),
             tests: set[str] | None = None) -> dict[tuple[int, int], dict[str, tuple[str, str]]]:
    """(run, combo) → test → (outcome, suite), rows and selections together, for the runs matched by ``where`` (a
    condition on ``runs`` and ``combos``, e.g. ``"combos.cell = ?"``); only ``tests`` when given."""
    execute = store.rows if isinstance(store, Store) else store.execute
    found: dict[tuple[int, int], dict[str, tuple[str, str]]] = {}
    parsed: dict[int, dict[str, tuple[str, str]]] = {}
    for run, combo, selection, text in execute(
            "SELECT run_selections.run, run_selections.combo, selections.id, selections.tests FROM run_selections "
            "JOIN selections ON selections.id = run_selections.selection JOIN runs ON runs.id = run_selections.run "
            f"JOIN combos ON combos.id = run_selections.combo WHERE {where}", tuple(parameters)):
        if int(selection) not in parsed:
            parsed[int(selection)] = _parse(str(text))
        ran = parsed[int(selection)]
        found[(int(run), int(combo))] = dict(ran) if tests is None else {t: ran[t] for t in tests if t in ran}
    for run, combo, test, outcome, suite in execute(
            "SELECT results.run, results.combo, results.test, results.outcome, results.suite FROM results JOIN runs "
            f"ON runs.id = results.run JOIN combos ON combos.id = results.combo WHERE {where}", tuple(parameters)):
        if tests is None or str(test) in tests:
            found.setdefault((int(run), int(combo)), {})[str(test)] = (str(outcome), str(suite))
    return found
