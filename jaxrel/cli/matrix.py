"""``jaxrel matrix``: the compat matrix with expected verdicts, as Markdown, JSON or a GitHub Actions matrix."""

from __future__ import annotations

import argparse
import json
from typing import Any

from jaxrel.cli import _matrix
from jaxrel.cli._common import UsageError, add_common

HELP = "The compat matrix: frontend x backend releases x plugins x Python, with expected verdicts."


def add(verbs: Any) -> None:
    sub = add_common(verbs.add_parser("matrix", help=HELP, description=HELP))
    _matrix.add_options(sub)
    sub.add_argument("--format", choices=("markdown", "json", "github"), default=None,
                     help="markdown (default), json (the same as --json), or github: a GitHub Actions "
                          "strategy.matrix object (one job per cell and shard)")
    sub.add_argument("--shards", type=int, default=1, metavar="N",
                     help="with --format github: split each positive cell's tests into N jobs (jaxrel compat --shard)")
    sub.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.shards < 1:
        raise UsageError(f"--shards {args.shards}: expected 1 or more")
    matrix = _matrix.inputs(args, build=False).matrix
    form = args.format or ("json" if args.json else "markdown")
    if form == "json":
        print(json.dumps(matrix.to_json(), indent=2))
    elif form == "github":
        print(matrix.to_github(args.shards))
    else:
        print(matrix.to_markdown())
    return 0
