"""A cell's state on a night: one classification, read by every answer the history gives.

The HUD's squares, api/v1 (``matrix.json``, ``combos.json``), the Atom feed, ``history query`` and ``--history``
on ``verdict`` and ``doctor`` all take a night's state from :func:`night_states`, so a night the HUD shows as an
expectation is an expectation in every one of them, with what is due.

A night's state is its cell's verdict (``passed``, ``fixed``, ``new-regression``, ``still-failing``, ``failing``,
``flaky``, ``infra``, ``refused``); a cell that passed while one of its tests failed takes the worst of its tests'
verdicts. A red night whose failing tests all belong to an expectation of that cell
(:data:`~jaxrel.history.regressions.EXPECTATION`: red only because the frontend's version string moved), from its
first red night to its last, is ``expectation``: what it judged is due in the frontend's coming release, and the
set of wheels works.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from jaxrel import policy
from jaxrel.history.regressions import EXPECTATION, Regression, regressions
from jaxrel.history.store import CELL_TEST, OWN_TESTS, Store

__all__ = ["RED", "WORST", "State", "due", "night_states"]

WORST = ("new-regression", "still-failing", "failing", "flaky")  # a test's verdict that colours its cell's night
RED = frozenset({"new-regression", "still-failing", "failing"})


@dataclass(frozen=True)
class State:
    """A cell's state on one night; ``due`` and ``why`` say what an expectation waits for."""

    state: str
    due: str = ""  # an expectation: the release in which what its tests judged is due ("jax 0.7.0")
    why: str = ""  # an expectation: why it is one (the regression's own words)


def due(regression: Regression) -> str:
    """The release an expectation waits for: the frontend at the release its version on the red night leads to
    (``0.7.0.dev20250626+g…`` → ``jax 0.7.0``)."""
    try:
        release = policy.release_text(policy.parse_version(regression.version))
    except policy.VersionError:
        release = regression.version
    return f"{regression.frontend} {release}".strip()


def night_states(store: Store, cells: Iterable[str] | None = None,
                 found: list[Regression] | None = None) -> dict[tuple[str, str], State]:
    """(night, cell) → its :class:`State`, for every night of ``cells`` (every cell when ``None``); ``found``: the
    store's regressions when the caller has them already."""
    wanted = None if cells is None else sorted(set(cells))
    if wanted == []:
        return {}
    marks = "" if wanted is None else f" AND combos.cell IN ({','.join('?' for _ in wanted)})"
    states: dict[tuple[str, str], State] = {}
    for night, cell, meaning in store.rows(
            "SELECT runs.night, combos.cell, verdicts.verdict FROM results JOIN runs ON runs.id = results.run JOIN "
            "combos ON combos.id = results.combo JOIN verdicts ON verdicts.run = results.run AND verdicts.cell = "
            f"combos.cell AND verdicts.test = results.test WHERE results.test = ?{marks} ORDER BY runs.night, runs.id",
            (CELL_TEST, *(wanted or ()))):
        states[(str(night), str(cell))] = State(str(meaning))
    failing: dict[tuple[str, str], set[str]] = defaultdict(set)
    worst: dict[tuple[str, str], set[str]] = defaultdict(set)
    cell_marks = marks.replace("combos.cell", "verdicts.cell")
    for night, cell, test, meaning in store.rows(
            "SELECT runs.night, verdicts.cell, verdicts.test, verdicts.verdict FROM verdicts JOIN runs ON runs.id = "
            "verdicts.run WHERE verdicts.test NOT IN (?, ?) AND verdicts.verdict IN ('new-regression', "
            f"'still-failing', 'failing', 'flaky'){cell_marks}", (CELL_TEST, OWN_TESTS, *(wanted or ()))):
        worst[(str(night), str(cell))].add(str(meaning))
        if meaning in RED:
            failing[(str(night), str(cell))].add(str(test))
    for key, meanings in worst.items():
        state = states.get(key)
        if state is not None and state.state in ("passed", "fixed"):  # a test's red shows, though the cell was ok
            states[key] = State(next(v for v in WORST if v in meanings))
    expected = [r for r in (regressions(store, cells=wanted) if found is None else found) if r.kind == EXPECTATION]
    for regression in expected:
        tests = set(regression.tests)
        for (night, cell), state in states.items():
            if cell != regression.cell or not regression.night <= night <= (regression.last_red or regression.night):
                continue
            if state.state in RED and failing.get((night, cell), set()) <= tests:
                states[(night, cell)] = State(EXPECTATION, due(regression), regression.why)
    return states
