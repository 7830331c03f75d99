"""Hardware plugins: an installed CUDA plugin must not break CPU computation; a GPU computes when present."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

A = np.arange(6, dtype=np.float32).reshape(2, 3)  # small integers: exact even in TF32


def gpus() -> list:
    try:
        return jax.devices("gpu")
    except RuntimeError:  # "Unknown backend: 'gpu' requested, but no platforms ... are present"
        return []


@pytest.mark.needs("a CUDA plugin (any release)", jax_cuda12_plugin="0")
def test_cpu_still_computes_with_the_cuda_plugin_installed():
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
