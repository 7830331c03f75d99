"""``jaxrel history``: keep every run's results and answer questions about sets of wheels.

``ingest REPORT|DIR…`` (compat's report.json; a directory: every report.json below it) ·
``query NAME==VERSION…`` (exit 0 known good, 1 known bad / tests fail / flaky / untested, 2 bad input) ·
``publish --output DIR`` (the static HUD and its JSON API).
"""

from __future__ import annotations

import argparse
import datetime
import os
from pathlib import Path
from typing import Any

from jaxrel._util.progress import say
from jaxrel._util.text import table
from jaxrel.cli._common import UsageError, add_env_option, emit, env_pairs, index_options, parse_date, parse_pin
from jaxrel.history import ingest, publish, query
from jaxrel.history.regressions import CLOSE_AFTER, regressions
from jaxrel.history.store import DEFAULT, HistoryError, open_store

KINDS = ("flaky", "infra", "expected", "fixed-by")
REPORT_NAMES = ("report.json", "bisect.json", "atlas.json", "device.json")
DEFAULT_JOBS = max(1, min(os.cpu_count() or 1, 4))  # history replay --jobs
HELP = "Every run kept: ingest reports, ask whether a set of wheels is known good, publish the HUD."


def add(verbs: Any) -> None:
    sub = verbs.add_parser("history", help=HELP, description=HELP)
    actions = sub.add_subparsers(dest="action", required=True, metavar="ACTION")

    def common(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument("--db", default=str(DEFAULT), metavar="PATH", help=f"the store (default {DEFAULT})")
        parser.add_argument("--json", action="store_true", help="print a JSON object instead of text")
        return parser

    taken = common(actions.add_parser("ingest", help="ingest compat's report.json, bisect.json, atlas.json and "
                                      "device.json files (or the directories holding them) into the store, once each"))
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
    again = common(actions.add_parser("replay", help="backfill from the frontend's real main line: run compat on "
                                      "each night's commit with the index as it stood then, ingest, bisect"))
    again.add_argument("--frontend-src", required=True, metavar="PATH", help="the frontend's git checkout (only read)")
    again.add_argument("--since", required=True, metavar="YYYY-MM-DD", help="the first night")
    again.add_argument("--until", metavar="YYYY-MM-DD", help="the last night (default: today, UTC)")
    again.add_argument("--every", default="1d", metavar="Nd", help="days between nights (default 1d)")
    again.add_argument("--branch", default="HEAD", metavar="REV", help="the main line (default HEAD)")
    again.add_argument("--jobs", type=int, default=DEFAULT_JOBS, metavar="N",
                       help=f"nights whose compat runs go at once (default {DEFAULT_JOBS}: the cores, at most 4); "
                            "ingest and bisect stay one at a time, in night order")
    again.add_argument("--workdir", default="build/history/replay", metavar="DIR",
                       help="compat's and bisect's work, each night's report and log")
    again.add_argument("--python", metavar="3.N", help="the cells' interpreter (compat --python)")
    again.add_argument("--backend", metavar="NAME==V", help="only this backend release (compat --backends)")
    again.add_argument("--cell", action="append", default=[], metavar="ID", help="only cells matching ID")
    again.add_argument("--plugins", default="none", metavar="all|none|SET", help="plugin sets (default none)")
    again.add_argument("--frontend-tests", action="extend", nargs="+", default=[], metavar="PATH|NODEID",
                       help="the frontend's own tests to run each night")
    again.add_argument("-k", metavar="EXPR", help="narrow the frontend's own tests (pytest -k)")
    add_env_option(again)
    again.add_argument("--family", default=None, metavar="NAME|PYPROJECT", help="the family profile (default jax)")
    index_options(again)
    again.add_argument("--no-bisect", action="store_true", help="ingest only; bisect later with bisect-new")
    again.set_defaults(run=run_replay)
    hunt = common(actions.add_parser("bisect-new", help="bisect each new regression that has no culprit yet "
                                     "(jaxrel bisect on its cell and failing frontend tests) and keep the culprit"))
    hunt.add_argument("--frontend-src", required=True, metavar="PATH", help="the frontend's git checkout")
    hunt.add_argument("--workdir", default="build/history/bisect", metavar="DIR", help="each bisection's work")
    add_env_option(hunt)
    hunt.add_argument("--family", default=None, metavar="NAME|PYPROJECT", help="the family profile (default jax)")
    index_options(hunt)
    hunt.set_defaults(run=run_bisect_new)
    listed = common(actions.add_parser("regressions", help="every regression: its range, culprit and state (open "
                                       "until its tests pass CLOSE_AFTER nights in a row)"))
    listed.add_argument("--close-after", type=int, default=CLOSE_AFTER, metavar="N",
                        help=f"green nights in a row that close a regression (default {CLOSE_AFTER})")
    listed.add_argument("--source", default="FRONTEND_SRC", metavar="PATH",
                        help="the frontend checkout the printed commands name")
    listed.set_defaults(run=run_regressions)
    served = common(actions.add_parser("serve", help="serve the HUD and live queries (/api/v1/query?pin=…) on "
                                       "loopback, republished as the store changes"))
    served.add_argument("--host", default="127.0.0.1", metavar="ADDR", help="a loopback address (default 127.0.0.1)")
    served.add_argument("--port", type=int, default=8321, metavar="N", help="the port (default 8321; 0: any free one)")
    served.add_argument("--output", default="build/history/site", metavar="DIR", help="where the site is written")
    served.add_argument("--commit-url", default=publish.COMMIT_URL, metavar="PATTERN",
                        help="link pattern for a frontend commit ({commit} is replaced)")
    served.set_defaults(run=run_serve)


def _reports(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            below = sorted(found for name in REPORT_NAMES for found in path.rglob(name))
            if not below:
                raise HistoryError(f"{path}: no {', '.join(REPORT_NAMES)} below this directory; pass the reports "
                                   "compat, bisect, atlas or the device check wrote")
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
    lines = [f"{', '.join(f'{n}=={v}' for n, v in pins.items())}: {answer.verdict.upper()}"
             + (f" ({answer.why})" if answer.why else "")]
    lines += [f"  {n['night']} {n['cell']} at {n['commit'][:12] or '?'}: {n['state']}"
              + (f" (due in {n['due']})" if n["due"] else "")
              + (f" ({', '.join(n['failing'][:3])})" if n["failing"] else "") for n in answer.nights[-10:]]
    lines += [f"  culprit in {c['cell']}: {c['culprit'] or 'not converged'} (last good {c['last_good'][:12]}, "
              f"first bad {c['first_bad'][:12]})" for c in answer.culprits]
    lines += [f"  nearest tested set: {' '.join(n['pins'])} ({n['in_common']} pins in common)" for n in answer.nearest]
    emit(args, answer.to_json(), "\n".join(lines))
    return answer.exit_code


def run_annotate(args: argparse.Namespace) -> int:
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


def _shared_args(args: argparse.Namespace) -> tuple[str, ...]:
    """The options compat and bisect both take: the family and where packages come from."""
    found = ["--family", args.family] if args.family else []
    found += ["--index-url", args.index_url] if args.index_url else []
    for folder in args.wheelhouse:
        found += ["--wheelhouse", folder]
    return (*found, *(["--refresh"] if args.refresh else []))


def run_replay(args: argparse.Namespace) -> int:
    from jaxrel.history.replay import ReplayRequest, replay

    since = parse_date("--since", args.since)
    until = parse_date("--until", args.until) if args.until else datetime.datetime.now(datetime.UTC).date()
    every = args.every.removesuffix("d")
    if not every.isdigit():
        raise UsageError(f"--every {args.every[:20]!r}: expected a number of days (1d, 7d)")
    env_pairs(args.env)
    cells = [*(["--python", args.python] if args.python else []), "--plugins", args.plugins]
    if args.backend:
        cells += ["--backends", parse_pin(args.backend, "--backend")[1]]
    for pattern in args.cell:
        cells += ["--cell", pattern]
    cells += ["--frontend-tests", *args.frontend_tests] if args.frontend_tests else []
    cells += ["-k", args.k] if args.k else []
    if not 1 <= args.jobs <= 64:
        raise UsageError(f"--jobs {args.jobs}: expected 1 to 64")
    request = ReplayRequest(Path(args.frontend_src), since, until, int(every), args.branch,
                            Path(args.workdir).resolve(), tuple(cells), tuple(args.env), _shared_args(args),
                            bisect=not args.no_bisect, jobs=args.jobs)
    store = open_store(args.db)
    try:
        done = replay(store, request, progress=say)
    finally:
        store.close()
    rows = [(n.night, n.commit[:12] or "-", n.outcome, f"{n.seconds:.0f} s" if n.seconds else "", n.said)
            for n in done]
    emit(args, {"db": args.db, "nights": [n.__dict__ for n in done]},
         table(("night", "commit", "outcome", "time", "what"), rows))
    return 0 if all(n.outcome != "not run" or not n.commit for n in done) else 3


def run_bisect_new(args: argparse.Namespace) -> int:
    from jaxrel.history.bisect_new import bisect_new

    env_pairs(args.env)
    store = open_store(args.db, create=False)
    try:
        done = bisect_new(store, Path(args.frontend_src), Path(args.workdir).resolve(), env=args.env,
                          shared_args=_shared_args(args), progress=say)
    finally:
        store.close()
    emit(args, {"db": args.db, "bisected": [d.__dict__ for d in done]},
         table(("regression", "exit", "what"), [(d.key, d.exit_code, d.said) for d in done])
         if done else "nothing to bisect: every open regression has its culprit, or no frontend test to run")
    return 0 if all(d.report for d in done) else 3


def run_regressions(args: argparse.Namespace) -> int:
    if args.close_after < 1:
        raise UsageError(f"--close-after {args.close_after}: expected 1 or more")
    store = open_store(args.db, create=False)
    try:
        found = regressions(store, args.close_after)
    finally:
        store.close()
    items = [{**r.to_json(), "commands": publish.commands(r, args.source)} for r in found]
    rows = [(r.key, r.night, r.state, len(r.tests), (r.culprit or "")[:12] or ("not converged" if r.bisected else
            "not bisected"), r.green_nights) for r in found]
    emit(args, {"db": args.db, "close_after": args.close_after, "regressions": items},
         table(("regression", "first red", "state", "tests", "culprit", "green nights"), rows)
         if rows else "no regressions")
    return 0


def run_serve(args: argparse.Namespace) -> int:
    from jaxrel.history.serve import make_server

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: expected 0 to 65535")
    server = make_server(args.db, Path(args.output).resolve(), args.host, args.port, args.commit_url,
                         on_ready=lambda url: say(f"history: serving {args.db} at {url} (Ctrl-C stops)"))
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
