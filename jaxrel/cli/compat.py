"""``jaxrel compat``: run the compat matrix (an environment per cell, the guard, the suites) and write reports."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from jaxrel.cli import _matrix
from jaxrel.cli._common import UsageError, add_common, say
from jaxrel.compat import report, runner
from jaxrel.extension.bazel import find_workspace

HELP = "Run the compat matrix: an environment per cell, the guard, the compat suite; reports."


def add(verbs: Any) -> None:
    sub = add_common(verbs.add_parser("compat", help=HELP, description=HELP))
    _matrix.add_options(sub)
    sub.add_argument("--cell", action="append", metavar="ID", help="run only cells matching ID (* wildcards)")
    sub.add_argument("-k", metavar="EXPR", help="select the frontend's own tests (with --frontend-src)")
    sub.add_argument("--frontend-tests", action="append", default=[], metavar="PATH",
                     help="the frontend's own test paths, relative to --frontend-src (default: tests)")
    sub.add_argument("--suite", default=None, metavar="PATH",
                     help="the compat suite (default: the one shipped inside jaxrel)")
    sub.add_argument("--workspace", default=None, metavar="DIR",
                     help="the Bazel workspace whose wheels (e.g. an XLA FFI extension) join every cell "
                          "(default: the nearest WORKSPACE at or above the working directory)")
    sub.add_argument("--no-uv", action="store_true", help="build cell environments with venv + pip")
    sub.add_argument("--no-extension", action="store_true",
                     help="do not build the workspace's wheels with Bazel and add them to the cells")
    sub.set_defaults(run=run)


def _workspace(text: str | None) -> Path | None:
    if text is None:
        return find_workspace(Path.cwd())
    workspace = Path(text).resolve()
    if not (workspace / "WORKSPACE").is_file():
        raise UsageError(f"--workspace {text}: no WORKSPACE file there; pass the root of a Bazel workspace")
    return workspace


def run(args: argparse.Namespace) -> int:
    workspace = None if args.no_extension else _workspace(args.workspace)
    found = _matrix.inputs(args, build=True)
    matrix, front = found.matrix, found.frontend
    workdir = Path(args.workdir).resolve()
    say(f"compat: {front.spec.name} {front.spec.version} ({front.spec.source}), {len(matrix.cells)} cells")
    options = runner.Options(workdir=workdir, suite=Path(args.suite).resolve() if args.suite else runner.DEFAULT_SUITE,
                             keyword=args.k, frontend_tests=args.frontend_tests,
                             use_uv=False if args.no_uv else None, extensions=not args.no_extension,
                             workspace=workspace, index=found.index)
    results = runner.run(matrix, found.family, front, options)
    json_path, md_path = report.write(workdir, matrix, results)
    if args.json:
        print(json.dumps(report.to_json(matrix, results), indent=2))
    else:
        print(report.table(results))
        print(report.summary(results))
        for note in matrix.notes:
            print(f"note: {note}")
        print(f"reports: {json_path}, {md_path}, {workdir / 'junit'}/")
    return 0 if all(r.ok for r in results) else 1
