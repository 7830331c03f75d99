"""jax.checkpoint (remat) with a saving policy: what print_saved_residuals reports.

Present in every jax wheel inspected (0.4.16 and later), so no ``needs``. That each policy leaves
the gradient as it was is checked, policy by policy, by ``test_api[jax.checkpoint_policies.*]``.
"""

from __future__ import annotations

import contextlib
import io

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name, print_saved_residuals

W1 = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
W2 = np.linspace(1, -1, 6, dtype=np.float32).reshape(3, 2)
X = np.linspace(0, 1, 8, dtype=np.float32).reshape(2, 4)


def layers(w1, x):
    hidden = checkpoint_name(jnp.sin(x @ w1), "hidden")
    return jnp.sum(jnp.cos(hidden @ W2))


def saved_residuals(function, *args) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_saved_residuals(function, *args)
    return out.getvalue()


def residuals_from_layers(report: str) -> list[str]:
    """The residual lines computed inside ``layers`` (not arguments or constants)."""
    return [line for line in report.splitlines() if line.endswith("(layers)")]


def test_save_only_these_names_saves_the_named_residual():
    policy = jax.checkpoint_policies.save_only_these_names("hidden")
    report = saved_residuals(jax.checkpoint(layers, policy=policy), W1, X)
    [hidden] = residuals_from_layers(report)
    assert hidden.startswith("f32[2,3] "), report
    # Measured: "named 'hidden'" in jax 0.4.30, 0.10.2, 0.12.0.1; jax 0.6.2 saves the same value
    # but describes it as the "output of reduce_precision" that wraps it.
    assert "named 'hidden'" in hidden or "reduce_precision" in hidden, report
    assert residuals_from_layers(saved_residuals(jax.checkpoint(layers), W1, X)) == []


def test_dots_policy_saves_both_matmul_outputs():
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    report = saved_residuals(jax.checkpoint(layers, policy=policy), W1, X)
    assert sorted(line.split()[0] for line in residuals_from_layers(report)) == ["f32[2,2]", "f32[2,3]"], report
