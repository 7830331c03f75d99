"""``jaxrel history``: keep every run's results and answer questions about sets of wheels.

``ingest REPORT|DIR…`` (compat's report.json; a directory: every report.json below it) ·
``query NAME==VERSION…`` (exit 0 known good, 1 known bad / flaky / untested, 2 bad input) ·
``publish --output DIR`` (the static HUD and its JSON API).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from jaxrel._util.text import table
from jaxrel.cli._common import emit
from jaxrel.history import ingest, publish, query
from jaxrel.history.store import DEFAULT, HistoryError, open_store

KINDS = ("flaky", "infra", "expected", "fixed-by")
HELP = "Every run kept: ingest reports, ask whether a set of wheels is known good, publish the HUD."


def add(verbs: Any) -> None:
    sub = verbs.add_parser("history", help=HELP, description=HELP)
    actions = sub.add_subparsers(dest="action", required=True, metavar="ACTION")

    def common(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument("--db", default=str(DEFAULT), metavar="PATH", help=f"the store (default {DEFAULT})")
        parser.add_argument("--json", action="store_true", help="print a JSON object instead of text")
        return parser

    taken = common(actions.add_parser("ingest", help="ingest compat report.json and bisect.json files (or the "
                                      "directories holding them) into the store, once each"))
    taken.add_argument("reports", nargs="+", metavar="REPORT|DIR")
    taken.add_argument("--night", metavar="YYYY-MM-DD", help="the night the reports belong to (default: today, UTC)")
    taken.add_argument("--source", metavar="URL", help="where the reports came from (a CI run's URL)")
    taken.add_argument("--machine", metavar="NAME", help="the machine that ran them (default: this host's name)")
    taken.set_defaults(run=run_ingest)
    asked = common(actions.add_parser("query", help="is this set of wheels known good? (exit 0 known good, 1 not)"))
    asked.add_argument("pins", nargs="+", metavar="NAME==VERSION")
    asked.add_argument("--python", metavar="3.N", help="only cells on this Python")
    asked.add_argument("--passes", type=int, default=1, metavar="N", help="nights that must pass (default 1)")
    asked.set_defaults(run=run_query)
    note = common(actions.add_parser("annotate", help="say why a cell's failures are flaky, infra, expected or "
                                     "fixed by a commit (the query then leaves them out)"))
    note.add_argument("cell", metavar="CELL")
    note.add_argument("--test", default="cell", metavar="TEST", help="one test of the cell (default: the cell)")
    note.add_argument("--kind", required=True, choices=KINDS)
    note.add_argument("--reason", required=True, metavar="TEXT")
    note.set_defaults(run=run_annotate)
    site = common(actions.add_parser("publish", help="write the static HUD and its JSON API"))
    site.add_argument("--output", default="site", metavar="DIR", help="where the site goes (default site/)")
    site.add_argument("--commit-url", default=publish.COMMIT_URL, metavar="PATTERN",
                      help="link pattern for a frontend commit ({commit} is replaced)")
    site.set_defaults(run=run_publish)


def _reports(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            below = sorted([*path.rglob("report.json"), *path.rglob("bisect.json")])
            if not below:
                raise HistoryError(f"{path}: no report.json or bisect.json below this directory; pass compat's "
                                   "report.json or bisect's bisect.json")
            found += below
        elif path.is_file():
            found.append(path)
        else:
            raise HistoryError(f"{path}: no such file or directory; pass compat's report.json or its directory")
    return found


def run_ingest(args: argparse.Namespace) -> int:
    reports = _reports(args.reports)
    store = open_store(args.db)
    try:
        done = [ingest.ingest(store, path, night=args.night, source=args.source, machine=args.machine)
                for path in reports]
    finally:
        store.close()
    rows = [(d.path, "already kept" if d.run is None else f"run {d.run}", d.cells, d.results,
             ", ".join(f"{cell}: {test}" for cell, test in d.regressions[:3]) or "–") for d in done]
    emit(args, {"db": args.db, "ingested": [d.__dict__ for d in done]},
         table(("report", "stored as", "cells", "results", "new regressions"), rows))
    return 0


def run_query(args: argparse.Namespace) -> int:
    pins = query.parse_pins(args.pins)
    store = open_store(args.db, create=False)
    try:
        answer = query.query(store, pins, args.python, args.passes)
    finally:
        store.close()
    lines = [f"{', '.join(f'{n}=={v}' for n, v in pins.items())}: {answer.verdict.upper()}"]
    lines += [f"  {n['night']} {n['cell']} at {n['commit'][:12] or '?'}: {n['verdict']}"
              + (f" ({', '.join(n['failing'][:3])})" if n["failing"] else "") for n in answer.nights[-10:]]
    lines += [f"  culprit in {c['cell']}: {c['culprit'] or 'not converged'} (last good {c['last_good'][:12]}, "
              f"first bad {c['first_bad'][:12]})" for c in answer.culprits]
    lines += [f"  nearest tested set: {' '.join(n['pins'])} ({n['in_common']} pins in common)" for n in answer.nearest]
    emit(args, answer.to_json(), "\n".join(lines))
    return answer.exit_code


def run_annotate(args: argparse.Namespace) -> int:
    import datetime

    reason = " ".join(args.reason.split())
    if not reason or not reason.isprintable() or len(reason) > 500:
        raise HistoryError("--reason: one line of printable text (at most 500 characters) saying why")
    store = open_store(args.db, create=False)
    try:
        if not store.rows("SELECT 1 FROM combos WHERE cell = ? LIMIT 1", (args.cell,)):
            raise HistoryError(f"{args.cell[:80]!r}: no such cell in {store.path}; the cells are on the HUD "
                               "(jaxrel history publish)")
        created = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with store.transaction() as db:
            db.execute("INSERT INTO annotations (cell, test, kind, reason, created) VALUES (?, ?, ?, ?, ?)",
                       (args.cell, args.test, args.kind, reason, created))
    finally:
        store.close()
    emit(args, {"cell": args.cell, "test": args.test, "kind": args.kind, "reason": reason},
         f"{args.cell} {args.test}: {args.kind} ({reason})")
    return 0


def run_publish(args: argparse.Namespace) -> int:
    store = open_store(args.db, create=False)
    try:
        written = publish.publish(store, Path(args.output), commit_url=args.commit_url)
    finally:
        store.close()
    emit(args, {"output": args.output, "files": [str(p) for p in written]},
         f"wrote {len(written)} files to {args.output}/ (open {args.output}/index.html)")
    return 0
