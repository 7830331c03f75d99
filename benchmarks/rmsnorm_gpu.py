"""The extension's CUDA kernels against XLA's own fusion of the same RMS normalisation, side by side.

Run where jax sees an NVIDIA GPU and the extension's wheels are installed (the device check runs the same
measurement, ``scripts/device_check.sh``): ``python benchmarks/rmsnorm_gpu.py [--size 8192] [--runs 20]``.
Both computations are ``jax.jit``-ed, take the same ``size × size`` float32 array on the GPU, and are timed
in one process, taking turns with the floor (an XLA elementwise computation moving the fewest bytes either
could), by the median of ``runs`` runs of ``calls`` calls enqueued back to back (:mod:`jaxrel.extension.
kernel_bench`). Target: the extension at most 1.0× XLA's fusion, forward and backward. Without a GPU it
says so and exits 3.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jaxrel.extension.kernel_bench import measure  # noqa: E402

GOAL = 1.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    try:
        import jax

        jax.devices("cuda")
    except (ImportError, RuntimeError) as error:
        print(f"rmsnorm_gpu: no GPU jax can use here ({str(error).splitlines()[0][:100]})", file=sys.stderr)
        return 3
    result = measure("cuda", args.size, args.runs, args.calls)
    print(f"{result['device']}, jax {result['jax']}, {args.size}×{args.size} float32, "
          f"median of {args.runs} runs of {args.calls} calls")
    print(f"{'':10} {'extension':>12} {'XLA fusion':>12} {'ratio':>7} {'floor':>12} {'floor GB/s':>11}")
    for name, timing in result["timings"].items():
        verdict = "ok" if timing["ratio"] <= GOAL else f"over the {GOAL}× goal"
        print(f"{name:10} {timing['extension_ms']:>9.3f} ms {timing['xla_ms']:>9.3f} ms "
              f"{timing['ratio']:>6.2f}× {timing['floor_ms']:>9.3f} ms {timing['floor_gb_per_s']:>11.0f}  {verdict}")
    print("max error against NumPy: " + ", ".join(f"{k} {v:.1e}" for k, v in result["errors"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
