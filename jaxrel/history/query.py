"""Questions the history answers: is this set of wheels known good, and which cells went stale.

:func:`query` takes pins (``jax==0.12.0 jaxlib==0.12.0 jax-cuda13-plugin==0.12.0``, optionally a
Python) and looks at every combo whose artifacts include all of them. Its answer, from the cells'
states night by night (:func:`jaxrel.history.states.night_states`, what the HUD shows too):

- ``known bad``: a night failed for a reason the history did not explain away (not flaky, not infra,
  not annotated), or the guard refused the set (the rules say it does not work); the evidence names the
  nights, the failing tests and the culprit bisect named;
- ``tests fail``: the guard accepts the set and its cells ran, but tests failed on it (not flaky, not
  annotated): someone about to install it would hit them, whatever the cause. ``why`` says which kind:
  the frontend's own tests (a frontend failure: the wheels fit, the compat suite passed) or jaxrel's
  compat suite (an API of the frontend fails with this backend);
- ``flaky``: results disagree on the same wheels and commit, or passed only on rerun;
- ``expectation``: the set works; its only red nights are an expectation (red only because the frontend's
  version string moved: what the tests judged is due in the coming release, and ``why`` says which);
- ``known good``: at least ``passes`` nights passed, no test failed, nothing failed unexplained;
- ``untested``: no combo holds this set; the nearest tested sets are named (most pins in common).
"""

from __future__ import annotations

import datetime
from dataclasses import asdict, dataclass, field
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from jaxrel.history.regressions import EXPECTATION
from jaxrel.history.states import State, night_states
from jaxrel.history.store import CELL_TEST, OWN_TESTS, HistoryError, Store

__all__ = ["EXPECTED", "FLAKY", "KNOWN_BAD", "KNOWN_GOOD", "TESTS_FAIL", "UNTESTED", "WORST_FIRST", "Answer",
           "MAX_PINS", "combo_summaries", "expectation_words", "failure_kind", "judge", "parse_pins", "query",
           "stale_cells"]

MAX_PINS = 64
KNOWN_GOOD, KNOWN_BAD, TESTS_FAIL, FLAKY, UNTESTED = "known good", "known bad", "tests fail", "flaky", "untested"
EXPECTED = EXPECTATION  # the set works; its red nights only judged a version string (see the module doc)
WORST_FIRST = (KNOWN_BAD, TESTS_FAIL, FLAKY, EXPECTED, KNOWN_GOOD)  # several answers about one set: the worst
FAILED = "('new-regression', 'still-failing', 'failing')"  # the verdicts of a test that failed unexplained


@dataclass
class Answer:
    pins: dict[str, str]
    python: str | None
    verdict: str
    why: str = ""  # what kind of failure makes it not good ("" when it is)
    nights: list[dict[str, Any]] = field(default_factory=list)  # night, cell, commit, outcome, verdict, failing
    culprits: list[dict[str, Any]] = field(default_factory=list)
    nearest: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict in (KNOWN_GOOD, EXPECTED) else 1


def parse_pins(texts: list[str]) -> dict[str, str]:
    """``name==version`` texts as a mapping; anything else is one line (exit 2)."""
    if len(texts) > MAX_PINS:
        raise HistoryError(f"{len(texts)} pins: a set of wheels has at most {MAX_PINS}; ask about one set at a time")
    pins: dict[str, str] = {}
    for text in texts:
        name, separator, version = text.partition("==")
        try:
            Version(version)
        except InvalidVersion:
            separator = ""
        if not separator or not name.strip():
            raise HistoryError(f"{text[:80]!r}: expected NAME==VERSION (jax==0.12.0)")
        pins[str(canonicalize_name(name.strip()))] = version.strip()
    return pins


def _combos(store: Store, pins: dict[str, str], python: str | None) -> dict[int, set[tuple[str, str]]]:
    """Every combo holding all ``pins`` (and ``python``): its id → its (name, version) pairs."""
    where, parameters = "", ()  # type: tuple[str, tuple[object, ...]]
    if pins:  # only the combos holding every pin are read; all of them only to find the nearest sets
        holding = " OR ".join("(artifacts.name = ? AND artifacts.version = ?)" for _ in pins)
        parameters = (*(value for pair in pins.items() for value in pair), len(pins))
        where = ("WHERE combos.id IN (SELECT combo_artifacts.combo FROM combo_artifacts JOIN artifacts ON "
                 f"artifacts.id = combo_artifacts.artifact WHERE {holding} GROUP BY combo_artifacts.combo "
                 "HAVING COUNT(DISTINCT artifacts.name) = ?)")
    found: dict[int, set[tuple[str, str]]] = {}
    for combo, name, version, combo_python in store.rows(
            "SELECT combos.id, artifacts.name, artifacts.version, combos.python FROM combos JOIN combo_artifacts ON "
            f"combo_artifacts.combo = combos.id JOIN artifacts ON artifacts.id = combo_artifacts.artifact {where}",
            parameters):
        if python is None or combo_python == python:
            found.setdefault(int(combo), set()).add((str(name), str(version)))
    wanted = set(pins.items())
    return {combo: pairs for combo, pairs in found.items() if wanted <= pairs}


def query(store: Store, pins: dict[str, str], python: str | None = None, passes: int = 1) -> Answer:
    """What the history knows of the set ``pins`` (see the module doc)."""
    answer = Answer(pins, python, UNTESTED)
    combos = _combos(store, pins, python)
    if not combos:
        answer.nearest = _nearest(store, pins, python)
        return answer
    marks = ",".join("?" for _ in combos)
    rows = store.rows(
        "SELECT runs.night, combos.cell, runs.frontend_commit, results.outcome, verdicts.verdict, results.run, "
        "results.combo FROM results JOIN runs ON runs.id = results.run JOIN combos ON combos.id = results.combo "
        "JOIN verdicts ON verdicts.run = results.run AND verdicts.cell = combos.cell AND verdicts.test = results.test "
        f"WHERE results.test = ? AND results.combo IN ({marks}) ORDER BY runs.night, combos.cell",
        (CELL_TEST, *combos))
    annotated = {(str(c), str(k)) for c, k in store.rows("SELECT cell, kind FROM annotations WHERE test = ?",
                                                         (CELL_TEST,))}
    runs = sorted({int(row[5]) for row in rows})
    matched = {(int(row[5]), str(row[1])) for row in rows}
    run_marks = ",".join("?" for _ in runs)
    explained = {(str(c), str(t)) for c, t in store.rows(
        "SELECT cell, test FROM annotations WHERE kind IN ('flaky', 'expected', 'infra')")}
    failing: dict[tuple[int, str], list[str]] = {}
    suites: dict[tuple[int, str], set[str]] = {}
    flaky_tests = 0
    if runs:  # through the index on (verdict, run, cell): the few results that mean something, not every test
        for run, cell, test, meaning, suite in store.rows(
                "SELECT verdicts.run, verdicts.cell, verdicts.test, verdicts.verdict, results.suite FROM verdicts "
                "JOIN combos ON combos.cell = verdicts.cell JOIN results ON results.run = verdicts.run AND "
                "results.combo = combos.id AND results.test = verdicts.test WHERE verdicts.verdict IN "
                f"('new-regression', 'still-failing', 'failing', 'flaky') AND verdicts.run IN ({run_marks}) AND "
                f"verdicts.test NOT IN (?, ?) ORDER BY verdicts.test", (*runs, CELL_TEST, OWN_TESTS)):
            if (int(run), str(cell)) not in matched or {(str(cell), str(test)), (str(cell), CELL_TEST)} & explained:
                continue  # another cell of the same night, or a test (or its whole cell) annotated flaky / expected
            if meaning == "flaky":
                flaky_tests += 1
            else:
                failing.setdefault((int(run), str(cell)), []).append(str(test))
                suites.setdefault((int(run), str(cell)), set()).add(str(suite))
    wanted = set(pins.items())
    states = night_states(store, cells={str(row[1]) for row in rows})
    for night, cell, commit, outcome, meaning, run, combo in rows:
        exact = combos[int(combo)] == wanted  # the set asked about, nothing beside it
        failed = failing.get((int(run), str(cell)), [])
        state = states[(str(night), str(cell))]
        answer.nights.append({"night": night, "cell": cell, "commit": commit, "outcome": outcome, "verdict": meaning,
                              "state": state.state, "due": state.due, "expectation": state.why,
                              "failing": failed[:10], "failed_tests": len(failed),
                              "failed_suites": sorted(suites.get((int(run), str(cell)), set())), "exact": exact})
    cells = {entry["cell"] for entry in answer.nights}
    answer.culprits = [{"cell": c, "last_good": g, "first_bad": b, "culprit": k} for c, g, b, k in store.rows(
        f"SELECT cell, last_good, first_bad, culprit FROM culprits WHERE cell IN ({','.join('?' for _ in cells)})",
        tuple(cells))] if cells else []
    answer.verdict = judge(answer.nights, flaky_tests, annotated, passes)
    answer.why = (failure_kind(answer.nights) if answer.verdict == TESTS_FAIL else
                  expectation_words(answer.nights) if answer.verdict == EXPECTED else "")
    if answer.verdict == UNTESTED:
        answer.nearest = _nearest(store, pins, python)
    return answer


def judge(nights: list[dict[str, Any]], flaky_tests: int, annotated: set[tuple[str, str]], passes: int) -> str:
    """The verdict on a set of wheels from its cells' nights (see the module doc), each night's ``state`` from
    :func:`~jaxrel.history.states.night_states`: one rule for the query and the published feed."""
    expected = [n for n in nights if n.get("state") == EXPECTATION]
    nights = [n for n in nights if n.get("state") != EXPECTATION]
    unexplained = [n for n in nights if n["outcome"] == "failed" and n["verdict"] != "flaky"
                   and (n["cell"], "flaky") not in annotated and (n["cell"], "expected") not in annotated]
    if unexplained or any(n["outcome"] == "refused" and n.get("exact", True) for n in nights):
        return KNOWN_BAD  # a refusal condemns the set refused, not a smaller one inside it (a wrong plugin beside)
    if any(n.get("failed_tests") for n in nights):
        return TESTS_FAIL  # the cell passed (the failures did not fail the run), but tests failed on this set
    if flaky_tests or any(n["verdict"] == "flaky" for n in nights):
        return FLAKY
    if expected:
        return EXPECTED
    if sum(1 for n in nights if n["outcome"] == "passed") >= passes:
        return KNOWN_GOOD
    return UNTESTED


def expectation_words(nights: list[dict[str, Any]]) -> str:
    """An expectation's answer in words: which nights, what is due, and that the set works."""
    expected = [n for n in nights if n.get("state") == EXPECTATION]
    dues = sorted({str(n.get("due", "")) for n in expected} - {""})
    why = next((str(n["expectation"]) for n in expected if n.get("expectation")), "")
    count = f"{len(expected)} night{'s' if len(expected) != 1 else ''}"
    return (f"an expectation on {count}, not a regression ({why}): what its tests judged is due in "
            f"{', '.join(dues) or 'the coming release'}; the set works")


def failure_kind(nights: list[dict[str, Any]]) -> str:
    """Which tests failed on a set, in words: whose tests they are and what that says."""
    suites = {suite for n in nights for suite in n.get("failed_suites", [])}
    failed = [n for n in nights if n.get("failed_tests")]
    count = sum(int(n["failed_tests"]) for n in failed)
    where = f"{count} test{'s' if count != 1 else ''} failed on {len(failed)} night{'s' if len(failed) != 1 else ''}"
    if suites <= {"own"}:
        return (f"{where}: the frontend's own tests (a frontend failure: the wheels fit together, the compat suite "
                "passed)")
    if "own" not in suites:
        return f"{where}: jaxrel's compat suite (an API of the frontend fails with these wheels)"
    return f"{where}: the frontend's own tests and jaxrel's compat suite"


def combo_summaries(store: Store, states: dict[tuple[str, str], State] | None = None) -> list[dict[str, Any]]:
    """Every combo with its pins, Python, cell, verdict and nights: what the published feed says of each set
    (``states``: the store's night states, when the caller has them already)."""
    pins: dict[int, list[str]] = {}
    for combo, name, version in store.rows(
            "SELECT combo_artifacts.combo, artifacts.name, artifacts.version FROM combo_artifacts JOIN artifacts ON "
            "artifacts.id = combo_artifacts.artifact"):
        pins.setdefault(int(combo), []).append(f"{name}=={version}")
    nights: dict[int, list[dict[str, Any]]] = {}
    meta: dict[int, tuple[str, str]] = {}
    for combo, cell, python, night, outcome, meaning in store.rows(
            "SELECT combos.id, combos.cell, combos.python, runs.night, results.outcome, verdicts.verdict FROM results "
            "JOIN runs ON runs.id = results.run JOIN combos ON combos.id = results.combo JOIN verdicts ON verdicts.run "
            "= results.run AND verdicts.cell = combos.cell AND verdicts.test = results.test WHERE results.test = ? "
            "ORDER BY runs.night", (CELL_TEST,)):
        key = int(combo)
        meta[key] = (str(cell), str(python))
        nights.setdefault(key, []).append({"night": str(night), "cell": str(cell), "outcome": str(outcome),
                                           "verdict": str(meaning)})
    flaky = {(str(run), str(cell)) for run, cell in store.rows(
        "SELECT DISTINCT run, cell FROM verdicts WHERE verdict = 'flaky'")}
    explained = {(str(c), str(t)) for c, t in store.rows(
        "SELECT cell, test FROM annotations WHERE kind IN ('flaky', 'expected', 'infra')")}
    failed: dict[tuple[str, str], int] = {}
    for run, cell, test in store.rows(f"SELECT run, cell, test FROM verdicts WHERE verdict IN {FAILED} AND test NOT IN "
                                      "(?, ?)", (CELL_TEST, OWN_TESTS)):
        if not {(str(cell), str(test)), (str(cell), CELL_TEST)} & explained:
            failed[(str(run), str(cell))] = failed.get((str(run), str(cell)), 0) + 1
    runs_of = {(int(c), str(n)): str(r) for c, n, r in store.rows(
        "SELECT results.combo, runs.night, results.run FROM results JOIN runs ON runs.id = results.run "
        "WHERE results.test = ?", (CELL_TEST,))}
    summaries = []
    states = night_states(store) if states is None else states
    for combo, seen in sorted(nights.items()):
        cell, python = meta[combo]
        for n in seen:
            state = states[(n["night"], cell)]
            n.update(state=state.state, due=state.due, expectation=state.why)
        flaky_tests = sum(1 for n in seen if (runs_of.get((combo, n["night"]), ""), cell) in flaky)
        for n in seen:
            n["failed_tests"] = failed.get((runs_of.get((combo, n["night"]), ""), cell), 0)
        verdict = judge(seen, flaky_tests, set(), 1)
        summaries.append({"pins": sorted(pins.get(combo, [])), "python": python, "cell": cell,
                          "verdict": verdict, "why": expectation_words(seen) if verdict == EXPECTED else "",
                          "nights": len(seen), "last_night": seen[-1]["night"]})
    return summaries


def _nearest(store: Store, pins: dict[str, str], python: str | None) -> list[dict[str, Any]]:
    """Up to three tested sets with the most pins in common (ties: the same names first)."""
    wanted = set(pins.items())
    names = set(pins)
    scored = []
    for combo, pairs in _combos(store, {}, python).items():
        common = len(wanted & pairs)
        same_names = len(names & {name for name, _ in pairs})
        if common or same_names:
            scored.append((common, same_names, combo, sorted(f"{n}=={v}" for n, v in pairs)))
    scored.sort(key=lambda item: (-item[0], -item[1], item[2]))
    return [{"pins": pairs, "in_common": common} for common, _, _, pairs in scored[:3]]


def stale_cells(store: Store, nights: int = 3, today: str | None = None) -> list[dict[str, Any]]:
    """Cells seen within the last ``4 × nights`` nights with no result in the last ``nights``: results stopped
    arriving (a runner gone, a job dropped), which no colour on the grid shows by itself."""
    last = max((str(n) for (n,) in store.rows("SELECT night FROM runs")), default=None)
    if last is None:
        return []
    end = datetime.date.fromisoformat(today or last)
    since = (end - datetime.timedelta(days=4 * nights)).isoformat()
    recent = (end - datetime.timedelta(days=nights - 1)).isoformat()
    seen = store.rows("SELECT combos.cell, MAX(runs.night) FROM results JOIN runs ON runs.id = results.run JOIN "
                      "combos ON combos.id = results.combo WHERE runs.night >= ? GROUP BY combos.cell", (since,))
    return [{"cell": str(cell), "last_night": str(night)} for cell, night in seen if str(night) < recent]
