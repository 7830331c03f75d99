"""Hardware plugins: an installed CUDA plugin must not break CPU computation; a GPU computes when present.

Every plugin family installed in the cell (a ``jax-*-plugin`` distribution, or libtpu) must be
discovered by jax, and on a machine without its device its initialisation must fail cleanly: jax
still imports, lists the CPU and computes. Measured on jax 0.12: jax imports
``jax_plugins.xla_<family>`` (cuda12, cuda13, rocm7, oneapi), which logs why it cannot start
("Unable to load cuDNN", "No AMD GPUs were found", a missing ``libmpi.so.12``); a found libtpu turns
the tpu backend's error from "Failed to open libtpu.so" into "TPU initialization failed".
"""

from __future__ import annotations

import importlib.metadata
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

A = np.arange(6, dtype=np.float32).reshape(2, 3)  # small integers: exact even in TF32


def plugin_families() -> list[str]:
    """The hardware plugin families installed here: ``cuda12`` for jax-cuda12-plugin, ``tpu`` for libtpu."""
    names = {re.sub(r"[-_.]+", "-", str(d.metadata["Name"])).lower() for d in importlib.metadata.distributions()}
    found = sorted(n.removeprefix("jax-").removesuffix("-plugin") for n in names
                   if n.startswith("jax-") and n.endswith("-plugin"))
    return found + (["tpu"] if names & {"libtpu", "libtpu-nightly"} else [])


FAMILIES = plugin_families()


@pytest.mark.skipif(not FAMILIES, reason="no hardware plugin installed in this cell")
@pytest.mark.parametrize("family", FAMILIES or ["none"])
def test_the_plugin_is_discovered_and_fails_cleanly_without_its_device(family):
    from jax._src import xla_bridge

    platforms = {d.platform for d in jax.devices()}  # starts every backend: a plugin that cannot must not break it
    errors = {name: str(error) for name, error in getattr(xla_bridge, "_backend_errors", {}).items()}
    if family == "tpu":
        assert "tpu" in platforms or ("tpu" in errors and "Failed to open libtpu" not in errors["tpu"]), errors
    else:
        assert f"jax_plugins.xla_{family}" in sys.modules, f"jax did not load jax_plugins.xla_{family}"
    if platforms == {"cpu"}:  # no device of the plugin's: the CPU computes as without the plugin
        out = jax.jit(lambda a: jnp.tanh(a @ a.T))(A)
        np.testing.assert_allclose(out, np.tanh(A @ A.T), rtol=1e-6)


def test_jit_matmul_on_tpu():
    try:
        tpus = jax.devices("tpu")
    except RuntimeError:
        tpus = []
    if not tpus:
        pytest.skip(f"no TPU: jax.devices() = {jax.devices()}")
    out = jax.jit(jnp.matmul)(jax.device_put(A, tpus[0]), jax.device_put(A.T, tpus[0]))
    np.testing.assert_allclose(out, A @ A.T, rtol=1e-2)  # the TPU multiplies in bfloat16 by default


def gpus() -> list:
    try:
        return jax.devices("gpu")
    except RuntimeError:  # "Unknown backend: 'gpu' requested, but no platforms ... are present"
        return []


CUDA = [family for family in FAMILIES if family.startswith("cuda")]  # cuda12, cuda13: whichever is installed


@pytest.mark.skipif(not CUDA, reason="no CUDA plugin installed in this cell")
@pytest.mark.parametrize("family", CUDA or ["none"])
def test_cpu_still_computes_with_the_cuda_plugin_installed(family):
    cpu = jax.devices("cpu")[0]
    out = jax.jit(lambda a: jnp.tanh(a @ a.T))(jax.device_put(A, cpu))
    np.testing.assert_allclose(out, np.tanh(A @ A.T), rtol=1e-6)
    assert out.devices() == {cpu}
    assert jax.devices(), "jax.devices() is empty"
    if not gpus():  # without a usable GPU the plugin must fall back to CPU, not fail the import
        assert jax.default_backend() == "cpu", jax.default_backend()


def test_jit_matmul_on_gpu():
    devices = gpus()
    if not devices:
        pytest.skip(f"no GPU: jax.devices() = {jax.devices()}")
    gpu = devices[0]
    out = jax.jit(jnp.matmul)(jax.device_put(A, gpu), jax.device_put(A.T, gpu))
    assert out.devices() == {gpu}
    np.testing.assert_array_equal(out, A @ A.T)
