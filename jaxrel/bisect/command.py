"""The ``jaxrel bisect`` command ``jaxrel compat`` prints for a cell with a compat regression.

The good revision is the one given, else the newest release tag the tested commit contains
(``v0.2.0``, ``jax-v0.11.0``; a tag named for the frontend's distribution wins). The checkout is
only read.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from jaxrel.bisect import git
from jaxrel.errors import BadInput

__all__ = ["command", "release_tag", "suggested_commands"]

RELEASE_TAG = r"(?:{name}-)?v?\d+(?:\.\d+)+"


def release_tag(source: Path, distribution: str, commit: str) -> str | None:
    """The newest tag naming a release of ``distribution`` (``v0.2.0``, ``jax-v0.11.1``) that ``commit``
    contains; ``None`` when there is none (or ``source`` is not in git). Only reads the repository."""
    try:
        where = git.locate(source)
    except BadInput:
        return None
    pattern = re.compile(RELEASE_TAG.format(name=re.escape(distribution)))
    done = git.git("tag", "--merged", commit, "--sort=-creatordate", git_dir=where.git_dir, check=False)
    tags = [t for t in done.stdout.split() if pattern.fullmatch(t)] if done.returncode == 0 else []
    named = [t for t in tags if t.startswith(f"{distribution}-")]
    chosen = named or tags
    return chosen[0] if chosen else None


def suggested_commands(source: str, distribution: str, commit: str | None, regressed: dict[str, list[str]],
                       good: str | None = None, keyword: str | None = None,
                       test_env: Sequence[tuple[str, str]] = ()) -> list[str]:
    """A ready ``jaxrel bisect`` command per regressed cell (cell id → its failing own tests).

    The good revision: ``good`` when given, else the newest release tag ``commit`` contains,
    else a placeholder to fill in.
    """
    if not regressed or commit is None:
        return []
    start = good or release_tag(Path(source), distribution, commit) or "GOOD_REVISION"
    return [command(source, cell, tests, start, commit, keyword, test_env) for cell, tests in regressed.items()]


def command(source: str, cell: str, tests: Sequence[str], good: str, bad: str = "HEAD",
            keyword: str | None = None, test_env: Sequence[tuple[str, str]] = (),
            suite_tests: Sequence[str] = ()) -> str:
    """The ``jaxrel bisect`` command line for a cell's failing tests (what ``jaxrel compat`` prints): the
    frontend's own ``tests``, or else ``suite_tests`` of jaxrel's compat suite."""
    parts = ["jaxrel", "bisect", "--frontend-src", source, "--good", good, "--bad", bad, "--cell", cell]
    for key, value in test_env:
        parts += ["--env", f"{key}={value}"]
    if tests:
        parts += ["--frontend-tests", *tests]
    elif suite_tests:
        parts += ["--compat-tests", *suite_tests]
    if keyword:
        parts += ["-k", keyword]
    return " ".join(shlex.quote(p) for p in parts)
