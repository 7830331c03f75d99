"""Atlas and device check reports kept by ``history ingest`` as cells of their own: atlas cells and a device's GPU
cell, the real reports of 2026-11-27 (an H100 with jax[cuda13] 0.11.2; the second with CUDA wheels of two majors,
the cuda13 wheel in full and the cuda12 wheel refused by its guard, then run with it skipped), a failing other
wheel, and damaged entries refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from boundary_cli import run

from jaxrel.history import selections
from jaxrel.history.store import open_store

REAL = Path(__file__).resolve().parents[1] / "data" / "history" / "device-h100-every-cuda-wheel-2026-11-27.json"
OTHER = "device: jaxrel_rmsnorm_cuda12 (another CUDA major)"


def _results(db: str) -> dict[str, tuple[str, str]]:
    store = open_store(db)
    try:
        signatures = {str(t): str(s) for t, s in store.rows("SELECT test, signature FROM results")}
        return {test: (outcome, signatures.get(test, "")) for tests in selections.outcomes(store, "1 = 1").values()
                for test, (outcome, _) in tests.items()}
    finally:
        store.close()


def _ingest(tmp_path: Path, data: dict, capsys: pytest.CaptureFixture[str]):
    report = tmp_path / "device.json"
    report.write_text(json.dumps(data))
    db = str(tmp_path / "h.sqlite")
    return run(["history", "ingest", "--db", db, "--night", "2026-11-27", str(report)], capsys), db


def test_the_real_report_keeps_the_other_majors_wheel_as_a_test(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(REAL.read_text())
    assert [other["wheel"] for other in data["other_cuda_wheels"]] == ["jaxrel_rmsnorm_cuda12"]
    done, db = _ingest(tmp_path, data, capsys)
    assert done.code == 0, done.err
    results = _results(db)
    assert results[OTHER] == ("passed", "")
    assert results["cell"][0] == "passed" and results["device: compat suite"][0] == "passed"
    pins = ["jax==0.11.2", "jaxlib==0.11.2", "jax-cuda13-plugin==0.11.2", "jax-cuda13-pjrt==0.11.2"]
    assert json.loads(run(["history", "query", "--db", db, "--json", *pins], capsys).out)["verdict"] == "known good"


def test_a_failed_other_wheel_is_a_failed_test_with_its_reason(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(REAL.read_text())
    data["ok"] = False
    data["other_cuda_wheels"][0].update(ok=False, guard="imported: the guard did not refuse it at /x/y 0x1f")
    done, db = _ingest(tmp_path, data, capsys)
    assert done.code == 0, done.err
    assert _results(db)[OTHER] == ("failed", "imported: the guard did not refuse it at /… #")


@pytest.mark.parametrize("others, where", [
    ("cuda12", "other_cuda_wheels should be a list"),
    ([{"wheel": "jaxrel_rmsnorm_cuda12"}], "other_cuda_wheels[0] should be an object with ok"),
    ([{"ok": True, "wheel": "x\n" * 400}], "other_cuda_wheels[0].wheel should be a short string"),
])
def test_damaged_other_wheels_are_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      others: object, where: str) -> None:
    data = json.loads(REAL.read_text())
    data["other_cuda_wheels"] = others
    done, _ = _ingest(tmp_path, data, capsys)
    assert done.code == 2 and where in done.err and len(done.err.strip().splitlines()) == 1, done.err


def test_atlas_and_device_reports_are_kept_as_cells_of_their_own(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from jaxrel.atlas import table

    def run_of(jax: str, jaxlib: str, pcast: str) -> table.CellRun:
        outcomes = {"test_api.py::test_api[jax.jit]": {"outcome": "passed"},
                    "test_api.py::test_api[jax.lax.pcast]": {"outcome": pcast, "message": "AttributeError: pcast"}}
        return table.CellRun(jax, jaxlib, "3.12", outcomes)

    atlas = tmp_path / "atlas" / "atlas.json"
    atlas.parent.mkdir()
    atlas.write_text(table.dumps(table.build([run_of("0.6.0", "0.6.0", "failed"), run_of("0.7.0", "0.7.0", "passed"),
                                              table.CellRun("0.8.0", "0.8.0", "3.12", problem="install failed")],
                                             "2026-11-20")))
    device = tmp_path / "device" / "device.json"
    device.parent.mkdir()
    device.write_text(json.dumps({
        "python": "3.12.3", "ok": False, "kernels_ok": True, "gpu_code": ["sm_80", "sm_90", "compute_100"],
        "doctor": {"compatible": True, "environment": {
            "frontend": {"name": "jax", "version": "0.11.2"}, "backend": {"name": "jaxlib", "version": "0.11.2"},
            "plugins": [{"name": "jax-cuda13-plugin", "version": "0.11.2"},
                        {"name": "jax-cuda13-pjrt", "version": "0.11.2"}]}},
        "probe": {"device_kind": "NVIDIA H100 80GB HBM3", "default_backend": "gpu"},
        "compat_suite": {"passed": 96, "failed": 0, "skipped": 3, "seconds": 11.8, "ok": True},
        "cpu_only_wheel": {"passed": 0, "failed": 11, "skipped": 1, "seconds": 3.3, "ok": False,
                           "tail": "NOT_FOUND: No FFI handler registered for jaxrel_rms_norm_fwd on a platform CUDA"}}))
    db = str(tmp_path / "h.sqlite")
    done = run(["history", "ingest", "--db", db, "--night", "2026-11-20", "--json", str(tmp_path)], capsys)
    assert done.code == 0, done.err
    assert sorted(Path(i["path"]).name for i in json.loads(done.out)["ingested"]) == ["atlas.json", "device.json"]
    store = open_store(db)
    try:
        kinds = {k for (k,) in store.rows("SELECT kind FROM runs")}
        cells = {int(i): str(c) for i, c in store.rows("SELECT id, cell FROM combos")}
        rows = {(cells[combo], t): o for (_, combo), tests in selections.outcomes(store, "1 = 1").items()
                for t, (o, _) in tests.items()}
    finally:
        store.close()
    assert kinds == {"atlas", "device"}
    assert rows[("atlas-py3.12-jax0.6.0-jaxlib0.6.0", "jax.lax.pcast")] == "failed"
    assert rows[("atlas-py3.12-jax0.7.0-jaxlib0.7.0", "jax.lax.pcast")] == "passed"
    assert rows[("atlas-py3.12-jax0.8.0-jaxlib0.8.0", "cell")] == "infra"
    gpu = "device-py3.12-jaxlib0.11.2-cuda13-NVIDIA-H100-80GB-HBM3"
    assert rows[(gpu, "cell")] == "failed" and rows[(gpu, "device: cpu only wheel")] == "failed"
    assert rows[(gpu, "device: compat suite")] == rows[(gpu, "device: GPU code for sm_80 and sm_90")] == "passed"
    answer = json.loads(run(["history", "query", "--db", db, "--json", "jaxlib==0.11.2", "jax-cuda13-plugin==0.11.2"],
                            capsys).out)
    assert answer["verdict"] == "known bad" and answer["nights"][0]["cell"] == gpu
    good = json.loads(run(["history", "query", "--db", db, "--json", "jax==0.7.0", "jaxlib==0.7.0"], capsys).out)
    assert good["verdict"] == "known good"


def test_a_real_device_check_report_is_kept_as_its_gpu_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """device.json as the device check wrote it on an NVIDIA H100 (2026-11-27, jax 0.11.2 with jax-cuda13)."""
    real = Path(__file__).resolve().parents[1] / "data" / "history" / "device-h100-2026-11-27.json"
    device = tmp_path / "device.json"
    shutil.copyfile(real, device)
    db = str(tmp_path / "h.sqlite")
    assert run(["history", "ingest", "--db", db, "--night", "2026-11-27", str(device)], capsys).code == 0
    pins = ["jax==0.11.2", "jaxlib==0.11.2", "jax-cuda13-plugin==0.11.2", "jax-cuda13-pjrt==0.11.2"]
    answer = json.loads(run(["history", "query", "--db", db, "--json", *pins], capsys).out)
    assert answer["verdict"] == "known good"
    assert answer["nights"][0]["cell"] == "device-py3.12-jaxlib0.11.2-cuda13-NVIDIA-H100-80GB-HBM3"
    store = open_store(db)
    try:
        tests = {t: o for found in selections.outcomes(store, "1 = 1").values() for t, (o, _) in found.items()}
    finally:
        store.close()
    assert tests == {"cell": "passed", "device: compat suite": "passed", "device: jax tests": "passed",
                     "device: cpu only wheel": "passed", "device: kernels against NumPy": "passed",
                     "device: GPU code for sm_80 and sm_90": "passed"}
