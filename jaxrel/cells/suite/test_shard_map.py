"""shard_map with psum and all_gather, and their transposes under jax.grad, on a mesh of CPU devices.

Two entry points, each with its own checking keyword (passing the other one is a TypeError):

* ``jax.shard_map(f, mesh=, in_specs=, out_specs=, check_vma=)``: public from jax 0.6.1
  (absent from the 0.6.0 wheel);
* ``jax.experimental.shard_map.shard_map(f, mesh, in_specs, out_specs, check_rep=)``: in every
  wheel inspected (0.4.16 to 0.12.0.1), deprecated since 0.8.0.
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def public(f, mesh, in_specs, out_specs):
    return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=True)


def experimental(f, mesh, in_specs, out_specs):
    try:
        module = importlib.import_module("jax.experimental.shard_map")
    except ImportError as error:
        pytest.skip(f"jax.experimental.shard_map is gone from jax {jax.__version__} ({error})")
    return module.shard_map(f, mesh, in_specs, out_specs, check_rep=True)


pytestmark = [
    pytest.mark.filterwarnings("ignore:jax.experimental.shard_map is deprecated:DeprecationWarning"),
    pytest.mark.parametrize("shard_map", [
        pytest.param(public, id="jax.shard_map", marks=pytest.mark.needs("jax.shard_map", jax="0.6.1")),
        pytest.param(experimental, id="jax.experimental.shard_map"),
    ]),
]


def rows(mesh) -> np.ndarray:
    return np.linspace(-1, 1, mesh.size * 3, dtype=np.float32).reshape(mesh.size, 3)


def sharded(mesh, x):
    return jax.device_put(x, NamedSharding(mesh, P("i")))


def test_psum(shard_map, cpu_mesh):
    x = rows(cpu_mesh)
    total = jax.jit(shard_map(lambda block: jax.lax.psum(block, "i"), cpu_mesh, P("i"), P()))
    np.testing.assert_allclose(total(sharded(cpu_mesh, x)), x.sum(0, keepdims=True), rtol=1e-6)


def test_psum_transpose_under_grad(shard_map, cpu_mesh):
    x = rows(cpu_mesh)
    total = shard_map(lambda block: jax.lax.psum(block, "i"), cpu_mesh, P("i"), P())
    grad = jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(total(x)))))(sharded(cpu_mesh, x))
    np.testing.assert_allclose(grad, np.broadcast_to(np.cos(x.sum(0)), x.shape), rtol=1e-5, atol=1e-6)


def test_all_gather(shard_map, cpu_mesh):
    # Every block gathers the whole array; out_specs P("i") lays the copies side by side (an
    # all_gather's result is not statically known to be replicated, so P() is refused when checking).
    x = rows(cpu_mesh)
    gather = jax.jit(shard_map(lambda b: jax.lax.all_gather(b, "i", tiled=True), cpu_mesh, P("i"), P("i")))
    np.testing.assert_array_equal(gather(sharded(cpu_mesh, x)), np.tile(x, (cpu_mesh.size, 1)))
    stacked = jax.jit(shard_map(lambda b: jax.lax.all_gather(b, "i")[None], cpu_mesh, P("i"), P("i")))
    blocks = x[:, None]  # untiled: a new leading axis over the 8 blocks of shape (1, 3)
    expected = np.broadcast_to(blocks, (cpu_mesh.size, *blocks.shape))
    np.testing.assert_array_equal(stacked(sharded(cpu_mesh, x)), expected)


def test_all_gather_transpose_under_grad(shard_map, cpu_mesh):
    # The transpose of all_gather is a reduce-scatter: each row collects the cotangents of its copies.
    x = rows(cpu_mesh)
    weights = np.linspace(0, 2, cpu_mesh.size * x.size, dtype=np.float32).reshape(cpu_mesh.size, *x.shape)
    gather = shard_map(lambda b: jax.lax.all_gather(b, "i", tiled=True), cpu_mesh, P("i"), P("i"))
    loss = jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(gather(x)) * weights.reshape(-1, x.shape[1]))))
    np.testing.assert_allclose(loss(sharded(cpu_mesh, x)), np.cos(x) * weights.sum(0), rtol=1e-5, atol=1e-5)
