"""The extension's kernels against NumPy and against XLA's own fusion, on one platform's device.

Run as ``python -m jaxrel.extension.kernel_bench --platform cuda --size 8192`` in an environment with jax
and the extension's wheels; prints one JSON object. Correctness: forward and backward (eager, jit, vmap,
grad) against NumPy in float64, max absolute error. Speed: the median of timed runs of ``jax.jit`` of the
extension's forward and of ``x * rsqrt(mean(x*x) + eps)`` (which XLA fuses), then of their gradients,
each on a ``size × size`` float32 array placed on the device, after warm-up runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

__all__ = ["main", "measure"]

EPS = 1e-6


def _reference(x: Any) -> Any:
    import numpy as np

    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS)


def _reference_vjp(x: Any, dy: Any) -> Any:
    import numpy as np

    x, dy = x.astype(np.float64), dy.astype(np.float64)
    r = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + EPS)
    return r * dy - r**3 * x * (dy * x).mean(-1, keepdims=True)


def _median_ms(function: Any, argument: Any, runs: int) -> float:
    for _ in range(3):
        function(argument).block_until_ready()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function(argument).block_until_ready()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def measure(platform: str, size: int, runs: int = 20) -> dict[str, Any]:
    """Errors against NumPy and timings against XLA's fusion on ``platform``'s first device."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jaxrel_rmsnorm import platforms, rms_norm

    device = jax.devices(platform)[0]
    rng = np.random.default_rng(0)
    small = rng.standard_normal((64, 1000)).astype(np.float32)
    dy = rng.standard_normal(small.shape).astype(np.float32)
    on, dy_on = jax.device_put(small, device), jax.device_put(dy, device)
    batch = jax.device_put(np.stack([small, 2 * small - 1]), device)

    def error(result: Any, expected: Any) -> float:
        assert {d.platform for d in result.devices()} == {device.platform}
        return float(np.abs(np.asarray(result, np.float64) - expected).max())

    errors = {
        "eager": error(rms_norm(on, EPS), _reference(small)),
        "jit": error(jax.jit(rms_norm)(on), _reference(small)),
        "vmap": error(jax.vmap(rms_norm)(batch), np.stack([_reference(b) for b in np.asarray(batch)])),
        "grad": error(jax.grad(lambda v: (rms_norm(v, EPS) * dy_on).sum())(on), _reference_vjp(small, dy)),
    }

    def xla(v: Any) -> Any:
        return v * jax.lax.rsqrt(jnp.mean(v * v, axis=-1, keepdims=True) + EPS)

    big = jax.device_put(rng.standard_normal((size, size)).astype(np.float32), device)
    big_dy = jax.device_put(rng.standard_normal((size, size)).astype(np.float32), device)
    timed = {
        "forward": (jax.jit(lambda v: rms_norm(v, EPS)), jax.jit(xla)),
        "backward": (jax.jit(jax.grad(lambda v: (rms_norm(v, EPS) * big_dy).sum())),
                     jax.jit(jax.grad(lambda v: (xla(v) * big_dy).sum()))),
    }
    big_errors = {"forward": float(jnp.abs(timed["forward"][0](big) - timed["forward"][1](big)).max()),
                  "backward": float(jnp.abs(timed["backward"][0](big) - timed["backward"][1](big)).max())}
    timings = {}
    for name, (ours, theirs) in timed.items():
        kernel, fused = _median_ms(ours, big, runs), _median_ms(theirs, big, runs)
        timings[name] = {"extension_ms": round(kernel, 4), "xla_ms": round(fused, 4),
                         "ratio": round(kernel / fused, 3)}
    return {"platform": platform, "device": device.device_kind, "jax": jax.__version__,
            "registered": list(platforms()), "errors": errors, "size": size, "runs": runs,
            "errors_vs_xla_at_size": big_errors, "timings": timings}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", default="cuda")
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.platform, args.size, args.runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
