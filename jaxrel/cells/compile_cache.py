"""XLA's persistent compilation cache for a cell's compat suite, one directory per backend build.

The compat suite compiles about 140 small programs per cell, and on a 2-core machine XLA's
compile is about half the suite's time (jax 0.12.0, CPU: 4.6 of 7 s). The suite is the same from
run to run, and so is most of what it compiles. jax's own persistent cache (``jax_compilation_cache_dir``,
what users turn on in production) keeps each compiled executable under a key of the lowered
module, the compile options and flags, the devices, and the backend's version; a rerun then loads
the executable instead of compiling it again.

What still runs every time: every test, every trace and lowering by the frontend (the code under
test), and every execution. What a hit skips: XLA compiling a module byte-identical to one it
compiled before, in a backend with the same files, on a processor with the same features. jax's
key names the backend by its version string only, so the directory is keyed here by the sha256 of
every wheel on the backend's side (backend, plugins, extensions): a rebuilt jaxlib with an
unchanged version number, or a rebuilt extension, starts an empty cache (a backend installed by
name, without an index, is known by the version in the cell's id). XLA compiles CPU programs for
the processor it runs on, so the key holds that processor's features too: a work directory
restored on another machine (a CI cache) starts empty rather than running instructions the
processor lacks. The frontend and jaxrel are left out of the key: what the frontend changes
reaches XLA as a different module, hence a different key.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
from collections.abc import Mapping
from pathlib import Path

__all__ = ["KEEP", "cache_dir", "host_processor", "prune", "variables"]

KEEP = 32  # cache directories kept under WORKDIR/xla-cache, the most recently used first (each about 0.6 MB)


def host_processor() -> str:
    """This machine's processor as XLA's CPU compiler sees it: the architecture and the feature flags the kernel
    lists (``/proc/cpuinfo``), else the architecture alone."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            flags = next((line.split(":", 1)[1].strip() for line in handle
                          if line.split(":", 1)[0].strip() in ("flags", "Features")), "")
    except OSError:
        flags = ""
    return f"{platform.machine()} {flags}"


def cache_dir(workdir: Path, cell_id: str, wheels: Mapping[str, str], leave_out: set[str],
              processor: str | None = None) -> Path:
    """``WORKDIR/xla-cache/<cell>-<key>``: ``key`` digests the ``wheels`` (file name → sha256) except those named
    in ``leave_out`` (the frontend's and jaxrel's), and the ``processor`` (default :func:`host_processor`)."""
    identity = "\n".join([processor if processor is not None else host_processor(),
                          *(f"{name} {digest}" for name, digest in sorted(wheels.items()) if name not in leave_out)])
    return workdir / "xla-cache" / f"{cell_id}-{hashlib.sha256(identity.encode()).hexdigest()[:16]}"


def variables(directory: Path) -> dict[str, str]:
    """The environment that points jax's persistent cache at ``directory`` and caches every compile (by default
    jax keeps only those over a second, and none under a size that would leave these small programs out).

    jax versions without these settings ignore the variables, so an old backend's cell runs uncached."""
    directory.mkdir(parents=True, exist_ok=True)
    os.utime(directory)  # the newest use, for prune()
    return {"JAX_COMPILATION_CACHE_DIR": str(directory), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}


def prune(workdir: Path, keep: int = KEEP) -> None:
    """Remove all but the ``keep`` most recently used cache directories."""
    root = workdir / "xla-cache"
    found = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    for old in sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)[keep:]:
        shutil.rmtree(old, ignore_errors=True)
