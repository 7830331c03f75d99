"""Fuzz of the device side: the CUDA guard (``guard.check_cuda``) under any plugin set, runtime, driver and
version text, and device detection (``cells.hardware.nvidia_gpus``) under any ``nvidia-smi`` output and exit.

The guard either goes on (``None`` or a reason the kernels would sit idle) or refuses with a
:class:`~jaxrel.guard.GuardError` whose message names the fix; nothing else escapes, and it never loads the module
when it refuses for the plugin. Detection answers GPU lines or nothing, never raises, whatever the tool prints.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from fuzzing import fuzz_settings
from hypothesis import example, given
from hypothesis import strategies as st

from jaxrel import guard
from jaxrel.cells import hardware

VERSIONS = st.one_of(st.none(), st.integers(min_value=-10, max_value=10**7),
                     st.sampled_from([0, 1000, 12010, 12090, 13000, 13020, 14000, 2**31 - 1]))
TEXTS = st.one_of(st.sampled_from(["13.0", "12.1", "12", "13.0.1", "", "x", "13.-1", "1e3", "٣.٠", "13.0\n"]),
                  st.text(max_size=12))
MAJORS = st.one_of(st.sampled_from(["12", "13"]), st.text(max_size=4))
PLUGINS = st.lists(st.sampled_from(["jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda14-plugin",
                                    "jax-cuda-plugin", "jax-cuda12-pjrt"]), unique=True, max_size=3)


@fuzz_settings(200)
@given(plugins=PLUGINS, loaded=VERSIONS, driver=VERSIONS, major=MAJORS, version=TEXTS,
       load_fails=st.sampled_from([None, ImportError("libcudart.so.13: cannot open shared object file"),
                                   OSError("bad ELF"), RuntimeError("boom")]))
@example(plugins=["jax-cuda12-pjrt"], loaded=None, driver=None, major="12", version="12.1",  # found in CI: a pjrt
         load_fails=ImportError("libcudart.so.13: cannot open shared object file"))  # alone is not a plugin
def test_the_guard_goes_on_or_refuses_with_the_fix(tmp_path_factory: pytest.TempPathFactory, plugins: list[str],
                                                  loaded: int | None, driver: int | None, major: str, version: str,
                                                  load_fails: BaseException | None) -> None:
    site = tmp_path_factory.mktemp("site")
    for name in plugins:
        info = site / f"{name.replace('-', '_')}-0.11.2.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.11.2\n")
    calls: list[str] = []

    def load() -> int:
        calls.append("load")
        if load_fails is not None:
            raise load_fails
        return loaded if loaded is not None else 0

    try:
        reason = guard.check_cuda(cuda_major=major, cuda_version=version, distribution=f"jaxrel-rmsnorm-cuda{major}",
                                  version="0.1.0", load=load, driver_version=lambda: driver, path=[str(site)])
    except guard.GuardError as error:  # damaged build facts and a failing load included: never another exception
        text = str(error)
        assert text.strip() and "Fix:" in text and "Traceback" not in text, text
        installed = [name for name in plugins if name.endswith("-plugin")]  # a pjrt alone is no jax CUDA plugin
        if installed and f"jax-cuda{major}-plugin" not in installed and major in ("12", "13"):
            assert calls == [], "refused for the plugin before loading anything"
        return
    assert reason is None or (isinstance(reason, str) and reason.strip() and "\n" not in reason), reason


@fuzz_settings(60, 300)
@given(output=st.one_of(st.binary(max_size=400), st.sampled_from([
    b"GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n", b"GPU 0: x\nGPU 1: y\n", b"No devices were found\n",
    b"\xff\xfeGPU 0\n", b"GPU " * 2000, b"NVIDIA-SMI has failed because it couldn't communicate\n"])),
    code=st.sampled_from([0, 1, 6, 9, 255]), to_stderr=st.booleans())
def test_detection_answers_gpu_lines_or_nothing(tmp_path_factory: pytest.TempPathFactory,
                                                monkeypatch: pytest.MonkeyPatch, output: bytes, code: int,
                                                to_stderr: bool) -> None:
    folder = tmp_path_factory.mktemp("bin")
    (folder / "out").write_bytes(output)
    smi = folder / "nvidia-smi"
    stream = "stderr" if to_stderr else "stdout"
    smi.write_text(f"#!{sys.executable}\nimport sys\nsys.{stream}.buffer.write(open({str(folder / 'out')!r}, "
                   f"'rb').read())\nsys.exit({code})\n")
    smi.chmod(0o755)
    with monkeypatch.context() as patch:
        patch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        hardware.nvidia_gpus.cache_clear()
        try:
            found = hardware.nvidia_gpus()
        finally:
            hardware.nvidia_gpus.cache_clear()
    assert isinstance(found, tuple) and all(line.startswith("GPU ") for line in found)
    if code != 0 or to_stderr:
        assert found == ()


def test_detection_without_nvidia_smi_is_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    hardware.nvidia_gpus.cache_clear()
    try:
        assert hardware.nvidia_gpus() == () and hardware.devices_here() == frozenset()
    finally:
        hardware.nvidia_gpus.cache_clear()
