"""A device check report with CUDA wheels of more than one major, kept by ``history ingest``: the real report of
2026-11-27 (an H100 with jax[cuda13] 0.11.2, the cuda13 wheel in full and the cuda12 wheel refused by its
guard, then run with it skipped), a failing other wheel, and damaged entries refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from boundary_cli import run

from jaxrel.history.store import open_store

REAL = Path(__file__).resolve().parents[1] / "data" / "history" / "device-h100-every-cuda-wheel-2026-11-27.json"
OTHER = "device: jaxrel_rmsnorm_cuda12 (another CUDA major)"


def _results(db: str) -> dict[str, tuple[str, str]]:
    store = open_store(db)
    try:
        return {test: (outcome, signature) for test, outcome, signature in
                store.rows("SELECT test, outcome, signature FROM results")}
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
