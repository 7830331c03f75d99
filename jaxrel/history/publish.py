"""The HUD: a static site from the store, for ``file://`` and GitHub Pages alike (no server, no fetch).

- ``index.html``: nights (newest first) × cells, each square the cell's verdict that night; a cell
  with no result that night is an empty square (cells come and go as backends are released), a filter
  box hides the columns that do not match;
- ``cells/<cell>.html``: one cell night by night (commit, outcome, verdict, failing tests, the
  culprit where bisect named one, the command that reproduces it);
- ``regressions/<cell>@<commit>.html``: one regression (its failing tests, error signature, last good and
  first bad commits, the culprit bisect named with its log, its state, the commands that reproduce and
  bisect it);
- ``downstream.html``: the libraries built on the frontend (``jaxrel downstream``'s cells) × nights;
- ``flaky.html``: tests that were flaky, how often and where;
- ``regressions.atom``: an Atom feed of new regressions;
- ``api/v1/``: ``matrix.json`` (every night × cell), ``combos.json`` (each set of wheels: its pins,
  Python, cell, verdict and nights: what ``--history`` on ``verdict`` and ``doctor`` reads),
  ``culprits.json``, ``regressions.json``, ``stale.json``: versioned JSON for other tools (the page
  embeds the same data, so it works without fetching it).

The commit link pattern is configurable (``--commit-url``, GitHub's commit URL by default).
"""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from jaxrel._util.atomic import write_all_atomically
from jaxrel.bisect.command import command as bisect_command
from jaxrel.history.bisect_new import MAX_TESTS, bisect_files
from jaxrel.history.query import combo_summaries, stale_cells
from jaxrel.history.regressions import EXPECTATION, REGRESSION, Regression, regressions
from jaxrel.history.states import State, due, night_states
from jaxrel.history.store import CELL_TEST, Store

__all__ = ["COMMIT_URL", "COLOURS", "SOURCE", "commands", "publish", "site_data"]

SOURCE = "FRONTEND_SRC"  # the frontend checkout in the printed commands

COMMIT_URL = "https://github.com/jax-ml/jax/commit/{commit}"
COLOURS = {"passed": "#2da44e", "fixed": "#1a7f37", "new-regression": "#cf222e", "still-failing": "#a40e26",
           "failing": "#cf222e", "flaky": "#bf8700", "infra": "#8c959f", "refused": "#6639ba",
           "expectation": "#0969da"}  # expectation: red only because the frontend's version string moved
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


DOWNSTREAM = "downstream-"  # the cells of jaxrel downstream's reports: a library each (a Crater) or a tested pair


def _page_name(cell: str) -> str:
    return _SAFE.sub("_", cell)[:120] + ".html"


def site_data(store: Store, found: list[Regression] | None = None,
              states: dict[tuple[str, str], State] | None = None) -> dict[str, Any]:
    """Everything the site shows, as JSON-ready values; each square's state from :func:`night_states` (``found``
    and ``states``: the store's regressions and night states when the caller has them already)."""
    rows = store.rows(
        "SELECT runs.night, combos.cell, runs.frontend_commit, results.outcome, results.signature FROM results JOIN "
        "runs ON runs.id = results.run JOIN combos ON combos.id = results.combo WHERE results.test = ? ORDER BY "
        "runs.night, runs.id", (CELL_TEST,))
    found = regressions(store) if found is None else found
    states = night_states(store, found=found) if states is None else states
    grid: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for night, cell, commit, outcome, signature in rows:
        state = states[(str(night), str(cell))]
        grid[str(night)][str(cell)] = {"outcome": str(outcome), "verdict": state.state, "commit": str(commit),
                                       "signature": str(signature), **({"due": state.due} if state.due else {})}
    failing = defaultdict(list)
    for night, cell, test, meaning in store.rows(
            "SELECT runs.night, verdicts.cell, verdicts.test, verdicts.verdict FROM verdicts JOIN runs ON "
            "runs.id = verdicts.run WHERE verdicts.test <> ? AND verdicts.verdict IN "
            "('new-regression', 'still-failing', 'failing', 'flaky') ORDER BY verdicts.test", (CELL_TEST,)):
        failing[(str(night), str(cell))].append({"test": str(test), "verdict": str(meaning)})
    for (night, cell), tests in failing.items():
        entry = grid.get(night, {}).get(cell)
        if entry is not None:
            entry["tests"] = tests
    cells = sorted({cell for by_cell in grid.values() for cell in by_cell})
    culprits = [{"cell": c, "last_good": g, "first_bad": b, "culprit": k, "log": log} for c, g, b, k, log in
                store.rows("SELECT cell, last_good, first_bad, culprit, log FROM culprits ORDER BY cell")]
    return {"api": 1, "nights": sorted(grid, reverse=True), "cells": cells, "grid": grid, "culprits": culprits,
            "stale": stale_cells(store), "regressions": [{**r.to_json(), "due": due(r) if r.kind == EXPECTATION
                                                          else "", "commands": commands(r)} for r in found]}


def commands(regression: Regression, source: str = SOURCE) -> dict[str, str]:
    """The commands that reproduce a regression (compat on its first bad commit, the index as of its night) and
    bisect it (its last good and first bad commits, its failing frontend tests)."""
    own = regression.own_tests[:MAX_TESTS]
    found = {"reproduce": " ".join(["jaxrel", "compat", "--frontend-src", source, "--ref", regression.first_bad[:12],
                                    "--as-of", regression.night, "--cell", regression.cell, "--no-extension",
                                    *(["--frontend-tests", *own] if own else [])])}
    if regression.bisectable:
        found["bisect"] = bisect_command(source, regression.cell, bisect_files(regression.own_tests),
                                         regression.last_good[:12], regression.first_bad[:12],
                                         suite_tests=regression.suite_tests[:MAX_TESTS])
    return found


def publish(store: Store, output: Path, *, commit_url: str = COMMIT_URL, title: str = "jaxrel history") -> list[Path]:
    """Write the site into ``output`` (every file in one step at the end); the files written."""
    found = regressions(store)
    states = night_states(store, found=found)  # once, for the squares and the feed's verdicts alike
    data = site_data(store, found, states)
    files: dict[Path, str] = {
        output / "index.html": _index(data, title),
        output / "downstream.html": _index({**data, "cells": [c for c in data["cells"] if c.startswith(DOWNSTREAM)]},
                                           f"{title}: libraries built on the frontend"),
        output / "flaky.html": _flaky(data, title),
        output / "regressions.atom": _atom(data, commit_url, title),
        output / "api" / "v1" / "matrix.json": json.dumps({"api": 1, "nights": data["nights"], "cells": data["cells"],
                                                           "grid": data["grid"]}, indent=1) + "\n",
        output / "api" / "v1" / "culprits.json": json.dumps({"api": 1, "culprits": data["culprits"]}, indent=1) + "\n",
        output / "api" / "v1" / "stale.json": json.dumps({"api": 1, "stale": data["stale"]}, indent=1) + "\n",
        output / "api" / "v1" / "regressions.json": json.dumps({"api": 1, "regressions": data["regressions"]},
                                                               indent=1) + "\n",
        output / "api" / "v1" / "combos.json": json.dumps({"api": 1, "combos": combo_summaries(store, states)})
        + "\n",
    }
    for cell in data["cells"]:
        files[output / "cells" / _page_name(cell)] = _cell(data, cell, commit_url, title)
    for regression in data["regressions"]:
        files[output / "regressions" / regression["page"]] = _regression(regression, commit_url, title)
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
    write_all_atomically(files)
    return sorted(files)


STYLE = ("body{font:14px system-ui,sans-serif;margin:1.5em;color:#1f2328}table{border-collapse:collapse}"
         "td,th{padding:2px 4px;border:1px solid #d0d7de;text-align:center}th.cell{writing-mode:vertical-rl;"
         "transform:rotate(180deg);white-space:nowrap;font-weight:normal}td.sq a{display:block;width:18px;"
         "height:18px}.legend span{display:inline-block;padding:2px 6px;margin-right:4px;color:#fff}"
         "td.left,th.left{text-align:left}pre{white-space:pre-wrap;overflow-wrap:anywhere}")


def _head(title: str, depth: int = 0) -> str:
    up = "../" * depth
    return (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><p><a href=\"{up}index.html\">nights × cells</a> · "
            f"<a href=\"{up}flaky.html\">flaky tests</a> · <a href=\"{up}regressions.atom\">new regressions (Atom)</a>"
            f" · <a href=\"{up}downstream.html\">libraries (downstream)</a>"
            f" · <a href=\"{up}api/v1/matrix.json\">api/v1</a></p>")


def _legend() -> str:
    return "<p class=legend>" + "".join(f"<span style=\"background:{colour}\">{html.escape(name)}</span>"
                                        for name, colour in COLOURS.items()) + "<span style=\"background:#fff;" \
        "color:#1f2328;border:1px solid #d0d7de\">no result</span></p>"


def _index(data: dict[str, Any], title: str) -> str:
    head = "".join(f"<th class=cell data-cell=\"{html.escape(c)}\"><a href=\"cells/{_page_name(c)}\">"
                   f"{html.escape(c)}</a></th>" for c in data["cells"])
    body = []
    for night in data["nights"]:
        squares = []
        for cell in data["cells"]:
            entry = data["grid"][night].get(cell)
            if entry is None:
                squares.append(f"<td class=sq data-cell=\"{html.escape(cell)}\"></td>")
                continue
            tip = f"{cell} {night}: {entry['verdict']} at {entry['commit'][:12] or 'unknown commit'}"
            squares.append(f"<td class=sq data-cell=\"{html.escape(cell)}\" style=\"background:"
                           f"{COLOURS.get(entry['verdict'], '#8c959f')}\"><a title=\"{html.escape(tip)}\" "
                           f"href=\"cells/{_page_name(cell)}#{night}\"></a></td>")
        body.append(f"<tr><th class=left>{night}</th>{''.join(squares)}</tr>")
    stale = "".join(f"<li>{html.escape(s['cell'])}: no result since {s['last_night']}</li>" for s in data["stale"])
    script = ("<script>const box=document.getElementById('filter');box.addEventListener('input',()=>{"
              "const q=box.value.toLowerCase();for(const el of document.querySelectorAll('[data-cell]')){"
              "el.style.display=el.dataset.cell.toLowerCase().includes(q)?'':'none';}});</script>")
    return (_head(title) + f"<h1>{html.escape(title)}</h1>" + _legend()
            + "<p><label>filter cells <input id=filter placeholder=\"py3.12, jaxlib0.11, cuda\"></label></p>"
            + (f"<h2>Stale cells</h2><ul id=stale>{stale}</ul>" if stale else "") + _regression_list(data)
            + f"<table id=grid><tr><th class=left>night</th>{head}</tr>{''.join(body)}</table>{script}</body></html>")


def _cell(data: dict[str, Any], cell: str, commit_url: str, title: str) -> str:
    rows = []
    for night in data["nights"]:
        entry = data["grid"][night].get(cell)
        if entry is None:
            continue
        commit = entry["commit"]
        link = (f"<a href=\"{html.escape(commit_url.format(commit=commit))}\">{commit[:12]}</a>" if commit else "–")
        tests = "<br>".join(f"{html.escape(t['test'])} ({t['verdict']})" for t in entry.get("tests", []))
        rows.append(f"<tr id=\"{night}\"><td>{night}</td><td>{link}</td><td style=\"color:#fff;background:"
                    f"{COLOURS.get(entry['verdict'], '#8c959f')}\">{html.escape(entry['verdict'])}</td>"
                    f"<td class=left>{tests or html.escape(entry.get('signature', ''))}</td></tr>")
    culprits = [c for c in data["culprits"] if c["cell"] == cell]
    named = "".join(
        f"<li>between {html.escape(c['last_good'][:12])} (last good) and {html.escape(c['first_bad'][:12])} "
        f"(first bad): " + (f"<a href=\"{html.escape(commit_url.format(commit=c['culprit']))}\">"
                            f"{html.escape(c['culprit'][:12])}</a>" if c["culprit"] else "not converged")
        + f"; reproduce: <code>jaxrel bisect --good {html.escape(c['last_good'][:12])} --bad "
          f"{html.escape(c['first_bad'][:12])} --cell {html.escape(cell)}</code></li>" for c in culprits)
    return (_head(f"{cell} · {title}", 1) + f"<h1>{html.escape(cell)}</h1>"
            + (f"<h2>Culprits</h2><ul>{named}</ul>" if named else "")
            + "<table><tr><th>night</th><th>frontend commit</th><th>verdict</th><th class=left>failing tests</th>"
            + f"</tr>{''.join(rows)}</table></body></html>")


def _commit_link(commit: str, commit_url: str) -> str:
    if not commit:
        return "–"
    return f"<a href=\"{html.escape(commit_url.format(commit=commit))}\">{html.escape(commit[:12])}</a>"


def _regression(found: dict[str, Any], commit_url: str, title: str) -> str:
    """One regression's page."""
    tested = found["own_tests"] or found["suite_tests"]
    culprit = (_commit_link(found["culprit"], commit_url) if found["culprit"] else
               "not converged" if found["bisected"] else "not bisected yet" if tested and found["last_good"] else
               "not bisected (no test to bisect with, or no good night is kept)")
    state = (f"retired on {found['retired']}: {found['retired_why']}" if found["state"] == "retired" else
             f"{found['state']}: last red {found['last_red']}, {found['green_nights']} green nights since")
    tests = "".join(f"<li><code>{html.escape(t)}</code></li>" for t in found["tests"])
    run = "".join(f"<p>{html.escape(what)}:</p><pre>{html.escape(line)}</pre>" for what, line in
                  found["commands"].items())
    log = f"<h2>Bisect log</h2><pre>{html.escape(found['log'])}</pre>" if found["log"] else ""
    rows = [("cell", f"<a href=\"../cells/{_page_name(found['cell'])}\">{html.escape(found['cell'])}</a>"),
            ("backend", html.escape(found["backend"])), ("first red night", found["night"]),
            ("last good", f"{_commit_link(found['last_good'], commit_url)} "
                          f"({found['last_good_night'] or 'none kept'})"),
            ("first bad", _commit_link(found["first_bad"], commit_url)), ("culprit", culprit),
            ("state", html.escape(state)), ("error", f"<code>{html.escape(found['signature'] or '–')}</code>"),
            ("kind", html.escape(found["kind"] + (f": {found['why']}" if found["why"] else "")))]
    table = "".join(f"<tr><th class=left>{name}</th><td class=left>{value}</td></tr>" for name, value in rows)
    heading = "Expectation" if found["kind"] == EXPECTATION else "Regression"
    return (_head(f"{found['key']} · {title}", 1) + f"<h1>{heading} {html.escape(found['key'])}</h1>"
            f"<table id=regression>{table}</table><h2>Failing tests ({len(found['tests'])})</h2><ul>{tests}</ul>"
            f"<h2>Reproduce</h2>{run}{log}</body></html>")


def _regression_list(data: dict[str, Any]) -> str:
    def items(kind: str) -> str:
        return "".join(f"<li><a href=\"regressions/{r['page']}\">{html.escape(r['key'])}</a>: {r['night']}, "
                       f"{len(r['tests'])} tests, {html.escape(r['state'])}"
                       + (f" on {r['retired']}" if r["state"] == "retired" else "")
                       + (f", culprit {html.escape(r['culprit'][:12])}" if r["culprit"] else "")
                       + (f" ({html.escape(r['why'])})" if r["why"] else "") + "</li>"
                       for r in reversed(data["regressions"]) if r["kind"] == kind)
    found, expected = items(REGRESSION), items(EXPECTATION)
    return ((f"<h2>Regressions</h2><ul id=regressions>{found}</ul>" if found else "")
            + (f"<h2>Expectations</h2><p>Red only because the frontend's version string moved: no code change "
               f"broke them, no issue is opened.</p><ul id=expectations>{expected}</ul>" if expected else ""))


def _flaky(data: dict[str, Any], title: str) -> str:
    counts: dict[tuple[str, str], list[str]] = defaultdict(list)
    for night in data["nights"]:
        for cell, entry in data["grid"][night].items():
            for test in entry.get("tests", []):
                if test["verdict"] == "flaky":
                    counts[(test["test"], cell)].append(night)
            if entry["verdict"] == "flaky":
                counts[(CELL_TEST, cell)].append(night)
    rows = "".join(f"<tr><td class=left>{html.escape(test)}</td><td>{html.escape(cell)}</td><td>{len(nights)}</td>"
                   f"<td class=left>{', '.join(sorted(nights)[-5:])}</td></tr>"
                   for (test, cell), nights in sorted(counts.items(), key=lambda item: -len(item[1])))
    return (_head(f"flaky tests · {title}") + "<h1>Flaky tests</h1><table><tr><th class=left>test</th><th>cell</th>"
            f"<th>nights</th><th class=left>last nights</th></tr>{rows}</table></body></html>")


def _atom(data: dict[str, Any], commit_url: str, title: str) -> str:
    entries = []
    for found in reversed([r for r in data["regressions"] if r["kind"] == REGRESSION]):
        tests = ", ".join(found["tests"])[:500]
        culprit = f" culprit {found['culprit'][:12]}" if found["culprit"] else ""
        entries.append(f"<entry><id>urn:jaxrel:regression:{html.escape(found['key'])}</id><title>"
                       f"{html.escape(found['cell'])} regressed on {found['night']}{html.escape(culprit)}</title>"
                       f"<updated>{found['night']}T00:00:00Z</updated><link href=\"regressions/{found['page']}\"/>"
                       f"<summary>{html.escape(tests or found['signature'])}</summary></entry>")
    updated = f"{data['nights'][0]}T00:00:00Z" if data["nights"] else "1970-01-01T00:00:00Z"
    return ("<?xml version=\"1.0\" encoding=\"utf-8\"?><feed xmlns=\"http://www.w3.org/2005/Atom\">"
            f"<title>{html.escape(title)}: new regressions</title><id>urn:jaxrel:history</id>"
            f"<updated>{updated}</updated>{''.join(entries)}</feed>\n")
