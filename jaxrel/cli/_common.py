"""What every verb shares: the family and JSON options, progress on stderr, pin and version parsing."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from jaxrel._util.text import redact, shorten
from jaxrel.errors import BadInput


class UsageError(BadInput):
    """Bad command-line input; reported as one line with exit code 2."""


def say(message: str) -> None:
    """A progress or warning line on stderr (credentials redacted)."""
    print(redact(message), file=sys.stderr, flush=True)


def emit(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    """Print ``data`` as JSON with ``--json``, else ``text``."""
    print(json.dumps(data, indent=2) if args.json else text)


def add_common(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``--family`` and ``--json``, which every verb takes."""
    sub.add_argument("--family", default=None, metavar="NAME|PYPROJECT",
                     help="built-in profile name (default: jax) or path to a pyproject.toml with [tool.jaxrel]")
    sub.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    return sub


def parse_pin(text: str) -> tuple[str, str]:
    """``NAME==VERSION`` → ``(NAME, VERSION)``."""
    name, sep, version = text.partition("==")
    if not sep or not name.strip() or not version.strip():
        raise UsageError(f"expected NAME==VERSION, got {shorten(text)!r} (e.g. jax==0.12.0)")
    return name.strip(), version.strip()


def index_options(sub: argparse.ArgumentParser) -> None:
    """Where releases are listed: pip's configuration, or one index, plus local wheelhouses."""
    sub.add_argument("--index-url", metavar="URL", help="use only this index (default: pip's configuration)")
    sub.add_argument("--wheelhouse", action="append", default=[], metavar="DIR", help="also list wheels in DIR")
    sub.add_argument("--refresh", action="store_true", help="re-read index listings instead of the cache")
