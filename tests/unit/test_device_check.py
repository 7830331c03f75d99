"""The device check's pieces that need no GPU: reading pytest's JUnit report and a step's JSON answer, the
report it renders, and what it says on a machine without a GPU. (The check itself ran on an H100: see
docs/extension.md.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from jaxrel.extension import device_check

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="a" name="ok"/><testcase classname="a" name="no"><failure message="x"/></testcase>
<testcase classname="a" name="err"><error message="x"/></testcase>
<testcase classname="a" name="skip"><skipped message="x"/></testcase><testcase classname="a" name="ok2"/>
</testsuite></testsuites>"""


def test_junit_counts_and_a_missing_or_damaged_report(tmp_path: Path) -> None:
    report = tmp_path / "r.xml"
    report.write_text(JUNIT)
    assert device_check._junit_counts(report) == {"passed": 2, "failed": 2, "skipped": 1}
    assert device_check._junit_counts(tmp_path / "none.xml") == {"passed": 0, "failed": 0, "skipped": 0}
    report.write_text("<testsuites><testcase")
    assert device_check._junit_counts(report) == {"passed": 0, "failed": 0, "skipped": 0}


def test_a_steps_answer_is_its_whole_output_or_its_last_json_line() -> None:
    assert device_check._last_json('{\n  "compatible": true\n}\n') == {"compatible": True}
    assert device_check._last_json('warming up\n{"a": 1}\nnoise\n{"b": 2}\n') == {"b": 2}
    assert device_check._last_json("Traceback (most recent call last):\n") is None
    assert device_check._last_json("[1, 2]") is None


def _result(ratio: float) -> dict:
    timing = {"extension_ms": 0.3 * ratio, "xla_ms": 0.3, "ratio": ratio, "floor_ms": 0.2, "floor_gb_per_s": 2684.4}
    return {"ok": ratio <= 1.0, "doctor": {"compatible": True, "environment": {
                "frontend": {"name": "jax", "version": "0.11.2"}, "backend": {"name": "jaxlib", "version": "0.11.2"},
                "plugins": [{"name": "jax-cuda13-plugin", "version": "0.11.2"}]}},
            "with_cuda": {"requirements": [{}] * 13, "missing": ["nvidia-cuda-nvcc"]},
            "probe": {"device_kind": "NVIDIA H100 80GB HBM3", "devices": ["cuda:0"], "driver": 13000},
            "gpu_code": ["sm_80", "sm_90"], "compat_suite": {"passed": 96, "failed": 0, "skipped": 3, "seconds": 9.0},
            "kernels": {"size": 8192, "errors": {"eager": 4.8e-7}, "timings": {"forward": timing}}}


def test_render_names_the_environment_the_steps_and_the_ratio_against_the_goal() -> None:
    text = device_check.render(_result(0.98))
    assert "- result: **passed**" in text and "jax 0.11.2, jaxlib 0.11.2, jax-cuda13-plugin 0.11.2" in text
    assert "13 required, missing: nvidia-cuda-nvcc" in text
    assert "compat suite: 96 passed, 0 failed, 3 skipped (9.0 s)" in text
    assert "| forward | 0.294 ms | 0.300 ms | 0.98× | 0.200 ms, 2684 GB/s |" in text
    over = device_check.render(_result(1.02))
    assert "| forward | 0.306 ms | 0.300 ms | 1.02× (over the 1.0× goal) | 0.200 ms" in over


FAKES = {  # jax and the extension as a machine without a GPU shows them: every import works, jax computes on CPU
    "jax.py": "class Cpu:\n    device_kind = 'cpu'\n    def __str__(self):\n        return 'TFRT_CPU_0'\n"
              "def devices():\n    return [Cpu()]\ndef default_backend():\n    return 'cpu'\n",
    "jaxrel_rmsnorm.py": "def platforms():\n    return ['cpu']\ndef idle_reasons():\n    return {}\n",
    "jaxrel_rmsnorm_cuda13/__init__.py": "from . import _native, _guard\n",
    "jaxrel_rmsnorm_cuda13/_native.py": "def cuda_runtime():\n    return [13000, 0]\n",
    "jaxrel_rmsnorm_cuda13/_guard.py": "def cuda_driver_version():\n    return None\n",
}


def _device_check(tmp_path: Path, fakes: dict[str, str] | None) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    for name, text in (fakes or {}).items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    return subprocess.run([sys.executable, "-m", "jaxrel.extension.device_check", "--report", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=300, env=env)


def test_without_a_gpu_it_says_so_and_exits_3(tmp_path: Path) -> None:
    done = _device_check(tmp_path, FAKES)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "jax sees no GPU here" in done.stderr
    written = json.loads((tmp_path / "r" / "device.json").read_text())
    assert written["ok"] is False and written["no_gpu"] is True
    assert (tmp_path / "r" / "device.md").read_text().startswith("# Device check")


def test_an_extension_that_does_not_import_is_a_failed_step_not_a_missing_gpu(tmp_path: Path) -> None:
    done = _device_check(tmp_path, {k: v for k, v in FAKES.items() if not k.startswith("jaxrel_rmsnorm_cuda13")})
    assert done.returncode == 1, done.stderr[-2000:]
    assert "does not import here: ModuleNotFoundError: No module named 'jaxrel_rmsnorm_cuda13'" in done.stderr
    assert "no GPU" not in done.stderr
    assert json.loads((tmp_path / "r" / "device.json").read_text())["ok"] is False


def test_with_cuda_requirements_are_checked_against_what_is_installed(tmp_path: Path, monkeypatch) -> None:
    def dist(name: str, version: str, requires: list[str] = ()) -> None:
        info = tmp_path / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                       + "".join(f"Requires-Dist: {r}\n" for r in requires))

    dist("fake-cuda-plugin", "1.0", ["fake-pjrt==1.0",
                                     'fake-cublas>=13.0; sys_platform == "linux" and extra == "with-cuda"',
                                     'fake-nvcc>=13.0; extra == "with-cuda"', 'fake-win>=1; sys_platform == "win32" '
                                     'and extra == "with-cuda"', "not a requirement !!; extra == 'with-cuda'"])
    dist("fake-cublas", "13.1")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = device_check.with_cuda_requirements("fake-cuda-plugin")
    assert found["installed"] == "1.0" and found["missing"] == ["fake-nvcc"] and not found["ok"]
    assert [(r["requirement"], r["installed"], r["ok"]) for r in found["requirements"]] == [
        ("fake-cublas>=13.0", "13.1", True), ("fake-nvcc>=13.0", None, False)]
    assert device_check.with_cuda_requirements("not-installed-plugin") == {
        "plugin": "not-installed-plugin", "installed": False, "ok": False, "missing": ["not-installed-plugin"]}


def _extension_wheels(folder: Path, cpu_module: bytes, cuda_module: bytes) -> Path:
    from jaxrel.distributions.wheels import write_wheel

    folder.mkdir()
    for name, module in (("jaxrel-rmsnorm", cpu_module), ("jaxrel-rmsnorm-cuda13", cuda_module)):
        package = name.replace("-", "_")
        built = write_wheel(folder / f"build-{package}", name, "0.1.0", {f"{package}/_native.so": module})
        built.rename(folder / built.name)
    return folder


def _elf_with(fatbin: bytes | None) -> bytes:
    from test_fatbin import _elf, _fatbin

    return _elf([(b".text", b"\x90" * 8), *([(b".nv_fatbin", _fatbin([(2, 80), (2, 90)]))] if fatbin else [])])


def _checked(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jaxrel.extension.device_check", "--check-wheels", str(directory)],
                          capture_output=True, text=True, timeout=120)


def test_wheels_as_a_build_makes_them_pass_the_check(tmp_path: Path) -> None:
    done = _checked(_extension_wheels(tmp_path / "w", _elf_with(None), _elf_with(b"gpu")))
    assert done.returncode == 0 and "as a build makes them" in done.stdout, done.stderr


def test_stand_in_wheels_are_refused_in_one_line_before_anything_is_installed(tmp_path: Path) -> None:
    cases = {
        "text-module": _extension_wheels(tmp_path / "a", b"not an ELF file", _elf_with(b"gpu")),
        "no-gpu-code": _extension_wheels(tmp_path / "b", _elf_with(None), _elf_with(None)),
        "empty": tmp_path / "c",
    }
    (tmp_path / "c").mkdir()
    not_zip = _extension_wheels(tmp_path / "d", _elf_with(None), _elf_with(b"gpu"))
    for wheel in not_zip.glob("*.whl"):
        wheel.write_bytes(b"a stand-in, not a zip")
    cases["not-a-zip"] = not_zip
    expected = {"text-module": "is not an ELF shared object", "no-gpu-code": "carries no GPU code",
                "empty": "no jaxrel_rmsnorm wheel for this Python", "not-a-zip": "not a wheel a build makes"}
    for case, directory in cases.items():
        done = _checked(directory)
        assert done.returncode == 2, (case, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, (case, done.stderr)
        assert expected[case] in done.stderr, (case, done.stderr)
