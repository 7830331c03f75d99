"""``jaxrel bisect``: the first frontend commit that broke a cell, by git's bisection in a private clone."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from jaxrel.bisect import report, search
from jaxrel.bisect.inputs import PROBES_A_ROUND
from jaxrel.cli._common import (
    UsageError,
    add_common,
    add_env_option,
    env_pairs,
    index_options,
    parse_pin,
    say,
)
from jaxrel.cli._record import add_record_options, record
from jaxrel.compat.report import read_tested_commit
from jaxrel.family import resolve_family

HELP = "Find the first frontend commit that broke a cell: git bisect over builds of each revision, in one environment."


def add(verbs: Any) -> None:
    sub = add_common(verbs.add_parser("bisect", help=HELP, description=HELP))
    sub.add_argument("--frontend-src", required=True, metavar="PATH",
                     help="the frontend's git checkout (only read: bisection runs in a private clone)")
    sub.add_argument("--good", action="append", default=[], metavar="REV",
                     help="a revision where the cell passes (repeatable; each an ancestor of --bad)")
    sub.add_argument("--good-report", metavar="REPORT_JSON",
                     help="take --good from a green jaxrel compat report.json (the frontend commit it tested)")
    sub.add_argument("--bad", default="HEAD", metavar="REV", help="a revision where the cell fails (default HEAD)")
    sub.add_argument("--cell", metavar="ID", help="the cell as jaxrel compat names it, e.g. py3.12-jaxlib0.11.0")
    sub.add_argument("--backend", metavar="NAME==V", help="instead of --cell: the backend release")
    sub.add_argument("--python", metavar="3.N", help="instead of --cell: the interpreter")
    sub.add_argument("--plugins", metavar="SET", help="instead of --cell: a plugin set (e.g. cuda12)")
    sub.add_argument("--also-backend", action="append", default=[], metavar="NAME==V",
                     help="a backend release for the revisions whose own rules refuse the cell's (a release commit "
                          "pinning its own backend): each takes the newest of these it admits, in an environment of "
                          "its own (repeatable; without it such revisions are skipped)")
    sub.add_argument("--frontend-tests", action="extend", nargs="+", default=[], metavar="PATH|NODEID",
                     help="the tests to run at each revision, relative to the frontend's tree: paths or pytest "
                          "node ids (default: the family's selection)")
    sub.add_argument("--compat-tests", action="extend", nargs="+", default=[], metavar="NODEID",
                     help="instead, tests of jaxrel's compat suite (as `jaxrel compat` names them, e.g. "
                          "'test_api.py::test_api[jax.jit]'): a compat-suite regression bisected")
    sub.add_argument("-k", metavar="EXPR", help="narrow the tests (pytest -k)")
    add_env_option(sub)
    sub.add_argument("--reruns", type=int, default=1, metavar="N",
                     help="rerun failing tests N times; a test that then passes is flaky and the step skipped "
                          "(default 1)")
    sub.add_argument("--jobs", type=int, default=PROBES_A_ROUND, metavar="N",
                     help="probes a round, each in its own copy of the environment: the commits left shrink "
                          f"(N+1)-fold a round (default {PROBES_A_ROUND}; 1 is git bisect run's one commit at a time)")
    sub.add_argument("--deps-as-of", metavar="DATE|now",
                     help="resolve the test requirements as of DATE (default: the newest good commit's date)")
    sub.add_argument("--no-uv", action="store_true", help="build the environment with venv + pip")
    add_record_options(sub)
    index_options(sub)
    sub.add_argument("--workdir", default="build/bisect", metavar="DIR",
                     help="the private clone, the environment, built wheels, bisect.json, bisect.md")
    sub.set_defaults(run=run)


def good_from_report(path: str) -> str:
    """The frontend commit a green ``jaxrel compat`` report tested."""
    tested = read_tested_commit(path)  # BadInput (exit 2) for a missing or damaged file or field
    if not tested.ok:
        raise UsageError(f"--good-report {path}: that run was not green (ok is false); give the last green report")
    if tested.dirty:
        say(f"bisect: warning: {path} tested {tested.commit[:12]} with uncommitted changes on top; "
            "the commit itself is taken as good")
    return tested.commit


def run(args: argparse.Namespace) -> int:
    if args.reruns < 0:
        raise UsageError(f"--reruns {args.reruns}: expected 0 or more")
    if not 1 <= args.jobs <= 16:
        raise UsageError(f"--jobs {args.jobs}: expected 1 to 16 probes a round")
    if args.cell and (args.backend or args.python or args.plugins):
        raise UsageError("pass --cell ID or --backend/--python/--plugins, not both")
    pinned = parse_pin(args.backend, "--backend") if args.backend else None
    goods = list(args.good) + ([good_from_report(args.good_report)] if args.good_report else [])
    if not goods:
        raise UsageError("give --good REV (a revision where the cell passes) or --good-report REPORT_JSON")
    family = resolve_family(args.family)
    backend = None
    if pinned is not None:
        name, backend = pinned
        if name != family.backend.distribution:
            raise UsageError(f"--backend {args.backend}: the backend of {family.name} is {family.backend.distribution}")
    more_backends = []
    for text in args.also_backend:
        name, version = parse_pin(text, "--also-backend")
        if name != family.backend.distribution:
            raise UsageError(f"--also-backend {text}: the backend of {family.name} is {family.backend.distribution}")
        more_backends.append(version)
    request = search.Request(
        source=Path(args.frontend_src), goods=tuple(goods), bad=args.bad, workdir=Path(args.workdir),
        cell=args.cell, backend=backend, python=args.python, plugins=args.plugins,
        tests=tuple(args.frontend_tests), suite_tests=tuple(args.compat_tests),
        keyword=args.k, test_env=env_pairs(args.env), reruns=args.reruns,
        deps_as_of=args.deps_as_of, family=args.family, index_url=args.index_url,
        wheelhouses=tuple(args.wheelhouse), use_uv=False if args.no_uv else None, refresh=args.refresh,
        jobs=args.jobs, more_backends=tuple(more_backends))
    workdir = Path(args.workdir).resolve()
    try:
        result = search.run(request, family, say)
    except search.BisectRefused as refused:
        json_path, _ = report.write(workdir, refused.result)
        if args.json:
            print(json.dumps(report.to_json(refused.result), indent=2))
        record(args, json_path)  # "not converged" is kept too: the range was tried
        raise
    json_path, md_path = report.write(workdir, result)
    if args.json:
        print(json.dumps(report.to_json(result), indent=2))
    else:
        print(report.text(result))
        print(f"reports: {json_path}, {md_path}")
    record(args, json_path)
    return 0
