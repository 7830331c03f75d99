"""The compat suite's XLA cache directory: keyed by the backend's side of a cell, never by the frontend."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from jaxrel.cells import compile_cache

WHEELS = {"jax-0.12.0-py3-none-any.whl": "a" * 64, "jaxrel-1.0-py3-none-any.whl": "b" * 64,
          "jaxlib-0.12.0-cp312-cp312-manylinux_2_27_x86_64.whl": "c" * 64,
          "jaxrel_rmsnorm-0.1.0-cp311-abi3-manylinux_2_27_x86_64.whl": "d" * 64}
LEAVE_OUT = {"jax-0.12.0-py3-none-any.whl", "jaxrel-1.0-py3-none-any.whl"}


def test_the_key_follows_the_backend_side_and_ignores_the_frontend(tmp_path: Path) -> None:
    base = compile_cache.cache_dir(tmp_path, "py3.12-jaxlib0.12.0", WHEELS, LEAVE_OUT)
    assert base.parent == tmp_path / "xla-cache" and base.name.startswith("py3.12-jaxlib0.12.0-")
    frontend_changed = {**WHEELS, "jax-0.12.0-py3-none-any.whl": "e" * 64, "jaxrel-1.0-py3-none-any.whl": "f" * 64}
    assert compile_cache.cache_dir(tmp_path, "py3.12-jaxlib0.12.0", frontend_changed, LEAVE_OUT) == base
    for name in ("jaxlib-0.12.0-cp312-cp312-manylinux_2_27_x86_64.whl",
                 "jaxrel_rmsnorm-0.1.0-cp311-abi3-manylinux_2_27_x86_64.whl"):
        rebuilt = {**WHEELS, name: "0" * 64}  # the same file name and version, other bytes
        assert compile_cache.cache_dir(tmp_path, "py3.12-jaxlib0.12.0", rebuilt, LEAVE_OUT) != base, name
    plugin = {**WHEELS, "jax_cuda12_plugin-0.12.0-cp312-cp312-manylinux_2_27_x86_64.whl": "1" * 64}
    assert compile_cache.cache_dir(tmp_path, "py3.12-jaxlib0.12.0", plugin, LEAVE_OUT) != base
    assert compile_cache.cache_dir(tmp_path, "py3.13-jaxlib0.12.0", WHEELS, LEAVE_OUT) != base
    here = compile_cache.host_processor()
    assert here.split()[0] == platform.machine()
    assert compile_cache.cache_dir(tmp_path, "py3.12-jaxlib0.12.0", WHEELS, LEAVE_OUT, processor=here) == base
    other = compile_cache.cache_dir(tmp_path, "py3.12-jaxlib0.12.0", WHEELS, LEAVE_OUT, processor=here + " avx512f")
    assert other != base, "another processor's features: another cache (XLA compiles CPU code for the host)"


def test_the_variables_cache_every_compile_and_prune_keeps_the_newest(tmp_path: Path) -> None:
    made = []
    for number in range(5):
        directory = compile_cache.cache_dir(tmp_path, f"cell{number}", WHEELS, LEAVE_OUT)
        found = compile_cache.variables(directory)
        assert found["JAX_COMPILATION_CACHE_DIR"] == str(directory) and directory.is_dir()
        assert found["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
        assert found["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] == "-1"  # jax: -1 lifts the size floor
        os.utime(directory, (1_000_000 + number, 1_000_000 + number))
        made.append(directory)
    compile_cache.variables(made[0])  # used again now: the newest
    compile_cache.prune(tmp_path, keep=2)
    assert sorted(p.name for p in (tmp_path / "xla-cache").iterdir()) == sorted([made[0].name, made[4].name])
    compile_cache.prune(tmp_path / "nowhere")  # no cache yet: nothing to do
