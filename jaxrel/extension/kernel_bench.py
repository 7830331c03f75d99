"""The extension's kernels against NumPy and against XLA's own fusion, on one platform's device.

Run as ``python -m jaxrel.extension.kernel_bench --platform cuda --size 8192`` in an environment with jax
and the extension's wheels; prints one JSON object. Correctness: forward and backward (eager, jit, vmap,
grad) against NumPy in float64, max absolute error. Speed, on a ``size × size`` float32 array placed on the
device: ``jax.jit`` of the extension's forward against ``x * rsqrt(mean(x*x) + eps)`` (which XLA fuses), then
their gradients, beside the floor: an XLA elementwise computation that moves the least either could (forward:
read the array, write one; backward: read two, write one). Each run enqueues ``calls`` calls back to back and
waits for the last, so the time is the device's, not Python's dispatch; the three are run in turn, ``runs``
times, after warm-up, and the median run counts.
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


def _run_ms(function: Any, arguments: tuple[Any, ...], calls: int) -> float:
    """Milliseconds per call of ``calls`` calls enqueued back to back (only the last result is kept)."""
    start = time.perf_counter()
    for _ in range(calls):
        result = function(*arguments)
    result.block_until_ready()
    return (time.perf_counter() - start) * 1e3 / calls


def _runs_ms(contenders: dict[str, tuple[Any, tuple[Any, ...]]], runs: int, calls: int) -> dict[str, list[float]]:
    """Every run's time per call of each contender, the contenders taking turns within each run."""
    for function, arguments in contenders.values():
        for _ in range(3):
            function(*arguments).block_until_ready()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(runs):
        for name, (function, arguments) in contenders.items():
            times[name].append(_run_ms(function, arguments, calls))
    return times


def measure(platform: str, size: int, runs: int = 7, calls: int = 20) -> dict[str, Any]:
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
    array_bytes = size * size * 4
    timed = {  # name: (extension, XLA's fusion, the floor and its arguments, arrays the floor moves)
        "forward": (jax.jit(lambda v: rms_norm(v, EPS)), jax.jit(xla), jax.jit(lambda v: v * 2.0), (big,), 2),
        "backward": (jax.jit(jax.grad(lambda v: (rms_norm(v, EPS) * big_dy).sum())),
                     jax.jit(jax.grad(lambda v: (xla(v) * big_dy).sum())),
                     jax.jit(lambda v, g: v * 2.0 + g), (big, big_dy), 3),
    }
    big_errors = {name: float(jnp.abs(ours(big) - theirs(big)).max()) for name, (ours, theirs, *_) in timed.items()}
    timings = {}
    for name, (ours, theirs, floor, floor_arguments, arrays) in timed.items():
        times = _runs_ms({"extension": (ours, (big,)), "xla": (theirs, (big,)), "floor": (floor, floor_arguments)},
                         runs, calls)
        kernel, fused, least = (statistics.median(times[key]) for key in ("extension", "xla", "floor"))
        timings[name] = {"extension_ms": round(kernel, 4), "xla_ms": round(fused, 4), "ratio": round(kernel / fused, 3),
                         "floor_ms": round(least, 4), "floor_gb_per_s": round(arrays * array_bytes / least / 1e6, 1),
                         "runs_ms": {key: [round(t, 4) for t in value] for key, value in times.items()}}
    return {"platform": platform, "device": device.device_kind, "jax": jax.__version__,
            "registered": list(platforms()), "errors": errors, "size": size, "runs": runs, "calls": calls,
            "errors_vs_xla_at_size": big_errors, "timings": timings}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", default="cuda")
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20, help="calls enqueued back to back per run")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.platform, args.size, args.runs, args.calls)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
