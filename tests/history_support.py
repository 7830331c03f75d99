"""Nights of compat reports for the history tests, written by compat's own ``to_json`` from real Matrix and
CellResult values (so the format is the one ``jaxrel compat`` writes), with a planted break, a flaky test, a
cell that stops reporting (stale) and an environment failure (infra)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from jaxrel.cells.matrix import Cell, FrontendSpec, Matrix, Outcome, Purpose
from jaxrel.cells.suites import TestCounts
from jaxrel.compat.report import to_json
from jaxrel.compat.result import CellResult
from jaxrel.compat.triage import Failure

BROKEN_TEST = "tests/test_api.py::test_pytree_roundtrip"
FLAKY_TEST = "tests/test_transforms.py::test_vmap_grad"
TESTS = ("tests/test_api.py::test_jit", BROKEN_TEST, FLAKY_TEST)
CELLS = {  # id → (backend, plugins)
    "py3.12-jaxlib0.12.0": ("0.12.0", ()),  # newer than the frontend: the guard refuses it, as the rules expect
    "py3.12-jaxlib0.11.0": ("0.11.0", ()),
    "py3.12-jaxlib0.11.2": ("0.11.2", ()),
    "py3.12-jaxlib0.11.2-cuda13": ("0.11.2", (("jax-cuda13-plugin", "0.11.2"), ("jax-cuda13-pjrt", "0.11.2"))),
}
BREAK_NIGHT, FLAKY_NIGHT, INFRA_NIGHT, LAST_CUDA_NIGHT = 4, 5, 6, 2


def commit(night: int) -> str:
    return f"{night:02d}" + "c0ffee" * 6 + "ab"


def night_date(night: int) -> str:
    return f"2026-10-{night:02d}"


def _wheels(backend: str, plugins: tuple[tuple[str, str], ...]) -> dict[str, str]:
    wheels = {f"jaxlib-{backend}-cp312-cp312-manylinux_2_27_x86_64.whl": f"{backend.replace('.', '')}".ljust(64, "a")}
    for name, version in plugins:
        stem = name.replace("-", "_")
        tag = "py3-none" if name.endswith("pjrt") else "cp312-cp312"
        wheels[f"{stem}-{version}-{tag}-manylinux_2_27_x86_64.whl"] = "b" * 64
    return wheels


def report(night: int) -> dict[str, object]:
    cells, results = [], []
    for cell_id, (backend, plugins) in CELLS.items():
        if plugins and night > LAST_CUDA_NIGHT:
            continue  # the GPU runner went away: the cell stops reporting
        refused = backend == "0.12.0"
        cell = Cell(cell_id, "3.12", backend, plugins, Purpose.NEWER_THAN_FRONTEND if refused else
                    Purpose.PLUGINS if plugins else Purpose.ADMITTED, Outcome.REFUSED if refused else Outcome.ACCEPTED)
        cells.append(cell)
        if refused:
            result = CellResult(cell, Outcome.REFUSED, True, 3.0, guard_message="jaxlib 0.12.0 is newer than jax",
                                wheels=_wheels(backend, plugins))
            result.settle()
            results.append(result)
            continue
        outcomes = {test: "passed" for test in TESTS}
        failures, problems = [], []
        if cell_id == "py3.12-jaxlib0.11.0" and night >= BREAK_NIGHT:
            outcomes[BROKEN_TEST] = "failed"
            failures.append(Failure("compat suite", BROKEN_TEST, "failed", "AssertionError: trees differ at 0x7f3a",
                                    "compat regression"))
        if cell_id == "py3.12-jaxlib0.11.2" and night == FLAKY_NIGHT:
            outcomes[FLAKY_TEST] = "failed"
            failures.append(Failure("compat suite", FLAKY_TEST, "failed", "TimeoutError", "flaky",
                                    "passed when rerun on the same cell"))
        if cell_id == "py3.12-jaxlib0.11.2" and night == INFRA_NIGHT:
            outcomes, problems = {}, ["environment: uv could not install jaxlib 0.11.2 (the index answered 503)"]
        result = CellResult(cell, Outcome.ACCEPTED, True, 12.5, tests=TestCounts(passed=len(outcomes)),
                            outcomes=outcomes, failures=failures, problems=problems,
                            wheels=_wheels(backend, plugins))
        result.settle()
        results.append(result)
    matrix = Matrix("jax", FrontendSpec("jax", "0.12.0.dev0", "0.11.0", "source jax"), "jaxlib", cells)
    return to_json(matrix, results, frontend={"commit": commit(night), "dirty": False})


def write_nights(folder: Path, nights: int = 7, make: Callable[[int], dict[str, object]] | None = None) -> list[Path]:
    """``folder/night-N/report.json`` for nights 1..``nights``, each ``make(N)`` (default :func:`report`)."""
    paths = []
    for night in range(1, nights + 1):
        path = folder / f"night-{night}" / "report.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps((make or report)(night), indent=1))
        paths.append(path)
    return paths


def bisect_report(folder: Path, found: bool = True) -> Path:
    """``bisect.json`` as ``jaxrel bisect`` writes it, naming the planted break's night as the first bad commit."""
    from jaxrel.bisect.git import Commit
    from jaxrel.bisect.report import to_json as bisect_json
    from jaxrel.bisect.search import Result

    culprit = Commit(commit(BREAK_NIGHT), "tree_util: a roundtrip that drops None leaves", "dev <dev@example.invalid>",
                     "2026-10-04T02:00:00+00:00")
    result = Result("found" if found else "candidates", "py3.12-jaxlib0.11.0", commit(BREAK_NIGHT + 1),
                    [commit(BREAK_NIGHT - 1)], commits_in_range=2, first_bad=culprit if found else None,
                    message="" if found else "skips left 2 candidates")
    path = folder / "bisect.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(bisect_json(result), indent=1))
    return path


OWN_TEST = "tests/api_util_test.py::ApiUtilTest::test_resolve_kwargs"
OWN_RED_NIGHTS = (3, 4)  # the own test fails on these nights and passes on every other one


def own_tests_report(night: int) -> dict[str, object]:
    """One cell whose frontend's own tests ran (only failures are listed, as compat writes them): ``OWN_TEST``
    fails on ``OWN_RED_NIGHTS``; night 6 is an environment failure (nothing ran)."""
    from jaxrel.cells.suites import TestCounts

    cell = Cell("py3.12-jaxlib0.11.0", "3.12", "0.11.0", (), Purpose.ADMITTED, Outcome.ACCEPTED)
    red = night in OWN_RED_NIGHTS
    failures = [Failure("own tests", OWN_TEST, "failed", "AttributeError: module 'jaxlib._jax' has no attribute "
                        "'RawBuffer'", "compat regression")] if red else []
    if night == 6:
        result = CellResult(cell, Outcome.ACCEPTED, True, 1.0, problems=["environment: the index answered 503"],
                            wheels=_wheels("0.11.0", ()))
    else:
        result = CellResult(cell, Outcome.ACCEPTED, True, 20.0, tests=TestCounts(passed=2),
                            outcomes={"tests/test_api.py::test_jit": "passed"}, failures=failures,
                            frontend_tests=TestCounts(passed=471 - red, failed=int(red)),
                            wheels=_wheels("0.11.0", ()))
    result.settle()
    matrix = Matrix("jax", FrontendSpec("jax", "0.12.0.dev0", "0.11.0", "source jax"), "jaxlib", [cell])
    return to_json(matrix, [result], frontend={"commit": commit(night), "dirty": False})


def write_own_nights(folder: Path, nights: int = 9) -> list[Path]:
    return write_nights(folder, nights, own_tests_report)
