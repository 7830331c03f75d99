"""jit, grad and vmap: the transformations every user depends on, checked against numpy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

X = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
W = np.arange(8, dtype=np.float32).reshape(4, 2) / 8


def predict(w, x):
    return jnp.tanh(x @ w)


def test_jit_matches_numpy():
    np.testing.assert_allclose(jax.jit(predict)(W, X), np.tanh(X @ W), rtol=1e-6)


def test_grad_matches_the_analytic_gradient():
    loss = jax.jit(jax.grad(lambda w, x: jnp.sum(predict(w, x) ** 2)))
    t = np.tanh(X @ W)
    np.testing.assert_allclose(loss(W, X), X.T @ (2 * t * (1 - t**2)), rtol=1e-5, atol=1e-6)


def test_vmap_maps_over_rows_and_composes_with_jit_and_grad():
    per_row = jax.vmap(predict, in_axes=(None, 0))
    np.testing.assert_allclose(per_row(W, X), np.tanh(X @ W), rtol=1e-6)
    per_row_grads = jax.jit(jax.vmap(jax.grad(lambda x: jnp.sum(jnp.sin(x) * x))))(X)
    np.testing.assert_allclose(per_row_grads, np.cos(X) * X + np.sin(X), rtol=1e-5, atol=1e-6)


def test_value_and_grad_with_pytrees():
    params = {"w": W, "b": np.ones(2, np.float32)}
    value, grads = jax.value_and_grad(lambda p: jnp.sum(X @ p["w"] + p["b"]))(params)
    np.testing.assert_allclose(value, np.sum(X @ W + 1), rtol=1e-6)
    np.testing.assert_allclose(grads["w"], np.tile(X.sum(0)[:, None], (1, 2)), rtol=1e-6)
    np.testing.assert_allclose(grads["b"], np.full(2, 3.0), rtol=1e-6)
