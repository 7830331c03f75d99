"""``jaxrel gates``: find, judge, cover and fix api-version gates in a frontend's source tree."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from jaxrel import policy
from jaxrel._util import localfiles
from jaxrel.cli._common import UsageError, add_common, say
from jaxrel.errors import BadInput
from jaxrel.family import resolve_family
from jaxrel.gates import cover, judge, report

HELP = "Find and judge api-version gates (if jaxlib_extension_version >= N) in a source tree."


def add(verbs: Any) -> None:
    sub = add_common(verbs.add_parser("gates", help=HELP, description=HELP))
    sub.add_argument("src", metavar="SRC", help="the frontend's source tree (e.g. an unpacked jax sdist)")
    sub.add_argument("--min-backend", metavar="V", help="the minimum backend (default: the tree's version file)")
    sub.add_argument("--markdown", action="store_true", help="print a Markdown report")
    sub.add_argument("--fix", action="store_true", help="rewrite always-true/always-false gates in place")
    sub.add_argument("--diff", action="store_true", help="show the rewrite as a unified diff, write nothing")
    sub.add_argument("--matrix", metavar="JSON", help="a compat matrix (jaxrel matrix --format json, or a "
                     "report.json): which sides of each live gate its cells exercise")
    sub.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    family = resolve_family(args.family)
    tree = Path(args.src)
    if args.min_backend is not None:
        policy.parse_version(args.min_backend, "--min-backend")
    if not tree.is_dir():
        raise UsageError(f"{tree} is not a directory; pass a frontend source tree")
    try:
        declared, version, path = report.declared_minimum(tree, family)
        source = str(path)
    except report.MinimumNotFound:
        if args.min_backend is None:
            raise
        declared, version, source = "", None, ""
    minimum = declared if args.min_backend is None else args.min_backend
    source = source if args.min_backend is None else "--min-backend"
    texts: dict[str, str] = {}
    _progress_line(f"scanning {tree} …")
    found, failed = judge.find_gates(tree, family, texts)
    maximum = policy.parse_version(version, "the tree's version") if version else None
    releases = judge.Releases.from_family(family, policy.parse_version(minimum, "minimum backend"), maximum)
    if not releases.supported:
        raise UsageError(f"no known {family.backend.distribution} release between {minimum} and {version or 'now'}")
    judgements = judge.judge_all(found, releases)
    header = (f"{tree}: {family.frontend.distribution} {version or '(version unknown)'}, minimum "
              f"{family.backend.distribution} {minimum} ({source}); supported releases "
              f"{releases.supported[0]}..{releases.supported[-1]}")
    if args.fix or args.diff:
        code = _fix(tree, judgements, texts, write=args.fix, show_diff=args.diff)
        _not_scanned(failed)
        return code
    _progress_line("")
    coverage = _coverage(args.matrix, judgements, releases) if args.matrix else None
    if args.json:
        out = report.to_json(judgements, minimum, source, failed)
        if coverage is not None:
            out["coverage"] = [c.to_json() for c in coverage]
        print(json.dumps(out, indent=2))
    elif args.markdown:
        print(report.markdown(judgements, header))
    else:
        print(report.text(judgements, header))
    if coverage is not None and not args.json:
        print(f"coverage of live gates by {args.matrix}:")
        for item in coverage:
            print(f"  {item.judgement.gate.file}:{item.judgement.gate.line}: {item.describe()}")
    _not_scanned(failed)
    return 0


def _not_scanned(failed: dict[str, str]) -> None:
    for file, reason in failed.items():
        say(f"jaxrel gates: warning: {file} not scanned: {reason}")


def _coverage(path: str, judgements: list[judge.Judgement], releases: judge.Releases) -> list[cover.Coverage]:
    try:
        cells = cover.matrix_cells(localfiles.load_json(path, what="--matrix"), f"--matrix {path}")
    except BadInput as error:
        raise UsageError(f"{error}; write one with jaxrel matrix --format json") from None
    return cover.cover(judgements, releases, cells)


def _progress_line(text: str) -> None:
    """One updating status line on a terminal's stderr (nothing when stderr is not a terminal)."""
    if sys.stderr.isatty():
        sys.stderr.write(f"\r\033[K{text}")
        sys.stderr.flush()


def _fix(tree: Path, judgements: list[judge.Judgement], texts: dict[str, str], *, write: bool,
         show_diff: bool) -> int:
    """``--fix`` / ``--diff``: rewrite every decided gate, verify the tree; list what is refused or failed."""
    from jaxrel.gates import fix  # needs libcst (jaxrel[gates])

    fixed = fix.fix_tree(tree, judgements, texts=texts,
                         progress=lambda n, total, file: _progress_line(f"rewriting {n}/{total}: {file}"))
    _progress_line("")
    if show_diff:
        sys.stdout.write(fixed.diff())
    for file, (_, file_fix) in fixed.files.items():
        for change in file_fix.changed:
            say(f"{file}:{change}")
        for refusal in file_fix.refused:
            say(f"{file}:{refusal} (refused)")
    for file, why in fixed.failed.items():
        say(f"{file}: left unchanged: {why}")
    if write:
        fixed.write()
    failed = f"; {len(fixed.failed)} files left unchanged (verification failed)" if fixed.failed else ""
    say(f"jaxrel gates: {'rewrote' if write else 'would rewrite'} {len(fixed.changed)} files; "
        f"{fixed.refused} decided gates refused{failed}")
    return 0
