"""The API atlas as a table: API × (jax, jaxlib) → works / fails / removed / not yet, and its three renderings.

Pure: it reads what the atlas cells recorded (the compat suite's outcomes and each test's
``user_properties``, see :mod:`jaxrel.cells.pytest_plugin`) and writes Markdown, JSON and a
single-file HTML page with a filter box. Columns are ordered by jax, then jaxlib release.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from jaxrel.guard import release_of

__all__ = ["Atlas", "CellRun", "Observation", "Row", "build", "html_page", "markdown", "state_of", "to_json"]

WORKS, FAILS, REMOVED, NOT_YET, SKIPPED, NO_CELL = "works", "fails", "removed", "not yet", "skipped", "cell failed"
SYMBOLS = {WORKS: "✓", FAILS: "✗", REMOVED: "⊘", NOT_YET: "·", SKIPPED: "–", NO_CELL: "!"}
API_TEST = "test_api.py::test_api["


@dataclass(frozen=True)
class Observation:
    """One API in one cell: its state and the detail (first error line, removal note, skip reason)."""

    state: str
    detail: str = ""


@dataclass
class CellRun:
    """What one atlas cell (one jax with one jaxlib) recorded."""

    frontend: str
    backend: str
    python: str
    outcomes: dict[str, dict[str, str]] = field(default_factory=dict)  # node id -> {"outcome", "message"}
    properties: dict[str, dict[str, str]] = field(default_factory=dict)  # node id -> the test's user_properties
    timings: dict[str, float] = field(default_factory=dict)
    problem: str | None = None  # why the cell measured nothing (install failed, refused, import failed)

    @property
    def key(self) -> str:
        return f"{self.frontend}/{self.backend}"


INSTALLED = re.compile(r"(?:/[^\s'\"():]+)+/site-packages/")  # a cell environment's absolute path


def state_of(outcome: Mapping[str, str], properties: Mapping[str, str]) -> Observation:
    """The atlas state of one recorded test outcome (a file inside the cell's environment is named from
    ``site-packages/`` on: where the environment lay is not part of the measurement)."""
    kind, api_state = outcome.get("outcome", ""), properties.get("api_state", "")
    message = INSTALLED.sub("site-packages/", outcome.get("message", ""))
    if kind == "passed":
        return Observation(REMOVED, api_state) if api_state.startswith("removed") else Observation(WORKS)
    if kind == "skipped":
        if api_state == NOT_YET:
            return Observation(NOT_YET, message)
        if message == "xfail":
            return Observation(FAILS, "known failure (xfail)")
        return Observation(SKIPPED, message)
    return Observation(FAILS, message)


def api_name(nodeid: str) -> str:
    """``test_api.py::test_api[jax.lax.pcast]`` → ``jax.lax.pcast``; other tests keep their node id."""
    return nodeid[len(API_TEST):-1] if nodeid.startswith(API_TEST) and nodeid.endswith("]") else nodeid


@dataclass(frozen=True)
class Documented:
    removed_in: str
    text: str


@dataclass
class Row:
    api: str
    cells: dict[str, Observation]  # column key (jax/jaxlib) -> observation
    since: str | None = None  # the first jax release the suite declares it for (``needs(jax=...)``)
    first_works: str | None = None  # the oldest measured jax where it works on some jaxlib
    removed_in: str | None = None  # the oldest measured jax where it is removed
    last_works: str | None = None  # the newest measured jax below ``removed_in`` where it still works
    replaced_by: str | None = None
    documented: Documented | None = None  # the removal the suite declares ("removed in X → use Y")
    mismatch: str | None = None  # documented boundary vs measured, when they disagree
    jaxlib_sensitive: str | None = None  # declared: why backends of one jax can differ
    differs_by_jaxlib: list[str] = field(default_factory=list)  # measured: jax releases whose backends disagree


@dataclass
class Atlas:
    date: str
    columns: list[CellRun]
    rows: list[Row]
    note: str = ""  # how and where it was measured

    @property
    def frontends(self) -> list[str]:
        return list(dict.fromkeys(run.frontend for run in self.columns))


def _key(version: str) -> tuple[int, ...]:
    return release_of(version).key


def _boundary_mismatch(row: Row, columns: Sequence[CellRun]) -> str | None:
    """Where the documented removal and the measured states disagree, in one line."""
    if row.documented is None:
        return None
    version = row.documented.removed_in
    wrong = [run.key for run in columns if (obs := row.cells.get(run.key)) and obs.state in (WORKS, FAILS, REMOVED)
             and (obs.state == REMOVED) != (_key(run.frontend) >= _key(version))]
    if not wrong:
        return None
    return f"documented: removed in {version}; measured otherwise on {', '.join(wrong)}"


def _documented(note: str) -> Documented | None:
    if not note.startswith("removed in "):
        return None
    return Documented(note.removeprefix("removed in ").split(" ", 1)[0], note)


def build(runs: Sequence[CellRun], date: str, note: str = "") -> Atlas:
    """The atlas of ``runs``: one row per API (the compat suite's ``test_api`` first, then its other tests)."""
    columns = sorted(runs, key=lambda r: (_key(r.frontend), _key(r.backend)))
    names: dict[str, str] = {}  # api -> node id, in the order first seen
    for run in columns:
        for nodeid in run.outcomes:
            names.setdefault(api_name(nodeid), nodeid)
    ordered = sorted(names, key=lambda name: not names[name].startswith(API_TEST))
    rows = []
    for name in ordered:
        nodeid = names[name]
        row = Row(name, {})
        for run in columns:
            if run.problem is not None and not run.outcomes:
                row.cells[run.key] = Observation(NO_CELL, run.problem)
                continue
            if nodeid not in run.outcomes:
                continue
            props = run.properties.get(nodeid, {})
            row.cells[run.key] = state_of(run.outcomes[nodeid], props)
            row.replaced_by = row.replaced_by or props.get("replaced_by")
            row.jaxlib_sensitive = row.jaxlib_sensitive or props.get("jaxlib_sensitive")
            row.since = row.since or props.get("since")
            if (documented := _documented(props.get("api_state", ""))) is not None:
                row.documented = row.documented or documented
        if not any(obs.state in (WORKS, FAILS, REMOVED) for obs in row.cells.values()):
            continue  # never ran here (no GPU, no plugin, no extension wheel): not an API row of this machine
        works = [r.frontend for r in columns if row.cells.get(r.key, Observation("")).state == WORKS]
        gone = [r.frontend for r in columns if row.cells.get(r.key, Observation("")).state == REMOVED]
        row.first_works = works[0] if works else None
        row.removed_in = gone[0] if gone else None
        if row.removed_in is not None:
            before = [f for f in works if _key(f) < _key(row.removed_in)]
            row.last_works = before[-1] if before else None
        row.mismatch = _boundary_mismatch(row, columns)
        by_frontend: dict[str, set[str]] = {}
        for run in columns:
            if run.key in row.cells and row.cells[run.key].state != NO_CELL:
                by_frontend.setdefault(run.frontend, set()).add(row.cells[run.key].state)
        row.differs_by_jaxlib = [f for f, states in by_frontend.items() if len(states) > 1]
        rows.append(row)
    return Atlas(date, columns, rows, note)


# -- renderings ------------------------------------------------------------------------------------


def _documented_text(row: Row) -> str | None:
    return row.documented.text if row.documented else None


def _removed_text(row: Row) -> str:
    """``0.10.0 → use jax.lax.pcast (measured: works 0.9.2, removed 0.10.2)``: the documented release when the
    measurement agrees, else the first measured one; ``(→ Y)`` for an API that still works but has a successor."""
    if row.removed_in is None:
        return f"(→ {row.replaced_by})" if row.replaced_by else ""
    use = f" → use {row.replaced_by}" if row.replaced_by else ""
    measured = f"removed {row.removed_in}" + (f", works {row.last_works}" if row.last_works else "")
    if row.documented is not None and row.mismatch is None:
        return f"{row.documented.removed_in}{use} (measured: {measured})"
    return f"{row.removed_in}{use} (first measured; documented: {row.documented.removed_in if row.documented else '-'})"


def _works_text(row: Row) -> str:
    """``0.8.2 (measured 0.8.3)``: the declared first release when the oldest measured one that works is at or
    after it and every measured release before it is "not yet"; else the oldest measured release that works."""
    if row.first_works is None:
        return ""
    if row.since is None or _key(row.first_works) < _key(row.since):
        return row.first_works
    earlier = [obs.state for key, obs in row.cells.items() if _key(key.split("/")[0]) < _key(row.first_works)]
    if any(state != NOT_YET for state in earlier):
        return row.first_works
    return row.first_works if row.first_works == row.since else f"{row.since} (measured {row.first_works})"


def _flag(row: Row) -> str:
    return " ◆" if row.jaxlib_sensitive or row.differs_by_jaxlib else ""


def to_json(atlas: Atlas) -> dict[str, Any]:
    return {
        "date": atlas.date,
        "note": atlas.note,
        "columns": [{"key": r.key, "jax": r.frontend, "jaxlib": r.backend, "python": r.python,
                     "timings": {k: round(v, 3) for k, v in r.timings.items()}, "problem": r.problem}
                    for r in atlas.columns],
        "rows": [{"api": row.api, "since": row.since, "first_works": row.first_works,
                  "removed_in": row.removed_in,
                  "replaced_by": row.replaced_by, "documented": _documented_text(row), "mismatch": row.mismatch,
                  "jaxlib_sensitive": row.jaxlib_sensitive, "differs_by_jaxlib": row.differs_by_jaxlib,
                  "cells": {key: asdict(obs) for key, obs in row.cells.items()}}
                 for row in atlas.rows],
    }


def _escape_md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(atlas: Atlas) -> str:
    """The atlas as a Markdown page (docs/atlas.md)."""
    legend = ", ".join(f"{symbol} {state}" for state, symbol in SYMBOLS.items())
    lines = [
        "# API atlas", "",
        f"Measured {atlas.date}. {atlas.note}".rstrip(), "",
        "Which API of the compat suite works on which jax + jaxlib release, measured on real wheels by "
        "`jaxrel atlas` (`nox -s atlas`): each jax release against its oldest and newest admitted jaxlib. "
        "Columns are `jax/jaxlib`. \"first works\" is the first jax release the API works in: the one the suite "
        "declares, with the oldest measured release where it works, when the measurement agrees; \"removed in\" "
        "the jax release where the old spelling fails and its replacement works (the documented one when the "
        "measurement brackets it, with the measured releases on either side). ◆ marks the rows whose "
        "result can differ between backends of one jax (declared by the suite, or measured here).", "",
        f"Legend: {legend}.", "",
        "How: `jaxrel atlas` builds each cell's environment as `jaxrel compat` does (the jax wheel from the "
        "index, the jaxlib wheel verified against it, uv's shared cache) and runs the guard, `import jax` and "
        "the compat suite in one interpreter. Each API is one test, `test_api[NAME]`, checking a result "
        "numerically or structurally; `needs(jax=...)` skips it as \"not yet\" before its first release, and "
        "`needs(until=..., replaced_by=...)` makes it assert, from that release on, that the old spelling fails "
        "and the replacement works. The compat suite's other tests follow as rows of their own.", "",
    ]
    lines += [html_table(atlas), ""]
    mismatches = [row for row in atlas.rows if row.mismatch]
    lines += ["", "## Documented and measured boundaries", ""]
    lines += ([f"- `{row.api}`: {_escape_md(row.mismatch or '')}" for row in mismatches]
              or ["Every documented removal matched the measured boundary."])
    flagged = [row for row in atlas.rows if row.jaxlib_sensitive or row.differs_by_jaxlib]
    if flagged:
        lines += ["", "## jaxlib-sensitive rows (◆)", ""]
        for row in flagged:
            why = [row.jaxlib_sensitive] if row.jaxlib_sensitive else []
            if row.differs_by_jaxlib:
                why.append("measured: differs between the jaxlibs of jax " + ", ".join(row.differs_by_jaxlib))
            lines.append(f"- `{row.api}`: {_escape_md('; '.join(why))}")
    details = [(row, run.key, obs) for row in atlas.rows for run in atlas.columns
               if (obs := row.cells.get(run.key)) and obs.state in (FAILS, NO_CELL)]
    if details:
        lines += ["", "## Failures (first error line)", ""]
        lines += [f"- `{row.api}` on {key}: {_escape_md(obs.detail)[:300]}" for row, key, obs in details]
    lines += ["", "## Cells", "", "| jax/jaxlib | Python | " + " | ".join(TIMING_NAMES) + " | problem |",
              "|---|---|" + "---|" * (len(TIMING_NAMES) + 1)]
    for run in atlas.columns:
        times = [f"{run.timings[name]:.1f} s" if name in run.timings else "" for name in TIMING_NAMES]
        lines.append(f"| {run.key} | {run.python} | " + " | ".join(times) + f" | {_escape_md(run.problem or '')} |")
    return "\n".join(lines) + "\n"


TIMING_NAMES = ("environment", "guard", "import jax", "suite", "cell")

STYLE = """
table#atlas { border-collapse: collapse; font-size: 13px; }
#atlas th, #atlas td { border: 1px solid #ccc; padding: 2px 6px; text-align: center; white-space: nowrap; }
#atlas td.api { text-align: left; font-family: monospace; }
#atlas td.works { background: #d8f5d0; } #atlas td.fails { background: #f8d0d0; }
#atlas td.removed { background: #e4dcf8; } #atlas td.not-yet { background: #f2f2f2; }
#atlas td.cell-failed { background: #f8e8c0; }
#atlas tr[hidden] { display: none; }
"""
# the docs site (furo): the atlas page takes the whole width, the table scrolls inside it
DOCS_STYLE = STYLE + """
.main:has(#atlas) { min-width: 0; }
.main:has(#atlas) .content { width: auto; flex: 1 1 auto; min-width: 0; }
#atlas td.api { white-space: normal; min-width: 21em; max-width: 28em; overflow-wrap: anywhere; }
#atlas td:nth-child(2) { white-space: normal; min-width: 6em; font-size: 12px; }
#atlas td:nth-child(3) { white-space: normal; min-width: 13em; max-width: 17em; font-size: 12px; }
.main:has(#atlas) .toc-drawer { display: none; }
.atlas-scroll { overflow-x: auto; max-width: 100%; }
table#atlas { width: auto; margin: 0; }
#atlas td, #atlas th { color: #222; line-height: 1.3; }
"""
SCRIPT = """
(function () {
  const table = document.getElementById("atlas");
  const box = document.getElementById("filter");
  if (!table || !box) return;
  function applyFilter(text) {
    const words = text.toLowerCase().split(/\\s+/).filter(Boolean);
    let shown = 0;
    const rows = table.querySelectorAll("tbody tr");
    for (const row of rows) {
      const hay = row.textContent.toLowerCase() + " " + (row.dataset.search || "");
      const keep = words.every(w => hay.includes(w));
      row.hidden = !keep;
      if (keep) shown++;
    }
    document.getElementById("count").textContent = shown + " of " + rows.length + " rows";
  }
  box.addEventListener("input", () => applyFilter(box.value));
  const initial = new URLSearchParams(location.hash.slice(1)).get("filter");
  if (initial) box.value = initial;
  applyFilter(box.value);
})();
"""
PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>jaxrel API atlas {date}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; }}
{style}
</style></head><body>
<h1>jaxrel API atlas</h1>
<p>Measured {date}. {note}</p>
{table}
<script>{script}</script>
</body></html>
"""


def html_table(atlas: Atlas) -> str:
    """The filter box and the coloured table as one HTML block without blank lines: the standalone page's
    body, and a raw HTML block of the Markdown page (the docs site adds :data:`DOCS_STYLE` and :data:`SCRIPT`)."""
    esc = html.escape
    heads = "".join(f"<th>{esc(run.frontend)}<br>{esc(run.backend)}</th>" for run in atlas.columns)
    rows = []
    for row in atlas.rows:
        cells = []
        for run in atlas.columns:
            obs = row.cells.get(run.key)
            if obs is None:
                cells.append("<td></td>")
                continue
            title = f"{obs.state}: {obs.detail}" if obs.detail else obs.state
            cells.append(f'<td class="{obs.state.replace(" ", "-")}" title="{esc(title)}">'
                         f"{esc(SYMBOLS.get(obs.state, '?'))}</td>")
        states = " ".join(sorted({obs.state for obs in row.cells.values()}))
        rows.append(f'<tr data-search="{esc(states)}"><td class="api">{esc(row.api)}{esc(_flag(row))}</td>'
                    f"<td>{esc(_works_text(row))}</td><td>{esc(_removed_text(row))}</td>{''.join(cells)}</tr>")
    return "\n".join([
        '<div class="atlas-scroll"><p><label>Filter: <input id="filter" type="search" '
        'placeholder="API name, state or release"></label> <span id="count"></span></p>',
        f'<table id="atlas"><thead><tr><th>API</th><th>first works</th><th>removed in</th>{heads}</tr></thead>',
        "<tbody>", *rows, "</tbody></table></div>",
    ])


def html_page(atlas: Atlas) -> str:
    """The atlas as one self-contained HTML page; ``#filter=TEXT`` in the URL pre-fills the filter box."""
    esc = html.escape
    return PAGE.format(date=esc(atlas.date), note=esc(atlas.note), style=STYLE.strip(), table=html_table(atlas),
                       script=SCRIPT)


def dumps(atlas: Atlas) -> str:
    return json.dumps(to_json(atlas), indent=1, ensure_ascii=False) + "\n"
