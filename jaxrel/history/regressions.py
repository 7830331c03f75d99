"""Regressions as the history sees them: one per cell and first red night, with its range, culprit and state.

A regression is every test of one cell whose verdict turned ``new-regression`` in one run. Its range is
the frontend commit of the newest earlier night on which those tests passed in that cell (the last good)
and the commit of the red night (the first bad); its culprit is what ``jaxrel bisect`` named for that
range (:mod:`jaxrel.history.ingest` keeps it). It stays open until its tests have passed on
``close_after`` nights in a row, or until it is **retired**: on a later night the frontend's minimum backend is
newer than the cell's backend, so the cell has left the matrix (or stays only as one the guard must refuse) and
no green night can come. The nightly opens one issue per regression once it is bisected (or cannot be: no good
night kept), edits it later, and closes it with the state (closed or retired).

A test whose outcome changed only because the frontend's version string moved is not a regression: its
``kind`` is ``expectation`` (its own colour on the HUD, no issue) when the culprit bisect named changes
nothing but the family's version files, or when the frontend's version moved between the last good and the
first bad night and the failure's error names the new version (the test judged the version string, as
"still works in jax 0.7.0.dev…, documented as removed in 0.7.0" did). Every other one is a ``regression``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from jaxrel import policy
from jaxrel._util.shape import is_relative_path
from jaxrel.cells.suites import DEFAULT_SUITE
from jaxrel.history import selections
from jaxrel.history.store import CELL_TEST, OWN_TESTS, Store

__all__ = ["CLOSE_AFTER", "EXPECTATION", "REGRESSION", "Regression", "regressions"]

CLOSE_AFTER = 3  # green nights in a row that close a regression
REGRESSION, EXPECTATION = "regression", "expectation"  # a code change broke it / only the version string moved
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass
class Regression:
    cell: str
    night: str  # the first red night
    run: int
    first_bad: str  # the frontend commit that night
    last_good: str = ""  # the commit of the newest earlier night on which the tests passed ("" none kept)
    last_good_night: str = ""
    tests: list[str] = field(default_factory=list)  # the tests that turned red (the cell's own outcome if none)
    own_tests: list[str] = field(default_factory=list)  # those of the frontend's own tests (what bisect runs)
    suite_tests: list[str] = field(default_factory=list)  # those of jaxrel's compat suite (bisected when no own one)
    signature: str = ""  # the first failing test's error, folded
    backend: str = ""  # name==version of the cell's backend
    bisected: bool = False  # bisect reported on this range
    culprit: str | None = None  # the commit bisect named (None: not bisected, or it did not converge)
    log: str = ""
    state: str = "open"  # open | closed | retired (its backend left the frontend's admitted range)
    retired: str = ""  # the night it was retired
    retired_why: str = ""  # and why
    last_red: str = ""  # the newest night any of its tests failed
    green_nights: int = 0  # nights in a row since then on which they passed
    kind: str = REGRESSION  # or EXPECTATION: only the version string moved
    why: str = ""  # what made it an expectation
    frontend: str = ""  # the frontend's name
    version: str = ""  # its version on the first bad night
    last_good_version: str = ""  # and on the last good night

    @property
    def key(self) -> str:
        """Stable across nights: the cell and the first bad commit."""
        return f"{self.cell}@{self.first_bad[:12] or self.night}"

    @property
    def page(self) -> str:
        """The file name of its page on the HUD."""
        return _SAFE.sub("_", self.key) + ".html"

    @property
    def bisectable(self) -> bool:
        return bool((self.own_tests or self.suite_tests) and self.last_good and self.first_bad)

    @property
    def ready(self) -> bool:
        """Worth an issue: a regression (not an expectation), bisected (converged or not), or nothing for bisect to
        do."""
        return self.kind == REGRESSION and (self.bisected or not self.bisectable)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "key": self.key, "page": self.page, "ready": self.ready}


def regressions(store: Store, close_after: int = CLOSE_AFTER, cells: Sequence[str] | None = None) -> list[Regression]:
    """Every regression the store holds (of ``cells``, when given), oldest first."""
    found: dict[tuple[int, str], Regression] = {}
    only = "" if cells is None else f" AND verdicts.cell IN ({','.join('?' for _ in cells)})"
    if cells is not None and not cells:
        return []
    for run, cell, test, night, commit, frontend, version, suite, signature in store.rows(
            "SELECT verdicts.run, verdicts.cell, verdicts.test, runs.night, runs.frontend_commit, runs.frontend, "
            "runs.frontend_version, results.suite, results.signature FROM verdicts JOIN runs ON runs.id = "
            "verdicts.run JOIN results ON results.run = verdicts.run AND results.test = verdicts.test JOIN combos ON "
            "combos.id = results.combo AND combos.cell = verdicts.cell WHERE verdicts.verdict = 'new-regression'"
            f"{only} ORDER BY runs.night, runs.id, verdicts.test", tuple(cells or ())):
        regression = found.setdefault((int(run), str(cell)), Regression(str(cell), str(night), int(run), str(commit),
                                                                       frontend=str(frontend), version=str(version)))
        if test == OWN_TESTS:
            continue
        regression.tests.append(str(test))
        if suite == "own":
            regression.own_tests.append(str(test))
        elif test != CELL_TEST and is_relative_path(path := str(test).split("::", 1)[0]) \
                and (DEFAULT_SUITE / path).is_file():
            regression.suite_tests.append(str(test))  # a test of jaxrel's compat suite (not an atlas row, a step)
        if signature and not regression.signature and test != CELL_TEST:
            regression.signature = str(signature)
    for regression in found.values():
        if len(regression.tests) > 1 and CELL_TEST in regression.tests:
            regression.tests.remove(CELL_TEST)
        if not regression.tests:
            regression.tests = [OWN_TESTS]
    by_cell: dict[str, list[Regression]] = {}
    for regression in found.values():
        by_cell.setdefault(regression.cell, []).append(regression)
    for cell, theirs in by_cell.items():  # one read of each cell's nights for all of its regressions
        nights = _nights(store, cell, sorted({t for r in theirs for t in r.tests}))
        for regression in theirs:
            _range(regression, [n for n in reversed(nights) if n[0] < regression.night])
            _kind(regression, _culprit(store, regression))
            _state(regression, [n for n in nights if n[0] > regression.night], close_after)
            if regression.state == "open":
                _retire(store, regression)
    return list(found.values())


def _retire(store: Store, regression: Regression) -> None:
    """Retired: on a night after its last red one, the frontend no longer admits the cell's backend, so no green
    night can ever close it. Either that night's run says so (the frontend's minimum backend is newer; the cell has
    left the matrix), or, in a store whose runs do not carry the minimum, the cell ran as one the guard must refuse
    (``refused``) with a frontend not older than the backend: it fell below the minimum."""
    name, _, version = regression.backend.partition("==")
    try:
        backend = policy.release_key(policy.parse_version(version))
    except policy.VersionError:
        return
    after = regression.last_red or regression.night
    found: list[tuple[str, str]] = []  # (night, why)
    for night, minimum in store.rows(
            "SELECT night, minimum_backend FROM runs WHERE frontend = ? AND kind = 'compat' AND night > ? AND "
            "minimum_backend <> '' ORDER BY night, id", (regression.frontend, after)):
        if _release(str(minimum)) > backend:
            found.append((str(night), f"from {night} the frontend requires {name} >= {minimum}: "
                                      f"{regression.backend} is no longer admitted, so its cell cannot turn green"))
            break
    for night, frontend in store.rows(
            "SELECT runs.night, runs.frontend_version FROM results JOIN runs ON runs.id = results.run JOIN combos ON "
            "combos.id = results.combo WHERE combos.cell = ? AND results.test = ? AND results.outcome = 'refused' "
            "AND runs.night > ? ORDER BY runs.night, runs.id", (regression.cell, CELL_TEST, after)):
        if _release(str(frontend)) >= backend:
            found.append((str(night), f"from {night} the guard refuses {regression.backend} for the frontend at "
                                      f"{frontend}, as the rules expect: it fell below the minimum, so its cell "
                                      "cannot turn green"))
            break
    if found:
        regression.state = "retired"
        regression.retired, regression.retired_why = min(found)


def _release(text: str) -> tuple[int, ...]:
    """A version's release numbers; ``()`` (older than any) when it is not one."""
    try:
        return policy.release_key(policy.parse_version(text))
    except policy.VersionError:
        return ()


def _kind(regression: Regression, version_only: bool) -> None:
    """An expectation when only the version string moved (see the module doc): its culprit changes only the
    version files (``version_only``), or the version moved and the failure names it; else a regression."""
    if regression.culprit is not None and version_only:
        regression.kind = EXPECTATION
        regression.why = f"its culprit {regression.culprit[:12]} changes only the version files"
        return
    moved = regression.version and regression.last_good_version and regression.version != regression.last_good_version
    if moved and _names_version(regression.signature, regression.frontend, regression.version):
        regression.kind = EXPECTATION
        regression.why = (f"the version moved from {regression.last_good_version} to {regression.version} and the "
                          "failure judges the version string")


def _names_version(signature: str, frontend: str, version: str) -> bool:
    """Whether a failure's signature names the frontend at its version ("… in jax 0.7.0.dev20250626+g85…"), as the
    signature folds it: numbers as ``N``, hashes as ``#``; the local part aside."""
    if not (signature and frontend and version):
        return False
    folded = re.sub(r"\d+", "N", version.split("+", 1)[0])
    return re.search(rf"\b{re.escape(frontend)} {re.escape(folded)}(?![\w.])", signature) is not None


Night = tuple[str, str, str, dict[str, str]]  # night, frontend commit, frontend version, test → outcome


def _nights(store: Store, cell: str, tests: list[str]) -> list[Night]:
    """(night, commit, version, test → outcome) of every run of ``cell``, oldest first, for ``tests``, the cell's own
    outcome and its own-tests selection."""
    watched = {*tests, CELL_TEST, OWN_TESTS}
    runs = {int(run): (str(night), str(commit), str(version)) for run, night, commit, version in store.rows(
        "SELECT DISTINCT runs.id, runs.night, runs.frontend_commit, runs.frontend_version FROM runs JOIN results ON "
        "results.run = runs.id JOIN combos ON combos.id = results.combo WHERE combos.cell = ?", (cell,))}
    nights: dict[int, Night] = {}
    for (run, _), found in selections.outcomes(store, "combos.cell = ?", (cell,), watched).items():
        if run in runs:
            nights.setdefault(run, (*runs[run], {}))[3].update({test: o for test, (o, _) in found.items()})
    return [nights[run] for run in sorted(nights, key=lambda r: (runs[r][0], r))]


def _green(regression: Regression, outcomes: dict[str, str]) -> bool | None:
    """Whether one run shows the regression's tests passing (None: it says nothing: infra, or they did not run)."""
    if outcomes.get(CELL_TEST) in (None, "infra"):
        return None
    if any(outcomes.get(test) == "failed" for test in regression.tests):
        return False
    own = [t for t in regression.tests if t in regression.own_tests or t == OWN_TESTS]
    if own and outcomes.get(OWN_TESTS) is None:
        return None  # the own tests did not run that night
    compat = [t for t in regression.tests if t not in own and t != CELL_TEST]
    if compat and not all(outcomes.get(t) in ("passed", "skipped") for t in compat):
        return None
    return True


def _range(regression: Regression, before: list[Night]) -> None:
    """The last good: the newest earlier night (``before``, newest first) on which the tests passed."""
    for night, commit, version, outcomes in before:
        if _green(regression, outcomes):
            regression.last_good, regression.last_good_night, regression.last_good_version = commit, night, version
            return


def _culprit(store: Store, regression: Regression) -> bool:
    """The bisection of its range: the same last good and first bad commits, else one that starts at the same last
    good or ends at the same first bad (the nightly bisects up to the newest red commit); whether its culprit changes
    only the version files."""
    rows = store.rows("SELECT culprit, log, last_good = ? AND first_bad = ?, version_only FROM culprits WHERE cell = ? "
                      "AND (first_bad = ? OR (last_good = ? AND last_good <> '')) ORDER BY 3 DESC, id DESC LIMIT 1",
                      (regression.last_good, regression.first_bad, regression.cell, regression.first_bad,
                       regression.last_good))
    version_only = bool(rows and rows[0][3])
    if rows:
        regression.bisected = True
        regression.culprit, regression.log = (str(rows[0][0]) if rows[0][0] else None), str(rows[0][1])
    rows = store.rows("SELECT artifacts.name, artifacts.version FROM combo_artifacts JOIN artifacts ON artifacts.id = "
                      "combo_artifacts.artifact JOIN results ON results.combo = combo_artifacts.combo JOIN combos ON "
                      "combos.id = results.combo WHERE results.run = ? AND combos.cell = ? AND combo_artifacts.role = "
                      "'backend' LIMIT 1", (regression.run, regression.cell))
    regression.backend = f"{rows[0][0]}=={rows[0][1]}" if rows else ""
    return version_only


def _state(regression: Regression, after: list[Night], close_after: int) -> None:
    """Open until its tests passed ``close_after`` nights in a row after its last red night (``after``, oldest
    first)."""
    regression.last_red = regression.night
    counted = ""
    for night, _, _, outcomes in after:
        green = _green(regression, outcomes)
        if green is False:
            regression.last_red, regression.green_nights, counted = night, 0, night
        elif green and night != counted and night != regression.last_red:
            regression.green_nights, counted = regression.green_nights + 1, night
    regression.state = "closed" if regression.green_nights >= close_after else "open"
