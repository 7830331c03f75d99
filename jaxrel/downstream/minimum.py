"""A library release's true minimum frontend: the oldest admitted release whose cells pass, found by a search.

Candidates are the frontend's final releases the library admits, each with the backends both admit (the frontend's
own ``Requires-Dist`` on the backend and the library's, intersected) that have a wheel for the cell's Python here.
A release without one (the index deleted old backend wheels, none was built for this Python, all yanked) is
``not-installable``, found from the listings alone: no environment is built for it.

The search anchors at the top: the newest release of the library's own time (uploaded before it, what it was
developed against), tested with its oldest admitted backend (the harsher of the two). When that fails, the library
fails with its own era's frontend and nothing lower is searched. Otherwise a binary search below it ends with two
neighbours both tested, the lower failing, the upper passing (or the oldest passing: the declared minimum holds);
the upper is then tested with its newest admitted backend too. With 30 candidates that is at most 1 + 5 + 1 = 7
cells. A cell that is ``infra`` or not installable is dropped from the candidates and the search goes on.
``sweep`` tests every candidate with both backends instead. The edges, tested apart (by the caller): the newest
release with its newest backend, and a frontend built from source (HEAD) when given.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from jaxrel.cells.admitted import admitted_backends
from jaxrel.distributions.index import Index
from jaxrel.distributions.pages import IndexFile, Listing, parse_time
from jaxrel.distributions.pythons import python_for
from jaxrel.distributions.remote_metadata import MetadataReader, RemoteMetadataError
from jaxrel.downstream.cellrun import CellResult, CellSpec
from jaxrel.downstream.library import Library
from jaxrel.family.model import Family

__all__ = ["Candidate", "MinimumResult", "candidates", "era", "search", "uploaded_at"]

RunCell = Callable[[CellSpec, str], CellResult]


@dataclass
class Candidate:
    """One frontend release the library admits, and the backends that could go with it here."""

    version: Version
    backends: list[Version] = field(default_factory=list)  # admitted and installable here, oldest first
    uploaded: dict[str, str] = field(default_factory=dict)  # "library" / "frontend" → upload time
    problem: str = ""  # why it is not installable ("" when it is)

    def spec(self, backend: Version) -> CellSpec:
        """The cell of this release with ``backend``, the rest resolved as of the later of the library's and this
        release's upload (the pinned backend exempt: old backend wheels were uploaded again later)."""
        return CellSpec(str(self.version), str(backend), era(self.uploaded.get("library"),
                                                            self.uploaded.get("frontend")))


@dataclass
class MinimumResult:
    """The answer for one library release."""

    library: str
    version: str
    python: str
    frontend: str  # the frontend's distribution name (jax)
    declared: str | None
    route: str
    true_minimum: str | None = None
    highest_failing: CellResult | None = None
    fix: str | None = None
    cells: list[CellResult] = field(default_factory=list)
    not_installable: list[tuple[str, str]] = field(default_factory=list)  # (frontend version, why)
    lowest_installable: str | None = None
    uploaded: str | None = None  # when the library release reached the index
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    boxed: bool = True  # the library's tests ran in the box (False: --unboxed, said in every report)

    @property
    def searched(self) -> int:
        """Cells run to find the minimum (the edges not counted)."""
        return sum(1 for c in self.cells if c.role in ("search", "confirm", "sweep"))

    def to_json(self) -> dict[str, Any]:
        failing = self.highest_failing
        return {
            "kind": "downstream-minimum", "library": self.library, "version": self.version, "python": self.python,
            "boxed": self.boxed,
            "declared": self.declared, "true_minimum": self.true_minimum, "lowest_installable": self.lowest_installable,
            "fix": self.fix, "route": self.route,
            "failing": None if failing is None else {"jax": failing.jax, "jaxlib": failing.jaxlib,
                                                     "test": failing.failing[0] if failing.failing else "",
                                                     "error": failing.first_error or failing.reason,
                                                     "signature": failing.signature},
            "cells": [cell.to_json() for cell in self.cells],
            "not_installable": [{"jax": v, "why": why} for v, why in self.not_installable],
            "cells_searched": self.searched, "notes": self.notes, "seconds": round(self.seconds, 1),
        }


def era(*times: str | None) -> str | None:
    """The latest of ``times`` (upload times), as uv's ``--exclude-newer`` takes it; ``None`` when none is known."""
    known = [parse_time(t) for t in times if t]
    if not known:
        return None
    latest = max(known) + datetime.timedelta(seconds=1)  # the newest of them is itself included
    return latest.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def uploaded_at(listing: Listing, version: Version, file: IndexFile) -> str:
    """When ``file`` (the one a cell installs) reached the index; else its release's first upload (a local mirror's
    copy has no time; later files of a release can come years after, so the release's last upload is no answer)."""
    return file.upload_time or listing.first_upload(version) or ""


def _frontend_file(files: list[IndexFile], python: str) -> IndexFile | None:
    usable = [f for f in files if f.yanked is None and f.supports_python(python)]
    return next((f for f in usable if f.is_wheel), usable[0] if usable else None)


def candidates(library: Library, family: Family, index: Index, python: str,
               reader: MetadataReader | None = None) -> list[Candidate]:
    """Every final frontend release the library admits that the index lists, oldest first, each with its backends."""
    reader = reader or MetadataReader()
    frontends: Listing = index.listing(family.frontend.distribution)
    backends: Listing = index.listing(family.backend.distribution)
    wanted = library.specifier(family.frontend.distribution, family, python)
    wanted_backend = library.specifier(family.backend.distribution, family, python)
    tags = python_for(python).tags()
    installable = [v for v in backends.versions()  # the backends with a wheel for this Python here, once
                   if (wheel := backends.wheel_for(v, python, tags)) is not None and wheel.yanked is None]
    found = []
    for version in frontends.versions():
        if version.is_prerelease or version.is_devrelease or not wanted.contains(version):
            continue
        candidate = Candidate(version, uploaded={"library": library.uploaded or ""})
        files = frontends.files_for(version)
        file = _frontend_file(files, python)
        if file is None:
            candidate.problem = ("yanked" if files and all(f.yanked is not None for f in files)
                                 else f"no file of it installs on Python {python}")
            found.append(candidate)
            continue
        candidate.uploaded["frontend"] = uploaded_at(frontends, version, file)
        try:
            requires = reader.metadata(file).requires_dist if file.is_wheel else ()
        except RemoteMetadataError as error:
            candidate.problem = f"its METADATA cannot be read: {error}"
            found.append(candidate)
            continue
        admitted = admitted_backends(family, version, requires) & wanted_backend
        candidate.backends = [b for b in installable if admitted.contains(b, prereleases=True)]
        if not candidate.backends:
            candidate.problem = (f"no {family.backend.distribution} it admits ({admitted or 'any'}) has a wheel for "
                                 f"Python {python} here (deleted from the index, or never built for it)")
        found.append(candidate)
    return found


def search(result: MinimumResult, found: list[Candidate], run: RunCell, *, sweep: bool = False,
           progress: Callable[[str], None] = lambda line: None) -> None:
    """Find the true minimum among ``found``; every cell run is appended to ``result.cells``."""
    start = time.perf_counter()
    result.not_installable = [(str(c.version), c.problem) for c in found if c.problem]
    xs = [c for c in found if not c.problem]
    result.lowest_installable = str(xs[0].version) if xs else None
    verdicts: dict[str, CellResult] = {}

    def check(candidate: Candidate, backend: Version, role: str) -> CellResult | None:
        progress(f"downstream: {result.library} {result.version} with {candidate.version} / {backend} ({role}) …")
        cell = run(candidate.spec(backend), role)
        cell.role = role
        result.cells.append(cell)
        progress(f"downstream:   {cell.outcome}: {cell.reason[:160]}")
        if cell.outcome in ("infra", "not-installable"):
            if cell.outcome == "not-installable":
                result.not_installable.append((str(candidate.version), cell.reason.splitlines()[-1][:300]
                                               if cell.reason else "the resolver found no solution"))
            return None
        verdicts[str(candidate.version)] = cell
        return cell

    if sweep:
        for candidate in xs:
            for backend in dict.fromkeys([candidate.backends[0], candidate.backends[-1]]):
                check(candidate, backend, "sweep")
        passing = [c for c in xs if str(c.version) in verdicts and all(
            cell.outcome == "passed" for cell in result.cells if cell.jax == str(c.version) and cell.role == "sweep")]
        _conclude(result, passing[0] if passing else None)
        result.seconds += time.perf_counter() - start
        return
    # the upper anchor: the newest release of the library's own time (what it was developed and tested against)
    anchor = _contemporary(xs, result.uploaded)
    while 0 <= anchor < len(xs) and check(xs[anchor], xs[anchor].backends[0], "search") is None:
        del xs[anchor]  # not installable or infra: the next older one
        anchor -= 1
    if anchor < 0 or verdicts[str(xs[anchor].version)].outcome != "passed":
        _conclude(result, None)
        result.seconds += time.perf_counter() - start
        return
    lo, hi = -1, anchor  # xs[lo] fails (tested; -1: none below), xs[hi] passes (tested)
    while hi - lo > 1:
        probe = (lo + hi) // 2
        cell = check(xs[probe], xs[probe].backends[0], "search")
        if cell is None:  # unknown: drop it (lo < probe < hi) and search what is left
            del xs[probe]
            hi -= 1
        elif cell.outcome == "passed":
            hi = probe
        else:
            lo = probe
    found_minimum = xs[hi]
    if found_minimum.backends[-1] != found_minimum.backends[0]:
        check(found_minimum, found_minimum.backends[-1], "confirm")
    _conclude(result, found_minimum)
    result.seconds += time.perf_counter() - start


def _contemporary(xs: list[Candidate], uploaded: str | None) -> int:
    """The index in ``xs`` of the newest release uploaded before the library (the newest when unknown)."""
    if not uploaded:
        return len(xs) - 1
    moment = parse_time(uploaded)
    before = [i for i, c in enumerate(xs)
              if c.uploaded.get("frontend") and parse_time(c.uploaded["frontend"]) <= moment]
    return before[-1] if before else 0


def _conclude(result: MinimumResult, passing: Candidate | None) -> None:
    failed = [cell for cell in result.cells if cell.outcome == "failed"]
    if passing is None:
        anchor = next((c for c in result.cells if c.role == "search"), None)
        result.notes.append(f"the frontend of its own time ({anchor.jax}) fails with it: nothing older was searched"
                            if anchor is not None
                            else "no admitted release passed: it fails with every frontend tested here")
        result.highest_failing = max(failed, key=lambda c: Version(c.jax)) if failed else None
        return
    result.true_minimum = str(passing.version)
    below = [cell for cell in failed if Version(cell.jax) < passing.version]
    # a lower release its own requirements rule out (the resolver's cause names it): the declared bound is false too
    ruled_out = [cell for cell in result.cells if cell.outcome == "not-installable" and cell.role == "search"
                 and Version(cell.jax) < passing.version and result.library in cell.reason.lower()]
    below = below or ruled_out
    result.highest_failing = max(below, key=lambda c: Version(c.jax)) if below else None
    confirm = [c for c in result.cells if c.role == "confirm" and c.jax == str(passing.version)]
    if confirm and confirm[0].outcome == "failed":
        result.notes.append(f"{passing.version} passes with its oldest admitted backend and fails with its newest "
                            f"({confirm[0].jaxlib}): {confirm[0].reason[:200]}")
    if below:
        result.fix = f"{result.frontend}>={passing.version}"
        assert result.highest_failing is not None
        gap = [v for v, _ in result.not_installable
               if Version(result.highest_failing.jax) < Version(v) < passing.version]
        if gap:
            result.notes.append(f"{', '.join(gap)} (between the highest failing release and the true minimum) cannot "
                                f"be installed here: the bound could be as low as {gap[0]}")
    elif result.not_installable and result.declared and Version(result.declared) < passing.version:
        result.notes.append(f"the releases below {passing.version} that it admits are not installable here, so the "
                            f"declared minimum {result.declared} cannot be tested")
