"""The Crater's library cards (``jaxrel/data/downstream-cards.toml``): for each library built on the family, where
its tests come from, the selection, the test requirements it does not declare, the frontend requirement to assume
when it declares none, its budget, and why it is slow or skipped. Parsed once, here, into :class:`Card`.

The Crater, a ``--libraries`` line naming a carded library (its own options first) and the nightly's shards read the
same data; :func:`shard` splits the runnable cards over a CI matrix by their expected times.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from jaxrel._util import localfiles
from jaxrel.errors import BadInput

__all__ = ["DEFAULT_BUDGET", "MARGIN", "Card", "Learned", "budget_for", "load_cards", "parse_cards", "parse_shard",
           "shard"]

DEFAULT_BUDGET = 900.0  # seconds: a library seen for the first time, without a card's budget or a passing run
MARGIN = 3.0  # a learned budget: the last passing run's time times this (a busy machine, a colder cache) …
FLOOR = 120.0  # … and never below this (environments and imports vary more than tests on short suites)
ROUTES = ("sdist", "repository", "smoke")
_KEYS = {"layer", "route", "tests", "keyword", "test_requirements", "assume", "budget", "slow", "skip", "repository",
         "smoke", "files", "tag", "why"}


@dataclass(frozen=True)
class Card:
    """One library's card."""

    name: str  # canonical
    layer: str
    route: str = "sdist"
    tests: tuple[str, ...] = ()
    keyword: str | None = None
    test_requirements: tuple[str, ...] = ()
    assume: str | None = None  # "jax>=0.4.24": for a library that declares no requirement on the frontend
    budget: float | None = None
    slow: str = ""
    skip: str = ""
    repository: str | None = None  # where its tests are when not the Project-URL of its METADATA
    smoke: str | None = None
    files: tuple[str, ...] = ()  # more paths of its tree its tests read (data files by the repository's paths)
    tag: str | None = None  # its releases' tag format when not vX, X, NAME-vX: "v.{version}"
    why: str = ""  # why its route or selection is what it is, where its sdist does not show it

    @property
    def runnable(self) -> bool:
        return not self.skip


@dataclass(frozen=True)
class Learned:
    """What the history store holds of a library's last passing Crater run (its test run's time and peak)."""

    seconds: float
    peak_bytes: int | None
    night: str


def budget_for(card: Card | None, learned: Learned | None, default: float) -> tuple[float, str]:
    """A library's budget for one test run and where it came from: its last passing run's time times
    :data:`MARGIN` (at least :data:`FLOOR`), else its card's budget, else ``default`` (a library seen for the first
    time)."""
    if learned is not None:
        return (max(FLOOR, round(learned.seconds * MARGIN)),
                f"learned: {learned.seconds:.0f} s on {learned.night} × {MARGIN:g}")
    if card is not None and card.budget is not None:
        return card.budget, "its card"
    return default, "the default: no card budget, no passing run kept"


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise BadInput(f"{where}: not a list of strings; write it as [\"…\", \"…\"]")
    return tuple(value)


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{where}: not a non-empty string; write it as \"…\"")
    return value


def _card(name: str, table: object, source: str) -> Card:
    where = f"{source}: [cards.{name}]"
    if not isinstance(table, Mapping):
        raise BadInput(f"{where} is not a table; give its keys under [cards.{name}]")
    if canonicalize_name(name) != name:
        raise BadInput(f"{where}: write the name as the index does ({canonicalize_name(name)})")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise BadInput(f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(sorted(_KEYS))}")
    values: dict[str, Any] = {"layer": _text(table.get("layer"), f"{where} layer")}
    for key in ("keyword", "assume", "slow", "skip", "repository", "smoke", "tag", "why"):
        if key in table:
            values[key] = _text(table[key], f"{where} {key}")
    if "{version}" not in values.get("tag", "{version}"):
        raise BadInput(f"{where} tag: {values['tag'][:40]!r} does not hold {{version}}; write it as \"v.{{version}}\"")
    for key in ("tests", "test_requirements", "files"):
        if key in table:
            values[key] = _strings(table[key], f"{where} {key}")
    route = table.get("route", "sdist")
    if route not in ROUTES:
        raise BadInput(f"{where} route: {str(route)[:40]!r} is not one of {', '.join(ROUTES)}")
    values["route"] = route
    if route == "smoke" and "smoke" not in values:
        raise BadInput(f"{where}: route \"smoke\" needs the smoke code (smoke = \"…\")")
    if "budget" in table:
        budget = table["budget"]
        if isinstance(budget, bool) or not isinstance(budget, int | float) or not 0 < budget < 86400:
            raise BadInput(f"{where} budget: {str(budget)[:20]!r} is not a number of seconds below a day")
        values["budget"] = float(budget)
    checked = [("assume", values["assume"])] if "assume" in values else []
    for key, text in [*checked, *(("test_requirements", t) for t in values.get("test_requirements", ()))]:
        try:
            Requirement(text)
        except InvalidRequirement as error:
            raise BadInput(f"{where} {key}: {text[:60]!r} is not a requirement "
                           f"({str(error).splitlines()[0]})") from None
    return Card(name=name, **values)


def parse_cards(text: str, source: str) -> dict[str, Card]:
    """The cards of a TOML document, by canonical name; :class:`BadInput` naming the card and key at the first
    problem."""
    data = localfiles.loads_toml(text, source)
    tables = data.get("cards")
    if not isinstance(tables, Mapping) or not tables:
        raise BadInput(f"{source}: no [cards.NAME] table; give one per library")
    return {name: _card(name, table, source) for name, table in tables.items()}


def load_cards(path: Path | None = None) -> dict[str, Card]:
    """The cards in ``path``, or jaxrel's own (``jaxrel/data/downstream-cards.toml``)."""
    if path is not None:
        return parse_cards(localfiles.read_text(path, what="the cards file"), str(path))
    text = resources.files("jaxrel").joinpath("data/downstream-cards.toml").read_text(encoding="utf-8")
    return parse_cards(text, "jaxrel/data/downstream-cards.toml")


def parse_shard(text: str) -> tuple[int, int]:
    """``--shard I/N`` (1 ≤ I ≤ N) as ``(I, N)``."""
    index, sep, count = text.partition("/")
    if not (sep and index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise BadInput(f"--shard {text[:20]!r}: give I/N with 1 ≤ I ≤ N (e.g. --shard 2/4)")
    return int(index), int(count)


def shard(names: Sequence[str], seconds: Mapping[str, float], index: int, count: int) -> list[str]:
    """The libraries of shard ``index`` of ``count`` (1-based): longest first, each to the shard with the least time
    so far (ties: the lowest shard), so the shards' expected times are even. ``seconds``: each library's expected
    time (its recorded one, else its budget); the split depends on nothing else, so every job of a matrix computes
    the same one."""
    loads = [0.0] * count
    chosen: list[list[str]] = [[] for _ in range(count)]
    for name in sorted(names, key=lambda n: (-seconds.get(n, DEFAULT_BUDGET), n)):
        lightest = min(range(count), key=lambda i: (loads[i], i))
        loads[lightest] += seconds.get(name, DEFAULT_BUDGET)
        chosen[lightest].append(name)
    return sorted(chosen[index - 1])
