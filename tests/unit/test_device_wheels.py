"""The device check given several CUDA wheels: which it takes, how it installs them (one companion at a time, a
missing CUDA runtime from the same directory), the order it runs them in, and a wheel of another CUDA major
than the jax plugin's (the guard must refuse it with the fix; its kernels then run with the guard skipped).
The steps that need a GPU are replaced here by recorders; the check itself ran on an H100 (docs/extension.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jaxrel.errors import BadInput
from jaxrel.extension import device_check, device_wheels

REFUSAL = ("Traceback (most recent call last):\n  ...\njaxrel_rmsnorm_cuda12._guard.GuardError: jaxrel-rmsnorm-cuda12 "
           "0.1.0 was built for CUDA 12, but the installed jax CUDA plugin is jax-cuda13-plugin 0.11.2 (CUDA 13).\n"
           "Fix: pip install \"jax[cuda12]\"\n")


def _wheels(folder: Path, names: tuple[str, ...]) -> Path:
    from test_device_check import _elf_with

    from jaxrel.distributions.wheels import write_wheel

    folder.mkdir()
    for name in names:
        package = name.replace("-", "_")
        module = _elf_with(None if name == "jaxrel-rmsnorm" else b"gpu")
        built = write_wheel(folder / f"build-{package}", name, "0.1.0", {f"{package}/_native.so": module})
        built.rename(folder / built.name)
    return folder


def test_every_cuda_wheel_given_is_taken_and_at_least_one_is_needed(tmp_path: Path) -> None:
    both = _wheels(tmp_path / "both", ("jaxrel-rmsnorm", "jaxrel-rmsnorm-cuda12", "jaxrel-rmsnorm-cuda13"))
    assert [p.name.split("-")[0] for p in device_wheels.check_wheels(both)] == [
        "jaxrel_rmsnorm", "jaxrel_rmsnorm_cuda13", "jaxrel_rmsnorm_cuda12"]
    only12 = _wheels(tmp_path / "only12", ("jaxrel-rmsnorm", "jaxrel-rmsnorm-cuda12"))
    assert [p.name.split("-")[0] for p in device_wheels.check_wheels(only12)] == [
        "jaxrel_rmsnorm", "jaxrel_rmsnorm_cuda12"]
    grid = _wheels(tmp_path / "grid", ("jaxrel-rmsnorm", "jaxrel-rmsnorm-cuda13"))
    here = sorted(grid.glob("*.whl"))
    for wheel in here:  # the aarch64 wheels of the same grid beside them (their bytes do not matter: not read)
        (grid / wheel.name.replace(wheel.name.split("-")[-1], "manylinux_2_27_aarch64.whl")).write_bytes(b"")
    assert device_wheels.check_wheels(grid) == here
    assert device_wheels.not_for_here(grid) == [
        "jaxrel_rmsnorm-0.1.0-py3-none-manylinux_2_27_aarch64.whl",
        "jaxrel_rmsnorm_cuda13-0.1.0-py3-none-manylinux_2_27_aarch64.whl"]
    with pytest.raises(BadInput, match="no CUDA wheel .* for this Python"):
        device_wheels.check_wheels(_wheels(tmp_path / "cpu", ("jaxrel-rmsnorm",)))
    with pytest.raises(BadInput, match="no jaxrel_rmsnorm wheel for this Python"):
        device_wheels.check_wheels(_wheels(tmp_path / "gpu", ("jaxrel-rmsnorm-cuda12",)))


def test_a_missing_cuda_runtime_is_installed_from_the_wheels_directory(tmp_path: Path, monkeypatch) -> None:
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(device_wheels, "_pip", lambda *args: calls.append(args) or {"code": 0, "stderr": ""})
    wheel = tmp_path / "jaxrel_rmsnorm_cuda12-0.1.0-cp312-cp312-manylinux_2_27_x86_64.whl"
    runtime = tmp_path / "nvidia_cuda_runtime_cu12-12.1.105-py3-none-manylinux1_x86_64.whl"
    for path in (wheel, runtime, tmp_path / "nvidia_cuda_runtime-13.0.96-py3-none-manylinux_2_27_x86_64.whl"):
        path.write_bytes(b"")
    installed = {"nvidia-cuda-runtime": "13.0.96"}

    def version(name: str) -> str:
        from importlib import metadata

        if name not in installed:
            raise metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr("importlib.metadata.version", version)
    done = device_wheels.install_cuda_wheel(wheel, 12)
    assert done == {"code": 0, "stderr": "", "runtime_wheel": runtime.name, "runtime_missing": None}
    assert calls[0] == ("uninstall", "--yes", "jaxrel-rmsnorm-cuda13", "jaxrel-rmsnorm-cuda12")
    assert calls[1][-2:] == (str(wheel), str(runtime)) and "--no-index" in calls[1] and "--no-deps" in calls[1]
    calls.clear()
    assert device_wheels.install_cuda_wheel(wheel.with_name(wheel.name.replace("12", "13", 1)), 13)[
        "runtime_wheel"] is None  # the machine's own runtime is never replaced
    assert not any("nvidia_cuda_runtime" in arg for arg in calls[1])
    runtime.unlink()
    assert device_wheels.install_cuda_wheel(wheel, 12)["runtime_missing"] == "nvidia-cuda-runtime-cu12"


def test_pip_past_its_deadline_is_a_failed_step_not_a_hang(monkeypatch) -> None:
    def slow(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs["timeout"])

    monkeypatch.setattr(device_wheels.procs, "run", slow)
    assert device_wheels.uninstall_cuda_wheels() == {"code": 124, "stderr": "pip uninstall timed out after 180 s"}


def test_the_guards_message_is_taken_from_a_failed_import() -> None:
    assert device_check._guard_refusal(REFUSAL) == (
        "jaxrel-rmsnorm-cuda12 0.1.0 was built for CUDA 12, but the installed jax CUDA plugin is jax-cuda13-plugin "
        "0.11.2 (CUDA 13). Fix: pip install \"jax[cuda12]\"")
    assert device_check._guard_refusal("ModuleNotFoundError: No module named 'jax'") == ""


PROBE = {"default_backend": "gpu", "devices": ["cuda:0"], "device_kind": "NVIDIA H100 80GB HBM3",
         "platforms": ["cpu", "cuda"], "cuda_runtime": [12010, 12010], "driver": 13000, "module": "/m.so"}
KERNELS = {"size": 64, "errors": {"eager": 5e-7}, "timings": {
    "backward": {"extension_ms": 0.28, "xla_ms": 0.45, "ratio": 0.62, "floor_ms": 0.28, "floor_gb_per_s": 2860.0}}}


class _Machine:
    """Stands in for the processes a check starts: the probe (refused by the guard unless it is skipped), the
    kernel benchmark and pytest, recording the environment each got."""

    def __init__(self, guard_refuses: bool, refusal: str = REFUSAL) -> None:
        self.guard_refuses, self.refusal, self.envs = guard_refuses, refusal, []

    def run(self, args: list[str], timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None):
        self.envs.append((args[-1] if "-c" in args else args[2], dict(env or {})))  # the probe: its module
        if "-c" in args:  # the probe
            if self.guard_refuses and "JAXREL_SKIP_GUARD" not in (env or {}):
                return {"code": 1, "stdout": "", "stderr": self.refusal, "seconds": 1.0}
            return {"code": 0, "stdout": json.dumps(PROBE), "stderr": "", "seconds": 1.0}
        return {"code": 0, "stdout": json.dumps(KERNELS), "stderr": "", "seconds": 1.0}

    def pytest(self, name: str, paths: list[str], root: Path, report: Path, timeout: float, env=None):
        self.envs.append((name, dict(env or {})))
        return {"passed": 22, "failed": 0, "skipped": 1, "seconds": 3.0, "code": 0, "ok": True, "tail": ""}


def _patched(monkeypatch, machine: _Machine) -> None:
    monkeypatch.setattr(device_check, "_run", machine.run)
    monkeypatch.setattr(device_check, "_pytest", machine.pytest)
    monkeypatch.setattr("jaxrel.extension.fatbin.gpu_code", lambda module: ["compute_90", "sm_80", "sm_90"])


def test_another_major_must_be_refused_by_the_guard_then_runs_with_it_skipped(tmp_path: Path, monkeypatch) -> None:
    machine = _Machine(guard_refuses=True)
    _patched(monkeypatch, machine)
    step = device_check._cuda_wheel(12, False, tmp_path, None, 64)
    assert step["ok"] and step["guard_refused"] and step["guard"].endswith('Fix: pip install "jax[cuda12]"')
    assert [name for name, env in machine.envs if env.get("JAXREL_SKIP_GUARD") == "1"] == [
        "jaxrel_rmsnorm_cuda12", "extension-cuda12", "jaxrel.extension.kernel_bench"]
    assert "compat_suite" not in step and step["extension_tests"]["passed"] == 22
    assert "## jaxrel_rmsnorm_cuda12: passed" in device_check._other_wheel(step)[0]
    assert "the guard refused it, with the fix" in "\n".join(device_check._other_wheel(step))

    unguarded = _Machine(guard_refuses=False)  # another major that imports: the guard failed to refuse it
    _patched(monkeypatch, unguarded)
    step = device_check._cuda_wheel(12, False, tmp_path, None, 64)
    assert not step["ok"] and step["guard"] == "imported: the guard did not refuse a wheel of another major"
    assert "the guard did not refuse it" in "\n".join(device_check._other_wheel(step))

    no_runtime = _Machine(guard_refuses=True)  # its runtime neither installed nor given: the guard alone is checked
    _patched(monkeypatch, no_runtime)
    step = device_check._cuda_wheel(12, False, tmp_path, None, 64, "nvidia-cuda-runtime-cu12")
    assert step["ok"] and "nvidia-cuda-runtime-cu12" in step["skipped"] and len(no_runtime.envs) == 1
    assert "- not run with the guard skipped: its CUDA runtime (nvidia-cuda-runtime-cu12)" in "\n".join(
        device_check._other_wheel(step))

    no_fix = _Machine(guard_refuses=True, refusal="ImportError: libcudart.so.12: cannot open shared object file\n")
    _patched(monkeypatch, no_fix)
    step = device_check._cuda_wheel(12, False, tmp_path, None, 64)
    assert not step["ok"] and not step["guard_refused"]  # a crash is not a refusal with the fix


def test_the_plugins_major_runs_first_then_the_others_then_the_cpu_wheel_alone(tmp_path: Path, monkeypatch) -> None:
    wheels = _wheels(tmp_path / "w", ("jaxrel-rmsnorm", "jaxrel-rmsnorm-cuda12", "jaxrel-rmsnorm-cuda13"))
    (wheels / "jaxrel_rmsnorm_cuda12-0.1.0-cp311-cp311-manylinux_2_27_aarch64.whl").write_bytes(b"")
    events: list[Any] = []
    monkeypatch.setattr(device_check, "plugin_major", lambda: 13)
    monkeypatch.setattr(device_check, "_run", lambda *a, **k: {"code": 0, "stdout": "{}", "stderr": "", "seconds": 0})
    monkeypatch.setattr(device_check, "install_cuda_wheel",
                        lambda wheel, major: events.append(("install", major)) or {"code": 0})
    monkeypatch.setattr(device_check, "cpu_only", lambda report: events.append("cpu only") or {
        "ok": True, "passed": 11, "failed": 0, "skipped": 1, "seconds": 3.0})

    def steps(major: int, native: bool, *rest) -> dict[str, Any]:
        events.append(("steps", major, native))
        return {"wheel": f"jaxrel_rmsnorm_cuda{major}", "cuda_major": major, "ok": major == 13 or passed_12,
                "probe": PROBE, "kernels": KERNELS}

    monkeypatch.setattr(device_check, "_cuda_wheel", steps)
    passed_12 = True
    result = device_check.check(tmp_path / "r", None, 64, wheels)
    assert events == [("install", 13), ("steps", 13, True), ("install", 12), ("steps", 12, False), "cpu only",
                      ("install", 13)]
    assert result["ok"] and result["cuda_wheel"] == "jaxrel_rmsnorm_cuda13"
    assert [step["wheel"] for step in result["other_cuda_wheels"]] == ["jaxrel_rmsnorm_cuda12"]
    result["doctor"], result["with_cuda"] = {}, {"missing": []}
    assert ("- not for this machine's Python or CPU, not run: jaxrel_rmsnorm_cuda12-0.1.0-cp311-cp311-manylinux_2_27_"
            "aarch64.whl") in device_check.render(result)
    passed_12, events[:] = False, []
    assert not device_check.check(tmp_path / "r", None, 64, wheels)["ok"]  # another major's failure fails the check


def test_the_check_exits_2_on_a_directory_without_a_cuda_wheel(tmp_path: Path) -> None:
    folder = _wheels(tmp_path / "w", ("jaxrel-rmsnorm",))
    done = subprocess.run([sys.executable, "-m", "jaxrel.extension.device_check", "--check-wheels", str(folder)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no CUDA wheel (jaxrel_rmsnorm_cuda13 or jaxrel_rmsnorm_cuda12) for this Python" in done.stderr
