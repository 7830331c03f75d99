"""The XLA FFI extension wheel built by this repo's Bazel rules (``jaxrel-rmsnorm``), in a cell.

The runner installs the wheel built for the cell's Python (``--no-deps``). What to expect comes
from the wheel's own build facts, not from the guard: a jaxlib at or above the first release
providing the pinned XLA FFI API (``MINIMUM_BACKEND``, computed from release data at build time)
must import it and compute what NumPy computes, eager and under jit, vmap and grad; an older one
must be refused at import with the fix, leaving jax usable.

Each computation runs on every platform the extension declares (CPU; CUDA too when its
``jaxrel-rmsnorm-cuda<MAJOR>`` wheel is installed) and the cell has a device for, with the inputs
placed on that device: a platform the extension does not claim is never tested, so a GPU cell with
the CPU-only wheel does not fail for it, and one the cell lacks is skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib import metadata

import numpy as np
import pytest

from jaxrel import guard

if importlib.util.find_spec("jaxrel_rmsnorm") is None:
    pytest.skip("the extension wheel is not installed in this cell (jaxrel compat --no-extension, or not built)",
                allow_module_level=True)

EPS = 1e-6


def build_facts():
    """The wheel's stamped build facts, read without importing the package (that would run the guard)."""
    spec = importlib.util.find_spec("jaxrel_rmsnorm")
    assert spec is not None and spec.submodule_search_locations
    path = f"{list(spec.submodule_search_locations)[0]}/_build_info.py"
    facts: dict[str, str] = {}
    with open(path, encoding="utf-8") as source:
        exec(compile(source.read(), path, "exec"), facts)  # noqa: S102  constants only
    return facts


FACTS = build_facts()
CUDA_WHEELS = [f"jaxrel_rmsnorm_cuda{major}" for major in (13, 12)
               if importlib.util.find_spec(f"jaxrel_rmsnorm_cuda{major}") is not None]
DECLARED = ("cpu", "cuda") if CUDA_WHEELS else ("cpu",)  # as jaxrel_rmsnorm.platforms() will say
JAXLIB = metadata.version("jaxlib")
SUPPORTED = guard.release_of(JAXLIB).key >= guard.release_of(FACTS["MINIMUM_BACKEND"]).key


def reference(x: np.ndarray) -> np.ndarray:
    mean = np.sum(x * x, axis=-1, keepdims=True) / max(x.shape[-1], 1)  # rows of width 0: an empty result
    return x / np.sqrt(mean + EPS)


def reference_vjp(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """d/dx of sum(dy * rms_norm(x)), derived by hand."""
    width = max(x.shape[-1], 1)  # rows of width 0: an empty result
    r = 1.0 / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) / width + EPS)
    return r * dy - r**3 * x * np.sum(dy * x, axis=-1, keepdims=True) / width


@pytest.fixture(scope="module")
def rms_norm():
    if not SUPPORTED:
        pytest.skip(f"jaxlib {JAXLIB} is below {FACTS['MINIMUM_BACKEND']}: the refusal test covers this cell")
    from jaxrel_rmsnorm import rms_norm

    return rms_norm


@pytest.fixture(params=DECLARED)
def device(request, rms_norm):
    """A device of each platform the extension declares, if the cell has one."""
    import jax
    import jaxrel_rmsnorm

    assert request.param in jaxrel_rmsnorm.platforms(), jaxrel_rmsnorm.platforms()
    try:
        return jax.devices(request.param)[0]
    except RuntimeError as error:
        pytest.skip(f"the cell has no {request.param} device ({str(error).splitlines()[0][:120]})")


@pytest.fixture()
def x() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((4, 7)).astype(np.float32)


def _on(device, *arrays):
    import jax

    return [jax.device_put(array, device) for array in arrays]


def _checked(result, device) -> np.ndarray:
    assert {d.platform for d in result.devices()} == {device.platform}, "computed on the device the inputs were on"
    return np.asarray(result)


def test_eager_matches_numpy(rms_norm, device, x):
    (on,) = _on(device, x)
    np.testing.assert_allclose(_checked(rms_norm(on, EPS), device), reference(x), rtol=1e-5, atol=1e-6)


def test_jit_matches_numpy(rms_norm, device, x):
    import jax

    (on,) = _on(device, x)
    np.testing.assert_allclose(_checked(jax.jit(rms_norm)(on), device), reference(x), rtol=1e-5, atol=1e-6)


def test_vmap_matches_numpy(rms_norm, device, x):
    import jax

    batched = np.stack([x, 2 * x + 1])
    (on,) = _on(device, batched)
    np.testing.assert_allclose(_checked(jax.vmap(rms_norm)(on), device),
                               np.stack([reference(b) for b in batched]), rtol=1e-5, atol=1e-6)


def test_grad_matches_numpy(rms_norm, device, x):
    import jax

    dy = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    on, dy_on = _on(device, x, dy)
    grad = jax.grad(lambda v: (rms_norm(v, EPS) * dy_on).sum())(on)
    np.testing.assert_allclose(_checked(grad, device), reference_vjp(x, dy), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(3, 1), (2, 3, 5), (1, 4099), (0, 8), (3, 8192), (2, 8196), (5, 0)])
def test_odd_shapes_match_numpy(rms_norm, device, shape):
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    (on,) = _on(device, x)
    np.testing.assert_allclose(_checked(rms_norm(on, EPS), device), reference(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(3, 1), (2, 3, 5), (1, 4099), (0, 8), (3, 8192), (2, 8196), (5, 0)])
def test_odd_shapes_grad_match_numpy(rms_norm, device, shape):
    import jax

    x, dy = (np.random.default_rng(seed).standard_normal(shape).astype(np.float32) for seed in (3, 4))
    on, dy_on = _on(device, x, dy)
    grad = jax.grad(lambda v: (rms_norm(v, EPS) * dy_on).sum())(on)
    np.testing.assert_allclose(_checked(grad, device), reference_vjp(x, dy), rtol=1e-4, atol=1e-5)


def test_the_gradient_runs_the_backward_kernel_alone(rms_norm, device, x):
    """The backward kernel computes 1/rms again from x, so under jax.grad the forward call is dead code: the
    gradient reads x and dy once and writes dx once."""
    import jax

    on, dy_on = _on(device, x, x)
    compiled = jax.jit(jax.grad(lambda v: (rms_norm(v, EPS) * dy_on).sum())).lower(on).compile().as_text()
    targets = [line.split('custom_call_target="')[1].split('"')[0] for line in compiled.splitlines()
               if 'custom_call_target="jaxrel_' in line]
    assert targets == ["jaxrel_rms_norm_bwd"], targets


@pytest.mark.skipif(SUPPORTED, reason=f"jaxlib {JAXLIB} provides XLA FFI API {FACTS['FFI_API']} or newer, which the "
                                       f"extension needs (from jaxlib {FACTS['MINIMUM_BACKEND']} on)")
def test_older_jaxlib_is_refused_and_jax_still_works():
    sys.modules.pop("jaxrel_rmsnorm", None)
    with pytest.raises(ImportError) as refused:
        import jaxrel_rmsnorm  # noqa: F401
    message = str(refused.value)
    assert JAXLIB in message and FACTS["FFI_API"] in message
    assert f'"jaxlib>={FACTS["MINIMUM_BACKEND"]}"' in message
    import jax.numpy as jnp

    assert float(jnp.ones(3).sum()) == 3.0
