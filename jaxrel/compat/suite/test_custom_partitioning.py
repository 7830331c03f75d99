"""custom_partitioning with a Shardy sharding rule (an einsum-like string), under jit on a CPU mesh.

``def_partition(..., sharding_rule=...)`` and ``SdyShardingRule``: absent from the jax 0.4.38
wheel, present from 0.5.0. Shardy is the default partitioner from jax 0.7.0 (off by default in
0.5.0 to 0.6.2, where this test switches it on), and a string rule is used only under Shardy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

pytestmark = pytest.mark.needs("custom_partitioning(sharding_rule=)", jax="0.5.0")


@pytest.fixture
def shardy():
    """Shardy on for the test (the default from jax 0.7.0), restored afterwards."""
    before = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", True)
    yield
    jax.config.update("jax_use_shardy_partitioner", before)


def row_sums_op(seen: dict):
    """``x.sum(axis=1)`` whose rows stay sharded: each device sums its own block of rows."""
    from jax.experimental.custom_partitioning import custom_partitioning

    @custom_partitioning
    def row_sums(x):
        return jnp.sum(x, axis=1)

    def partition(mesh, arg_shapes, result_shape):
        rows = arg_shapes[0].sharding.spec[0] if len(arg_shapes[0].sharding.spec) else None
        seen["rows"] = rows

        def lower(x):
            seen["block"] = x.shape
            return jnp.sum(x, axis=1)

        return mesh, lower, NamedSharding(mesh, P(rows)), (NamedSharding(mesh, P(rows, None)),)

    row_sums.def_partition(partition=partition, sharding_rule="i j -> i")
    return row_sums


def test_sharding_rule_propagates_the_result_sharding_to_the_operand(shardy, cpu_mesh):
    # The operand arrives unsharded; only the result is asked to be sharded by rows. Shardy can carry
    # that back to the operand only through the rule "i j -> i" (without it the partition sees a
    # replicated operand): each device then sums its own 2 rows.
    seen: dict = {}
    x = np.arange(cpu_mesh.size * 2 * 3, dtype=np.float32).reshape(cpu_mesh.size * 2, 3)
    rows = NamedSharding(cpu_mesh, P("i"))
    out = jax.jit(row_sums_op(seen), out_shardings=rows)(x)
    np.testing.assert_allclose(out, x.sum(axis=1))
    assert seen == {"rows": "i", "block": (2, 3)}, seen
    assert out.sharding.is_equivalent_to(rows, 1)
