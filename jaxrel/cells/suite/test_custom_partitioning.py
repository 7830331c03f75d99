"""custom_partitioning under jit on a CPU mesh: Shardy with a sharding rule, and GSPMD's callbacks.

``def_partition(..., sharding_rule=...)`` and ``SdyShardingRule``: absent from the jax 0.4.38
wheel, present from 0.5.0 — but jax 0.5.0 still requires ``infer_sharding_from_operands`` as a
positional argument of ``def_partition`` (a ``TypeError`` without it); it is optional from 0.5.1,
so a rule-only partitioning needs 0.5.1. Shardy is the default partitioner from jax 0.7.0 (off by
default in 0.5.x to 0.6.2, where these tests switch it on), and a string rule is used only under
Shardy. The GSPMD path (``infer_sharding_from_operands``) runs with Shardy switched off.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

RULE_ONLY = pytest.mark.needs("custom_partitioning(sharding_rule=) without infer_sharding_from_operands",
                             jax="0.5.1")


def partitioner(on: bool):
    before = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", on)
    yield
    jax.config.update("jax_use_shardy_partitioner", before)


@pytest.fixture
def shardy():
    """Shardy on for the test (the default from jax 0.7.0), restored afterwards."""
    yield from partitioner(True)


@pytest.fixture
def gspmd():
    """Shardy off (GSPMD, the default up to jax 0.6.2), restored afterwards."""
    if not hasattr(jax.config, "jax_use_shardy_partitioner"):
        yield  # before the switch existed, GSPMD was the only partitioner
        return
    yield from partitioner(False)


def row_sums_op(seen: dict, mesh, infer=None):
    """``x.sum(axis=1)`` on ``mesh`` whose rows stay sharded: each device sums its own block of rows (GSPMD:
    ``infer`` gives the result's sharding from the operand's). The callbacks build shardings on ``mesh``, not
    on the one they are handed: jax 0.4.30 hands them an empty ``Mesh()`` outside a ``with mesh:`` block."""
    from jax.experimental.custom_partitioning import custom_partitioning

    @custom_partitioning
    def row_sums(x):
        return jnp.sum(x, axis=1)

    def partition(_, arg_shapes, result_shape):
        rows = row_axis(mesh, arg_shapes[0].sharding)
        seen["rows"] = rows

        def lower(x):
            seen["block"] = x.shape
            return jnp.sum(x, axis=1)

        return mesh, lower, NamedSharding(mesh, P(rows)), (NamedSharding(mesh, P(rows, None)),)

    if infer is None:
        row_sums.def_partition(partition=partition, sharding_rule="i j -> i")
    else:
        row_sums.def_partition(partition=partition, infer_sharding_from_operands=infer)
    return row_sums


def row_axis(mesh, sharding):
    """``"i"`` when ``sharding`` splits a 2-d operand's rows over the mesh, else ``None``. Compared by
    equivalence: GSPMD hands jax 0.4.30 a ``PositionalSharding``, which has no ``spec``."""
    return "i" if sharding.is_equivalent_to(NamedSharding(mesh, P("i", None)), 2) else None


def infer_rows(mesh):
    """GSPMD's callback on ``mesh``: the result keeps the operand's row sharding."""
    return lambda _, arg_shapes, result_shape: NamedSharding(mesh, P(row_axis(mesh, arg_shapes[0].sharding)))


@RULE_ONLY
def test_sharding_rule_propagates_the_result_sharding_to_the_operand(shardy, cpu_mesh):
    # The operand arrives unsharded; only the result is asked to be sharded by rows. Shardy can carry
    # that back to the operand only through the rule "i j -> i" (without it the partition sees a
    # replicated operand): each device then sums its own 2 rows.
    seen: dict = {}
    x = np.arange(cpu_mesh.size * 2 * 3, dtype=np.float32).reshape(cpu_mesh.size * 2, 3)
    rows = NamedSharding(cpu_mesh, P("i"))
    out = jax.jit(row_sums_op(seen, cpu_mesh), out_shardings=rows)(x)
    np.testing.assert_allclose(out, x.sum(axis=1))
    assert seen == {"rows": "i", "block": (2, 3)}, seen
    assert out.sharding.is_equivalent_to(rows, 1)


@pytest.mark.isolated  # an exception in a GSPMD callback aborts the interpreter (see below)
@pytest.mark.needs("custom_partitioning", jax="0.4.30")
def test_gspmd_infers_the_result_sharding_from_the_operand(gspmd, cpu_mesh):
    seen: dict = {}
    x = np.arange(cpu_mesh.size * 2 * 3, dtype=np.float32).reshape(cpu_mesh.size * 2, 3)
    rows = NamedSharding(cpu_mesh, P("i"))
    out = jax.jit(row_sums_op(seen, cpu_mesh, infer_rows(cpu_mesh)))(jax.device_put(x, rows))
    np.testing.assert_allclose(out, x.sum(axis=1))
    assert seen == {"rows": "i", "block": (2, 3)}, seen
    assert out.sharding.is_equivalent_to(rows, 1)


class InferFailed(Exception):
    pass


@pytest.mark.isolated
@pytest.mark.xfail(reason="jax aborts the interpreter (SIGABRT) when infer_sharding_from_operands raises: measured on "
                          "every release from 0.4.30 to 0.12.0.1", raises=AssertionError, strict=False)
@pytest.mark.needs("custom_partitioning", jax="0.4.30")
def test_gspmd_an_error_in_infer_sharding_from_operands_reaches_the_caller(gspmd, cpu_mesh):
    def infer(mesh, arg_shapes, result_shape):
        raise InferFailed("compat: no sharding for you")

    x = np.ones((cpu_mesh.size * 2, 3), np.float32)
    with pytest.raises(Exception, match="no sharding for you"):
        jax.jit(row_sums_op({}, cpu_mesh, infer))(jax.device_put(x, NamedSharding(cpu_mesh, P("i"))))
