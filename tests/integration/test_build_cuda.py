"""The extension's CUDA build for real: nvcc from NVIDIA's pinned wheels, driven by Bazel 4.2.3 through bazelisk,
on this machine without a GPU. What runs on a GPU is the device check's (``scripts/device_check.sh``); here the
wheel's GPU code, its linkage, its metadata, and its import on a CPU-only jax with fakes of the plugin metadata.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from email.parser import Parser
from pathlib import Path

import pytest
from bazel_workspace import fresh_workspace, kept_workspace

import jaxrel
from jaxrel import guard, releasedata
from jaxrel.distributions import envs
from jaxrel.distributions.bazel import BuildError, build, find_launcher
from jaxrel.extension import xla
from jaxrel.extension.fatbin import gpu_code

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PIN = xla.read_pin(REPO / "WORKSPACE")
MINIMUM = releasedata.first_release_with_ffi_api(
    "jax", "jaxlib", releasedata.builtin("jax")["jaxlib"][PIN.backend_version]["xla_ffi_api"])
RUNTIME = "nvidia-cuda-runtime==13.0.96"  # the pinned toolkit's runtime (bazel/cuda_pins.bzl)

IMPORT_SCRIPT = """
import json
result = {}
try:
    import numpy as np
    import jax
    import jaxrel_rmsnorm
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    y = np.asarray(jaxrel_rmsnorm.rms_norm(jax.device_put(x, jax.devices("cpu")[0])))
    ref = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    result.update(imported=True, platforms=list(jaxrel_rmsnorm.platforms()), idle=jaxrel_rmsnorm.idle_reasons(),
                  error=float(np.abs(y - ref).max()))
except ImportError as error:
    result.update(imported=False, type=type(error).__name__, message=str(error), fix=getattr(error, "fix", None))
import jax.numpy as jnp
result["jnp_sum"] = float(jnp.ones(3).sum())
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def wheels(index_reachable: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The CPU and CUDA 13 wheels built for this Python (the toolkit fetched through pip the first time)."""
    try:
        find_launcher(REPO)
    except BuildError as error:
        pytest.skip(str(error))
    with kept_workspace("default") as workspace:
        result = build(workspace, wheels=["//rmsnorm:wheel", "//rmsnorm:wheel_cuda13"],
                       output=tmp_path_factory.mktemp("dist"))
    return {wheel.name.split("-")[0]: wheel for wheel in result.wheels}


@pytest.fixture(scope="module")
def module(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled CUDA module, unpacked."""
    out = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(wheels["jaxrel_rmsnorm_cuda13"]) as archive:
        archive.extractall(out)
    found = sorted(out.glob("jaxrel_rmsnorm_cuda13/_rmsnorm_cuda*.so"))
    assert len(found) == 1, found
    return found[0]


def test_the_module_carries_sass_for_sm80_and_sm90_and_ptx_for_the_newest(module: Path) -> None:
    found = {str(code) for code in gpu_code(module)}
    assert {"sm_80", "sm_90", "sm_100", "sm_120", "compute_120"} == found


def test_cudart_is_linked_from_the_nvidia_wheel_by_rpath_never_bundled(module: Path, wheels: dict[str, Path]) -> None:
    dynamic = subprocess.run(["readelf", "-d", str(module)], capture_output=True, text=True, check=True).stdout
    assert "Shared library: [libcudart.so.13]" in dynamic
    assert "[$ORIGIN/../nvidia/cu13/lib]" in dynamic, dynamic
    with zipfile.ZipFile(wheels["jaxrel_rmsnorm_cuda13"]) as archive:
        names = archive.namelist()
    assert not [name for name in names if "libcudart" in name or "/nvidia/" in name]


def test_metadata_requires_the_cpu_wheel_the_plugin_and_the_runtime(wheels: dict[str, Path]) -> None:
    wheel = wheels["jaxrel_rmsnorm_cuda13"]
    name, version, python_tag, abi_tag, _ = wheel.name[: -len(".whl")].split("-")
    assert (name, version) == ("jaxrel_rmsnorm_cuda13", jaxrel.__version__)
    assert (python_tag, abi_tag) == ("cp311", "abi3"), "one stable-ABI wheel serves CPython 3.11 and newer"
    with zipfile.ZipFile(wheel) as archive:
        meta = Parser().parsestr(archive.read(f"{name}-{version}.dist-info/METADATA").decode())
        facts = archive.read("jaxrel_rmsnorm_cuda13/_build_info.py").decode()
    assert meta.get_all("Requires-Python") == [">=3.11"]
    assert meta.get_all("Requires-Dist") == [f"jaxrel-rmsnorm=={version}", f"jax-cuda13-plugin>={MINIMUM}",
                                             "nvidia-cuda-runtime>=13.0,<14"]
    assert 'CUDA_VERSION = "13.0"' in facts and 'CUDA_ARCHITECTURES = "sm_80,sm_90,sm_100,sm_120,compute_120"' in facts


@pytest.mark.long("a clean CUDA build in a new output base is what it compares")
def test_two_clean_builds_in_different_directories_are_byte_identical(wheels: dict[str, Path], tmp_path: Path) -> None:
    with fresh_workspace(find_launcher(REPO), tmp_path / "workspace") as copy:
        again = build(copy, wheels=["//rmsnorm:wheel_cuda13"], output=tmp_path / "dist")
    assert [w.read_bytes() for w in again.wheels] == [wheels["jaxrel_rmsnorm_cuda13"].read_bytes()]


def test_a_second_build_needs_no_fetch(wheels: dict[str, Path], tmp_path: Path) -> None:
    with kept_workspace("default") as workspace:
        again = build(workspace, wheels=["//rmsnorm:wheel_cuda13"], output=tmp_path, bazel_options=["--nofetch"])
    assert [w.read_bytes() for w in again.wheels] == [wheels["jaxrel_rmsnorm_cuda13"].read_bytes()]


@pytest.fixture(scope="module")
def cpu_env(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> envs.Env:
    """CPU-only jax at the pinned release, the CUDA runtime wheel, and both extension wheels (no plugin)."""
    return envs.create(tmp_path_factory.mktemp("cuda-env") / "env", python=sys.executable,
                       requirements=[f"jax=={PIN.backend_version}", f"jaxlib=={PIN.backend_version}", RUNTIME],
                       no_deps=[str(wheels["jaxrel_rmsnorm"]), str(wheels["jaxrel_rmsnorm_cuda13"])])


def _site(env: envs.Env) -> Path:
    done = env.run(str(env.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    return Path(done.stdout.strip())


def _imported(env: envs.Env) -> dict[str, object]:
    done = env.run(str(env.python), "-c", IMPORT_SCRIPT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextmanager
def _fake_plugin(env: envs.Env, name: str) -> Iterator[None]:
    """``name``'s metadata in the environment's site-packages (no package: the guard reads names only)."""
    folder = _site(env) / f"{name.replace('-', '_')}-{PIN.backend_version}.dist-info"
    folder.mkdir()
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {PIN.backend_version}\n")
    try:
        yield
    finally:
        shutil.rmtree(folder)


def test_without_a_gpu_it_imports_and_computes_on_the_cpu(cpu_env: envs.Env) -> None:
    result = _imported(cpu_env)
    assert result["imported"] is True and result["platforms"] == ["cpu", "cuda"]
    assert result["error"] < 1e-5 and result["jnp_sum"] == 3.0
    assert "jax computes on the CPU" in result["idle"]["cuda"]


def test_a_plugin_of_another_cuda_major_is_refused_with_the_fix(cpu_env: envs.Env) -> None:
    with _fake_plugin(cpu_env, "jax-cuda12-plugin"):
        result = _imported(cpu_env)
    assert result["imported"] is False and result["type"] == "GuardError"
    assert f"jax-cuda12-plugin {PIN.backend_version} (CUDA 12)" in result["message"]
    assert result["fix"] == 'pip install "jax[cuda13]"'
    assert result["jnp_sum"] == 3.0, "jax keeps working after the refusal"


@pytest.mark.skipif(guard.cuda_driver_version() is not None, reason="this machine has an NVIDIA driver")
def test_the_matching_plugin_imports_and_names_the_missing_driver(cpu_env: envs.Env) -> None:
    with _fake_plugin(cpu_env, "jax-cuda13-plugin"):
        result = _imported(cpu_env)
    assert result["imported"] is True and result["idle"] == {
        "cuda": "no NVIDIA driver (libcuda.so.1) is installed: jax computes on the CPU"}

