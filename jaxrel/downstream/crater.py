"""A Crater for the frontend: each library's tests against the newest frontend release (the baseline) and a frontend
built from source (the candidate), in one environment per library (prepared once, the frontend swapped), the results
classified and the failures grouped by root cause.

Outcomes, per library (Rust's Crater's, for a frontend):

- ``regressed``: tests that pass on the baseline fail on the candidate (after a rerun);
- ``fixed``: tests that failed on the baseline pass on the candidate, and nothing new fails;
- ``spurious``: a failure that passed on its rerun (flaky), or an infra failure (a run past the budget, a crash);
- ``broken``: the library cannot be installed, or cannot even be imported (no test passes), on both;
- ``test-pass``: passes on both;
- ``test-fail``: the same tests fail on both.

Regressed libraries are grouped by the signature of their first new failure: one removal that breaks five
libraries is one group, with its five.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxrel.cells.records import signature
from jaxrel.distributions import envs
from jaxrel.downstream.cellrun import CellResult, CellSpec, Settings, installed_pins, prepare, test
from jaxrel.downstream.library import Library
from jaxrel.downstream.testsource import StagedTests

__all__ = ["OUTCOMES", "CraterResult", "LibraryVerdict", "classify", "group", "run_library"]

OUTCOMES = ("regressed", "fixed", "spurious", "broken", "test-pass", "test-fail")
JUDGED = ("regressed", "fixed", "test-pass", "test-fail")  # a verdict on the frontend; broken and spurious are not


@dataclass
class LibraryVerdict:
    """One library's two runs and what they mean."""

    name: str
    version: str
    outcome: str  # one of OUTCOMES
    reason: str
    route: str = ""
    baseline: CellResult | None = None
    candidate: CellResult | None = None
    failing: list[str] = field(default_factory=list)  # the new failures (regressed) or the shared ones
    signature: str = ""
    group: str | None = None  # "G1", … for regressions grouped by signature
    culprit: dict[str, Any] | None = None  # the frontend commit bisect named
    budget: float | None = None  # seconds each of its test runs had
    budget_from: str = ""  # where that budget came from (learned, its card, the default)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "outcome": self.outcome, "reason": self.reason,
                "route": self.route, "group": self.group, "failing": self.failing, "signature": self.signature,
                "culprit": self.culprit, "budget": self.budget, "budget_from": self.budget_from,
                "baseline": self.baseline.to_json() if self.baseline else None,
                "candidate": self.candidate.to_json() if self.candidate else None}


@dataclass
class CraterResult:
    """The run: which frontends, each library's verdict, the groups."""

    frontend: str  # "jax at REV (commit)"
    frontend_commit: str
    baseline: str  # the newest release's version
    python: str
    libraries: list[LibraryVerdict] = field(default_factory=list)
    seconds: float = 0.0
    boxed: bool = True  # the libraries' tests ran in the box (False: --unboxed, said in every report)
    baseline_why: str = ""  # how the baseline was chosen
    backends: tuple[str, str] = ("", "")  # the backend of each side: what the baseline and the candidate admit
    libraries_as_of: str = ""  # a library named without a version: its newest release uploaded before this day
    carded: int = 0  # the libraries the cards name (0: the run did not come from the cards)
    not_run: list[tuple[str, str]] = field(default_factory=list)  # carded libraries skipped, each with its reason
    jobs: int = 1  # libraries run at once
    memory_capacity: int | None = None  # with jobs > 1: the memory the scheduler kept the expected peaks within

    def judged(self) -> int:
        """Libraries with a verdict on the frontend: not broken, not spurious."""
        return sum(1 for v in self.libraries if v.outcome in JUDGED)

    def coverage(self) -> str:
        """``ecosystem: 38 of 49 carded libraries judged; not run: jraph (…)``; empty when no cards were used."""
        if not self.carded:
            return ""
        skipped = "; ".join(f"{name} ({why})" for name, why in self.not_run)
        return (f"ecosystem: {self.judged()} of {self.carded} carded libraries judged ({len(self.libraries)} run"
                + (f"; not run: {skipped})" if skipped else ")"))

    def groups(self) -> dict[str, tuple[str, list[str]]]:
        """Group id → (signature, library names)."""
        found: dict[str, tuple[str, list[str]]] = {}
        for verdict in self.libraries:
            if verdict.group:
                found.setdefault(verdict.group, (verdict.signature, []))[1].append(verdict.name)
        return found

    def to_json(self) -> dict[str, Any]:
        return {"kind": "downstream-crater", "frontend": self.frontend, "frontend_commit": self.frontend_commit,
                "baseline": self.baseline, "baseline_why": self.baseline_why, "python": self.python,
                "backends": {"baseline": self.backends[0], "candidate": self.backends[1]}, "boxed": self.boxed,
                "libraries_as_of": self.libraries_as_of, "jobs": self.jobs, "memory_capacity": self.memory_capacity,
                "ecosystem": {"carded": self.carded, "run": len(self.libraries), "judged": self.judged(),
                              "not_run": [{"library": n, "reason": why} for n, why in self.not_run]},
                "libraries": [v.to_json() for v in self.libraries],
                "groups": [{"group": g, "signature": s, "libraries": names}
                           for g, (s, names) in sorted(self.groups().items())],
                "counts": {o: sum(1 for v in self.libraries if v.outcome == o) for o in OUTCOMES},
                "seconds": round(self.seconds, 1)}


def _import_broken(cell: CellResult) -> bool:
    return bool(cell.failing) and all(cell.errors.get(t, "").startswith(("ImportError", "ModuleNotFoundError"))
                                      or t.endswith(".py") for t in cell.failing)


def classify(base: CellResult, cand: CellResult) -> tuple[str, str, list[str], str]:
    """(outcome, reason, failing tests, signature) for one library's baseline and candidate runs."""
    if "not-installable" in (base.outcome, cand.outcome):
        which = base if base.outcome == "not-installable" else cand
        return "broken", f"cannot be installed: {which.reason.splitlines()[-1][:300] if which.reason else ''}", [], ""
    if "infra" in (base.outcome, cand.outcome):
        which = base if base.outcome == "infra" else cand
        reason = which.reason if which.reason.startswith("timeout") else f"infra: {which.reason}"
        return "spurious", reason[:300], [], ""
    before, after = set(base.failing), set(cand.failing)
    new = sorted(after - before)
    if new:
        return "regressed", f"{len(new)} new failing: {new[0]} ({cand.errors.get(new[0], '')[:200]})", new, \
            _signature_of(cand, new[0])
    if cand.flaky or base.flaky:
        flaky = cand.flaky or base.flaky
        return "spurious", f"flaky: {', '.join(flaky)} failed, then passed on a rerun", [], ""
    if before - after and not after:
        gone = sorted(before - after)
        return "fixed", f"{len(gone)} fixed: {gone[0]}", gone, ""
    if after:
        shared = sorted(after)
        if _import_broken(base) and _import_broken(cand) and not (base.passed or cand.passed):
            return "broken", f"cannot be imported on either: {cand.errors.get(shared[0], '')[:200]}", shared, \
                _signature_of(cand, shared[0])
        return "test-fail", f"{len(shared)} failing on both: {shared[0]}", shared, _signature_of(cand, shared[0])
    return "test-pass", f"{cand.passed} passed on both", [], ""


def _signature_of(cell: CellResult, test_id: str) -> str:
    return signature(cell.errors.get(test_id, ""))


def group(verdicts: list[LibraryVerdict]) -> None:
    """Give regressed libraries sharing a signature one group id (``G1`` the largest group, ties by signature)."""
    by_signature: dict[str, list[LibraryVerdict]] = {}
    for verdict in verdicts:
        if verdict.outcome == "regressed":
            by_signature.setdefault(verdict.signature, []).append(verdict)
    ordered = sorted(by_signature.items(), key=lambda item: (-len(item[1]), item[0]))
    for number, (_, members) in enumerate(ordered, start=1):
        for verdict in members:
            verdict.group = f"G{number}"


def _candidate_environment(library: Library, tests: StagedTests, baseline_env: envs.Env, spec: CellSpec,
                           settings: Settings, progress: Callable[[str], None]) -> tuple[envs.Env | None, CellResult]:
    """The candidate's own environment (its backend differs from the baseline's), held to the baseline's resolution
    of everything else so that only the frontend and its backend differ; when the candidate's backend needs other
    versions, resolved as of the same era instead, and the result says so (``resolution``)."""
    family = settings.family
    pins = installed_pins(baseline_env, (family.frontend.distribution, family.backend.distribution, "jaxrel",
                                         *(plugin.distribution for plugin in family.plugins)))
    held = settings.workdir / "envs" / f"{library.name}-baseline-resolution.txt"
    held.write_text("".join(f"{pin}\n" for pin in pins), encoding="utf-8")
    shutil.rmtree(baseline_env.root, ignore_errors=True)
    progress(f"crater:   candidate's own environment: {family.backend.distribution} {spec.backend}, everything else "
             f"as the baseline's ({len(pins)} pins)")
    try:
        env, cand = prepare(library, tests, spec, settings, role="candidate", constraints=held)
        if env is not None:
            cand.resolution = f"the baseline's, but {family.frontend.distribution} and {family.backend.distribution}"
            return env, cand
        progress(f"crater:   … not with the baseline's versions ({cand.reason[-200:]}); resolving as of the same era")
        why = cand.reason.splitlines()[-1][:200] if cand.reason else ""
        env, cand = prepare(library, tests, spec, settings, role="candidate")
        cand.resolution = f"its own, as of the baseline's era: the baseline's versions do not fit its backend ({why})"
        return env, cand
    finally:
        held.unlink(missing_ok=True)


def run_library(library: Library, tests: StagedTests, baseline: CellSpec, candidate_wheel: Path, candidate_label: str,
                settings: Settings, progress: Callable[[str], None] = lambda line: None,
                candidate_backend: str | None = None) -> LibraryVerdict:
    """Test the baseline, then the candidate. When both sides take the same backend, one environment is prepared
    with the baseline and the candidate frontend swapped in; when the candidate admits another backend (every jax
    release pins its own jaxlib), the candidate gets an environment of its own, resolved as of the same era, so
    only the frontend and its backend differ."""
    backend = candidate_backend or baseline.backend
    progress(f"crater: {library.label}: environment with {settings.family.frontend.distribution} {baseline.frontend} "
             f"/ {settings.family.backend.distribution} {baseline.backend} …")
    start = time.perf_counter()
    env, base = prepare(library, tests, baseline, settings, role="baseline")
    verdict = LibraryVerdict(library.name, library.version, "broken", "", tests.route)
    if env is None:
        verdict.baseline = base
        verdict.outcome, verdict.reason = ("broken", f"cannot be installed: {base.reason[-300:]}") \
            if base.outcome == "not-installable" else ("spurious", f"infra: {base.reason[-300:]}")
        return verdict
    try:
        test(env, library, tests, settings, base)
        progress(f"crater:   {library.name} baseline: {base.outcome} {base.reason[:120]}")
        if backend == baseline.backend:
            cand = CellResult(candidate_label, backend, "infra", role="candidate", as_of=baseline.as_of)
            problem = envs.reinstall(env, candidate_wheel, settings.family.frontend.distribution,
                                     use_uv=settings.use_uv, index=settings.index)
            if problem is None:
                test(env, library, tests, settings, cand)
            else:
                cand.outcome, cand.reason = "not-installable", f"the candidate frontend {problem}"
        else:
            own, cand = _candidate_environment(library, tests, env, CellSpec(candidate_label, backend, baseline.as_of,
                                                                                 candidate_wheel), settings, progress)
            if own is not None:
                env = own
                test(env, library, tests, settings, cand)
        progress(f"crater:   {library.name} candidate: {cand.outcome} {cand.reason[:120]}")
    finally:
        shutil.rmtree(env.root, ignore_errors=True)
    verdict.baseline, verdict.candidate = base, cand
    verdict.outcome, verdict.reason, verdict.failing, verdict.signature = classify(base, cand)
    base.seconds["total"] = round(time.perf_counter() - start, 2)
    return verdict
