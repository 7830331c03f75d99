"""``--record DB`` on compat, atlas and bisect: ingest the report a command just wrote into a history store.

The history sits above the features, so the command line is where the two meet.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_record_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--record", metavar="DB", help="ingest the finished report into this history store (a file or "
                     "postgresql://…; see jaxrel history)")
    sub.add_argument("--night", metavar="YYYY-MM-DD", help="with --record: the night the run belongs to (default "
                     "today, UTC)")


def record(args: argparse.Namespace, report_path: Path) -> None:
    """Ingest ``report_path`` when ``--record`` was given; one line on stdout unless ``--json``."""
    if not args.record:
        return
    from jaxrel.history.ingest import ingest
    from jaxrel.history.store import open_store

    store = open_store(args.record)
    try:
        done = ingest(store, report_path, night=args.night)
    finally:
        store.close()
    if not args.json:
        kept = "already kept" if done.run is None else f"run {done.run}, {done.results} results"
        print(f"history: {report_path} recorded in {args.record} ({kept}; new regressions: "
              f"{len(done.regressions)})")
