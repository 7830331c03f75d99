"""The device side of the import guard (``guard.check_cuda``), with fakes of the plugin metadata, the CUDA
runtime the compiled module loads, and the NVIDIA driver."""

from __future__ import annotations

import pytest

from jaxrel import guard


def check(site, *, loaded=13000, driver=13000, major="13", version="13.0", load=None):
    calls = []

    def fake_load() -> int:
        calls.append("load")
        return loaded

    reason = guard.check_cuda(cuda_major=major, cuda_version=version, distribution=f"jaxrel-rmsnorm-cuda{major}",
                              version="0.1.0", load=load or fake_load, driver_version=lambda: driver,
                              path=site.path)
    return reason, calls


def test_matching_plugin_runtime_and_driver_pass(site):
    site.distribution("jax-cuda13-plugin", "0.11.2")
    assert check(site) == (None, ["load"])


def test_newer_runtime_and_driver_of_the_same_major_pass(site):
    site.distribution("jax-cuda13-plugin", "0.11.2")
    assert check(site, loaded=13020, driver=13050)[0] is None


def test_plugin_of_another_major_is_refused_before_loading_with_both_fixes(site):
    site.distribution("jax-cuda12-plugin", "0.11.2")
    site.distribution("jax-cuda12-pjrt", "0.11.2")
    calls = []
    with pytest.raises(guard.GuardError) as raised:
        guard.check_cuda(cuda_major="13", cuda_version="13.0", distribution="jaxrel-rmsnorm-cuda13", version="0.1.0",
                         load=lambda: calls.append("load") or 13000, driver_version=lambda: 13000, path=site.path)
    message = str(raised.value)
    assert calls == [], "the compiled module is not loaded when the plugin's CUDA differs"
    assert "jaxrel-rmsnorm-cuda13 0.1.0 was built for CUDA 13" in message
    assert "jax-cuda12-plugin 0.11.2 (CUDA 12)" in message and "pjrt" not in message
    assert raised.value.fix == 'pip install "jax[cuda13]"'
    assert "pip uninstall -y jaxrel-rmsnorm-cuda13 && pip install jaxrel-rmsnorm-cuda12" in message
    assert raised.value.installed == {"jax-cuda12-plugin": "0.11.2", "jaxrel-rmsnorm-cuda13": "0.1.0"}


def test_both_majors_installed_is_not_refused_for_the_plugin(site):
    site.distribution("jax-cuda12-plugin", "0.11.2")
    site.distribution("jax-cuda13-plugin", "0.11.2")
    assert check(site)[0] is None


def test_no_plugin_is_not_refused_and_says_jax_computes_on_the_cpu(site):
    reason, calls = check(site)
    assert calls == ["load"] and "no jax CUDA plugin" in reason and 'jax[cuda13]' in reason


def test_no_driver_is_not_refused(site):
    site.distribution("jax-cuda13-plugin", "0.11.2")
    reason, _ = check(site, driver=None)
    assert "no NVIDIA driver" in reason and "CPU" in reason


@pytest.mark.parametrize("driver, shown", [(12080, "12.8"), (12090, "12.9")])
def test_driver_older_than_the_build_is_refused_naming_both_versions(site, driver, shown):
    site.distribution("jax-cuda13-plugin", "0.11.2")
    with pytest.raises(guard.GuardError) as raised:
        check(site, driver=driver)
    message = str(raised.value)
    assert f"the NVIDIA driver supports CUDA {shown}, older than the CUDA 13.0" in message
    assert raised.value.fix == "upgrade the NVIDIA driver to one for CUDA 13.0 or newer"


def test_build_of_a_newer_minor_refuses_an_older_driver(site):
    site.distribution("jax-cuda13-plugin", "0.11.2")
    with pytest.raises(guard.GuardError, match="supports CUDA 13.0, older than the CUDA 13.2"):
        check(site, version="13.2", loaded=13020, driver=13000)


@pytest.mark.parametrize("loaded, shown", [(12080, "12.8"), (14000, "14.0")])
def test_runtime_of_another_major_is_refused(site, loaded, shown):
    site.distribution("jax-cuda13-plugin", "0.11.2")
    with pytest.raises(guard.GuardError) as raised:
        check(site, loaded=loaded)
    assert f"the CUDA runtime loaded is {shown}" in str(raised.value)
    assert raised.value.fix == 'pip install --upgrade "nvidia-cuda-runtime>=13.0,<14"'


def test_runtime_older_than_the_build_is_refused(site):
    site.distribution("jax-cuda13-plugin", "0.11.2")
    with pytest.raises(guard.GuardError, match="built with CUDA 13.2, but the CUDA runtime loaded is 13.0"):
        check(site, version="13.2", loaded=13000, driver=13020)


@pytest.mark.parametrize(("error", "shown", "hidden", "fix"), [
    # the runtime library missing: the install command of NVIDIA's runtime wheel
    (ImportError("libcudart.so.13: cannot open shared object file: No such file or directory\nmore"),
     "cannot load its CUDA 13 runtime: libcudart.so.13: cannot open shared object file", "more",
     'pip install "nvidia-cuda-runtime>=13.0,<14"'),
    # the module failing its own initialisation: a refusal (a damaged install), never a traceback
    (RuntimeError("the module's table is corrupt\nsecond line"),
     "cannot load its compiled module: RuntimeError: the module's table is corrupt", "second line", None),
])
def test_a_failing_load_is_one_guard_error_with_its_first_line(site, error, shown, hidden, fix):
    site.distribution("jax-cuda13-plugin", "0.11.2")

    def load() -> int:
        raise error

    with pytest.raises(guard.GuardError) as raised:
        check(site, load=load)
    message = str(raised.value)
    assert shown in message
    assert hidden not in message
    if fix is not None:
        assert raised.value.fix == fix


def test_skip_variable_only_loads(site, monkeypatch):
    site.distribution("jax-cuda12-plugin", "0.11.2")
    monkeypatch.setenv(guard.SKIP_ENV, "1")
    assert check(site, driver=1000) == (None, ["load"])


def test_driver_reader_answers_none_without_a_driver_or_a_version():
    found = guard.cuda_driver_version()
    assert found is None or (isinstance(found, int) and found >= 1000)


STAND_INS = {  # a libcuda.so.1 built here: what cuDriverGetVersion is in it, if anything
    "missing": "int cuInit(unsigned int flags) { return 0; }\n",
    "failing": "int cuDriverGetVersion(int *v) { return 100; }\n",  # CUDA_ERROR_NO_DEVICE
    "working": "int cuDriverGetVersion(int *v) { *v = 12080; return 0; }\n",
}


@pytest.mark.parametrize("kind", sorted(STAND_INS))
def test_a_stand_in_libcuda_is_no_driver_never_a_traceback(kind, tmp_path):
    """A libcuda without cuDriverGetVersion (a stub library, a container's stand-in) reads as no driver, in a
    fresh process that loads it by its soname, as the guard does on a user's machine."""
    import shutil
    import subprocess
    import sys

    if shutil.which("cc") is None:
        pytest.skip("no C compiler here to build the stand-in libcuda.so.1")
    source = tmp_path / "cuda.c"
    source.write_text(STAND_INS[kind])
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libcuda.so.1"), str(source)], check=True)
    done = subprocess.run([sys.executable, "-c", "from jaxrel import guard; print(guard.cuda_driver_version())"],
                          capture_output=True, text=True, env={"LD_LIBRARY_PATH": str(tmp_path), "PATH": "/usr/bin"})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.strip() == {"missing": "None", "failing": "None", "working": "12080"}[kind]


def test_a_cuda12_build_names_nvidias_cuda12_runtime_in_its_fix(site):
    """NVIDIA names the CUDA 12 runtime wheel nvidia-cuda-runtime-cu12 (13 dropped the suffix): the fix says so."""
    site.distribution("jax-cuda12-plugin", "0.11.2")

    def load() -> int:
        raise ImportError("libcudart.so.12: cannot open shared object file: No such file or directory")

    with pytest.raises(guard.GuardError) as raised:
        check(site, major="12", version="12.1", load=load)
    assert raised.value.fix == 'pip install "nvidia-cuda-runtime-cu12>=12.1,<13"'


@pytest.mark.parametrize(("major", "version"), [("x", "13.0"), ("13", "13"), ("13", "12.1"), ("13", "13.x"),
                                                ("١٣", "١٣.0")])
def test_damaged_build_facts_are_a_refusal_with_the_fix(site, major, version):
    with pytest.raises(guard.GuardError) as raised:
        check(site, major=major, version=version)
    assert "build facts are damaged" in str(raised.value)
    assert raised.value.fix.startswith("pip install --force-reinstall --no-deps jaxrel-rmsnorm-cuda")


