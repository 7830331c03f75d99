"""Find and judge api-version gates in a frontend's source tree.

A *gate* is code that branches on the backend's API number, however it is spelled::

    if jaxlib_extension_version >= 503: ...              # either operand order, any comparison
    x = new() if lib.xla_extension_version > 270 else old()
    from jax._src.lib import jaxlib_extension_version as v
    @unittest.skipIf(v < 300 or not ok, "needs a newer jaxlib")

:func:`find_gates` parses every ``.py`` file with ``ast`` (:mod:`jaxrel.gates.find`; files this
interpreter cannot parse are re-read by the newest Python found here). :func:`judge` decides
each comparison for the supported backend releases (minimum .. newest, API numbers measured
from the real wheels) and evaluates the whole condition in three-valued logic. A gate is

- ``always-true`` / ``always-false``: the same on every supported release and at HEAD;
- ``live``: both sides reachable within the supported releases;
- ``ahead``: the same on every release, the other side reachable only with a backend built at
  HEAD (an API number above every release's);
- ``unknown``: it depends on something undecidable (an API number not readable from the
  wheels, or other code); never rewritten.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from packaging.version import Version

from jaxrel import policy
from jaxrel._util import localfiles, procs
from jaxrel.distributions.pythons import find_pythons
from jaxrel.errors import BadInput
from jaxrel.family import Family
from jaxrel.gates import find as gatefind

__all__ = ["Comparison", "Condition", "Gate", "GateVerdict", "Judgement", "Releases", "VERDICTS", "Value", "evaluate",
    "find_gates", "judge", "judge_all", "release_spellings", "release_tuple"]


class GateVerdict(StrEnum):
    """What a gate's condition does over the supported releases (and a backend built at HEAD)."""

    ALWAYS_TRUE = "always-true"
    ALWAYS_FALSE = "always-false"
    LIVE = "live"
    AHEAD = "ahead"
    UNKNOWN = "unknown"


VERDICTS = tuple(GateVerdict)
Condition = dict[str, Any]
Value = int | tuple[int, ...]  # an API number, or a release as the frontend's code sees it: (0, 10, 2)


@dataclass(frozen=True)
class Comparison:
    """``number OP threshold`` with the API number (or the backend's release) on the left."""

    number: str
    op: str
    threshold: Value
    line: int
    col: int

    def holds(self, value: Value) -> bool:
        if isinstance(value, int) != isinstance(self.threshold, int):
            return False  # an API number against a tuple: never equal, and never produced by the finder
        v: Any = value
        t: Any = self.threshold
        return bool({">=": v >= t, "<=": v <= t, ">": v > t, "<": v < t, "==": v == t, "!=": v != t}[self.op])

    @property
    def boundary(self) -> Value:
        """The smallest value on the upper side of the threshold."""
        return _above(self.threshold) if self.op in (">", "<=") else self.threshold

    def upper(self, value: Value) -> bool:
        """``value`` lies on the threshold's upper side (at least :attr:`boundary`)."""
        return Comparison(self.number, ">=", self.boundary, 0, 0).holds(value)

    def __str__(self) -> str:
        return f"{self.number} {self.op} {self.threshold}"


@dataclass(frozen=True)
class Gate:
    """A condition holding API-number comparisons, where it is and how it is used."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int
    kind: str  # if | elif | while | ternary | assert | skip-decorator | expression
    source: str
    comparisons: tuple[Comparison, ...]
    condition: Condition = field(compare=False, repr=False)
    skips_when_true: bool | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Gate:
        comparisons = tuple(Comparison(**{**c, "threshold": tuple(c["threshold"]) if isinstance(c["threshold"], list)
                                          else c["threshold"]}) for c in data["comparisons"])
        return cls(data["file"], data["line"], data["col"], data["end_line"], data["end_col"], data["kind"],
                   data["source"], comparisons, data["condition"], data.get("skips_when_true"))


def _name_tables(family: Family) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    names = {name: number.name for number in family.api_numbers for name in number.names}
    raw = [(Path(number.file).stem, number.variable, number.name) for number in family.api_numbers]
    return names, raw


def release_spellings(family: Family) -> tuple[str, list[str]] | None:
    """The backend release's name in comparisons and how the frontend spells it (``None``: not declared)."""
    spellings = family.backend.release_spellings
    return (family.backend.distribution, list(spellings)) if spellings else None


def find_gates(tree: Path, family: Family,
               texts: dict[str, str] | None = None) -> tuple[list[Gate], dict[str, str]]:
    """Every gate under ``tree`` and the files that could not be parsed (file -> reason).

    ``texts`` (optional) receives the text of every file read, for a fix that needs them again.
    """
    names, raw = _name_tables(family)
    release = release_spellings(family)
    files = list(gatefind.python_files(str(tree)))
    found, failed = gatefind.scan(str(tree), files, names, {(s, v): n for s, v, n in raw},
                                  gatefind.Release(*release) if release else None, texts, processes=None)
    if failed:
        retried, failed = _scan_with_newer_python(tree, sorted(failed), names, raw, release, failed)
        found += retried
    gates = [Gate.from_json(g) for g in found]
    return sorted(gates, key=lambda g: (g.file, g.line, g.col)), failed


def _scan_with_newer_python(tree: Path, files: list[str], names: dict[str, str], raw: list[tuple[str, str, str]],
                            release: tuple[str, list[str]] | None,
                            failed: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Re-read ``files`` with the newest interpreter here (new syntax); what still fails stays failed."""
    pythons = find_pythons()
    running = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if not pythons or list(pythons)[-1] == running:  # nothing newer: it would fail the same way
        return [], failed
    newest = list(pythons.values())[-1]  # find_pythons sorts by version
    request = json.dumps({"root": str(tree), "files": files, "names": names, "raw": raw, "release": release})
    package_parent = str(Path(gatefind.__file__).resolve().parents[1])
    done = procs.run([newest.executable, "-c", "import sys; from jaxrel.gates.find import main; sys.exit(main())",
                           request], env={"PYTHONPATH": package_parent},
                          timeout=600)
    if done.returncode != 0:
        return [], failed
    try:
        answer = localfiles.loads_json(done.stdout, f"the gate scan under Python {newest.version}")
    except BadInput:
        return [], failed
    if not (isinstance(answer, dict) and isinstance(answer.get("gates"), list)
            and isinstance(answer.get("failed"), dict)):
        return [], failed
    return answer["gates"], answer["failed"]


# -- judging -----------------------------------------------------------------------------------------


def _all(results: Sequence[bool | None]) -> bool | None:
    """Three-valued ``and``: False wins, then unknown."""
    return False if False in results else None if None in results else True


def evaluate(condition: Condition, comparisons: Sequence[Comparison],
             values: Mapping[str, Value | None]) -> bool | None:
    """``condition`` in three-valued logic: comparisons from ``values``; anything else is unknown (None)."""
    if "and" in condition or "or" in condition:
        operands: list[Condition] = condition["and"] if "and" in condition else condition["or"]
        results = [evaluate(c, comparisons, values) for c in operands]
        if "and" in condition:
            return _all(results)
        return True if True in results else None if None in results else False
    if "not" in condition:
        inner = evaluate(condition["not"], comparisons, values)
        return None if inner is None else not inner
    if "cmp" in condition:
        parts = []
        for index in condition["cmp"]:
            value = values.get(comparisons[index].number)
            parts.append(None if value is None else comparisons[index].holds(value))
        return _all(parts)
    return None


def release_tuple(version: str | Version) -> tuple[int, ...]:
    """A release as the frontend's code sees it: the numbers of its dotted prefix (``0.9.0.1`` → (0, 9, 0, 1))."""
    return Version(str(version)).release


@dataclass(frozen=True)
class Releases:
    """Every known backend release's API numbers (``None``: not readable) and the supported minimum.

    ``release`` names the backend's own release among the numbers (``jaxlib``: (0, 10, 2) for
    0.10.2), for gates on the release tuple.
    """

    numbers: dict[str, dict[str, Value | None]]
    minimum: Version
    maximum: Version | None = None  # the frontend's own version: no backend newer than it is supported
    release: str | None = None

    @classmethod
    def from_family(cls, family: Family, minimum: Version, maximum: Version | None = None) -> Releases:
        release = family.backend.distribution if family.backend.release_spellings else None
        numbers: dict[str, dict[str, Value | None]] = {}
        for version, row in family.backend_releases.items():
            numbers[version] = {n.name: row[n.name] if isinstance(row.get(n.name), int) else None
                                for n in family.api_numbers}
            if release:
                numbers[version][release] = release_tuple(version)
        return cls(numbers, minimum, maximum, release)

    @property
    def ordered(self) -> list[str]:
        return sorted(self.numbers, key=Version)

    @property
    def supported(self) -> list[str]:
        return [v for v in self.ordered if Version(v) >= self.minimum
                and (self.maximum is None or policy.release_key(Version(v)) <= policy.release_key(self.maximum))]

    def first_at_least(self, number: str, value: Value) -> str | None:
        """The oldest release whose ``number`` is at least ``value``."""
        return self.first_upper(Comparison(number, ">=", value, 0, 0))

    def first_upper(self, comparison: Comparison) -> str | None:
        """The oldest release on the upper side of ``comparison``'s threshold."""
        return next((v for v in self.ordered if (value := self.numbers[v].get(comparison.number)) is not None
                     and comparison.upper(value)), None)

    def newest(self, number: str) -> Value | None:
        """The highest value of ``number`` among the supported releases (HEAD lies above it)."""
        known = [v for version in self.supported if (v := self.numbers[version].get(number)) is not None]
        return max(known) if known else None  # one kind per number


@dataclass
class Judgement:
    """A gate's verdict for the supported releases, each comparison's, and which releases give which side."""

    gate: Gate
    verdict: GateVerdict
    reason: str
    comparisons: dict[str, GateVerdict]  # "number op N" -> verdict of that comparison alone
    first_releases: dict[str, str | None]  # "number op N" -> first release on the threshold's upper side
    sides: dict[str, list[str]]  # "true"/"false" -> supported releases giving that side

    def to_json(self) -> dict[str, Any]:
        gate = self.gate
        return {"file": gate.file, "line": gate.line, "col": gate.col, "kind": gate.kind, "source": gate.source,
                "verdict": self.verdict, "reason": self.reason, "comparisons": self.comparisons,
                "first_releases": self.first_releases, "sides": self.sides}


def _above(value: Value) -> Value:
    """The next value after ``value``: N + 1, or a tuple one longer ((0, 10) < (0, 10, 0))."""
    return value + 1 if isinstance(value, int) else (*value, 0)


def _head_samples(comparisons: Sequence[Comparison], releases: Releases) -> list[dict[str, Value | None]]:
    """Values a backend built at HEAD may have: API numbers above every release and at each threshold
    beyond; its release is the frontend's own version (jax and jaxlib are versioned together)."""
    choices: dict[str, list[Value]] = {}
    for comparison in comparisons:
        newest: Any = releases.newest(comparison.number)
        if newest is None:
            continue
        if comparison.number == releases.release and releases.maximum is not None:
            choices[comparison.number] = [release_tuple(releases.maximum)]
            continue
        thresholds: list[Any] = [t for c in comparisons if c.number == comparison.number
                                 for t in (c.threshold, _above(c.threshold))]
        beyond = {t for t in thresholds if type(t) is type(newest) and t > newest}
        choices[comparison.number] = sorted({_above(newest)} | beyond)
    keys = sorted(choices)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(choices[k] for k in keys))]


def _verdict(outcomes: set[bool | None], at_head: set[bool | None]) -> GateVerdict:
    if None in outcomes or not outcomes:
        return GateVerdict.UNKNOWN
    if outcomes == {True, False}:
        return GateVerdict.LIVE
    (constant,) = outcomes
    if at_head - {None, constant}:
        return GateVerdict.AHEAD
    return GateVerdict.ALWAYS_TRUE if constant else GateVerdict.ALWAYS_FALSE


def judge(gate: Gate, releases: Releases) -> Judgement:
    """Decide ``gate`` over ``releases.supported`` and a HEAD backend."""
    supported = releases.supported
    head = _head_samples(gate.comparisons, releases)
    per_comparison, first = {}, {}
    for index, comparison in enumerate(gate.comparisons):
        alone = {"cmp": [index]}
        seen = {evaluate(alone, gate.comparisons, releases.numbers[v]) for v in supported}
        per_comparison[str(comparison)] = _verdict(seen, {evaluate(alone, gate.comparisons, h) for h in head})
        known = releases.newest(comparison.number) is not None
        first[str(comparison)] = releases.first_upper(comparison) if known else "unknown"
    outcomes = {v: evaluate(gate.condition, gate.comparisons, releases.numbers[v]) for v in supported}
    verdict = _verdict(set(outcomes.values()), {evaluate(gate.condition, gate.comparisons, h) for h in head})
    sides = {side: [v for v, o in outcomes.items() if o is value] for side, value in (("true", True), ("false", False))}
    return Judgement(gate, verdict, _reason(verdict, gate, releases, outcomes), per_comparison, first, sides)


def _reason(verdict: str, gate: Gate, releases: Releases, outcomes: Mapping[str, bool | None]) -> str:
    supported = releases.supported
    span = f"{supported[0]}..{supported[-1]}" if supported else "no supported release"
    if verdict == GateVerdict.UNKNOWN:
        unknown = sorted({c.number for c in gate.comparisons
                          if any(releases.numbers[v].get(c.number) is None for v in supported)})
        if unknown:
            return f"{', '.join(unknown)} is not known for every release {span} (not readable from the wheels)"
        return "depends on code other than API numbers"
    if verdict == GateVerdict.LIVE:
        trues = sum(o is True for o in outcomes.values())
        return f"true on {trues}, false on {len(outcomes) - trues} of the releases {span}"
    if verdict == GateVerdict.AHEAD:
        side = "true" if True in outcomes.values() else "false"
        return f"{side} on every release {span}; the other side needs a backend built at HEAD"
    return f"{verdict.removeprefix('always-')} on every release {span} and at HEAD"


def judge_all(gates: Iterable[Gate], releases: Releases) -> list[Judgement]:
    return [judge(gate, releases) for gate in gates]
