"""A Crater's library lines (``--libraries a,b==1.0`` or ``@FILE``): ``NAME[==VERSION] [repo=URL|PATH]
[budget=SECONDS] [TEST ...]``, parsed here once."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from jaxrel._util import localfiles
from jaxrel.downstream import library as libraries
from jaxrel.errors import BadInput

__all__ = ["LibraryLine", "library_line", "read_libraries"]


class LibraryLine(NamedTuple):
    """One library of a ``--libraries`` file: ``NAME[==VERSION] [repo=URL|PATH] [budget=SECONDS] [TEST ...]``."""

    spec: str
    repository: str | None = None  # where its tests are when its sdist has none
    tests: tuple[str, ...] = ()
    budget: float | None = None  # its own time budget per test run (diffrax's tests take longer than most)


def library_line(text: str) -> LibraryLine:
    """A ``--libraries`` line parsed: each library of a Crater with its own tests, repository and budget."""
    words = text.split()
    options = {w.split("=", 1)[0]: w.split("=", 1)[1] for w in words[1:] if w.startswith(("repo=", "budget="))}
    tests = tuple(w for w in words[1:] if not w.startswith(("repo=", "budget=")))
    return LibraryLine(words[0], options.get("repo"), tests, _seconds(options["budget"], text)
                       if "budget" in options else None)


def _seconds(value: str, line: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise BadInput(f"--libraries {line[:80]!r}: budget={value[:20]} is not a number of seconds; give "
                       "budget=SECONDS (e.g. budget=600)")
    return seconds


def read_libraries(text: str) -> tuple[str, ...]:
    """``--libraries a,b==1.0`` or ``--libraries @FILE`` (one a line: :func:`library_line`; ``#`` comments)."""
    if text.startswith("@"):
        lines = localfiles.read_text(Path(text[1:]), what="the --libraries file").splitlines()
        items = [line.split("#", 1)[0].strip() for line in lines]
    else:
        items = [item.strip() for item in text.split(",")]
    found = tuple(item for item in items if item)
    if not found:
        raise BadInput(f"--libraries {text[:80]!r}: no library named; give NAME[==VERSION],… or @FILE")
    for item in found:
        libraries.parse_library_spec(library_line(item).spec)
    return found
