"""The aarch64 extension wheels, cross-built here: ``--config=manylinux_aarch64`` compiles with Zig's clang for
``aarch64-linux-gnu.2.27`` against the headers of Debian's arm64 python3.11 (for CPython's stable ABI: the
``cp311-abi3`` wheels serve every Python from 3.11 on), whose facts (the headers, the machine) Bazel reads by
running it under qemu-user (scripts/aarch64_python.sh). The CUDA 12 and CUDA 13 wheels'
kernels are compiled by clang with the host side for aarch64, and link NVIDIA's aarch64 libcudart.

Checked on the wheel: tagged ``manylinux_2_27_aarch64`` and ``auditwheel show`` agrees; its module is an aarch64
object needing no C++ runtime and no glibc newer than 2.27; ``twine check --strict`` and ``check-wheel-contents``
pass (a clean build gives the same bytes: test_build_reproducible.py); pip installs it for an aarch64
``manylinux_2_27`` target beside the
pinned jaxlib's own aarch64 wheel, and under qemu-user that jaxlib runs it like NumPy. Forgetting the toolchain
(the host's x86_64 compiler with the aarch64 Python's tags) is refused by the wheel builder.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from bazel_workspace import CACHE, kept_workspace

from jaxrel.distributions.bazel import BuildError, build
from jaxrel.distributions.pipconfig import pip_command
from jaxrel.errors import ExitCode
from jaxrel.extension import xla

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PIN = xla.read_pin(REPO / "WORKSPACE")
OPTIONS = ["--config=manylinux_aarch64"]
TARGET = ["--platform", "manylinux_2_27_aarch64", "--platform", "manylinux_2_17_aarch64", "--platform",
          "manylinux2014_aarch64", "--python-version", "3.11", "--implementation", "cp", "--only-binary=:all:"]


@pytest.fixture(scope="module")
def aarch64_python() -> str:
    """The launcher of Debian's arm64 python3.11 under qemu-user, made once per machine in the tests' cache (a
    stable path: Bazel's repository rules see the same interpreter in every run); skip (exit 3: apt or the network
    is missing here) with the reason."""
    done = subprocess.run(["bash", str(REPO / "scripts" / "aarch64_python.sh"), str(CACHE / "aarch64-python")],
                          capture_output=True, text=True, timeout=1200)
    if done.returncode == 3:
        pytest.skip(done.stderr.strip().splitlines()[-1])
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


RUNTIMES = {12: (12010, 12030), 13: (13000, 13000)}  # built against, oldest NVIDIA ships for aarch64 (× 1000)


@pytest.fixture(scope="module")
def wheels(aarch64_python: str, index_reachable: None, launcher: list[str],
           tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The CPU, CUDA 12 and CUDA 13 wheels for aarch64, built together in the kept workspace of this configuration
    (tests/bazel_workspace.py)."""
    from test_build_manylinux import GRID, by_kind

    with kept_workspace("manylinux_aarch64") as workspace:
        return by_kind(build(workspace, wheels=GRID, python=aarch64_python, bazel_options=OPTIONS,
                             output=tmp_path_factory.mktemp("aarch64-dist")).wheels)


@pytest.fixture(scope="module")
def wheel(wheels: dict[str, Path]) -> Path:
    return wheels["cpu"]


@pytest.fixture(scope="module")
def module_bytes(wheel: Path) -> bytes:
    from test_build_manylinux import module_of

    name, data = module_of(wheel)
    assert name == "jaxrel_rmsnorm/_rmsnorm.abi3.so"
    return data


def test_tagged_manylinux_2_27_aarch64_and_auditwheel_agrees(wheel: Path) -> None:
    from test_build_manylinux import assert_auditwheel_agrees

    assert wheel.name.endswith("-cp311-abi3-manylinux_2_27_aarch64.whl"), wheel.name
    assert_auditwheel_agrees(wheel, "aarch64")


@pytest.mark.parametrize("kind", ["cpu", "cuda12", "cuda13"])
def test_each_aarch64_wheel_is_one_stable_abi_wheel(wheels: dict[str, Path], kind: str) -> None:
    from test_build_manylinux import assert_stable_abi

    assert_stable_abi(wheels[kind])


def test_an_aarch64_object_with_no_cxx_runtime_and_no_glibc_newer_than_2_27(module_bytes: bytes,
                                                                            tmp_path: Path) -> None:
    from test_build_manylinux import portable_table

    assert module_bytes[:4] == b"\x7fELF" and int.from_bytes(module_bytes[18:20], "little") == 183  # EM_AARCH64
    assert re.search(r"\sFUNC\s+GLOBAL\s+DEFAULT\s+\d+\s+PyInit__rmsnorm\b", portable_table(module_bytes, tmp_path))


def test_twine_check_and_check_wheel_contents(wheel: Path) -> None:
    from test_build_manylinux import assert_twine_and_check_wheel_contents_pass

    assert_twine_and_check_wheel_contents_pass(wheel)


@pytest.mark.long("jax and jaxlib's aarch64 wheels installed and run under qemu-user emulation")
def test_pip_installs_it_for_aarch64_and_it_computes_like_numpy_under_qemu(wheel: Path, aarch64_python: str,
                                                                           tmp_path: Path) -> None:
    from test_build_real import RUNTIME_SCRIPT

    site = tmp_path / "site"
    fetched = subprocess.run([*pip_command(), "install", "--quiet", "--target", str(site), *TARGET,
                              f"jax=={PIN.backend_version}", f"jaxlib=={PIN.backend_version}", str(wheel)],
                             capture_output=True, text=True, timeout=1200)
    if fetched.returncode != 0 and "No matching distribution found for jaxlib" in fetched.stderr:
        pytest.skip(f"jaxlib {PIN.backend_version} has no cp311 aarch64 wheel (Debian's arm64 Python is 3.11)")
    assert fetched.returncode == 0, fetched.stderr
    script = RUNTIME_SCRIPT.replace("print(json.dumps({", "import platform\nprint(json.dumps({'machine': "
                                                          "platform.machine(), ")
    done = subprocess.run([aarch64_python, "-c", script], capture_output=True, text=True, timeout=1200,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["machine"] == "aarch64" and result["jax"] == PIN.backend_version
    assert all(error < 1e-4 for error in result["errors"].values()), result


@pytest.mark.parametrize("major", sorted(RUNTIMES))
def test_a_cuda_wheel_carries_aarch64_host_code_and_the_gpu_code_of_x86_64s(wheels: dict[str, Path],
                                                                           tmp_path: Path, major: int) -> None:
    """clang compiles the host side for aarch64 against Zig's glibc 2.27 and libc++ headers and the device side with
    the same SASS and PTX as the x86_64 wheel; the module links NVIDIA's aarch64 libcudart by rpath and needs no
    C++ runtime and no glibc newer than 2.27."""
    from test_build_manylinux import CUDA, module_of, portable_table

    from jaxrel.extension.fatbin import gpu_code

    cuda = wheels[f"cuda{major}"]
    assert cuda.name.endswith("-cp311-abi3-manylinux_2_27_aarch64.whl"), cuda.name
    data = module_of(cuda)[1]
    module = tmp_path / "module.so"
    module.write_bytes(data)
    assert int.from_bytes(data[18:20], "little") == 183  # EM_AARCH64
    runpath, code = CUDA[major]
    assert {str(found) for found in gpu_code(module)} == code
    table = portable_table(data, tmp_path)
    assert f"libcudart.so.{major}" in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", table)
    assert f"$ORIGIN/../{runpath}" in table


@pytest.mark.long("jax, its CUDA plugins and NVIDIA's runtimes for aarch64 installed and run under qemu-user emulation")
def test_under_qemu_each_cuda_module_loads_nvidia_s_aarch64_runtime_and_goes_idle_without_a_driver(
        wheels: dict[str, Path], aarch64_python: str, tmp_path: Path) -> None:
    """pip installs the CPU and both CUDA wheels for aarch64 with the jax CUDA plugin of each major and NVIDIA's
    runtimes (their aarch64 wheels), in one place, as a user with both would; the guard loads each module, which
    finds its own major's aarch64 libcudart by rpath, and says why the kernels sit idle here (no driver) instead of
    failing. One install and one emulated interpreter serve both majors (emulated, each costs about 15 s)."""
    site = tmp_path / "site"
    plugins = [f"jax-cuda{major}-plugin=={PIN.backend_version}" for major in sorted(RUNTIMES)]
    fetched = subprocess.run([*pip_command(), "install", "--quiet", "--target", str(site), *TARGET,
                              f"jax=={PIN.backend_version}", f"jaxlib=={PIN.backend_version}", *plugins,
                              str(wheels["cpu"]), *(str(wheels[f"cuda{major}"]) for major in sorted(RUNTIMES))],
                             capture_output=True, text=True, timeout=1200)
    if fetched.returncode != 0 and "No matching distribution found for jax" in fetched.stderr:
        pytest.skip(f"jax {PIN.backend_version}'s CUDA plugins have no cp311 aarch64 wheels")
    assert fetched.returncode == 0, fetched.stderr
    script = ("import importlib, json, platform\nfound = {}\n"
              f"for major in {sorted(RUNTIMES)}:\n"
              "    m = importlib.import_module(f'jaxrel_rmsnorm_cuda{major}')\n"
              "    found[major] = {'idle': m.idle_reason, 'platform': m.PLATFORM, 'runtime': m._native.cuda_runtime(),"
              " 'handlers': sorted(m.handlers())}\n"
              "print(json.dumps({'machine': platform.machine(), 'modules': found}))")
    done = subprocess.run([aarch64_python, "-c", script], capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["machine"] == "aarch64" and sorted(result["modules"]) == [str(m) for m in sorted(RUNTIMES)]
    for major, (built_against, oldest) in RUNTIMES.items():
        module = result["modules"][str(major)]
        assert module["platform"] == "CUDA", module
        assert module["handlers"] == ["jaxrel_rms_norm_bwd", "jaxrel_rms_norm_fwd"]
        built, loaded = module["runtime"]
        assert built == built_against and oldest <= loaded < (major + 1) * 1000, (major, module["runtime"])
        assert "no NVIDIA driver" in module["idle"], module["idle"]


def test_the_hosts_compiler_with_the_aarch64_pythons_tags_is_refused(aarch64_python: str, wheel: Path,
                                                                     tmp_path: Path) -> None:
    with kept_workspace("manylinux_aarch64") as workspace, pytest.raises(BuildError) as refused:
        build(workspace, wheels=["rmsnorm"], python=aarch64_python, output=tmp_path / "wrong")
    assert re.search(r"_rmsnorm\.abi3\.so is built for x86_64, the tag "
                     r"manylinux_2_\d+_aarch64 says aarch64", str(refused.value)), str(refused.value)
    assert refused.value.exit_code == ExitCode.BAD_INPUT
    assert not (tmp_path / "wrong").exists() or not list((tmp_path / "wrong").iterdir())


def test_release_yml_s_aarch64_job_builds_the_same_wheel(wheels: dict[str, Path], aarch64_python: str,
                                                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What release.yml's aarch64 build job runs (`jaxrel release build --component C --python <aarch64 launcher>`,
    the component's own bazel-options) gives, for each compiled component, the wheel built above, byte for byte."""
    from jaxrel.cli import main

    for kind, component in (("cpu", "jaxrel-rmsnorm"), ("cuda12", "jaxrel-rmsnorm-cuda12"),
                            ("cuda13", "jaxrel-rmsnorm-cuda13")):
        out = tmp_path / f"release-{kind}"
        with kept_workspace("manylinux_aarch64") as workspace:
            assert main(["release", "build", "--project", str(workspace), "--component", component, "--python",
                         aarch64_python, "--output", str(out)]) == 0, capsys.readouterr().err
        built = sorted(out.glob("*.whl"))
        assert [w.name for w in built] == [wheels[kind].name]
        assert built[0].read_bytes() == wheels[kind].read_bytes(), component
