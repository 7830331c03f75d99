"""``jaxrel build``: build the workspace's wheels with Bazel (bazelisk, else bazel) into ``--output``."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from jaxrel.cli._common import UsageError, add_common, emit, say
from jaxrel.distributions.bazel import build
from jaxrel.distributions.pythons import python_for

HELP = "Build the workspace's wheels with Bazel (bazelisk, else bazel) into --output."


def add(verbs: Any) -> None:
    sub = add_common(verbs.add_parser("build", help=HELP, description=HELP))
    sub.add_argument("--wheels", action="append", default=[], metavar="TARGET[,TARGET]",
                     help="wheel targets: labels or packages (rmsnorm = //rmsnorm:wheel); default: all wheel rules")
    sub.add_argument("--python", metavar="3.N|PATH", help="build for this Python (default: the one running jaxrel)")
    sub.add_argument("--local-xla", metavar="PATH", help="use the FFI headers of this XLA source tree, not the pin")
    sub.add_argument("--bazel-options", action="append", default=[], metavar="'OPTS'",
                     help="extra options for bazel build, e.g. '--config=x --jobs=2'")
    sub.add_argument("--output", default="dist", metavar="DIR", help="where the wheels go (default: dist)")
    sub.add_argument("--workspace", default=".", metavar="DIR", help="the Bazel workspace (default: .)")
    sub.add_argument("--quiet", action="store_true", help="do not stream Bazel's progress")
    sub.set_defaults(run=run)


def python_path(text: str | None) -> str | None:
    """``--python``: a version (``3.12``, found here) or an interpreter path."""
    if text is None or "/" in text:
        return text
    return python_for(text).executable


def _bazel_options(texts: list[str]) -> list[str]:
    try:
        return [option for text in texts for option in shlex.split(text)]
    except ValueError as error:
        raise UsageError(f"--bazel-options: {error} (quote each option once, e.g. --bazel-options='--copt=-O2')") \
            from None


def run(args: argparse.Namespace) -> int:
    result = build(Path(args.workspace), wheels=[w for item in args.wheels for w in item.split(",") if w],
                   python=python_path(args.python), local_xla=Path(args.local_xla) if args.local_xla else None,
                   bazel_options=_bazel_options(args.bazel_options), output=Path(args.output),
                   progress=None if args.quiet else say)
    data = {"wheels": [str(w) for w in result.wheels], "seconds": round(result.seconds, 3), "command": result.command}
    text = "\n".join([*(f"{wheel}  ({wheel.stat().st_size / 1024:.1f} KiB)" for wheel in result.wheels),
                      f"bazel: {result.seconds:.1f} s"])
    emit(args, data, text)
    return 0
