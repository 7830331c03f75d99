"""A compat ``report.json`` read once into typed values for the history (the boundary for reports).

What a night keeps of each cell: its id, Python, the frontend (name, version, commit), the backend and
plugin wheels that made it (name, version, wheel sha256 from the cell's installed wheels), the
platform and device, the cell's own outcome (``cell`` as a test: passed, failed, infra, or refused
where the guard refused the set as the rules expect: a set that does not work, by design) and every
test of the compat suite (``outcomes``) and every failed test of the frontend's own tests, with the
triage's verdict (``flaky`` when it passed on rerun). A file that is not JSON, not a compat report
(another tool's JSON, a report of nothing) or holds a field of the wrong type is one
:class:`~jaxrel.history.store.HistoryError` line (exit 2) naming the file and the field.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from jaxrel._util import localfiles
from jaxrel._util.literals import is_version
from jaxrel.cells.records import signature
from jaxrel.distributions.filenames import name_and_version, wheel_tags
from jaxrel.errors import JaxrelError
from jaxrel.history.downstream_reports import read_downstream
from jaxrel.history.records import Artifact, BisectRecord, CellRecord, ReportRecord, TestRecord, need, short_text
from jaxrel.history.store import CELL_TEST, OWN_TESTS, HistoryError

__all__ = ["Artifact", "BisectRecord", "CellRecord", "ReportRecord", "TestRecord", "read_any", "read_report"]

SUITES = ("", "compat", "own")  # a result's suite: the cell itself, the compat suite, the frontend's own tests
_COMMIT = re.compile(r"[0-9a-f]{7,64}")
MAX_REPORT = 256 << 20


def read_any(path: Path) -> ReportRecord | BisectRecord:
    """A compat ``report.json``, a ``bisect.json``, an ``atlas.json`` or the device check's ``device.json``, told
    apart by their shape."""
    try:
        raw = localfiles.read_bytes(path, what="the report", limit=MAX_REPORT)
        data = localfiles.loads_json(raw, str(path))
    except JaxrelError as error:
        raise HistoryError(str(error)) from None
    sha256 = hashlib.sha256(raw).hexdigest()
    if isinstance(data, dict) and "goods" in data and "first_bad" in data:
        return _bisect(data, path, sha256)
    if isinstance(data, dict) and "columns" in data and "rows" in data:
        return _atlas(data, path, sha256)
    if isinstance(data, dict) and "probe" in data and "doctor" in data:
        return _device(data, path, sha256)
    if isinstance(data, dict) and data.get("kind") in ("downstream-crater", "downstream-minimum"):
        return read_downstream(data, path, sha256)
    return read_report(path)


ATLAS_STATES = {"works": "passed", "removed": "passed", "not yet": "skipped", "skipped": "skipped",
                "fails": "failed", "cell failed": "infra"}  # an API that is gone where its docs say works as designed


def _atlas(data: dict[str, Any], path: Path, sha256: str) -> ReportRecord:
    """``jaxrel atlas``'s atlas.json: each column (a jax release with a jaxlib release) a cell, each API a test."""
    columns, rows = data.get("columns"), data.get("rows")
    need(isinstance(columns, list) and bool(columns) and isinstance(rows, list), path, "columns and rows",
          "a non-empty list and a list")
    assert isinstance(columns, list) and isinstance(rows, list)
    cells: list[CellRecord] = []
    for i, column in enumerate(columns):
        where = f"columns[{i}]"
        need(isinstance(column, dict), path, where, "an object")
        key, jax, jaxlib = (short_text(column.get(k), path, f"{where}.{k}") for k in ("key", "jax", "jaxlib"))
        python = short_text(column.get("python"), path, f"{where}.python")
        problem = column.get("problem")
        record = CellRecord(f"atlas-py{python}-jax{jax}-jaxlib{jaxlib}", python, "any", "cpu",
                            [("frontend", Artifact("jax", jax)), ("backend", Artifact("jaxlib", jaxlib))])
        outcomes = []
        for j, row in enumerate(rows):
            need(isinstance(row, dict) and isinstance(row.get("cells"), dict), path, f"rows[{j}]",
                  "an object with cells")
            api = short_text(row.get("api"), path, f"rows[{j}].api")
            seen = row["cells"].get(key)
            if seen is None:
                continue
            need(isinstance(seen, dict) and seen.get("state") in ATLAS_STATES, path, f"rows[{j}].cells[{key!r}]",
                  f"a state ({', '.join(ATLAS_STATES)})")
            detail = str(seen.get("detail", ""))
            outcomes.append(TestRecord(api[:500], ATLAS_STATES[seen["state"]], None,
                                       signature(detail) if seen["state"] == "fails" else "", "compat"))
        failed = any(t.outcome == "failed" for t in outcomes)
        cell = "infra" if isinstance(problem, str) and problem else "failed" if failed else "passed"
        record.tests = [TestRecord(CELL_TEST, cell, None, signature(problem) if isinstance(problem, str) else ""),
                        *outcomes]
        cells.append(record)
    return ReportRecord(sha256, Artifact("jax", ""), cells, "atlas")


DEVICE_STEPS = ("compat_suite", "jax_tests", "cpu_only_wheel")


def _device(data: dict[str, Any], path: Path, sha256: str) -> ReportRecord:
    """The device check's device.json: the installed set on one GPU a cell; its steps, the kernels and the GPU code
    tests."""
    doctor, probe = data.get("doctor"), data.get("probe")
    need(isinstance(doctor, dict) and isinstance(probe, dict), path, "doctor and probe", "objects")
    assert isinstance(doctor, dict) and isinstance(probe, dict)
    environment = doctor.get("environment")
    need(isinstance(environment, dict), path, "doctor.environment", "what jaxrel doctor found installed")
    assert isinstance(environment, dict)

    def named(item: object, where: str) -> Artifact:
        need(isinstance(item, dict), path, where, "an object with a name and a version")
        assert isinstance(item, dict)
        return Artifact(str(canonicalize_name(short_text(item.get("name"), path, f"{where}.name"))),
                        short_text(item.get("version"), path, f"{where}.version"))

    frontend = named(environment.get("frontend"), "doctor.environment.frontend")
    backend = named(environment.get("backend"), "doctor.environment.backend")
    plugins = environment.get("plugins", [])
    need(isinstance(plugins, list), path, "doctor.environment.plugins", "a list")
    artifacts = [("frontend", frontend), ("backend", backend),
                 *(("plugin", named(p, f"doctor.environment.plugins[{i}]")) for i, p in enumerate(plugins))]
    python = str(data.get("python", ""))[:20]
    python = ".".join(python.split(".")[:2]) if re.fullmatch(r"3\.\d+(\.\d+)?", python) else "?"
    kind = probe.get("device_kind") if isinstance(probe.get("device_kind"), str) else "no GPU"
    device = re.sub(r"[^A-Za-z0-9.-]+", "-", str(kind)).strip("-")[:60] or "gpu"
    families = sorted({a.name.removeprefix("jax-").split("-")[0] for _, a in artifacts[2:]})  # jax-cuda13-pjrt: cuda13
    plugin = "-".join(families) or "noplugin"
    record = CellRecord(f"device-py{python}-{backend.name}{backend.version}-{plugin}-{device}", python, "any",
                        device, artifacts)
    ok = data.get("ok")
    need(isinstance(ok, bool), path, "ok", "true or false")
    tests = [TestRecord(CELL_TEST, "infra" if data.get("no_gpu") else "passed" if ok else "failed", None,
                        signature(str(probe.get("error", ""))) if data.get("no_gpu") else "")]
    for step in DEVICE_STEPS:
        found = data.get(step)
        if isinstance(found, dict) and isinstance(found.get("ok"), bool):
            seconds = found.get("seconds")
            tests.append(TestRecord(f"device: {step.replace('_', ' ')}", "passed" if found["ok"] else "failed",
                                    float(seconds) if isinstance(seconds, (int, float)) else None,
                                    "" if found["ok"] else signature(str(found.get("tail", ""))[-300:]), "compat"))
    if isinstance(data.get("kernels_ok"), bool):
        tests.append(TestRecord("device: kernels against NumPy", "passed" if data["kernels_ok"] else "failed",
                                suite="compat"))
    if isinstance(data.get("gpu_code"), list):
        held = {"sm_80", "sm_90"} <= {str(code) for code in data["gpu_code"]}
        tests.append(TestRecord("device: GPU code for sm_80 and sm_90", "passed" if held else "failed",
                                suite="compat"))
    tests += _other_cuda_wheels(data.get("other_cuda_wheels", []), path)
    record.tests = tests
    return ReportRecord(sha256, frontend, [record], "device")


def _bisect(data: dict[str, Any], path: Path, sha256: str) -> BisectRecord:
    cell = short_text(data.get("cell"), path, "cell")
    bad, goods = data.get("bad"), data.get("goods")
    need(isinstance(bad, str) and bool(_COMMIT.fullmatch(bad)), path, "bad", "a commit hash")
    need(isinstance(goods, list) and bool(goods) and all(isinstance(g, str) and _COMMIT.fullmatch(g) for g in goods),
          path, "goods", "a list of commit hashes")
    assert isinstance(goods, list)
    first = data.get("first_bad")
    culprit = None
    if data.get("status") == "found":
        named = first.get("hash") if isinstance(first, dict) else None
        need(isinstance(named, str) and bool(_COMMIT.fullmatch(named)), path, "first_bad.hash",
              "the commit bisect named")
        culprit = str(named)
    message = data.get("message")
    steps = data.get("steps")
    log = f"{data.get('status')}: {message if isinstance(message, str) else ''}".strip()[:2000]
    log += f"\n{len(steps) if isinstance(steps, list) else 0} steps"
    tests = data.get("tests", [])
    need(isinstance(tests, list) and all(isinstance(t, str) and t.isprintable() for t in tests), path, "tests",
          "a list of test ids")
    version_only = data.get("version_only", False)
    need(isinstance(version_only, bool), path, "version_only", "true or false")
    return BisectRecord(sha256, cell, str(goods[-1]), str(bad), culprit, log, tuple(t[:500] for t in tests[:200]),
                        culprit is not None and bool(version_only))


def _other_cuda_wheels(others: object, path: Path) -> list[TestRecord]:
    """One test per CUDA wheel of a major other than the plugin's (refused by the guard, then run without it)."""
    need(isinstance(others, list), path, "other_cuda_wheels", "a list")
    assert isinstance(others, list)
    tests = []
    for index, other in enumerate(others):
        where = f"other_cuda_wheels[{index}]"
        need(isinstance(other, dict) and isinstance(other.get("ok"), bool), path, where, "an object with ok")
        wheel = short_text(other.get("wheel"), path, f"{where}.wheel")
        probe = other.get("probe") if isinstance(other.get("probe"), dict) else {}
        why = "" if other["ok"] else signature(str(other.get("guard") or probe.get("error", ""))[-300:])
        tests.append(TestRecord(f"device: {wheel[:60]} (another CUDA major)", "passed" if other["ok"] else "failed",
                                None, why, "compat"))
    return tests


def read_report(path: Path) -> ReportRecord:
    """The report at ``path``, checked field by field."""
    try:
        raw = localfiles.read_bytes(path, what="the report", limit=MAX_REPORT)
        data = localfiles.loads_json(raw, str(path))
    except JaxrelError as error:
        raise HistoryError(str(error)) from None
    need(isinstance(data, dict), path, "the file", "a JSON object")
    need(isinstance(data.get("matrix"), dict) and isinstance(data.get("cells"), list), path, "matrix and cells",
          "an object and a list")
    matrix = data["matrix"]
    front = matrix.get("frontend")
    need(isinstance(front, dict) and isinstance(front.get("name"), str) and isinstance(front.get("version"), str),
          path, "matrix.frontend", "an object with a name and a version")
    tested = data.get("frontend") if isinstance(data.get("frontend"), dict) else {}
    commit = tested.get("commit", "") if isinstance(tested.get("commit", ""), str) else ""
    need(not commit or bool(_COMMIT.fullmatch(commit)), path, "frontend.commit", "a git commit hash")
    frontend = Artifact(str(canonicalize_name(front["name"])), front["version"], commit)
    backend_name = matrix.get("backend")
    need(isinstance(backend_name, str) and bool(backend_name), path, "matrix.backend", "the backend's name")
    cells = [_cell(item, i, path, frontend, str(canonicalize_name(backend_name))) for i, item in
             enumerate(data["cells"])]
    need(bool(cells), path, "cells", "a non-empty list (a run that tested nothing proves nothing)")
    minimum = front.get("minimum_backend", "")
    need(isinstance(minimum, str) and (not minimum or is_version(minimum)), path,
         "matrix.frontend.minimum_backend", "a PEP 440 version")
    return ReportRecord(hashlib.sha256(raw).hexdigest(), frontend, cells, minimum_backend=minimum)



def _cell(item: Any, i: int, path: Path, frontend: Artifact, backend: str) -> CellRecord:
    where = f"cells[{i}]"
    need(isinstance(item, dict) and isinstance(item.get("cell"), dict), path, where, "an object with a cell")
    cell = item["cell"]
    cell_id = short_text(cell.get("id"), path, f"{where}.cell.id")
    python = short_text(cell.get("python"), path, f"{where}.cell.python")
    backend_version = short_text(cell.get("backend"), path, f"{where}.cell.backend")
    plugins = cell.get("plugins", [])
    need(isinstance(plugins, list) and all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
                                            for p in plugins), path, f"{where}.cell.plugins", "[name, version] pairs")
    wheels = item.get("wheels", {})
    need(isinstance(wheels, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in wheels.items()),
          path, f"{where}.wheels", "file name → sha256")
    shas, platform = {}, ""
    for filename, sha in wheels.items():
        try:
            name, version = name_and_version(filename)
            tags = wheel_tags(filename) if filename.endswith(".whl") else frozenset()
        except (ValueError, JaxrelError):
            continue
        shas[(name, str(version))] = sha
        if name == backend and tags:
            platform = sorted(t.platform for t in tags)[0]
    artifacts = [("frontend", frontend),
                 ("backend", Artifact(backend, backend_version, sha256=shas.get((backend, backend_version), "")))]
    for name, version in plugins:
        canonical = str(canonicalize_name(name))
        artifacts.append(("plugin", Artifact(canonical, version, sha256=shas.get((canonical, version), ""))))
    device = "gpu" if any("cuda" in n or "rocm" in n for n, _ in plugins) else (
        "tpu" if any(n.startswith("libtpu") for n, _ in plugins) else "cpu")
    record = CellRecord(cell_id, python, platform or "any", device, artifacts)
    record.tests = _tests(item, where, path)
    return record


def _tests(item: dict[str, Any], where: str, path: Path) -> list[TestRecord]:
    ok, problems = item.get("ok"), item.get("problems", [])
    need(isinstance(ok, bool), path, f"{where}.ok", "true or false")
    need(isinstance(problems, list), path, f"{where}.problems", "a list")
    seconds = item.get("seconds")
    duration = float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else None
    failures = item.get("failures", [])
    need(isinstance(failures, list) and all(isinstance(f, dict) for f in failures), path, f"{where}.failures",
          "a list of objects")
    infra = not ok and not failures and bool(problems)  # failed before any test: environment, install, timeout
    refused = item.get("observed") == "refused"  # the guard refused the set (as the rules expect, when ok)
    outcome = "refused" if refused and ok else "passed" if ok else ("infra" if infra else "failed")
    tests = [TestRecord(CELL_TEST, outcome, duration,
                        signature(str(problems[0])) if problems else "")]
    verdicts = {str(f.get("test")): f for f in failures if isinstance(f.get("test"), str)}
    outcomes = item.get("outcomes", {})
    need(isinstance(outcomes, dict), path, f"{where}.outcomes", "test id → outcome")
    for test, outcome in outcomes.items():
        need(isinstance(test, str) and isinstance(outcome, str), path, f"{where}.outcomes", "test id → outcome")
        tests.append(_test(test, outcome.split(":", 1)[0].strip(), verdicts.pop(test, None), "compat"))
    for test, failure in verdicts.items():  # the frontend's own tests: only their failures are listed
        suite = "own" if failure.get("suite") == "own tests" else "compat"
        tests.append(_test(test, str(failure.get("outcome", "failed")), failure, suite))
    own = item.get("frontend_tests")
    if isinstance(own, dict) and all(isinstance(own.get(k, 0), int) for k in ("passed", "failed", "errors")):
        ran = own.get("passed", 0) + own.get("failed", 0) + own.get("errors", 0)
        if ran:  # the selection ran: each own test not listed as failing passed
            hard = [t for t in tests if t.suite == "own" and t.outcome == "failed"]
            tests.append(TestRecord(OWN_TESTS, "failed" if hard else "passed", None,
                                    hard[0].signature if hard else "", "own"))
    return tests


def _test(test: str, outcome: str, failure: dict[str, Any] | None, suite: str) -> TestRecord:
    if outcome not in ("passed", "failed", "skipped", "error"):
        outcome = "failed"
    if outcome == "error":
        outcome = "failed"
    if failure is not None and failure.get("verdict") == "flaky":
        outcome = "flaky"
    message = str(failure.get("message", "")) if failure else ""
    return TestRecord(test[:500], outcome, None, signature(message), suite)


