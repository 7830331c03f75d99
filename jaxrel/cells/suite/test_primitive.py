"""A primitive defined through jax.extend: the classic ``mul_add`` (x * y + z), eager and under jit."""

from __future__ import annotations

import jax
import numpy as np
import pytest

# jax.extend.core.Primitive: absent from the jax 0.4.26 wheel (jax/extend/core.py), present from 0.4.27.
pytestmark = pytest.mark.needs("jax.extend.core.Primitive", jax="0.4.27")

X, Y, Z = (np.arange(6, dtype=np.float32).reshape(2, 3) + k for k in range(3))


@pytest.fixture(scope="module")
def mul_add_p():
    """``mul_add`` as in JAX's "How primitives work": numpy impl, abstract eval, lowering via lower_fun."""
    import jax.extend.core
    from jax.interpreters import mlir

    primitive = jax.extend.core.Primitive("compat_mul_add")
    primitive.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))
    primitive.def_abstract_eval(lambda x, y, z: jax.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(primitive, mlir.lower_fun(lambda x, y, z: x * y + z, multiple_results=False))
    return primitive


def test_mul_add_eager(mul_add_p):
    np.testing.assert_allclose(mul_add_p.bind(X, Y, Z), X * Y + Z)


def test_mul_add_under_jit(mul_add_p):
    jitted = jax.jit(lambda x, y, z: mul_add_p.bind(x, y, z) * 2)
    np.testing.assert_allclose(jitted(X, Y, Z), (X * Y + Z) * 2)
    assert "compat_mul_add" in str(jax.make_jaxpr(lambda x, y, z: mul_add_p.bind(x, y, z))(X, Y, Z))
