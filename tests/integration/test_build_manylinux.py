"""The portable extension wheel: ``--config=manylinux`` builds with Zig's clang for glibc 2.27 from the pinned
ziglang wheel (bazel/zig.bzl), links its libc++ in, and tags the wheels ``manylinux_2_27``, jaxlib's own floor
(the CPU wheel; the CUDA 13 one, whose kernels nvcc compiles as before; the CUDA 12 one, whose kernels clang
compiles: bazel/cuda_clang.bzl).

Checked on the wheel itself: ``auditwheel show`` finds it consistent with that tag or an older one; its module
needs no C++ runtime library at all (no ``libstdc++``/``libgcc_s``, so no ``GLIBCXX``/``CXXABI`` version) and no
glibc symbol newer than 2.27; ``twine check --strict`` and ``check-wheel-contents`` pass (a clean build in another
output base gives the same bytes: test_build_reproducible.py); each wheel is one ``cp311-abi3`` wheel whose module
``abi3audit``
finds within CPython 3.11's stable ABI; and it computes like NumPy beside the real jaxlib, whose own ``libstdc++``
is loaded in the same process.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from bazel_workspace import kept_workspace

from jaxrel.distributions.bazel import build
from jaxrel.extension import xla

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PIN = xla.read_pin(REPO / "WORKSPACE")
OPTIONS = ["--config=manylinux"]


GRID = ["//rmsnorm:wheel", "//rmsnorm:wheel_cuda12", "//rmsnorm:wheel_cuda13"]  # one machine's wheels


def by_kind(wheels: list[Path]) -> dict[str, Path]:
    """Built wheels by kind: ``cpu``, ``cuda12``, ``cuda13``."""
    return {next((f"cuda{m}" for m in (12, 13) if f"_cuda{m}-" in w.name), "cpu"): w for w in wheels}


def module_of(wheel: Path) -> tuple[str, bytes]:
    """The wheel's one compiled module: its path in the wheel and its bytes."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".so")]
        return name, archive.read(name)


@pytest.fixture(scope="module")
def wheels(launcher: list[str], index_reachable: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The CPU, CUDA 12 and CUDA 13 wheels, built together under the manylinux configuration (in its kept
    workspace: tests/bazel_workspace.py)."""
    with kept_workspace("manylinux") as workspace:
        return by_kind(build(workspace, wheels=GRID, bazel_options=OPTIONS,
                             output=tmp_path_factory.mktemp("portable")).wheels)


@pytest.fixture(scope="module")
def portable(wheels: dict[str, Path]) -> Path:
    return wheels["cpu"]


@pytest.fixture(scope="module")
def module_bytes(portable: Path) -> bytes:
    return module_of(portable)[1]


def assert_stable_abi(wheel: Path) -> None:
    """``wheel`` is tagged ``cp311-abi3``, its module is named ``*.abi3.so``, and ``abi3audit --strict`` finds no
    symbol outside CPython 3.11's stable ABI and none newer than 3.11 in it."""
    assert "-cp311-abi3-" in wheel.name, wheel.name
    name, _ = module_of(wheel)
    assert name.endswith(".abi3.so"), name
    audit = subprocess.run([sys.executable, "-m", "abi3audit", "--strict", "--verbose", str(wheel)],
                           capture_output=True, text=True)
    said = " ".join((audit.stdout + audit.stderr).split())
    assert audit.returncode == 0 and "1 extensions scanned; 0 ABI version mismatches and 0 ABI violations" in said, \
        said


@pytest.mark.parametrize("kind", ["cpu", "cuda12", "cuda13"])
def test_each_wheel_is_one_stable_abi_wheel(wheels: dict[str, Path], kind: str) -> None:
    assert_stable_abi(wheels[kind])


def _dynamic(module: bytes, tmp_path: Path) -> str:
    so = tmp_path / "module.so"
    so.write_bytes(module)
    return subprocess.run(["readelf", "--dyn-syms", "--dynamic", "-W", str(so)], capture_output=True, text=True,
                          check=True).stdout


def assert_auditwheel_agrees(wheel: Path, machine: str) -> None:
    """``auditwheel show`` finds ``wheel`` consistent with ``manylinux_2_27_<machine>`` or an older tag."""
    shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    policy = re.search(rf'consistent with the following platform tag: "manylinux_(\d+)_(\d+)_{machine}"',
                       " ".join(shown.stdout.split()))
    assert policy and (int(policy[1]), int(policy[2])) <= (2, 27), shown.stdout


def portable_table(module: bytes, tmp_path: Path) -> str:
    """The module's dynamic table, checked: no C++ runtime library or symbol version, no glibc newer than 2.27
    (skips where readelf is missing)."""
    if subprocess.run(["which", "readelf"], capture_output=True).returncode != 0:
        pytest.skip("readelf (binutils) is not installed here")
    table = _dynamic(module, tmp_path)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", table)
    assert needed and not [n for n in needed if n.startswith(("libstdc++", "libgcc_s", "libc++"))], needed
    assert "GLIBCXX" not in table and "CXXABI" not in table
    versions = {tuple(int(p) for p in v.split(".")) for v in re.findall(r"@GLIBC_(\d+(?:\.\d+)+)", table)}
    assert versions and max(versions) <= (2, 27), sorted(versions)
    return table


def test_tagged_manylinux_2_27_and_auditwheel_agrees(portable: Path) -> None:
    assert portable.name.endswith("-manylinux_2_27_x86_64.whl"), portable.name
    assert_auditwheel_agrees(portable, "x86_64")


def test_no_cxx_runtime_and_no_glibc_newer_than_2_27(module_bytes: bytes, tmp_path: Path) -> None:
    table = portable_table(module_bytes, tmp_path)
    exported = re.findall(r"\s(?:FUNC|OBJECT)\s+(?:GLOBAL|WEAK)\s+DEFAULT\s+\d+\s+(\S+)", table)
    assert "PyInit__rmsnorm" in exported
    assert not [s for s in exported if "__1" in s], "libc++'s own symbols stay inside the module"


CUDA = {  # major: where libcudart comes from in site-packages, and the GPU code the module must carry
    12: ("nvidia/cuda_runtime/lib", {"sm_80", "sm_90", "compute_90"}),
    13: ("nvidia/cu13/lib", {"sm_80", "sm_90", "sm_100", "sm_120", "compute_120"}),
}


@pytest.mark.parametrize("major", sorted(CUDA))
def test_a_cuda_wheel_needs_cudart_from_its_wheel_and_nothing_newer_than_glibc_2_27(
        wheels: dict[str, Path], tmp_path: Path, major: int) -> None:
    """Each CUDA wheel's kernels (CUDA 12: clang; CUDA 13: nvcc) link into the Zig-built module: the CUDA runtime by
    rpath from NVIDIA's runtime wheel, as jax's plugins take theirs, and no C++ runtime. ``auditwheel show`` calls
    it ``linux_x86_64`` for that one library outside its policy, as it would jax's own CUDA plugins; every glibc
    version it names is 2.27 or older. The module carries SASS and PTX for the architectures its CUDA knows."""
    from jaxrel.extension.fatbin import gpu_code

    runpath, code = CUDA[major]
    cuda = wheels[f"cuda{major}"]
    assert cuda.name.endswith("-manylinux_2_27_x86_64.whl"), cuda.name
    with zipfile.ZipFile(cuda) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".so")]
        module = tmp_path / "module.so"
        module.write_bytes(archive.read(name))
        info = next(archive.read(n).decode() for n in archive.namelist() if n.endswith("/_build_info.py"))
    assert f'CUDA_MAJOR = "{major}"' in info
    if subprocess.run(["which", "readelf"], capture_output=True).returncode == 0:
        table = _dynamic(module.read_bytes(), tmp_path)
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", table)
        assert f"libcudart.so.{major}" in needed
        assert not [n for n in needed if n.startswith(("libstdc++", "libgcc_s"))], needed
        assert f"$ORIGIN/../{runpath}" in table
    assert code <= {str(found) for found in gpu_code(module)}
    shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(cuda)], capture_output=True, text=True)
    text = " ".join(shown.stdout.split())
    versions = {tuple(int(p) for p in v.split(".")) for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", text)}
    assert versions and max(versions) <= (2, 27), text
    outside = re.search(r"system-provided shared libraries: (.*?) This constrains", text)
    assert outside and "libstdc++" not in outside.group(1) and f"libcudart.so.{major}" in outside.group(1), text


def test_the_cuda12_wheel_requires_the_cuda12_plugin_and_runtime(wheels: dict[str, Path]) -> None:
    with zipfile.ZipFile(wheels["cuda12"]) as archive:
        metadata = next(archive.read(n).decode() for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    requires = [line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    assert requires[1:] == ["jax-cuda12-plugin>=0.9.1", "nvidia-cuda-runtime-cu12>=12.1,<13"], requires
    assert requires[0].startswith("jaxrel-rmsnorm==")


def assert_twine_and_check_wheel_contents_pass(wheel: Path) -> None:
    twine = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel)],
                           capture_output=True, text=True)
    assert twine.returncode == 0, twine.stdout + twine.stderr
    contents = subprocess.run([sys.executable, "-m", "check_wheel_contents", str(wheel)],
                              capture_output=True, text=True)
    assert contents.returncode == 0, contents.stdout + contents.stderr


def test_twine_check_and_check_wheel_contents(portable: Path) -> None:
    assert_twine_and_check_wheel_contents_pass(portable)


@pytest.mark.usefixtures("index_reachable")
def test_it_computes_like_numpy_beside_the_real_jaxlib(portable: Path, tmp_path: Path) -> None:
    from test_build_real import computes_like_numpy

    assert computes_like_numpy(portable, tmp_path)["jax"] == PIN.backend_version
