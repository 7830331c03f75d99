"""``jaxrel atlas``: which compat-suite API works on which jax + jaxlib release, measured; Markdown, JSON, HTML."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
from pathlib import Path
from typing import Any

from jaxrel._util import workdirs
from jaxrel._util.atomic import write_reports
from jaxrel._util.text import shorten
from jaxrel.atlas import measure, table
from jaxrel.cli._common import UsageError, add_common, index_options, say
from jaxrel.cli._record import add_record_options, record
from jaxrel.distributions.index import Index
from jaxrel.family import resolve_family

HELP = ("The API atlas: the compat suite for many jax releases, each on its oldest and newest admitted jaxlib; "
        "a table of which API works where (Markdown, JSON, a single-file HTML page with a filter box).")


def add(verbs: Any) -> None:
    sub = add_common(verbs.add_parser("atlas", help=HELP, description=HELP))
    sub.add_argument("--frontends", metavar="SPEC", help=f"jax releases: a specifier ('jax>=0.4.30') or versions "
                     f"(0.4.30,0.12.0.1); default: {measure.OLDEST}, then the newest of each minor series")
    sub.add_argument("--backends", choices=("ends", "newest"), default="ends",
                     help="per jax release: its oldest and newest admitted jaxlib (default), or the newest only")
    sub.add_argument("--python", default="3.12", metavar="3.N", help="the cells' interpreter (default 3.12: "
                     "jax >= 0.11 needs it)")
    sub.add_argument("--cells-at-once", type=int, default=2, metavar="N", help="cells run side by side (default 2)")
    sub.add_argument("--markdown", metavar="PATH", help="also write the Markdown table here (e.g. docs/atlas.md)")
    sub.add_argument("--note", default="", help="a sentence on where it was measured (machine, load), shown "
                     "under the date")
    index_options(sub)
    add_record_options(sub)
    sub.add_argument("--workdir", default="build/atlas", metavar="DIR",
                     help="environments, runs and the reports atlas.md, atlas.json, atlas.html")
    sub.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.cells_at_once < 1:
        raise UsageError(f"--cells-at-once {args.cells_at_once}: expected 1 or more")
    if args.frontends:
        measure.parse_frontends(args.frontends)  # bad input is reported before the index is asked
    if not re.fullmatch(r"3\.\d{1,3}t?", args.python):
        raise UsageError(f"--python {shorten(args.python)!r}: expected a Python version such as 3.12")
    family = resolve_family(args.family)
    if not family.compat_suite:
        raise UsageError(f"family {family.name}: the atlas measures the compat suite, which only the jax profile has")
    workdir = workdirs.claim(Path(args.workdir))
    index = Index.from_pip(args.index_url, args.wheelhouse, refresh=args.refresh, progress=say)
    versions = [str(v) for v in index.listing(family.frontend.distribution).versions()]
    frontends = measure.choose_frontends(versions, args.frontends)
    if not frontends:
        raise UsageError(f"--frontends {args.frontends!r} selects no released {family.frontend.distribution}")
    say(f"atlas: {family.frontend.distribution} {', '.join(frontends)} (Python {args.python})")
    start, load = datetime.datetime.now(datetime.UTC), os.getloadavg()[0]
    found = measure.plan(family, index, frontends, workdir, python=args.python, backends=args.backends)
    say(f"atlas: {len(found.cells)} cells, {args.cells_at_once} at a time")
    runs = measure.run(found.cells, family, index, workdir, at_once=args.cells_at_once) + found.problems
    seconds = (datetime.datetime.now(datetime.UTC) - start).total_seconds()
    note = " ".join(filter(None, [
        f"{len(frontends)} jax releases, {len(found.cells)} cells, Python {args.python}, CPU; whole run "
        f"{seconds / 60:.1f} min with {args.cells_at_once} cells at a time on {os.cpu_count()} cores "
        f"(load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end).", args.note]))
    atlas = table.build(runs, start.strftime("%Y-%m-%d"), note)
    text = table.markdown(atlas)
    outputs = {workdir / "atlas.md": text, workdir / "atlas.json": table.dumps(atlas),
               workdir / "atlas.html": table.html_page(atlas)}
    if args.markdown:
        outputs[Path(args.markdown).resolve()] = text
    write_reports(outputs)
    if args.json:
        print(json.dumps(table.to_json(atlas), indent=2, ensure_ascii=False))
    else:
        print(text)
        print("reports: " + ", ".join(str(path) for path in outputs))
    record(args, workdir / "atlas.json")
    return 1 if any(r.problem for r in runs) else 0

