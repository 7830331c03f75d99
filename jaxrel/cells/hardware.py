"""Which accelerators this machine has, as far as plugin cells care: NVIDIA GPUs (``nvidia-smi -L``).

Asked without loading CUDA into jaxrel's own process; no ``nvidia-smi`` or no GPU listed means none.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from functools import cache

from jaxrel._util import procs

__all__ = ["device_for", "devices_here", "nvidia_gpus"]


@cache
def nvidia_gpus() -> tuple[str, ...]:
    """The NVIDIA GPUs ``nvidia-smi -L`` lists ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: …)"); empty without any."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        done = procs.run([smi, "-L"], timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if done.returncode != 0:
        return ()
    return tuple(line.strip() for line in done.stdout.splitlines() if line.startswith("GPU "))


def device_for(distributions: Iterable[str]) -> str:
    """The device kind plugin ``distributions`` need, as :func:`devices_here` names it: ``"cuda"`` for jax's CUDA
    plugins; ``""`` for those this module cannot detect (ROCm, oneAPI, TPU)."""
    return "cuda" if any("cuda" in name for name in distributions) else ""


def devices_here() -> frozenset[str]:
    """The plugin device kinds present: ``{"cuda"}`` with an NVIDIA GPU, else empty."""
    return frozenset({"cuda"}) if nvidia_gpus() else frozenset()
