"""What the verbs share: the family, JSON, index and ``--env`` options, progress on stderr, pin parsing."""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import shutil
from typing import Any

from packaging.version import InvalidVersion, Version

from jaxrel._util.progress import say
from jaxrel._util.text import shorten
from jaxrel.distributions.pythons import python_for
from jaxrel.errors import BadInput

__all__ = ["UsageError", "add_common", "add_env_option", "bazel_options", "emit", "env_pairs", "index_options",
           "parse_pin", "python_path", "say"]


class UsageError(BadInput):
    """Bad command-line input; reported as one line with exit code 2."""


def emit(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    """Print ``data`` as JSON with ``--json``, else ``text``."""
    print(json.dumps(data, indent=2) if args.json else text)


def add_common(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``--family`` and ``--json``, which every verb takes."""
    sub.add_argument("--family", default=None, metavar="NAME|PYPROJECT",
                     help="built-in profile name (default: jax) or path to a pyproject.toml with [tool.jaxrel]")
    sub.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    return sub


def parse_pin(text: str, option: str = "") -> tuple[str, str]:
    """``NAME==VERSION`` → ``(NAME, VERSION)``; a word where the version goes (``latest``, ``head``) is a
    :class:`UsageError` naming ``option``."""
    name, sep, version = text.partition("==")
    where = f"{option} " if option else ""
    if not sep or not name.strip() or not version.strip():
        raise UsageError(f"{where}expected NAME==VERSION, got {shorten(text)!r} (e.g. jax==0.12.0)")
    try:
        if option:  # verdict checks its pins' versions itself, naming the distribution
            Version(version.strip())
    except (InvalidVersion, ValueError):  # ValueError: a number longer than int() converts
        raise UsageError(f"{where}{shorten(text)!r}: {shorten(version.strip())!r} is not a PEP 440 version; give "
                         f"NAME==VERSION (e.g. {name.strip()}==0.12.0)") from None
    return name.strip(), version.strip()


def index_options(sub: argparse.ArgumentParser) -> None:
    """Where releases are listed: pip's configuration, or one index, plus local wheelhouses."""
    sub.add_argument("--index-url", metavar="URL", help="use only this index (default: pip's configuration)")
    sub.add_argument("--wheelhouse", action="append", default=[], metavar="DIR", help="also list wheels in DIR")
    sub.add_argument("--refresh", action="store_true", help="re-read index listings instead of the cache")


def env_pairs(items: list[str]) -> tuple[tuple[str, str], ...]:
    """``--env KEY=VALUE`` options as pairs; :class:`UsageError` for one without ``=`` or a key."""
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or any(c.isspace() for c in key):
            raise UsageError(f"--env {item!r}: expected KEY=VALUE (e.g. JAX_ENABLE_X64=1)")
        pairs.append((key, value))
    return tuple(pairs)


def add_env_option(sub: argparse.ArgumentParser) -> None:
    """``--env KEY=VALUE`` (repeatable), shared with ``jaxrel compat``."""
    sub.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                     help="set an environment variable for the tests (repeatable), e.g. JAX_ENABLE_X64=1")


def bazel_options(texts: list[str]) -> list[str]:
    """``--bazel-options 'OPTS'`` (repeatable) as one list of options, split as a shell would."""
    try:
        return [option for text in texts for option in shlex.split(text)]
    except ValueError as error:
        raise UsageError(f"--bazel-options: {error} (quote each option once, e.g. --bazel-options='--copt=-O2')") \
            from None


def parse_date(option: str, text: str) -> datetime.date:
    """A date option (``--since``, ``--release-date``): ``YYYY-MM-DD`` or one usage line."""
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{option} {shorten(text)!r}: expected a date such as 2026-07-16") from None


def python_path(text: str | None, flag: str) -> str | None:
    """An interpreter option (``--python``): a version (``3.12``, as uv finds it here), a path, or a command name
    looked up on ``PATH`` (``python3.11``); ``None``: the caller's default."""
    if text is None or "/" in text:
        return text
    if text[:1].isdigit():
        return python_for(text).executable
    found = shutil.which(text)
    if found is None:
        raise UsageError(f"{flag} {text}: no such command on PATH; give a version (3.12) or the interpreter's path")
    return found
